//! Running a sweep: the distinct configurations every selected figure needs, each run once,
//! in parallel on `--jobs` threads, with a progress bar.
//!
//! Every run is virtual time and deterministic, and results are looked up by the
//! configuration that produced them, never by completion order: the figures are identical
//! whatever `--jobs` is, and whichever machine ran each run. For a cluster, each run has an
//! identifier ([`run_id`], a digest of its configuration) and its outcome can be written to a
//! file of its own ([`write_run`]) and read back ([`Results::read_runs`]): `axle eval
//! --list-runs`, `--run ID` and `--merge DIR...`.

use crate::config::AxleConfig;
use crate::run::{run, RunReport, RunRequest};
use anyhow::Context;
use host_runtime::Mode;
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One configuration to run.
#[derive(Clone, Debug)]
pub struct Point {
    /// Workload name.
    pub workload: String,
    /// Mechanism.
    pub mode: Mode,
    /// The whole configuration.
    pub config: AxleConfig,
}

impl Point {
    /// A point.
    pub fn new(workload: &str, mode: Mode, config: &AxleConfig) -> Point {
        Point {
            workload: workload.to_owned(),
            mode,
            config: config.clone(),
        }
    }

    /// Identifies the run: two points with the same key are the same run. (`Debug` prints
    /// every field of the configuration, floats exactly, and cannot fail.)
    pub fn key(&self) -> String {
        format!("{}|{}|{:?}", self.workload, self.mode.name(), self.config)
    }
}

/// A run's identifier: `r` and the first 16 hex digits of the SHA-256 of its [`Point::key`]
/// (the workload, the mode and every field of the configuration), stable across machines and
/// processes.
pub fn run_id(point: &Point) -> String {
    let digest = Sha256::digest(point.key().as_bytes());
    let hex: String = digest
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("r{hex}")
}

/// How a run ended.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// It finished and its answer verified.
    Done(Box<RunReport>),
    /// The runtime detected a deadlock (a ring too small for the dependency pattern): a
    /// result of Figure 16, not a failure.
    Deadlock(String),
}

/// The results of a sweep, by [`Point::key`].
#[derive(Debug, Default)]
pub struct Results {
    outcomes: BTreeMap<String, Outcome>,
}

impl Results {
    /// The outcome of `point` (it must have been part of the sweep).
    pub fn outcome(&self, point: &Point) -> anyhow::Result<&Outcome> {
        self.outcomes.get(&point.key()).with_context(|| {
            format!(
                "internal: {} in mode {} was not part of the sweep",
                point.workload,
                point.mode.name()
            )
        })
    }

    /// The report of `point`, which must have finished.
    pub fn report(&self, point: &Point) -> anyhow::Result<&RunReport> {
        match self.outcome(point)? {
            Outcome::Done(report) => Ok(report),
            Outcome::Deadlock(message) => anyhow::bail!(
                "{} in mode {}: {message}",
                point.workload,
                point.mode.name()
            ),
        }
    }

    /// Distinct runs made.
    pub fn len(&self) -> usize {
        self.outcomes.len()
    }

    /// Whether no run was made.
    pub fn is_empty(&self) -> bool {
        self.outcomes.is_empty()
    }

    /// The simulator events of every run that finished.
    pub fn total_events(&self) -> u64 {
        self.outcomes
            .values()
            .map(|outcome| match outcome {
                Outcome::Done(report) => report.simulator.events,
                Outcome::Deadlock(_) => 0,
            })
            .sum()
    }

    /// The results of `points` from the run files (`runs/<id>.json`, [`write_run`]) in
    /// `directories`: every point's file must be in one of them (the error lists the missing
    /// identifiers), and a file must hold the run its name says.
    pub fn read_runs(points: &[Point], directories: &[PathBuf]) -> anyhow::Result<Results> {
        let mut results = Results::default();
        let mut missing = Vec::new();
        for point in points {
            let key = point.key();
            if results.outcomes.contains_key(&key) {
                continue;
            }
            let id = run_id(point);
            let Some(path) = directories
                .iter()
                .map(|directory| run_file(directory, &id))
                .find(|path| path.is_file())
            else {
                missing.push(format!("{id} ({} {})", point.workload, point.mode.name()));
                continue;
            };
            let text = read_bounded(&path)?;
            let file: RunFile = serde_json::from_str(&text)
                .with_context(|| format!("{}: not a run file of axle eval", path.display()))?;
            if file.key != key {
                anyhow::bail!(
                    "{}: holds another run than {id} (made with another configuration or version of axle?)",
                    path.display()
                );
            }
            results.outcomes.insert(key, file.outcome);
        }
        if !missing.is_empty() {
            anyhow::bail!(
                "{} of the {} runs have no result in {}: {}",
                missing.len(),
                results.outcomes.len() + missing.len(),
                directories
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                missing.join(", ")
            );
        }
        Ok(results)
    }
}

