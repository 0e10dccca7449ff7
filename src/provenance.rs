//! Provenance: what every JSON result says about where it came from, so that a number read
//! months later can be traced to the code and the data that made it.
//!
//! Each result (`axle run --json`, each run of `axle eval`'s `fig<N>.json` and `runs/<id>.json`,
//! and so the merged ones) carries a [`Provenance`]: the package version
//! (`CARGO_PKG_VERSION`), the commit the binary was built from (the build script's
//! `git rev-parse HEAD`, `-dirty` appended when tracked files had changes, `unknown` outside
//! git: see `build.rs`), and the workload's input: its seeded generator with the seed, or the
//! real data file with its size and SHA-256 and whether it is the paper's
//! ([`workloads::datafile::identify`], hashed once per process). The full configuration is the
//! result's `config` beside it.
//!
//! The commit is the one field that changes without any figure moving: the golden test masks
//! it (`tests/golden.rs`, [`MASKED_COMMIT`]).

use crate::config::AxleConfig;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// This build's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// This build's commit: 40 hex digits, with `-dirty` when the tree had changes to tracked
/// files, or `unknown` when not built from a git checkout.
pub const COMMIT: &str = env!("AXLE_GIT_COMMIT");

/// What the golden files hold in place of the commit (`tests/golden.rs` writes and compares
/// results with the commit replaced by this).
pub const MASKED_COMMIT: &str = "(masked: the commit changes with every commit)";

/// Where a result came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// The `axle` package version.
    pub version: String,
    /// The commit of the build ([`COMMIT`]).
    pub commit: String,
    /// The workload's input.
    pub input: InputRecord,
}

/// A workload's input, as a result records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum InputRecord {
    /// Made by the workload's seeded generator.
    Generated {
        /// What is generated.
        what: String,
        /// The generator's seed (`workload.seed`).
        seed: u64,
        /// Why no real file was read, when a data path was given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        why: Option<String>,
    },
    /// Read from a real data file.
    File {
        /// The file, as given.
        path: String,
        /// What it holds (and what is still generated beside it, with `seed`).
        what: String,
        /// Its size in bytes (`None`: it could not be read).
        bytes: Option<u64>,
        /// Its SHA-256, lowercase hex (`None`: not hashed, too large or unreadable).
        sha256: Option<String>,
        /// The paper's file it stands for.
        paper_file: String,
        /// Whether it is that file (same size and SHA-256).
        is_papers: bool,
        /// The seed of what is generated beside the file (queries, weights).
        seed: u64,
    },
}

impl InputRecord {
    /// The record of `input` for a run seeded with `seed`: a real file is identified (size,
    /// SHA-256; computed once per process per file).
    pub fn of(input: &workloads::Input, seed: u64) -> InputRecord {
        match input {
            workloads::Input::Generator { what, why } => InputRecord::Generated {
                what: (*what).to_owned(),
                seed,
                why: why.map(str::to_owned),
            },
            workloads::Input::File {
                path, what, known, ..
            } => {
                let identity = workloads::datafile::identify(path, *known).ok();
                InputRecord::File {
                    path: path.display().to_string(),
                    what: (*what).to_owned(),
                    bytes: identity.as_ref().map(|identity| identity.bytes),
                    sha256: identity
                        .as_ref()
                        .and_then(|identity| identity.sha256.clone()),
                    paper_file: known.name.to_owned(),
                    is_papers: identity
                        .as_ref()
                        .is_some_and(|identity| identity.is_known()),
                    seed,
                }
            }
        }
    }

    /// One line for a report: `seeded generator (uniform f32 vectors), seed 42` or
    /// `../data/x.vec, 2048000 bytes, SHA-256 15d2…, the paper's file`.
    pub fn describe(&self) -> String {
        match self {
            InputRecord::Generated { what, seed, why } => format!(
                "seeded generator ({what}), seed {seed}{}",
                why.as_deref()
                    .map_or_else(String::new, |why| format!("; {why}"))
            ),
            InputRecord::File {
                path,
                what,
                bytes,
                sha256,
                paper_file,
                is_papers,
                seed,
            } => format!(
                "{path} ({what}; seed {seed} for the rest), {} bytes, SHA-256 {}; {}",
                bytes.map_or_else(|| "?".to_owned(), |bytes| bytes.to_string()),
                sha256.as_deref().unwrap_or("not computed"),
                if *is_papers {
                    format!("the paper's {paper_file}")
                } else {
                    format!("NOT the paper's {paper_file}")
                }
            ),
        }
    }
}

