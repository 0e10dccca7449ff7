//! The turn's messages, encoded and decoded ("The messages" in the parent module's docs):
//! the emulator's half ([`DeviceTurn`], [`decode_device_turn`]) and the host's
//! ([`RecordingLink`], [`decode_host_turn`], [`replay_host_turn`]).

use super::TurnError;
use crate::link::{DeviceLink, LinkCall, LinkResponse, Turns, Wake};
use shared_abi::{DeviceAddress, Ticks};
use std::borrow::Cow;

const STORE_DONE: u64 = 1;
const LOAD_DONE: u64 = 2;
const IO_READ_DONE: u64 = 3;
const INTERRUPT: u64 = 4;

const MEM_STORE: u64 = 1;
const MEM_STORE_SYNCHRONOUS: u64 = 2;
const MEM_LOAD: u64 = 3;
const IO_WRITE: u64 = 4;
const IO_READ: u64 = 5;
const WAKE: u64 = 15;

const WAKE_AT: u64 = 0;
const WAKE_ON_RESPONSE: u64 = 1;
const WAKE_DONE: u64 = 2;

#[derive(Debug, Default)]
struct Writer {
    bytes: Vec<u8>,
}

impl Writer {
    fn word(&mut self, value: u64) {
        self.bytes.extend_from_slice(&value.to_le_bytes());
    }

    fn string(&mut self, data: &[u8]) {
        self.word(data.len() as u64);
        self.bytes.extend_from_slice(data);
        let padded = self.bytes.len().next_multiple_of(8);
        self.bytes.resize(padded, 0);
    }

    /// Takes `buffer`, emptied, as the buffer to write into, if nothing was written since
    /// the last take and it has more room than the present one.
    fn recycle(&mut self, mut buffer: Vec<u8>) {
        if self.bytes.is_empty() && buffer.capacity() > self.bytes.capacity() {
            buffer.clear();
            self.bytes = buffer;
        }
    }
}

struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    fn word(&mut self) -> Result<u64, TurnError> {
        let (head, tail) = self
            .rest
            .split_first_chunk::<8>()
            .ok_or(TurnError::Malformed("message ends inside a field"))?;
        self.rest = tail;
        Ok(u64::from_le_bytes(*head))
    }

    fn string(&mut self) -> Result<&'a [u8], TurnError> {
        let length = self.word()?;
        let padded = usize::try_from(length)
            .ok()
            .and_then(|length| length.checked_next_multiple_of(8))
            .filter(|&padded| padded <= self.rest.len())
            .ok_or(TurnError::Malformed("byte string longer than the message"))?;
        let (field, tail) = self.rest.split_at(padded);
        self.rest = tail;
        Ok(field.get(..length as usize).unwrap_or_default())
    }

    fn u32(&mut self) -> Result<u32, TurnError> {
        u32::try_from(self.word()?).map_err(|_| TurnError::Malformed("32-bit field out of range"))
    }
}

/// The emulator's half of a turn: the responses delivered since the last turn, encoded as
/// they arrive.
#[derive(Debug, Default)]
pub struct DeviceTurn {
    writer: Writer,
    count: u64,
    /// The buffer of the last message taken, given back ([`DeviceTurn::recycle`]).
    spare: Vec<u8>,
}

impl DeviceTurn {
    /// Adds a response delivered at `at`.
    pub fn deliver(&mut self, at: Ticks, response: &LinkResponse) {
        let w = &mut self.writer;
        w.word(at.0);
        match response {
            LinkResponse::StoreDone { token, status } => {
                w.word(STORE_DONE);
                w.word(*token);
                w.word(u64::from(*status));
            }
            LinkResponse::LoadDone { token, data } => {
                w.word(LOAD_DONE);
                w.word(*token);
                w.string(data);
            }
            LinkResponse::IoReadDone { token, value } => {
                w.word(IO_READ_DONE);
                w.word(*token);
                w.word(*value);
            }
            LinkResponse::Interrupt { message } => {
                w.word(INTERRUPT);
                w.word(*message);
            }
        }
        self.count += 1;
    }

    /// The message for a turn at `now`; empties `self`.
    pub fn take(&mut self, now: Ticks) -> Vec<u8> {
        // Room for the header and for the page's trailer (`device_message`).
        let body = self.writer.bytes.len();
        let mut message = std::mem::take(&mut self.spare);
        message.clear();
        message.reserve(body + 24);
        message.extend_from_slice(&now.0.to_le_bytes());
        message.extend_from_slice(&self.count.to_le_bytes());
        message.extend_from_slice(&self.writer.bytes);
        // The body's buffer stays, emptied, for the next turn's responses.
        self.writer.bytes.clear();
        self.count = 0;
        message
    }

