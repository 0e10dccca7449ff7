//! The `axle` command line: help, the default configuration, config files and flags, error
//! messages for bad input, the JSON report, determinism across processes, and (when the file is
//! present) a run on the real embeddings.
//!
//! Run: `cargo test --release --test cli`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const AXLE: &str = env!("CARGO_BIN_EXE_axle");

/// The real data directory, relative to the workspace root.
const DATA_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data");
const EMBEDDINGS: &str = "bge-m3-1024d-paragraph-queries.vec";

/// Fields every `--json` report has.
const JSON_FIELDS: [&str; 12] = [
    "workload",
    "mode",
    "verified",
    "end_to_end_ns",
    "ccm_busy_ns",
    "data_movement_ns",
    "host_busy_ns",
    "ccm_idle_ns",
    "host_idle_ns",
    "host_stall_ns",
    "backpressure_ns",
    "config",
];

fn axle(args: &[&str]) -> Output {
    Command::new(AXLE)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap_or_else(|error| panic!("cannot start {AXLE}: {error}"))
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("stderr is UTF-8")
}

/// Runs `args`, which must succeed; returns stdout.
fn axle_ok(args: &[&str]) -> String {
    let output = axle(args);
    assert!(
        output.status.success(),
        "axle {args:?} failed ({}): {}",
        output.status,
        stderr(&output)
    );
    stdout(&output)
}

/// Runs `args` with `--json`; returns the parsed report.
fn axle_json(args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.push("--json");
    let text = axle_ok(&all);
    serde_json::from_str(&text)
        .unwrap_or_else(|error| panic!("axle {all:?}: bad JSON ({error}):\n{text}"))
}

/// Runs `args`, which must fail cleanly: non-zero exit, no panic, an `error:` line on stderr
/// that contains every one of `expected`. Returns stderr.
fn axle_fails(args: &[&str], expected: &[&str]) -> String {
    let output = axle(args);
    let err = stderr(&output);
    assert!(
        !output.status.success(),
        "axle {args:?} succeeded; stdout:\n{}",
        stdout(&output)
    );
    assert_ne!(
        output.status.code(),
        Some(101),
        "axle {args:?} panicked: {err}"
    );
    assert!(
        output.status.code().is_some(),
        "axle {args:?} died by a signal: {err}"
    );
    assert!(!err.contains("panicked"), "axle {args:?} panicked: {err}");
    assert!(
        err.contains("error"),
        "axle {args:?}: no error message on stderr: {err:?}"
    );
    for needle in expected {
        assert!(
            err.contains(needle),
            "axle {args:?}: stderr does not mention `{needle}`: {err}"
        );
    }
    assert!(
        stdout(&output).trim().is_empty(),
        "axle {args:?} printed a report on failure"
    );
    err
}

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("axle-cli-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("creating a temp dir");
        TempDir(path)
    }

    fn write(&self, file: &str, text: &str) -> PathBuf {
        let path = self.0.join(file);
        std::fs::write(&path, text).expect("writing a temp file");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `base` followed by `extra`.
fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(extra).copied().collect()
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("UTF-8 temp path")
}

#[test]
fn help_succeeds_and_names_the_mechanisms() {
    let top = axle_ok(&["--help"]);
    for needle in [
        "run",
        "config",
        "list",
        "RP",
        "BS",
        "AXLE",
        "AXLE_Interrupt",
    ] {
        assert!(
            top.contains(needle),
            "`axle --help` does not mention {needle}:\n{top}"
        );
    }
    let run = axle_ok(&["run", "--help"]);
    for needle in [
        "--mode",
        "rp:",
        "bs:",
        "axle:",
        "axle-irq:",
        "--poll",
        "--sf",
        "--config",
        "--json",
    ] {
        assert!(
            run.contains(needle),
            "`axle run --help` does not mention {needle}:\n{run}"
        );
    }
}

#[test]
fn list_names_every_workload() {
    let text = axle_ok(&["list"]);
    let names = [
        "knn-a", "knn-b", "knn-c", "sssp", "pagerank", "ssb-q1.1", "ssb-q1.2", "opt-2.7b", "dlrm",
    ];
    for (index, name) in names.iter().enumerate() {
        let annotation = format!("({}) {name} ", char::from(b'a' + index as u8));
        assert!(
            text.lines().any(|line| line.starts_with(&annotation)),
            "`axle list` lacks {annotation}:\n{text}"
        );
    }
    assert!(text.contains("Table IV: #V: 264346, #E: 733846"), "{text}");
    assert!(text.contains("used (paper):"), "{text}");
    let small = axle_ok(&["list", "--scale", "small"]);
    assert!(small.contains("used (small):"), "{small}");
}

