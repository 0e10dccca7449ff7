//! Several hosts sharing one device: tenants.
//!
//! A CXL 2.0 multi-logical device (MLD) partitions one device among up to 16 hosts: each host
//! sees its own logical device (LD) with its own device physical address space, registers and
//! mailbox, while the media and the device's engines are shared. The emulator models a shared
//! CCM the same way ([`Emulator::shared`]).
//!
//! **What each tenant has alone** (its [`TenantContext`] and its own firmware, parked with it): its device
//! memory (its LD: a segment of its own, addresses from 0 with the launch window, flow-control
//! block, shadow descriptor, data window and firmware scratch area where the one-host device
//! has them), its host memory (where its DMA region and rings are, and where the DMA engine
//! lands its writes), its mailbox and register page, its host events, its synchronous-launch
//! tokens, its link requests in flight and their bounds, its interrupts, and its own
//! [`Firmware`]: region, flow control, launch queue ([`firmware::LAUNCH_QUEUE`]), tag space,
//! result monitor and DMA executor, the firmware's per-host state made per-tenant. Every
//! address a tenant names (a command's input, parameters and result, a DMA descriptor's source
//! and destination, a CXL.mem store or load) is an address of its own LD or its own host
//! memory, checked against their sizes as on the one-host device: no address a tenant can
//! write names another tenant's memory, and one past its LD's end is refused
//! (`DeviceMemoryFault`), as the tests here check.
//!
//! **What the tenants share**: the event queue and virtual time, the link (both directions,
//! one FIFO serializer each: every tenant's stores, loads, register accesses and DMA writes
//! queue behind each other's), the DMA engine's channels (first come, first served at
//! submission; a tenant refused for want of a channel is stepped again, in a fixed rotation,
//! when one frees), and the CCM with its memory bandwidth. The CCM runs one dispatch at a time
//! (as on the one-host device): a tenant's dispatch (a launch, or one stage of a multi-stage
//! launch) waits in front of the CCM until the arbiter grants it ([`SharePolicy`]): round-robin
//! among the tenants waiting, or weighted shares of CCM busy time. While one tenant computes,
//! another's results stream over the DMA engine and the link, so the tenants overlap where
//! their phases differ.
//!
//! **Context switch.** The emulator keeps the current tenant's context in [`Hardware`]'s own
//! fields, where the one-host paths read it, and parks the others. Each event runs in the
//! context of the tenant that scheduled it (the queue stamps every push with the current
//! tenant: `crate::sim::queue`'s "Owners"); a CCM wake runs in the context of the tenant the
//! CCM is granted to. A switch swaps a few dozen words and two pointers. With one host nothing
//! is parked, [`Hardware::sharing`] is `None`, and no path changes.
//!
//! **Virtual time.** [`Emulator::run_tenants`] is [`Emulator::run`] with several hosts: the
//! emulator stays the time master; at equal times device events run first, then the hosts in
//! tenant order (tenant 0 first); a host's turns end before any other party's next event, so
//! the same tenants give the same numbers, byte for byte. Responses (loads, synchronous
//! stores, register reads, interrupts) go to the host that asked.
//!
//! **Faults do not spread.** A tenant whose host dies, stops taking its turns or breaks the
//! protocol is detached at a virtual time: its ring marked BROKEN, its CCM stage cut, its
//! dispatch and DMA requests in preparation dropped, its events dropped, its memory released
//! ([`detach`]'s module docs); the others run on.
//!
//! **Not modelled (yet).** Spatial sharing of the CCM (two tenants' kernels on disjoint units
//! at once), contention for the firmware core (each tenant's firmware steps in zero time, as
//! on the one-host device), per-tenant DMA channel reservations, and quality-of-service on the
//! link. See `docs/tenants.md` for what is left.

pub mod detach;

pub use detach::{DetachReason, Detached, TenantDetacher};

use super::{DeviceMetrics, Emulator};
use crate::dram::DeviceDram;
use crate::hal_impl::{Event, Hardware, HostInFlight};
use cosim_link::hdm::DataAllocator;
use cosim_link::link::{HostAgent, Wake};
use cosim_link::phys::PhysicalMemory;
use cosim_link::sync::Arc;
use firmware::hal::{HostEvent, KernelLaunch};
use firmware::{Firmware, FirmwareError};
use shared_abi::{mailbox, DeviceAddress, Ticks};
use std::collections::{BTreeMap, VecDeque};

/// Most tenants one device serves: a CXL 2.0 multi-logical device has at most 16 logical
/// devices.
pub const MAX_TENANTS: usize = 16;

/// Largest weight of a tenant's share ([`SharePolicy::Weighted`]).
pub const MAX_WEIGHT: u32 = 1000;

/// How the CCM is shared among the tenants waiting for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SharePolicy {
    /// The waiting tenants take turns, one dispatch each, in tenant order from the one after
    /// the last granted.
    RoundRobin,
    /// Weighted shares of CCM busy time: the CCM goes to the waiting tenant that has used the
    /// least busy time per unit of its weight (ties: round-robin order). One weight per tenant,
    /// each in `1..=MAX_WEIGHT`.
    Weighted(Vec<u32>),
}

impl SharePolicy {
    /// Checks the policy for `tenants` tenants.
    pub fn check(&self, tenants: usize) -> Result<(), String> {
        if let SharePolicy::Weighted(weights) = self {
            if weights.len() != tenants {
                return Err(format!(
                    "{} weights for {tenants} tenants: give one weight per tenant",
                    weights.len()
                ));
            }
            if let Some(bad) = weights.iter().find(|w| **w == 0 || **w > MAX_WEIGHT) {
                return Err(format!(
                    "a tenant's weight is {bad}; weights are 1 to {MAX_WEIGHT}"
                ));
            }
        }
        Ok(())
    }
}

