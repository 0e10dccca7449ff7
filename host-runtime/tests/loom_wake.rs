//! Loom model (v) of the wake-up path: AXLE_Interrupt in the wall-clock mode, where a host
//! thread that waits for interrupts and a device thread that writes the ring and then raises
//! them run concurrently over the same memory. It checks that no wake-up is lost (the host
//! never sleeps while an interrupt it has not handled is on its way, and is never declared
//! asleep for good while one is) and that no record is left unseen (every interrupt's handler
//! finds every record the interrupt announces, and the host takes every record).
//!
//! What runs is ours wherever it can be:
//!
//! - the host thread is the real `cosim_link::wall::serve_host_with`, the loop of every
//!   wall-clock host (`axle run W --clock wall`, in-process or attached): it delivers every
//!   response that arrived, takes a turn (the check), sends the turn, which carries the count
//!   of responses taken, when it waits for a response (the arming), and sleeps in a receive on
//!   the channel (which latches a response sent after the check: the re-check after arming);
//! - its agent stands for `host_runtime::Runtime` in AXLE_Interrupt (`modes::axle_irq`): each
//!   interrupt's handler is the real `AxleRing::poll` with the tail the interrupt announces as
//!   its limit (what `Poller::poll` calls), then `take_record` and `consume`, as
//!   `Poller::poll_done` and the tasks do; it waits for a response while records are due;
//! - the ring is the real `AxleRing` over `cosim_link::phys::PhysicalMemory` (loom atomics
//!   through `cosim_link::sync`), programmed as the driver does;
//! - the device thread stands for the emulator's `Emulator::run_wall` (the emulator does not
//!   build under loom): it takes the host's turns through the real `DevicePort`, runs its
//!   events one at a time (each a record's DMA writes, D3 then D4 with Release, then the
//!   interrupt announcing the new metadata tail, posted behind the writes as
//!   `Hardware::raise_interrupt` posts it), and judges a host that armed with the real
//!   `cosim_link::wall::HostWait`, as `run_wall` does: a host that waits for a response,
//!   having taken every response sent, with no device event left, is a deadlock.
//!
//! The channels are `cosim_link::sync::mpsc`, which under `--cfg loom` is a model of
//! `std::sync::mpsc` (a queue under a lock and a condition variable: a send queues and wakes,
//! a receive takes at once or sleeps until a send, re-checking the queue each time it wakes).
//! A receive with a deadline never times out in the model: a host or device whose wait only a
//! deadline would end (a lost wake-up: in a real run, a wait until the next poll or the run's
//! limit) is a state where both threads sleep, which loom reports as a deadlock.
//!
//! The attached form carries the same channels over the session's socket
//! (`cosim_link::wall_socket`); its eventfd is a counter the emulator adds one to per
//! interrupt after the frame that carries it, and the host's reader thread takes it (read
//! and reset) when `poll` finds it non-zero, and once more after the emulator's outcome, so
//! it counts every interrupt. The host never sleeps on the eventfd: the interrupt reaches the
//! runtime as a response on the channel, which is what this model runs.
//!
//! Broken twins, each rejected with the model's own assertion:
//!
//! - the device judges the host asleep for good from its arming alone (a turn that waits for
//!   a response), without the re-check that the host had taken every response sent: an
//!   interrupt that crossed the host's turn is taken for a lost one, and the run ends in a
//!   false deadlock;
//! - the device raises the interrupt before it publishes the metadata tail (a signal before
//!   the write): the handler finds fewer records than the interrupt announces.
//!
//! Run with the other models:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release -p host-runtime --test loom_wake
//! ```
#![cfg(loom)]

use cosim_link::link::{DeviceLink, HostAgent, LinkCall, LinkResponse, Wake};
use cosim_link::phys::PhysicalMemory;
use cosim_link::sync::{Arc, Ordering};
use cosim_link::wall::{
    ports, serve_host_with, DevicePort, HostOptions, HostTurn, HostWait, TurnEncoder, WallClock,
};
use host_driver::dma::DmaRegion;
use host_driver::frames::{FrameAllocator, FRAME_SIZE};
use host_runtime::modes::axle::AxleRing;
use shared_abi::control::METADATA_TAIL_OFFSET;
use shared_abi::region::RingLayout;
use shared_abi::{HostPhysAddr, MetadataRecord, Ticks};
use std::time::{Duration, Instant};

