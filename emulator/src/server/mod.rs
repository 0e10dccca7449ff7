//! The emulator as its own process: `axle emu --socket PATH`.
//!
//! The server binds a Unix stream socket (created with mode 0600), serves one host at a time
//! (or one group of tenants at a time, which share one device: `group`, `axle emu
//! --max-tenants`), and survives each: a host that finishes, is refused, or dies mid-run is logged, its
//! segments are unmapped and closed, and the next host may attach (the segments of a session
//! that ran are freed on a thread of their own while the next host attaches,
//! `accept::Reaper`, one session at a time). SIGINT, SIGTERM and SIGHUP
//! (taken through a signalfd, so no handler code runs asynchronously) end the server, which
//! removes its socket file on the way out.
//!
//! One session (the host's side is `cosim_link::attach`):
//!
//! 1. hello: magic, ABI version and layout hash, refused with [`Status::AbiMismatch`] on any
//!    difference;
//! 2. the host's [`SessionRequest`] with its physical-memory segment (refused unless the host
//!    speaks this build's turn protocol, `cosim_link::turn::PROTOCOL`); the emulator maps it,
//!    creates device memory ([`DeviceSegment::shared`]) and the turn page, and answers with
//!    [`SessionReady`] (with this process's device epoch, also in the register window:
//!    [`device_epoch`]) and the descriptors (when the request came right behind the hello,
//!    as this build's host sends it, the hello's answer waits and goes out just before the
//!    [`SessionReady`] or the refusal: one wake-up of the host for both steps);
//! 3. the unchanged [`Emulator::run`] with a `RemoteHost` as the host: each turn goes over
//!    the turn page (`cosim_link::turn`) with the device's horizon, the time of its next
//!    event; the host takes on its own the turns it asks for before the horizon while it
//!    makes no link call, and its link calls are replayed onto the emulator's link, so the
//!    run is the in-process run, event for event;
//! 4. a [`SessionEnd`] carries the outcome and the device's counters back and then the page
//!    is marked finished (the host wakes once and finds the outcome waiting); the host
//!    closes.
//!
//! A wall-clock session (`axle run --clock wall --attach`; [`Setup::wall`]) attaches the same
//! way, with the host's eventfd (its interrupt line) as a second descriptor in step 2; step 3
//! is then [`Emulator::run_wall`] against a clock started at the host's `CLOCK_MONOTONIC`
//! start instant, with link calls and responses framed over the socket
//! (`cosim_link::wall_socket`), the eventfd written once per interrupt delivered, and a stop
//! signal ending the run; step 4 also carries the device's end-of-run state.
//!
//! Nothing here names a file in `/dev/shm`: the segments are memfds, and they disappear with
//! the last descriptor and mapping, whichever process dies first.
//!
//! # What a host cannot do to the emulator
//!
//! A host is another process, possibly broken or hostile. Whatever it sends, the emulator
//! refuses it with a reason that names the value and the limit, detaches that host, frees
//! everything the session held (descriptors, mappings, device memory, the turn page: they are
//! owned values dropped when the session ends, on every path; those of a session that got to
//! its run on the freeing thread, which the next session's end waits for), and serves the
//! next host.
//!
//! - **Descriptors.** Every descriptor that arrives with a message is owned (`OwnedFd`) from
//!   the moment `recvmsg` returns, including those past the expected count; the control buffer
//!   has room for the kernel's maximum (253), and a truncated control message (`MSG_CTRUNC`)
//!   is refused after closing what arrived (`cosim_link::shm::receive_with_fds`). A session
//!   request takes exactly one segment (two with a wall-clock run's eventfd).
//! - **Segments.** The host memory segment must be a memory file (`memfd_create`: not a pipe,
//!   a socket, or a file on disk, which cannot be sealed), sealed against shrinking, of exactly
//!   the size announced, a multiple of 8 bytes, and no larger than the machine's available
//!   memory (`cosim_link::limits`). A wall-clock run's interrupt line must be an eventfd.
//! - **The device set-up.** [`check_session_request`]: the model's limits
//!   ([`DeviceConfig::validate`]: µthreads, units, DMA channels, 64 GiB of device memory), and
//!   device memory at least what the device needs (control area, firmware scratch area and
//!   1 MiB of data) and at most the machine's available memory ([`check_device_memory`]).
//!   Nothing is created before these checks pass.
//! - **Control messages** are at most 1 MiB (`cosim_link::attach`); wall-clock frames at
//!   most 1 GiB and within the machine's memory (`cosim_link::wall_socket`).
//! - **Turns.** A turn message is at most the turn page (256 MiB); every length and code in it
//!   is checked before anything is replayed, and the turns the host says it took on its own
//!   must lie before the horizon it was sent (`cosim_link::turn`). The link requests it
//!   replays are bounded by the device (`crate::cosim`, "Bounds"): a CXL.mem load or store no
//!   longer than device memory, at most [`crate::cosim::MAX_HOST_REQUESTS_IN_FLIGHT`]
//!   requests and device memory's worth of bytes in flight. A refused request ends the run;
//!   the host gets the reason in its [`SessionEnd`].
//! - **Time.** Each attach step must come within [`ATTACH_STEP_TIMEOUT`]. A host that keeps
//!   its turn longer than the turn timeout ([`ServeOptions::turn_timeout`], `axle emu
//!   --turn-timeout`, default [`DEFAULT_TURN_TIMEOUT`]), or in a wall-clock run sends nothing
//!   (not even half a frame) for that long, is detached: logged, told why if it still reads,
//!   its resources freed. The first turn includes the host's untimed set-up (loading its data
//!   set into the device memory segment). A host queued behind it waits meanwhile (one
//!   host at a time); its own attach gives up after `cosim_link::attach::ATTACH_TIMEOUT` with
//!   a message that says so.
//! - **The socket file.** An existing socket is probed without blocking (a listener that never
//!   accepts cannot hang the start-up, and SIGINT/SIGTERM work throughout); the file is
//!   removed on exit only if it is still the inode this process bound.
//!
//! | file | what |
//! |------|------|
//! | this one | the options, the set-up a host sends, the errors |
//! | `accept` | the socket file, the signals, the accept loop: one host at a time |
//! | `group` | hosts that are tenants of a group: gathered, then run together on one device |
//! | `session` | one host's session: hello, set-up, the run (virtual time or wall clock), the end |
//! | `remote_host` | the host across processes as a `HostAgent`: turns over the turn page |
//! | `limits` | the checks of a session request before anything is created for it |
//! | `epoch` | the device epoch this process publishes in every register window |
//!
//! [`Status::AbiMismatch`]: shared_abi::Status::AbiMismatch
//! [`SessionRequest`]: cosim_link::attach::SessionRequest
//! [`SessionReady`]: cosim_link::attach::SessionReady
//! [`SessionEnd`]: cosim_link::attach::SessionEnd
//! [`DeviceSegment::shared`]: crate::shm::DeviceSegment::shared
//! [`Emulator::run`]: crate::Emulator::run
//! [`Emulator::run_wall`]: crate::Emulator::run_wall

