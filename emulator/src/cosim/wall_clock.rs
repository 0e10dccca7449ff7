//! [`Emulator::run_wall`]: the device thread of a wall-clock run (DESIGN.md section 3, last
//! paragraph), against the real clock (`cosim_link::wall`).

use super::port::LinkPort;
use super::{CoSimError, Emulator};
use cosim_link::link::{DeviceLink, Wake};
use shared_abi::Ticks;

impl Emulator {
    /// Wall-clock mode, the device thread: runs against the real `clock` until the host
    /// thread, at the other end of `port`, is done.
    ///
    /// Each iteration takes the host turns that arrived and replays their link calls onto the
    /// same link as [`Emulator::run`] (`LinkPort`), each stamped with the later of the
    /// host's time and the device's; then runs every event whose time has come (device time
    /// is the event's time, as in virtual time: an event the thread reaches late keeps its
    /// modelled time, so the device's figures stay modelled durations on a timeline anchored
    /// to the real clock), sending each response at once; then waits for its next event or
    /// the next host turn. `stall` (stress only) holds the thread for a random real time at
    /// each iteration.
    ///
    /// Ends with `Ok` when the host says it is done; with [`CoSimError::Deadlock`] when the
    /// host waits for a response, has taken every response sent, and no device event is
    /// left (exact, see `cosim_link::wall`); with [`CoSimError::WallTimeLimit`] once the
    /// clock passes `limit`. Both errors are sent to the host thread too, which then stops.
    pub fn run_wall(
        &mut self,
        port: &cosim_link::wall::DevicePort,
        clock: &cosim_link::wall::WallClock,
        limit: Ticks,
        mut stall: Option<cosim_link::jitter::Jitter>,
    ) -> Result<(), CoSimError> {
        use cosim_link::turn::decode_host_turn;
        if self.hardware.sharing.is_some() {
            // Several tenants run in virtual time only (`Emulator::run_tenants`).
            return Err(super::tenants::one_host_loop_refused());
        }
        let gone = |error: cosim_link::wall::WallError| CoSimError::Host(error.to_string());
        let mut host = cosim_link::wall::HostWait::new();
        let mut arrived = None;
        loop {
            // The host's link calls, in the order it made them.
            loop {
                let turn = match arrived.take() {
                    Some(turn) => turn,
                    None => match port.try_take().map_err(gone)? {
                        Some(turn) => turn,
                        None => break,
                    },
                };
                let (calls, wake) = decode_host_turn(&turn.message)
                    .map_err(|error| CoSimError::Host(error.to_string()))?;
                host.took_turn(&turn, wake);
                // Stamped no earlier than the device's time: a call the host made before the
                // device's clock reached it happens now.
                let floor = self.hardware.now;
                let mut link = LinkPort {
                    hardware: &mut self.hardware,
                };
                for call in calls {
                    let at = call.now().max(floor);
                    link.call(call.at(at));
                }
                if let Some(refusal) = self.hardware.host_in_flight.refusal.take() {
                    let failure = CoSimError::HostRequest(refusal);
                    port.end(failure.to_string());
                    return Err(failure);
                }
                if wake == Wake::Done {
                    return Ok(());
                }
            }
            // Every event whose time has come.
            let now = clock.now();
            while let Some(at) = self.hardware.queue.peek_time().filter(|&at| at <= now) {
                let Some((_, event)) = self.hardware.queue.pop() else {
                    break;
                };
                self.hardware.counts.events += 1;
                self.hardware.now = self.hardware.now.max(at);
                if let Some(response) = self.process(event) {
                    port.respond(at, response).map_err(gone)?;
                    host.responded();
                }
            }
            let next = self.hardware.queue.peek_time();
            let failure = if now > limit {
                Some(CoSimError::WallTimeLimit {
                    limit_ns: limit.as_ns(),
                })
            } else if host.asleep_for_good(next.is_none()) {
                Some(CoSimError::Deadlock { at_ns: now.as_ns() })
            } else {
                None
            };
            if let Some(failure) = failure {
                port.end(failure.to_string());
                return Err(failure);
            }
            if let Some(stall) = stall.as_mut() {
                cosim_link::wall::pause(stall.next_ns());
            }
            let until = next.unwrap_or(Ticks::NEVER).min(limit.plus(Ticks(1)));
            arrived = port.wait(clock.instant(until)).map_err(gone)?;
        }
    }
}
