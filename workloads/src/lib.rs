//! The AXLE workloads (paper Table IV): data sets, offload plans, host tasks and the plain
//! reference implementations every run is checked against.
//!
//! Each application is one module with the same four parts: `data` (seeded generator, or the
//! real input from an explicit path), the offload plan and [`host_runtime::app::Application`]
//! implementation (`mod.rs`), the host tasks (`host`) and the reference (`reference`).
//!
//! The catalog: [`names`] lists the workloads, [`describe`] says what each one is, [`input`]
//! where its input comes from (a real file or a seeded generator), and [`build`] makes one
//! ready to load.
#![forbid(unsafe_code)]

pub mod datafile;
pub mod dlrm;
pub mod graph;
pub mod knn;
pub mod opt;
pub mod pagerank;
pub mod shared;
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

/// A scale name other than `paper` or `small`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown scale `{0}`; valid: paper, small")]
pub struct UnknownScale(pub String);

impl FromStr for Scale {
    type Err = UnknownScale;
    fn from_str(text: &str) -> Result<Scale, UnknownScale> {
        match text {
            "paper" => Ok(Scale::Paper),
            "small" => Ok(Scale::Small),
            other => Err(UnknownScale(other.to_owned())),
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
    #[error("invalid option `{}` for {workload}: {reason}", .reason.option())]
    InvalidOption {
        /// The workload.
        workload: &'static str,
        /// Which option broke which limit, with its value ([`OptionError::option`] names
        /// the option).
        reason: OptionError,
    },
    /// The real data could not be used.
    #[error(transparent)]
    Data(#[from] knn::data::DataError),
    /// A workload's input graph could not be read, generated or put in CSR form. The
    /// message names the workload and the file (or generator); the reason is the
    /// [`source`](std::error::Error::source), which the CLI's `{:#}` prints after it.
    #[error("{workload}: {path}")]
    Input {
        /// The workload.
        workload: &'static str,
        /// The file (or the generator's description).
        path: String,
        /// What went wrong.
        #[source]
        reason: graph::GraphError,
    },
}

/// Why an option is out of range for a workload ([`WorkloadError::InvalidOption`]): each
/// case with the value it was given and the limit it broke, so that a caller can match on it.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum OptionError {
    /// KNN: no query in the batch.
    #[error("must be at least 1")]
    NoQueries,
    /// KNN: the batch's distances (queries x rows) overflow what a launch holds.
    #[error("{queries} x {rows} rows is more distances than a launch holds")]
    TooManyDistances {
        /// Queries asked for.
        queries: u32,
        /// Rows of the database.
        rows: u32,
    },
    /// KNN: `k` is not in `1..=rows`.
    #[error("{k} is not in 1..={rows}")]
    KOutOfRange {
        /// Neighbours asked for.
        k: u32,
        /// Rows of the database (the largest `k`).
        rows: u32,
    },
    /// KNN: no row per host task.
    #[error("must be at least 1")]
    NoTaskRows,
    /// SSB: rows per work item not a positive multiple of a packet's rows.
    #[error("{rows_per_item} is not a positive multiple of {multiple}")]
    RowsPerItem {
        /// Rows per work item asked for.
        rows_per_item: u32,
        /// Rows per packet ([`shared_abi::params::ssb::ROWS_PER_PACKET`]).
        multiple: u32,
    },
    /// SSB: bitmap bytes per host task not a positive multiple of a `u64` word.
    #[error("{task_bytes} is not a positive multiple of {multiple}")]
    TaskBytes {
        /// Bitmap bytes per task asked for.
        task_bytes: u64,
        /// Bytes of the word a task reads the bitmap in (8).
        multiple: u64,
    },
    /// SSB: the table has no rows at this scale.
    #[error("the table has no rows")]
    EmptyTable,
    /// DLRM: a shape with no rows, bags or dimensions, or a dimension not a multiple of the
    /// kernel's vector lanes.
    #[error("unusable DLRM shape {shape:?}")]
    DlrmShape {
        /// The shape.
        shape: dlrm::data::DlrmShape,
    },
    /// DLRM: a minimum pooling above the maximum, or a negative (or NaN) Zipf exponent.
    #[error("unusable DLRM pooling {shape:?}")]
    DlrmPooling {
        /// The shape.
        shape: dlrm::data::DlrmShape,
    },
    /// DLRM: a batch holds more indices than a `u32` counts.
    #[error("a batch holds more indices than a u32 counts")]
    BatchTooLarge,
    /// OPT: the MLP tasks do not divide the FFN size.
    #[error("{mlp_tasks} does not divide the FFN size {ffn}")]
    MlpTasks {
        /// MLP tasks per layer.
        mlp_tasks: u32,
        /// The FFN size.
        ffn: u32,
    },
}

impl OptionError {
    /// The option at fault, as the error names it (`queries`, `k`, `scale`).
    pub fn option(&self) -> &'static str {
        match self {
            OptionError::NoQueries | OptionError::TooManyDistances { .. } => "queries",
            OptionError::KOutOfRange { .. } => "k",
            OptionError::NoTaskRows => "task_rows",
            OptionError::RowsPerItem { .. } => "rows_per_item",
            OptionError::TaskBytes { .. } => "task_bytes",
            OptionError::EmptyTable
            | OptionError::DlrmShape { .. }
            | OptionError::DlrmPooling { .. }
            | OptionError::BatchTooLarge => "scale",
            OptionError::MlpTasks { .. } => "mlp_tasks",
        }
    }
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

/// Where a workload's input comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// A real data file (read when the workload is built).
    File {
        /// The file.
        path: PathBuf,
        /// What it holds, and what is still generated beside it.
        what: &'static str,
        /// The paper's file it stands for.
        known: datafile::KnownFile,
        /// Set by [`Input::checked`]: that the file is not the paper's (both digests), or
        /// that it could not be checked.
        warning: Option<String>,
    },
    /// A seeded generator.
    Generator {
        /// What is generated.
        what: &'static str,
        /// Why no real file is read: none exists for this workload, or a data path was given
        /// but this scale does not use it. `None`: no data path was given.
        why: Option<&'static str>,
    },
}

impl Input {
    /// Whether this is a real file.
    pub fn is_file(&self) -> bool {
        matches!(self, Input::File { .. })
    }

