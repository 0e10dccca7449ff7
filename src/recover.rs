//! Recovery of the device: an attached run whose emulator process dies.
//!
//! The device's memory lives in the emulator process (a memfd it created), and so do the
//! firmware's state, the DMA engine's and the CCM's: when that process dies, everything the run
//! had put on the device is gone. The host notices at once (its turn page's liveness check:
//! `cosim_link::turn`, `TurnError::PeerDied`) and fails the run with a [`DeviceLost`] that
//! says what was lost: the launch it had submitted and not completed (the runtime runs one
//! launch at a time: `host_runtime::Runtime::pending_launch`), how many had completed, and the
//! device epoch of the device that went ([`shared_abi::registers::EPOCH`]).
//!
//! With `axle run --attach SOCKET --reattach` the host then waits (at most
//! [`Reattach::timeout`]) for an emulator on the same socket, reads its epoch, says whether it
//! is a new device (a restarted emulator: another epoch) or the same process (which ended the
//! session but lives), and reruns the run from the start: the workload is built again, its
//! data set loaded again into the new device's memory, and the run goes from virtual time 0.
//! Rerunning from the start is the simplest correct thing: nothing of the first attempt's
//! device state survives, and the host's state (the application's partial answer, the
//! rings) was built against it. Since the co-simulation is deterministic, the rerun prints
//! exactly what an uninterrupted run prints. At most [`Reattach::attempts`] reattaches are
//! made.

use crate::run::{format_duration, AttachTarget, RunReport, RunRequest};
use cosim_link::attach::AttachError;
use host_driver::attachment::{AttachOptions, Attachment};
use host_runtime::{PendingLaunch, Runtime};
use shared_abi::Ticks;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How `--reattach` bounds its waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reattach {
    /// How long to wait for an emulator on the socket after one was lost
    /// (`--reattach-timeout`).
    pub timeout: Duration,
    /// Most reattaches in one run (`--reattach-attempts`).
    pub attempts: u32,
}

/// `--reattach-timeout`'s default: long enough to start an emulator again by hand.
pub const DEFAULT_REATTACH_TIMEOUT: Duration = Duration::from_secs(30);
/// `--reattach-attempts`'s default.
pub const DEFAULT_REATTACH_ATTEMPTS: u32 = 3;
/// Most reattaches `--reattach-attempts` allows.
pub const MAX_REATTACH_ATTEMPTS: u32 = 100;
/// How often a host waiting to reattach tries the socket again.
const REATTACH_POLL: Duration = Duration::from_millis(20);

impl Default for Reattach {
    fn default() -> Self {
        Reattach {
            timeout: DEFAULT_REATTACH_TIMEOUT,
            attempts: DEFAULT_REATTACH_ATTEMPTS,
        }
    }
}

/// The emulator process of an attached run died: what went with it.
#[derive(Clone, Debug, thiserror::Error)]
#[error(
    "{}. Start `axle emu --socket {}` again and run again (a virtual-time run with --reattach waits for it and reruns from the start by itself)",
    self.summary(),
    .socket.display()
)]
pub struct DeviceLost {
    /// When the host noticed (`during the run`, `during the hello`...).
    pub when: &'static str,
    /// The socket.
    pub socket: PathBuf,
    /// The lost device's epoch (`None`: it died before the host read it).
    pub epoch: Option<u64>,
    /// Launches the run had completed.
    pub completed: u64,
    /// The launch submitted and not completed, if any.
    pub pending: Option<PendingLaunch>,
}

impl DeviceLost {
    /// `error`, a run's failure, as a [`DeviceLost`] when it is its emulator's death (with
    /// what `runtime` had submitted), unchanged otherwise.
    pub(crate) fn from_error(
        error: anyhow::Error,
        target: &AttachTarget,
        epoch: u64,
        runtime: &Runtime<'_>,
    ) -> anyhow::Error {
        match error.downcast_ref::<AttachError>() {
            Some(AttachError::EmulatorDied(when)) => DeviceLost {
                when,
                socket: target.socket.clone(),
                epoch: Some(epoch),
                completed: runtime.measurements().launches,
                pending: runtime.pending_launch(),
            }
            .into(),
            _ => error,
        }
    }

