//! `axle run-many`: several tenants sharing one in-process device (docs/tenants.md).
//!
//! Run: `cargo test --release --test tenants`.

use axle::config::AxleConfig;
use axle::run::{run, RunRequest};
use axle::tenants::{run_many, ManyRequest, DEFAULT_MAX_TENANTS};
use emulator::cosim::tenants::SharePolicy;
use host_runtime::Mode;
use std::process::Command;

const MODES: [Mode; 4] = [Mode::Rp, Mode::Bs, Mode::Axle, Mode::AxleIrq];

fn small() -> AxleConfig {
    let mut config = AxleConfig::default();
    config.workload.scale = workloads::Scale::Small;
    config
}

fn many(workloads: &[&str], mode: Mode, policy: SharePolicy, alone: bool) -> ManyRequest {
    ManyRequest {
        workloads: workloads.iter().map(|w| (*w).to_owned()).collect(),
        mode,
        config: small(),
        data: None,
        wall_limit: None,
        policy,
        max_tenants: DEFAULT_MAX_TENANTS,
        alone,
        faults: Vec::new(),
    }
}

/// A device with one tenant is the one-host device: every workload in every mode reports
/// byte for byte what `axle run` reports (the shared paths, the arbiter included, change no
/// timing when nobody else is there).
#[test]
fn one_tenant_reports_byte_for_byte_what_axle_run_reports() {
    for workload in workloads::names() {
        for mode in MODES {
            let alone = run(&RunRequest {
                workload: (*workload).to_owned(),
                mode,
                config: small(),
                data: None,
                wall_limit: None,
            })
            .unwrap();
            let shared = run_many(&many(&[workload], mode, SharePolicy::RoundRobin, false))
                .unwrap()
                .tenants
                .remove(0)
                .shared;
            assert_eq!(
                serde_json::to_string(&alone).unwrap(),
                serde_json::to_string(&shared).unwrap(),
                "{workload} {}",
                mode.name()
            );
        }
    }
}

/// Four different tenants in each mode: every answer verifies, the same request prints the
/// same report twice, the tenants interfere (someone is slower than alone, the makespan is
/// no shorter than the longest run alone), and the device's CCM time is the tenants' sum.
#[test]
fn mixed_tenants_verify_interfere_and_repeat_byte_for_byte() {
    let tenants = ["knn-a", "pagerank", "ssb-q1.1", "dlrm"];
    for mode in MODES {
        let request = many(&tenants, mode, SharePolicy::RoundRobin, true);
        let first = run_many(&request).unwrap();
        let second = run_many(&request).unwrap();
        assert_eq!(
            serde_json::to_string(&first).unwrap(),
            serde_json::to_string(&second).unwrap(),
            "{}",
            mode.name()
        );
        assert!(first.verified, "{}", mode.name());
        assert!(first.tenants.iter().all(|t| t.shared.verified));
        let slowdowns: Vec<f64> = first.tenants.iter().filter_map(|t| t.slowdown).collect();
        assert_eq!(slowdowns.len(), tenants.len());
        assert!(
            slowdowns.iter().any(|s| *s > 1.05),
            "{}: nobody slowed down: {slowdowns:?}",
            mode.name()
        );
        let longest_alone = first
            .tenants
            .iter()
            .filter_map(|t| t.alone_end_to_end_ns)
            .max()
            .unwrap();
        assert!(first.makespan_ns >= longest_alone);
        let summed: u64 = first
            .tenants
            .iter()
            .map(|t| t.shared.metrics.ccm_busy_ns)
            .sum();
        assert_eq!(summed, first.ccm_busy_ns, "{}", mode.name());
        let jain = first.jain_fairness.unwrap();
        assert!(jain > 0.25 && jain <= 1.0, "{jain}");
    }
}

/// Weighted shares change who gets the CCM when several wait: four OPT tenants (40 launches
/// each, often several waiting at once), the last one favoured 8 to 1; it waits less for the
/// CCM, and finishes sooner, than under round-robin.
#[test]
fn a_larger_weight_shortens_a_tenants_wait_for_the_ccm() {
    let tenants = ["opt-2.7b"; 4];
    let fair = run_many(&many(&tenants, Mode::Axle, SharePolicy::RoundRobin, false)).unwrap();
    let favoured = run_many(&many(
        &tenants,
        Mode::Axle,
        SharePolicy::Weighted(vec![1, 1, 1, 8]),
        false,
    ))
    .unwrap();
    assert!(favoured.verified && fair.verified);
    let wait = |report: &axle::tenants::ManyReport| report.tenants[3].ccm_wait_ns;
    assert!(
        wait(&favoured) < wait(&fair),
        "weighted {} ns, round-robin {} ns",
        wait(&favoured),
        wait(&fair)
    );
    let end = |report: &axle::tenants::ManyReport| report.tenants[3].shared.metrics.end_to_end_ns;
    assert!(end(&favoured) < end(&fair));
}

/// Tenant counts and weights from the command line are bounded, with a message naming the
/// value and the limit, before any workload is built.
#[test]
fn tenant_counts_and_weights_are_bounded_with_a_clear_error() {
    let axle = env!("CARGO_BIN_EXE_axle");
    let cases: [(&[&str], &str); 5] = [
        (
            &["--max-tenants", "0", "knn-a"],
            "--max-tenants 0: it must be 1 to 16",
        ),
        (
            &["--max-tenants", "17", "knn-a"],
            "--max-tenants 17: it must be 1 to 16",
        ),
        (
            &["knn-a", "knn-a", "knn-a", "--max-tenants", "2"],
            "3 workloads for at most 2 tenants (--max-tenants 2)",
        ),
        (
            &["knn-a", "knn-b", "--weights", "1"],
            "1 weights for 2 tenants",
        ),
        (
            &["knn-a", "--weights", "0"],
            "a tenant's weight is 0; weights are 1 to 1000",
        ),
    ];
    for (args, expected) in cases {
        let output = Command::new(axle)
            .args(["run-many", "--mode", "axle", "--scale", "small"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
    // Nine tenants by default are one too many.
    let nine = ["knn-a"; 9];
    let output = Command::new(axle)
        .args(["run-many", "--mode", "axle", "--scale", "small"])
        .args(nine)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("9 workloads for at most 8 tenants"));
}

/// `axle eval --figure tenants` at small scale: a row per tenant count and polling setting;
/// one tenant is its own run alone (slowdown 1, Jain's index 1), eight tenants slow down.
#[test]
fn the_tenants_figure_has_each_count_and_polling_and_one_tenant_is_alone() {
    let out = std::env::temp_dir().join(format!("axle-tenants-figure-{}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_axle"))
        .args([
            "eval", "--figure", "tenants", "--scale", "small", "--json", "--quiet",
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&out);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tables: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let rows = tables[0]["rows"].as_array().unwrap();
    let labels: Vec<&str> = rows.iter().map(|r| r[0].as_str().unwrap()).collect();
    assert_eq!(labels.len(), 12, "{labels:?}");
    for polling in ["p10", "p100", "adaptive"] {
        let row = |n: usize| {
            rows.iter()
                .find(|r| r[0] == format!("{n} / {polling}"))
                .unwrap_or_else(|| panic!("no row {n} / {polling}: {labels:?}"))
        };
        assert_eq!(row(1)[2].as_f64(), Some(1.0), "{polling}");
        assert_eq!(row(1)[4].as_f64(), Some(1.0), "{polling}");
        assert!(row(8)[2].as_f64().unwrap() > 1.5, "{polling}: {:?}", row(8));
        assert!(row(8)[4].as_f64().unwrap() < 1.0, "{polling}: {:?}", row(8));
    }
}
