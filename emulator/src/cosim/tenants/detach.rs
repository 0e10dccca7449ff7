//! Faults do not spread: detaching a tenant from a shared device.
//!
//! A tenant whose host died, stopped taking its turns, or broke the protocol is **detached**
//! at a virtual time `t` ([`Emulator::detach_tenant`], [`Emulator::schedule_detach`],
//! [`TenantDetacher::detach`], or the device itself when the tenant's ring latches BROKEN).
//! From `t` on, the device:
//!
//! - marks its ring BROKEN (its firmware latched it already for a protocol violation; for a
//!   dead or stopped host it is marked without a status write, since the device may no
//!   longer write that host's memory) and never steps its firmware again;
//! - removes its dispatch waiting for the CCM from the arbiter;
//! - if the CCM is granted to it, **cuts its running stage at `t`**: the items on µthreads are
//!   dropped unfinished (their code never runs, so they write nothing) and the CCM is granted
//!   to the next waiting tenant at `t`. A device that must give a dead host's share back in
//!   bounded time cannot wait for that host's work to end: a stage is as long as its host
//!   made it (one stage of a launch over a large input runs for seconds), and a host that
//!   launched it and died could otherwise hold the CCM as long as it liked. So the cut, not
//!   the end of the item or stage, is what a multi-logical device has to do;
//! - gives back at `t` the DMA channels of its requests still in preparation (nothing of
//!   them went on the wire); a request whose writes are already on the link finishes its
//!   transfer (the link time is spent: posted writes cannot be called back) and frees its
//!   channel when its last write is on the wire, but its writes do not land (the host's
//!   memory is released) and its completion goes to no firmware;
//! - drops its link requests still in flight when they arrive (no response is sent) and the
//!   responses on their way to it; its host gets no more turns;
//! - releases its logical device's memory and its host memory (the device's references: a
//!   mapped segment or memory file is unmapped when the last reference goes), its register
//!   page, mailbox, host events and synchronous-launch tokens.
//!
//! Its share is therefore free at a defined time: the CCM and the channels in preparation at
//! `t`, the channels on the wire when their transfers end. Every figure it had until `t`
//! stays in its report; the others' runs go on. Detaching never panics and never waits: an
//! unknown tenant is an error, a tenant detached twice keeps its first record.
//!
//! **When in the instant `t`.** A detach scheduled at `t` ([`Emulator::schedule_detach`])
//! takes effect once every device event before `t` ran and before any event at `t` (the
//! tenant is gone at `t`: none of its events at `t` happen). A detach asked for by a host
//! agent ([`TenantDetacher`]: the attached server finding its session dead or its turn not
//! taken) takes effect after that host's turn, at the turn's time. A ring latched BROKEN
//! detaches its tenant right after the device event that latched it.

use super::Sharing;
use crate::cosim::Emulator;
use crate::dram::DeviceDram;
use cosim_link::phys::PhysicalMemory;
use cosim_link::sync::Arc;
use firmware::FirmwareError;
use shared_abi::{Status, Ticks};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Why a tenant was detached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DetachReason {
    /// Its host went away: its process died (SIGKILL) or its session closed.
    Dead,
    /// Its host did not take its turn: it was stopped (SIGSTOP) and the attached server
    /// waited `waited_ms` of wall-clock time for the turn (0 in process, where a stopped
    /// host is injected and nothing waits).
    Stopped {
        /// Wall-clock milliseconds the server waited for the turn.
        waited_ms: u64,
    },
    /// Its ring was latched BROKEN: its host broke the protocol (a malformed launch or
    /// region descriptor, a flow-control head moved backwards or past the device's tail, a
    /// DMA address outside its scatter-gather list). The status is the device status word's.
    Broken(Status),
    /// Its host asked for more than the link's bounds take (`crate::cosim`'s "Bounds").
    LinkRequest(String),
    /// Its host in another process broke the turn protocol (a turn that does not decode, a
    /// turn of its own past the horizon, a flag no side writes): the attached server's
    /// words.
    TurnProtocol(String),
    /// Its host waited for a response the device will never send: nothing was left to
    /// happen (no device event, no host due) while another tenant had run to its end, so the
    /// deadlock is its own ([`Emulator::run_tenants`]).
    Deadlock,
    /// Its run was not over at the run's virtual-time limit while another tenant had run to
    /// its end ([`Emulator::run_tenants`]).
    TimeLimit {
        /// The limit, in nanoseconds of virtual time.
        limit_ns: u64,
    },
    /// Its host spent its wall-time budget before its run ended (the in-process host's
    /// budget, `axle run --wall-limit`): its agent had it detached at that turn.
    WallOverrun {
        /// Wall-clock milliseconds spent.
        elapsed_ms: u64,
        /// The budget, in milliseconds.
        limit_ms: u64,
    },
}