    /// That the emulator died, the lost device's epoch, and what was lost.
    pub fn summary(&self) -> String {
        format!(
            "emulator process died (its socket closed) {}; the device{} is gone with its memory. {}",
            self.when,
            self.epoch
                .map_or(String::new(), |epoch| format!(" (epoch {epoch:#018x})")),
            self.lost()
        )
    }

    /// What was lost, in words.
    pub fn lost(&self) -> String {
        let completed = match self.completed {
            1 => "1 launch had completed".to_owned(),
            n => format!("{n} launches had completed"),
        };
        match self.pending {
            None if self.completed == 0 => {
                "Lost launches: none (no launch had been submitted)".to_owned()
            }
            None => format!("Lost launches: none in flight ({completed}; the next was not yet submitted)"),
            Some(launch) => format!(
                "Lost launch (submitted, not completed): tag {}, index {} (the run's launch number {} from 1), kernel {}, begun at {} of the run's time, its {}-byte result {}; {completed}",
                launch.tag,
                launch.tag.saturating_sub(1),
                launch.tag,
                kernel_name(launch.kernel),
                format_ticks(launch.started),
                launch.result_length,
                if launch.results_in {
                    "all in, its host step unfinished"
                } else {
                    "not all in"
                }
            ),
        }
    }
}

/// No emulator answered on the socket within `--reattach-timeout`.
#[derive(Debug, thiserror::Error)]
#[error(
    "no emulator answered on {} within {} of waiting to reattach (--reattach-timeout); the run is lost: {}",
    .socket.display(),
    format_duration(*.waited),
    .lost.lost()
)]
pub struct NoEmulator {
    /// The socket.
    pub socket: PathBuf,
    /// How long the host waited.
    pub waited: Duration,
    /// What had been lost.
    pub lost: DeviceLost,
}

/// A kernel's name for a message.
fn kernel_name(kernel: u32) -> String {
    shared_abi::KernelId::try_from(kernel)
        .map_or_else(|_| format!("unknown ({kernel})"), |id| format!("{id:?}"))
}

/// A run time for a message: `12.345 µs`.
fn format_ticks(at: Ticks) -> String {
    let ns = at.as_ns();
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{:.3} µs", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.3} ms", ns as f64 / 1e6),
        _ => format!("{:.3} s", ns as f64 / 1e9),
    }
}

/// Connects to the emulator of `target`. With `wait`, an emulator being started again: while
/// nothing listens on the socket (no file, or a stale one left by the dead process), tries
/// again every [`REATTACH_POLL`] until `wait` has passed ([`AttachError::Connect`] then).
pub(crate) fn connect(
    target: &AttachTarget,
    options: &AttachOptions,
    wait: Option<Duration>,
) -> Result<Attachment, AttachError> {
    let started = Instant::now();
    loop {
        match Attachment::connect(&target.socket, options) {
            Err(AttachError::Connect { error, .. })
                if wait.is_some_and(|wait| started.elapsed() < wait)
                    && matches!(
                        error.kind(),
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                    ) =>
            {
                std::thread::sleep(REATTACH_POLL);
            }
            other => return other,
        }
    }
}

/// What a reattaching run is, for its messages.
pub(crate) struct Subject {
    /// The command that speaks: `axle run`, `axle run-many`.
    pub(crate) command: &'static str,
    /// The run: `sssp in mode rp`, or `tenant 1 of group G (sssp in mode rp)`.
    pub(crate) name: String,
    /// A tenant's group: its name and tenant count (it gathers again on the new device).
    pub(crate) group: Option<(String, u32)>,
}

impl Subject {
    /// A one-host run of `request`.
    pub(crate) fn run(request: &RunRequest) -> Subject {
        Subject {
            command: "axle run",
            name: format!("{} in mode {}", request.workload, request.mode.name()),
            group: None,
        }
    }

