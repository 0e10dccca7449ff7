//! The scatter-gather list of a DMA region: one [`ScatterGatherEntry`] per physically
//! contiguous piece, in region order (entry `k` starts at the region offset that is the sum of
//! the lengths of entries `0..k`).
//!
//! Physically adjacent frames are merged into one entry, so the list is as short as the
//! region's physical layout allows. The device's table holds at most
//! [`MAX_SG_ENTRIES`] entries; a longer list is refused here rather than truncated there.

use crate::frames::{FrameAllocator, FrameError, FRAME_SIZE, MAX_RUN_FRAMES};
use shared_abi::sgl::MAX_SG_ENTRIES;
use shared_abi::{HostPhysAddr, ScatterGatherEntry};

/// A scatter-gather list that cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SglError {
    /// The region needs more entries than the device's table holds.
    #[error("region needs {entries} scatter-gather entries; the device holds at most {max}")]
    TooManyEntries {
        /// Entries the region needs.
        entries: usize,
        /// [`MAX_SG_ENTRIES`].
        max: usize,
    },
    /// The frames do not cover the length with one frame per started 4 KiB.
    #[error("{frames} frames cannot back a region of {length} bytes")]
    FrameCount {
        /// Frames given.
        frames: usize,
        /// Region length.
        length: u64,
    },
}

/// The longest region any list the device accepts can describe: [`MAX_SG_ENTRIES`] entries of
/// at most one run of the frame allocator each ([`MAX_RUN_FRAMES`] frames of 4 KiB): 64 MiB.
/// A longer region is refused before anything is allocated for it; a shorter one may still
/// need too many entries (the allocator's runs are usually shorter), which
/// [`entries_for_first_region`] tells without allocating the memory.
pub const MAX_REGION_BYTES: u64 = MAX_SG_ENTRIES as u64 * MAX_RUN_FRAMES as u64 * FRAME_SIZE;

