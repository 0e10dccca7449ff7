//! `--poll adaptive` (host-runtime's `adaptive_poll`): every workload verifies with it, runs
//! are deterministic, and it polls far less than p1 without falling behind p100.

use std::process::Command;

fn run(workload: &str, poll: &str) -> serde_json::Value {
    let output = Command::new(env!("CARGO_BIN_EXE_axle"))
        .args([
            "run", workload, "--mode", "axle", "--scale", "small", "--json",
        ])
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
