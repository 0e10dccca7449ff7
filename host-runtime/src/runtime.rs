//! The host runtime as a co-simulated party: one [`Runtime`] per run, driving one
//! [`Application`] through one offload mechanism.
//!
//! The host machine is modelled: one *control* µthread does everything that talks to the
//! device (input stores, launches, RP remote polls, BS waits, result loads, AXLE local polls
//! and flow control), one thing at a time: an activity due while it is busy starts when it
//! frees up. The other µthreads are *workers* that run host tasks under
//! the host scheduler. Each turn ([`HostAgent::turn`]) the runtime handles the responses that
//! arrived, fires its due timers (polls, task ends), starts ready tasks on free workers, and
//! asks for its next wake-up.
//!
//! # What the AXLE host pays for, and where
//!
//! The paper's poller is lightweight (section IV-C: "the polling routine only moves metadata
//! to the ready pool"): each poll costs the control thread one uncached load of the metadata
//! tail and, when the tail moved, one push of the new batch (the index range `[head, tail)`)
//! into the ready pool; nothing grows with the records of the batch. A flow-control store
//! follows when a head moved. All of that is host core stall. Polling starts one interval
//! after a launch store and stops once every result of the launch has arrived (the paper's
//! implicit completion detection, section IV-B: every downstream host task is triggered);
//! the next launch's first poll sends the heads freed meanwhile. The records belong to the work
//! that consumes them: a host task reads the metadata records of the chunks it needs together
//! with their payload slots, one uncached streaming read, as part of its duration (host busy,
//! not stall). The runtime copies the records of a batch out of the ring when the poll ends,
//! to learn which tasks became ready; that is the scheduler's bookkeeping, which the model
//! gives no time. The record slots stay held until their tasks have run, so the device never
//! overwrites a record the model has not yet read (`modes::axle`: gap-aware metadata head).
//! AXLE_Interrupt's handler does what one poll does, at the same cost, after the interrupt
//! handling latency (a delay, not host work). It runs in interrupt context on the core the
//! interrupt is delivered to, not on the control thread, and its flow-control stores are
//! issued by the workers that free the slots: neither waits for the control thread.
//!
//! The mechanisms differ only in how a launch's results reach the tasks:
//!
//! - [`Mode::Rp`]: descriptor by CXL.mem store, doorbell by CXL.io write, CXL.io polls of the
//!   mailbox status every remote polling interval, dequeue, then CXL.mem loads of the result.
//! - [`Mode::Bs`]: one synchronous CXL.mem launch store that returns on completion, then
//!   CXL.mem loads (behind the barrier).
//! - [`Mode::Axle`]: a posted launch store; the poller reads the local metadata tail every
//!   polling interval while results are due and moves the new records to the ready pool as
//!   one batch; tasks run as
//!   their bytes arrive and read their records and payload slots; slots are released gap-aware
//!   and heads flow back in batches.
//! - [`Mode::AxleIrq`]: AXLE, with the poll replaced by an interrupt per DMA request.

use crate::app::{Application, HostCost, LaunchPlan};
use crate::config::HostConfig;
use crate::cost::CostModel;
use crate::metrics::BusyTracker;
use crate::modes::axle::AxleRing;
use crate::sched::Scheduler;
use crate::tasks::{LaunchTracker, TrackError};
use crate::trace::{HostInstant, HostSpanKind, HostTrace};
use cosim_link::link::{DeviceLink, HostAgent, LinkResponse, Wake};
use shared_abi::command::CommandFlags;
use shared_abi::region::METADATA_RECORD_SIZE;
use shared_abi::{
    device_map, mailbox, CommandDescriptor, DeviceAddress, LaunchMode, Status, Ticks,
};
use std::collections::{BTreeMap, VecDeque};
use zerocopy::IntoBytes;

/// The offload mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Remote polling (device-centric).
    Rp,
    /// Bulk synchronous (memory-centric, M²NDP).
    Bs,
    /// Asynchronous back-streaming with local polling.
    Axle,
    /// Asynchronous back-streaming with an interrupt per DMA request.
    AxleIrq,
}

impl Mode {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Rp => "rp",
            Mode::Bs => "bs",
            Mode::Axle => "axle",
            Mode::AxleIrq => "axle-irq",
        }
    }

    /// Whether results are back-streamed.
    pub fn streams(self) -> bool {
        matches!(self, Mode::Axle | Mode::AxleIrq)
    }
}

