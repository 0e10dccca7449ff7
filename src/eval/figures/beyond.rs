//! Beyond the paper (issue 14; `axle eval --figure beyond`, never part of `all`, which stays
//! the paper's Figures 10 to 16 so that the default evaluation and REPRODUCTION.md do not
//! change): (a) the end-to-end runtime and (b) the host core stall of AXLE at p1, p10, p100
//! and with adaptive polling (`--poll adaptive`) on every workload; (c) the LLM with and
//! without `--no-deadlock` at slot capacities down to one slot, against 100%.
//!
//! (c)'s capacities: 100%, 12.5% and 6.25% of the configured ring (Figure 16's and half its
//! smallest), then two that deadlock without the option whatever the scale: half of one
//! layer's payloads (every MLP task of a layer needs all of them, so a ring smaller than that
//! cannot hold one task's inputs) and one slot, the option's minimum. Both mechanisms that
//! stream (AXLE at the base polling interval and AXLE_Interrupt), each with the option off
//! (the paper's behaviour) and on.

use super::{metrics, percent, ratio, with_poll, Figure, FigureOutput, LLM, POLLING_INTERVALS_NS};
use crate::config::AxleConfig;
use crate::eval::plot::BarChart;
use crate::eval::sweep::{Outcome, Point, Results};
use crate::eval::table::{Cell, Table};
use host_runtime::{Mode, PollPolicy};

/// (a)'s bars: the paper's three intervals, then adaptive.
const POLLING: [&str; 4] = ["p1", "p10", "p100", "adaptive"];

/// `base` with adaptive polling (from `host.poll_interval_ns` up to
/// `host.adaptive_poll_longest_ns`).
pub fn adaptive(base: &AxleConfig) -> AxleConfig {
    let mut config = base.clone();
    config.host.poll_policy = PollPolicy::Adaptive;
    config
}

