//! AXLE, asynchronous back-streaming with local polling: a posted launch store; the
//! [`crate::poller`] reads the local metadata tail every polling interval while results are
//! due and moves the new records to the ready pool as one batch; tasks run as their bytes
//! arrive and read their records and payload slots; slots are released gap-aware and the
//! heads flow back in batches after the polls.
//!
//! Polling starts one interval after a launch store and stops once every result of the
//! launch has arrived (the paper's implicit completion detection, section IV-B: every
//! downstream host task is triggered); the next launch's first poll sends the heads freed
//! meanwhile. Each local poll also checks for a stalled run: no record and no task for longer
//! than `host.stall_timeout_ns` is a deadlock when the ring is full, a stall otherwise.
//!
//! `Stream` is what AXLE shares with AXLE_Interrupt (`super::axle_irq`): the ring (its
//! host end, [`AxleRing`], in `ring`), its programming, the posted launch store, the tasks'
//! reads of records and payloads, the release of slots when tasks finish, and the stall check
//! (which AXLE_Interrupt runs from a timer, having no polls).

mod ring;

pub use ring::{AxleRing, AxleRingError, RingState, SpilledPayload};

use super::{Mechanism, ModeTimer, TaskInput, BULK_CHUNK};
use crate::adaptive_poll::{first_record_bound, AdaptivePoll, DeviceDatasheet, PollFacts};
use crate::app::HostTask;
use crate::config::{HostConfig, PollPolicy};
use crate::cost::CostModel;
use crate::overflow::{spill_due, Overflow, SpillFacts};
use crate::poller::Poller;
use crate::runtime::{Host, Launch, RuntimeError, Stretch, Timer};
use crate::trace::{HostInstant, HostSpanKind};
use cosim_link::link::{DeviceLink, LinkResponse};
use shared_abi::region::METADATA_RECORD_SIZE;
use shared_abi::{device_map, CommandDescriptor, LaunchMode, Ticks};
use std::collections::VecDeque;
use zerocopy::IntoBytes;

/// Whether a launch streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// No launch outstanding.
    Idle,
    /// A launch's results stream in.
    Streaming,
}

/// What both back-streaming modes hold: the poller over the ring, and whether the ring is
/// programmed.
#[derive(Debug)]
pub(crate) struct Stream {
    pub(crate) poller: Poller,
    programmed: bool,
    pub(crate) state: State,
    /// `host.no_deadlock`: the overflow buffer (`None`: off, the paper's behaviour).
    overflow: Option<Overflow>,
    /// AXLE_Interrupt: no control thread does the spills (see [`Stream::relieve`]).
    interrupts: bool,
}

impl Stream {
    /// The stream over `ring`; `interrupts`: AXLE_Interrupt; `no_deadlock`: with the overflow
    /// buffer.
    pub(crate) fn new(ring: Option<AxleRing>, interrupts: bool, no_deadlock: bool) -> Stream {
        Stream {
            poller: Poller::new(ring, interrupts),
            programmed: false,
            state: State::Idle,
            overflow: no_deadlock.then(Overflow::new),
            interrupts,
        }
    }

