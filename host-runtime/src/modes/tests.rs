//! Each mechanism driven alone against the scripted link ([`crate::test_link`]): its normal
//! path (the link calls in order, their times, what the host pays, what the tasks read) and
//! its error paths (a device error status, a short result load, a BROKEN ring, a deadlock).

use crate::config::HostConfig;
use crate::modes::axle::{AxleRing, AxleRingError};
use crate::ring::RingError;
use crate::runtime::{Mode, Runtime, RuntimeError};
use crate::test_link::{plan, run_until, Device, Reply, ScriptedLink, TestApp, RESULT_ADDRESS};
use cosim_link::link::{HostAgent, Wake};
use shared_abi::command::CommandFlags;
use shared_abi::{
    device_map, mailbox, CommandDescriptor, FlowControlMessage, LaunchMode, Status, Ticks,
};
use std::collections::VecDeque;
use zerocopy::FromBytes;

fn ns(value: u64) -> Ticks {
    Ticks::from_ns(value)
}

/// Far enough for every test here to end.
const END: u64 = 1_000_000_000;

/// One launch of two 64-byte chunks; task 0 reads chunk 0, task 1 chunk 1.
fn bulk_app() -> TestApp {
    TestApp {
        launches: VecDeque::from([plan(64, 2, &[(0, 1), (1, 2)], 0)]),
        ..TestApp::default()
    }
}

/// The result a bulk load returns: chunk 0 all 0xa0, chunk 1 all 0xa1.
fn result_bytes(length: usize) -> Vec<u8> {
    (0..length).map(|i| 0xa0 + (i / 64) as u8).collect()
}

fn command(bytes: &[u8]) -> CommandDescriptor {
    CommandDescriptor::read_from_bytes(bytes).expect("a command descriptor")
}

fn running() -> u64 {
    mailbox::status::RUNNING
}

fn complete(code: u32) -> u64 {
    mailbox::status::COMPLETE | (u64::from(code) << 32)
}

/// The device acknowledges a store `after` ns later, with status 0.
fn acknowledged(after: u64) -> Reply {
    Reply::Store {
        after: ns(after),
        status: 0,
    }
}

/// A status read answered `after` ns later with `value`.
fn status_read(after: u64, value: u64) -> Reply {
    Reply::IoRead {
        after: ns(after),
        value,
    }
}

/// A result load answered `after` ns later with `length` bytes of [`result_bytes`].
fn result_load(after: u64, length: usize) -> Reply {
    Reply::Load {
        after: ns(after),
        data: result_bytes(length),
    }
}

/// Runs the host until it is done, which must be before [`END`].
fn run_to_the_end(rt: &mut Runtime<'_>, link: &mut ScriptedLink, now: &mut Ticks) {
    assert_eq!(run_until(rt, link, now, ns(END)), Wake::Done);
}

/// A run of `app` in the bulk mode `mode` (RP or BS) against `link`, to its end.
fn run_bulk<'a>(mode: Mode, app: &'a mut TestApp, link: &mut ScriptedLink) -> Runtime<'a> {
    let mut rt = Runtime::new(mode, HostConfig::default(), app, None);
    let mut now = Ticks::ZERO;
    run_to_the_end(&mut rt, link, &mut now);
    rt
}

// ----- RP ----------------------------------------------------------------------------------

