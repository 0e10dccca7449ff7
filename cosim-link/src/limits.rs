//! Bounds on every size that comes from outside: a host's messages, a configuration file, a
//! command-line flag, a data file.
//!
//! This is the one place where such a size is checked **before** anything is allocated for it.
//! A size is refused with a [`Refused`] that names the value, the limit and why the limit is
//! what it is; the caller adds where the value came from (the flag, the file, the message).
//!
//! Two kinds of limit:
//!
//! - **the machine's**: [`Machine::memory_budget`] (the memory one allocation may take: what
//!   the kernel reported available when the process first asked, `MemAvailable` of
//!   `/proc/meminfo`, so an allocation that passes would not push the machine into swap or the
//!   OOM killer) and [`Machine::open_files`] (the soft `RLIMIT_NOFILE`);
//! - **the model's own**, constants of the crates that own them (e.g.
//!   `shared_abi::MAX_SG_ENTRIES`, `emulator::config::MAX_UTHREADS`), checked with [`check`].
//!
//! Every `vec![x; n]`, `Vec::with_capacity(n)` or `reserve(n)` on an `n` from outside goes
//! through [`vec_filled`], [`vec_with_capacity`] or [`bytes`], or carries a comment that says
//! why `n` is already bounded.

use std::sync::OnceLock;

/// A size refused before anything was allocated for it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what} is {value}, more than the limit of {limit} ({reason})")]
pub struct Refused {
    /// What the value is ("--slots", "the graph's vertex count", "a CXL.mem load's length").
    pub what: String,
    /// The value refused.
    pub value: u64,
    /// The largest value accepted.
    pub limit: u64,
    /// Why the limit is what it is.
    pub reason: String,
}

/// A configuration value the model cannot run with. Each names the field, the value and the
/// rule it breaks.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A count or rate that must be at least 1 is 0.
    #[error("{field} is 0; it must be at least 1")]
    Zero {
        /// The field (`host.host_units`).
        field: String,
    },
    /// A rate that must be a positive finite number is not.
    #[error("{field} is {value}; it must be a positive number")]
    NotPositive {
        /// The field.
        field: String,
        /// Its value.
        value: f64,
    },
    /// A value outside the range the model accepts.
    #[error("{field} is {value}; {rule}")]
    OutOfRange {
        /// The field.
        field: String,
        /// Its value.
        value: u64,
        /// The range and why.
        rule: String,
    },
    /// A size above a limit of the model or the machine.
    #[error(transparent)]
    Refused(#[from] Refused),
}

/// `value` unless it exceeds `limit`.
pub fn check(what: &str, value: u64, limit: u64, reason: &str) -> Result<u64, Refused> {
    if value > limit {
        return Err(Refused {
            what: what.to_owned(),
            value,
            limit,
            reason: reason.to_owned(),
        });
    }
    Ok(value)
}

/// What this machine allows a process, read once (the first call) and kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Machine {
    /// Bytes of memory one allocation may take.
    pub memory_budget: u64,
    /// Descriptors the process may hold at once (the soft `RLIMIT_NOFILE`).
    pub open_files: u64,
}

/// Used when `/proc/meminfo` cannot be read (not Linux, or no procfs): 4 GiB.
const FALLBACK_MEMORY: u64 = 4 << 30;

/// Used when the descriptor limit cannot be read: the usual soft default of Linux.
const FALLBACK_OPEN_FILES: u64 = 1024;

impl Machine {
    /// This machine's limits.
    pub fn get() -> Machine {
        static MACHINE: OnceLock<Machine> = OnceLock::new();
        *MACHINE.get_or_init(|| Machine {
            memory_budget: available_memory().unwrap_or(FALLBACK_MEMORY),
            open_files: open_files().unwrap_or(FALLBACK_OPEN_FILES),
        })
    }
}

/// `MemAvailable` of `/proc/meminfo`, in bytes.
fn available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    meminfo_field(&meminfo, "MemAvailable:")
}

/// The value of `field` (a `kB` line of `/proc/meminfo`) in bytes.
fn meminfo_field(meminfo: &str, field: &str) -> Option<u64> {
    let line = meminfo.lines().find(|line| line.starts_with(field))?;
    let kib: u64 = line
        .get(field.len()..)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// The soft descriptor limit, from `/proc/self/limits` ("Max open files  <soft>  <hard>  files").
fn open_files() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))?;
    let soft = line
        .get("Max open files".len()..)?
        .split_whitespace()
        .next()?;
    if soft == "unlimited" {
        return Some(u64::MAX);
    }
    soft.parse().ok()
}

/// `count` elements of `element_bytes` each as a byte count, if the machine's memory budget
/// allows it; the count as a `usize` for the allocation.
pub fn bytes(what: &str, count: u64, element_bytes: u64) -> Result<usize, Refused> {
    let budget = Machine::get().memory_budget;
    let total = count.saturating_mul(element_bytes.max(1));
    if total > budget {
        return Err(Refused {
            what: what.to_owned(),
            value: count,
            limit: budget / element_bytes.max(1),
            reason: format!(
                "{} bytes each; this machine has {} MiB of memory available",
                element_bytes,
                budget >> 20
            ),
        });
    }
    // Within the budget, so within the address space.
    usize::try_from(count).map_err(|_| Refused {
        what: what.to_owned(),
        value: count,
        limit: usize::MAX as u64,
        reason: "the address space".to_owned(),
    })
}

/// `vec![value; count]`, if the machine's memory budget allows it.
pub fn vec_filled<T: Clone>(what: &str, count: u64, value: T) -> Result<Vec<T>, Refused> {
    let count = bytes(what, count, std::mem::size_of::<T>() as u64)?;
    Ok(vec![value; count])
}

/// `Vec::with_capacity(count)`, if the machine's memory budget allows it.
pub fn vec_with_capacity<T>(what: &str, count: u64) -> Result<Vec<T>, Refused> {
    let count = bytes(what, count, std::mem::size_of::<T>() as u64)?;
    Ok(Vec::with_capacity(count))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_names_the_value_the_limit_and_the_reason() {
        assert_eq!(check("--slots", 10, 10, "ring"), Ok(10));
        let refused = check("--slots", 11, 10, "the ring's index space").unwrap_err();
        let message = refused.to_string();
        assert!(
            message.contains("--slots")
                && message.contains("11")
                && message.contains("10")
                && message.contains("index space"),
            "{message}"
        );
    }

    #[test]
    fn an_allocation_beyond_the_machine_is_refused_before_it_is_made() {
        // 2^50 bytes is more than any machine this runs on has available.
        let refused = vec_filled::<u8>("a CXL.mem load's length", 1 << 50, 0).unwrap_err();
        assert_eq!(refused.value, 1 << 50);
        assert!(refused.limit < 1 << 50);
        assert!(refused.to_string().contains("available"), "{refused}");
        // Counts multiply by the element size: 2^47 u64s are 2^50 bytes.
        assert!(vec_with_capacity::<u64>("words", 1 << 47).is_err());
        // A small one passes.
        assert_eq!(vec_filled("bytes", 16, 7u8).unwrap(), vec![7u8; 16]);
    }

    #[test]
    fn the_machine_reports_memory_and_descriptors() {
        let machine = Machine::get();
        assert!(machine.memory_budget > 0);
        assert!(machine.open_files >= 3);
        assert_eq!(
            meminfo_field(
                "MemTotal: 10 kB\nMemAvailable:    2048 kB\n",
                "MemAvailable:"
            ),
            Some(2 << 20)
        );
        assert_eq!(meminfo_field("MemTotal: 10 kB\n", "MemAvailable:"), None);
    }
}
