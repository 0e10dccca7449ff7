//! `axle run --trace FILE` (`axle::run::run_traced`): the file is valid Chrome trace JSON
//! that Perfetto opens, it shows every track of the paper's Figure 9, one span per CCM work
//! item, the DMA executor's back-pressure and the ring's occupancy, and tracing changes
//! nothing about the run: the report is the same and two runs write the same bytes.
//!
//! Run: `cargo test --release --test trace`.

use axle::config::AxleConfig;
use axle::run::{run, run_traced, RunRequest};
use host_runtime::Mode;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

const MODES: [Mode; 4] = [Mode::Rp, Mode::Bs, Mode::Axle, Mode::AxleIrq];

fn request(workload: &str, mode: Mode) -> RunRequest {
    RunRequest {
        workload: workload.into(),
        mode,
        config: AxleConfig::default(),
        data: None,
        wall_limit: None,
    }
}

/// A trace file path of this test process.
fn trace_path(label: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "axle-trace-test-{}-{label}.json",
        std::process::id()
    ))
}

/// Runs `request` traced; returns the report (verified) and the trace's bytes.
fn traced(request: &RunRequest, label: &str) -> (axle::run::RunReport, Vec<u8>) {
    let path = trace_path(label);
    let report = run_traced(request, &path).unwrap_or_else(|error| {
        panic!(
            "{} in mode {} failed: {error:#}",
            request.workload,
            request.mode.name()
        )
    });
    assert!(report.verified, "{}", report.verification);
    let bytes = std::fs::read(&path).expect("the trace file was written");
    let _ = std::fs::remove_file(&path);
    (report, bytes)
}

/// A parsed trace: its events and the named tracks.
struct Trace {
    events: Vec<Value>,
    /// (pid, tid) -> thread name.
    tracks: BTreeMap<(u64, u64), String>,
}

impl Trace {
    /// Parses `bytes` and checks the format every event must follow.
    fn parse(bytes: &[u8]) -> Trace {
        let value: Value = serde_json::from_slice(bytes).expect("the trace is JSON");
        assert_eq!(value["displayTimeUnit"], "ns");
        let events = value["traceEvents"]
            .as_array()
            .expect("a traceEvents array")
            .clone();
        let mut tracks = BTreeMap::new();
        let mut processes = BTreeSet::new();
        for event in &events {
            if event["ph"] == "M" {
                let pid = event["pid"].as_u64().expect("metadata pid");
                match event["name"].as_str() {
                    Some("thread_name") => {
                        let tid = event["tid"].as_u64().expect("thread_name tid");
                        let name = event["args"]["name"].as_str().expect("a thread name");
                        tracks.insert((pid, tid), name.to_string());
                    }
                    Some("process_name") => {
                        processes.insert(pid);
                    }
                    _ => {}
                }
            }
        }
        assert_eq!(processes, BTreeSet::from([1, 2]), "device and host named");
        let trace = Trace { events, tracks };
        for event in &trace.events {
            let ph = event["ph"].as_str().expect("every event has a phase");
            if ph == "M" {
                continue;
            }
            if ph == "C" {
                // The ring-occupancy counter: a series of the device process.
                assert_eq!(event["name"], axle::trace::OCCUPANCY_COUNTER, "{event}");
                assert_eq!(event["pid"], 1, "{event}");
                assert!(event["args"]["metadata"].is_u64(), "{event}");
                assert!(event["args"]["payload"].is_u64(), "{event}");
                continue;
            }
            if matches!(ph, "s" | "t" | "f") {
                // A flow event: one step of a chain of arrows, bound to the slice of its
                // track that encloses it (the last one says so with "bp":"e").
                assert!(event["name"].is_string(), "{event}");
                assert_eq!(event["cat"], event["name"], "{event}");
                assert!(event["id"].is_u64(), "{event}");
                assert!(event["ts"].as_f64().is_some_and(|ts| ts >= 0.0), "{event}");
                assert_eq!(event["bp"] == "e", ph == "f", "{event}");
                assert!(
                    trace.tracks.contains_key(&trace.key(event)),
                    "flow event on an unnamed track: {event}"
                );
                continue;
            }
            assert!(
                matches!(ph, "X" | "i"),
                "only complete events, instants, flow events and the counter: {event}"
            );
            assert!(event["name"].is_string(), "{event}");
            let ts = event["ts"].as_f64().expect("numeric ts");
            assert!(ts >= 0.0, "{event}");
            if ph == "X" {
                let dur = event["dur"].as_f64().expect("numeric dur");
                assert!(dur >= 0.0, "{event}");
            }
            assert!(
                trace.tracks.contains_key(&trace.key(event)),
                "event on an unnamed track: {event}"
            );
        }
        trace
    }

