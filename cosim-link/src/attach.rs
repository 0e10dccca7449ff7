//! Attaching to an emulator process: the handshake over its Unix socket and its messages.
//!
//! What a kernel driver's probe does for a real device (check the identity, map the register
//! window and the memory, set up DMA memory), done against `axle emu`. This module is the
//! protocol both sides speak; the host's side of it is `host_driver::attachment`, the
//! emulator's is `emulator::server`.
//!
//! 1. The host connects and sends a fixed-size [`Hello`]: [`shared_abi::ABI_MAGIC`],
//!    [`shared_abi::ABI_VERSION`], [`shared_abi::LAYOUT_HASH`] and its process id. The
//!    emulator answers with a [`HelloAnswer`] carrying its own identity and
//!    [`Status::Ok`] or [`Status::AbiMismatch`]; on a mismatch both sides say which versions
//!    disagree, and the emulator closes the connection.
//! 2. The host creates its physical memory as an anonymous sealed segment
//!    ([`crate::shm::MappedWords`]) and sends it with a [`SessionRequest`] (SCM_RIGHTS); the
//!    emulator maps it, creates device memory and the turn page, and sends both back with a
//!    [`SessionReady`] that also announces the device's data window and its device epoch
//!    ([`shared_abi::registers::EPOCH`], which the register window must read too). The host sends its
//!    request right behind its hello, without waiting for the answer; an emulator that finds
//!    the request already waiting sends the answer with the [`SessionReady`], so each side
//!    wakes once for the two steps (a host that waits for the answer first is answered at
//!    once). The answer always comes before a refusal of the request.
//! 3. The host loads its data set into the device memory segment (untimed set-up), then
//!    the run goes turn by turn over the turn page ([`crate::turn::serve_host`]).
//! 4. When `Emulator::run` returns, the emulator sends a [`SessionEnd`] with the outcome and
//!    the device's counters, then marks the page finished (so the host, woken by the flag,
//!    finds the outcome waiting); the host closes.
//!
//! Control messages after the hello are framed as `kind: u32, length: u32` (little-endian)
//! and a JSON body, with descriptors attached to the first byte. A dead peer (socket
//! end-of-file) ends the attach on either side with a clear error; the emulator then frees the
//! host's segments and accepts the next host.

use crate::shm::{receive_with_fds, send_with_fds, SegmentError};
use crate::turn::TurnError;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use shared_abi::{Status, ABI_MAGIC, ABI_VERSION, LAYOUT_HASH};
use std::io::Read;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// The host's first message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct Hello {
    /// [`ABI_MAGIC`].
    pub magic: u64,
    /// [`LAYOUT_HASH`] of the host's build.
    pub layout_hash: u64,
    /// [`ABI_VERSION`] of the host's build.
    pub version: u32,
    /// The host's process id (for the emulator's log).
    pub pid: u32,
}

/// The emulator's answer to a [`Hello`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct HelloAnswer {
    /// [`ABI_MAGIC`].
    pub magic: u64,
    /// [`LAYOUT_HASH`] of the emulator's build.
    pub layout_hash: u64,
    /// [`ABI_VERSION`] of the emulator's build.
    pub version: u32,
    /// [`Status::Ok`] (accepted) or [`Status::AbiMismatch`] (refused), as its code.
    pub status: u32,
}

const _: () = assert!(size_of::<Hello>() == 24);
const _: () = assert!(core::mem::offset_of!(Hello, version) == 16);
const _: () = assert!(core::mem::offset_of!(Hello, pid) == 20);
const _: () = assert!(size_of::<HelloAnswer>() == 24);
const _: () = assert!(core::mem::offset_of!(HelloAnswer, status) == 20);

impl Hello {
    /// This build's hello, claiming ABI version `version` (normally [`ABI_VERSION`]).
    pub fn new(version: u32) -> Hello {
        Hello {
            magic: ABI_MAGIC,
            layout_hash: LAYOUT_HASH,
            version,
            pid: std::process::id(),
        }
    }

    /// Whether this build can talk to the sender.
    pub fn compatible(&self) -> bool {
        self.magic == ABI_MAGIC && self.version == ABI_VERSION && self.layout_hash == LAYOUT_HASH
    }
}

impl HelloAnswer {
    /// This build's answer with `status`.
    pub fn new(status: Status) -> HelloAnswer {
        HelloAnswer {
            magic: ABI_MAGIC,
            layout_hash: LAYOUT_HASH,
            version: ABI_VERSION,
            status: status.code(),
        }
    }
}

