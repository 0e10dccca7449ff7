//! The `axle` command never crashes, exhausts memory or runs forever on what a user gives it:
//! sizes from flags and configuration files are refused before anything is allocated, with a
//! message that names the value, the limit and what to do; every run has a wall-time budget;
//! stall and deadlock reports say what blocks. Each test runs the built binary and checks that
//! it exits with status 2 (not a signal: no abort, no OOM kill), quickly, with the message.
//!
//! Run: `cargo test --release --test cli_limits`.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const AXLE: &str = env!("CARGO_BIN_EXE_axle");

/// What a refusal before allocating may take: it reads a config and does arithmetic (before
/// the fix, `--slots 100000000` took 14.7 s and 5.5 GB before it was refused).
const QUICK: Duration = Duration::from_secs(5);

fn axle(args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let output = Command::new(AXLE)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap_or_else(|error| panic!("cannot start {AXLE}: {error}"));
    (output, started.elapsed())
}

/// Runs `args`, which must fail with status 2 within `within`, by an error (not a signal, not
/// a panic), naming every one of `expected`. Returns stderr.
fn refused_within(args: &[&str], within: Duration, expected: &[&str]) -> String {
    let (output, took) = axle(args);
    let err = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        output.status.code(),
        Some(2),
        "axle {args:?} ended with {} (a signal has no code): {err}",
        output.status
    );
    assert!(!err.contains("panicked"), "axle {args:?} panicked: {err}");
    assert!(err.contains("error: "), "axle {args:?}: {err}");
    for needle in expected {
        assert!(
            err.contains(needle),
            "axle {args:?}: stderr does not mention `{needle}`: {err}"
        );
    }
    assert!(took < within, "axle {args:?} took {took:?}: {err}");
    err
}

