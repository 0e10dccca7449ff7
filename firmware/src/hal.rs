//! The hardware abstraction layer: everything the firmware needs from the device, as small
//! capability traits that the firmware defines and never implements.
//!
//! # What a port provides
//!
//! Porting the firmware to an FPGA or ASIC prototype means implementing [`Hal`] (one crate
//! that holds the MMIO `unsafe`), and also:
//!
//! - the main loop that calls [`crate::Firmware::step`] on the firmware core (it never waits
//!   inside a call: polling, not callbacks);
//! - the µthreads of the compute units, each of which runs an item by calling
//!   [`crate::run_item`] with the [`KernelLaunch::kernel`] it was handed, and reports it through
//!   [`ComputeUnits::poll_item`];
//! - the device memory map of `shared_abi::device_map` (the launch window, the flow-control
//!   block) and a scratch area for [`crate::scratch::ScratchLayout`];
//! - the doorbell, launch-store, flow-control and region events of [`Registers::take_event`],
//!   with the ordering below;
//! - the write ordering the [`DmaEngine`] docs require;
//! - a stack of at least [`UTHREAD_STACK_BYTES`] per µthread.
//!
//! The emulator implements the HAL on its cycle-timed model (`emulator::hal_impl`). Every
//! method is non-blocking. The `conformance` module (feature `conformance`) checks a port's
//! implementation of these contracts.
//!
//! # What may run concurrently
//!
//! - The firmware core runs [`crate::Firmware::step`] on one thread of control; every `&mut
//!   self` method of the HAL is called from it alone.
//! - The items of one [`ComputeUnits::dispatch`] MAY run concurrently with each other (any
//!   number of µthreads, interleaved at any instruction) and with the firmware core. Each item
//!   touches device memory only through `&self` methods of [`DeviceMemory`] and
//!   [`DeviceAtomics`]. No item of a launch's next stage runs before every item of the previous
//!   stage was reported (the firmware dispatches a stage only then).
//! - The host MAY store into device memory (CXL.mem) at any time, including into a parameter
//!   block or an input of a running launch. The firmware reads a launch's parameter block
//!   once, when it validates the command, and hands the decoded [`crate::kernels::Kernel`] to
//!   the compute units ([`KernelLaunch::kernel`]): a later store changes no decision of the
//!   firmware. (Inputs the host overwrites while the launch runs give whatever the kernel then
//!   reads; never a panic or an access outside a validated range.)
//!
//! Kernel items write disjoint byte ranges (each kernel's docs say why its writes are or are
//! not shared); neighbouring items may write neighbouring bytes of one word, which is why
//! [`DeviceMemory::write`] MUST change only the bytes it addresses. Where two items may update
//! the same word, a kernel MUST use [`DeviceAtomics`].
//!
//! # Ordering
//!
//! - Host stores, then the event that announces them: every host store to device memory
//!   (CXL.mem) issued before the store or register write that produces a [`HostEvent`] MUST be
//!   visible to the firmware's [`DeviceMemory::read`]s once [`Registers::take_event`] has
//!   returned that event. (An RP descriptor and its parameter block before the doorbell; a
//!   launch's parameter block and inputs before the launch store; a flow-control message
//!   before [`HostEvent::FlowControl`]; the shadow descriptor and its scatter-gather list
//!   before [`HostEvent::RegionProgrammed`].)
//! - An item's writes, then its completion: every write of an item MUST be visible to the
//!   firmware core's reads and to the [`DmaEngine`]'s reads of device memory once
//!   [`ComputeUnits::poll_item`] has returned the item's completion (a release by the µthread,
//!   an acquire by the core), and to every item of a later stage.
//! - The firmware's writes before a [`DmaEngine::submit`] (descriptors, staging cells) MUST be
//!   visible to the engine's reads of that request.
//!
//! # Stack per µthread
//!
//! An item runs on its µthread's stack: a µthread MUST have at least [`UTHREAD_STACK_BYTES`]
//! (8 KiB). The figure is measured, not derived: `cargo test -p firmware --release
//! stack_high_water -- --nocapture` runs every item of a small launch of a kernel through
//! [`crate::run_item`] behind a [`DeviceMemory`] that records the deepest stack address any
//! access is made from (kernels reach device memory only through the HAL, and their buffers
//! are live in their frames during those calls), and prints the high-water mark below the
//! caller's frame. Measured on x86-64, release profile (2 December 2026): OPT 3,585 bytes (all
//! ten stages), KNN 1,225, SSSP 921 (its whole-run path, taken when
//! [`DeviceMemory::unobserved_reads`], and reading per vertex alike), SSB 733, DLRM 537, PageRank
//! 484 (every kernel; the QEMU port measures 2,892 for KNN and 3,380 for SSSP on rv32imac by
//! stack painting, its HAL's frames included; SSSP's before its word reads lost a 256-byte
//! staging buffer and before its whole-run path added one).
//! The probe misses leaf calls
//! that make no access (`libm`, the `kernel-arith` helpers), so [`UTHREAD_STACK_BYTES`] is
//! about twice the deepest figure, leaving room for those, a port's own [`DeviceMemory`],
//! interrupt entry and a less aggressive optimiser. A port on another instruction set SHOULD
//! re-run the measurement on its target.

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

