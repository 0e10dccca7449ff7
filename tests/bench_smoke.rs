//! `axle bench ring`: the quick run completes, across two processes, and reports every figure
//! (positive); a fault injected by the device process aborts the run with a non-zero exit.
//!
//! No speed is asserted anywhere: these are wall-clock figures of a shared machine.
//!
//! Run: `cargo test --release --test bench_smoke`.

use serde_json::Value;
use std::process::{Command, Output};
use std::sync::Mutex;

const AXLE: &str = env!("CARGO_BIN_EXE_axle");

/// One benchmark at a time: each busy-polls two CPUs.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn axle(args: &[&str]) -> Output {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    Command::new(AXLE)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap_or_else(|error| panic!("cannot start {AXLE}: {error}"))
}

/// Every number under `value`, with its path.
fn numbers(value: &Value, path: &str, out: &mut Vec<(String, f64)>) {
    match value {
        Value::Number(number) => out.push((path.to_string(), number.as_f64().unwrap())),
        Value::Object(map) => {
            for (key, child) in map {
                numbers(child, &format!("{path}.{key}"), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                numbers(child, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn the_quick_run_reports_every_figure_positive() {
    let output = axle(&["bench", "ring", "--quick", "--json"]);
    assert!(
        output.status.success(),
        "status {}; stderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(report["clock"], "wall");
    assert_eq!(report["machine"]["pinned"], false);
    for channel in ["ring", "array_queue", "unix_socket"] {
        for field in [
            "messages_per_s",
            "latency_p50_ns",
            "latency_p99_ns",
            "payload_gbps",
            "messages_per_s_over_ring",
            "latency_p50_over_pingpong",
            "latency_p99_over_pingpong",
            "payload_gbps_over_memcpy",
        ] {
            assert!(
                report[channel][field].is_number(),
                "{channel}.{field} missing"
            );
        }
    }
    for field in [
        "memcpy_gbps",
        "memcpy_buffer_bytes",
        "pingpong_one_way_p50_ns",
        "pingpong_one_way_p99_ns",
    ] {
        assert!(
            report["limits"][field].is_number(),
            "limits.{field} missing"
        );
    }
    for field in [
        "ring_payload_gbps_over_memcpy",
        "ring_latency_p50_over_pingpong",
        "ring_records_per_s_over_array_queue",
        "ring_records_per_s_over_unix_socket",
    ] {
        assert!(
            report["ratios"][field].is_number(),
            "ratios.{field} missing"
        );
    }
    for field in [
        "records",
        "payload_tail_updates",
        "head_reads",
        "head_publications",
    ] {
        assert!(
            report["ring_protocol"][field].is_number(),
            "ring_protocol.{field} missing"
        );
    }
    let mut all = Vec::new();
    numbers(&report, "", &mut all);
    assert!(all.len() > 40, "{all:?}");
    for (path, value) in all {
        assert!(value > 0.0, "{path} is {value}");
    }
}

#[test]
fn a_fault_the_device_injects_aborts_the_run() {
    for (fault, expected) in [
        ("payload", "holds the wrong bytes"),
        ("sequence", "holds a record with sequence"),
    ] {
        let output = axle(&[
            "bench",
            "ring",
            "--quick",
            "--json",
            "--memcpy-mib",
            "1",
            "--pingpong-rounds",
            "10",
            "--inject-fault",
            fault,
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{fault}: {stderr}");
        assert!(stderr.contains(expected), "{fault}: {stderr}");
        assert!(
            output.stdout.is_empty(),
            "{fault}: no report on a failed run"
        );
    }
}
