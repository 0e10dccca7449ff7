//! Figure 12: the CCM and host idle times in percent of RP's end-to-end runtime, and their
//! reductions against RP and BS.

use super::{metrics, percent, ratio, with_poll, Figure, FigureOutput};
use crate::config::AxleConfig;
use crate::eval::plot::BarChart;
use crate::eval::sweep::{Point, Results};
use crate::eval::table::{Cell, Table};
use host_runtime::Mode;

pub(super) fn figure12(
    base: &AxleConfig,
    workloads: &[&str],
    results: &Results,
) -> anyhow::Result<FigureOutput> {
    let mut table = Table::new(
        "fig12",
        "Figure 12: CCM and host idle time in % of RP's end-to-end runtime (AXLE at p10)",
        &[
            "workload",
            "RP CCM idle",
            "BS CCM idle",
            "AXLE CCM idle",
            "RP host idle",
            "BS host idle",
            "AXLE host idle",
        ],
    );
    let p10 = with_poll(base, 500);
    let mut values = Vec::new();
    let mut reductions: [Vec<f64>; 4] = Default::default();
    for workload in workloads {
        let rp = metrics(results, &Point::new(workload, Mode::Rp, base))?;
        let bs = metrics(results, &Point::new(workload, Mode::Bs, base))?;
        let axle = metrics(results, &Point::new(workload, Mode::Axle, &p10))?;
        let whole = rp.end_to_end_ns;
        let row = [
            percent(rp.ccm_idle_ns, whole),
            percent(bs.ccm_idle_ns, whole),
            percent(axle.ccm_idle_ns, whole),
            percent(rp.host_idle_ns, whole),
            percent(bs.host_idle_ns, whole),
            percent(axle.host_idle_ns, whole),
        ];
        reductions[0].push(ratio(rp.ccm_idle_ns, axle.ccm_idle_ns));
        reductions[1].push(ratio(bs.ccm_idle_ns, axle.ccm_idle_ns));
        reductions[2].push(ratio(rp.host_idle_ns, axle.host_idle_ns));
        reductions[3].push(ratio(bs.host_idle_ns, axle.host_idle_ns));
        let mut cells: Vec<Cell> = vec![(*workload).into()];
        cells.extend(row.iter().map(|&v| Cell::from(v)));
        table.push(cells);
        values.push(row.iter().map(|&v| vec![v]).collect());
    }
    let mut summary = Table::new(
        "fig12-reductions",
        "Figure 12: AXLE's idle-time reduction (x), per workload and on average",
        &[
            "workload",
            "CCM idle vs RP",
            "CCM idle vs BS",
            "host idle vs RP",
            "host idle vs BS",
        ],
    );
    for (index, workload) in workloads.iter().enumerate() {
        let mut cells: Vec<Cell> = vec![(*workload).into()];
        cells.extend(
            reductions
                .iter()
                .map(|r| Cell::from(r.get(index).copied().unwrap_or(f64::NAN))),
        );
        summary.push(cells);
    }
    let mut average: Vec<Cell> = vec!["average".into()];
    average.extend(
        reductions
            .iter()
            .map(|r| Cell::from(r.iter().sum::<f64>() / r.len().max(1) as f64)),
    );
    summary.push(average);
    let chart = BarChart::simple(
        "fig12",
        "Figure 12: idle time at p10 (% of RP end-to-end)",
        "% of RP end-to-end",
        workloads,
        &[
            "RP CCM",
            "BS CCM",
            "AXLE CCM",
            "RP host",
            "BS host",
            "AXLE host",
        ],
        values,
    );
    Ok(FigureOutput {
        figure: Figure::F12,
        tables: vec![table, summary],
        charts: vec![chart],
    })
}