#[test]
fn rp_stores_the_descriptor_rings_polls_until_complete_dequeues_then_loads_once() {
    let mut app = bulk_app();
    let mut link = ScriptedLink::new([
        acknowledged(100),
        status_read(500, running()),
        status_read(500, complete(Status::Ok.code())),
        result_load(300, 128),
    ]);
    let rt = run_bulk(Mode::Rp, &mut app, &mut link);
    assert_eq!(rt.failure(), None);
    assert_eq!(
        link.shapes(),
        vec![
            ("mem_store_synchronous", device_map::RP_DESCRIPTOR.0),
            ("io_write", mailbox::DOORBELL),
            ("io_read", mailbox::STATUS),
            ("io_read", mailbox::STATUS),
            ("io_write", mailbox::DEQUEUE),
            ("mem_load", RESULT_ADDRESS),
        ]
    );
    let times: Vec<u64> = link.calls.iter().map(|call| call.now().as_ns()).collect();
    // Doorbell on the acknowledgement; polls one remote interval (1 µs) apart; the second
    // poll answers "complete": dequeue and load at once.
    assert_eq!(times, vec![0, 100, 1_100, 2_100, 2_600, 2_600]);
    let descriptor = command(&link.stores_to(device_map::RP_DESCRIPTOR)[0].1);
    assert_eq!(
        (descriptor.mode, descriptor.tag),
        (LaunchMode::RemotePolling as u32, 1)
    );
    let measured = rt.measurements();
    // Descriptor 100, doorbell 10, two polls of 500, dequeue 10, load 300.
    assert_eq!(measured.stall, ns(100 + 10 + 500 + 500 + 10 + 300));
    assert_eq!(measured.result_load, ns(300));
    assert_eq!((measured.launches, measured.tasks), (1, 2));
    drop(rt);
    assert_eq!(
        app.read,
        vec![(0, vec![0xa0; 64]), (1, vec![0xa1; 64])],
        "each task reads its chunk of the loaded result"
    );
}

#[test]
fn an_application_refusing_a_task_fails_the_run_at_that_call() {
    let mut app = bulk_app();
    app.refuse_task = Some(0);
    let mut link = ScriptedLink::new([
        acknowledged(100),
        status_read(500, complete(Status::Ok.code())),
        result_load(300, 128),
    ]);
    let rt = run_bulk(Mode::Rp, &mut app, &mut link);
    let expected = crate::AppError::new(
        "test",
        crate::Scope::Whole,
        crate::AppProblem::RanTwice { task: 0 },
    );
    assert_eq!(rt.failure(), Some(&RuntimeError::Application(expected)));
    assert_eq!(
        rt.failure().map(ToString::to_string).as_deref(),
        Some("test: task 0 ran twice")
    );
    drop(rt);
    assert!(
        app.read.iter().all(|(task, _)| *task != 0),
        "the refused task read nothing"
    );
    assert_eq!(app.finished_launches, 0, "the launch never finished");
}

#[test]
fn rp_fails_with_the_device_status_and_neither_dequeues_nor_loads() {
    let mut app = bulk_app();
    let mut link = ScriptedLink::new([
        acknowledged(100),
        status_read(500, complete(Status::ArgumentOutOfRange.code())),
    ]);
    let rt = run_bulk(Mode::Rp, &mut app, &mut link);
    assert!(
        matches!(
            rt.failure(),
            Some(RuntimeError::Device { tag: 1, code, .. })
                if *code == Status::ArgumentOutOfRange.code()
        ),
        "{:?}",
        rt.failure()
    );
    assert_eq!(rt.measurements().end, ns(1_600));
    assert_eq!(
        link.shapes().last(),
        Some(&("io_read", mailbox::STATUS)),
        "no dequeue, no load after an error status"
    );
    drop(rt);
    assert!(app.read.is_empty());
}

#[test]
fn rp_fails_on_a_short_result_load_and_runs_no_task() {
    let mut app = bulk_app();
    let mut link = ScriptedLink::new([
        acknowledged(100),
        status_read(500, complete(Status::Ok.code())),
        result_load(300, 100),
    ]);
    let rt = run_bulk(Mode::Rp, &mut app, &mut link);
    assert_eq!(
        rt.failure(),
        Some(&RuntimeError::ShortLoad {
            expected: 128,
            got: 100
        })
    );
    drop(rt);
    assert!(app.read.is_empty());
}

// ----- BS ----------------------------------------------------------------------------------