mod accept;
mod epoch;
mod group;
mod limits;
mod remote_host;
mod session;
mod wake_up;

pub use accept::serve;
pub use epoch::device_epoch;
pub use limits::{check_device_memory, check_session_request, SetupError};

use crate::config::DeviceConfig;
use crate::cosim::DeviceMetrics;
use cosim_link::attach::{AttachError, DeviceCounters};
use cosim_link::turn::TurnError;
use serde::{Deserialize, Serialize};
use shared_abi::{Ticks, ABI_VERSION, LAYOUT_HASH};
use std::io::ErrorKind;
use std::path::PathBuf;
use std::time::Duration;

/// How long the server waits for each step of a host's attach.
pub const ATTACH_STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an attached host may keep its turn by default (`axle emu --turn-timeout`).
pub const DEFAULT_TURN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one host's session may last by default (`axle emu --session-limit`): half an
/// hour, three times the longest wall-time budget `axle run` gives a run of its own (10
/// minutes at paper scale), so an honest host's own budget ends its run first.
pub const DEFAULT_SESSION_LIMIT: Duration = Duration::from_secs(30 * 60);
/// Most tenants one group may have by default (`axle emu --max-tenants`).
pub const DEFAULT_MAX_TENANTS: usize = 4;
/// How long the server waits by default for a group's tenants to attach, from the first
/// one's attach (`axle emu --group-timeout`).
pub const DEFAULT_GROUP_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest `--group-timeout`: below the 120 s a host waits for its session to be ready
/// (`cosim_link::attach::ATTACH_TIMEOUT`), so that a group that never completes is refused
/// before its tenants give up on their own.
pub const MAX_GROUP_TIMEOUT: Duration = Duration::from_secs(100);

