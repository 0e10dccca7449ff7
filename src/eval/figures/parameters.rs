//! Figures 14 to 16: the streaming factor (relative to AXLE at SF1), out-of-order streaming
//! (relative to the same scheduling policy with it) and the DMA slot capacity (relative to the
//! full one, with back-pressure in percent of the run).

use super::{
    capacity_configs, metrics, percent, ratio, scheduling_configs, streaming_factor_configs,
    Figure, FigureOutput, SLOT_CAPACITIES,
};
use crate::config::AxleConfig;
use crate::eval::plot::BarChart;
use crate::eval::sweep::{Outcome, Point, Results};
use crate::eval::table::{Cell, Table};
use host_runtime::Mode;

pub(super) fn figure14(
    base: &AxleConfig,
    workloads: &[&str],
    results: &Results,
) -> anyhow::Result<FigureOutput> {
    let configs = streaming_factor_configs(base);
    let mut columns = vec!["workload".to_owned(), "SF1 (ns)".to_owned()];
    columns.extend(configs.iter().map(|(label, _)| label.clone()));
    columns.extend(["RP".to_owned(), "BS".to_owned()]);
    let mut table = Table {
        id: "fig14".into(),
        title: "Figure 14: AXLE end-to-end runtime relative to SF1 (32 B), for streaming factors SF1..SF64 (x 32 B) and SF_Y% (of the result); RP and BS for reference".into(),
        columns,
        rows: Vec::new(),
        notes: vec![format!("AXLE at the base polling interval ({} ns), {}-byte slots", base.host.poll_interval_ns, base.axle.slot_size)],
    };
    let mut values = Vec::new();
    for workload in workloads {
        let sf1 = metrics(results, &Point::new(workload, Mode::Axle, &configs[0].1))?.end_to_end_ns;
        let mut row: Vec<Cell> = vec![(*workload).into(), sf1.into()];
        let mut bars = Vec::new();
        for (_, config) in &configs {
            let m = metrics(results, &Point::new(workload, Mode::Axle, config))?;
            row.push(ratio(m.end_to_end_ns, sf1).into());
            bars.push(vec![ratio(m.end_to_end_ns, sf1)]);
        }
        for mode in [Mode::Rp, Mode::Bs] {
            let m = metrics(results, &Point::new(workload, mode, base))?;
            row.push(ratio(m.end_to_end_ns, sf1).into());
            bars.push(vec![ratio(m.end_to_end_ns, sf1)]);
        }
        table.push(row);
        values.push(bars);
    }
    let mut bar_names: Vec<String> = configs.iter().map(|(label, _)| label.clone()).collect();
    bar_names.extend(["RP".to_owned(), "BS".to_owned()]);
    let names: Vec<&str> = bar_names.iter().map(String::as_str).collect();
    let chart = BarChart::simple(
        "fig14",
        "Figure 14: end-to-end runtime relative to AXLE SF1",
        "x SF1",
        workloads,
        &names,
        values,
    );
    Ok(FigureOutput {
        figure: Figure::F14,
        tables: vec![table],
        charts: vec![chart],
    })
}

pub(super) fn figure15(
    base: &AxleConfig,
    workloads: &[&str],
    results: &Results,
) -> anyhow::Result<FigureOutput> {
    let configs = scheduling_configs(base);
    let mut table = Table::new(
        "fig15",
        "Figure 15: AXLE end-to-end runtime without out-of-order streaming, relative to with it, under round-robin and FIFO scheduling (applied to CCM and host)",
        &["workload", "RR OoO (ns)", "RR in-order", "FIFO OoO (ns)", "FIFO in-order"],
    );
    let mut values = Vec::new();
    for workload in workloads {
        let ns: Vec<u64> = configs
            .iter()
            .map(|(_, config)| {
                metrics(results, &Point::new(workload, Mode::Axle, config)).map(|m| m.end_to_end_ns)
            })
            .collect::<anyhow::Result<_>>()?;
        let (rr, rr_in, fifo, fifo_in) = (ns[0], ns[1], ns[2], ns[3]);
        table.push(vec![
            (*workload).into(),
            rr.into(),
            ratio(rr_in, rr).into(),
            fifo.into(),
            ratio(fifo_in, fifo).into(),
        ]);
        values.push(vec![
            vec![1.0],
            vec![ratio(rr_in, rr)],
            vec![1.0],
            vec![ratio(fifo_in, fifo)],
        ]);
    }
    let chart = BarChart::simple(
        "fig15",
        "Figure 15: end-to-end runtime relative to OoO streaming",
        "x OoO",
        workloads,
        &["RR OoO", "RR in-order", "FIFO OoO", "FIFO in-order"],
        values,
    );
    Ok(FigureOutput {
        figure: Figure::F15,
        tables: vec![table],
        charts: vec![chart],
    })
}