    /// Gives back a message [`DeviceTurn::take`] (or [`device_message`]) returned, once it
    /// was handed over: the next turn's message is written into its buffer.
    pub fn recycle(&mut self, message: Vec<u8>) {
        if message.capacity() > self.spare.capacity() {
            self.spare = message;
        }
    }
}

/// Decodes the emulator's half of a turn: the time and the deliveries, in order.
pub fn decode_device_turn(
    message: &[u8],
) -> Result<(Ticks, Vec<(Ticks, LinkResponse)>), TurnError> {
    let mut r = Reader { rest: message };
    let now = Ticks(r.word()?);
    let count = r.word()?;
    let mut deliveries = Vec::new();
    for _ in 0..count {
        let at = Ticks(r.word()?);
        let response = match r.word()? {
            STORE_DONE => LinkResponse::StoreDone {
                token: r.word()?,
                status: r.u32()?,
            },
            LOAD_DONE => LinkResponse::LoadDone {
                token: r.word()?,
                data: r.string()?.to_vec(),
            },
            IO_READ_DONE => LinkResponse::IoReadDone {
                token: r.word()?,
                value: r.word()?,
            },
            INTERRUPT => LinkResponse::Interrupt { message: r.word()? },
            _ => return Err(TurnError::Malformed("unknown response code")),
        };
        deliveries.push((at, response));
    }
    if !r.is_empty() {
        return Err(TurnError::Malformed("bytes after the last delivery"));
    }
    Ok((now, deliveries))
}

/// The host's [`DeviceLink`] across processes: encodes every call, in order, for the emulator
/// to replay onto its link when the turn comes back.
#[derive(Debug, Default)]
pub struct RecordingLink {
    writer: Writer,
}

impl RecordingLink {
    /// Whether a call was recorded since the last [`RecordingLink::finish`].
    pub fn has_calls(&self) -> bool {
        !self.writer.bytes.is_empty()
    }

    /// The message that ends the turn: the recorded calls, then `wake`; empties `self`.
    pub fn finish(&mut self, wake: Wake) -> Vec<u8> {
        let w = &mut self.writer;
        w.word(WAKE);
        match wake {
            Wake::At(at) => {
                w.word(WAKE_AT);
                w.word(at.0);
            }
            Wake::OnResponse => {
                w.word(WAKE_ON_RESPONSE);
                w.word(0);
            }
            Wake::Done => {
                w.word(WAKE_DONE);
                w.word(0);
            }
        }
        std::mem::take(&mut w.bytes)
    }

    /// Gives back a message [`RecordingLink::finish`] returned, once it was handed over: its
    /// buffer, emptied, records the next turn's calls, so that a turn does not grow a new one
    /// from nothing (a no-op when calls were recorded since).
    pub fn recycle(&mut self, message: Vec<u8>) {
        self.writer.recycle(message);
    }
}

impl DeviceLink for RecordingLink {
    fn call(&mut self, call: LinkCall<'_>) {
        let w = &mut self.writer;
        match call {
            LinkCall::MemStore { now, address, data } => {
                w.word(MEM_STORE);
                w.word(now.0);
                w.word(address.0);
                w.string(&data);
            }
            LinkCall::MemStoreSynchronous {
                now,
                address,
                data,
                token,
            } => {
                w.word(MEM_STORE_SYNCHRONOUS);
                w.word(now.0);
                w.word(address.0);
                w.string(&data);
                w.word(token);
            }
            LinkCall::MemLoad {
                now,
                address,
                length,
                outstanding,
                token,
            } => {
                w.word(MEM_LOAD);
                w.word(now.0);
                w.word(address.0);
                w.word(length);
                w.word(u64::from(outstanding));
                w.word(token);
            }
            LinkCall::IoWrite {
                now,
                register,
                value,
            } => {
                w.word(IO_WRITE);
                w.word(now.0);
                w.word(register);
                w.word(value);
            }
            LinkCall::IoRead {
                now,
                register,
                token,
            } => {
                w.word(IO_READ);
                w.word(now.0);
                w.word(register);
                w.word(token);
            }
        }
    }
}

