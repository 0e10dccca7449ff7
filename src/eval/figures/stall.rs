//! Figure 13: the host core stall in percent of each run's own end-to-end runtime.

use super::{metrics, percent, with_poll, Figure, FigureOutput};
use crate::config::AxleConfig;
use crate::eval::plot::BarChart;
use crate::eval::sweep::{Point, Results};
use crate::eval::table::{Cell, Table};
use host_runtime::Mode;

pub(super) fn figure13(
    base: &AxleConfig,
    workloads: &[&str],
    results: &Results,
) -> anyhow::Result<FigureOutput> {
    let mut table = Table::new(
        "fig13",
        "Figure 13: host core stall in % of each run's end-to-end runtime (RP polls remotely every 1 µs)",
        &["workload", "RP", "BS", "AXLE p10", "AXLE p100"],
    );
    let mut values = Vec::new();
    for workload in workloads {
        let mut row = Vec::new();
        for point in [
            Point::new(workload, Mode::Rp, base),
            Point::new(workload, Mode::Bs, base),
            Point::new(workload, Mode::Axle, &with_poll(base, 500)),
            Point::new(workload, Mode::Axle, &with_poll(base, 5000)),
        ] {
            let m = metrics(results, &point)?;
            row.push(percent(m.host_stall_ns, m.end_to_end_ns));
        }
        let mut cells: Vec<Cell> = vec![(*workload).into()];
        cells.extend(row.iter().map(|&v| Cell::from(v)));
        table.push(cells);
        values.push(row.iter().map(|&v| vec![v]).collect());
    }
    let chart = BarChart::simple(
        "fig13",
        "Figure 13: host core stall (% of end-to-end)",
        "% of end-to-end",
        workloads,
        &["RP", "BS", "AXLE p10", "AXLE p100"],
        values,
    );
    Ok(FigureOutput {
        figure: Figure::F13,
        tables: vec![table],
        charts: vec![chart],
    })
}
