//! `axle eval`: the paper's evaluation (Section V, Figures 10 to 16) on the embedded emulator.
//!
//! Each selected figure names the configurations it needs ([`figures::Figure::points`]); the
//! sweep runs every distinct one once, in parallel ([`sweep`]); the figures are assembled from
//! the results into tables ([`table`]) and bar charts ([`plot`]; [`explain`] gives every
//! table a chart and every chart its axis titles); [`write_outputs`] leaves, per figure, CSV
//! and JSON for each table and one SVG per chart, and one page with all of it, `index.html`
//! ([`html`]); [`reproduction`] writes
//! REPRODUCTION.md, the paper's Section V numbers beside ours.
//!
//! Inputs: the real data sets (`shared/data`, see its README) are used by default when the
//! directory is found ([`DataChoice`]); every workload says which input it used
//! ([`EvalOptions::inputs`]): a real file, or its seeded generator and why.

pub mod explain;
pub mod figures;
pub mod html;
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

/// The real data directory `axle eval` looks for when no `--data` is given, relative to the
/// current directory and then to the repository root (the layout of `shared/data` beside the
/// checkout).
pub const DEFAULT_DATA_DIR: &str = "../shared/data";

/// Where the default data directory is looked for, in order: [`DEFAULT_DATA_DIR`] relative
/// to the current directory, then relative to the repository root this binary was built
/// from.
pub fn default_data_dirs() -> Vec<PathBuf> {
    vec![
        PathBuf::from(DEFAULT_DATA_DIR),
        Path::new(env!("CARGO_MANIFEST_DIR")).join(DEFAULT_DATA_DIR),
    ]
}

/// Where `axle eval`'s real inputs come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataChoice {
    /// `--data DIR`.
    Given(PathBuf),
    /// The default directory, found at this path.
    Found(PathBuf),
    /// No `--data` and no default directory at any of these paths: every workload uses its
    /// seeded generator.
    NotFound(Vec<PathBuf>),
    /// `--no-data`: every workload uses its seeded generator.
    Disabled,
}

impl DataChoice {
    /// Chooses the data directory: `given` (`--data`) if any, which must be a readable
    /// directory; none with `no_data` (`--no-data`); otherwise the first of `defaults` that is
    /// a directory, or none (not an error).
    pub fn choose(
        given: Option<&Path>,
        no_data: bool,
        defaults: &[PathBuf],
    ) -> anyhow::Result<DataChoice> {
        match (given, no_data) {
            (Some(_), true) => anyhow::bail!("--data and --no-data exclude each other"),
            (Some(path), false) => {
                let metadata = std::fs::metadata(path)
                    .with_context(|| format!("--data {}", path.display()))?;
                if !metadata.is_dir() {
                    anyhow::bail!(
                        "--data {}: not a directory (axle eval takes the directory holding the data files, e.g. {DEFAULT_DATA_DIR})",
                        path.display()
                    );
                }
                std::fs::read_dir(path)
                    .with_context(|| format!("--data {}: cannot read it", path.display()))?;
                Ok(DataChoice::Given(path.to_path_buf()))
            }
            (None, true) => Ok(DataChoice::Disabled),
            (None, false) => Ok(defaults.iter().find(|path| path.is_dir()).map_or_else(
                || DataChoice::NotFound(defaults.to_vec()),
                |path| DataChoice::Found(path.clone()),
            )),
        }
    }

    /// The directory the runs read, if any.
    pub fn directory(&self) -> Option<&Path> {
        match self {
            DataChoice::Given(path) | DataChoice::Found(path) => Some(path),
            DataChoice::NotFound(_) | DataChoice::Disabled => None,
        }
    }