#[test]
fn bs_waits_for_the_synchronous_launch_then_loads_once() {
    let mut app = bulk_app();
    let mut link = ScriptedLink::new([acknowledged(1_000), result_load(300, 128)]);
    let rt = run_bulk(Mode::Bs, &mut app, &mut link);
    assert_eq!(rt.failure(), None);
    assert_eq!(
        link.shapes(),
        vec![
            ("mem_store_synchronous", device_map::LAUNCH_WINDOW.0),
            ("mem_load", RESULT_ADDRESS),
        ]
    );
    let launch = command(&link.stores_to(device_map::LAUNCH_WINDOW)[0].1);
    assert_eq!(launch.mode, LaunchMode::BulkSynchronous as u32);
    let measured = rt.measurements();
    assert_eq!(measured.stall, ns(1_000 + 300));
    assert_eq!(measured.result_load, ns(300));
    assert_eq!((measured.launches, measured.tasks), (1, 2));
    drop(rt);
    assert_eq!(app.read, vec![(0, vec![0xa0; 64]), (1, vec![0xa1; 64])]);
}

#[test]
fn bs_fails_with_the_status_of_the_launch_store_and_loads_nothing() {
    let mut app = bulk_app();
    let mut link = ScriptedLink::new([Reply::Store {
        after: ns(1_000),
        status: Status::UnknownKernel.code(),
    }]);
    let rt = run_bulk(Mode::Bs, &mut app, &mut link);
    match rt.failure() {
        Some(RuntimeError::Device { tag, code, status }) => {
            assert_eq!((*tag, *code), (1, Status::UnknownKernel.code()));
            assert_eq!(*status, Some(Status::UnknownKernel));
            assert!(
                rt.failure()
                    .unwrap()
                    .to_string()
                    .contains(&format!("`{}`", Status::UnknownKernel)),
                "the message names the status"
            );
        }
        other => panic!("expected a device error, got {other:?}"),
    }
    assert_eq!(link.shapes().len(), 1, "no result load after an error");
}

#[test]
fn bs_fails_on_a_short_result_load() {
    let mut app = bulk_app();
    let mut link = ScriptedLink::new([acknowledged(1_000), result_load(300, 0)]);
    let rt = run_bulk(Mode::Bs, &mut app, &mut link);
    assert_eq!(
        rt.failure(),
        Some(&RuntimeError::ShortLoad {
            expected: 128,
            got: 0
        })
    );
}

// ----- AXLE --------------------------------------------------------------------------------

const SLOT: u32 = 32;

fn axle_config(stall_timeout_ns: u64) -> HostConfig {
    HostConfig {
        poll_interval_ns: 500,
        stall_timeout_ns,
        ..HostConfig::default()
    }
}

/// One launch of `chunks` 32-byte chunks read by tasks `needs`.
fn stream_app(chunks: u64, needs: &[(u64, u64)]) -> TestApp {
    TestApp {
        launches: VecDeque::from([plan(u64::from(SLOT), chunks, needs, 0)]),
        ..TestApp::default()
    }
}

/// A run of `app` in the streaming mode `mode` with `config` and `ring`: the runtime, its
/// link and the time, after the host's turns up to 200 ns (the launch posted, no record yet).
fn started<'a>(
    mode: Mode,
    config: HostConfig,
    app: &'a mut TestApp,
    ring: AxleRing,
) -> (Runtime<'a>, ScriptedLink, Ticks) {
    let mut link = ScriptedLink::default();
    let mut rt = Runtime::new(mode, config, app, Some(ring));
    let mut now = Ticks::ZERO;
    run_until(&mut rt, &mut link, &mut now, ns(200));
    (rt, link, now)
}

fn flow_control(link: &ScriptedLink) -> Vec<(u64, (u64, u64))> {
    link.stores_to(device_map::FLOW_CONTROL)
        .into_iter()
        .map(|(at, data)| {
            let message = FlowControlMessage::read_from_bytes(&data).expect("a message");
            (at.as_ns(), (message.metadata_head, message.payload_head))
        })
        .collect()
}

