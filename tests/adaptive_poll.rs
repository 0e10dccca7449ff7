//! `--poll adaptive` (host-runtime's `adaptive_poll`): every workload verifies with it, runs
//! are deterministic, it polls far less than p1 without falling behind p100, and it meets
//! issue 14's goal on the host-bound SSB Q1.2 at paper scale. `--poll oracle` (a study:
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

/// SSB Q1.2 at paper scale: one launch, 13 µs tasks bound round-robin to every worker, so the
/// host is the bottleneck and a record seen late delays its worker's whole sequence of tasks.
/// p100 ends 4.1% behind p1; adaptive polling (rule 7: while a task could start, the interval
/// is at most 3% of the run) stays within issue 14's goal: end to end within 3% of p1, stall
/// within 2 points of p100. (Before rule 7 it ended 4.1% behind p1.)
#[test]
fn adaptive_polling_meets_the_goal_on_ssb_q1_2_at_paper_scale() {
    let p1 = run_at("ssb-q1.2", "50ns", "paper");
    let p100 = run_at("ssb-q1.2", "5us", "paper");
    let adaptive = run_at("ssb-q1.2", "adaptive", "paper");
    assert_eq!(adaptive["verified"], true);
    assert!(
        end(&adaptive) as f64 <= end(&p1) as f64 * 1.03,
        "adaptive {} ns, p1 {} ns",
        end(&adaptive),
        end(&p1)
    );
    assert!(
        stall(&adaptive) <= stall(&p100) + 2.0,
        "adaptive stall {:.2}%, p100 {:.2}%",
        stall(&adaptive),
        stall(&p100)
    );
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
