//! The co-simulation turn across processes: the [`HostAgent`] contract carried over a page of
//! shared memory.
//!
//! In-process the emulator calls [`HostAgent::deliver`] and [`HostAgent::turns_before`]
//! directly. Across processes the emulator holds a stand-in agent that writes the same calls
//! into a [`TurnPage`], and the host process runs [`serve_host`], which reads them back and
//! makes the same calls on the real agent (the host runtime). The host's link calls during its
//! turn are recorded by a [`RecordingLink`] and replayed, in order and with their time stamps,
//! onto the emulator's link. Nothing on either side can tell the difference, which is what
//! makes a multi-process run print exactly what an in-process run prints (DESIGN.md
//! section 3).
//!
//! # Turns the host takes on its own
//!
//! With each turn the emulator sends its *horizon*: the time of its next event (and one past
//! its virtual-time limit), before which the device does nothing. A host turn that made no
//! link call and asks to wake at a time before the horizon would be followed, in-process, by
//! the host's next turn at that time and nothing in between (no event, no response, no DMA
//! landing, so the host's memory is as it left it). [`serve_host`] takes that turn at once
//! instead of handing the turn back, and keeps going while the condition holds; it hands back
//! after a turn that made a call, asked for a time at or past the horizon, waits for a
//! response or is done. It reports how many turns it took on its own and the latest of their
//! times, and the emulator counts them and advances its clock as if it had given them
//! ([`HostAgent::turns_before`]). Same turns, same times, same calls: the run is the same,
//! byte for byte, with one hand-over instead of several (OPT-2.7B in AXLE mode: most of its
//! turns are polls of an empty ring between two device events).
//!
//! # The page
//!
//! Word 0 is the turn flag: [`DEVICE`] (the emulator runs), [`HOST`] (the host runs) or
//! [`FINISHED`] (the emulator ended the run; the outcome follows on the socket). Word 1 is the
//! byte length of the message in the data area, which starts at byte 128 (its own cache
//! lines). Word 2 counts the waiters that may be asleep on the flag ("Waiting"); word 3 is
//! the `CLOCK_MONOTONIC` instant of the last hand-over, in nanoseconds; word 4 is the wake-up
//! cost the emulator had measured when it created the page, in nanoseconds (0: none yet),
//! from which the host's spin budget starts ("Waiting"). Whoever holds the
//! turn writes the message with Relaxed word stores, then hands the turn over with a
//! sequentially consistent store of the flag (a Release at least); the other side waits for
//! the flag with Acquire loads, and only then reads the message. Strict alternation means one
//! data area serves both directions. The segment is a sparse memfd: its large capacity costs
//! only the pages a message touches (a CXL.mem load response can carry megabytes).
//!
//! # The messages (little-endian `u64` fields, byte strings length-prefixed and padded to 8)
//!
//! - device to host: `now`, the number of deliveries, then per delivery its time and a
//!   response: `1 token status` (StoreDone), `2 token bytes` (LoadDone), `3 token value`
//!   (IoReadDone), `4 message` (Interrupt) ([`DeviceTurn`]); then the horizon (a trailer,
//!   [`device_message`]);
//! - host to device: the link calls in order: `1 now address bytes` (mem_store),
//!   `2 now address bytes token` (mem_store_synchronous), `3 now address length outstanding
//!   token` (mem_load), `4 now register value` (io_write), `5 now register token` (io_read);
//!   then `15 kind at`, the wake (`kind` 0: at, 1: on response, 2: done) ([`RecordingLink`]);
//!   then the turns the host took on its own after the first and the latest of their times
//!   (a trailer, [`host_message`]; `0 0` when it took none).
//!
//! The trailers keep the two turn encodings as the wall-clock mode's socket frames carry
//! them (`crate::wall_socket`). Every decoder checks every length and code, and the emulator
//! checks the host's trailer against the horizon it sent: a malformed message is a
//! [`TurnError`], never a panic or an out-of-bounds access.
//!
//! # Waiting
//!
//! The waiting side first spins on the flag for its spin budget, then sleeps on it in the
//! kernel (a futex on the flag word, `crate::shm::futex`) until the other side hands the turn
//! over and wakes it. Short turns (a poll of an empty ring) are caught spinning; long ones
//! (the device computing between two interrupts) cost one wake-up, and the waiter's core is
//! free meanwhile. The budget is measured, not guessed ([`spin`]): each side measures what a
//! sleep costs it (the time from the peer's hand-over, word 3, to running again) and whether
//! the machine has a core to spare (the kernel's CPU pressure, and whether more tasks are
//! runnable than there are CPUs when it samples). A side starts from the wake-up cost the
//! emulator measured in its earlier sessions (word 4; the emulator keeps it from one session
//! to the next), not from a guess: a host is a new process for each run, and on a guest whose
//! idle cores take 0.8 ms to wake, a short run (KNN, 28 hand-overs) used to spend most of its
//! sleeps learning that. With a core to spare it
//! spins ten wake-ups (a wait that sleeps then pays at most a tenth more), on a contended
//! machine one wake-up and at most 20 µs, since there the spinning core is taken from
//! someone, the peer included.
//!
//! A spinning waiter yields its core every 32 looks (`sched_yield`, which returns at once when
//! nothing else is runnable there). The peer it just woke may be queued on the very core it
//! spins on (Linux often places a woken task on its waker's core): without the yield that peer
//! waits out the whole spin budget before it can take its turn, and then the same happens the
//! other way, one budget per hand-over. On the idle 2-core guest, traces of attached KNN runs
//! showed exactly that (both sides' waits ending 1.02 ms apart, turn after turn), and the yield
//! took the attached KNN runs from 1.14 to 1.72 times the in-process wall time to 0.98 to 1.13
//! (docs/emulator-process.md).
//!
//! No wake-up is lost: a waiter counts itself in word 2 and looks at the flag again before
//! it sleeps, and the futex sleeps only while the flag still holds the value it saw; the side
//! that hands over stores the flag and then reads word 2, waking the waiter if it is
//! counted (both sequentially consistent, so one of the two sees the other's store). The
//! side that hands over makes the wake-up system call only when a waiter is counted.
//!
//! A spin lasts at most a millisecond and a sleep at most [`LIVENESS_PERIOD`]; between two
//! sleeps the waiter checks that the peer is alive: a non-blocking `MSG_PEEK` on the socket
//! returns end-of-file once the peer process has died (the kernel closes its descriptors), so
//! a dead peer is noticed within milliseconds, and a stop request or the emulator's turn
//! timeout as well.

