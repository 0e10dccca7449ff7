//! The AXLE host's cost model, driven turn by turn against a scripted device: the test writes
//! payloads, records and tails into the DMA region itself (what the device's DMA does, edges
//! D1 to D4) and records every call the runtime makes on the link.

use super::*;
use crate::app::{HostTask, LoadError, Verification};
use crate::trace::HostSpan;
use cosim_link::link::{LinkCall, Recorder};
use host_driver::frames::FrameAllocator;
use host_driver::phys::PhysicalMemory;
use host_driver::sync::{Arc, Ordering};
use shared_abi::control::METADATA_TAIL_OFFSET;
use shared_abi::region::RingLayout;
use shared_abi::{device_map, FlowControlMessage, MetadataRecord};
use std::collections::BTreeMap;
use zerocopy::FromBytes;

const SLOT: u32 = 32;
const SLOTS: u32 = 2048;

/// The flow-control stores `link` recorded: (time, message).
fn flow_control(link: &Recorder) -> Vec<(Ticks, FlowControlMessage)> {
    link.calls
        .iter()
        .filter_map(|call| match call {
            LinkCall::MemStore { now, address, data } if *address == device_map::FLOW_CONTROL => {
                FlowControlMessage::read_from_bytes(data)
                    .ok()
                    .map(|message| (*now, message))
            }
            _ => None,
        })
        .collect()
}

/// An application whose launches are given; task `i` costs `operations[i]` instructions.
struct ScriptedApp {
    launches: VecDeque<LaunchPlan>,
    operations: BTreeMap<u32, u64>,
}

impl ScriptedApp {
    /// An application of `launches` whose tasks cost no instructions.
    fn instant<const N: usize>(launches: [LaunchPlan; N]) -> ScriptedApp {
        ScriptedApp {
            launches: VecDeque::from(launches),
            operations: BTreeMap::new(),
        }
    }
}

impl Application for ScriptedApp {
    fn name(&self) -> &str {
        "scripted"
    }
    fn load(&mut self, _: &mut dyn crate::app::DeviceLoader) -> Result<(), LoadError> {
        Ok(())
    }
    fn next_launch(&mut self) -> Result<Option<LaunchPlan>, crate::app::AppError> {
        Ok(self.launches.pop_front())
    }
    fn run_task(&mut self, task: &HostTask, _: &[u8]) -> Result<HostCost, crate::app::AppError> {
        Ok(HostCost {
            operations: self.operations.get(&task.id).copied().unwrap_or(0),
            memory_bytes: 0,
        })
    }
    fn finish_launch(&mut self) -> Result<HostCost, crate::app::AppError> {
        Ok(HostCost::default())
    }
    fn verify(&self) -> Verification {
        Verification {
            passed: true,
            detail: String::new(),
        }
    }
}

/// A launch of `chunks` 32-byte result chunks; task `i` needs the chunks from `needs[i].0` up
/// to `needs[i].1`.
fn plan(chunks: u64, needs: &[(u64, u64)], input_bytes: usize) -> LaunchPlan {
    crate::test_link::plan(u64::from(SLOT), chunks, needs, input_bytes)
}

fn ring() -> AxleRing {
    let layout = RingLayout::new(SLOTS, SLOTS, SLOT).expect("a valid layout");
    let memory = Arc::new(PhysicalMemory::new(4 << 20).expect("host memory"));
    let mut allocator = FrameAllocator::new(memory.len());
    let region =
        host_driver::dma::DmaRegion::allocate(memory, &mut allocator, layout.region_length())
            .expect("a DMA region");
    AxleRing::new(region, layout, 1).expect("a programmed ring")
}

fn config(poll_ns: u64) -> HostConfig {
    HostConfig {
        poll_interval_ns: poll_ns,
        ..HostConfig::default()
    }
}

/// A runtime in AXLE mode over `app`, tracing.
fn runtime(app: &mut ScriptedApp, poll_ns: u64) -> Runtime<'_> {
    runtime_in(Mode::Axle, app, poll_ns)
}