#[test]
fn axle_programs_the_ring_posts_the_launch_polls_and_sends_the_heads_after_a_poll() {
    let mut app = stream_app(2, &[(0, 1), (1, 2)]);
    let (ring, device) = Device::ring(64, SLOT);
    let (mut rt, mut link, mut now) = started(Mode::Axle, axle_config(20_000_000), &mut app, ring);
    device.produce(&rt, 1, 0, 0);
    run_until(&mut rt, &mut link, &mut now, ns(800));
    device.produce(&rt, 1, 1, 1);
    run_to_the_end(&mut rt, &mut link, &mut now);
    assert_eq!(rt.failure(), None);
    // The shadow descriptors first, then the posted launch store, both at 0.
    let shapes = link.shapes();
    let launch_at = shapes
        .iter()
        .position(|&shape| shape == ("mem_store", device_map::LAUNCH_WINDOW.0))
        .expect("a launch store");
    assert!(launch_at > 0, "the ring is programmed before the launch");
    let launch = command(&link.stores_to(device_map::LAUNCH_WINDOW)[0].1);
    assert_eq!(
        (launch.mode, launch.flags & CommandFlags::INTERRUPT.bits()),
        (LaunchMode::BackStreaming as u32, 0)
    );
    // Polls at 500 and 1000 each find one record (80 ns tail load + 5 ns push); task 0 has
    // freed record 0 by the second, whose end (1085) sends the heads. Task 1 frees record 1
    // after the last result arrived: polling has stopped, so nothing more is sent.
    assert_eq!(flow_control(&link), vec![(1_085, (1, 1))]);
    let measured = rt.measurements();
    assert_eq!(
        (measured.polls, measured.tasks, measured.launches),
        (2, 2, 1)
    );
    assert_eq!(measured.flow_control_stores, 1);
    // Launch store 10, two polls of 85, one flow-control store 10.
    assert_eq!(measured.stall, ns(10 + 85 + 85 + 10));
    let state = rt.ring_state().expect("a ring").expect("its state");
    assert_eq!((state.polled, state.metadata_head), (2, 2));
    drop(rt);
    assert_eq!(app.read, vec![(0, vec![0; 32]), (1, vec![1; 32])]);
}

#[test]
fn axle_fails_at_the_first_poll_after_the_device_latches_the_ring_broken() {
    let mut app = stream_app(2, &[(0, 2)]);
    let (ring, device) = Device::ring(64, SLOT);
    let (mut rt, mut link, mut now) = started(Mode::Axle, axle_config(20_000_000), &mut app, ring);
    device.produce(&rt, 1, 0, 0);
    device.break_ring(&rt, Status::TranslationFault.code());
    run_to_the_end(&mut rt, &mut link, &mut now);
    match rt.failure() {
        Some(RuntimeError::Ring(error)) => {
            assert_eq!(
                *error,
                AxleRingError::Protocol(RingError::DeviceBroken { code: 5 })
            );
            assert!(
                error.to_string().contains("BROKEN with status code 5"),
                "{error}"
            )
        }
        other => panic!("expected a ring error, got {other:?}"),
    }
    assert_eq!(rt.measurements().end, ns(500));
    drop(rt);
    assert!(app.read.is_empty(), "no record is taken from a broken ring");
}

/// Runs one launch of three chunks, one task per chunk, each task `operations` long, the
/// records arriving at 200, 800 and 4,800 ns; returns the flow-control stores (time, heads).
fn heads_sent_with_tasks_of(operations: u64) -> Vec<(u64, (u64, u64))> {
    let mut app = stream_app(3, &[(0, 1), (1, 2), (2, 3)]);
    app.operations = operations;
    let (ring, device) = Device::ring(64, SLOT);
    let (mut rt, mut link, mut now) = started(Mode::Axle, axle_config(20_000_000), &mut app, ring);
    device.produce(&rt, 1, 0, 0);
    run_until(&mut rt, &mut link, &mut now, ns(800));
    device.produce(&rt, 1, 1, 1);
    run_until(&mut rt, &mut link, &mut now, ns(4_800));
    device.produce(&rt, 1, 2, 2);
    run_to_the_end(&mut rt, &mut link, &mut now);
    assert_eq!(rt.failure(), None);
    flow_control(&link)
}

