//! The emulator as its own process: `axle emu --socket PATH`.
//!
//! The server binds a Unix stream socket (created with mode 0600), serves one host at a time,
//! and survives each: a host that finishes, is refused, or dies mid-run is logged, its
//! segments are unmapped and closed, and the next host may attach. SIGINT, SIGTERM and SIGHUP
//! (taken through a signalfd, so no handler code runs asynchronously) end the server, which
//! removes its socket file on the way out.
//!
//! One session (the host's side is `cosim_link::attach`):
//!
//! 1. hello: magic, ABI version and layout hash, refused with [`Status::AbiMismatch`] on any
//!    difference;
//! 2. the host's [`SessionRequest`] with its physical-memory segment; the emulator maps it,
//!    creates device memory ([`DeviceSegment::shared`]) and the turn page, and answers with
//!    [`SessionReady`] and both descriptors;
//! 3. the unchanged [`Emulator::run`] with a `RemoteHost` as the host: each turn goes over
//!    the turn page (`cosim_link::turn`), with the host's link calls replayed onto the
//!    emulator's link, so the run is the in-process run, event for event;
//! 4. the page is marked finished and a [`SessionEnd`] carries the outcome and the device's
//!    counters back; the host closes.
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
//! owned values dropped when the session ends, on every path), and serves the next host.
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
//!   is checked before anything is replayed (`cosim_link::turn`). The link requests it
//!   replays are bounded by the device (`crate::cosim`, "Bounds"): a CXL.mem load or store no
//!   longer than device memory, at most [`crate::cosim::MAX_HOST_REQUESTS_IN_FLIGHT`]
//!   requests and device memory's worth of bytes in flight. A refused request ends the run;
//!   the host gets the reason in its [`SessionEnd`].
//! - **Time.** Each attach step must come within [`ATTACH_STEP_TIMEOUT`]. A host that keeps
//!   its turn longer than the turn timeout ([`ServeOptions::turn_timeout`], `axle emu
//!   --turn-timeout`, default [`DEFAULT_TURN_TIMEOUT`]), or in a wall-clock run sends nothing
//!   (not even half a frame) for that long, is detached: logged, told why if it still reads,
//!   its resources freed. The first turn includes the host's untimed set-up (loading its data
//!   set through its mapping of device memory). A host queued behind it waits meanwhile (one
//!   host at a time); its own attach gives up after `cosim_link::attach::ATTACH_TIMEOUT` with
//!   a message that says so.
//! - **The socket file.** An existing socket is probed without blocking (a listener that never
//!   accepts cannot hang the start-up, and SIGINT/SIGTERM work throughout); the file is
//!   removed on exit only if it is still the inode this process bound.

use crate::config::DeviceConfig;
use crate::cosim::{CoSimError, DeviceMetrics, Emulator};
use crate::dram::DeviceDram;
use crate::shm::DeviceSegment;
use cosim_link::attach::{
    receive_message_with, send_message, AttachError, DeviceCounters, Hello, HelloAnswer,
    MessageKind, SessionEnd, SessionReady, SessionRequest, WallDeviceEnd,
};
use cosim_link::link::{DeviceLink, HostAgent, LinkResponse, Wake};
use cosim_link::phys::PhysicalMemory;
use cosim_link::shm::MappedWords;
use cosim_link::sync::Arc;
use cosim_link::turn::{replay_host_turn, DeviceTurn, Turn, TurnError, TurnPage, DEVICE, HOST};
use cosim_link::wall::WallClock;
use cosim_link::wall_socket::{device_side, receive_start, DeviceReader, DeviceReaderEnd};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use serde::{Deserialize, Serialize};
use shared_abi::{Status, Ticks, ABI_VERSION, LAYOUT_HASH};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use zerocopy::{FromZeros, IntoBytes};

/// How long the server waits for each step of a host's attach.
pub const ATTACH_STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an attached host may keep its turn by default (`axle emu --turn-timeout`).
pub const DEFAULT_TURN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one host's session may last by default (`axle emu --session-limit`): half an
/// hour, three times the longest wall-time budget `axle run` gives a run of its own (10
/// minutes at paper scale), so an honest host's own budget ends its run first.
pub const DEFAULT_SESSION_LIMIT: Duration = Duration::from_secs(30 * 60);

