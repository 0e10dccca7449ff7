//! Several tenants on one device (issue 15; `axle eval --figure tenants`, never part of `all`):
//! for 1, 2, 4 and 8 tenants of mixed workloads in AXLE mode, at p10, p100 and with adaptive
//! polling, each tenant's slowdown against running alone, Jain's fairness index over the
//! tenants' progress rates, the CCM's utilisation and the host core stall (docs/tenants.md).
//!
//! Tenant `i` runs the `i`-th workload of the mix, cycling: KNN (a), PageRank, SSB Q1.1 and
//! DLRM (those of them selected by `--workloads`, else the selection). Its runs are points of
//! the sweep like every figure's: each shared run ([`Point::shared`], as `axle run-many
//! --no-alone` makes it) and each workload of the mix alone at the same polling, so that they
//! run `--jobs` at a time, over the real inputs where the data directory has them, and in a
//! cluster (`--list-runs`, `--run`, `--merge`).
//!
//! Tables: the summary (one row per tenant count and polling setting), one table per tenant
//! count and polling setting with a row per tenant, and the paper's p100 claim checked at
//! each tenant count.

use super::{percent, with_poll, Figure, FigureOutput};
use crate::config::AxleConfig;
use crate::eval::plot::BarChart;
use crate::eval::sweep::{Point, Results};
use crate::eval::table::{Cell, Table};
use crate::tenants::{jain, ManyReport};
use host_runtime::{Mode, PollPolicy};

/// Tenant counts of the figure.
pub const TENANTS: [usize; 4] = [1, 2, 4, 8];

/// The mix the issue names.
const MIX: [&str; 4] = ["knn-a", "pagerank", "ssb-q1.1", "dlrm"];

/// The paper's "single-digit ratio of host core stall time" at p100 (Section V-C), read as
/// the inequality it states: below 10% of the end-to-end runtime.
const SINGLE_DIGIT_PERCENT: f64 = 10.0;

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

/// The workloads of `tenants` tenants: tenant `i` runs the `i`-th of `mix`, cycling.
fn tenants_of<'a>(mix: &[&'a str], tenants: usize) -> Vec<&'a str> {
    (0..tenants)
        .filter_map(|t| mix.get(t % mix.len().max(1)).copied())
        .collect()
}

/// The runs the figure needs: per polling setting, each workload of the mix alone, then the
/// shared run of each tenant count.
pub fn points(base: &AxleConfig, workloads: &[&str]) -> Vec<Point> {
    let mix = mix(workloads);
    let mut points = Vec::new();
    for (_, config) in polling(base) {
        for workload in &mix {
            points.push(Point::new(workload, Mode::Axle, &config));
        }
        for tenants in TENANTS {
            let names = tenants_of(&mix, tenants);
            if !names.is_empty() {
                points.push(Point::shared(&names, Mode::Axle, &config));
            }
        }
    }
    points
}

/// The host stall at one tenant count, for the claim: all tenants' at p10 and p100, and
/// p100's worst tenant (its stall, who it is).
struct Stalls {
    tenants: usize,
    p10: Option<f64>,
    p100: Option<f64>,
    worst: Option<(f64, String)>,
}

/// One tenant's figures in a shared run.
struct TenantRow {
    workload: String,
    alone_ns: u64,
    shared_ns: u64,
    host_stall_ns: u64,
    ccm_busy_ns: u64,
}

impl TenantRow {
    fn slowdown(&self) -> Option<f64> {
        (self.alone_ns > 0).then(|| self.shared_ns as f64 / self.alone_ns as f64)
    }
}

/// Each tenant of `report` beside its workload's run alone.
fn tenant_rows(
    report: &ManyReport,
    config: &AxleConfig,
    results: &Results,
) -> anyhow::Result<Vec<TenantRow>> {
    let mut rows = Vec::new();
    for tenant in &report.tenants {
        let metrics = &tenant.shared.metrics;
        let alone = results.report(&Point::new(&tenant.shared.workload, Mode::Axle, config))?;
        rows.push(TenantRow {
            workload: tenant.shared.workload.clone(),
            alone_ns: alone.metrics.end_to_end_ns,
            shared_ns: metrics.end_to_end_ns,
            host_stall_ns: metrics.host_stall_ns,
            ccm_busy_ns: metrics.ccm_busy_ns,
        });
    }
    Ok(rows)
}

