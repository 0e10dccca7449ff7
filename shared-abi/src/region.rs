//! The layout of a host DMA region: where the control block, the metadata ring and the payload
//! ring lie, as byte offsets from the region's start.
//!
//! ```text
//! offset 0                      RingControlBlock (3 lines of 128 bytes; rest of the page unused)
//! offset 4096                   metadata ring: metadata_capacity x 32-byte MetadataRecord
//! payload_offset (page-aligned) payload ring: payload_capacity x slot_size bytes
//! region_length                 payload end rounded up to 4096
//! ```
//!
//! The layout is *canonical*: three numbers (metadata capacity, payload capacity, slot size)
//! determine every offset, so the device does not have to trust any offset the host sends. A
//! [`ShadowRegionDescriptor`] whose offsets or length differ from the canonical ones for its
//! capacities and slot size is malformed ([`RingLayout::from_descriptor`]).
//!
//! Every ring starts on a page boundary, so a metadata record (32 bytes, 4096 / 32 per page) never
//! straddles a page. A payload slot straddles a page boundary, hence possibly a scatter-gather
//! entry boundary, exactly when `slot_size` does not divide 4096 (for example 24 or 40 bytes);
//! a DMA writer then splits the slot's write at the entry boundary. The paper's slot sizes
//! (32 and 64 bytes) never straddle.

use crate::control::RING_LINE;
use crate::metadata::MetadataRecord;
use crate::sgl::ShadowRegionDescriptor;
use crate::status::Status;

/// Bytes of a host page (and of a frame of the host driver's allocator).
pub const PAGE_SIZE: u64 = 4096;
/// Offset of the [`crate::RingControlBlock`] in every region.
pub const CONTROL_OFFSET: u64 = 0;
/// Offset of metadata slot 0 in every region (the page after the control block).
pub const METADATA_OFFSET: u64 = PAGE_SIZE;
/// Bytes of one metadata record.
pub const METADATA_RECORD_SIZE: u64 = core::mem::size_of::<MetadataRecord>() as u64;
/// Smallest payload slot.
pub const MIN_SLOT_SIZE: u32 = 8;
/// Largest payload slot (one page).
pub const MAX_SLOT_SIZE: u32 = 4096;

const _: () = assert!(METADATA_RECORD_SIZE == 32);
const _: () = assert!(3 * RING_LINE as u64 <= METADATA_OFFSET);
const _: () = assert!(PAGE_SIZE % METADATA_RECORD_SIZE == 0);

/// The validated shape of one ring pair in a DMA region.
///
/// # Invariants
///
/// - `metadata_capacity > 0`, `payload_capacity > 0`;
/// - `slot_size` is a multiple of 8 in `MIN_SLOT_SIZE..=MAX_SLOT_SIZE`;
/// - `payload_offset` and `region_length` are the canonical values for the three numbers above
///   (both page-aligned), and every offset this type returns is below `region_length` (no
///   arithmetic on them overflows: the largest region is below 2^45 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RingLayout {
    metadata_capacity: u32,
    payload_capacity: u32,
    slot_size: u32,
    payload_offset: u64,
    region_length: u64,
}

/// `value` rounded up to a multiple of [`PAGE_SIZE`], or `None` on overflow.
const fn round_up_to_page(value: u64) -> Option<u64> {
    match value.checked_add(PAGE_SIZE - 1) {
        Some(v) => Some(v & !(PAGE_SIZE - 1)),
        None => None,
    }
}

/// `base + count * size`, or `None` on overflow.
const fn end_of(base: u64, count: u32, size: u64) -> Option<u64> {
    match (count as u64).checked_mul(size) {
        Some(bytes) => base.checked_add(bytes),
        None => None,
    }
}

impl RingLayout {
    /// The canonical layout of a ring pair with `metadata_capacity` records and
    /// `payload_capacity` slots of `slot_size` bytes.
    ///
    /// Fails with [`Status::MalformedDescriptor`] when a capacity is zero or `slot_size` is not
    /// a multiple of 8 in `8..=4096`.
    pub const fn new(
        metadata_capacity: u32,
        payload_capacity: u32,
        slot_size: u32,
    ) -> Result<RingLayout, Status> {
        if metadata_capacity == 0 || payload_capacity == 0 {
            return Err(Status::MalformedDescriptor);
        }
        if slot_size < MIN_SLOT_SIZE || slot_size > MAX_SLOT_SIZE || slot_size % 8 != 0 {
            return Err(Status::MalformedDescriptor);
        }
        // u32 x 32 and u32 x 4096 fit easily in u64; the checked forms only keep the arithmetic
        // honest for clippy and for a future change of the limits.
        let metadata_end = match end_of(METADATA_OFFSET, metadata_capacity, METADATA_RECORD_SIZE) {
            Some(end) => end,
            None => return Err(Status::MalformedDescriptor),
        };
        let payload_offset = match round_up_to_page(metadata_end) {
            Some(offset) => offset,
            None => return Err(Status::MalformedDescriptor),
        };
        let payload_end = match end_of(payload_offset, payload_capacity, slot_size as u64) {
            Some(end) => end,
            None => return Err(Status::MalformedDescriptor),
        };
        let region_length = match round_up_to_page(payload_end) {
            Some(length) => length,
            None => return Err(Status::MalformedDescriptor),
        };
        Ok(RingLayout {
            metadata_capacity,
            payload_capacity,
            slot_size,
            payload_offset,
            region_length,
        })
    }

