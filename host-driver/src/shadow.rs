//! Programming a DMA region into the device: the shadow descriptor and its scatter-gather
//! entries, written into device memory with CXL.mem stores, and the region's control block.
//!
//! # Store order
//!
//! [`shadow_stores`] returns the stores in the order they must be issued (the link delivers
//! the stores of one host in order; on real hardware with the HDM range mapped
//! write-combining, the runtime fences before the last store):
//!
//! 1. the descriptor header with every field zero (no magic): a device that looks at the
//!    descriptor while the entries are being rewritten sees "no region", never an old header
//!    over new entries (this matters when a region is reprogrammed with a new epoch);
//! 2. the entries, at [`device_map::SHADOW_ENTRIES`], in 64-byte aligned stores of at most 64
//!    bytes (one CXL.mem store each);
//! 3. the real header, with [`shared_abi::ABI_MAGIC`], at [`device_map::SHADOW_DESCRIPTOR`].
//!
//! So a device never sees a header with magic whose entries are not yet all written.
//!
//! # Ownership
//!
//! [`program`] is the hand-over of [`crate::dma`]'s ownership rule: it takes the CPU-owned
//! [`DmaRegion`], initialises its control block (the last CPU writes), and returns the
//! [`MappedRegion`] with the stores; the region cannot be written or released while the
//! device holds its scatter-gather list. [`init_control_block`] takes a CPU-owned region;
//! [`shadow_stores`] only reads the frames of a mapped one.

use crate::dma::{DmaError, DmaRegion, MappedRegion};
use crate::sgl::{entries_from_frames, SglError};
use crate::sync::Ordering;
use shared_abi::control::{StaticLine, RING_LINE};
use shared_abi::region::RingLayout;
use shared_abi::{device_map, DeviceAddress, RingControlBlock, ShadowRegionDescriptor};
use zerocopy::IntoBytes;

/// Largest single CXL.mem store (one cache line); stores never cross a 64-byte line.
pub const STORE_SIZE: u64 = 64;

/// Value of a metadata record's `sequence` after [`init_control_block`]: no record has this
/// index, so a slot read before the device wrote it fails the sequence check.
pub const POISON_SEQUENCE: u64 = u64::MAX;