/// The host's session request (sent with its physical-memory segment).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRequest {
    /// Bytes of the host physical-memory segment.
    pub host_memory_bytes: u64,
    /// The device set-up, as the emulator defines it (JSON).
    pub device_setup: String,
    /// The version of the turn's messages the host speaks ([`crate::turn::PROTOCOL`]); a
    /// host from before the field speaks version 1.
    #[serde(default = "first_turn_protocol")]
    pub turn_protocol: u32,
    /// The host is one tenant of a group sharing one device (`axle emu --max-tenants`);
    /// absent: a one-host session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<TenantClaim>,
}

/// What a host says when it is one tenant of a group sharing one device: "I am tenant
/// `index` of the `count` tenants of group `group`". The emulator gathers the group's
/// sessions and starts their run when all `count` have attached; the tenants' order at equal
/// virtual times is their index, whatever order they attached in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantClaim {
    /// The group's name: every tenant of a group names it alike (at most
    /// [`MAX_GROUP_NAME`] bytes of ASCII letters, digits, `-`, `_` and `.`).
    pub group: String,
    /// This host's tenant index, `0..count`.
    pub index: u32,
    /// Tenants in the group.
    pub count: u32,
    /// The CCM's share policy: one weight per tenant (weighted shares), or none
    /// (round-robin). Every tenant of a group says the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<Vec<u32>>,
}

/// Longest group name of a [`TenantClaim`], in bytes.
pub const MAX_GROUP_NAME: usize = 64;

impl TenantClaim {
    /// Checks the name's length and characters (the count and index are checked by the
    /// emulator against its own limit).
    pub fn check_name(&self) -> Result<(), String> {
        if self.group.is_empty() || self.group.len() > MAX_GROUP_NAME {
            return Err(format!(
                "group name of {} bytes: it must have 1 to {MAX_GROUP_NAME}",
                self.group.len()
            ));
        }
        if let Some(bad) = self
            .group
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        {
            return Err(format!(
                "group name has {bad:?}: only ASCII letters, digits, '-', '_' and '.' are allowed"
            ));
        }
        Ok(())
    }
}

/// The turn protocol of a host that does not say.
fn first_turn_protocol() -> u32 {
    1
}

/// The emulator's answer to a [`SessionRequest`] (sent with the device-memory segment and the
/// turn page, in that order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionReady {
    /// Bytes of device memory.
    pub device_memory_bytes: u64,
    /// First byte of the data window.
    pub data_base: u64,
    /// End (exclusive) of the data window.
    pub data_end: u64,
    /// Bytes of the turn page.
    pub turn_page_bytes: u64,
    /// The device epoch ([`shared_abi::registers::EPOCH`]; the register window must read
    /// the same): drawn by the emulator process at its start, so a host that attaches again
    /// after losing its emulator knows whether it found a new device. 0 (an emulator from
    /// before the field): none.
    #[serde(default)]
    pub epoch: u64,
}

/// What the device measured, as plain numbers (ticks and counts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceCounters {
    /// Ticks with a CCM µthread busy.
    pub ccm_busy: u64,
    /// Ticks with DMA writes in flight.
    pub dma_busy: u64,
    /// Ticks of back-pressure.
    pub backpressure: u64,
    /// DMA requests.
    pub dma_requests: u64,
    /// Payloads streamed.
    pub payloads: u64,
    /// Reads of the flow-control block.
    pub head_reads: u64,
    /// Interrupts raised.
    pub interrupts: u64,
    /// Ticks the device-to-host direction was busy.
    pub upstream_busy: u64,
    /// Device events the simulator processed.
    #[serde(default)]
    pub events: u64,
    /// Turns the host was given.
    #[serde(default)]
    pub host_turns: u64,
    /// Link calls the host made.
    #[serde(default)]
    pub link_calls: u64,
}

/// The end of a run, from the emulator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionEnd {
    /// Why the co-simulation failed (its message), if it did.
    pub error: Option<String>,
    /// The device's counters.
    pub device: DeviceCounters,
    /// A wall-clock run: the device's side of the end-of-run checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall: Option<WallDeviceEnd>,
    /// A tenant of a group: what the shared device measured beyond its own counters
    /// (`device` then holds the tenant's own figures, the simulator counts the whole
    /// device's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<TenantEnd>,
}

