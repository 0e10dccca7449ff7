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
//!
//! # Where the code is
//!
//! This module is the core every mechanism shares: `Host` holds the control thread's clock,
//! the timers, the scheduler and its workers, the launch being run and the measurements, and
//! [`Runtime`] runs the turn loop, the launches (input stores, tracking) and the host tasks.
//! Each mechanism is a `crate::modes::Mechanism` in its own module of [`crate::modes`]
//! (`rp`, `bs`, `axle`, `axle_irq`) holding its own state: how a launch is issued, what its
//! responses and timers do, where a task's bytes come from. The poll and the interrupt
//! handler are [`crate::poller`].

use crate::app::{Application, HostCost, LaunchPlan};
use crate::config::HostConfig;
use crate::cost::CostModel;
use crate::metrics::BusyTracker;
use crate::modes::axle::AxleRing;
use crate::modes::{Mechanism, ModeTimer};
use crate::sched::Scheduler;
use crate::tasks::{LaunchTracker, TrackError};
use crate::trace::{HostInstant, HostSpanKind, HostTrace};
use cosim_link::link::{DeviceLink, HostAgent, LinkResponse, Wake};
use shared_abi::{CommandDescriptor, DeviceAddress, Status, Ticks};
use std::collections::VecDeque;
use timers::Timers;

mod timers;

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
    #[error("device reported `{}` (code {code}) for launch {tag}", status_text(*.status, *.code))]
    Device {
        /// The launch tag.
        tag: u32,
        /// The status code.
        code: u32,
        /// The code decoded, when this build knows it.
        status: Option<Status>,
    },
    /// The rings broke the protocol.
    #[error("ring protocol violation: {0}")]
    Ring(#[from] crate::modes::axle::AxleRingError),
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
    /// A host step of the application refused to go on.
    #[error("{0}")]
    Application(#[from] crate::app::AppError),
    /// A result load came back short (outside device memory).
    #[error("result load of {expected} bytes returned {got}")]
    ShortLoad {
        /// Bytes asked for.
        expected: u64,
        /// Bytes received.
        got: u64,
    },
}

/// A device status for an error message: its meaning, or that this build does not know it.
fn status_text(status: Option<Status>, code: u32) -> String {
    status.map_or_else(|| format!("unknown status {code}"), |s| s.to_string())
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
    /// `host.no_deadlock`: spills of held payloads into the overflow buffer.
    pub overflow_spills: u64,
    /// Bytes of records and payloads spilled.
    pub overflow_bytes: u64,
    /// Host time spent spilling (part of the stall).
    pub overflow: Ticks,
}

/// What wakes the runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timer {
    /// One of the mechanism's timers (polls, handler ends).
    Mode(ModeTimer),
    /// A host task ends.
    TaskDone { worker: u32, task: u32 },
    /// A launch's final host step ends.
    FinishDone { worker: u32 },
}

/// A scheduled timer, to cancel it ([`Host::at_cancellable`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TimerKey(Ticks, u64);

impl TimerKey {
    /// When the timer fires.
    pub(crate) fn at(self) -> Ticks {
        self.0
    }
}

/// The launch being run.
pub(crate) struct Launch {
    pub(crate) tag: u32,
    pub(crate) command: CommandDescriptor,
    pub(crate) tracker: LaunchTracker,
    /// RP/BS: the loaded result.
    pub(crate) results: Vec<u8>,
    finishing: bool,
    /// When the launch began (before its input stores).
    started: Ticks,
    /// When its first result reached the scheduler.
    pub(crate) first_result: Option<Ticks>,
}

/// The launch a run had submitted and not completed ([`Runtime::pending_launch`]): what is
/// lost with the device when the device is (an attached run whose emulator process died).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingLaunch {
    /// Its tag (the runtime numbers launches 1, 2, 3... in the order it submits them).
    pub tag: u32,
    /// Its kernel, as the command names it ([`shared_abi::KernelId`] as `u32`).
    pub kernel: u32,
    /// When it began (its input stores), in the run's time.
    pub started: Ticks,
    /// Bytes of its result space.
    pub result_length: u64,
    /// Whether every result byte had reached the host (its final host step was running).
    pub results_in: bool,
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