/// What one tenant brings to a shared device.
#[derive(Debug)]
pub struct TenantSetup {
    /// Its host's memory (its DMA region and rings).
    pub host_memory: Arc<PhysicalMemory>,
    /// Its logical device's memory.
    pub dram: DeviceDram,
    /// Its streaming factor.
    pub streaming_factor: firmware::StreamingFactor,
    /// Its streaming order.
    pub out_of_order: bool,
}

/// Why a shared device could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TenantError {
    /// No tenant, or more than [`MAX_TENANTS`].
    #[error("{0} tenants: a shared device serves 1 to {MAX_TENANTS} (a CXL 2.0 multi-logical device has at most 16 logical devices)")]
    Count(usize),
    /// The share policy does not fit the tenants.
    #[error("share policy: {0}")]
    Policy(String),
    /// The device has no such tenant (or serves one host, not built by
    /// [`Emulator::shared`]).
    #[error("tenant {tenant}: the device has {tenants} tenants (0 to {})", tenants.saturating_sub(1))]
    NoTenant {
        /// The tenant named.
        tenant: usize,
        /// Tenants the device has.
        tenants: usize,
    },
    /// A run was given a different number of hosts than the device has tenants.
    #[error("{hosts} hosts for a device with {tenants} tenants")]
    Hosts {
        /// Hosts given.
        hosts: usize,
        /// Tenants.
        tenants: usize,
    },
}

/// The part of [`Hardware`] that belongs to one tenant (its logical device and its host):
/// swapped in when the tenant runs, parked otherwise.
#[derive(Debug)]
pub struct TenantContext {
    dram: DeviceDram,
    host_memory: Arc<PhysicalMemory>,
    mailbox: [u64; (mailbox::WINDOW_LENGTH / 8) as usize],
    register_page: Option<crate::registers::RegisterPage>,
    host_events: VecDeque<HostEvent>,
    bulk_tokens: BTreeMap<u32, VecDeque<u64>>,
    host_writable_end: DeviceAddress,
    host_in_flight: HostInFlight,
    interrupts: u64,
}

impl TenantContext {
    /// The tenant's context taken out of a device built for it alone.
    fn of(hardware: Hardware) -> TenantContext {
        TenantContext {
            dram: hardware.dram,
            host_memory: hardware.host_memory,
            mailbox: hardware.mailbox,
            register_page: hardware.register_page,
            host_events: hardware.host_events,
            bulk_tokens: hardware.bulk_tokens,
            host_writable_end: hardware.host_writable_end,
            host_in_flight: hardware.host_in_flight,
            interrupts: hardware.interrupts,
        }
    }

    /// Exchanges this context with the one in `hardware`.
    fn swap(&mut self, hardware: &mut Hardware) {
        use std::mem::swap;
        swap(&mut self.dram, &mut hardware.dram);
        swap(&mut self.host_memory, &mut hardware.host_memory);
        swap(&mut self.mailbox, &mut hardware.mailbox);
        swap(&mut self.register_page, &mut hardware.register_page);
        swap(&mut self.host_events, &mut hardware.host_events);
        swap(&mut self.bulk_tokens, &mut hardware.bulk_tokens);
        swap(&mut self.host_writable_end, &mut hardware.host_writable_end);
        swap(&mut self.host_in_flight, &mut hardware.host_in_flight);
        swap(&mut self.interrupts, &mut hardware.interrupts);
    }
}

/// A tenant that is not running now: its context, its firmware, its set-up allocator.
#[derive(Debug)]
pub(crate) struct Parked {
    context: TenantContext,
    firmware: Box<Firmware>,
    allocator: DataAllocator,
}

/// What the device measured for one tenant of a shared run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TenantFigures {
    /// CCM busy time while the CCM was granted to this tenant.
    pub ccm_busy: Ticks,
    /// Union of the intervals during which this tenant's DMA requests' writes were on the
    /// link or landing.
    pub dma_busy: Ticks,
    /// This tenant's DMA requests sent.
    pub dma_requests: u64,
    /// Dispatches the arbiter granted this tenant.
    pub grants: u64,
    /// Ticks this tenant's dispatches waited for the CCM (from request to grant).
    pub ccm_wait: Ticks,
}

/// The device's sharing state: the arbiter in front of the CCM, the tenants waiting for a DMA
/// channel, per-tenant figures.
#[derive(Debug)]
pub struct Sharing {
    /// The tenant whose context is in [`Hardware`].
    current: usize,
    policy: SharePolicy,
    /// Each tenant's dispatch waiting for the CCM, and since when.
    pending: Vec<Option<(KernelLaunch, Ticks)>>,
    /// Tenants refused a DMA channel since one last freed.
    dma_waiting: Vec<bool>,
    /// The tenant the CCM is granted to, and the CCM's busy time at the grant.
    ccm_owner: Option<(usize, Ticks)>,
    /// The tenant granted last (round-robin starts after it).
    last_granted: usize,
    /// Per-tenant figures, and each tenant's DMA busy union's end.
    figures: Vec<TenantFigures>,
    dma_busy_until: Vec<Ticks>,
    /// Each tenant's DMA requests accepted and still in preparation (their `DmaPrepared`
    /// events not yet run).
    preparing: Vec<u32>,
    /// Each tenant's detach, once detached ([`detach`]).
    detached: Vec<Option<Detached>>,
    /// Detaches scheduled: `(at, tenant, reason)`.
    scheduled: Vec<(Ticks, usize, DetachReason)>,
    /// Detaches the host agents asked for.
    requests: std::sync::Arc<detach::DetachRequests>,
    /// Tenants detached so far, and whether each one's agent was told
    /// ([`HostAgent::detached`]).
    detaches: usize,
    told: Vec<bool>,
}

