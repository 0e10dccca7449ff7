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

#[test]
fn the_beyond_figure_shows_the_deadlocks_and_the_option_s_runs() {
    let out = std::env::temp_dir().join(format!("axle-beyond-{}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_axle"))
        .args([
            "eval",
            "--scale",
            "small",
            "--figure",
            "beyond",
            "--workloads",
            "sssp,opt-2.7b",
            "--no-data",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("axle eval runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for file in [
        "beyond.json",
        "beyond-a.csv",
        "beyond-a.svg",
        "beyond-b.csv",
        "beyond-b.svg",
        "beyond-c.csv",
        "beyond-c.svg",
        "index.html",
    ] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    // No paper figure was made.
    assert!(!out.join("fig10.json").exists());
    let csv = std::fs::read_to_string(out.join("beyond-c.csv")).expect("beyond-c.csv");
    let one_slot = csv
        .lines()
        .find(|line| line.starts_with("1 slot"))
        .expect("a row for one slot");
    let cells: Vec<&str> = one_slot.split(',').collect();
    // capacity, slots, AXLE, AXLE --no-deadlock, AXLE_Interrupt, AXLE_Interrupt --no-deadlock
    assert_eq!((cells[2], cells[4]), ("deadlock", "deadlock"), "{one_slot}");
    for cell in [cells[3], cells[5]] {
        let ratio: f64 = cell.parse().expect("a ratio with the option");
        assert!(ratio >= 1.0, "{one_slot}");
    }
    let html = std::fs::read_to_string(out.join("index.html")).expect("index.html");
    assert!(html.contains("id=\"figure-beyond\"") && html.contains("beyond.json"));
    std::fs::remove_dir_all(&out).ok();
}