/// Records (and interrupts) per run of the model.
const RECORDS: u64 = 2;
/// Bytes per payload slot.
const SLOT_SIZE: u32 = 16;
/// Frames of physical memory (frame 0 is reserved).
const MEMORY_FRAMES: u64 = 5;
/// Marker in every assertion message of the model, so the twin tests can tell a model failure
/// from a loom limit.
const VIOLATION: &str = "PROTOCOL VIOLATION";

thread_local! {
    /// Executions loom ran of the current test's model.
    static EXECUTIONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How the device thread runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Device {
    /// As the emulator does.
    Correct,
    /// Twin: a host whose last turn waits for a response is judged asleep for good, without
    /// the re-check of the responses it had taken.
    JudgeWithoutRecheck,
    /// Twin: each interrupt is raised before the metadata tail it announces is stored.
    SignalBeforeTail,
}

/// The 32 bytes of record `sequence`, naming payload slot `sequence % 2`.
fn record_bytes(sequence: u64) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(32);
    bytes.extend_from_slice(&sequence.to_le_bytes());
    bytes.extend_from_slice(&(sequence * u64::from(SLOT_SIZE)).to_le_bytes()); // result_offset
    bytes.extend_from_slice(&((sequence % 2) as u32).to_le_bytes()); // payload_slot
    bytes.extend_from_slice(&SLOT_SIZE.to_le_bytes()); // length
    bytes.extend_from_slice(&1u32.to_le_bytes()); // tag
    bytes.extend_from_slice(&0u32.to_le_bytes()); // flags
    assert_eq!(bytes.len(), std::mem::size_of::<MetadataRecord>());
    bytes
}

/// The host physical addresses the device's DMA writes to.
struct Targets {
    memory: Arc<PhysicalMemory>,
    records: Vec<HostPhysAddr>,
    metadata_tail: HostPhysAddr,
}

/// A ring of two records and two payload slots in fresh memory, programmed as the driver
/// does, and the addresses the device writes.
fn setup() -> (AxleRing, Targets) {
    let layout = RingLayout::new(2, 2, SLOT_SIZE).unwrap();
    let memory = Arc::new(PhysicalMemory::new(MEMORY_FRAMES * FRAME_SIZE).unwrap());
    let mut allocator = FrameAllocator::new(memory.len());
    let region =
        DmaRegion::allocate(Arc::clone(&memory), &mut allocator, layout.region_length()).unwrap();
    let ring = AxleRing::new(region, layout, 1).unwrap();
    let region = ring.region();
    let records = (0..RECORDS)
        .map(|index| {
            region
                .translate(layout.metadata_slot_offset(index), 32)
                .unwrap()
        })
        .collect();
    let metadata_tail = region.translate(METADATA_TAIL_OFFSET, 8).unwrap();
    (
        ring,
        Targets {
            memory,
            records,
            metadata_tail,
        },
    )
}

/// The host: `host_runtime::Runtime` in AXLE_Interrupt, reduced to its interrupt handler.
struct Handler {
    ring: AxleRing,
    /// The tails announced by interrupts delivered and not yet handled.
    announced: Vec<u64>,
    /// Records taken (and their slots released).
    taken: u64,
}

impl HostAgent for Handler {
    fn deliver(&mut self, _at: Ticks, response: LinkResponse) {
        match response {
            LinkResponse::Interrupt { message } => self.announced.push(message),
            other => panic!("{VIOLATION}: the host got {other:?}"),
        }
    }

