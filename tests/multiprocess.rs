//! The emulator as its own process (`axle emu`) and the host attached to it (`axle run
//! --attach`): the same JSON as an in-process run, byte for byte, for every mode of every
//! workload; the attach handshake and its refusal; the socket's mode and removal; and the
//! faults (either process killed mid-run); and wall-clock mode attached (`--clock wall
//! --attach`): every mode of every workload verifies, AXLE_Interrupt's eventfd path, a host
//! killed mid-run.
//!
//! Every test spawns `axle` processes with a socket in its own temporary directory, bounds
//! every wait by a wall-clock deadline, and kills its children when it ends, passing or not.
//!
//! Run: `cargo test --release --test multiprocess`.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{finish_axle, spawn_axle, EmulatorProcess, Reaped, Scratch};

const AXLE: &str = env!("CARGO_BIN_EXE_axle");
const MODES: [&str; 4] = ["rp", "bs", "axle", "axle-irq"];
/// Bound on any single wait for a process or a log line.
const DEADLINE: Duration = Duration::from_secs(60);
/// A run long enough (about two seconds attached) to be killed in the middle.
const LONG_RUN: [&str; 6] = ["knn-c", "--mode", "axle", "--queries", "488", "--json"];

impl EmulatorProcess {
    fn start(scratch: &Scratch) -> EmulatorProcess {
        EmulatorProcess::start_with(AXLE, scratch, &[], DEADLINE)
    }

