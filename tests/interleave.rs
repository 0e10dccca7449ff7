//! Interleaved execution (`axle run --interleave SEED`, `device.interleave_seed`; see
//! `emulator::ccm::interleave`): every workload's kernels verify with the items' memory
//! accesses interleaved word by word, and the report is the default run's, figure for
//! figure, apart from the configuration key (interleaving changes no timing, and our kernels
//! have no race for it to expose).
//!
//! Kept quick (about 14 s in `--release`, two runs at a time): the KNN workloads run one query
//! instead of four and SSSP three rounds; every other workload runs its small instance.

use std::process::Command;

/// Each workload with the extra arguments that keep its interleaved run short.
const RUNS: [(&str, &[&str]); 9] = [
    ("knn-a", &["--queries", "1"]),
    ("knn-b", &["--queries", "1"]),
    ("knn-c", &["--queries", "1"]),
    ("sssp", &["--iterations", "3"]),
    ("pagerank", &[]),
    ("ssb-q1.1", &[]),
    ("ssb-q1.2", &[]),
    ("opt-2.7b", &[]),
    ("dlrm", &[]),
];

/// `axle run WORKLOAD --mode axle --scale small --json EXTRA`, parsed, without its provenance.
fn report(workload: &str, extra: &[&str]) -> serde_json::Value {
    let output = Command::new(env!("CARGO_BIN_EXE_axle"))
        .args([
            "run", workload, "--mode", "axle", "--scale", "small", "--json",
        ])
        .args(extra)
        .output()
        .expect("the axle binary runs");
    assert!(
        output.status.success(),
        "axle run {workload} {extra:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut report: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("the report is JSON");
    report
        .as_object_mut()
        .expect("the report is an object")
        .remove("provenance");
    report
}

#[test]
fn every_workload_verifies_interleaved_with_the_default_runs_figures() {
    let started = std::time::Instant::now();
    // Two workloads at a time: the interleaved runs are slow (a thread switch per word).
    let chunks: Vec<&[(&str, &[&str])]> = RUNS.chunks(5).collect();
    std::thread::scope(|scope| {
        for chunk in chunks {
            scope.spawn(move || {
                for &(workload, extra) in chunk {
                    let plain = report(workload, extra);
                    let mut interleaved =
                        report(workload, &[extra, &["--interleave", "1"]].concat());
                    assert_eq!(
                        interleaved["verified"], true,
                        "{workload}: {}",
                        interleaved["verification"]
                    );
                    let device = interleaved["config"]["device"]
                        .as_object_mut()
                        .expect("the report holds the device configuration");
                    assert_eq!(
                        device.remove("interleave_seed"),
                        Some(serde_json::json!(1)),
                        "{workload}: the report says the run was interleaved"
                    );
                    assert!(
                        plain["config"]["device"].get("interleave_seed").is_none(),
                        "{workload}: a default report names no interleaving"
                    );
                    assert_eq!(
                        interleaved, plain,
                        "{workload}: interleaving changed the report"
                    );
                }
            });
        }
    });
    eprintln!("nine workloads interleaved in {:?}", started.elapsed());
}
