//! `axle eval`: every figure's files at small scale, REPRODUCTION.md (its summary computed from
//! its claims), results independent of `--jobs`, the choice of real data or generators, and
//! clear errors for bad arguments.
//!
//! The tests pass `--no-data` (or a data directory they make) so that they do not depend on
//! the real data beside the checkout.
//!
//! Run: `cargo test --release --test eval`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const AXLE: &str = env!("CARGO_BIN_EXE_axle");

fn axle_in(args: &[&str], out: &Path, directory: Option<&Path>) -> Output {
    let mut command = Command::new(AXLE);
    command
        .args(args)
        .arg("--out")
        .arg(out)
        .env_remove("RUST_LOG");
    if let Some(directory) = directory {
        command.current_dir(directory);
    }
    command
        .output()
        .unwrap_or_else(|error| panic!("cannot start {AXLE}: {error}"))
}

fn axle(args: &[&str], out: &Path) -> Output {
    axle_in(args, out, None)
}

/// The number before `after` in the line of `text` that contains `line`.
fn count_in(text: &str, line: &str, after: &str) -> usize {
    let line = text
        .lines()
        .find(|l| l.contains(line))
        .unwrap_or_else(|| panic!("no line with `{line}`:\n{text}"));
    let rest = line
        .split(after)
        .nth(1)
        .unwrap_or_else(|| panic!("no `{after}` in {line}"));
    rest.trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number after `{after}` in {line}"))
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
                "--no-data",
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
    // The summary's counts are those of the results table below it.
    let results = reproduction
        .split("## The results")
        .nth(1)
        .expect("a results section");
    let rows: Vec<&str> = results.lines().filter(|l| l.starts_with("| 1")).collect();
    let within_10 = rows.iter().filter(|r| r.contains("(within 10%)")).count();
    let within_25 = within_10 + rows.iter().filter(|r| r.contains("(within 25%)")).count();
    let held = rows.iter().filter(|r| r.contains("| held |")).count();
    let not_held = rows.iter().filter(|r| r.contains("**not held**")).count();
    let same = rows.iter().filter(|r| r.contains("| same: ")).count();
    let opposite = rows.iter().filter(|r| r.contains("**opposite**")).count();
    assert_eq!(
        count_in(&reproduction, "**Numbers**", "within 10% for"),
        within_10
    );
    assert_eq!(
        count_in(&reproduction, "**Numbers**", "within 25% for"),
        within_25
    );
    assert_eq!(count_in(&reproduction, "**Statements**", "words):"), held);
    assert_eq!(
        count_in(&reproduction, "**Statements**", "of"),
        held + not_held
    );
    assert_eq!(
        count_in(&reproduction, "**Direction**", "**Direction**:"),
        same
    );
    assert_eq!(
        count_in(&reproduction, "**Direction**", "of"),
        same + opposite
    );
    // Inequalities and words are held or not, never compared within 10%.
    for row in rows
        .iter()
        .filter(|r| r.contains("| single-digit") || r.contains("| deadlock |"))
    {
        assert!(row.contains("held"), "{row}");
        assert!(!row.contains("within"), "{row}");
    }
    // Figure 11 runs Table III's hardware and host 8, CCM 4.
    let fig11 = std::fs::read_to_string(scratch.0.join("fig11.csv")).unwrap();
    assert!(fig11.contains("opt-2.7b (4 CCM, 8 host units)"), "{fig11}");
    assert!(reproduction.contains("## Choices made with a figure in view"));
    assert!(
        reproduction.contains("| knn-a | seeded generator"),
        "{reproduction}"
    );
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
        "knn-a,knn-c,sssp",
        "--no-data",
        "--quiet",
        "--reproduction",
        "REPRODUCTION.md",
    ];
    let mut first = args.to_vec();
    first.extend(["--jobs", "1"]);
    let mut second = args.to_vec();
    second.extend(["--jobs", "2"]);
    // Each run in its own directory, so that the relative REPRODUCTION.md (and the command
    // it quotes) are the same.
    ok(&axle_in(&first, &one.0, Some(&one.0)), "--jobs 1");
    ok(&axle_in(&second, &two.0, Some(&two.0)), "--jobs 2");
    for name in [
        "fig14.csv",
        "fig14.json",
        "fig16a.csv",
        "fig16b.csv",
        "fig16.json",
        "REPRODUCTION.md",
    ] {
        assert_eq!(
            std::fs::read(one.0.join(name)).unwrap(),
            std::fs::read(two.0.join(name)).unwrap(),
            "{name} differs between --jobs 1 and --jobs 2"
        );
    }
}