impl std::fmt::Display for DetachReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DetachReason::Dead => f.write_str("its host died (its session went away)"),
            DetachReason::Stopped { waited_ms: 0 } => f.write_str(
                "its host stopped taking its turns (a turn not taken; in process, nothing waited)",
            ),
            DetachReason::Stopped { waited_ms } => write!(
                f,
                "its host stopped taking its turns (no turn back after {waited_ms} ms of wall-clock time)"
            ),
            DetachReason::Broken(status) => {
                write!(f, "its ring was latched BROKEN: {status}")
            }
            DetachReason::LinkRequest(refusal) => {
                write!(f, "the device refused a link request: {refusal}")
            }
            DetachReason::TurnProtocol(broken) => {
                write!(f, "its host broke the turn protocol: {broken}")
            }
            DetachReason::Deadlock => f.write_str(
                "deadlock of its own: its host waits for a response and the device has nothing left to do for it, while another tenant ran to its end",
            ),
            DetachReason::TimeLimit { limit_ns } => write!(
                f,
                "its run was not over at the virtual-time limit of {limit_ns} ns, while another tenant ran to its end"
            ),
            DetachReason::WallOverrun {
                elapsed_ms,
                limit_ms,
            } => write!(
                f,
                "its host overran its wall-time budget: {elapsed_ms} ms spent of {limit_ms} ms"
            ),
        }
    }
}

/// What the device did when it detached a tenant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Detached {
    /// The tenant.
    pub tenant: usize,
    /// Virtual time of the detach: its share was free from then on (but for DMA transfers
    /// already on the wire, which free their channels when they end).
    pub at: Ticks,
    /// Why.
    pub reason: DetachReason,
    /// Work items of its stage cut on the CCM (`None`: the CCM was not granted to it).
    pub ccm_items_cut: Option<u32>,
    /// Whether a dispatch of it waiting for the CCM was removed from the arbiter.
    pub dispatch_dropped: bool,
    /// Its DMA requests still in preparation, cancelled.
    pub dma_cancelled: u32,
}

/// The detaches host agents asked for during a run, taken by [`Emulator::run_tenants`] after
/// each host turn.
#[derive(Debug, Default)]
pub(crate) struct DetachRequests {
    any: AtomicBool,
    requests: Mutex<Vec<(usize, DetachReason)>>,
}

impl DetachRequests {
    /// Takes the requests made since the last call (none: one load of a flag).
    pub(crate) fn take(&self) -> Vec<(usize, DetachReason)> {
        if !self.any.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        match self.requests.lock() {
            Ok(mut requests) => std::mem::take(&mut *requests),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        }
    }
}

/// A handle for one tenant's host agent (for example an attached session's remote host) to
/// have its tenant detached: [`TenantDetacher::detach`] from inside a turn or a delivery;
/// [`Emulator::run_tenants`] detaches the tenant after that host's turn, at its time.
#[derive(Clone, Debug)]
pub struct TenantDetacher {
    tenant: usize,
    requests: std::sync::Arc<DetachRequests>,
}

impl TenantDetacher {
    /// Asks for this tenant to be detached for `reason`. The agent should then answer
    /// [`cosim_link::link::Wake::Done`]: it gets no more turns either way.
    pub fn detach(&self, reason: DetachReason) {
        let mut requests = match self.requests.requests.lock() {
            Ok(requests) => requests,
            Err(poisoned) => poisoned.into_inner(),
        };
        requests.push((self.tenant, reason));
        self.requests.any.store(true, Ordering::Release);
    }

