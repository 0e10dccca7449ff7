//! The co-simulation turn across processes: the [`HostAgent`] contract carried over a page of
//! shared memory.
//!
//! In-process the emulator calls [`HostAgent::deliver`] and [`HostAgent::turn`] directly.
//! Across processes the emulator holds a stand-in agent that writes the same calls into a
//! [`TurnPage`], and the host process runs [`serve_host`], which reads them back and makes
//! the same calls on the real agent (the host runtime). The host's link calls during its turn
//! are recorded by a [`RecordingLink`] and replayed, in order and with their time stamps, onto
//! the emulator's link. Nothing on either side can tell the difference, which is what makes a
//! multi-process run print exactly what an in-process run prints (DESIGN.md section 3).
//!
//! # The page
//!
//! Word 0 is the turn flag: [`DEVICE`] (the emulator runs), [`HOST`] (the host runs) or
//! [`FINISHED`] (the emulator ended the run; the outcome follows on the socket). Word 1 is the
//! byte length of the message in the data area, which starts at byte 128 (its own cache
//! lines). Whoever holds the turn writes the message with Relaxed word stores, then hands the
//! turn over with a Release store of the flag; the other side waits for the flag with Acquire
//! loads, and only then reads the message. Strict alternation means one data area serves both
//! directions. The segment is a sparse memfd: its large capacity costs only the pages a message
//! touches (a CXL.mem load response can carry megabytes).
//!
//! # The messages (little-endian `u64` fields, byte strings length-prefixed and padded to 8)
//!
//! - device to host: `now`, the number of deliveries, then per delivery its time and a
//!   response: `1 token status` (StoreDone), `2 token bytes` (LoadDone), `3 token value`
//!   (IoReadDone), `4 message` (Interrupt);
//! - host to device: the link calls in order: `1 now address bytes` (mem_store),
//!   `2 now address bytes token` (mem_store_synchronous), `3 now address length outstanding
//!   token` (mem_load), `4 now register value` (io_write), `5 now register token` (io_read);
//!   then `15 kind at`, the wake (`kind` 0: at, 1: on response, 2: done).
//!
//! Every decoder checks every length and code: a malformed message is a [`TurnError`], never a
//! panic or an out-of-bounds access.
//!
//! # Waiting
//!
//! The waiting side spins briefly, then yields for up to [`BUSY_WAIT`], then sleeps with a growing backoff (at most
//! [`MAX_SLEEP`]). At least every [`LIVENESS_PERIOD`] it checks that the peer is alive: a
//! non-blocking `MSG_PEEK` on the socket returns end-of-file once the peer process has died
//! (the kernel closes its descriptors), so a dead peer is noticed within milliseconds.

use crate::link::{HostAgent, Wake};
use crate::shm::{MappedWords, SegmentError};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod message;

pub use message::{
    decode_device_turn, decode_host_turn, replay_host_turn, DeviceTurn, RecordingLink,
};

/// Turn flag: the emulator holds the turn.
pub const DEVICE: u64 = 1;
/// Turn flag: the host holds the turn.
pub const HOST: u64 = 2;
/// Turn flag: the emulator ended the run.
pub const FINISHED: u64 = 3;

/// Bytes of a turn page: 128 bytes of header, the rest for messages. Sparse: only the pages a
/// message touches are ever allocated.
pub const TURN_PAGE_BYTES: u64 = 256 << 20;
/// Where the message starts.
const DATA_OFFSET_WORDS: usize = 16;
/// Word holding the flag.
const FLAG_WORD: usize = 0;
/// Word holding the message length.
const LENGTH_WORD: usize = 1;

/// How long a waiter spins and yields before it starts to sleep.
pub const BUSY_WAIT: Duration = Duration::from_micros(500);
/// Longest sleep between two looks at the flag.
pub const MAX_SLEEP: Duration = Duration::from_micros(200);
/// Longest time between two checks that the peer is alive.
pub const LIVENESS_PERIOD: Duration = Duration::from_millis(2);