/// How the server treats its hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServeOptions {
    /// The longest a host may keep its turn (or, in a wall-clock run, stay silent) before it
    /// is detached.
    pub turn_timeout: Duration,
    /// The longest one host's session may last, in wall time, however quickly it takes its
    /// turns: a host that never finishes cannot hold the device for the hosts queued behind.
    pub session_limit: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            turn_timeout: DEFAULT_TURN_TIMEOUT,
            session_limit: DEFAULT_SESSION_LIMIT,
        }
    }
}
/// Longest wait of the idle server for a new host or a signal before it looks again.
const ACCEPT_PERIOD: Duration = Duration::from_millis(500);

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
/// `device_setup` of a [`SessionRequest`], as JSON).
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

/// The socket file; removed when the server ends, however it ends (short of SIGKILL: then the
/// next `axle emu` on the same path finds it stale and replaces it), but only if the path
/// still names the socket this server bound: the inode (device and inode number) it created.
/// If someone deleted it and another emulator bound the same path since, that socket is left
/// alone.
#[derive(Debug)]
struct SocketFile {
    path: PathBuf,
    /// `(st_dev, st_ino)` of the socket this server bound.
    inode: (u64, u64),
}

/// `(st_dev, st_ino)` of `path` itself (not following a symbolic link).
fn inode_of(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).map(|metadata| (metadata.dev(), metadata.ino()))
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        match inode_of(&self.path) {
            Ok(inode) if inode == self.inode => match std::fs::remove_file(&self.path) {
                Ok(()) => log::info!("emu: removed {}", self.path.display()),
                Err(error) => log::warn!("emu: cannot remove {}: {error}", self.path.display()),
            },
            Ok(_) => log::warn!(
                "emu: {} is no longer the socket this emulator created (it was replaced, \
                 perhaps by another emulator); leaving it alone",
                self.path.display()
            ),
            Err(error) => log::warn!(
                "emu: {} is gone ({error}); nothing to remove",
                self.path.display()
            ),
        }
    }
}

/// Whether something listens on the socket at `path`, without blocking: a non-blocking
/// connect succeeds or finds the listener's backlog full (EAGAIN) when a listener exists, and
/// is refused when the file is a stale socket nobody listens on. A blocking connect would
/// wait forever on a listener whose backlog is full and that never accepts.
fn listener_present(path: &Path) -> Result<bool, std::io::Error> {
    use nix::errno::Errno;
    use nix::sys::socket::{connect, socket, AddressFamily, SockFlag, SockType, UnixAddr};
    let probe = socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    let address = UnixAddr::new(path)?;
    match connect(std::os::fd::AsRawFd::as_raw_fd(&probe), &address) {
        Ok(()) | Err(Errno::EAGAIN | Errno::EINPROGRESS) => Ok(true),
        Err(Errno::ECONNREFUSED | Errno::ENOENT) => Ok(false),
        Err(errno) => Err(errno.into()),
    }
}

/// SIGINT, SIGTERM and SIGHUP, blocked and read from a signalfd.
#[derive(Debug)]
struct Signals {
    fd: SignalFd,
    received: Option<Signal>,
}

impl Signals {
    fn new() -> Result<Signals, ServerError> {
        let mut mask = SigSet::empty();
        for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
            mask.add(signal);
        }
        mask.thread_block().map_err(ServerError::Signals)?;
        let fd = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
            .map_err(ServerError::Signals)?;
        Ok(Signals { fd, received: None })
    }

    /// Whether a stop signal has arrived (now or before).
    fn stop_requested(&mut self) -> bool {
        if self.received.is_none() {
            if let Ok(Some(info)) = self.fd.read_signal() {
                self.received = Signal::try_from(info.ssi_signo as i32).ok();
            }
        }
        self.received.is_some()
    }
}

