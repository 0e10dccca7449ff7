//! The messages a host sends an emulator process (`axle emu`): the attach framing and session
//! request (`cosim_link::attach`, `emulator::server::check_session_request`), the host's half
//! of a turn (`cosim_link::turn::replay_host_turn`), the device's half (what the host decodes,
//! `decode_device_turn`), and a host turn run by a real `Emulator`.
//!
//! Input: a selector byte, then the part's bytes.
//!
//! - 0: a turn's time and horizon (two `u64`s), then raw bytes as the host's half of a turn on
//!   the page: its trailer split off (`split_host_message`), the rest replayed onto a
//!   recording link. An accepted trailer claims at least one turn, none before the time, and
//!   turns of the host's own only before the horizon; an `Ok` replay has consumed the whole
//!   message, and re-encoding what was replayed (`RecordingLink`) replays to the same calls
//!   and wake;
//! - 1: raw bytes as the device's half of a turn on the page: its horizon split off
//!   (`split_device_message`), the rest decoded. An `Ok` re-encodes (`device_message`) to a
//!   message that decodes to the same time, deliveries and horizon;
//! - 2: raw bytes on the attach socket (a socket pair, the writer closed after them) read as
//!   a session request (`receive_message_with`, 0 to 2 descriptors), then checked by
//!   `check_session_request`. An accepted request has a set-up the model validates, device
//!   memory within the machine's memory, host memory within it too;
//! - 3: a structured host turn (link calls with lengths from the whole `u64` range, times,
//!   tokens, a wake) run by an `Emulator` as the host's first turn. It must never panic or
//!   abort; a load longer than the device's memory, more bytes in flight than that, must end
//!   the run with `CoSimError::HostRequest`.

use arbitrary::{Arbitrary, Unstructured};
use cosim_link::attach::{receive_message_with, AttachError, MessageKind, SessionRequest};
use cosim_link::link::{DeviceLink, HostAgent, LinkCall, LinkResponse, Recorder, Wake};
use cosim_link::turn::{
    decode_device_turn, device_message, replay_host_turn, split_device_message, split_host_message,
    DeviceTurn, RecordingLink,
};
use emulator::{CoSimError, DeviceConfig, Emulator};
use host_driver::phys::PhysicalMemory;
use shared_abi::{DeviceAddress, Ticks};
use std::borrow::Cow;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::Arc;

/// A link call, as the fuzzer builds it.
#[derive(Clone, Debug, PartialEq, Eq, Arbitrary)]
enum Call {
    Store(u64, u64, Vec<u8>),
    StoreSynchronous(u64, u64, Vec<u8>, u64),
    Load(u64, u64, Length, u32, u64),
    IoWrite(u64, u64, u64),
    IoRead(u64, u64, u64),
}

/// A load's length: small, near the device's memory, or anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Arbitrary)]
enum Length {
    Small(u16),
    NearDevice(i32),
    Any(u64),
}

impl Length {
    fn bytes(self, device: u64) -> u64 {
        match self {
            Length::Small(bytes) => u64::from(bytes),
            Length::NearDevice(delta) => device.saturating_add_signed(i64::from(delta)),
            Length::Any(bytes) => bytes,
        }
    }
}

impl Call {
    /// The call as made on a link (a load's length against a device of `device` bytes).
    fn link_call(&self, device: u64) -> LinkCall<'_> {
        match self {
            Call::Store(now, address, data) => LinkCall::MemStore {
                now: Ticks(*now),
                address: DeviceAddress(*address),
                data: Cow::Borrowed(data),
            },
            Call::StoreSynchronous(now, address, data, token) => LinkCall::MemStoreSynchronous {
                now: Ticks(*now),
                address: DeviceAddress(*address),
                data: Cow::Borrowed(data),
                token: *token,
            },
            Call::Load(now, address, length, outstanding, token) => LinkCall::MemLoad {
                now: Ticks(*now),
                address: DeviceAddress(*address),
                length: length.bytes(device),
                outstanding: *outstanding,
                token: *token,
            },
            Call::IoWrite(now, register, value) => LinkCall::IoWrite {
                now: Ticks(*now),
                register: *register,
                value: *value,
            },
            Call::IoRead(now, register, token) => LinkCall::IoRead {
                now: Ticks(*now),
                register: *register,
                token: *token,
            },
        }
    }
}

fn host_turn(input: &[u8]) {
    let Some((now, input)) = input.split_first_chunk::<8>() else {
        return;
    };
    let Some((horizon, message)) = input.split_first_chunk::<8>() else {
        return;
    };
    let (now, horizon) = (
        Ticks(u64::from_le_bytes(*now)),
        Ticks(u64::from_le_bytes(*horizon)),
    );
    let Ok((message, taken, latest)) = split_host_message(message, now, horizon) else {
        return;
    };
    assert!(taken >= 1 && latest >= now);
    assert!(
        taken == 1 || latest < horizon,
        "a turn of its own past the horizon"
    );
    assert!(taken > 1 || latest == now);
    let mut first = Recorder::default();
    let Ok(wake) = replay_host_turn(message, &mut first) else {
        return;
    };
    let mut again = RecordingLink::default();
    for call in &first.calls {
        call.replay(&mut again);
    }
    let encoded = again.finish(wake);
    let mut second = Recorder::default();
    assert_eq!(replay_host_turn(&encoded, &mut second).ok(), Some(wake));
    assert_eq!(first, second);
}