/// The host runtime of one run.
pub struct Runtime<'a> {
    host: Host<'a>,
    mechanism: Box<dyn Mechanism>,
    inbox: VecDeque<(Ticks, LinkResponse)>,
    /// The bytes of the task being started (`Mechanism::task_input`): one buffer for every
    /// task, so that its storage is not allocated and zeroed again for each.
    input: Vec<u8>,
    /// The payload indexes a finished task frees (`LaunchTracker::finish_into`): one buffer
    /// for every task.
    freed: Vec<u64>,
}

/// The host state every mechanism shares, and what charges it: the mechanisms act on it.
pub(crate) struct Host<'a> {
    mode: Mode,
    pub(crate) config: HostConfig,
    pub(crate) cost: CostModel,
    app: &'a mut dyn Application,
    timers: Timers,
    timer_sequence: u64,
    pub(crate) scheduler: Scheduler,
    host_busy: BusyTracker,
    pub(crate) launch: Option<Launch>,
    next_tag: u32,
    next_token: u64,
    /// When the control thread finishes what it is doing (an input store, a launch store, a
    /// poll or interrupt handler, a flow-control store).
    pub(crate) control_free: Ticks,
    pub(crate) last_progress: Ticks,
    pub(crate) measured: HostMeasurements,
    started: bool,
    /// The run finished (or failed).
    pub(crate) done: bool,
    failure: Option<RuntimeError>,
    stretch: Option<StretchFn<'a>>,
    /// The clock is the real one (wall-clock mode): the stall timeout is wall time.
    pub(crate) real_clock: bool,
    /// The run's timeline (`axle run --trace`); `None`, recording nothing, unless enabled.
    trace: Option<HostTrace>,
}

impl std::fmt::Debug for Runtime<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("mode", &self.host.mode)
            .field("done", &self.host.done)
            .field("mechanism", &self.mechanism)
            .finish_non_exhaustive()
    }
}

