//! Device-side validation of everything the host writes, proven against the real emulator
//! (DESIGN.md section 5: "the device validates everything it reads from the host
//! (descriptors, heads beyond tails, SG entries out of range): a violation is an error status
//! and a BROKEN ring, never a panic or an out-of-bounds write").
//!
//! Each test builds a real ring with the host driver (`PhysicalMemory`, `FrameAllocator`,
//! `DmaRegion`, `shadow::program`), loads a small KNN data set into device
//! memory, and drives [`emulator::Emulator`] with a [`ScriptedHost`]: a list of steps, each run
//! at the host's turns until it says it is done, issuing link calls through the `DeviceLink` it
//! is given. Everything is virtual time and deterministic.
//!
//! It lives in the root package because it needs both the emulator and the host driver, which
//! do not depend on each other. Run: `cargo test --release --test device_validation`.

use cosim_link::link::{DeviceLink, HostAgent, LinkResponse, Wake};
use cosim_link::phys::PhysicalMemory;
use cosim_link::sync::{Arc, Ordering};
use emulator::{DeviceConfig, Emulator};
use firmware::kernels::knn::pack_shape;
use firmware::scratch::ScratchLayout;
use firmware::StreamingFactor;
use host_driver::dma::{DmaRegion, MappedRegion};
use host_driver::frames::{FrameAllocator, FRAME_SIZE};
use host_driver::shadow::{program, DeviceStore, STORE_SIZE};
use shared_abi::command::CommandFlags;
use shared_abi::control::{DEVICE_STATUS_OFFSET, METADATA_TAIL_OFFSET, PAYLOAD_TAIL_OFFSET};
use shared_abi::region::RingLayout;
use shared_abi::{
    device_map, mailbox, CommandDescriptor, DeviceAddress, FlowControlMessage, HostPhysAddr,
    KernelId, LaunchMode, ScatterGatherEntry, Status, Ticks,
};
use std::collections::VecDeque;
use zerocopy::IntoBytes;

/// Device memory of the tests (the firmware scratch area takes 32 MiB of it).
const DEVICE_MEMORY_MIB: u64 = 64;
/// Host physical memory: 64 frames.
const HOST_MEMORY: u64 = 64 * FRAME_SIZE;
/// Virtual-time bound of every run: far beyond what any script here needs.
const LIMIT: Ticks = Ticks::from_ns(20_000_000);
/// Vector length of the test data set (one full 16-lane vector).
const DIM: u32 = 16;
/// The epoch of every ring programmed here.
const EPOCH: u64 = 1;

// ----- the scripted host ---------------------------------------------------------------------

/// What a step sees at one host turn.
struct Turn<'a> {
    now: Ticks,
    link: &'a mut dyn DeviceLink,
    responses: &'a [(Ticks, LinkResponse)],
}

type Step<'s> = Box<dyn FnMut(&mut Turn<'_>) -> bool + 's>;

/// A host that runs its steps in order: each step is called at every host turn until it
/// returns `true`; the host then moves on to the next one at the same turn. With no step left,
/// the host is done.
struct ScriptedHost<'s> {
    steps: VecDeque<(&'static str, Step<'s>)>,
    responses: Vec<(Ticks, LinkResponse)>,
    /// Time between turns while a step waits.
    poll: Ticks,
    /// The step that is waiting, and since when (for time-outs).
    waiting: Option<(&'static str, Ticks)>,
    /// Longest a step may wait.
    patience: Ticks,
}

impl<'s> ScriptedHost<'s> {
    fn new() -> Self {
        ScriptedHost {
            steps: VecDeque::new(),
            responses: Vec::new(),
            poll: Ticks::from_ns(50),
            waiting: None,
            patience: Ticks::from_ns(2_000_000),
        }
    }

    fn poll_every(mut self, interval: Ticks) -> Self {
        self.poll = interval;
        self
    }

    /// Adds a step.
    fn then(mut self, name: &'static str, step: impl FnMut(&mut Turn<'_>) -> bool + 's) -> Self {
        self.steps.push_back((name, Box::new(step)));
        self
    }

    /// Adds a step that does something once.
    fn once(self, name: &'static str, mut action: impl FnMut(&mut Turn<'_>) + 's) -> Self {
        self.then(name, move |turn| {
            action(turn);
            true
        })
    }

    /// Adds a step that sends the heads `metadata_head` and `payload_head` in one
    /// flow-control message.
    fn send_heads(self, name: &'static str, metadata_head: u64, payload_head: u64) -> Self {
        self.once(name, move |turn| {
            turn.link.mem_store(
                turn.now,
                device_map::FLOW_CONTROL,
                &flow_control(metadata_head, payload_head),
            )
        })
    }

    /// Adds a step that waits until `condition` holds.
    fn wait_until(self, name: &'static str, condition: impl FnMut(&Turn<'_>) -> bool + 's) -> Self {
        let mut condition = condition;
        self.then(name, move |turn| condition(turn))
    }

    /// Adds a step that waits `duration` of virtual time.
    fn pause(self, name: &'static str, duration: Ticks) -> Self {
        let mut until = None;
        self.then(name, move |turn| {
            let end = *until.get_or_insert(turn.now.plus(duration));
            turn.now >= end
        })
    }
}