fn device_turn(message: &[u8]) {
    let Ok((message, horizon)) = split_device_message(message) else {
        return;
    };
    let Ok((now, deliveries)) = decode_device_turn(message) else {
        return;
    };
    let mut turn = DeviceTurn::default();
    for (at, response) in &deliveries {
        turn.deliver(*at, response);
    }
    let encoded = device_message(&mut turn, now, horizon);
    let (again, horizon_again) = split_device_message(&encoded).expect("a horizon");
    let again = decode_device_turn(again).expect("a re-encoded turn decodes");
    assert_eq!((again, horizon_again), ((now, deliveries), horizon));
}

fn session_request(bytes: &[u8]) {
    let (mut writer, reader) = UnixStream::pair().expect("a socket pair");
    // Fuzz inputs are far smaller than a socket buffer: the write does not block.
    writer.write_all(bytes).expect("write");
    drop(writer);
    let received = receive_message_with::<SessionRequest>(
        &reader,
        MessageKind::Session,
        0..=2,
        AttachError::HostDied("test"),
    );
    let Ok((request, fds)) = received else {
        return;
    };
    assert!(fds.is_empty());
    if let Ok(setup) = emulator::server::check_session_request(&request) {
        assert!(setup.device.validate().is_ok());
        let budget = cosim_link::limits::Machine::get().memory_budget;
        assert!(Emulator::device_memory_bytes(&setup.device) <= budget);
        assert!(request.host_memory_bytes <= budget);
    }
}

/// A host whose first turn makes `calls` and wakes as told; then it is done.
struct OneTurn {
    calls: Vec<Call>,
    wake: Wake,
    device: u64,
    turns: u32,
}

impl HostAgent for OneTurn {
    fn deliver(&mut self, _: Ticks, _: LinkResponse) {}

    fn turn(&mut self, _: Ticks, link: &mut dyn DeviceLink) -> Wake {
        self.turns += 1;
        if self.turns > 1 {
            return Wake::Done;
        }
        // Through the wire format, as across processes.
        let mut recording = RecordingLink::default();
        for call in &self.calls {
            recording.call(call.link_call(self.device));
        }
        let message = recording.finish(self.wake);
        replay_host_turn(&message, link).unwrap_or(Wake::Done)
    }
}

/// Device memory of the emulator under test: the smallest the server accepts (the control
/// area, the firmware's scratch area and 1 MiB of data; a test below keeps it so). Loads are
/// sized against it (`Length::NearDevice`), so a smaller memory checks the same rules; it is
/// an anonymous mapping, touched only where written, yet with the default 256 MiB this
/// target ran 30% fewer executions a second under AddressSanitizer (natively the difference
/// is within the noise).
const DEVICE_MIB: u64 = 34;

fn emulated_turn(bytes: &[u8]) {
    let mut input = Unstructured::new(bytes);
    let Ok(calls) = Vec::<Call>::arbitrary(&mut input) else {
        return;
    };
    let wake = match u8::arbitrary(&mut input).unwrap_or(0) % 3 {
        0 => Wake::At(Ticks(u64::arbitrary(&mut input).unwrap_or(0))),
        1 => Wake::OnResponse,
        _ => Wake::Done,
    };
    let config = DeviceConfig {
        device_memory_mib: DEVICE_MIB,
        ..DeviceConfig::default()
    };
    let device = Emulator::device_memory_bytes(&config);
    let host_memory = Arc::new(PhysicalMemory::new(1 << 16).expect("64 KiB"));
    let mut emulator = Emulator::new(
        config,
        host_memory,
        firmware::StreamingFactor::Bytes(4096),
        false,
    );
    let too_long = calls.iter().any(|call| match call {
        Call::Load(_, _, length, ..) => length.bytes(device) > device,
        _ => false,
    });
    let mut host = OneTurn {
        calls,
        wake,
        device,
        turns: 0,
    };
    let outcome = emulator.run(&mut host, Ticks::from_ns(1_000_000));
    if too_long {
        assert!(
            matches!(outcome, Err(CoSimError::HostRequest(_))),
            "a load longer than device memory was not refused: {outcome:?}"
        );
    }
}

/// The check: panics exactly where the `attach_turn` fuzz target reports a finding.
pub fn check(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    match selector % 4 {
        0 => host_turn(rest),
        1 => device_turn(rest),
        2 => session_request(rest),
        _ => emulated_turn(rest),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_emulated_device_memory_is_the_smallest_the_server_accepts() {
        let device = |mib| DeviceConfig {
            device_memory_mib: mib,
            ..DeviceConfig::default()
        };
        assert!(emulator::server::check_device_memory(&device(DEVICE_MIB)).is_ok());
        assert!(emulator::server::check_device_memory(&device(DEVICE_MIB - 1)).is_err());
    }
}