/// [`runtime`] in `mode`.
fn runtime_in(mode: Mode, app: &mut ScriptedApp, poll_ns: u64) -> Runtime<'_> {
    let mut runtime = Runtime::new(mode, config(poll_ns), app, Some(ring()));
    runtime.enable_trace();
    runtime
}

/// The device's interrupt `message` reaches the host at `at`, and the host's time moves there.
fn interrupt(rt: &mut Runtime<'_>, now: &mut Ticks, at: Ticks, message: u64) {
    rt.deliver(at, LinkResponse::Interrupt { message });
    *now = at;
}

/// What the device's DMA does for result chunk `chunk` of launch `tag`, streamed as payload
/// (and record) `index`: D1 payload, D3 record, D4 metadata tail.
fn produce(runtime: &Runtime<'_>, tag: u32, index: u64, chunk: u64) {
    let ring = runtime.mechanism.ring().expect("an AXLE ring");
    let layout = RingLayout::new(SLOTS, SLOTS, SLOT).expect("a valid layout");
    // The device writes through the frames it was given.
    let region = ring.region().device_view();
    let slot = (index % u64::from(SLOTS)) as u32;
    let offset = layout.payload_slot_offset(slot).expect("a payload slot");
    region
        .write_bytes(offset, &[chunk as u8; SLOT as usize])
        .expect("payload write");
    let record = MetadataRecord {
        sequence: index,
        result_offset: chunk * u64::from(SLOT),
        payload_slot: slot,
        length: SLOT,
        tag,
        flags: 0,
    };
    region
        .write_bytes(
            layout.metadata_slot_offset(index),
            zerocopy::IntoBytes::as_bytes(&record),
        )
        .expect("record write");
    region
        .store_u64(
            layout.control_offset() + METADATA_TAIL_OFFSET,
            index + 1,
            Ordering::Release,
        )
        .expect("tail store");
}

/// Runs every host turn due up to `until` (the runtime asks for its wake-ups).
fn advance(runtime: &mut Runtime<'_>, link: &mut Recorder, now: &mut Ticks, until: Ticks) {
    loop {
        match runtime.turn(*now, link) {
            Wake::At(at) if at <= until => *now = at,
            Wake::Done => return,
            _ => {
                *now = until;
                return;
            }
        }
    }
}

fn ns(value: u64) -> Ticks {
    Ticks::from_ns(value)
}

fn spans(runtime: &mut Runtime<'_>) -> Vec<HostSpan> {
    runtime.take_trace().expect("tracing was enabled").spans
}

fn polls(spans: &[HostSpan]) -> Vec<(u32, Ticks)> {
    spans
        .iter()
        .filter_map(|span| match span.kind {
            HostSpanKind::LocalPoll { records, .. } => Some((records, span.end.since(span.start))),
            _ => None,
        })
        .collect()
}

/// Control-thread spans, sorted by start.
fn control_spans(spans: &[HostSpan]) -> Vec<HostSpan> {
    let mut control: Vec<HostSpan> = spans
        .iter()
        .copied()
        .filter(|span| {
            !matches!(
                span.kind,
                HostSpanKind::Task { .. } | HostSpanKind::FinishLaunch { .. }
            )
        })
        .collect();
    control.sort_by_key(|span| (span.start, span.end));
    control
}

#[test]
fn a_poll_costs_the_control_thread_the_same_for_1_and_for_1000_records() {
    // Task 0 needs chunk 0; task 1 chunks 1 to 1000; task 2 chunk 1001, which never arrives
    // (the launch stays open).
    let mut app = ScriptedApp::instant([plan(1002, &[(0, 1), (1, 1001), (1001, 1002)], 0)]);
    let mut rt = runtime(&mut app, 10_000);
    let mut link = Recorder::default();
    let mut now = Ticks::ZERO;
    advance(&mut rt, &mut link, &mut now, ns(1_000));
    produce(&rt, 1, 0, 0);
    advance(&mut rt, &mut link, &mut now, ns(15_000));
    for index in 1..=1000 {
        produce(&rt, 1, index, index);
    }
    advance(&mut rt, &mut link, &mut now, ns(25_000));
    let stall_before_third = rt.measurements().stall;
    advance(&mut rt, &mut link, &mut now, ns(35_000));
    let polls = polls(&spans(&mut rt));
    let one = polls.iter().find(|(records, _)| *records == 1).map(|p| p.1);
    let thousand = polls
        .iter()
        .find(|(records, _)| *records == 1000)
        .map(|p| p.1);
    let expected = ns(80 + 5);
    assert_eq!(one, Some(expected), "{polls:?}");
    assert_eq!(thousand, Some(expected), "{polls:?}");
    // A poll that finds nothing costs the tail load alone.
    assert!(polls
        .iter()
        .any(|&(records, time)| records == 0 && time == ns(80)));
    // The third poll finds nothing new, and the heads moved when task 1 finished (one
    // flow-control store): its stall is the tail load and the store.
    let stall = rt.measurements().stall.since(stall_before_third);
    assert_eq!(stall, ns(80 + 10));
}

