//! [`Emulator::run`]: the co-simulation loop in virtual time (see the parent module's docs).

use super::port::LinkPort;
use super::{CoSimError, Emulator};
use cosim_link::link::{HostAgent, Wake};
use shared_abi::Ticks;

impl Emulator {
    /// Runs the device and `host` together until the host is done. `limit` bounds virtual time.
    /// A device shared by several tenants runs with [`Emulator::run_tenants`] only.
    pub fn run(&mut self, host: &mut dyn HostAgent, limit: Ticks) -> Result<(), CoSimError> {
        if self.hardware.sharing.is_some() {
            return Err(super::tenants::one_host_loop_refused());
        }
        let mut wake = Wake::At(self.hardware.now);
        loop {
            let host_at = match wake {
                Wake::Done => return Ok(()),
                Wake::At(at) => Some(at),
                Wake::OnResponse => None,
            };
            let peeked = self.hardware.queue.peek();
            let device_at = peeked.map(|(at, _)| at);
            let device_first = match (device_at, host_at) {
                (Some(d), Some(h)) => d <= h,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => {
                    return Err(CoSimError::Deadlock {
                        at_ns: self.hardware.now.as_ns(),
                    })
                }
            };
            let next = if device_first { device_at } else { host_at }.unwrap_or(Ticks::NEVER);
            if next > limit {
                return Err(CoSimError::TimeLimit {
                    limit_ns: limit.as_ns(),
                });
            }
            if device_first {
                // The commonest event, a DMA write landing, needs nothing of `process` (no
                // response, no firmware step): landed here from the queue's landing lane, as
                // `process` would. The landings right behind it leave as the loop above would
                // let them, while each is the earliest event, not after the host's wake (the
                // device goes first at equal times) and within the limit: a landing pushes no
                // event and ends no host wait, so the other events' front (`bound`) and `wake`
                // stay as they are meanwhile.
                // (Checked here first: most events of a CCM-bound run are not landings, and
                // need no call.)
                if peeked.is_some_and(|(_, landing)| landing) {
                    let bound = self.hardware.queue.landing_bound();
                    let until = host_at.unwrap_or(Ticks::NEVER).min(limit);
                    if self.hardware.land_run_before(bound, until) {
                        continue;
                    }
                }
                let Some((at, event)) = self.hardware.queue.pop_event() else {
                    continue;
                };
                self.hardware.counts.events += 1;
                self.hardware.now = at;
                if let Some(response) = self.process(event) {
                    host.deliver(at, response);
                    wake = match wake {
                        Wake::At(t) if t <= at => Wake::At(t),
                        Wake::Done => Wake::Done,
                        _ => Wake::At(at),
                    };
                }
            } else {
                let at = host_at.unwrap_or(self.hardware.now);
                self.hardware.now = self.hardware.now.max(at);
                // The host may take its next turns itself while they fall before the device's
                // next event and within the limit (`HostAgent::turns_before`): no event runs
                // in between, and a turn past the limit ends the run here as it would have.
                let horizon = device_at
                    .unwrap_or(Ticks::NEVER)
                    .min(Ticks(limit.0.saturating_add(1)));
                let mut port = LinkPort {
                    hardware: &mut self.hardware,
                };
                let turns = host.turns_before(at, horizon, &mut port);
                wake = turns.wake;
                let counts = &mut self.hardware.counts;
                counts.host_turns = counts.host_turns.saturating_add(turns.taken);
                self.hardware.now = self.hardware.now.max(turns.latest);
                if let Some(refusal) = self.hardware.host_in_flight.refusal.take() {
                    return Err(CoSimError::HostRequest(refusal));
                }
            }
        }
    }
}
