//! The host across processes, as the emulator's [`HostAgent`]: each turn goes over the turn
//! page (`cosim_link::turn`).

use super::accept::Signals;
use crate::cosim::tenants::{DetachReason, TenantDetacher};
use cosim_link::link::{DeviceLink, HostAgent, LinkResponse, Turns, Wake};
use cosim_link::turn::{
    device_message, replay_host_turn, split_host_message, DeviceTurn, Turn, TurnError, TurnPage,
    DEVICE, HOST,
};
use shared_abi::Ticks;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// The host, as the emulator sees it across processes: each turn goes over the turn page.
///
/// `deliver` encodes the response for the next turn; `turns_before` writes the time, the
/// responses and the horizon, hands the turn to the host, waits for it to come back (checking
/// that the host lives and that no stop signal arrived), checks the turns the host took on
/// its own against the horizon, and replays the host's link calls onto the emulator's link.
/// On any failure it records the error and answers [`Wake::Done`], which ends
/// [`Emulator::run`]; the session then reports the error.
///
/// A tenant of a group ([`RemoteHost::detacher`] given) whose host died (its socket closed),
/// kept its turn past the turn timeout or broke the turn protocol has its tenant detached
/// instead ([`TenantDetacher::detach`]): `Emulator::run_tenants` detaches it after this turn,
/// at its virtual time, and the other tenants run on. Only the emulator stopping and the
/// session limit, which are the whole group's, end the group's run
/// ([`HostAgent::ended`]).
pub(super) struct RemoteHost<'a> {
    pub(super) page: Held<'a, TurnPage>,
    pub(super) peer: Held<'a, UnixStream>,
    pub(super) signals: &'a Signals,
    pub(super) pending: DeviceTurn,
    /// Turns the host took, those it took on its own included.
    pub(super) turns: u64,
    /// Hand-overs of the turn to the host.
    pub(super) hand_overs: u64,
    pub(super) error: Option<TurnError>,
    /// How long the host may keep its turn.
    pub(super) turn_timeout: Duration,
    /// When the session must have ended ([`ServeOptions::session_limit`]; `None`: beyond
    /// what the clock can represent).
    pub(super) deadline: Option<Instant>,
    /// Whether the session outlived its deadline.
    pub(super) expired: bool,
    /// Tests of recovery only ([`super::ServeOptions::die_after_hand_overs`]).
    pub(super) die_after_hand_overs: Option<u64>,
    /// A tenant of a group: the handle that detaches it (`None`: a host served alone).
    pub(super) detacher: Option<TenantDetacher>,
    /// Wall time waited for the turn that failed, once one failed.
    pub(super) waited: Option<Duration>,
    /// A tenant of a group: its group's name and its host's pid, for what it is told and
    /// what is logged when it is detached ([`HostAgent::detached`]).
    pub(super) seat: Option<(String, i32)>,
}

/// What a [`RemoteHost`] holds of its host: borrowed (a host served alone: the session
/// keeps it), owned (a tenant of a group: freed at its detach), or freed.
pub(super) enum Held<'a, T> {
    Borrowed(&'a T),
    Owned(T),
    Freed,
}

impl<T> Held<'_, T> {
    /// What is held, unless it was freed.
    pub(super) fn get(&self) -> Option<&T> {
        match self {
            Held::Borrowed(held) => Some(held),
            Held::Owned(held) => Some(held),
            Held::Freed => None,
        }
    }

    /// Frees what is owned (what is borrowed is let go).
    pub(super) fn free(&mut self) {
        *self = Held::Freed;
    }
}

/// Why a tenant whose turn failed with `error` is detached, or `None` when the failure is
/// not the tenant's alone (the emulator is stopping).
fn detach_reason(error: &TurnError, waited: Duration) -> Option<DetachReason> {
    let waited_ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX);
    match error {
        TurnError::Stopped => None,
        TurnError::PeerDied => Some(DetachReason::Dead),
        TurnError::TimedOut { after } => Some(DetachReason::Stopped {
            waited_ms: u64::try_from(after.as_millis())
                .unwrap_or(u64::MAX)
                .max(waited_ms),
        }),
        other => Some(DetachReason::TurnProtocol(other.to_string())),
    }
}

impl RemoteHost<'_> {
    fn exchange(
        &mut self,
        now: Ticks,
        horizon: Ticks,
        link: &mut dyn DeviceLink,
    ) -> Result<Turns, TurnError> {
        if self.die_after_hand_overs == Some(self.hand_overs) {
            log::warn!(
                "emu: dying after {} hand-overs (--die-after-hand-overs, a test of recovery)",
                self.hand_overs
            );
            // A crash, as SIGKILL makes one: no destructor runs, the socket file stays.
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
            std::process::abort();
        }
        // A tenant detached is given no turn: its page and socket are freed.
        let (Some(page), Some(peer)) = (self.page.get(), self.peer.get()) else {
            return Err(TurnError::PeerDied);
        };
        let message = device_message(&mut self.pending, now, horizon);
        page.hand_over(HOST, &message)?;
        self.pending.recycle(message);
        self.hand_overs += 1;
        let signals = self.signals;
        match page.wait_for_within(
            DEVICE,
            peer,
            &mut || signals.stop_requested(),
            Some(self.turn_timeout),
        )? {
            Turn::Mine(message) => {
                let (turn, taken, latest) = split_host_message(&message, now, horizon)?;
                let wake = replay_host_turn(turn, link)?;
                Ok(Turns {
                    wake,
                    taken,
                    latest,
                })
            }
            Turn::Finished => Err(TurnError::BadFlag(cosim_link::turn::FINISHED)),
        }
    }
}

