//! Several attached hosts sharing one device: a group of tenants (`axle emu --max-tenants N`).
//!
//! A host that says it is tenant `i` of a group of `n` named `G` ([`TenantClaim`] in its
//! session request) is not served alone: the server answers its hello, checks its request and
//! its claim, and keeps it waiting while it gathers the group's other tenants, accepting
//! hosts on the same socket. When all `n` have attached, it builds one shared device
//! ([`Emulator::shared`]) with one logical device per tenant (a device memory segment of its
//! own, sized from that tenant's set-up), maps each tenant's host memory, creates a turn page
//! and a register window per tenant, sends each tenant its segments ([`SessionReady`]), and
//! runs them together with [`Emulator::run_tenants`], each tenant's host a [`RemoteHost`]
//! behind its own turn page. The order of turns is the tenants' index, not the order they
//! attached in, so the run is the in-process `axle run-many`'s, event for event.
//!
//! What a host cannot do here, besides what a one-host session refuses:
//!
//! - claim a group of 0 tenants or more than `--max-tenants`, an index outside `0..n`, a
//!   group name that is empty, longer than [`MAX_GROUP_NAME`] bytes or not plain ASCII
//!   letters, digits, `-`, `_`, `.`, or weights that do not fit the group;
//! - claim an index another host of the group holds (refused, naming the holder's pid);
//! - join with another count, other weights, another device configuration (but for its
//!   memory's size) or a wall-clock run: refused;
//! - keep the device waiting: the group must be complete within `--group-timeout` of its
//!   first tenant's attach, or every tenant attached is refused, told which are missing, and
//!   freed (a one-host session or another group arriving meanwhile is refused: try later);
//! - leave while its group gathers: its place is freed (a message sent while waiting is a
//!   protocol violation and refused the same way);
//! - hold the total memory of a group beyond the machine's available memory;
//! - die (its socket closes), keep its turn past `--turn-timeout` (a stopped process) or
//!   break the turn protocol mid-run: its tenant is detached after that turn, at the turn's
//!   virtual time ([`TenantDetacher`](crate::cosim::tenants::TenantDetacher); its CCM stage
//!   cut, its DMA requests in preparation dropped, its device memory, host memory mapping and
//!   registers released then), the emulator logs the tenant, the reason, the virtual time and
//!   the wall time it waited, and every other tenant runs on to its end and gets its outcome.
//!   A dead host is sent nothing; a stopped one, or one that broke the protocol, is told it
//!   was detached (which tenant, why, at what virtual time). The same goes for a tenant the
//!   device detaches by itself (its ring latched BROKEN, a link request beyond the bounds, a
//!   deadlock or the time limit that is its own: `crate::cosim::tenants::DetachReason`).
//!   Its turn page and the server's end of its socket are freed at the detach
//!   ([`RemoteHost`]'s `HostAgent::detached`), while the others run on;
//! - outlive the session limit (`--session-limit`), or be served while the emulator stops:
//!   the whole group's run ends
//!   ([`CoSimError::TenantEnded`](crate::cosim::CoSimError::TenantEnded)); every other
//!   tenant is told which tenant ended it and why, and everything is freed.
//!
//! [`MAX_GROUP_NAME`]: cosim_link::attach::MAX_GROUP_NAME
//! [`SessionReady`]: cosim_link::attach::SessionReady

use super::accept::{log_session_error, peer_pid, Reaper, Signals};
use super::remote_host::{Held, RemoteHost};
use super::session::{answer_hello, receive, refuse, send_ready, Requested};
use super::{ServeOptions, SessionError, ATTACH_STEP_TIMEOUT};
use crate::cosim::tenants::{SharePolicy, TenantSetup};
use crate::cosim::Emulator;
use crate::dram::DeviceDram;
use crate::shm::DeviceSegment;
use cosim_link::attach::{
    send_message, DeviceCounters, MessageKind, SessionEnd, TenantClaim, TenantEnd,
};
use cosim_link::link::HostAgent;
use cosim_link::turn::{DeviceTurn, TurnPage};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use shared_abi::Ticks;
use std::io::{ErrorKind, Read};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

