//! Test doubles for the firmware's HAL (STYLE: `Fake*` doubles are stateful), shared behind
//! the `test-utils` feature (and always built for the crate's own tests), as virtio-queue's
//! `mock` is.
//!
//! | double | what it models | what a test does with it |
//! |--------|----------------|--------------------------|
//! | [`FakeClock`] | the device clock | [`FakeClock::advance`] |
//! | [`FakeDeviceMemory`] | a few MiB of device memory | reads, writes, [`FakeDeviceMemory::flow_control_reads`] (edge D5) |
//! | [`FakeDmaEngine`] | the DMA engine | sees every [`SubmittedRequest`] decoded, completes requests, answers `QueueFull` on demand |
//! | [`FakeComputeUnits`] | CCM units and µthreads | sees the dispatched [`KernelLaunch`], reports item completions in any order |
//! | [`FakeRegisters`] | registers, mailbox, interrupt line | queues [`HostEvent`]s, sees mailbox writes, bulk completions, interrupts |
//! | [`FakeHostMemory`] | host physical memory | sees what the DMA writes of completed requests left there |
//!
//! [`FakeHal`] bundles them and implements every HAL trait. [`TestRegion`] programs a ring
//! region (shadow descriptor and scatter-gather entries) into the fake device memory the way
//! the host driver does, and reads the rings back out of [`FakeHostMemory`]. [`KnnLaunch`]
//! builds a small, real KNN launch whose results are known in advance.
//!
//! When a request is submitted, [`FakeHal`] decodes its descriptor chain
//! ([`decode_request`]) from device memory right away, with the bytes each descriptor points
//! at: the staging cells it names are reused once the request completes, so a later decode
//! could see newer bytes. A test therefore asserts on exactly what the engine would have put
//! on the wire, in chain order.
//!
//! The firmware crate's own test suites live in `firmware/tests/{executor,commands}.rs`. They
//! need this module, which only exists with `cfg(test)` or the `test-utils` feature, and a
//! package cannot dev-depend on itself with a feature. So each suite is compiled twice: here,
//! as a unit-test module (with `crate` imported as `firmware`), so a plain
//! `cargo test -p firmware` runs it; and as an integration test with `--features test-utils`
//! (`required-features` in `Cargo.toml`), which also proves this module's API is usable from
//! outside the crate. The suites therefore use only `firmware::` paths and no inner attributes.

// Test-double code: a violated expectation in a double is a failed test, so panicking on it
// (unwrap, indexing, plain arithmetic on small test numbers) is the point, not a hazard. The
// crate root denies these lints for firmware code outside `cfg(test)`; this module is also
// built by the `test-utils` feature for other crates' tests, hence the explicit allow.
#![allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::panic,
    reason = "test doubles: a violated expectation is a failed test, so panicking is the point"
)]

extern crate std;

use crate::error::FirmwareError;
use crate::hal::{
    Clock, ComputeUnits, DeviceMemory, DmaCompletion, DmaDescriptor, DmaEngine, DmaError, DmaKind,
    DmaRequest, DmaTag, HostEvent, ItemCompletion, KernelLaunch, MemoryFault, Registers,
};
use crate::kernels::{knn, Kernel};
use crate::scratch::ScratchLayout;
use crate::{Firmware, FirmwareConfig, StepOutcome, StreamingFactor};
use core::cell::RefCell;
use core::ops::Range;
use shared_abi::region::{RingLayout, PAGE_SIZE};
use shared_abi::{
    control, device_map, CommandDescriptor, DeviceAddress, FlowControlMessage, HostPhysAddr,
    KernelId, LaunchMode, MetadataRecord, ScatterGatherEntry, ShadowRegionDescriptor, Status,
    Ticks,
};
use std::collections::{BTreeMap, VecDeque};
use std::vec::Vec;
use zerocopy::{FromBytes, IntoBytes};

/// Bytes of device memory a [`FakeHal::new`] has (4 MiB).
pub const DEVICE_MEMORY_BYTES: u64 = 4 << 20;

/// Where [`test_scratch`] puts the firmware's scratch area (above the data a [`KnnLaunch`]
/// uses, below the end of a [`FakeHal::new`]'s memory).
pub const SCRATCH_BASE: DeviceAddress = DeviceAddress(0x30_0000);

/// Host physical address of the lowest page a [`TestRegion`] maps.
pub const HOST_REGION_BASE: u64 = 0x4000_0000;

/// A scratch layout small enough for a few MiB of device memory: 1024 descriptors, 1024
/// staging cells, 4096 result chunks (96 KiB at [`SCRATCH_BASE`]).
pub const fn test_scratch() -> ScratchLayout {
    ScratchLayout {
        base: SCRATCH_BASE,
        descriptor_capacity: 1024,
        staging_capacity: 1024,
        chunk_capacity: 4096,
    }
}

/// A firmware on [`test_scratch`] with the given streaming behaviour.
pub fn test_firmware(streaming_factor: StreamingFactor, out_of_order: bool) -> Firmware {
    Firmware::new(FirmwareConfig {
        scratch: test_scratch(),
        streaming_factor,
        out_of_order,
    })
}

// ---------------------------------------------------------------------------------------------
// Clock
// ---------------------------------------------------------------------------------------------

/// A clock that moves only when the test says so.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FakeClock {
    now: Ticks,
}

impl FakeClock {
    /// A clock at time zero.
    pub const fn new() -> FakeClock {
        FakeClock { now: Ticks::ZERO }
    }

