//! The host's view of the link to the device, and the co-simulation turn.
//!
//! Everything the host runtime sends to the device goes through [`DeviceLink`], stamped with
//! the host's virtual time; everything that comes back is a [`LinkResponse`] delivered to the
//! [`HostAgent`]. In-process the emulator implements `DeviceLink` by pushing messages into its
//! event queue and calls the agent directly; across processes a transport implements the same
//! trait over shared memory. The host runtime cannot tell the two apart, which is what makes a
//! multi-process run print exactly what an in-process run prints.

use shared_abi::{DeviceAddress, Ticks};
use std::borrow::Cow;

/// Host-to-device traffic, stamped with the host's time. Every call returns at once: the
/// modelled latency is the link's business, and answers come back as [`LinkResponse`]s.
///
/// A call is a value, [`LinkCall`]: an implementation takes every kind of call in
/// [`DeviceLink::call`], and the five methods named for the calls build the value and pass it
/// there (they are what the host runtime calls; an implementation does not override them).
/// So a link that records calls ([`Recorder`]), encodes them for another process
/// (`turn::RecordingLink`), or changes them on the way (the wall-clock device's retiming)
/// handles one value, and [`LinkCall::replay`] makes a recorded call again on any link.
pub trait DeviceLink {
    /// Takes one call.
    fn call(&mut self, call: LinkCall<'_>);

    /// A posted CXL.mem store of at most 64 bytes (launch, flow control, shadow descriptors).
    fn mem_store(&mut self, now: Ticks, address: DeviceAddress, data: &[u8]) {
        self.call(LinkCall::MemStore {
            now,
            address,
            data: Cow::Borrowed(data),
        });
    }
    /// A CXL.mem store whose response the host waits for (the BS launch). The response,
    /// [`LinkResponse::StoreDone`], returns when the device completes the kernel.
    fn mem_store_synchronous(
        &mut self,
        now: Ticks,
        address: DeviceAddress,
        data: &[u8],
        token: u64,
    ) {
        self.call(LinkCall::MemStoreSynchronous {
            now,
            address,
            data: Cow::Borrowed(data),
            token,
        });
    }
    /// CXL.mem loads of `length` bytes at `address` in 64-byte lines, issued back to back by
    /// one core that keeps at most `outstanding` lines in flight (its memory-level
    /// parallelism); [`LinkResponse::LoadDone`] carries the bytes.
    fn mem_load(
        &mut self,
        now: Ticks,
        address: DeviceAddress,
        length: u64,
        outstanding: u32,
        token: u64,
    ) {
        self.call(LinkCall::MemLoad {
            now,
            address,
            length,
            outstanding,
            token,
        });
    }
    /// A CXL.io register write (RP mailbox doorbell, dequeue).
    fn io_write(&mut self, now: Ticks, register: u64, value: u64) {
        self.call(LinkCall::IoWrite {
            now,
            register,
            value,
        });
    }
    /// A CXL.io register read (RP mailbox poll); [`LinkResponse::IoReadDone`] carries the value.
    fn io_read(&mut self, now: Ticks, register: u64, token: u64) {
        self.call(LinkCall::IoRead {
            now,
            register,
            token,
        });
    }
}

/// One call on a [`DeviceLink`], as a value (see the method of the same name for what each
/// does). A store's data is borrowed when the call is made and owned once recorded
/// ([`LinkCall::into_owned`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkCall<'a> {
    /// [`DeviceLink::mem_store`].
    MemStore {
        /// The host's time.
        now: Ticks,
        /// Where.
        address: DeviceAddress,
        /// What (at most 64 bytes).
        data: Cow<'a, [u8]>,
    },
    /// [`DeviceLink::mem_store_synchronous`].
    MemStoreSynchronous {
        /// The host's time.
        now: Ticks,
        /// Where.
        address: DeviceAddress,
        /// What.
        data: Cow<'a, [u8]>,
        /// The token of the response.
        token: u64,
    },
    /// [`DeviceLink::mem_load`].
    MemLoad {
        /// The host's time.
        now: Ticks,
        /// Where.
        address: DeviceAddress,
        /// Bytes.
        length: u64,
        /// Lines the core keeps in flight.
        outstanding: u32,
        /// The token of the response.
        token: u64,
    },
    /// [`DeviceLink::io_write`].
    IoWrite {
        /// The host's time.
        now: Ticks,
        /// The register.
        register: u64,
        /// The value written.
        value: u64,
    },
    /// [`DeviceLink::io_read`].
    IoRead {
        /// The host's time.
        now: Ticks,
        /// The register.
        register: u64,
        /// The token of the response.
        token: u64,
    },
}