/// Longest wait of the gathering loop before it looks at the clock and the signals again.
const GATHER_PERIOD: Duration = Duration::from_millis(200);

/// A host that said it is a tenant of a group: its hello answered, its request checked.
pub(super) struct Member {
    pub(super) stream: UnixStream,
    pub(super) pid: i32,
    pub(super) requested: Requested,
}

/// A group being gathered.
struct Group {
    claim: TenantClaim,
    /// The first tenant's device configuration, its memory's size left out: every tenant's
    /// must be this one.
    device: crate::DeviceConfig,
    /// Bytes of host and device memory the tenants attached so far hold.
    bytes: u64,
    members: Vec<Option<Member>>,
}

/// `config` without its memory's size (which each tenant sizes for its own data set).
fn without_memory(config: &crate::DeviceConfig) -> crate::DeviceConfig {
    let mut config = config.clone();
    config.device_memory_mib = 0;
    config
}

/// A tenant's claim and set-up, checked on their own: the error names the value and the
/// limit.
fn check_claim(requested: &Requested, max_tenants: usize) -> Result<TenantClaim, String> {
    let Some(claim) = requested.tenant.clone() else {
        return Err("not a tenant".into());
    };
    claim.check_name()?;
    let count = claim.count as usize;
    if count == 0 || count > max_tenants {
        return Err(format!(
            "a group of {} tenants: this emulator serves groups of 1 to {max_tenants} (axle emu --max-tenants, at most {})",
            claim.count,
            crate::cosim::tenants::MAX_TENANTS
        ));
    }
    if claim.index >= claim.count {
        return Err(format!(
            "tenant index {} in a group of {}: the indices are 0 to {}",
            claim.index,
            claim.count,
            claim.count - 1
        ));
    }
    policy(&claim).check(count)?;
    if requested.setup.wall.is_some() {
        return Err(
            "a tenant of a group runs in virtual time; a wall-clock run cannot be shared".into(),
        );
    }
    Ok(claim)
}

/// The CCM's share policy a claim names.
fn policy(claim: &TenantClaim) -> SharePolicy {
    match &claim.weights {
        None => SharePolicy::RoundRobin,
        Some(weights) => SharePolicy::Weighted(weights.clone()),
    }
}

/// Bytes of host and device memory one tenant holds.
fn member_bytes(requested: &Requested) -> u64 {
    Emulator::device_memory_bytes(&requested.setup.device)
        .saturating_add(requested.host_memory.len())
}

impl Group {
    fn name(&self) -> &str {
        &self.claim.group
    }

    fn attached(&self) -> usize {
        self.members.iter().flatten().count()
    }

