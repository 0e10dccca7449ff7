//! Wall-clock mode across processes (`axle run W --clock wall --attach PATH`): the channels of
//! [`crate::wall`] carried over the session's Unix socket.
//!
//! The attach is unchanged ([`crate::attach`]); the host also sends an eventfd with its
//! [`crate::attach::SessionRequest`] (the interrupt line). Then, instead of the turn page:
//!
//! 1. the host sends a [`WALL_START`] frame with its start instant, a `CLOCK_MONOTONIC`
//!    nanosecond value ([`monotonic_now_ns`]); both sides build their [`WallClock`] from it
//!    ([`WallClock::from_monotonic_ns`]), so a tick means the same instant on both sides;
//! 2. both sides run the unchanged loops of the in-process wall-clock mode, the device
//!    `Emulator::run_wall` and the host [`crate::wall::serve_host`], over the same
//!    [`DevicePort`] and [`HostPort`] channels; on each side one reader thread feeds the
//!    channel from the socket and one writer thread drains the other channel into it;
//! 3. host turns travel as [`WALL_TURN`] frames (the responses the host had taken, then the
//!    turn as [`crate::turn::RecordingLink`] encodes it); responses as [`WALL_RESPONSE`]
//!    frames (one or more deliveries as [`crate::turn::DeviceTurn`] encodes them); a device
//!    error as a [`WALL_ENDED`] frame (its message). The device writes the eventfd once per
//!    interrupt it delivers, after the frame that carries it; the host's reader thread waits
//!    on the socket and the eventfd together and counts the signals;
//! 4. the run ends as an attached run does: the emulator sends its
//!    [`crate::attach::SessionEnd`] (kind `End`) and the host closes.
//!
//! Frames have the control messages' header (`kind: u32, length: u32`, little-endian).
//! A host that stops sending (done, failed or dead) shuts its writing side down; the device's
//! reader sees end-of-file and the device loop sees the host gone.

use crate::attach::{AttachError, MessageKind, SessionEnd};
use crate::link::LinkResponse;
use crate::turn::{decode_device_turn, DeviceTurn};
use crate::wall::{ports, DevicePort, HostPort, HostTurn, ToHost, WallClock};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::eventfd::EventFd;
use shared_abi::Ticks;
use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Frame kind: the host's start instant (`u64`, `CLOCK_MONOTONIC` nanoseconds).
pub const WALL_START: u32 = 5;
/// Frame kind: a host turn.
pub const WALL_TURN: u32 = 6;
/// Frame kind: responses for the host.
pub const WALL_RESPONSE: u32 = 7;
/// Frame kind: the device ended the run with an error (its message, UTF-8).
pub const WALL_ENDED: u32 = 8;

/// Longest frame body.
const MAX_FRAME: u32 = 1 << 30;
/// How often a reader thread looks at its stop flag.
const READER_PERIOD: Duration = Duration::from_millis(5);