/// How the server treats its hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServeOptions {
    /// The longest a host may keep its turn (or, in a wall-clock run, stay silent) before it
    /// is detached.
    pub turn_timeout: Duration,
    /// The longest one host's session may last, in wall time, however quickly it takes its
    /// turns: a host that never finishes cannot hold the device for the hosts queued behind.
    pub session_limit: Duration,
    /// Tests of recovery only (`axle emu --die-after-hand-overs K`, hidden): the process kills
    /// itself (SIGKILL) instead of handing a virtual-time session's turn to its host for the
    /// `K+1`-th time, a crash at a point of the run that does not depend on timing.
    pub die_after_hand_overs: Option<u64>,
    /// Most tenants of one group (1 to [`MAX_TENANTS`](crate::cosim::tenants::MAX_TENANTS)):
    /// hosts that say they are tenants of a group ([`TenantClaim`]) share one device.
    ///
    /// [`TenantClaim`]: cosim_link::attach::TenantClaim
    pub max_tenants: usize,
    /// How long a group's tenants have to attach, from the first one's attach; then those
    /// attached are refused and freed.
    pub group_timeout: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            turn_timeout: DEFAULT_TURN_TIMEOUT,
            session_limit: DEFAULT_SESSION_LIMIT,
            die_after_hand_overs: None,
            max_tenants: DEFAULT_MAX_TENANTS,
            group_timeout: DEFAULT_GROUP_TIMEOUT,
        }
    }
}

impl ServeOptions {
    /// Checks `max_tenants` and `group_timeout` against their limits; the error names the
    /// value and the limit.
    pub fn check(&self) -> Result<(), String> {
        use crate::cosim::tenants::MAX_TENANTS;
        if self.max_tenants == 0 || self.max_tenants > MAX_TENANTS {
            return Err(format!(
                "--max-tenants {}: it must be 1 to {MAX_TENANTS} (a CXL 2.0 multi-logical device has at most 16 logical devices)",
                self.max_tenants
            ));
        }
        if self.group_timeout.is_zero() || self.group_timeout > MAX_GROUP_TIMEOUT {
            return Err(format!(
                "--group-timeout {} s: it must be more than 0 and at most {} s (a host waits {} s for its session)",
                self.group_timeout.as_secs_f64(),
                MAX_GROUP_TIMEOUT.as_secs(),
                cosim_link::attach::ATTACH_TIMEOUT.as_secs()
            ));
        }
        Ok(())
    }
}

/// The streaming factor, as carried in a [`Setup`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StreamingSetting {
    /// Bytes per DMA batch.
    Bytes(u64),
    /// A percentage of the launch's result.
    PercentOfResult(u32),
}

impl From<firmware::StreamingFactor> for StreamingSetting {
    fn from(factor: firmware::StreamingFactor) -> Self {
        match factor {
            firmware::StreamingFactor::Bytes(bytes) => StreamingSetting::Bytes(bytes),
            firmware::StreamingFactor::PercentOfResult(percent) => {
                StreamingSetting::PercentOfResult(percent)
            }
        }
    }
}

impl From<StreamingSetting> for firmware::StreamingFactor {
    fn from(setting: StreamingSetting) -> Self {
        match setting {
            StreamingSetting::Bytes(bytes) => firmware::StreamingFactor::Bytes(bytes),
            StreamingSetting::PercentOfResult(percent) => {
                firmware::StreamingFactor::PercentOfResult(percent)
            }
        }
    }
}