    /// Moves time forward by `by` (saturating: the clock never wraps).
    pub fn advance(&mut self, by: Ticks) {
        self.now = self.now.plus(by);
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Ticks {
        self.now
    }
}

// ---------------------------------------------------------------------------------------------
// Device memory
// ---------------------------------------------------------------------------------------------

/// Device memory as a byte vector. Every read that touches the flow-control block is recorded
/// with the message the block held, so a test can count and check the device's head reads
/// (edge D5).
#[derive(Clone, Debug)]
pub struct FakeDeviceMemory {
    bytes: Vec<u8>,
    flow_control_reads: RefCell<Vec<FlowControlMessage>>,
}

impl FakeDeviceMemory {
    /// `size` bytes of zeroed memory.
    pub fn new(size: usize) -> FakeDeviceMemory {
        FakeDeviceMemory {
            bytes: std::vec![0; size],
            flow_control_reads: RefCell::new(Vec::new()),
        }
    }

    /// The flow-control messages the firmware read, oldest first.
    pub fn flow_control_reads(&self) -> Vec<FlowControlMessage> {
        self.flow_control_reads.borrow().clone()
    }

    /// The last flow-control message the firmware read, if any.
    pub fn last_flow_control_read(&self) -> Option<FlowControlMessage> {
        self.flow_control_reads.borrow().last().copied()
    }

    /// Copies as much of `data` as fits at `address` (set-up from arbitrary input: never
    /// fails, never panics).
    pub fn fill(&mut self, address: u64, data: &[u8]) {
        let Ok(start) = usize::try_from(address) else {
            return;
        };
        let end = start.saturating_add(data.len()).min(self.bytes.len());
        if let (Some(target), Some(source)) = (
            self.bytes.get_mut(start..end),
            data.get(..end.saturating_sub(start)),
        ) {
            target.copy_from_slice(source);
        }
    }

    /// All of device memory.
    pub fn contents(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes of `[address, address + length)`; panics outside memory (a test error).
    pub fn bytes(&self, address: DeviceAddress, length: u64) -> Vec<u8> {
        let mut buffer = std::vec![0; usize::try_from(length).unwrap()];
        self.read(address, &mut buffer)
            .unwrap_or_else(|fault| panic!("test read outside device memory: {fault:?}"));
        buffer
    }

    /// Writes a plain-old-data value; panics outside memory (a test error).
    pub fn put<T: IntoBytes + zerocopy::Immutable>(&mut self, address: DeviceAddress, value: &T) {
        self.write(address, value.as_bytes())
            .unwrap_or_else(|fault| panic!("test write outside device memory: {fault:?}"));
    }

    fn range(&self, address: DeviceAddress, length: usize) -> Result<Range<usize>, MemoryFault> {
        let fault = MemoryFault {
            address,
            length: length as u64,
        };
        let start = usize::try_from(address.0).map_err(|_| fault)?;
        let end = start.checked_add(length).ok_or(fault)?;
        if end > self.bytes.len() {
            return Err(fault);
        }
        Ok(start..end)
    }
}

impl DeviceMemory for FakeDeviceMemory {
    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
        let range = self.range(address, buffer.len())?;
        let block = device_map::FLOW_CONTROL.0..device_map::FLOW_CONTROL.0 + 16;
        if (range.start as u64) < block.end && block.start < range.end as u64 && !buffer.is_empty()
        {
            let start = block.start as usize;
            // A memory too small to hold the whole block has no flow-control block to log.
            if let Some(message) = self
                .bytes
                .get(start..start + 16)
                .and_then(|bytes| FlowControlMessage::read_from_bytes(bytes).ok())
            {
                self.flow_control_reads.borrow_mut().push(message);
            }
        }
        buffer.copy_from_slice(&self.bytes[range]);
        Ok(())
    }

    fn write(&mut self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
        let range = self.range(address, data.len())?;
        self.bytes[range].copy_from_slice(data);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// DMA
// ---------------------------------------------------------------------------------------------

/// One decoded DMA descriptor with the bytes it would put on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DmaWrite {
    /// What the descriptor says it is.
    pub kind: DmaKind,
    /// Device address of the bytes.
    pub source: DeviceAddress,
    /// Host physical address they go to.
    pub destination: HostPhysAddr,
    /// The descriptor's trace index (payload or metadata index, tail value, status code).
    pub index: u64,
    /// The bytes at `source` when the request was submitted (`length` of them).
    pub bytes: Vec<u8>,
}

impl DmaWrite {
    /// The first 8 bytes as a little-endian word: the value a publishing write stores.
    pub fn value(&self) -> u64 {
        let mut word = [0u8; 8];
        let n = self.bytes.len().min(8);
        word[..n].copy_from_slice(&self.bytes[..n]);
        u64::from_le_bytes(word)
    }