/// Bytes of stack a µthread MUST have to run any item of any kernel (see the module docs,
/// "Stack per µthread", for the measurement behind it).
pub const UTHREAD_STACK_BYTES: usize = 8 * 1024;

/// The device's own memory (the HDM range), as the firmware core and the kernels' µthreads see
/// it: shared (every method takes `&self`), so an implementation holds its bytes behind
/// interior mutability (atomics, a volatile MMIO window, or a cell in a single-threaded
/// double).
pub trait DeviceMemory {
    /// Bytes of device memory. MUST NOT change while the firmware runs.
    fn size(&self) -> u64;
    /// Copies `buffer.len()` bytes at `address` into `buffer`. MUST fail with the
    /// [`MemoryFault`] of the access, touching nothing, when any byte lies outside device
    /// memory (never a panic). A read that races with a write to the same bytes MAY return
    /// any mix of old and new bytes, but each byte is one that was stored.
    fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault>;
    /// Writes `data` at `address`. MUST fail with the [`MemoryFault`] of the access, touching
    /// nothing, when any byte lies outside device memory (never a panic). MUST change exactly
    /// the bytes `[address, address + data.len())`, even while other µthreads write
    /// neighbouring bytes of the same word: an implementation that merges a partial word MUST
    /// do so atomically (or store bytes individually), never by a plain load and store of
    /// the whole word.
    fn write(&self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault>;

    /// A hint that the caller will soon read the bytes around `address`: an implementation
    /// MAY start bringing them closer (a hardware prefetch of the cache line), or do nothing
    /// (this default). It is not an access: it returns nothing, changes nothing, never faults
    /// (an address outside device memory is ignored), and a view that counts or times the
    /// accesses MUST NOT count it. Kernels hint only addresses they computed from values they
    /// already read, so the reads they make are the same with or without it.
    #[inline(always)]
    fn prefetch(&self, _address: DeviceAddress) {}

    /// An indexed load of little-endian `u32` words (RISC-V `vluxei32.v`): for each `k` in
    /// order, the word at `base + 4 * indices[k]` into `out[k]`, for as many elements as the
    /// shorter of the two slices holds.
    ///
    /// The default, [`gather_u32_by_reads`], is one 4-byte [`DeviceMemory::read`] per element,
    /// in order, stopping at the first that fails. An implementation MAY override it to go
    /// faster, and then MUST give the same words and the same outcome: on failure, the
    /// [`MemoryFault`] of the first element that cannot be read (its 4-byte access; for an
    /// element whose address `base + 4 * index` does not fit a `u64`, the fault `{ address:
    /// base, length: 4 * index + 4 }`), with `out`'s words then unspecified. A view that counts,
    /// orders or interleaves accesses (the emulator's channel profile and interleaved
    /// execution) keeps the default, so it sees the elements' reads one by one, in order.
    #[inline(always)]
    fn read_u32_gather(
        &self,
        base: u64,
        indices: &[u32],
        out: &mut [u32],
    ) -> Result<(), MemoryFault> {
        gather_u32_by_reads(self, base, indices, out)
    }

    /// Whether a read of this memory has no effect anyone can observe beyond the bytes it
    /// returns: nothing counts, logs, times, orders or interleaves the reads. A kernel MAY then
    /// read in another order than its documented one, in larger runs, or twice (a fast path
    /// that falls back to the documented reads on any failure, so the outcome is theirs).
    /// Default false; a view that observes accesses (the emulator's channel profile and
    /// interleaved execution, the test probes) MUST NOT return true.
    #[inline(always)]
    fn unobserved_reads(&self) -> bool {
        false
    }

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

/// [`DeviceMemory::read_u32_gather`] as one 4-byte [`DeviceMemory::read`] of `memory` per
/// element, in order, stopping at the first fault (the trait's default, and the behaviour every
/// override must match).
#[inline(always)]
pub fn gather_u32_by_reads<M: DeviceMemory + ?Sized>(
    memory: &M,
    base: u64,
    indices: &[u32],
    out: &mut [u32],
) -> Result<(), MemoryFault> {
    for (index, word) in indices.iter().zip(out.iter_mut()) {
        // At most 4 * (2^32 - 1): the offset and the element's end cannot wrap.
        let offset = u64::from(*index).wrapping_mul(4);
        let address = base.checked_add(offset).ok_or(MemoryFault {
            address: DeviceAddress(base),
            length: offset.wrapping_add(4),
        })?;
        let mut bytes = [0_u8; 4];
        memory.read(DeviceAddress(address), &mut bytes)?;
        *word = u32::from_le_bytes(bytes);
    }
    Ok(())
}

/// Atomic read-modify-write of 32-bit words of device memory (RISC-V `amo*.w` and `lr.w` /
/// `sc.w`; AXI atomic transactions, CXL.mem has none of its own), for the words that two
/// µthreads may update at once.
///
/// For every method:
///
/// - `address` MUST be 4-byte aligned and the word inside device memory; otherwise the
///   method MUST return `Err(MemoryFault { address, length: 4 })`, touching nothing (never a
///   panic).
/// - The word is little-endian, as every value the firmware keeps in device memory.
/// - Atomicity: the read, the computation and the write are one indivisible step with
///   respect to every other [`DeviceAtomics`] call on the same word, from any µthread or the
///   firmware core (no lost update), and a concurrent [`DeviceMemory::read`] of the word sees
///   the word before or after, never a mix.
/// - Ordering: at least Relaxed (C11 `memory_order_relaxed`): one total order of the
///   operations on each word, nothing promised about other words. Order between items comes
///   from their completions (the module docs' "Ordering"); a kernel that needs more MUST say
///   so and use the completion barrier between stages.
/// - Each returns the word as it was before the operation.
pub trait DeviceAtomics: DeviceMemory {
    /// `*word = word.wrapping_add(value)` (RISC-V `amoadd.w`).
    fn fetch_add_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault>;
    /// `*word = min(word, value)`, unsigned (RISC-V `amominu.w`).
    fn fetch_min_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault>;
    /// `*word = value` (RISC-V `amoswap.w`).
    fn swap_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault>;
    /// `if word == current { *word = new }` (RISC-V `lr.w`/`sc.w` loop): the operation
    /// succeeded exactly when the returned previous value equals `current`. MUST NOT fail
    /// spuriously (a port on LR/SC retries until the comparison, not the reservation,
    /// decides).
    fn compare_exchange_u32(
        &self,
        address: DeviceAddress,
        current: u32,
        new: u32,
    ) -> Result<u32, MemoryFault>;
}

/// The fault of a 32-bit atomic at `address`, if it is not 4-byte aligned or not inside a
/// memory of `size` bytes (the check every [`DeviceAtomics`] implementation makes first).
pub fn atomic_word_fault(address: DeviceAddress, size: u64) -> Option<MemoryFault> {
    let fault = MemoryFault { address, length: 4 };
    let inside = address.0.checked_add(4).is_some_and(|end| end <= size);
    if address.0 % 4 != 0 || !inside {
        Some(fault)
    } else {
        None
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

/// A kernel launch handed to the compute units: the kernel as the firmware decoded and
/// validated it when the command arrived, so the units never read the host-writable command
/// or parameter block again.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelLaunch {
    /// The launch's tag (the command's), reported back in each [`ItemCompletion`].
    pub tag: u32,
    /// The decoded, validated kernel: what each µthread passes to [`crate::run_item`].
    pub kernel: crate::kernels::Kernel,
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
    /// Starts running the work items of `launch` (one stage) on the µthreads, each by
    /// [`crate::run_item`]`(&launch.kernel, item, memory)`. The scheduler (round-robin or
    /// FIFO) is the implementation's; it MUST report each item exactly once, after the item's
    /// writes (see the module docs, "Ordering"), and MUST NOT read the launch's command or
    /// parameter block from device memory (the kernel is already decoded).
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
    /// The next host event, in arrival order. Every host store to device memory issued before
    /// the store that produced the event MUST be visible to [`DeviceMemory::read`] once this
    /// returns it (see the module docs, "Ordering").
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
pub trait Hal: Clock + DeviceMemory + DeviceAtomics + DmaEngine + ComputeUnits + Registers {}

impl<T: Clock + DeviceMemory + DeviceAtomics + DmaEngine + ComputeUnits + Registers> Hal for T {}