    /// `host.no_deadlock`: when the host can do nothing more and the ring is full of the slots
    /// it holds (`crate::overflow::spill_due`), moves the held records and payloads into the
    /// overflow buffer, releases their slots and sends the heads. In AXLE the control thread
    /// copies (it waits for the thread to be free, and occupies it); in AXLE_Interrupt the
    /// worker or handler that found the ring full, as it sends flow control. Either way host
    /// core stall. Returns whether it spilled.
    pub(crate) fn relieve(
        &mut self,
        host: &mut Host<'_>,
        now: Ticks,
        link: &mut dyn DeviceLink,
    ) -> bool {
        let (Some(overflow), Some(ring)) = (self.overflow.as_mut(), self.poller.ring.as_mut())
        else {
            return false;
        };
        let Some(launch) = host.launch.as_ref() else {
            return false;
        };
        let facts = SpillFacts {
            results_to_come: !launch.tracker.all_arrived(),
            capacity: ring.payload_capacity(),
            held: ring.held_slots(),
            pooled: ring.pool().len(),
            running: host.scheduler.running(),
        };
        if host.done || !spill_due(facts) {
            return false;
        }
        let (copies, read) = match ring.spill_held() {
            Ok(spilled) => spilled,
            Err(error) => {
                host.fail(now, RuntimeError::Ring(error));
                return false;
            }
        };
        if copies.is_empty() {
            // Nothing to move (cannot happen with a ring of at least one slot): the stall
            // check reports it.
            return false;
        }
        // Read from the uncached region, written to ordinary memory.
        let duration = host
            .cost
            .uncached_stream(read)
            .plus(host.cost.cached_read(read));
        let spilled = copies.len();
        overflow.keep(copies, read);
        let start = if self.interrupts {
            host.stall(duration);
            now
        } else {
            let start = host.control_free.max(now);
            host.occupy_control(now, duration);
            start
        };
        let done = start.plus(duration);
        host.trace_span(HostSpanKind::OverflowSpill { bytes: read }, start, done);
        host.measured.overflow_spills = overflow.spills();
        host.measured.overflow_bytes = overflow.bytes();
        host.measured.overflow = host.measured.overflow.plus(duration);
        host.last_progress = now;
        log::debug!(
            "runtime: ring full of held slots at {} ns: {spilled} payloads ({read} bytes) spilled into the overflow buffer",
            now.as_ns()
        );
        self.poller.send_flow_control(host, done, link);
        true
    }

    /// A payload slot's size (the bulk chunk without a ring).
    pub(crate) fn chunk_bytes(&self) -> u64 {
        match &self.poller.ring {
            Some(ring) => u64::from(ring.slot_size()),
            None => BULK_CHUNK,
        }
    }

    /// The launch mode of a streaming launch.
    pub(crate) fn prepare(command: &mut CommandDescriptor) {
        command.mode = LaunchMode::BackStreaming as u32;
    }

    /// Programs the ring on the first launch, then posts the launch store (control-thread
    /// stall).
    pub(crate) fn post_launch(
        &mut self,
        host: &mut Host<'_>,
        now: Ticks,
        command: &CommandDescriptor,
        link: &mut dyn DeviceLink,
    ) -> Result<(), RuntimeError> {
        if !self.programmed {
            self.program_ring(now, link)?;
        }
        link.mem_store(now, device_map::LAUNCH_WINDOW, command.as_bytes());
        let posted = Ticks::from_ns(host.config.posted_store_ns);
        let start = host.control_free.max(now);
        let tag = command.tag;
        host.trace_span(HostSpanKind::LaunchStore { tag }, start, start.plus(posted));
        host.occupy_control(now, posted);
        self.state = State::Streaming;
        host.last_progress = now;
        Ok(())
    }

    /// Programs the shadow descriptors with CXL.mem stores (the driver's part of attach).
    fn program_ring(&mut self, now: Ticks, link: &mut dyn DeviceLink) -> Result<(), RuntimeError> {
        let ring = self
            .poller
            .ring
            .as_mut()
            .ok_or(RuntimeError::Ring(AxleRingError::NoRing))?;
        for (address, bytes) in ring.take_setup_stores().unwrap_or_default() {
            link.mem_store(now, address, &bytes);
        }
        self.programmed = true;
        Ok(())
    }

    /// The task reads the records of the chunks it needs with their payload slots: one
    /// streaming read of the uncached region, into `bytes`.
    pub(crate) fn task_input(
        &self,
        cost: &CostModel,
        launch: &Launch,
        task: u32,
        spec: &HostTask,
        bytes: &mut Vec<u8>,
    ) -> Result<TaskInput, RuntimeError> {
        let Some(ring) = self.poller.ring.as_ref() else {
            return Ok(None);
        };
        let chunks = launch.tracker.chunks_of(task);
        let records = chunks.len() as u64 * METADATA_RECORD_SIZE;
        match ring.gather_into(chunks, &spec.needs, self.overflow.as_ref(), bytes) {
            Ok(read) => Ok(Some(cost.uncached_stream(records + read))),
            Err(error) => Err(RuntimeError::Ring(error)),
        }
    }