#[test]
fn config_prints_parseable_toml_with_the_paper_defaults() {
    let text = axle_ok(&["config"]);
    let value: toml::Value =
        toml::from_str(&text).unwrap_or_else(|error| panic!("bad TOML ({error}):\n{text}"));
    assert!(
        text.lines()
            .any(|line| line.trim() == "poll_interval_ns = 50"),
        "{text}"
    );
    assert_eq!(value["host"]["poll_interval_ns"].as_integer(), Some(50));
    assert_eq!(
        value["host"]["remote_poll_interval_ns"].as_integer(),
        Some(1000)
    );
    assert_eq!(value["axle"]["slot_size"].as_integer(), Some(32));
    assert_eq!(value["axle"]["slots"].as_integer(), Some(50_000));
    // What `axle config` prints is a valid config file for `axle run --config`.
    let dir = TempDir::new("roundtrip");
    let file = dir.write("default.toml", &text);
    let report = axle_json(&[
        "run",
        "knn-a",
        "--mode",
        "axle",
        "--queries",
        "1",
        "--config",
        path_str(&file),
    ]);
    assert_eq!(report["verified"], true);
}

#[test]
fn a_config_file_takes_effect_and_flags_override_it() {
    let dir = TempDir::new("config");
    let file = dir.write(
        "p10.toml",
        "[host]\npoll_interval_ns = 500\n\n[workload]\nqueries = 2\n",
    );
    let file = path_str(&file);

    let default = axle_json(&["run", "knn-a", "--mode", "axle", "--queries", "2"]);
    let from_file = axle_json(&["run", "knn-a", "--mode", "axle", "--config", file]);
    assert_eq!(from_file["config"]["host"]["poll_interval_ns"], 500);
    assert_eq!(from_file["config"]["workload"]["queries"], 2);
    // Unspecified fields keep their defaults.
    assert_eq!(from_file["config"]["host"]["remote_poll_interval_ns"], 1000);
    assert_eq!(from_file["verified"], true);
    assert!(
        from_file["polls"].as_u64().unwrap() < default["polls"].as_u64().unwrap(),
        "a 500 ns poll interval must poll less than 50 ns: {} vs {}",
        from_file["polls"],
        default["polls"]
    );

    let overridden = axle_json(&[
        "run",
        "knn-a",
        "--mode",
        "axle",
        "--config",
        file,
        "--poll",
        "5us",
        "--queries",
        "1",
    ]);
    assert_eq!(overridden["config"]["host"]["poll_interval_ns"], 5000);
    assert_eq!(overridden["config"]["workload"]["queries"], 1);
    assert_eq!(overridden["verified"], true);
}

/// `--iterations N` sets SSSP's launches (and reaches the config); `converge` runs until no
/// distance changes, and the answer is then Dijkstra's.
#[test]
fn sssp_iterations_flag_sets_the_rounds_or_runs_to_convergence() {
    let base = ["run", "sssp", "--mode", "bs", "--scale", "small"];
    let default = axle_json(&base);
    assert_eq!(default["launches"], 10);
    assert_eq!(default["config"]["workload"]["iterations"], 10);
    let three = axle_json(&with(&base, &["--iterations", "3"]));
    assert_eq!(three["launches"], 3);
    assert_eq!(three["config"]["workload"]["iterations"], 3);
    assert_eq!(three["verified"], true);
    let text = three["verification"].as_str().unwrap();
    assert!(
        text.contains("match 3 rounds of Jacobi Bellman-Ford"),
        "{text}"
    );
    let converged = axle_json(&with(&base, &["--iterations", "converge"]));
    assert_eq!(converged["config"]["workload"]["iterations"], 0);
    assert_eq!(converged["verified"], true);
    assert!(converged["launches"].as_u64().unwrap() > 10);
    let text = converged["verification"].as_str().unwrap();
    assert!(text.contains("match Dijkstra exactly"), "{text}");
    axle_fails(
        &with(&base, &["--iterations", "many"]),
        &["--iterations", "many", "converge"],
    );
}

