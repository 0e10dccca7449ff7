//! How long a waiter for the turn spins before it sleeps ("Waiting" in the parent module's
//! docs): a budget computed from two measurements, never a guessed constant.
//!
//! - **The wake-up cost** `L`: after each wait that slept, the time from the peer's hand-over
//!   to this side running again ([`Spin::slept`]), a moving average (an eighth of each new
//!   measure).
//! - **Whether spinning takes a core from anyone**: the kernel's CPU pressure
//!   (`/proc/pressure/cpu`, the share of time some runnable task waited for a CPU), sampled
//!   at most every [`SAMPLE_PERIOD`] ([`Spin::refresh`]; before a second sample, the
//!   kernel's own ten-second average). Above [`CONTENDED_SHARE`] the machine is contended.
//!   So it is, too, when at that sample more tasks are runnable than there are CPUs this
//!   process may run on (`/proc/loadavg`, the kernel's count at that instant, which includes
//!   this side and the peer it just handed the turn to): a machine whose every other core
//!   runs someone's build shows little pressure until the two sides compete, and a spinning
//!   waiter there takes the core the peer needs (a 2-core machine with one busy core: the
//!   peer would share a core with the spinner or the build, a third of its time lost while
//!   the waiter spins, where the in-process run loses nothing).
//!
//! On a machine with a core to spare, a spinning waiter costs nothing but power, and a wait
//! that ends asleep costs `L` on top of the wait: spinning for [`UNCONTENDED_FACTOR`] times
//! `L` keeps that cost within a tenth of the wait, for every wait that sleeps (at most
//! [`UNCONTENDED_MAX`]). On a contended machine the spinning core is taken from someone (the
//! peer itself, when the two share a core), so the waiter spins for `L` only, the classic
//! rule that costs at most twice the better of spinning and sleeping, and at most
//! [`CONTENDED_MAX`]: there `L` is mostly the wait for a core, and spinning longer delays the
//! very peer it waits for. Where the kernel reports no CPU pressure the machine is taken as
//! contended.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Least spin budget (a waiter always looks a few times before it sleeps).
pub const MIN_SPIN: Duration = Duration::from_micros(1);
/// The uncontended budget, in wake-up costs.
pub const UNCONTENDED_FACTOR: u64 = 10;
/// Greatest uncontended budget (below the turn's liveness period, so that a waiter still
/// checks its peer every few milliseconds).
pub const UNCONTENDED_MAX: Duration = Duration::from_millis(1);
/// Greatest contended budget.
pub const CONTENDED_MAX: Duration = Duration::from_micros(20);
/// Wake-up cost assumed before the first sleep is measured, where nothing measured it before
/// ([`Spin::seed`]).
pub const FIRST_WAKE_UP: Duration = Duration::from_micros(20);
/// Greatest wake-up cost a [`Spin::seed`] takes (the peer's figure is bounded before use; past
/// this the budget is at its greatest anyway).
pub const MAX_SEED: Duration = Duration::from_secs(1);
/// CPU pressure above which the machine counts as contended.
pub const CONTENDED_SHARE: f64 = 0.1;
/// Least time between two samples of the CPU pressure.
pub const SAMPLE_PERIOD: Duration = Duration::from_millis(100);

/// A reading of the CPU pressure: its ten-second average (a share) and its running total
/// (microseconds during which some task waited for a CPU).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pressure {
    /// `some avg10`, as a share of time (0 to 1).
    pub average: f64,
    /// `some total`, in microseconds.
    pub total_us: u64,
}

/// Reads `/proc/pressure/cpu`; `None` where the kernel does not report it.
pub fn cpu_pressure() -> Option<Pressure> {
    parse_pressure(&std::fs::read_to_string("/proc/pressure/cpu").ok()?)
}

/// The `some` line of a pressure file (`some avg10=1.23 avg60=... total=456`).
pub fn parse_pressure(text: &str) -> Option<Pressure> {
    let line = text.lines().find_map(|line| line.strip_prefix("some "))?;
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|field| field.strip_prefix(name)?.strip_prefix('='))
    };
    Some(Pressure {
        average: field("avg10")?.parse::<f64>().ok()? / 100.0,
        total_us: field("total")?.parse().ok()?,
    })
}

