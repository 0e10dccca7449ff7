//! The four offload mechanisms, one module each, behind one trait the runtime drives.
//!
//! [`crate::runtime`] holds what every mechanism shares (the control thread's clock, the
//! timers, the scheduler and workers, the launch being run, the measurements) and runs the
//! launches and the host tasks; a `Mechanism` holds its own state and decides how a launch
//! is issued and how its results reach the tasks:
//!
//! | module | mechanism | its state |
//! |--------|-----------|-----------|
//! | `rp` | remote polling: descriptor store, doorbell, CXL.io polls, dequeue, result load | the control thread's RP step |
//! | `bs` | bulk synchronous: one synchronous launch store, then the result load | the control thread's BS step |
//! | [`axle`] | back-streaming with local polling (the [`crate::poller`] every interval) | the ring, the poll schedule |
//! | `axle_irq` | back-streaming with an interrupt handler per DMA request | the ring |
//!
//! `bulk` is the result load RP and BS share; [`axle`] also holds what AXLE_Interrupt
//! shares with AXLE (the ring, its programming, the posted launch, the tasks' reads).

pub mod axle;
pub(crate) mod axle_irq;
pub(crate) mod bs;
pub(crate) mod bulk;
pub(crate) mod rp;

use crate::app::HostTask;
use crate::cost::CostModel;
use crate::runtime::{Host, Launch, Mode, RuntimeError};
use axle::AxleRing;
use cosim_link::link::{DeviceLink, LinkResponse};
use shared_abi::{CommandDescriptor, Ticks};

/// A mechanism's own timers (the runtime's are task and launch ends).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ModeTimer {
    /// RP: the next CXL.io poll of the mailbox status.
    RemotePoll,
    /// AXLE: the next local poll.
    LocalPoll,
    /// A poll or interrupt handler ends; `batch`: it pushed a batch into the ready pool.
    PollDone {
        /// Whether the poll pushed a batch.
        batch: bool,
    },
    /// AXLE_Interrupt: no record and no host task for the stall timeout (the check AXLE's
    /// local polls make).
    StallCheck,
}

/// How long reading a task's bytes takes (the bytes go into the buffer the runtime passes);
/// `None`: the task cannot be read (a streaming mode without a ring), and no task starts.
pub(crate) type TaskInput = Option<Ticks>;

/// One offload mechanism, as the runtime drives it. Every method runs at `now` on the host's
/// virtual clock; what it charges and in which order is the model (see [`crate::runtime`]).
pub(crate) trait Mechanism: std::fmt::Debug {
    /// Sets the command's launch mode and flags.
    fn prepare(&self, command: &mut CommandDescriptor);

    /// Bytes per result chunk, as the launch tracker counts arrivals.
    fn chunk_bytes(&self) -> u64;

    /// Issues the launch `command` (its inputs are stored, its tracker is in `host.launch`).
    fn issue(
        &mut self,
        host: &mut Host<'_>,
        now: Ticks,
        command: &CommandDescriptor,
        link: &mut dyn DeviceLink,
    ) -> Result<(), RuntimeError>;

    /// A response from the device while the run is live.
    fn on_response(
        &mut self,
        host: &mut Host<'_>,
        now: Ticks,
        response: LinkResponse,
        link: &mut dyn DeviceLink,
    );

    /// One of the mechanism's timers fired.
    fn on_timer(
        &mut self,
        host: &mut Host<'_>,
        now: Ticks,
        timer: ModeTimer,
        link: &mut dyn DeviceLink,
    );

    /// Puts the bytes task `task` (`spec`) of `launch` reads into `bytes` (its old contents
    /// replaced, its storage reused from task to task), and returns the time to read them.
    fn task_input(
        &self,
        cost: &CostModel,
        launch: &Launch,
        task: u32,
        spec: &HostTask,
        bytes: &mut Vec<u8>,
    ) -> Result<TaskInput, RuntimeError>;

    /// A task finished; `freed`: the payload indexes no task reads any more.
    fn task_finished(
        &mut self,
        host: &mut Host<'_>,
        now: Ticks,
        freed: &[u64],
        link: &mut dyn DeviceLink,
    ) -> Result<(), RuntimeError>;

    /// The host's turn has nothing more to do at `now` (every due response and timer handled,
    /// every task that can start started): `host.no_deadlock`'s spill happens here
    /// ([`crate::overflow`]). Returns whether it did something (the turn looks again).
    fn settle(&mut self, _host: &mut Host<'_>, _now: Ticks, _link: &mut dyn DeviceLink) -> bool {
        false
    }

    /// Whether the control thread is still bringing the launch's results in (RP, BS), so
    /// the launch cannot finish yet even if its tasks have.
    fn awaiting_results(&self) -> bool;

    /// The launch finished: the control thread is idle.
    fn launch_finished(&mut self);

    /// The AXLE ring (`None` in RP and BS).
    fn ring(&self) -> Option<&AxleRing>;

    /// `host.poll_policy = "oracle"` (AXLE): the times to poll at. Other mechanisms and
    /// policies ignore it.
    fn set_poll_script(&mut self, _times: Vec<Ticks>) {}

    /// `host.poll_policy = "adaptive"` (AXLE): the device's published figures, for the bound
    /// on each launch's first record. Other mechanisms and policies ignore it.
    fn set_device_datasheet(&mut self, _sheet: crate::adaptive_poll::DeviceDatasheet) {}
}

/// Result chunk size used to track RP/BS launches (their results arrive all at once), and
/// streaming launches without a ring.
pub(crate) const BULK_CHUNK: u64 = 64;

/// The mechanism for `mode`; the streaming modes take `ring` (RP and BS use none).
pub(crate) fn mechanism(
    mode: Mode,
    ring: Option<AxleRing>,
    config: &crate::config::HostConfig,
) -> Box<dyn Mechanism> {
    match mode {
        Mode::Rp => Box::new(rp::Rp::new()),
        Mode::Bs => Box::new(bs::Bs::new()),
        Mode::Axle => Box::new(axle::Axle::new(ring, config)),
        Mode::AxleIrq => Box::new(axle_irq::AxleIrq::new(ring, config.no_deadlock)),
    }
}

#[cfg(test)]
mod tests;
