//! The host's parameters (the host and AXLE rows of the paper's Table III).

use serde::{Deserialize, Serialize};

/// How host tasks are handed to host µthreads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostScheduling {
    /// Round-robin: task `i` belongs to worker `i mod workers`, which runs its tasks in the
    /// order they become ready.
    Rr,
    /// FIFO: one queue of ready tasks; the first free worker takes the oldest.
    Fifo,
}

/// Host parameters. Times in nanoseconds, frequencies in megahertz, bandwidths in GB/s.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HostConfig {
    /// Host processing units.
    pub host_units: u32,
    /// µthreads per unit (hyper-threads). One µthread of the machine is the control thread
    /// (launch, polling, result loads, flow control); the others run host tasks.
    pub host_uthreads: u32,
    /// Host clock.
    pub host_mhz: u64,
    /// Instructions per cycle of one host µthread. The paper models the host like M²NDP's
    /// units: two µthreads share one processing unit's single issue slot, 0.5 each.
    pub host_ipc: f64,
    /// Host memory bandwidth (DDR5-4800 x 16 channels), shared evenly by the µthreads.
    pub host_memory_gbps: f64,
    /// Latency of one uncached load from the pinned DMA region: a poll of the metadata tail
    /// costs one; a task's payload reads cost one plus their bytes at the µthread's share of
    /// host memory bandwidth (streaming loads of the uncached, write-combining region).
    pub uncached_load_ns: u64,
    /// Cost to the control thread of issuing one posted store (flow control, launch).
    pub posted_store_ns: u64,
    /// Rate at which the control thread streams a launch's inputs into device memory with
    /// posted (write-combining) CXL.mem stores, before the link's own bandwidth limit.
    pub input_store_gbps: f64,
    /// Lines of CXL.mem loads one core keeps in flight when loading results (RP, BS).
    pub load_outstanding: u32,
    /// Cost of moving one record into the ready pool.
    pub ready_pool_push_ns: u64,
    /// Task dispatch overhead per host task.
    pub task_dispatch_ns: u64,
    /// Host scheduling policy.
    pub scheduling: HostScheduling,
    /// RP: remote polling interval.
    pub remote_poll_interval_ns: u64,
    /// AXLE: local polling interval (p1 = 50, p10 = 500, p100 = 5000).
    pub poll_interval_ns: u64,
    /// AXLE: no progress for this long (no record, no task) while work is outstanding is a
    /// deadlock.
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
            stall_timeout_ns: 20_000_000,
        }
    }
}

impl HostConfig {
    /// Checks every parameter for a value the model cannot run with.
    pub fn validate(&self) -> Result<(), String> {
        if self.host_units == 0 || self.host_uthreads == 0 {
            return Err("host.host_units and host.host_uthreads must be positive".into());
        }
        if u64::from(self.host_units) * u64::from(self.host_uthreads) < 2 {
            return Err(
                "the host needs at least two µthreads: a control thread and a worker".into(),
            );
        }
        if self.host_mhz == 0 || self.load_outstanding == 0 {
            return Err("host.host_mhz and host.load_outstanding must be positive".into());
        }
        for (name, value) in [
            ("host_ipc", self.host_ipc),
            ("host_memory_gbps", self.host_memory_gbps),
            ("input_store_gbps", self.input_store_gbps),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(format!(
                    "host.{name} must be a positive number, not {value}"
                ));
            }
        }
        if self.poll_interval_ns == 0 || self.remote_poll_interval_ns == 0 {
            return Err("polling intervals must be positive".into());
        }
        Ok(())
    }

    /// Host µthreads that run tasks.
    pub fn workers(&self) -> u32 {
        (self.host_units * self.host_uthreads)
            .saturating_sub(1)
            .max(1)
    }
}
