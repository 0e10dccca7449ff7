//! Recovery of the device (docs/emulator-process.md, "Recovery"): an emulator process that
//! dies mid-run (`axle emu --die-after-hand-overs K`, hidden, kills itself with SIGKILL at a
//! point of the run that does not depend on timing) fails its host with a report of the launch
//! it lost; `axle run --attach S --reattach` waits for an emulator started again on the same
//! socket, finds a new device epoch, reruns from the start and prints exactly the JSON of an
//! uninterrupted run; a reattach that finds no emulator, or runs out of attempts, fails with a
//! message that says so.
//!
//! Every wait is bounded by a wall-clock deadline; no assertion is about time.
//!
//! Run: `cargo test --release --test recovery`.

use std::ffi::OsStr;
use std::process::{Command, ExitStatus};
use std::time::Duration;

mod common;
use common::{finish_axle, spawn_axle, EmulatorProcess, Reaped, Scratch};

const AXLE: &str = env!("CARGO_BIN_EXE_axle");
/// Bound on any single wait for a process or a log line.
const DEADLINE: Duration = Duration::from_secs(60);
/// The run: SSSP at small scale in RP mode, ten launches of one kernel.
const RUN: [&str; 7] = ["run", "sssp", "--mode", "rp", "--scale", "small", "--json"];
/// The emulator dies instead of handing the turn over for the 31st time: mid-run, at the same
/// point of the run every time.
const DIE_AFTER: &str = "30";

/// An emulator on the scratch socket that kills itself after [`DIE_AFTER`] hand-overs.
fn dying_emulator(scratch: &Scratch) -> EmulatorProcess {
    EmulatorProcess::start_with(
        AXLE,
        scratch,
        &["--die-after-hand-overs", DIE_AFTER],
        DEADLINE,
    )
}

/// The device epoch an emulator logged when it started.
fn logged_epoch(emulator: &EmulatorProcess) -> String {
    let log = emulator.log();
    let at = log
        .find("device epoch 0x")
        .expect("the emulator logs its epoch")
        + 13;
    log[at..at + 18].to_owned()
}

/// A host process, its standard output and error captured.
struct Host(Reaped);

impl Host {
    fn spawn(extra: &[&str], socket: &std::path::Path) -> Host {
        let mut args: Vec<&OsStr> = RUN.iter().map(OsStr::new).collect();
        args.extend([OsStr::new("--attach"), socket.as_os_str()]);
        args.extend(extra.iter().map(OsStr::new));
        Host(spawn_axle(&args))
    }

    /// Waits for the host to exit; its status, standard output and standard error.
    fn finish(self) -> (ExitStatus, String, String) {
        let output = finish_axle(self.0, DEADLINE, &"the host");
        (
            output.status,
            String::from_utf8(output.stdout).unwrap(),
            String::from_utf8(output.stderr).unwrap(),
        )
    }
}

/// The lost-launch part of a host's report: `Lost launch ... had completed`.
fn lost_part(stderr: &str) -> &str {
    let start = stderr
        .find("Lost launch")
        .unwrap_or_else(|| panic!("no lost launch reported: {stderr}"));
    let end = stderr[start..]
        .find("had completed")
        .unwrap_or_else(|| panic!("no completed count: {stderr}"));
    &stderr[start..start + end + "had completed".len()]
}

/// A number that follows `before` in `text`.
fn number_after(text: &str, before: &str) -> u64 {
    let at = text
        .find(before)
        .unwrap_or_else(|| panic!("{before:?} not in {text}"))
        + before.len();
    text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("no number after {before:?} in {text}"))
}

#[test]
fn an_emulator_killed_mid_run_fails_the_host_with_the_launch_it_lost_the_same_each_time() {
    let mut reports = Vec::new();
    for _ in 0..2 {
        let scratch = Scratch::new("rec", "lost");
        let mut emulator = dying_emulator(&scratch);
        let epoch = logged_epoch(&emulator);
        let (status, stdout, stderr) = Host::spawn(&[], &emulator.socket).finish();
        emulator
            .child
            .wait_for_exit(DEADLINE)
            .expect("the emulator did not die");
        assert_eq!(status.code(), Some(2), "{stderr}");
        assert!(stdout.is_empty(), "a lost run prints no report: {stdout}");
        assert!(
            stderr.contains("emulator process died (its socket closed) during the run"),
            "{stderr}"
        );
        assert!(
            stderr.contains(&format!("the device (epoch {epoch}) is gone")),
            "the host reports the epoch the emulator drew ({epoch}): {stderr}"
        );
        let lost = lost_part(&stderr).to_owned();
        // The lost launch is the one after those completed: SSSP's kernel, mid-run.
        let tag = number_after(&lost, "tag ");
        let completed = number_after(&lost, "; ");
        assert_eq!(tag, completed + 1, "{lost}");
        assert!((2..=10).contains(&tag), "{lost}");
        assert!(lost.contains("kernel SsspRelax"), "{lost}");
        assert!(lost.contains(&format!("index {}", tag - 1)), "{lost}");
        assert!(stderr.contains("--reattach"), "{stderr}");
        reports.push(lost);
    }
    assert_eq!(
        reports[0], reports[1],
        "the same crash point loses the same launch"
    );
}

