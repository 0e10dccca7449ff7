//! Test doubles for driving a [`Runtime`] without an emulator: [`ScriptedLink`], a
//! [`DeviceLink`] that records every call and answers the calls that have a response from a
//! script, a [`Device`] that writes what the device's DMA would into an AXLE ring (payload,
//! record, metadata tail, status word), and [`TestApp`], an application whose launches are
//! given and which records the bytes each task read.

use crate::app::{AppError, AppProblem, DeviceInput, Scope, Verification};
use crate::app::{Application, DeviceLoader, HostCost, HostTask, LaunchPlan, LoadError};
use crate::modes::axle::AxleRing;
use crate::runtime::Runtime;
use cosim_link::link::{DeviceLink, HostAgent, LinkCall, LinkResponse, Wake};
use host_driver::frames::FrameAllocator;
use host_driver::phys::PhysicalMemory;
use host_driver::sync::{Arc, Ordering};
use shared_abi::control::{DEVICE_STATUS_OFFSET, METADATA_TAIL_OFFSET};
use shared_abi::region::RingLayout;
use shared_abi::{CommandDescriptor, DeviceAddress, MetadataRecord, Ticks};
use std::collections::VecDeque;
use zerocopy::IntoBytes;

/// The call's kind and target, without times, tokens or data (for comparing sequences).
pub(crate) fn shape(call: &LinkCall<'_>) -> (&'static str, u64) {
    match call {
        LinkCall::MemStore { address, .. } => ("mem_store", address.0),
        LinkCall::MemStoreSynchronous { address, .. } => ("mem_store_synchronous", address.0),
        LinkCall::MemLoad { address, .. } => ("mem_load", address.0),
        LinkCall::IoWrite { register, .. } => ("io_write", *register),
        LinkCall::IoRead { register, .. } => ("io_read", *register),
    }
}

/// The scripted answer to the next call that has a response, `after` its issue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Reply {
    /// To a synchronous store: its status code.
    Store { after: Ticks, status: u32 },
    /// To a load: the bytes (as many as the script says, whatever was asked).
    Load { after: Ticks, data: Vec<u8> },
    /// To a register read: its value.
    IoRead { after: Ticks, value: u64 },
}

/// A link that records every call and replays scripted replies, in order, to the calls that
/// have a response. A call with a response and no reply left gets none (the host waits).
#[derive(Debug, Default)]
pub(crate) struct ScriptedLink {
    /// Every call, in order.
    pub(crate) calls: Vec<LinkCall<'static>>,
    script: VecDeque<Reply>,
    /// Responses due, in the order they were made.
    pending: Vec<(Ticks, LinkResponse)>,
    /// Calls with a response that found no reply.
    pub(crate) unanswered: usize,
}

impl ScriptedLink {
    /// A link that answers with `script`.
    pub(crate) fn new(script: impl IntoIterator<Item = Reply>) -> ScriptedLink {
        ScriptedLink {
            script: script.into_iter().collect(),
            ..ScriptedLink::default()
        }
    }

    /// An interrupt (message data `message`) reaches the host at `at`.
    pub(crate) fn interrupt(&mut self, at: Ticks, message: u64) {
        self.pending.push((at, LinkResponse::Interrupt { message }));
    }

    /// The calls' shapes (kind and target), in order.
    pub(crate) fn shapes(&self) -> Vec<(&'static str, u64)> {
        self.calls.iter().map(shape).collect()
    }

    /// The stores (posted or synchronous) to `address`, with their times.
    pub(crate) fn stores_to(&self, address: DeviceAddress) -> Vec<(Ticks, Vec<u8>)> {
        self.calls
            .iter()
            .filter_map(|call| match call {
                LinkCall::MemStore {
                    now,
                    address: a,
                    data,
                }
                | LinkCall::MemStoreSynchronous {
                    now,
                    address: a,
                    data,
                    ..
                } if *a == address => Some((*now, data.to_vec())),
                _ => None,
            })
            .collect()
    }