/// A tenant's share of a shared device, at the end of the group's run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantEnd {
    /// Dispatches the CCM's arbiter granted this tenant.
    pub ccm_grants: u64,
    /// Ticks this tenant's dispatches waited for the CCM.
    pub ccm_wait: u64,
    /// The whole device's counters (every tenant's).
    pub device: DeviceCounters,
}

/// What the device left behind at the end of a wall-clock run (for the host's end-of-run
/// checks), as plain numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WallDeviceEnd {
    /// Firmware: launches accepted.
    pub launches: u64,
    /// Firmware: launches refused.
    pub refused: u64,
    /// Firmware: payloads streamed.
    pub payloads: u64,
    /// Firmware: DMA requests submitted.
    pub dma_requests: u64,
    /// Firmware: reads of the heads.
    pub head_reads: u64,
    /// Firmware: ticks of back-pressure.
    pub backpressure_ticks: u64,
    /// The DMA executor has nothing in flight and no batch open.
    pub streaming_idle: bool,
    /// The executor waits for ring credit.
    pub waiting_for_credit: bool,
    /// The status code the firmware latched the ring BROKEN with, if it did.
    pub broken: Option<u32>,
    /// The executor's metadata and payload tails.
    pub stream_tails: (u64, u64),
    /// The device's clock at the end, in ticks.
    pub device_time: u64,
}

/// A control message's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum MessageKind {
    /// [`SessionRequest`].
    Session = 1,
    /// [`SessionReady`].
    Ready = 2,
    /// [`SessionEnd`].
    End = 3,
    /// The emulator refused the session; the body is the reason (a JSON string).
    Refused = 4,
}

/// Longest control message body.
const MAX_MESSAGE: u32 = 1 << 20;

/// How long the host waits for the emulator during attach (it may be serving another host).
pub const ATTACH_TIMEOUT: Duration = Duration::from_secs(120);

/// What to do when the emulator's socket cannot be reached.
fn connect_advice(error: &std::io::Error) -> &'static str {
    match error.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
            " (is an emulator serving there? start one with `axle emu --socket PATH`)"
        }
        std::io::ErrorKind::PermissionDenied => {
            " (the socket is mode 0600: attach as the user who started `axle emu`)"
        }
        _ => "",
    }
}