    /// Releases the slots of the payloads no task reads any more (and their records).
    pub(crate) fn consume(&mut self, freed: &[u64]) -> Result<(), RuntimeError> {
        if let Some(ring) = self.poller.ring.as_mut() {
            for &index in freed {
                // A spilled payload's slot was released when it was spilled: drop the copy.
                if self
                    .overflow
                    .as_mut()
                    .is_some_and(|overflow| overflow.held() > 0 && overflow.release(index))
                {
                    continue;
                }
                ring.consume(index).map_err(RuntimeError::Ring)?;
            }
        }
        Ok(())
    }

    /// No record and no host task for longer than the stall timeout: a deadlock when the ring
    /// is full of held slots, a stall otherwise. Fails the run then.
    pub(crate) fn check_stalled(&self, host: &mut Host<'_>, now: Ticks) {
        if now.since(host.last_progress) <= Ticks::from_ns(host.config.stall_timeout_ns) {
            return;
        }
        if host.scheduler.running() > 0 {
            return;
        }
        let (tasks, bytes) = host
            .launch
            .as_ref()
            .map_or((0, 0), |launch| launch.tracker.starving());
        let ring = self.poller.ring.as_ref();
        let held = ring.map_or(0, AxleRing::held_slots);
        let capacity = ring.map_or(0, AxleRing::payload_capacity);
        let waited = now.since(host.last_progress).as_ns();
        let timeout = host.config.stall_timeout_ns;
        let clock = if host.real_clock { " of wall time" } else { "" };
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
            let minimum = crate::overflow::MINIMUM_SLOTS;
            let way_out = if self.overflow.is_some() {
                format!(
                    "the overflow buffer (--no-deadlock) could not free a slot: the ring needs at least {minimum} payload slot, the largest single result a task needs at once"
                )
            } else {
                format!(
                    "the ring is too small for this dependency pattern: enlarge --slots, stream in order, or pass --no-deadlock (host.no_deadlock), which streams on with any ring of at least {minimum} slot"
                )
            };
            RuntimeError::Deadlock {
                at_ns: now.as_ns(),
                diagnosis: format!(
                    "{facts}: the ring is full of slots that partially satisfied tasks hold ({way_out})"
                ),
            }
        } else {
            let device = if host.real_clock {
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
        host.fail(now, error);
    }
}

/// The AXLE mechanism.
#[derive(Debug)]
pub(crate) struct Axle {
    stream: Stream,
    /// A local poll is scheduled.
    poll_scheduled: bool,
    /// `--poll adaptive`: the schedule, and when the next poll is due (a poll timer due at
    /// another time was superseded: brought forward by a task's end, rule 3). `None`: fixed
    /// interval, the paper's polling.
    adaptive: Option<(AdaptivePoll, Ticks)>,
    /// `host.poll_policy = "oracle"`: the poll times still to come (a study, not a schedule
    /// a host can run: [`crate::Runtime::set_poll_script`]). `None`: another policy.
    script: Option<VecDeque<Ticks>>,
    /// `--poll adaptive`: the device's published figures, for the bound on a launch's first
    /// record (`None`: no bound, the blind interval from the store).
    datasheet: Option<DeviceDatasheet>,
}

impl Axle {
    pub(crate) fn new(ring: Option<AxleRing>, config: &HostConfig) -> Axle {
        let adaptive = (config.poll_policy == PollPolicy::Adaptive).then(|| {
            let schedule = AdaptivePoll::new(
                Ticks::from_ns(config.poll_interval_ns),
                Ticks::from_ns(config.adaptive_poll_longest_ns),
                Ticks::from_ns(config.uncached_load_ns),
            );
            (schedule, Ticks::NEVER)
        });
        Axle {
            stream: Stream::new(ring, false, config.no_deadlock),
            poll_scheduled: false,
            adaptive,
            script: (config.poll_policy == PollPolicy::Oracle).then(VecDeque::new),
            datasheet: None,
        }
    }