use crate::link::{HostAgent, Turns, Wake};
use crate::shm::futex::{self, Waited};
use crate::shm::{MappedWords, SegmentError};
use crate::wall_socket::monotonic_now_ns;
use shared_abi::Ticks;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod message;

pub mod spin;

pub use message::{
    decode_device_turn, decode_host_turn, device_message, host_message, replay_host_turn,
    split_device_message, split_host_message, DeviceTurn, RecordingLink,
};

/// Turn flag: the emulator holds the turn.
pub const DEVICE: u64 = 1;
/// Turn flag: the host holds the turn.
pub const HOST: u64 = 2;
/// Turn flag: the emulator ended the run.
pub const FINISHED: u64 = 3;

/// The version of the turn's messages and page layout: a host and an emulator that speak
/// different versions refuse to run together (`cosim_link::attach::SessionRequest`).
/// Version 2 added the horizon and the turns the host takes on its own.
pub const PROTOCOL: u32 = 2;

/// Bytes of a turn page: 128 bytes of header, the rest for messages. Sparse: only the pages a
/// message touches are ever allocated.
pub const TURN_PAGE_BYTES: u64 = 256 << 20;
/// Where the message starts.
const DATA_OFFSET_WORDS: usize = 16;
/// Word holding the flag.
const FLAG_WORD: usize = 0;
/// Word holding the message length.
const LENGTH_WORD: usize = 1;
/// Word counting the waiters that may be asleep on the flag.
const SLEEPING_WORD: usize = 2;
/// Word holding the `CLOCK_MONOTONIC` nanosecond of the last hand-over.
const HANDED_AT_WORD: usize = 3;
/// Word holding the wake-up cost the emulator had measured when it created the page, in
/// nanoseconds (0: none).
const KNOWN_WAKE_WORD: usize = 4;

/// Longest sleep between two checks that the peer is alive.
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