/// The arguments `selection` followed by `extra`.
fn with<'a>(selection: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    selection.iter().chain(extra).copied().collect()
}

/// The run identifiers in the output of `--list-runs`: the first word of each line.
fn run_ids(listed: &str) -> Vec<&str> {
    listed
        .lines()
        .map(|line| line.split(' ').next().unwrap())
        .collect()
}

/// Makes each run of `ids` of the evaluation `selection` by itself (`--run`) in `cluster`, into
/// `cluster/part0` and `cluster/part1` by turns (two "machines").
fn make_runs_on_two_machines(selection: &[&str], ids: &[&str], cluster: &Path) {
    for (index, id) in ids.iter().enumerate() {
        let part = cluster.join(format!("part{}", index % 2));
        ok(
            &axle_in(&with(selection, &["--run", id]), &part, Some(cluster)),
            "--run",
        );
    }
}

#[test]
fn runs_made_one_by_one_and_merged_give_the_same_files_as_one_evaluation() {
    let direct = Scratch::new("direct");
    let cluster = Scratch::new("cluster");
    let selection = [
        "eval",
        "--scale",
        "small",
        "--figure",
        "12,16",
        "--workloads",
        "knn-a,sssp",
        "--no-data",
        "--quiet",
    ];
    // The direct evaluation.
    let args = with(&selection, &["--reproduction", "REPRODUCTION.md"]);
    ok(&axle_in(&args, &direct.0, Some(&direct.0)), "direct eval");
    // The runs, listed, then made one at a time into two directories (two "machines").
    let listed = ok(
        &axle_in(
            &with(&selection, &["--list-runs"]),
            &cluster.0,
            Some(&cluster.0),
        ),
        "--list-runs",
    );
    let ids = run_ids(&listed);
    assert!(ids.len() > 4, "{listed}");
    assert!(ids.iter().all(|id| id.len() == 17 && id.starts_with('r')));
    make_runs_on_two_machines(&selection, &ids, &cluster.0);
    // A merge with a part missing names what is missing.
    let partial = axle_in(
        &with(&selection, &["--merge", "part0"]),
        &cluster.0.join("merged"),
        Some(&cluster.0),
    );
    assert!(!partial.status.success());
    let error = String::from_utf8_lossy(&partial.stderr);
    assert!(
        error.contains("have no result") && error.contains(ids[1]),
        "{error}"
    );
    // The merge of both: the same files, byte for byte.
    let args = with(
        &selection,
        &[
            "--merge",
            "part0",
            "part1",
            "--reproduction",
            "REPRODUCTION.md",
        ],
    );
    ok(&axle_in(&args, &cluster.0, Some(&cluster.0)), "--merge");
    for name in [
        "fig12.csv",
        "fig12.json",
        "fig16a.csv",
        "fig16b.csv",
        "fig16.json",
        "fig16a.svg",
        "fig12-reductions.svg",
        "index.html",
        "REPRODUCTION.md",
    ] {
        assert_eq!(
            std::fs::read(direct.0.join(name)).unwrap(),
            std::fs::read(cluster.0.join(name)).unwrap(),
            "{name} differs between the direct and the merged evaluation"
        );
    }
    // An identifier that is not in the selection is refused, saying how to list them.
    let unknown = axle_in(
        &with(&selection, &["--run", "r0000000000000000"]),
        &cluster.0,
        None,
    );
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("--list-runs"));
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

#[test]
fn no_data_runs_the_generators_and_says_so() {
    let scratch = Scratch::new("nodata");
    let reproduction = scratch.0.join("REPRODUCTION.md");
    let output = axle(
        &[
            "eval",
            "--scale",
            "small",
            "--figure",
            "13",
            "--workloads",
            "knn-a,sssp",
            "--no-data",
            "--quiet",
            "--reproduction",
            reproduction.to_str().unwrap(),
        ],
        &scratch.0,
    );
    ok(&output, "--no-data");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--no-data: every workload uses its seeded generator"),
        "{stderr}"
    );
    assert!(
        stderr.contains("knn-a") && stderr.contains("seeded generator"),
        "{stderr}"
    );
    let reproduction = std::fs::read_to_string(&reproduction).unwrap();
    assert!(reproduction.contains("--no-data: every workload uses its seeded generator"));
    assert!(reproduction.contains("Generated by `axle eval --figure 13 --scale small --no-data"));
    assert!(
        reproduction.contains("| sssp | seeded generator"),
        "{reproduction}"
    );
    let json = std::fs::read_to_string(scratch.0.join("fig13.json")).unwrap();
    assert!(json.contains("\"input\": \"seeded generator"), "{json}");
}