    /// Tenant `claim.index` of its group, running `request`.
    pub(crate) fn tenant(
        command: &'static str,
        request: &RunRequest,
        claim: &cosim_link::attach::TenantClaim,
    ) -> Subject {
        Subject {
            command,
            name: format!(
                "tenant {} of group {} ({} in mode {})",
                claim.index,
                claim.group,
                request.workload,
                request.mode.name()
            ),
            group: Some((claim.group.clone(), claim.count)),
        }
    }
}

/// The emulator found on the socket after a loss refused the reattach (it serves fewer
/// tenants than the group has, it is gathering or running another group, the group did not
/// gather again within its `--group-timeout`...).
#[derive(Debug, thiserror::Error)]
#[error(
    "{subject}: the emulator on {} refused the reattach: {reason}; the run is lost: {}",
    .socket.display(),
    .lost.lost()
)]
pub struct ReattachRefused {
    /// The run, in words.
    pub subject: String,
    /// The socket.
    pub socket: PathBuf,
    /// The emulator's reason.
    pub reason: String,
    /// What had been lost.
    pub lost: DeviceLost,
}

/// `axle run --attach SOCKET --reattach`: [`crate::run::run_attached`], and when its emulator
/// process dies, waits for one on the same socket, checks its device epoch, and reruns the
/// run from the start, at most [`Reattach::attempts`] times. `notice` is told (one line each)
/// what was lost, that the host waits, and what it reattached to.
pub fn run_attached_reattaching(
    request: &RunRequest,
    target: &AttachTarget,
    reattach: &Reattach,
    notice: &mut dyn FnMut(&str),
) -> anyhow::Result<RunReport> {
    reattaching(
        &Subject::run(request),
        target,
        reattach,
        notice,
        |wait, attached| crate::run::run_attached_once(request, target, wait, attached),
    )
}

