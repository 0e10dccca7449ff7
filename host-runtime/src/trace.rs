//! The host's timeline of a run, for `axle run --trace` (a Chrome / Perfetto trace).
//!
//! Off by default: [`crate::Runtime::enable_trace`] turns it on, and until then the runtime
//! holds `None` and records nothing. Recording only appends compact `Copy` records; it never
//! changes a timer, a measurement or a decision, so a traced run has exactly the timing and
//! the report of an untraced one.
//!
//! What is recorded, all in virtual time: the control µthread's work (launch stores, input
//! stores, RP descriptor stores and remote polls, BS synchronous waits, result loads, AXLE
//! local polls and interrupt handlers with the records of the batch each pushed, flow-control
//! stores with the heads they carry, `--no-deadlock`'s overflow spills with the bytes each
//! copied), each host task and launch-finishing step on the worker that ran it, and launch
//! instants. Polls and handlers name the metadata indexes of their batch and tasks the result
//! bytes they read, so that the trace can link each record to the poll that saw it and the
//! tasks that read it (the metadata index is the record's sequence number, which the device
//! side also records).

use shared_abi::Ticks;

/// What a host span is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostSpanKind {
    /// The control thread stores a launch's inputs into device memory (posted CXL.mem).
    InputStore {
        /// Bytes stored.
        bytes: u64,
    },
    /// AXLE: the posted launch store.
    LaunchStore {
        /// The launch tag.
        tag: u32,
    },
    /// RP: the synchronous descriptor store, until its acknowledgement.
    DescriptorStore {
        /// The launch tag.
        tag: u32,
    },
    /// BS: the synchronous launch store, until its response (the kernel's completion).
    BulkWait {
        /// The launch tag.
        tag: u32,
    },
    /// RP/BS: the CXL.mem load of the results.
    ResultLoad {
        /// Bytes loaded.
        bytes: u64,
        /// The launch tag.
        tag: u32,
    },
    /// RP: one remote poll of the mailbox status over CXL.io.
    RemotePoll {
        /// Whether it found the launch complete.
        complete: bool,
        /// The launch tag.
        tag: u32,
    },
    /// AXLE: one local poll of the metadata tail.
    LocalPoll {
        /// Metadata records in the batch it pushed into the ready pool.
        records: u32,
        /// The batch's first metadata index (the records are `first .. first + records`).
        first: u64,
    },
    /// AXLE_Interrupt: one interrupt handler.
    InterruptHandler {
        /// Metadata records in the batch it pushed into the ready pool.
        records: u32,
        /// The batch's first metadata index.
        first: u64,
    },
    /// AXLE: a flow-control store of the heads (posted CXL.mem).
    FlowControl {
        /// Metadata head sent (edge H2).
        metadata_head: u64,
        /// Payload head sent (edge H3).
        payload_head: u64,
    },
    /// `host.no_deadlock`: the runtime copies the records and payloads it holds out of a
    /// stuck ring into its private overflow buffer, freeing their slots (host core stall).
    OverflowSpill {
        /// Bytes copied (the records and their payload slots).
        bytes: u64,
    },
    /// A host task on a worker.
    Task {
        /// Worker.
        worker: u32,
        /// The launch tag.
        tag: u32,
        /// Task index in the launch.
        task: u32,
        /// The result bytes it reads, `[start, end)` of the launch's result space.
        needs: (u64, u64),
    },
    /// A launch's finishing step on a worker.
    FinishLaunch {
        /// Worker.
        worker: u32,
        /// The launch tag.
        tag: u32,
    },
}

/// One interval of the host's timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostSpan {
    /// What.
    pub kind: HostSpanKind,
    /// Start.
    pub start: Ticks,
    /// End (not before `start`).
    pub end: Ticks,
}

/// Something the host did at one instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostInstant {
    /// A launch began (before its inputs are stored).
    Launch {
        /// Its tag.
        tag: u32,
    },
    /// RP: the doorbell write was posted.
    Doorbell,
    /// RP: the dequeue write was posted.
    Dequeue,
    /// `--poll adaptive`: the earliest the launch's first record can be in host memory
    /// (`crate::adaptive_poll::first_record_bound`); the schedule polls no sooner.
    FirstRecordBound {
        /// The launch tag.
        tag: u32,
    },
}

/// The host's timeline of a run.
#[derive(Debug, Default)]
pub struct HostTrace {
    /// Worker µthreads (the other one is the control thread).
    pub workers: u32,
    /// Spans, in the order they were recorded.
    pub spans: Vec<HostSpan>,
    /// Instants, in time order.
    pub instants: Vec<(Ticks, HostInstant)>,
}

impl HostTrace {
    /// An empty trace of a host with `workers` workers.
    pub fn new(workers: u32) -> HostTrace {
        HostTrace {
            workers,
            ..HostTrace::default()
        }
    }

    /// Records `kind` over `[start, end]`.
    pub fn span(&mut self, kind: HostSpanKind, start: Ticks, end: Ticks) {
        self.spans.push(HostSpan {
            kind,
            start,
            end: end.max(start),
        });
    }

    /// Records `instant` at `at`.
    pub fn instant(&mut self, at: Ticks, instant: HostInstant) {
        self.instants.push((at, instant));
    }
}