/// Why [`entries_for_first_region`] cannot describe a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FirstRegionError {
    /// The region is longer than [`MAX_REGION_BYTES`] (nothing was tried).
    #[error("a region of {length} bytes is longer than any scatter-gather list of {max_entries} entries can describe ({max_bytes} bytes)")]
    TooLong {
        /// The region's length.
        length: u64,
        /// [`MAX_SG_ENTRIES`].
        max_entries: usize,
        /// [`MAX_REGION_BYTES`].
        max_bytes: u64,
    },
    /// The frame allocator could not give the frames.
    #[error(transparent)]
    Frames(#[from] FrameError),
    /// The list cannot be built (too many entries).
    #[error(transparent)]
    List(#[from] SglError),
}

/// The scatter-gather entries a region of `length` bytes needs when it is the first region a
/// fresh [`FrameAllocator`] over `memory_bytes` of physical memory hands out, which is what a
/// run does: a dry run of the allocator (it is deterministic: same calls, same frames), with
/// no physical memory allocated. Refuses a region longer than [`MAX_REGION_BYTES`] before
/// trying, so the dry run's own allocations stay small (one flag per frame of at most
/// `memory_bytes`, which the caller bounds).
pub fn entries_for_first_region(memory_bytes: u64, length: u64) -> Result<usize, FirstRegionError> {
    if length > MAX_REGION_BYTES {
        return Err(FirstRegionError::TooLong {
            length,
            max_entries: MAX_SG_ENTRIES,
            max_bytes: MAX_REGION_BYTES,
        });
    }
    let frames = FrameAllocator::new(memory_bytes).allocate(length)?;
    Ok(entries_from_frames(&frames, length)?.len())
}

/// The scatter-gather list of a region of `length` bytes over `frames` (region order; a
/// region's [`frames`](crate::dma::MappedRegion::frames)): every frame contributes 4096 bytes
/// except the last, which contributes the rest.
pub fn entries_from_frames(
    frames: &[HostPhysAddr],
    length: u64,
) -> Result<Vec<ScatterGatherEntry>, SglError> {
    if length == 0 || frames.len() as u64 != length.div_ceil(FRAME_SIZE) {
        return Err(SglError::FrameCount {
            frames: frames.len(),
            length,
        });
    }
    // Count first, so an oversized list is refused with its real length and never built.
    let breaks = frames
        .windows(2)
        .filter(|pair| match pair {
            [previous, next] => previous.0.checked_add(FRAME_SIZE) != Some(next.0),
            _ => false,
        })
        .count();
    let needed = breaks + 1;
    if needed > MAX_SG_ENTRIES {
        return Err(SglError::TooManyEntries {
            entries: needed,
            max: MAX_SG_ENTRIES,
        });
    }
    let mut entries: Vec<ScatterGatherEntry> = Vec::with_capacity(needed);
    let mut remaining = length;
    for frame in frames {
        let bytes = remaining.min(FRAME_SIZE);
        remaining -= bytes;
        match entries.last_mut() {
            // Only a full frame can be followed by another, so `last` ends on a frame boundary.
            Some(last) if last.host_phys.checked_add(last.length) == Some(frame.0) => {
                last.length += bytes;
            }
            _ => entries.push(ScatterGatherEntry {
                host_phys: frame.0,
                length: bytes,
            }),
        }
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dma::DmaRegion;

    fn frames(numbers: &[u64]) -> Vec<HostPhysAddr> {
        numbers
            .iter()
            .map(|n| HostPhysAddr(n * FRAME_SIZE))
            .collect()
    }

    #[test]
    fn adjacent_frames_merge_into_one_entry() {
        let entries = entries_from_frames(&frames(&[5, 6, 7, 2, 3, 9]), 6 * FRAME_SIZE).unwrap();
        assert_eq!(
            entries,
            vec![
                ScatterGatherEntry {
                    host_phys: 5 * FRAME_SIZE,
                    length: 3 * FRAME_SIZE
                },
                ScatterGatherEntry {
                    host_phys: 2 * FRAME_SIZE,
                    length: 2 * FRAME_SIZE
                },
                ScatterGatherEntry {
                    host_phys: 9 * FRAME_SIZE,
                    length: FRAME_SIZE
                },
            ]
        );
    }

    #[test]
    fn frame_physically_before_its_predecessor_does_not_merge() {
        let entries = entries_from_frames(&frames(&[4, 3]), 2 * FRAME_SIZE).unwrap();
        assert_eq!(entries.len(), 2);
    }

    #[test]
    fn last_entry_carries_only_the_rest_of_the_length() {
        let entries = entries_from_frames(&frames(&[1, 3]), FRAME_SIZE + 64).unwrap();
        assert_eq!(entries[1].length, 64);
        assert_eq!(
            entries.iter().map(|e| e.length).sum::<u64>(),
            FRAME_SIZE + 64
        );
    }

    #[test]
    fn list_longer_than_the_device_table_is_refused_with_its_real_length() {
        // Every other frame: no two adjacent.
        let numbers: Vec<u64> = (0..MAX_SG_ENTRIES as u64 + 5).map(|i| 1 + 2 * i).collect();
        let length = numbers.len() as u64 * FRAME_SIZE;
        assert_eq!(
            entries_from_frames(&frames(&numbers), length),
            Err(SglError::TooManyEntries {
                entries: MAX_SG_ENTRIES + 5,
                max: MAX_SG_ENTRIES
            })
        );
    }

    #[test]
    fn list_of_exactly_the_device_table_size_is_accepted() {
        let numbers: Vec<u64> = (0..MAX_SG_ENTRIES as u64).map(|i| 1 + 2 * i).collect();
        let length = numbers.len() as u64 * FRAME_SIZE;
        assert_eq!(
            entries_from_frames(&frames(&numbers), length)
                .unwrap()
                .len(),
            MAX_SG_ENTRIES
        );
    }

    #[test]
    fn frame_count_that_does_not_match_the_length_is_refused() {
        assert_eq!(
            entries_from_frames(&frames(&[1, 3]), FRAME_SIZE),
            Err(SglError::FrameCount {
                frames: 2,
                length: FRAME_SIZE
            })
        );
    }

    #[test]
    fn the_dry_run_counts_the_entries_the_real_allocation_gets() {
        use crate::frames::FrameAllocator;
        use crate::phys::PhysicalMemory;
        use crate::sync::Arc;
        let memory_bytes = 2048 * FRAME_SIZE;
        let length = 700 * FRAME_SIZE + 64;
        let memory = Arc::new(PhysicalMemory::new(memory_bytes).unwrap());
        let mut allocator = FrameAllocator::new(memory.len());
        let region = DmaRegion::allocate(memory, &mut allocator, length).unwrap();
        assert_eq!(
            entries_for_first_region(memory_bytes, length),
            Ok(entries_from_frames(region.frames(), region.len())
                .unwrap()
                .len())
        );
    }

    #[test]
    fn a_region_beyond_any_list_is_refused_before_the_dry_run() {
        assert_eq!(MAX_REGION_BYTES, 64 << 20);
        assert!(matches!(
            entries_for_first_region(u64::MAX, MAX_REGION_BYTES + FRAME_SIZE),
            Err(FirstRegionError::TooLong { .. })
        ));
    }

    #[test]
    fn allocated_region_list_covers_its_frames_in_order() {
        use crate::frames::FrameAllocator;
        use crate::phys::PhysicalMemory;
        use crate::sync::Arc;
        let memory = Arc::new(PhysicalMemory::new(512 * FRAME_SIZE).unwrap());
        let mut allocator = FrameAllocator::new(memory.len());
        let region =
            DmaRegion::allocate(Arc::clone(&memory), &mut allocator, 100 * FRAME_SIZE).unwrap();
        let entries = entries_from_frames(region.frames(), region.len()).unwrap();
        assert!(entries.len() > 1);
        // Walking the entries reproduces the frame list.
        let walked: Vec<HostPhysAddr> = entries
            .iter()
            .flat_map(|e| {
                (0..e.length / FRAME_SIZE).map(move |k| HostPhysAddr(e.host_phys + k * FRAME_SIZE))
            })
            .collect();
        assert_eq!(walked, region.frames());
    }
}
