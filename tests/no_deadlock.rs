//! `--no-deadlock` (host-runtime's `overflow`): a ring too small for a workload's dependency
//! pattern deadlocks without it and verifies with it, in AXLE and AXLE_Interrupt, with
//! out-of-order streaming and round-robin scheduling (the defaults); a run that never fills
//! the ring is the same with and without it.

use std::process::{Command, Output};

const WORKLOADS: [&str; 9] = [
    "knn-a", "knn-b", "knn-c", "sssp", "pagerank", "ssb-q1.1", "ssb-q1.2", "opt-2.7b", "dlrm",
];

fn axle(workload: &str, mode: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_axle"))
        .args([
            "run", workload, "--mode", mode, "--scale", "small", "--json",
        ])
        .args(extra)
        .output()
        .expect("axle runs")
}

fn json(output: &Output, what: &str) -> serde_json::Value {
    assert!(
        output.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON object")
}

#[test]
fn every_workload_deadlocks_in_a_four_slot_ring_without_the_option_and_verifies_with_it() {
    for workload in WORKLOADS {
        for mode in ["axle", "axle-irq"] {
            let what = format!("{workload} --mode {mode} --slots 4");
            let without = axle(workload, mode, &["--slots", "4"]);
            let stderr = String::from_utf8_lossy(&without.stderr);
            assert!(
                !without.status.success() && stderr.contains("deadlock detected"),
                "{what} without --no-deadlock: {stderr}"
            );
            // The detector says the way out and the minimum.
            assert!(
                stderr.contains("--no-deadlock") && stderr.contains("at least 1 slot"),
                "{stderr}"
            );
            let with = json(
                &axle(workload, mode, &["--slots", "4", "--no-deadlock"]),
                &what,
            );
            assert_eq!(with["verified"], true, "{what}");
            assert_eq!(with["config"]["host"]["no_deadlock"], true, "{what}");
            let spills = with["overflow_spills"].as_u64().unwrap_or(0);
            let bytes = with["overflow_bytes"].as_u64().unwrap_or(0);
            let ns = with["overflow_ns"].as_u64().unwrap_or(0);
            assert!(spills > 0 && bytes > 0 && ns > 0, "{what}: {with}");
            // The copy is host core stall.
            assert!(
                with["host_stall_ns"].as_u64().unwrap_or(0) >= ns,
                "{what}: {with}"
            );
        }
    }
}

#[test]
fn one_slot_is_enough_for_the_llm() {
    for mode in ["axle", "axle-irq"] {
        let with = json(
            &axle("opt-2.7b", mode, &["--slots", "1", "--no-deadlock"]),
            mode,
        );
        assert_eq!(with["verified"], true, "{mode}");
        assert!(with["overflow_spills"].as_u64().unwrap_or(0) > 0, "{with}");
    }
}

#[test]
fn a_run_that_never_fills_its_ring_is_the_same_with_the_option() {
    for workload in WORKLOADS {
        for mode in ["axle", "axle-irq"] {
            let mut without = json(&axle(workload, mode, &[]), workload);
            let mut with = json(&axle(workload, mode, &["--no-deadlock"]), workload);
            // Only the configuration says it is on (and is written only then).
            assert_eq!(without["config"]["host"].get("no_deadlock"), None);
            with["config"]["host"]
                .as_object_mut()
                .expect("host section")
                .remove("no_deadlock");
            for result in [&mut without, &mut with] {
                result.as_object_mut().expect("object").remove("provenance");
            }
            assert_eq!(with, without, "{workload} --mode {mode}");
        }
    }
}

#[test]
fn spilling_runs_are_deterministic() {
    let run = || {
        json(
            &axle("pagerank", "axle", &["--slots", "4", "--no-deadlock"]),
            "pagerank",
        )
    };
    assert_eq!(run(), run());
}

#[test]
fn the_option_is_a_config_key_too() {
    let dir = std::env::temp_dir().join(format!("axle-no-deadlock-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("config.toml");
    std::fs::write(&path, "[host]\nno_deadlock = true\n[axle]\nslots = 4\n").expect("write");
    let path = path.to_string_lossy().into_owned();
    let result = json(
        &axle("opt-2.7b", "axle", &["--config", &path]),
        "--config no_deadlock",
    );
    assert_eq!(result["verified"], true);
    assert!(
        result["overflow_spills"].as_u64().unwrap_or(0) > 0,
        "{result}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