    /// The metadata record a [`DmaKind::Metadata`] write carries.
    pub fn record(&self) -> Option<MetadataRecord> {
        (self.kind == DmaKind::Metadata)
            .then(|| MetadataRecord::read_from_bytes(&self.bytes).ok())
            .flatten()
    }
}

/// Why a submitted chain could not be decoded (what a real engine would reject).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainError {
    /// Descriptor `offset` of the request lies outside device memory.
    DescriptorUnreadable {
        /// Position in the chain.
        offset: u32,
    },
    /// Descriptor `offset` has an unknown kind.
    UnknownKind {
        /// Position in the chain.
        offset: u32,
        /// The kind word.
        kind: u32,
    },
    /// Descriptor `offset` reads bytes outside device memory.
    SourceOutsideMemory {
        /// Position in the chain.
        offset: u32,
        /// The descriptor.
        descriptor: DmaDescriptor,
    },
}

/// Decodes `request`'s chain from `memory`: descriptor `i` at `ring_base + ((first + i) %
/// ring_capacity) * 32`, and the bytes each one names.
pub fn decode_request<M: DeviceMemory>(
    memory: &M,
    request: &DmaRequest,
) -> Result<Vec<DmaWrite>, ChainError> {
    let mut writes = Vec::new();
    for offset in 0..request.count {
        let address = ScratchLayout::cell(
            request.ring_base,
            request.first.wrapping_add(u64::from(offset)),
            request.ring_capacity,
            32,
        );
        let descriptor: DmaDescriptor = memory
            .read_value(address)
            .map_err(|_| ChainError::DescriptorUnreadable { offset })?;
        let kind = DmaKind::try_from(descriptor.kind).map_err(|_| ChainError::UnknownKind {
            offset,
            kind: descriptor.kind,
        })?;
        let mut bytes = std::vec![0; descriptor.length as usize];
        memory
            .read(DeviceAddress(descriptor.source), &mut bytes)
            .map_err(|_| ChainError::SourceOutsideMemory { offset, descriptor })?;
        writes.push(DmaWrite {
            kind,
            source: DeviceAddress(descriptor.source),
            destination: HostPhysAddr(descriptor.destination),
            index: descriptor.index,
            bytes,
        });
    }
    Ok(writes)
}

/// A request the firmware submitted, decoded at submission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubmittedRequest {
    /// The tag the engine gave it.
    pub tag: DmaTag,
    /// The request as submitted.
    pub request: DmaRequest,
    /// When.
    pub submitted_at: Ticks,
    /// Its chain, or why it cannot be decoded.
    pub chain: Result<Vec<DmaWrite>, ChainError>,
    /// Whether the test completed it (and with which status).
    pub completed: Option<Status>,
}

impl SubmittedRequest {
    /// The decoded chain; panics (failing the test) when it could not be decoded.
    pub fn writes(&self) -> &[DmaWrite] {
        match &self.chain {
            Ok(writes) => writes,
            Err(error) => panic!("request {:?} has an undecodable chain: {error:?}", self.tag),
        }
    }

    /// The writes of one kind, in chain order.
    pub fn writes_of(&self, kind: DmaKind) -> impl Iterator<Item = &DmaWrite> {
        self.writes().iter().filter(move |write| write.kind == kind)
    }

    /// The metadata records the request carries, in chain order.
    pub fn records(&self) -> Vec<MetadataRecord> {
        self.writes().iter().filter_map(DmaWrite::record).collect()
    }

    /// The value of the last metadata-tail write (edge D4), if any.
    pub fn published_metadata_tail(&self) -> Option<u64> {
        self.writes_of(DmaKind::MetadataTail)
            .last()
            .map(DmaWrite::value)
    }
}

/// The DMA engine's state: every submitted request (history) and the ones not completed yet.
#[derive(Debug, Default)]
pub struct FakeDmaEngine {
    next_tag: u64,
    submitted: Vec<SubmittedRequest>,
    outstanding: VecDeque<usize>,
    completions: VecDeque<DmaCompletion>,
    refuse_next: u32,
    queue_depth: Option<usize>,
    refusals: u64,
}

impl FakeDmaEngine {
    /// Every request submitted so far, oldest first.
    pub fn submitted(&self) -> &[SubmittedRequest] {
        &self.submitted
    }

    /// Requests submitted but not completed by the test.
    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }

    /// Answers the next `count` submissions with [`DmaError::QueueFull`].
    pub fn refuse_next(&mut self, count: u32) {
        self.refuse_next = count;
    }

    /// Answers [`DmaError::QueueFull`] while `depth` requests are outstanding (`None`:
    /// unlimited): an engine of `depth` channels and no queue beyond them, like the
    /// emulator's.
    pub fn set_queue_depth(&mut self, depth: Option<usize>) {
        self.queue_depth = depth;
    }

    /// Submissions answered with [`DmaError::QueueFull`] so far.
    pub fn refusals(&self) -> u64 {
        self.refusals
    }

    /// Every write of every submitted request, in submission and chain order.
    pub fn all_writes(&self) -> Vec<DmaWrite> {
        self.submitted
            .iter()
            .flat_map(|request| request.writes().iter().cloned())
            .collect()
    }

    /// The requests that carry payloads (everything but device-status publications).
    pub fn payload_requests(&self) -> Vec<&SubmittedRequest> {
        self.submitted
            .iter()
            .filter(|request| request.request.payloads > 0)
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Compute units
// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
struct Running {
    launch: KernelLaunch,
    kernel: Option<Kernel>,
    finished: Vec<bool>,
}

/// The CCM: records dispatched launches; the test reports item completions.
#[derive(Debug)]
pub struct FakeComputeUnits {
    launches: Vec<KernelLaunch>,
    running: Option<Running>,
    completions: VecDeque<ItemCompletion>,
    /// Status [`ComputeUnits::dispatch`] answers with instead of starting (`None`: start).
    pub refuse_dispatch: Option<FirmwareError>,
    /// Whether [`FakeHal::finish_items`] runs the real kernel code of each item (default
    /// `true`), so the result space holds the real answer.
    pub execute_kernels: bool,
}

impl Default for FakeComputeUnits {
    fn default() -> Self {
        FakeComputeUnits {
            launches: Vec::new(),
            running: None,
            completions: VecDeque::new(),
            refuse_dispatch: None,
            execute_kernels: true,
        }
    }
}

impl FakeComputeUnits {
    /// Every launch dispatched so far.
    pub fn launches(&self) -> &[KernelLaunch] {
        &self.launches
    }

    /// The launch the units run now (the last dispatched).
    pub fn current(&self) -> Option<KernelLaunch> {
        self.running.as_ref().map(|running| running.launch)
    }

    /// Items of the current launch not reported yet.
    pub fn unfinished_items(&self) -> Vec<u32> {
        self.running.as_ref().map_or_else(Vec::new, |running| {
            running
                .launch
                .item_range()
                .filter(|&item| !running.finished[item as usize])
                .collect()
        })
    }

    /// Queues a raw completion (for tests of what the HAL contract forbids).
    pub fn push_completion(&mut self, completion: ItemCompletion) {
        self.completions.push_back(completion);
    }
}

// ---------------------------------------------------------------------------------------------
// Registers
// ---------------------------------------------------------------------------------------------

/// A bulk-synchronous launch response the firmware sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkCompletion {
    /// The launch tag.
    pub tag: u32,
    /// Its status.
    pub status: Status,
}