/// Binds `path` with mode 0600, replacing a stale socket left by a killed server.
fn bind(path: &Path) -> Result<(UnixListener, SocketFile), ServerError> {
    let bind_error = |error| ServerError::Bind {
        path: path.to_path_buf(),
        error,
    };
    if let Ok(metadata) = std::fs::symlink_metadata(path) {
        if !metadata.file_type().is_socket() {
            return Err(ServerError::NotASocket(path.to_path_buf()));
        }
        if listener_present(path).map_err(bind_error)? {
            return Err(ServerError::InUse(path.to_path_buf()));
        }
        log::warn!("emu: replacing the stale socket {}", path.display());
        std::fs::remove_file(path).map_err(bind_error)?;
    }
    // The socket file gets mode 0666 & !umask: with this umask it is 0600 from the start, so
    // no other user can connect in the window before the chmod below.
    let previous = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
    let bound = UnixListener::bind(path);
    nix::sys::stat::umask(previous);
    let listener = bound.map_err(bind_error)?;
    let file = SocketFile {
        path: path.to_path_buf(),
        inode: inode_of(path).map_err(bind_error)?,
    };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(bind_error)?;
    listener.set_nonblocking(true).map_err(bind_error)?;
    Ok((listener, file))
}

/// Serves hosts on the socket `path` until SIGINT, SIGTERM or SIGHUP.
pub fn serve(path: &Path, options: &ServeOptions) -> Result<(), ServerError> {
    let mut signals = Signals::new()?;
    let (listener, socket_file) = bind(path)?;
    log::info!(
        "emu: serving on {} (ABI version {ABI_VERSION}, layout hash {LAYOUT_HASH:#018x}); one host at a time; a host that keeps its turn more than {} s is detached",
        path.display(),
        options.turn_timeout.as_secs_f64()
    );
    while !signals.stop_requested() {
        match listener.accept() {
            Ok((stream, _)) => serve_host_connection(stream, &mut signals, options),
            Err(error) if error.kind() == ErrorKind::WouldBlock => {
                // Sleep until a host connects or a signal arrives.
                let mut ready = [
                    PollFd::new(listener.as_fd(), PollFlags::POLLIN),
                    PollFd::new(signals.fd.as_fd(), PollFlags::POLLIN),
                ];
                let timeout = PollTimeout::try_from(ACCEPT_PERIOD).unwrap_or(PollTimeout::NONE);
                if let Err(errno) = poll(&mut ready, timeout) {
                    if errno != nix::errno::Errno::EINTR {
                        log::error!("emu: poll failed: {errno}");
                        std::thread::sleep(ACCEPT_PERIOD);
                    }
                }
            }
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => {
                log::error!("emu: accept failed: {error}");
                std::thread::sleep(ACCEPT_PERIOD);
            }
        }
    }
    if let Some(signal) = signals.received {
        log::info!("emu: {signal} received; shutting down");
    }
    drop(socket_file);
    Ok(())
}

/// One host, from connection to detach; every way it can end is logged here.
fn serve_host_connection(stream: UnixStream, signals: &mut Signals, options: &ServeOptions) {
    let credentials =
        nix::sys::socket::getsockopt(&stream.as_fd(), nix::sys::socket::sockopt::PeerCredentials);
    let pid = credentials.map_or(-1, |c| c.pid());
    if let Err(error) = stream.set_nonblocking(false) {
        log::error!("emu: host pid {pid}: {error}");
        return;
    }
    match session(&stream, pid, signals, options) {
        Ok(summary) => log::info!("emu: host pid {pid} detached after its run ({summary})"),
        Err(SessionError::HostDied(when)) => log::warn!(
            "emu: host pid {pid} died {when}; its segments are freed; ready for the next host"
        ),
        Err(error @ SessionError::Silent { .. }) => log::warn!(
            "emu: host pid {pid}: {error}; its segments are freed; ready for the next host"
        ),
        Err(error @ SessionError::AbiMismatch { .. }) => {
            log::warn!("emu: host pid {pid}: {error}")
        }
        Err(SessionError::Stopped) => log::info!("emu: host pid {pid} dropped: stopping"),
        Err(error) => log::error!("emu: host pid {pid} detached on an error: {error}"),
    }
}

fn closed(error: std::io::Error, when: &'static str) -> SessionError {
    match error.kind() {
        ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset | ErrorKind::BrokenPipe => {
            SessionError::HostDied(when)
        }
        ErrorKind::WouldBlock | ErrorKind::TimedOut => SessionError::Silent {
            when,
            after: ATTACH_STEP_TIMEOUT,
        },
        _ => SessionError::Io(error),
    }
}

