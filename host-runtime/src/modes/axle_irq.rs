//! AXLE_Interrupt: AXLE with the local poll replaced by an interrupt per DMA request. The
//! handler does what one poll does ([`crate::poller`]), at the same cost, after the interrupt
//! handling latency (a delay, not host work), taking only the records below the tail the
//! interrupt announces. It runs in interrupt context on the core the interrupt is delivered
//! to, not on the control thread, and the flow-control stores are issued by the workers that
//! free the slots: neither waits for the control thread. Launches, the tasks' reads and the
//! release of slots are AXLE's ([`super::axle::Stream`]). There is no poll, so no stall
//! check either: a run that stops making progress ends at the co-simulation's limits.

use super::axle::{AxleRing, State, Stream};
use super::{Mechanism, ModeTimer, TaskInput};
use crate::app::HostTask;
use crate::cost::CostModel;
use crate::runtime::{Host, Launch, RuntimeError};
use cosim_link::link::{DeviceLink, LinkResponse};
use shared_abi::command::CommandFlags;
use shared_abi::{CommandDescriptor, Ticks};

/// The AXLE_Interrupt mechanism.
#[derive(Debug)]
pub(crate) struct AxleIrq {
    stream: Stream,
}

impl AxleIrq {
    pub(crate) fn new(ring: Option<AxleRing>) -> AxleIrq {
        AxleIrq {
            stream: Stream::new(ring, true),
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
        self.stream.post_launch(host, now, command, link)
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
        if let ModeTimer::PollDone { batch } = timer {
            self.stream.poller.poll_done(host, now, batch, link);
        }
    }

    fn task_input(
        &self,
        cost: &CostModel,
        launch: &Launch,
        task: u32,
        spec: &HostTask,
    ) -> Result<TaskInput, RuntimeError> {
        self.stream.task_input(cost, launch, task, spec)
    }

    fn task_finished(
        &mut self,
        host: &mut Host<'_>,
        now: Ticks,
        freed: Vec<u64>,
        link: &mut dyn DeviceLink,
    ) -> Result<(), RuntimeError> {
        self.stream.consume(freed)?;
        // No poller: the worker that freed slots sends the heads.
        self.stream.poller.send_flow_control(host, now, link);
        Ok(())
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
