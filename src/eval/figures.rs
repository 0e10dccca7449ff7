//! The paper's Figures 10 to 16 (Section V): which configurations each needs, and how its
//! tables and plots are made from the runs.
//!
//! Normalisations follow the paper's captions: Figures 10 and 11 in percent of RP's end-to-end
//! runtime (RP and BS stacked by component); Figure 12's idle times in percent of RP's
//! end-to-end runtime (the paper compares them with Figure 10's components); Figure 13's host
//! core stall in percent of each run's own end-to-end runtime; Figure 14 relative to AXLE at
//! SF1; Figure 15 relative to the same scheduling policy with out-of-order streaming; Figure 16
//! relative to the full DMA slot capacity, with back-pressure in percent of the run.

use super::plot::{BarChart, Segment};
use super::sweep::{Outcome, Point, Results};
use super::table::{Cell, Table};
use crate::config::AxleConfig;
use emulator::Scheduling;
use host_runtime::{HostScheduling, Mode, RunMetrics};

/// The paper's local polling intervals (Table III): p1, p10, p100.
pub const POLLING_INTERVALS_NS: [(&str, u64); 3] = [("p1", 50), ("p10", 500), ("p100", 5000)];

/// Figure 11's reduced host processing units: 32 → 8.
///
/// The caption reads "reduced processing units in both the CCM (32 → 8) and the host
/// (16 → 4)", which disagrees with Table III (host 32 units, CCM 16 units). We read the two
/// labels as swapped: host 32 → 8 and CCM 16 → 4. That matches Table III's unit counts
/// exactly (the caption's "from" numbers are Table III's host and CCM counts) and the text
/// ("With fewer host processing units, the host can no longer batch all requests (i.e., the
/// green host tasks are no longer fully concurrent)"): with 8 host units of 2 µthreads, the
/// 32 MLP tasks of an OPT-2.7B layer no longer all run at once. The literal reading (CCM 8,
/// host 4) starts from unit counts that Table III does not have. (Until issue 9 we ran the
/// literal one.)
pub const FIGURE11_HOST_UNITS: u32 = 8;
/// Figure 11's reduced CCM processing units: 16 → 4 (see [`FIGURE11_HOST_UNITS`] for the
/// reading of the caption).
pub const FIGURE11_CCM_UNITS: u32 = 4;

/// Figure 14's streaming factors in slots (SF1 to SF64) and in percent of the result.
pub const STREAMING_FACTORS: [u32; 7] = [1, 2, 4, 8, 16, 32, 64];
/// Figure 14's SF_Y% settings.
pub const STREAMING_PERCENTS: [u32; 3] = [25, 50, 100];

/// Figure 16's DMA slot capacities, in percent of the configured one.
pub const SLOT_CAPACITIES: [(&str, u32); 4] =
    [("100%", 1000), ("50%", 500), ("25%", 250), ("12.5%", 125)];

/// The LLM workload (Figure 11).
pub const LLM: &str = "opt-2.7b";

/// A figure of the paper.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Figure {
    /// End-to-end runtime.
    F10,
    /// The LLM case with fewer processing units.
    F11,
    /// Idle times.
    F12,
    /// Host core stall.
    F13,
    /// Streaming factor.
    F14,
    /// Out-of-order streaming.
    F15,
    /// DMA slot capacity.
    F16,
}

impl Figure {
    /// Every figure, in order.
    pub const ALL: [Figure; 7] = [
        Figure::F10,
        Figure::F11,
        Figure::F12,
        Figure::F13,
        Figure::F14,
        Figure::F15,
        Figure::F16,
    ];

    /// `10` .. `16`.
    pub fn number(self) -> u32 {
        match self {
            Figure::F10 => 10,
            Figure::F11 => 11,
            Figure::F12 => 12,
            Figure::F13 => 13,
            Figure::F14 => 14,
            Figure::F15 => 15,
            Figure::F16 => 16,
        }
    }

    /// `--figure` values: `10` .. `16`, or `all`; comma-separated lists too.
    pub fn parse(text: &str) -> anyhow::Result<Vec<Figure>> {
        let mut figures = Vec::new();
        for part in text.split(',').map(str::trim) {
            if part == "all" {
                figures.extend(Figure::ALL);
                continue;
            }
            let figure = Figure::ALL
                .into_iter()
                .find(|figure| figure.number().to_string() == part)
                .ok_or_else(|| {
                    anyhow::anyhow!("--figure {part}: expected 10 to 16 or all (or a list: 10,12)")
                })?;
            figures.push(figure);
        }
        figures.sort();
        figures.dedup();
        Ok(figures)
    }

