//! Wall-clock mode under stress (`axle::wall`): the emulator and the host runtime free-running
//! on two threads against the real clock, over the same rings, with seeded random delays on
//! both sides (DMA landings, the device loop, the host's turns, polls and task completions).
//!
//! Hundreds of runs of knn-a, b and c (2 queries each) in AXLE and AXLE_Interrupt, through
//! small rings (8 to 64 slots, so the rings wrap and the device meets back-pressure), with
//! 32- and 64-byte slots, streaming factors of 32 B, 64 B and 25%, in order and out of order,
//! each with its own delays. Every run must verify its answer; every ring invariant the host's
//! ring code checks fails the run when broken; and the test checks the end state explicitly:
//! metadata head == metadata tail == payloads streamed, payload head == payload tail, no gap,
//! the firmware's counters sane (no back-pressure interval left uncounted), device status 0.
//!
//! Whether a ring is too small for the workload's dependency pattern does not depend on
//! timing: the CCM model fixes the order in which chunks complete, hence the payload sequence,
//! and a run deadlocks exactly when some host task's payloads lie a ring's capacity apart in
//! it. So each case first runs in virtual time; where that deadlocks, the wall-clock run must
//! report a deadlock (never hang), and everywhere else it must succeed.
//!
//! Every run is bounded in wall time twice: by its own limit (both threads check it) and by a
//! watchdog here. The tests of this file take a lock, so that two wall-clock runs never compete
//! for the cores. A failure names its case and stress seed; `axle run ... --clock wall
//! --stress-seed SEED` reruns it from the command line.
//!
//! Run: `cargo test --release --test wall_stress`.

use axle::config::AxleConfig;
use axle::run::{run, run_wall, RunRequest};
use axle::wall::{WallOptions, WallRun, WallStress};
use cosim_link::jitter::{Jitter, JitterSpec};
use host_runtime::Mode;
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

mod common;
use common::{finish_axle, spawn_axle};

/// Wall-clock limit of one run (its own bound, checked by both threads).
const RUN_LIMIT: Duration = Duration::from_secs(10);
/// The watchdog's bound on one run, beyond which the test fails as hung.
const WATCHDOG: Duration = Duration::from_secs(30);
/// Stress cases in the main test.
const CASES: u64 = 400;
/// The master seed of the cases (each case draws its own stress seed from it).
const MASTER_SEED: u64 = 0x5eed_a71e;

/// Wall-clock runs are never run side by side.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One stress case.
#[derive(Clone, Debug)]
struct Case {
    workload: &'static str,
    mode: Mode,
    slots: u32,
    slot_size: u32,
    streaming_factor: &'static str,
    in_order: bool,
    poll_ns: u64,
    stress_seed: u64,
}

impl Case {
    fn request(&self) -> RunRequest {
        let mut config = AxleConfig::default();
        config.workload.queries = 2;
        config.axle.slots = self.slots;
        config.axle.slot_size = self.slot_size;
        config.axle.streaming_factor = self.streaming_factor.into();
        config.axle.out_of_order = !self.in_order;
        config.host.poll_interval_ns = self.poll_ns;
        // The runtime's stall timeout is real time in wall-clock mode: long enough that a
        // thread descheduled by a busy machine is not taken for a deadlock.
        config.host.stall_timeout_ns = 300_000_000;
        RunRequest {
            workload: self.workload.into(),
            mode: self.mode,
            config,
            data: None,
            wall_limit: None,
        }
    }

    /// The command line that reruns this case.
    fn command(&self) -> String {
        format!(
            "axle run {} --mode {} --queries 2 --slots {} --slot-size {} --sf {} --poll {}ns{} --clock wall --stress-seed {}",
            self.workload,
            self.mode.name(),
            self.slots,
            self.slot_size,
            self.streaming_factor,
            self.poll_ns,
            if self.in_order { " --in-order" } else { "" },
            self.stress_seed
        )
    }
}

/// `count` cases drawn from `seed`.
fn cases(count: u64, seed: u64) -> Vec<Case> {
    let mut draw = Jitter::new(JitterSpec::NONE, seed, 0);
    let mut pick = |n: usize| draw.below(n as u64) as usize;
    (0..count)
        .map(|_| Case {
            workload: ["knn-a", "knn-b", "knn-c"][pick(3)],
            mode: [Mode::Axle, Mode::AxleIrq][pick(2)],
            slots: 8 + pick(57) as u32,
            slot_size: [32, 64][pick(2)],
            streaming_factor: ["32", "64", "25%"][pick(3)],
            in_order: pick(2) == 0,
            poll_ns: [50, 500, 5000][pick(3)],
            stress_seed: (pick(usize::MAX) as u64) ^ seed,
        })
        .collect()
}