/// (a)'s configurations, labelled as [`POLLING`].
fn polling_configs(base: &AxleConfig) -> Vec<(&'static str, AxleConfig)> {
    let mut configs: Vec<(&'static str, AxleConfig)> = POLLING_INTERVALS_NS
        .iter()
        .map(|&(label, ns)| (label, with_poll(base, ns)))
        .collect();
    configs.push(("adaptive", adaptive(base)));
    configs
}

/// (c)'s capacities: (label, slots).
pub fn capacities(base: &AxleConfig) -> Vec<(String, u32)> {
    let slots = u64::from(base.axle.slots);
    let share =
        |per_100k: u64| u32::try_from((slots * per_100k / 100_000).max(1)).unwrap_or(u32::MAX);
    let layer = workloads::opt::OptShape::for_scale(base.workload.scale)
        .result_bytes()
        .div_ceil(u64::from(base.axle.slot_size.max(1)));
    let half_layer = u32::try_from((layer / 2).max(1)).unwrap_or(u32::MAX);
    vec![
        ("100%".to_owned(), share(100_000)),
        ("12.5%".to_owned(), share(12_500)),
        ("6.25%".to_owned(), share(6_250)),
        (format!("half a layer ({half_layer})"), half_layer),
        ("1 slot".to_owned(), 1),
    ]
}

/// (c)'s bars: (label, mode, option on).
const VARIANTS: [(&str, Mode, bool); 4] = [
    ("AXLE", Mode::Axle, false),
    ("AXLE --no-deadlock", Mode::Axle, true),
    ("AXLE_Interrupt", Mode::AxleIrq, false),
    ("AXLE_Interrupt --no-deadlock", Mode::AxleIrq, true),
];

fn capacity_config(base: &AxleConfig, slots: u32, no_deadlock: bool) -> AxleConfig {
    let mut config = base.clone();
    config.axle.slots = slots;
    config.host.no_deadlock = no_deadlock;
    config
}

/// The configurations the figure needs.
pub fn points(base: &AxleConfig, workloads: &[&str]) -> Vec<Point> {
    let mut points = Vec::new();
    for workload in workloads {
        for (_, config) in polling_configs(base) {
            points.push(Point::new(workload, Mode::Axle, &config));
        }
    }
    if workloads.contains(&LLM) {
        for (_, slots) in capacities(base) {
            for (_, mode, on) in VARIANTS {
                points.push(Point::new(LLM, mode, &capacity_config(base, slots, on)));
            }
        }
    }
    points
}

pub(super) fn figure(
    base: &AxleConfig,
    workloads: &[&str],
    results: &Results,
) -> anyhow::Result<FigureOutput> {
    let configs = polling_configs(base);
    let mut runtime = Table::new(
        "beyond-a",
        "Beyond (a): AXLE end-to-end runtime at p1, p10, p100 and with adaptive polling, relative to p1",
        &["workload", "p1 (ns)", "p1", "p10", "p100", "adaptive"],
    );
    let mut stall = Table::new(
        "beyond-b",
        "Beyond (b): AXLE host core stall in % of each run's end-to-end runtime, at p1, p10, p100 and with adaptive polling",
        &["workload", "p1", "p10", "p100", "adaptive"],
    );
    runtime.notes.push(format!(
        "adaptive: --poll adaptive, from host.poll_interval_ns ({} ns) up to host.adaptive_poll_longest_ns ({} ns), following the records' arrival (ours, not the paper's; docs/beyond.md)",
        base.host.poll_interval_ns, base.host.adaptive_poll_longest_ns
    ));
    let mut runtime_values = Vec::new();
    let mut stall_values = Vec::new();
    for workload in workloads {
        let p1 = metrics(results, &Point::new(workload, Mode::Axle, &configs[0].1))?.end_to_end_ns;
        let mut runtime_row: Vec<Cell> = vec![(*workload).into(), p1.into()];
        let mut stall_row: Vec<Cell> = vec![(*workload).into()];
        let mut runtime_bars = Vec::new();
        let mut stall_bars = Vec::new();
        for (_, config) in &configs {
            let m = metrics(results, &Point::new(workload, Mode::Axle, config))?;
            let relative = ratio(m.end_to_end_ns, p1);
            let stalled = percent(m.host_stall_ns, m.end_to_end_ns);
            runtime_row.push(relative.into());
            stall_row.push(stalled.into());
            runtime_bars.push(vec![relative]);
            stall_bars.push(vec![stalled]);
        }
        runtime.push(runtime_row);
        stall.push(stall_row);
        runtime_values.push(runtime_bars);
        stall_values.push(stall_bars);
    }
    let mut tables = vec![runtime, stall];
    let mut charts = vec![
        BarChart::simple(
            "beyond-a",
            "Beyond (a): end-to-end runtime relative to AXLE p1",
            "x p1",
            workloads,
            &POLLING,
            runtime_values,
        ),
        BarChart::simple(
            "beyond-b",
            "Beyond (b): host core stall (% of end-to-end)",
            "% of end-to-end",
            workloads,
            &POLLING,
            stall_values,
        ),
    ];
    if workloads.contains(&LLM) {
        let (table, chart) = no_deadlock(base, results)?;
        tables.push(table);
        charts.push(chart);
    }
    Ok(FigureOutput {
        figure: Figure::Beyond,
        tables,
        charts,
    })
}

/// (c): the LLM at each capacity, with the option off and on, relative to 100% (the same
/// variant's run at 100%).
fn no_deadlock(base: &AxleConfig, results: &Results) -> anyhow::Result<(Table, BarChart)> {
    let capacities = capacities(base);
    let mut columns = vec!["capacity".to_owned(), "slots".to_owned()];
    columns.extend(VARIANTS.iter().map(|(label, _, _)| (*label).to_owned()));
    columns.extend(
        VARIANTS
            .iter()
            .filter(|(_, _, on)| *on)
            .flat_map(|(label, _, _)| {
                [
                    format!("{label}: spills"),
                    format!("{label}: spilled bytes"),
                    format!("{label}: host stall %"),
                ]
            }),
    );
    let mut table = Table {
        id: "beyond-c".into(),
        title: format!(
            "Beyond (c): {LLM} end-to-end runtime relative to 100% slot capacity, without and with --no-deadlock"
        ),
        columns,
        rows: Vec::new(),
        notes: vec![
            "deadlock: the runtime's detector reported that no host task can run and no slot can be freed (without --no-deadlock); --no-deadlock spills the held records and payloads into the host's overflow buffer instead (host core stall), and every run with it verified its answer".into(),
            format!(
                "half a layer: half the payloads of one decoder layer's result, which every MLP task of the layer needs; AXLE at {} ns polling",
                base.host.poll_interval_ns
            ),
        ],
    };
    let full: Vec<Option<u64>> = VARIANTS
        .iter()
        .map(|&(_, mode, on)| {
            let point = Point::new(LLM, mode, &capacity_config(base, capacities[0].1, on));
            Ok(match results.outcome(&point)? {
                Outcome::Done(report) => Some(report.metrics.end_to_end_ns),
                Outcome::Deadlock(_) | Outcome::Shared(_) => None,
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let mut values = Vec::new();
    let mut deadlocks = Vec::new();
    for (group, (label, slots)) in capacities.iter().enumerate() {
        let mut row: Vec<Cell> = vec![label.as_str().into(), u64::from(*slots).into()];
        let mut extra: Vec<Cell> = Vec::new();
        let mut bars = Vec::new();
        for (bar, &(_, mode, on)) in VARIANTS.iter().enumerate() {
            let point = Point::new(LLM, mode, &capacity_config(base, *slots, on));
            match results.outcome(&point)? {
                Outcome::Done(report) => {
                    let m = &report.metrics;
                    let relative = full[bar].map_or(f64::NAN, |full| ratio(m.end_to_end_ns, full));
                    row.push(relative.into());
                    bars.push(vec![relative]);
                    if on {
                        extra.push(m.overflow_spills.into());
                        extra.push(m.overflow_bytes.into());
                        extra.push(percent(m.host_stall_ns, m.end_to_end_ns).into());
                    }
                }
                Outcome::Shared(_) => {
                    anyhow::bail!("internal: a run of {LLM} alone gave a shared run's outcome")
                }
                Outcome::Deadlock(_) => {
                    row.push("deadlock".into());
                    bars.push(vec![0.0]);
                    deadlocks.push((group, bar));
                    if on {
                        extra.extend(["deadlock".into(), "deadlock".into(), "deadlock".into()]);
                    }
                }
            }
        }
        row.extend(extra);
        table.push(row);
        values.push(bars);
    }
    let groups: Vec<&str> = capacities.iter().map(|(label, _)| label.as_str()).collect();
    let bars: Vec<&str> = VARIANTS.iter().map(|(label, _, _)| *label).collect();
    let mut chart = BarChart::simple(
        "beyond-c",
        &format!("Beyond (c): {LLM} end-to-end runtime relative to 100% slot capacity"),
        "x 100% capacity",
        &groups,
        &bars,
        values,
    );
    for (group, bar) in deadlocks {
        chart.note(group, bar, "deadlock");
    }
    Ok((table, chart))
}