    /// The oracle's next poll time at or after `at`, dropping the ones before; `None` with
    /// another policy, or once the script is spent.
    fn scripted(&mut self, at: Ticks) -> Option<Ticks> {
        let script = self.script.as_mut()?;
        while script.front().is_some_and(|&time| time < at) {
            script.pop_front();
        }
        script.front().copied()
    }

    /// Schedules the next local poll at `at`.
    fn schedule_poll(&mut self, host: &mut Host<'_>, at: Ticks) {
        self.poll_scheduled = true;
        if let Some((_, due)) = self.adaptive.as_mut() {
            *due = at;
        }
        host.at(at, Timer::Mode(ModeTimer::LocalPoll));
    }

    /// Whether a task still waiting for bytes could start at once if they arrived now (adaptive
    /// rule 3: otherwise a record seen sooner starts nothing sooner), counting the free workers
    /// and idle chains that the ready tasks take first as busy.
    fn bytes_would_start_a_task(host: &Host<'_>) -> bool {
        host.launch.as_ref().is_some_and(|launch| {
            host.scheduler
                .could_any_start_now(launch.tracker.waiting_for_bytes())
        })
    }

    /// What the adaptive schedule needs to know after a poll that `found_records`.
    fn facts(&self, host: &Host<'_>, found_records: bool) -> PollFacts {
        let ring_filling = self.stream.poller.ring.as_ref().is_some_and(|ring| {
            let capacity = ring.payload_capacity();
            capacity > 0 && ring.unreturned_slots().saturating_mul(2) > capacity
        });
        let (arrived, chunks) = host
            .launch
            .as_ref()
            .map_or((0, 0), |launch| launch.tracker.progress());
        PollFacts {
            found_records,
            backlog: !Self::bytes_would_start_a_task(host),
            ring_filling,
            arrived,
            chunks,
        }
    }
}

impl Mechanism for Axle {
    fn prepare(&self, command: &mut CommandDescriptor) {
        Stream::prepare(command);
    }

    fn chunk_bytes(&self) -> u64 {
        self.stream.chunk_bytes()
    }

    fn issue(
        &mut self,
        host: &mut Host<'_>,
        now: Ticks,
        command: &CommandDescriptor,
        link: &mut dyn DeviceLink,
    ) -> Result<(), RuntimeError> {
        self.stream.post_launch(host, now, command, link)?;
        if let Some((schedule, _)) = self.adaptive.as_mut() {
            let bound = self
                .datasheet
                .map_or(Ticks::ZERO, |sheet| first_record_bound(&sheet, command));
            let first = schedule.first_poll_after_launch(now, bound);
            if bound > Ticks::ZERO {
                host.trace_instant(
                    now.plus(bound),
                    HostInstant::FirstRecordBound { tag: command.tag },
                );
            }
            self.schedule_poll(host, now.plus(first));
        } else if !self.poll_scheduled {
            let at = match self.scripted(now) {
                Some(at) => at,
                None => now.plus(Ticks::from_ns(host.config.poll_interval_ns)),
            };
            self.poll_scheduled = true;
            host.at(at, Timer::Mode(ModeTimer::LocalPoll));
        }
        Ok(())
    }

    fn on_response(
        &mut self,
        _host: &mut Host<'_>,
        _now: Ticks,
        response: LinkResponse,
        _link: &mut dyn DeviceLink,
    ) {
        match response {
            LinkResponse::Interrupt { .. } => {}
            response => {
                let state = self.stream.state;
                log::warn!("runtime: unexpected {response:?} while AXLE {state:?}");
            }
        }
    }