impl<'a> Runtime<'a> {
    /// A runtime for `app` in `mode`. AXLE modes need the ring the driver set up; RP and BS
    /// use none (one given is dropped).
    pub fn new(
        mode: Mode,
        config: HostConfig,
        app: &'a mut dyn Application,
        ring: Option<AxleRing>,
    ) -> Runtime<'a> {
        let workers = config.workers();
        let mechanism = crate::modes::mechanism(mode, ring, &config);
        Runtime {
            host: Host {
                mode,
                cost: CostModel::new(&config),
                scheduler: Scheduler::new(config.scheduling, workers),
                config,
                app,
                timers: Timers::default(),
                timer_sequence: 0,
                host_busy: BusyTracker::default(),
                launch: None,
                next_tag: 0,
                next_token: 0,
                control_free: Ticks::ZERO,
                last_progress: Ticks::ZERO,
                measured: HostMeasurements::default(),
                started: false,
                done: false,
                failure: None,
                stretch: None,
                real_clock: false,
                trace: None,
            },
            mechanism,
            inbox: VecDeque::new(),
            input: Vec::new(),
            freed: Vec::new(),
        }
    }

    /// Wall-clock mode: the times the runtime is given are the real clock's, so the stall
    /// timeout is wall time and a stall may be a device that stopped or fell behind, which
    /// its error then says. Changes no timing.
    pub fn set_real_clock(&mut self) {
        self.host.real_clock = true;
    }

    /// Starts recording the host's timeline (`axle run --trace`): control-thread work, host
    /// tasks, launches. Recording changes no timing and no measurement.
    pub fn enable_trace(&mut self) {
        self.host.trace = Some(HostTrace::new(self.host.config.workers()));
    }

    /// The timeline recorded since [`Runtime::enable_trace`] (and stops recording).
    pub fn take_trace(&mut self) -> Option<HostTrace> {
        self.host.trace.take()
    }

    /// Wall-clock stress only: `stretch` adds an extra delay at each [`Stretch`] point (host
    /// task completions, local polls). Without it (always in virtual time) nothing is added.
    pub fn set_stretch(&mut self, stretch: StretchFn<'a>) {
        self.host.stretch = Some(stretch);
    }

    /// A study only (`host.poll_policy = "oracle"`, AXLE): poll exactly at `times` (and,
    /// once they are spent while results are still due, every `host.poll_interval_ns`).
    /// Without that policy it changes nothing.
    pub fn set_poll_script(&mut self, times: Vec<Ticks>) {
        self.mechanism.set_poll_script(times);
    }

    /// `host.poll_policy = "adaptive"` (AXLE): what the host knows of the device, from which
    /// the schedule bounds each launch's first record and polls no sooner
    /// ([`crate::adaptive_poll::first_record_bound`]). Without it, or without that policy, it
    /// changes nothing.
    pub fn set_device_datasheet(&mut self, sheet: crate::adaptive_poll::DeviceDatasheet) {
        self.mechanism.set_device_datasheet(sheet);
    }

    /// The AXLE rings as both sides left them (`None` in RP and BS).
    pub fn ring_state(
        &self,
    ) -> Option<Result<crate::modes::axle::RingState, crate::modes::axle::AxleRingError>> {
        self.mechanism.ring().map(AxleRing::state)
    }

    /// What the host measured.
    pub fn measurements(&self) -> HostMeasurements {
        self.host.measured
    }

    /// Why the run failed, if it did.
    pub fn failure(&self) -> Option<&RuntimeError> {
        self.host.failure.as_ref()
    }

    /// Whether the run finished (successfully or not).
    pub fn finished(&self) -> bool {
        self.host.done
    }

    /// The launch submitted and not completed, if any. The runtime runs one launch at a
    /// time, so this is all a run loses with its device; the launches before it completed
    /// ([`HostMeasurements::launches`]).
    pub fn pending_launch(&self) -> Option<PendingLaunch> {
        self.host.launch.as_ref().map(|launch| PendingLaunch {
            tag: launch.tag,
            kernel: launch.command.kernel,
            started: launch.started,
            result_length: launch.command.result_length,
            results_in: launch.finishing || launch.tracker.all_finished(),
        })
    }

    /// The AXLE ring (for tests that play the device's DMA into it).
    #[cfg(test)]
    pub(crate) fn ring(&self) -> Option<&AxleRing> {
        self.mechanism.ring()
    }

    // ----- launches -------------------------------------------------------------------------

    fn begin_next_launch(&mut self, now: Ticks, link: &mut dyn DeviceLink) {
        let plan = match self.host.app.next_launch() {
            Ok(Some(plan)) => plan,
            Ok(None) => {
                self.host.end_run(now);
                return;
            }
            Err(error) => {
                self.host.fail(now, error.into());
                return;
            }
        };
        if !self.host.started {
            self.host.started = true;
            self.host.measured.start = now;
        }
        if let Err(error) = self.start_launch(now, plan, link) {
            self.host.fail(now, error);
        }
    }

    fn start_launch(
        &mut self,
        now: Ticks,
        plan: LaunchPlan,
        link: &mut dyn DeviceLink,
    ) -> Result<(), RuntimeError> {
        let host = &mut self.host;
        host.next_tag += 1;
        let tag = host.next_tag;
        let mut command = plan.command;
        command.tag = tag;
        self.mechanism.prepare(&mut command);
        host.trace_instant(now, HostInstant::Launch { tag });
        let started = now;
        let now = host.store_inputs(now, &plan.inputs, link);
        let chunk = self.mechanism.chunk_bytes();
        host.scheduler
            .set_chains(plan.tasks.iter().map(|task| task.chain).collect());
        let tracker = LaunchTracker::new(plan.tasks, command.result_length, chunk)?;
        for task in tracker.initially_ready() {
            host.scheduler.ready(task);
        }
        host.launch = Some(Launch {
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
            host.mode.name(),
            now.as_ns()
        );
        self.mechanism.issue(host, now, &command, link)
    }

    // ----- responses ------------------------------------------------------------------------

    fn on_response(&mut self, now: Ticks, response: LinkResponse, link: &mut dyn DeviceLink) {
        if self.host.done {
            return;
        }
        self.mechanism
            .on_response(&mut self.host, now, response, link);
    }

    // ----- tasks ----------------------------------------------------------------------------

    fn start_ready_tasks(&mut self, now: Ticks) {
        let host = &mut self.host;
        while let Some((worker, task)) = host.scheduler.next_start() {
            let Some(launch) = host.launch.as_mut() else {
                host.scheduler.release(worker, None);
                return;
            };
            let Some(spec) = launch.tracker.tasks().get(task as usize).cloned() else {
                host.scheduler.release(worker, None);
                continue;
            };
            let bytes = &mut self.input;
            let read_time = match self
                .mechanism
                .task_input(&host.cost, launch, task, &spec, bytes)
            {
                Ok(Some(read_time)) => read_time,
                Ok(None) => return,
                Err(error) => {
                    host.fail(now, error);
                    return;
                }
            };
            let tag = launch.tag;
            let cost = match host.app.run_task(&spec, bytes) {
                Ok(cost) => cost,
                Err(error) => {
                    host.fail(now, error.into());
                    return;
                }
            };
            let duration = host
                .cost
                .work(cost)
                .plus(read_time)
                .plus(host.stretched(Stretch::TaskCompletion));
            host.trace_span(
                HostSpanKind::Task {
                    worker,
                    tag,
                    task,
                    needs: (spec.needs.start, spec.needs.end),
                },
                now,
                now.plus(duration),
            );
            host.host_busy.start(now);
            host.measured.tasks += 1;
            host.at(now.plus(duration), Timer::TaskDone { worker, task });
        }
    }

    fn task_done(&mut self, now: Ticks, worker: u32, task: u32, link: &mut dyn DeviceLink) {
        let host = &mut self.host;
        host.scheduler.release(worker, Some(task));
        host.host_busy.stop(now);
        host.last_progress = now;
        let Some(launch) = host.launch.as_mut() else {
            return;
        };
        launch.tracker.finish_into(task, &mut self.freed);
        if let Err(error) = self.mechanism.task_finished(host, now, &self.freed, link) {
            host.fail(now, error);
            return;
        }
        self.maybe_finish_launch(now);
    }

    fn maybe_finish_launch(&mut self, now: Ticks) {
        let host = &mut self.host;
        let Some(launch) = host.launch.as_mut() else {
            return;
        };
        if launch.finishing || !launch.tracker.all_finished() {
            return;
        }
        // (A failed run's mechanism may still be mid-step; it no longer waits.)
        if !host.done && self.mechanism.awaiting_results() {
            return;
        }
        let Some(worker) = host.scheduler.claim_any() else {
            return;
        };
        launch.finishing = true;
        let tag = launch.tag;
        let cost: HostCost = match host.app.finish_launch() {
            Ok(cost) => cost,
            Err(error) => {
                host.fail(now, error.into());
                return;
            }
        };
        let end = now.plus(host.cost.work(cost));
        host.trace_span(HostSpanKind::FinishLaunch { worker, tag }, now, end);
        host.host_busy.start(now);
        host.at(end, Timer::FinishDone { worker });
    }

    fn finish_done(&mut self, now: Ticks, worker: u32, link: &mut dyn DeviceLink) {
        let host = &mut self.host;
        host.scheduler.release(worker, None);
        host.host_busy.stop(now);
        host.measured.launches += 1;
        if let Some(launch) = host.launch.take() {
            if let Some(first) = launch.first_result {
                host.measured.first_result =
                    host.measured.first_result.plus(first.since(launch.started));
                host.measured.first_results += 1;
            }
        }
        self.mechanism.launch_finished();
        self.begin_next_launch(now, link);
    }

    fn fire(&mut self, now: Ticks, timer: Timer, link: &mut dyn DeviceLink) {
        match timer {
            Timer::Mode(timer) => self.mechanism.on_timer(&mut self.host, now, timer, link),
            Timer::TaskDone { worker, task } => self.task_done(now, worker, task, link),
            Timer::FinishDone { worker } => self.finish_done(now, worker, link),
        }
    }
}

