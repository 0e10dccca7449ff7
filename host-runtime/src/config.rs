//! The host's parameters (the host and AXLE rows of the paper's Table III).

use cosim_link::limits::{self, ConfigError};
use serde::{Deserialize, Serialize};

/// Most host µthreads (`host_units` x `host_uthreads`) a configuration may ask for: 65,536,
/// a thousand times the paper's 64 (Table III: 32 units x 2). The runtime keeps a task queue
/// and a busy flag per worker and scans the workers in index order at each task start
/// (`crate::sched::Scheduler`), so memory and the cost of a start grow with the count; a
/// host of more µthreads than this is not a machine the model describes.
pub const MAX_HOST_UTHREADS: u64 = 1 << 16;

/// How host tasks are handed to host µthreads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostScheduling {
    /// Round-robin (paper Section V-E): one queue of the launch's tasks in offset order; a
    /// free worker takes the first ready task from the queue's front on, and the tasks it
    /// passed over (not ready) go to the back (`crate::sched`).
    Rr,
    /// FIFO (paper Section V-E): tasks run in offset order; a free worker takes the front
    /// task once it is ready, and nothing else meanwhile.
    Fifo,
}

/// How the AXLE poller chooses its interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PollPolicy {
    /// Every `poll_interval_ns`, as the paper does (p1, p10, p100).
    #[default]
    Fixed,
    /// Between `poll_interval_ns` and `adaptive_poll_longest_ns`, following the arrival of
    /// records and the host's backlog (`crate::adaptive_poll`). Not in the paper.
    Adaptive,
    /// A study, not a schedule a host can run (`axle run --poll oracle`): polls exactly at
    /// times given before the run ([`crate::Runtime::set_poll_script`]), which the `axle`
    /// binary learns from a first run of the same configuration at `poll_interval_ns`: the
    /// polls of that run that found records, so it never polls in vain and sees each record
    /// as that run did. It measures what knowing when records arrive is worth
    /// (docs/beyond.md). Without a script, or once it is spent while
    /// results are still due, it polls every `poll_interval_ns`.
    Oracle,
}