impl Provenance {
    /// The provenance of a result of this build whose workload read `input`.
    pub fn new(input: InputRecord) -> Provenance {
        Provenance {
            version: VERSION.to_owned(),
            commit: COMMIT.to_owned(),
            input,
        }
    }

    /// The provenance of a run of `workload` with `config` and the data path `data` (the
    /// same input choice the run makes: [`workloads::input`]).
    pub fn of_run(workload: &str, config: &AxleConfig, data: Option<&Path>) -> Provenance {
        let options = workload_options(config, data.map(Path::to_path_buf));
        let input = match workloads::input(workload, &options) {
            Some(input) => InputRecord::of(&input, config.workload.seed),
            None => InputRecord::Generated {
                what: format!("unknown workload {workload}"),
                seed: config.workload.seed,
                why: None,
            },
        };
        Provenance::new(input)
    }
}

/// The workload options a run with `config` and the data path `data` builds its workload
/// with.
pub fn workload_options(config: &AxleConfig, data: Option<PathBuf>) -> workloads::WorkloadOptions {
    workloads::WorkloadOptions {
        scale: config.workload.scale,
        seed: config.workload.seed,
        data_dir: data,
        queries: Some(config.workload.queries),
        k: Some(config.workload.k),
        task_rows: Some(config.workload.task_rows),
        iterations: Some(config.workload.iterations),
    }
}

/// `json` (a result as `axle run --json` prints it) with every `"commit": "..."` value
/// replaced by [`MASKED_COMMIT`], for comparisons that must not depend on the commit.
pub fn mask_commit(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let key = "\"commit\": \"";
    let mut rest = json;
    while let Some(start) = rest.find(key) {
        let value = start + key.len();
        out.push_str(&rest[..value]);
        rest = &rest[value..];
        let end = rest.find('"').unwrap_or(rest.len());
        out.push_str(MASKED_COMMIT);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commit_is_a_hash_or_unknown() {
        let hash = COMMIT.strip_suffix("-dirty").unwrap_or(COMMIT);
        assert!(
            COMMIT == "unknown"
                || (hash.len() == 40 && hash.chars().all(|c| c.is_ascii_hexdigit())),
            "{COMMIT}"
        );
        assert_eq!(VERSION, env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn masking_replaces_only_the_commit_values() {
        let json = "{\n  \"commit\": \"abc-dirty\",\n  \"x\": \"commit\",\n  \"y\": {\"commit\": \"d\"}\n}";
        let masked = mask_commit(json);
        assert_eq!(
            masked,
            format!(
                "{{\n  \"commit\": \"{MASKED_COMMIT}\",\n  \"x\": \"commit\",\n  \"y\": {{\"commit\": \"{MASKED_COMMIT}\"}}\n}}"
            )
        );
    }

    #[test]
    fn a_generated_input_records_its_seed_and_a_file_its_digest() {
        let mut config = AxleConfig::default();
        config.workload.seed = 7;
        let generated = Provenance::of_run("knn-a", &config, None);
        assert_eq!(
            generated.input,
            InputRecord::Generated {
                what: "uniform f32 vectors".into(),
                seed: 7,
                why: None
            }
        );
        let directory = std::env::temp_dir().join(format!("axle-prov-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let file = workloads::knn::data::embeddings_path(&directory);
        std::fs::write(&file, b"abc").unwrap();
        let read = Provenance::of_run("knn-a", &config, Some(&directory));
        match &read.input {
            InputRecord::File {
                bytes,
                sha256,
                is_papers,
                seed,
                ..
            } => {
                assert_eq!(*bytes, Some(3));
                // SHA-256("abc"), FIPS 180-2's first example.
                assert_eq!(
                    sha256.as_deref(),
                    Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
                );
                assert!(!is_papers);
                assert_eq!(*seed, 7);
            }
            other => panic!("{other:?}"),
        }
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