    /// The indices not yet claimed, as `1, 3`.
    fn missing(&self) -> String {
        self.members
            .iter()
            .enumerate()
            .filter(|(_, member)| member.is_none())
            .map(|(index, _)| index.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Admits `member` (whose claim passed [`check_claim`]) or refuses it, saying why.
    fn admit(&mut self, member: Member, claim: &TenantClaim) -> bool {
        match self.admission(&member, claim) {
            Ok(bytes) => {
                if let Some(slot) = self.members.get_mut(claim.index as usize) {
                    self.bytes = bytes;
                    *slot = Some(member);
                    return true;
                }
                refuse_member(member, format!("tenant index {} out of range", claim.index));
                false
            }
            Err(reason) => {
                refuse_member(member, reason);
                false
            }
        }
    }

    /// Whether `member` may join: the group's memory with it, or why not.
    fn admission(&self, member: &Member, claim: &TenantClaim) -> Result<u64, String> {
        let name = self.name().to_owned();
        if claim.group != name {
            let reason = format!(
                "the emulator is gathering the tenants of group {name} ({} of {} attached); group {} is served after it: try again later",
                self.attached(),
                self.members.len(),
                claim.group
            );
            return Err(reason);
        }
        if claim.count != self.claim.count || claim.weights != self.claim.weights {
            let reason = format!(
                "group {name} has {} tenants and {} weights; this host says {} tenants and {} weights: every tenant of a group must say the same",
                self.claim.count,
                weights_text(&self.claim.weights),
                claim.count,
                weights_text(&claim.weights)
            );
            return Err(reason);
        }
        if without_memory(&member.requested.setup.device) != self.device {
            let reason = format!(
                "group {name}: this tenant's device configuration differs from tenant {}'s (only device memory's size may differ): every tenant of a group shares one device",
                self.members
                    .iter()
                    .flatten()
                    .next()
                    .and_then(|m| m.requested.tenant.as_ref())
                    .map_or(0, |c| c.index)
            );
            return Err(reason);
        }
        let index = claim.index as usize;
        if let Some(Some(holder)) = self.members.get(index) {
            let reason = format!(
                "tenant {index} of group {name} is already attached (host pid {}): two hosts cannot claim the same tenant index",
                holder.pid
            );
            return Err(reason);
        }
        let bytes = self.bytes.saturating_add(member_bytes(&member.requested));
        cosim_link::limits::bytes("the group's host and device memory", bytes, 1)
            .map_err(|refused| format!("group {name}: {refused}"))?;
        Ok(bytes)
    }

    /// Refuses every tenant attached with `reason` and frees them.
    fn refuse_all(self, reason: &str) {
        for member in self.members.into_iter().flatten() {
            let _ = refuse(&member.stream, reason.to_owned());
        }
    }
}

fn weights_text(weights: &Option<Vec<u32>>) -> String {
    match weights {
        None => "no".into(),
        Some(weights) => weights
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// Refuses `member` with `reason`, logged.
fn refuse_member(member: Member, reason: String) {
    log::warn!("emu: host pid {} refused: {reason}", member.pid);
    let _ = refuse(&member.stream, reason);
}

/// Gathers the group `first` is a tenant of, accepting hosts on `listener`, until all its
/// tenants attached (then runs them), its time is up, or a stop signal arrives.
pub(super) fn gather(
    first: Member,
    listener: &UnixListener,
    signals: &Signals,
    options: &ServeOptions,
    reaper: &mut Reaper,
) {
    let claim = match check_claim(&first.requested, options.max_tenants) {
        Ok(claim) => claim,
        Err(reason) => return refuse_member(first, reason),
    };
    let mut group = Group {
        device: without_memory(&first.requested.setup.device),
        members: (0..claim.count).map(|_| None).collect(),
        claim: claim.clone(),
        bytes: 0,
    };
    if !group.admit(first, &claim) {
        return;
    }
    let deadline = Instant::now() + options.group_timeout;
    log::info!(
        "emu: group {}: tenant {} of {} attached; waiting up to {} s for the others",
        group.name(),
        claim.index,
        claim.count,
        options.group_timeout.as_secs_f64()
    );
    while group.attached() < group.members.len() {
        if signals.stop_requested() {
            log::info!("emu: group {}: dropped: stopping", group.name());
            return group.refuse_all("the emulator is stopping");
        }
        let now = Instant::now();
        if now >= deadline {
            let reason = format!(
                "group {}: {} of {} tenants attached within {} s (axle emu --group-timeout); tenants {} never came; the group is dropped",
                group.name(),
                group.attached(),
                group.members.len(),
                options.group_timeout.as_secs_f64(),
                group.missing()
            );
            log::warn!("emu: {reason}");
            return group.refuse_all(&reason);
        }
        wait_for_activity(
            listener,
            signals,
            &mut group,
            (deadline - now).min(GATHER_PERIOD),
        );
        match listener.accept() {
            Ok((stream, _)) => admit_connection(stream, &mut group, options),
            Err(error)
                if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            Err(error) => {
                log::error!("emu: accept failed: {error}");
                std::thread::sleep(GATHER_PERIOD);
            }
        }
    }
    run_group(group, signals, options, reaper);
}

/// Sleeps until a host connects, a signal arrives, a waiting tenant's socket stirs or
/// `timeout` passes; a waiting tenant whose socket stirred (it closed, or sent something
/// while it should wait) loses its place.
fn wait_for_activity(
    listener: &UnixListener,
    signals: &Signals,
    group: &mut Group,
    timeout: Duration,
) {
    let stirred: Vec<usize> = {
        let mut fds = vec![
            PollFd::new(listener.as_fd(), PollFlags::POLLIN),
            PollFd::new(signals.fd.as_fd(), PollFlags::POLLIN),
        ];
        let indices: Vec<usize> = group
            .members
            .iter()
            .enumerate()
            .filter_map(|(index, member)| member.as_ref().map(|_| index))
            .collect();
        fds.extend(
            group
                .members
                .iter()
                .flatten()
                .map(|member| PollFd::new(member.stream.as_fd(), PollFlags::POLLIN)),
        );
        let timeout = PollTimeout::try_from(timeout).unwrap_or(PollTimeout::NONE);
        if let Err(errno) = poll(&mut fds, timeout) {
            if errno != nix::errno::Errno::EINTR {
                log::error!("emu: poll failed: {errno}");
            }
            return;
        }
        fds.iter()
            .skip(2)
            .zip(indices)
            .filter(|(fd, _)| fd.revents().is_some_and(|events| !events.is_empty()))
            .map(|(_, index)| index)
            .collect()
    };
    let name = group.name().to_owned();
    for index in stirred {
        let Some(member) = group.members.get_mut(index).and_then(Option::take) else {
            continue;
        };
        group.bytes = group.bytes.saturating_sub(member_bytes(&member.requested));
        let mut byte = [0u8; 1];
        let _ = member.stream.set_nonblocking(true);
        match (&member.stream).read(&mut byte) {
            Ok(0) | Err(_) => log::warn!(
                "emu: group {name}: tenant {index} (host pid {}) left before the group's run; its place is free again",
                member.pid
            ),
            Ok(_) => {
                let _ = member.stream.set_nonblocking(false);
                refuse_member(
                    member,
                    format!(
                        "tenant {index} of group {name} sent a message while its group gathered; a tenant waits for its session to be ready"
                    ),
                );
            }
        }
    }
}

/// One host that connected while a group gathers: admitted if it is one of the group's
/// tenants, refused otherwise.
fn admit_connection(stream: UnixStream, group: &mut Group, options: &ServeOptions) {
    let pid = peer_pid(&stream);
    if let Err(error) = stream.set_nonblocking(false) {
        log::error!("emu: host pid {pid}: {error}");
        return;
    }
    let (requested, deferred) = match receive(&stream, pid) {
        Ok(received) => received,
        Err(error) => return log_session_error(pid, &error),
    };
    if deferred {
        if let Err(error) = answer_hello(&stream) {
            return log_session_error(pid, &error);
        }
    }
    let member = Member {
        stream,
        pid,
        requested,
    };
    if member.requested.tenant.is_none() {
        let reason = format!(
            "the emulator is gathering the tenants of group {} ({} of {} attached); a one-host session is served after the group's run: try again later",
            group.name(),
            group.attached(),
            group.members.len()
        );
        return refuse_member(member, reason);
    }
    let claim = match check_claim(&member.requested, options.max_tenants) {
        Ok(claim) => claim,
        Err(reason) => return refuse_member(member, reason),
    };
    if group.admit(member, &claim) {
        log::info!(
            "emu: group {}: tenant {} (host pid {pid}) attached; {} of {}",
            group.name(),
            claim.index,
            group.attached(),
            group.members.len()
        );
    }
}

/// The group's device, its turn pages (one per tenant), built for its tenants.
fn build(
    claim: &TenantClaim,
    members: &[Member],
) -> Result<(Emulator, Vec<(TurnPage, std::os::fd::OwnedFd)>), String> {
    let first = members.first().ok_or("no tenant")?;
    let mut setups = Vec::with_capacity(members.len());
    let mut pages = Vec::with_capacity(members.len());
    for member in members {
        let setup = &member.requested.setup;
        let bytes = Emulator::device_memory_bytes(&setup.device);
        let segment = DeviceSegment::shared(bytes).map_err(|e| format!("device memory: {e}"))?;
        setups.push(TenantSetup {
            host_memory: cosim_link::sync::Arc::clone(&member.requested.host_memory),
            dram: DeviceDram::from_segment(segment, bytes),
            streaming_factor: setup.streaming_factor.into(),
            out_of_order: setup.out_of_order,
        });
        let page = TurnPage::create().map_err(|e| format!("turn page: {e}"))?;
        super::wake_up::seed(&page.0);
        pages.push(page);
    }
    let emulator = Emulator::shared(first.requested.setup.device.clone(), setups, policy(claim))
        .map_err(|e| e.to_string())?;
    Ok((emulator, pages))
}

/// Sends tenant `tenant` its segments.
fn send_segments(
    emulator: &mut Emulator,
    tenant: usize,
    member: &Member,
    page_fd: &std::os::fd::OwnedFd,
) -> Result<(), String> {
    emulator.select(tenant);
    let device_bytes = Emulator::device_memory_bytes(&member.requested.setup.device);
    let registers = emulator
        .serve_registers()
        .map_err(|e| format!("register window: {e}"))?;
    registers.set(shared_abi::registers::EPOCH, super::epoch::device_epoch());
    let register_fd = registers
        .fd()
        .ok_or("the register page is not shared")?
        .try_clone_to_owned()
        .map_err(|e| format!("register window: {e}"))?;
    send_ready(
        &member.stream,
        emulator,
        device_bytes,
        page_fd.as_fd(),
        register_fd.as_fd(),
    )
    .map_err(|error| match error {
        SessionError::Refused(reason) => reason,
        error => format!("tenant {tenant} (host pid {}): {error}", member.pid),
    })
}

/// Runs a complete group: its device built, each tenant sent its segments, the run, each
/// tenant's outcome; then everything is freed on the reaper's thread.
fn run_group(group: Group, signals: &Signals, options: &ServeOptions, reaper: &mut Reaper) {
    let name = group.name().to_owned();
    let claim = group.claim.clone();
    let members: Vec<Member> = group.members.into_iter().flatten().collect();
    let (mut emulator, pages) = match build(&claim, &members) {
        Ok(built) => built,
        Err(reason) => {
            let reason = format!("group {name}: cannot build the shared device: {reason}");
            log::error!("emu: {reason}");
            for member in &members {
                let _ = refuse(&member.stream, reason.clone());
            }
            return;
        }
    };
    for (tenant, (member, (_, page_fd))) in members.iter().zip(&pages).enumerate() {
        if let Err(reason) = send_segments(&mut emulator, tenant, member, page_fd) {
            let reason =
                format!("group {name}: the segments did not reach {reason}; the group is dropped");
            log::warn!("emu: {reason}");
            for other in &members {
                let _ = refuse(&other.stream, reason.clone());
            }
            reaper.reap((emulator, pages, members));
            return;
        }
    }
    // The device holds each tenant's host memory now: a tenant detached mid-run has its
    // mapping released at its detach, not at the group's end; each tenant's host agent owns
    // its turn page and its end of the socket, freed at its detach too.
    let limit = members
        .iter()
        .map(|member| member.requested.setup.limit_ns)
        .min()
        .unwrap_or(0);
    let pids: Vec<i32> = members.iter().map(|member| member.pid).collect();
    log::info!(
        "emu: group {name}: {} tenants; segments exchanged; the run starts",
        members.len()
    );
    let deadline = Instant::now().checked_add(options.session_limit);
    let mut hosts: Vec<RemoteHost<'_>> = members
        .into_iter()
        .zip(pages)
        .enumerate()
        .map(|(tenant, (member, (page, _)))| {
            let _ = member.stream.set_read_timeout(None);
            RemoteHost {
                page: Held::Owned(page),
                peer: Held::Owned(member.stream),
                signals,
                pending: DeviceTurn::default(),
                turns: 0,
                hand_overs: 0,
                error: None,
                turn_timeout: options.turn_timeout,
                deadline,
                expired: false,
                die_after_hand_overs: options.die_after_hand_overs,
                detacher: emulator.detacher(tenant),
                waited: None,
                seat: Some((name.clone(), member.pid)),
            }
        })
        .collect();
    let outcome = {
        let mut agents: Vec<&mut dyn HostAgent> = hosts
            .iter_mut()
            .map(|host| host as &mut dyn HostAgent)
            .collect();
        emulator.run_tenants(&mut agents, Ticks::from_ns(limit))
    };
    let whole = DeviceCounters::from(&emulator.metrics());
    // A failure that ended the whole group's run (the emulator stopping, the session limit):
    // a tenant detached is not one.
    let failed = hosts
        .iter()
        .enumerate()
        .find_map(|(tenant, host)| host.ended().map(|reason| (tenant, reason)));
    for (tenant, (pid, host)) in pids.iter().zip(&hosts).enumerate() {
        // A tenant detached was told and freed at its detach.
        let (Some(page), Some(stream)) = (host.page.get(), host.peer.get()) else {
            continue;
        };
        log::info!(
            "emu: group {name}: tenant {tenant} (host pid {pid}): {} turns in {} hand-overs; the emulator's {}",
            host.turns,
            host.hand_overs,
            page.wait_counts()
        );
        super::wake_up::learn(page);
        let reason = match &failed {
            Some((bad, reason)) if *bad == tenant => {
                log::warn!("emu: group {name}: tenant {tenant} (host pid {pid}): {reason}; the group's run is ended");
                Some(format!(
                    "group {name}: tenant {tenant}: {reason}; the host is detached and the group's run ended"
                ))
            }
            Some((bad, reason)) => Some(format!(
                "group {name}: tenant {bad} can take no further part ({reason}); the group's run is ended"
            )),
            None => None,
        };
        if let Some(reason) = reason {
            // Told why if it is still there to read it; the flag then wakes it.
            let _ = refuse(stream, reason);
            page.finish();
            continue;
        }
        let metrics = emulator.tenant_metrics(tenant);
        let figures = emulator.tenant_figures(tenant).unwrap_or_default();
        let sent = send_message(
            stream,
            MessageKind::End,
            &SessionEnd {
                error: outcome.as_ref().err().map(ToString::to_string),
                device: DeviceCounters::from(&metrics),
                wall: None,
                tenant: Some(TenantEnd {
                    ccm_grants: figures.grants,
                    ccm_wait: figures.ccm_wait.0,
                    device: whole,
                }),
            },
            &[],
        );
        page.finish();
        if let Err(error) = sent {
            log::warn!(
                "emu: group {name}: tenant {tenant} (host pid {pid}): the outcome did not reach it: {error}"
            );
        }
    }
    // Each host closes once it has its outcome; all of them within one attach step.
    let closing = Instant::now() + ATTACH_STEP_TIMEOUT;
    for stream in hosts.iter().filter_map(|host| host.peer.get()) {
        let left = closing.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let _ = stream.set_read_timeout(Some(left));
        let mut rest = [0u8; 64];
        let _ = (&*stream).read(&mut rest);
    }
    drop(hosts);
    let tenants = pids.len();
    match (&failed, &outcome) {
        (Some(_), _) => log::warn!("emu: group {name} detached after its run ended early; its segments are being freed; ready for the next host"),
        (None, Ok(())) => log::info!(
            "emu: group {name}: {tenants} tenants detached after their run ({} ns of virtual time; {} of them detached mid-run)",
            emulator.now().as_ns(),
            (0..tenants).filter(|t| emulator.detached(*t).is_some()).count()
        ),
        (None, Err(error)) => log::info!("emu: group {name}: {tenants} tenants detached; the run failed: {error}"),
    }
    // The group's memory (every tenant's device memory, host segment and turn page) is freed
    // on the reaper's thread, while this thread accepts the next host.
    reaper.reap(emulator);
}