/// Why a run failed on the host side.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeError {
    /// The device reported an error for a launch.
    #[error("device reported `{status}` (code {code}) for launch {tag}")]
    Device {
        /// The launch tag.
        tag: u32,
        /// The status code.
        code: u32,
        /// Its meaning.
        status: String,
    },
    /// The rings broke the protocol.
    #[error("ring protocol violation: {0}")]
    Ring(String),
    /// A record did not fit the launch's plan.
    #[error("record does not fit the launch: {0}")]
    Track(#[from] TrackError),
    /// No progress while the ring is full of payload slots that partially satisfied tasks
    /// hold: the run cannot finish (the ring is too small for the dependency pattern).
    #[error("deadlock detected at {at_ns} ns: {diagnosis}")]
    Deadlock {
        /// Virtual time of detection.
        at_ns: u64,
        /// What is stuck.
        diagnosis: String,
    },
    /// No progress for longer than the stall timeout although the ring is not full (the DMA
    /// executor stops for credit only when not one more payload fits): not a deadlock of the
    /// ring; the device is slower than the timeout allows, or stopped.
    #[error("no progress at {at_ns} ns: {diagnosis}")]
    Stalled {
        /// Time of detection (virtual, or real in wall-clock mode).
        at_ns: u64,
        /// What was waited for.
        diagnosis: String,
    },
    /// A result load came back short (outside device memory).
    #[error("result load of {expected} bytes returned {got}")]
    ShortLoad {
        /// Bytes asked for.
        expected: u64,
        /// Bytes received.
        got: u64,
    },
}

/// What the host measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostMeasurements {
    /// First launch issued.
    pub start: Ticks,
    /// Last host step finished.
    pub end: Ticks,
    /// Union of intervals with a worker busy.
    pub host_busy: Ticks,
    /// Control-thread stall (see `RunMetrics::host_stall_ns`).
    pub stall: Ticks,
    /// RP/BS result-load time.
    pub result_load: Ticks,
    /// Time the control thread spent storing launch inputs into device memory.
    pub input_store: Ticks,
    /// Launches completed.
    pub launches: u64,
    /// Host tasks run.
    pub tasks: u64,
    /// Polls or interrupts handled.
    pub polls: u64,
    /// Flow-control stores.
    pub flow_control_stores: u64,
    /// Largest gap, in bytes.
    pub max_gap_bytes: u64,
    /// Sum over the launches that produced a result of the time from the launch's start to
    /// its first result reaching the scheduler.
    pub first_result: Ticks,
    /// Launches counted in `first_result`.
    pub first_results: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Timer {
    RemotePoll,
    LocalPoll,
    /// A poll or interrupt handler ends; `batch`: it pushed a batch into the ready pool.
    PollDone {
        batch: bool,
    },
    TaskDone {
        worker: u32,
        task: u32,
    },
    FinishDone {
        worker: u32,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Control {
    /// Nothing outstanding on the control thread.
    Idle,
    /// RP: waiting for the descriptor store's acknowledgement.
    RpDescriptor { issued: Ticks },
    /// RP: kernel running; polls every interval.
    RpRunning,
    /// RP: a poll is outstanding.
    RpPolling { issued: Ticks },
    /// BS: waiting for the synchronous launch's response.
    BsLaunched { issued: Ticks },
    /// RP/BS: loading results.
    Loading { issued: Ticks },
    /// AXLE: streaming.
    Streaming,
    /// Finished (or failed).
    Done,
}

struct Launch {
    tag: u32,
    command: CommandDescriptor,
    tracker: LaunchTracker,
    results: Vec<u8>,
    finishing: bool,
    /// When the launch began (before its input stores).
    started: Ticks,
    /// When its first result reached the scheduler.
    first_result: Option<Ticks>,
}

/// Where a wall-clock stress run stretches the host's modelled timing
/// ([`Runtime::set_stretch`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stretch {
    /// A host task's completion: added to its modelled duration.
    TaskCompletion,
    /// The next local poll (AXLE): added to its start time.
    Poll,
}

/// A source of extra delays for [`Runtime::set_stretch`].
pub type StretchFn<'a> = Box<dyn FnMut(Stretch) -> Ticks + 'a>;

/// Result chunk size used to track RP/BS launches (their results arrive all at once).
const BULK_CHUNK: u64 = 64;

/// The host runtime of one run.
pub struct Runtime<'a> {
    mode: Mode,
    config: HostConfig,
    cost: CostModel,
    app: &'a mut dyn Application,
    ring: Option<AxleRing>,
    ring_programmed: bool,
    timers: BTreeMap<(Ticks, u64), Timer>,
    timer_sequence: u64,
    inbox: VecDeque<(Ticks, LinkResponse)>,
    scheduler: Scheduler,
    host_busy: BusyTracker,
    control: Control,
    launch: Option<Launch>,
    next_tag: u32,
    next_token: u64,
    poll_scheduled: bool,
    poll_started: Ticks,
    /// When the control thread finishes what it is doing (an input store, a launch store, a
    /// poll or interrupt handler, a flow-control store).
    control_free: Ticks,
    last_progress: Ticks,
    measured: HostMeasurements,
    started: bool,
    failure: Option<RuntimeError>,
    stretch: Option<StretchFn<'a>>,
    /// The clock is the real one (wall-clock mode): the stall timeout is wall time.
    real_clock: bool,
    /// The run's timeline (`axle run --trace`); `None`, recording nothing, unless enabled.
    trace: Option<HostTrace>,
}