    /// The layout a shadow descriptor describes, after checking that every offset, capacity and
    /// the slot size are exactly the canonical ones and lie inside `region_length`.
    ///
    /// Does not look at `magic`, `epoch` or `entry_count`: the caller checks those against its
    /// own state. Fails with [`Status::MalformedDescriptor`].
    pub const fn from_descriptor(
        descriptor: &ShadowRegionDescriptor,
    ) -> Result<RingLayout, Status> {
        let layout = match RingLayout::new(
            descriptor.metadata_capacity,
            descriptor.payload_capacity,
            descriptor.slot_size,
        ) {
            Ok(layout) => layout,
            Err(status) => return Err(status),
        };
        if descriptor.control_offset != CONTROL_OFFSET
            || descriptor.metadata_offset != METADATA_OFFSET
            || descriptor.payload_offset != layout.payload_offset
            || descriptor.region_length != layout.region_length
        {
            return Err(Status::MalformedDescriptor);
        }
        Ok(layout)
    }

    /// Records in the metadata ring.
    pub const fn metadata_capacity(&self) -> u32 {
        self.metadata_capacity
    }

    /// Slots in the payload ring.
    pub const fn payload_capacity(&self) -> u32 {
        self.payload_capacity
    }

    /// Bytes per payload slot.
    pub const fn slot_size(&self) -> u32 {
        self.slot_size
    }

    /// Offset of the control block (always [`CONTROL_OFFSET`]).
    pub const fn control_offset(&self) -> u64 {
        CONTROL_OFFSET
    }

    /// Offset of metadata slot 0 (always [`METADATA_OFFSET`]).
    pub const fn metadata_offset(&self) -> u64 {
        METADATA_OFFSET
    }

    /// Offset of payload slot 0 (page-aligned, after the metadata ring).
    pub const fn payload_offset(&self) -> u64 {
        self.payload_offset
    }

    /// Bytes of the whole region (a multiple of [`PAGE_SIZE`]).
    pub const fn region_length(&self) -> u64 {
        self.region_length
    }

    /// Offset of the record with free-running metadata index `index` (slot `index % capacity`).
    pub const fn metadata_slot_offset(&self, index: u64) -> u64 {
        // INVARIANT use: capacity > 0, so the remainder exists; slot * 32 + 4096 stays below
        // payload_offset <= region_length, so the saturating forms never saturate.
        let slot = match index.checked_rem(self.metadata_capacity as u64) {
            Some(slot) => slot,
            None => 0,
        };
        METADATA_OFFSET.saturating_add(slot.saturating_mul(METADATA_RECORD_SIZE))
    }

    /// Offset of payload slot `slot`, or `None` when `slot` is not below the payload capacity
    /// (a slot number read from a record is untrusted).
    pub const fn payload_slot_offset(&self, slot: u32) -> Option<u64> {
        if slot >= self.payload_capacity {
            return None;
        }
        // slot < capacity, so the product ends inside the region (no saturation).
        Some(
            self.payload_offset
                .saturating_add((slot as u64).saturating_mul(self.slot_size as u64)),
        )
    }

    /// The shadow descriptor of this layout (magic set, offsets canonical).
    pub const fn descriptor(&self, epoch: u64, entry_count: u32) -> ShadowRegionDescriptor {
        ShadowRegionDescriptor {
            magic: crate::ABI_MAGIC,
            epoch,
            region_length: self.region_length,
            control_offset: CONTROL_OFFSET,
            metadata_offset: METADATA_OFFSET,
            payload_offset: self.payload_offset,
            metadata_capacity: self.metadata_capacity,
            payload_capacity: self.payload_capacity,
            slot_size: self.slot_size,
            entry_count,
        }
    }

