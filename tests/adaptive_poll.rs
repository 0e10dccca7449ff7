//! `--poll adaptive` (host-runtime's `adaptive_poll`): every workload verifies with it, runs
//! are deterministic, it polls far less than p1 without falling behind p100, it meets issue
//! 14's goal on the host-bound SSB Q1.2 and on KNN (a) at paper scale, and no record lands
//! before the bound it waits for. `--poll oracle` (a study:
//! polls only when records arrive) matches p1 with a few polls.

use std::process::Command;

fn run(workload: &str, poll: &str) -> serde_json::Value {
    run_at(workload, poll, "small")
}

fn run_at(workload: &str, poll: &str, scale: &str) -> serde_json::Value {
    let output = Command::new(env!("CARGO_BIN_EXE_axle"))
        .args(["run", workload, "--mode", "axle", "--json"])
        .args(["--scale", scale])
        .args(["--poll", poll])
        .output()
        .expect("axle runs");
    assert!(
        output.status.success(),
        "{workload} --poll {poll}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON object")
}

#[test]
fn every_workload_verifies_with_adaptive_polling() {
    for workload in [
        "knn-a", "knn-b", "knn-c", "sssp", "pagerank", "ssb-q1.1", "ssb-q1.2", "opt-2.7b", "dlrm",
    ] {
        let result = run(workload, "adaptive");
        assert_eq!(result["verified"], true, "{workload}");
        assert_eq!(result["config"]["host"]["poll_policy"], "adaptive");
    }
}

#[test]
fn adaptive_polling_is_deterministic() {
    assert_eq!(run("pagerank", "adaptive"), run("pagerank", "adaptive"));
}

#[test]
fn adaptive_polling_polls_far_less_than_p1_and_ends_no_later_than_p100() {
    // SSSP at small scale: 10 launches, each streaming for a few µs.
    let p1 = run("sssp", "50ns");
    let p100 = run("sssp", "5us");
    let adaptive = run("sssp", "adaptive");
    let polls = |r: &serde_json::Value| r["polls"].as_u64().expect("polls");
    let end = |r: &serde_json::Value| r["end_to_end_ns"].as_u64().expect("end_to_end_ns");
    assert!(
        polls(&adaptive) * 2 < polls(&p1),
        "adaptive polled {} times, p1 {}",
        polls(&adaptive),
        polls(&p1)
    );
    assert!(
        end(&adaptive) <= end(&p100),
        "adaptive ended at {} ns, p100 at {} ns",
        end(&adaptive),
        end(&p100)
    );
}

fn end(result: &serde_json::Value) -> u64 {
    result["end_to_end_ns"].as_u64().expect("end_to_end_ns")
}

/// Host core stall in % of the run.
fn stall(result: &serde_json::Value) -> f64 {
    result["host_stall_ns"].as_u64().expect("host_stall_ns") as f64 * 100.0 / end(result) as f64
}

/// Issue 14's goal for `workload` at paper scale: adaptive polling ends within 3% of p1 and
/// stalls the host at most 2 points more than p100, and its answer verifies.
fn assert_adaptive_meets_the_goal(workload: &str) {
    let p1 = run_at(workload, "50ns", "paper");
    let p100 = run_at(workload, "5us", "paper");
    let adaptive = run_at(workload, "adaptive", "paper");
    assert_eq!(adaptive["verified"], true, "{workload}");
    assert!(
        end(&adaptive) as f64 <= end(&p1) as f64 * 1.03,
        "{workload}: adaptive {} ns, p1 {} ns",
        end(&adaptive),
        end(&p1)
    );
    assert!(
        stall(&adaptive) <= stall(&p100) + 2.0,
        "{workload}: adaptive stall {:.2}%, p100 {:.2}%",
        stall(&adaptive),
        stall(&p100)
    );
}

/// SSB Q1.2 at paper scale: one launch, 13 µs tasks on every worker, so the host is the
/// bottleneck and a record seen late delays the tasks behind it.
/// p100 ends 3.8% behind p1; adaptive polling (rule 7: while a task could start, the interval
/// is at most 3% of the run) stays within issue 14's goal: end to end within 3% of p1, stall
/// within 2 points of p100. (Before rule 7 it ended 4.1% behind p1.)
///
/// Since the host's round-robin became one queue that any free worker takes from (2026-12-02,
/// `host_runtime::sched`), a worker freed by a task's end takes the next ready task at once;
/// counting it as free for bytes (rule 3's test) brought polls forward near the stream's end
/// whose records hardly started anything sooner, and the run missed the stall goal by 0.08
/// points (3.63% in 40 polls against p100's 1.55% + 2). Counting the workers and chains that
/// ready tasks take first as busy, it stalls 3.44% in 38 polls (five of the 367 tasks start
/// 13 to 85 ns later) at the same end to end (101,207 ns against p1's 99,186): `axle run
/// ssb-q1.2 --mode axle --scale paper --json --poll P`.
#[test]
fn adaptive_polling_meets_the_goal_on_ssb_q1_2_at_paper_scale() {
    assert_adaptive_meets_the_goal("ssb-q1.2");
}