impl LinkCall<'_> {
    /// The host's time stamp.
    pub fn now(&self) -> Ticks {
        match self {
            LinkCall::MemStore { now, .. }
            | LinkCall::MemStoreSynchronous { now, .. }
            | LinkCall::MemLoad { now, .. }
            | LinkCall::IoWrite { now, .. }
            | LinkCall::IoRead { now, .. } => *now,
        }
    }

    /// The same call stamped `at`.
    pub fn at(mut self, at: Ticks) -> Self {
        match &mut self {
            LinkCall::MemStore { now, .. }
            | LinkCall::MemStoreSynchronous { now, .. }
            | LinkCall::MemLoad { now, .. }
            | LinkCall::IoWrite { now, .. }
            | LinkCall::IoRead { now, .. } => *now = at,
        }
        self
    }

    /// The token of the call's response, for the calls that have one.
    pub fn token(&self) -> Option<u64> {
        match self {
            LinkCall::MemStoreSynchronous { token, .. }
            | LinkCall::MemLoad { token, .. }
            | LinkCall::IoRead { token, .. } => Some(*token),
            LinkCall::MemStore { .. } | LinkCall::IoWrite { .. } => None,
        }
    }

    /// The call with its data owned.
    pub fn into_owned(self) -> LinkCall<'static> {
        match self {
            LinkCall::MemStore { now, address, data } => LinkCall::MemStore {
                now,
                address,
                data: Cow::Owned(data.into_owned()),
            },
            LinkCall::MemStoreSynchronous {
                now,
                address,
                data,
                token,
            } => LinkCall::MemStoreSynchronous {
                now,
                address,
                data: Cow::Owned(data.into_owned()),
                token,
            },
            LinkCall::MemLoad {
                now,
                address,
                length,
                outstanding,
                token,
            } => LinkCall::MemLoad {
                now,
                address,
                length,
                outstanding,
                token,
            },
            LinkCall::IoWrite {
                now,
                register,
                value,
            } => LinkCall::IoWrite {
                now,
                register,
                value,
            },
            LinkCall::IoRead {
                now,
                register,
                token,
            } => LinkCall::IoRead {
                now,
                register,
                token,
            },
        }
    }

    /// Makes the call again on `link` (a copy of it: a recorded call can be replayed again).
    pub fn replay(&self, link: &mut dyn DeviceLink) {
        link.call(self.clone());
    }
}

/// A [`DeviceLink`] that records every call, in order, and answers none: the test double of
/// the host's side, and what a caller inspects or replays ([`LinkCall::replay`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recorder {
    /// The calls, in the order they were made.
    pub calls: Vec<LinkCall<'static>>,
}

impl DeviceLink for Recorder {
    fn call(&mut self, call: LinkCall<'_>) {
        self.calls.push(call.into_owned());
    }
}

/// Something that came back from the device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkResponse {
    /// A synchronous store completed; `status` is a [`shared_abi::Status`] code.
    StoreDone {
        /// The token given with the store.
        token: u64,
        /// The device's status code.
        status: u32,
    },
    /// A load completed.
    LoadDone {
        /// The token given with the load.
        token: u64,
        /// The bytes loaded.
        data: Vec<u8>,
    },
    /// A register read completed.
    IoReadDone {
        /// The token given with the read.
        token: u64,
        /// The register's value.
        value: u64,
    },
    /// An interrupt, delivered after the modelled handling latency. `message` is its MSI-X
    /// message data: the metadata tail the interrupting DMA request published.
    Interrupt {
        /// The message data.
        message: u64,
    },
}