pub(super) fn figure16(
    base: &AxleConfig,
    workloads: &[&str],
    results: &Results,
) -> anyhow::Result<FigureOutput> {
    let configs = capacity_configs(base);
    let mut runtime = Table::new(
        "fig16a",
        "Figure 16 (a): AXLE end-to-end runtime relative to the full DMA slot capacity",
        &["workload", "slots at 100%", "100%", "50%", "25%", "12.5%"],
    );
    let mut pressure = Table::new(
        "fig16b",
        "Figure 16 (b): back-pressure (CCM waiting for ring credit) in % of the run",
        &["workload", "100%", "50%", "25%", "12.5%"],
    );
    let mut runtime_values = Vec::new();
    let mut pressure_values = Vec::new();
    // (workload, capacity) of every run that deadlocked: the charts say so at its bar.
    let mut deadlocks = Vec::new();
    for (group, workload) in workloads.iter().enumerate() {
        let full = match results.outcome(&Point::new(workload, Mode::Axle, &configs[0].1))? {
            Outcome::Done(report) => Some(report.metrics.end_to_end_ns),
            Outcome::Deadlock(_) | Outcome::Shared(_) => None,
        };
        let mut runtime_row: Vec<Cell> =
            vec![(*workload).into(), u64::from(base.axle.slots).into()];
        let mut pressure_row: Vec<Cell> = vec![(*workload).into()];
        let mut runtime_bars = Vec::new();
        let mut pressure_bars = Vec::new();
        for (bar, (_, config)) in configs.iter().enumerate() {
            match results.outcome(&Point::new(workload, Mode::Axle, config))? {
                Outcome::Done(report) => {
                    let m = &report.metrics;
                    let relative = full.map_or(f64::NAN, |full| ratio(m.end_to_end_ns, full));
                    runtime_row.push(relative.into());
                    pressure_row.push(percent(m.backpressure_ns, m.end_to_end_ns).into());
                    runtime_bars.push(vec![relative]);
                    pressure_bars.push(vec![percent(m.backpressure_ns, m.end_to_end_ns)]);
                }
                Outcome::Shared(_) => {
                    anyhow::bail!("internal: a run of {workload} alone gave a shared run's outcome")
                }
                Outcome::Deadlock(_) => {
                    runtime_row.push("deadlock".into());
                    pressure_row.push("deadlock".into());
                    runtime_bars.push(vec![0.0]);
                    pressure_bars.push(vec![0.0]);
                    deadlocks.push((group, bar));
                }
            }
        }
        runtime.push(runtime_row);
        pressure.push(pressure_row);
        runtime_values.push(runtime_bars);
        pressure_values.push(pressure_bars);
    }
    runtime.notes.push(
        "deadlock: the runtime's detector reported that no host task can run and no slot can be freed (the paper's Figure 16(h) at 12.5%); the word \"deadlock\" in place of the bar in the plot".into(),
    );
    let labels: Vec<&str> = SLOT_CAPACITIES.iter().map(|(label, _)| *label).collect();
    let mut charts = vec![
        BarChart::simple(
            "fig16a",
            "Figure 16 (a): end-to-end runtime relative to 100% slot capacity",
            "x 100% capacity",
            workloads,
            &labels,
            runtime_values,
        ),
        BarChart::simple(
            "fig16b",
            "Figure 16 (b): back-pressure (% of the run)",
            "% of end-to-end",
            workloads,
            &labels,
            pressure_values,
        ),
    ];
    for chart in &mut charts {
        for &(group, bar) in &deadlocks {
            chart.note(group, bar, "deadlock");
        }
    }
    Ok(FigureOutput {
        figure: Figure::F16,
        tables: vec![runtime, pressure],
        charts,
    })
}
