//! Recovery of the device for attached tenant groups (docs/emulator-process.md, "Recovery";
//! docs/tenants.md): an emulator process serving a group dies mid-run (`axle emu
//! --die-after-hand-overs K`, hidden: SIGKILL at a point of the run that does not depend on
//! timing); with `--reattach`, every tenant reports the launch it lost, waits for an emulator
//! started again on the same socket, the group gathers again there and reruns from the
//! start, and each tenant prints exactly what an uninterrupted run prints; a tenant whose
//! peer gave up is refused at the restarted emulator's `--group-timeout` and says so; an
//! emulator serving fewer tenants than the group has refuses it, naming both.
//!
//! Every wait is bounded by a wall-clock deadline; no assertion is about time.
//!
//! Run: `cargo test --release --test recovery_groups`.

use std::process::Output;
use std::time::{Duration, Instant};

mod common;
use common::{finish_axle, spawn_axle, EmulatorProcess, Reaped, Scratch};

const AXLE: &str = env!("CARGO_BIN_EXE_axle");
/// Bound on any single wait for a process or a log line.
const DEADLINE: Duration = Duration::from_secs(90);
/// The group's workloads: SSSP (ten launches) and KNN, at small scale in RP mode.
const GROUP: [&str; 2] = ["sssp", "knn-a"];
/// Every run's options.
const OPTIONS: [&str; 5] = ["--mode", "rp", "--scale", "small", "--json"];
/// The emulator dies instead of handing a tenant its turn for the 31st time: mid-run.
const DIE_AFTER: &str = "30";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

/// Waits for a started `axle` (bounded by [`DEADLINE`]) and collects its output.
fn finish(child: Reaped) -> Output {
    finish_axle(child, DEADLINE, &"run")
}

/// `axle run-many` of [`GROUP`] with `extra`.
fn run_many(extra: &[&str]) -> Vec<String> {
    let mut args = vec!["run-many"];
    args.extend(GROUP);
    args.extend(OPTIONS);
    args.extend(extra);
    strings(&args)
}

/// `axle run` of tenant `index` of the group `name` of [`GROUP`], with `extra`.
fn tenant(index: usize, name: &str, socket: &std::path::Path, extra: &[&str]) -> Vec<String> {
    let mut args = strings(&["run", GROUP[index]]);
    args.extend(strings(&OPTIONS));
    args.extend(strings(&["--attach", socket.to_str().unwrap()]));
    args.extend(strings(&[
        "--tenant",
        &format!("{index}/{}", GROUP.len()),
        "--group",
        name,
    ]));
    args.extend(strings(extra));
    args
}

/// An emulator for a group of [`GROUP`]'s size that kills itself after [`DIE_AFTER`]
/// hand-overs.
fn dying_emulator(scratch: &Scratch) -> EmulatorProcess {
    EmulatorProcess::start_with(
        AXLE,
        scratch,
        &["--max-tenants", "2", "--die-after-hand-overs", DIE_AFTER],
        DEADLINE,
    )
}

/// Waits for the dying emulator to die.
fn died(mut emulator: EmulatorProcess) {
    emulator
        .child
        .wait_for_exit(DEADLINE)
        .expect("the emulator did not die");
}

/// The descriptors the emulator process holds.
fn descriptors(emulator: &EmulatorProcess) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", emulator.child.pid()))
        .map(|entries| entries.count())
        .unwrap_or(usize::MAX)
}

/// Each tenant's report of what it lost: tenant `index`'s line names it, the device gone,
/// and its lost launch (or none) and completed count.
fn each_tenant_reported_its_loss(stderr: &str, group_prefix: &str) {
    for (index, workload) in GROUP.iter().enumerate() {
        let who = format!("tenant {index} of group {group_prefix}");
        let line = stderr
            .lines()
            .find(|line| line.contains(&who) && line.contains("emulator process died"))
            .unwrap_or_else(|| panic!("tenant {index} reported no loss: {stderr}"));
        assert!(line.contains(&format!("({workload} in mode rp)")), "{line}");
        assert!(line.contains("is gone with its memory"), "{line}");
        assert!(
            (line.contains("Lost launch (submitted, not completed): tag ")
                && line.contains(", kernel "))
                || line.contains("Lost launches: none"),
            "{line}"
        );
        assert!(
            line.contains("had completed") || line.contains("no launch had been submitted"),
            "{line}"
        );
    }
}

