//! Human-readable output of a run.

use crate::run::RunReport;
use std::fmt::Write;

fn micros(ns: u64) -> String {
    format!("{:.3} µs", ns as f64 / 1000.0)
}

fn share(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "-".into();
    }
    format!("{:5.1}%", part as f64 * 100.0 / whole as f64)
}

/// The report as the terminal shows it.
pub fn human(report: &RunReport) -> String {
    let m = &report.metrics;
    let total = m.end_to_end_ns;
    let mut out = String::new();
    let clock = match (report.clock.as_deref(), report.stress_seed) {
        (Some("wall"), Some(seed)) => format!("wall-clock time, stress seed {seed}; varies"),
        (Some("wall"), None) => "wall-clock time; varies from run to run".into(),
        _ => "virtual time; deterministic".into(),
    };
    let _ = writeln!(out, "{} in mode {} ({clock})", report.workload, report.mode);
    let _ = writeln!(out, "  end-to-end runtime   {:>14}", micros(total));
    let _ = writeln!(
        out,
        "  components{}",
        if report.mode.starts_with("axle") {
            " (overlapped)"
        } else {
            " (serial)"
        }
    );
    for (name, value) in [
        ("CCM processing", m.ccm_busy_ns),
        ("data movement", m.data_movement_ns),
        ("host processing", m.host_busy_ns),
        ("protocol overhead", m.overhead_ns),
    ] {
        let _ = writeln!(
            out,
            "    {name:<19}{:>14}  {}",
            micros(value),
            share(value, total)
        );
    }
    let _ = writeln!(out, "  idle and stall");
    for (name, value) in [
        ("CCM idle", m.ccm_idle_ns),
        ("host idle", m.host_idle_ns),
        ("host core stall", m.host_stall_ns),
        ("back-pressure", m.backpressure_ns),
    ] {
        let _ = writeln!(
            out,
            "    {name:<19}{:>14}  {}",
            micros(value),
            share(value, total)
        );
    }
    if report.mode.starts_with("axle") {
        let _ = writeln!(
            out,
            "  streaming: {} payloads in {} DMA requests, {} polls, {} flow-control stores, max gap {} B",
            m.payloads, m.dma_requests, m.polls, m.flow_control_stores, m.max_gap_bytes
        );
    }
    let _ = writeln!(
        out,
        "  simulator: {} events, {} host turns, {} link calls",
        report.simulator.events, report.simulator.host_turns, report.simulator.link_calls
    );
    let _ = writeln!(
        out,
        "  verified: {} ({})",
        if report.verified { "yes" } else { "NO" },
        report.verification
    );
    out
}