impl Sharing {
    fn new(tenants: usize, policy: SharePolicy) -> Sharing {
        Sharing {
            current: 0,
            policy,
            pending: vec![None; tenants],
            dma_waiting: vec![false; tenants],
            ccm_owner: None,
            last_granted: tenants.saturating_sub(1),
            figures: vec![TenantFigures::default(); tenants],
            dma_busy_until: vec![Ticks::ZERO; tenants],
            preparing: vec![0; tenants],
            detached: vec![None; tenants],
            scheduled: Vec::new(),
            requests: std::sync::Arc::default(),
            detaches: 0,
            told: vec![false; tenants],
        }
    }

    /// The DMA engine accepted a request of the current tenant (the HAL's `submit`).
    pub(crate) fn dma_accepted(&mut self) {
        if let Some(count) = self.preparing.get_mut(self.current) {
            *count = count.saturating_add(1);
        }
    }

    /// The current tenant asks for the CCM (the HAL's `dispatch`); the arbiter grants it
    /// after the event ([`Emulator::run_tenants`]). The firmware dispatches once per stage and
    /// only after the stage before ended, so a second request cannot come while one waits.
    pub(crate) fn request_ccm(
        &mut self,
        launch: KernelLaunch,
        now: Ticks,
    ) -> Result<(), FirmwareError> {
        match self.pending.get_mut(self.current) {
            Some(slot @ None) => {
                *slot = Some((launch, now));
                Ok(())
            }
            _ => Err(FirmwareError::Busy),
        }
    }

    /// The current tenant found no free DMA channel.
    pub(crate) fn wait_for_dma(&mut self) {
        if let Some(waiting) = self.dma_waiting.get_mut(self.current) {
            *waiting = true;
        }
    }

    /// The waiting tenant the policy grants the CCM to next, if any waits.
    fn pick(&self) -> Option<usize> {
        let n = self.pending.len();
        let order = (1..=n).map(|k| (self.last_granted + k) % n);
        let waiting = order.filter(|&t| self.pending.get(t).is_some_and(Option::is_some));
        match &self.policy {
            SharePolicy::RoundRobin => waiting.min_by_key(|_| 0),
            SharePolicy::Weighted(weights) => waiting.min_by(|&a, &b| {
                // used(a) / w(a) against used(b) / w(b), exactly; `min_by` keeps the first
                // (round-robin order) of equals.
                let used = |t: usize| self.figures.get(t).map_or(0, |f| u128::from(f.ccm_busy.0));
                let weight = |t: usize| u128::from(weights.get(t).copied().unwrap_or(1));
                (used(a) * weight(b)).cmp(&(used(b) * weight(a)))
            }),
        }
    }
}

/// The error of a one-host loop ([`Emulator::run`], [`Emulator::run_wall`]) started on a
/// shared device, whose dispatches only [`Emulator::run_tenants`]' arbiter grants.
pub(crate) fn one_host_loop_refused() -> super::CoSimError {
    super::CoSimError::HostRequest(
        "a device shared by several tenants runs with Emulator::run_tenants, not with a one-host loop".into(),
    )
}

impl Emulator {
    /// A device shared by `tenants` (1 to [`MAX_TENANTS`]), each with its own logical device
    /// and host, sharing `config`'s CCM, DMA engine and link under `policy` (see the module
    /// docs). Tenant 0 is current after construction: untimed set-up ([`Emulator::allocate`],
    /// [`Emulator::write_untimed`]) goes to the tenant [`Emulator::select`]ed.
    pub fn shared(
        config: crate::DeviceConfig,
        tenants: Vec<TenantSetup>,
        policy: SharePolicy,
    ) -> Result<Emulator, TenantError> {
        let count = tenants.len();
        if count == 0 || count > MAX_TENANTS {
            return Err(TenantError::Count(count));
        }
        policy.check(count).map_err(TenantError::Policy)?;
        let mut built = tenants.into_iter().map(|tenant| {
            Emulator::with_device_memory(
                config.clone(),
                tenant.host_memory,
                tenant.dram,
                tenant.streaming_factor,
                tenant.out_of_order,
            )
        });
        let Some(mut device) = built.next() else {
            return Err(TenantError::Count(0));
        };
        device.tenants.push(None);
        for other in built {
            device.tenants.push(Some(Parked {
                context: TenantContext::of(other.hardware),
                firmware: other.firmware,
                allocator: other.allocator,
            }));
        }
        device.hardware.sharing = Some(Box::new(Sharing::new(count, policy)));
        Ok(device)
    }

    /// Tenants of this device (1 unless built by [`Emulator::shared`]).
    pub fn tenant_count(&self) -> usize {
        self.tenants.len().max(1)
    }

    /// Makes `tenant` current: untimed set-up, [`Emulator::dram`], [`Emulator::firmware`] and
    /// [`Emulator::metrics`]' per-tenant figures then act on its logical device. Does nothing
    /// for a tenant the device does not have.
    pub fn select(&mut self, tenant: usize) {
        let Some(sharing) = self.hardware.sharing.as_deref_mut() else {
            return;
        };
        let current = sharing.current;
        if tenant == current {
            return;
        }
        let Some(mut incoming) = self.tenants.get_mut(tenant).and_then(Option::take) else {
            return;
        };
        sharing.current = tenant;
        incoming.context.swap(&mut self.hardware);
        std::mem::swap(&mut incoming.firmware, &mut self.firmware);
        std::mem::swap(&mut incoming.allocator, &mut self.allocator);
        if let Some(slot) = self.tenants.get_mut(current) {
            *slot = Some(incoming);
        }
        self.hardware.queue.set_owner(tenant as u8);
    }

