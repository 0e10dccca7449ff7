//! The AXLE workloads (paper Table IV): data sets, offload plans, host tasks and the plain
//! reference implementations every run is checked against.
//!
//! Each application is one module with the same four parts: `data` (seeded generator, or the
//! real input from an explicit path), the offload plan and [`host_runtime::app::Application`]
//! implementation (`mod.rs`), the host tasks (`host`) and the reference (`reference`).
//!
//! The catalog: [`names`] lists the workloads, [`describe`] says what each one is, and
//! [`build`] makes one ready to load.
#![forbid(unsafe_code)]

pub mod dlrm;
pub mod graph;
pub mod knn;
pub mod opt;
pub mod pagerank;
pub mod ssb;
pub mod sssp;
#[cfg(test)]
pub(crate) mod testing;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use host_runtime::app::Application;

/// The size of a workload's input.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// Table IV sizes (the default).
    #[default]
    Paper,
    /// A small instance of the same shape, for tests: seconds for all nine in every mode.
    Small,
}

impl Scale {
    /// `paper` or `small`.
    pub fn name(self) -> &'static str {
        match self {
            Scale::Paper => "paper",
            Scale::Small => "small",
        }
    }
}

impl fmt::Display for Scale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scale {
    type Err = String;
    fn from_str(text: &str) -> Result<Scale, String> {
        match text {
            "paper" => Ok(Scale::Paper),
            "small" => Ok(Scale::Small),
            other => Err(format!("unknown scale `{other}`; valid: paper, small")),
        }
    }
}

/// Options that shape a workload instance (CLI flags map onto these).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadOptions {
    /// Input size.
    pub scale: Scale,
    /// Seed of every generator (data and, where a workload needs them, synthetic weights).
    pub seed: u64,
    /// Explicit path to the real data: the `shared/data` directory, or the data file itself.
    /// `None`: seeded synthetic data of the same sizes.
    pub data_dir: Option<PathBuf>,
    /// KNN: queries in the batch (default [`knn::DEFAULT_QUERIES`]).
    pub queries: Option<u32>,
    /// KNN: neighbours per query (default [`knn::DEFAULT_K`]).
    pub k: Option<u32>,
    /// KNN: distances per host task (default [`knn::DEFAULT_TASK_ROWS`]).
    pub task_rows: Option<u32>,
    /// SSSP: launches (Bellman-Ford rounds), `Some(0)` until a launch changes no distance
    /// (default [`sssp::DEFAULT_ITERATIONS`]).
    pub iterations: Option<u32>,
}

impl Default for WorkloadOptions {
    fn default() -> Self {
        WorkloadOptions {
            scale: Scale::Paper,
            seed: 42,
            data_dir: None,
            queries: None,
            k: None,
            task_rows: None,
            iterations: None,
        }
    }
}

/// What a workload is, for listings and reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadInfo {
    /// Catalog name (`knn-a`).
    pub name: &'static str,
    /// Domain, as in Table IV (`VectorDB`).
    pub domain: &'static str,
    /// Application (`KNN`).
    pub application: &'static str,
    /// Table IV's characteristics, as the paper prints them (`Dim: 2048, #Rows: 128`).
    pub table_iv: &'static str,
    /// The sizes this instance actually uses (scale, options, real data or generator).
    pub characteristics: String,
    /// What runs on the CCM.
    pub offloaded: &'static str,
    /// What the host tasks do.
    pub host_task: &'static str,
}

/// A workload could not be built.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// No workload of that name.
    #[error("unknown workload `{name}`; valid names: {valid}")]
    UnknownWorkload {
        /// The name asked for.
        name: String,
        /// The valid names, comma-separated.
        valid: String,
    },
    /// An option is out of range for the workload.
    #[error("invalid option `{option}` for {workload}: {reason}")]
    InvalidOption {
        /// The workload.
        workload: &'static str,
        /// The option.
        option: &'static str,
        /// Why.
        reason: String,
    },
    /// The real data could not be used.
    #[error(transparent)]
    Data(#[from] knn::data::DataError),
    /// A workload's input file could not be read or parsed.
    #[error("{workload}: {path}: {reason}")]
    Input {
        /// The workload.
        workload: &'static str,
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
}

/// Every workload name, in Table IV order.
pub fn names() -> &'static [&'static str] {
    const NAMES: &[&str] = &[
        "knn-a",
        "knn-b",
        "knn-c",
        sssp::NAME,
        pagerank::NAME,
        ssb::Query::Q1_1.name(),
        ssb::Query::Q1_2.name(),
        opt::NAME,
        dlrm::NAME,
    ];
    NAMES
}

/// What workload `name` is with `options` (the sizes it would use), or `None` for an unknown
/// name. Reads no data file: with real data, the characteristics name the file.
pub fn describe(name: &str, options: &WorkloadOptions) -> Option<WorkloadInfo> {
    if let Some(shape) = knn::KnnShape::by_name(name) {
        return Some(shape.info());
    }
    if let Some(query) = ssb::Query::by_name(name) {
        return Some(ssb::info(query, options));
    }
    match name {
        sssp::NAME => Some(sssp::info(options)),
        pagerank::NAME => Some(pagerank::info(options)),
        opt::NAME => Some(opt::info(options)),
        dlrm::NAME => Some(dlrm::info(options)),
        _ => None,
    }
}

/// Builds workload `name` with `options` (generating or reading its data now, so that data
/// errors surface before any device is touched).
pub fn build(name: &str, options: &WorkloadOptions) -> Result<Box<dyn Application>, WorkloadError> {
    if let Some(shape) = knn::KnnShape::by_name(name) {
        return Ok(Box::new(knn::KnnApplication::new(shape, options)?));
    }
    if let Some(query) = ssb::Query::by_name(name) {
        return ssb::build(query, options);
    }
    match name {
        sssp::NAME => sssp::build(options),
        pagerank::NAME => pagerank::build(options),
        opt::NAME => opt::build(options),
        dlrm::NAME => dlrm::build(options),
        _ => Err(WorkloadError::UnknownWorkload {
            name: name.to_owned(),
            valid: names().join(", "),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_described() {
        for name in names() {
            let info = describe(name, &WorkloadOptions::default()).unwrap();
            assert_eq!(info.name, *name);
        }
    }

    #[test]
    fn knn_builds() {
        for name in ["knn-a", "knn-b", "knn-c"] {
            let options = WorkloadOptions {
                queries: Some(2),
                ..WorkloadOptions::default()
            };
            assert_eq!(build(name, &options).unwrap().name(), name);
        }
    }

    #[test]
    fn unknown_name_lists_the_valid_ones() {
        assert!(describe("knn-z", &WorkloadOptions::default()).is_none());
        let error = build("knn-z", &WorkloadOptions::default()).err().unwrap();
        let text = error.to_string();
        assert!(
            text.contains("knn-z") && text.contains("knn-a, knn-b, knn-c, sssp"),
            "{text}"
        );
    }

    #[test]
    fn default_seed_is_42_and_scale_paper() {
        assert_eq!(WorkloadOptions::default().seed, 42);
        assert_eq!(WorkloadOptions::default().scale, Scale::Paper);
        assert_eq!("small".parse::<Scale>(), Ok(Scale::Small));
        assert!("huge".parse::<Scale>().is_err());
    }
}
