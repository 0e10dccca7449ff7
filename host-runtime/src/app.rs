//! The application interface: what a workload gives the runtime, and what the runtime gives back.
//!
//! A workload (crate `workloads`) implements [`Application`]: it loads its data set into device
//! memory before the timed run, then hands the runtime one [`LaunchPlan`] per offload iteration.
//! A plan is the command to launch plus the *host tasks* that consume its result: each task
//! names the byte range of the result space it depends on. The runtime runs a task as soon as
//! those bytes are in host memory (AXLE) or after the bulk result load (RP, BS), calls
//! [`Application::run_task`] with the bytes (the real computation), and charges the task the
//! [`HostCost`] it returns. When every task of a launch is done the runtime calls
//! [`Application::finish_launch`] (for example a final merge), then asks for the next plan: an
//! iteration may depend on the previous one's host results.

use core::ops::Range;
use shared_abi::{CommandDescriptor, DeviceAddress};

/// The modelled cost of a piece of host work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostCost {
    /// Instructions a host µthread issues.
    pub operations: u64,
    /// Bytes of ordinary (cached) host memory the work touches beyond its result bytes.
    pub memory_bytes: u64,
}

impl HostCost {
    /// `self + other`.
    #[must_use]
    pub fn plus(self, other: HostCost) -> HostCost {
        HostCost {
            operations: self.operations.saturating_add(other.operations),
            memory_bytes: self.memory_bytes.saturating_add(other.memory_bytes),
        }
    }
}

/// A host task of a launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostTask {
    /// The task's index in its plan.
    pub id: u32,
    /// The result bytes it reads (offsets in the launch's result space).
    pub needs: Range<u64>,
    /// Tasks of one chain never run at the same time (they share state: one application
    /// thread, one heap, one lock); they may run in any order. `None`: independent.
    pub chain: Option<u32>,
}

/// Bytes the host writes into device memory before a launch (an iteration's input that
/// depends on the previous iteration's host results: PageRank's ranks, the
/// OPT hidden state after the host's MLP, DLRM's bag indices).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInput {
    /// Where, in device data memory.
    pub address: DeviceAddress,
    /// What.
    pub bytes: Vec<u8>,
}

/// One offload iteration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchPlan {
    /// Host-to-device writes that must land before the command runs. The runtime issues them
    /// as posted CXL.mem stores of 64-byte lines from the control thread (timed: the thread
    /// streams them at `HostConfig::input_store_gbps`, the link carries them in order, and
    /// the launch follows them), and counts their time as data movement and host stall.
    pub inputs: Vec<DeviceInput>,
    /// The command. The runtime sets `mode` and `tag`; the application sets the rest.
    pub command: CommandDescriptor,
    /// The host tasks over the result. Together they must cover every result byte (a byte no
    /// task needs would never be consumed, and AXLE could not free its slot).
    pub tasks: Vec<HostTask>,
}

/// Untimed bulk set-up of device memory (loading a data set before the run).
pub trait DeviceLoader {
    /// Reserves `length` bytes of device data memory aligned to `align` (a power of two).
    fn allocate(&mut self, length: u64, align: u64) -> Result<DeviceAddress, LoadError>;
    /// Writes `bytes` at `address`.
    fn write(&mut self, address: DeviceAddress, bytes: &[u8]) -> Result<(), LoadError>;
}

/// Device set-up failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// Not enough device memory.
    #[error("device memory exhausted: {requested} bytes requested, {available} available")]
    OutOfMemory {
        /// Bytes asked for.
        requested: u64,
        /// Bytes left.
        available: u64,
    },
    /// A write outside device memory.
    #[error("write of {length} bytes at device address {address:#x} is outside device memory")]
    OutOfRange {
        /// Address.
        address: u64,
        /// Length.
        length: u64,
    },
}

/// How a run's answer compared with the reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verification {
    /// Whether it matched.
    pub passed: bool,
    /// One line saying what was compared (and, on failure, the first difference).
    pub detail: String,
}

/// A workload, from the host's point of view.
pub trait Application {
    /// Short name (`knn-a`).
    fn name(&self) -> &str;
    /// Bytes of device data memory the data set, results and workspaces need (the run sizes
    /// device memory to at least this). Default: none beyond the configured size.
    fn device_bytes(&self) -> u64 {
        0
    }
    /// Loads the data set into device memory (untimed).
    fn load(&mut self, device: &mut dyn DeviceLoader) -> Result<(), LoadError>;
    /// The next offload iteration, or `None` when the application has finished. Called once
    /// at the start and once after each launch's [`Application::finish_launch`].
    fn next_launch(&mut self) -> Option<LaunchPlan>;
    /// Runs host task `task` of the current launch over `result`, the bytes of `task.needs`,
    /// and returns its modelled cost.
    fn run_task(&mut self, task: &HostTask, result: &[u8]) -> HostCost;
    /// Runs the launch's final host step after all its tasks, and returns its cost.
    fn finish_launch(&mut self) -> HostCost;
    /// Compares the answer with the plain reference implementation.
    fn verify(&self) -> Verification;
}
