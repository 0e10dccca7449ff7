//! One host's session, from its hello to its end (steps 1 to 4 of the parent module's docs),
//! in virtual time or on the wall clock.

use super::accept::{Reaper, Signals};
use super::limits::prepare;
use super::remote_host::{Held, RemoteHost};
use super::{ServeOptions, SessionError, Setup, WallSetup, ATTACH_STEP_TIMEOUT};
use crate::cosim::{CoSimError, Emulator};
use crate::dram::DeviceDram;
use crate::shm::DeviceSegment;
use cosim_link::attach::{
    receive_message_with, send_message, AttachError, DeviceCounters, Hello, HelloAnswer,
    MessageKind, SessionEnd, SessionReady, SessionRequest, TenantClaim, WallDeviceEnd,
};
use cosim_link::phys::PhysicalMemory;
use cosim_link::sync::Arc;
use cosim_link::turn::{DeviceTurn, TurnError, TurnPage};
use cosim_link::wall::WallClock;
use cosim_link::wall_socket::{device_side, receive_start, DeviceReader, DeviceReaderEnd};
use shared_abi::{Status, Ticks};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::time::Instant;
use zerocopy::{FromZeros, IntoBytes};

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
pub(super) fn refuse(stream: &UnixStream, reason: String) -> SessionError {
    if let Err(error) = send_message(stream, MessageKind::Refused, &reason, &[]) {
        log::debug!("emu: the refusal did not reach the host: {error}");
    }
    SessionError::Refused(reason)
}

/// What a host asked for (steps 1 and 2 up to the device's creation), checked: its memory
/// mapped, its set-up, its claim to be a tenant of a group.
pub(super) struct Requested {
    pub(super) host_memory: Arc<PhysicalMemory>,
    pub(super) setup: Setup,
    pub(super) tenant: Option<TenantClaim>,
    interrupt_line: Option<std::os::fd::OwnedFd>,
}

/// What a session came to.
pub(super) enum Served {
    /// A one-host session ended after its run: its summary.
    Ended(String),
    /// The host says it is a tenant of a group: its hello is answered and its request
    /// checked; the gathering of its group takes it from here (`super::group`).
    Tenant(Box<Requested>),
}

/// Answers the host's hello with [`Status::Ok`].
pub(super) fn answer_hello(stream: &UnixStream) -> Result<(), SessionError> {
    let mut writer = stream;
    writer
        .write_all(HelloAnswer::new(Status::Ok).as_bytes())
        .map_err(|e| closed(e, "during the hello"))
}

/// Steps 1 and 2 up to the device's creation: the hello and the session request, checked.
/// Returns the request and whether the hello's answer is still owed (it is when the request
/// came right behind the hello: the answer then goes out with what follows).
pub(super) fn receive(stream: &UnixStream, pid: i32) -> Result<(Requested, bool), SessionError> {
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
    // A host of this build sends its session request right behind its hello: when it is
    // already here, the answer waits until the session is ready and both go out together, so
    // the host wakes once for the two (an older host, which waits for the answer before it
    // asks, gets the answer at once). The answer always precedes any refusal.
    let deferred = request_waiting(stream);
    if !deferred {
        answer_hello(stream)?;
    }
    match receive_request(stream) {
        Ok(requested) => Ok((requested, deferred)),
        Err(opening) => {
            if deferred {
                // A failure to receive says more than a failure to answer because of it.
                let _ = answer_hello(stream);
            }
            Err(match opening {
                Opening::Refused(reason) => refuse(stream, reason),
                Opening::Failed(error) => error,
            })
        }
    }
}

pub(super) fn session(
    stream: &UnixStream,
    pid: i32,
    signals: &Signals,
    options: &ServeOptions,
    reaper: &mut Reaper,
) -> Result<Served, SessionError> {
    let (requested, deferred) = receive(stream, pid)?;
    if requested.tenant.is_some() {
        if deferred {
            answer_hello(stream)?;
        }
        return Ok(Served::Tenant(Box::new(requested)));
    }
    let opened = open_session(requested);
    if deferred {
        let answered = answer_hello(stream);
        // A failure to set up says more than a failure to answer because of it.
        if let (Err(_), Ok(_)) = (&answered, &opened) {
            answered?;
        }
    }
    let Opened {
        mut emulator,
        page,
        page_fd,
        register_fd,
        wall,
        interrupt_line,
        limit_ns,
        device_bytes,
    } = match opened {
        Ok(opened) => opened,
        Err(Opening::Refused(reason)) => return Err(refuse(stream, reason)),
        Err(Opening::Failed(error)) => return Err(error),
    };
    send_ready(
        stream,
        &emulator,
        device_bytes,
        page_fd.as_fd(),
        register_fd.as_fd(),
    )?;
    drop(register_fd);
    drop(page_fd);
    let run = run_session(
        stream,
        pid,
        signals,
        options,
        &mut emulator,
        &page,
        RunSetup {
            wall,
            interrupt_line,
            limit_ns,
        },
    );
    // The session's memory (device memory, the host's segment, the turn page) is unmapped
    // and closed on the reaper's thread, while this thread accepts the next host.
    reaper.reap((emulator, page));
    run.map(Served::Ended)
}