    /// This input with a real file compared with the paper's (its size and SHA-256, computed
    /// once per process): a file that is not the paper's carries a warning, which its
    /// description shows (and which is logged once).
    #[must_use]
    pub fn checked(self) -> Input {
        match self {
            Input::File {
                path, what, known, ..
            } => {
                let warning = match datafile::identify(&path, known) {
                    Ok(identity) => identity.warning(),
                    Err(error) => Some(format!(
                        "{} could not be checked against the paper's {}: {error}",
                        path.display(),
                        known.name
                    )),
                };
                Input::File {
                    path,
                    what,
                    known,
                    warning,
                }
            }
            generator => generator,
        }
    }

    /// The warning [`Input::checked`] found, if any.
    pub fn warning(&self) -> Option<&str> {
        match self {
            Input::File { warning, .. } => warning.as_deref(),
            Input::Generator { .. } => None,
        }
    }
}

impl fmt::Display for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Input::File {
                path,
                what,
                warning: None,
                ..
            } => write!(f, "real file {} ({what})", path.display()),
            Input::File {
                path,
                what,
                warning: Some(warning),
                ..
            } => write!(
                f,
                "real file {} ({what}); WARNING: {warning}",
                path.display()
            ),
            Input::Generator { what, why: None } => write!(f, "seeded generator ({what})"),
            Input::Generator {
                what,
                why: Some(why),
            } => write!(f, "seeded generator ({what}); {why}"),
        }
    }
}