#[test]
fn axle_holds_a_slot_until_the_task_that_read_it_ends_then_sends_the_head_after_a_poll() {
    // Paper IV-C: "After processing metadata and payload ring buffer slots, the host sends
    // flow control messages with the updated indexes". Instant tasks (0 instructions) have
    // freed record 0 by the poll at 1000, whose end (1085: 80 ns tail load, 5 ns push) sends
    // head 1; record 1's task has freed it by the poll at 1500, which finds no new record
    // (1580: the tail load alone).
    assert_eq!(
        heads_sent_with_tasks_of(0),
        vec![(1_085, (1, 1)), (1_580, (2, 2))]
    );
    // Tasks of 3,000 instructions (2 µs at 3 GHz, IPC 0.5) hold their slots while they run:
    // task 0 starts after the poll of 500 and still runs at the polls of 1000 to 2500, which
    // send nothing; the poll of 3000, the first after it ended, sends head 1 (3080), and the
    // one of 3500, the first after task 1 (started after the poll of 1000) ended, head 2.
    // Record 2 is freed after the last result arrived, when polling has stopped.
    let slow = heads_sent_with_tasks_of(3_000);
    assert_eq!(slow, vec![(3_080, (1, 1)), (3_580, (2, 2))]);
    assert!(
        slow[0].0 > 585 + 2_000,
        "head 1 sent before the task holding slot 0 could have ended"
    );
}

#[test]
fn axle_reports_a_deadlock_when_held_slots_fill_the_ring_past_the_stall_timeout() {
    // A 4-slot ring; the only task needs 8 chunks; the device streams 4 and must wait for
    // credit the host cannot give.
    let mut app = stream_app(8, &[(0, 8)]);
    let (ring, device) = Device::ring(4, SLOT);
    let (mut rt, mut link, mut now) = started(Mode::Axle, axle_config(5_000), &mut app, ring);
    for index in 0..4 {
        device.produce(&rt, 1, index, index);
    }
    run_to_the_end(&mut rt, &mut link, &mut now);
    match rt.failure() {
        Some(RuntimeError::Deadlock { at_ns, diagnosis }) => {
            // Last progress at the poll of 500; the first poll more than 5 µs later is 6000.
            assert_eq!(*at_ns, 6_000);
            assert!(
                diagnosis.contains("4 of the ring's 4 payload slots are held"),
                "{diagnosis}"
            );
        }
        other => panic!("expected a deadlock, got {other:?}"),
    }
}

#[test]
fn axle_reports_a_stall_not_a_deadlock_when_the_ring_has_room() {
    let mut app = stream_app(8, &[(0, 8)]);
    let (ring, device) = Device::ring(8, SLOT);
    let (mut rt, mut link, mut now) = started(Mode::Axle, axle_config(5_000), &mut app, ring);
    for index in 0..4 {
        device.produce(&rt, 1, index, index);
    }
    run_to_the_end(&mut rt, &mut link, &mut now);
    match rt.failure() {
        Some(RuntimeError::Stalled { diagnosis, .. }) => assert!(
            diagnosis.contains("4 of the ring's 8 payload slots are held"),
            "{diagnosis}"
        ),
        other => panic!("expected a stall, got {other:?}"),
    }
}

#[test]
fn axle_refuses_a_record_of_another_launch() {
    let mut app = stream_app(2, &[(0, 2)]);
    let (ring, device) = Device::ring(64, SLOT);
    let (mut rt, mut link, mut now) = started(Mode::Axle, axle_config(20_000_000), &mut app, ring);
    device.produce(&rt, 7, 0, 0);
    run_to_the_end(&mut rt, &mut link, &mut now);
    match rt.failure() {
        Some(RuntimeError::Ring(error)) => {
            assert_eq!(
                *error,
                AxleRingError::ForeignTag {
                    sequence: 0,
                    tag: 7,
                    launch: 1
                }
            );
            assert!(
                error.to_string().contains("carries tag 7 during launch 1"),
                "{error}"
            )
        }
        other => panic!("expected a ring error, got {other:?}"),
    }
}

