//! The hardware abstraction layer: everything the firmware needs from the device, as small
//! capability traits that the firmware defines and never implements.
//!
//! Porting the firmware to an FPGA or ASIC prototype starts with implementing [`Hal`] (one crate
//! that holds the MMIO `unsafe`); the port also provides the main loop that calls
//! [`crate::Firmware::step`], the device memory map of `shared_abi::device_map` (the launch
//! window, the flow-control block, the scratch area), the doorbell and DMA-completion events,
//! and the write ordering the [`DmaEngine`] docs require. Today's kernels also assume that one
//! work item at a time writes device memory ([`DeviceMemory::write`] takes `&mut self`): a port
//! that runs items on many µthreads at once must serialise their writes (the HAL has no
//! device-memory atomics yet). The emulator implements the HAL on its cycle-timed model.
//! Every method is non-blocking: the firmware is driven by [`crate::Firmware::step`] from the
//! board's main loop or the emulator's event queue, and never waits inside a call.

use crate::error::FirmwareError;
use shared_abi::{DeviceAddress, Status, Ticks};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// The device clock.
pub trait Clock {
    /// The current time. MUST be monotonic and never wrap.
    fn now(&self) -> Ticks;
}

/// An access outside device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryFault {
    /// First byte of the access.
    pub address: DeviceAddress,
    /// Bytes of the access.
    pub length: u64,
}

/// The device's own memory (the HDM range), as the firmware and kernels see it.
pub trait DeviceMemory {
    /// Bytes of device memory.
    fn size(&self) -> u64;
    /// Copies `buffer.len()` bytes at `address` into `buffer`. MUST fail, touching nothing, when
    /// any byte lies outside device memory.
    fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault>;
    /// Writes `data` at `address`. MUST fail, touching nothing, when any byte lies outside.
    fn write(&mut self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault>;

    /// Reads a plain-old-data value.
    fn read_value<T: FromBytes + IntoBytes + KnownLayout + Immutable>(
        &self,
        address: DeviceAddress,
    ) -> Result<T, MemoryFault> {
        let mut value = T::new_zeroed();
        self.read(address, value.as_mut_bytes())?;
        Ok(value)
    }
}

/// What one DMA descriptor asks the engine to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum DmaKind {
    /// Payload data (edge D1): plain stores.
    Payload = 1,
    /// A metadata record (edge D3): plain stores.
    Metadata = 2,
    /// The metadata tail (edge D4): one aligned 8-byte store with release semantics, ordered
    /// after every write before it in the chain.
    MetadataTail = 3,
    /// The payload tail (edge D2): likewise.
    PayloadTail = 4,
    /// The ring's device status word (latching BROKEN): likewise.
    DeviceStatus = 5,
}

impl DmaKind {
    /// Whether the write publishes an index (a release store) rather than plain data.
    pub const fn publishes(self) -> bool {
        matches!(
            self,
            DmaKind::MetadataTail | DmaKind::PayloadTail | DmaKind::DeviceStatus
        )
    }
}

impl TryFrom<u32> for DmaKind {
    type Error = FirmwareError;
    fn try_from(value: u32) -> Result<Self, FirmwareError> {
        Ok(match value {
            1 => DmaKind::Payload,
            2 => DmaKind::Metadata,
            3 => DmaKind::MetadataTail,
            4 => DmaKind::PayloadTail,
            5 => DmaKind::DeviceStatus,
            _ => return Err(FirmwareError::MalformedDescriptor),
        })
    }
}

/// One DMA descriptor, as the firmware writes it into its descriptor ring in device memory:
/// copy `length` bytes from device memory at `source` to host physical memory at
/// `destination`. The engine MUST perform the writes of one request in chain order, and a
/// publishing write ([`DmaKind::publishes`]) MUST NOT become visible before any earlier write
/// of the chain (PCIe posted-write ordering with Relaxed Ordering off).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct DmaDescriptor {
    /// Device address of the bytes to send.
    pub source: u64,
    /// Host physical address to write.
    pub destination: u64,
    /// Bytes to copy; a multiple of 8, at most one payload slot.
    pub length: u32,
    /// [`DmaKind`] as `u32`.
    pub kind: u32,
    /// The payload ring index (for payload and payload-tail writes) or metadata index (for
    /// metadata writes), for traces.
    pub index: u64,
}