impl HostAgent for ScriptedHost<'_> {
    fn deliver(&mut self, at: Ticks, response: LinkResponse) {
        self.responses.push((at, response));
    }

    fn turn(&mut self, now: Ticks, link: &mut dyn DeviceLink) -> Wake {
        while let Some((name, step)) = self.steps.front_mut() {
            let mut turn = Turn {
                now,
                link: &mut *link,
                responses: &self.responses,
            };
            if step(&mut turn) {
                self.steps.pop_front();
                self.waiting = None;
                continue;
            }
            let since = match self.waiting {
                Some((waiting, since)) if waiting == *name => since,
                _ => {
                    self.waiting = Some((name, now));
                    now
                }
            };
            assert!(
                now.since(since) <= self.patience,
                "scripted host: step `{name}` still waiting after {} ns",
                now.since(since).as_ns()
            );
            return Wake::At(now.plus(self.poll));
        }
        Wake::Done
    }
}

/// The `StoreDone` status of the synchronous store with `token`, if it came back.
fn store_done(responses: &[(Ticks, LinkResponse)], token: u64) -> Option<u32> {
    responses.iter().find_map(|(_, response)| match response {
        LinkResponse::StoreDone { token: t, status } if *t == token => Some(*status),
        _ => None,
    })
}

/// How many `StoreDone` responses carry `token`.
fn store_done_count(responses: &[(Ticks, LinkResponse)], token: u64) -> usize {
    responses
        .iter()
        .filter(|(_, response)| {
            matches!(response, LinkResponse::StoreDone { token: t, .. } if *t == token)
        })
        .count()
}

/// The value of the register read with `token`, if it came back.
fn io_read_done(responses: &[(Ticks, LinkResponse)], token: u64) -> Option<u64> {
    responses.iter().find_map(|(_, response)| match response {
        LinkResponse::IoReadDone { token: t, value } if *t == token => Some(*value),
        _ => None,
    })
}

// ----- the device, its data and the ring -----------------------------------------------------

fn device(memory: &Arc<PhysicalMemory>) -> Emulator {
    let config = DeviceConfig {
        device_memory_mib: DEVICE_MEMORY_MIB,
        ..DeviceConfig::default()
    };
    Emulator::new(
        config,
        Arc::clone(memory),
        // SF1: every payload is its own DMA request, so the rings fill one slot at a time.
        StreamingFactor::Bytes(32),
        true,
    )
}

fn host_memory() -> Arc<PhysicalMemory> {
    Arc::new(PhysicalMemory::new(HOST_MEMORY).expect("host memory"))
}

/// Loads a KNN data set of `rows` rows and `queries` queries into device memory (untimed
/// set-up) and returns the command that launches it (mode and tag left for the caller).
fn load_knn(device: &mut Emulator, rows: u32, queries: u32) -> CommandDescriptor {
    let floats = |count: u32, seed: u32| -> Vec<u8> {
        (0..count)
            .flat_map(|i| ((i.wrapping_mul(7).wrapping_add(seed) % 23) as f32 - 11.0).to_le_bytes())
            .collect()
    };
    let vector = u64::from(DIM) * 4;
    let database = device
        .allocate(vector * u64::from(rows), 64)
        .expect("database");
    device
        .write_untimed(database, &floats(rows * DIM, 1))
        .expect("database");
    let query = device
        .allocate(vector * u64::from(queries), 64)
        .expect("queries");
    device
        .write_untimed(query, &floats(queries * DIM, 5))
        .expect("queries");
    let result_length = u64::from(rows) * u64::from(queries) * 4;
    let result = device.allocate(result_length, 64).expect("result");
    CommandDescriptor {
        kernel: KernelId::KnnDistance as u32,
        mode: 0,
        tag: 0,
        flags: 0,
        result_address: result.0,
        result_length,
        args: [
            database.0,
            query.0,
            pack_shape(rows, DIM),
            u64::from(queries),
        ],
    }
}

fn with_mode(mut command: CommandDescriptor, mode: LaunchMode, tag: u32) -> CommandDescriptor {
    command.mode = mode as u32;
    command.tag = tag;
    command
}

/// One ring pair in a DMA region of `memory`, initialised as the driver does.
struct Ring {
    memory: Arc<PhysicalMemory>,
    region: MappedRegion,
    stores: Vec<DeviceStore>,
    layout: RingLayout,
}

impl Ring {
    fn new(memory: &Arc<PhysicalMemory>, metadata: u32, payload: u32, slot: u32) -> Ring {
        let layout = RingLayout::new(metadata, payload, slot).expect("layout");
        let mut frames = FrameAllocator::new(memory.len());
        let region = DmaRegion::allocate(Arc::clone(memory), &mut frames, layout.region_length())
            .expect("region");
        let programmed = program(region, &layout, EPOCH).expect("programmed region");
        Ring {
            memory: Arc::clone(memory),
            region: programmed.region,
            stores: programmed.stores,
            layout,
        }
    }

    /// The driver's stores that program the region.
    fn setup_stores(&self) -> Vec<DeviceStore> {
        self.stores.clone()
    }

    fn word(&self, offset: u64) -> u64 {
        self.region
            .load_u64(offset, Ordering::Acquire)
            .expect("control word")
    }

    fn metadata_tail(&self) -> u64 {
        self.word(METADATA_TAIL_OFFSET)
    }

    fn payload_tail(&self) -> u64 {
        self.word(PAYLOAD_TAIL_OFFSET)
    }