    fn turn(&mut self, _now: Ticks, _link: &mut dyn DeviceLink) -> Wake {
        for limit in std::mem::take(&mut self.announced) {
            // The handler: one poll with the interrupt's tail as its limit (`Poller::poll`).
            let batch = self
                .ring
                .poll(Some(limit))
                .unwrap_or_else(|error| panic!("{VIOLATION}: the handler's poll: {error}"));
            assert!(
                batch.end >= limit,
                "{VIOLATION}: the interrupt announced tail {limit}, its handler found records only up to {}",
                batch.end
            );
            // The batch reaches the scheduler and the tasks release its slots
            // (`Poller::poll_done`, `Stream::consume`).
            while let Some(batch) = self.ring.pool().pop() {
                for index in batch {
                    let (record, payload) = self
                        .ring
                        .take_record(index)
                        .unwrap_or_else(|error| panic!("{VIOLATION}: record {index}: {error}"));
                    assert_eq!(
                        record.sequence, self.taken,
                        "{VIOLATION}: records out of order"
                    );
                    self.ring
                        .consume(payload)
                        .unwrap_or_else(|error| panic!("{VIOLATION}: consume {payload}: {error}"));
                    self.taken += 1;
                }
            }
        }
        if self.taken == RECORDS {
            Wake::Done
        } else {
            Wake::OnResponse
        }
    }
}

/// The model host's turn encoding: its wake only (the model's host makes no link call).
#[derive(Debug, Default)]
struct WakeOnly;

impl DeviceLink for WakeOnly {
    fn call(&mut self, _: LinkCall<'_>) {
        unreachable!("the model's host makes no link call")
    }
}

impl TurnEncoder for WakeOnly {
    fn has_calls(&self) -> bool {
        false
    }
    fn finish(&mut self, wake: Wake) -> Vec<u8> {
        match wake {
            Wake::At(at) => [0u8].into_iter().chain(at.0.to_le_bytes()).collect(),
            Wake::OnResponse => vec![1],
            Wake::Done => vec![2],
        }
    }
}

fn decode_wake(message: &[u8]) -> Wake {
    match message {
        [1] => Wake::OnResponse,
        [2] => Wake::Done,
        [0, at @ ..] => Wake::At(Ticks(u64::from_le_bytes(at.try_into().unwrap()))),
        other => panic!("undecodable wake {other:?}"),
    }
}

/// How the device thread ended.
#[derive(Debug, PartialEq, Eq)]
enum DeviceEnd {
    /// The host said it was done.
    HostDone,
    /// The device judged the host asleep for good.
    Deadlock,
}

/// The device thread: `Emulator::run_wall` with one record per event.
fn device(port: &DevicePort, targets: &Targets, variant: Device) -> DeviceEnd {
    let mut host = HostWait::new();
    let mut next = 0u64;
    let mut arrived: Option<HostTurn> = None;
    let far = Instant::now() + Duration::from_secs(3600);
    loop {
        // The host's turns, in order.
        loop {
            let turn = match arrived.take() {
                Some(turn) => turn,
                None => match port.try_take() {
                    Ok(Some(turn)) => turn,
                    Ok(None) => break,
                    Err(error) => panic!("{VIOLATION}: the device lost the host: {error}"),
                },
            };
            let wake = decode_wake(&turn.message);
            host.took_turn(&turn, wake);
            if wake == Wake::Done {
                return DeviceEnd::HostDone;
            }
        }
        // The next event: a record's DMA writes (D3, D4) and its interrupt, posted behind them.
        if next < RECORDS {
            let memory = &targets.memory;
            memory
                .write_words(targets.records[next as usize], &record_bytes(next))
                .unwrap();
            let raise = |host: &mut HostWait| {
                let interrupt = LinkResponse::Interrupt { message: next + 1 };
                port.respond(Ticks(next), interrupt).unwrap();
                host.responded();
            };
            if variant == Device::SignalBeforeTail {
                raise(&mut host);
            }
            memory
                .store_u64(targets.metadata_tail, next + 1, Ordering::Release)
                .unwrap();
            if variant != Device::SignalBeforeTail {
                raise(&mut host);
            }
            next += 1;
        }
        let idle = next == RECORDS;
        let asleep = match variant {
            Device::JudgeWithoutRecheck => idle && host.wake() == Wake::OnResponse,
            _ => host.asleep_for_good(idle),
        };
        if asleep {
            port.end(format!("deadlock after {} interrupts", host.sent()));
            return DeviceEnd::Deadlock;
        }
        if idle {
            // No event left: sleep until a host turn.
            arrived = match port.wait(far) {
                Ok(turn) => turn,
                Err(error) => panic!("{VIOLATION}: the device lost the host: {error}"),
            };
        }
    }
}