/// Decodes the host's half of a turn, all of it: its link calls in order (their data borrowed
/// from `message`) and its wake.
pub fn decode_host_turn(message: &[u8]) -> Result<(Vec<LinkCall<'_>>, Wake), TurnError> {
    let mut r = Reader { rest: message };
    let mut calls = Vec::new();
    let wake = loop {
        let call = match r.word()? {
            MEM_STORE => LinkCall::MemStore {
                now: Ticks(r.word()?),
                address: DeviceAddress(r.word()?),
                data: Cow::Borrowed(r.string()?),
            },
            MEM_STORE_SYNCHRONOUS => LinkCall::MemStoreSynchronous {
                now: Ticks(r.word()?),
                address: DeviceAddress(r.word()?),
                data: Cow::Borrowed(r.string()?),
                token: r.word()?,
            },
            MEM_LOAD => LinkCall::MemLoad {
                now: Ticks(r.word()?),
                address: DeviceAddress(r.word()?),
                length: r.word()?,
                outstanding: r.u32()?,
                token: r.word()?,
            },
            IO_WRITE => LinkCall::IoWrite {
                now: Ticks(r.word()?),
                register: r.word()?,
                value: r.word()?,
            },
            IO_READ => LinkCall::IoRead {
                now: Ticks(r.word()?),
                register: r.word()?,
                token: r.word()?,
            },
            WAKE => {
                let kind = r.word()?;
                let at = r.word()?;
                break match kind {
                    WAKE_AT => Wake::At(Ticks(at)),
                    WAKE_ON_RESPONSE => Wake::OnResponse,
                    WAKE_DONE => Wake::Done,
                    _ => return Err(TurnError::Malformed("unknown wake kind")),
                };
            }
            _ => return Err(TurnError::Malformed("unknown link call code")),
        };
        calls.push(call);
    };
    if !r.is_empty() {
        return Err(TurnError::Malformed("bytes after the wake"));
    }
    Ok((calls, wake))
}

/// Decodes the host's half of a turn (checking all of it first, [`decode_host_turn`]) and
/// replays its link calls, in order, onto `link`; returns the host's wake.
pub fn replay_host_turn(message: &[u8], link: &mut dyn DeviceLink) -> Result<Wake, TurnError> {
    let (calls, wake) = decode_host_turn(message)?;
    for call in calls {
        link.call(call);
    }
    Ok(wake)
}

/// The emulator's half of a turn as the turn page carries it: `turn`'s message for a turn at
/// `now` ([`DeviceTurn::take`]), then the trailer `horizon`: the host may take on its own the
/// turns it asks for at times before it (the parent module's docs).
pub fn device_message(turn: &mut DeviceTurn, now: Ticks, horizon: Ticks) -> Vec<u8> {
    let mut message = turn.take(now);
    message.extend_from_slice(&horizon.0.to_le_bytes());
    message
}

/// Splits the emulator's half of a turn from the page into [`DeviceTurn`]'s message (for
/// [`decode_device_turn`]) and the horizon.
pub fn split_device_message(message: &[u8]) -> Result<(&[u8], Ticks), TurnError> {
    let (turn, horizon) = message.split_last_chunk::<8>().ok_or(TurnError::Malformed(
        "the emulator's message has no horizon",
    ))?;
    Ok((turn, Ticks(u64::from_le_bytes(*horizon))))
}

/// The host's half of a turn as the turn page carries it: the calls `link` recorded and the
/// wake of `turns` ([`RecordingLink::finish`]; empties `link`), then the trailer: the turns
/// taken on their own after the first (`turns.taken - 1`) and the latest time of those (0 when
/// there were none).
pub fn host_message(link: &mut RecordingLink, turns: &Turns) -> Vec<u8> {
    let mut message = link.finish(turns.wake);
    let alone = turns.taken.saturating_sub(1);
    message.extend_from_slice(&alone.to_le_bytes());
    let latest = if alone == 0 { 0 } else { turns.latest.0 };
    message.extend_from_slice(&latest.to_le_bytes());
    message
}

/// Splits the host's half of a turn from the page, for the turn the emulator gave at `now`
/// with `horizon`, into [`RecordingLink`]'s message (for [`replay_host_turn`]), the turns the
/// host took (at least 1) and the latest of their times (at least `now`). The trailer must be
/// one the host could have written: no time with no turn of its own, and every turn of its own
/// before the horizon.
pub fn split_host_message(
    message: &[u8],
    now: Ticks,
    horizon: Ticks,
) -> Result<(&[u8], u64, Ticks), TurnError> {
    let (turn, trailer) = message
        .split_last_chunk::<16>()
        .ok_or(TurnError::Malformed("the host's message has no trailer"))?;
    let (alone, latest) = trailer.split_at(8);
    let word = |bytes: &[u8]| {
        bytes
            .first_chunk::<8>()
            .map(|bytes| u64::from_le_bytes(*bytes))
    };
    let (Some(alone), Some(latest)) = (word(alone), word(latest).map(Ticks)) else {
        return Err(TurnError::Malformed("the host's trailer is cut"));
    };
    match alone {
        0 if latest != Ticks::ZERO => Err(TurnError::Malformed(
            "the host's trailer has a time but no turn of its own",
        )),
        0 => Ok((turn, 1, now)),
        _ if latest >= horizon => Err(TurnError::Malformed(
            "the host took a turn of its own at or past the horizon",
        )),
        _ => Ok((turn, alone.saturating_add(1), latest.max(now))),
    }
}