impl RemoteHost<'_> {
    /// Why the host can take no further part, if it cannot: the error it met, or the
    /// session limit.
    pub(super) fn failure(&self) -> Option<String> {
        match &self.error {
            Some(TurnError::PeerDied) => Some("its host process died mid-run".into()),
            Some(TurnError::Stopped) => Some("the emulator is stopping".into()),
            Some(TurnError::TimedOut { after }) => Some(format!(
                "its host kept its turn for more than {} s, the emulator's turn timeout (axle emu --turn-timeout)",
                after.as_secs_f64()
            )),
            Some(other) => Some(format!("its host broke the turn protocol: {other}")),
            None if self.expired => Some(
                "its session lasted longer than the emulator's session limit (axle emu --session-limit)"
                    .into(),
            ),
            None => None,
        }
    }
}

impl HostAgent for RemoteHost<'_> {
    fn ended(&self) -> Option<String> {
        match (&self.detacher, &self.error) {
            // Detached: the others run on.
            (Some(_), Some(error)) if detach_reason(error, Duration::ZERO).is_some() => None,
            _ => self.failure(),
        }
    }

    fn deliver(&mut self, at: Ticks, response: LinkResponse) {
        self.pending.deliver(at, &response);
    }

    /// A tenant of a group detached (for whatever reason: its host's, or the device's own):
    /// logged; its host told, unless it died; its turn page finished; its page and its
    /// socket freed now, while the others run on.
    fn detached(&mut self, at: Ticks, reason: &str) {
        let Some((group, pid)) = &self.seat else {
            return;
        };
        let tenant = self.detacher.as_ref().map_or(0, TenantDetacher::tenant);
        let waited = self.waited.map_or(String::new(), |waited| {
            format!(
                ", after {} ms of wall time waiting for its turn",
                waited.as_millis()
            )
        });
        log::warn!(
            "emu: group {group}: tenant {tenant} (host pid {pid}) detached at {} ns of virtual time{waited}: {reason}; the other tenants run on",
            at.as_ns()
        );
        if !matches!(self.error, Some(TurnError::PeerDied)) {
            if let Some(peer) = self.peer.get() {
                let _ = super::session::refuse(
                    peer,
                    format!(
                        "group {group}: tenant {tenant} was detached at {} ns of virtual time: {reason}; the other tenants run on",
                        at.as_ns()
                    ),
                );
            }
        }
        if let Some(page) = self.page.get() {
            // The flag wakes the host to read why.
            page.finish();
            log::info!(
                "emu: group {group}: tenant {tenant} (host pid {pid}): {} turns in {} hand-overs; the emulator's {}; its turn page and socket are freed",
                self.turns,
                self.hand_overs,
                page.wait_counts()
            );
            super::wake_up::learn(page);
        }
        self.page.free();
        self.peer.free();
    }

    fn turn(&mut self, now: Ticks, link: &mut dyn DeviceLink) -> Wake {
        // No horizon: the host takes no turn of its own.
        self.turns_before(now, Ticks::ZERO, link).wake
    }

    fn turns_before(&mut self, now: Ticks, horizon: Ticks, link: &mut dyn DeviceLink) -> Turns {
        let done = Turns {
            wake: Wake::Done,
            taken: 1,
            latest: now,
        };
        if self.error.is_some() || self.expired {
            return done;
        }
        if self
            .deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
        {
            self.expired = true;
            return done;
        }
        let started = Instant::now();
        match self.exchange(now, horizon, link) {
            Ok(turns) => {
                self.turns = self.turns.saturating_add(turns.taken);
                turns
            }
            Err(error) => {
                self.turns += 1;
                let waited = started.elapsed();
                self.waited = Some(waited);
                if let Some(detacher) = &self.detacher {
                    if let Some(reason) = detach_reason(&error, waited) {
                        detacher.detach(reason);
                    }
                }
                self.error = Some(error);
                done
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dead host is `Dead`, a turn past the timeout `Stopped` with at least the timeout
    /// waited, a turn that breaks the protocol `TurnProtocol`; the emulator stopping is no
    /// tenant's fault and detaches nobody.
    #[test]
    fn each_failed_turn_has_its_detach_reason() {
        let waited = Duration::from_millis(20);
        assert_eq!(
            detach_reason(&TurnError::PeerDied, waited),
            Some(DetachReason::Dead)
        );
        assert_eq!(
            detach_reason(
                &TurnError::TimedOut {
                    after: Duration::from_millis(500)
                },
                Duration::from_millis(503)
            ),
            Some(DetachReason::Stopped { waited_ms: 503 })
        );
        assert_eq!(
            detach_reason(
                &TurnError::TimedOut {
                    after: Duration::from_millis(500)
                },
                waited
            ),
            Some(DetachReason::Stopped { waited_ms: 500 })
        );
        assert!(matches!(
            detach_reason(&TurnError::BadFlag(99), waited),
            Some(DetachReason::TurnProtocol(what)) if what.contains("99")
        ));
        assert_eq!(detach_reason(&TurnError::Stopped, waited), None);
    }
}
