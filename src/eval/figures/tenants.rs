//! Several tenants on one device (issue 15; `axle eval --figure tenants`, never part of `all`):
//! for 1, 2, 4 and 8 tenants of mixed workloads in AXLE mode, at p10, p100 and with adaptive
//! polling, each tenant's slowdown against running alone, Jain's fairness index over the
//! tenants' progress rates, the CCM's utilisation and the host core stall (docs/tenants.md).
//!
//! Tenant `i` runs the `i`-th workload of the mix, cycling: KNN (a), PageRank, SSB Q1.1 and
//! DLRM (those of them selected by `--workloads`, else the selection). The shared runs are made
//! here, not in the sweep (a shared run is not one configuration of one workload), one after
//! the other, over the seeded generators; so are the runs alone they are compared with.

use super::{percent, with_poll, Figure, FigureOutput};
use crate::config::AxleConfig;
use crate::eval::table::{Cell, Table};
use crate::run::{run, RunRequest};
use crate::tenants::{jain, run_many, ManyRequest};
use emulator::cosim::tenants::SharePolicy;
use host_runtime::{Mode, PollPolicy};

/// Tenant counts of the figure.
pub const TENANTS: [usize; 4] = [1, 2, 4, 8];

/// The mix the issue names.
const MIX: [&str; 4] = ["knn-a", "pagerank", "ssb-q1.1", "dlrm"];

/// The polling settings: p10, p100, adaptive.
fn polling(base: &AxleConfig) -> Vec<(&'static str, AxleConfig)> {
    let mut adaptive = base.clone();
    adaptive.host.poll_policy = PollPolicy::Adaptive;
    vec![
        ("p10", with_poll(base, 500)),
        ("p100", with_poll(base, 5000)),
        ("adaptive", adaptive),
    ]
}

/// The workloads the tenants cycle through.
pub fn mix<'a>(workloads: &[&'a str]) -> Vec<&'a str> {
    let chosen: Vec<&str> = workloads
        .iter()
        .copied()
        .filter(|w| MIX.contains(w))
        .collect();
    if chosen.is_empty() {
        workloads.to_vec()
    } else {
        chosen
    }
}

pub(super) fn figure(base: &AxleConfig, workloads: &[&str]) -> anyhow::Result<FigureOutput> {
    let mix = mix(workloads);
    let mut table = Table::new(
        "tenants",
        "Tenants: AXLE with 1, 2, 4 and 8 tenants of mixed workloads on one device (CCM shared round-robin): slowdown against running alone, Jain's fairness index, CCM utilisation, host core stall",
        &[
            "tenants / polling",
            "makespan (ns)",
            "mean slowdown",
            "max slowdown",
            "Jain's index",
            "CCM busy (% of makespan)",
            "host stall (% of end-to-end)",
        ],
    );
    table.notes.push(format!(
        "tenant i runs the i-th of {} (cycling); each tenant's slowdown is its end-to-end time shared over the same run alone; inputs: the seeded generators (docs/tenants.md)",
        mix.join(", ")
    ));
    for (label, config) in polling(base) {
        let mut alone = Vec::new();
        for workload in &mix {
            let report = run(&RunRequest {
                workload: (*workload).to_owned(),
                mode: Mode::Axle,
                config: config.clone(),
                data: None,
                wall_limit: None,
            })?;
            alone.push(report.metrics.end_to_end_ns);
        }
        for tenants in TENANTS {
            let names: Vec<String> = (0..tenants)
                .filter_map(|t| mix.get(t % mix.len().max(1)).map(|w| (*w).to_owned()))
                .collect();
            let report = run_many(&ManyRequest {
                workloads: names,
                mode: Mode::Axle,
                config: config.clone(),
                data: None,
                wall_limit: None,
                policy: SharePolicy::RoundRobin,
                max_tenants: emulator::cosim::tenants::MAX_TENANTS,
                alone: false,
                faults: Vec::new(),
            })?;
            if !report.verified {
                anyhow::bail!("{tenants} tenants at {label}: a tenant's answer did not verify");
            }
            let mut slowdowns = Vec::new();
            let (mut stall, mut end_to_end) = (0u64, 0u64);
            for (index, tenant) in report.tenants.iter().enumerate() {
                let metrics = &tenant.shared.metrics;
                let alone_ns = alone.get(index % alone.len().max(1)).copied().unwrap_or(0);
                if alone_ns > 0 {
                    slowdowns.push(metrics.end_to_end_ns as f64 / alone_ns as f64);
                }
                stall += metrics.host_stall_ns;
                end_to_end += metrics.end_to_end_ns;
            }
            let rates: Vec<f64> = slowdowns.iter().map(|s| 1.0 / s).collect();
            let mean = slowdowns.iter().sum::<f64>() / slowdowns.len().max(1) as f64;
            let max = slowdowns.iter().copied().fold(0.0, f64::max);
            table.push(vec![
                Cell::text(format!("{tenants} / {label}")),
                (report.makespan_ns).into(),
                mean.into(),
                max.into(),
                jain(&rates).unwrap_or(0.0).into(),
                percent(report.ccm_busy_ns, report.makespan_ns).into(),
                percent(stall, end_to_end).into(),
            ]);
        }
    }
    Ok(FigureOutput {
        figure: Figure::Tenants,
        tables: vec![table],
        charts: Vec::new(),
    })
}