/// What a run file holds: the run's key (to check it is the right run) and its outcome.
#[derive(Serialize, Deserialize)]
struct RunFile {
    key: String,
    outcome: Outcome,
}

/// The file of run `id` under `directory`.
fn run_file(directory: &Path, id: &str) -> PathBuf {
    directory.join("runs").join(format!("{id}.json"))
}

/// Most bytes of one run file (a report is a few KiB).
const MAX_RUN_FILE_BYTES: u64 = 16 << 20;

/// A run file's text, refused beyond [`MAX_RUN_FILE_BYTES`].
fn read_bounded(path: &Path) -> anyhow::Result<String> {
    let length = std::fs::metadata(path)
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    cosim_link::limits::check(
        &format!("the size of {}", path.display()),
        length,
        MAX_RUN_FILE_BYTES,
        "a run file holds one report of a few KiB",
    )?;
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// Runs `point` and writes its outcome to `directory/runs/<id>.json`; returns the path.
pub fn write_run(
    point: &Point,
    data: &BTreeMap<String, PathBuf>,
    wall_limit: Option<std::time::Duration>,
    directory: &Path,
) -> anyhow::Result<PathBuf> {
    let outcome = one(point, data, wall_limit)?;
    let path = run_file(directory, &run_id(point));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let file = RunFile {
        key: point.key(),
        outcome,
    };
    std::fs::write(&path, serde_json::to_string(&file)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// Runs every distinct point of `points` on `jobs` threads, each workload with its real data
/// path from `data` (a workload not in it uses its generator). A run that fails (other than
/// with a detected deadlock) or gives a wrong answer fails the sweep, naming it.
pub fn run_all(
    points: &[Point],
    data: &BTreeMap<String, PathBuf>,
    jobs: usize,
    progress: bool,
    wall_limit: Option<std::time::Duration>,
) -> anyhow::Result<Results> {
    let mut distinct: BTreeMap<String, &Point> = BTreeMap::new();
    for point in points {
        distinct.entry(point.key()).or_insert(point);
    }
    let work: Vec<(String, &Point)> = distinct.into_iter().collect();
    let bar = if progress {
        let bar = ProgressBar::new(work.len() as u64);
        bar.set_style(
            ProgressStyle::with_template("{prefix} [{bar:40}] {pos}/{len} runs, {elapsed} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_prefix("axle eval");
        bar
    } else {
        ProgressBar::hidden()
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs.max(1))
        .build()
        .context("starting the sweep's threads")?;
    let outcomes: Vec<anyhow::Result<(String, Outcome)>> = pool.install(|| {
        work.par_iter()
            .map(|(key, point)| {
                let outcome = one(point, data, wall_limit);
                bar.inc(1);
                bar.set_message(format!("{} {}", point.workload, point.mode.name()));
                outcome.map(|outcome| (key.clone(), outcome))
            })
            .collect()
    });
    bar.finish_and_clear();
    let mut results = Results::default();
    for outcome in outcomes {
        let (key, outcome) = outcome?;
        results.outcomes.insert(key, outcome);
    }
    Ok(results)
}

fn one(
    point: &Point,
    data: &BTreeMap<String, PathBuf>,
    wall_limit: Option<std::time::Duration>,
) -> anyhow::Result<Outcome> {
    let request = RunRequest {
        workload: point.workload.clone(),
        mode: point.mode,
        config: point.config.clone(),
        data: data.get(&point.workload).cloned(),
        wall_limit,
    };
    match run(&request) {
        Ok(report) if report.verified => Ok(Outcome::Done(Box::new(report))),
        Ok(report) => anyhow::bail!(
            "{} in mode {} produced a wrong answer: {}",
            point.workload,
            point.mode.name(),
            report.verification
        ),
        Err(error) => {
            let message = format!("{error:#}");
            let which = format!("{} in mode {}", point.workload, point.mode.name());
            if message.contains("deadlock detected") {
                Ok(Outcome::Deadlock(message))
            } else if message.starts_with(&which) {
                // The run's own error already says which run it was.
                Err(error)
            } else {
                Err(error.context(which))
            }
        }
    }
}