/// Registers: host events queued by the test, and everything the firmware signalled back.
#[derive(Debug, Default)]
pub struct FakeRegisters {
    events: VecDeque<HostEvent>,
    mailbox: BTreeMap<u64, u64>,
    mailbox_writes: Vec<(u64, u64)>,
    bulk_completions: Vec<BulkCompletion>,
    interrupts: Vec<u64>,
}

impl FakeRegisters {
    /// Queues a host event.
    pub fn push_event(&mut self, event: HostEvent) {
        self.events.push_back(event);
    }

    /// Host events not taken yet.
    pub fn pending_events(&self) -> usize {
        self.events.len()
    }

    /// The current value of a mailbox register (0 if never written).
    pub fn mailbox(&self, offset: u64) -> u64 {
        self.mailbox.get(&offset).copied().unwrap_or(0)
    }

    /// Every mailbox write, oldest first: `(offset, value)`.
    pub fn mailbox_writes(&self) -> &[(u64, u64)] {
        &self.mailbox_writes
    }

    /// Every bulk completion, oldest first.
    pub fn bulk_completions(&self) -> &[BulkCompletion] {
        &self.bulk_completions
    }

    /// Every interrupt message, oldest first.
    pub fn interrupts(&self) -> &[u64] {
        &self.interrupts
    }
}

impl Registers for FakeRegisters {
    fn take_event(&mut self) -> Option<HostEvent> {
        self.events.pop_front()
    }

    fn write_mailbox(&mut self, offset: u64, value: u64) {
        self.mailbox.insert(offset, value);
        self.mailbox_writes.push((offset, value));
    }

    fn complete_bulk_launch(&mut self, tag: u32, status: Status) {
        self.bulk_completions.push(BulkCompletion { tag, status });
    }

    fn raise_interrupt(&mut self, message: u64) {
        self.interrupts.push(message);
    }
}

// ---------------------------------------------------------------------------------------------
// Host memory
// ---------------------------------------------------------------------------------------------

/// Host physical memory as a sparse byte map (unwritten bytes read as zero). The writes of a
/// request land here, in chain order, when the test completes it with [`Status::Ok`].
#[derive(Debug, Default)]
pub struct FakeHostMemory {
    bytes: BTreeMap<u64, u8>,
}

impl FakeHostMemory {
    /// Writes `data` at `address`.
    pub fn write(&mut self, address: HostPhysAddr, data: &[u8]) {
        for (i, byte) in data.iter().enumerate() {
            self.bytes.insert(address.0 + i as u64, *byte);
        }
    }

    /// Reads `length` bytes at `address`.
    pub fn read(&self, address: HostPhysAddr, length: u64) -> Vec<u8> {
        (0..length)
            .map(|i| self.bytes.get(&(address.0 + i)).copied().unwrap_or(0))
            .collect()
    }

    /// Reads a little-endian `u64` at `address`.
    pub fn read_u64(&self, address: HostPhysAddr) -> u64 {
        u64::from_le_bytes(self.read(address, 8).try_into().unwrap())
    }

    /// Lands one DMA write.
    pub fn apply(&mut self, write: &DmaWrite) {
        self.write(write.destination, &write.bytes);
    }
}

// ---------------------------------------------------------------------------------------------
// The HAL
// ---------------------------------------------------------------------------------------------

/// Every fake, implementing [`crate::hal::Hal`].
#[derive(Debug)]
pub struct FakeHal {
    /// The clock.
    pub clock: FakeClock,
    /// Device memory.
    pub memory: FakeDeviceMemory,
    /// The DMA engine.
    pub dma: FakeDmaEngine,
    /// The compute units.
    pub compute: FakeComputeUnits,
    /// Registers and signals.
    pub registers: FakeRegisters,
    /// Host memory, where completed DMA requests land.
    pub host: FakeHostMemory,
}

impl Default for FakeHal {
    fn default() -> Self {
        FakeHal::new()
    }
}

impl FakeHal {
    /// A HAL with [`DEVICE_MEMORY_BYTES`] of device memory.
    pub fn new() -> FakeHal {
        FakeHal::with_memory(DEVICE_MEMORY_BYTES as usize)
    }

