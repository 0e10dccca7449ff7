//! Helpers shared by the integration tests that start processes (`multiprocess.rs`,
//! `hostile.rs`): a scratch directory per test and a child process that is always reaped.
//! Each test file uses what it needs.
#![allow(dead_code, reason = "each test file uses a part of the helpers")]

use std::path::PathBuf;
use std::process::{Child, ExitStatus};
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