#[test]
fn reattach_reruns_on_a_restarted_emulator_and_prints_the_uninterrupted_json() {
    let uninterrupted = Command::new(AXLE).args(RUN).output().unwrap();
    assert!(uninterrupted.status.success());
    let scratch = Scratch::new("rec", "reattach");
    let mut first = dying_emulator(&scratch);
    let lost_epoch = logged_epoch(&first);
    let host = Host::spawn(&["--reattach"], &first.socket);
    first
        .child
        .wait_for_exit(DEADLINE)
        .expect("the first emulator did not die");
    // Started again on the same socket (it replaces the stale socket file).
    let second = EmulatorProcess::start_with(AXLE, &scratch, &[], DEADLINE);
    let new_epoch = logged_epoch(&second);
    assert_ne!(new_epoch, lost_epoch, "two starts drew the same epoch");
    let (status, stdout, stderr) = host.finish();
    assert!(status.success(), "{stderr}");
    assert_eq!(
        stdout,
        String::from_utf8_lossy(&uninterrupted.stdout),
        "the rerun's JSON differs from the uninterrupted run's; its stderr: {stderr}"
    );
    lost_part(&stderr);
    assert!(
        stderr.contains(&format!(
            "a new device (epoch {new_epoch}; the lost one was {lost_epoch})"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("rerunning sssp in mode rp from the start"),
        "{stderr}"
    );
    second.wait_for_log("detached after its run", 1);
}

#[test]
fn a_reattach_that_finds_no_emulator_within_its_timeout_fails_cleanly() {
    let scratch = Scratch::new("rec", "nobody");
    let mut emulator = dying_emulator(&scratch);
    let (status, stdout, stderr) = Host::spawn(
        &["--reattach", "--reattach-timeout", "0.5"],
        &emulator.socket,
    )
    .finish();
    emulator
        .child
        .wait_for_exit(DEADLINE)
        .expect("the emulator did not die");
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("waiting up to 500 ms for an emulator"),
        "{stderr}"
    );
    assert!(
        stderr.contains("error: no emulator answered on")
            && stderr.contains("within 500 ms of waiting to reattach (--reattach-timeout)"),
        "{stderr}"
    );
    lost_part(&stderr);
}

#[test]
fn reattaches_are_bounded_by_their_attempts() {
    let scratch = Scratch::new("rec", "attempts");
    let mut first = dying_emulator(&scratch);
    let host = Host::spawn(&["--reattach", "--reattach-attempts", "1"], &first.socket);
    first
        .child
        .wait_for_exit(DEADLINE)
        .expect("the first emulator did not die");
    // The emulator it reattaches to dies at the same point.
    let mut second = dying_emulator(&scratch);
    let (status, stdout, stderr) = host.finish();
    second
        .child
        .wait_for_exit(DEADLINE)
        .expect("the second emulator did not die");
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("reattached to"), "{stderr}");
    assert!(
        stderr.contains("gave up after 1 reattaches (--reattach-attempts 1)"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("Lost launch").count(),
        2,
        "each loss is reported: {stderr}"
    );
}

#[test]
fn reattach_needs_attach_and_virtual_time() {
    let without_attach = Command::new(AXLE)
        .args(RUN)
        .arg("--reattach")
        .output()
        .unwrap();
    assert!(!without_attach.status.success());
    let wall = Command::new(AXLE)
        .args(RUN)
        .args([
            "--clock",
            "wall",
            "--attach",
            "/nonexistent.sock",
            "--reattach",
        ])
        .output()
        .unwrap();
    assert_eq!(wall.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&wall.stderr).contains("cannot be combined with --clock wall"));
    let zero = Command::new(AXLE)
        .args(RUN)
        .args([
            "--attach",
            "/nonexistent.sock",
            "--reattach",
            "--reattach-timeout",
            "0",
        ])
        .output()
        .unwrap();
    assert!(!zero.status.success());
    assert!(
        String::from_utf8_lossy(&zero.stderr).contains("the reattach timeout must be more than 0"),
        "{}",
        String::from_utf8_lossy(&zero.stderr)
    );
}

#[test]
fn an_emulator_killed_during_an_attached_wall_clock_run_fails_the_host_with_what_it_lost() {
    let scratch = Scratch::new("rec", "wall");
    let mut emulator = EmulatorProcess::start_with(AXLE, &scratch, &[], DEADLINE);
    let epoch = logged_epoch(&emulator);
    // A wall-clock run of about two seconds (tests/multiprocess.rs's LONG_RUN).
    let mut args: Vec<&OsStr> = [
        "run",
        "knn-c",
        "--mode",
        "axle",
        "--queries",
        "488",
        "--json",
        "--clock",
        "wall",
        "--attach",
    ]
    .map(OsStr::new)
    .to_vec();
    args.push(emulator.socket.as_os_str());
    let host = Host(spawn_axle(&args));
    emulator.wait_for_log("the run starts", 1);
    emulator.child.0.kill().unwrap();
    let (status, _, stderr) = host.finish();
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("emulator process died (its socket closed)")
            && stderr.contains(&format!("the device (epoch {epoch}) is gone")),
        "{stderr}"
    );
    // Killed at a moment the test does not choose: before the launch or during it.
    assert!(
        stderr.contains("Lost launches: none (no launch had been submitted)")
            || stderr.contains("Lost launch (submitted, not completed): tag 1, index 0"),
        "{stderr}"
    );
}