impl<'a> Host<'a> {
    pub(crate) fn tracing(&self) -> bool {
        self.trace.is_some()
    }

    pub(crate) fn trace_span(&mut self, kind: HostSpanKind, start: Ticks, end: Ticks) {
        if let Some(trace) = self.trace.as_mut() {
            trace.span(kind, start, end);
        }
    }

    pub(crate) fn trace_instant(&mut self, at: Ticks, instant: HostInstant) {
        if let Some(trace) = self.trace.as_mut() {
            trace.instant(at, instant);
        }
    }

    /// The stress delay at `point` (none outside wall-clock stress).
    pub(crate) fn stretched(&mut self, point: Stretch) -> Ticks {
        self.stretch
            .as_mut()
            .map_or(Ticks::ZERO, |stretch| stretch(point))
    }

    /// Schedules `timer` at `at` (timers due at the same time fire in the order scheduled).
    pub(crate) fn at(&mut self, at: Ticks, timer: Timer) {
        self.timer_sequence += 1;
        self.timers.schedule(at, self.timer_sequence, timer);
    }

    /// [`Host::at`], returning the timer's key for [`Host::cancel`].
    pub(crate) fn at_cancellable(&mut self, at: Ticks, timer: Timer) -> TimerKey {
        self.timer_sequence += 1;
        let key = TimerKey(at, self.timer_sequence);
        self.timers.schedule_cancellable(key.0, key.1, timer);
        key
    }