/// Host parameters. Times in nanoseconds, frequencies in megahertz, bandwidths in GB/s.
///
/// Each field's doc comment names the source of its default: the paper (Table III, section
/// IV or V), M²NDP, a datasheet, a measurement, or our assumption where none of these gives
/// a value (and why that value).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(default, deny_unknown_fields)]
pub struct HostConfig {
    /// Host processing units. Paper, Table III: 32.
    pub host_units: u32,
    /// µthreads per unit (hyper-threads). Paper, Table III: 2. One µthread of the machine is
    /// the control thread (launch, input stores, polling, result loads, flow control); the
    /// others run host tasks.
    pub host_uthreads: u32,
    /// Host clock. Paper, Table III: 3 GHz.
    pub host_mhz: u64,
    /// Instructions per cycle of one host µthread. Our assumption (the paper gives no host
    /// IPC): the paper models the host like M²NDP's units, with 2 µthreads per processing unit
    /// (Table III's caption); we give each unit one issue slot per cycle, shared evenly, 0.5
    /// per µthread.
    pub host_ipc: f64,
    /// Host memory bandwidth, shared evenly by the µthreads. Paper, Table III: DDR5-4800 x 16
    /// channels; 4800 MT/s x 8 bytes per 64-bit channel (JEDEC DDR5 peak) x 16 = 614.4 GB/s.
    pub host_memory_gbps: f64,
    /// Latency of one uncached load from the pinned DMA region (the region bypasses the host
    /// cache, paper sections IV-C and IV-D, so every load goes to host DRAM): a poll (or an
    /// interrupt handler) of the metadata tail costs one; a task's read of its records and
    /// payload slots costs one plus their bytes at the µthread's share of host memory
    /// bandwidth (streaming loads of the uncached, write-combining region). Our assumption
    /// (neither the paper nor M²NDP gives a host memory latency): 80 ns, the order of an idle
    /// local DRAM access on a server CPU; not measured here (user space cannot map memory
    /// uncached on the development machine).
    pub uncached_load_ns: u64,
    /// Cost to the issuing µthread of one posted store (flow control, launch, doorbell,
    /// dequeue). Our assumption, not measured (the paper and M²NDP give none): a posted store
    /// does not wait for the link, so the core only pays for issuing it, 10 ns (30 cycles at
    /// 3 GHz).
    pub posted_store_ns: u64,
    /// Rate at which the control thread streams a launch's inputs into device memory with
    /// posted (write-combining) CXL.mem stores, before the link's own bandwidth limit. Our
    /// assumption, not measured (the paper and M²NDP give none): 32 GB/s, half the link's
    /// 64 GB/s per direction, so that one core, not the link, bounds the stores.
    pub input_store_gbps: f64,
    /// Lines of CXL.mem loads one core keeps in flight when loading results (RP, BS). Our
    /// assumption, not measured (the paper and M²NDP give none): 10, the order of a core's
    /// line-fill buffers, which bound its outstanding cache-line misses.
    pub load_outstanding: u32,
    /// Cost to the control thread of pushing one batch of records (an index range) into the
    /// ready pool. Measured: an uncontended push of an index range into the ready pool's
    /// queue (`crossbeam_queue::ArrayQueue`) took 5.7 ns on the development machine (one AMD
    /// EPYC core, median of 200 runs of 20,000 pushes); the default, 5 ns, is of that order.
    pub ready_pool_push_ns: u64,
    /// Task dispatch overhead per host task. Our assumption, not measured (the paper and M²NDP
    /// give none): 20 ns, 60 cycles at 3 GHz to take a task from the scheduler and call it.
    pub task_dispatch_ns: u64,
    /// Host scheduling policy. Paper, Table III: round-robin.
    pub scheduling: HostScheduling,
    /// RP: remote polling interval. Paper, Table III: 1 µs.
    pub remote_poll_interval_ns: u64,
    /// AXLE: local polling interval. Paper, Table III and Figure 10: p1 = 50 ns (the
    /// default), p10 = 500 ns, p100 = 5000 ns.
    pub poll_interval_ns: u64,
    /// AXLE: how the polling interval is chosen: "fixed" (every `poll_interval_ns`, the
    /// paper's behaviour and the default) or "adaptive" (between `poll_interval_ns` and
    /// `adaptive_poll_longest_ns`, following the records' arrival; ours, not the paper's:
    /// `axle run --poll adaptive`), or "oracle" (a study: polls at times learned from an
    /// earlier run, `axle run --poll oracle`).
    pub poll_policy: PollPolicy,
    /// AXLE, adaptive polling: the longest interval it backs off to. Default 5000 ns, the
    /// paper's p100, the interval it recommends for host core efficiency (section V). Must be
    /// at least `poll_interval_ns`.
    pub adaptive_poll_longest_ns: u64,
    /// AXLE and AXLE_Interrupt: streaming that cannot deadlock (`axle run --no-deadlock`; ours,
    /// not the paper's, default off: the paper's behaviour). When the ring is full of slots
    /// that tasks waiting for more results hold and no task runs, the host copies the records
    /// and payloads it holds into private memory and frees their slots (host core stall;
    /// `host_runtime::overflow`). Works with any ring of at least one slot. Written to a
    /// configuration only when on.
    #[serde(skip_serializing_if = "is_false")]
    pub no_deadlock: bool,
    /// AXLE and AXLE_Interrupt: no progress for this long (no record, no task) while work is
    /// outstanding is a deadlock (ring full) or a stall. Not a model constant: a watchdog
    /// that ends a run that cannot finish; it
    /// changes no figure of a run that does. Must be positive (0 would call every wait for
    /// the device a deadlock).
    pub stall_timeout_ns: u64,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            host_units: 32,
            host_uthreads: 2,
            host_mhz: 3000,
            host_ipc: 0.5,
            host_memory_gbps: 614.4,
            uncached_load_ns: 80,
            posted_store_ns: 10,
            input_store_gbps: 32.0,
            load_outstanding: 10,
            ready_pool_push_ns: 5,
            task_dispatch_ns: 20,
            scheduling: HostScheduling::Rr,
            remote_poll_interval_ns: 1000,
            poll_interval_ns: 50,
            poll_policy: PollPolicy::Fixed,
            adaptive_poll_longest_ns: 5000,
            no_deadlock: false,
            stall_timeout_ns: 20_000_000,
        }
    }
}

/// Whether a flag is off (an option written to a configuration only when on).
fn is_false(flag: &bool) -> bool {
    !*flag
}