    /// The device status word (its low half; the high half is reserved).
    fn device_status(&self) -> u32 {
        (self.word(DEVICE_STATUS_OFFSET) & u64::from(u32::MAX)) as u32
    }

    /// Every frame of host memory outside the region: (its address, its bytes).
    fn outside_snapshot(&self) -> Vec<(u64, Vec<u8>)> {
        let mut image = vec![0u8; self.memory.len() as usize];
        self.memory
            .read_words(HostPhysAddr(0), &mut image)
            .expect("whole memory");
        image
            .chunks(FRAME_SIZE as usize)
            .enumerate()
            .map(|(frame, bytes)| (frame as u64 * FRAME_SIZE, bytes.to_vec()))
            .filter(|(address, _)| !self.region.frames().contains(&HostPhysAddr(*address)))
            .collect()
    }

    /// Asserts that no byte of host memory outside the region changed since `before`.
    fn assert_outside_unchanged(&self, before: &[(u64, Vec<u8>)]) {
        let after = self.outside_snapshot();
        let changed: Vec<String> = before
            .iter()
            .zip(&after)
            .filter(|(b, a)| b != a)
            .map(|((address, b), (_, a))| {
                let at = b.iter().zip(a).position(|(x, y)| x != y).unwrap_or(0);
                format!("{:#x}", address + at as u64)
            })
            .collect();
        assert!(
            changed.is_empty(),
            "host memory outside the DMA region changed, first changed byte of each frame: {}",
            changed.join(", ")
        );
    }

    /// Every byte of the region (control block, both rings).
    fn region_snapshot(&self) -> Vec<u8> {
        let mut bytes = vec![0u8; self.region.len() as usize];
        self.region.read_bytes(0, &mut bytes).expect("region");
        bytes
    }
}

/// Splits `bytes` at `address` into CXL.mem stores that never cross a 64-byte line.
fn line_stores(address: DeviceAddress, bytes: &[u8]) -> Vec<DeviceStore> {
    let mut stores = Vec::new();
    let mut position = address.0;
    let mut rest = bytes;
    while !rest.is_empty() {
        let take = rest
            .len()
            .min((STORE_SIZE - position % STORE_SIZE) as usize);
        let (piece, tail) = rest.split_at(take);
        stores.push((DeviceAddress(position), piece.to_vec()));
        position += take as u64;
        rest = tail;
    }
    stores
}

/// A flow-control message as the host stores it.
fn flow_control(metadata_head: u64, payload_head: u64) -> Vec<u8> {
    FlowControlMessage {
        metadata_head,
        payload_head,
    }
    .as_bytes()
    .to_vec()
}

/// A host that programs `stores`, then launches `command` with a posted store.
fn program_and_launch<'s>(
    stores: Vec<DeviceStore>,
    command: CommandDescriptor,
) -> ScriptedHost<'s> {
    ScriptedHost::new()
        .once("program the shadow descriptors", move |turn| {
            for (address, bytes) in &stores {
                turn.link.mem_store(turn.now, *address, bytes);
            }
        })
        .once("launch", move |turn| {
            turn.link
                .mem_store(turn.now, device_map::LAUNCH_WINDOW, command.as_bytes())
        })
}

fn run(device: &mut Emulator, host: &mut ScriptedHost<'_>) {
    if let Err(error) = device.run(host, LIMIT) {
        panic!("the co-simulation failed: {error}");
    }
}

// ----- flow control --------------------------------------------------------------------------

/// A ring of 4 records and 4 slots and a result of 8 slots: the device fills the ring, reads
/// the heads (D5) and waits for credit.
fn small_ring_and_long_result() -> (Arc<PhysicalMemory>, Ring, Emulator, CommandDescriptor) {
    let memory = host_memory();
    let ring = Ring::new(&memory, 4, 4, 32);
    let mut device = device(&memory);
    // 64 distances of 4 bytes: 8 slots of 32 bytes.
    let command = with_mode(load_knn(&mut device, 64, 1), LaunchMode::BackStreaming, 11);
    (memory, ring, device, command)
}

#[test]
fn flow_control_head_beyond_tail_latches_ring_broken_and_stops_streaming() {
    let (_memory, ring, mut device, command) = small_ring_and_long_result();
    let mut frozen = None;
    let mut host = program_and_launch(ring.setup_stores(), command)
        .wait_until("the ring fills", |_| ring.metadata_tail() == 4)
        .pause("the device waits for credit", Ticks::from_ns(5_000))
        .send_heads("heads beyond the tails", 9, 9)
        .wait_until("the device latches BROKEN", |_| ring.device_status() != 0)
        .once("snapshot", |_| frozen = Some(ring.region_snapshot()))
        // A valid message afterwards must not revive a BROKEN ring.
        .send_heads("valid heads after BROKEN", 4, 4)
        .pause("nothing more is streamed", Ticks::from_ns(50_000));
    run(&mut device, &mut host);
    drop(host);

    assert_eq!(ring.device_status(), Status::HeadBeyondTail.code());
    assert_eq!(device.firmware().broken(), Some(Status::HeadBeyondTail));
    assert_eq!(
        ring.metadata_tail(),
        4,
        "records streamed past the bad message"
    );
    assert_eq!(ring.payload_tail(), 4);
    assert_eq!(
        Some(ring.region_snapshot()),
        frozen,
        "the device wrote the region after latching BROKEN"
    );
    assert!(device.firmware().counters().head_reads > 0);
}

