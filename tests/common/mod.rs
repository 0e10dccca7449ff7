//! Helpers shared by the integration tests that start processes (`multiprocess.rs`,
//! `hostile.rs`, `recovery.rs`, `recovery_groups.rs`, `tenants_attached.rs`,
//! `wall_stress.rs`): a scratch
//! directory per test, a child process that is always reaped, `axle` started with its output
//! collected, and an `axle emu` process with its log.
//! Each test file uses what it needs.
#![allow(dead_code, reason = "each test file uses a part of the helpers")]

use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A fresh directory for one test's socket and logs; removed at the end.
pub struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    /// `<temp>/axle-<prefix>-<pid>-<n>-<test>`, created.
    pub fn new(prefix: &str, test: &str) -> Scratch {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "axle-{prefix}-{}-{}-{test}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch { dir }
    }

    /// The emulator's socket in the directory.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("emu.sock")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A child process that is killed (SIGKILL) and reaped when dropped.
pub struct Reaped(pub Child);

impl Reaped {
    pub fn pid(&self) -> i32 {
        self.0.id() as i32
    }

    /// Waits for the process to exit, at most `limit`.
    pub fn wait_for_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let started = Instant::now();
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return Some(status);
            }
            if started.elapsed() > limit {
                return None;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), signal).unwrap();
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `axle` with `args`: standard output and error piped, `RUST_LOG` unset.
pub fn spawn_axle<S: AsRef<OsStr>>(args: &[S]) -> Reaped {
    Reaped(
        Command::new(env!("CARGO_BIN_EXE_axle"))
            .args(args)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// Waits for an `axle` started by [`spawn_axle`], at most `deadline` (the test fails naming
/// `what` past it), and collects its status and output.
pub fn finish_axle(mut child: Reaped, deadline: Duration, what: &dyn std::fmt::Debug) -> Output {
    child
        .wait_for_exit(deadline)
        .unwrap_or_else(|| panic!("axle {what:?} did not finish within {deadline:?}"));
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    child
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut stderr)
        .unwrap();
    Output {
        status: child.0.wait().unwrap(),
        stdout,
        stderr,
    }
}

/// `axle run WORKLOAD --mode axle --scale small --json --attach SOCKET --tenant I/N --group
/// GROUP`: the arguments of tenant `tenant` (I) of the group `group` of attached processes
/// that run `workloads` (N of them), tenant I running `workloads[I]`.
pub fn tenant_args(workloads: &[&str], tenant: usize, socket: &str, group: &str) -> Vec<String> {
    [
        "run",
        workloads[tenant],
        "--mode",
        "axle",
        "--scale",
        "small",
        "--json",
        "--attach",
        socket,
        "--tenant",
        &format!("{tenant}/{}", workloads.len()),
        "--group",
        group,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// `axle emu` on a scratch directory's socket, logging into `emu.log`; killed when dropped.
/// Each test file adds the methods it needs in its own `impl` block.
pub struct EmulatorProcess {
    pub child: Reaped,
    pub log: PathBuf,
    pub socket: PathBuf,
    /// Bound on each wait for a log line.
    pub deadline: Duration,
}

impl EmulatorProcess {
    /// Starts `axle` (the binary `axle`) as `axle emu --socket <scratch>/emu.sock EXTRA...` and
    /// waits until it serves.
    pub fn start_with(
        axle: &str,
        scratch: &Scratch,
        extra: &[&str],
        deadline: Duration,
    ) -> EmulatorProcess {
        let socket = scratch.socket();
        let log = scratch.dir.join("emu.log");
        let child = Command::new(axle)
            .args(["emu", "--socket"])
            .arg(&socket)
            .args(extra)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let emulator = EmulatorProcess {
            child: Reaped(child),
            log,
            socket,
            deadline,
        };
        emulator.wait_for_log("serving on", 1);
        emulator
    }

    /// The emulator's log so far.
    pub fn log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = File::open(&self.log) {
            let _ = file.read_to_string(&mut text);
        }
        text
    }

    /// Waits until the log holds `pattern` at least `count` times.
    pub fn wait_for_log(&self, pattern: &str, count: usize) {
        let started = Instant::now();
        while self.log().matches(pattern).count() < count {
            assert!(
                started.elapsed() < self.deadline,
                "the emulator never logged `{pattern}` {count} times; its log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}