    /// The static line of this layout's control block.
    pub const fn static_line(&self, epoch: u64) -> crate::control::StaticLine {
        crate::control::StaticLine::new(
            self.metadata_capacity,
            self.payload_capacity,
            self.slot_size,
            epoch,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_default_layout_puts_payload_after_metadata_on_a_page_boundary() {
        let layout = RingLayout::new(50_000, 50_000, 32).unwrap();
        // 4096 + 50_000 * 32 = 1_604_096, rounded up to 1_605_632.
        assert_eq!(layout.payload_offset(), 1_605_632);
        assert_eq!(layout.region_length(), 1_605_632 + 1_601_536);
        assert_eq!(layout.region_length() % PAGE_SIZE, 0);
    }

    #[test]
    fn smallest_layout_is_three_pages() {
        let layout = RingLayout::new(1, 1, 8).unwrap();
        assert_eq!(layout.metadata_offset(), 4096);
        assert_eq!(layout.payload_offset(), 8192);
        assert_eq!(layout.region_length(), 12288);
    }

    #[test]
    fn zero_capacities_and_bad_slot_sizes_are_malformed() {
        assert_eq!(RingLayout::new(0, 4, 32), Err(Status::MalformedDescriptor));
        assert_eq!(RingLayout::new(4, 0, 32), Err(Status::MalformedDescriptor));
        for slot_size in [0, 4, 12, 4097, 4104, u32::MAX] {
            assert_eq!(
                RingLayout::new(4, 4, slot_size),
                Err(Status::MalformedDescriptor),
                "{slot_size}"
            );
        }
        assert!(RingLayout::new(4, 4, 4096).is_ok());
        assert!(RingLayout::new(4, 4, 24).is_ok());
    }

    #[test]
    fn largest_capacities_do_not_overflow() {
        let layout = RingLayout::new(u32::MAX, u32::MAX, MAX_SLOT_SIZE).unwrap();
        assert!(layout.region_length() > (u32::MAX as u64) * 4096);
        assert_eq!(
            layout.metadata_slot_offset(u64::MAX),
            4096 + (u64::MAX % u32::MAX as u64) * 32
        );
        let last = layout.payload_slot_offset(u32::MAX - 1).unwrap();
        assert_eq!(
            last + 4096,
            layout.payload_offset() + (u32::MAX as u64) * 4096
        );
        assert!(last + 4096 <= layout.region_length());
    }

    #[test]
    fn metadata_index_wraps_to_its_slot() {
        let layout = RingLayout::new(4, 2, 64).unwrap();
        assert_eq!(layout.metadata_slot_offset(0), 4096);
        assert_eq!(layout.metadata_slot_offset(3), 4096 + 96);
        assert_eq!(layout.metadata_slot_offset(5), 4096 + 32);
    }

    #[test]
    fn payload_slot_beyond_capacity_has_no_offset() {
        let layout = RingLayout::new(4, 3, 64).unwrap();
        assert_eq!(layout.payload_slot_offset(2), Some(8192 + 128));
        assert_eq!(layout.payload_slot_offset(3), None);
        assert_eq!(layout.payload_slot_offset(u32::MAX), None);
    }

    #[test]
    fn descriptor_round_trips_through_from_descriptor() {
        let layout = RingLayout::new(100, 7, 40).unwrap();
        let descriptor = layout.descriptor(3, 5);
        assert_eq!(descriptor.magic, crate::ABI_MAGIC);
        assert_eq!(RingLayout::from_descriptor(&descriptor), Ok(layout));
    }

    #[test]
    fn descriptor_with_any_non_canonical_offset_is_malformed() {
        let good = RingLayout::new(100, 7, 40).unwrap().descriptor(1, 1);
        let mut cases = [good; 6];
        cases[0].control_offset = 128;
        cases[1].metadata_offset = 0;
        cases[2].payload_offset = good.payload_offset + 4096;
        cases[3].region_length = good.region_length + 4096;
        cases[4].region_length = good.region_length - 8;
        cases[5].slot_size = 12;
        for (i, case) in cases.iter().enumerate() {
            assert_eq!(
                RingLayout::from_descriptor(case),
                Err(Status::MalformedDescriptor),
                "case {i}"
            );
        }
    }

    #[test]
    fn descriptor_with_overflowing_region_length_is_malformed() {
        let mut descriptor = RingLayout::new(1, 1, 8).unwrap().descriptor(0, 1);
        descriptor.region_length = u64::MAX;
        descriptor.payload_offset = u64::MAX - 7;
        assert_eq!(
            RingLayout::from_descriptor(&descriptor),
            Err(Status::MalformedDescriptor)
        );
    }
}
