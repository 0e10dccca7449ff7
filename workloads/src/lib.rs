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

pub mod knn;

use std::path::PathBuf;

use host_runtime::app::Application;

/// Options that shape a workload instance (CLI flags map onto these).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadOptions {
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
}

impl Default for WorkloadOptions {
    fn default() -> Self {
        WorkloadOptions {
            seed: 42,
            data_dir: None,
            queries: None,
            k: None,
            task_rows: None,
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
    /// Input characteristics (`Dim: 2048, #Rows: 128, ...`).
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
}

/// Every workload name, in Table IV order.
pub fn names() -> &'static [&'static str] {
    &["knn-a", "knn-b", "knn-c"]
}

/// What workload `name` is, or `None` for an unknown name.
pub fn describe(name: &str) -> Option<WorkloadInfo> {
    knn::KnnShape::by_name(name).map(knn::KnnShape::info)
}

/// Builds workload `name` with `options` (generating or reading its data now, so that data
/// errors surface before any device is touched).
pub fn build(name: &str, options: &WorkloadOptions) -> Result<Box<dyn Application>, WorkloadError> {
    if let Some(shape) = knn::KnnShape::by_name(name) {
        return Ok(Box::new(knn::KnnApplication::new(shape, options)?));
    }
    Err(WorkloadError::UnknownWorkload {
        name: name.to_owned(),
        valid: names().join(", "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_described_and_builds() {
        for name in names() {
            let info = describe(name).unwrap();
            assert_eq!(info.name, *name);
            let options = WorkloadOptions {
                queries: Some(2),
                ..WorkloadOptions::default()
            };
            assert_eq!(build(name, &options).unwrap().name(), *name);
        }
    }

    #[test]
    fn unknown_name_lists_the_valid_ones() {
        assert!(describe("knn-z").is_none());
        let error = build("knn-z", &WorkloadOptions::default()).err().unwrap();
        let text = error.to_string();
        assert!(
            text.contains("knn-z") && text.contains("knn-a, knn-b, knn-c"),
            "{text}"
        );
    }

    #[test]
    fn default_seed_is_42() {
        assert_eq!(WorkloadOptions::default().seed, 42);
    }
}