impl std::fmt::Debug for Runtime<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("mode", &self.mode)
            .field("control", &self.control)
            .finish_non_exhaustive()
    }
}

impl<'a> Runtime<'a> {
    /// A runtime for `app` in `mode`. AXLE modes need the ring the driver set up.
    pub fn new(
        mode: Mode,
        config: HostConfig,
        app: &'a mut dyn Application,
        ring: Option<AxleRing>,
    ) -> Runtime<'a> {
        let workers = config.workers();
        Runtime {
            mode,
            cost: CostModel::new(&config),
            scheduler: Scheduler::new(config.scheduling, workers),
            config,
            app,
            ring,
            ring_programmed: false,
            timers: BTreeMap::new(),
            timer_sequence: 0,
            inbox: VecDeque::new(),
            host_busy: BusyTracker::default(),
            control: Control::Idle,
            launch: None,
            next_tag: 0,
            next_token: 0,
            poll_scheduled: false,
            poll_started: Ticks::ZERO,
            control_free: Ticks::ZERO,
            last_progress: Ticks::ZERO,
            measured: HostMeasurements::default(),
            started: false,
            failure: None,
            stretch: None,
            real_clock: false,
            trace: None,
        }
    }

    /// Wall-clock mode: the times the runtime is given are the real clock's, so the stall
    /// timeout is wall time and a stall may be a device that stopped or fell behind, which
    /// its error then says. Changes no timing.
    pub fn set_real_clock(&mut self) {
        self.real_clock = true;
    }

    /// Starts recording the host's timeline (`axle run --trace`): control-thread work, host
    /// tasks, launches. Recording changes no timing and no measurement.
    pub fn enable_trace(&mut self) {
        self.trace = Some(HostTrace::new(self.config.workers()));
    }

    /// The timeline recorded since [`Runtime::enable_trace`] (and stops recording).
    pub fn take_trace(&mut self) -> Option<HostTrace> {
        self.trace.take()
    }

    fn trace_span(&mut self, kind: HostSpanKind, start: Ticks, end: Ticks) {
        if let Some(trace) = self.trace.as_mut() {
            trace.span(kind, start, end);
        }
    }

    fn trace_instant(&mut self, at: Ticks, instant: HostInstant) {
        if let Some(trace) = self.trace.as_mut() {
            trace.instant(at, instant);
        }
    }

    /// Wall-clock stress only: `stretch` adds an extra delay at each [`Stretch`] point (host
    /// task completions, local polls). Without it (always in virtual time) nothing is added.
    pub fn set_stretch(&mut self, stretch: StretchFn<'a>) {
        self.stretch = Some(stretch);
    }

    fn stretched(&mut self, point: Stretch) -> Ticks {
        self.stretch
            .as_mut()
            .map_or(Ticks::ZERO, |stretch| stretch(point))
    }

    /// The AXLE rings as both sides left them (`None` in RP and BS).
    pub fn ring_state(&self) -> Option<Result<crate::modes::axle::RingState, String>> {
        self.ring.as_ref().map(AxleRing::state)
    }

    /// What the host measured.
    pub fn measurements(&self) -> HostMeasurements {
        self.measured
    }

    /// Why the run failed, if it did.
    pub fn failure(&self) -> Option<&RuntimeError> {
        self.failure.as_ref()
    }

    /// Whether the run finished (successfully or not).
    pub fn finished(&self) -> bool {
        self.control == Control::Done
    }

    fn at(&mut self, at: Ticks, timer: Timer) {
        self.timer_sequence += 1;
        self.timers.insert((at, self.timer_sequence), timer);
    }

    fn token(&mut self) -> u64 {
        self.next_token += 1;
        self.next_token
    }

    fn fail(&mut self, now: Ticks, error: RuntimeError) {
        // The caller reports the failure (`Runtime::failure`); logging it as an error too would
        // print it twice, and in the middle of `axle eval`'s progress for an expected deadlock.
        log::debug!("runtime: {error}");
        if self.failure.is_none() {
            self.failure = Some(error);
        }
        self.end_run(now);
    }

    fn stall(&mut self, duration: Ticks) {
        self.measured.stall = self.measured.stall.plus(duration);
    }

    /// The control thread is busy for `duration` from `now` (or from when it frees up):
    /// counted as stall, and no poll or interrupt handler starts before it ends.
    fn occupy_control(&mut self, now: Ticks, duration: Ticks) {
        self.control_free = self.control_free.max(now).plus(duration);
        self.stall(duration);
    }

    /// The run ends at `now`: control-thread work still running then is not part of it.
    fn end_run(&mut self, now: Ticks) {
        self.measured.end = now;
        let overhang = self.control_free.since(now);
        self.measured.stall = self.measured.stall.since(overhang);
        self.control = Control::Done;
    }

    // ----- launches -------------------------------------------------------------------------

    fn begin_next_launch(&mut self, now: Ticks, link: &mut dyn DeviceLink) {
        let Some(plan) = self.app.next_launch() else {
            self.end_run(now);
            return;
        };
        if !self.started {
            self.started = true;
            self.measured.start = now;
        }
        if let Err(error) = self.start_launch(now, plan, link) {
            self.fail(now, error);
        }
    }

    fn start_launch(
        &mut self,
        now: Ticks,
        plan: LaunchPlan,
        link: &mut dyn DeviceLink,
    ) -> Result<(), RuntimeError> {
        self.next_tag += 1;
        let tag = self.next_tag;
        let mut command = plan.command;
        command.tag = tag;
        command.mode = match self.mode {
            Mode::Rp => LaunchMode::RemotePolling,
            Mode::Bs => LaunchMode::BulkSynchronous,
            Mode::Axle | Mode::AxleIrq => LaunchMode::BackStreaming,
        } as u32;
        if self.mode == Mode::AxleIrq {
            command.flags |= CommandFlags::INTERRUPT.bits();
        }
        self.trace_instant(now, HostInstant::Launch { tag });
        let started = now;
        let now = self.store_inputs(now, &plan.inputs, link);
        let chunk = match &self.ring {
            Some(ring) if self.mode.streams() => u64::from(ring.slot_size()),
            _ => BULK_CHUNK,
        };
        self.scheduler
            .set_chains(plan.tasks.iter().map(|task| task.chain).collect());
        let tracker = LaunchTracker::new(plan.tasks, command.result_length, chunk)?;
        for task in tracker.initially_ready() {
            self.scheduler.ready(task);
        }
        self.launch = Some(Launch {
            tag,
            command,
            tracker,
            results: Vec::new(),
            finishing: false,
            started,
            first_result: None,
        });
        log::debug!(
            "runtime: launch {tag} ({}) at {} ns",
            self.mode.name(),
            now.as_ns()
        );
        match self.mode {
            Mode::Rp => {
                let token = self.token();
                link.mem_store_synchronous(
                    now,
                    device_map::RP_DESCRIPTOR,
                    command.as_bytes(),
                    token,
                );
                self.control = Control::RpDescriptor { issued: now };
            }
            Mode::Bs => {
                let token = self.token();
                link.mem_store_synchronous(
                    now,
                    device_map::LAUNCH_WINDOW,
                    command.as_bytes(),
                    token,
                );
                self.control = Control::BsLaunched { issued: now };
            }
            Mode::Axle | Mode::AxleIrq => {
                if !self.ring_programmed {
                    self.program_ring(now, link)?;
                }
                link.mem_store(now, device_map::LAUNCH_WINDOW, command.as_bytes());
                let posted = Ticks::from_ns(self.config.posted_store_ns);
                let start = self.control_free.max(now);
                self.trace_span(HostSpanKind::LaunchStore { tag }, start, start.plus(posted));
                self.occupy_control(now, posted);
                self.control = Control::Streaming;
                self.last_progress = now;
                if self.mode == Mode::Axle && !self.poll_scheduled {
                    self.poll_scheduled = true;
                    self.at(
                        now.plus(Ticks::from_ns(self.config.poll_interval_ns)),
                        Timer::LocalPoll,
                    );
                }
            }
        }
        Ok(())
    }

    /// Streams a launch's inputs into device memory, one posted 64-byte store per line, each
    /// stamped when the control thread issues it. The control thread does it once it is free
    /// (after a poll in progress) and is busy until the last line (a poll due meanwhile waits);
    /// returns when it is done (the launch store follows the last line on the link, so the
    /// device sees the inputs first).
    fn store_inputs(
        &mut self,
        now: Ticks,
        inputs: &[crate::app::DeviceInput],
        link: &mut dyn DeviceLink,
    ) -> Ticks {
        const LINE: usize = 64;
        let start = self.control_free.max(now);
        let mut at = start;
        for input in inputs {
            for (index, line) in input.bytes.chunks(LINE).enumerate() {
                let address = DeviceAddress(input.address.0.saturating_add((index * LINE) as u64));
                link.mem_store(at, address, line);
                at = at.plus(self.cost.input_store(line.len() as u64));
            }
        }
        let spent = at.since(start);
        if spent > Ticks::ZERO {
            self.occupy_control(start, spent);
            self.measured.input_store = self.measured.input_store.plus(spent);
            if self.trace.is_some() {
                let bytes = inputs.iter().map(|input| input.bytes.len() as u64).sum();
                self.trace_span(HostSpanKind::InputStore { bytes }, start, at);
            }
        }
        at
    }

    /// Programs the shadow descriptors with CXL.mem stores (the driver's part of attach).
    fn program_ring(&mut self, now: Ticks, link: &mut dyn DeviceLink) -> Result<(), RuntimeError> {
        let ring = self
            .ring
            .as_mut()
            .ok_or_else(|| RuntimeError::Ring("AXLE mode without a DMA ring".into()))?;
        for (address, bytes) in ring
            .setup_stores()
            .map_err(|e| RuntimeError::Ring(e.to_string()))?
        {
            link.mem_store(now, address, &bytes);
        }
        self.ring_programmed = true;
        Ok(())
    }

    // ----- responses ------------------------------------------------------------------------

    fn on_response(&mut self, now: Ticks, response: LinkResponse, link: &mut dyn DeviceLink) {
        match (self.control, response) {
            (Control::RpDescriptor { issued }, LinkResponse::StoreDone { .. }) => {
                self.stall(now.since(issued));
                let tag = self.launch.as_ref().map_or(0, |launch| launch.tag);
                self.trace_span(HostSpanKind::DescriptorStore { tag }, issued, now);
                self.trace_instant(now, HostInstant::Doorbell);
                link.io_write(now, mailbox::DOORBELL, device_map::RP_DESCRIPTOR.0);
                self.stall(Ticks::from_ns(self.config.posted_store_ns));
                self.control = Control::RpRunning;
                self.at(
                    now.plus(Ticks::from_ns(self.config.remote_poll_interval_ns)),
                    Timer::RemotePoll,
                );
            }
            (Control::RpPolling { issued }, LinkResponse::IoReadDone { value, .. }) => {
                self.stall(now.since(issued));
                let complete = value & 0xffff_ffff == mailbox::status::COMPLETE;
                self.trace_span(HostSpanKind::RemotePoll { complete }, issued, now);
                if complete {
                    let code = (value >> 32) as u32;
                    if code != Status::Ok.code() {
                        self.device_error(now, code);
                        return;
                    }
                    self.trace_instant(now, HostInstant::Dequeue);
                    link.io_write(now, mailbox::DEQUEUE, 1);
                    self.stall(Ticks::from_ns(self.config.posted_store_ns));
                    self.load_results(now, link);
                } else {
                    self.control = Control::RpRunning;
                    let next = issued
                        .plus(Ticks::from_ns(self.config.remote_poll_interval_ns))
                        .max(now);
                    self.at(next, Timer::RemotePoll);
                }
            }
            (Control::BsLaunched { issued }, LinkResponse::StoreDone { status, .. }) => {
                self.stall(now.since(issued));
                let tag = self.launch.as_ref().map_or(0, |launch| launch.tag);
                self.trace_span(HostSpanKind::BulkWait { tag }, issued, now);
                if status != Status::Ok.code() {
                    self.device_error(now, status);
                    return;
                }
                self.load_results(now, link);
            }
            (Control::Loading { issued }, LinkResponse::LoadDone { data, .. }) => {
                let elapsed = now.since(issued);
                self.stall(elapsed);
                self.measured.result_load = self.measured.result_load.plus(elapsed);
                let bytes = data.len() as u64;
                self.trace_span(HostSpanKind::ResultLoad { bytes }, issued, now);
                let Some(launch) = self.launch.as_mut() else {
                    return;
                };
                if data.len() as u64 != launch.command.result_length {
                    let error = RuntimeError::ShortLoad {
                        expected: launch.command.result_length,
                        got: data.len() as u64,
                    };
                    self.fail(now, error);
                    return;
                }
                launch.results = data;
                launch.first_result.get_or_insert(now);
                for task in launch.tracker.arrive_all() {
                    self.scheduler.ready(task);
                }
                self.control = Control::Idle;
            }
            (Control::Streaming, LinkResponse::Interrupt { message })
                if self.mode == Mode::AxleIrq =>
            {
                // The handler consumes the records of the request that interrupted.
                self.poll(now, Some(message));
            }
            (Control::Done, _) => {}
            (_, LinkResponse::Interrupt { .. }) => {}
            (control, response) => {
                log::warn!("runtime: unexpected {response:?} while {control:?}");
            }
        }
    }

    fn device_error(&mut self, now: Ticks, code: u32) {
        let status = Status::try_from(code)
            .map_or_else(|c| format!("unknown status {c}"), |s| s.to_string());
        let tag = self.launch.as_ref().map_or(0, |l| l.tag);
        self.fail(now, RuntimeError::Device { tag, code, status });
    }

    fn load_results(&mut self, now: Ticks, link: &mut dyn DeviceLink) {
        let Some((address, length)) = self
            .launch
            .as_ref()
            .map(|launch| (launch.command.result_address, launch.command.result_length))
        else {
            return;
        };
        let token = self.token();
        link.mem_load(
            now,
            DeviceAddress(address),
            length,
            self.config.load_outstanding,
            token,
        );
        self.control = Control::Loading { issued: now };
    }

    // ----- AXLE polling ---------------------------------------------------------------------

    /// One local poll (or interrupt handler): loads the metadata tail and pushes the new
    /// records below `limit` (all of them when `None`; an interrupt names the tail it
    /// announces) into the ready pool as one batch, the index range `[head, tail)`. It costs
    /// one uncached load, plus one ready-pool push when the batch is not empty: nothing here
    /// grows with the records of the batch, which the host tasks read with their payloads.
    /// The batch reaches the scheduler when the poll ends.
    ///
    /// A local poll runs on the control thread and is called only when the thread is free (a
    /// poll due while it is busy waits, `Timer::LocalPoll`). An interrupt handler runs at
    /// once, in interrupt context on the core the interrupt is delivered to, not as a
    /// control-thread activity (as its flow-control stores are issued by the workers that
    /// free the slots): its time is stall, but it neither waits for nor delays the control
    /// thread, nor other handlers.
    fn poll(&mut self, now: Ticks, limit: Option<u64>) {
        let Some(ring) = self.ring.as_mut() else {
            return;
        };
        self.measured.polls += 1;
        self.poll_started = now;
        let batch = match ring.poll(limit) {
            Ok(batch) => batch,
            Err(error) => {
                self.fail(now, RuntimeError::Ring(error));
                return;
            }
        };
        let records = batch.end - batch.start;
        let duration = self.poll_cost(records);
        if self.trace.is_some() {
            let records = u32::try_from(records).unwrap_or(u32::MAX);
            let kind = if limit.is_some() {
                HostSpanKind::InterruptHandler { records }
            } else {
                HostSpanKind::LocalPoll { records }
            };
            self.trace_span(kind, now, now.plus(duration));
        }
        if limit.is_some() {
            self.stall(duration);
        } else {
            self.occupy_control(now, duration);
        }
        if records > 0 {
            self.last_progress = now;
        }
        self.at(now.plus(duration), Timer::PollDone { batch: records > 0 });
    }

    /// The control thread's time for one poll (or interrupt handler) that found `records`
    /// new records: one uncached load of the metadata tail, and one ready-pool push of the
    /// batch when there is one. Independent of how many records the batch holds.
    fn poll_cost(&self, records: u64) -> Ticks {
        let push = if records > 0 {
            Ticks::from_ns(self.config.ready_pool_push_ns)
        } else {
            Ticks::ZERO
        };
        self.cost.uncached_loads(1).plus(push)
    }

    /// The poll's batches reach the scheduler: the records are copied out of the ring (the
    /// scheduler's bookkeeping, which the model gives no time) to learn which tasks became
    /// ready; their slots stay held until the tasks that read them have run.
    ///
    /// Each poll (or handler) that found records pushed one batch; the batches leave the pool
    /// in that order, and polls that push one take equally long, so the batch taken here is
    /// this poll's. (Interrupt handlers overlap: a later handler's batch must not reach the
    /// scheduler when an earlier one ends.)
    fn poll_done(&mut self, now: Ticks, batch: bool, link: &mut dyn DeviceLink) {
        let Some(ring) = self.ring.as_mut() else {
            return;
        };
        let Some(launch) = self.launch.as_mut() else {
            if let Err(error) = ring.drain_stale() {
                self.fail(now, RuntimeError::Ring(error));
            }
            return;
        };
        let taken = if batch { ring.pool().pop() } else { None };
        if let Some(batch) = taken {
            for index in batch {
                let (record, payload) = match ring.take_record(index) {
                    Ok(taken) => taken,
                    Err(error) => {
                        self.fail(now, RuntimeError::Ring(error));
                        return;
                    }
                };
                if record.tag != launch.tag {
                    let message = format!(
                        "record {} carries tag {} during launch {}",
                        record.sequence, record.tag, launch.tag
                    );
                    self.fail(now, RuntimeError::Ring(message));
                    return;
                }
                launch.first_result.get_or_insert(now);
                match launch
                    .tracker
                    .arrive(record.result_offset, u64::from(record.length), payload)
                {
                    Ok((ready, unread)) => {
                        for task in ready {
                            self.scheduler.ready(task);
                        }
                        if unread {
                            // No task reads this payload, so none reads its record either.
                            if let Err(error) = ring.consume(payload) {
                                self.fail(now, RuntimeError::Ring(error));
                                return;
                            }
                        }
                    }
                    Err(error) => {
                        self.fail(now, error.into());
                        return;
                    }
                }
            }
        }
        self.send_flow_control(now, link);
    }

    fn send_flow_control(&mut self, now: Ticks, link: &mut dyn DeviceLink) {
        let Some(ring) = self.ring.as_mut() else {
            return;
        };
        let sent = if let Some((address, message)) = ring.flow_control_due() {
            link.mem_store(now, address, message.as_bytes());
            ring.flow_control_sent(message);
            Some(message)
        } else {
            None
        };
        self.measured.max_gap_bytes = self.measured.max_gap_bytes.max(ring.max_gap_bytes());
        self.measured.flow_control_stores = ring.flow_control_stores();
        if let Some(message) = sent {
            let posted = Ticks::from_ns(self.config.posted_store_ns);
            let start = if self.mode == Mode::AxleIrq {
                now
            } else {
                self.control_free.max(now)
            };
            self.trace_span(
                HostSpanKind::FlowControl {
                    metadata_head: message.metadata_head,
                    payload_head: message.payload_head,
                },
                start,
                start.plus(posted),
            );
            if self.mode == Mode::AxleIrq {
                // Sent by the worker that freed the slots, not the control thread.
                self.stall(posted);
            } else {
                self.occupy_control(now, posted);
            }
        }
    }

    fn check_stalled(&mut self, now: Ticks) {
        if now.since(self.last_progress) <= Ticks::from_ns(self.config.stall_timeout_ns) {
            return;
        }
        if self.scheduler.running() > 0 {
            return;
        }
        let (tasks, bytes) = self
            .launch
            .as_ref()
            .map_or((0, 0), |launch| launch.tracker.starving());
        let held = self.ring.as_ref().map_or(0, AxleRing::held_slots);
        let capacity = self.ring.as_ref().map_or(0, AxleRing::payload_capacity);
        let waited = now.since(self.last_progress).as_ns();
        let timeout = self.config.stall_timeout_ns;
        let clock = if self.real_clock { " of wall time" } else { "" };
        let plural = |count: u64, one: &'static str, many: &'static str| {
            if count == 1 {
                one
            } else {
                many
            }
        };
        let facts = format!(
            "no record and no host task for {waited} ns{clock} (host.stall_timeout_ns is {timeout}); {tasks} host {} for {bytes} result bytes while {held} of the ring's {capacity} payload slots are held",
            plural(tasks as u64, "task waits", "tasks wait"),
        );
        // The DMA executor stops for credit only when not one more payload fits (it takes
        // credit payload by payload), so a ring that is not full is not what blocks.
        let error = if capacity > 0 && held >= capacity {
            RuntimeError::Deadlock {
                at_ns: now.as_ns(),
                diagnosis: format!(
                    "{facts}: the ring is full of slots that partially satisfied tasks hold (the ring is too small for this dependency pattern: enlarge --slots or stream in order)"
                ),
            }
        } else {
            let device = if self.real_clock {
                "it may be stopped or far behind the real clock (raise host.stall_timeout_ns if it is only slow)"
            } else {
                "it is slower than the timeout allows: raise host.stall_timeout_ns"
            };
            RuntimeError::Stalled {
                at_ns: now.as_ns(),
                diagnosis: format!(
                    "{facts}, so the ring is not what blocks: the device sent nothing for longer than the stall timeout; {device}"
                ),
            }
        };
        self.fail(now, error);
    }

    // ----- tasks ----------------------------------------------------------------------------

    fn start_ready_tasks(&mut self, now: Ticks) {
        while let Some((worker, task)) = self.scheduler.next_start() {
            let Some(launch) = self.launch.as_mut() else {
                self.scheduler.release(worker, None);
                return;
            };
            let Some(spec) = launch.tracker.tasks().get(task as usize).cloned() else {
                self.scheduler.release(worker, None);
                continue;
            };
            let (bytes, read_time) = if self.mode.streams() {
                let Some(ring) = self.ring.as_ref() else {
                    return;
                };
                // The task reads the records of the chunks it needs with their payload slots:
                // one streaming read of the uncached region.
                let chunks = launch.tracker.chunks_of(task);
                let records = chunks.len() as u64 * METADATA_RECORD_SIZE;
                match ring.gather(&chunks, &spec.needs) {
                    Ok((bytes, read)) => (bytes, self.cost.uncached_stream(records + read)),
                    Err(error) => {
                        self.fail(now, RuntimeError::Ring(error));
                        return;
                    }
                }
            } else {
                let start = spec.needs.start as usize;
                let end = spec.needs.end as usize;
                let bytes = launch
                    .results
                    .get(start..end)
                    .map(<[u8]>::to_vec)
                    .unwrap_or_default();
                let read = self.cost.cached_read(bytes.len() as u64);
                (bytes, read)
            };
            let tag = launch.tag;
            let cost = self.app.run_task(&spec, &bytes);
            let duration = self
                .cost
                .work(cost)
                .plus(read_time)
                .plus(self.stretched(Stretch::TaskCompletion));
            self.trace_span(
                HostSpanKind::Task { worker, tag, task },
                now,
                now.plus(duration),
            );
            self.host_busy.start(now);
            self.measured.tasks += 1;
            self.at(now.plus(duration), Timer::TaskDone { worker, task });
        }
    }

    fn task_done(&mut self, now: Ticks, worker: u32, task: u32, link: &mut dyn DeviceLink) {
        self.scheduler.release(worker, Some(task));
        self.host_busy.stop(now);
        self.last_progress = now;
        let Some(launch) = self.launch.as_mut() else {
            return;
        };
        let freed = launch.tracker.finish(task);
        if let Some(ring) = self.ring.as_mut() {
            for index in freed {
                if let Err(error) = ring.consume(index) {
                    self.fail(now, RuntimeError::Ring(error));
                    return;
                }
            }
        }
        if self.mode == Mode::AxleIrq {
            // No poller: the worker that freed slots sends the heads.
            self.send_flow_control(now, link);
        }
        self.maybe_finish_launch(now);
    }

    fn maybe_finish_launch(&mut self, now: Ticks) {
        let Some(launch) = self.launch.as_mut() else {
            return;
        };
        if launch.finishing || !launch.tracker.all_finished() {
            return;
        }
        if matches!(
            self.control,
            Control::RpDescriptor { .. }
                | Control::RpRunning
                | Control::RpPolling { .. }
                | Control::BsLaunched { .. }
                | Control::Loading { .. }
        ) {
            return;
        }
        let Some(worker) = self.scheduler.claim_any() else {
            return;
        };
        launch.finishing = true;
        let tag = launch.tag;
        let cost: HostCost = self.app.finish_launch();
        let end = now.plus(self.cost.work(cost));
        self.trace_span(HostSpanKind::FinishLaunch { worker, tag }, now, end);
        self.host_busy.start(now);
        self.at(end, Timer::FinishDone { worker });
    }

    fn finish_done(&mut self, now: Ticks, worker: u32, link: &mut dyn DeviceLink) {
        self.scheduler.release(worker, None);
        self.host_busy.stop(now);
        self.measured.launches += 1;
        if let Some(launch) = self.launch.take() {
            if let Some(first) = launch.first_result {
                self.measured.first_result =
                    self.measured.first_result.plus(first.since(launch.started));
                self.measured.first_results += 1;
            }
        }
        self.control = Control::Idle;
        self.begin_next_launch(now, link);
    }

    fn fire(&mut self, now: Ticks, timer: Timer, link: &mut dyn DeviceLink) {
        match timer {
            Timer::RemotePoll => {
                if self.control == Control::RpRunning {
                    let token = self.token();
                    link.io_read(now, mailbox::STATUS, token);
                    self.control = Control::RpPolling { issued: now };
                }
            }
            Timer::LocalPoll => {
                if self.control == Control::Done {
                    self.poll_scheduled = false;
                    return;
                }
                if self.control_free > now {
                    // The control thread is busy: the poll starts when it frees up.
                    let free = self.control_free;
                    self.at(free, Timer::LocalPoll);
                    return;
                }
                self.poll_scheduled = false;
                self.poll(now, None);
                self.check_stalled(now);
            }
            Timer::PollDone { batch } => {
                self.poll_done(now, batch, link);
                // Once every result of the launch has arrived, nothing more can come until the
                // next launch (the paper's implicit completion detection: every downstream host
                // task has been triggered); the next launch starts polling again, and its
                // first poll sends the heads freed meanwhile.
                let outstanding = self
                    .launch
                    .as_ref()
                    .is_some_and(|launch| !launch.tracker.all_arrived());
                if self.mode == Mode::Axle
                    && self.control != Control::Done
                    && !self.poll_scheduled
                    && outstanding
                {
                    // The next poll starts one interval after this one did, or at once if the
                    // poll took longer than the interval.
                    self.poll_scheduled = true;
                    let interval = Ticks::from_ns(self.config.poll_interval_ns);
                    let next = self
                        .poll_started
                        .plus(interval)
                        .max(self.control_free)
                        .max(now)
                        .plus(self.stretched(Stretch::Poll));
                    self.at(next, Timer::LocalPoll);
                }
            }
            Timer::TaskDone { worker, task } => self.task_done(now, worker, task, link),
            Timer::FinishDone { worker } => self.finish_done(now, worker, link),
        }
    }
}