/// The current `CLOCK_MONOTONIC` time in nanoseconds (the clock `Instant` reads on Linux).
pub fn monotonic_now_ns() -> u64 {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC is always available");
    (now.tv_sec() as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(now.tv_nsec() as u64)
}

impl WallClock {
    /// A clock whose time zero is the `CLOCK_MONOTONIC` instant `start_ns` (possibly taken in
    /// another process on this machine).
    pub fn from_monotonic_ns(start_ns: u64) -> WallClock {
        let here = std::time::Instant::now();
        let since = Duration::from_nanos(monotonic_now_ns().saturating_sub(start_ns));
        WallClock::starting_at(here.checked_sub(since).unwrap_or(here))
    }
}

/// Writes one frame.
pub fn write_frame(mut socket: &UnixStream, kind: u32, body: &[u8]) -> std::io::Result<()> {
    let length = u32::try_from(body.len())
        .ok()
        .filter(|&length| length <= MAX_FRAME)
        .ok_or_else(|| std::io::Error::other("frame too long"))?;
    let mut frame = Vec::with_capacity(body.len() + 8);
    frame.extend_from_slice(&kind.to_le_bytes());
    frame.extend_from_slice(&length.to_le_bytes());
    frame.extend_from_slice(body);
    socket.write_all(&frame)
}

/// Reads one frame; `None` at end-of-file before its first byte.
pub fn read_frame(mut socket: &UnixStream) -> std::io::Result<Option<(u32, Vec<u8>)>> {
    let mut header = [0u8; 8];
    let mut got = 0;
    while got < header.len() {
        match socket.read(&mut header[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    let kind = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let length = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if length > MAX_FRAME {
        return Err(std::io::Error::other(format!("frame of {length} bytes")));
    }
    // At most MAX_FRAME, and within the machine's memory.
    let mut body = crate::limits::vec_filled("a frame's length", u64::from(length), 0u8)
        .map_err(|refused| std::io::Error::new(ErrorKind::InvalidData, refused.to_string()))?;
    socket.read_exact(&mut body)?;
    Ok(Some((kind, body)))
}

/// Sends the host's start instant.
pub fn send_start(socket: &UnixStream, start_ns: u64) -> std::io::Result<()> {
    write_frame(socket, WALL_START, &start_ns.to_le_bytes())
}

/// Receives the host's start instant.
pub fn receive_start(socket: &UnixStream) -> Result<u64, AttachError> {
    match read_frame(socket) {
        Ok(Some((WALL_START, body))) => {
            let bytes: [u8; 8] = body
                .try_into()
                .map_err(|_| AttachError::Protocol("malformed start frame".into()))?;
            Ok(u64::from_le_bytes(bytes))
        }
        Ok(Some((kind, _))) => Err(AttachError::Protocol(format!(
            "expected the start frame, got kind {kind}"
        ))),
        Ok(None) => Err(AttachError::HostDied("before the wall-clock run started")),
        Err(error) => Err(error.into()),
    }
}

/// Whether `fd` is readable within [`READER_PERIOD`]; the second value for `extra`.
fn readable(fd: &UnixStream, extra: Option<BorrowedFd<'_>>) -> std::io::Result<(bool, bool)> {
    let mut fds = vec![PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    if let Some(extra) = extra {
        fds.push(PollFd::new(extra, PollFlags::POLLIN));
    }
    let timeout = PollTimeout::try_from(READER_PERIOD).unwrap_or(PollTimeout::NONE);
    match poll(&mut fds, timeout) {
        Ok(_) => {}
        Err(nix::errno::Errno::EINTR) => return Ok((false, false)),
        Err(errno) => return Err(errno.into()),
    }
    let ready = |fd: &PollFd<'_>| {
        fd.revents().is_some_and(|r| {
            r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR)
        })
    };
    Ok((ready(&fds[0]), fds.get(1).is_some_and(ready)))
}

/// How the device side's reader thread ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceReaderEnd {
    /// Told to stop.
    Stopped,
    /// The host closed its side (done, failed, or dead).
    HostClosed,
    /// The wake descriptor (the emulator's signals) became readable.
    Woken,
    /// The socket failed or carried something malformed.
    Failed(String),
    /// The host sent nothing for longer than the idle timeout ([`device_side`]).
    TimedOut(Duration),
}

/// The device side's threads.
#[derive(Debug)]
pub struct DeviceTransport {
    stop: Arc<AtomicBool>,
    reader: JoinHandle<DeviceReaderEnd>,
    writer: JoinHandle<std::io::Result<u64>>,
}

impl DeviceTransport {
    /// Waits for the writer thread, which ends once the [`DevicePort`] is dropped and every
    /// response is on the socket; returns the interrupts it signalled on the eventfd (or why
    /// it could not write), and the reader thread, still running.
    pub fn finish_writing(self) -> (std::io::Result<u64>, DeviceReader) {
        let written = self
            .writer
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("writer thread panicked")));
        (
            written,
            DeviceReader {
                stop: self.stop,
                reader: self.reader,
            },
        )
    }
}

/// The device side's reader thread.
#[derive(Debug)]
pub struct DeviceReader {
    stop: Arc<AtomicBool>,
    reader: JoinHandle<DeviceReaderEnd>,
}

impl DeviceReader {
    /// Whether the reader thread has ended (the host closed, went silent, or broke a frame).
    pub fn ended(&self) -> bool {
        self.reader.is_finished()
    }