    /// A HAL with `bytes` of device memory.
    pub fn with_memory(bytes: usize) -> FakeHal {
        FakeHal {
            clock: FakeClock::new(),
            memory: FakeDeviceMemory::new(bytes),
            dma: FakeDmaEngine::default(),
            compute: FakeComputeUnits::default(),
            registers: FakeRegisters::default(),
            host: FakeHostMemory::default(),
        }
    }

    /// Queues a host event.
    pub fn push_event(&mut self, event: HostEvent) {
        self.registers.push_event(event);
    }

    /// A launch store (BS or AXLE) arrives through the launch window.
    pub fn launch_store(&mut self, command: CommandDescriptor) {
        self.push_event(HostEvent::LaunchStore(command));
    }

    /// The host stores new heads into the flow-control block (a CXL.mem store) and the
    /// firmware is told the store landed.
    pub fn send_heads(&mut self, metadata_head: u64, payload_head: u64) {
        self.memory.put(
            device_map::FLOW_CONTROL,
            &FlowControlMessage {
                metadata_head,
                payload_head,
            },
        );
        self.push_event(HostEvent::FlowControl);
    }

    /// Reports `items` of the current launch finished, in the given order. With
    /// [`FakeComputeUnits::execute_kernels`], each item's real kernel code runs first and its
    /// status is reported. Panics (a test error) on an item reported twice or out of range.
    pub fn finish_items(&mut self, items: impl IntoIterator<Item = u32>) {
        for item in items {
            let running = self.compute.running.as_mut().expect("no launch dispatched");
            assert!(
                running.launch.item_range().contains(&item),
                "item {item} out of range"
            );
            assert!(
                !running.finished[item as usize],
                "item {item} reported twice"
            );
            running.finished[item as usize] = true;
            let tag = running.launch.command.tag;
            let outcome = match (self.compute.execute_kernels, running.kernel) {
                (true, Some(kernel)) => kernel.execute(item, &mut self.memory),
                _ => Ok(()),
            };
            self.compute
                .completions
                .push_back(ItemCompletion { tag, item, outcome });
        }
    }

    /// Reports `items` failed with `error`, without running kernel code.
    pub fn finish_items_with_error(
        &mut self,
        items: impl IntoIterator<Item = u32>,
        error: FirmwareError,
    ) {
        for item in items {
            let running = self.compute.running.as_mut().expect("no launch dispatched");
            assert!(
                running.launch.item_range().contains(&item),
                "item {item} out of range"
            );
            assert!(
                !running.finished[item as usize],
                "item {item} reported twice"
            );
            running.finished[item as usize] = true;
            let tag = running.launch.command.tag;
            self.compute.completions.push_back(ItemCompletion {
                tag,
                item,
                outcome: Err(error),
            });
        }
    }

    /// Reports every unfinished item of the current launch, in index order.
    pub fn finish_all_items(&mut self) {
        let items = self.compute.unfinished_items();
        self.finish_items(items);
    }

    /// Completes the oldest outstanding request with `status`; with [`Status::Ok`] its writes
    /// land in host memory in chain order. Returns its tag, `None` when nothing is outstanding.
    pub fn complete_next_dma(&mut self, status: Status) -> Option<DmaTag> {
        let position = self.dma.outstanding.pop_front()?;
        let request = &mut self.dma.submitted[position];
        request.completed = Some(status);
        if status == Status::Ok {
            for write in request.writes() {
                self.host.apply(write);
            }
        }
        let tag = request.tag;
        self.dma
            .completions
            .push_back(DmaCompletion { tag, status });
        Some(tag)
    }

    /// Reports a completion for `tag` without completing any request: a DMA engine that
    /// breaks the HAL's contract (completions in submission order, one per request).
    pub fn report_spurious_dma_completion(&mut self, tag: DmaTag) {
        self.dma.completions.push_back(DmaCompletion {
            tag,
            status: Status::Ok,
        });
    }

    /// Completes up to `count` of the oldest outstanding requests successfully; returns how
    /// many.
    pub fn complete_dma(&mut self, count: usize) -> usize {
        (0..count)
            .take_while(|_| self.complete_next_dma(Status::Ok).is_some())
            .count()
    }

    /// Completes every outstanding request successfully; returns how many.
    pub fn complete_all_dma(&mut self) -> usize {
        self.complete_dma(usize::MAX)
    }

    /// Steps `firmware`, completing every DMA request it submits, until it submits nothing
    /// more and no event, completion or item is pending (at most `rounds` steps). Returns the
    /// last step's outcome.
    pub fn settle(&mut self, firmware: &mut Firmware, rounds: usize) -> StepOutcome {
        let mut outcome = firmware.step(self);
        for _ in 0..rounds {
            if self.complete_all_dma() == 0
                && self.registers.events.is_empty()
                && self.compute.completions.is_empty()
                && self.dma.completions.is_empty()
            {
                break;
            }
            outcome = firmware.step(self);
        }
        outcome
    }
}

impl Clock for FakeHal {
    fn now(&self) -> Ticks {
        self.clock.now()
    }
}

impl DeviceMemory for FakeHal {
    fn size(&self) -> u64 {
        self.memory.size()
    }
    fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
        self.memory.read(address, buffer)
    }
    fn write(&mut self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
        self.memory.write(address, data)
    }
}