    fn answer(&mut self, now: Ticks, token: u64) {
        let Some(reply) = self.script.pop_front() else {
            self.unanswered += 1;
            return;
        };
        let (after, response) = match reply {
            Reply::Store { after, status } => (after, LinkResponse::StoreDone { token, status }),
            Reply::Load { after, data } => (after, LinkResponse::LoadDone { token, data }),
            Reply::IoRead { after, value } => (after, LinkResponse::IoReadDone { token, value }),
        };
        self.pending.push((now.plus(after), response));
    }

    /// The earliest time a response is due.
    pub(crate) fn next_due(&self) -> Option<Ticks> {
        self.pending.iter().map(|(at, _)| *at).min()
    }

    /// Takes the responses due at or before `now`, earliest first (ties in order made).
    pub(crate) fn take_due(&mut self, now: Ticks) -> Vec<(Ticks, LinkResponse)> {
        let mut due = Vec::new();
        let mut kept = Vec::new();
        for (at, response) in self.pending.drain(..) {
            if at <= now {
                due.push((at, response));
            } else {
                kept.push((at, response));
            }
        }
        self.pending = kept;
        due.sort_by_key(|(at, _)| *at);
        due
    }
}

impl DeviceLink for ScriptedLink {
    fn call(&mut self, call: LinkCall<'_>) {
        if let Some(token) = call.token() {
            self.answer(call.now(), token);
        }
        self.calls.push(call.into_owned());
    }
}

/// Co-simulates `runtime` with `link` from `*now` until the runtime is done, waits on nothing
/// more, or the next event is after `until`; returns its last wake-up.
pub(crate) fn run_until(
    runtime: &mut Runtime<'_>,
    link: &mut ScriptedLink,
    now: &mut Ticks,
    until: Ticks,
) -> Wake {
    loop {
        for (at, response) in link.take_due(*now) {
            runtime.deliver(at, response);
        }
        let wake = runtime.turn(*now, link);
        let next = match (wake, link.next_due()) {
            (Wake::Done, _) => return wake,
            (Wake::At(at), Some(due)) => at.min(due),
            (Wake::At(at), None) => at,
            (Wake::OnResponse, Some(due)) => due,
            (Wake::OnResponse, None) => return wake,
        };
        if next > until {
            *now = until;
            return wake;
        }
        *now = next.max(*now);
    }
}

/// An application whose launches are given; every task costs `operations` instructions. It
/// records the bytes each task read.
#[derive(Debug, Default)]
pub(crate) struct TestApp {
    pub(crate) launches: VecDeque<LaunchPlan>,
    pub(crate) operations: u64,
    /// (task id, bytes read), in the order the tasks ran.
    pub(crate) read: Vec<(u32, Vec<u8>)>,
    pub(crate) finished_launches: u32,
    /// `run_task` of this task fails (an application refusing a task).
    pub(crate) refuse_task: Option<u32>,
}

impl Application for TestApp {
    fn name(&self) -> &str {
        "test"
    }
    fn load(&mut self, _: &mut dyn DeviceLoader) -> Result<(), LoadError> {
        Ok(())
    }
    fn next_launch(&mut self) -> Result<Option<LaunchPlan>, AppError> {
        Ok(self.launches.pop_front())
    }
    fn run_task(&mut self, task: &HostTask, result: &[u8]) -> Result<HostCost, AppError> {
        if self.refuse_task == Some(task.id) {
            return Err(AppError::new(
                "test",
                Scope::Whole,
                AppProblem::RanTwice { task: task.id },
            ));
        }
        self.read.push((task.id, result.to_vec()));
        Ok(HostCost {
            operations: self.operations,
            memory_bytes: 0,
        })
    }
    fn finish_launch(&mut self) -> Result<HostCost, AppError> {
        self.finished_launches += 1;
        Ok(HostCost::default())
    }
    fn verify(&self) -> Verification {
        Verification {
            passed: true,
            detail: String::new(),
        }
    }
}