    /// Stops the reader thread and says how it ended.
    pub fn stop(self) -> DeviceReaderEnd {
        self.stop.store(true, Ordering::Relaxed);
        self.reader
            .join()
            .unwrap_or_else(|_| DeviceReaderEnd::Failed("reader thread panicked".into()))
    }
}

/// The device side of a wall-clock run over `socket`: the port `Emulator::run_wall` takes,
/// and its threads. `interrupts` is the host's eventfd; `wake`, when readable, ends the
/// reader (the device loop then sees the host gone); so does a host that sends no frame for
/// `idle_timeout` (the emulator's turn timeout), with [`DeviceReaderEnd::TimedOut`].
pub fn device_side(
    socket: &UnixStream,
    interrupts: OwnedFd,
    wake: Option<OwnedFd>,
    idle_timeout: Option<Duration>,
) -> std::io::Result<(DevicePort, DeviceTransport)> {
    let (host_port, device_port) = ports();
    let HostPort {
        to_device,
        from_device,
    } = host_port;
    let stop = Arc::new(AtomicBool::new(false));
    let reader_socket = socket.try_clone()?;
    // A frame, once begun, must arrive whole within the idle timeout: a host that sends half
    // a frame and stops must not hold the reader (and the emulator) in a blocking read.
    reader_socket.set_read_timeout(idle_timeout)?;
    let reader_stop = Arc::clone(&stop);
    let reader = std::thread::Builder::new()
        .name("axle-wall-read".into())
        .spawn(move || {
            device_reader(&reader_socket, to_device, wake, idle_timeout, &reader_stop)
        })?;
    let writer_socket = socket.try_clone()?;
    let interrupts = std::fs::File::from(interrupts);
    let writer = std::thread::Builder::new()
        .name("axle-wall-write".into())
        .spawn(move || device_writer(&writer_socket, &from_device, &interrupts))?;
    Ok((
        device_port,
        DeviceTransport {
            stop,
            reader,
            writer,
        },
    ))
}

fn device_reader(
    socket: &UnixStream,
    to_device: Sender<HostTurn>,
    wake: Option<OwnedFd>,
    idle_timeout: Option<Duration>,
    stop: &AtomicBool,
) -> DeviceReaderEnd {
    let mut to_device = Some(to_device);
    let mut last_frame = std::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let (socket_ready, woken) = match readable(socket, wake.as_ref().map(AsFd::as_fd)) {
            Ok(ready) => ready,
            Err(error) => return DeviceReaderEnd::Failed(error.to_string()),
        };
        if woken {
            return DeviceReaderEnd::Woken;
        }
        if !socket_ready {
            if let Some(after) = idle_timeout.filter(|&after| last_frame.elapsed() > after) {
                return DeviceReaderEnd::TimedOut(after);
            }
            continue;
        }
        last_frame = std::time::Instant::now();
        match read_frame(socket) {
            Ok(None) => return DeviceReaderEnd::HostClosed,
            Ok(Some((WALL_TURN, body))) if body.len() >= 8 => {
                let mut delivered = [0u8; 8];
                delivered.copy_from_slice(&body[..8]);
                let turn = HostTurn {
                    delivered: u64::from_le_bytes(delivered),
                    message: body[8..].to_vec(),
                };
                // A device loop that has ended takes no more turns.
                if let Some(sender) = to_device.as_ref() {
                    if sender.send(turn).is_err() {
                        to_device = None;
                    }
                }
            }
            Ok(Some((kind, _))) => {
                return DeviceReaderEnd::Failed(format!("unexpected frame kind {kind}"))
            }
            Err(error)
                if matches!(
                    error.kind(),
                    ErrorKind::ConnectionReset | ErrorKind::UnexpectedEof
                ) =>
            {
                return DeviceReaderEnd::HostClosed
            }
            Err(error) => return DeviceReaderEnd::Failed(error.to_string()),
        }
    }
    DeviceReaderEnd::Stopped
}