    /// What the device measured for `tenant`: its firmware's counters, its interrupts and
    /// [`TenantFigures`] in place of the device-wide CCM and DMA figures; the simulator's
    /// counts are the whole device's. Selects `tenant`.
    pub fn tenant_metrics(&mut self, tenant: usize) -> DeviceMetrics {
        self.select(tenant);
        let mut metrics = self.metrics();
        if let Some(figures) = self.tenant_figures(tenant) {
            metrics.ccm_busy = figures.ccm_busy;
            metrics.dma_busy = figures.dma_busy;
            metrics.dma_requests = figures.dma_requests;
        }
        metrics
    }

    /// [`TenantFigures`] of `tenant` of a shared device (`None` with one host).
    pub fn tenant_figures(&self, tenant: usize) -> Option<TenantFigures> {
        let sharing = self.hardware.sharing.as_deref()?;
        let mut figures = *sharing.figures.get(tenant)?;
        if let Some((owner, granted_at)) = sharing.ccm_owner {
            if owner == tenant {
                let busy = self.hardware.ccm.busy(self.hardware.now);
                figures.ccm_busy = figures.ccm_busy.plus(busy.since(granted_at));
            }
        }
        Some(figures)
    }

    /// Runs the device and `hosts` (host `i` is tenant `i`) together until every host is done
    /// (see the module docs for the order of turns). `limit` bounds virtual time.
    pub fn run_tenants(
        &mut self,
        hosts: &mut [&mut dyn HostAgent],
        limit: Ticks,
    ) -> Result<(), super::CoSimError> {
        use super::port::LinkPort;
        use super::CoSimError;
        if hosts.len() != self.tenant_count() || self.hardware.sharing.is_none() {
            return Err(CoSimError::HostRequest(
                TenantError::Hosts {
                    hosts: hosts.len(),
                    tenants: self.tenant_count(),
                }
                .to_string(),
            ));
        }
        let start = self.hardware.now;
        let mut wakes: Vec<Wake> = (0..hosts.len())
            .map(|tenant| match self.sharing().is_detached(tenant) {
                true => Wake::Done,
                false => Wake::At(start),
            })
            .collect();
        // Detaches whose agents were told ([`HostAgent::detached`]).
        let mut told = 0;
        loop {
            if told != self.sharing().detaches {
                told = self.sharing().detaches;
                self.tell_detached(hosts);
            }
            // The host due first: the earliest wake, the lowest tenant at equal times.
            let mut host: Option<(Ticks, usize)> = None;
            let mut waiting = false;
            for (tenant, wake) in wakes.iter().enumerate() {
                match *wake {
                    Wake::Done => {}
                    Wake::OnResponse => waiting = true,
                    Wake::At(at) => {
                        waiting = true;
                        if host.is_none_or(|(first, _)| at < first) {
                            host = Some((at, tenant));
                        }
                    }
                }
            }
            if !waiting {
                return Ok(());
            }
            let device_at = self.hardware.queue.peek_time();
            if self.apply_scheduled_detach(device_at, host, limit, &mut wakes) {
                continue;
            }
            let device_first = match (device_at, host) {
                (Some(d), Some((h, _))) => d <= h,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => {
                    // Nothing left to happen: the tenants still waiting are stuck. Theirs
                    // alone when another tenant ran to its end; the whole device's otherwise.
                    let now = self.hardware.now;
                    if self.detach_unfinished(&mut wakes, now, DetachReason::Deadlock) {
                        continue;
                    }
                    return Err(CoSimError::Deadlock {
                        at_ns: self.hardware.now.as_ns(),
                    });
                }
            };
            let next = if device_first {
                device_at
            } else {
                host.map(|(at, _)| at)
            }
            .unwrap_or(Ticks::NEVER);
            if next > limit {
                // Everything up to the limit ran. The tenants not done then are detached at
                // the limit when another tenant ran to its end; otherwise the run failed.
                let at_limit = DetachReason::TimeLimit {
                    limit_ns: limit.as_ns(),
                };
                if self.detach_unfinished(&mut wakes, limit, at_limit) {
                    continue;
                }
                return Err(CoSimError::TimeLimit {
                    limit_ns: limit.as_ns(),
                });
            }
            if device_first {
                let Some((at, event)) = self.hardware.queue.pop() else {
                    continue;
                };
                self.hardware.counts.events += 1;
                self.hardware.now = at;
                let mut owner = usize::from(self.hardware.queue.popped_owner());
                if let Event::CcmWake = event {
                    if let Some((granted, _)) = self.sharing().ccm_owner {
                        owner = granted;
                    }
                }
                if self.sharing().is_detached(owner) {
                    // A detached tenant's events are dropped, but for what the shared
                    // engines must still do (`detach`'s module docs).
                    if self.drop_detached_event(event) {
                        self.retry_dma(owner);
                    }
                    self.arbitrate();
                    continue;
                }
                let frees_channel = match &event {
                    Event::DmaSent {
                        started, landed, ..
                    } => {
                        self.count_dma(owner, *started, *landed);
                        true
                    }
                    Event::DmaPrepared { .. } => {
                        if let Some(count) = self.sharing().preparing.get_mut(owner) {
                            *count = count.saturating_sub(1);
                        }
                        false
                    }
                    _ => false,
                };
                self.select(owner);
                let response = self.process(event);
                if self.detach_if_broken() {
                    if let Some(wake) = wakes.get_mut(owner) {
                        *wake = Wake::Done;
                    }
                    self.retry_dma(owner);
                } else if let Some(response) = response {
                    if let Some(host) = hosts.get_mut(owner) {
                        host.deliver(at, response);
                    }
                    if let Some(wake) = wakes.get_mut(owner) {
                        *wake = match *wake {
                            Wake::At(t) if t <= at => Wake::At(t),
                            Wake::Done => Wake::Done,
                            _ => Wake::At(at),
                        };
                    }
                    self.take_detach_requests(&mut wakes);
                }
                if frees_channel {
                    self.retry_dma(owner);
                }
                self.detach_broken_after_retries(&mut wakes);
                self.arbitrate();
            } else {
                let Some((at, tenant)) = host else {
                    continue;
                };
                self.hardware.now = self.hardware.now.max(at);
                // Its turns end before any other party's next event: the device's, the other
                // hosts' (a host due at the same time as this one's next turn is a later
                // tenant, whose turn comes first only if it is earlier).
                let others = wakes
                    .iter()
                    .enumerate()
                    .filter(|(other, _)| *other != tenant)
                    .filter_map(|(_, wake)| match wake {
                        Wake::At(t) => Some(*t),
                        _ => None,
                    })
                    .min()
                    .unwrap_or(Ticks::NEVER);
                let horizon = device_at
                    .unwrap_or(Ticks::NEVER)
                    .min(others)
                    .min(Ticks(limit.0.saturating_add(1)));
                self.select(tenant);
                let Some(agent) = hosts.get_mut(tenant) else {
                    continue;
                };
                let mut port = LinkPort {
                    hardware: &mut self.hardware,
                };
                let turns = agent.turns_before(at, horizon, &mut port);
                if let Some(reason) = agent.ended() {
                    return Err(CoSimError::TenantEnded { tenant, reason });
                }
                let counts = &mut self.hardware.counts;
                counts.host_turns = counts.host_turns.saturating_add(turns.taken);
                self.hardware.now = self.hardware.now.max(turns.latest);
                if let Some(refusal) = self.hardware.host_in_flight.refusal.take() {
                    // On a shared device a host that asks for more than the link takes is
                    // detached; the others run on.
                    self.detach_now(tenant, super::tenants::DetachReason::LinkRequest(refusal));
                    self.settle(tenant);
                }
                // Detaches asked for during the turn apply before its answer (an agent that
                // detaches its tenant then answers `Done`).
                self.take_detach_requests(&mut wakes);
                if let Some(wake) = wakes.get_mut(tenant) {
                    *wake = match self.sharing().is_detached(tenant) {
                        true => Wake::Done,
                        false => turns.wake,
                    };
                }
            }
        }
    }

