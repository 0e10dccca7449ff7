//! BS, bulk synchronous (memory-centric, M²NDP): one synchronous CXL.mem launch store that
//! returns when the kernel completes, then the result load ([`super::bulk`]) behind the
//! barrier. The wait and the load are control-thread stall.

use super::{bulk, Mechanism, ModeTimer, TaskInput, BULK_CHUNK};
use crate::app::HostTask;
use crate::cost::CostModel;
use crate::runtime::{Host, Launch, RuntimeError};
use crate::trace::HostSpanKind;
use cosim_link::link::{DeviceLink, LinkResponse};
use shared_abi::{device_map, CommandDescriptor, LaunchMode, Status, Ticks};
use zerocopy::IntoBytes;

/// What the control thread is doing for the launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Nothing outstanding.
    Idle,
    /// Waiting for the synchronous launch's response.
    Launched { issued: Ticks },
    /// Loading results.
    Loading { issued: Ticks },
}

/// The BS mechanism.
#[derive(Debug)]
pub(crate) struct Bs {
    state: State,
}

impl Bs {
    pub(crate) fn new() -> Bs {
        Bs { state: State::Idle }
    }
}

impl Mechanism for Bs {
    fn prepare(&self, command: &mut CommandDescriptor) {
        command.mode = LaunchMode::BulkSynchronous as u32;
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
        link.mem_store_synchronous(now, device_map::LAUNCH_WINDOW, command.as_bytes(), token);
        self.state = State::Launched { issued: now };
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
            (State::Launched { issued }, LinkResponse::StoreDone { status, .. }) => {
                host.stall(now.since(issued));
                let tag = host.launch.as_ref().map_or(0, |launch| launch.tag);
                host.trace_span(HostSpanKind::BulkWait { tag }, issued, now);
                if status != Status::Ok.code() {
                    host.device_error(now, status);
                    return;
                }
                if let Some(issued) = bulk::load_results(host, now, link) {
                    self.state = State::Loading { issued };
                }
            }
            (State::Loading { issued }, LinkResponse::LoadDone { data, .. }) => {
                if bulk::results_loaded(host, now, issued, data) {
                    self.state = State::Idle;
                }
            }
            (_, LinkResponse::Interrupt { .. }) => {}
            (state, response) => {
                log::warn!("runtime: unexpected {response:?} while BS {state:?}");
            }
        }
    }

    fn on_timer(&mut self, _: &mut Host<'_>, _: Ticks, _: ModeTimer, _: &mut dyn DeviceLink) {}

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