    /// The configurations the figure needs.
    pub fn points(self, base: &AxleConfig, workloads: &[&str]) -> Vec<Point> {
        let mut points = Vec::new();
        match self {
            Figure::F10 => {
                for workload in workloads {
                    points.extend(figure10_points(workload, base));
                }
            }
            Figure::F11 => {
                if workloads.contains(&LLM) {
                    points.extend(figure10_points(LLM, base));
                    points.extend(figure10_points(LLM, &figure11_config(base)));
                }
            }
            Figure::F12 => {
                for workload in workloads {
                    points.push(Point::new(workload, Mode::Rp, base));
                    points.push(Point::new(workload, Mode::Bs, base));
                    points.push(Point::new(workload, Mode::Axle, &with_poll(base, 500)));
                }
            }
            Figure::F13 => {
                for workload in workloads {
                    points.push(Point::new(workload, Mode::Rp, base));
                    points.push(Point::new(workload, Mode::Bs, base));
                    for ns in [500, 5000] {
                        points.push(Point::new(workload, Mode::Axle, &with_poll(base, ns)));
                    }
                }
            }
            Figure::F14 => {
                for workload in workloads {
                    points.push(Point::new(workload, Mode::Rp, base));
                    points.push(Point::new(workload, Mode::Bs, base));
                    for (_, config) in streaming_factor_configs(base) {
                        points.push(Point::new(workload, Mode::Axle, &config));
                    }
                }
            }
            Figure::F15 => {
                for workload in workloads {
                    for (_, config) in scheduling_configs(base) {
                        points.push(Point::new(workload, Mode::Axle, &config));
                    }
                }
            }
            Figure::F16 => {
                for workload in workloads {
                    for (_, config) in capacity_configs(base) {
                        points.push(Point::new(workload, Mode::Axle, &config));
                    }
                }
            }
        }
        points
    }

    /// The figure's tables and plots from the sweep's results.
    pub fn assemble(
        self,
        base: &AxleConfig,
        workloads: &[&str],
        results: &Results,
    ) -> anyhow::Result<FigureOutput> {
        match self {
            Figure::F10 => figure10(base, workloads, results),
            Figure::F11 => figure11(base, workloads, results),
            Figure::F12 => figure12(base, workloads, results),
            Figure::F13 => figure13(base, workloads, results),
            Figure::F14 => figure14(base, workloads, results),
            Figure::F15 => figure15(base, workloads, results),
            Figure::F16 => figure16(base, workloads, results),
        }
    }
}

/// What one figure produced.
#[derive(Clone, Debug)]
pub struct FigureOutput {
    /// The figure.
    pub figure: Figure,
    /// Its tables (the first is the main one).
    pub tables: Vec<Table>,
    /// Its plots, one SVG each.
    pub charts: Vec<BarChart>,
}

/// `base` with the AXLE local polling interval set to `ns`.
pub fn with_poll(base: &AxleConfig, ns: u64) -> AxleConfig {
    let mut config = base.clone();
    config.host.poll_interval_ns = ns;
    config
}

fn figure10_points(workload: &str, base: &AxleConfig) -> Vec<Point> {
    let mut points = vec![
        Point::new(workload, Mode::Rp, base),
        Point::new(workload, Mode::Bs, base),
        Point::new(workload, Mode::AxleIrq, base),
    ];
    for (_, ns) in POLLING_INTERVALS_NS {
        points.push(Point::new(workload, Mode::Axle, &with_poll(base, ns)));
    }
    points
}

/// Figure 11's configuration: [`FIGURE11_HOST_UNITS`] host and [`FIGURE11_CCM_UNITS`] CCM
/// processing units, the rest as `base`.
pub fn figure11_config(base: &AxleConfig) -> AxleConfig {
    let mut config = base.clone();
    config.device.ccm_units = FIGURE11_CCM_UNITS;
    config.host.host_units = FIGURE11_HOST_UNITS;
    config
}

/// Figure 14's configurations, labelled `SF1` .. `SF64`, `SF_25%` .. `SF_100%`.
pub fn streaming_factor_configs(base: &AxleConfig) -> Vec<(String, AxleConfig)> {
    let slot = base.axle.slot_size;
    let mut configs = Vec::new();
    for factor in STREAMING_FACTORS {
        let mut config = base.clone();
        config.axle.streaming_factor = (slot * factor).to_string();
        configs.push((format!("SF{factor}"), config));
    }
    for percent in STREAMING_PERCENTS {
        let mut config = base.clone();
        config.axle.streaming_factor = format!("{percent}%");
        configs.push((format!("SF_{percent}%"), config));
    }
    configs
}

