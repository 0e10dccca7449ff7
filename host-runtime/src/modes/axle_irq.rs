//! AXLE_Interrupt: AXLE with the local poll replaced by an interrupt per DMA request. The
//! handler does what one poll does ([`crate::poller`]), at the same cost, after the interrupt
//! handling latency (a delay, not host work), taking only the records below the tail the
//! interrupt announces. It runs in interrupt context on the core the interrupt is delivered
//! to, not on the control thread, and the flow-control stores are issued by the workers that
//! free the slots: neither waits for the control thread. Launches, the tasks' reads and the
//! release of slots are AXLE's ([`super::axle::Stream`]).
//!
//! There is no poll to check for a stalled run, so a watchdog timer does AXLE's check
//! (`Stream::check_stalled`, the same test and the same words): while a launch has results
//! to come, a timer stands at the stall timeout after the last progress (a record, a task's
//! end, the launch store), moved each time progress is made; when it fires with no host task
//! running, no record and no task for longer than `host.stall_timeout_ns` is a deadlock when
//! the ring is full of held slots, a stall otherwise. The timer is moved, not re-armed
//! behind the old one, so a run that makes progress never takes a turn for it: it changes
//! nothing in a run that does not stall. (Without it, a ring too small for the dependency
//! pattern ended at the emulator's "deadlock at": the host waited for an interrupt that
//! never came.)

use super::axle::{AxleRing, State, Stream};
use super::{Mechanism, ModeTimer, TaskInput};
use crate::app::HostTask;
use crate::cost::CostModel;
use crate::runtime::{Host, Launch, RuntimeError, Timer, TimerKey};
use cosim_link::link::{DeviceLink, LinkResponse};
use shared_abi::command::CommandFlags;
use shared_abi::{CommandDescriptor, Ticks};

/// The AXLE_Interrupt mechanism.
#[derive(Debug)]
pub(crate) struct AxleIrq {
    stream: Stream,
    /// The stall check's timer, while a launch has results to come.
    watchdog: Option<TimerKey>,
}

impl AxleIrq {
    pub(crate) fn new(ring: Option<AxleRing>, no_deadlock: bool) -> AxleIrq {
        AxleIrq {
            stream: Stream::new(ring, true, no_deadlock),
            watchdog: None,
        }
    }

    /// Moves the stall check to the stall timeout after the last progress, if a launch
    /// streams and has results to come and that time is after `now`; removes it otherwise (a
    /// host task that runs past it re-arms it when it ends).
    fn rearm(&mut self, host: &mut Host<'_>, now: Ticks) {
        let outstanding = host
            .launch
            .as_ref()
            .is_some_and(|launch| !launch.tracker.all_arrived());
        let due = host
            .last_progress
            .plus(Ticks::from_ns(host.config.stall_timeout_ns))
            .plus(Ticks::from_ns(1));
        let wanted = (self.stream.state == State::Streaming && !host.done && outstanding)
            .then_some(due)
            .filter(|&due| due > now);
        if self.watchdog.map(TimerKey::at) == wanted {
            return;
        }
        if let Some(key) = self.watchdog.take() {
            host.cancel(key);
        }
        if let Some(due) = wanted {
            self.watchdog = Some(host.at_cancellable(due, Timer::Mode(ModeTimer::StallCheck)));
        }
    }
}

impl Mechanism for AxleIrq {
    fn prepare(&self, command: &mut CommandDescriptor) {
        Stream::prepare(command);
        command.flags |= CommandFlags::INTERRUPT.bits();
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
        self.rearm(host, now);
        Ok(())
    }

    fn on_response(
        &mut self,
        host: &mut Host<'_>,
        now: Ticks,
        response: LinkResponse,
        _link: &mut dyn DeviceLink,
    ) {
        match (self.stream.state, response) {
            (State::Streaming, LinkResponse::Interrupt { message }) => {
                // The handler consumes the records of the request that interrupted.
                self.stream.poller.poll(host, now, Some(message));
                self.rearm(host, now);
            }
            (_, LinkResponse::Interrupt { .. }) => {}
            (state, response) => {
                log::warn!("runtime: unexpected {response:?} while AXLE_Interrupt {state:?}");
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
            ModeTimer::PollDone { batch } => {
                self.stream.poller.poll_done(host, now, batch, link);
                self.rearm(host, now);
            }
            ModeTimer::StallCheck => {
                self.watchdog = None;
                if self.stream.state == State::Streaming && !host.done {
                    self.stream.check_stalled(host, now);
                    self.rearm(host, now);
                }
            }
            ModeTimer::LocalPoll | ModeTimer::RemotePoll => {}
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
        link: &mut dyn DeviceLink,
    ) -> Result<(), RuntimeError> {
        self.stream.consume(freed)?;
        // No poller: the worker that freed slots sends the heads.
        self.stream.poller.send_flow_control(host, now, link);
        self.rearm(host, now);
        Ok(())
    }

    fn settle(&mut self, host: &mut Host<'_>, now: Ticks, link: &mut dyn DeviceLink) -> bool {
        let spilled = self.stream.relieve(host, now, link);
        if spilled {
            self.rearm(host, now);
        }
        spilled
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
}