    /// Applies the earliest scheduled detach if it is due before the next device event and
    /// the next host turn (`device_at`, `host`; see `detach`'s module docs). Returns whether
    /// one was taken from the schedule.
    fn apply_scheduled_detach(
        &mut self,
        device_at: Option<Ticks>,
        host: Option<(Ticks, usize)>,
        limit: Ticks,
        wakes: &mut [Wake],
    ) -> bool {
        let Some((at, index)) = self
            .hardware
            .sharing
            .as_deref()
            .and_then(Sharing::next_scheduled)
        else {
            return false;
        };
        let next = device_at
            .unwrap_or(Ticks::NEVER)
            .min(host.map_or(Ticks::NEVER, |(h, _)| h));
        if at > next || at > limit {
            return false;
        }
        let (at, tenant, reason) = self.sharing().scheduled.remove(index);
        // A host that finished before is not detached (nor one detached already).
        if matches!(wakes.get(tenant), Some(Wake::At(_) | Wake::OnResponse)) {
            self.hardware.now = self.hardware.now.max(at);
            self.detach_now(tenant, reason);
            if let Some(wake) = wakes.get_mut(tenant) {
                *wake = Wake::Done;
            }
            self.settle(tenant);
        }
        true
    }

    /// Detaches the tenants whose host agents asked for it ([`TenantDetacher`]), now. A host
    /// that had finished (a session closed after its run ended) is not detached.
    fn take_detach_requests(&mut self, wakes: &mut [Wake]) {
        let requests = std::sync::Arc::clone(&self.sharing().requests);
        for (tenant, reason) in requests.take() {
            if !matches!(wakes.get(tenant), Some(Wake::At(_) | Wake::OnResponse)) {
                continue;
            }
            self.detach_now(tenant, reason);
            if let Some(wake) = wakes.get_mut(tenant) {
                *wake = Wake::Done;
            }
            self.settle(tenant);
        }
    }

    /// Tells each detached tenant's agent, once, that it was detached
    /// ([`HostAgent::detached`]).
    fn tell_detached(&mut self, hosts: &mut [&mut dyn HostAgent]) {
        for (tenant, host) in hosts.iter_mut().enumerate() {
            let sharing = self.sharing();
            let Some(record) = sharing.detached.get(tenant).and_then(Option::as_ref) else {
                continue;
            };
            let (at, reason) = (record.at, record.reason.to_string());
            if let Some(told @ false) = sharing.told.get_mut(tenant) {
                *told = true;
                host.detached(at, &reason);
            }
        }
    }

    /// When nothing more can happen before the limit (a deadlock, or the limit reached):
    /// if some tenant ran to its end (done, not detached), the tenants not done are stuck on
    /// their own and are detached at `at` (now, or the limit) for `reason`, and the run goes
    /// on (it then ends, every host done). Returns whether it detached them; `false` (nobody
    /// ran to its end) leaves the run to fail as a whole.
    fn detach_unfinished(&mut self, wakes: &mut [Wake], at: Ticks, reason: DetachReason) -> bool {
        let ran_to_its_end = wakes
            .iter()
            .enumerate()
            .any(|(tenant, wake)| *wake == Wake::Done && !self.sharing().is_detached(tenant));
        if !ran_to_its_end {
            return false;
        }
        self.hardware.now = self.hardware.now.max(at);
        for tenant in 0..wakes.len() {
            if matches!(wakes.get(tenant), Some(Wake::At(_) | Wake::OnResponse)) {
                self.detach_now(tenant, reason.clone());
                if let Some(wake) = wakes.get_mut(tenant) {
                    *wake = Wake::Done;
                }
                self.settle(tenant);
            }
        }
        true
    }