    /// One sentence saying where the inputs come from.
    pub fn describe(&self) -> String {
        match self {
            DataChoice::Given(path) => format!("real data from {} (--data)", path.display()),
            DataChoice::Found(path) => format!(
                "real data from {} (the default data directory; --data DIR or --no-data to change)",
                path.display()
            ),
            DataChoice::NotFound(tried) => format!(
                "no data directory found (tried {}): every workload uses its seeded generator (--data DIR to give one)",
                tried
                    .iter()
                    .map(|path| path.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            DataChoice::Disabled => {
                "--no-data: every workload uses its seeded generator".to_owned()
            }
        }
    }
}

/// What to evaluate.
#[derive(Clone, Debug)]
pub struct EvalOptions {
    /// The figures.
    pub figures: Vec<Figure>,
    /// The base configuration of every run (its `workload.scale` is the scale).
    pub config: AxleConfig,
    /// The workloads (Table IV order).
    pub workloads: Vec<String>,
    /// Where the real inputs come from.
    pub data: DataChoice,
    /// Parallel runs.
    pub jobs: usize,
    /// Show a progress bar on standard error.
    pub progress: bool,
    /// The wall-time budget of each run (`None`: `crate::run::default_wall_limit` of the
    /// scale).
    pub wall_limit: Option<std::time::Duration>,
}

impl EvalOptions {
    /// Each workload's input, as its runs will read it. A real file that is not there is an
    /// error naming it (before any run starts); one that is not the paper's (its size or
    /// SHA-256 differs) carries a warning ([`workloads::Input::checked`]).
    pub fn inputs(&self) -> anyhow::Result<Vec<(String, workloads::Input)>> {
        let options = workloads::WorkloadOptions {
            scale: self.config.workload.scale,
            seed: self.config.workload.seed,
            data_dir: self.data.directory().map(Path::to_path_buf),
            queries: Some(self.config.workload.queries),
            k: Some(self.config.workload.k),
            task_rows: Some(self.config.workload.task_rows),
            iterations: Some(self.config.workload.iterations),
        };
        let mut inputs = Vec::new();
        for name in &self.workloads {
            let input = workloads::input(name, &options)
                .with_context(|| format!("internal: no input description for {name}"))?;
            if let workloads::Input::File { path, .. } = &input {
                if !path.is_file() {
                    anyhow::bail!(
                        "{name}: its real input {} is not there ({}); --no-data runs the seeded generators",
                        path.display(),
                        self.data.describe()
                    );
                }
            }
            // A real file is compared with the paper's (size, SHA-256; hashed once per
            // process): one that is not carries a warning into every listing of the inputs.
            inputs.push((name.clone(), input.checked()));
        }
        Ok(inputs)
    }
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
    /// The workloads, in Table IV order.
    pub workloads: Vec<String>,
    /// Where the real inputs came from.
    pub data: DataChoice,
    /// Each workload's input.
    pub inputs: Vec<(String, workloads::Input)>,
}

/// The runs an evaluation needs, before any is made.
#[derive(Debug)]
pub struct Plan {
    /// Each workload's input.
    pub inputs: Vec<(String, workloads::Input)>,
    /// Every point of every figure (a point several figures share appears once per figure).
    pub runs: Vec<(Figure, Point)>,
    /// The data directory of each workload that reads a real file.
    pub data: std::collections::BTreeMap<String, PathBuf>,
}

impl Plan {
    /// Every point, in figure order (with repeats).
    pub fn points(&self) -> Vec<Point> {
        self.runs.iter().map(|(_, point)| point.clone()).collect()
    }

    /// The distinct runs, by identifier ([`sweep::run_id`]), in identifier order.
    pub fn distinct(&self) -> std::collections::BTreeMap<String, Point> {
        self.runs
            .iter()
            .map(|(_, point)| (sweep::run_id(point), point.clone()))
            .collect()
    }
}

/// The runs `options` needs.
pub fn plan(options: &EvalOptions) -> anyhow::Result<Plan> {
    let inputs = options.inputs()?;
    let workloads: Vec<&str> = options.workloads.iter().map(String::as_str).collect();
    let mut runs = Vec::new();
    for figure in &options.figures {
        for point in figure.points(&options.config, &workloads) {
            runs.push((*figure, point));
        }
    }
    // Only the workloads that read a real file get the data directory: the others would
    // ignore it (and say so in a log line per run); their input already says why.
    let data: std::collections::BTreeMap<String, PathBuf> = match options.data.directory() {
        Some(directory) => inputs
            .iter()
            .filter(|(_, input)| input.is_file())
            .map(|(name, _)| (name.clone(), directory.to_path_buf()))
            .collect(),
        None => Default::default(),
    };
    Ok(Plan { inputs, runs, data })
}

/// Runs the sweep and assembles the figures.
pub fn evaluate(options: &EvalOptions) -> anyhow::Result<Evaluation> {
    let plan = plan(options)?;
    let results = sweep::run_all(
        &plan.points(),
        &plan.data,
        options.jobs,
        options.progress,
        options.wall_limit,
    )?;
    assemble(options, plan, results)
}

/// Assembles the figures of `plan` from `results` (made here, or read back from the run files
/// of other machines: the same figures either way).
pub fn assemble(options: &EvalOptions, plan: Plan, results: Results) -> anyhow::Result<Evaluation> {
    let Plan { inputs, runs, .. } = plan;
    let workloads: Vec<&str> = options.workloads.iter().map(String::as_str).collect();
    let mut figures = Vec::new();
    for figure in &options.figures {
        let mut output = figure
            .assemble(&options.config, &workloads, &results)
            .with_context(|| format!("assembling {}", figure.heading()))?;
        explain::complete(&mut output);
        figures.push(output);
    }
    Ok(Evaluation {
        figures,
        runs,
        results,
        config: options.config.clone(),
        workloads: options.workloads.clone(),
        data: options.data.clone(),
        inputs,
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
    /// The workload's input: a real file or its seeded generator.
    input: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    metrics: Option<&'a host_runtime::RunMetrics>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deadlock: Option<&'a str>,
    /// The full configuration of the run.
    config: &'a AxleConfig,
    /// Version, commit and input of the run ([`crate::provenance`]): the report's own when
    /// the run finished (made by the binary that ran it), otherwise this binary's. A shared
    /// run has one per tenant (`shared.tenants[i].provenance`).
    #[serde(skip_serializing_if = "Option::is_none")]
    provenance: Option<crate::provenance::Provenance>,
    /// A shared run's device and tenants (the tenants figure).
    #[serde(skip_serializing_if = "Option::is_none")]
    shared: Option<SharedRecord<'a>>,
}

/// A shared run as the JSON files list it: the device's figures and each tenant's.
#[derive(Serialize)]
struct SharedRecord<'a> {
    policy: &'a str,
    makespan_ns: u64,
    ccm_busy_ns: u64,
    dma_busy_ns: u64,
    tenants: Vec<TenantRecord<'a>>,
}

/// One tenant of a shared run.
#[derive(Serialize)]
struct TenantRecord<'a> {
    tenant: usize,
    workload: &'a str,
    /// Its input.
    input: String,
    metrics: &'a host_runtime::RunMetrics,
    ccm_grants: u64,
    ccm_wait_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    provenance: Option<&'a crate::provenance::Provenance>,
}

impl<'a> SharedRecord<'a> {
    fn of(report: &'a crate::tenants::ManyReport) -> SharedRecord<'a> {
        SharedRecord {
            policy: &report.policy,
            makespan_ns: report.makespan_ns,
            ccm_busy_ns: report.ccm_busy_ns,
            dma_busy_ns: report.dma_busy_ns,
            tenants: report
                .tenants
                .iter()
                .map(|tenant| TenantRecord {
                    tenant: tenant.tenant,
                    workload: &tenant.shared.workload,
                    input: tenant
                        .shared
                        .provenance
                        .as_ref()
                        .map_or_else(String::new, |p| p.input.describe()),
                    metrics: &tenant.shared.metrics,
                    ccm_grants: tenant.ccm_grants,
                    ccm_wait_ns: tenant.ccm_wait_ns,
                    provenance: tenant.shared.provenance.as_ref(),
                })
                .collect(),
        }
    }
}

#[derive(Serialize)]
struct FigureFile<'a> {
    figure: serde_json::Value,
    scale: workloads::Scale,
    tables: &'a [table::Table],
    runs: Vec<RunRecord<'a>>,
}

/// The provenance of `point`'s run: its report's, or (a run that deadlocked has no report)
/// this binary's with the workload's input as the evaluation chose it.
fn run_provenance(
    evaluation: &Evaluation,
    point: &Point,
    outcome: &Outcome,
) -> crate::provenance::Provenance {
    if let Outcome::Done(report) = outcome {
        if let Some(provenance) = &report.provenance {
            return provenance.clone();
        }
    }
    let input = evaluation
        .inputs
        .iter()
        .find(|(name, _)| *name == point.workload)
        .map(|(_, input)| crate::provenance::InputRecord::of(input, point.config.workload.seed));
    match input {
        Some(input) => crate::provenance::Provenance::new(input),
        None => crate::provenance::Provenance::of_run(&point.workload, &point.config, None),
    }
}

/// Writes `fig<N>*.csv` per table, `fig<N>.json` (tables and runs) per figure,
/// `fig<N>*.svg` per chart and `index.html` (all of it on one page, [`html`]) into
/// `directory` (created if missing). Returns the files written.
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
                input: if point.is_shared() {
                    "each tenant's: shared.tenants[i].input".to_owned()
                } else {
                    evaluation
                        .inputs
                        .iter()
                        .find(|(name, _)| *name == point.workload)
                        .map_or_else(String::new, |(_, input)| input.to_string())
                },
                metrics: match outcome {
                    Outcome::Done(report) => Some(&report.metrics),
                    Outcome::Deadlock(_) | Outcome::Shared(_) => None,
                },
                deadlock: match outcome {
                    Outcome::Done(_) | Outcome::Shared(_) => None,
                    Outcome::Deadlock(message) => Some(message),
                },
                config,
                provenance: match outcome {
                    Outcome::Shared(_) => None,
                    _ => Some(run_provenance(evaluation, point, outcome)),
                },
                shared: match outcome {
                    Outcome::Shared(report) => Some(SharedRecord::of(report)),
                    _ => None,
                },
            });
        }
        let file = FigureFile {
            figure: figure.figure.json_id(),
            scale: evaluation.config.workload.scale,
            tables: &figure.tables,
            runs,
        };
        write(
            format!("{}.json", figure.figure.stem()),
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
    // The page that shows all of it (html.rs).
    let path = directory.join(html::INDEX);
    std::fs::write(&path, html::render(evaluation)?)
        .with_context(|| format!("writing {}", path.display()))?;
    written.push(path);
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system's temporary directory, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let path =
                std::env::temp_dir().join(format!("axle-data-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).expect("scratch directory");
            Scratch(path)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn the_first_default_directory_that_exists_is_used() {
        let scratch = Scratch::new("found");
        let missing = scratch.0.join("missing");
        let found = scratch.0.join("data");
        std::fs::create_dir_all(&found).unwrap();
        let later = scratch.0.clone();
        let choice =
            DataChoice::choose(None, false, &[missing.clone(), found.clone(), later]).unwrap();
        assert_eq!(choice, DataChoice::Found(found.clone()));
        assert_eq!(choice.directory(), Some(found.as_path()));
        assert!(choice.describe().contains("default data directory"));
    }

    #[test]
    fn a_missing_default_directory_falls_back_to_the_generators_and_says_so() {
        let scratch = Scratch::new("missing");
        let missing = vec![scratch.0.join("a"), scratch.0.join("b")];
        let choice = DataChoice::choose(None, false, &missing).unwrap();
        assert_eq!(choice, DataChoice::NotFound(missing.clone()));
        assert_eq!(choice.directory(), None);
        let text = choice.describe();
        assert!(
            text.contains("seeded generator") && text.contains(&missing[1].display().to_string()),
            "{text}"
        );
    }

    #[test]
    fn no_data_wins_over_a_default_directory_that_exists() {
        let scratch = Scratch::new("disabled");
        let choice = DataChoice::choose(None, true, std::slice::from_ref(&scratch.0)).unwrap();
        assert_eq!(choice, DataChoice::Disabled);
        assert_eq!(choice.directory(), None);
    }

    #[test]
    fn a_given_directory_must_exist_and_be_a_directory() {
        let scratch = Scratch::new("given");
        let missing = scratch.0.join("no-such-dir");
        let error = DataChoice::choose(Some(&missing), false, &[]).unwrap_err();
        assert!(
            format!("{error:#}").contains(&missing.display().to_string()),
            "{error:#}"
        );
        let file = scratch.0.join("file");
        std::fs::write(&file, b"x").unwrap();
        let error = DataChoice::choose(Some(&file), false, &[]).unwrap_err();
        let text = format!("{error:#}");
        assert!(
            text.contains("not a directory") && text.contains(&file.display().to_string()),
            "{text}"
        );
        assert_eq!(
            DataChoice::choose(Some(&scratch.0), false, &[]).unwrap(),
            DataChoice::Given(scratch.0.clone())
        );
    }

    #[test]
    fn a_real_file_missing_from_the_data_directory_is_an_error_naming_it() {
        let scratch = Scratch::new("incomplete");
        let options = EvalOptions {
            figures: vec![Figure::F10],
            config: AxleConfig::default(),
            workloads: vec!["knn-a".into(), "ssb-q1.1".into()],
            data: DataChoice::Given(scratch.0.clone()),
            jobs: 1,
            progress: false,
            wall_limit: None,
        };
        let error = options.inputs().unwrap_err().to_string();
        assert!(
            error.contains("knn-a") && error.contains(workloads::knn::data::EMBEDDINGS_FILE),
            "{error}"
        );
        let options = EvalOptions {
            data: DataChoice::Disabled,
            ..options
        };
        let inputs = options.inputs().unwrap();
        assert!(
            inputs.iter().all(|(_, input)| !input.is_file()),
            "{inputs:?}"
        );
    }
}
