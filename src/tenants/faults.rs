//! Fault injection for `axle run-many --fault`: a tenant that dies, stops taking its turns,
//! sends a malformed descriptor or moves its flow-control heads backwards, at a virtual time,
//! to test that faults do not spread (docs/tenants.md, "Faults do not spread").
//!
//! - `kill@T`: the host dies at `T`; the device learns it then and detaches the tenant
//!   ([`emulator::Emulator::schedule_detach`]), as an attached server does when a session's socket
//!   closes.
//! - `stop@T`: the host stops taking turns: at its first turn at or after `T` it does not
//!   take it, and the device detaches it at that turn's time
//!   ([`emulator::cosim::tenants::TenantDetacher`], what an attached server calls when a
//!   host's turn does not come back within its timeout; in process nothing waits).
//! - `malformed@T`: the first launch at or after `T` is malformed: a launch store (AXLE, BS)
//!   names a kernel the device does not have, an RP doorbell names a descriptor address
//!   outside device memory. In AXLE modes the firmware latches the ring BROKEN and the
//!   device detaches the tenant; in RP and BS modes the launch is refused with a status, the
//!   protocol's answer, and the tenant's runtime fails by itself.
//! - `heads-back@T`: from `T` on, every flow-control store carries both heads at 0, behind
//!   what the host had sent before. The firmware notices when it next reads the heads (only
//!   when its cached heads say a ring is full), latches the ring BROKEN, and the device
//!   detaches the tenant. A head the device never reads harms nobody.
//! - `hang@T`: from its first turn at or after `T`, the host makes no call and waits for a
//!   response that never comes (a host blocked for ever). Once nothing else can happen, the
//!   device finds the deadlock its own (another tenant ran to its end) and detaches it
//!   ([`DetachReason::Deadlock`]).
//! - `spin@T`: from its first turn at or after `T`, the host makes no call and polls on its
//!   own for ever (at intervals doubling from 1 µs): it never ends, and is detached at the
//!   run's virtual-time limit ([`DetachReason::TimeLimit`]) if another tenant ran to its
//!   end.
//!
//! The injected hosts make exactly the calls the honest ones make, at the same times, but
//! for the bytes of the stores they corrupt.

use anyhow::Context;
use cosim_link::link::{DeviceLink, HostAgent, LinkCall, LinkResponse, Turns, Wake};
use emulator::cosim::tenants::{DetachReason, TenantDetacher};
use shared_abi::{device_map, CommandDescriptor, Ticks};
use std::borrow::Cow;
use zerocopy::{FromBytes, IntoBytes};

/// What goes wrong with a tenant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// Its host dies.
    Kill,
    /// Its host stops taking turns.
    Stop,
    /// Its next launch descriptor names no kernel.
    Malformed,
    /// Its flow-control heads go back to 0.
    HeadsBack,
    /// Its host waits for ever for a response that never comes.
    Hang,
    /// Its host polls for ever without a call.
    Spin,
}

impl FaultKind {
    /// The name `--fault` takes.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Stop => "stop",
            FaultKind::Malformed => "malformed",
            FaultKind::HeadsBack => "heads-back",
            FaultKind::Hang => "hang",
            FaultKind::Spin => "spin",
        }
    }
}

/// One injected fault: tenant `tenant` goes wrong at virtual time `at_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TenantFault {
    /// The tenant.
    pub tenant: usize,
    /// What goes wrong.
    pub kind: FaultKind,
    /// When, in nanoseconds of virtual time.
    pub at_ns: u64,
}

impl std::str::FromStr for TenantFault {
    type Err = anyhow::Error;