impl HostAgent for Runtime<'_> {
    fn deliver(&mut self, at: Ticks, response: LinkResponse) {
        self.inbox.push_back((at, response));
    }

    fn turn(&mut self, now: Ticks, link: &mut dyn DeviceLink) -> Wake {
        if !self.started && self.control == Control::Idle {
            self.begin_next_launch(now, link);
        }
        loop {
            if self.control == Control::Done {
                self.measured.host_busy = self.host_busy.total(now);
                return Wake::Done;
            }
            if let Some((_, response)) = self.inbox.pop_front() {
                self.on_response(now, response, link);
                continue;
            }
            let due = self
                .timers
                .first_key_value()
                .map(|(&(at, _), _)| at)
                .filter(|&at| at <= now);
            if due.is_some() {
                if let Some((_, timer)) = self.timers.pop_first() {
                    self.fire(now, timer, link);
                }
                continue;
            }
            self.start_ready_tasks(now);
            self.maybe_finish_launch(now);
            if self.inbox.is_empty()
                && self
                    .timers
                    .first_key_value()
                    .is_none_or(|(&(at, _), _)| at > now)
            {
                break;
            }
        }
        self.measured.host_busy = self.host_busy.total(now);
        match self.timers.first_key_value() {
            Some((&(at, _), _)) => Wake::At(at),
            None => Wake::OnResponse,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
