//! `axle eval`: every figure's files at small scale, REPRODUCTION.md, results independent of
//! `--jobs`, and clear errors for bad arguments.
//!
//! Run: `cargo test --release --test eval`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const AXLE: &str = env!("CARGO_BIN_EXE_axle");

fn axle(args: &[&str], out: &Path) -> Output {
    Command::new(AXLE)
        .args(args)
        .arg("--out")
        .arg(out)
        .env_remove("RUST_LOG")
        .output()
        .unwrap_or_else(|error| panic!("cannot start {AXLE}: {error}"))
}

/// A fresh directory under the system's temporary directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let path = std::env::temp_dir().join(format!("axle-eval-{name}-{}", std::process::id()));
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

fn ok(output: &Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).expect("UTF-8")
}

#[test]
fn every_figure_leaves_csv_json_and_svg_and_reproduction_lists_every_claim() {
    let scratch = Scratch::new("all");
    let reproduction = scratch.0.join("REPRODUCTION.md");
    let stdout = ok(
        &axle(
            &[
                "eval",
                "--scale",
                "small",
                "--reproduction",
                reproduction.to_str().unwrap(),
            ],
            &scratch.0,
        ),
        "axle eval --scale small",
    );
    for figure in 10..=16 {
        assert!(
            stdout.contains(&format!("Figure {figure}")),
            "no Figure {figure} table on the terminal:\n{stdout}"
        );
        let json = scratch.0.join(format!("fig{figure}.json"));
        let text =
            std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{}: {e}", json.display()));
        let value: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(value["figure"], figure);
        assert!(
            value["runs"]
                .as_array()
                .is_some_and(|runs| !runs.is_empty()),
            "fig{figure}.json lists no run"
        );
        let prefix = format!("fig{figure}");
        let files: Vec<String> = std::fs::read_dir(&scratch.0)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with(&prefix))
            .collect();
        for extension in ["csv", "svg"] {
            assert!(
                files.iter().any(|name| name.ends_with(extension)),
                "no {extension} for Figure {figure}: {files:?}"
            );
        }
        for name in files.iter().filter(|name| name.ends_with(".svg")) {
            let svg = std::fs::read_to_string(scratch.0.join(name)).unwrap();
            assert!(svg.starts_with("<svg") && svg.contains("</svg>"), "{name}");
        }
    }
    // Every workload appears in Figure 10's CSV, with RP at 100%.
    let csv = std::fs::read_to_string(scratch.0.join("fig10.csv")).unwrap();
    for workload in [
        "knn-a", "knn-b", "knn-c", "sssp", "pagerank", "ssb-q1.1", "ssb-q1.2", "opt-2.7b", "dlrm",
    ] {
        let line = csv
            .lines()
            .find(|line| line.starts_with(&format!("{workload},")))
            .unwrap_or_else(|| panic!("fig10.csv has no {workload} row:\n{csv}"));
        assert_eq!(line.split(',').nth(2), Some("100"), "{line}");
    }
    let reproduction = std::fs::read_to_string(&reproduction).unwrap();
    assert!(reproduction.contains("| 10(a) | KNN (a): AXLE (p1) end-to-end, % of RP | 63.41 |"));
    assert!(!reproduction.contains("not run"), "{reproduction}");
}

#[test]
fn results_do_not_depend_on_jobs() {
    let one = Scratch::new("jobs1");
    let two = Scratch::new("jobs2");
    let args = [
        "eval",
        "--scale",
        "small",
        "--figure",
        "14,16",
        "--workloads",
        "knn-a,knn-c",
        "--quiet",
    ];
    let mut first = args.to_vec();
    first.extend(["--jobs", "1"]);
    let mut second = args.to_vec();
    second.extend(["--jobs", "2"]);
    ok(&axle(&first, &one.0), "--jobs 1");
    ok(&axle(&second, &two.0), "--jobs 2");
    for name in [
        "fig14.csv",
        "fig14.json",
        "fig16a.csv",
        "fig16b.csv",
        "fig16.json",
    ] {
        assert_eq!(
            std::fs::read(one.0.join(name)).unwrap(),
            std::fs::read(two.0.join(name)).unwrap(),
            "{name} differs between --jobs 1 and --jobs 2"
        );
    }
}

#[test]
fn bad_arguments_are_refused_with_what_is_valid() {
    let scratch = Scratch::new("bad");
    for (args, needle) in [
        (vec!["eval", "--figure", "9"], "10 to 16"),
        (vec!["eval", "--workloads", "knn-z"], "valid names"),
        (vec!["eval", "--jobs", "0"], "at least 1"),
    ] {
        let output = axle(&args, &scratch.0);
        assert!(!output.status.success(), "{args:?} succeeded");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}