#[test]
fn a_bad_data_directory_is_an_error_naming_it() {
    let scratch = Scratch::new("baddata");
    let missing = scratch.0.join("no-such-data");
    let file = scratch.0.join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    for (path, needle) in [(&missing, "No such file"), (&file, "not a directory")] {
        let output = axle(
            &["eval", "--scale", "small", "--data", path.to_str().unwrap()],
            &scratch.0,
        );
        assert!(
            !output.status.success(),
            "--data {} succeeded",
            path.display()
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&path.display().to_string()) && stderr.contains(needle),
            "{stderr}"
        );
    }
    // An existing directory without the embeddings KNN needs: an error naming the file.
    let output = axle(
        &[
            "eval",
            "--scale",
            "small",
            "--workloads",
            "knn-a",
            "--data",
            scratch.0.to_str().unwrap(),
        ],
        &scratch.0,
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bge-m3-1024d-paragraph-queries.vec"),
        "{stderr}"
    );
    let output = axle(&["eval", "--data", "x", "--no-data"], &scratch.0);
    assert!(!output.status.success(), "--data with --no-data succeeded");
}

/// With no `--data`, `axle eval` reads `../shared/data` relative to the current directory
/// when it exists: here a directory of our own, holding a synthetic embeddings file.
#[test]
fn the_default_data_directory_beside_the_current_one_is_used() {
    let scratch = Scratch::new("defaultdata");
    let work = scratch.0.join("work");
    let data = scratch.0.join("shared").join("data");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&data).unwrap();
    // 300 embeddings of 1024 f32 (KNN (a) needs 136 vectors of 2048), finite values.
    let bytes: Vec<u8> = (0..300 * 1024)
        .flat_map(|i: u32| (((i * 7919) % 1000) as f32 / 1000.0 - 0.5).to_le_bytes())
        .collect();
    std::fs::write(data.join("bge-m3-1024d-paragraph-queries.vec"), bytes).unwrap();
    let output = axle_in(
        &[
            "eval",
            "--scale",
            "small",
            "--figure",
            "13",
            "--workloads",
            "knn-a,ssb-q1.1",
            "--quiet",
            "--reproduction",
            "REPRODUCTION.md",
        ],
        &scratch.0.join("out"),
        Some(&work),
    );
    ok(&output, "axle eval with ../shared/data");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("real data from ../shared/data (the default data directory"),
        "{stderr}"
    );
    assert!(
        stderr.contains("real file ../shared/data/bge-m3-1024d-paragraph-queries.vec"),
        "{stderr}"
    );
    assert!(stderr.contains("no real data set exists"), "{stderr}");
    let reproduction = std::fs::read_to_string(work.join("REPRODUCTION.md")).unwrap();
    assert!(
        reproduction.contains("| knn-a | real file ../shared/data/bge-m3"),
        "{reproduction}"
    );
    let json = std::fs::read_to_string(scratch.0.join("out").join("fig13.json")).unwrap();
    assert!(json.contains("real file ../shared/data/bge-m3"), "{json}");
    // The synthetic file is not the paper's: the inputs say so, naming both digests, and the
    // warning is logged once however many runs read the file.
    let paper = "15d24cbc1bbdac8ffeb1946e60107860d30d3b7abf329714f546893f77a1c255";
    assert!(
        reproduction.contains("WARNING: ../shared/data/bge-m3-1024d-paragraph-queries.vec is not the paper's data set")
            && reproduction.contains(paper),
        "{reproduction}"
    );
    assert_eq!(
        stderr.matches("workloads::datafile").count(),
        1,
        "one logged warning: {stderr}"
    );
}