/// The inputs the tenants read, one note per workload, from the runs' own reports.
fn input_notes(mix: &[&str], config: &AxleConfig, results: &Results) -> Vec<String> {
    mix.iter()
        .map(|workload| {
            let input = results
                .report(&Point::new(workload, Mode::Axle, config))
                .ok()
                .and_then(|report| report.provenance.as_ref())
                .map_or_else(
                    || "not recorded".to_owned(),
                    |provenance| provenance.input.describe(),
                );
            format!("input of {workload}: {input}")
        })
        .collect()
}

pub(super) fn figure(
    base: &AxleConfig,
    workloads: &[&str],
    results: &Results,
) -> anyhow::Result<FigureOutput> {
    let mix = mix(workloads);
    let mut summary = Table::new(
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
    summary.notes.push(format!(
        "tenant i runs the i-th of {} (cycling); each tenant's slowdown is its end-to-end time shared over the same workload's run alone at the same polling (docs/tenants.md)",
        mix.join(", ")
    ));
    if let Some((_, config)) = polling(base).into_iter().next() {
        summary.notes.extend(input_notes(&mix, &config, results));
    }
    let mut per_tenant = Vec::new();
    let mut charts = Vec::new();
    // Per tenant count: (p10's, p100's) stall over all tenants, and p100's worst tenant's.
    let mut stalls: Vec<Stalls> = TENANTS
        .iter()
        .map(|&tenants| Stalls {
            tenants,
            p10: None,
            p100: None,
            worst: None,
        })
        .collect();
    for (label, config) in polling(base) {
        for tenants in TENANTS {
            let names = tenants_of(&mix, tenants);
            if names.is_empty() {
                continue;
            }
            let report = results.shared(&Point::shared(&names, Mode::Axle, &config))?;
            let rows = tenant_rows(report, &config, results)?;
            let slowdowns: Vec<f64> = rows.iter().filter_map(TenantRow::slowdown).collect();
            let rates: Vec<f64> = slowdowns.iter().map(|s| 1.0 / s).collect();
            let mean = slowdowns.iter().sum::<f64>() / slowdowns.len().max(1) as f64;
            let max = slowdowns.iter().copied().fold(0.0, f64::max);
            let stall: u64 = rows.iter().map(|row| row.host_stall_ns).sum();
            let end_to_end: u64 = rows.iter().map(|row| row.shared_ns).sum();
            let whole_stall = percent(stall, end_to_end);
            summary.push(vec![
                Cell::text(format!("{tenants} / {label}")),
                report.makespan_ns.into(),
                mean.into(),
                max.into(),
                jain(&rates).unwrap_or(0.0).into(),
                percent(report.ccm_busy_ns, report.makespan_ns).into(),
                whole_stall.into(),
            ]);
            let worst = rows
                .iter()
                .enumerate()
                .map(|(index, row)| {
                    (
                        percent(row.host_stall_ns, row.shared_ns),
                        format!("tenant {index} ({})", row.workload),
                    )
                })
                .fold(
                    None,
                    |worst: Option<(f64, String)>, candidate| match worst {
                        Some(worst) if worst.0 >= candidate.0 => Some(worst),
                        _ => Some(candidate),
                    },
                );
            if let Some(entry) = stalls.iter_mut().find(|entry| entry.tenants == tenants) {
                match label {
                    "p10" => entry.p10 = Some(whole_stall),
                    "p100" => {
                        entry.p100 = Some(whole_stall);
                        entry.worst = worst;
                    }
                    _ => {}
                }
            }
            let (table, chart) = tenant_table(tenants, label, &rows, report.ccm_busy_ns);
            per_tenant.push(table);
            charts.push(chart);
        }
    }
    let mut tables = vec![summary, claim_table(&stalls)];
    charts.insert(0, claim_chart(&stalls));
    tables.extend(per_tenant);
    Ok(FigureOutput {
        figure: Figure::Tenants,
        tables,
        charts,
    })
}

/// One shared run's table (a row per tenant) and its chart (each tenant's slowdown).
fn tenant_table(
    tenants: usize,
    label: &str,
    rows: &[TenantRow],
    device_ccm_busy_ns: u64,
) -> (Table, BarChart) {
    let id = format!("tenants-{tenants}-{label}");
    let title = format!(
        "Tenants: {tenants} {} at {label}, each tenant: its runtime alone and shared, slowdown, host core stall, share of the device's CCM time",
        if tenants == 1 { "tenant" } else { "tenants" }
    );
    let mut table = Table::new(
        &id,
        &title,
        &[
            "tenant",
            "workload",
            "alone (ns)",
            "shared (ns)",
            "slowdown",
            "host stall (% of its end-to-end)",
            "CCM time (% of the device's CCM busy)",
        ],
    );
    let mut groups = Vec::new();
    let mut values = Vec::new();
    for (index, row) in rows.iter().enumerate() {
        let slowdown = row.slowdown();
        table.push(vec![
            Cell::text(index.to_string()),
            Cell::text(row.workload.clone()),
            row.alone_ns.into(),
            row.shared_ns.into(),
            slowdown.map_or_else(|| Cell::text("n/a"), Cell::from),
            percent(row.host_stall_ns, row.shared_ns).into(),
            percent(row.ccm_busy_ns, device_ccm_busy_ns).into(),
        ]);
        groups.push(format!("{index}, {}", row.workload));
        values.push(vec![vec![slowdown.unwrap_or(f64::NAN)]]);
    }
    let group_names: Vec<&str> = groups.iter().map(String::as_str).collect();
    let mut chart = BarChart::simple(
        &id,
        &title,
        "slowdown, x its run alone (ratio)",
        &group_names,
        &["slowdown"],
        values,
    );
    chart.x_label = "tenant, workload".to_owned();
    (table, chart)
}

/// The paper's p100 claim at each tenant count: "With p100, AXLE polls local region less
/// frequently, resulting in a single-digit ratio of host core stall time" (Section V-C,
/// which names multi-tenant environments as where p100 fits), checked as the inequality
/// (below [`SINGLE_DIGIT_PERCENT`]) over all tenants together and for the worst tenant.
fn claim_table(stalls: &[Stalls]) -> Table {
    let mut table = Table::new(
        "tenants-claim",
        "Tenants: the paper's p100 claim (a single-digit ratio of host core stall time) at each tenant count, all tenants together and the worst tenant",
        &[
            "tenants",
            "p10 host stall (%)",
            "p100 host stall (%)",
            "p100 single-digit, all tenants",
            "p100 worst tenant",
            "its host stall (%)",
            "p100 single-digit, every tenant",
        ],
    );
    let held = |value: Option<f64>| match value {
        Some(value) if value < SINGLE_DIGIT_PERCENT => Cell::text("held"),
        Some(_) => Cell::text("not held"),
        None => Cell::text("not run"),
    };
    let number = |value: Option<f64>| value.map_or_else(|| Cell::text("not run"), Cell::from);
    for entry in stalls {
        let worst = &entry.worst;
        table.push(vec![
            Cell::text(entry.tenants.to_string()),
            number(entry.p10),
            number(entry.p100),
            held(entry.p100),
            worst
                .as_ref()
                .map_or_else(|| Cell::text("not run"), |(_, who)| Cell::text(who.clone())),
            number(worst.as_ref().map(|(stall, _)| *stall)),
            held(worst.as_ref().map(|(stall, _)| *stall)),
        ]);
    }
    table.notes.push(format!(
        "host stall is the tenants' stall over their end-to-end time (all tenants: summed over them); single-digit read as below {SINGLE_DIGIT_PERCENT}%"
    ));
    table
}

/// The claim table's chart: p10's and p100's host stall (all tenants) per tenant count.
fn claim_chart(stalls: &[Stalls]) -> BarChart {
    let groups: Vec<String> = stalls
        .iter()
        .map(|entry| entry.tenants.to_string())
        .collect();
    let group_names: Vec<&str> = groups.iter().map(String::as_str).collect();
    let values = stalls
        .iter()
        .map(|entry| {
            vec![
                vec![entry.p10.unwrap_or(f64::NAN)],
                vec![entry.p100.unwrap_or(f64::NAN)],
            ]
        })
        .collect();
    let mut chart = BarChart::simple(
        "tenants-claim",
        "Tenants: host core stall at p10 and p100 per tenant count (the paper: single-digit at p100)",
        "host core stall, % of the tenants' end-to-end",
        &group_names,
        &["p10", "p100"],
        values,
    );
    chart.x_label = "tenants".to_owned();
    chart
}