#[test]
fn axle_without_a_ring_fails_its_first_launch() {
    let mut app = stream_app(2, &[(0, 2)]);
    let mut link = ScriptedLink::default();
    let mut rt = Runtime::new(Mode::Axle, axle_config(20_000_000), &mut app, None);
    let mut now = Ticks::ZERO;
    run_to_the_end(&mut rt, &mut link, &mut now);
    assert_eq!(
        rt.failure(),
        Some(&RuntimeError::Ring(AxleRingError::NoRing))
    );
}

// ----- AXLE_Interrupt ----------------------------------------------------------------------

#[test]
fn axle_irq_handles_each_interrupt_like_a_poll_and_the_worker_sends_the_heads() {
    let mut app = stream_app(2, &[(0, 1), (1, 2)]);
    let (ring, device) = Device::ring(64, SLOT);
    let (mut rt, mut link, mut now) =
        started(Mode::AxleIrq, axle_config(20_000_000), &mut app, ring);
    device.produce(&rt, 1, 0, 0);
    link.interrupt(ns(300), 1);
    run_until(&mut rt, &mut link, &mut now, ns(600));
    device.produce(&rt, 1, 1, 1);
    link.interrupt(ns(700), 2);
    run_to_the_end(&mut rt, &mut link, &mut now);
    assert_eq!(rt.failure(), None);
    let launch = command(&link.stores_to(device_map::LAUNCH_WINDOW)[0].1);
    assert_eq!(
        (launch.mode, launch.flags & CommandFlags::INTERRUPT.bits()),
        (
            LaunchMode::BackStreaming as u32,
            CommandFlags::INTERRUPT.bits()
        )
    );
    let measured = rt.measurements();
    assert_eq!((measured.polls, measured.tasks), (2, 2));
    // Each task's end frees its record and sends the heads at once (no poller to wait for).
    let sent = flow_control(&link);
    assert_eq!(
        sent.iter().map(|(_, heads)| *heads).collect::<Vec<_>>(),
        vec![(1, 1), (2, 2)]
    );
    assert!(sent[0].0 > 385, "sent when task 0 ends, after its handler");
    // Launch store 10, two handlers of 85, two flow-control stores of 10.
    assert_eq!(measured.stall, ns(10 + 85 + 85 + 10 + 10));
    drop(rt);
    assert_eq!(app.read, vec![(0, vec![0; 32]), (1, vec![1; 32])]);
}

#[test]
fn axle_irq_fails_in_the_handler_when_the_ring_is_broken() {
    let mut app = stream_app(2, &[(0, 2)]);
    let (ring, device) = Device::ring(64, SLOT);
    let (mut rt, mut link, mut now) =
        started(Mode::AxleIrq, axle_config(20_000_000), &mut app, ring);
    device.produce(&rt, 1, 0, 0);
    device.break_ring(&rt, Status::RingBroken.code());
    link.interrupt(ns(300), 1);
    run_to_the_end(&mut rt, &mut link, &mut now);
    match rt.failure() {
        Some(RuntimeError::Ring(error)) => {
            assert_eq!(
                *error,
                AxleRingError::Protocol(RingError::DeviceBroken { code: 6 })
            );
            assert!(
                error.to_string().contains("BROKEN with status code 6"),
                "{error}"
            )
        }
        other => panic!("expected a ring error, got {other:?}"),
    }
    assert_eq!(rt.measurements().end, ns(300));
}