/// The turn could not be handed over or taken.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// The peer process died (its end of the socket closed).
    #[error("the peer process died (its socket closed)")]
    PeerDied,
    /// The wait was abandoned on request (a signal).
    #[error("stopped while waiting for the peer")]
    Stopped,
    /// A message does not fit the page.
    #[error("a turn message of {bytes} bytes does not fit the {capacity}-byte turn page")]
    TooLarge {
        /// Bytes of the message.
        bytes: u64,
        /// Bytes available.
        capacity: u64,
    },
    /// A message broke the format.
    #[error("malformed turn message: {0}")]
    Malformed(&'static str),
    /// The flag holds a value no side writes.
    #[error("turn flag holds {0}, which no side writes")]
    BadFlag(u64),
    /// The page could not be created or mapped.
    #[error(transparent)]
    Segment(#[from] SegmentError),
    /// The peer kept the turn longer than the waiter allows (the emulator's turn timeout).
    #[error("the peer kept the turn for more than {} s without handing it back", .after.as_secs_f64())]
    TimedOut {
        /// How long the waiter waited.
        after: Duration,
    },
    /// The socket failed.
    #[error("socket: {0}")]
    Io(std::io::Error),
}

impl From<std::io::Error> for TurnError {
    // Not `#[from]`: the error would be the cause as well as part of the message.
    fn from(error: std::io::Error) -> Self {
        TurnError::Io(error)
    }
}

/// What a wait for the turn found.
#[derive(Debug, PartialEq, Eq)]
pub enum Turn {
    /// The turn is ours; the peer's message.
    Mine(Vec<u8>),
    /// The emulator ended the run.
    Finished,
}

/// The shared page that carries the turn.
#[derive(Debug)]
pub struct TurnPage {
    segment: MappedWords,
}

impl TurnPage {
    /// A new page (the emulator creates it); the descriptor goes to the host.
    pub fn create() -> Result<(TurnPage, std::os::fd::OwnedFd), TurnError> {
        let (segment, fd) = MappedWords::create("axle-turn-page", TURN_PAGE_BYTES)?;
        let page = TurnPage { segment };
        page.flag().store(DEVICE, Ordering::Release);
        Ok((page, fd))
    }

    /// The page mapped from the descriptor the emulator sent.
    pub fn map(fd: std::os::fd::BorrowedFd<'_>, bytes: u64) -> Result<TurnPage, TurnError> {
        if bytes <= (DATA_OFFSET_WORDS as u64) * 8 {
            return Err(TurnError::Malformed("turn page too small"));
        }
        Ok(TurnPage {
            segment: MappedWords::map(fd, bytes)?,
        })
    }

    fn word(&self, index: usize) -> &AtomicU64 {
        // The page is at least DATA_OFFSET_WORDS words (checked at construction).
        &self.segment.words()[index]
    }

    fn flag(&self) -> &AtomicU64 {
        self.word(FLAG_WORD)
    }

    fn data(&self) -> &[AtomicU64] {
        self.segment
            .words()
            .get(DATA_OFFSET_WORDS..)
            .unwrap_or_default()
    }

    /// Bytes a message may have.
    pub fn capacity(&self) -> u64 {
        self.data().len() as u64 * 8
    }

    /// Writes `message` and hands the turn to `to` ([`HOST`] or [`DEVICE`]).
    pub fn hand_over(&self, to: u64, message: &[u8]) -> Result<(), TurnError> {
        let capacity = self.capacity();
        if message.len() as u64 > capacity {
            return Err(TurnError::TooLarge {
                bytes: message.len() as u64,
                capacity,
            });
        }
        for (word, bytes) in self.data().iter().zip(message.chunks(8)) {
            let mut value = [0u8; 8];
            value[..bytes.len()].copy_from_slice(bytes);
            word.store(u64::from_le_bytes(value), Ordering::Relaxed);
        }
        self.word(LENGTH_WORD)
            .store(message.len() as u64, Ordering::Relaxed);
        // Release: the message is visible to whoever sees the new flag.
        self.flag().store(to, Ordering::Release);
        Ok(())
    }

    /// Marks the run finished (the emulator, after `Emulator::run` returned).
    pub fn finish(&self) {
        self.flag().store(FINISHED, Ordering::Release);
    }

    fn read_message(&self) -> Result<Vec<u8>, TurnError> {
        let length = self.word(LENGTH_WORD).load(Ordering::Relaxed);
        if length > self.capacity() {
            return Err(TurnError::Malformed("message length beyond the page"));
        }
        // At most the page's capacity (checked above), and within the machine's memory.
        let mut message = crate::limits::vec_with_capacity::<u8>(
            "a turn message's length",
            length.next_multiple_of(8),
        )
        .map_err(|_| TurnError::Malformed("message longer than this machine's memory"))?;
        let length = length as usize;
        for word in self.data().iter().take(length.div_ceil(8)) {
            message.extend_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
        }
        message.truncate(length);
        Ok(message)
    }

    /// Waits until the turn is `mine` ([`HOST`] or [`DEVICE`]) and returns the peer's message,
    /// or until the run is finished. Checks the peer's liveness on `peer` and `stop` at least
    /// every [`LIVENESS_PERIOD`].
    pub fn wait_for(
        &self,
        mine: u64,
        peer: &UnixStream,
        stop: &mut dyn FnMut() -> bool,
    ) -> Result<Turn, TurnError> {
        self.wait_for_within(mine, peer, stop, None)
    }

    /// [`TurnPage::wait_for`], giving up with [`TurnError::TimedOut`] once `timeout` (if any)
    /// has passed without the turn coming back.
    pub fn wait_for_within(
        &self,
        mine: u64,
        peer: &UnixStream,
        stop: &mut dyn FnMut() -> bool,
        timeout: Option<Duration>,
    ) -> Result<Turn, TurnError> {
        let mut looks: u64 = 0;
        let mut sleep = Duration::from_micros(1);
        let started = Instant::now();
        let mut last_check = started;
        loop {
            let flag = self.flag().load(Ordering::Acquire);
            if flag == mine {
                return self.read_message().map(Turn::Mine);
            }
            match flag {
                FINISHED => return Ok(Turn::Finished),
                DEVICE | HOST => {}
                other => return Err(TurnError::BadFlag(other)),
            }
            looks += 1;
            if looks < 2_000 {
                std::hint::spin_loop();
            } else if looks < 2_100 || started.elapsed() < BUSY_WAIT {
                // A peer's turn usually ends within microseconds, and a sleep costs at least
                // the kernel's timer slack (about 50 µs): keep yielding until BUSY_WAIT.
                std::thread::yield_now();
            } else {
                std::thread::sleep(sleep);
                sleep = (sleep * 2).min(MAX_SLEEP);
            }
            if looks % 64 == 0 && last_check.elapsed() >= LIVENESS_PERIOD {
                last_check = Instant::now();
                if stop() {
                    return Err(TurnError::Stopped);
                }
                if let Some(after) = timeout.filter(|&after| started.elapsed() > after) {
                    return Err(TurnError::TimedOut { after });
                }
                // Data waiting (the outcome, after FINISHED) also means alive: look again.
                if !peer_alive(peer)? && self.flag().load(Ordering::Acquire) != FINISHED {
                    return Err(TurnError::PeerDied);
                }
            }
        }
    }
}

/// Whether the peer still holds its end of `socket` (a non-blocking `MSG_PEEK`, which
/// consumes nothing): end-of-file means its process closed it or died.
pub fn peer_alive(socket: &UnixStream) -> Result<bool, TurnError> {
    use nix::errno::Errno;
    use nix::sys::socket::{recv, MsgFlags};
    use std::os::fd::AsRawFd;
    let mut byte = [0u8; 1];
    match recv(
        socket.as_raw_fd(),
        &mut byte,
        MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT,
    ) {
        Ok(0) => Ok(false),
        Ok(_) | Err(Errno::EAGAIN | Errno::EINTR) => Ok(true),
        Err(Errno::ECONNRESET) => Ok(false),
        Err(errno) => Err(TurnError::Io(errno.into())),
    }
}

/// The host process's side of the co-simulation: takes each turn the emulator hands over,
/// delivers its responses to `agent` and runs `agent`'s turn with a [`RecordingLink`], until
/// the agent is done or the emulator ends the run. `peer` is the socket to the emulator.
pub fn serve_host(
    page: &TurnPage,
    peer: &UnixStream,
    agent: &mut dyn HostAgent,
) -> Result<(), TurnError> {
    let mut link = RecordingLink::default();
    loop {
        let message = match page.wait_for(HOST, peer, &mut || false)? {
            Turn::Mine(message) => message,
            Turn::Finished => return Ok(()),
        };
        let (now, deliveries) = decode_device_turn(&message)?;
        for (at, response) in deliveries {
            agent.deliver(at, response);
        }
        let wake = agent.turn(now, &mut link);
        page.hand_over(DEVICE, &link.finish(wake))?;
        if wake == Wake::Done {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::tests::drive;
    use crate::link::{LinkResponse, Recorder};
    use shared_abi::Ticks;

    #[test]
    fn recorded_link_calls_replay_in_order_with_their_times() {
        let mut recording = RecordingLink::default();
        drive(&mut recording);
        let message = recording.finish(Wake::At(Ticks(77)));
        let mut replayed = Recorder::default();
        assert_eq!(
            replay_host_turn(&message, &mut replayed).unwrap(),
            Wake::At(Ticks(77))
        );
        let mut direct = Recorder::default();
        drive(&mut direct);
        assert_eq!(replayed, direct);
    }

    #[test]
    fn deliveries_decode_to_what_was_delivered() {
        let deliveries = vec![
            (
                Ticks(1),
                LinkResponse::StoreDone {
                    token: 1,
                    status: 8,
                },
            ),
            (
                Ticks(2),
                LinkResponse::LoadDone {
                    token: 2,
                    data: (0..=200u8).collect(),
                },
            ),
            (Ticks(3), LinkResponse::IoReadDone { token: 3, value: 4 }),
            (Ticks(4), LinkResponse::Interrupt { message: 5 }),
        ];
        let mut turn = DeviceTurn::default();
        for (at, response) in &deliveries {
            turn.deliver(*at, response);
        }
        let message = turn.take(Ticks(99));
        assert_eq!(
            decode_device_turn(&message).unwrap(),
            (Ticks(99), deliveries)
        );
        assert_eq!(
            decode_device_turn(&turn.take(Ticks(100))).unwrap(),
            (Ticks(100), vec![])
        );
    }

    #[test]
    fn truncated_or_garbled_messages_are_errors_not_panics() {
        let mut recording = RecordingLink::default();
        drive(&mut recording);
        let message = recording.finish(Wake::Done);
        for cut in 0..message.len() {
            assert!(replay_host_turn(&message[..cut], &mut Recorder::default()).is_err());
        }
        let mut turn = DeviceTurn::default();
        turn.deliver(
            Ticks(1),
            &LinkResponse::LoadDone {
                token: 1,
                data: vec![1; 20],
            },
        );
        let mut message = turn.take(Ticks(2));
        for cut in 0..message.len() {
            assert!(decode_device_turn(&message[..cut]).is_err());
        }
        // A byte-string length that points far past the end.
        message[40..48].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode_device_turn(&message).is_err());
        assert!(replay_host_turn(&[0xff; 8], &mut Recorder::default()).is_err());
    }

    #[test]
    fn a_message_handed_over_is_read_by_the_other_side() {
        let (page, fd) = TurnPage::create().unwrap();
        let other = TurnPage::map(std::os::fd::AsFd::as_fd(&fd), TURN_PAGE_BYTES).unwrap();
        let (left, _right) = UnixStream::pair().unwrap();
        page.hand_over(HOST, b"hello, host").unwrap();
        assert_eq!(
            other.wait_for(HOST, &left, &mut || false).unwrap(),
            Turn::Mine(b"hello, host".to_vec())
        );
        page.finish();
        assert_eq!(
            other.wait_for(HOST, &left, &mut || false).unwrap(),
            Turn::Finished
        );
    }

    #[test]
    fn a_dead_peer_ends_the_wait() {
        let (page, _fd) = TurnPage::create().unwrap();
        let (left, right) = UnixStream::pair().unwrap();
        drop(right);
        let started = Instant::now();
        assert!(matches!(
            page.wait_for(HOST, &left, &mut || false),
            Err(TurnError::PeerDied)
        ));
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