fn device_writer(
    socket: &UnixStream,
    from_device: &Receiver<ToHost>,
    interrupts: &std::fs::File,
) -> std::io::Result<u64> {
    let mut signalled = 0u64;
    let mut signal = |count: u64| -> std::io::Result<()> {
        if count > 0 {
            let mut line = interrupts;
            line.write_all(&count.to_ne_bytes())?;
            signalled += count;
        }
        Ok(())
    };
    while let Ok(first) = from_device.recv() {
        let mut batch = DeviceTurn::default();
        let mut raised = 0u64;
        let mut next = Some(first);
        while let Some(message) = next.take() {
            match message {
                ToHost::Response { at, response } => {
                    raised += u64::from(matches!(response, LinkResponse::Interrupt { .. }));
                    batch.deliver(at, &response);
                }
                ToHost::Ended(error) => {
                    write_frame(socket, WALL_RESPONSE, &batch.take(Ticks::ZERO))?;
                    signal(std::mem::take(&mut raised))?;
                    write_frame(socket, WALL_ENDED, error.as_bytes())?;
                }
            }
            next = from_device.try_recv().ok();
        }
        write_frame(socket, WALL_RESPONSE, &batch.take(Ticks::ZERO))?;
        signal(raised)?;
    }
    Ok(signalled)
}

/// The host side's threads.
#[derive(Debug)]
pub struct HostTransport {
    socket: UnixStream,
    stop: Arc<AtomicBool>,
    reader: JoinHandle<Result<(SessionEnd, u64), AttachError>>,
    writer: JoinHandle<()>,
}

impl HostTransport {
    /// After the host loop returned (its [`HostPort`] dropped): waits until every turn is on
    /// the socket, closes the host's sending side, and waits for the emulator's
    /// [`SessionEnd`]. Returns it with the number of interrupts signalled on the eventfd.
    pub fn finish(self) -> Result<(SessionEnd, u64), AttachError> {
        let _ = self.writer.join();
        let _ = self.socket.shutdown(Shutdown::Write);
        let outcome = self
            .reader
            .join()
            .unwrap_or_else(|_| Err(AttachError::Protocol("reader thread panicked".into())));
        self.stop.store(true, Ordering::Relaxed);
        outcome
    }
}

/// The host side of a wall-clock run over `socket`: the port [`crate::wall::serve_host`]
/// takes, and its threads. `interrupts` is the eventfd the emulator writes per interrupt.
pub fn host_side(
    socket: &UnixStream,
    interrupts: EventFd,
) -> std::io::Result<(HostPort, HostTransport)> {
    let (host_port, device_port) = ports();
    let DevicePort { from_host, to_host } = device_port;
    let stop = Arc::new(AtomicBool::new(false));
    let reader_socket = socket.try_clone()?;
    let reader_stop = Arc::clone(&stop);
    let reader = std::thread::Builder::new()
        .name("axle-wall-read".into())
        .spawn(move || host_reader(&reader_socket, &to_host, interrupts, &reader_stop))?;
    let writer_socket = socket.try_clone()?;
    let writer = std::thread::Builder::new()
        .name("axle-wall-write".into())
        .spawn(move || {
            for turn in from_host.iter() {
                let mut body = Vec::with_capacity(turn.message.len() + 8);
                body.extend_from_slice(&turn.delivered.to_le_bytes());
                body.extend_from_slice(&turn.message);
                if write_frame(&writer_socket, WALL_TURN, &body).is_err() {
                    break;
                }
            }
            // No more turns: the device loop sees the host gone (or done).
            let _ = writer_socket.shutdown(Shutdown::Write);
        })?;
    Ok((
        host_port,
        HostTransport {
            socket: socket.try_clone()?,
            stop,
            reader,
            writer,
        },
    ))
}