/// A region that cannot be programmed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShadowError {
    /// The region's length is not the layout's region length.
    #[error("region has {region_length} bytes but the layout needs exactly {layout_length}")]
    LengthMismatch {
        /// Bytes in the region.
        region_length: u64,
        /// [`RingLayout::region_length`].
        layout_length: u64,
    },
    /// The scatter-gather list cannot be built.
    #[error(transparent)]
    Sgl(#[from] SglError),
    /// A region access failed.
    #[error(transparent)]
    Dma(#[from] DmaError),
}

/// One CXL.mem store: the device address and the bytes stored there.
pub type DeviceStore = (DeviceAddress, Vec<u8>);

fn check_length(region_length: u64, layout: &RingLayout) -> Result<(), ShadowError> {
    if region_length != layout.region_length() {
        return Err(ShadowError::LengthMismatch {
            region_length,
            layout_length: layout.region_length(),
        });
    }
    Ok(())
}

/// Splits `bytes` stored at `address` into stores that never cross a 64-byte line.
fn line_stores(address: DeviceAddress, bytes: &[u8], stores: &mut Vec<DeviceStore>) {
    let mut position = address.0;
    let mut rest = bytes;
    while !rest.is_empty() {
        let to_line_end = STORE_SIZE - position % STORE_SIZE;
        let take = rest.len().min(to_line_end as usize);
        let (piece, tail) = rest.split_at(take);
        stores.push((DeviceAddress(position), piece.to_vec()));
        position += take as u64;
        rest = tail;
    }
}

/// A region handed to the device by [`program`], and the stores that tell the device.
#[derive(Debug)]
pub struct Programmed {
    /// The region, now the device's (the host reads it and publishes heads only).
    pub region: MappedRegion,
    /// The CXL.mem stores to issue, in order (see the module docs).
    pub stores: Vec<DeviceStore>,
}

/// Programs `region` (laid out as `layout`) into the device: checks the length and the
/// scatter-gather list, initialises the control block ([`init_control_block`], the last CPU
/// writes), hands the region to the device, and returns it with the shadow stores to issue.
///
/// On an error the region is dropped with its frames still allocated (never reused).
pub fn program(
    region: DmaRegion,
    layout: &RingLayout,
    epoch: u64,
) -> Result<Programmed, ShadowError> {
    check_length(region.len(), layout)?;
    entries_from_frames(region.frames(), region.len())?;
    init_control_block(&region, layout, epoch)?;
    let region = region.hand_to_device();
    let stores = shadow_stores(&region, layout, epoch)?;
    Ok(Programmed { region, stores })
}

/// The CXL.mem stores that program `region` (laid out as `layout`) into the device, in issue
/// order (see the module docs): invalidate the header, write the entries, write the header.
pub fn shadow_stores(
    region: &MappedRegion,
    layout: &RingLayout,
    epoch: u64,
) -> Result<Vec<DeviceStore>, ShadowError> {
    check_length(region.len(), layout)?;
    let entries = entries_from_frames(region.frames(), region.len())?;
    // At most MAX_SG_ENTRIES (1024) entries, so the count fits a u32.
    let entry_count = u32::try_from(entries.len()).map_err(|_| SglError::TooManyEntries {
        entries: entries.len(),
        max: shared_abi::sgl::MAX_SG_ENTRIES,
    })?;
    let header = layout.descriptor(epoch, entry_count);
    let mut stores = Vec::new();
    line_stores(
        device_map::SHADOW_DESCRIPTOR,
        ShadowRegionDescriptor::default().as_bytes(),
        &mut stores,
    );
    line_stores(device_map::SHADOW_ENTRIES, entries.as_bytes(), &mut stores);
    line_stores(
        device_map::SHADOW_DESCRIPTOR,
        header.as_bytes(),
        &mut stores,
    );
    log::debug!(
        "shadow: epoch {epoch}, {} bytes in {entry_count} entries, {} stores",
        region.len(),
        stores.len()
    );
    Ok(stores)
}

/// Initialises `region`'s control block and metadata ring before it is handed to the device:
/// zeroes the device line (tails, status) and the host line (heads), sets every metadata
/// record's sequence to [`POISON_SEQUENCE`], and writes the static line last.
///
/// Plain (Relaxed) stores: the device learns of the region only from the shadow stores issued
/// afterwards, and that hand-off (the link) orders these writes before any device access.
pub fn init_control_block(
    region: &DmaRegion,
    layout: &RingLayout,
    epoch: u64,
) -> Result<(), ShadowError> {
    check_length(region.len(), layout)?;
    let control = layout.control_offset();
    let zero_line = [0u8; RING_LINE];
    region.write_bytes(
        control + core::mem::offset_of!(RingControlBlock, device_line) as u64,
        &zero_line,
    )?;
    region.write_bytes(
        control + core::mem::offset_of!(RingControlBlock, host_line) as u64,
        &zero_line,
    )?;
    for index in 0..u64::from(layout.metadata_capacity()) {
        region.store_u64(
            layout.metadata_slot_offset(index),
            POISON_SEQUENCE,
            Ordering::Relaxed,
        )?;
    }
    let static_line: StaticLine = layout.static_line(epoch);
    region.write_bytes(
        control + core::mem::offset_of!(RingControlBlock, static_line) as u64,
        static_line.as_bytes(),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frames::{FrameAllocator, FRAME_SIZE};
    use crate::phys::PhysicalMemory;
    use crate::sync::Arc;
    use shared_abi::control::{METADATA_TAIL_OFFSET, PAYLOAD_HEAD_OFFSET};
    use shared_abi::{ScatterGatherEntry, ABI_MAGIC};
    use zerocopy::FromBytes;

    fn region_for(layout: &RingLayout) -> DmaRegion {
        let memory = Arc::new(PhysicalMemory::new(1024 * FRAME_SIZE).unwrap());
        let mut allocator = FrameAllocator::new(memory.len());
        DmaRegion::allocate(memory, &mut allocator, layout.region_length()).unwrap()
    }

    /// Applies stores to a plain byte image of device memory.
    fn apply(stores: &[DeviceStore], image: &mut [u8]) {
        for (address, bytes) in stores {
            let start = address.0 as usize;
            image[start..start + bytes.len()].copy_from_slice(bytes);
        }
    }

    #[test]
    fn every_store_is_at_most_one_line_and_never_crosses_a_line() {
        let layout = RingLayout::new(1000, 1000, 32).unwrap();
        let stores = shadow_stores(&region_for(&layout).hand_to_device(), &layout, 1).unwrap();
        for (address, bytes) in &stores {
            assert!(!bytes.is_empty() && bytes.len() as u64 <= STORE_SIZE);
            assert_eq!(
                address.0 / STORE_SIZE,
                (address.0 + bytes.len() as u64 - 1) / STORE_SIZE
            );
        }
    }

    #[test]
    fn header_with_magic_is_the_last_store_and_no_earlier_store_carries_magic() {
        let layout = RingLayout::new(1000, 1000, 32).unwrap();
        let stores = shadow_stores(&region_for(&layout).hand_to_device(), &layout, 7).unwrap();
        let (last_address, last_bytes) = stores.last().unwrap();
        assert_eq!(*last_address, device_map::SHADOW_DESCRIPTOR);
        let header = ShadowRegionDescriptor::read_from_bytes(last_bytes).unwrap();
        assert_eq!(header.magic, ABI_MAGIC);
        assert_eq!(header.epoch, 7);
        for (address, bytes) in &stores[..stores.len() - 1] {
            if *address == device_map::SHADOW_DESCRIPTOR {
                assert_eq!(
                    &bytes[..8],
                    &[0u8; 8],
                    "an early header store carries magic"
                );
            }
        }
    }

    #[test]
    fn first_store_invalidates_the_old_header() {
        let layout = RingLayout::new(16, 16, 64).unwrap();
        let stores = shadow_stores(&region_for(&layout).hand_to_device(), &layout, 2).unwrap();
        assert_eq!(stores[0].0, device_map::SHADOW_DESCRIPTOR);
        assert_eq!(stores[0].1, vec![0u8; 64]);
    }

    #[test]
    fn applied_stores_describe_the_region_exactly() {
        let layout = RingLayout::new(1000, 1000, 32).unwrap();
        let region = region_for(&layout).hand_to_device();
        let stores = shadow_stores(&region, &layout, 3).unwrap();
        let mut image = vec![0u8; device_map::RP_DESCRIPTOR.0 as usize];
        apply(&stores, &mut image);
        let base = device_map::SHADOW_DESCRIPTOR.0 as usize;
        let header = ShadowRegionDescriptor::read_from_bytes(&image[base..base + 64]).unwrap();
        assert_eq!(RingLayout::from_descriptor(&header), Ok(layout));
        let entries_base = device_map::SHADOW_ENTRIES.0 as usize;
        let entries = <[ScatterGatherEntry]>::ref_from_bytes_with_elems(
            &image[entries_base..entries_base + header.entry_count as usize * 16],
            header.entry_count as usize,
        )
        .unwrap();
        assert_eq!(
            entries,
            crate::sgl::entries_from_frames(region.frames(), region.len())
                .unwrap()
                .as_slice()
        );
        assert_eq!(
            entries.iter().map(|e| e.length).sum::<u64>(),
            header.region_length
        );
        assert!(entries.len() > 1, "the region should be scattered");
    }

    #[test]
    fn region_of_the_wrong_length_is_refused() {
        let layout = RingLayout::new(16, 16, 64).unwrap();
        let bigger = RingLayout::new(16, 1000, 64).unwrap();
        let region = region_for(&bigger);
        assert!(init_control_block(&region, &layout, 1).is_err());
        assert_eq!(
            program(region, &layout, 1).map(|_| ()),
            Err(ShadowError::LengthMismatch {
                region_length: bigger.region_length(),
                layout_length: layout.region_length()
            })
        );
    }

    #[test]
    fn program_initialises_the_control_block_then_hands_over_with_the_shadow_stores() {
        let layout = RingLayout::new(4, 8, 32).unwrap();
        let region = region_for(&layout);
        region
            .store_u64(METADATA_TAIL_OFFSET, 99, Ordering::Relaxed)
            .unwrap();
        let programmed = program(region, &layout, 5).unwrap();
        let mapped = &programmed.region;
        assert_eq!(
            mapped
                .load_u64(METADATA_TAIL_OFFSET, Ordering::Acquire)
                .unwrap(),
            0
        );
        let mut line = [0u8; 128];
        mapped.read_bytes(0, &mut line).unwrap();
        assert_eq!(
            StaticLine::read_from_bytes(&line).unwrap(),
            layout.static_line(5)
        );
        assert_eq!(
            programmed.stores,
            shadow_stores(mapped, &layout, 5).unwrap()
        );
    }

    #[test]
    fn init_writes_static_line_zeroes_indexes_and_poisons_records() {
        let layout = RingLayout::new(4, 8, 32).unwrap();
        let region = region_for(&layout);
        // Dirty memory, as a reused frame would be.
        region
            .store_u64(METADATA_TAIL_OFFSET, 99, Ordering::Relaxed)
            .unwrap();
        region
            .store_u64(PAYLOAD_HEAD_OFFSET, 98, Ordering::Relaxed)
            .unwrap();
        init_control_block(&region, &layout, 5).unwrap();
        let mut line = [0u8; 128];
        region.read_bytes(0, &mut line).unwrap();
        let static_line = StaticLine::read_from_bytes(&line).unwrap();
        assert_eq!(static_line, layout.static_line(5));
        assert_eq!(static_line.magic, ABI_MAGIC);
        assert_eq!(
            region
                .load_u64(METADATA_TAIL_OFFSET, Ordering::Relaxed)
                .unwrap(),
            0
        );
        assert_eq!(
            region
                .load_u64(PAYLOAD_HEAD_OFFSET, Ordering::Relaxed)
                .unwrap(),
            0
        );
        for index in 0..4 {
            let offset = layout.metadata_slot_offset(index);
            assert_eq!(
                region.load_u64(offset, Ordering::Relaxed).unwrap(),
                POISON_SEQUENCE
            );
        }
    }
}