    /// Descriptors the emulator process holds.
    fn open_descriptors(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.pid()))
            .unwrap()
            .count()
    }

    /// Its mappings of host memory segments.
    fn host_memory_mappings(&self) -> usize {
        std::fs::read_to_string(format!("/proc/{}/maps", self.child.pid()))
            .unwrap()
            .matches("axle-host-memory")
            .count()
    }

    /// Waits (at most [`DEADLINE`]) until the emulator has unmapped a dead host's memory and
    /// holds no more descriptors than `idle_descriptors`.
    fn wait_for_the_dead_hosts_segments_freed(&self, idle_descriptors: usize) {
        let started = Instant::now();
        while self.host_memory_mappings() > 0 || self.open_descriptors() > idle_descriptors {
            assert!(
                started.elapsed() < DEADLINE,
                "the emulator kept the dead host's segments: {} mappings, {} descriptors (idle: {idle_descriptors})",
                self.host_memory_mappings(),
                self.open_descriptors()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Runs `axle` with `args` to completion (bounded by [`DEADLINE`]).
fn axle(args: &[&str]) -> Output {
    finish_axle(spawn_axle(args), DEADLINE, &args)
}

/// Starts `axle run ARGS --attach SOCKET` in the background.
fn spawn_attached(args: &[&str], socket: &Path) -> Reaped {
    let child = Command::new(AXLE)
        .arg("run")
        .args(args)
        .arg("--attach")
        .arg(socket)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Reaped(child)
}

/// Starts `axle run ARGS --attach` on `emulator` and returns it 150 ms into its run, still
/// running (else the test fails: `victim`, which the test kills then, could not be killed
/// mid-run).
fn host_mid_run(args: &[&str], emulator: &EmulatorProcess, victim: &str) -> Reaped {
    let mut host = spawn_attached(args, &emulator.socket);
    emulator.wait_for_log("the run starts", 1);
    std::thread::sleep(Duration::from_millis(150));
    assert!(
        host.0.try_wait().unwrap().is_none(),
        "the run ended before {victim} could be killed: make LONG_RUN longer"
    );
    host
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn shm_entries() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir("/dev/shm")
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn attached_runs_print_exactly_the_in_process_json_for_every_mode_of_every_workload() {
    let scratch = Scratch::new("mp", "equal");
    let shm_before = shm_entries();
    let emulator = EmulatorProcess::start(&scratch);
    let socket = emulator.socket.to_str().unwrap().to_owned();
    let mut runs = 0;
    for workload in workloads::names() {
        for mode in MODES {
            let args = [
                "run",
                workload,
                "--mode",
                mode,
                "--scale",
                "small",
                "--queries",
                "2",
                "--json",
            ];
            let in_process = axle(&args);
            assert!(
                in_process.status.success(),
                "in-process {workload} {mode}: {}",
                text(&in_process.stderr)
            );
            let mut attached_args = args.to_vec();
            attached_args.extend(["--attach", &socket]);
            let attached = axle(&attached_args);
            assert!(
                attached.status.success(),
                "attached {workload} {mode}: {}\nemulator log:\n{}",
                text(&attached.stderr),
                emulator.log()
            );
            assert!(text(&in_process.stdout).contains("\"verified\": true"));
            assert_eq!(
                text(&attached.stdout),
                text(&in_process.stdout),
                "{workload} {mode}: the attached run printed other JSON than the in-process run"
            );
            runs += 1;
        }
    }
    assert_eq!(runs, 36, "nine workloads x four modes");
    // One emulator served every host, one after the other, and named nothing in /dev/shm.
    emulator.wait_for_log("detached after its run", runs);
    assert_eq!(shm_entries(), shm_before, "something was left in /dev/shm");
    // The hosts took turns on their own (fewer hand-overs than turns), and printed the same.
    let log = emulator.log();
    let batched = log
        .lines()
        .filter_map(|line| {
            let (_, counts) = line.split_once("host pid ")?;
            let (_, counts) = counts.split_once(": ")?;
            let (turns, rest) = counts.split_once(" turns in ")?;
            let (hand_overs, _) = rest.split_once(" hand-overs")?;
            Some((turns.parse::<u64>().ok()?, hand_overs.parse::<u64>().ok()?))
        })
        .filter(|(turns, hand_overs)| hand_overs < turns)
        .count();
    assert!(
        batched > 0,
        "no host took a turn on its own; emulator log:\n{log}"
    );
}

#[test]
fn an_abi_mismatch_is_refused_on_both_sides_and_the_emulator_serves_on() {
    let scratch = Scratch::new("mp", "abi");
    let emulator = EmulatorProcess::start(&scratch);
    let socket = emulator.socket.to_str().unwrap().to_owned();
    let version = shared_abi::ABI_VERSION;
    let other = (version + 41).to_string();
    let refused = axle(&[
        "run",
        "knn-a",
        "--mode",
        "axle",
        "--queries",
        "1",
        "--attach",
        &socket,
        "--abi-version-override",
        &other,
    ]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused.stderr));
    let host_says = format!("emulator speaks ABI version {version}, this host {other}");
    assert!(
        text(&refused.stderr).contains(&host_says),
        "host's message: {}",
        text(&refused.stderr)
    );
    let emulator_says = format!("host speaks ABI version {other}, this emulator {version}");
    emulator.wait_for_log(&emulator_says, 1);
    let accepted = axle(&[
        "run",
        "knn-a",
        "--mode",
        "axle",
        "--queries",
        "1",
        "--attach",
        &socket,
    ]);
    assert!(accepted.status.success(), "{}", text(&accepted.stderr));
}

#[test]
fn the_socket_is_created_0600_and_removed_on_sigterm_and_sigint() {
    for signal in [
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGINT,
    ] {
        let scratch = Scratch::new("mp", "socket");
        let mut emulator = EmulatorProcess::start(&scratch);
        let metadata = std::fs::symlink_metadata(&emulator.socket).unwrap();
        assert!(metadata.file_type().is_socket());
        assert_eq!(
            metadata.permissions().mode() & 0o777,
            0o600,
            "socket mode {:o}",
            metadata.permissions().mode()
        );
        emulator.child.signal(signal);
        let status = emulator
            .child
            .wait_for_exit(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("axle emu ignored {signal}"));
        assert!(
            status.success(),
            "axle emu exited with {status} on {signal}"
        );
        assert!(
            !emulator.socket.exists(),
            "the socket file outlived axle emu ({signal})"
        );
    }
}

#[test]
fn a_stale_socket_is_replaced_and_a_live_one_is_not_stolen() {
    let scratch = Scratch::new("mp", "stale");
    let socket = scratch.socket();
    // A socket file nobody listens on, as a SIGKILLed emulator leaves behind.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    let emulator = EmulatorProcess::start(&scratch);
    let second = axle(&["emu", "--socket", emulator.socket.to_str().unwrap()]);
    assert_eq!(second.status.code(), Some(2));
    assert!(
        text(&second.stderr).contains("in use"),
        "{}",
        text(&second.stderr)
    );
}

#[test]
fn an_emulator_killed_mid_run_fails_the_host_within_a_second() {
    let scratch = Scratch::new("mp", "emu-killed");
    let shm_before = shm_entries();
    let mut emulator = EmulatorProcess::start(&scratch);
    let mut host = host_mid_run(&LONG_RUN, &emulator, "the emulator");
    emulator.child.0.kill().unwrap();
    let killed = Instant::now();
    let status = host
        .wait_for_exit(Duration::from_secs(10))
        .expect("the host hangs after its emulator died");
    let reaction = killed.elapsed();
    eprintln!("the host noticed its emulator's death after {reaction:?}");
    assert!(
        reaction < Duration::from_secs(1),
        "the host took {reaction:?} to notice"
    );
    assert!(!status.success());
    let mut stderr = String::new();
    host.0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        stderr.contains("emulator process died"),
        "host's message: {stderr}"
    );
    assert_eq!(shm_entries(), shm_before, "something was left in /dev/shm");
}

#[test]
fn a_host_killed_mid_run_is_logged_its_segments_freed_and_the_next_host_served() {
    let scratch = Scratch::new("mp", "host-killed");
    let shm_before = shm_entries();
    let emulator = EmulatorProcess::start(&scratch);
    let idle_descriptors = emulator.open_descriptors();
    let mut host = host_mid_run(&LONG_RUN, &emulator, "the host");
    assert_eq!(emulator.host_memory_mappings(), 1);
    host.0.kill().unwrap();
    host.wait_for_exit(DEADLINE).unwrap();
    emulator.wait_for_log("died mid-run", 1);
    // The session is over: the host's memory is unmapped, every descriptor closed.
    emulator.wait_for_the_dead_hosts_segments_freed(idle_descriptors);
    let next = axle(&[
        "run",
        "knn-a",
        "--mode",
        "axle",
        "--queries",
        "1",
        "--json",
        "--attach",
        emulator.socket.to_str().unwrap(),
    ]);
    assert!(
        next.status.success(),
        "the next host failed: {}\nemulator log:\n{}",
        text(&next.stderr),
        emulator.log()
    );
    assert!(text(&next.stdout).contains("\"verified\": true"));
    assert_eq!(shm_entries(), shm_before, "something was left in /dev/shm");
}

#[test]
fn attaching_to_nothing_fails_with_a_clear_message() {
    let scratch = Scratch::new("mp", "nothing");
    let output = axle(&[
        "run",
        "knn-a",
        "--mode",
        "rp",
        "--attach",
        scratch.socket().to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("cannot connect to the emulator"),
        "{}",
        text(&output.stderr)
    );
}

/// `axle run ARGS --clock wall --attach SOCKET` to completion.
fn wall_attached(args: &[&str], socket: &Path) -> Output {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend(["--clock", "wall", "--attach", socket.to_str().unwrap()]);
    axle(&all)
}

/// Requires the attached wall-clock run `what` to have succeeded and printed a verified report
/// labelled `"clock": "wall"`.
fn verified_on_the_wall_clock(run: &Output, what: &str, emulator: &EmulatorProcess) {
    assert!(
        run.status.success(),
        "attached wall-clock {what}: {}\nemulator log:\n{}",
        text(&run.stderr),
        emulator.log()
    );
    let stdout = text(&run.stdout);
    assert!(stdout.contains("\"verified\": true"), "{stdout}");
    assert!(stdout.contains("\"clock\": \"wall\""), "{stdout}");
}

#[test]
fn attached_wall_clock_runs_of_every_workload_in_every_mode_verify() {
    let scratch = Scratch::new("mp", "wall-all");
    let emulator = EmulatorProcess::start(&scratch);
    let mut runs = 0;
    for workload in workloads::names() {
        for mode in MODES {
            let run = wall_attached(
                &[
                    workload,
                    "--mode",
                    mode,
                    "--scale",
                    "small",
                    "--queries",
                    "2",
                    "--json",
                ],
                &emulator.socket,
            );
            verified_on_the_wall_clock(&run, &format!("{workload} {mode}"), &emulator);
            runs += 1;
        }
    }
    assert_eq!(runs, 36);
    emulator.wait_for_log("detached after its run (wall clock", 36);
}

#[test]
fn an_attached_wall_clock_run_of_axle_irq_delivers_its_interrupts_through_the_eventfd() {
    let scratch = Scratch::new("mp", "wall-irq");
    let emulator = EmulatorProcess::start(&scratch);
    // The run fails when the interrupts signalled on the host's eventfd differ from those the
    // device raised, so a verified run here is the eventfd path working.
    for workload in ["knn-a", "knn-b"] {
        let run = wall_attached(
            &[workload, "--mode", "axle-irq", "--queries", "2", "--json"],
            &emulator.socket,
        );
        verified_on_the_wall_clock(&run, &format!("{workload} axle-irq"), &emulator);
    }
}

#[test]
fn a_host_killed_during_an_attached_wall_clock_run_leaves_the_emulator_serving() {
    let scratch = Scratch::new("mp", "wall-killed");
    let emulator = EmulatorProcess::start(&scratch);
    let idle_descriptors = emulator.open_descriptors();
    let mut args = LONG_RUN.to_vec();
    args.extend(["--clock", "wall"]);
    let mut host = host_mid_run(&args, &emulator, "the host");
    host.0.kill().unwrap();
    host.wait_for_exit(DEADLINE).unwrap();
    emulator.wait_for_log("died mid-run", 1);
    emulator.wait_for_the_dead_hosts_segments_freed(idle_descriptors);
    let next = wall_attached(
        &["knn-a", "--mode", "axle", "--queries", "1", "--json"],
        &emulator.socket,
    );
    assert!(
        next.status.success(),
        "the next host failed: {}\nemulator log:\n{}",
        text(&next.stderr),
        emulator.log()
    );
    assert!(text(&next.stdout).contains("\"verified\": true"));
}