impl DmaEngine for FakeHal {
    fn submit(&mut self, request: DmaRequest) -> Result<DmaTag, DmaError> {
        let dma = &mut self.dma;
        if dma.refuse_next > 0
            || dma
                .queue_depth
                .is_some_and(|depth| dma.outstanding.len() >= depth)
        {
            dma.refuse_next = dma.refuse_next.saturating_sub(1);
            dma.refusals += 1;
            return Err(DmaError::QueueFull);
        }
        let tag = DmaTag(dma.next_tag);
        dma.next_tag += 1;
        let chain = decode_request(&self.memory, &request);
        let dma = &mut self.dma;
        dma.outstanding.push_back(dma.submitted.len());
        dma.submitted.push(SubmittedRequest {
            tag,
            request,
            submitted_at: self.clock.now(),
            chain,
            completed: None,
        });
        Ok(tag)
    }

    fn poll_completion(&mut self) -> Option<DmaCompletion> {
        self.dma.completions.pop_front()
    }
}

impl ComputeUnits for FakeHal {
    fn dispatch(&mut self, launch: KernelLaunch) -> Result<(), FirmwareError> {
        if let Some(status) = self.compute.refuse_dispatch {
            return Err(status);
        }
        let mut command = launch.command;
        command.flags = 0;
        let kernel = Kernel::decode(&command, &self.memory).ok();
        self.compute.launches.push(launch);
        self.compute.running = Some(Running {
            launch,
            kernel,
            finished: std::vec![false; launch.item_range().end as usize],
        });
        Ok(())
    }

    fn poll_item(&mut self) -> Option<ItemCompletion> {
        self.compute.completions.pop_front()
    }
}

impl Registers for FakeHal {
    fn take_event(&mut self) -> Option<HostEvent> {
        self.registers.take_event()
    }
    fn write_mailbox(&mut self, offset: u64, value: u64) {
        self.registers.write_mailbox(offset, value);
    }
    fn complete_bulk_launch(&mut self, tag: u32, status: Status) {
        self.registers.complete_bulk_launch(tag, status);
    }
    fn raise_interrupt(&mut self, message: u64) {
        self.registers.raise_interrupt(message);
    }
}

// ---------------------------------------------------------------------------------------------
// Ring region
// ---------------------------------------------------------------------------------------------

/// Where a host physical address falls in a [`TestRegion`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionPlace {
    /// In the control block, at `offset`.
    Control {
        /// Byte offset in the control block.
        offset: u64,
    },
    /// In metadata slot `slot`.
    MetadataSlot {
        /// The slot.
        slot: u64,
        /// Byte offset in the record.
        within: u64,
    },
    /// In payload slot `slot`.
    PayloadSlot {
        /// The slot.
        slot: u32,
        /// Byte offset in the slot.
        within: u64,
    },
    /// In the region but in no ring (padding).
    Unused,
    /// Not in the region.
    Outside,
}

/// A host DMA region as the host driver would program it: a canonical [`RingLayout`] whose
/// pages are scattered over host physical memory (page `i` of `n` at
/// `HOST_REGION_BASE + 2 * (n - 1 - i) * 4096`: reverse order, with holes), so a translation
/// mistake lands visibly elsewhere.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestRegion {
    layout: RingLayout,
    epoch: u64,
    entries: Vec<ScatterGatherEntry>,
}

impl TestRegion {
    /// A region of `metadata_capacity` records and `payload_capacity` slots of `slot_size`
    /// bytes; panics on a layout the ABI refuses (a test error).
    pub fn new(metadata_capacity: u32, payload_capacity: u32, slot_size: u32) -> TestRegion {
        let layout = RingLayout::new(metadata_capacity, payload_capacity, slot_size)
            .expect("valid test layout");
        let pages = layout.region_length() / PAGE_SIZE;
        let entries = (0..pages)
            .map(|page| ScatterGatherEntry {
                host_phys: HOST_REGION_BASE + 2 * (pages - 1 - page) * PAGE_SIZE,
                length: PAGE_SIZE,
            })
            .collect();
        TestRegion {
            layout,
            epoch: 1,
            entries,
        }
    }

    /// The layout.
    pub fn layout(&self) -> &RingLayout {
        &self.layout
    }

    /// The scatter-gather entries.
    pub fn entries(&self) -> &[ScatterGatherEntry] {
        &self.entries
    }

    /// The shadow descriptor the driver would store.
    pub fn descriptor(&self) -> ShadowRegionDescriptor {
        self.layout
            .descriptor(self.epoch, self.entries.len() as u32)
    }

    /// Programs the region the way `host_driver::shadow::shadow_stores` does (header cleared,
    /// entries, header last) into `hal`'s device memory, then signals
    /// [`HostEvent::RegionProgrammed`].
    pub fn program(&self, hal: &mut FakeHal) {
        hal.memory.put(
            device_map::SHADOW_DESCRIPTOR,
            &ShadowRegionDescriptor::default(),
        );
        hal.memory
            .write(device_map::SHADOW_ENTRIES, self.entries.as_bytes())
            .unwrap();
        hal.memory
            .put(device_map::SHADOW_DESCRIPTOR, &self.descriptor());
        hal.push_event(HostEvent::RegionProgrammed);
    }

    /// The host physical address of `region_offset`; panics outside the region.
    pub fn host_address(&self, region_offset: u64) -> HostPhysAddr {
        let page = region_offset / PAGE_SIZE;
        let entry = self.entries[page as usize];
        HostPhysAddr(entry.host_phys + region_offset % PAGE_SIZE)
    }

