//! The ring control block at the start of every host DMA region.
//!
//! Three 128-byte lines, so that no line is written by both sides (128 bytes covers adjacent-line
//! prefetchers that pull cache lines in pairs):
//!
//! | line | written by | words |
//! |------|------------|-------|
//! | 0 | nobody after set-up (static) | magic, ABI version, capacities, slot size, epoch |
//! | 1 | the device (DMA) | metadata tail, payload tail, device status |
//! | 2 | the host | metadata head, payload head (the host's own published copy) |
//!
//! The device's authoritative view of the heads is the flow-control block in device memory
//! ([`crate::flow`]); line 2 mirrors it for tools that inspect the host region.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Bytes per control line.
pub const RING_LINE: usize = 128;

/// Line 0: written once by the host driver before the region is handed to the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C, align(128))]
pub struct StaticLine {
    /// [`crate::ABI_MAGIC`].
    pub magic: u64,
    /// [`crate::ABI_VERSION`].
    pub version: u32,
    /// Slots in the metadata ring.
    pub metadata_capacity: u32,
    /// Slots in the payload ring.
    pub payload_capacity: u32,
    /// Bytes per payload slot (the DMA slot size).
    pub slot_size: u32,
    /// Incremented each time the region is (re)programmed; records of an older epoch are stale.
    pub epoch: u64,
    _reserved: [u8; 96],
}

impl StaticLine {
    /// A static line for a ring of the given shape.
    pub const fn new(
        metadata_capacity: u32,
        payload_capacity: u32,
        slot_size: u32,
        epoch: u64,
    ) -> Self {
        StaticLine {
            magic: crate::ABI_MAGIC,
            version: crate::ABI_VERSION,
            metadata_capacity,
            payload_capacity,
            slot_size,
            epoch,
            _reserved: [0; 96],
        }
    }
}

/// Line 1: written only by the device, with DMA.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C, align(128))]
pub struct DeviceLine {
    /// Records published so far (free-running). Stored with Release semantics (edge D4).
    pub metadata_tail: u64,
    /// Payload slots published so far (free-running). Stored with Release semantics (edge D2).
    pub payload_tail: u64,
    /// [`crate::Status`] of the ring: 0 while healthy; anything else latches the ring BROKEN.
    pub device_status: u32,
    _reserved: [u8; 108],
}

/// Line 2: written only by the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C, align(128))]
pub struct HostLine {
    /// Records moved to the ready pool (edge H2).
    pub metadata_head: u64,
    /// Payload slots consumed, over the contiguous consumed prefix only (edge H3).
    pub payload_head: u64,
    _reserved: [u8; 112],
}

/// The whole control block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct RingControlBlock {
    /// Static words.
    pub static_line: StaticLine,
    /// Device-written words.
    pub device_line: DeviceLine,
    /// Host-written words.
    pub host_line: HostLine,
}

/// Byte offset of the metadata tail word inside the control block.
pub const METADATA_TAIL_OFFSET: u64 = core::mem::offset_of!(RingControlBlock, device_line) as u64
    + core::mem::offset_of!(DeviceLine, metadata_tail) as u64;
/// Byte offset of the payload tail word inside the control block.
pub const PAYLOAD_TAIL_OFFSET: u64 = core::mem::offset_of!(RingControlBlock, device_line) as u64
    + core::mem::offset_of!(DeviceLine, payload_tail) as u64;
/// Byte offset of the device status word inside the control block.
pub const DEVICE_STATUS_OFFSET: u64 = core::mem::offset_of!(RingControlBlock, device_line) as u64
    + core::mem::offset_of!(DeviceLine, device_status) as u64;
/// Byte offset of the host's metadata head word inside the control block.
pub const METADATA_HEAD_OFFSET: u64 = core::mem::offset_of!(RingControlBlock, host_line) as u64
    + core::mem::offset_of!(HostLine, metadata_head) as u64;
/// Byte offset of the host's payload head word inside the control block.
pub const PAYLOAD_HEAD_OFFSET: u64 = core::mem::offset_of!(RingControlBlock, host_line) as u64
    + core::mem::offset_of!(HostLine, payload_head) as u64;

const _: () = assert!(core::mem::size_of::<StaticLine>() == RING_LINE);
const _: () = assert!(core::mem::size_of::<DeviceLine>() == RING_LINE);
const _: () = assert!(core::mem::size_of::<HostLine>() == RING_LINE);
const _: () = assert!(core::mem::size_of::<RingControlBlock>() == 3 * RING_LINE);
const _: () = assert!(core::mem::offset_of!(StaticLine, magic) == 0);
const _: () = assert!(core::mem::offset_of!(StaticLine, version) == 8);
const _: () = assert!(core::mem::offset_of!(StaticLine, metadata_capacity) == 12);
const _: () = assert!(core::mem::offset_of!(StaticLine, payload_capacity) == 16);
const _: () = assert!(core::mem::offset_of!(StaticLine, slot_size) == 20);
const _: () = assert!(core::mem::offset_of!(StaticLine, epoch) == 24);
const _: () = assert!(METADATA_TAIL_OFFSET == 128);
const _: () = assert!(PAYLOAD_TAIL_OFFSET == 136);
const _: () = assert!(DEVICE_STATUS_OFFSET == 144);
const _: () = assert!(METADATA_HEAD_OFFSET == 256);
const _: () = assert!(PAYLOAD_HEAD_OFFSET == 264);