/// KNN (a) at paper scale: one launch whose 512 items all end together 6.9 µs after it, so
/// nothing the host can watch moves before the first record. Polling from a blind interval it
/// ended 3.6% behind p1; polling from the bound on the first record (the command's work floor
/// and the device's figures), it meets issue 14's goal: within 3% of p1, stall within 2
/// points of p100.
#[test]
fn adaptive_polling_meets_the_goal_on_knn_a_by_polling_from_the_first_record_bound() {
    assert_adaptive_meets_the_goal("knn-a");
}

/// `--poll oracle` polls exactly when p1's polls found records: on KNN (a), one launch whose
/// records all come in two bursts, it ends with p1 and polls a handful of times.
#[test]
fn the_oracle_ends_with_p1_and_polls_only_when_records_arrived() {
    let p1 = run("knn-a", "50ns");
    let oracle = run("knn-a", "oracle");
    assert_eq!(oracle["verified"], true);
    assert_eq!(oracle["config"]["host"]["poll_policy"], "oracle");
    assert_eq!(end(&oracle), end(&p1));
    let polls = |r: &serde_json::Value| r["polls"].as_u64().expect("polls");
    assert!(
        polls(&oracle) * 10 < polls(&p1),
        "oracle {} polls, p1 {}",
        polls(&oracle),
        polls(&p1)
    );
}

/// The bound adaptive polling waits for before a launch's first poll
/// (`host_runtime::adaptive_poll::first_record_bound`) is a true lower bound: over the
/// small-scale runs of all nine workloads, every launch's DMA writes leave the wire late
/// enough that none lands before the bound (a write lands one half CXL.io round trip after
/// it leaves, 175 ns on the paper's device). The trace (`axle run --trace`) has the bound as
/// an instant per launch, "first record not before", and each DMA request's transfer from the
/// end of its preparation (the earliest its first write can leave) to its last landing.
/// Times in the trace are rounded to the nanosecond, hence the 1 ns of tolerance. On KNN,
/// whose command fixes its items' traffic, the bound is also tight: the first record lands
/// within 2% of it (45 to 50 ns after it: the writes' own time on the wire).
#[test]
fn no_record_lands_before_the_bound_that_adaptive_polling_waits_for() {
    const DMA_ONE_WAY_US: f64 = 0.175;
    let directory = std::env::temp_dir().join(format!("axle-bound-{}", std::process::id()));
    std::fs::create_dir_all(&directory).expect("a temporary directory");
    for workload in [
        "knn-a", "knn-b", "knn-c", "sssp", "pagerank", "ssb-q1.1", "ssb-q1.2", "opt-2.7b", "dlrm",
    ] {
        let trace = directory.join(format!("{workload}.json"));
        let output = Command::new(env!("CARGO_BIN_EXE_axle"))
            .args(["run", workload, "--mode", "axle", "--scale", "small"])
            .args(["--poll", "adaptive", "--trace"])
            .arg(&trace)
            .output()
            .expect("axle runs");
        assert!(
            output.status.success(),
            "{workload}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let trace: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&trace).expect("the trace")).expect("JSON");
        let events = trace["traceEvents"].as_array().expect("traceEvents");
        let at = |event: &serde_json::Value| event["ts"].as_f64().expect("ts");
        let named = |name: &str| -> Vec<&serde_json::Value> {
            events
                .iter()
                .filter(|event| event["name"] == name)
                .collect()
        };
        // Launches run one after another: a launch's requests come after its store arrives
        // and before the next one's does.
        let mut arrivals: Vec<(f64, u64)> = named("launch store arrives")
            .into_iter()
            .map(|event| (at(event), event["args"]["launch"].as_u64().expect("launch")))
            .collect();
        arrivals.sort_by(|a, b| a.0.total_cmp(&b.0));
        let bounds: std::collections::BTreeMap<u64, f64> = named("first record not before")
            .into_iter()
            .map(|event| (event["args"]["launch"].as_u64().expect("launch"), at(event)))
            .collect();
        let transfers: Vec<(f64, f64)> = named("DMA transfer")
            .into_iter()
            .map(|event| (at(event), at(event) + event["dur"].as_f64().expect("dur")))
            .collect();
        assert!(!arrivals.is_empty(), "{workload}: no launch in the trace");
        assert_eq!(
            bounds.len(),
            arrivals.len(),
            "{workload}: a bound per launch"
        );
        for (index, &(arrived, launch)) in arrivals.iter().enumerate() {
            let next = arrivals.get(index + 1).map_or(f64::INFINITY, |next| next.0);
            let bound = bounds[&launch];
            let of_launch: Vec<&(f64, f64)> = transfers
                .iter()
                .filter(|(start, _)| *start >= arrived && *start < next)
                .collect();
            let earliest_landing = of_launch
                .iter()
                .map(|(start, _)| start + DMA_ONE_WAY_US)
                .fold(f64::INFINITY, f64::min);
            assert!(
                earliest_landing.is_finite(),
                "{workload}: launch {launch} sent nothing"
            );
            assert!(
                bound <= earliest_landing + 0.001,
                "{workload}: launch {launch}'s bound {bound} µs is after its first write could land ({earliest_landing} µs)"
            );
            if workload.starts_with("knn") {
                let first_record = of_launch
                    .iter()
                    .map(|(_, end)| *end)
                    .fold(f64::INFINITY, f64::min);
                assert!(
                    first_record <= bound * 1.02,
                    "{workload}: the first record landed at {first_record} µs, the bound is {bound} µs"
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&directory);
}