/// Attaching, or a run after it, failed.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// The socket could not be reached.
    #[error(
        "cannot connect to the emulator at {}: {error}{}",
        .path.display(),
        connect_advice(error)
    )]
    Connect {
        /// The socket path.
        path: PathBuf,
        /// Why (in the message, not a separate cause, so it is said once).
        error: std::io::Error,
    },
    /// The peer did not answer within the socket's read timeout.
    #[error("no answer within {} s while waiting for {waiting_for}: {advice}", .after.as_secs())]
    TimedOut {
        /// What was awaited.
        waiting_for: String,
        /// How long.
        after: Duration,
        /// What to do about it.
        advice: &'static str,
    },
    /// The emulator refused the host's ABI.
    #[error("emulator speaks ABI version {emulator_version}, this host {host_version} (layout hashes {emulator_hash:#018x} and {host_hash:#018x}): attach refused")]
    AbiMismatch {
        /// The emulator's version.
        emulator_version: u32,
        /// The host's version.
        host_version: u32,
        /// The emulator's layout hash.
        emulator_hash: u64,
        /// The host's layout hash.
        host_hash: u64,
    },
    /// The emulator refused the session.
    #[error("the emulator refused the session: {0}")]
    Refused(String),
    /// The emulator process died (or closed the connection) before the run ended.
    #[error("emulator process died (its socket closed) {0}")]
    EmulatorDied(&'static str),
    /// The host process died (or closed the connection).
    #[error("host process died (its socket closed) {0}")]
    HostDied(&'static str),
    /// A control message broke the protocol.
    #[error("attach protocol violation: {0}")]
    Protocol(String),
    /// A segment could not be created or mapped.
    #[error(transparent)]
    Segment(#[from] SegmentError),
    /// The turn failed.
    #[error(transparent)]
    Turn(#[from] TurnError),
    /// The socket failed.
    #[error("socket: {0}")]
    Io(std::io::Error),
}

impl From<std::io::Error> for AttachError {
    // Not `#[from]`: that would make the error the cause as well as part of the message, and
    // `{:#}` would print it twice.
    fn from(error: std::io::Error) -> Self {
        AttachError::Io(error)
    }
}

/// What a host waiting on the emulator should do when it does not answer.
pub const EMULATOR_SILENT: &str =
    "the emulator serves one host at a time and may be busy with another \
    (it detaches a host that holds its turn longer than its --turn-timeout); try again later, or \
    start another emulator with `axle emu --socket OTHER_PATH`";

/// What an emulator waiting on a silent host does.
pub const HOST_SILENT: &str =
    "the host is detached; a host must send each attach message promptly once connected";

impl AttachError {
    /// `error`, as a [`AttachError::TimedOut`] when it is a read timeout on `socket` (whose
    /// timeout says how long the wait was) while waiting for `waiting_for`.
    pub fn from_io(
        error: std::io::Error,
        socket: &UnixStream,
        waiting_for: impl FnOnce() -> String,
        advice: &'static str,
    ) -> AttachError {
        if matches!(
            error.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ) {
            AttachError::TimedOut {
                waiting_for: waiting_for(),
                after: socket.read_timeout().ok().flatten().unwrap_or_default(),
                advice,
            }
        } else {
            AttachError::Io(error)
        }
    }
}

/// Sends a control message of `kind` with `body` and `fds`.
pub fn send_message<T: Serialize>(
    socket: &UnixStream,
    kind: MessageKind,
    body: &T,
    fds: &[BorrowedFd<'_>],
) -> Result<(), AttachError> {
    let body = serde_json::to_vec(body).map_err(|e| AttachError::Protocol(e.to_string()))?;
    let length = u32::try_from(body.len())
        .ok()
        .filter(|&length| length <= MAX_MESSAGE)
        .ok_or_else(|| AttachError::Protocol("control message too long".into()))?;
    let mut header = [0u8; 8];
    header[..4].copy_from_slice(&(kind as u32).to_le_bytes());
    header[4..].copy_from_slice(&length.to_le_bytes());
    send_with_fds(socket, &[&header, &body], fds)?;
    Ok(())
}

/// Receives a control message; it must be of kind `expected` (or [`MessageKind::Refused`],
/// which becomes [`AttachError::Refused`]) and carry exactly `fds` descriptors. `closed` is
/// the error for a peer that closed the connection instead.
pub fn receive_message<T: DeserializeOwned>(
    socket: &UnixStream,
    expected: MessageKind,
    fds: usize,
    closed: AttachError,
) -> Result<(T, Vec<OwnedFd>), AttachError> {
    receive_message_with(socket, expected, fds..=fds, closed)
}

/// [`receive_message`], accepting any number of descriptors in `fds`.
pub fn receive_message_with<T: DeserializeOwned>(
    socket: &UnixStream,
    expected: MessageKind,
    fds: std::ops::RangeInclusive<usize>,
    closed: AttachError,
) -> Result<(T, Vec<OwnedFd>), AttachError> {
    let advice = match closed {
        AttachError::HostDied(_) => HOST_SILENT,
        _ => EMULATOR_SILENT,
    };
    let waiting_for = || format!("the {expected:?} message");
    let failed = |error: std::io::Error| -> AttachError {
        match error.kind() {
            std::io::ErrorKind::UnexpectedEof => {
                AttachError::Protocol("connection closed inside a message".into())
            }
            // Descriptors refused by `receive_with_fds` (all of them closed).
            std::io::ErrorKind::InvalidData => {
                AttachError::Protocol(format!("{expected:?} message: {error}"))
            }
            _ => AttachError::from_io(error, socket, waiting_for, advice),
        }
    };
    let mut header = [0u8; 8];
    let (received, descriptors) =
        receive_with_fds(socket, &mut header, *fds.end()).map_err(failed)?;
    if received == 0 {
        return Err(closed);
    }
    let mut reader = socket;
    if received < header.len() {
        reader.read_exact(&mut header[received..]).map_err(failed)?;
    }
    let kind = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let length = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if length > MAX_MESSAGE {
        return Err(AttachError::Protocol(format!(
            "control message of {length} bytes"
        )));
    }
    // Bounded by MAX_MESSAGE (1 MiB) just above.
    let mut body = vec![0u8; length as usize];
    reader.read_exact(&mut body).map_err(failed)?;
    if kind == MessageKind::Refused as u32 {
        let reason: String = serde_json::from_slice(&body).unwrap_or_else(|_| "?".into());
        return Err(AttachError::Refused(reason));
    }
    if kind != expected as u32 {
        return Err(AttachError::Protocol(format!(
            "expected message {expected:?}, got kind {kind}"
        )));
    }
    if !fds.contains(&descriptors.len()) {
        let wanted = if fds.start() == fds.end() {
            fds.start().to_string()
        } else {
            format!("{} to {}", fds.start(), fds.end())
        };
        return Err(AttachError::Protocol(format!(
            "the {expected:?} message carried {} descriptors where {wanted} were expected; all were closed",
            descriptors.len()
        )));
    }
    let value = serde_json::from_slice(&body)
        .map_err(|e| AttachError::Protocol(format!("{expected:?}: {e}")))?;
    Ok((value, descriptors))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shm::MappedWords;

    #[test]
    fn this_builds_hello_is_compatible_and_another_version_is_not() {
        assert!(Hello::new(ABI_VERSION).compatible());
        assert!(!Hello::new(ABI_VERSION + 1).compatible());
    }

    #[test]
    fn control_messages_carry_their_body_and_descriptors() {
        let (left, right) = UnixStream::pair().unwrap();
        let (_, fd) = MappedWords::create("axle-test", 4096).unwrap();
        let ready = SessionReady {
            device_memory_bytes: 1,
            data_base: 2,
            data_end: 3,
            turn_page_bytes: 4,
            epoch: 5,
        };
        send_message(
            &left,
            MessageKind::Ready,
            &ready,
            &[std::os::fd::AsFd::as_fd(&fd)],
        )
        .unwrap();
        send_message(&left, MessageKind::Refused, &"busy", &[]).unwrap();
        let (back, fds): (SessionReady, _) = receive_message(
            &right,
            MessageKind::Ready,
            1,
            AttachError::EmulatorDied("test"),
        )
        .unwrap();
        assert_eq!((back, fds.len()), (ready, 1));
        let refused = receive_message::<SessionReady>(
            &right,
            MessageKind::Ready,
            0,
            AttachError::EmulatorDied("test"),
        );
        assert!(matches!(refused, Err(AttachError::Refused(reason)) if reason == "busy"));
        drop(left);
        let closed = receive_message::<SessionReady>(
            &right,
            MessageKind::Ready,
            0,
            AttachError::EmulatorDied("test"),
        );
        assert!(matches!(closed, Err(AttachError::EmulatorDied(_))));
    }

    #[test]
    fn a_silent_emulator_is_a_timeout_that_says_what_to_do_not_an_os_error() {
        let (left, _right) = UnixStream::pair().unwrap();
        left.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let error = receive_message::<SessionReady>(
            &left,
            MessageKind::Ready,
            3,
            AttachError::EmulatorDied("test"),
        )
        .unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, AttachError::TimedOut { .. }), "{message}");
        assert!(
            message.contains("while waiting for the Ready message")
                && message.contains("one host at a time")
                && !message.contains("Resource temporarily unavailable"),
            "{message}"
        );
    }

    #[test]
    fn a_message_with_too_many_descriptors_is_refused_and_closes_them_all() {
        // A name no other test uses: the descriptors of this process open on these memory
        // files are ours alone, whatever the tests running beside this one open and close.
        const NAME: &str = "axle-test-too-many-descriptors";
        let ours = || {
            std::fs::read_dir("/proc/self/fd")
                .unwrap()
                .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
                .filter(|target| target.to_string_lossy().contains(NAME))
                .count()
        };
        let (left, right) = UnixStream::pair().unwrap();
        let segments: Vec<_> = (0..4)
            .map(|_| MappedWords::create(NAME, 4096).unwrap().1)
            .collect();
        let fds: Vec<_> = segments.iter().map(std::os::fd::AsFd::as_fd).collect();
        send_message(&left, MessageKind::Ready, &"x", &fds).unwrap();
        let error = receive_message::<String>(
            &right,
            MessageKind::Ready,
            2,
            AttachError::EmulatorDied("test"),
        )
        .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("sent 4 descriptors where at most 2"),
            "{error}"
        );
        // Every descriptor that arrived was closed again: only the sender's four are open.
        assert_eq!(ours(), segments.len());
    }

    #[test]
    fn io_errors_are_said_once_in_an_error_chain() {
        let error = AttachError::Connect {
            path: PathBuf::from("/nowhere"),
            error: std::io::Error::from_raw_os_error(nix::libc::ENOENT),
        };
        assert!(std::error::Error::source(&error).is_none());
        assert!(
            std::error::Error::source(&AttachError::from(std::io::Error::other("x"))).is_none()
        );
    }
}
