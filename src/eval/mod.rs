//! `axle eval`: the paper's evaluation (Section V, Figures 10 to 16) on the embedded emulator.
//!
//! Each selected figure names the configurations it needs ([`figures::Figure::points`]); the
//! sweep runs every distinct one once, in parallel ([`sweep`]); the figures are assembled from
//! the results into tables ([`table`]) and bar charts ([`plot`]); [`write_outputs`] leaves,
//! per figure, CSV and JSON for each table and one SVG per chart; [`reproduction`] writes
//! REPRODUCTION.md, the paper's Section V numbers beside ours.

pub mod figures;
pub mod plot;
pub mod reproduction;
pub mod sweep;
pub mod table;

use crate::config::AxleConfig;
use anyhow::Context;
use figures::{Figure, FigureOutput};
use serde::Serialize;
use std::path::{Path, PathBuf};
use sweep::{Outcome, Point, Results};

pub use figures::POLLING_INTERVALS_NS;

/// What to evaluate.
#[derive(Clone, Debug)]
pub struct EvalOptions {
    /// The figures.
    pub figures: Vec<Figure>,
    /// The base configuration of every run (its `workload.scale` is the scale).
    pub config: AxleConfig,
    /// The workloads (Table IV order).
    pub workloads: Vec<String>,
    /// Real data directory.
    pub data: Option<PathBuf>,
    /// Parallel runs.
    pub jobs: usize,
    /// Show a progress bar on standard error.
    pub progress: bool,
}

/// What `axle eval` produced.
#[derive(Debug)]
pub struct Evaluation {
    /// The figures, in order.
    pub figures: Vec<FigureOutput>,
    /// Every point of every figure, with its outcome, for the JSON files.
    pub runs: Vec<(Figure, Point)>,
    /// The sweep's results.
    pub results: Results,
    /// The base configuration.
    pub config: AxleConfig,
}

/// Runs the sweep and assembles the figures.
pub fn evaluate(options: &EvalOptions) -> anyhow::Result<Evaluation> {
    let workloads: Vec<&str> = options.workloads.iter().map(String::as_str).collect();
    let mut runs = Vec::new();
    for figure in &options.figures {
        for point in figure.points(&options.config, &workloads) {
            runs.push((*figure, point));
        }
    }
    let points: Vec<Point> = runs.iter().map(|(_, point)| point.clone()).collect();
    let results = sweep::run_all(&points, &options.data, options.jobs, options.progress)?;
    let mut figures = Vec::new();
    for figure in &options.figures {
        figures.push(
            figure
                .assemble(&options.config, &workloads, &results)
                .with_context(|| format!("assembling Figure {}", figure.number()))?,
        );
    }
    Ok(Evaluation {
        figures,
        runs,
        results,
        config: options.config.clone(),
    })
}

/// The tables as the terminal shows them.
pub fn render(evaluation: &Evaluation) -> String {
    let mut out = String::new();
    for figure in &evaluation.figures {
        for table in &figure.tables {
            out.push_str(&table.to_text());
            out.push('\n');
        }
    }
    out
}

/// One run as the JSON files list it.
#[derive(Serialize)]
struct RunRecord<'a> {
    workload: &'a str,
    mode: &'static str,
    poll_interval_ns: u64,
    streaming_factor: &'a str,
    slots: u32,
    out_of_order: bool,
    scheduling: String,
    ccm_units: u32,
    host_units: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    metrics: Option<&'a host_runtime::RunMetrics>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deadlock: Option<&'a str>,
}

#[derive(Serialize)]
struct FigureFile<'a> {
    figure: u32,
    scale: workloads::Scale,
    tables: &'a [table::Table],
    runs: Vec<RunRecord<'a>>,
}

/// Writes `fig<N>*.csv` per table, `fig<N>.json` (tables and runs) per figure and
/// `fig<N>*.svg` per chart into `directory` (created if missing). Returns the files written.
pub fn write_outputs(evaluation: &Evaluation, directory: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(directory)
        .with_context(|| format!("creating {}", directory.display()))?;
    let mut written = Vec::new();
    let mut write = |name: String, contents: String| -> anyhow::Result<()> {
        let path = directory.join(name);
        std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
        Ok(())
    };
    for figure in &evaluation.figures {
        for table in &figure.tables {
            write(format!("{}.csv", table.id), table.to_csv())?;
        }
        let mut runs = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for (owner, point) in &evaluation.runs {
            if *owner != figure.figure || !seen.insert(point.key()) {
                continue;
            }
            let outcome = evaluation.results.outcome(point)?;
            let config = &point.config;
            runs.push(RunRecord {
                workload: &point.workload,
                mode: point.mode.name(),
                poll_interval_ns: config.host.poll_interval_ns,
                streaming_factor: &config.axle.streaming_factor,
                slots: config.axle.slots,
                out_of_order: config.axle.out_of_order,
                scheduling: format!("{:?}", config.device.scheduling).to_lowercase(),
                ccm_units: config.device.ccm_units,
                host_units: config.host.host_units,
                metrics: match outcome {
                    Outcome::Done(report) => Some(&report.metrics),
                    Outcome::Deadlock(_) => None,
                },
                deadlock: match outcome {
                    Outcome::Done(_) => None,
                    Outcome::Deadlock(message) => Some(message),
                },
            });
        }
        let file = FigureFile {
            figure: figure.figure.number(),
            scale: evaluation.config.workload.scale,
            tables: &figure.tables,
            runs,
        };
        write(
            format!("fig{}.json", figure.figure.number()),
            format!("{}\n", serde_json::to_string_pretty(&file)?),
        )?;
    }
    for figure in &evaluation.figures {
        for chart in &figure.charts {
            let path = directory.join(format!("{}.svg", chart.id));
            chart.write_svg(&path)?;
            written.push(path);
        }
    }
    Ok(written)
}