#[test]
fn flow_control_heads_moving_backwards_latch_ring_broken() {
    let (_memory, ring, mut device, command) = small_ring_and_long_result();
    let mut frozen = None;
    let mut host = program_and_launch(ring.setup_stores(), command)
        .wait_until("the ring fills", |_| ring.metadata_tail() == 4)
        .send_heads("two records consumed", 2, 2)
        .wait_until("the device adopts the heads and refills", |_| {
            ring.metadata_tail() == 6
        })
        .pause("the device waits for credit", Ticks::from_ns(5_000))
        .send_heads("heads move backwards", 1, 1)
        .wait_until("the device latches BROKEN", |_| ring.device_status() != 0)
        .once("snapshot", |_| frozen = Some(ring.region_snapshot()))
        .send_heads("valid heads after BROKEN", 6, 6)
        .pause("nothing more is streamed", Ticks::from_ns(50_000));
    run(&mut device, &mut host);
    drop(host);

    assert_eq!(ring.device_status(), Status::HeadBeyondTail.code());
    assert_eq!(device.firmware().broken(), Some(Status::HeadBeyondTail));
    assert_eq!(ring.metadata_tail(), 6);
    assert_eq!(ring.payload_tail(), 6);
    assert_eq!(Some(ring.region_snapshot()), frozen);
}

#[test]
fn flow_control_payload_head_alone_beyond_tail_latches_ring_broken() {
    let (_memory, ring, mut device, command) = small_ring_and_long_result();
    let mut host = program_and_launch(ring.setup_stores(), command)
        .wait_until("the ring fills", |_| ring.metadata_tail() == 4)
        .send_heads("payload head beyond its tail, metadata head fine", 4, 5)
        .wait_until("the device latches BROKEN", |_| ring.device_status() != 0)
        .pause("nothing more is streamed", Ticks::from_ns(20_000));
    run(&mut device, &mut host);
    drop(host);
    assert_eq!(ring.device_status(), Status::HeadBeyondTail.code());
    assert_eq!(ring.metadata_tail(), 4);
}

// ----- the shadow scatter-gather table -------------------------------------------------------

/// The stores that program `ring`'s shadow table with one scatter-gather entry per frame, the
/// payload ring's entry moved to `bad_address`: the descriptor cleared, the entries, the
/// descriptor.
fn shadow_stores_with_payload_entry_at(ring: &Ring, bad_address: u64) -> Vec<DeviceStore> {
    let payload_page = ring.layout.payload_offset() / FRAME_SIZE;
    let entries: Vec<ScatterGatherEntry> = ring
        .region
        .frames()
        .iter()
        .enumerate()
        .map(|(page, frame)| ScatterGatherEntry {
            host_phys: if page as u64 == payload_page {
                bad_address
            } else {
                frame.0
            },
            length: FRAME_SIZE,
        })
        .collect();
    let header = ring.layout.descriptor(EPOCH, entries.len() as u32);
    let mut stores = line_stores(
        device_map::SHADOW_DESCRIPTOR,
        shared_abi::ShadowRegionDescriptor::default().as_bytes(),
    );
    stores.extend(line_stores(device_map::SHADOW_ENTRIES, entries.as_bytes()));
    stores.extend(line_stores(
        device_map::SHADOW_DESCRIPTOR,
        header.as_bytes(),
    ));
    stores
}

/// Programs `ring` with one scatter-gather entry per frame, the payload ring's entries moved to
/// `bad_address`, launches `command`, and checks that the DMA fails with a translation fault,
/// the ring is BROKEN, and no byte of host memory outside the region changed.
fn payload_entry_at(bad_address: u64) {
    let memory = host_memory();
    let ring = Ring::new(&memory, 4, 4, 32);
    let mut device = device(&memory);
    let command = with_mode(load_knn(&mut device, 16, 1), LaunchMode::BackStreaming, 3);

    let stores = shadow_stores_with_payload_entry_at(&ring, bad_address);

    let before = ring.outside_snapshot();
    let mut host = program_and_launch(stores, command)
        .wait_until("the device latches BROKEN", |_| ring.device_status() != 0)
        .pause("nothing more is streamed", Ticks::from_ns(20_000));
    run(&mut device, &mut host);
    drop(host);

    assert_eq!(ring.device_status(), Status::TranslationFault.code());
    assert_eq!(device.firmware().broken(), Some(Status::TranslationFault));
    assert_eq!(ring.metadata_tail(), 0, "a record was published");
    assert_eq!(ring.payload_tail(), 0, "a payload was published");
    ring.assert_outside_unchanged(&before);
}

#[test]
fn shadow_entry_beyond_host_memory_faults_the_dma_and_breaks_the_ring() {
    payload_entry_at(HOST_MEMORY + 16 * FRAME_SIZE);
}

#[test]
fn shadow_entry_straddling_the_end_of_host_memory_writes_nothing() {
    // The first 16 bytes of the entry are host memory, the rest is not: the 32-byte payload
    // write at its start crosses the end, and nothing of the request may land.
    payload_entry_at(HOST_MEMORY - 16);
}

#[test]
fn shadow_entry_far_beyond_host_memory_faults_the_dma_and_breaks_the_ring() {
    // Near the top of the address space, yet without wrapping (a wrapping entry is refused when
    // the table is loaded, see below).
    payload_entry_at(u64::MAX - 2 * FRAME_SIZE + 1);
}