fn refused(args: &[&str], expected: &[&str]) -> String {
    refused_within(args, QUICK, expected)
}

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let path =
            std::env::temp_dir().join(format!("axle-cli-limits-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("creating a temp dir");
        TempDir(path)
    }

    /// Writes `text` to `file` and returns its path as a string.
    fn write(&self, file: &str, text: &str) -> String {
        let path = self.0.join(file);
        std::fs::write(&path, text).expect("writing a temp file");
        path.to_str().expect("UTF-8 temp path").to_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const RUN: [&str; 6] = ["run", "knn-a", "--mode", "axle", "--scale", "small"];

fn run_with<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    RUN.iter().chain(extra).copied().collect()
}

/// `--slots 4294967295` aborted (an allocation of 550 GB); `--slots 100000000` took 7 GB and
/// 9 s before the scatter-gather table refused it. Now both are refused at once, with the
/// largest slot count that fits, and that count runs.
#[test]
fn slot_counts_beyond_the_scatter_gather_table_are_refused_before_allocating() {
    let err = refused(
        &run_with(&["--slots", "4294967295"]),
        &[
            "--slots",
            "4294967295",
            "limit of",
            "scatter-gather",
            "fewer",
        ],
    );
    refused(
        &run_with(&["--slots", "100000000"]),
        &["--slots", "100000000"],
    );
    let limit = err
        .split("limit of ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .expect("the limit is named");
    let (output, _) = axle(&run_with(&["--slots", limit, "--json"]));
    assert!(output.status.success(), "{limit} slots: {}", output.status);
    let beyond = (limit.parse::<u64>().expect("a number") + 1).to_string();
    refused(
        &run_with(&["--slots", &beyond]),
        &["--slots", &beyond, limit],
    );
    // RP does not use the ring, but the configuration is refused all the same.
    refused(
        &[
            "run",
            "knn-a",
            "--mode",
            "rp",
            "--scale",
            "small",
            "--slots",
            "4294967295",
        ],
        &["--slots"],
    );
}

/// Every configuration field that sizes something is bounded before use, in the units the
/// user wrote, naming the field.
#[test]
fn configuration_sizes_are_refused_naming_the_field_value_and_limit() {
    let dir = TempDir::new("sizes");
    let cases: [(&str, &str, &[&str]); 6] = [
        // Aborted (an allocation of per-worker queues).
        (
            "units.toml",
            "[host]\nhost_units = 4000000000\n",
            &[
                "host.host_units x host.host_uthreads",
                "8000000000",
                "65536",
            ],
        ),
        // Wrapped to one worker in u32 and ran.
        (
            "wrap.toml",
            "[host]\nhost_units = 2147483648\nhost_uthreads = 2\n",
            &[
                "host.host_units x host.host_uthreads",
                "4294967296",
                "65536",
            ],
        ),
        // Would have allocated ~16 GB of µthread slots.
        (
            "ccm.toml",
            "[device]\nccm_units = 4000000000\n",
            &["device.ccm_units", "256000000000", "1048576"],
        ),
        (
            "memory.toml",
            "[device]\ndevice_memory_mib = 70000\n",
            &["device.device_memory_mib", "70000", "65536"],
        ),
        (
            "queries.toml",
            "[workload]\nqueries = 100000000\n",
            &["workload.queries (--queries)", "100000000", "device memory"],
        ),
        (
            "zero.toml",
            "[host]\nload_outstanding = 0\n",
            &["host.load_outstanding is 0", "at least 1"],
        ),
    ];
    for (file, text, expected) in cases {
        let path = dir.write(file, text);
        refused(&run_with(&["--config", &path]), expected);
    }
    refused(
        &run_with(&["--queries", "100000000"]),
        &["--queries", "100000000"],
    );
}

/// A TOML number too large for its field said only "number too large to fit in target type";
/// now the file, the table, the key and the line are named, with the range.
#[test]
fn toml_numbers_out_of_range_name_the_file_and_the_field() {
    let dir = TempDir::new("toml");
    let huge = dir.write("huge.toml", "[host]\nhost_units = 99999999999999999999\n");
    refused(
        &run_with(&["--config", &huge]),
        &[
            "huge.toml",
            "[host] host_units (line 2)",
            "9223372036854775807",
        ],
    );
    let wide = dir.write("wide.toml", "\n[device]\nccm_units = 5000000000\n");
    refused(
        &run_with(&["--config", &wide]),
        &["wide.toml", "[device] ccm_units (line 3)", "4294967295"],
    );
    let negative = dir.write("negative.toml", "[axle]\nslots = -1\n");
    refused(
        &run_with(&["--config", &negative]),
        &["negative.toml", "[axle] slots (line 2)", "out of range"],
    );
}

/// `stall_timeout_ns = 0` was accepted and then reported as a deadlock blaming the slot count;
/// a stall with the ring not full is not a deadlock of the ring and says so; a real slot
/// deadlock still says "deadlock detected" (what `axle eval` counts).
#[test]
fn stalls_say_what_blocks_and_a_zero_timeout_is_refused() {
    let dir = TempDir::new("stall");
    let zero = dir.write("zero.toml", "[host]\nstall_timeout_ns = 0\n");
    refused(
        &run_with(&["--config", &zero]),
        &["host.stall_timeout_ns is 0", "at least 1"],
    );
    let tiny = dir.write("tiny.toml", "[host]\nstall_timeout_ns = 1\n");
    let err = refused(
        &run_with(&["--config", &tiny]),
        &[
            "no progress",
            "the ring is not what blocks",
            "raise host.stall_timeout_ns",
        ],
    );
    assert!(
        !err.contains("deadlock") && !err.contains("enlarge --slots"),
        "{err}"
    );
    let err = refused(
        &run_with(&["--slots", "2"]),
        &[
            "deadlock detected",
            "2 of the ring's 2 payload slots",
            "enlarge --slots",
        ],
    );
    assert!(!err.contains("stall_timeout_ns is 0"), "{err}");
}

/// Rates so low that one instruction or one byte would outlast the virtual-time limit are
/// refused up front (`host_ipc = 1e-12`; a link of 1e-300 GB/s ran for minutes).
#[test]
fn rates_that_cannot_finish_are_refused_up_front() {
    let dir = TempDir::new("rates");
    let ipc = dir.write("ipc.toml", "[host]\nhost_ipc = 1e-12\n");
    refused(
        &run_with(&["--config", &ipc]),
        &["host.host_ipc is 1e-12", "virtual-time limit", "at least"],
    );
    let link = dir.write(
        "link.toml",
        "[device]\nlink_gbps = 1e-300\n[host]\nstall_timeout_ns = 9223372036854775807\n",
    );
    refused(
        &run_with(&["--config", &link]),
        &["device.link_gbps is 1e-300", "at least"],
    );
}

/// A slow but legal configuration (a link of 1e-9 GB/s and a stall timeout of 99 s: about 260
/// s of wall time before the virtual-time limit) is stopped by the wall-time budget, with an
/// error that says how much wall and virtual time passed and what to raise.
#[test]
fn the_wall_time_budget_stops_a_run_that_would_take_minutes() {
    let dir = TempDir::new("wall");
    let slow = dir.write(
        "slow.toml",
        "[device]\nlink_gbps = 1e-9\n[host]\nstall_timeout_ns = 99000000000\n",
    );
    refused_within(
        &run_with(&["--config", &slow, "--wall-limit", "2s"]),
        Duration::from_secs(10),
        &[
            "knn-a in mode axle: stopped after",
            "s of wall time (the limit is 2 s)",
            "of virtual time, unfinished",
            "--wall-limit",
        ],
    );
    // The same budget bounds every run of `axle eval` (Figure 15: AXLE runs only, which poll).
    let out = dir.0.join("eval");
    let err = refused_within(
        &[
            "eval",
            "--scale",
            "small",
            "--figure",
            "15",
            "--workloads",
            "knn-a",
            "--no-data",
            "--quiet",
            "--jobs",
            "1",
            "--config",
            &slow,
            "--wall-limit",
            "1s",
            "--out",
            out.to_str().expect("UTF-8"),
        ],
        Duration::from_secs(20),
        &["knn-a in mode axle: stopped after", "--wall-limit"],
    );
    assert_eq!(err.matches("knn-a in mode axle").count(), 1, "{err}");
    refused(
        &run_with(&["--wall-limit", "90"]),
        &["--wall-limit", "no unit"],
    );
}

/// The budget changes nothing of a run that finishes within it: the JSON is byte-identical
/// with and without `--wall-limit`.
#[test]
fn a_run_within_its_wall_time_budget_prints_the_same_bytes() {
    let (without, _) = axle(&run_with(&["--json"]));
    let (with, _) = axle(&run_with(&["--json", "--wall-limit", "1h"]));
    assert!(without.status.success() && with.status.success());
    assert_eq!(
        String::from_utf8_lossy(&without.stdout),
        String::from_utf8_lossy(&with.stdout)
    );
}

/// `axle bench ring` sizes are bounded before anything is allocated: a memcpy buffer beyond
/// the machine (16 GiB ran the machine out of memory and was OOM-killed), sample counts
/// beyond memory (a capacity-overflow panic after the first phases).
#[test]
fn bench_ring_sizes_are_refused_before_the_benchmark_starts() {
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|line| line.starts_with("MemAvailable:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kib| kib.parse::<u64>().ok())
        })
        .map(|kib| kib << 10);
    if memory.is_some_and(|bytes| bytes < 32 << 30) {
        refused(
            &["bench", "ring", "--quick", "--memcpy-mib", "16384"],
            &["--memcpy-mib is 16384", "available"],
        );
    }
    refused(
        &["bench", "ring", "--quick", "--memcpy-mib", "16385"],
        &["--memcpy-mib is 16385", "16384"],
    );
    refused(
        &[
            "bench",
            "ring",
            "--quick",
            "--latency-samples",
            "4611686018427387904",
        ],
        &["--latency-samples is 4611686018427387904", "available"],
    );
    refused(
        &[
            "bench",
            "ring",
            "--quick",
            "--records",
            "18446744073709551615",
        ],
        &["--records", "10000000000"],
    );
}

/// "with 1 jobs" was printed by `axle eval --jobs 1`.
#[test]
fn eval_counts_one_job_in_the_singular() {
    let dir = TempDir::new("jobs");
    let out = dir.0.join("eval");
    let (output, _) = axle(&[
        "eval",
        "--scale",
        "small",
        "--figure",
        "10",
        "--workloads",
        "knn-a",
        "--no-data",
        "--quiet",
        "--jobs",
        "1",
        "--out",
        out.to_str().expect("UTF-8"),
    ]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(text.contains("with 1 job\n"), "{text}");
}

#[test]
fn flags_of_one_workload_are_named_as_without_effect_for_the_others() {
    for (args, needles) in [
        (
            [
                "run",
                "pagerank",
                "--mode",
                "axle",
                "--scale",
                "small",
                "--iterations",
                "1",
            ],
            [
                "warning: --iterations has no effect on pagerank",
                "only sssp",
            ],
        ),
        (
            [
                "run",
                "sssp",
                "--mode",
                "axle",
                "--scale",
                "small",
                "--queries",
                "3",
            ],
            [
                "warning: --queries 3 has no effect on sssp",
                "only the KNN workloads",
            ],
        ),
    ] {
        let (output, _) = axle(&args);
        assert!(output.status.success(), "axle {args:?}");
        let err = String::from_utf8_lossy(&output.stderr);
        for needle in needles {
            assert!(err.contains(needle), "axle {args:?}: {err}");
        }
    }
    // Where they apply, they are taken, without a warning.
    let (output, _) = axle(&[
        "run",
        "sssp",
        "--mode",
        "axle",
        "--scale",
        "small",
        "--iterations",
        "1",
        "--json",
    ]);
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("after 1 launches"));
    assert!(!String::from_utf8_lossy(&output.stderr).contains("warning"));
}

#[test]
fn tenant_limits_of_emu_and_run_are_refused_naming_the_value_and_the_limit() {
    let socket = std::env::temp_dir().join(format!("axle-cli-limits-{}.sock", std::process::id()));
    let socket = socket.to_str().unwrap();
    refused(
        &["emu", "--socket", socket, "--max-tenants", "17"],
        &["--max-tenants 17", "1 to 16"],
    );
    refused(
        &["emu", "--socket", socket, "--max-tenants", "0"],
        &["--max-tenants 0", "1 to 16"],
    );
    refused(
        &["emu", "--socket", socket, "--group-timeout", "101"],
        &["101 s", "at most 100 s"],
    );
    refused(
        &["emu", "--socket", socket, "--group-timeout", "0"],
        &["group timeout"],
    );
    // Refused before the socket is bound: nothing was left behind.
    assert!(!std::path::Path::new(socket).exists());
    let tenant = |claim: &'static str| -> Vec<&str> {
        vec![
            "run", "knn-a", "--mode", "axle", "--attach", socket, "--tenant", claim, "--group", "g",
        ]
    };
    refused(&tenant("2/2"), &["tenant 2 of a group of 2", "0 to 1"]);
    refused(&tenant("0/17"), &["a group of 17 tenants", "1 to 16"]);
    refused(&tenant("0/0"), &["a group of 0 tenants"]);
    refused(&tenant("1"), &["I/N"]);
    let mut bad_name = tenant("0/2");
    bad_name[9] = "a/b";
    refused(&bad_name, &["--group", "'/'"]);
    let mut weights = tenant("0/2");
    weights.extend(["--weights", "1,2,3"]);
    refused(&weights, &["--weights", "3 weights for 2 tenants"]);
}