/// How one side's waits for the turn went (wall-clock facts for logs, never in a report).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitCounts {
    /// Waits that got the turn.
    pub waits: u64,
    /// Of those, waits that slept at least once (the rest got the turn spinning).
    pub slept: u64,
    /// Nanoseconds from the peer's hand-over to this side running again, summed over the
    /// waits that slept.
    pub wake_ns: u64,
    /// Nanoseconds spent waiting, summed over all waits.
    pub waited_ns: u64,
}

impl std::fmt::Display for WaitCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mean_us = |ns: u64, n: u64| ns as f64 / 1e3 / n.max(1) as f64;
        write!(
            f,
            "{} waits for the turn ({:.3} s), {} slept (wake-up {:.1} µs on average)",
            self.waits,
            self.waited_ns as f64 / 1e9,
            self.slept,
            mean_us(self.wake_ns, self.slept)
        )
    }
}

/// The shared page that carries the turn.
#[derive(Debug)]
pub struct TurnPage {
    segment: MappedWords,
    /// This side's spin budget (this process's own, not shared).
    spin: spin::Spin,
    /// This side's [`WaitCounts`], field by field.
    counts: [AtomicU64; 4],
}

impl TurnPage {
    fn over(segment: MappedWords) -> TurnPage {
        TurnPage {
            segment,
            spin: spin::Spin::new(),
            counts: Default::default(),
        }
    }

    /// A new page (the emulator creates it); the descriptor goes to the host.
    pub fn create() -> Result<(TurnPage, std::os::fd::OwnedFd), TurnError> {
        let (segment, fd) = MappedWords::create("axle-turn-page", TURN_PAGE_BYTES)?;
        let page = TurnPage::over(segment);
        page.flag().store(DEVICE, Ordering::Release);
        Ok((page, fd))
    }

    /// The page mapped from the descriptor the emulator sent; its spin budget starts from the
    /// wake-up cost the emulator published in it ([`TurnPage::publish_wake_up`]), if any.
    pub fn map(fd: std::os::fd::BorrowedFd<'_>, bytes: u64) -> Result<TurnPage, TurnError> {
        if bytes <= (DATA_OFFSET_WORDS as u64) * 8 {
            return Err(TurnError::Malformed("turn page too small"));
        }
        let page = TurnPage::over(MappedWords::map(fd, bytes)?);
        // The peer's figure: `Spin::seed` bounds it.
        let known = page.word(KNOWN_WAKE_WORD).load(Ordering::Acquire);
        if known != 0 {
            page.spin.seed(Duration::from_nanos(known));
        }
        Ok(page)
    }

    /// Starts this side's spin budget from `wake`, a wake-up cost measured earlier on this
    /// machine, and publishes it in the page for the side that maps it (the emulator, before
    /// it sends the page to a host).
    pub fn publish_wake_up(&self, wake: Duration) {
        self.spin.seed(wake);
        let ns = self.spin.wake_up().as_nanos() as u64;
        self.word(KNOWN_WAKE_WORD).store(ns, Ordering::Release);
    }