/// Everything the emulator needs from the host to build the device of one run (the
/// `device_setup` of a [`SessionRequest`](cosim_link::attach::SessionRequest), as JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    /// Device and link parameters.
    pub device: DeviceConfig,
    /// The streaming factor.
    pub streaming_factor: StreamingSetting,
    /// Out-of-order streaming.
    pub out_of_order: bool,
    /// Virtual-time limit of the run, in nanoseconds.
    pub limit_ns: u64,
    /// A wall-clock run (absent: virtual time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall: Option<WallSetup>,
}

/// The wall-clock part of a [`Setup`] (`axle run --clock wall --attach`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WallSetup {
    /// Wall-clock limit of the run, in nanoseconds.
    pub limit_ns: u64,
}

impl From<&DeviceMetrics> for DeviceCounters {
    fn from(metrics: &DeviceMetrics) -> Self {
        DeviceCounters {
            ccm_busy: metrics.ccm_busy.0,
            dma_busy: metrics.dma_busy.0,
            backpressure: metrics.backpressure.0,
            dma_requests: metrics.dma_requests,
            payloads: metrics.payloads,
            head_reads: metrics.head_reads,
            interrupts: metrics.interrupts,
            upstream_busy: metrics.upstream_busy.0,
            events: metrics.simulator.events,
            host_turns: metrics.simulator.host_turns,
            link_calls: metrics.simulator.link_calls,
        }
    }
}

impl From<&DeviceCounters> for DeviceMetrics {
    fn from(counters: &DeviceCounters) -> Self {
        DeviceMetrics {
            ccm_busy: Ticks(counters.ccm_busy),
            dma_busy: Ticks(counters.dma_busy),
            backpressure: Ticks(counters.backpressure),
            dma_requests: counters.dma_requests,
            payloads: counters.payloads,
            head_reads: counters.head_reads,
            interrupts: counters.interrupts,
            upstream_busy: Ticks(counters.upstream_busy),
            simulator: crate::cosim::SimulatorCounts {
                events: counters.events,
                host_turns: counters.host_turns,
                link_calls: counters.link_calls,
            },
        }
    }
}

/// The server could not start or keep serving.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Another emulator answers on the path.
    #[error("{} is in use by a running emulator", .0.display())]
    InUse(PathBuf),
    /// Something that is not a socket exists at the path.
    #[error("{} exists and is not a socket; refusing to replace it", .0.display())]
    NotASocket(PathBuf),
    /// Binding or preparing the socket failed.
    #[error(
        "cannot serve on {}: {error}{}",
        .path.display(),
        if error.kind() == ErrorKind::NotFound { " (its directory must exist)" } else { "" }
    )]
    Bind {
        /// The path.
        path: PathBuf,
        /// Why (in the message, not a separate cause, so it is said once).
        error: std::io::Error,
    },
    /// The signals could not be routed to a signalfd.
    #[error("cannot set up signal handling: {0}")]
    Signals(nix::errno::Errno),
}

/// How one host's session ended badly.
#[derive(Debug, thiserror::Error)]
enum SessionError {
    #[error("host died {0}")]
    HostDied(&'static str),
    #[error("host speaks ABI version {host_version}, this emulator {ABI_VERSION} (layout hashes {host_hash:#018x} and {LAYOUT_HASH:#018x}): attach refused")]
    AbiMismatch { host_version: u32, host_hash: u64 },
    #[error("stopped by a signal")]
    Stopped,
    #[error("refused the session: {0}")]
    Refused(String),
    #[error("host sent nothing for {} s {when}: detached", .after.as_secs())]
    Silent { when: &'static str, after: Duration },
    #[error(transparent)]
    Attach(#[from] AttachError),
    #[error(transparent)]
    Turn(#[from] TurnError),
    #[error("socket: {0}")]
    Io(std::io::Error),
}

impl From<std::io::Error> for SessionError {
    // Not `#[from]`: the error would be the cause as well as part of the message.
    fn from(error: std::io::Error) -> Self {
        SessionError::Io(error)
    }
}
