//! Running a sweep: the distinct configurations every selected figure needs, each run once,
//! in parallel on `--jobs` threads, with a progress bar. A configuration is one workload run
//! alone or, for the tenants figure, several tenants sharing one device ([`Point::shared`],
//! run as `axle run-many --no-alone` runs them).
//!
//! Order and memory: the runs whose inputs take about a gigabyte (OPT and DLRM at paper
//! scale) never overlap one another, and go first, one workload after the other; the others
//! fill the remaining threads longest first. A workload's input shared between its runs
//! ([`workloads::shared`]), and its device image ([`DeviceImages`]: the data set loaded once,
//! each run's device memory a copy-on-write view of it), are released after its last run. So
//! the sweep's peak memory is one large run plus `jobs - 1` small ones.
//!
//! Every run is virtual time and deterministic, and results are looked up by the
//! configuration that produced them, never by completion order: the figures are identical
//! whatever `--jobs` is, and whichever machine ran each run. For a cluster, each run has an
//! identifier ([`run_id`], a digest of its configuration) and its outcome can be written to a
//! file of its own ([`write_run`]) and read back ([`Results::read_runs`]): `axle eval
//! --list-runs`, `--run ID` and `--merge DIR...`.

use crate::config::AxleConfig;
use crate::run::{run, run_sharing, DeviceImages, RunReport, RunRequest};
use crate::tenants::{run_many, ManyReport, ManyRequest};
use anyhow::Context;
use host_runtime::Mode;
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One configuration to run: one workload alone, or several tenants sharing one device
/// ([`Point::shared`], the tenants figure's runs).
#[derive(Clone, Debug)]
pub struct Point {
    /// Workload name; for a shared run, `tenants:` and its tenants' workloads joined by `+`
    /// (`tenants:knn-a+pagerank`).
    pub workload: String,
    /// Mechanism.
    pub mode: Mode,
    /// The whole configuration.
    pub config: AxleConfig,
    /// A shared run's tenants (tenant `i` runs `tenants[i]`, the CCM shared round-robin, as
    /// `axle run-many` runs them); empty for a run alone.
    pub tenants: Vec<String>,
}

impl Point {
    /// A point: `workload` alone.
    pub fn new(workload: &str, mode: Mode, config: &AxleConfig) -> Point {
        Point {
            workload: workload.to_owned(),
            mode,
            config: config.clone(),
            tenants: Vec::new(),
        }
    }

    /// A shared run: tenant `i` runs `tenants[i]`, all on one device, the CCM shared
    /// round-robin (`axle run-many`).
    pub fn shared(tenants: &[&str], mode: Mode, config: &AxleConfig) -> Point {
        Point {
            workload: format!("tenants:{}", tenants.join("+")),
            mode,
            config: config.clone(),
            tenants: tenants.iter().map(|name| (*name).to_owned()).collect(),
        }
    }

    /// Whether it is a shared run.
    pub fn is_shared(&self) -> bool {
        !self.tenants.is_empty()
    }

    /// The workloads it runs, one per tenant (with repeats); its workload for a run alone.
    pub fn workloads(&self) -> Vec<&str> {
        if self.is_shared() {
            self.tenants.iter().map(String::as_str).collect()
        } else {
            vec![self.workload.as_str()]
        }
    }