/// Figure 15's configurations, labelled `RR OoO`, `RR in-order`, `FIFO OoO`, `FIFO in-order`.
pub fn scheduling_configs(base: &AxleConfig) -> Vec<(String, AxleConfig)> {
    let mut configs = Vec::new();
    for (name, host, device) in [
        ("RR", HostScheduling::Rr, Scheduling::Rr),
        ("FIFO", HostScheduling::Fifo, Scheduling::Fifo),
    ] {
        for out_of_order in [true, false] {
            let mut config = base.clone();
            config.host.scheduling = host;
            config.device.scheduling = device;
            config.axle.out_of_order = out_of_order;
            let label = if out_of_order { "OoO" } else { "in-order" };
            configs.push((format!("{name} {label}"), config));
        }
    }
    configs
}

/// Figure 16's configurations, labelled as [`SLOT_CAPACITIES`].
pub fn capacity_configs(base: &AxleConfig) -> Vec<(String, AxleConfig)> {
    SLOT_CAPACITIES
        .iter()
        .map(|(label, permille)| {
            let mut config = base.clone();
            config.axle.slots = (u64::from(base.axle.slots) * u64::from(*permille) / 1000)
                .max(1)
                .try_into()
                .unwrap_or(u32::MAX);
            ((*label).to_owned(), config)
        })
        .collect()
}

fn percent(part: u64, whole: u64) -> f64 {
    part as f64 * 100.0 / whole.max(1) as f64
}

fn ratio(value: u64, base: u64) -> f64 {
    value as f64 / base.max(1) as f64
}

fn metrics<'r>(results: &'r Results, point: &Point) -> anyhow::Result<&'r RunMetrics> {
    Ok(&results.report(point)?.metrics)
}

// ----- Figure 10 and 11 -----------------------------------------------------------------------

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

fn figure10(
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

/// Figure 11's row label for the hardware of `config`: `opt-2.7b (16 CCM, 32 host units)`.
pub fn figure11_label(config: &AxleConfig) -> String {
    format!(
        "{LLM} ({} CCM, {} host units)",
        config.device.ccm_units, config.host.host_units
    )
}

fn figure11(
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

// ----- Figure 12 and 13 -----------------------------------------------------------------------

fn figure12(
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

fn figure13(
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

// ----- Figures 14 to 16 -----------------------------------------------------------------------

fn figure14(
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

fn figure15(
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

fn figure16(
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
            Outcome::Deadlock(_) => None,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figure_lists_parse_and_bad_ones_say_what_is_valid() {
        assert_eq!(Figure::parse("all").unwrap(), Figure::ALL.to_vec());
        assert_eq!(
            Figure::parse("12, 10,12").unwrap(),
            vec![Figure::F10, Figure::F12]
        );
        let error = Figure::parse("9").unwrap_err().to_string();
        assert!(error.contains("10 to 16"), "{error}");
    }

    #[test]
    fn the_sweeps_have_the_papers_settings() {
        let base = AxleConfig::default();
        let factors: Vec<String> = streaming_factor_configs(&base)
            .into_iter()
            .map(|(_, c)| c.axle.streaming_factor)
            .collect();
        assert_eq!(
            factors,
            ["32", "64", "128", "256", "512", "1024", "2048", "25%", "50%", "100%"]
        );
        let slots: Vec<u32> = capacity_configs(&base)
            .into_iter()
            .map(|(_, c)| c.axle.slots)
            .collect();
        assert_eq!(slots, [50_000, 25_000, 12_500, 6_250]);
        let reduced = figure11_config(&base);
        // Host 32 → 8, CCM 16 → 4: the caption's labels read as swapped (see the constants).
        assert_eq!((reduced.host.host_units, reduced.device.ccm_units), (8, 4));
        assert_eq!(
            (base.host.host_units, base.device.ccm_units),
            (32, 16),
            "the caption's \"from\" numbers are Table III's host and CCM counts"
        );
        assert_eq!(scheduling_configs(&base).len(), 4);
    }

    #[test]
    fn shared_runs_are_not_repeated() {
        let base = AxleConfig::default();
        let mut keys: Vec<String> = [Figure::F10, Figure::F12, Figure::F13]
            .iter()
            .flat_map(|f| f.points(&base, &["knn-a"]))
            .map(|p| p.key())
            .collect();
        keys.sort();
        keys.dedup();
        // RP, BS, AXLE_Irq, AXLE p1, p10, p100: Figures 12 and 13 need nothing else.
        assert_eq!(keys.len(), 6);
    }
}
