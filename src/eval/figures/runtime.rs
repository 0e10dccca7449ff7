//! Figures 10 and 11: the end-to-end runtime of every mode in percent of RP's, RP and BS
//! stacked by component, and the LLM case with fewer processing units.

use super::{
    figure11_config, figure11_label, metrics, percent, ratio, with_poll, Figure, FigureOutput,
    FIGURE11_CCM_UNITS, FIGURE11_HOST_UNITS, LLM, POLLING_INTERVALS_NS,
};
use crate::config::AxleConfig;
use crate::eval::plot::{BarChart, Segment};
use crate::eval::sweep::{Point, Results};
use crate::eval::table::{Cell, Table};
use host_runtime::Mode;

const FIG10_COLUMNS: [&str; 16] = [
    "workload",
    "RP (ns)",
    "RP total",
    "RP CCM",
    "RP data movement",
    "RP host",
    "RP overhead",
    "BS total",
    "BS CCM",
    "BS data movement",
    "BS host",
    "BS overhead",
    "AXLE_Interrupt",
    "AXLE p1",
    "AXLE p10",
    "AXLE p100",
];

/// One workload's Figure 10 row, and its bars.
fn figure10_row(
    label: &str,
    workload: &str,
    config: &AxleConfig,
    results: &Results,
) -> anyhow::Result<(Vec<Cell>, Vec<Vec<f64>>)> {
    let rp = metrics(results, &Point::new(workload, Mode::Rp, config))?;
    let bs = metrics(results, &Point::new(workload, Mode::Bs, config))?;
    let irq = metrics(results, &Point::new(workload, Mode::AxleIrq, config))?;
    let base = rp.end_to_end_ns;
    let mut row: Vec<Cell> = vec![label.into(), base.into()];
    let mut bars = Vec::new();
    for m in [rp, bs] {
        let parts = [
            m.ccm_busy_ns,
            m.data_movement_ns,
            m.host_busy_ns,
            m.overhead_ns,
        ];
        row.push(percent(m.end_to_end_ns, base).into());
        row.extend(parts.iter().map(|&p| Cell::from(percent(p, base))));
        bars.push(parts.iter().map(|&p| percent(p, base)).collect());
    }
    row.push(percent(irq.end_to_end_ns, base).into());
    bars.push(vec![percent(irq.end_to_end_ns, base)]);
    for (_, ns) in POLLING_INTERVALS_NS {
        let axle = metrics(
            results,
            &Point::new(workload, Mode::Axle, &with_poll(config, ns)),
        )?;
        row.push(percent(axle.end_to_end_ns, base).into());
        bars.push(vec![percent(axle.end_to_end_ns, base)]);
    }
    Ok((row, bars))
}

fn figure10_chart(
    id: &str,
    title: &str,
    groups: Vec<String>,
    bars: Vec<Vec<Vec<f64>>>,
) -> BarChart {
    BarChart {
        id: id.to_owned(),
        title: title.to_owned(),
        x_label: "workload".into(),
        y_label: "% of RP end-to-end".into(),
        groups,
        bars: ["RP", "BS", "AXLE_Irq", "AXLE p1", "AXLE p10", "AXLE p100"]
            .map(String::from)
            .to_vec(),
        segments: vec![
            Segment::new("CCM", 0),
            Segment::new("data movement", 1),
            Segment::new("host", 2),
            Segment::new("overhead", 3),
        ],
        values: bars,
        notes: Vec::new(),
    }
}

pub(super) fn figure10(
    base: &AxleConfig,
    workloads: &[&str],
    results: &Results,
) -> anyhow::Result<FigureOutput> {
    let mut table = Table::new(
        "fig10",
        "Figure 10 (a)-(i): end-to-end runtime in % of RP's; RP and BS split into CCM + data movement + host + overhead",
        &FIG10_COLUMNS,
    );
    let mut groups = Vec::new();
    let mut bars = Vec::new();
    for workload in workloads {
        let (row, workload_bars) = figure10_row(workload, workload, base, results)?;
        table.push(row);
        groups.push((*workload).to_owned());
        bars.push(workload_bars);
    }
    table.notes.push(
        "AXLE_Interrupt: one interrupt per DMA request, handled 50 µs later (Table III); AXLE p1/p10/p100: local polling every 50 ns / 500 ns / 5 µs".into(),
    );
    let mut reductions = Table::new(
        "fig10j",
        "Figure 10 (j): AXLE's end-to-end reduction against RP and BS, % (over all workloads)",
        &["interval", "baseline", "average", "geomean", "maximum"],
    );
    for (label, ns) in POLLING_INTERVALS_NS {
        for baseline in [Mode::Rp, Mode::Bs] {
            let mut ratios = Vec::new();
            for workload in workloads {
                let axle = metrics(
                    results,
                    &Point::new(workload, Mode::Axle, &with_poll(base, ns)),
                )?;
                let reference = metrics(results, &Point::new(workload, baseline, base))?;
                ratios.push(ratio(axle.end_to_end_ns, reference.end_to_end_ns));
            }
            let count = ratios.len().max(1) as f64;
            let average = ratios.iter().map(|r| 1.0 - r).sum::<f64>() / count * 100.0;
            let geomean =
                (1.0 - (ratios.iter().map(|r| r.ln()).sum::<f64>() / count).exp()) * 100.0;
            let maximum = ratios.iter().map(|r| 1.0 - r).fold(f64::MIN, f64::max) * 100.0;
            reductions.push(vec![
                label.into(),
                baseline.name().to_uppercase().into(),
                average.into(),
                geomean.into(),
                maximum.into(),
            ]);
        }
    }
    let chart = figure10_chart(
        "fig10",
        "Figure 10: end-to-end runtime (% of RP)",
        groups,
        bars,
    );
    Ok(FigureOutput {
        figure: Figure::F10,
        tables: vec![table, reductions],
        charts: vec![chart],
    })
}

pub(super) fn figure11(
    base: &AxleConfig,
    workloads: &[&str],
    results: &Results,
) -> anyhow::Result<FigureOutput> {
    let mut table = Table::new(
        "fig11",
        "Figure 11: the LLM case (opt-2.7b) with fewer processing units, % of RP's end-to-end runtime in the same hardware",
        &FIG10_COLUMNS,
    );
    let mut groups = Vec::new();
    let mut bars = Vec::new();
    if workloads.contains(&LLM) {
        let reduced = figure11_config(base);
        for config in [base.clone(), reduced] {
            let label = figure11_label(&config);
            let (row, workload_bars) = figure10_row(&label, LLM, &config, results)?;
            table.push(row);
            groups.push(label);
            bars.push(workload_bars);
        }
    }
    table.notes.push(format!(
        "the caption reduces \"the CCM (32 → 8) and the host (16 → 4)\", while Table III gives 32 host and 16 CCM units: we read the labels as swapped (host 32 → {FIGURE11_HOST_UNITS}, CCM 16 → {FIGURE11_CCM_UNITS}), which matches Table III and the text's host that \"can no longer batch all requests\"; first row Table III's hardware, second row the reduced one"
    ));
    let chart = figure10_chart(
        "fig11",
        "Figure 11: opt-2.7b with fewer processing units (% of RP)",
        groups,
        bars,
    );
    Ok(FigureOutput {
        figure: Figure::F11,
        tables: vec![table],
        charts: vec![chart],
    })
}