#[test]
fn shadow_table_with_an_entry_wrapping_the_address_space_is_refused_and_nothing_is_written() {
    // The table itself is malformed (`ShadowRegion::load` refuses it), so the device has no
    // trusted translation at all: it cannot write the status word either. What must hold: no
    // panic, the launch refused, and not one byte of host memory written.
    let memory = host_memory();
    let ring = Ring::new(&memory, 4, 4, 32);
    let mut device = device(&memory);
    let command = with_mode(load_knn(&mut device, 16, 1), LaunchMode::BackStreaming, 3);
    let stores = shadow_stores_with_payload_entry_at(&ring, u64::MAX - FRAME_SIZE + 1);
    let region_before = ring.region_snapshot();
    let outside_before = ring.outside_snapshot();
    let mut host = program_and_launch(stores, command).pause("the device", Ticks::from_ns(50_000));
    run(&mut device, &mut host);
    drop(host);
    assert_eq!(
        device.firmware().broken(),
        Some(Status::MalformedDescriptor)
    );
    assert_eq!(device.firmware().counters().launches, 0);
    assert!(
        ring.region_snapshot() == region_before,
        "the region was written"
    );
    ring.assert_outside_unchanged(&outside_before);
}

// ----- launches on the three paths -----------------------------------------------------------

/// Issues `bytes` as one synchronous store into the launch window (a BS launch); returns its
/// `StoreDone` status, after checking that exactly one response came back.
fn bs_status(device: &mut Emulator, bytes: Vec<u8>) -> u32 {
    let mut status = None;
    let mut host = ScriptedHost::new()
        .once("BS launch", |turn| {
            turn.link
                .mem_store_synchronous(turn.now, device_map::LAUNCH_WINDOW, &bytes, 1)
        })
        .wait_until("the store's response", |turn| {
            status = store_done(turn.responses, 1);
            status.is_some()
        })
        .pause("anything else the device sends", Ticks::from_ns(20_000));
    run(device, &mut host);
    assert_eq!(
        store_done_count(&host.responses, 1),
        1,
        "one response per store"
    );
    drop(host);
    status.expect("a response")
}

/// RP: stores the descriptor, rings the doorbell with `doorbell`, polls STATUS until COMPLETE;
/// returns (STATUS, COMPLETION_CODE, COMPLETION_TAG) and checks that dequeue returns the
/// mailbox to idle.
fn rp_registers(
    device: &mut Emulator,
    command: CommandDescriptor,
    doorbell: u64,
) -> (u64, u64, u64) {
    let mut token = 100;
    let mut polling = None;
    let mut status = None;
    let mut code = None;
    let mut tag = None;
    let mut idle = None;
    let mut host = ScriptedHost::new()
        .poll_every(Ticks::from_ns(1_000))
        .once("store the descriptor", |turn| {
            turn.link.mem_store_synchronous(
                turn.now,
                device_map::RP_DESCRIPTOR,
                command.as_bytes(),
                1,
            )
        })
        .wait_until("the store's response", |turn| {
            store_done(turn.responses, 1) == Some(0)
        })
        .once("ring the doorbell", |turn| {
            turn.link.io_write(turn.now, mailbox::DOORBELL, doorbell)
        })
        .then("poll STATUS until COMPLETE", |turn| {
            if let Some(outstanding) = polling {
                match io_read_done(turn.responses, outstanding) {
                    None => return false,
                    Some(value) if value & 0xffff_ffff == mailbox::status::COMPLETE => {
                        status = Some(value);
                        return true;
                    }
                    Some(_) => {}
                }
            }
            // One read in flight at a time, one per remote polling interval.
            turn.link.io_read(turn.now, mailbox::STATUS, token);
            polling = Some(token);
            token += 1;
            false
        })
        .once("read the code and tag", |turn| {
            turn.link.io_read(turn.now, mailbox::COMPLETION_CODE, 1001);
            turn.link.io_read(turn.now, mailbox::COMPLETION_TAG, 1002);
        })
        .wait_until("code and tag", |turn| {
            code = io_read_done(turn.responses, 1001);
            tag = io_read_done(turn.responses, 1002);
            code.is_some() && tag.is_some()
        })
        .once("dequeue", |turn| {
            turn.link.io_write(turn.now, mailbox::DEQUEUE, 1)
        })
        .pause("the firmware handles the dequeue", Ticks::from_ns(5_000))
        .once("read STATUS", |turn| {
            turn.link.io_read(turn.now, mailbox::STATUS, 2001)
        })
        .wait_until("STATUS", |turn| {
            idle = io_read_done(turn.responses, 2001);
            idle.is_some()
        });
    run(device, &mut host);
    drop(host);
    assert_eq!(
        idle,
        Some(mailbox::status::IDLE),
        "dequeue returns the mailbox to idle"
    );
    (
        status.expect("COMPLETE"),
        code.expect("code"),
        tag.expect("tag"),
    )
}