/// Where workload `name`'s input comes from with `options` (the same choice [`build`] makes),
/// or `None` for an unknown name. Reads no file.
pub fn input(name: &str, options: &WorkloadOptions) -> Option<Input> {
    const NO_REAL_DATA: Option<&str> = Some("no real data set exists for it");
    let graph = |source: graph::GraphSource,
                 real: &'static str,
                 known: datafile::KnownFile,
                 generated: &'static str| match source {
        graph::GraphSource::File(path) => Input::File {
            path,
            what: real,
            known,
            warning: None,
        },
        graph::GraphSource::Generator { data_ignored, .. } => Input::Generator {
            what: generated,
            why: data_ignored.then_some("the real graph is used at paper scale only"),
        },
    };
    if knn::KnnShape::by_name(name).is_some() {
        return Some(match &options.data_dir {
            Some(data) => Input::File {
                path: knn::data::embeddings_path(data),
                what: "bge-m3 paragraph embeddings, cut to the shape's dimension",
                known: datafile::BGE_M3_EMBEDDINGS,
                warning: None,
            },
            None => Input::Generator {
                what: "uniform f32 vectors",
                why: None,
            },
        });
    }
    if ssb::Query::by_name(name).is_some() {
        return Some(Input::Generator {
            what: "clean-room SSB lineorder generator",
            why: options.data_dir.as_ref().and(NO_REAL_DATA),
        });
    }
    match name {
        sssp::NAME => Some(graph(
            sssp::source(options),
            "DIMACS NY road network; edge weights seeded",
            datafile::NY_ROAD,
            "road-like grid graph and edge weights",
        )),
        pagerank::NAME => Some(graph(
            pagerank::source(options),
            "DIMACS10 coAuthorsDBLP graph",
            datafile::COAUTHORS_DBLP,
            "power-law graph",
        )),
        opt::NAME => Some(Input::Generator {
            what: "layer weights and KV cache",
            why: options.data_dir.as_ref().and(NO_REAL_DATA),
        }),
        dlrm::NAME => Some(Input::Generator {
            what: "embedding table and Zipf lookups",
            why: options.data_dir.as_ref().and(NO_REAL_DATA),
        }),
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

    /// The error of building `name` with `options` (it must fail).
    fn build_error(name: &str, options: &WorkloadOptions) -> WorkloadError {
        match build(name, options) {
            Ok(_) => panic!("{name} built with {options:?}"),
            Err(error) => error,
        }
    }

    #[test]
    fn an_invalid_option_is_matchable_and_prints_the_option_its_value_and_the_limit() {
        let small = WorkloadOptions {
            scale: Scale::Small,
            ..WorkloadOptions::default()
        };
        let k = build_error(
            "knn-a",
            &WorkloadOptions {
                k: Some(129),
                ..small.clone()
            },
        );
        assert!(
            matches!(
                k,
                WorkloadError::InvalidOption {
                    workload: "knn-a",
                    reason: OptionError::KOutOfRange { k: 129, rows: 128 },
                }
            ),
            "{k:?}"
        );
        assert_eq!(
            k.to_string(),
            "invalid option `k` for knn-a: 129 is not in 1..=128"
        );
        let queries = build_error(
            "knn-b",
            &WorkloadOptions {
                queries: Some(0),
                ..small.clone()
            },
        );
        assert_eq!(
            queries.to_string(),
            "invalid option `queries` for knn-b: must be at least 1"
        );
        let shape = opt::SMALL;
        let mlp = opt::OptApplication::with_shape(
            opt::OptShape {
                mlp_tasks: shape.ffn + 1,
                ..shape
            },
            &small,
        )
        .err()
        .unwrap();
        assert_eq!(
            mlp.to_string(),
            format!(
                "invalid option `mlp_tasks` for opt-2.7b: {} does not divide the FFN size {}",
                shape.ffn + 1,
                shape.ffn
            )
        );
    }

    #[test]
    fn every_name_is_described() {
        for name in names() {
            let info = describe(name, &WorkloadOptions::default()).unwrap();
            assert_eq!(info.name, *name);
        }
    }

    #[test]
    fn input_names_the_real_file_only_where_one_is_read() {
        // An existing directory: the files are named inside it (and not read).
        let data = std::env::temp_dir();
        let with_data = |scale| WorkloadOptions {
            scale,
            data_dir: Some(data.clone()),
            ..WorkloadOptions::default()
        };
        for name in names() {
            let input = input(name, &WorkloadOptions::default()).unwrap();
            assert!(!input.is_file(), "{name} without a data path: {input}");
        }
        let paper: Vec<&str> = names()
            .iter()
            .copied()
            .filter(|name| input(name, &with_data(Scale::Paper)).unwrap().is_file())
            .collect();
        assert_eq!(paper, ["knn-a", "knn-b", "knn-c", "sssp", "pagerank"]);
        let small: Vec<&str> = names()
            .iter()
            .copied()
            .filter(|name| input(name, &with_data(Scale::Small)).unwrap().is_file())
            .collect();
        assert_eq!(small, ["knn-a", "knn-b", "knn-c"]);
        let sssp = input("sssp", &with_data(Scale::Small)).unwrap().to_string();
        assert!(sssp.contains("paper scale only"), "{sssp}");
        let knn = input("knn-b", &with_data(Scale::Paper))
            .unwrap()
            .to_string();
        assert!(knn.contains(knn::data::EMBEDDINGS_FILE), "{knn}");
        assert!(input("knn-z", &WorkloadOptions::default()).is_none());
    }

    #[test]
    fn a_checked_input_that_is_not_the_papers_file_carries_a_warning_with_both_digests() {
        let dir = testing::TempDir::new("inputs");
        dir.file(knn::data::EMBEDDINGS_FILE, &[0; knn::data::EMBEDDING_BYTES]);
        let options = WorkloadOptions {
            data_dir: Some(dir.0.clone()),
            ..WorkloadOptions::default()
        };
        let plain = input("knn-b", &options).unwrap();
        assert_eq!(plain.warning(), None);
        let checked = input("knn-b", &options).unwrap().checked();
        let warning = checked.warning().unwrap();
        // SHA-256 of 4096 zero bytes.
        let zeros = "ad7facb2586fc6e966c004d7d1d16b024f5805ff7cb47c7a85dabd8b48892ca7";
        assert!(
            warning.contains(zeros)
                && warning.contains(datafile::BGE_M3_EMBEDDINGS.sha256)
                && warning.contains(knn::data::EMBEDDINGS_FILE),
            "{warning}"
        );
        assert!(checked.to_string().contains("WARNING"), "{checked}");
        // A file that is not there cannot be checked, and says so.
        let missing = WorkloadOptions {
            data_dir: Some(dir.0.join("missing")),
            ..WorkloadOptions::default()
        };
        let checked = input("sssp", &missing).unwrap().checked();
        assert!(checked.warning().unwrap().contains("could not be checked"));
        // Generators are not checked.
        assert_eq!(input("dlrm", &options).unwrap().checked().warning(), None);
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