    /// Identifies the run: two points with the same key are the same run. (`Debug` prints
    /// every field of the configuration, floats exactly, and cannot fail.) A run alone's key
    /// is what it was before shared runs existed, so that its identifier did not change.
    pub fn key(&self) -> String {
        if self.is_shared() {
            format!(
                "tenants[{}] round-robin|{}|{:?}",
                self.tenants.join(","),
                self.mode.name(),
                self.config
            )
        } else {
            format!("{}|{}|{:?}", self.workload, self.mode.name(), self.config)
        }
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
    /// A shared run ([`Point::shared`]) finished and every tenant's answer verified.
    Shared(Box<ManyReport>),
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
            Outcome::Shared(_) => anyhow::bail!(
                "internal: {} in mode {} is a shared run, not one workload's",
                point.workload,
                point.mode.name()
            ),
        }
    }

    /// The report of the shared run `point` ([`Point::shared`]).
    pub fn shared(&self, point: &Point) -> anyhow::Result<&ManyReport> {
        match self.outcome(point)? {
            Outcome::Shared(report) => Ok(report),
            _ => anyhow::bail!(
                "internal: {} in mode {} is not a shared run",
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
                Outcome::Shared(report) => report.simulator.events,
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
            // A shared run's file must hold a shared run's outcome, one tenant per tenant
            // of the run, in the run's order; a run alone's, a run alone's.
            let fits = match &file.outcome {
                Outcome::Shared(report) => {
                    point.is_shared()
                        && report.tenants.len() == point.tenants.len()
                        && report
                            .tenants
                            .iter()
                            .zip(&point.tenants)
                            .all(|(tenant, workload)| tenant.shared.workload == *workload)
                }
                Outcome::Done(_) | Outcome::Deadlock(_) => !point.is_shared(),
            };
            if !fits {
                anyhow::bail!(
                    "{}: the outcome it holds is not that of run {id} ({}: {})",
                    path.display(),
                    if point.is_shared() {
                        "a shared run"
                    } else {
                        "a run alone"
                    },
                    point.workload
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

/// Most bytes of one run file (a report is a few KiB; a shared run's holds one per tenant,
/// at most 16).
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
        "a run file holds one report of a few KiB, or one per tenant of a shared run",
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
    let outcome = one(point, data, wall_limit, None)?;
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
    let images = DeviceImages::default();
    let outcomes = schedule(
        &work,
        jobs,
        |point| {
            let outcome = one(point, data, wall_limit, Some(&images));
            bar.inc(1);
            bar.set_message(format!("{} {}", point.workload, point.mode.name()));
            outcome
        },
        |workload| images.release(workload),
    );
    bar.finish_and_clear();
    let mut results = Results::default();
    for ((key, _), outcome) in work.iter().zip(outcomes) {
        results.outcomes.insert(key.clone(), outcome?);
    }
    Ok(results)
}

/// Resident input above which a run is "large" (OPT and DLRM at paper scale, about 1 GB
/// each): two large runs never overlap, so the sweep's peak memory is one large run and
/// `jobs - 1` others, not two large ones (2.25 GB measured with `--jobs 2` when they could).
const LARGE_INPUT_BYTES: u64 = 256 << 20;

/// A run's relative cost, for the order of the sweep: CPU seconds x 100 of an AXLE-mode run
/// at paper scale on the 2-core development machine (`/usr/bin/time axle run W --mode axle`;
/// the other modes cost about the same). Only the order depends on it, never a result.
fn cost_hint(workload: &str) -> u32 {
    match workload {
        "opt-2.7b" => 380,
        "pagerank" => 220,
        "dlrm" => 125,
        "sssp" => 62,
        "ssb-q1.1" | "ssb-q1.2" => 45,
        _ => 5,
    }
}

/// Runs `run` on every point of `work` on `jobs` threads; the outcomes in `work`'s order.
///
/// The order of the runs: the large ones ([`LARGE_INPUT_BYTES`]) one at a time, grouped by
/// workload (so that a workload's shared input, [`workloads::shared`], is made once and
/// released after its last run), and taken first, since they are the longest; the other
/// runs longest first ([`cost_hint`]) on the remaining threads, a thread taking a large run
/// whenever none is running. A thread with nothing but large runs left while one runs
/// waits. After the last run of a workload, its shared input is released, and `release` is
/// called with its name.
fn schedule<T: Send>(
    work: &[(String, &Point)],
    jobs: usize,
    run: impl Fn(&Point) -> T + Sync,
    release: impl Fn(&str) + Sync,
) -> Vec<T> {
    use std::collections::VecDeque;
    use std::sync::{Condvar, Mutex, PoisonError};

    struct Queue {
        large: VecDeque<usize>,
        small: VecDeque<usize>,
        large_running: bool,
        /// Runs not finished, per workload.
        unfinished: BTreeMap<String, usize>,
    }
    /// On drop: the run is over (its large-run token returned, its workload's count down,
    /// the waiting threads woken).
    struct Finished<'a> {
        queue: &'a Mutex<Queue>,
        changed: &'a Condvar,
        is_large: bool,
        /// The workloads the run used, each once.
        workloads: Vec<&'a str>,
        release: &'a (dyn Fn(&str) + Sync),
    }
    impl Drop for Finished<'_> {
        fn drop(&mut self) {
            let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            if self.is_large {
                queue.large_running = false;
            }
            for workload in &self.workloads {
                if let Some(left) = queue.unfinished.get_mut(*workload) {
                    *left = left.saturating_sub(1);
                    if *left == 0 {
                        workloads::shared::release(workload);
                        (self.release)(workload);
                    }
                }
            }
            drop(queue);
            self.changed.notify_all();
        }
    }
    // A shared run's input is all its tenants' together.
    let large_input = |point: &Point| {
        point
            .workloads()
            .iter()
            .map(|workload| {
                workloads::shared::resident_input_bytes(workload, point.config.workload.scale)
            })
            .sum::<u64>()
            >= LARGE_INPUT_BYTES
    };
    let cost = |point: &Point| -> u32 { point.workloads().iter().map(|w| cost_hint(w)).sum() };
    let mut order: Vec<usize> = (0..work.len()).collect();
    // Longest first; ties in the key order of `work` (the sort is stable).
    order.sort_by_key(|&index| std::cmp::Reverse(cost(work[index].1)));
    let (mut large, mut small) = (Vec::new(), Vec::new());
    for index in order {
        if large_input(work[index].1) {
            large.push(index);
        } else {
            small.push(index);
        }
    }
    // Grouped by workload, the longest workload first (stable: cost order within).
    large.sort_by_key(|&index| {
        let point = work[index].1;
        (std::cmp::Reverse(cost(point)), point.workload.clone())
    });
    let mut unfinished = BTreeMap::new();
    for (_, point) in work {
        for workload in distinct_workloads(point) {
            *unfinished.entry(workload.to_owned()).or_insert(0) += 1;
        }
    }
    let queue = Mutex::new(Queue {
        large: large.into(),
        small: small.into(),
        large_running: false,
        unfinished,
    });
    let changed = Condvar::new();
    let slots: Vec<Mutex<Option<T>>> = work.iter().map(|_| Mutex::new(None)).collect();
    let worker = || loop {
        let (index, is_large) = {
            let mut queue = queue.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                if !queue.large_running {
                    if let Some(index) = queue.large.pop_front() {
                        queue.large_running = true;
                        break (index, true);
                    }
                }
                if let Some(index) = queue.small.pop_front() {
                    break (index, false);
                }
                if queue.large.is_empty() {
                    return;
                }
                queue = changed.wait(queue).unwrap_or_else(PoisonError::into_inner);
            }
        };
        let point = work[index].1;
        // Marks the run finished even if it panics, so that no other thread waits for a
        // large run that will never end (the panic then ends the sweep, as before).
        let _finished = Finished {
            queue: &queue,
            changed: &changed,
            is_large,
            workloads: distinct_workloads(point),
            release: &release,
        };
        let outcome = run(point);
        *slots[index].lock().unwrap_or_else(PoisonError::into_inner) = Some(outcome);
    };
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(worker);
        }
    });
    slots
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .unwrap_or_else(PoisonError::into_inner)
                .expect("every run of the sweep was made")
        })
        .collect()
}

