//! Golden statistics: the full `axle run --json` output of a few canonical runs, kept in
//! `tests/golden/` and compared byte for byte, as simulator projects keep regression stats.
//!
//! Every figure of the model is deterministic, so any change that moves one (a cost, a
//! latency, the DMA executor's batching, the poller) fails here even when every answer still
//! verifies. Such a change must update the files deliberately, and its commit must say which
//! figures moved and why:
//!
//! ```text
//! AXLE_BLESS=1 cargo test --release --test golden     # rewrite tests/golden/*.json
//! git diff tests/golden                               # read what moved
//! ```
//!
//! Every report ends with its provenance (`axle::provenance`): version, commit, input. The
//! commit changes with every commit (and says `-dirty` on an edited tree) without any figure
//! moving, so its value is masked (`axle::provenance::mask_commit`) in both the kept files and
//! the comparison; everything else, the version and the input included, is compared.
//!
//! The runs: knn-a in each of the four modes, one SSSP launch and PageRank, all at small scale
//! (milliseconds each in `--release`).

use std::path::PathBuf;
use std::process::Command;

/// The canonical runs: a file name and the `axle run` arguments.
const RUNS: [(&str, &[&str]); 6] = [
    ("knn-a-rp", &["knn-a", "--mode", "rp"]),
    ("knn-a-bs", &["knn-a", "--mode", "bs"]),
    ("knn-a-axle", &["knn-a", "--mode", "axle"]),
    ("knn-a-axle-irq", &["knn-a", "--mode", "axle-irq"]),
    (
        "sssp-axle-one-launch",
        &["sssp", "--mode", "axle", "--iterations", "1"],
    ),
    ("pagerank-axle", &["pagerank", "--mode", "axle"]),
];

fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("golden")
        .join(format!("{name}.json"))
}

/// The JSON report of `axle run ARGS --scale small --json`, its commit masked.
fn run_json(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_axle"))
        .arg("run")
        .args(args)
        .args(["--scale", "small", "--json"])
        .output()
        .expect("the axle binary runs");
    assert!(
        output.status.success(),
        "axle run {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = String::from_utf8(output.stdout).expect("the report is UTF-8");
    assert!(
        report.contains("\"commit\": \""),
        "the report records no commit: {report}"
    );
    axle::provenance::mask_commit(&report)
}

/// The lines where `expected` and `actual` differ (at most `limit`), for the failure message.
fn differing_lines(expected: &str, actual: &str, limit: usize) -> String {
    let mut lines = Vec::new();
    let mut expected_lines = expected.lines();
    let mut actual_lines = actual.lines();
    for number in 1.. {
        match (expected_lines.next(), actual_lines.next()) {
            (None, None) => break,
            (e, a) if e == a => {}
            (e, a) => {
                lines.push(format!(
                    "line {number}:\n  kept: {}\n  now:  {}",
                    e.unwrap_or("(none)"),
                    a.unwrap_or("(none)")
                ));
                if lines.len() == limit {
                    break;
                }
            }
        }
    }
    lines.join("\n")
}

#[test]
fn canonical_runs_print_the_kept_statistics_byte_for_byte() {
    let bless = std::env::var_os("AXLE_BLESS").is_some_and(|value| value == "1");
    let mut moved = Vec::new();
    for (name, args) in RUNS {
        let actual = run_json(args);
        let path = golden_path(name);
        if bless {
            std::fs::create_dir_all(path.parent().expect("a parent directory"))
                .expect("tests/golden can be created");
            std::fs::write(&path, &actual).expect("the golden file can be written");
            continue;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_else(|error| {
            panic!(
                "{}: {error}; create it with AXLE_BLESS=1 cargo test --release --test golden",
                path.display()
            )
        });
        if expected != actual {
            moved.push(format!(
                "{name} (axle run {}):\n{}",
                args.join(" "),
                differing_lines(&expected, &actual, 12)
            ));
        }
    }
    assert!(
        moved.is_empty(),
        "figures moved from tests/golden; if the change is meant, rewrite them with \
         AXLE_BLESS=1 cargo test --release --test golden and say in the commit which figures \
         moved and why:\n\n{}",
        moved.join("\n\n")
    );
}

#[test]
fn the_comparison_shows_the_line_that_moved() {
    let kept = "{\n  \"end_to_end_ns\": 100,\n  \"polls\": 3\n}\n";
    let now = "{\n  \"end_to_end_ns\": 101,\n  \"polls\": 3\n}\n";
    let shown = differing_lines(kept, now, 12);
    assert!(
        shown.contains("line 2") && shown.contains("100") && shown.contains("101"),
        "{shown}"
    );
    assert!(!shown.contains("polls"), "{shown}");
    assert_eq!(differing_lines(kept, kept, 12), "");
}
