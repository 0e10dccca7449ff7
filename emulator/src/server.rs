//! The emulator as its own process: `axle emu --socket PATH`.
//!
//! The server binds a Unix stream socket (created with mode 0600), serves one host at a time,
//! and survives each: a host that finishes, is refused, or dies mid-run is logged, its
//! segments are unmapped and closed, and the next host may attach. SIGINT, SIGTERM and SIGHUP
//! (taken through a signalfd, so no handler code runs asynchronously) end the server, which
//! removes its socket file on the way out.
//!
//! One session (the host's side is `host_driver::attach`):
//!
//! 1. hello: magic, ABI version and layout hash, refused with [`Status::AbiMismatch`] on any
//!    difference;
//! 2. the host's [`SessionRequest`] with its physical-memory segment; the emulator maps it,
//!    creates device memory ([`DeviceSegment::shared`]) and the turn page, and answers with
//!    [`SessionReady`] and both descriptors;
//! 3. the unchanged [`Emulator::run`] with a `RemoteHost` as the host: each turn goes over
//!    the turn page (`host_driver::turn`), with the host's link calls replayed onto the
//!    emulator's link, so the run is the in-process run, event for event;
//! 4. the page is marked finished and a [`SessionEnd`] carries the outcome and the device's
//!    counters back; the host closes.
//!
//! A wall-clock session (`axle run --clock wall --attach`; [`Setup::wall`]) attaches the same
//! way, with the host's eventfd (its interrupt line) as a second descriptor in step 2; step 3
//! is then [`Emulator::run_wall`] against a clock started at the host's `CLOCK_MONOTONIC`
//! start instant, with link calls and responses framed over the socket
//! (`host_driver::wall_socket`), the eventfd written once per interrupt delivered, and a stop
//! signal ending the run; step 4 also carries the device's end-of-run state.
//!
//! Nothing here names a file in `/dev/shm`: the segments are memfds, and they disappear with
//! the last descriptor and mapping, whichever process dies first.
//!
//! There is no wall-clock timeout on a host's turn (a slow host is legal): a host that stays
//! alive but never gives the turn back holds the emulator until it dies or the emulator is
//! signalled. The attach steps before the run do time out ([`ATTACH_STEP_TIMEOUT`]).

use crate::config::DeviceConfig;
use crate::cosim::{CoSimError, DeviceMetrics, Emulator};
use crate::dram::DeviceDram;
use crate::shm::DeviceSegment;
use host_driver::attach::{
    receive_message_with, send_message, AttachError, DeviceCounters, Hello, HelloAnswer,
    MessageKind, SessionEnd, SessionReady, SessionRequest, WallDeviceEnd,
};
use host_driver::dma::MappedWords;
use host_driver::link::{DeviceLink, HostAgent, LinkResponse, Wake};
use host_driver::phys::PhysicalMemory;
use host_driver::sync::Arc;
use host_driver::turn::{replay_host_turn, DeviceTurn, Turn, TurnError, TurnPage, DEVICE, HOST};
use host_driver::wall::WallClock;
use host_driver::wall_socket::{device_side, receive_start, DeviceReaderEnd};
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
use std::time::Duration;
use zerocopy::{FromZeros, IntoBytes};