#[test]
fn a_task_reads_its_records_with_its_payloads_as_host_work() {
    // One task needing 4 chunks: it reads 4 records and 4 payload slots. (A second task
    // waits for a chunk that never arrives: the launch stays open.)
    let mut app = ScriptedApp::instant([plan(5, &[(0, 4), (4, 5)], 0)]);
    let mut rt = runtime(&mut app, 1_000);
    let mut link = Recorder::default();
    let mut now = Ticks::ZERO;
    advance(&mut rt, &mut link, &mut now, ns(500));
    for index in 0..4 {
        produce(&rt, 1, index, index);
    }
    advance(&mut rt, &mut link, &mut now, ns(5_000));
    let cost = CostModel::new(&config(1_000));
    let spans = spans(&mut rt);
    let task = spans
        .iter()
        .find(|span| matches!(span.kind, HostSpanKind::Task { .. }))
        .expect("the task ran");
    let expected = cost
        .work(HostCost::default())
        .plus(cost.uncached_stream(4 * 32 + 4 * 32));
    assert_eq!(task.end.since(task.start), expected);
    assert_eq!(rt.measurements().host_busy, expected);
}

#[test]
fn the_metadata_head_waits_for_the_task_that_reads_the_oldest_record() {
    // Three records arrive in one batch; task 0 (chunk 0) runs long, tasks 1 and 2 finish
    // first: out-of-order consumption. (Task 3 waits for a chunk that never arrives.)
    let mut app = ScriptedApp {
        launches: VecDeque::from([plan(4, &[(0, 1), (1, 2), (2, 3), (3, 4)], 0)]),
        // 30,000 instructions at IPC 0.5 and 3 GHz: 20 µs.
        operations: BTreeMap::from([(0, 30_000)]),
    };
    let mut rt = runtime(&mut app, 500);
    let mut link = Recorder::default();
    let mut now = Ticks::ZERO;
    advance(&mut rt, &mut link, &mut now, ns(100));
    for index in 0..3 {
        produce(&rt, 1, index, index);
    }
    advance(&mut rt, &mut link, &mut now, ns(10_000));
    // Tasks 1 and 2 have finished, task 0 runs: nothing may go back to the device.
    let state = rt.ring_state().expect("a ring").expect("ring state");
    assert_eq!(state.polled, 3);
    assert_eq!((state.metadata_head, state.payload_head), (0, 0));
    assert_eq!(state.gap_slots, 2);
    assert!(flow_control(&link).is_empty(), "{:?}", flow_control(&link));
    advance(&mut rt, &mut link, &mut now, ns(30_000));
    // Task 0 finished: both heads pass all three records, in one store.
    let heads: Vec<(u64, u64)> = flow_control(&link)
        .iter()
        .map(|(_, message)| (message.metadata_head, message.payload_head))
        .collect();
    assert_eq!(heads, vec![(3, 3)]);
    let task_0_end = spans(&mut rt)
        .iter()
        .find(|span| matches!(span.kind, HostSpanKind::Task { task: 0, .. }))
        .map(|span| span.end)
        .expect("task 0 ran");
    assert!(flow_control(&link)[0].0 >= task_0_end);
}