/// One side's spin budget and what it is computed from.
#[derive(Debug)]
pub struct Spin {
    /// The wake-up cost's moving average, in nanoseconds.
    wake_ns: AtomicU64,
    /// Whether the last sample found the machine contended.
    contended: AtomicBool,
    /// When the pressure was last sampled, in nanoseconds since `origin`; `u64::MAX` before
    /// the first sample.
    sampled_at_ns: AtomicU64,
    /// The pressure's running total at that sample (`u64::MAX`: none).
    total_us: AtomicU64,
    origin: Instant,
    /// Where the pressure comes from (`cpu_pressure`, or a test's readings).
    read: fn() -> Option<Pressure>,
    /// Where the count of runnable tasks comes from (`runnable_tasks`, or a test's).
    runnable: fn() -> Option<u64>,
    /// The CPUs this process may run on.
    cpus: u64,
}

/// The kernel's count of runnable tasks at this instant (`/proc/loadavg`, the `R` of its
/// fourth field `R/T`); `None` where it is not reported.
pub fn runnable_tasks() -> Option<u64> {
    parse_runnable(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

/// The runnable count of a `/proc/loadavg` text (`0.50 0.40 0.30 3/120 4567`).
pub fn parse_runnable(text: &str) -> Option<u64> {
    text.split_whitespace()
        .nth(3)?
        .split_once('/')?
        .0
        .parse()
        .ok()
}

/// A reader of the runnable count that never has one (tests that judge by pressure only).
fn unreported_runnable() -> Option<u64> {
    None
}

impl Spin {
    /// A budget fed by the kernel's CPU pressure and runnable count.
    pub fn new() -> Spin {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        Spin::counting(cpu_pressure, runnable_tasks, cpus)
    }

    /// A budget fed by the pressure `read`, the runnable count `runnable` and `cpus` CPUs.
    pub fn counting(
        read: fn() -> Option<Pressure>,
        runnable: fn() -> Option<u64>,
        cpus: u64,
    ) -> Spin {
        Spin {
            runnable,
            cpus,
            ..Spin::reading(read)
        }
    }

    /// A budget fed by the pressure `read` alone.
    pub fn reading(read: fn() -> Option<Pressure>) -> Spin {
        Spin {
            wake_ns: AtomicU64::new(FIRST_WAKE_UP.as_nanos() as u64),
            contended: AtomicBool::new(true),
            sampled_at_ns: AtomicU64::new(u64::MAX),
            total_us: AtomicU64::new(u64::MAX),
            origin: Instant::now(),
            read,
            runnable: unreported_runnable,
            cpus: u64::MAX,
        }
    }

    /// Samples the CPU pressure if the last sample is [`SAMPLE_PERIOD`] old (or there is
    /// none yet).
    pub fn refresh(&self) {
        let now_ns = self.origin.elapsed().as_nanos() as u64;
        let last_ns = self.sampled_at_ns.load(Ordering::Relaxed);
        if last_ns != u64::MAX && now_ns.saturating_sub(last_ns) < SAMPLE_PERIOD.as_nanos() as u64 {
            return;
        }
        self.sampled_at_ns.store(now_ns, Ordering::Relaxed);
        let Some(pressure) = (self.read)() else {
            self.contended.store(true, Ordering::Relaxed);
            return;
        };
        let last_total = self.total_us.swap(pressure.total_us, Ordering::Relaxed);
        let share = if last_ns == u64::MAX || last_total == u64::MAX {
            pressure.average
        } else {
            let waited_us = pressure.total_us.saturating_sub(last_total) as f64;
            let elapsed_us = (now_ns.saturating_sub(last_ns) as f64 / 1e3).max(1.0);
            waited_us / elapsed_us
        };
        let crowded = (self.runnable)().is_some_and(|runnable| runnable > self.cpus);
        self.contended
            .store(share > CONTENDED_SHARE || crowded, Ordering::Relaxed);
    }

    /// A wait slept and woke `wake_ns` nanoseconds after the peer's hand-over: moves the
    /// wake-up cost an eighth of the way towards it.
    pub fn slept(&self, wake_ns: u64) {
        let average = self.wake_ns.load(Ordering::Relaxed);
        let moved = (average - average / 8).saturating_add(wake_ns / 8);
        self.wake_ns.store(moved, Ordering::Relaxed);
    }

    /// Starts the wake-up cost from `wake` (at most [`MAX_SEED`]), a cost measured earlier on
    /// this machine (the emulator's, from its earlier sessions), instead of [`FIRST_WAKE_UP`].
    pub fn seed(&self, wake: Duration) {
        let ns = wake.min(MAX_SEED).as_nanos() as u64;
        self.wake_ns.store(ns, Ordering::Relaxed);
    }

    /// The wake-up cost measured so far.
    pub fn wake_up(&self) -> Duration {
        Duration::from_nanos(self.wake_ns.load(Ordering::Relaxed))
    }

    /// Whether the last sample found the machine contended.
    pub fn contended(&self) -> bool {
        self.contended.load(Ordering::Relaxed)
    }

    /// How long a wait spins before it sleeps.
    pub fn budget(&self) -> Duration {
        let wake = self.wake_up();
        let budget = if self.contended() {
            wake.min(CONTENDED_MAX)
        } else {
            wake.saturating_mul(UNCONTENDED_FACTOR as u32)
                .min(UNCONTENDED_MAX)
        };
        budget.max(MIN_SPIN)
    }
}

impl Default for Spin {
    fn default() -> Spin {
        Spin::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_some_line_of_a_pressure_file_is_read() {
        let text = "some avg10=97.65 avg60=96.57 avg300=96.90 total=18926004382\n\
                    full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(
            parse_pressure(text),
            Some(Pressure {
                average: 0.9765,
                total_us: 18_926_004_382
            })
        );
        assert_eq!(parse_pressure("full avg10=0.00 total=0"), None);
        assert_eq!(parse_pressure("some avg10=x total=1"), None);
    }

    fn idle() -> Option<Pressure> {
        Some(Pressure {
            average: 0.0,
            total_us: 5,
        })
    }

    fn busy() -> Option<Pressure> {
        Some(Pressure {
            average: 0.9,
            total_us: 5,
        })
    }

    fn unreported() -> Option<Pressure> {
        None
    }

    #[test]
    fn an_idle_machine_spins_ten_wake_ups_a_contended_one_one_and_both_within_bounds() {
        let spin = Spin::reading(idle);
        spin.refresh();
        assert!(!spin.contended());
        assert_eq!(spin.budget(), FIRST_WAKE_UP * 10);
        let spin = Spin::reading(busy);
        spin.refresh();
        assert!(spin.contended());
        assert_eq!(spin.budget(), FIRST_WAKE_UP.min(CONTENDED_MAX));
        // Where the kernel does not say, the machine counts as contended.
        let spin = Spin::reading(unreported);
        spin.refresh();
        assert!(spin.contended());
        // Long wake-ups: at most the bounds; no wake-up: at least the least budget.
        let spin = Spin::reading(idle);
        spin.refresh();
        for _ in 0..100 {
            spin.slept(1_000_000_000);
        }
        assert_eq!(spin.budget(), UNCONTENDED_MAX);
        for _ in 0..1000 {
            spin.slept(0);
        }
        assert_eq!(spin.budget(), MIN_SPIN);
    }

    #[test]
    fn more_runnable_tasks_than_cpus_is_contended_even_without_pressure() {
        fn three() -> Option<u64> {
            Some(3)
        }
        fn two() -> Option<u64> {
            Some(2)
        }
        // Two CPUs, the two sides and someone's build runnable: a spinner takes the peer's core.
        let spin = Spin::counting(idle, three, 2);
        spin.refresh();
        assert!(spin.contended());
        assert_eq!(spin.budget(), FIRST_WAKE_UP.min(CONTENDED_MAX));
        // The two sides alone on two CPUs: a core to spare for each.
        let spin = Spin::counting(idle, two, 2);
        spin.refresh();
        assert!(!spin.contended());
        // No count reported: the pressure decides alone.
        let spin = Spin::counting(idle, unreported_runnable, 2);
        spin.refresh();
        assert!(!spin.contended());
        assert_eq!(parse_runnable("0.50 0.40 0.30 3/120 4567\n"), Some(3));
        assert_eq!(parse_runnable("0.50 0.40 0.30"), None);
        assert!(runnable_tasks().is_some_and(|runnable| runnable >= 1));
    }

    #[test]
    fn the_wake_up_cost_moves_an_eighth_of_the_way_to_each_measure() {
        let spin = Spin::reading(idle);
        let first = FIRST_WAKE_UP.as_nanos() as u64;
        spin.slept(first + 8_000);
        assert_eq!(spin.wake_up(), Duration::from_nanos(first + 1_000));
    }

    #[test]
    fn a_second_sample_judges_by_the_pressure_since_the_first() {
        // The ten-second average says busy; the running total did not move since: idle.
        fn still() -> Option<Pressure> {
            Some(Pressure {
                average: 0.9,
                total_us: 1_000,
            })
        }
        let spin = Spin::reading(still);
        spin.refresh();
        assert!(spin.contended());
        // Within the sample period nothing is read again.
        spin.refresh();
        assert!(spin.contended());
        std::thread::sleep(SAMPLE_PERIOD + Duration::from_millis(5));
        spin.refresh();
        assert!(!spin.contended());
    }
}