/// Where the test launches put their result in device memory.
pub(crate) const RESULT_ADDRESS: u64 = 0x20_0000;

/// A launch of `chunks` chunks of `chunk` bytes; task `i` needs the chunks from `needs[i].0`
/// up to `needs[i].1`; `input_bytes` of input are stored first.
pub(crate) fn plan(
    chunk: u64,
    chunks: u64,
    needs: &[(u64, u64)],
    input_bytes: usize,
) -> LaunchPlan {
    let tasks = needs
        .iter()
        .enumerate()
        .map(|(id, &(first, end))| HostTask {
            id: id as u32,
            needs: first * chunk..end * chunk,
            chain: None,
        })
        .collect();
    let inputs = if input_bytes > 0 {
        vec![DeviceInput {
            address: DeviceAddress(0x10_0000),
            bytes: vec![7; input_bytes],
        }]
    } else {
        Vec::new()
    };
    LaunchPlan {
        inputs,
        command: CommandDescriptor {
            result_address: RESULT_ADDRESS,
            result_length: chunks * chunk,
            ..CommandDescriptor::default()
        },
        tasks,
    }
}

/// The device's side of an AXLE ring: writes into the runtime's ring what the device's DMA
/// would (edges D1, D3, D4 of [`crate::ring`]) and its status word.
pub(crate) struct Device {
    layout: RingLayout,
}

impl Device {
    /// A ring of `slots` slots of `slot` bytes for the runtime, and the device's view of it.
    pub(crate) fn ring(slots: u32, slot: u32) -> (AxleRing, Device) {
        let layout = RingLayout::new(slots, slots, slot).expect("a valid layout");
        let memory = Arc::new(PhysicalMemory::new(4 << 20).expect("host memory"));
        let mut allocator = FrameAllocator::new(memory.len());
        let region =
            host_driver::dma::DmaRegion::allocate(memory, &mut allocator, layout.region_length())
                .expect("a DMA region");
        (
            AxleRing::new(region, layout, 1).expect("a programmed ring"),
            Device { layout },
        )
    }

    /// Streams result chunk `chunk` (filled with the byte `chunk`) of launch `tag` as payload
    /// and record `index` into `runtime`'s ring, and publishes the metadata tail `index + 1`.
    pub(crate) fn produce(&self, runtime: &Runtime<'_>, tag: u32, index: u64, chunk: u64) {
        let region = runtime.ring().expect("an AXLE ring").region().device_view();
        let slot_size = self.layout.slot_size();
        let slot = (index % u64::from(self.layout.payload_capacity())) as u32;
        let offset = self
            .layout
            .payload_slot_offset(slot)
            .expect("a payload slot");
        region
            .write_bytes(offset, &vec![chunk as u8; slot_size as usize])
            .expect("payload write");
        let record = MetadataRecord {
            sequence: index,
            result_offset: chunk * u64::from(slot_size),
            payload_slot: slot,
            length: slot_size,
            tag,
            flags: 0,
        };
        region
            .write_bytes(self.layout.metadata_slot_offset(index), record.as_bytes())
            .expect("record write");
        region
            .store_u64(
                self.layout.control_offset() + METADATA_TAIL_OFFSET,
                index + 1,
                Ordering::Release,
            )
            .expect("tail store");
    }

    /// Latches `runtime`'s ring BROKEN with status `code`.
    pub(crate) fn break_ring(&self, runtime: &Runtime<'_>, code: u32) {
        let region = runtime.ring().expect("an AXLE ring").region().device_view();
        region
            .store_u64(
                self.layout.control_offset() + DEVICE_STATUS_OFFSET,
                u64::from(code),
                Ordering::Release,
            )
            .expect("status store");
    }
}