/// The workloads `point` runs, each once, in tenant order.
fn distinct_workloads(point: &Point) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for workload in point.workloads() {
        if !names.contains(&workload) {
            names.push(workload);
        }
    }
    names
}

/// Runs `point` (over a shared device image from `images` where its workload allows).
fn one(
    point: &Point,
    data: &BTreeMap<String, PathBuf>,
    wall_limit: Option<std::time::Duration>,
    images: Option<&DeviceImages>,
) -> anyhow::Result<Outcome> {
    if point.is_shared() {
        return shared(point, data, wall_limit);
    }
    let request = RunRequest {
        workload: point.workload.clone(),
        mode: point.mode,
        config: point.config.clone(),
        data: data.get(&point.workload).cloned(),
        wall_limit,
    };
    let report = match images {
        Some(images) => run_sharing(&request, images),
        None => run(&request),
    };
    match report {
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

/// Runs the shared run `point` as `axle run-many --no-alone` runs it (its runs alone are
/// points of their own). The data directory is given to every tenant when any of them reads
/// a real file (they share one request; a workload with no real input ignores it, as
/// [`workloads::input`] says); a tenant that does not verify fails the sweep, naming it.
fn shared(
    point: &Point,
    data: &BTreeMap<String, PathBuf>,
    wall_limit: Option<std::time::Duration>,
) -> anyhow::Result<Outcome> {
    let which = format!(
        "{} tenants ({}) in mode {}",
        point.tenants.len(),
        point.tenants.join(", "),
        point.mode.name()
    );
    let request = ManyRequest {
        workloads: point.tenants.clone(),
        mode: point.mode,
        config: point.config.clone(),
        data: point
            .tenants
            .iter()
            .find_map(|workload| data.get(workload))
            .cloned(),
        wall_limit,
        policy: emulator::cosim::tenants::SharePolicy::RoundRobin,
        max_tenants: emulator::cosim::tenants::MAX_TENANTS,
        alone: false,
        faults: Vec::new(),
    };
    let report = run_many(&request).with_context(|| which.clone())?;
    if let Some(tenant) = report.tenants.iter().find(|tenant| !tenant.shared.verified) {
        anyhow::bail!(
            "{which}: tenant {} ({}) did not verify: {}",
            tenant.tenant,
            tenant.shared.workload,
            tenant.shared.verification
        );
    }
    Ok(Outcome::Shared(Box::new(report)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// With more threads than needed, two large-input runs (OPT and DLRM at paper scale)
    /// never run at the same time, every run is made once, and the outcomes come back in the
    /// order of the work, whatever order the runs were made in.
    #[test]
    fn large_runs_never_overlap_and_outcomes_keep_the_work_order() {
        let config = AxleConfig::default();
        assert_eq!(config.workload.scale, workloads::Scale::Paper);
        let names = [
            "sssp", "opt-2.7b", "knn-a", "dlrm", "opt-2.7b", "pagerank", "dlrm", "ssb-q1.1",
        ];
        let points: Vec<Point> = names
            .iter()
            .map(|name| Point::new(name, Mode::Axle, &config))
            .collect();
        let work: Vec<(String, &Point)> = points
            .iter()
            .enumerate()
            .map(|(index, point)| (format!("{index}"), point))
            .collect();
        let large_now = AtomicUsize::new(0);
        let most_large = AtomicUsize::new(0);
        let made = AtomicUsize::new(0);
        let outcomes = schedule(
            &work,
            4,
            |point| {
                made.fetch_add(1, Ordering::SeqCst);
                let large = matches!(point.workload.as_str(), "opt-2.7b" | "dlrm");
                if large {
                    let now = large_now.fetch_add(1, Ordering::SeqCst) + 1;
                    most_large.fetch_max(now, Ordering::SeqCst);
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
                if large {
                    large_now.fetch_sub(1, Ordering::SeqCst);
                }
                point.workload.clone()
            },
            |_| {},
        );
        assert_eq!(made.load(Ordering::SeqCst), names.len());
        assert_eq!(
            most_large.load(Ordering::SeqCst),
            1,
            "two large runs overlapped"
        );
        assert_eq!(outcomes, names.map(String::from).to_vec());
    }

    /// A large run that panics ends the sweep with the panic; the thread waiting for the
    /// large-run token is woken instead of waiting forever.
    #[test]
    fn a_panicking_large_run_does_not_leave_the_other_threads_waiting() {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let config = AxleConfig::default();
            let points: Vec<Point> = ["opt-2.7b", "dlrm", "opt-2.7b"]
                .iter()
                .map(|name| Point::new(name, Mode::Axle, &config))
                .collect();
            let work: Vec<(String, &Point)> = points
                .iter()
                .enumerate()
                .map(|(index, point)| (format!("{index}"), point))
                .collect();
            let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                schedule(
                    &work,
                    2,
                    |point| {
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        assert_ne!(point.workload, "dlrm", "the run fails");
                    },
                    |_| {},
                )
            }));
            let _ = sender.send(ended.is_err());
        });
        let panicked = receiver
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the sweep ended (no thread left waiting)");
        assert!(panicked, "the run's panic reached the caller");
    }
}
