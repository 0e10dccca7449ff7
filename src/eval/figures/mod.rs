//! The paper's Figures 10 to 16 (Section V): which configurations each needs, and how its
//! tables and plots are made from the runs.
//!
//! Normalisations follow the paper's captions: Figures 10 and 11 in percent of RP's end-to-end
//! runtime (RP and BS stacked by component); Figure 12's idle times in percent of RP's
//! end-to-end runtime (the paper compares them with Figure 10's components); Figure 13's host
//! core stall in percent of each run's own end-to-end runtime; Figure 14 relative to AXLE at
//! SF1; Figure 15 relative to the same scheduling policy with out-of-order streaming; Figure 16
//! relative to the full DMA slot capacity, with back-pressure in percent of the run.
//!
//! This module holds the settings and the configurations of every figure; the tables and
//! charts are made by one module per part of Section V: `runtime` (Figures 10 and 11), `idle`
//! (12), `stall` (13) and `parameters` (14 to 16). [`beyond`] is not the paper's: adaptive
//! polling and `--no-deadlock` (issue 14), asked for by name (`--figure beyond`) and never
//! part of `all`.

pub mod beyond;
mod idle;
mod parameters;
mod runtime;
mod stall;
pub mod tenants;

use super::plot::BarChart;
use super::sweep::{Point, Results};
use super::table::Table;
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
    /// Not the paper's: adaptive polling and `--no-deadlock` ([`beyond`]). Only by name.
    Beyond,
    /// Not the paper's: several tenants on one device ([`tenants`]). Only by name.
    Tenants,
}

impl Figure {
    /// Every figure of the paper, in order (`--figure all`; not [`Figure::Beyond`]).
    pub const ALL: [Figure; 7] = [
        Figure::F10,
        Figure::F11,
        Figure::F12,
        Figure::F13,
        Figure::F14,
        Figure::F15,
        Figure::F16,
    ];

    /// `10` .. `16`; 0 for [`Figure::Beyond`], which is not the paper's (its files and
    /// anchors use [`Figure::name`]).
    pub fn number(self) -> u32 {
        match self {
            Figure::Beyond | Figure::Tenants => 0,
            Figure::F10 => 10,
            Figure::F11 => 11,
            Figure::F12 => 12,
            Figure::F13 => 13,
            Figure::F14 => 14,
            Figure::F15 => 15,
            Figure::F16 => 16,
        }
    }

    /// What names the figure in files, anchors and `--figure`: `10` .. `16`, `beyond`.
    pub fn name(self) -> String {
        match self {
            Figure::Beyond => "beyond".to_owned(),
            Figure::Tenants => "tenants".to_owned(),
            figure => figure.number().to_string(),
        }
    }

    /// The stem of its JSON file: `fig10` .. `fig16`, `beyond`.
    pub fn stem(self) -> String {
        match self {
            Figure::Beyond => "beyond".to_owned(),
            Figure::Tenants => "tenants".to_owned(),
            figure => format!("fig{}", figure.number()),
        }
    }

    /// Its heading: `Figure 10`, `Beyond the paper`.
    pub fn heading(self) -> String {
        match self {
            Figure::Beyond => "Beyond the paper".to_owned(),
            Figure::Tenants => "Tenants".to_owned(),
            figure => format!("Figure {}", figure.number()),
        }
    }

    /// How the figure is named in a JSON file: its number, or `"beyond"`.
    pub fn json_id(self) -> serde_json::Value {
        match self {
            Figure::Beyond => serde_json::Value::from("beyond"),
            Figure::Tenants => serde_json::Value::from("tenants"),
            figure => serde_json::Value::from(figure.number()),
        }
    }

    /// `--figure` values: `10` .. `16`, `all` (the paper's, 10 to 16) or `beyond`;
    /// comma-separated lists too.
    pub fn parse(text: &str) -> anyhow::Result<Vec<Figure>> {
        let mut figures = Vec::new();
        for part in text.split(',').map(str::trim) {
            if part == "all" {
                figures.extend(Figure::ALL);
                continue;
            }
            if part == "beyond" {
                figures.push(Figure::Beyond);
                continue;
            }
            if part == "tenants" {
                figures.push(Figure::Tenants);
                continue;
            }
            let figure = Figure::ALL
                .into_iter()
                .find(|figure| figure.number().to_string() == part)
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "--figure {part}: expected 10 to 16, all, beyond or tenants (or a list: 10,12)"
                    )
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
            Figure::Beyond => points.extend(beyond::points(base, workloads)),
            Figure::Tenants => points.extend(tenants::points(base, workloads)),
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
            Figure::F10 => runtime::figure10(base, workloads, results),
            Figure::F11 => runtime::figure11(base, workloads, results),
            Figure::F12 => idle::figure12(base, workloads, results),
            Figure::F13 => stall::figure13(base, workloads, results),
            Figure::F14 => parameters::figure14(base, workloads, results),
            Figure::F15 => parameters::figure15(base, workloads, results),
            Figure::F16 => parameters::figure16(base, workloads, results),
            Figure::Beyond => beyond::figure(base, workloads, results),
            Figure::Tenants => tenants::figure(base, workloads, results),
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

/// Figure 11's row label for the hardware of `config`: `opt-2.7b (16 CCM, 32 host units)`.
pub fn figure11_label(config: &AxleConfig) -> String {
    format!(
        "{LLM} ({} CCM, {} host units)",
        config.device.ccm_units, config.host.host_units
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figure_lists_parse_and_bad_ones_say_what_is_valid() {
        assert_eq!(Figure::parse("all").unwrap(), Figure::ALL.to_vec());
        assert!(!Figure::parse("all").unwrap().contains(&Figure::Beyond));
        assert!(!Figure::parse("all").unwrap().contains(&Figure::Tenants));
        assert_eq!(
            Figure::parse("all,tenants").unwrap().last(),
            Some(&Figure::Tenants)
        );
        assert_eq!(
            Figure::parse("beyond,10").unwrap(),
            vec![Figure::F10, Figure::Beyond]
        );
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