    fn key(&self, event: &Value) -> (u64, u64) {
        (
            event["pid"].as_u64().unwrap_or(u64::MAX),
            event["tid"].as_u64().unwrap_or(u64::MAX),
        )
    }

    /// Complete events named `name`.
    fn spans(&self, name: &str) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|event| event["ph"] == "X" && event["name"] == name)
            .collect()
    }

    /// Instants named `name`.
    fn instants(&self, name: &str) -> usize {
        self.events
            .iter()
            .filter(|event| event["ph"] == "i" && event["name"] == name)
            .count()
    }

    /// Names of the tracks that carry at least one event.
    fn used_tracks(&self) -> BTreeSet<&str> {
        self.events
            .iter()
            .filter(|event| event["ph"] != "M")
            .filter_map(|event| self.tracks.get(&self.key(event)).map(String::as_str))
            .collect()
    }

    /// Whether some used track's name starts with `prefix`.
    fn has_track(&self, prefix: &str) -> bool {
        self.used_tracks()
            .iter()
            .any(|name| name.starts_with(prefix))
    }
}

/// Device memory that keeps nothing: enough to plan a workload's launches.
struct Discard {
    next: u64,
}

impl host_runtime::app::DeviceLoader for Discard {
    fn allocate(
        &mut self,
        length: u64,
        align: u64,
    ) -> Result<shared_abi::DeviceAddress, host_runtime::app::LoadError> {
        let address = self.next.next_multiple_of(align.max(1));
        self.next = address + length;
        Ok(shared_abi::DeviceAddress(address))
    }

    fn write(
        &mut self,
        _: shared_abi::DeviceAddress,
        _: &[u8],
    ) -> Result<(), host_runtime::app::LoadError> {
        Ok(())
    }
}

/// CCM work items of every launch of `workload`: KNN computes one 4-byte distance per item.
fn knn_items(workload: &str) -> u64 {
    let config = AxleConfig::default();
    let options = workloads::WorkloadOptions {
        scale: config.workload.scale,
        seed: config.workload.seed,
        data_dir: None,
        queries: Some(config.workload.queries),
        k: Some(config.workload.k),
        task_rows: Some(config.workload.task_rows),
        iterations: Some(config.workload.iterations),
    };
    let mut app = workloads::build(workload, &options).expect("the workload builds");
    app.load(&mut Discard { next: 1 << 20 })
        .expect("the data set loads");
    let mut items = 0;
    while let Some(plan) = app.next_launch().unwrap() {
        items += plan.command.result_length / 4;
    }
    items
}

#[test]
fn axle_trace_is_chrome_json_with_every_figure_9_track() {
    let (report, bytes) = traced(&request("knn-c", Mode::Axle), "axle-tracks");
    let trace = Trace::parse(&bytes);
    for prefix in [
        "CCM unit ",
        "DMA lane ",
        "link: host → device",
        "link: device → host",
        "host control: launches",
        "host control: polls",
        "host control: flow-control stores",
        "host worker ",
        "device control plane",
    ] {
        assert!(
            trace.has_track(prefix),
            "no track {prefix:?} in {:?}",
            trace.used_tracks()
        );
    }
    for name in [
        "item",
        "DMA prepare",
        "DMA transfer",
        "DMA writes",
        "CXL.mem store",
        "local poll",
        "flow-control store",
        "task",
        "launch store",
    ] {
        assert!(!trace.spans(name).is_empty(), "no {name:?} span");
    }
    assert!(trace.instants("flow control arrives") > 0);
    assert!(trace.instants("launch") > 0);
    // Every flow-control store the host sent reached the device, but for the last one, which
    // may still be on the link when the run ends (the host sends it after its last task).
    let (stores, arrivals) = (
        trace.spans("flow-control store").len(),
        trace.instants("flow control arrives"),
    );
    assert!(
        arrivals == stores || arrivals + 1 == stores,
        "{stores} flow-control stores, {arrivals} arrivals"
    );
    // Polls say how many records they moved, and together they moved one per payload.
    let records: u64 = trace
        .spans("local poll")
        .iter()
        .map(|poll| poll["args"]["records"].as_u64().expect("records"))
        .sum();
    assert_eq!(records, report.metrics.payloads);
    // One transfer span per DMA request (several payloads each once the channels are busy).
    assert_eq!(
        trace.spans("DMA transfer").len() as u64,
        report.metrics.dma_requests
    );
}