fn host_reader(
    socket: &UnixStream,
    to_host: &Sender<ToHost>,
    interrupts: EventFd,
    stop: &AtomicBool,
) -> Result<(SessionEnd, u64), AttachError> {
    let mut signalled = 0u64;
    let take_signals = |line: &EventFd, signalled: &mut u64| {
        // Non-blocking: fails with EAGAIN when nothing was signalled.
        if let Ok(count) = line.read() {
            *signalled += count;
        }
    };
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(AttachError::Protocol("stopped before the outcome".into()));
        }
        let (socket_ready, signal) =
            readable(socket, Some(interrupts.as_fd())).map_err(AttachError::Io)?;
        if signal {
            take_signals(&interrupts, &mut signalled);
        }
        if !socket_ready {
            continue;
        }
        match read_frame(socket) {
            Ok(None) => return Err(AttachError::EmulatorDied("during the run")),
            Ok(Some((WALL_RESPONSE, body))) => {
                let (_, deliveries) = decode_device_turn(&body)?;
                for (at, response) in deliveries {
                    // A host loop that has ended takes no more responses.
                    let _ = to_host.send(ToHost::Response { at, response });
                }
            }
            Ok(Some((WALL_ENDED, body))) => {
                let _ = to_host.send(ToHost::Ended(String::from_utf8_lossy(&body).into()));
            }
            Ok(Some((kind, body))) if kind == MessageKind::End as u32 => {
                let end: SessionEnd = serde_json::from_slice(&body)
                    .map_err(|e| AttachError::Protocol(format!("End: {e}")))?;
                // Every signal was written before the outcome was sent.
                take_signals(&interrupts, &mut signalled);
                return Ok((end, signalled));
            }
            Ok(Some((kind, _))) => {
                return Err(AttachError::Protocol(format!(
                    "unexpected frame kind {kind} during a wall-clock run"
                )))
            }
            Err(error)
                if matches!(
                    error.kind(),
                    ErrorKind::ConnectionReset | ErrorKind::UnexpectedEof
                ) =>
            {
                return Err(AttachError::EmulatorDied("during the run"))
            }
            Err(error) => return Err(error.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attach::{send_message, DeviceCounters};
    use std::time::Instant;

    #[test]
    fn clocks_built_from_one_monotonic_start_agree() {
        let start = monotonic_now_ns();
        let here = WallClock::from_monotonic_ns(start);
        std::thread::sleep(Duration::from_millis(2));
        let there = WallClock::from_monotonic_ns(start);
        let (a, b) = (here.now(), there.now());
        let apart = a.0.abs_diff(b.0);
        assert!(apart < Ticks::from_ns(1_000_000).0, "{a:?} vs {b:?}");
        assert!(b >= Ticks::from_ns(2_000_000));
    }

    #[test]
    fn turns_responses_interrupts_and_the_outcome_cross_the_socket() {
        let (host_socket, device_socket) = UnixStream::pair().unwrap();
        let line = EventFd::from_flags(
            nix::sys::eventfd::EfdFlags::EFD_CLOEXEC | nix::sys::eventfd::EfdFlags::EFD_NONBLOCK,
        )
        .unwrap();
        let device_line = line.as_fd().try_clone_to_owned().unwrap();
        let (device_port, device) = device_side(&device_socket, device_line, None, None).unwrap();
        let (host_port, host) = host_side(&host_socket, line).unwrap();
        host_port
            .to_device
            .send(HostTurn {
                delivered: 3,
                message: vec![1, 2, 3],
            })
            .unwrap();
        let turn = loop {
            if let Some(turn) = device_port
                .wait(Instant::now() + Duration::from_secs(5))
                .unwrap()
            {
                break turn;
            }
        };
        assert_eq!((turn.delivered, turn.message), (3, vec![1, 2, 3]));
        device_port
            .respond(Ticks(7), LinkResponse::Interrupt { message: 9 })
            .unwrap();
        device_port.end("deadlock".into());
        let first = host_port.from_device.recv().unwrap();
        assert_eq!(
            first,
            ToHost::Response {
                at: Ticks(7),
                response: LinkResponse::Interrupt { message: 9 }
            }
        );
        assert_eq!(
            host_port.from_device.recv().unwrap(),
            ToHost::Ended("deadlock".into())
        );
        drop(host_port);
        drop(device_port);
        let (written, reader) = device.finish_writing();
        assert_eq!(written.unwrap(), 1);
        let end = SessionEnd {
            error: None,
            device: DeviceCounters::default(),
            wall: None,
            tenant: None,
        };
        send_message(&device_socket, MessageKind::End, &end, &[]).unwrap();
        let (back, signalled) = host.finish().unwrap();
        assert_eq!((back, signalled), (end, 1));
        // The host closed its side; the reader saw it, or was stopped first.
        assert!(matches!(
            reader.stop(),
            DeviceReaderEnd::HostClosed | DeviceReaderEnd::Stopped
        ));
    }
}