#[test]
fn input_stores_occupy_the_control_thread_and_no_poll_runs_during_them() {
    // Launch 1 streams one chunk; launch 2 stores 64 KiB of inputs (2,048 ns at 32 GB/s),
    // with a polling interval of 500 ns.
    let mut app = ScriptedApp::instant([plan(1, &[(0, 1)], 0), plan(1, &[(0, 1)], 64 * 1024)]);
    let mut rt = runtime(&mut app, 500);
    let mut link = Recorder::default();
    let mut now = Ticks::ZERO;
    advance(&mut rt, &mut link, &mut now, ns(100));
    produce(&rt, 1, 0, 0);
    // Launch 1's poll at 500 ns, its task and its final step end before 900 ns; launch 2's
    // input store is then under way, and its record lands during it.
    advance(&mut rt, &mut link, &mut now, ns(900));
    produce(&rt, 2, 1, 0);
    advance(&mut rt, &mut link, &mut now, ns(10_000));
    let spans = spans(&mut rt);
    let input = spans
        .iter()
        .find(|span| matches!(span.kind, HostSpanKind::InputStore { .. }))
        .copied()
        .expect("launch 2 stored its inputs");
    assert_eq!(input.end.since(input.start), ns(2_048));
    let launch_2 = spans
        .iter()
        .find(|span| matches!(span.kind, HostSpanKind::LaunchStore { tag: 2 }))
        .copied()
        .expect("launch 2 was stored");
    assert_eq!(
        launch_2.start, input.end,
        "the launch store follows the inputs"
    );
    // No poll ran during the 2 µs store (launch 1's result had all arrived, so polling had
    // stopped; launch 2's starts one interval after its launch store).
    let first_after = spans
        .iter()
        .filter(|span| matches!(span.kind, HostSpanKind::LocalPoll { .. }))
        .map(|span| span.start)
        .filter(|&start| start >= input.start)
        .min()
        .expect("polls after the input store");
    assert_eq!(first_after, launch_2.start.plus(ns(500)));
    // So the record that landed during the store is taken by that poll (80 ns tail load and
    // 5 ns push), and its task starts only then.
    let task = spans
        .iter()
        .find(|span| matches!(span.kind, HostSpanKind::Task { tag: 2, .. }))
        .copied()
        .expect("launch 2's task ran");
    assert!(input.start < ns(900) && ns(900) < input.end, "{input:?}");
    assert_eq!(task.start, first_after.plus(ns(85)));
    // The control thread does one thing at a time.
    let control = control_spans(&spans);
    for pair in control.windows(2) {
        assert!(
            pair[1].start >= pair[0].end,
            "overlapping control-thread spans: {pair:?}"
        );
    }
    assert!(rt.measurements().stall >= ns(2_048));
}

#[test]
fn an_interrupt_handler_costs_one_poll_whatever_it_takes_and_leaves_the_control_thread_free() {
    let mut app = ScriptedApp::instant([plan(1002, &[(0, 1), (1, 1001), (1001, 1002)], 0)]);
    let mut rt = runtime_in(Mode::AxleIrq, &mut app, 500);
    let mut link = Recorder::default();
    let mut now = Ticks::ZERO;
    advance(&mut rt, &mut link, &mut now, ns(1_000));
    produce(&rt, 1, 0, 0);
    interrupt(&mut rt, &mut now, ns(2_000), 1);
    advance(&mut rt, &mut link, &mut now, ns(3_000));
    for index in 1..=1000 {
        produce(&rt, 1, index, index);
    }
    let stall_before = rt.measurements().stall;
    interrupt(&mut rt, &mut now, ns(4_000), 1001);
    advance(&mut rt, &mut link, &mut now, ns(4_050));
    // A handler is not control-thread work: the control thread stays free.
    assert!(rt.host.control_free <= ns(4_000));
    assert_eq!(rt.measurements().stall.since(stall_before), ns(80 + 5));
    let spans = spans(&mut rt);
    let handlers: Vec<(u32, Ticks)> = spans
        .iter()
        .filter_map(|span| match span.kind {
            HostSpanKind::InterruptHandler { records, .. } => {
                Some((records, span.end.since(span.start)))
            }
            _ => None,
        })
        .collect();
    assert_eq!(handlers, vec![(1, ns(85)), (1000, ns(85))]);
}