#[test]
fn rp_trace_shows_remote_polls_result_loads_and_the_mailbox() {
    let (report, bytes) = traced(&request("knn-a", Mode::Rp), "rp");
    let trace = Trace::parse(&bytes);
    let polls = trace.spans("remote poll");
    assert!(!polls.is_empty());
    // Only the last poll of each launch finds it complete.
    let complete = polls
        .iter()
        .filter(|poll| poll["args"]["complete"] == true)
        .count();
    assert_eq!(complete as u64, report.metrics.launches);
    assert_eq!(
        trace.spans("result load").len() as u64,
        report.metrics.launches
    );
    assert_eq!(trace.spans("CXL.io read").len(), polls.len());
    assert_eq!(
        trace.instants("doorbell arrives"),
        trace.instants("doorbell")
    );
    assert!(trace.has_track("host control: polls"));
    assert!(trace.spans("DMA transfer").is_empty(), "RP streams nothing");
}

#[test]
fn bs_trace_shows_the_synchronous_wait_and_the_result_load() {
    let (report, bytes) = traced(&request("knn-a", Mode::Bs), "bs");
    let trace = Trace::parse(&bytes);
    assert_eq!(
        trace.spans("synchronous wait (BS)").len() as u64,
        report.metrics.launches
    );
    assert_eq!(
        trace.spans("result load").len() as u64,
        report.metrics.launches
    );
    assert!(!trace.spans("CXL.mem load response").is_empty());
}

#[test]
fn axle_interrupt_trace_shows_one_handler_per_raised_interrupt() {
    let (_, bytes) = traced(&request("knn-a", Mode::AxleIrq), "irq");
    let trace = Trace::parse(&bytes);
    let raised = trace.instants("interrupt raised");
    assert!(raised > 0);
    assert_eq!(trace.spans("interrupt handler").len(), raised);
    assert!(trace.spans("local poll").is_empty());
    // Handlers run on the cores the interrupts reach, not on the control thread.
    for handler in trace.spans("interrupt handler") {
        let track = &trace.tracks[&trace.key(handler)];
        assert!(track.starts_with("host interrupts: lane "), "{track}");
    }
}

#[test]
fn one_item_span_per_ccm_work_item() {
    for workload in ["knn-a", "knn-c"] {
        let (_, bytes) = traced(&request(workload, Mode::Axle), &format!("items-{workload}"));
        let trace = Trace::parse(&bytes);
        let items = trace.spans("item");
        assert_eq!(items.len() as u64, knn_items(workload), "{workload}");
        let distinct: BTreeSet<(u64, u64)> = items
            .iter()
            .map(|item| {
                (
                    item["args"]["launch"].as_u64().expect("launch"),
                    item["args"]["item"].as_u64().expect("item"),
                )
            })
            .collect();
        assert_eq!(distinct.len(), items.len(), "{workload}: each item once");
        for item in &items {
            let track = &trace.tracks[&trace.key(item)];
            assert!(track.starts_with("CCM unit "), "{track}");
        }
    }
}

