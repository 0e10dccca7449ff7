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
//!
//! Each of those calls returns a `Result`: an application that is handed a task or bytes its
//! plan does not have, or is called out of order, says so with an [`AppError`] at that call,
//! and the runtime fails the run with it ([`crate::RuntimeError::Application`]).
//! [`Application::verify`] only compares the answer of a run that finished.

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
    /// Whether device memory already holds every byte this load would write: it is a
    /// copy-on-write view of a device image that an earlier load of an application with the
    /// same [`Application::image_key`] wrote (`axle eval` shares one image between the runs
    /// of a large data set). The load must then make the same allocations in the same order
    /// (the runner checks), and may skip making and writing its bytes; a write it still makes
    /// lands as usual. Default: `false`, the memory is blank.
    fn preloaded(&self) -> bool {
        false
    }
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

/// A host step of an application could not be done: the runtime called it out of order, or
/// handed it a task or result bytes its plan does not have. The runtime fails the run with it
/// at the call ([`crate::RuntimeError::Application`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{application}: {scope}{problem}")]
pub struct AppError {
    /// The application's name (`knn-a`).
    pub application: String,
    /// Which launch, batch or layer, when the application has several.
    pub scope: Scope,
    /// What went wrong.
    pub problem: AppProblem,
}

/// Where in an application's sequence of launches an [`AppProblem`] arose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The application has one launch, or the problem is not about one.
    Whole,
    /// Launch `n` (counting from 0) of an iterative application.
    Launch(u32),
    /// Batch `n` (DLRM).
    Batch(usize),
    /// Layer `n` (OPT).
    Layer(u32),
}

impl core::fmt::Display for Scope {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Scope::Whole => Ok(()),
            Scope::Launch(n) => write!(f, "launch {n}: "),
            Scope::Batch(n) => write!(f, "batch {n}: "),
            Scope::Layer(n) => write!(f, "layer {n}: "),
        }
    }
}

/// What an application's host step refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AppProblem {
    /// `next_launch` before `load`.
    #[error("next_launch called before load")]
    NotLoaded,
    /// `next_launch` while the previous launch has not finished.
    #[error("next_launch called before the launch finished")]
    LaunchInFlight,
    /// `run_task` or `finish_launch` with no launch in flight.
    #[error("{call} with no launch in flight")]
    NoLaunch {
        /// The call.
        call: &'static str,
    },
    /// A task the plan does not have.
    #[error("task {task} does not exist ({tasks} tasks)")]
    NoSuchTask {
        /// The task's id.
        task: u32,
        /// Tasks in the plan.
        tasks: usize,
    },
    /// A task whose byte range or result length is not the one planned.
    #[error("task {task}: needs {needs:?} with {bytes} result bytes, planned {planned:?}")]
    WrongInput {
        /// The task's id.
        task: u32,
        /// The range the runtime said the task needs.
        needs: Range<u64>,
        /// Result bytes handed over.
        bytes: usize,
        /// The range the plan gave the task.
        planned: Range<u64>,
    },
    /// A task whose byte range or result length does not fit the launch.
    #[error("task {task} over {needs:?} with {bytes} bytes does not fit the launch")]
    DoesNotFit {
        /// The task's id.
        task: u32,
        /// The range the runtime said the task needs.
        needs: Range<u64>,
        /// Result bytes handed over.
        bytes: usize,
    },
    /// A task ran a second time.
    #[error("task {task} ran twice")]
    RanTwice {
        /// The task's id.
        task: u32,
    },
    /// `finish_launch` while tasks of the launch have not run.
    #[error("{missing} tasks never ran (first: task {first})")]
    NeverRan {
        /// Tasks that did not run.
        missing: usize,
        /// The first of them.
        first: usize,
    },
    /// The result bytes contradict the data set or each other.
    #[error("task {task}: {what}")]
    BadResult {
        /// The task's id.
        task: u32,
        /// What the bytes contradict.
        what: BadResult,
    },
}

/// How a task's result bytes contradict the data set or each other ([`AppProblem::BadResult`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadResult {
    /// The task's span names a query the data set does not have.
    #[error("query {query} does not exist")]
    NoSuchQuery {
        /// The query.
        query: u32,
    },
    /// A row beyond the table is marked.
    #[error("row {row} is marked but the table has {rows} rows")]
    RowBeyondTable {
        /// The row.
        row: u64,
        /// Rows in the table.
        rows: u64,
    },
    /// A block starting beyond the graph's vertices.
    #[error("starts beyond the vertices")]
    BeyondVertices,
    /// Tasks that read the same result bytes were handed different bytes.
    #[error("result bytes differ from another task's")]
    DiffersFromAnotherTask,
    /// The block is not whole 4-byte values.
    #[error("{bytes} result bytes are not whole distances")]
    PartialWords {
        /// Bytes handed over.
        bytes: usize,
    },
    /// The block's vertices lie beyond the graph's.
    #[error("vertices {first}..{end} lie beyond the {vertices} vertices")]
    VerticesBeyond {
        /// The block's first vertex.
        first: u32,
        /// One past its last.
        end: usize,
        /// Vertices in the graph.
        vertices: usize,
    },
}

impl AppProblem {
    /// [`AppProblem::NeverRan`] if not every task of the launch has run (`ran`: whether each
    /// has, in task order), for `finish_launch`.
    pub fn never_ran(ran: impl IntoIterator<Item = bool>) -> Option<AppProblem> {
        let mut missing = 0;
        let mut first = None;
        for (task, ran) in ran.into_iter().enumerate() {
            if !ran {
                missing += 1;
                first.get_or_insert(task);
            }
        }
        first.map(|first| AppProblem::NeverRan { missing, first })
    }
}

impl AppError {
    /// `problem` of the application `application` in `scope`.
    pub fn new(application: impl Into<String>, scope: Scope, problem: AppProblem) -> AppError {
        AppError {
            application: application.into(),
            scope,
            problem,
        }
    }
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
    /// Identifies what [`Application::load`] writes into device memory, for sharing one
    /// loaded image between runs ([`DeviceLoader::preloaded`]): two applications with the same
    /// key (and the same name) make the same allocations and write the same bytes into device
    /// memory of the same size, and `load` may be called more than once, each call starting
    /// the application over. `None` (the default): the load is never shared.
    fn image_key(&self) -> Option<String> {
        None
    }
    /// Loads the data set into device memory (untimed).
    fn load(&mut self, device: &mut dyn DeviceLoader) -> Result<(), LoadError>;
    /// The next offload iteration, or `None` when the application has finished. Called once
    /// at the start and once after each launch's [`Application::finish_launch`]. Fails when
    /// called out of order (before `load`, or with a launch in flight).
    fn next_launch(&mut self) -> Result<Option<LaunchPlan>, AppError>;
    /// Runs host task `task` of the current launch over `result`, the bytes of `task.needs`,
    /// and returns its modelled cost. Fails when the task or its bytes are not the ones
    /// planned, or it already ran.
    fn run_task(&mut self, task: &HostTask, result: &[u8]) -> Result<HostCost, AppError>;
    /// Runs the launch's final host step after all its tasks, and returns its cost. Fails when
    /// a task of the launch did not run.
    fn finish_launch(&mut self) -> Result<HostCost, AppError>;
    /// Compares the answer with the plain reference implementation.
    fn verify(&self) -> Verification;
}