/// The tenants figure's runs (each shared run and each workload alone, per polling setting)
/// are runs of the sweep: listed, made one by one on two "machines" and merged, they give the
/// same files as one evaluation, byte for byte; and the same with `--jobs 1` and `--jobs 2`.
#[test]
fn the_tenants_figure_runs_in_the_sweep_and_merges_byte_identical() {
    let direct = Scratch::new("tenants-direct");
    let serial = Scratch::new("tenants-serial");
    let cluster = Scratch::new("tenants-cluster");
    let selection = [
        "eval",
        "--scale",
        "small",
        "--figure",
        "tenants",
        "--no-data",
        "--quiet",
    ];
    let stdout = ok(
        &axle_in(
            &with(&selection, &["--jobs", "2"]),
            &direct.0,
            Some(&direct.0),
        ),
        "direct tenants eval",
    );
    // 3 polling settings x (4 workloads alone + 4 shared runs).
    assert!(stdout.contains("24 distinct runs"), "{stdout}");
    assert!(
        stdout.contains("Tenants: 8 tenants at p100, each tenant"),
        "{stdout}"
    );
    ok(
        &axle_in(
            &with(&selection, &["--jobs", "1"]),
            &serial.0,
            Some(&serial.0),
        ),
        "tenants eval, one job",
    );
    let listed = ok(
        &axle_in(
            &with(&selection, &["--list-runs"]),
            &cluster.0,
            Some(&cluster.0),
        ),
        "--list-runs",
    );
    let ids = run_ids(&listed);
    assert_eq!(ids.len(), 24, "{listed}");
    assert_eq!(
        listed
            .lines()
            .filter(|line| line.contains(" tenants:knn-a+pagerank+ssb-q1.1+dlrm+knn-a+"))
            .count(),
        3,
        "one 8-tenant run per polling setting:\n{listed}"
    );
    make_runs_on_two_machines(&selection, &ids, &cluster.0);
    ok(
        &axle_in(
            &with(&selection, &["--merge", "part0", "part1"]),
            &cluster.0,
            Some(&cluster.0),
        ),
        "--merge",
    );
    let mut names: Vec<String> = std::fs::read_dir(&direct.0)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("tenants") || name == "index.html")
        .collect();
    names.sort();
    // The summary, the claim and 12 per-tenant tables (CSV and SVG each), the JSON, the page.
    assert_eq!(names.len(), 14 * 2 + 2, "{names:?}");
    for name in &names {
        let made = std::fs::read(direct.0.join(name)).unwrap();
        assert_eq!(
            made,
            std::fs::read(cluster.0.join(name)).unwrap(),
            "{name} differs between the direct and the merged evaluation"
        );
        assert_eq!(
            made,
            std::fs::read(serial.0.join(name)).unwrap(),
            "{name} differs between --jobs 2 and --jobs 1"
        );
    }
    // A run file with the right key but another kind of outcome (a run alone's where a
    // shared run's belongs) is refused, naming the file.
    let shared_id = listed
        .lines()
        .find(|line| line.contains(" tenants:"))
        .and_then(|line| line.split(' ').next())
        .unwrap();
    let alone_id = listed
        .lines()
        .find(|line| !line.contains(" tenants:"))
        .and_then(|line| line.split(' ').next())
        .unwrap();
    let find = |id: &str| {
        ["part0", "part1"]
            .iter()
            .map(|part| cluster.0.join(part).join("runs").join(format!("{id}.json")))
            .find(|path| path.is_file())
            .unwrap()
    };
    let shared_path = find(shared_id);
    let mut forged: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&shared_path).unwrap()).unwrap();
    let alone: serde_json::Value =
        serde_json::from_slice(&std::fs::read(find(alone_id)).unwrap()).unwrap();
    forged["outcome"] = alone["outcome"].clone();
    std::fs::write(&shared_path, forged.to_string()).unwrap();
    let refused = axle_in(
        &with(&selection, &["--merge", "part0", "part1"]),
        &cluster.0.join("forged"),
        Some(&cluster.0),
    );
    assert!(!refused.status.success());
    let error = String::from_utf8_lossy(&refused.stderr);
    assert!(
        error.contains("is not that of run") && error.contains(shared_id),
        "{error}"
    );
    // Each shared run's record in the JSON lists its tenants with their inputs.
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(direct.0.join("tenants.json")).unwrap()).unwrap();
    let shared: Vec<&serde_json::Value> = json["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|run| run.get("shared").is_some())
        .collect();
    assert_eq!(shared.len(), 12);
    for run in shared {
        for tenant in run["shared"]["tenants"].as_array().unwrap() {
            assert!(
                tenant["input"]
                    .as_str()
                    .is_some_and(|input| input.starts_with("seeded generator")),
                "{tenant}"
            );
        }
    }
}