    /// `TENANT:KIND@TIME`, e.g. `1:kill@20us`; KIND is kill, stop, malformed, heads-back,
    /// hang or spin;
    /// TIME is a duration (`20us`, `1.5ms`) or nanoseconds.
    fn from_str(text: &str) -> anyhow::Result<TenantFault> {
        let form =
            "give TENANT:KIND@TIME, e.g. 1:kill@20us (KIND: kill, stop, malformed, heads-back, hang, spin)";
        let (tenant, rest) = text
            .split_once(':')
            .with_context(|| format!("--fault {text:?}: {form}"))?;
        let (kind, at) = rest
            .split_once('@')
            .with_context(|| format!("--fault {text:?}: {form}"))?;
        let tenant: usize = tenant.trim().parse().map_err(|_| {
            anyhow::anyhow!("--fault {text:?}: tenant {tenant:?} is not a whole number")
        })?;
        let kind = match kind.trim() {
            "kill" => FaultKind::Kill,
            "stop" => FaultKind::Stop,
            "malformed" => FaultKind::Malformed,
            "heads-back" => FaultKind::HeadsBack,
            "hang" => FaultKind::Hang,
            "spin" => FaultKind::Spin,
            other => anyhow::bail!("--fault {text:?}: unknown fault {other:?}; {form}"),
        };
        let at = at.trim();
        let at_ns = match at.parse::<u64>() {
            Ok(ns) => ns,
            Err(_) => crate::config::parse_duration_ns(at)
                .with_context(|| format!("--fault {text:?}: the time"))?,
        };
        Ok(TenantFault {
            tenant,
            kind,
            at_ns,
        })
    }
}

/// Checks `faults` for `tenants` tenants: each names one of them, one fault per tenant (and
/// a kill beside it: a faulty host that dies at a time), at a time within `limit_ns`.
pub fn check(faults: &[TenantFault], tenants: usize, limit_ns: u64) -> anyhow::Result<()> {
    for (index, fault) in faults.iter().enumerate() {
        if fault.tenant >= tenants {
            anyhow::bail!(
                "--fault {}:{}: tenant {} does not exist; this run has {tenants} tenants (0 to {})",
                fault.tenant,
                fault.kind.name(),
                fault.tenant,
                tenants.saturating_sub(1)
            );
        }
        // One fault per tenant, and a kill beside it (the faulty host dies at the kill).
        let same = |f: &&TenantFault| f.tenant == fault.tenant;
        let kills = faults[..=index]
            .iter()
            .filter(same)
            .filter(|f| f.kind == FaultKind::Kill)
            .count();
        let others = faults[..=index]
            .iter()
            .filter(same)
            .filter(|f| f.kind != FaultKind::Kill)
            .count();
        if kills > 1 || others > 1 {
            anyhow::bail!(
                "--fault: tenant {} has two faults; give at most one per tenant (and a kill beside it)",
                fault.tenant
            );
        }
        if fault.at_ns > limit_ns {
            anyhow::bail!(
                "--fault {}:{}@{}: the time is past the virtual-time limit of {limit_ns} ns",
                fault.tenant,
                fault.kind.name(),
                fault.at_ns
            );
        }
    }
    Ok(())
}

/// A tenant's host, with the fault injected into it, if any.
pub(crate) struct FaultyHost<'h> {
    inner: &'h mut dyn HostAgent,
    /// The fault and the tenant's detacher (`None`: the honest host, passed through).
    fault: Option<(TenantFault, TenantDetacher)>,
    /// The malformed launch was sent.
    corrupted: bool,
    /// A spinning host's next interval, in ticks (0: not spinning yet).
    spin: u64,
}

impl<'h> FaultyHost<'h> {
    pub(crate) fn new(
        inner: &'h mut dyn HostAgent,
        fault: Option<(TenantFault, TenantDetacher)>,
    ) -> FaultyHost<'h> {
        FaultyHost {
            inner,
            fault,
            corrupted: false,
            spin: 0,
        }
    }
}

impl HostAgent for FaultyHost<'_> {
    fn deliver(&mut self, at: Ticks, response: LinkResponse) {
        self.inner.deliver(at, response);
    }

    fn turn(&mut self, now: Ticks, link: &mut dyn DeviceLink) -> Wake {
        let Some((fault, detacher)) = &self.fault else {
            return self.inner.turn(now, link);
        };
        let at = Ticks::from_ns(fault.at_ns);
        match fault.kind {
            FaultKind::Stop if now >= at => {
                detacher.detach(DetachReason::Stopped { waited_ms: 0 });
                Wake::Done
            }
            FaultKind::Hang if now >= at => Wake::OnResponse,
            FaultKind::Spin if now >= at => {
                self.spin = self.spin.saturating_mul(2).max(Ticks::from_ns(1_000).0);
                Wake::At(Ticks(now.0.saturating_add(self.spin)))
            }
            FaultKind::Kill | FaultKind::Stop | FaultKind::Hang | FaultKind::Spin => {
                self.inner.turn(now, link)
            }
            FaultKind::Malformed | FaultKind::HeadsBack => {
                let mut corrupting = Corrupting {
                    link,
                    kind: fault.kind,
                    at,
                    corrupted: &mut self.corrupted,
                };
                self.inner.turn(now, &mut corrupting)
            }
        }
    }

    fn turns_before(&mut self, now: Ticks, horizon: Ticks, link: &mut dyn DeviceLink) -> Turns {
        if self.fault.is_none() {
            return self.inner.turns_before(now, horizon, link);
        }
        // One turn at a time, so that the fault's time is checked at every turn.
        Turns {
            wake: self.turn(now, link),
            taken: 1,
            latest: now,
        }
    }
}