/// One run: the device thread against the real wall-clock host loop.
fn wake_up(variant: Device) {
    let (ring, targets) = setup();
    let (host_port, device_port) = ports();
    let device = loom::thread::spawn(move || device(&device_port, &targets, variant));
    let mut handler = Handler {
        ring,
        announced: Vec::new(),
        taken: 0,
    };
    let options = HostOptions {
        limit: Ticks::from_ns(3_600_000_000_000),
        turn_jitter: None,
    };
    let clock = WallClock::start();
    let outcome = serve_host_with(&mut handler, host_port, &clock, options, &mut WakeOnly);
    let device_end = device.join().unwrap();
    if let Err(error) = &outcome {
        panic!("{VIOLATION}: the host thread ended with: {error} ({device_end:?})");
    }
    assert_eq!(
        device_end,
        DeviceEnd::HostDone,
        "{VIOLATION}: the device did not see the host finish"
    );
    assert_eq!(
        handler.taken, RECORDS,
        "{VIOLATION}: the host finished with records unseen"
    );
    assert_eq!(
        handler.ring.held_slots(),
        0,
        "{VIOLATION}: the host left slots held"
    );
}

/// Preemptions per execution: the model's two threads take some 40 loom steps each (the
/// channels' locks and condition variable, the ring's words), beyond exhaustive exploration
/// (unbounded, it ran for over ten minutes without finishing); loom's documentation
/// recommends a bound of 2 or 3, which finds most bugs (CHESS, Musuvathi and Qadeer, PLDI
/// 2007). The model takes one more: 7,572 executions in about 5 s (2 explores 188, 3 1,388).
const PREEMPTION_BOUND: usize = 4;

/// Runs `model` under loom with [`PREEMPTION_BOUND`] and returns the executions explored.
fn check(model: fn()) -> usize {
    EXECUTIONS.set(0);
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(PREEMPTION_BOUND);
    builder.check(move || {
        EXECUTIONS.set(EXECUTIONS.get() + 1);
        model();
    });
    EXECUTIONS.get()
}

/// Runs a broken twin and returns loom's panic message; fails if loom accepted it.
fn rejection_message(model: fn()) -> String {
    let result = std::panic::catch_unwind(|| check(model));
    let payload = match result {
        Ok(executions) => panic!("loom accepted a broken twin after {executions} executions"),
        Err(payload) => payload,
    };
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn model_v_no_interrupt_is_lost_and_no_record_left_unseen() {
    let executions = check(|| wake_up(Device::Correct));
    eprintln!("model (v): {executions} executions explored");
    assert!(executions > 1);
}

#[test]
fn model_v_twin_judging_the_armed_host_without_the_recheck_is_rejected() {
    let message = rejection_message(|| wake_up(Device::JudgeWithoutRecheck));
    eprintln!(
        "model (v) twin (no re-check) rejected after {} executions: {message}",
        EXECUTIONS.get()
    );
    assert!(
        message.contains(VIOLATION) && message.contains("deadlock"),
        "rejected for another reason: {message}"
    );
}

#[test]
fn model_v_twin_interrupt_before_the_tail_is_rejected() {
    let message = rejection_message(|| wake_up(Device::SignalBeforeTail));
    eprintln!(
        "model (v) twin (signal before write) rejected after {} executions: {message}",
        EXECUTIONS.get()
    );
    assert!(
        message.contains(VIOLATION) && message.contains("found records only up to"),
        "rejected for another reason: {message}"
    );
}