/// AXLE: a fresh device and ring; `build` loads the data and returns the command, which is
/// launched with a posted store after the ring is programmed. Returns the device status word
/// once it is set, the tails, and the firmware's BROKEN status.
fn axle_status(
    build: impl FnOnce(&mut Emulator) -> CommandDescriptor,
) -> (u32, u64, u64, Option<Status>) {
    let memory = host_memory();
    let ring = Ring::new(&memory, 16, 16, 32);
    let mut device = device(&memory);
    let command = build(&mut device);
    let mut host = program_and_launch(ring.setup_stores(), command)
        .wait_until("the device latches BROKEN", |_| ring.device_status() != 0)
        .pause("nothing more is streamed", Ticks::from_ns(20_000));
    run(&mut device, &mut host);
    drop(host);
    (
        ring.device_status(),
        ring.metadata_tail(),
        ring.payload_tail(),
        device.firmware().broken(),
    )
}

fn unknown_kernel(device: &mut Emulator, mode: LaunchMode, tag: u32) -> CommandDescriptor {
    let mut command = with_mode(load_knn(device, 16, 1), mode, tag);
    command.kernel = 0xdead;
    command
}

/// Commands that are malformed on every path: variants of the valid `good`.
fn malformed_variants(good: CommandDescriptor) -> Vec<(&'static str, CommandDescriptor, Status)> {
    let mut unknown_flag = good;
    unknown_flag.flags = 1 << 9;
    let mut interrupt_and_unknown = good;
    interrupt_and_unknown.flags = CommandFlags::INTERRUPT.bits() | 1 << 31;
    let mut result_outside = good;
    result_outside.result_address = DEVICE_MEMORY_MIB << 20;
    let mut result_wrapping = good;
    result_wrapping.result_address = u64::MAX - 31;
    let mut short_result = good;
    short_result.result_length -= 4;
    let mut dim_not_lanes = good;
    dim_not_lanes.args[2] = pack_shape(16, 12);
    let mut zero_rows = good;
    zero_rows.args[2] = pack_shape(0, DIM);
    let mut result_over_input = good;
    result_over_input.result_address = good.args[0];
    let mut misaligned = good;
    misaligned.args[1] += 2;
    let mut database_outside = good;
    database_outside.args[0] = (DEVICE_MEMORY_MIB << 20) - 64;
    vec![
        (
            "unknown flag bit",
            unknown_flag,
            Status::MalformedDescriptor,
        ),
        (
            "unknown flag bit with INTERRUPT",
            interrupt_and_unknown,
            Status::MalformedDescriptor,
        ),
        (
            "result beyond device memory",
            result_outside,
            Status::ArgumentOutOfRange,
        ),
        (
            "result range wrapping around",
            result_wrapping,
            Status::ArgumentOutOfRange,
        ),
        (
            "result length not rows x queries x 4",
            short_result,
            Status::ArgumentOutOfRange,
        ),
        (
            "dim not a multiple of the lanes",
            dim_not_lanes,
            Status::ArgumentOutOfRange,
        ),
        ("zero rows", zero_rows, Status::ArgumentOutOfRange),
        (
            "result overlapping an input",
            result_over_input,
            Status::ArgumentOutOfRange,
        ),
        (
            "misaligned query address",
            misaligned,
            Status::ArgumentOutOfRange,
        ),
        (
            "database running past device memory",
            database_outside,
            Status::ArgumentOutOfRange,
        ),
    ]
}

#[test]
fn bs_unknown_kernel_is_answered_with_its_status() {
    let memory = host_memory();
    let mut device = device(&memory);
    let command = unknown_kernel(&mut device, LaunchMode::BulkSynchronous, 5);
    let status = bs_status(&mut device, command.as_bytes().to_vec());
    assert_eq!(status, Status::UnknownKernel.code());
    assert_eq!(device.firmware().counters().launches, 0);
}

#[test]
fn bs_malformed_descriptors_are_answered_with_their_status() {
    let memory = host_memory();
    let mut device = device(&memory);
    let good = with_mode(
        load_knn(&mut device, 16, 1),
        LaunchMode::BulkSynchronous,
        21,
    );
    let mut cases = malformed_variants(good);
    let mut interrupt = good;
    interrupt.flags = CommandFlags::INTERRUPT.bits();
    cases.push((
        "INTERRUPT outside AXLE",
        interrupt,
        Status::MalformedDescriptor,
    ));
    let mut unknown_mode = good;
    unknown_mode.mode = 77;
    cases.push(("unknown mode", unknown_mode, Status::MalformedDescriptor));
    let mut rp_mode = good;
    rp_mode.mode = LaunchMode::RemotePolling as u32;
    cases.push((
        "RP mode in the launch window",
        rp_mode,
        Status::MalformedDescriptor,
    ));
    for (what, command, expected) in cases {
        let status = bs_status(&mut device, command.as_bytes().to_vec());
        assert_eq!(status, expected.code(), "{what}");
    }
    assert_eq!(device.firmware().counters().launches, 0);
    // The device still works.
    assert_eq!(bs_status(&mut device, good.as_bytes().to_vec()), 0);
}

#[test]
fn launch_store_of_the_wrong_length_is_answered_malformed() {
    let memory = host_memory();
    let mut device = device(&memory);
    let good = with_mode(load_knn(&mut device, 16, 1), LaunchMode::BulkSynchronous, 8);
    let bytes = good.as_bytes().to_vec();
    for length in [0usize, 8, 32, 63, 65, 128] {
        let mut store = bytes.clone();
        store.resize(length, 0xa5);
        let status = bs_status(&mut device, store);
        assert_eq!(
            status,
            Status::MalformedDescriptor.code(),
            "launch store of {length} bytes"
        );
    }
    assert_eq!(device.firmware().counters().launches, 0);
    assert_eq!(bs_status(&mut device, bytes), 0, "the device still works");
}