/// Sends the host its session's answer: the size of `emulator`'s device memory
/// (`device_memory_bytes`), its data window, the turn page's size and the device epoch, with
/// the segments: device memory, the turn page (`page_fd`) and the register page
/// (`register_fd`). Device memory that is not shared is `Refused`; a failed send, `Attach`.
pub(super) fn send_ready(
    stream: &UnixStream,
    emulator: &Emulator,
    device_memory_bytes: u64,
    page_fd: BorrowedFd<'_>,
    register_fd: BorrowedFd<'_>,
) -> Result<(), SessionError> {
    let (data_base, data_end) = emulator.data_window();
    let device_fd = emulator
        .dram()
        .segment()
        .fd()
        .ok_or_else(|| SessionError::Refused("device memory is not shared".into()))?;
    send_message(
        stream,
        MessageKind::Ready,
        &SessionReady {
            device_memory_bytes,
            data_base: data_base.0,
            data_end: data_end.0,
            turn_page_bytes: cosim_link::turn::TURN_PAGE_BYTES,
            epoch: super::epoch::device_epoch(),
        },
        &[device_fd, page_fd, register_fd],
    )?;
    Ok(())
}

/// What the run of a session needs besides the emulator and the page.
struct RunSetup {
    wall: Option<WallSetup>,
    interrupt_line: Option<std::os::fd::OwnedFd>,
    limit_ns: u64,
}

/// Steps 3 and 4: the run, in virtual time or on the wall clock, and its outcome.
fn run_session(
    stream: &UnixStream,
    pid: i32,
    signals: &Signals,
    options: &ServeOptions,
    emulator: &mut Emulator,
    page: &TurnPage,
    setup: RunSetup,
) -> Result<String, SessionError> {
    let RunSetup {
        wall,
        interrupt_line,
        limit_ns,
    } = setup;
    stream.set_read_timeout(None)?;
    log::info!("emu: host pid {pid}: segments exchanged; the run starts");

    if let (Some(wall), Some(line)) = (wall, interrupt_line) {
        return wall_session(stream, emulator, wall, line, signals, options);
    }

    let mut host = RemoteHost {
        page: Held::Borrowed(page),
        peer: Held::Borrowed(stream),
        signals,
        pending: DeviceTurn::default(),
        turns: 0,
        hand_overs: 0,
        error: None,
        turn_timeout: options.turn_timeout,
        deadline: Instant::now().checked_add(options.session_limit),
        expired: false,
        die_after_hand_overs: options.die_after_hand_overs,
        detacher: None,
        waited: None,
        seat: None,
    };
    let outcome = emulator.run(&mut host, Ticks::from_ns(limit_ns));
    let (turns, hand_overs) = (host.turns, host.hand_overs);
    log::info!(
        "emu: host pid {pid}: {turns} turns in {hand_overs} hand-overs; the emulator's {}",
        page.wait_counts()
    );
    super::wake_up::learn(page);
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
    // The outcome goes out before the page says finished: the host, woken by the flag,
    // finds it waiting on the socket instead of sleeping a second time for it.
    let metrics = emulator.metrics();
    let sent = send_message(
        stream,
        MessageKind::End,
        &SessionEnd {
            error: outcome.as_ref().err().map(ToString::to_string),
            device: DeviceCounters::from(&metrics),
            wall: None,
            tenant: None,
        },
        &[],
    );
    page.finish();
    sent?;
    // The host closes once it has the outcome.
    stream.set_read_timeout(Some(ATTACH_STEP_TIMEOUT))?;
    let mut rest = [0u8; 64];
    let mut reader = stream;
    let _ = reader.read(&mut rest);
    Ok(match outcome {
        Ok(()) => format!(
            "{turns} turns, {} ns of virtual time",
            emulator.now().as_ns()
        ),
        Err(error) => format!("{turns} turns, the run failed: {error}"),
    })
}