#[test]
fn axle_irq_reports_a_deadlock_when_held_slots_fill_the_ring_past_the_stall_timeout() {
    // The deadlock of the AXLE test above, with interrupts: no poll runs, so the stall check's
    // timer does AXLE's check, with AXLE's words (before it, the host waited for an interrupt
    // that never came, and the run ended at the emulator's "deadlock at").
    let mut app = stream_app(8, &[(0, 8)]);
    let (ring, device) = Device::ring(4, SLOT);
    let (mut rt, mut link, mut now) = started(Mode::AxleIrq, axle_config(5_000), &mut app, ring);
    for index in 0..4 {
        device.produce(&rt, 1, index, index);
    }
    link.interrupt(ns(300), 4);
    run_to_the_end(&mut rt, &mut link, &mut now);
    let state = rt.ring_state().expect("a ring").expect("its state");
    assert_eq!(
        (state.polled, state.metadata_head),
        (4, 0),
        "all 4 slots held"
    );
    match rt.failure() {
        Some(error @ RuntimeError::Deadlock { at_ns, diagnosis }) => {
            // Last progress at the handler of 300; the check fires 1 ns past the timeout.
            assert_eq!(*at_ns, 5_301);
            assert!(
                error.to_string().starts_with(
                    "deadlock detected at 5301 ns: no record and no host task for 5001 ns"
                ),
                "{error}"
            );
            assert!(
                diagnosis.contains(
                    "4 of the ring's 4 payload slots are held: the ring is full of slots that partially satisfied tasks hold"
                ),
                "{diagnosis}"
            );
        }
        other => panic!("expected a deadlock, got {other:?}"),
    }
}

#[test]
fn axle_irq_reports_a_stall_not_a_deadlock_when_the_ring_has_room() {
    let mut app = stream_app(8, &[(0, 8)]);
    let (ring, device) = Device::ring(8, SLOT);
    let (mut rt, mut link, mut now) = started(Mode::AxleIrq, axle_config(5_000), &mut app, ring);
    for index in 0..4 {
        device.produce(&rt, 1, index, index);
    }
    link.interrupt(ns(300), 4);
    run_to_the_end(&mut rt, &mut link, &mut now);
    match rt.failure() {
        Some(RuntimeError::Stalled { at_ns, diagnosis }) => {
            assert_eq!(*at_ns, 5_301);
            assert!(
                diagnosis.contains("4 of the ring's 8 payload slots are held"),
                "{diagnosis}"
            );
        }
        other => panic!("expected a stall, got {other:?}"),
    }
}

#[test]
fn axle_irq_stall_check_moves_with_progress_and_takes_no_turn_of_its_own() {
    // Four records 4 µs apart, one task each, with a 5 µs stall timeout: the run lasts longer
    // than the timeout but never goes that long without progress, so it finishes, and the
    // host takes a turn only at its launch, its interrupts and its tasks' ends (the check's
    // timer is moved each time, never reached).
    let mut app = stream_app(4, &[(0, 1), (1, 2), (2, 3), (3, 4)]);
    let (ring, device) = Device::ring(64, SLOT);
    let (mut rt, mut link, mut now) = started(Mode::AxleIrq, axle_config(5_000), &mut app, ring);
    for index in 0..4u64 {
        // The handler of interrupt `index` takes only the records it announces.
        device.produce(&rt, 1, index, index);
        link.interrupt(ns(300 + 4_000 * index), index + 1);
    }
    // The host's turns, as `run_until` takes them.
    let mut turns = Vec::new();
    loop {
        for (due, response) in link.take_due(now) {
            rt.deliver(due, response);
        }
        let wake = rt.turn(now, &mut link);
        turns.push(now.as_ns());
        now = match (wake, link.next_due()) {
            (Wake::Done, _) => break,
            (Wake::At(wake), Some(due)) => wake.min(due),
            (Wake::At(wake), None) => wake,
            (Wake::OnResponse, Some(due)) => due,
            (Wake::OnResponse, None) => panic!("the host sleeps with no timer"),
        }
        .max(now);
    }
    assert_eq!(rt.failure(), None);
    assert!(rt.finished());
    let measured = rt.measurements();
    assert_eq!((measured.polls, measured.tasks), (4, 4));
    // An interrupt, its handler's end (85 ns later) and its task's end, for each record; the
    // launch's final step ends last (200: where `run_until` left the host). Nothing at the
    // stall timeout after any of them.
    let mut expected: Vec<u64> = std::iter::once(200)
        .chain((0..4).flat_map(|index| [300, 385, 491].map(|at| at + 4_000 * index)))
        .collect();
    expected.push(12_511);
    assert_eq!(turns, expected);
}