impl HostConfig {
    /// Checks every parameter for a value the model cannot run with. Each error names the
    /// field (`host.<name>`), the value and the limit.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (name, value) in [
            ("host_units", u64::from(self.host_units)),
            ("host_uthreads", u64::from(self.host_uthreads)),
            ("host_mhz", self.host_mhz),
            ("load_outstanding", u64::from(self.load_outstanding)),
            ("poll_interval_ns", self.poll_interval_ns),
            ("remote_poll_interval_ns", self.remote_poll_interval_ns),
            ("stall_timeout_ns", self.stall_timeout_ns),
        ] {
            if value == 0 {
                return Err(ConfigError::Zero {
                    field: format!("host.{name}"),
                });
            }
        }
        if self.adaptive_poll_longest_ns < self.poll_interval_ns {
            return Err(ConfigError::OutOfRange {
                field: "host.adaptive_poll_longest_ns".into(),
                value: self.adaptive_poll_longest_ns,
                rule: format!(
                    "it must be at least host.poll_interval_ns ({} ns), the shortest interval",
                    self.poll_interval_ns
                ),
            });
        }
        let uthreads = self.uthreads();
        if uthreads < 2 {
            return Err(ConfigError::OutOfRange {
                field: "host.host_units x host.host_uthreads".into(),
                value: uthreads,
                rule: "the host needs at least two µthreads (a control thread and a worker)".into(),
            });
        }
        limits::check(
            "host.host_units x host.host_uthreads",
            uthreads,
            MAX_HOST_UTHREADS,
            "the host µthreads the model keeps a queue for and scans at each task start",
        )?;
        for (name, value) in [
            ("host_ipc", self.host_ipc),
            ("host_memory_gbps", self.host_memory_gbps),
            ("input_store_gbps", self.input_store_gbps),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(ConfigError::NotPositive {
                    field: format!("host.{name}"),
                    value,
                });
            }
        }
        Ok(())
    }

    /// Host µthreads: `host_units` x `host_uthreads`, in `u64` (never wraps; at most
    /// [`MAX_HOST_UTHREADS`] in a validated configuration). The one place the product is
    /// taken: the workers and the cost model's bandwidth share both come from it.
    pub fn uthreads(&self) -> u64 {
        u64::from(self.host_units) * u64::from(self.host_uthreads)
    }

    /// Host µthreads that run tasks: every µthread but the control thread (at least 1;
    /// saturating at `u32::MAX` for a configuration that did not pass [`HostConfig::validate`]).
    pub fn workers(&self) -> u32 {
        u32::try_from(self.uthreads().saturating_sub(1))
            .unwrap_or(u32::MAX)
            .max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(change: impl FnOnce(&mut HostConfig)) -> HostConfig {
        let mut config = HostConfig::default();
        change(&mut config);
        config
    }

    #[test]
    fn the_default_configuration_is_valid() {
        assert_eq!(HostConfig::default().validate(), Ok(()));
        assert_eq!(HostConfig::default().workers(), 63);
    }

    #[test]
    fn units_times_uthreads_never_wraps_to_one_worker() {
        // 2^31 x 2 = 2^32 wrapped to 0 in u32, and the run got one worker.
        let config = with(|c| {
            c.host_units = 1 << 31;
            c.host_uthreads = 2;
        });
        assert_eq!(config.uthreads(), 1 << 32);
        assert_eq!(config.workers(), u32::MAX);
        let error = config.validate().unwrap_err().to_string();
        assert!(
            error.contains("host_units x host.host_uthreads")
                && error.contains("4294967296")
                && error.contains(&MAX_HOST_UTHREADS.to_string()),
            "{error}"
        );
    }

    #[test]
    fn the_largest_host_is_accepted_and_one_more_unit_is_not() {
        let largest = with(|c| {
            c.host_units = (MAX_HOST_UTHREADS / 2) as u32;
            c.host_uthreads = 2;
        });
        assert_eq!(largest.validate(), Ok(()));
        let beyond = with(|c| {
            c.host_units = (MAX_HOST_UTHREADS / 2) as u32 + 1;
            c.host_uthreads = 2;
        });
        assert!(beyond.validate().is_err());
    }

    #[test]
    fn a_zero_stall_timeout_is_refused_naming_the_field() {
        let error = with(|c| c.stall_timeout_ns = 0).validate().unwrap_err();
        assert_eq!(
            error,
            ConfigError::Zero {
                field: "host.stall_timeout_ns".into()
            }
        );
        let error = error.to_string();
        assert!(error.contains("host.stall_timeout_ns is 0"), "{error}");
    }

    #[test]
    fn the_adaptive_longest_interval_may_not_be_shorter_than_the_shortest() {
        let error = with(|c| {
            c.poll_interval_ns = 500;
            c.adaptive_poll_longest_ns = 499;
        })
        .validate()
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("host.adaptive_poll_longest_ns")
                && error.contains("499")
                && error.contains("500 ns"),
            "{error}"
        );
        let equal = with(|c| c.adaptive_poll_longest_ns = c.poll_interval_ns);
        assert_eq!(equal.validate(), Ok(()));
    }

    #[test]
    fn rates_must_be_positive_finite_numbers() {
        for value in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let error = with(|c| c.host_ipc = value)
                .validate()
                .unwrap_err()
                .to_string();
            assert!(error.contains("host.host_ipc"), "{error}");
        }
    }
}