    fn word(&self, index: usize) -> &AtomicU64 {
        // The page is more than DATA_OFFSET_WORDS words (checked at construction).
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

    /// This side's spin budget and what it is computed from.
    pub fn spin(&self) -> &spin::Spin {
        &self.spin
    }

    /// How this side's waits for the turn went so far.
    pub fn wait_counts(&self) -> WaitCounts {
        let [waits, slept, wake_ns, waited_ns] = self
            .counts
            .each_ref()
            .map(|count| count.load(Ordering::Relaxed));
        WaitCounts {
            waits,
            slept,
            wake_ns,
            waited_ns,
        }
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
        let data = self.data();
        let whole = message.chunks_exact(8);
        let rest = whole.remainder();
        let words = whole.len();
        for (word, bytes) in data.iter().zip(whole) {
            let bytes = bytes.first_chunk::<8>().copied().unwrap_or_default();
            word.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
        }
        if !rest.is_empty() {
            let mut value = [0u8; 8];
            value[..rest.len()].copy_from_slice(rest);
            // Within the capacity (checked above): the word after the whole ones exists.
            if let Some(word) = data.get(words) {
                word.store(u64::from_le_bytes(value), Ordering::Relaxed);
            }
        }
        self.word(LENGTH_WORD)
            .store(message.len() as u64, Ordering::Relaxed);
        self.set_flag(to);
        Ok(())
    }

    /// Marks the run finished (the emulator, after `Emulator::run` returned).
    pub fn finish(&self) {
        self.set_flag(FINISHED);
    }

    /// Stores the flag (publishing the message before it), then wakes the peer if it may be
    /// asleep ("Waiting" in the module docs).
    fn set_flag(&self, value: u64) {
        self.word(HANDED_AT_WORD)
            .store(monotonic_now_ns(), Ordering::Relaxed);
        // SeqCst (a Release too): ordered before the load of the sleepers below, against the
        // waiter's count-then-look.
        self.flag().store(value, Ordering::SeqCst);
        if self.word(SLEEPING_WORD).load(Ordering::SeqCst) != 0 {
            futex::wake(self.flag());
        }
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

    /// What the flag says for a waiter on `mine`: the turn (its message) or the end of the
    /// run, or nothing yet (the flag's value, as the inner error).
    fn look(&self, mine: u64, order: Ordering) -> Result<Result<Turn, u64>, TurnError> {
        match self.flag().load(order) {
            flag if flag == mine => self.read_message().map(|message| Ok(Turn::Mine(message))),
            FINISHED => Ok(Ok(Turn::Finished)),
            flag @ (DEVICE | HOST) => Ok(Err(flag)),
            other => Err(TurnError::BadFlag(other)),
        }
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
        let started = Instant::now();
        self.spin.refresh();
        let turn = match self.spin_for(mine, started)? {
            Some(turn) => turn,
            None => self.sleep(mine, peer, stop, timeout, started)?,
        };
        let [waits, slept, _, waited_ns] = &self.counts;
        waits.fetch_add(1, Ordering::Relaxed);
        let waited = started.elapsed().as_nanos() as u64;
        waited_ns.fetch_add(waited, Ordering::Relaxed);
        log::trace!(
            "turn: waited {} µs (slept so far {}), budget {} µs, contended {}",
            waited / 1000,
            slept.load(Ordering::Relaxed),
            self.spin.budget().as_micros(),
            self.spin.contended()
        );
        Ok(turn)
    }

    /// Spins on the flag for the spin budget: the turn, or `None` if it did not come.
    fn spin_for(&self, mine: u64, started: Instant) -> Result<Option<Turn>, TurnError> {
        let budget = self.spin.budget();
        let mut looks: u32 = 0;
        loop {
            if let Ok(turn) = self.look(mine, Ordering::Acquire)? {
                return Ok(Some(turn));
            }
            looks = looks.wrapping_add(1);
            // Reading the clock costs some tens of nanoseconds: every 32 looks.
            if looks % 32 == 0 {
                if started.elapsed() >= budget {
                    return Ok(None);
                }
                // A peer queued on this core runs now ("Waiting" in the module docs).
                std::thread::yield_now();
            }
            std::hint::spin_loop();
        }
    }

    /// Sleeps on the flag until the turn is `mine` or the run is finished, checking the peer,
    /// `stop` and `timeout` between sleeps; measures the wake-up into the spin budget.
    fn sleep(
        &self,
        mine: u64,
        peer: &UnixStream,
        stop: &mut dyn FnMut() -> bool,
        timeout: Option<Duration>,
        started: Instant,
    ) -> Result<Turn, TurnError> {
        let sleeping = self.word(SLEEPING_WORD);
        let mut slept = false;
        loop {
            // Counted before the look, so that a hand-over after the look wakes us.
            sleeping.fetch_add(1, Ordering::SeqCst);
            let looked = self.look(mine, Ordering::SeqCst);
            let waited = match looked {
                Ok(Err(flag)) => {
                    slept = true;
                    // The futex word is the flag's low half, which holds the whole flag.
                    futex::wait(self.flag(), flag as u32, LIVENESS_PERIOD)
                }
                _ => Waited::Returned,
            };
            sleeping.fetch_sub(1, Ordering::SeqCst);
            if let Waited::Unsupported(_) = waited {
                // No futex here (a seccomp filter?): sleep instead, as a timer allows.
                std::thread::sleep(Duration::from_micros(50));
            }
            let turn = match looked? {
                Ok(turn) => Some(turn),
                Err(_) => self.look(mine, Ordering::Acquire)?.ok(),
            };
            if let Some(turn) = turn {
                if slept {
                    self.measure_wake_up();
                }
                return Ok(turn);
            }
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

    /// After a wait that slept: the time from the peer's hand-over to now, what the sleep
    /// cost, feeds the spin budget ([`spin::Spin::slept`]).
    fn measure_wake_up(&self) {
        let handed_at = self.word(HANDED_AT_WORD).load(Ordering::Relaxed);
        let wake_ns = monotonic_now_ns().saturating_sub(handed_at);
        let [_, slept, wake_sum, _] = &self.counts;
        slept.fetch_add(1, Ordering::Relaxed);
        wake_sum.fetch_add(wake_ns, Ordering::Relaxed);
        self.spin.slept(wake_ns);
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
/// delivers its responses to `agent` and runs `agent`'s turn with a [`RecordingLink`], then
/// the turns it may take on its own before the emulator's horizon ("Turns the host takes on
/// its own"), until the agent is done or the emulator ends the run. `peer` is the socket to
/// the emulator.
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
        let (turn, horizon) = split_device_message(&message)?;
        let (now, deliveries) = decode_device_turn(turn)?;
        for (at, response) in deliveries {
            agent.deliver(at, response);
        }
        let turns = take_turns(agent, now, horizon, &mut link);
        let reply = host_message(&mut link, &turns);
        page.hand_over(DEVICE, &reply)?;
        link.recycle(reply);
        if turns.wake == Wake::Done {
            return Ok(());
        }
    }
}

/// The host's turn at `now`, then each turn it asks for, while the turn before made no call on
/// `link` and asked for a time before `horizon`.
fn take_turns(
    agent: &mut dyn HostAgent,
    now: Ticks,
    horizon: Ticks,
    link: &mut RecordingLink,
) -> Turns {
    let mut turns = Turns {
        wake: agent.turn(now, link),
        taken: 1,
        latest: now,
    };
    while let Wake::At(at) = turns.wake {
        if at >= horizon || link.has_calls() {
            break;
        }
        turns.wake = agent.turn(at, link);
        turns.taken += 1;
        turns.latest = turns.latest.max(at);
    }
    turns
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::tests::drive;
    use crate::link::{DeviceLink, LinkResponse, Recorder};

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
    fn a_waiter_past_its_spin_budget_sleeps_until_the_hand_over_and_measures_its_wake_up() {
        let (page, fd) = TurnPage::create().unwrap();
        let other = TurnPage::map(std::os::fd::AsFd::as_fd(&fd), TURN_PAGE_BYTES).unwrap();
        let (left, _right) = UnixStream::pair().unwrap();
        let whole = Instant::now();
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| other.wait_for(HOST, &left, &mut || false));
            std::thread::sleep(Duration::from_millis(50));
            page.hand_over(HOST, b"after a while").unwrap();
            assert_eq!(
                waiter.join().unwrap().unwrap(),
                Turn::Mine(b"after a while".to_vec())
            );
        });
        let whole_ns = whole.elapsed().as_nanos() as u64;
        let counts = other.wait_counts();
        assert_eq!((counts.waits, counts.slept), (1, 1));
        // The wait (from whenever the waiter thread got to run) includes the wake-up after
        // the hand-over, and lies within the whole test's time.
        assert!(counts.wake_ns > 0, "{counts:?}");
        assert!(counts.waited_ns >= counts.wake_ns, "{counts:?}");
        assert!(counts.waited_ns <= whole_ns, "{counts:?} in {whole_ns} ns");
        // The wake-up cost moved an eighth of the way to the wake-up measured.
        let first = spin::FIRST_WAKE_UP.as_nanos() as u64;
        let expected = first - first / 8 + counts.wake_ns / 8;
        assert_eq!(other.spin().wake_up(), Duration::from_nanos(expected));
    }

    #[test]
    fn a_turn_handed_over_within_the_spin_budget_is_taken_without_sleeping() {
        let (page, fd) = TurnPage::create().unwrap();
        let other = TurnPage::map(std::os::fd::AsFd::as_fd(&fd), TURN_PAGE_BYTES).unwrap();
        let (left, _right) = UnixStream::pair().unwrap();
        page.hand_over(HOST, b"at once").unwrap();
        assert_eq!(
            other.wait_for(HOST, &left, &mut || false).unwrap(),
            Turn::Mine(b"at once".to_vec())
        );
        assert_eq!(other.wait_counts().slept, 0);
        assert_eq!(other.spin().wake_up(), spin::FIRST_WAKE_UP);
    }

    #[test]
    fn a_host_starts_from_the_wake_up_cost_the_emulator_published_bounded() {
        let (page, fd) = TurnPage::create().unwrap();
        page.publish_wake_up(Duration::from_micros(800));
        assert_eq!(page.spin().wake_up(), Duration::from_micros(800));
        let other = TurnPage::map(std::os::fd::AsFd::as_fd(&fd), TURN_PAGE_BYTES).unwrap();
        assert_eq!(other.spin().wake_up(), Duration::from_micros(800));
        // Nothing published: the first guess.
        let (_page, fd) = TurnPage::create().unwrap();
        let other = TurnPage::map(std::os::fd::AsFd::as_fd(&fd), TURN_PAGE_BYTES).unwrap();
        assert_eq!(other.spin().wake_up(), spin::FIRST_WAKE_UP);
        // A hostile figure is bounded.
        let (page, fd) = TurnPage::create().unwrap();
        page.word(KNOWN_WAKE_WORD)
            .store(u64::MAX, Ordering::Release);
        let other = TurnPage::map(std::os::fd::AsFd::as_fd(&fd), TURN_PAGE_BYTES).unwrap();
        assert_eq!(other.spin().wake_up(), spin::MAX_SEED);
    }

    #[test]
    fn a_stop_request_ends_the_wait() {
        let (page, _fd) = TurnPage::create().unwrap();
        let (left, _right) = UnixStream::pair().unwrap();
        let started = Instant::now();
        assert!(matches!(
            page.wait_for(HOST, &left, &mut || true),
            Err(TurnError::Stopped)
        ));
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_peer_that_keeps_the_turn_past_the_timeout_ends_the_wait() {
        let (page, _fd) = TurnPage::create().unwrap();
        let (left, _right) = UnixStream::pair().unwrap();
        let started = Instant::now();
        let timeout = Duration::from_millis(30);
        assert!(matches!(
            page.wait_for_within(HOST, &left, &mut || false, Some(timeout)),
            Err(TurnError::TimedOut { after }) if after == timeout
        ));
        let waited = started.elapsed();
        assert!(
            waited >= timeout && waited < Duration::from_secs(5),
            "{waited:?}"
        );
    }

    /// A host whose turns each ask for the next `step` later, making one link call in the turn
    /// at `calls_at` (if any).
    struct Stepping {
        step: u64,
        calls_at: Option<Ticks>,
        turns: Vec<Ticks>,
    }

    impl HostAgent for Stepping {
        fn deliver(&mut self, _: Ticks, _: LinkResponse) {}

        fn turn(&mut self, now: Ticks, link: &mut dyn DeviceLink) -> Wake {
            self.turns.push(now);
            if self.calls_at == Some(now) {
                link.io_write(now, 0, 0);
            }
            Wake::At(Ticks(now.0 + self.step))
        }
    }

    #[test]
    fn the_host_takes_turns_on_its_own_only_before_the_horizon_and_until_one_makes_a_call() {
        let mut link = RecordingLink::default();
        let mut host = Stepping {
            step: 10,
            calls_at: None,
            turns: vec![],
        };
        // Turns at 100, 110, 120, 130; the next, at 140, is the horizon's: handed back.
        let turns = take_turns(&mut host, Ticks(100), Ticks(140), &mut link);
        assert_eq!(
            turns,
            Turns {
                wake: Wake::At(Ticks(140)),
                taken: 4,
                latest: Ticks(130)
            }
        );
        assert_eq!(host.turns, [100, 110, 120, 130].map(Ticks));
        assert!(!link.has_calls());
        // A call at 110 ends the turns there, whatever the horizon.
        let mut host = Stepping {
            step: 10,
            calls_at: Some(Ticks(110)),
            turns: vec![],
        };
        let turns = take_turns(&mut host, Ticks(100), Ticks::NEVER, &mut link);
        assert_eq!((turns.taken, turns.latest), (2, Ticks(110)));
        assert!(link.has_calls());
        // No horizon: the one turn.
        let mut link = RecordingLink::default();
        let turns = take_turns(&mut host, Ticks(500), Ticks(500), &mut link);
        assert_eq!((turns.taken, turns.latest), (1, Ticks(500)));
    }

    #[test]
    fn a_recycled_buffer_carries_the_next_message_unchanged() {
        // The emulator's half: the second message is written into the first one's buffer.
        let mut turn = DeviceTurn::default();
        let data = vec![7u8; 4096];
        let deliver = |turn: &mut DeviceTurn| {
            turn.deliver(
                Ticks(3),
                &LinkResponse::LoadDone {
                    token: 1,
                    data: data.clone(),
                },
            );
        };
        deliver(&mut turn);
        let mut first = device_message(&mut turn, Ticks(5), Ticks(77));
        let expected = first.clone();
        // A capacity no fresh message of this size gets: it shows the buffer was reused.
        first.reserve(1 << 20);
        let room = first.capacity();
        turn.recycle(first);
        deliver(&mut turn);
        let second = device_message(&mut turn, Ticks(5), Ticks(77));
        assert_eq!(second, expected);
        assert_eq!(second.capacity(), room);

        // The host's half: the next turn's calls are recorded into the handed-over buffer.
        let mut link = RecordingLink::default();
        let turns = Turns {
            wake: Wake::At(Ticks(60)),
            taken: 1,
            latest: Ticks(20),
        };
        link.io_write(Ticks(20), 1, 2);
        let mut first = host_message(&mut link, &turns);
        let expected = first.clone();
        first.reserve(1 << 20);
        let room = first.capacity();
        link.recycle(first);
        assert!(!link.has_calls());
        link.io_write(Ticks(20), 1, 2);
        let second = host_message(&mut link, &turns);
        assert_eq!(second, expected);
        assert_eq!(second.capacity(), room);
    }

    #[test]
    fn the_trailers_carry_the_horizon_and_the_turns_taken_and_a_lying_trailer_is_refused() {
        let mut turn = DeviceTurn::default();
        turn.deliver(Ticks(3), &LinkResponse::Interrupt { message: 9 });
        let message = device_message(&mut turn, Ticks(5), Ticks(77));
        let (body, horizon) = split_device_message(&message).unwrap();
        assert_eq!(horizon, Ticks(77));
        assert_eq!(
            decode_device_turn(body).unwrap(),
            (
                Ticks(5),
                vec![(Ticks(3), LinkResponse::Interrupt { message: 9 })]
            )
        );
        assert!(split_device_message(&message[..7]).is_err());

        let host = |taken, latest| {
            let mut link = RecordingLink::default();
            link.io_write(Ticks(20), 1, 2);
            let wake = Wake::At(Ticks(60));
            host_message(
                &mut link,
                &Turns {
                    wake,
                    taken,
                    latest,
                },
            )
        };
        // Three turns, the latest at 40: before the horizon of 50.
        let message = host(3, Ticks(40));
        let (body, taken, latest) = split_host_message(&message, Ticks(20), Ticks(50)).unwrap();
        assert_eq!((taken, latest), (3, Ticks(40)));
        let mut replayed = Recorder::default();
        assert_eq!(
            replay_host_turn(body, &mut replayed).unwrap(),
            Wake::At(Ticks(60))
        );
        assert_eq!(replayed.calls.len(), 1);
        // One turn: the trailer is `0 0`, and the latest turn is the one given.
        let message = host(1, Ticks(20));
        assert_eq!(message[message.len() - 16..], [0; 16]);
        let (_, taken, latest) = split_host_message(&message, Ticks(20), Ticks(50)).unwrap();
        assert_eq!((taken, latest), (1, Ticks(20)));
        // A turn of its own at the horizon, a time with no turn, no trailer: refused.
        let message = host(2, Ticks(50));
        assert!(split_host_message(&message, Ticks(20), Ticks(50)).is_err());
        let mut message = host(1, Ticks(20));
        let end = message.len();
        message[end - 8..].copy_from_slice(&30u64.to_le_bytes());
        assert!(split_host_message(&message, Ticks(20), Ticks(50)).is_err());
        assert!(split_host_message(&[0; 15], Ticks(20), Ticks(50)).is_err());
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