    /// The region offset of a host physical address, if it lies in the region.
    pub fn region_offset(&self, address: HostPhysAddr) -> Option<u64> {
        self.entries.iter().enumerate().find_map(|(page, entry)| {
            (address.0 >= entry.host_phys && address.0 < entry.host_phys + entry.length)
                .then(|| page as u64 * PAGE_SIZE + (address.0 - entry.host_phys))
        })
    }

    /// Where `address` falls.
    pub fn place(&self, address: HostPhysAddr) -> RegionPlace {
        let Some(offset) = self.region_offset(address) else {
            return RegionPlace::Outside;
        };
        let layout = &self.layout;
        let metadata_end = layout.metadata_offset() + u64::from(layout.metadata_capacity()) * 32;
        let slot_size = u64::from(layout.slot_size());
        let payload_end =
            layout.payload_offset() + u64::from(layout.payload_capacity()) * slot_size;
        if offset < 3 * control::RING_LINE as u64 {
            RegionPlace::Control { offset }
        } else if offset >= layout.metadata_offset() && offset < metadata_end {
            let into = offset - layout.metadata_offset();
            RegionPlace::MetadataSlot {
                slot: into / 32,
                within: into % 32,
            }
        } else if offset >= layout.payload_offset() && offset < payload_end {
            let into = offset - layout.payload_offset();
            RegionPlace::PayloadSlot {
                slot: (into / slot_size) as u32,
                within: into % slot_size,
            }
        } else {
            RegionPlace::Unused
        }
    }

    /// Host address of a control-block word.
    pub fn control_word(&self, offset: u64) -> HostPhysAddr {
        self.host_address(self.layout.control_offset() + offset)
    }

    /// The metadata tail the device published into host memory.
    pub fn metadata_tail(&self, host: &FakeHostMemory) -> u64 {
        host.read_u64(self.control_word(control::METADATA_TAIL_OFFSET))
    }

    /// The payload tail the device published into host memory.
    pub fn payload_tail(&self, host: &FakeHostMemory) -> u64 {
        host.read_u64(self.control_word(control::PAYLOAD_TAIL_OFFSET))
    }

    /// The device status word in host memory (0: healthy).
    pub fn device_status(&self, host: &FakeHostMemory) -> u32 {
        host.read_u64(self.control_word(control::DEVICE_STATUS_OFFSET)) as u32
    }

    /// The record in the slot of metadata index `index`, as host memory holds it.
    pub fn record(&self, host: &FakeHostMemory, index: u64) -> MetadataRecord {
        let bytes = host.read(
            self.host_address(self.layout.metadata_slot_offset(index)),
            32,
        );
        MetadataRecord::read_from_bytes(&bytes).unwrap()
    }

    /// `length` bytes of payload slot `slot`, as host memory holds them.
    pub fn payload(&self, host: &FakeHostMemory, slot: u32, length: u64) -> Vec<u8> {
        let offset = self
            .layout
            .payload_slot_offset(slot)
            .expect("slot inside the ring");
        host.read(self.host_address(offset), length)
    }
}

// ---------------------------------------------------------------------------------------------
// A small KNN launch
// ---------------------------------------------------------------------------------------------

/// A KNN distance launch laid out in device data memory, with inputs whose every distance is
/// different, so each result byte tells where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnnLaunch {
    /// Database vectors.
    pub rows: u32,
    /// Elements per vector (a multiple of 16).
    pub dim: u32,
    /// Query vectors.
    pub queries: u32,
    /// Device address of the database.
    pub database: DeviceAddress,
    /// Device address of the queries.
    pub query_vectors: DeviceAddress,
    /// Device address of the result space.
    pub result: DeviceAddress,
}

impl KnnLaunch {
    /// A launch whose database starts at [`device_map::DATA_BASE`], followed by the queries
    /// and then (page-aligned) the result space.
    pub fn new(rows: u32, dim: u32, queries: u32) -> KnnLaunch {
        let vector = u64::from(dim) * 4;
        let database = device_map::DATA_BASE;
        let query_vectors = DeviceAddress(database.0 + vector * u64::from(rows));
        let inputs_end = query_vectors.0 + vector * u64::from(queries);
        let result = DeviceAddress(inputs_end.div_ceil(4096) * 4096);
        KnnLaunch {
            rows,
            dim,
            queries,
            database,
            query_vectors,
            result,
        }
    }

    /// The same launch with its result space at `result`.
    pub fn with_result_at(self, result: DeviceAddress) -> KnnLaunch {
        KnnLaunch { result, ..self }
    }

    /// Work items (one per (query, row)).
    pub fn items(&self) -> u32 {
        self.rows * self.queries
    }

    /// Bytes of result (4 per item).
    pub fn result_length(&self) -> u64 {
        u64::from(self.items()) * 4
    }

    /// Slot-sized chunks of the result space.
    pub fn chunks(&self, slot_size: u32) -> u32 {
        self.result_length().div_ceil(u64::from(slot_size)) as u32
    }

    /// The items whose results lie in chunk `chunk` (slot size a multiple of 4).
    pub fn items_in_chunk(&self, chunk: u32, slot_size: u32) -> Range<u32> {
        let per_chunk = slot_size / 4;
        let start = chunk * per_chunk;
        start.min(self.items())..(start + per_chunk).min(self.items())
    }