    /// The tenant.
    pub fn tenant(&self) -> usize {
        self.tenant
    }
}

impl Sharing {
    /// Whether `tenant` was detached.
    pub(crate) fn is_detached(&self, tenant: usize) -> bool {
        self.detached.get(tenant).is_some_and(Option::is_some)
    }

    /// The earliest detach scheduled, if any: `(at, index in the schedule)`.
    pub(crate) fn next_scheduled(&self) -> Option<(Ticks, usize)> {
        self.scheduled
            .iter()
            .enumerate()
            .map(|(index, (at, _, _))| (*at, index))
            .min()
    }
}

impl Emulator {
    /// Schedules `tenant`'s detach at virtual time `at` for `reason`: [`Emulator::run_tenants`]
    /// detaches it once every device event before `at` ran, before any event at `at` (see the
    /// module docs), unless its host finished first. For tests and for a server that learned
    /// of a host's death at a known time.
    pub fn schedule_detach(
        &mut self,
        tenant: usize,
        at: Ticks,
        reason: DetachReason,
    ) -> Result<(), super::TenantError> {
        let tenants = self.tenant_count();
        let sharing = self
            .hardware
            .sharing
            .as_deref_mut()
            .filter(|_| tenant < tenants)
            .ok_or(super::TenantError::NoTenant { tenant, tenants })?;
        sharing.scheduled.push((at, tenant, reason));
        Ok(())
    }

    /// A handle with which `tenant`'s host agent has its tenant detached during
    /// [`Emulator::run_tenants`] ([`TenantDetacher::detach`]). `None` for a device with one
    /// host (built without [`Emulator::shared`]) or a tenant it does not have.
    pub fn detacher(&self, tenant: usize) -> Option<TenantDetacher> {
        let sharing = self.hardware.sharing.as_deref()?;
        (tenant < sharing.detached.len()).then(|| TenantDetacher {
            tenant,
            requests: std::sync::Arc::clone(&sharing.requests),
        })
    }

    /// The record of `tenant`'s detach, if it was detached.
    pub fn detached(&self, tenant: usize) -> Option<&Detached> {
        self.hardware
            .sharing
            .as_deref()?
            .detached
            .get(tenant)?
            .as_ref()
    }

    /// Detaches `tenant` now (at [`Emulator::now`]) for `reason` (see the module docs for what
    /// that does), and grants the CCM and the freed DMA channels to the other tenants waiting
    /// for them. A tenant already detached keeps its first record. Between runs, or from the
    /// code that drives a shared device; during [`Emulator::run_tenants`], a host agent uses
    /// its [`TenantDetacher`].
    pub fn detach_tenant(
        &mut self,
        tenant: usize,
        reason: DetachReason,
    ) -> Result<Detached, super::TenantError> {
        let tenants = self.tenant_count();
        if self.hardware.sharing.is_none() || tenant >= tenants {
            return Err(super::TenantError::NoTenant { tenant, tenants });
        }
        let detached = self.detach_now(tenant, reason);
        self.settle(tenant);
        Ok(detached)
    }

    /// Detaches `tenant` at the current time; the caller then settles the device
    /// ([`Emulator::settle`]).
    pub(super) fn detach_now(&mut self, tenant: usize, reason: DetachReason) -> Detached {
        if let Some(existing) = self.detached(tenant) {
            return existing.clone();
        }
        let now = self.hardware.now;
        let sharing = self.sharing();
        let dispatch_dropped = sharing
            .pending
            .get_mut(tenant)
            .and_then(Option::take)
            .is_some();
        if let Some(waiting) = sharing.dma_waiting.get_mut(tenant) {
            *waiting = false;
        }
        let dma_cancelled = sharing
            .preparing
            .get_mut(tenant)
            .map(std::mem::take)
            .unwrap_or(0);
        // The CCM granted to it and still running its stage (a stage that ended in this
        // very event is closed by the next arbitration, not cut).
        let holds_ccm = sharing.ccm_owner.is_some_and(|(owner, _)| owner == tenant)
            && self.hardware.ccm.is_running();
        let ccm_items_cut = holds_ccm.then(|| self.hardware.ccm.abort(now));
        self.hardware.dma.cancel(dma_cancelled);
        // Its context: the ring marked BROKEN, its memory and registers released.
        self.select(tenant);
        // A ring the firmware latched keeps the firmware's cause.
        self.firmware.mark_broken(FirmwareError::RingBroken);
        self.release_context();
        let record = Detached {
            tenant,
            at: now,
            reason,
            ccm_items_cut,
            dispatch_dropped,
            dma_cancelled,
        };
        log::warn!(
            "emulator: tenant {tenant} detached at {} ns of virtual time: {}; its share is free (CCM stage cut: {}, dispatch dropped: {dispatch_dropped}, DMA requests cancelled: {dma_cancelled})",
            now.as_ns(),
            record.reason,
            ccm_items_cut.map_or("no".to_owned(), |items| format!("{items} items"))
        );
        let sharing = self.sharing();
        if let Some(slot) = sharing.detached.get_mut(tenant) {
            *slot = Some(record.clone());
            sharing.detaches += 1;
        }
        record
    }