/// Runs `request` in wall-clock mode on another thread; fails the test if it outlives the
/// watchdog.
fn wall_with_watchdog(request: RunRequest, options: WallOptions) -> anyhow::Result<WallRun> {
    let (sender, receiver) = mpsc::channel();
    let label = format!("{} in mode {}", request.workload, request.mode.name());
    std::thread::spawn(move || {
        let _ = sender.send(run_wall(&request, &options));
    });
    match receiver.recv_timeout(WATCHDOG) {
        Ok(result) => result,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{label} in wall-clock mode did not end within {WATCHDOG:?}: it hangs")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{label}: the wall-clock run panicked"),
    }
}

fn options(stress_seed: u64) -> WallOptions {
    WallOptions {
        limit: RUN_LIMIT,
        stress: Some(WallStress::standard(stress_seed)),
    }
}

/// The explicit end-of-run checks (the library runs the same ones; these say them again,
/// one by one, so that a weakened library check cannot hide a broken run).
fn check_end(case: &Case, run: &WallRun) {
    let at = case.command();
    let report = &run.report;
    let end = &run.end;
    assert!(
        report.verified,
        "{at}: wrong answer: {}",
        report.verification
    );
    assert_eq!(report.clock.as_deref(), Some("wall"), "{at}");
    assert_eq!(report.stress_seed, Some(case.stress_seed), "{at}");
    let ring = end
        .ring
        .unwrap_or_else(|| panic!("{at}: a streaming run has a ring"));
    let counters = &end.firmware;
    assert_eq!(ring.device_status, 0, "{at}: device status word");
    assert_eq!(end.broken, None, "{at}: firmware latched BROKEN");
    assert_eq!(ring.metadata_head, ring.metadata_tail, "{at}: {ring:?}");
    assert_eq!(ring.metadata_tail, counters.payloads, "{at}: {ring:?}");
    assert_eq!(counters.payloads, report.metrics.payloads, "{at}");
    assert!(counters.payloads > 0, "{at}: nothing streamed");
    assert_eq!(ring.payload_head, ring.payload_tail, "{at}: {ring:?}");
    assert_eq!(ring.payload_tail, ring.metadata_tail, "{at}: {ring:?}");
    assert_eq!(
        end.stream_tails,
        (ring.metadata_tail, ring.payload_tail),
        "{at}: the executor's tails against the ring's"
    );
    assert_eq!(ring.gap_slots, 0, "{at}: a gap at the end: {ring:?}");
    assert_eq!(
        ring.pooled, 0,
        "{at}: batches of records left in the ready pool"
    );
    assert!(
        ring.published_metadata_head <= ring.metadata_head
            && ring.published_payload_head <= ring.payload_head,
        "{at}: mirrored heads ahead of the host's: {ring:?}"
    );
    // Firmware counters: nothing refused, every request sent, nothing left open.
    assert_eq!(counters.refused, 0, "{at}");
    assert_eq!(counters.launches, 1, "{at}");
    assert_eq!(counters.dma_requests, report.metrics.dma_requests, "{at}");
    assert!(end.streaming_idle, "{at}: the executor is not idle");
    assert!(
        !end.waiting_for_credit,
        "{at}: the executor still waits for credit (back-pressure lost)"
    );
    assert!(
        counters.backpressure_ticks <= end.device_time.0,
        "{at}: back-pressure {} ticks in a device run of {}",
        counters.backpressure_ticks,
        end.device_time.0
    );
    assert!(
        counters.backpressure_ticks == 0 || counters.head_reads > 0,
        "{at}: back-pressure without a read of the heads (D5)"
    );
    assert_eq!(
        report.metrics.backpressure_ns,
        end.device.backpressure.as_ns()
    );
    assert_eq!(
        report.metrics.max_gap_bytes % u64::from(case.slot_size),
        0,
        "{at}"
    );
}