/// `--no-deadlock`: each spill into the overflow buffer is one "overflow spill" span on the
/// control thread's track, with the bytes it copied. OPT-2.7B at small scale spills in a ring
/// of 7 payload slots (a 12.5% ring, 6,250 slots, never fills there, and 8 slots do not
/// spill): the spans are the report's spills and bytes, and a run without the option (the
/// ring holds enough) has none.
#[test]
fn overflow_spills_are_spans_on_the_control_thread_with_their_bytes() {
    let mut spilling = request("opt-2.7b", Mode::Axle);
    spilling.config.workload.scale = workloads::Scale::Small;
    spilling.config.axle.slots = 7;
    spilling.config.host.no_deadlock = true;
    let (report, bytes) = traced(&spilling, "overflow-spill");
    let json = serde_json::to_value(&report).expect("the report is JSON");
    let spills = json["overflow_spills"].as_u64().expect("the run spilled");
    let spilled = json["overflow_bytes"].as_u64().expect("overflow bytes");
    assert!(spills > 0 && spilled > 0, "{json}");
    let trace = Trace::parse(&bytes);
    let spans = trace.spans("overflow spill");
    assert_eq!(spans.len() as u64, spills);
    let traced_bytes: u64 = spans
        .iter()
        .map(|span| span["args"]["bytes"].as_u64().expect("a byte count"))
        .sum();
    assert_eq!(traced_bytes, spilled);
    for span in &spans {
        assert_eq!(
            trace.tracks[&trace.key(span)],
            "host control: launches, stores, loads"
        );
        assert!(span["dur"].as_f64().unwrap_or(0.0) > 0.0, "{span}");
    }

    let mut plain = request("opt-2.7b", Mode::Axle);
    plain.config.workload.scale = workloads::Scale::Small;
    plain.config.axle.slots = 6_250;
    plain.config.host.no_deadlock = true;
    let (_, bytes) = traced(&plain, "overflow-none");
    assert!(Trace::parse(&bytes).spans("overflow spill").is_empty());
}

#[test]
fn spans_on_one_track_never_overlap() {
    for mode in MODES {
        let (_, bytes) = traced(&request("knn-a", mode), &format!("overlap-{}", mode.name()));
        let trace = Trace::parse(&bytes);
        let mut by_track: BTreeMap<(u64, u64), Vec<(u64, u64)>> = BTreeMap::new();
        for event in trace.events.iter().filter(|event| event["ph"] == "X") {
            // Whole nanoseconds, exactly: ts and dur are written to the nanosecond.
            let start = (event["ts"].as_f64().unwrap_or(0.0) * 1000.0).round() as u64;
            let length = (event["dur"].as_f64().unwrap_or(0.0) * 1000.0).round() as u64;
            by_track
                .entry(trace.key(event))
                .or_default()
                .push((start, start + length));
        }
        for (track, mut spans) in by_track {
            spans.sort_unstable();
            for pair in spans.windows(2) {
                assert!(
                    pair[1].0 >= pair[0].1,
                    "{}: overlapping spans on {}: {:?}",
                    mode.name(),
                    trace.tracks[&track],
                    pair
                );
            }
        }
    }
}

/// The AXLE control thread does one thing at a time: its spans on its three tracks (launches
/// and input stores, polls, flow-control stores) never overlap one another, also in workloads
/// that store launch inputs while polls fall due.
#[test]
fn axle_control_thread_spans_never_overlap_across_its_tracks() {
    // Both store launch inputs (contributions, bag indices); SSSP stores none.
    for workload in ["pagerank", "dlrm"] {
        let mut request = request(workload, Mode::Axle);
        request.config.workload.scale = workloads::Scale::Small;
        request.config.host.poll_interval_ns = 500;
        let (_, bytes) = traced(&request, &format!("control-{workload}"));
        let trace = Trace::parse(&bytes);
        let mut spans: Vec<(u64, u64, String)> = trace
            .events
            .iter()
            .filter(|event| event["ph"] == "X")
            .filter(|event| {
                trace
                    .tracks
                    .get(&trace.key(event))
                    .is_some_and(|track| track.starts_with("host control"))
            })
            .map(|event| {
                let start = (event["ts"].as_f64().unwrap_or(0.0) * 1000.0).round() as u64;
                let length = (event["dur"].as_f64().unwrap_or(0.0) * 1000.0).round() as u64;
                let name = event["name"].as_str().unwrap_or("").to_string();
                (start, start + length, name)
            })
            .collect();
        assert!(
            spans.iter().any(|span| span.2 == "input store"),
            "{workload}: no input store"
        );
        spans.sort();
        for pair in spans.windows(2) {
            assert!(
                pair[1].0 >= pair[0].1,
                "{workload}: overlapping control-thread spans {pair:?}"
            );
        }
    }
}

#[test]
fn tracing_leaves_the_report_unchanged() {
    for mode in MODES {
        let request = request("knn-a", mode);
        let plain = run(&request).expect("the untraced run");
        let (traced_report, _) = traced(&request, &format!("report-{}", mode.name()));
        assert_eq!(
            serde_json::to_string(&plain).expect("report JSON"),
            serde_json::to_string(&traced_report).expect("report JSON"),
            "{}",
            mode.name()
        );
    }
}

