//! The socket file, the stop signals and the accept loop: one host at a time, each session
//! ended (however it ends) before the next host is accepted.

use super::session::{session, Served};
use super::{ServeOptions, ServerError, SessionError};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use shared_abi::{ABI_VERSION, LAYOUT_HASH};
use std::io::ErrorKind;
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Longest wait of the idle server for a new host or a signal before it looks again.
const ACCEPT_PERIOD: Duration = Duration::from_millis(500);

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
pub(super) struct Signals {
    pub(super) fd: SignalFd,
    received: std::cell::Cell<Option<Signal>>,
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
        Ok(Signals {
            fd,
            received: std::cell::Cell::new(None),
        })
    }

    /// Whether a stop signal has arrived (now or before).
    pub(super) fn stop_requested(&self) -> bool {
        if self.received.get().is_none() {
            if let Ok(Some(info)) = self.fd.read_signal() {
                self.received
                    .set(Signal::try_from(info.ssi_signo as i32).ok());
            }
        }
        self.received.get().is_some()
    }
}

/// Frees a finished session's memory on a thread of its own, so that unmapping and closing
/// its segments (a second of work for DLRM's gigabyte of device memory on a busy machine)
/// does not keep the next host from being accepted. At most one session is being freed at a
/// time: the next one waits for it, so the memory held never exceeds two sessions' worth.
#[derive(Debug, Default)]
pub(super) struct Reaper {
    freeing: Option<std::thread::JoinHandle<()>>,
}

impl Reaper {
    /// Drops `session` on a thread of its own (here if no thread can be started), after the
    /// session before it is freed.
    pub(super) fn reap<T: Send + 'static>(&mut self, session: T) {
        self.wait();
        let spawned = std::thread::Builder::new()
            .name("emu-free".into())
            .spawn(move || drop(session));
        match spawned {
            Ok(handle) => self.freeing = Some(handle),
            // The closure, and the session with it, was dropped here.
            Err(error) => log::debug!("emu: freed a session in line: {error}"),
        }
    }

    /// Waits until the last session handed over is freed.
    pub(super) fn wait(&mut self) {
        if let Some(handle) = self.freeing.take() {
            if handle.join().is_err() {
                log::error!("emu: freeing a session's memory panicked");
            }
        }
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
    let signals = Signals::new()?;
    let mut reaper = Reaper::default();
    let (listener, socket_file) = bind(path)?;
    log::info!(
        "emu: serving on {} (ABI version {ABI_VERSION}, layout hash {LAYOUT_HASH:#018x}, device epoch {:#018x}); one host at a time; a host that keeps its turn more than {} s is detached",
        path.display(),
        super::epoch::device_epoch(),
        options.turn_timeout.as_secs_f64()
    );
    if let Some(setting) = crate::shm::shared_memory_huge_pages() {
        if !crate::shm::shared_memory_on_huge_pages(&setting) {
            log::info!(
                "emu: device memory will be on 4 KiB pages: the kernel's shmem_enabled is `{setting}` (`within_size` gives shared memory huge pages, on which large data sets such as DLRM's load and run faster; docs/emulator-process.md)"
            );
        }
    }
    while !signals.stop_requested() {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Some(tenant) = serve_host_connection(stream, &signals, options, &mut reaper)
                {
                    // The first tenant of a group: gather the others, then run them together.
                    super::group::gather(tenant, &listener, &signals, options, &mut reaper);
                }
            }
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
    if let Some(signal) = signals.received.get() {
        log::info!("emu: {signal} received; shutting down");
    }
    reaper.wait();
    drop(socket_file);
    Ok(())
}

/// One host, from connection to detach; every way it can end is logged here. A host that
/// says it is a tenant of a group is returned, its hello answered and its request checked,
/// for its group's gathering.
pub(super) fn serve_host_connection(
    stream: UnixStream,
    signals: &Signals,
    options: &ServeOptions,
    reaper: &mut Reaper,
) -> Option<super::group::Member> {
    let pid = peer_pid(&stream);
    if let Err(error) = stream.set_nonblocking(false) {
        log::error!("emu: host pid {pid}: {error}");
        return None;
    }
    match session(&stream, pid, signals, options, reaper) {
        Ok(Served::Ended(summary)) => {
            log::info!("emu: host pid {pid} detached after its run ({summary})")
        }
        Ok(Served::Tenant(requested)) => {
            return Some(super::group::Member {
                stream,
                pid,
                requested: *requested,
            })
        }
        Err(error) => log_session_error(pid, &error),
    }
    None
}

/// The process id of the host at the other end of `stream` (-1 if the kernel does not say).
pub(super) fn peer_pid(stream: &UnixStream) -> i32 {
    let credentials =
        nix::sys::socket::getsockopt(&stream.as_fd(), nix::sys::socket::sockopt::PeerCredentials);
    credentials.map_or(-1, |c| c.pid())
}

/// Logs how a host's session ended badly.
pub(super) fn log_session_error(pid: i32, error: &SessionError) {
    match error {
        SessionError::HostDied(when) => log::warn!(
            "emu: host pid {pid} died {when}; its segments are being freed; ready for the next host"
        ),
        SessionError::Silent { .. } => log::warn!(
            "emu: host pid {pid}: {error}; its segments are being freed; ready for the next host"
        ),
        SessionError::AbiMismatch { .. } => log::warn!("emu: host pid {pid}: {error}"),
        SessionError::Stopped => log::info!("emu: host pid {pid} dropped: stopping"),
        error => log::error!("emu: host pid {pid} detached on an error: {error}"),
    }
}