#[test]
fn wall_clock_runs_under_random_delays_verify_and_keep_the_ring_invariants() {
    let _serial = serial();
    let started = Instant::now();
    let (mut verified, mut deadlocks, mut wrapped, mut pressured, mut gapped) = (0, 0, 0, 0, 0);
    let mut rerun = 0;
    let mut slowest = Duration::ZERO;
    for case in cases(CASES, MASTER_SEED) {
        let request = case.request();
        let at = case.command();
        // Virtual time decides whether the ring is big enough (see the module docs).
        let fits = match run(&request) {
            Ok(report) => {
                assert!(
                    report.verified,
                    "{at}: virtual run: {}",
                    report.verification
                );
                true
            }
            Err(error) => {
                let error = format!("{error:#}");
                assert!(error.contains("deadlock"), "{at}: virtual run: {error}");
                false
            }
        };
        let began = Instant::now();
        let mut outcome = wall_with_watchdog(request.clone(), options(case.stress_seed));
        let took = began.elapsed();
        slowest = slowest.max(took);
        assert!(took < RUN_LIMIT + Duration::from_secs(2), "{at}: {took:?}");
        // "No progress" with the ring not full is what a device thread descheduled for longer
        // than the stall timeout looks like on a loaded machine (it is real time here): that
        // case runs again, once, with the CLI's wall-clock floor of 2 s, and must then end as
        // its virtual run did. A device that really stops fails again, 2 s later.
        if matches!(&outcome, Err(error) if format!("{error:#}").contains("no progress")) {
            let mut patient = request;
            patient.config.host.stall_timeout_ns = 2_000_000_000;
            outcome = wall_with_watchdog(patient, options(case.stress_seed));
            rerun += 1;
        }
        match outcome {
            Ok(run) => {
                assert!(
                    fits,
                    "{at}: finished in wall-clock mode but deadlocks in virtual time"
                );
                check_end(&case, &run);
                verified += 1;
                let streamed = run.end.firmware.payloads;
                wrapped += usize::from(streamed > u64::from(case.slots));
                pressured += usize::from(run.end.firmware.backpressure_ticks > 0);
                gapped += usize::from(run.report.metrics.max_gap_bytes > 0);
            }
            Err(error) => {
                let error = format!("{error:#}");
                assert!(!fits, "{at}: failed in wall-clock mode: {error}");
                assert!(
                    error.to_lowercase().contains("deadlock"),
                    "{at}: expected a deadlock report, got: {error}"
                );
                deadlocks += 1;
            }
        }
    }
    eprintln!(
        "wall stress: {CASES} cases in {:.1} s (slowest run {:.0} ms): {verified} verified \
         ({wrapped} wrapped the ring, {pressured} met back-pressure, {gapped} left a gap \
         mid-run), {deadlocks} deadlocks reported as such, {rerun} run again after \
         \"no progress\" at the short stall timeout",
        started.elapsed().as_secs_f64(),
        slowest.as_secs_f64() * 1000.0
    );
    // The cases must exercise what they are for.
    assert!(
        verified as u64 >= CASES * 3 / 4,
        "only {verified} runs verified"
    );
    assert!(
        wrapped > verified / 2,
        "only {wrapped} runs wrapped the ring"
    );
    assert!(pressured > 10, "only {pressured} runs met back-pressure");
    assert!(gapped > 10, "only {gapped} runs consumed out of order");
    // Reruns are for a loaded machine's rare long descheduling, not a way round the cases.
    assert!(
        rerun <= CASES / 20,
        "{rerun} runs stalled at the short timeout"
    );
}

/// A ring of 2 slots cannot hold one host task's 4 slots: in wall-clock mode, under stress,
/// the run ends with a deadlock report for polling and for interrupts, well within its bound.
#[test]
fn a_deadlock_in_wall_clock_mode_is_reported_not_hung() {
    let _serial = serial();
    for (mode, seed) in [(Mode::Axle, 1), (Mode::AxleIrq, 2)] {
        let mut config = AxleConfig::default();
        config.workload.queries = 2;
        config.axle.slots = 2;
        // Ten times the default 20 ms: a device thread descheduled for longer than the stall
        // timeout before it filled the 2-slot ring is reported as "no progress" (the ring not
        // full), not as a deadlock; on a loaded 2-core machine 20 ms of real time is not enough.
        config.host.stall_timeout_ns = 200_000_000;
        let request = RunRequest {
            workload: "knn-a".into(),
            mode,
            config,
            data: None,
            wall_limit: None,
        };
        let started = Instant::now();
        let error = match wall_with_watchdog(request, options(seed)) {
            Ok(run) => panic!(
                "{mode:?}: a 2-slot ring finished (verified: {}) instead of deadlocking",
                run.report.verified
            ),
            Err(error) => format!("{error:#}"),
        };
        assert!(
            error.to_lowercase().contains("deadlock") && error.contains(mode.name()),
            "{mode:?}: {error}"
        );
        // The stall timeout (200 ms, real time here) or the device's exact detection.
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{mode:?}: took {:?}",
            started.elapsed()
        );
    }
}

/// RP and BS run in wall-clock mode too (no rings: only the answer and the firmware's
/// counters to check).
#[test]
fn rp_and_bs_verify_in_wall_clock_mode() {
    let _serial = serial();
    for workload in ["knn-a", "knn-b", "knn-c"] {
        for (mode, seed) in [(Mode::Rp, 11), (Mode::Bs, 12)] {
            let mut config = AxleConfig::default();
            config.workload.queries = 2;
            let request = RunRequest {
                workload: workload.into(),
                mode,
                config,
                data: None,
                wall_limit: None,
            };
            let run = wall_with_watchdog(request, options(seed))
                .unwrap_or_else(|error| panic!("{workload} {mode:?}: {error:#}"));
            assert!(run.report.verified, "{workload} {mode:?}");
            assert_eq!(run.end.ring, None);
            assert_eq!(run.end.firmware.launches, 1);
            assert_eq!(run.end.firmware.payloads, 0);
        }
    }
}

