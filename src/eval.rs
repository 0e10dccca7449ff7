//! `axle eval`: the paper's Figure 10 on the workloads that exist: RP and BS with their
//! components, AXLE_Interrupt, and AXLE at the p1, p10 and p100 polling intervals, normalised
//! to RP; and Figure 10(j), the average, geometric-mean and maximum reductions of AXLE against
//! RP and BS for each polling interval.

use crate::config::AxleConfig;
use crate::run::{run, RunReport, RunRequest};
use host_runtime::Mode;
use serde::Serialize;
use std::fmt::Write;
use std::path::PathBuf;

/// The paper's local polling intervals (Table III): p1, p10, p100.
pub const POLLING_INTERVALS_NS: [(&str, u64); 3] = [("p1", 50), ("p10", 500), ("p100", 5000)];

/// One workload's row of Figure 10.
#[derive(Clone, Debug, Serialize)]
pub struct Figure10Row {
    /// Workload.
    pub workload: String,
    /// RP run.
    pub rp: RunReport,
    /// BS run.
    pub bs: RunReport,
    /// AXLE_Interrupt run.
    pub axle_irq: RunReport,
    /// AXLE at p1, p10, p100.
    pub axle: Vec<(String, RunReport)>,
}

/// Figure 10(j): reductions of AXLE's end-to-end runtime, in percent of the baseline's.
#[derive(Clone, Debug, Serialize)]
pub struct Reduction {
    /// Polling interval label.
    pub interval: String,
    /// Baseline (`rp` or `bs`).
    pub baseline: String,
    /// Mean reduction, percent.
    pub average: f64,
    /// Geometric-mean reduction, percent (1 - geomean of the runtime ratios).
    pub geomean: f64,
    /// Largest reduction, percent.
    pub maximum: f64,
}

/// Everything `axle eval` measured.
#[derive(Clone, Debug, Serialize)]
pub struct Figure10 {
    /// Per workload.
    pub rows: Vec<Figure10Row>,
    /// Figure 10(j).
    pub reductions: Vec<Reduction>,
}

fn one(
    workload: &str,
    mode: Mode,
    config: &AxleConfig,
    data: &Option<PathBuf>,
) -> anyhow::Result<RunReport> {
    let report = run(&RunRequest {
        workload: workload.into(),
        mode,
        config: config.clone(),
        data: data.clone(),
    })?;
    if !report.verified {
        anyhow::bail!(
            "{workload} in mode {} produced a wrong answer: {}",
            mode.name(),
            report.verification
        );
    }
    Ok(report)
}

/// Runs Figure 10 for `workloads` with `config` as the base configuration.
pub fn figure10(
    workloads: &[&str],
    config: &AxleConfig,
    data: &Option<PathBuf>,
) -> anyhow::Result<Figure10> {
    let mut rows = Vec::new();
    for workload in workloads {
        let rp = one(workload, Mode::Rp, config, data)?;
        let bs = one(workload, Mode::Bs, config, data)?;
        let axle_irq = one(workload, Mode::AxleIrq, config, data)?;
        let mut axle = Vec::new();
        for (label, interval) in POLLING_INTERVALS_NS {
            let mut polled = config.clone();
            polled.host.poll_interval_ns = interval;
            axle.push((label.to_string(), one(workload, Mode::Axle, &polled, data)?));
        }
        rows.push(Figure10Row {
            workload: workload.to_string(),
            rp,
            bs,
            axle_irq,
            axle,
        });
    }
    let mut reductions = Vec::new();
    for (index, (label, _)) in POLLING_INTERVALS_NS.iter().enumerate() {
        for baseline in ["rp", "bs"] {
            let ratios: Vec<f64> = rows
                .iter()
                .map(|row| {
                    let base = if baseline == "rp" { &row.rp } else { &row.bs };
                    row.axle[index].1.metrics.end_to_end_ns as f64
                        / base.metrics.end_to_end_ns.max(1) as f64
                })
                .collect();
            let count = ratios.len().max(1) as f64;
            let average = ratios.iter().map(|r| 1.0 - r).sum::<f64>() / count * 100.0;
            let geomean =
                (1.0 - (ratios.iter().map(|r| r.ln()).sum::<f64>() / count).exp()) * 100.0;
            let maximum = ratios.iter().map(|r| 1.0 - r).fold(f64::MIN, f64::max) * 100.0;
            reductions.push(Reduction {
                interval: label.to_string(),
                baseline: baseline.into(),
                average,
                geomean,
                maximum,
            });
        }
    }
    Ok(Figure10 { rows, reductions })
}

fn percent(part: u64, whole: u64) -> String {
    format!("{:.2}", part as f64 * 100.0 / whole.max(1) as f64)
}

/// The figure as terminal tables.
pub fn render(figure: &Figure10) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Figure 10: end-to-end runtime normalised to RP (%), virtual time. RP and BS as CCM + data movement + host + overhead."
    );
    let _ = writeln!(
        out,
        "{:<9} {:>8} {:>30} {:>30} {:>9} {:>8} {:>8} {:>8}",
        "workload",
        "RP (µs)",
        "RP = ccm + dm + host + ovh",
        "BS = ccm + dm + host + ovh",
        "AXLE_Irq",
        "AXLE p1",
        "p10",
        "p100"
    );
    for row in &figure.rows {
        let base = row.rp.metrics.end_to_end_ns;
        let parts = |r: &RunReport| {
            let m = &r.metrics;
            format!(
                "{} = {}+{}+{}+{}",
                percent(m.end_to_end_ns, base),
                percent(m.ccm_busy_ns, base),
                percent(m.data_movement_ns, base),
                percent(m.host_busy_ns, base),
                percent(m.overhead_ns, base)
            )
        };
        let _ = writeln!(
            out,
            "{:<9} {:>8.2} {:>30} {:>30} {:>9} {:>8} {:>8} {:>8}",
            row.workload,
            base as f64 / 1000.0,
            parts(&row.rp),
            parts(&row.bs),
            percent(row.axle_irq.metrics.end_to_end_ns, base),
            percent(row.axle[0].1.metrics.end_to_end_ns, base),
            percent(row.axle[1].1.metrics.end_to_end_ns, base),
            percent(row.axle[2].1.metrics.end_to_end_ns, base),
        );
    }
    let _ = writeln!(out, "\nFigure 10(j): AXLE's end-to-end reduction (%)");
    let _ = writeln!(
        out,
        "{:<6} {:<9} {:>8} {:>8} {:>8}",
        "poll", "baseline", "average", "geomean", "maximum"
    );
    for reduction in &figure.reductions {
        let _ = writeln!(
            out,
            "{:<6} {:<9} {:>8.2} {:>8.2} {:>8.2}",
            reduction.interval,
            reduction.baseline,
            reduction.average,
            reduction.geomean,
            reduction.maximum
        );
    }
    out
}
