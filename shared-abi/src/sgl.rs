//! Shadow DMA region descriptors: the host driver's scatter-gather list, shadowed into device
//! memory with CXL.mem stores so the DMA executor can translate region offsets to host
//! physical addresses.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Most scatter-gather entries one region may have.
///
/// 1024 entries of at least one 4 KiB frame each cover a region of at least 4 MiB even when no
/// two frames are physically adjacent; the table takes 16 KiB of device memory.
pub const MAX_SG_ENTRIES: usize = 1024;

/// Header of a shadowed DMA region: where each part of the region lies, as offsets from the
/// region's start (the region is contiguous in the host's virtual space, scattered in physical).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct ShadowRegionDescriptor {
    /// [`crate::ABI_MAGIC`]; anything else means "no region programmed".
    pub magic: u64,
    /// Region epoch (matches the control block's static line).
    pub epoch: u64,
    /// Bytes in the whole region (sum of the entries' lengths).
    pub region_length: u64,
    /// Offset of the [`crate::RingControlBlock`].
    pub control_offset: u64,
    /// Offset of metadata slot 0.
    pub metadata_offset: u64,
    /// Offset of payload slot 0.
    pub payload_offset: u64,
    /// Metadata ring slots.
    pub metadata_capacity: u32,
    /// Payload ring slots.
    pub payload_capacity: u32,
    /// Bytes per payload slot.
    pub slot_size: u32,
    /// Valid entries that follow the header.
    pub entry_count: u32,
}

/// One physically contiguous piece of a DMA region.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct ScatterGatherEntry {
    /// Host physical address of the piece.
    pub host_phys: u64,
    /// Bytes in the piece.
    pub length: u64,
}

const _: () = assert!(core::mem::size_of::<ShadowRegionDescriptor>() == 64);
const _: () = assert!(core::mem::offset_of!(ShadowRegionDescriptor, magic) == 0);
const _: () = assert!(core::mem::offset_of!(ShadowRegionDescriptor, epoch) == 8);
const _: () = assert!(core::mem::offset_of!(ShadowRegionDescriptor, region_length) == 16);
const _: () = assert!(core::mem::offset_of!(ShadowRegionDescriptor, control_offset) == 24);
const _: () = assert!(core::mem::offset_of!(ShadowRegionDescriptor, metadata_offset) == 32);
const _: () = assert!(core::mem::offset_of!(ShadowRegionDescriptor, payload_offset) == 40);
const _: () = assert!(core::mem::offset_of!(ShadowRegionDescriptor, metadata_capacity) == 48);
const _: () = assert!(core::mem::offset_of!(ShadowRegionDescriptor, payload_capacity) == 52);
const _: () = assert!(core::mem::offset_of!(ShadowRegionDescriptor, slot_size) == 56);
const _: () = assert!(core::mem::offset_of!(ShadowRegionDescriptor, entry_count) == 60);
const _: () = assert!(core::mem::size_of::<ScatterGatherEntry>() == 16);
const _: () = assert!(core::mem::offset_of!(ScatterGatherEntry, host_phys) == 0);
const _: () = assert!(core::mem::offset_of!(ScatterGatherEntry, length) == 8);