/// A wall-clock report says so (`"clock": "wall"`), a virtual one does not change at all; the
/// CLI runs wall-clock mode; its stress delays are refused with `--attach`.
#[test]
fn wall_clock_output_is_labelled_and_virtual_output_is_not() {
    let _serial = serial();
    let mut config = AxleConfig::default();
    config.workload.queries = 2;
    // The CLI's floor for wall-clock runs (tests/cli.rs): the default 20 ms of real time is
    // shorter than a loaded 2-core machine may deschedule the device thread, and this test is
    // about the labels, not the watchdog (at load 6, 2 of 8 runs ended "no progress" at 20 ms).
    config.host.stall_timeout_ns = 2_000_000_000;
    let request = RunRequest {
        workload: "knn-a".into(),
        mode: Mode::Axle,
        config,
        data: None,
        wall_limit: None,
    };
    let virtual_json = serde_json::to_value(run(&request).unwrap()).unwrap();
    assert!(virtual_json.get("clock").is_none(), "{virtual_json}");
    assert!(virtual_json.get("stress_seed").is_none(), "{virtual_json}");
    let wall = wall_with_watchdog(request, WallOptions::default()).unwrap();
    let wall_json = serde_json::to_value(&wall.report).unwrap();
    assert_eq!(wall_json["clock"], "wall");
    assert!(wall_json.get("stress_seed").is_none(), "{wall_json}");

    let cli = |args: &[&str]| finish_axle(spawn_axle(args), WATCHDOG, &args);
    let output = cli(&[
        "run",
        "knn-b",
        "--mode",
        "axle-irq",
        "--queries",
        "2",
        "--slots",
        "16",
        "--in-order",
        "--clock",
        "wall",
        "--stress-seed",
        "7",
        "--json",
    ]);
    assert!(output.status.success(), "{output:?}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["clock"], "wall");
    assert_eq!(json["stress_seed"], 7);
    assert_eq!(json["verified"], true);

    let human = cli(&[
        "run",
        "knn-a",
        "--mode",
        "axle",
        "--queries",
        "2",
        "--clock",
        "wall",
    ]);
    assert!(human.status.success(), "{human:?}");
    assert!(String::from_utf8_lossy(&human.stdout).contains("wall-clock time"));

    // `--clock wall --attach` runs (tests/multiprocess.rs); its stress delays stay in-process.
    let refused = cli(&[
        "run",
        "knn-a",
        "--mode",
        "axle",
        "--clock",
        "wall",
        "--stress-seed",
        "1",
        "--attach",
        "/nonexistent.sock",
    ]);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--stress-seed") && stderr.contains("--attach"),
        "{stderr}"
    );
    let seedless = cli(&["run", "knn-a", "--mode", "axle", "--stress-seed", "1"]);
    assert_eq!(seedless.status.code(), Some(2));
}

/// The checks have teeth: with DMA landings allowed to overtake each other (a fault the
/// emulator injects only on request: a tail may land before the record or payload it
/// publishes), runs fail with a ring protocol violation or a wrong answer, and none hangs.
#[test]
fn broken_posted_write_ordering_is_caught() {
    let _serial = serial();
    let mut caught = Vec::new();
    let mut passed = 0;
    for seed in 0..20u64 {
        let mut stress = WallStress::standard(seed);
        stress.break_landing_order = true;
        stress.dma_landing = JitterSpec::new(1000, 5_000);
        let case = Case {
            workload: ["knn-a", "knn-b", "knn-c"][(seed % 3) as usize],
            mode: if seed % 2 == 0 {
                Mode::Axle
            } else {
                Mode::AxleIrq
            },
            slots: 16,
            slot_size: 32,
            streaming_factor: "32",
            in_order: true,
            poll_ns: 50,
            stress_seed: seed,
        };
        let options = WallOptions {
            limit: RUN_LIMIT,
            stress: Some(stress),
        };
        match wall_with_watchdog(case.request(), options) {
            Ok(run) if run.report.verified => passed += 1,
            Ok(run) => caught.push(format!("wrong answer: {}", run.report.verification)),
            Err(error) => caught.push(format!("{error:#}")),
        }
    }
    eprintln!(
        "broken ordering: {} of 20 runs caught, {passed} slipped through",
        caught.len()
    );
    for error in &caught {
        eprintln!("  {error}");
    }
    assert!(
        caught.len() >= 10,
        "only {} of 20 broken runs were caught",
        caught.len()
    );
}