#[test]
fn rp_unknown_kernel_completes_with_its_code_in_the_status_register() {
    let memory = host_memory();
    let mut device = device(&memory);
    let command = unknown_kernel(&mut device, LaunchMode::RemotePolling, 6);
    let (status, code, tag) = rp_registers(&mut device, command, device_map::RP_DESCRIPTOR.0);
    assert_eq!(status & 0xffff_ffff, mailbox::status::COMPLETE);
    assert_eq!(status >> 32, u64::from(Status::UnknownKernel.code()));
    assert_eq!(code, u64::from(Status::UnknownKernel.code()));
    assert_eq!(tag, 6);
}

/// The register page an attached host maps mirrors the mailbox: through the mapping it reads
/// what its timed CXL.io reads returned.
#[test]
fn the_register_window_mirrors_the_mailbox_the_link_reads() {
    let memory = host_memory();
    let mut device = device(&memory);
    let page_fd = device
        .serve_registers()
        .expect("register page")
        .fd()
        .expect("shared")
        .try_clone_to_owned()
        .expect("dup");
    let window = host_driver::registers::RegisterWindow::new(
        host_driver::mmio::DeviceWindow::map(
            std::os::fd::AsFd::as_fd(&page_fd),
            shared_abi::registers::WINDOW_BYTES,
        )
        .expect("mapping"),
    )
    .expect("a whole page");
    assert_eq!(window.mailbox(mailbox::STATUS), Ok(mailbox::status::IDLE));
    let command = unknown_kernel(&mut device, LaunchMode::RemotePolling, 9);
    let (status, code, tag) = rp_registers(&mut device, command, device_map::RP_DESCRIPTOR.0);
    assert_eq!(status & 0xffff_ffff, mailbox::status::COMPLETE);
    // The host dequeued after its read: the mailbox is idle again, the completion stays.
    assert_eq!(window.mailbox(mailbox::STATUS), Ok(mailbox::status::IDLE));
    assert_eq!(window.mailbox(mailbox::COMPLETION_CODE), Ok(code));
    assert_eq!(window.mailbox(mailbox::COMPLETION_TAG), Ok(tag));
    assert_eq!(tag, 9);
}

#[test]
fn rp_malformed_descriptors_complete_with_their_code_in_the_status_register() {
    let memory = host_memory();
    let mut device = device(&memory);
    let good = with_mode(load_knn(&mut device, 16, 1), LaunchMode::RemotePolling, 22);
    let mut cases = malformed_variants(good);
    let mut interrupt = good;
    interrupt.flags = CommandFlags::INTERRUPT.bits();
    cases.push((
        "INTERRUPT outside AXLE",
        interrupt,
        Status::MalformedDescriptor,
    ));
    let mut bs_mode = good;
    bs_mode.mode = LaunchMode::BulkSynchronous as u32;
    cases.push((
        "BS mode through the mailbox",
        bs_mode,
        Status::MalformedDescriptor,
    ));
    for (what, command, expected) in cases {
        let (status, code, _) = rp_registers(&mut device, command, device_map::RP_DESCRIPTOR.0);
        assert_eq!(status & 0xffff_ffff, mailbox::status::COMPLETE, "{what}");
        assert_eq!(status >> 32, u64::from(expected.code()), "{what}");
        assert_eq!(code, u64::from(expected.code()), "{what}");
    }
    assert_eq!(device.firmware().counters().launches, 0);
    // The mailbox still works.
    let (status, _, _) = rp_registers(&mut device, good, device_map::RP_DESCRIPTOR.0);
    assert_eq!(status, mailbox::status::COMPLETE);
}

#[test]
fn rp_doorbell_naming_an_address_outside_device_memory_completes_with_an_error() {
    let memory = host_memory();
    let mut device = device(&memory);
    let good = with_mode(load_knn(&mut device, 16, 1), LaunchMode::RemotePolling, 7);
    let size = DEVICE_MEMORY_MIB << 20;
    for doorbell in [size, size - 32, size + 0x1000, u64::MAX - 7, u64::MAX] {
        let (status, code, _) = rp_registers(&mut device, good, doorbell);
        assert_eq!(
            status & 0xffff_ffff,
            mailbox::status::COMPLETE,
            "doorbell {doorbell:#x}"
        );
        assert_ne!(status >> 32, 0, "doorbell {doorbell:#x} completed Ok");
        assert_eq!(
            code,
            status >> 32,
            "doorbell {doorbell:#x}: code register and STATUS disagree"
        );
        assert_eq!(status >> 32, u64::from(Status::ArgumentOutOfRange.code()));
    }
    assert_eq!(device.firmware().counters().launches, 0);
    // The mailbox still works.
    let (status, _, tag) = rp_registers(&mut device, good, device_map::RP_DESCRIPTOR.0);
    assert_eq!(status, mailbox::status::COMPLETE);
    assert_eq!(tag, 7);
}

#[test]
fn axle_unknown_kernel_latches_the_ring_broken_with_its_status() {
    let (status, metadata_tail, payload_tail, broken) =
        axle_status(|device| unknown_kernel(device, LaunchMode::BackStreaming, 4));
    assert_eq!(status, Status::UnknownKernel.code());
    assert_eq!(broken, Some(Status::UnknownKernel));
    assert_eq!((metadata_tail, payload_tail), (0, 0));
}