const _: () = assert!(core::mem::size_of::<DmaDescriptor>() == 32);

/// A request: `count` descriptors of the firmware's descriptor ring starting at `first`
/// (descriptor `i` is at `ring_base + (i % ring_capacity) * 32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaRequest {
    /// Device address of descriptor slot 0 of the ring.
    pub ring_base: DeviceAddress,
    /// Descriptor slots in the ring.
    pub ring_capacity: u32,
    /// Free-running index of the first descriptor.
    pub first: u64,
    /// Descriptors in the request.
    pub count: u32,
    /// Payloads carried (for statistics: one interrupt per request in interrupt mode).
    pub payloads: u32,
}

/// A DMA engine refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DmaError {
    /// The engine cannot take a request now (every channel busy, or its request queue full);
    /// try again after a completion.
    QueueFull,
}

/// Identifies a submitted request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DmaTag(pub u64);

/// A finished request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaCompletion {
    /// The request's tag.
    pub tag: DmaTag,
    /// [`Status::Ok`], or why it failed (a descriptor the engine rejected).
    pub status: Status,
}

/// The device's DMA engine (a bus master writing host memory over CXL.io).
pub trait DmaEngine {
    /// Hands a request to the engine. Completions are reported in submission order.
    fn submit(&mut self, request: DmaRequest) -> Result<DmaTag, DmaError>;
    /// The next finished request, if any.
    fn poll_completion(&mut self) -> Option<DmaCompletion>;
}

/// One finished work item of a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ItemCompletion {
    /// The launch tag.
    pub tag: u32,
    /// The item's index.
    pub item: u32,
    /// Whether the kernel code succeeded on it, or why not.
    pub outcome: Result<(), FirmwareError>,
}

/// A kernel launch handed to the compute units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelLaunch {
    /// The decoded, validated command.
    pub command: shared_abi::CommandDescriptor,
    /// The first item to run: items `first_item .. first_item + items` form one stage of the
    /// launch (see [`crate::kernels`]); a single-stage kernel is dispatched once, from item 0.
    pub first_item: u32,
    /// Work items to run.
    pub items: u32,
}

impl KernelLaunch {
    /// The item indices of this dispatch (saturating at `u32::MAX`).
    pub fn item_range(&self) -> core::ops::Range<u32> {
        self.first_item..self.first_item.saturating_add(self.items)
    }
}

/// The CCM processing units and their µthreads, with the CCM scheduler.
pub trait ComputeUnits {
    /// Starts running the work items of `launch` (one stage). The scheduler (round-robin or FIFO) is the
    /// implementation's; it MUST report each item exactly once.
    fn dispatch(&mut self, launch: KernelLaunch) -> Result<(), FirmwareError>;
    /// The next finished work item, in completion order.
    fn poll_item(&mut self) -> Option<ItemCompletion>;
}

/// Something the host sent that the firmware must act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostEvent {
    /// A 64-byte store into the launch window (BS or AXLE launch), already copied out.
    LaunchStore(shared_abi::CommandDescriptor),
    /// An RP mailbox doorbell write: the device address of the descriptor.
    Doorbell(u64),
    /// An RP mailbox dequeue write.
    Dequeue,
    /// A store into the flow-control block landed (the firmware reads it only when it needs to).
    FlowControl,
    /// The shadow region descriptor was (re)programmed.
    RegionProgrammed,
}

/// Registers, doorbells and the signals the firmware sends back.
pub trait Registers {
    /// The next host event, in arrival order.
    fn take_event(&mut self) -> Option<HostEvent>;
    /// Writes an RP mailbox register (readable by the host over CXL.io).
    fn write_mailbox(&mut self, offset: u64, value: u64);
    /// Sends the response of a BS launch store: the host's synchronous store completes.
    fn complete_bulk_launch(&mut self, tag: u32, status: Status);
    /// Sends an interrupt (AXLE_Interrupt: one per finished DMA request). `message` is the
    /// MSI-X message data: the metadata tail the request published, so the host's handler
    /// consumes exactly that request's records.
    fn raise_interrupt(&mut self, message: u64);
}

/// Everything the firmware needs.
pub trait Hal: Clock + DeviceMemory + DmaEngine + ComputeUnits + Registers {}

impl<T: Clock + DeviceMemory + DmaEngine + ComputeUnits + Registers> Hal for T {}
