//! The firmware's scratch area in device memory.
//!
//! State whose size grows with a launch (per-chunk population counters, the ready-chunk queue)
//! and the DMA descriptor chain live in device DRAM, as a real firmware would keep them, so the
//! firmware itself holds only fixed-size state and never allocates. The board (or emulator)
//! reserves [`ScratchLayout::bytes`] of device memory at `base` and hands the layout to
//! [`crate::Firmware::new`].
//!
//! | part | entry | purpose |
//! |------|-------|---------|
//! | descriptor ring | 32 B [`crate::hal::DmaDescriptor`] | DMA chains |
//! | staging cells | 32 B | metadata records and tail values the DMA engine copies out |
//! | chunk counters | 4 B | result bytes populated per slot-sized chunk of the result space |
//! | ready queue | 4 B | chunk numbers that became complete, in completion order |

use shared_abi::DeviceAddress;

/// Bytes of one descriptor or staging cell.
pub const CELL: u64 = 32;

/// Where each part of the scratch area lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScratchLayout {
    /// First byte of the scratch area.
    pub base: DeviceAddress,
    /// Descriptor ring entries.
    pub descriptor_capacity: u32,
    /// Staging cells.
    pub staging_capacity: u32,
    /// Most slot-sized chunks one launch's result space may have.
    pub chunk_capacity: u32,
}

impl ScratchLayout {
    /// A layout with room for `chunk_capacity` result chunks and a DMA chain sized for the
    /// largest ring the host can program.
    pub const fn new(base: DeviceAddress, chunk_capacity: u32) -> ScratchLayout {
        ScratchLayout {
            base,
            descriptor_capacity: 1 << 18,
            staging_capacity: 1 << 18,
            chunk_capacity,
        }
    }

    /// Bytes of device memory the layout needs.
    pub const fn bytes(&self) -> u64 {
        (self.descriptor_capacity as u64)
            .saturating_add(self.staging_capacity as u64)
            .saturating_mul(CELL)
            .saturating_add((self.chunk_capacity as u64).saturating_mul(8))
    }

    /// Device address of descriptor slot 0.
    pub const fn descriptor_base(&self) -> DeviceAddress {
        self.base
    }

    /// Device address of staging cell 0.
    pub const fn staging_base(&self) -> DeviceAddress {
        DeviceAddress(
            self.base
                .0
                .saturating_add((self.descriptor_capacity as u64).saturating_mul(CELL)),
        )
    }

    /// Device address of chunk counter 0.
    pub const fn counters_base(&self) -> DeviceAddress {
        DeviceAddress(
            self.staging_base()
                .0
                .saturating_add((self.staging_capacity as u64).saturating_mul(CELL)),
        )
    }

    /// Device address of ready-queue entry 0.
    pub const fn ready_base(&self) -> DeviceAddress {
        DeviceAddress(
            self.counters_base()
                .0
                .saturating_add((self.chunk_capacity as u64).saturating_mul(4)),
        )
    }

    /// Address of entry `index` (free-running) of a ring of `capacity` cells at `base`.
    pub const fn cell(
        base: DeviceAddress,
        index: u64,
        capacity: u32,
        cell_bytes: u64,
    ) -> DeviceAddress {
        let slot = match index.checked_rem(capacity as u64) {
            Some(slot) => slot,
            None => 0,
        };
        DeviceAddress(base.0.saturating_add(slot.saturating_mul(cell_bytes)))
    }

    /// Address of entry `index` of that ring when entry `index + 1` is the cell right after
    /// it (not across the ring's wrap), so that one write can fill both; `None` otherwise.
    #[inline]
    pub const fn cell_pair(
        base: DeviceAddress,
        index: u64,
        capacity: u32,
        cell_bytes: u64,
    ) -> Option<DeviceAddress> {
        let first = Self::cell(base, index, capacity, cell_bytes);
        let second = Self::cell(base, index.saturating_add(1), capacity, cell_bytes);
        match first.0.checked_add(cell_bytes) {
            Some(end) if end == second.0 => Some(first),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pair of cells is one write's target exactly when the second follows the first: every
    /// entry of a 4-cell ring but the last, whose next entry wraps to the ring's start.
    #[test]
    fn a_cell_pair_exists_except_across_the_wrap() {
        let base = DeviceAddress(0x1000);
        let pairs: [Option<DeviceAddress>; 5] =
            core::array::from_fn(|index| ScratchLayout::cell_pair(base, index as u64, 4, 32));
        assert_eq!(
            pairs,
            [
                Some(DeviceAddress(0x1000)),
                Some(DeviceAddress(0x1020)),
                Some(DeviceAddress(0x1040)),
                None,
                Some(DeviceAddress(0x1000)),
            ]
        );
        assert_eq!(ScratchLayout::cell_pair(base, 7, 1, 32), None, "one cell");
    }
}
