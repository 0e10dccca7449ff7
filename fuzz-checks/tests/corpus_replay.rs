//! Replays the kept fuzz corpora (`fuzz/corpus/<target>/`) through each target's checking
//! function on the stable toolchain, so a regression of a decoder shows in
//! `cargo test --workspace` (and `.ci/run`) without nightly or libFuzzer.

use fuzz_checks::{Check, TARGETS};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

fn corpus_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus")
}

/// The files of a corpus directory, sorted (so a failure names the same file every run).
fn corpus_files(dir: &Path) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("corpus {} unreadable: {error}", dir.display()));
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

/// Feeds every file of `dir` to `check`, each under `catch_unwind`: the files whose check
/// panicked, with the panic's message.
fn replay(dir: &Path, check: Check) -> (usize, Vec<(PathBuf, String)>) {
    let files = corpus_files(dir);
    let mut failures = Vec::new();
    for file in &files {
        let data = std::fs::read(file)
            .unwrap_or_else(|error| panic!("{} unreadable: {error}", file.display()));
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| check(&data))) {
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "(a non-string panic)".to_owned());
            failures.push((file.clone(), message));
        }
    }
    (files.len(), failures)
}

#[test]
fn every_kept_corpus_file_passes_its_targets_check() {
    let root = corpus_root();
    let mut report = Vec::new();
    for &(target, check) in TARGETS {
        let dir = root.join(target);
        let (count, failures) = replay(&dir, check);
        assert!(
            count > 0,
            "no kept corpus for {target} in {}",
            dir.display()
        );
        for (file, message) in failures {
            report.push(format!("{target}: {}: {message}", file.display()));
        }
    }
    assert!(
        report.is_empty(),
        "corpus files whose check panicked:\n{}",
        report.join("\n")
    );
}

#[test]
fn replay_names_each_file_whose_check_panics() {
    let dir = corpus_root().join("flow_control");
    let (count, failures) = replay(&dir, |_| panic!("always"));
    assert!(count > 0);
    assert_eq!(failures.len(), count);
    assert!(failures
        .iter()
        .all(|(file, message)| file.starts_with(&dir) && message == "always"));
}

#[test]
fn every_fuzz_target_and_every_corpus_has_a_checking_function() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/Cargo.toml"))
            .expect("fuzz/Cargo.toml");
    let bins: Vec<&str> = manifest
        .lines()
        .filter_map(|line| line.strip_prefix("name = \""))
        .filter_map(|rest| rest.strip_suffix('"'))
        .filter(|name| *name != "axle-fuzz")
        .collect();
    let mut names: Vec<&str> = TARGETS.iter().map(|(name, _)| *name).collect();
    let mut sorted_bins = bins.clone();
    sorted_bins.sort_unstable();
    names.sort_unstable();
    assert_eq!(sorted_bins, names, "fuzz/Cargo.toml's targets vs TARGETS");
    for entry in std::fs::read_dir(corpus_root()).expect("fuzz/corpus") {
        let name = entry.expect("an entry").file_name();
        let name = name.to_string_lossy();
        assert!(
            names.contains(&name.as_ref()),
            "fuzz/corpus/{name} belongs to no target"
        );
    }
}