/// The link of a host that corrupts its stores from a time on.
struct Corrupting<'l> {
    link: &'l mut dyn DeviceLink,
    kind: FaultKind,
    at: Ticks,
    corrupted: &'l mut bool,
}

impl DeviceLink for Corrupting<'_> {
    fn call(&mut self, call: LinkCall<'_>) {
        if call.now() < self.at {
            return self.link.call(call);
        }
        let call = match (self.kind, call) {
            (FaultKind::Malformed, LinkCall::MemStore { now, address, data })
                if !*self.corrupted && device_map::in_launch_window(address) =>
            {
                *self.corrupted = true;
                LinkCall::MemStore {
                    now,
                    address,
                    data: Cow::Owned(no_such_kernel(&data)),
                }
            }
            (
                FaultKind::Malformed,
                LinkCall::MemStoreSynchronous {
                    now,
                    address,
                    data,
                    token,
                },
            ) if !*self.corrupted && device_map::in_launch_window(address) => {
                *self.corrupted = true;
                LinkCall::MemStoreSynchronous {
                    now,
                    address,
                    data: Cow::Owned(no_such_kernel(&data)),
                    token,
                }
            }
            (
                FaultKind::Malformed,
                LinkCall::IoWrite {
                    now,
                    register,
                    value: _,
                },
            ) if !*self.corrupted && register == shared_abi::mailbox::DOORBELL => {
                // RP: the doorbell names where the descriptor is; this one names no memory.
                *self.corrupted = true;
                LinkCall::IoWrite {
                    now,
                    register,
                    value: !63,
                }
            }
            (FaultKind::HeadsBack, LinkCall::MemStore { now, address, data })
                if address == device_map::FLOW_CONTROL =>
            {
                LinkCall::MemStore {
                    now,
                    address,
                    data: Cow::Owned(vec![0; data.len()]),
                }
            }
            (_, call) => call,
        };
        self.link.call(call);
    }
}

/// A launch descriptor's bytes with its kernel id replaced by one no device has.
fn no_such_kernel(data: &[u8]) -> Vec<u8> {
    match CommandDescriptor::read_from_bytes(data) {
        Ok(mut command) => {
            command.kernel = u32::MAX;
            command.as_bytes().to_vec()
        }
        // Not a whole descriptor: the device refuses it as it is.
        Err(_) => data.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse_from_tenant_kind_and_time() {
        let fault: TenantFault = "1:kill@20us".parse().unwrap();
        assert_eq!(
            fault,
            TenantFault {
                tenant: 1,
                kind: FaultKind::Kill,
                at_ns: 20_000
            }
        );
        let fault: TenantFault = "0:heads-back@1500".parse().unwrap();
        assert_eq!((fault.kind, fault.at_ns), (FaultKind::HeadsBack, 1500));
        for bad in [
            "kill@20us",
            "1:kill",
            "x:kill@1",
            "1:explode@1",
            "1:stop@soon",
        ] {
            assert!(bad.parse::<TenantFault>().is_err(), "{bad}");
        }
        let two = |tenant| TenantFault {
            tenant,
            kind: FaultKind::Stop,
            at_ns: 0,
        };
        assert!(check(&[two(0), two(1)], 2, 10).is_ok());
        let error = check(&[two(2)], 2, 10).unwrap_err().to_string();
        assert!(error.contains("this run has 2 tenants (0 to 1)"), "{error}");
        assert!(check(&[two(0), two(0)], 2, 10).is_err());
        let kill = TenantFault {
            kind: FaultKind::Kill,
            ..two(0)
        };
        assert!(check(&[two(0), kill], 2, 10).is_ok());
        assert!(check(&[kill, two(0), kill], 2, 10).is_err());
        let late = TenantFault {
            at_ns: 11,
            ..two(0)
        };
        assert!(check(&[late], 2, 10).is_err());
    }
}