    /// The command for this launch.
    pub fn command(&self, mode: LaunchMode, tag: u32) -> CommandDescriptor {
        CommandDescriptor {
            kernel: KernelId::KnnDistance as u32,
            mode: mode as u32,
            tag,
            flags: 0,
            result_address: self.result.0,
            result_length: self.result_length(),
            args: [
                self.database.0,
                self.query_vectors.0,
                knn::pack_shape(self.rows, self.dim),
                u64::from(self.queries),
            ],
        }
    }

    fn database_vector(&self, row: u32) -> Vec<f32> {
        (0..self.dim)
            .map(|j| row as f32 + 0.25 * j as f32 / self.dim as f32)
            .collect()
    }

    fn query_vector(&self, query: u32) -> Vec<f32> {
        (0..self.dim)
            .map(|j| -0.5 * query as f32 - (j % 3) as f32)
            .collect()
    }

    /// Writes the inputs into device memory.
    pub fn write_inputs(&self, memory: &mut FakeDeviceMemory) {
        let vector = u64::from(self.dim) * 4;
        for row in 0..self.rows {
            let bytes: Vec<u8> = self
                .database_vector(row)
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect();
            memory
                .write(
                    DeviceAddress(self.database.0 + vector * u64::from(row)),
                    &bytes,
                )
                .unwrap();
        }
        for query in 0..self.queries {
            let bytes: Vec<u8> = self
                .query_vector(query)
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect();
            memory
                .write(
                    DeviceAddress(self.query_vectors.0 + vector * u64::from(query)),
                    &bytes,
                )
                .unwrap();
        }
    }

    /// The whole result space as the kernel must write it (the plain reference).
    pub fn expected_result(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        for query in 0..self.queries {
            let q = self.query_vector(query);
            for row in 0..self.rows {
                let distance = knn::squared_distance(&self.database_vector(row), &q);
                bytes.extend_from_slice(&distance.to_le_bytes());
            }
        }
        bytes
    }
}

// ---------------------------------------------------------------------------------------------
// An AXLE streaming fixture
// ---------------------------------------------------------------------------------------------

/// A firmware streaming one [`KnnLaunch`] into one [`TestRegion`] on a [`FakeHal`].
#[derive(Debug)]
pub struct AxleBench {
    /// The hardware.
    pub hal: FakeHal,
    /// The firmware under test.
    pub firmware: Firmware,
    /// The programmed region.
    pub region: TestRegion,
    /// The launch.
    pub launch: KnnLaunch,
    /// The launch tag.
    pub tag: u32,
}

impl AxleBench {
    /// Programs `region`, writes `launch`'s inputs and lets the firmware load the region (one
    /// step). Nothing is launched yet.
    pub fn new(
        region: TestRegion,
        launch: KnnLaunch,
        streaming_factor: StreamingFactor,
        out_of_order: bool,
    ) -> AxleBench {
        let mut hal = FakeHal::new();
        let mut firmware = test_firmware(streaming_factor, out_of_order);
        launch.write_inputs(&mut hal.memory);
        region.program(&mut hal);
        firmware.step(&mut hal);
        AxleBench {
            hal,
            firmware,
            region,
            launch,
            tag: 0x5a,
        }
    }

    /// The AXLE command of the launch, with `flags`.
    pub fn command(&self, flags: shared_abi::command::CommandFlags) -> CommandDescriptor {
        let mut command = self.launch.command(LaunchMode::BackStreaming, self.tag);
        command.flags = flags.bits();
        command
    }

    /// Stores the AXLE launch (with `flags`) and steps once; panics when the firmware does
    /// not dispatch it.
    pub fn start(&mut self, flags: shared_abi::command::CommandFlags) {
        self.hal.launch_store(self.command(flags));
        self.firmware.step(&mut self.hal);
        assert_eq!(
            self.hal.compute.current().map(|launch| launch.items),
            Some(self.launch.items()),
            "the AXLE launch was not dispatched"
        );
    }

    /// The payload slot size of the region.
    pub fn slot_size(&self) -> u32 {
        self.region.layout().slot_size()
    }

    /// Chunks of the launch's result space.
    pub fn chunks(&self) -> u32 {
        self.launch.chunks(self.slot_size())
    }

    /// Reports every item of each of `chunks` finished (chunk by chunk, items in order).
    pub fn finish_chunks(&mut self, chunks: impl IntoIterator<Item = u32>) {
        let slot_size = self.slot_size();
        for chunk in chunks {
            let items = self.launch.items_in_chunk(chunk, slot_size);
            self.hal.finish_items(items);
        }
    }

    /// One firmware step.
    pub fn step(&mut self) -> StepOutcome {
        self.firmware.step(&mut self.hal)
    }

    /// Every metadata record submitted so far, in submission and chain order.
    pub fn records(&self) -> Vec<MetadataRecord> {
        self.hal
            .dma
            .submitted()
            .iter()
            .flat_map(SubmittedRequest::records)
            .collect()
    }

    /// The result offsets of every record submitted so far, in order.
    pub fn streamed_offsets(&self) -> Vec<u64> {
        self.records()
            .iter()
            .map(|record| record.result_offset)
            .collect()
    }

    /// Payloads per submitted payload request, in order.
    pub fn payloads_per_request(&self) -> Vec<u32> {
        self.hal
            .dma
            .payload_requests()
            .iter()
            .map(|request| request.request.payloads)
            .collect()
    }
}

#[cfg(test)]
mod executor_suite {
    use crate as firmware;
    include!("../tests/executor.rs");
}

#[cfg(test)]
mod commands_suite {
    use crate as firmware;
    include!("../tests/commands.rs");
}