    /// Removes the timer `key` if it has not fired.
    pub(crate) fn cancel(&mut self, key: TimerKey) {
        self.timers.cancel(key.0, key.1);
    }

    /// A fresh token for a link call that has a response.
    pub(crate) fn token(&mut self) -> u64 {
        self.next_token += 1;
        self.next_token
    }

    /// The run fails at `now` with `error` (the first failure is kept) and ends.
    pub(crate) fn fail(&mut self, now: Ticks, error: RuntimeError) {
        // The caller reports the failure (`Runtime::failure`); logging it as an error too would
        // print it twice, and in the middle of `axle eval`'s progress for an expected deadlock.
        log::debug!("runtime: {error}");
        if self.failure.is_none() {
            self.failure = Some(error);
        }
        self.end_run(now);
    }

    /// The device reported status `code` for the current launch: the run fails.
    pub(crate) fn device_error(&mut self, now: Ticks, code: u32) {
        let status = Status::try_from(code).ok();
        let tag = self.launch.as_ref().map_or(0, |l| l.tag);
        self.fail(now, RuntimeError::Device { tag, code, status });
    }

    /// Control-thread stall of `duration`.
    pub(crate) fn stall(&mut self, duration: Ticks) {
        self.measured.stall = self.measured.stall.plus(duration);
    }

    /// The control thread is busy for `duration` from `now` (or from when it frees up):
    /// counted as stall, and no poll or interrupt handler starts before it ends.
    pub(crate) fn occupy_control(&mut self, now: Ticks, duration: Ticks) {
        self.control_free = self.control_free.max(now).plus(duration);
        self.stall(duration);
    }

    /// The run ends at `now`: control-thread work still running then is not part of it.
    fn end_run(&mut self, now: Ticks) {
        self.measured.end = now;
        let overhang = self.control_free.since(now);
        self.measured.stall = self.measured.stall.since(overhang);
        self.done = true;
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
}

impl HostAgent for Runtime<'_> {
    fn deliver(&mut self, at: Ticks, response: LinkResponse) {
        self.inbox.push_back((at, response));
    }

    fn turn(&mut self, now: Ticks, link: &mut dyn DeviceLink) -> Wake {
        if !self.host.started && !self.host.done {
            self.begin_next_launch(now, link);
        }
        loop {
            if self.host.done {
                self.host.measured.host_busy = self.host.host_busy.total(now);
                return Wake::Done;
            }
            if let Some((_, response)) = self.inbox.pop_front() {
                self.on_response(now, response, link);
                continue;
            }
            if let Some(timer) = self.host.timers.pop_due(now) {
                self.fire(now, timer, link);
                continue;
            }
            self.start_ready_tasks(now);
            self.maybe_finish_launch(now);
            if self.host.done {
                // A task or the final step failed the run.
                continue;
            }
            if self.inbox.is_empty() && self.host.timers.first_at().is_none_or(|at| at > now) {
                // Nothing more to do now: `host.no_deadlock`'s spill, if the ring is stuck.
                if self.mechanism.settle(&mut self.host, now, link) {
                    continue;
                }
                break;
            }
        }
        self.host.measured.host_busy = self.host.host_busy.total(now);
        match self.host.timers.first_at() {
            Some(at) => Wake::At(at),
            None => Wake::OnResponse,
        }
    }
}

#[cfg(test)]
mod tests;