#[test]
fn axle_malformed_descriptors_latch_the_ring_broken_with_their_status() {
    // Device memory is allocated the same way on every fresh device, so a command built on one
    // names the same addresses on the next.
    let memory = host_memory();
    let mut probe = device(&memory);
    let good = with_mode(load_knn(&mut probe, 16, 1), LaunchMode::BackStreaming, 23);
    for (what, command, expected) in malformed_variants(good) {
        let (status, metadata_tail, payload_tail, broken) = axle_status(|device| {
            assert_eq!(load_knn(device, 16, 1).args, good.args);
            command
        });
        assert_eq!(status, expected.code(), "{what}");
        assert_eq!(broken, Some(expected), "{what}");
        assert_eq!((metadata_tail, payload_tail), (0, 0), "{what}");
    }
}

#[test]
fn axle_valid_launch_streams_every_payload() {
    // The control case of the AXLE tests: the same set-up with a valid command never breaks.
    let memory = host_memory();
    let ring = Ring::new(&memory, 16, 16, 32);
    let mut device = device(&memory);
    let command = with_mode(load_knn(&mut device, 16, 1), LaunchMode::BackStreaming, 24);
    let mut host = program_and_launch(ring.setup_stores(), command)
        .wait_until("every payload", |_| ring.metadata_tail() == 2)
        .pause("settle", Ticks::from_ns(20_000));
    run(&mut device, &mut host);
    drop(host);
    assert_eq!(ring.device_status(), 0);
    assert_eq!(ring.payload_tail(), 2);
    assert_eq!(device.firmware().broken(), None);
}

// ----- host writes the device must not trust -------------------------------------------------

#[test]
fn two_bs_launch_stores_with_the_same_tag_each_get_one_response() {
    let memory = host_memory();
    let mut device = device(&memory);
    let command = with_mode(load_knn(&mut device, 16, 1), LaunchMode::BulkSynchronous, 3);
    let mut host = ScriptedHost::new()
        .once("two launches, one tag", |turn| {
            turn.link.mem_store_synchronous(
                turn.now,
                device_map::LAUNCH_WINDOW,
                command.as_bytes(),
                1,
            );
            turn.link.mem_store_synchronous(
                turn.now,
                device_map::LAUNCH_WINDOW,
                command.as_bytes(),
                2,
            );
        })
        .wait_until("both responses", |turn| {
            store_done(turn.responses, 1).is_some() && store_done(turn.responses, 2).is_some()
        });
    host.patience = Ticks::from_ns(200_000);
    run(&mut device, &mut host);
}

#[test]
fn synchronous_store_outside_device_memory_is_answered_with_an_error() {
    let memory = host_memory();
    let mut device = device(&memory);
    let outside = DeviceAddress(DEVICE_MEMORY_MIB << 20);
    let mut status = None;
    let mut host = ScriptedHost::new()
        .once("store beyond device memory", |turn| {
            turn.link
                .mem_store_synchronous(turn.now, outside, &[0xa5; 64], 1)
        })
        .wait_until("the response", |turn| {
            status = store_done(turn.responses, 1);
            status.is_some()
        });
    run(&mut device, &mut host);
    drop(host);
    assert_eq!(status, Some(Status::DeviceMemoryFault.code()));
}

#[test]
fn host_store_into_firmware_scratch_cannot_redirect_dma_outside_the_region() {
    let memory = host_memory();
    let ring = Ring::new(&memory, 16, 16, 32);
    let mut device = device(&memory);
    let command = with_mode(load_knn(&mut device, 64, 1), LaunchMode::BackStreaming, 12);
    // Where the emulator puts the firmware's scratch area (its descriptor ring first).
    let size = DEVICE_MEMORY_MIB << 20;
    let probe = ScratchLayout::new(DeviceAddress(0), emulator::cosim::CHUNK_CAPACITY);
    let descriptor_ring = (size - probe.bytes()) & !0xfff;
    // A host frame that is not part of the region: the canary.
    let canary = (1..HOST_MEMORY / FRAME_SIZE)
        .map(|frame| HostPhysAddr(frame * FRAME_SIZE))
        .find(|frame| !ring.region.frames().contains(frame))
        .expect("a frame outside the region");
    let forged = firmware::hal::DmaDescriptor {
        source: device_map::DATA_BASE.0,
        destination: canary.0,
        length: 8,
        kind: firmware::hal::DmaKind::Payload as u32,
        index: 0,
    };
    let before = ring.outside_snapshot();
    let mut forging_until = None;
    let mut host = program_and_launch(ring.setup_stores(), command)
        .poll_every(Ticks::from_ns(10))
        .then("forge descriptors while the device streams", |turn| {
            let end = *forging_until.get_or_insert(turn.now.plus(Ticks::from_ns(20_000)));
            for cell in 0..16u64 {
                turn.link.mem_store(
                    turn.now,
                    DeviceAddress(descriptor_ring + cell * 32),
                    forged.as_bytes(),
                );
            }
            turn.now >= end
        })
        .pause("settle", Ticks::from_ns(20_000));
    run(&mut device, &mut host);
    drop(host);
    // The device must not have let the host's stores reach its private scratch area (or must
    // have noticed the forged descriptors): either way, nothing outside the region changes.
    ring.assert_outside_unchanged(&before);
}