#[test]
fn a_run_many_group_killed_mid_run_reattaches_and_prints_the_uninterrupted_json() {
    let uninterrupted = finish(spawn_axle(&run_many(&[])));
    assert!(
        uninterrupted.status.success(),
        "{}",
        text(&uninterrupted.stderr)
    );
    let scratch = Scratch::new("recg", "many");
    let first = dying_emulator(&scratch);
    let socket = first.socket.to_str().unwrap().to_owned();
    let host = spawn_axle(&run_many(&["--attach", &socket, "--reattach"]));
    died(first);
    let second = EmulatorProcess::start_with(AXLE, &scratch, &["--max-tenants", "2"], DEADLINE);
    // What an emulator holds idle: one started alike that serves nobody (the restarted one may
    // have accepted the waiting tenants by the time it could be looked at).
    let idle = {
        let reference_scratch = Scratch::new("recg", "idle");
        let reference = EmulatorProcess::start_with(
            AXLE,
            &reference_scratch,
            &["--max-tenants", "2"],
            DEADLINE,
        );
        descriptors(&reference)
    };
    let output = finish(host);
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        text(&output.stdout),
        text(&uninterrupted.stdout),
        "the rerun group's JSON differs from the uninterrupted run's; its stderr: {stderr}"
    );
    each_tenant_reported_its_loss(&stderr, "run-many-");
    // The SSSP tenant loses a launch mid-run: its third, at this crash point.
    assert!(
        stderr.contains("tenant 0 of group run-many-")
            && stderr.contains("kernel SsspRelax")
            && stderr.contains("2 launches had completed"),
        "{stderr}"
    );
    assert_eq!(
        stderr
            .matches(
                "gathered again there (its 2 tenants; turns in tenant order); rerunning tenant "
            )
            .count(),
        2,
        "{stderr}"
    );
    // The group's run and the runs alone, on the restarted emulator; then it holds no more
    // descriptors than when it started (it frees a group on its reaper thread: bounded wait).
    second.wait_for_log("tenants detached after their run", 1);
    second.wait_for_log("detached after its run", GROUP.len());
    let started = Instant::now();
    while descriptors(&second) > idle {
        assert!(
            started.elapsed() < DEADLINE,
            "the restarted emulator holds {} descriptors, {idle} when idle; its log:\n{}",
            descriptors(&second),
            second.log()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn tenant_processes_reattach_regather_and_each_prints_its_part_of_the_uninterrupted_run() {
    let uninterrupted = finish(spawn_axle(&run_many(&["--no-alone"])));
    assert!(
        uninterrupted.status.success(),
        "{}",
        text(&uninterrupted.stderr)
    );
    let in_process: serde_json::Value = serde_json::from_slice(&uninterrupted.stdout).unwrap();
    let scratch = Scratch::new("recg", "processes");
    let first = dying_emulator(&scratch);
    let socket = first.socket.clone();
    let hosts: Vec<Reaped> = (0..GROUP.len())
        .map(|index| spawn_axle(&tenant(index, "again", &socket, &["--reattach"])))
        .collect();
    died(first);
    let second = EmulatorProcess::start_with(AXLE, &scratch, &["--max-tenants", "2"], DEADLINE);
    for (index, host) in hosts.into_iter().enumerate() {
        let output = finish(host);
        let stderr = text(&output.stderr);
        assert!(output.status.success(), "tenant {index}: {stderr}");
        let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(
            printed, in_process["tenants"][index]["shared"],
            "tenant {index}'s rerun report differs from the uninterrupted run's; {stderr}"
        );
        assert!(
            stderr.contains(&format!("axle run: tenant {index} of group again (")),
            "{stderr}"
        );
        assert!(stderr.contains("a new device (epoch 0x"), "{stderr}");
        assert!(
            stderr.contains("group again gathered again there (its 2 tenants"),
            "{stderr}"
        );
    }
    second.wait_for_log("group again: 2 tenants detached after their run", 1);
}

#[test]
fn a_tenant_whose_peer_gave_up_is_refused_at_the_group_timeout_not_left_hanging() {
    let scratch = Scratch::new("recg", "peer");
    let first = dying_emulator(&scratch);
    let socket = first.socket.clone();
    // Tenant 0 reattaches; tenant 1 does not, and gives up when the device is lost.
    let patient = spawn_axle(&tenant(0, "alone", &socket, &["--reattach"]));
    let quitter = spawn_axle(&tenant(1, "alone", &socket, &[]));
    died(first);
    let quit = finish(quitter);
    assert_eq!(quit.status.code(), Some(2), "{}", text(&quit.stderr));
    assert!(
        text(&quit.stderr).contains("emulator process died"),
        "{}",
        text(&quit.stderr)
    );
    let second = EmulatorProcess::start_with(
        AXLE,
        &scratch,
        &["--max-tenants", "2", "--group-timeout", "1"],
        DEADLINE,
    );
    let output = finish(patient);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(output.stdout.is_empty(), "{}", text(&output.stdout));
    assert!(
        stderr.contains("tenant 0 of group alone (sssp in mode rp): the emulator on")
            && stderr.contains("refused the reattach: group alone: 1 of 2 tenants attached within 1 s (axle emu --group-timeout); tenants 1 never came")
            && stderr.contains("the run is lost: Lost launch"),
        "{stderr}"
    );
    second.wait_for_log("tenants 1 never came", 1);
}

#[test]
fn a_restarted_emulator_serving_fewer_tenants_than_the_group_refuses_it_naming_both() {
    let scratch = Scratch::new("recg", "fewer");
    let first = dying_emulator(&scratch);
    let socket = first.socket.to_str().unwrap().to_owned();
    let host = spawn_axle(&run_many(&[
        "--attach",
        &socket,
        "--reattach",
        "--no-alone",
    ]));
    died(first);
    let _second = EmulatorProcess::start_with(AXLE, &scratch, &["--max-tenants", "1"], DEADLINE);
    let output = finish(host);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(output.stdout.is_empty(), "{}", text(&output.stdout));
    assert!(
        stderr.contains("refused the reattach: a group of 2 tenants: this emulator serves groups of 1 to 1 (axle emu --max-tenants"),
        "{stderr}"
    );
    each_tenant_reported_its_loss(&stderr, "run-many-");
}

#[test]
fn reattach_for_run_many_needs_attach() {
    let output = finish(spawn_axle(&run_many(&["--reattach"])));
    assert!(!output.status.success());
    assert!(
        text(&output.stderr).contains("--attach"),
        "{}",
        text(&output.stderr)
    );
}