    /// Tenants whose rings latched BROKEN while [`Emulator::retry_dma`] stepped them: their
    /// hosts get no more turns.
    fn detach_broken_after_retries(&mut self, wakes: &mut [Wake]) {
        for (tenant, wake) in wakes.iter_mut().enumerate() {
            if *wake != Wake::Done && self.sharing().is_detached(tenant) {
                *wake = Wake::Done;
            }
        }
    }

    /// What remains of a detached tenant's event (see `detach`'s module docs): a CCM wake
    /// still runs (the CCM's own timers; the CCM is idle or another tenant's), a DMA request
    /// already on the wire still frees its channel (its completion goes to no firmware), a
    /// landing is dropped. Returns whether a channel freed.
    fn drop_detached_event(&mut self, event: Event) -> bool {
        let hw = &mut self.hardware;
        match event {
            Event::CcmWake => {
                // The CCM was cut or finished when its tenant was detached: nothing can end.
                let _ = hw.ccm_wake();
                false
            }
            Event::DmaSent {
                tag,
                status,
                started,
                landed,
            } => {
                hw.dma.finished(tag, status, started, landed);
                hw.dma.completions.pop_back();
                true
            }
            Event::DmaLand(landing) => {
                hw.queue.recycle(landing.bytes);
                false
            }
            _ => false,
        }
    }

    /// The sharing state (a shared device has one: [`Emulator::run_tenants`] checked).
    fn sharing(&mut self) -> &mut Sharing {
        self.hardware
            .sharing
            .get_or_insert_with(|| Box::new(Sharing::new(1, SharePolicy::RoundRobin)))
    }

    /// Counts a finished DMA request of `tenant` (its own busy union, as
    /// `DmaEngineModel::finished` does for the device).
    fn count_dma(&mut self, tenant: usize, started: Ticks, landed: Ticks) {
        let sharing = self.sharing();
        let (Some(figures), Some(until)) = (
            sharing.figures.get_mut(tenant),
            sharing.dma_busy_until.get_mut(tenant),
        ) else {
            return;
        };
        figures.dma_requests += 1;
        let from = started.max(*until);
        figures.dma_busy = figures.dma_busy.plus(landed.since(from));
        *until = (*until).max(landed);
    }

    /// A DMA channel freed: the tenants refused one since get another try, in tenant order
    /// from the one after `freed_by`, while a channel is free.
    fn retry_dma(&mut self, freed_by: usize) {
        let n = self.tenant_count();
        for k in 1..=n {
            let tenant = (freed_by + k) % n;
            if !self.hardware.dma.has_room() {
                return;
            }
            let waiting = self
                .sharing()
                .dma_waiting
                .get_mut(tenant)
                .map(std::mem::take)
                .unwrap_or(false);
            if waiting {
                self.select(tenant);
                self.firmware.step(&mut self.hardware);
                // A step that latched the ring BROKEN detaches its tenant (its cancelled
                // requests' channels go to the next tenants of this rotation).
                self.detach_if_broken();
            }
        }
    }