/// When the host wants its next turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// At this time (or earlier, if a response arrives first).
    At(Ticks),
    /// Only when a response arrives.
    OnResponse,
    /// Never: the host has finished.
    Done,
}

/// What [`HostAgent::turns_before`] did: the turns taken and the wake of the last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Turns {
    /// When the host wants its next turn (the last turn's answer).
    pub wake: Wake,
    /// Turns taken: at least the one given.
    pub taken: u64,
    /// The latest time of a turn taken.
    pub latest: Ticks,
}

/// The host as a co-simulated party: "run at virtual time t, return your next wake-up time".
pub trait HostAgent {
    /// A response arrived at `at` (called before the turn at `at`).
    fn deliver(&mut self, at: Ticks, response: LinkResponse);
    /// Does everything due at `now` and says when to call again.
    fn turn(&mut self, now: Ticks, link: &mut dyn DeviceLink) -> Wake;
    /// The turn at `now`, given by a device that has nothing due before `horizon`; an agent
    /// may then take on its own the turns the co-simulation would give it next, each at the
    /// time the turn before asked for, as long as that turn made no call on `link` and asked
    /// for a time before `horizon` (nothing can happen in between: no device event, no
    /// response). The default takes the one turn; across processes the host takes the others
    /// without a hand-over (`turn::serve_host`). The caller counts every turn taken and
    /// advances its clock to the latest.
    fn turns_before(&mut self, now: Ticks, horizon: Ticks, link: &mut dyn DeviceLink) -> Turns {
        let _ = horizon;
        Turns {
            wake: self.turn(now, link),
            taken: 1,
            latest: now,
        }
    }
    /// Why this agent can take no further part in a run shared with other hosts, if it
    /// cannot: a host in another process that died, broke the turn protocol or outlived its
    /// time. A shared run (`Emulator::run_tenants`) then ends at once with this reason. The
    /// default: never.
    fn ended(&self) -> Option<String> {
        None
    }
    /// The device detached this agent's tenant at `at` for `reason` (a shared run,
    /// `Emulator::run_tenants`): it gets no more turns nor responses. An agent serving a host
    /// in another process tells it and frees what it holds for it now, while the others run
    /// on. The default: nothing.
    fn detached(&mut self, at: Ticks, reason: &str) {
        let _ = (at, reason);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// One call of each kind, in order, at times 5 to 9.
    pub(crate) fn drive(link: &mut dyn DeviceLink) {
        link.mem_store(Ticks(5), DeviceAddress(0x1000), &[1, 2, 3]);
        link.mem_store_synchronous(Ticks(6), DeviceAddress(0), &[9; 64], 11);
        link.mem_load(Ticks(7), DeviceAddress(0x10_0000), 4096, 8, 12);
        link.io_write(Ticks(8), 0x10, 0xdead);
        link.io_read(Ticks(9), 0x18, 13);
    }

    #[test]
    fn recorded_calls_replay_to_the_same_calls_in_order() {
        let mut recorded = Recorder::default();
        drive(&mut recorded);
        assert_eq!(recorded.calls.len(), 5);
        let mut replayed = Recorder::default();
        for call in &recorded.calls {
            call.replay(&mut replayed);
        }
        assert_eq!(replayed, recorded);
        let times: Vec<u64> = recorded.calls.iter().map(|call| call.now().0).collect();
        assert_eq!(times, [5, 6, 7, 8, 9]);
        let tokens: Vec<Option<u64>> = recorded.calls.iter().map(LinkCall::token).collect();
        assert_eq!(tokens, [None, Some(11), Some(12), None, Some(13)]);
    }

    #[test]
    fn a_retimed_call_differs_only_in_its_time() {
        let mut recorded = Recorder::default();
        drive(&mut recorded);
        for call in recorded.calls {
            let retimed = call.clone().at(Ticks(100));
            assert_eq!(retimed.now(), Ticks(100));
            assert_ne!(retimed, call);
            assert_eq!(retimed.at(call.now()), call);
        }
    }
}