    fn on_timer(
        &mut self,
        host: &mut Host<'_>,
        now: Ticks,
        timer: ModeTimer,
        link: &mut dyn DeviceLink,
    ) {
        match timer {
            ModeTimer::LocalPoll => {
                if self.adaptive.is_some_and(|(_, due)| due != now) {
                    // Superseded: the poll was brought forward (or put back) since.
                    return;
                }
                if host.done {
                    self.poll_scheduled = false;
                    return;
                }
                if host.control_free > now {
                    // The control thread is busy: the poll starts when it frees up.
                    let free = host.control_free;
                    self.schedule_poll(host, free);
                    return;
                }
                self.poll_scheduled = false;
                self.stream.poller.poll(host, now, None);
                self.stream.check_stalled(host, now);
            }
            ModeTimer::PollDone { batch } => {
                self.stream.poller.poll_done(host, now, batch, link);
                // Once every result of the launch has arrived, nothing more can come until the
                // next launch (the paper's implicit completion detection: every downstream host
                // task has been triggered); the next launch starts polling again, and its
                // first poll sends the heads freed meanwhile.
                let outstanding = host
                    .launch
                    .as_ref()
                    .is_some_and(|launch| !launch.tracker.all_arrived());
                if !host.done && !self.poll_scheduled && outstanding {
                    // The next poll starts one interval after this one did, or at once if the
                    // poll took longer than the interval.
                    // The adaptive schedule's facts scan the launch's waiting tasks: only
                    // gathered when the schedule is adaptive, never on the paper's fixed path.
                    let started = self.stream.poller.started;
                    let interval = if self.adaptive.is_some() {
                        let facts = self.facts(host, batch);
                        match self.adaptive.as_mut() {
                            Some((schedule, _)) => schedule.next_interval(started, facts),
                            None => Ticks::from_ns(host.config.poll_interval_ns),
                        }
                    } else {
                        Ticks::from_ns(host.config.poll_interval_ns)
                    };
                    // The oracle polls at its next time after this poll's start instead.
                    let after = started.plus(Ticks(1));
                    let next = match self.scripted(after) {
                        Some(at) => at,
                        None => started.plus(interval),
                    };
                    self.poll_scheduled = true;
                    let next = next
                        .max(host.control_free)
                        .max(now)
                        .plus(host.stretched(Stretch::Poll));
                    self.schedule_poll(host, next);
                }
            }
            ModeTimer::RemotePoll | ModeTimer::StallCheck => {}
        }
    }

    fn task_input(
        &self,
        cost: &CostModel,
        launch: &Launch,
        task: u32,
        spec: &HostTask,
        bytes: &mut Vec<u8>,
    ) -> Result<TaskInput, RuntimeError> {
        self.stream.task_input(cost, launch, task, spec, bytes)
    }

    fn task_finished(
        &mut self,
        host: &mut Host<'_>,
        now: Ticks,
        freed: &[u64],
        _link: &mut dyn DeviceLink,
    ) -> Result<(), RuntimeError> {
        self.stream.consume(freed)?;
        if !self.poll_scheduled || host.done {
            return Ok(());
        }
        let Some((mut schedule, due)) = self.adaptive else {
            return Ok(());
        };
        // Adaptive rule 3: a poll put back because no task could use new bytes comes forward
        // now that one can (a worker freed up that no ready task takes: this runs before the
        // runtime hands the ready tasks out, and the scheduler counts them first).
        let after = if Self::bytes_would_start_a_task(host) {
            schedule.backlog_cleared()
        } else {
            None
        };
        if let Some((stored, _)) = self.adaptive.as_mut() {
            *stored = schedule;
        }
        if let Some(after) = after {
            let soonest = self
                .stream
                .poller
                .started
                .plus(after)
                .max(host.control_free)
                .max(now);
            if soonest < due {
                self.schedule_poll(host, soonest);
            }
        }
        Ok(())
    }

    fn settle(&mut self, host: &mut Host<'_>, now: Ticks, link: &mut dyn DeviceLink) -> bool {
        self.stream.relieve(host, now, link)
    }

    fn awaiting_results(&self) -> bool {
        false
    }

    fn launch_finished(&mut self) {
        self.stream.state = State::Idle;
    }

    fn ring(&self) -> Option<&AxleRing> {
        self.stream.poller.ring.as_ref()
    }

    fn set_device_datasheet(&mut self, sheet: DeviceDatasheet) {
        if self.adaptive.is_some() {
            self.datasheet = Some(sheet);
        }
    }

    fn set_poll_script(&mut self, mut times: Vec<Ticks>) {
        if let Some(script) = self.script.as_mut() {
            times.sort_unstable();
            times.dedup();
            *script = times.into();
        }
    }
}