/// Tells the host why it is refused (best effort: it may be gone) and returns the error.
fn refuse(stream: &UnixStream, reason: String) -> SessionError {
    if let Err(error) = send_message(stream, MessageKind::Refused, &reason, &[]) {
        log::debug!("emu: the refusal did not reach the host: {error}");
    }
    SessionError::Refused(reason)
}

fn session(
    stream: &UnixStream,
    pid: i32,
    signals: &mut Signals,
    options: &ServeOptions,
) -> Result<String, SessionError> {
    stream.set_read_timeout(Some(ATTACH_STEP_TIMEOUT))?;
    let mut hello = Hello::new_zeroed();
    let mut reader = stream;
    reader
        .read_exact(hello.as_mut_bytes())
        .map_err(|e| closed(e, "before its hello"))?;
    log::info!(
        "emu: host pid {pid} attached (process {} says ABI version {})",
        hello.pid,
        hello.version
    );
    let mut writer = stream;
    if !hello.compatible() {
        writer
            .write_all(HelloAnswer::new(Status::AbiMismatch).as_bytes())
            .map_err(|e| closed(e, "during the hello"))?;
        return Err(SessionError::AbiMismatch {
            host_version: hello.version,
            host_hash: hello.layout_hash,
        });
    }
    writer
        .write_all(HelloAnswer::new(Status::Ok).as_bytes())
        .map_err(|e| closed(e, "during the hello"))?;

    // Every descriptor that arrives is owned from the moment it arrives: on any error below
    // (too many, the wrong kind, a bad size) dropping `fds` closes all of them.
    let (request, mut fds): (SessionRequest, _) = receive_message_with(
        stream,
        MessageKind::Session,
        1..=2,
        AttachError::HostDied("before its session request"),
    )
    .map_err(|error| match error {
        AttachError::HostDied(when) => SessionError::HostDied(when),
        AttachError::TimedOut { after, .. } => SessionError::Silent {
            when: "before its session request",
            after,
        },
        AttachError::Protocol(reason) => refuse(stream, reason),
        other => other.into(),
    })?;
    let setup = match prepare(&request, &fds) {
        Ok(setup) => setup,
        Err(reason) => return Err(refuse(stream, reason.to_string())),
    };
    let (host_memory, setup) = setup;
    // A wall-clock run's interrupt line (its eventfd) came second.
    let interrupt_line = if setup.wall.is_some() {
        fds.pop()
    } else {
        None
    };
    let device_bytes = Emulator::device_memory_bytes(&setup.device);
    let segment = DeviceSegment::shared(device_bytes)?;
    let dram = DeviceDram::from_segment(segment, device_bytes);
    let (page, page_fd) = TurnPage::create()?;
    let mut emulator = Emulator::with_device_memory(
        setup.device.clone(),
        host_memory,
        dram,
        setup.streaming_factor.into(),
        setup.out_of_order,
    );
    let (data_base, data_end) = emulator.data_window();
    let register_fd = emulator
        .serve_registers()?
        .fd()
        .ok_or_else(|| SessionError::Refused("the register page is not shared".into()))?
        .try_clone_to_owned()?;
    let device_fd = emulator
        .dram()
        .segment()
        .fd()
        .ok_or_else(|| SessionError::Refused("device memory is not shared".into()))?;
    send_message(
        stream,
        MessageKind::Ready,
        &SessionReady {
            device_memory_bytes: device_bytes,
            data_base: data_base.0,
            data_end: data_end.0,
            turn_page_bytes: cosim_link::turn::TURN_PAGE_BYTES,
        },
        &[device_fd, page_fd.as_fd(), register_fd.as_fd()],
    )?;
    drop(register_fd);
    drop(page_fd);
    stream.set_read_timeout(None)?;
    log::info!("emu: host pid {pid}: segments exchanged; the run starts");

    if let (Some(wall), Some(line)) = (setup.wall, interrupt_line) {
        return wall_session(stream, &mut emulator, wall, line, signals, options);
    }

    let mut host = RemoteHost {
        page: &page,
        peer: stream,
        signals,
        pending: DeviceTurn::default(),
        turns: 0,
        error: None,
        turn_timeout: options.turn_timeout,
        deadline: Instant::now().checked_add(options.session_limit),
        expired: false,
    };
    let outcome = emulator.run(&mut host, Ticks::from_ns(setup.limit_ns));
    let turns = host.turns;
    if host.expired {
        page.finish();
        return Err(refuse(
            stream,
            format!(
                "turn {turns}: the session lasted more than {} s of wall time, the emulator's \
                 session limit (axle emu --session-limit); the host is detached",
                options.session_limit.as_secs_f64()
            ),
        ));
    }
    match host.error.take() {
        None => {}
        Some(TurnError::PeerDied) => return Err(SessionError::HostDied("mid-run")),
        Some(TurnError::Stopped) => return Err(SessionError::Stopped),
        Some(error) => {
            // The host broke the turn protocol or kept the turn too long: it is detached, and
            // told why if it is still there to read it.
            page.finish();
            let reason = match error {
                TurnError::TimedOut { after } => format!(
                    "turn {turns}: the host kept its turn for more than {} s, the emulator's \
                     turn timeout (axle emu --turn-timeout); it is detached",
                    after.as_secs_f64()
                ),
                other => format!("turn {turns}: {other}; the host is detached"),
            };
            return Err(refuse(stream, reason));
        }
    }
    page.finish();
    let metrics = emulator.metrics();
    send_message(
        stream,
        MessageKind::End,
        &SessionEnd {
            error: outcome.as_ref().err().map(ToString::to_string),
            device: DeviceCounters::from(&metrics),
            wall: None,
        },
        &[],
    )?;
    // The host closes once it has the outcome.
    stream.set_read_timeout(Some(ATTACH_STEP_TIMEOUT))?;
    let mut rest = [0u8; 64];
    let _ = reader.read(&mut rest);
    Ok(match outcome {
        Ok(()) => format!(
            "{turns} turns, {} ns of virtual time",
            emulator.now().as_ns()
        ),
        Err(error) => format!("{turns} turns, the run failed: {error}"),
    })
}