    /// Releases the current tenant's memory and registers (it was detached).
    fn release_context(&mut self) {
        let hw = &mut self.hardware;
        match crate::shm::DeviceSegment::anonymous(8) {
            Ok(segment) => hw.dram = DeviceDram::from_segment(segment, 8),
            Err(error) => log::warn!(
                "emulator: a detached tenant's device memory is kept (no page for its stand-in: {error})"
            ),
        }
        match PhysicalMemory::new(0) {
            Ok(memory) => hw.host_memory = Arc::new(memory),
            Err(error) => log::warn!(
                "emulator: a detached tenant's host memory is kept (no stand-in: {error})"
            ),
        }
        hw.register_page = None;
        hw.mailbox.iter_mut().for_each(|word| *word = 0);
        hw.host_events.clear();
        hw.bulk_tokens.clear();
        hw.host_in_flight = Default::default();
    }

    /// After a detach: the tenants whose rings latched BROKEN are detached too, the freed DMA
    /// channels go to the tenants waiting for one (from the one after `freed_by`), and the
    /// CCM to the next waiting dispatch.
    pub(super) fn settle(&mut self, freed_by: usize) {
        self.retry_dma(freed_by);
        self.arbitrate();
    }

    /// Detaches the current tenant if its ring latched BROKEN (a protocol violation the
    /// firmware found), right after the step that latched it. Returns whether it did.
    pub(super) fn detach_if_broken(&mut self) -> bool {
        let Some(sharing) = self.hardware.sharing.as_deref() else {
            return false;
        };
        let current = sharing.current;
        if sharing.is_detached(current) {
            return false;
        }
        let Some(error) = self.firmware.broken_error() else {
            return false;
        };
        self.detach_now(current, DetachReason::Broken(Status::from(error)));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{
        device, f32s, knn_launch, load_knn, Scripted, DATABASE, RESULT, ROWS,
    };
    use super::super::SharePolicy;
    use super::*;
    use crate::DeviceConfig;
    use cosim_link::link::{DeviceLink, HostAgent, LinkResponse, Wake};
    use firmware::hal::DeviceMemory;
    use shared_abi::command::LaunchMode;
    use shared_abi::{device_map, CommandDescriptor, DeviceAddress};
    use zerocopy::IntoBytes;

    const LIMIT: Ticks = Ticks(1_000_000_000 * Ticks::PER_NS);

    fn bs_launch(link: &mut dyn DeviceLink) {
        link.mem_store_synchronous(
            Ticks(0),
            device_map::LAUNCH_WINDOW,
            knn_launch(3, DATABASE).as_bytes(),
            9,
        );
    }

    /// Two tenants launch KNN at time 0 (tenant 0's goes first); tenant 0 detached at
    /// `detach`, if given.
    fn two_launches(detach: Option<Ticks>) -> (Emulator, Scripted, Scripted) {
        let mut device = device(2, SharePolicy::RoundRobin);
        load_knn(&mut device, 0, 1.0);
        load_knn(&mut device, 1, 2.0);
        if let Some(at) = detach {
            device.schedule_detach(0, at, DetachReason::Dead).unwrap();
        }
        let mut zero = Scripted::new(1, vec![Box::new(bs_launch)]);
        let mut one = Scripted::new(1, vec![Box::new(bs_launch)]);
        device
            .run_tenants(&mut [&mut zero, &mut one], LIMIT)
            .unwrap();
        (device, zero, one)
    }

    fn result_of(device: &mut Emulator, tenant: usize) -> Vec<f32> {
        device.select(tenant);
        let mut result = [0u8; (ROWS * 4) as usize];
        device
            .dram()
            .read(DeviceAddress(RESULT), &mut result)
            .unwrap();
        f32s(&result)
    }

    /// Tenant 0 dies half-way through its kernel: its stage is cut then, and tenant 1, which
    /// waited for the CCM, is granted it at that very time (its wait is shorter by exactly
    /// the part of tenant 0's kernel that did not run); tenant 0 gets no response and its
    /// CCM time stops at the cut.
    #[test]
    fn a_tenant_detached_while_it_holds_the_ccm_frees_it_at_that_time() {
        let (mut whole, zero, _) = two_launches(None);
        let (busy, waited) = (
            whole.tenant_figures(0).unwrap().ccm_busy,
            whole.tenant_figures(1).unwrap().ccm_wait,
        );
        let response = crate::sim::time::one_way(DeviceConfig::default().cxl_mem_round_trip_ns);
        let end = Ticks(zero.responses[0].0 .0 - response.0);
        let granted = Ticks(end.0 - busy.0);
        let cut = Ticks(granted.0 + busy.0 / 2);
        assert!(granted < cut && cut < end, "{granted:?} {cut:?} {end:?}");
        assert_eq!(result_of(&mut whole, 1), vec![4.0 * 64.0; ROWS as usize]);

        let (mut detached, zero, one) = two_launches(Some(cut));
        let record = detached.detached(0).cloned().unwrap();
        assert_eq!(record.at, cut);
        assert_eq!(record.reason, DetachReason::Dead);
        assert_eq!(
            record.ccm_items_cut,
            Some(ROWS as u32),
            "every item was running"
        );
        assert!(
            zero.responses.is_empty(),
            "a detached host gets no response"
        );
        assert_eq!(one.store_status(9), Some(Status::Ok.code()));
        assert_eq!(result_of(&mut detached, 1), vec![4.0 * 64.0; ROWS as usize]);
        let (zero_figures, one_figures) = (
            detached.tenant_figures(0).unwrap(),
            detached.tenant_figures(1).unwrap(),
        );
        assert_eq!(zero_figures.ccm_busy, Ticks(cut.0 - granted.0));
        assert_eq!(one_figures.ccm_wait, Ticks(waited.0 - (end.0 - cut.0)));
        detached.select(0);
        assert_eq!(detached.firmware().broken(), Some(Status::RingBroken));
        assert_eq!(detached.dram().size(), 8, "its logical device is released");
    }

    /// A back-streaming launch with no DMA region programmed latches tenant 0's ring BROKEN
    /// (`NoRegion`): the device detaches it at the store's arrival and drops its later
    /// requests; tenant 1's launch runs as if tenant 0 were not there.
    #[test]
    fn a_ring_latched_broken_detaches_its_tenant_and_the_others_run_on() {
        let mut device = device(2, SharePolicy::RoundRobin);
        load_knn(&mut device, 0, 1.0);
        load_knn(&mut device, 1, 2.0);
        let mut zero = Scripted::new(
            1,
            vec![
                Box::new(|link| {
                    let launch = CommandDescriptor {
                        mode: LaunchMode::BackStreaming as u32,
                        ..knn_launch(5, DATABASE)
                    };
                    link.mem_store(Ticks(0), device_map::LAUNCH_WINDOW, launch.as_bytes());
                }),
                Box::new(|link| link.mem_load(Ticks(0), DeviceAddress(DATABASE), 8, 8, 6)),
            ],
        );
        let mut one = Scripted::new(1, vec![Box::new(bs_launch)]);
        device
            .run_tenants(&mut [&mut zero, &mut one], LIMIT)
            .unwrap();
        let record = device.detached(0).cloned().unwrap();
        assert_eq!(record.reason, DetachReason::Broken(Status::NoRegion));
        assert!(record.at > Ticks::ZERO && record.ccm_items_cut.is_none());
        assert!(
            zero.responses.is_empty(),
            "its load, arriving after the detach, is dropped: {:?}",
            zero.responses
        );
        assert_eq!(one.store_status(9), Some(Status::Ok.code()));
        assert_eq!(device.tenant_figures(1).unwrap().ccm_wait, Ticks::ZERO);
        assert_eq!(result_of(&mut device, 1), vec![4.0 * 64.0; ROWS as usize]);
        assert!(device.detached(1).is_none());
    }

    /// A host agent that finds its host gone asks, through its [`TenantDetacher`], to be
    /// detached: it is, after that turn, at the turn's time; its launch store still on the
    /// link is dropped when it arrives, and the other tenant's launch never waits.
    #[test]
    fn a_host_agent_detaches_its_own_tenant_through_its_detacher() {
        struct Dies {
            detacher: TenantDetacher,
        }
        impl HostAgent for Dies {
            fn deliver(&mut self, _: Ticks, _: LinkResponse) {}
            fn turn(&mut self, now: Ticks, link: &mut dyn DeviceLink) -> Wake {
                bs_launch(link);
                let _ = now;
                self.detacher.detach(DetachReason::Stopped { waited_ms: 0 });
                Wake::OnResponse
            }
        }
        let mut device = device(2, SharePolicy::RoundRobin);
        load_knn(&mut device, 0, 1.0);
        load_knn(&mut device, 1, 2.0);
        let mut zero = Dies {
            detacher: device.detacher(0).unwrap(),
        };
        assert_eq!(zero.detacher.tenant(), 0);
        let mut one = Scripted::new(1, vec![Box::new(bs_launch)]);
        device
            .run_tenants(&mut [&mut zero, &mut one], LIMIT)
            .unwrap();
        let record = device.detached(0).cloned().unwrap();
        assert_eq!(record.at, Ticks::ZERO);
        assert_eq!(record.reason, DetachReason::Stopped { waited_ms: 0 });
        assert!(!record.dispatch_dropped);
        let figures = device.tenant_figures(1).unwrap();
        assert_eq!((figures.grants, figures.ccm_wait), (1, Ticks::ZERO));
        assert_eq!(device.tenant_figures(0).unwrap().grants, 0);
        assert_eq!(one.store_status(9), Some(Status::Ok.code()));
    }

    /// A host whose agent records what it is told when its tenant is detached.
    struct Told {
        host: Scripted,
        told: Vec<(Ticks, String)>,
    }

    impl HostAgent for Told {
        fn deliver(&mut self, at: Ticks, response: LinkResponse) {
            self.host.deliver(at, response);
        }
        fn turn(&mut self, now: Ticks, link: &mut dyn DeviceLink) -> Wake {
            self.host.turn(now, link)
        }
        fn detached(&mut self, at: Ticks, reason: &str) {
            self.told.push((at, reason.to_owned()));
        }
    }

    /// A host that asks for a load longer than its logical device (beyond the link's bounds)
    /// is detached by the device at that turn, with the refusal as the reason, and its agent
    /// is told once (which, why, when); the other tenant's launch runs as if it were alone.
    #[test]
    fn a_link_request_beyond_the_bounds_detaches_its_tenant_and_tells_its_agent() {
        let mut device = device(2, SharePolicy::RoundRobin);
        load_knn(&mut device, 0, 1.0);
        load_knn(&mut device, 1, 2.0);
        let huge = 2 * super::super::tests::LD_BYTES;
        let mut zero = Told {
            host: Scripted::new(
                1,
                vec![Box::new(move |link| {
                    link.mem_load(Ticks(0), DeviceAddress(DATABASE), huge, 8, 6)
                })],
            ),
            told: Vec::new(),
        };
        let mut one = Told {
            host: Scripted::new(1, vec![Box::new(bs_launch)]),
            told: Vec::new(),
        };
        device
            .run_tenants(&mut [&mut zero, &mut one], LIMIT)
            .unwrap();
        let record = device.detached(0).cloned().unwrap();
        assert_eq!(record.at, Ticks::ZERO);
        assert!(
            matches!(&record.reason, DetachReason::LinkRequest(refusal) if refusal.contains(&huge.to_string())),
            "{record:?}"
        );
        assert_eq!(zero.told, vec![(Ticks::ZERO, record.reason.to_string())]);
        assert!(zero.host.responses.is_empty());
        assert!(one.told.is_empty() && device.detached(1).is_none());
        assert_eq!(one.host.store_status(9), Some(Status::Ok.code()));
        assert_eq!(device.tenant_figures(1).unwrap().ccm_wait, Ticks::ZERO);
        assert_eq!(result_of(&mut device, 1), vec![4.0 * 64.0; ROWS as usize]);
    }

    /// A tenant that waits for a response that never comes is detached for a deadlock of its
    /// own once the other ran to its end; when nobody ran to its end, the run fails with the
    /// device's deadlock. The same for the time limit.
    #[test]
    fn a_deadlock_or_the_limit_is_one_tenants_only_when_another_ran_to_its_end() {
        let run = |limit: Ticks, one_done: bool| {
            let mut device = device(2, SharePolicy::RoundRobin);
            load_knn(&mut device, 1, 2.0);
            // Waits for a response and asks for nothing.
            let mut zero = Scripted::new(1, Vec::new());
            let mut one = match one_done {
                true => Scripted::new(1, vec![Box::new(bs_launch)]),
                false => Scripted::new(1, Vec::new()),
            };
            let outcome = device.run_tenants(&mut [&mut zero, &mut one], limit);
            (
                outcome,
                device.detached(0).cloned(),
                device.detached(1).cloned(),
            )
        };
        let (outcome, zero, one) = run(LIMIT, true);
        assert_eq!(outcome, Ok(()));
        let zero = zero.unwrap();
        assert_eq!(zero.reason, DetachReason::Deadlock);
        assert!(zero.at > Ticks::ZERO && one.is_none(), "{zero:?}");
        let (outcome, zero, one) = run(LIMIT, false);
        assert!(matches!(
            outcome,
            Err(crate::cosim::CoSimError::Deadlock { .. })
        ));
        assert!(zero.is_none() && one.is_none());
        // A limit before tenant 1's launch completes: nobody ran to its end.
        let (outcome, _, _) = run(Ticks::from_ns(10), true);
        assert!(matches!(
            outcome,
            Err(crate::cosim::CoSimError::TimeLimit { .. })
        ));
    }

    /// Detaching names a tenant the device has; twice keeps the first record; a one-host
    /// device has no tenants to detach.
    #[test]
    fn detaching_checks_the_tenant_and_keeps_the_first_record() {
        let mut device = device(2, SharePolicy::RoundRobin);
        assert_eq!(
            device.detach_tenant(2, DetachReason::Dead),
            Err(super::super::TenantError::NoTenant {
                tenant: 2,
                tenants: 2
            })
        );
        assert!(device
            .schedule_detach(5, Ticks::ZERO, DetachReason::Dead)
            .is_err());
        assert!(device.detacher(2).is_none());
        let first = device.detach_tenant(1, DetachReason::Dead).unwrap();
        let again = device
            .detach_tenant(1, DetachReason::Broken(Status::HeadBeyondTail))
            .unwrap();
        assert_eq!(first, again);
        assert_eq!(first.reason, DetachReason::Dead);
        let mut alone = Emulator::new(
            DeviceConfig::default(),
            Arc::new(PhysicalMemory::new(1 << 16).unwrap()),
            firmware::StreamingFactor::Bytes(32),
            true,
        );
        assert!(alone.detach_tenant(0, DetachReason::Dead).is_err());
        assert!(alone.detacher(0).is_none());
        // The detached tenant's host is never given a turn: its calls are never made.
        let mut zero = Scripted::new(0, Vec::new());
        let mut one = Scripted::new(1, vec![Box::new(bs_launch)]);
        device
            .run_tenants(&mut [&mut zero, &mut one], LIMIT)
            .unwrap();
        assert_eq!(device.metrics().simulator.link_calls, 0);
    }
}