    /// When the CCM is idle: closes the last grant's account and grants the CCM to the next
    /// waiting dispatch the policy picks.
    fn arbitrate(&mut self) {
        if self.hardware.ccm.is_running() {
            return;
        }
        let now = self.hardware.now;
        let busy = self.hardware.ccm.busy(now);
        let sharing = self.sharing();
        if let Some((owner, granted_at)) = sharing.ccm_owner.take() {
            if let Some(figures) = sharing.figures.get_mut(owner) {
                figures.ccm_busy = figures.ccm_busy.plus(busy.since(granted_at));
            }
        }
        let Some(next) = sharing.pick() else {
            return;
        };
        let Some((launch, asked)) = sharing.pending.get_mut(next).and_then(Option::take) else {
            return;
        };
        sharing.last_granted = next;
        sharing.ccm_owner = Some((next, busy));
        if let Some(figures) = sharing.figures.get_mut(next) {
            figures.grants += 1;
            figures.ccm_wait = figures.ccm_wait.plus(now.since(asked));
        }
        self.select(next);
        let hw = &mut self.hardware;
        hw.ccm.dispatch(
            now,
            launch.kernel,
            launch.tag,
            launch.item_range(),
            &hw.dram,
        );
        hw.schedule_ccm();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeviceConfig;
    use cosim_link::link::{DeviceLink, LinkResponse};
    use firmware::hal::DeviceMemory;
    use shared_abi::command::{KernelId, LaunchMode};
    use shared_abi::{device_map, CommandDescriptor, Status};
    use zerocopy::IntoBytes;

    /// Each tenant's logical device: 64 MiB (the firmware's scratch area takes the top).
    pub(super) const LD_BYTES: u64 = 64 << 20;
    /// KNN shape of the tests: 4 rows of 64 `f32`, one query.
    pub(super) const ROWS: u64 = 4;
    pub(super) const DIM: u64 = 64;
    pub(super) const DATABASE: u64 = device_map::DATA_BASE.0;
    pub(super) const QUERIES: u64 = DATABASE + ROWS * DIM * 4;
    pub(super) const RESULT: u64 = QUERIES + DIM * 4;

    pub(super) fn device(tenants: usize, policy: SharePolicy) -> Emulator {
        let setups = (0..tenants)
            .map(|_| TenantSetup {
                host_memory: Arc::new(PhysicalMemory::new(1 << 20).unwrap()),
                dram: DeviceDram::new(LD_BYTES),
                streaming_factor: firmware::StreamingFactor::Bytes(32),
                out_of_order: true,
            })
            .collect();
        Emulator::shared(DeviceConfig::default(), setups, policy).unwrap()
    }

    /// A BS launch of KNN over `database`, the queries and the result of the tests.
    pub(super) fn knn_launch(tag: u32, database: u64) -> CommandDescriptor {
        CommandDescriptor {
            kernel: KernelId::KnnDistance as u32,
            mode: LaunchMode::BulkSynchronous as u32,
            tag,
            flags: 0,
            result_address: RESULT,
            result_length: ROWS * 4,
            args: [database, QUERIES, ROWS | DIM << 32, 1],
        }
    }

    /// Writes tenant `tenant`'s database (every element `value`) and a zero query.
    pub(super) fn load_knn(device: &mut Emulator, tenant: usize, value: f32) {
        device.select(tenant);
        let database: Vec<u8> = (0..ROWS * DIM).flat_map(|_| value.to_le_bytes()).collect();
        device
            .write_untimed(DeviceAddress(DATABASE), &database)
            .unwrap();
        device
            .write_untimed(DeviceAddress(QUERIES), &vec![0; (DIM * 4) as usize])
            .unwrap();
    }

    /// One scripted link call.
    pub(super) type Call = Box<dyn Fn(&mut dyn DeviceLink)>;

    /// A host that makes its calls at its first turn and is done once every response came.
    pub(super) struct Scripted {
        calls: Vec<Call>,
        expected: usize,
        pub(super) responses: Vec<(Ticks, LinkResponse)>,
        started: bool,
    }

    impl Scripted {
        pub(super) fn new(expected: usize, calls: Vec<Call>) -> Scripted {
            Scripted {
                calls,
                expected,
                responses: Vec::new(),
                started: false,
            }
        }

        pub(super) fn store_status(&self, token: u64) -> Option<u32> {
            self.responses.iter().find_map(|(_, r)| match r {
                LinkResponse::StoreDone { token: t, status } if *t == token => Some(*status),
                _ => None,
            })
        }

        fn loaded(&self, token: u64) -> Option<&[u8]> {
            self.responses.iter().find_map(|(_, r)| match r {
                LinkResponse::LoadDone { token: t, data } if *t == token => Some(&data[..]),
                _ => None,
            })
        }
    }

    impl HostAgent for Scripted {
        fn deliver(&mut self, at: Ticks, response: LinkResponse) {
            self.responses.push((at, response));
        }
        fn turn(&mut self, _now: Ticks, link: &mut dyn DeviceLink) -> Wake {
            if !self.started {
                self.started = true;
                for call in &self.calls {
                    call(link);
                }
            }
            if self.responses.len() >= self.expected {
                Wake::Done
            } else {
                Wake::OnResponse
            }
        }
    }

    pub(super) fn f32s(bytes: &[u8]) -> Vec<f32> {
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    /// Tenant 0 names addresses past the end of its logical device (where tenant 1's memory
    /// would begin if the two were laid end to end in one media): a launch whose database
    /// lies there, a synchronous store and a load. The device refuses all three; tenant 1's
    /// memory is untouched, and the same address (DATA_BASE) names each tenant's own memory.
    #[test]
    fn a_tenants_descriptors_and_link_requests_cannot_reach_another_tenants_memory() {
        let mut device = device(2, SharePolicy::RoundRobin);
        load_knn(&mut device, 0, 1.0);
        load_knn(&mut device, 1, 2.0);
        let beyond = LD_BYTES + DATABASE;
        let mut zero = Scripted::new(
            4,
            vec![
                Box::new(move |link| {
                    let launch = knn_launch(7, beyond);
                    link.mem_store_synchronous(
                        Ticks(0),
                        device_map::LAUNCH_WINDOW,
                        launch.as_bytes(),
                        1,
                    );
                }),
                Box::new(move |link| {
                    link.mem_store_synchronous(Ticks(0), DeviceAddress(beyond), &[0xee; 8], 2)
                }),
                Box::new(move |link| link.mem_load(Ticks(0), DeviceAddress(beyond), 64, 8, 3)),
                // The same device address in its own logical device: its own data.
                Box::new(|link| link.mem_load(Ticks(0), DeviceAddress(DATABASE), 8, 8, 4)),
            ],
        );
        let mut one = Scripted::new(
            1,
            vec![Box::new(|link| {
                link.mem_load(Ticks(0), DeviceAddress(DATABASE), 8, 8, 5)
            })],
        );
        device
            .run_tenants(&mut [&mut zero, &mut one], Ticks::from_ns(1_000_000_000))
            .unwrap();
        assert_eq!(
            zero.store_status(1),
            Some(Status::ArgumentOutOfRange.code()),
            "a launch naming memory past its logical device is refused"
        );
        assert_eq!(
            zero.store_status(2),
            Some(Status::DeviceMemoryFault.code()),
            "a store past its logical device is refused"
        );
        assert_eq!(
            zero.loaded(3),
            Some(&[][..]),
            "a load past it returns nothing"
        );
        assert_eq!(f32s(zero.loaded(4).unwrap()), [1.0, 1.0]);
        assert_eq!(f32s(one.loaded(5).unwrap()), [2.0, 2.0]);
        device.select(1);
        let mut word = [0u8; 8];
        device
            .dram()
            .read(DeviceAddress(DATABASE), &mut word)
            .unwrap();
        assert_eq!(f32s(&word), [2.0, 2.0], "tenant 1's memory is untouched");
        assert!(device.dram().size() == LD_BYTES);
    }

    /// Two tenants launch at the same time on the one CCM: the arbiter runs them one after
    /// the other (tenant 0 first at equal times), each over its own data, and each result
    /// lands in its own logical device; the second waited for the first.
    #[test]
    fn two_tenants_launches_share_the_ccm_one_at_a_time_each_over_its_own_memory() {
        let mut device = device(2, SharePolicy::RoundRobin);
        load_knn(&mut device, 0, 1.0);
        load_knn(&mut device, 1, 2.0);
        let launch = |link: &mut dyn DeviceLink| {
            link.mem_store_synchronous(
                Ticks(0),
                device_map::LAUNCH_WINDOW,
                knn_launch(3, DATABASE).as_bytes(),
                9,
            );
        };
        let mut zero = Scripted::new(1, vec![Box::new(launch)]);
        let mut one = Scripted::new(1, vec![Box::new(launch)]);
        device
            .run_tenants(&mut [&mut zero, &mut one], Ticks::from_ns(1_000_000_000))
            .unwrap();
        assert_eq!(zero.store_status(9), Some(Status::Ok.code()));
        assert_eq!(one.store_status(9), Some(Status::Ok.code()));
        for (tenant, expected) in [(0, DIM as f32), (1, 4.0 * DIM as f32)] {
            device.select(tenant);
            let mut result = [0u8; (ROWS * 4) as usize];
            device
                .dram()
                .read(DeviceAddress(RESULT), &mut result)
                .unwrap();
            assert_eq!(
                f32s(&result),
                vec![expected; ROWS as usize],
                "tenant {tenant}"
            );
        }
        let (first, second) = (
            device.tenant_figures(0).unwrap(),
            device.tenant_figures(1).unwrap(),
        );
        assert_eq!((first.grants, second.grants), (1, 1));
        assert_eq!(
            first.ccm_wait,
            Ticks::ZERO,
            "tenant 0 goes first at equal times"
        );
        assert!(
            second.ccm_wait > Ticks::ZERO && first.ccm_busy > Ticks::ZERO,
            "tenant 1 waited for tenant 0's launch: {second:?} {first:?}"
        );
        // Tenant 1's kernel started when tenant 0's ended: its completion comes at least its
        // own CCM time after tenant 0's.
        let (done_zero, done_one) = (zero.responses[0].0, one.responses[0].0);
        assert!(
            done_one.since(done_zero) >= second.ccm_busy,
            "{done_zero:?} {done_one:?} {second:?}"
        );
    }

    fn launch(tag: u32) -> KernelLaunch {
        KernelLaunch {
            tag,
            kernel: firmware::kernels::Kernel::Knn(
                firmware::kernels::knn::KnnKernel::decode(&knn_launch(tag, DATABASE), LD_BYTES)
                    .unwrap(),
            ),
            first_item: 0,
            items: ROWS as u32,
        }
    }

    /// Round-robin starts after the tenant granted last; weighted shares go to the waiting
    /// tenant with the least CCM time per unit of weight.
    #[test]
    fn the_arbiter_rotates_round_robin_and_weighs_used_time_by_share() {
        let mut sharing = Sharing::new(3, SharePolicy::RoundRobin);
        for tenant in 0..3 {
            sharing.current = tenant;
            sharing.request_ccm(launch(1), Ticks::ZERO).unwrap();
        }
        assert_eq!(
            sharing.request_ccm(launch(2), Ticks::ZERO),
            Err(FirmwareError::Busy),
            "one dispatch waits per tenant"
        );
        assert_eq!(sharing.pick(), Some(0));
        sharing.last_granted = 0;
        assert_eq!(sharing.pick(), Some(1));
        sharing.last_granted = 2;
        assert_eq!(sharing.pick(), Some(0));
        let mut weighted = Sharing::new(3, SharePolicy::Weighted(vec![1, 4, 1]));
        for tenant in 0..3 {
            weighted.current = tenant;
            weighted.request_ccm(launch(1), Ticks::ZERO).unwrap();
        }
        weighted.figures[0].ccm_busy = Ticks(100);
        weighted.figures[1].ccm_busy = Ticks(300);
        weighted.figures[2].ccm_busy = Ticks(90);
        // Per unit of weight: 100, 75, 90.
        assert_eq!(weighted.pick(), Some(1));
        weighted.figures[1].ccm_busy = Ticks(400);
        // 100, 100, 90.
        assert_eq!(weighted.pick(), Some(2));
        weighted.figures[2].ccm_busy = Ticks(100);
        // 100, 100, 100: round-robin order from the one after tenant 2 (the last granted).
        assert_eq!(weighted.pick(), Some(0));
    }

    #[test]
    fn a_shared_device_takes_1_to_16_tenants_and_one_weight_each() {
        let make = |n: usize, policy| {
            let setups = (0..n)
                .map(|_| TenantSetup {
                    host_memory: Arc::new(PhysicalMemory::new(1 << 16).unwrap()),
                    dram: DeviceDram::new(LD_BYTES),
                    streaming_factor: firmware::StreamingFactor::Bytes(32),
                    out_of_order: true,
                })
                .collect();
            Emulator::shared(DeviceConfig::default(), setups, policy).map(|d| d.tenant_count())
        };
        assert_eq!(make(0, SharePolicy::RoundRobin), Err(TenantError::Count(0)));
        assert_eq!(
            make(17, SharePolicy::RoundRobin),
            Err(TenantError::Count(17))
        );
        assert_eq!(make(16, SharePolicy::RoundRobin), Ok(16));
        assert!(matches!(
            make(2, SharePolicy::Weighted(vec![1])),
            Err(TenantError::Policy(_))
        ));
        assert!(matches!(
            make(2, SharePolicy::Weighted(vec![1, MAX_WEIGHT + 1])),
            Err(TenantError::Policy(_))
        ));
        assert_eq!(make(2, SharePolicy::Weighted(vec![1, MAX_WEIGHT])), Ok(2));
    }

    /// A shared device's dispatches wait for the arbiter of `run_tenants`: the one-host loop
    /// refuses to run it rather than leave them waiting.
    #[test]
    fn a_shared_device_refuses_the_one_host_loop() {
        let mut device = device(1, SharePolicy::RoundRobin);
        let mut host = Scripted::new(0, Vec::new());
        let refused = device.run(&mut host, Ticks::from_ns(1000)).unwrap_err();
        assert!(refused.to_string().contains("run_tenants"), "{refused}");
    }
}
