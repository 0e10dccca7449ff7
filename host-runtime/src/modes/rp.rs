//! RP, remote polling (device-centric): the descriptor goes to the device by a CXL.mem store,
//! the doorbell by a CXL.io write; the control thread polls the mailbox status over CXL.io
//! every remote polling interval, dequeues the completion, then loads the result with CXL.mem
//! loads ([`super::bulk`]). Every step is control-thread stall.

use super::{bulk, Mechanism, ModeTimer, TaskInput, BULK_CHUNK};
use crate::app::HostTask;
use crate::cost::CostModel;
use crate::runtime::{Host, Launch, RuntimeError, Timer};
use crate::trace::{HostInstant, HostSpanKind};
use cosim_link::link::{DeviceLink, LinkResponse};
use shared_abi::{device_map, mailbox, CommandDescriptor, LaunchMode, Status, Ticks};
use zerocopy::IntoBytes;

/// What the control thread is doing for the launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Nothing outstanding.
    Idle,
    /// Waiting for the descriptor store's acknowledgement.
    Descriptor { issued: Ticks },
    /// Kernel running; polls every interval.
    Running,
    /// A poll is outstanding.
    Polling { issued: Ticks },
    /// Loading results.
    Loading { issued: Ticks },
}

/// The RP mechanism.
#[derive(Debug)]
pub(crate) struct Rp {
    state: State,
}

impl Rp {
    pub(crate) fn new() -> Rp {
        Rp { state: State::Idle }
    }
}

impl Mechanism for Rp {
    fn prepare(&self, command: &mut CommandDescriptor) {
        command.mode = LaunchMode::RemotePolling as u32;
    }

    fn chunk_bytes(&self) -> u64 {
        BULK_CHUNK
    }

    fn issue(
        &mut self,
        host: &mut Host<'_>,
        now: Ticks,
        command: &CommandDescriptor,
        link: &mut dyn DeviceLink,
    ) -> Result<(), RuntimeError> {
        let token = host.token();
        link.mem_store_synchronous(now, device_map::RP_DESCRIPTOR, command.as_bytes(), token);
        self.state = State::Descriptor { issued: now };
        Ok(())
    }

    fn on_response(
        &mut self,
        host: &mut Host<'_>,
        now: Ticks,
        response: LinkResponse,
        link: &mut dyn DeviceLink,
    ) {
        match (self.state, response) {
            (State::Descriptor { issued }, LinkResponse::StoreDone { .. }) => {
                host.stall(now.since(issued));
                let tag = host.launch.as_ref().map_or(0, |launch| launch.tag);
                host.trace_span(HostSpanKind::DescriptorStore { tag }, issued, now);
                host.trace_instant(now, HostInstant::Doorbell);
                link.io_write(now, mailbox::DOORBELL, device_map::RP_DESCRIPTOR.0);
                host.stall(Ticks::from_ns(host.config.posted_store_ns));
                self.state = State::Running;
                host.at(
                    now.plus(Ticks::from_ns(host.config.remote_poll_interval_ns)),
                    Timer::Mode(ModeTimer::RemotePoll),
                );
            }
            (State::Polling { issued }, LinkResponse::IoReadDone { value, .. }) => {
                host.stall(now.since(issued));
                let complete = value & 0xffff_ffff == mailbox::status::COMPLETE;
                let tag = host.launch.as_ref().map_or(0, |launch| launch.tag);
                host.trace_span(HostSpanKind::RemotePoll { complete, tag }, issued, now);
                if complete {
                    let code = (value >> 32) as u32;
                    if code != Status::Ok.code() {
                        host.device_error(now, code);
                        return;
                    }
                    host.trace_instant(now, HostInstant::Dequeue);
                    link.io_write(now, mailbox::DEQUEUE, 1);
                    host.stall(Ticks::from_ns(host.config.posted_store_ns));
                    if let Some(issued) = bulk::load_results(host, now, link) {
                        self.state = State::Loading { issued };
                    }
                } else {
                    self.state = State::Running;
                    let next = issued
                        .plus(Ticks::from_ns(host.config.remote_poll_interval_ns))
                        .max(now);
                    host.at(next, Timer::Mode(ModeTimer::RemotePoll));
                }
            }
            (State::Loading { issued }, LinkResponse::LoadDone { data, .. }) => {
                if bulk::results_loaded(host, now, issued, data) {
                    self.state = State::Idle;
                }
            }
            (_, LinkResponse::Interrupt { .. }) => {}
            (state, response) => {
                log::warn!("runtime: unexpected {response:?} while RP {state:?}");
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
        if timer == ModeTimer::RemotePoll && self.state == State::Running {
            let token = host.token();
            link.io_read(now, mailbox::STATUS, token);
            self.state = State::Polling { issued: now };
        }
    }

    fn task_input(
        &self,
        cost: &CostModel,
        launch: &Launch,
        _task: u32,
        spec: &HostTask,
        bytes: &mut Vec<u8>,
    ) -> Result<TaskInput, RuntimeError> {
        Ok(Some(bulk::task_input(cost, launch, spec, bytes)))
    }

    fn task_finished(
        &mut self,
        _host: &mut Host<'_>,
        _now: Ticks,
        _freed: &[u64],
        _link: &mut dyn DeviceLink,
    ) -> Result<(), RuntimeError> {
        Ok(())
    }

    fn awaiting_results(&self) -> bool {
        self.state != State::Idle
    }

    fn launch_finished(&mut self) {
        self.state = State::Idle;
    }

    fn ring(&self) -> Option<&super::axle::AxleRing> {
        None
    }
}
