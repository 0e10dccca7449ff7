//! The host across processes, as the emulator's [`HostAgent`]: each turn goes over the turn
//! page (`cosim_link::turn`).

use super::accept::Signals;
use cosim_link::link::{DeviceLink, HostAgent, LinkResponse, Wake};
use cosim_link::turn::{replay_host_turn, DeviceTurn, Turn, TurnError, TurnPage, DEVICE, HOST};
use shared_abi::Ticks;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// The host, as the emulator sees it across processes: each turn goes over the turn page.
///
/// `deliver` encodes the response for the next turn; `turn` writes the time and the
/// responses, hands the turn to the host, waits for it to come back (checking that the host
/// lives and that no stop signal arrived), and replays the host's link calls onto the
/// emulator's link. On any failure it records the error and answers [`Wake::Done`], which
/// ends [`Emulator::run`]; the session then reports the error.
pub(super) struct RemoteHost<'a> {
    pub(super) page: &'a TurnPage,
    pub(super) peer: &'a UnixStream,
    pub(super) signals: &'a mut Signals,
    pub(super) pending: DeviceTurn,
    pub(super) turns: u64,
    pub(super) error: Option<TurnError>,
    /// How long the host may keep its turn.
    pub(super) turn_timeout: Duration,
    /// When the session must have ended ([`ServeOptions::session_limit`]; `None`: beyond
    /// what the clock can represent).
    pub(super) deadline: Option<Instant>,
    /// Whether the session outlived its deadline.
    pub(super) expired: bool,
}

impl RemoteHost<'_> {
    fn exchange(&mut self, now: Ticks, link: &mut dyn DeviceLink) -> Result<Wake, TurnError> {
        self.page.hand_over(HOST, &self.pending.take(now))?;
        let signals = &mut *self.signals;
        match self.page.wait_for_within(
            DEVICE,
            self.peer,
            &mut || signals.stop_requested(),
            Some(self.turn_timeout),
        )? {
            Turn::Mine(message) => replay_host_turn(&message, link),
            Turn::Finished => Err(TurnError::BadFlag(cosim_link::turn::FINISHED)),
        }
    }
}

impl HostAgent for RemoteHost<'_> {
    fn deliver(&mut self, at: Ticks, response: LinkResponse) {
        self.pending.deliver(at, &response);
    }

    fn turn(&mut self, now: Ticks, link: &mut dyn DeviceLink) -> Wake {
        if self.error.is_some() || self.expired {
            return Wake::Done;
        }
        if self
            .deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
        {
            self.expired = true;
            return Wake::Done;
        }
        self.turns += 1;
        match self.exchange(now, link) {
            Ok(wake) => wake,
            Err(error) => {
                self.error = Some(error);
                Wake::Done
            }
        }
    }
}