#[test]
fn identical_runs_write_identical_trace_files() {
    let request = request("knn-c", Mode::Axle);
    let (_, first) = traced(&request, "identical-1");
    let (_, second) = traced(&request, "identical-2");
    assert!(first == second, "two runs of one configuration differ");
}

#[test]
fn a_trace_file_that_cannot_be_created_fails_before_the_run() {
    let path = std::env::temp_dir()
        .join(format!("axle-no-such-directory-{}", std::process::id()))
        .join("trace.json");
    let error = run_traced(&request("knn-a", Mode::Axle), &path)
        .expect_err("an uncreatable trace file is an error");
    assert!(
        format!("{error:#}").contains("creating the trace file"),
        "{error:#}"
    );
}

#[test]
fn the_cli_refuses_trace_with_attach_or_wall_clock() {
    let path = trace_path("cli-refused");
    for extra in [
        &["--attach", "/nonexistent/axle.sock"][..],
        &["--clock", "wall"][..],
    ] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_axle"))
            .args(["run", "knn-a", "--mode", "axle", "--trace"])
            .arg(&path)
            .args(extra)
            .output()
            .expect("the axle binary runs");
        assert!(!output.status.success(), "{extra:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("--trace records an in-process virtual-time run only"),
            "{extra:?}: {stderr}"
        );
        assert!(!path.exists(), "{extra:?}: nothing written");
    }
}

#[test]
fn the_cli_writes_a_trace_and_prints_the_same_report() {
    let path = trace_path("cli");
    let run_cli = |trace: bool| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_axle"));
        command.args(["run", "knn-a", "--mode", "axle", "--json"]);
        if trace {
            command.arg("--trace").arg(&path);
        }
        let output = command.output().expect("the axle binary runs");
        assert!(output.status.success(), "{output:?}");
        output.stdout
    };
    assert_eq!(run_cli(false), run_cli(true));
    let bytes = std::fs::read(&path).expect("the trace file was written");
    let _ = std::fs::remove_file(&path);
    Trace::parse(&bytes);
}