/// How long the server waits for each step of a host's attach.
pub const ATTACH_STEP_TIMEOUT: Duration = Duration::from_secs(10);
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
    #[error("cannot serve on {}: {source}", .path.display())]
    Bind {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
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
    #[error(transparent)]
    Attach(#[from] AttachError),
    #[error(transparent)]
    Turn(#[from] TurnError),
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
}

/// The socket file; removed when the server ends, however it ends (short of SIGKILL: then the
/// next `axle emu` on the same path finds it stale and replaces it).
#[derive(Debug)]
struct SocketFile {
    path: PathBuf,
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        match std::fs::remove_file(&self.path) {
            Ok(()) => log::info!("emu: removed {}", self.path.display()),
            Err(error) => log::warn!("emu: cannot remove {}: {error}", self.path.display()),
        }
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
    let bind_error = |source| ServerError::Bind {
        path: path.to_path_buf(),
        source,
    };
    if let Ok(metadata) = std::fs::symlink_metadata(path) {
        if !metadata.file_type().is_socket() {
            return Err(ServerError::NotASocket(path.to_path_buf()));
        }
        if UnixStream::connect(path).is_ok() {
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
    };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(bind_error)?;
    listener.set_nonblocking(true).map_err(bind_error)?;
    Ok((listener, file))
}

/// Serves hosts on the socket `path` until SIGINT, SIGTERM or SIGHUP.
pub fn serve(path: &Path) -> Result<(), ServerError> {
    let mut signals = Signals::new()?;
    let (listener, socket_file) = bind(path)?;
    log::info!(
        "emu: serving on {} (ABI version {ABI_VERSION}, layout hash {LAYOUT_HASH:#018x}); one host at a time",
        path.display()
    );
    while !signals.stop_requested() {
        match listener.accept() {
            Ok((stream, _)) => serve_host_connection(stream, &mut signals),
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
fn serve_host_connection(stream: UnixStream, signals: &mut Signals) {
    let credentials =
        nix::sys::socket::getsockopt(&stream.as_fd(), nix::sys::socket::sockopt::PeerCredentials);
    let pid = credentials.map_or(-1, |c| c.pid());
    if let Err(error) = stream.set_nonblocking(false) {
        log::error!("emu: host pid {pid}: {error}");
        return;
    }
    match session(&stream, pid, signals) {
        Ok(summary) => log::info!("emu: host pid {pid} detached after its run ({summary})"),
        Err(SessionError::HostDied(when)) => log::warn!(
            "emu: host pid {pid} died {when}; its segments are freed; ready for the next host"
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
        _ => SessionError::Io(error),
    }
}

fn session(stream: &UnixStream, pid: i32, signals: &mut Signals) -> Result<String, SessionError> {
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

    let (request, mut fds): (SessionRequest, _) = receive_message_with(
        stream,
        MessageKind::Session,
        1..=2,
        AttachError::HostDied("before its session request"),
    )
    .map_err(|error| match error {
        AttachError::HostDied(when) => SessionError::HostDied(when),
        other => other.into(),
    })?;
    let setup = match prepare(&request, &fds) {
        Ok(setup) => setup,
        Err(reason) => {
            send_message(stream, MessageKind::Refused, &reason, &[])?;
            return Err(SessionError::Refused(reason));
        }
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
            turn_page_bytes: host_driver::turn::TURN_PAGE_BYTES,
        },
        &[device_fd, page_fd.as_fd(), register_fd.as_fd()],
    )?;
    drop(register_fd);
    drop(page_fd);
    stream.set_read_timeout(None)?;
    log::info!("emu: host pid {pid}: segments exchanged; the run starts");

    if let (Some(wall), Some(line)) = (setup.wall, interrupt_line) {
        return wall_session(stream, &mut emulator, wall, line, signals);
    }

    let mut host = RemoteHost {
        page: &page,
        peer: stream,
        signals,
        pending: DeviceTurn::default(),
        turns: 0,
        error: None,
    };
    let outcome = emulator.run(&mut host, Ticks::from_ns(setup.limit_ns));
    let turns = host.turns;
    match host.error.take() {
        None => {}
        Some(TurnError::PeerDied) => return Err(SessionError::HostDied("mid-run")),
        Some(TurnError::Stopped) => return Err(SessionError::Stopped),
        Some(error) => return Err(error.into()),
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

/// The run of a wall-clock session (`host_driver::wall_socket`): the host's start instant,
/// then [`Emulator::run_wall`] over the socket, then the outcome.
fn wall_session(
    stream: &UnixStream,
    emulator: &mut Emulator,
    wall: WallSetup,
    interrupt_line: std::os::fd::OwnedFd,
    signals: &mut Signals,
) -> Result<String, SessionError> {
    let start = receive_start(stream).map_err(|error| match error {
        AttachError::HostDied(when) => SessionError::HostDied(when),
        other => other.into(),
    })?;
    let clock = WallClock::from_monotonic_ns(start);
    let wake = signals.fd.as_fd().try_clone_to_owned()?;
    let (port, transport) = device_side(stream, interrupt_line, Some(wake))?;
    let outcome = emulator.run_wall(&port, &clock, Ticks::from_ns(wall.limit_ns), None);
    drop(port);
    let (written, reader) = transport.finish_writing();
    if signals.stop_requested() {
        reader.stop();
        return Err(SessionError::Stopped);
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
    let read = reader.stop();
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

/// Checks the session request and maps the host's memory.
fn prepare(
    request: &SessionRequest,
    fds: &[std::os::fd::OwnedFd],
) -> Result<(Arc<PhysicalMemory>, Setup), String> {
    let setup: Setup = serde_json::from_str(&request.device_setup)
        .map_err(|e| format!("invalid device set-up: {e}"))?;
    setup.device.validate()?;
    let wanted = if setup.wall.is_some() { 2 } else { 1 };
    if fds.len() != wanted {
        return Err(format!(
            "expected {wanted} descriptors with the session request, got {}",
            fds.len()
        ));
    }
    let fd = fds.first().ok_or("no host memory segment")?;
    let mapped = MappedWords::map(fd.as_fd(), request.host_memory_bytes)
        .map_err(|e| format!("host memory segment: {e}"))?;
    let memory = PhysicalMemory::from_store(Box::new(mapped)).map_err(|e| e.to_string())?;
    Ok((Arc::new(memory), setup))
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
}

impl RemoteHost<'_> {
    fn exchange(&mut self, now: Ticks, link: &mut dyn DeviceLink) -> Result<Wake, TurnError> {
        self.page.hand_over(HOST, &self.pending.take(now))?;
        let signals = &mut *self.signals;
        match self
            .page
            .wait_for(DEVICE, self.peer, &mut || signals.stop_requested())?
        {
            Turn::Mine(message) => replay_host_turn(&message, link),
            Turn::Finished => Err(TurnError::BadFlag(host_driver::turn::FINISHED)),
        }
    }
}

impl HostAgent for RemoteHost<'_> {
    fn deliver(&mut self, at: Ticks, response: LinkResponse) {
        self.pending.deliver(at, &response);
    }

    fn turn(&mut self, now: Ticks, link: &mut dyn DeviceLink) -> Wake {
        if self.error.is_some() {
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