#[test]
fn bad_input_fails_with_a_clear_message_and_no_panic() {
    let dir = TempDir::new("bad");
    let unknown_key = dir.write("typo.toml", "[host]\npoll_intervall_ns = 5\n");
    let missing = dir.0.join("missing.toml");
    let base = ["run", "knn-a", "--mode", "axle"];

    axle_fails(&with(&base, &["--poll", "fast"]), &["--poll", "fast"]);
    axle_fails(&with(&base, &["--sf", "0"]), &["streaming factor"]);
    axle_fails(
        &with(&base, &["--sf", "150%"]),
        &["streaming factor", "150%"],
    );
    axle_fails(&with(&base, &["--slot-size", "24"]), &["slot_size", "24"]);
    axle_fails(&with(&base, &["--slots", "0"]), &["slots"]);
    axle_fails(
        &["run", "knn-z", "--mode", "axle"],
        &["unknown workload", "knn-z", "knn-a"],
    );
    axle_fails(&["run", "knn-a", "--mode", "turbo"], &["turbo", "axle-irq"]);
    axle_fails(&["run", "knn-a"], &["--mode"]);
    axle_fails(
        &with(&base, &["--config", path_str(&unknown_key)]),
        &["poll_intervall_ns", "typo.toml"],
    );
    axle_fails(
        &with(&base, &["--config", path_str(&missing)]),
        &["missing.toml"],
    );
    axle_fails(&with(&base, &["--data", "/nonexistent"]), &["/nonexistent"]);
}

/// The cause of an unreadable data file appears once in the message.
#[test]
fn a_missing_data_file_is_reported_once() {
    let err = axle_fails(
        &["run", "knn-a", "--mode", "axle", "--data", "/nonexistent"],
        &["/nonexistent"],
    );
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
}

#[test]
fn json_output_has_every_metric() {
    for mode in ["rp", "bs", "axle", "axle-irq"] {
        let report = axle_json(&["run", "knn-c", "--mode", mode, "--queries", "2"]);
        let object = report.as_object().expect("a JSON object");
        for field in JSON_FIELDS {
            assert!(
                object.contains_key(field),
                "mode {mode}: no `{field}` in {report}"
            );
        }
        assert_eq!(report["workload"], "knn-c");
        assert_eq!(report["mode"], mode);
        assert_eq!(report["verified"], true);
        for field in &JSON_FIELDS[3..11] {
            assert!(
                report[field].is_u64(),
                "mode {mode}: `{field}` is not a count of ns: {report}"
            );
        }
        assert!(report["end_to_end_ns"].as_u64().unwrap() > 0);
        assert!(report["config"]["host"].is_object() && report["config"]["axle"].is_object());
    }
}

#[test]
fn identical_json_runs_print_identical_bytes() {
    for mode in ["bs", "axle"] {
        let args = ["run", "knn-b", "--mode", mode, "--queries", "2", "--json"];
        let first = axle(&args);
        let second = axle(&args);
        assert!(first.status.success() && second.status.success());
        assert!(!first.stdout.is_empty());
        assert_eq!(first.stdout, second.stdout, "mode {mode}: two runs differ");
    }
}

#[test]
fn real_embeddings_knn_b_axle_verifies() {
    let dir = Path::new(DATA_DIR);
    if !dir.join(EMBEDDINGS).is_file() {
        eprintln!("skipped: {} not found", dir.join(EMBEDDINGS).display());
        return;
    }
    let report = axle_json(&["run", "knn-b", "--mode", "axle", "--data", path_str(dir)]);
    assert_eq!(report["verified"], true, "{report}");
    let verification = report["verification"].as_str().unwrap_or_default();
    assert!(
        verification.contains("bge-m3"),
        "the run did not use the real embeddings: {verification}"
    );
}

/// `axle eval | head -1`: the reader goes away after one line; the tool must stop quietly,
/// not panic on the broken pipe.
#[test]
fn a_reader_that_goes_away_is_not_a_panic() {
    let mut child = std::process::Command::new(AXLE)
        .args([
            "eval",
            "--scale",
            "small",
            "--figure",
            "10",
            "--no-data",
            "--out",
        ])
        .arg(std::env::temp_dir().join(format!("axle-cli-eval-{}", std::process::id())))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("axle starts");
    // Close our end of the pipe at once: every write of the child fails with EPIPE.
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("axle finishes");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        output.status.success(),
        "status {:?}: {stderr}",
        output.status
    );
}

/// A wall-clock run from the CLI waits at least 2 s of real time before it calls a silence a
/// deadlock (an emulator behind the clock is not a deadlock); a virtual run keeps the
/// configured 20 ms.
#[test]
fn wall_clock_runs_raise_the_stall_timeout_and_virtual_runs_keep_it() {
    let wall = axle_json(&[
        "run", "pagerank", "--mode", "axle", "--scale", "small", "--clock", "wall",
    ]);
    assert_eq!(wall["verified"], true);
    assert_eq!(
        wall["config"]["host"]["stall_timeout_ns"],
        2_000_000_000_u64
    );
    let virtual_run = axle_json(&["run", "pagerank", "--mode", "axle", "--scale", "small"]);
    assert_eq!(
        virtual_run["config"]["host"]["stall_timeout_ns"],
        20_000_000_u64
    );
}