/// The occupancy counter's samples: (time in ns, metadata slots, payload slots).
fn occupancy(trace: &Trace) -> Vec<(u64, u64, u64)> {
    trace
        .events
        .iter()
        .filter(|event| event["ph"] == "C")
        .map(|event| {
            (
                (event["ts"].as_f64().unwrap_or(0.0) * 1000.0).round() as u64,
                event["args"]["metadata"].as_u64().unwrap_or(0),
                event["args"]["payload"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// A ring of 16 slots with in-order streaming makes the DMA executor wait for credit: the
/// back-pressure track's slices add up to the report's back-pressure time, and the occupancy
/// counter fills the ring (16 slots in use) and never exceeds it.
#[test]
fn back_pressure_slices_sum_to_the_reported_time_and_occupancy_stays_within_the_ring() {
    let mut request = request("knn-a", Mode::Axle);
    request.config.workload.scale = workloads::Scale::Small;
    request.config.axle.slots = 16;
    request.config.axle.out_of_order = false;
    let (report, bytes) = traced(&request, "backpressure");
    assert!(
        report.metrics.backpressure_ns > 0,
        "no back-pressure to see"
    );
    let trace = Trace::parse(&bytes);
    assert!(trace.has_track("DMA executor: back-pressure"));
    let slices = trace.spans("back-pressure");
    assert!(!slices.is_empty());
    let total: u64 = slices
        .iter()
        .map(|event| (event["dur"].as_f64().unwrap_or(0.0) * 1000.0).round() as u64)
        .sum();
    // Each slice's ends are rounded to the nanosecond.
    let slack = slices.len() as u64;
    assert!(
        total.abs_diff(report.metrics.backpressure_ns) <= slack,
        "slices {total} ns, report {} ns",
        report.metrics.backpressure_ns
    );
    let samples = occupancy(&trace);
    assert!(samples.len() > 2, "{samples:?}");
    assert!(
        samples.windows(2).all(|pair| pair[0].0 < pair[1].0),
        "time order"
    );
    assert!(
        samples
            .iter()
            .all(|&(_, metadata, payload)| metadata <= 16 && payload <= 16),
        "{samples:?}"
    );
    assert!(
        samples.iter().any(|&(_, _, payload)| payload == 16),
        "the ring never filled although the executor waited for credit: {samples:?}"
    );
    // The slots in use fall when the host's flow-control stores release them.
    assert!(
        samples.windows(2).any(|pair| pair[1].2 < pair[0].2),
        "{samples:?}"
    );
}

/// The default ring never fills: no back-pressure slice; the occupancy counter is there in
/// the streaming modes only.
#[test]
fn without_back_pressure_there_is_no_slice_and_rp_has_no_ring_counter() {
    let (report, bytes) = traced(&request("knn-a", Mode::Axle), "no-backpressure");
    assert_eq!(report.metrics.backpressure_ns, 0);
    let trace = Trace::parse(&bytes);
    assert!(trace.spans("back-pressure").is_empty());
    let samples = occupancy(&trace);
    assert!(!samples.is_empty());
    assert!(
        samples
            .iter()
            .any(|&(_, metadata, _)| metadata == report.metrics.payloads),
        "every record claimed shows in the counter at some point: {samples:?}"
    );
    let (_, bytes) = traced(&request("knn-a", Mode::Rp), "rp-counter");
    assert!(occupancy(&Trace::parse(&bytes)).is_empty());
}

/// Whole nanoseconds of a timestamp or duration written in microseconds.
fn ns(value: &Value) -> u64 {
    (value.as_f64().unwrap_or(f64::NAN) * 1000.0).round() as u64
}

/// A complete event with its start and end in nanoseconds.
type Placed<'a> = (u64, u64, &'a Value);

/// One step of a flow chain, with the slice it binds to.
struct Hop<'a> {
    /// The flow event.
    event: &'a Value,
    /// The complete event of the same track whose interior holds the flow event's timestamp.
    slice: &'a Value,
}

impl Trace {
    /// The chains of flow events named `name`, by id, each in file order, each event with
    /// the slice it binds to. Panics unless every event lies strictly inside exactly one
    /// complete event of its track (never on a boundary two adjacent slices share), so that
    /// Perfetto and `chrome://tracing` bind it to the same slice.
    fn chains(&self, name: &str) -> BTreeMap<u64, Vec<Hop<'_>>> {
        let mut slices: BTreeMap<(u64, u64), Vec<Placed<'_>>> = BTreeMap::new();
        for event in self.events.iter().filter(|event| event["ph"] == "X") {
            let start = ns(&event["ts"]);
            slices.entry(self.key(event)).or_default().push((
                start,
                start + ns(&event["dur"]),
                event,
            ));
        }
        for list in slices.values_mut() {
            list.sort_by_key(|&(start, end, _)| (start, end));
        }
        let mut chains: BTreeMap<u64, Vec<Hop<'_>>> = BTreeMap::new();
        for event in &self.events {
            if !matches!(event["ph"].as_str(), Some("s" | "t" | "f")) || event["name"] != name {
                continue;
            }
            let at = ns(&event["ts"]);
            let track = slices.get(&self.key(event)).map_or(&[][..], Vec::as_slice);
            let touching: Vec<&Placed<'_>> = track
                .iter()
                .filter(|&&(start, end, _)| start <= at && at <= end)
                .collect();
            assert!(
                touching.len() == 1 && touching[0].0 < at && at < touching[0].1,
                "flow event not strictly inside one slice of its track: {event} in {:?}",
                touching.iter().map(|slice| slice.2).collect::<Vec<_>>()
            );
            let id = event["id"].as_u64().expect("a numeric id");
            chains.entry(id).or_default().push(Hop {
                event,
                slice: touching[0].2,
            });
        }
        for (id, hops) in &chains {
            let phases: String = hops
                .iter()
                .map(|hop| hop.event["ph"].as_str().unwrap_or("?"))
                .collect();
            assert!(
                phases.len() >= 2
                    && phases.starts_with('s')
                    && phases.ends_with('f')
                    && phases[1..phases.len() - 1].chars().all(|ph| ph == 't'),
                "{name} {id}: phases {phases}"
            );
            assert!(
                hops.windows(2)
                    .all(|pair| ns(&pair[0].event["ts"]) <= ns(&pair[1].event["ts"])),
                "{name} {id}: timestamps decrease along the chain"
            );
        }
        chains
    }
}

/// Checks that `hops` link an item, the DMA request, `poll` and a task, and that they are
/// the record `sequence`'s: the poll's batch holds it and the item and task are of its
/// launch.
fn assert_record_chain(sequence: u64, hops: &[Hop<'_>], poll: &str) {
    let names: Vec<&str> = hops
        .iter()
        .map(|hop| hop.slice["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        names,
        ["item", "DMA transfer", poll, "task"],
        "record {sequence}"
    );
    let batch = &hops[2].slice["args"];
    let first = batch["first"].as_u64().expect("a poll names its batch");
    let records = batch["records"].as_u64().expect("records");
    assert!(
        (first..first + records).contains(&sequence),
        "record {sequence} linked to the poll of {first}..{}",
        first + records
    );
    assert_eq!(
        hops[0].slice["args"]["launch"], hops[3].slice["args"]["launch"],
        "record {sequence}: item and task of one launch"
    );
}

/// AXLE and AXLE_Interrupt: every record a task read has a complete chain of flow events,
/// id the record's sequence number, from the CCM item that completed it to its DMA request,
/// the poll (or handler) whose batch held it and the first task that read it; timestamps
/// never decrease along it and each event binds to a slice.
#[test]
fn every_consumed_record_has_a_chain_from_its_item_to_its_task() {
    for (mode, poll) in [
        (Mode::Axle, "local poll"),
        (Mode::AxleIrq, "interrupt handler"),
    ] {
        let (report, bytes) = traced(&request("knn-a", mode), &format!("flows-{}", mode.name()));
        let trace = Trace::parse(&bytes);
        let chains = trace.chains(axle::trace::flows::RECORD);
        let payloads = report.metrics.payloads;
        assert!(payloads > 0);
        assert_eq!(
            chains.keys().copied().collect::<Vec<u64>>(),
            (0..payloads).collect::<Vec<u64>>(),
            "{}: one chain per record",
            mode.name()
        );
        for (&sequence, hops) in &chains {
            assert_record_chain(sequence, hops, poll);
        }
        // Each DMA request's chains carry as many records as its transfer wrote.
        let mut per_request: BTreeMap<u64, u64> = BTreeMap::new();
        for hops in chains.values() {
            let request = hops[1].slice["args"]["request"].as_u64().expect("request");
            *per_request.entry(request).or_default() += 1;
        }
        assert_eq!(
            per_request.values().sum::<u64>(),
            payloads,
            "{}",
            mode.name()
        );
        assert!(trace.chains(axle::trace::flows::FURTHER_READER).is_empty());
    }
}

/// OPT: every record is read by several host tasks. The first to start ends the record's
/// chain; each other one gets an arrow of its own from the poll that saw the record.
#[test]
fn a_record_read_by_several_tasks_links_each_of_them_to_its_poll() {
    let mut request = request("opt-2.7b", Mode::Axle);
    request.config.workload.scale = workloads::Scale::Small;
    let (report, bytes) = traced(&request, "flows-opt");
    let trace = Trace::parse(&bytes);
    let chains = trace.chains(axle::trace::flows::RECORD);
    assert_eq!(chains.len() as u64, report.metrics.payloads);
    for (&sequence, hops) in &chains {
        assert_record_chain(sequence, hops, "local poll");
    }
    let further = trace.chains(axle::trace::flows::FURTHER_READER);
    assert!(!further.is_empty(), "no record with a second reader");
    // (record, task start, task track) of every read the arrows show: each once.
    let mut reads: BTreeSet<(u64, u64, u64)> = BTreeSet::new();
    for (&sequence, hops) in &chains {
        assert_eq!(hops[0].event["args"]["record"], sequence);
        let task = hops[3].slice;
        assert!(reads.insert((sequence, ns(&task["ts"]), trace.key(task).1)));
    }
    for hops in further.values() {
        let names: Vec<&str> = hops
            .iter()
            .map(|hop| hop.slice["name"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(names, ["local poll", "task"]);
        let sequence = hops[0].event["args"]["record"]
            .as_u64()
            .expect("an arrow names its record");
        let chain = &chains[&sequence];
        // From the poll that saw the record, to a task no earlier than its first reader.
        assert!(
            std::ptr::eq(hops[0].slice, chain[2].slice),
            "record {sequence}"
        );
        assert!(ns(&chain[3].slice["ts"]) <= ns(&hops[1].slice["ts"]));
        assert_eq!(
            hops[1].slice["args"]["launch"],
            chain[3].slice["args"]["launch"]
        );
        let task = hops[1].slice;
        assert!(
            reads.insert((sequence, ns(&task["ts"]), trace.key(task).1)),
            "record {sequence}: one task linked twice"
        );
    }
    // Every task that ran read something, so each is at the end of some arrow.
    let tasks = trace.spans("task").len();
    let ends: BTreeSet<(u64, u64)> = chains
        .values()
        .chain(further.values())
        .map(|hops| {
            let task = hops.last().expect("a hop").slice;
            (ns(&task["ts"]), trace.key(task).1)
        })
        .collect();
    assert_eq!(ends.len(), tasks);
}

/// RP and BS stream nothing: one chain per launch, from its last item to what saw the
/// launch complete (RP: the remote poll that found it so; BS: the synchronous wait), the
/// result load and the first task.
#[test]
fn rp_and_bs_link_each_launch_from_its_last_item_to_its_first_task() {
    for (mode, seen) in [
        (Mode::Rp, "remote poll"),
        (Mode::Bs, "synchronous wait (BS)"),
    ] {
        let (report, bytes) = traced(&request("knn-a", mode), &format!("flows-{}", mode.name()));
        let trace = Trace::parse(&bytes);
        assert!(trace.chains(axle::trace::flows::RECORD).is_empty());
        let chains = trace.chains(axle::trace::flows::LAUNCH);
        assert_eq!(
            chains.len() as u64,
            report.metrics.launches,
            "{}",
            mode.name()
        );
        for (&tag, hops) in &chains {
            let names: Vec<&str> = hops
                .iter()
                .map(|hop| hop.slice["name"].as_str().unwrap_or(""))
                .collect();
            assert_eq!(
                names,
                ["item", seen, "result load", "task"],
                "{}",
                mode.name()
            );
            if mode == Mode::Rp {
                assert_eq!(hops[1].slice["args"]["complete"], true);
            }
            for hop in [&hops[0], &hops[2], &hops[3]] {
                assert_eq!(hop.slice["args"]["launch"], tag, "{}", mode.name());
            }
            // The chain starts at the launch's last item to end.
            let last_end = trace
                .spans("item")
                .iter()
                .filter(|item| item["args"]["launch"] == tag)
                .map(|item| ns(&item["ts"]) + ns(&item["dur"]))
                .max();
            assert_eq!(
                Some(ns(&hops[0].slice["ts"]) + ns(&hops[0].slice["dur"])),
                last_end
            );
        }
    }
}

/// Items are recorded as they end; their µthread lanes are handed out in start order, so a
/// unit never shows more lanes than it has µthreads (PageRank's items differ in length, which
/// made lanes handed out in end order spill onto the next unit's tracks) and a CCM track's
/// items never overlap.
#[test]
fn ccm_lanes_stay_within_the_units_uthreads() {
    let mut request = request("pagerank", Mode::Axle);
    request.config.workload.scale = workloads::Scale::Small;
    let uthreads = u64::from(
        request.config.device.ccm_sub_cores * request.config.device.ccm_uthreads_per_sub_core,
    );
    let (_, bytes) = traced(&request, "lanes-pagerank");
    let trace = Trace::parse(&bytes);
    let mut by_track: BTreeMap<(u64, u64), Vec<(u64, u64)>> = BTreeMap::new();
    for item in trace.spans("item") {
        let name = &trace.tracks[&trace.key(item)];
        let lane: u64 = name
            .rsplit(' ')
            .next()
            .and_then(|lane| lane.parse().ok())
            .expect("a lane number");
        assert!(lane < uthreads, "{name}: {uthreads} µthreads per unit");
        let start = ns(&item["ts"]);
        by_track
            .entry(trace.key(item))
            .or_default()
            .push((start, start + ns(&item["dur"])));
    }
    for (track, mut spans) in by_track {
        spans.sort_unstable();
        assert!(
            spans.windows(2).all(|pair| pair[1].0 >= pair[0].1),
            "overlapping items on {}",
            trace.tracks[&track]
        );
    }
}