/// The run of a wall-clock session (`cosim_link::wall_socket`): the host's start instant,
/// then [`Emulator::run_wall`] over the socket, then the outcome.
fn wall_session(
    stream: &UnixStream,
    emulator: &mut Emulator,
    wall: WallSetup,
    interrupt_line: std::os::fd::OwnedFd,
    signals: &mut Signals,
    options: &ServeOptions,
) -> Result<String, SessionError> {
    // The host's start frame comes within the turn timeout, or the host is detached.
    stream.set_read_timeout(Some(options.turn_timeout))?;
    let start = receive_start(stream).map_err(|error| match error {
        AttachError::HostDied(when) => SessionError::HostDied(when),
        AttachError::Io(error) => match closed(error, "before the wall-clock run started") {
            SessionError::Silent { when, .. } => SessionError::Silent {
                when,
                after: options.turn_timeout,
            },
            other => other,
        },
        other => other.into(),
    })?;
    let clock = WallClock::from_monotonic_ns(start);
    let wake = signals.fd.as_fd().try_clone_to_owned()?;
    let (port, transport) = device_side(
        stream,
        interrupt_line,
        Some(wake),
        Some(options.turn_timeout),
    )?;
    // The host's own limit, within the session limit (wall-clock ticks are real nanoseconds).
    let session_ns = u64::try_from(options.session_limit.as_nanos()).unwrap_or(u64::MAX);
    let limit = Ticks::from_ns(wall.limit_ns.min(session_ns));
    let outcome = emulator.run_wall(&port, &clock, limit, None);
    drop(port);
    let (written, reader) = transport.finish_writing();
    if signals.stop_requested() {
        reader.stop();
        return Err(SessionError::Stopped);
    }
    // A reader that has already ended says how: a silent host is detached, with the reason.
    let (mut reader, mut read) = (Some(reader), None);
    if reader.as_ref().is_some_and(DeviceReader::ended) {
        read = reader.take().map(DeviceReader::stop);
    }
    if let Some(DeviceReaderEnd::TimedOut(after)) = read {
        let reason = format!(
            "the host sent nothing for more than {} s of a wall-clock run, the emulator's \
             turn timeout (axle emu --turn-timeout); it is detached",
            after.as_secs_f64()
        );
        let end = SessionEnd {
            error: Some(reason.clone()),
            device: DeviceCounters::from(&emulator.metrics()),
            wall: None,
        };
        let _ = send_message(stream, MessageKind::End, &end, &[]);
        return Err(SessionError::Refused(reason));
    }
    let firmware = emulator.firmware();
    let counters = firmware.counters();
    let end = SessionEnd {
        error: outcome.as_ref().err().map(ToString::to_string),
        device: DeviceCounters::from(&emulator.metrics()),
        wall: Some(WallDeviceEnd {
            launches: counters.launches,
            refused: counters.refused,
            payloads: counters.payloads,
            dma_requests: counters.dma_requests,
            head_reads: counters.head_reads,
            backpressure_ticks: counters.backpressure_ticks,
            streaming_idle: firmware.streaming_idle(),
            waiting_for_credit: firmware.waiting_for_credit(),
            broken: firmware.broken().map(Status::code),
            stream_tails: firmware.stream_tails(),
            device_time: emulator.now().0,
        }),
    };
    let sent = written
        .map_err(|e| closed(e, "mid-run"))
        .and_then(|_| send_message(stream, MessageKind::End, &end, &[]).map_err(Into::into));
    let read = match (read, reader) {
        (Some(read), _) => read,
        (None, Some(reader)) => reader.stop(),
        (None, None) => DeviceReaderEnd::Stopped,
    };
    match (sent, outcome) {
        (Err(_), _) if read == DeviceReaderEnd::HostClosed => {
            Err(SessionError::HostDied("mid-run"))
        }
        (Err(error), _) => Err(error),
        (Ok(()), Ok(())) => Ok(format!(
            "wall clock, {} ns of device time",
            emulator.now().as_ns()
        )),
        (Ok(()), Err(CoSimError::Host(_))) if read == DeviceReaderEnd::HostClosed => {
            Err(SessionError::HostDied("mid-run"))
        }
        (Ok(()), Err(error)) => Ok(format!("wall clock, the run failed: {error}")),
    }
}