#[test]
fn polling_stops_once_every_result_of_the_launch_has_arrived() {
    // Two chunks; task 0 needs both and takes long (its host work, 30 µs). Once both records
    // have been polled, nothing more can arrive for this launch: no poll while the task runs.
    let mut app = ScriptedApp {
        launches: VecDeque::from([plan(2, &[(0, 2)], 0)]),
        operations: BTreeMap::from([(0, 45_000)]),
    };
    let mut rt = runtime(&mut app, 500);
    let mut link = Recorder::default();
    let mut now = Ticks::ZERO;
    advance(&mut rt, &mut link, &mut now, ns(1_000));
    produce(&rt, 1, 0, 0);
    produce(&rt, 1, 1, 1);
    advance(&mut rt, &mut link, &mut now, ns(2_000));
    let polls_after_arrival = rt.measurements().polls;
    advance(&mut rt, &mut link, &mut now, ns(20_000));
    assert_eq!(
        rt.measurements().polls,
        polls_after_arrival,
        "no poll while only the task is left"
    );
    let polls = polls(&spans(&mut rt));
    assert!(polls.iter().any(|&(records, _)| records == 2), "{polls:?}");
}

#[test]
fn an_interrupt_handlers_batch_reaches_the_scheduler_when_that_handler_ends() {
    // Two handlers overlap: the first (chunk 0) at 2,000 ns, the second (chunk 1) 30 ns
    // later. Each takes 85 ns; task 1 (chunk 1) may start only when the second one ends,
    // not when the first does.
    let mut app = ScriptedApp::instant([plan(3, &[(0, 1), (1, 2), (2, 3)], 0)]);
    let mut rt = runtime_in(Mode::AxleIrq, &mut app, 500);
    let mut link = Recorder::default();
    let mut now = Ticks::ZERO;
    advance(&mut rt, &mut link, &mut now, ns(1_000));
    produce(&rt, 1, 0, 0);
    interrupt(&mut rt, &mut now, ns(2_000), 1);
    advance(&mut rt, &mut link, &mut now, ns(2_030));
    produce(&rt, 1, 1, 1);
    interrupt(&mut rt, &mut now, ns(2_030), 2);
    advance(&mut rt, &mut link, &mut now, ns(3_000));
    let spans = spans(&mut rt);
    let start = |task: u32| {
        spans
            .iter()
            .find_map(|span| match span.kind {
                HostSpanKind::Task { task: t, .. } if t == task => Some(span.start),
                _ => None,
            })
            .expect("the task ran")
    };
    assert_eq!(start(0), ns(2_085));
    assert_eq!(start(1), ns(2_115));
}

#[test]
fn the_pending_launch_is_the_one_submitted_and_not_completed() {
    // Two launches of two chunks, one task each chunk.
    let mut app =
        ScriptedApp::instant([plan(2, &[(0, 1), (1, 2)], 0), plan(2, &[(0, 1), (1, 2)], 0)]);
    let mut rt = runtime(&mut app, 1_000);
    assert_eq!(
        rt.pending_launch(),
        None,
        "nothing submitted before the first turn"
    );
    let mut link = Recorder::default();
    let mut now = Ticks::ZERO;
    advance(&mut rt, &mut link, &mut now, ns(500));
    let first = rt.pending_launch().expect("launch 1 submitted");
    assert_eq!((first.tag, first.started), (1, Ticks::ZERO));
    assert_eq!((first.result_length, first.results_in), (64, false));
    assert_eq!(rt.measurements().launches, 0);
    // Its two chunks arrive: it completes, and launch 2 is the pending one.
    produce(&rt, 1, 0, 0);
    produce(&rt, 1, 1, 1);
    advance(&mut rt, &mut link, &mut now, ns(50_000));
    assert_eq!(rt.measurements().launches, 1);
    let second = rt.pending_launch().expect("launch 2 submitted");
    assert_eq!(second.tag, 2);
    assert!(second.started > Ticks::ZERO);
}