/// Runs `once` (one attached attempt: it connects within the wait it is given, `None` the
/// first time, and tells the callback the device epoch it found), and when its emulator
/// process dies, waits for one on the same socket and runs it again from the start, at most
/// [`Reattach::attempts`] times. A tenant's attempt gathers its group again on the new
/// device: the emulator's `--group-timeout` bounds that wait, and a refusal (another group,
/// fewer tenants served, the group not gathering again) ends the run with a
/// [`ReattachRefused`].
pub(crate) fn reattaching<T>(
    subject: &Subject,
    target: &AttachTarget,
    reattach: &Reattach,
    notice: &mut dyn FnMut(&str),
    mut once: impl FnMut(Option<Duration>, &mut dyn FnMut(u64)) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let mut lost: Option<DeviceLost> = None;
    let mut attempt = 0u32;
    loop {
        let wait = lost.as_ref().map(|_| reattach.timeout);
        let result = {
            let mut attached = |epoch: u64| {
                let Some(lost) = &lost else { return };
                let device = match lost.epoch {
                    Some(old) if old == epoch => format!(
                        "the same emulator process (device epoch {epoch:#018x}), which ended the session and lives on"
                    ),
                    Some(old) => format!(
                        "a new device (epoch {epoch:#018x}; the lost one was {old:#018x})"
                    ),
                    None => format!("a device of epoch {epoch:#018x}"),
                };
                let gathered = subject.group.as_ref().map_or(String::new(), |(group, count)| {
                    format!("; group {group} gathered again there (its {count} tenants; turns in tenant order)")
                });
                notice(&format!(
                    "{}: reattached to {} ({attempt} of at most {}): {device}{gathered}; rerunning {} from the start: its data set is loaded again and virtual time restarts at 0",
                    subject.command,
                    target.socket.display(),
                    reattach.attempts,
                    subject.name
                ));
            };
            once(wait, &mut attached)
        };
        let error = match result {
            Ok(report) => return Ok(report),
            Err(error) => error,
        };
        if let Some(lost) = &lost {
            match error.downcast_ref::<AttachError>() {
                Some(AttachError::Connect { error: cause, .. })
                    if matches!(
                        cause.kind(),
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                    ) =>
                {
                    return Err(NoEmulator {
                        socket: target.socket.clone(),
                        waited: reattach.timeout,
                        lost: lost.clone(),
                    }
                    .into());
                }
                Some(AttachError::Connect { .. }) => return Err(error),
                Some(AttachError::Refused(reason)) => {
                    return Err(ReattachRefused {
                        subject: subject.name.clone(),
                        socket: target.socket.clone(),
                        reason: reason.clone(),
                        lost: lost.clone(),
                    }
                    .into());
                }
                _ => {}
            }
        }
        let this = match (
            error.downcast_ref::<DeviceLost>(),
            error.downcast_ref::<AttachError>(),
        ) {
            (Some(this), _) => this.clone(),
            // It died again while the host attached: nothing submitted on this device.
            (None, Some(AttachError::EmulatorDied(when))) if lost.is_some() => DeviceLost {
                when,
                socket: target.socket.clone(),
                epoch: None,
                completed: 0,
                pending: None,
            },
            _ => return Err(error),
        };
        if attempt >= reattach.attempts {
            return Err(error.context(format!(
                "gave up after {attempt} reattaches (--reattach-attempts {})",
                reattach.attempts
            )));
        }
        attempt += 1;
        notice(&format!(
            "{}: {}: {}",
            subject.command,
            subject.name,
            this.summary()
        ));
        // A tenant's lines interleave with its group's: each names its tenant.
        let who = match subject.group {
            Some(_) => format!("{}: ", subject.name),
            None => String::new(),
        };
        notice(&format!(
            "{}: {who}waiting up to {} for an emulator on {} to reattach (--reattach-timeout)",
            subject.command,
            format_duration(reattach.timeout),
            target.socket.display()
        ));
        lost = Some(this);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lost(pending: Option<PendingLaunch>, completed: u64) -> DeviceLost {
        DeviceLost {
            when: "during the run",
            socket: PathBuf::from("/tmp/emu.sock"),
            epoch: Some(0xabc),
            completed,
            pending,
        }
    }

    #[test]
    fn the_report_names_the_lost_launch_its_kernel_and_the_completed_count() {
        let message = lost(
            Some(PendingLaunch {
                tag: 3,
                kernel: shared_abi::KernelId::SsspRelax as u32,
                started: Ticks::from_ns(12_345),
                result_length: 4096,
                results_in: false,
            }),
            2,
        )
        .to_string();
        for part in [
            "emulator process died (its socket closed) during the run",
            "epoch 0x0000000000000abc",
            "tag 3, index 2 (the run's launch number 3 from 1), kernel SsspRelax, begun at 12.345 µs",
            "4096-byte result not all in",
            "2 launches had completed",
            "--reattach",
        ] {
            assert!(message.contains(part), "{part:?} missing from {message}");
        }
    }

    #[test]
    fn a_refused_reattach_names_the_tenant_the_socket_the_reason_and_what_was_lost() {
        let message = ReattachRefused {
            subject: "tenant 1 of group g (knn-a in mode rp)".into(),
            socket: PathBuf::from("/tmp/emu.sock"),
            reason: "a group of 2 tenants: this emulator serves groups of 1 to 1".into(),
            lost: lost(None, 4),
        }
        .to_string();
        assert_eq!(
            message,
            "tenant 1 of group g (knn-a in mode rp): the emulator on /tmp/emu.sock refused the reattach: a group of 2 tenants: this emulator serves groups of 1 to 1; the run is lost: Lost launches: none in flight (4 launches had completed; the next was not yet submitted)"
        );
    }

    #[test]
    fn a_death_between_launches_or_before_the_first_loses_none() {
        assert!(lost(None, 0)
            .to_string()
            .contains("none (no launch had been submitted)"));
        let message = lost(None, 1).to_string();
        assert!(
            message.contains("none in flight (1 launch had completed"),
            "{message}"
        );
    }
}