/// Checks the session request and maps the host's memory. Every size in it is bounded
/// before anything is created for it ([`check_session_request`]), the descriptors by their
/// count and kind.
fn prepare(
    request: &SessionRequest,
    fds: &[std::os::fd::OwnedFd],
) -> Result<(Arc<PhysicalMemory>, Setup), SetupError> {
    let setup = check_session_request(request)?;
    let wall = setup.wall.is_some();
    let wanted = if wall { 2 } else { 1 };
    if fds.len() != wanted {
        return Err(SetupError::Descriptors {
            carried: fds.len(),
            wanted,
            wall,
        });
    }
    if let Some(line) = fds.get(1) {
        check_eventfd(line.as_fd())?;
    }
    let fd = fds.first().ok_or(SetupError::NoHostMemory)?;
    let mapped =
        MappedWords::map(fd.as_fd(), request.host_memory_bytes).map_err(SetupError::HostMemory)?;
    let memory = PhysicalMemory::from_store(Box::new(mapped))?;
    Ok((Arc::new(memory), setup))
}

/// Why a session request was refused; sent to the host as its text (the refusal message).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The device set-up is not valid JSON of a [`Setup`].
    #[error("invalid device set-up: {0}")]
    Json(#[from] serde_json::Error),
    /// The device configuration breaks a limit of the model or the machine.
    #[error("invalid device set-up: {0}")]
    Device(#[from] cosim_link::limits::ConfigError),
    /// Device memory too small for the control area, the scratch area and 1 MiB of data.
    #[error(
        "invalid device set-up: device.device_memory_mib is {mib}, less than the {least_mib} MiB \
         the device needs (the control area, the firmware's scratch area and 1 MiB of data)"
    )]
    DeviceMemoryTooSmall {
        /// MiB asked for.
        mib: u64,
        /// MiB needed.
        least_mib: u64,
    },
    /// Device memory beyond what the machine has.
    #[error("invalid device set-up: {0}")]
    DeviceMemory(#[source] cosim_link::limits::Refused),
    /// The host memory segment is larger than the machine allows.
    #[error("host memory segment: {0}; the emulator maps all of it and lands DMA in it")]
    HostMemoryTooLarge(#[source] cosim_link::limits::Refused),
    /// The request carried the wrong number of descriptors.
    #[error(
        "the session request carried {carried} descriptors; a {} run takes {wanted} (the host \
         memory segment{}); all were closed",
        if *wall { "wall-clock" } else { "virtual-time" },
        if *wall { " and the interrupt eventfd" } else { "" }
    )]
    Descriptors {
        /// Descriptors carried.
        carried: usize,
        /// Descriptors the run takes.
        wanted: usize,
        /// Whether the run is a wall-clock run.
        wall: bool,
    },
    /// No host memory segment came with the request.
    #[error("no host memory segment")]
    NoHostMemory,
    /// The host memory segment could not be mapped.
    #[error("host memory segment: {0}")]
    HostMemory(#[source] cosim_link::shm::SegmentError),
    /// The mapped segment is not a usable physical memory.
    #[error(transparent)]
    Physical(#[from] cosim_link::phys::PhysError),
    /// The interrupt line's descriptor could not be inspected.
    #[error("cannot inspect the interrupt line's descriptor: {0}")]
    InspectInterruptLine(#[source] std::io::Error),
    /// The interrupt line is not an eventfd.
    #[error("the interrupt line's descriptor is {0}, not an eventfd")]
    NotEventfd(String),
}

/// Checks every size of a session request before anything is created for it: the device
/// set-up by [`DeviceConfig::validate`] (the model's limits) and [`check_device_memory`] (the
/// device's own needs and the machine's memory), the host memory segment by the machine's
/// memory. Returns the set-up; the error names the value, the limit and why.
pub fn check_session_request(request: &SessionRequest) -> Result<Setup, SetupError> {
    let setup: Setup = serde_json::from_str(&request.device_setup)?;
    setup.device.validate()?;
    check_device_memory(&setup.device)?;
    cosim_link::limits::bytes("host_memory_bytes", request.host_memory_bytes, 1)
        .map_err(SetupError::HostMemoryTooLarge)?;
    Ok(setup)
}

/// Checks the device memory a set-up asks for: large enough for the firmware's scratch area
/// above the data window (the model's limit) and no larger than the machine's available
/// memory (an attached host fills it with its data set).
pub fn check_device_memory(device: &DeviceConfig) -> Result<(), SetupError> {
    let bytes = Emulator::device_memory_bytes(device);
    let scratch = firmware::scratch::ScratchLayout::new(
        shared_abi::DeviceAddress(0),
        crate::cosim::CHUNK_CAPACITY,
    )
    .bytes();
    let smallest = shared_abi::device_map::DATA_BASE
        .0
        .saturating_add(scratch)
        .saturating_add(1 << 20);
    if bytes < smallest {
        return Err(SetupError::DeviceMemoryTooSmall {
            mib: device.device_memory_mib,
            least_mib: smallest.div_ceil(1 << 20),
        });
    }
    cosim_link::limits::bytes("device.device_memory_mib (in bytes)", bytes, 1)
        .map(|_| ())
        .map_err(SetupError::DeviceMemory)
}

/// Checks that the interrupt line a wall-clock host sent is an eventfd: the emulator writes
/// it from its writer thread, and a pipe nobody reads would block that thread for good.
fn check_eventfd(fd: std::os::fd::BorrowedFd<'_>) -> Result<(), SetupError> {
    use std::os::fd::AsRawFd;
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(SetupError::InspectInterruptLine)?;
    if link.as_os_str() != "anon_inode:[eventfd]" {
        return Err(SetupError::NotEventfd(link.display().to_string()));
    }
    Ok(())
}

/// The host, as the emulator sees it across processes: each turn goes over the turn page.
///
/// `deliver` encodes the response for the next turn; `turn` writes the time and the
/// responses, hands the turn to the host, waits for it to come back (checking that the host
/// lives and that no stop signal arrived), and replays the host's link calls onto the
/// emulator's link. On any failure it records the error and answers [`Wake::Done`], which
/// ends [`Emulator::run`]; the session then reports the error.
struct RemoteHost<'a> {
    page: &'a TurnPage,
    peer: &'a UnixStream,
    signals: &'a mut Signals,
    pending: DeviceTurn,
    turns: u64,
    error: Option<TurnError>,
    /// How long the host may keep its turn.
    turn_timeout: Duration,
    /// When the session must have ended ([`ServeOptions::session_limit`]; `None`: beyond
    /// what the clock can represent).
    deadline: Option<Instant>,
    /// Whether the session outlived its deadline.
    expired: bool,
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