/// Whether the host's next message is already waiting (a non-blocking poll of the socket).
fn request_waiting(stream: &UnixStream) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut ready = [PollFd::new(stream.as_fd(), PollFlags::POLLIN)];
    matches!(poll(&mut ready, PollTimeout::ZERO), Ok(1))
        && ready[0]
            .revents()
            .is_some_and(|events| events.contains(PollFlags::POLLIN))
}

/// A session set up for its run, before the host is told ([`open_session`]).
struct Opened {
    emulator: Emulator,
    page: TurnPage,
    page_fd: std::os::fd::OwnedFd,
    register_fd: std::os::fd::OwnedFd,
    wall: Option<WallSetup>,
    interrupt_line: Option<std::os::fd::OwnedFd>,
    limit_ns: u64,
    device_bytes: u64,
}

/// Why a session could not be set up: a refusal the host is told, or an error.
enum Opening {
    Refused(String),
    Failed(SessionError),
}

impl From<std::io::Error> for Opening {
    fn from(error: std::io::Error) -> Opening {
        Opening::Failed(error.into())
    }
}

impl From<TurnError> for Opening {
    fn from(error: TurnError) -> Opening {
        Opening::Failed(error.into())
    }
}

/// Step 2's request: receives the host's session request and its segment, checks them and
/// maps the host's memory; nothing is created for the device yet.
fn receive_request(stream: &UnixStream) -> Result<Requested, Opening> {
    // Every descriptor that arrives is owned from the moment it arrives: on any error below
    // (too many, the wrong kind, a bad size) dropping `fds` closes all of them.
    let (request, mut fds): (SessionRequest, _) = receive_message_with(
        stream,
        MessageKind::Session,
        1..=2,
        AttachError::HostDied("before its session request"),
    )
    .map_err(|error| match error {
        AttachError::HostDied(when) => Opening::Failed(SessionError::HostDied(when)),
        AttachError::TimedOut { after, .. } => Opening::Failed(SessionError::Silent {
            when: "before its session request",
            after,
        }),
        AttachError::Protocol(reason) => Opening::Refused(reason),
        other => Opening::Failed(other.into()),
    })?;
    let (host_memory, setup) =
        prepare(&request, &fds).map_err(|reason| Opening::Refused(reason.to_string()))?;
    // A wall-clock run's interrupt line (its eventfd) came second.
    let interrupt_line = if setup.wall.is_some() {
        fds.pop()
    } else {
        None
    };
    Ok(Requested {
        host_memory,
        setup,
        tenant: request.tenant,
        interrupt_line,
    })
}

/// Step 2 up to the answer: creates device memory, the turn page and the register window of
/// a one-host session.
fn open_session(requested: Requested) -> Result<Opened, Opening> {
    let Requested {
        host_memory,
        setup,
        interrupt_line,
        ..
    } = requested;
    let device_bytes = Emulator::device_memory_bytes(&setup.device);
    let segment = DeviceSegment::shared(device_bytes)?;
    let dram = DeviceDram::from_segment(segment, device_bytes);
    let (page, page_fd) = TurnPage::create()?;
    super::wake_up::seed(&page);
    let mut emulator = Emulator::with_device_memory(
        setup.device.clone(),
        host_memory,
        dram,
        setup.streaming_factor.into(),
        setup.out_of_order,
    );
    let registers = emulator.serve_registers()?;
    registers.set(shared_abi::registers::EPOCH, super::epoch::device_epoch());
    let register_fd = registers
        .fd()
        .ok_or_else(|| Opening::Refused("the register page is not shared".into()))?
        .try_clone_to_owned()?;
    Ok(Opened {
        emulator,
        page,
        page_fd,
        register_fd,
        wall: setup.wall,
        interrupt_line,
        limit_ns: setup.limit_ns,
        device_bytes,
    })
}

/// The run of a wall-clock session (`cosim_link::wall_socket`): the host's start instant,
/// then [`Emulator::run_wall`] over the socket, then the outcome.
fn wall_session(
    stream: &UnixStream,
    emulator: &mut Emulator,
    wall: WallSetup,
    interrupt_line: std::os::fd::OwnedFd,
    signals: &Signals,
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
            tenant: None,
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
        tenant: None,
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
