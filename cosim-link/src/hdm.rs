//! The allocator of the device's data memory (the HDM range from
//! [`shared_abi::device_map::DATA_BASE`] to where the firmware's scratch area begins).
//!
//! Data sets and result spaces are placed before the run (untimed set-up) and never freed: a
//! bump allocator. The in-process emulator and an attached host run the same one, over the
//! window the device announces, so both place every buffer at the same device address.

use shared_abi::DeviceAddress;

/// A bump allocator over `[cursor, end)` of device memory.
///
/// # Invariants
///
/// `cursor <= end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataAllocator {
    cursor: u64,
    end: u64,
}

impl DataAllocator {
    /// An allocator over `[start, end)` (empty when `end <= start`).
    pub fn new(start: DeviceAddress, end: DeviceAddress) -> DataAllocator {
        // INVARIANT: cursor = min(start, end) <= end.
        DataAllocator {
            cursor: start.0.min(end.0),
            end: end.0,
        }
    }

    /// Bytes not yet allocated.
    pub fn available(&self) -> u64 {
        self.end - self.cursor
    }

    /// The end of the window (exclusive).
    pub fn end(&self) -> DeviceAddress {
        DeviceAddress(self.end)
    }

    /// Reserves `length` bytes aligned to `align` (rounded up to a power of two); `None` when
    /// they do not fit.
    pub fn allocate(&mut self, length: u64, align: u64) -> Option<DeviceAddress> {
        let align = align.max(1).checked_next_power_of_two()?;
        let start = self.cursor.checked_add(align - 1)? & !(align - 1);
        let end = start.checked_add(length)?;
        if end > self.end {
            return None;
        }
        // INVARIANT: end <= self.end.
        self.cursor = end;
        Some(DeviceAddress(start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_and_do_not_overlap() {
        let mut allocator = DataAllocator::new(DeviceAddress(0x1000), DeviceAddress(0x2000));
        assert_eq!(allocator.allocate(10, 1), Some(DeviceAddress(0x1000)));
        assert_eq!(allocator.allocate(8, 64), Some(DeviceAddress(0x1040)));
        assert_eq!(allocator.available(), 0x2000 - 0x1048);
    }

    #[test]
    fn an_allocation_past_the_end_is_refused_and_changes_nothing() {
        let mut allocator = DataAllocator::new(DeviceAddress(0x1000), DeviceAddress(0x2000));
        assert_eq!(allocator.allocate(0x1001, 1), None);
        assert_eq!(allocator.allocate(u64::MAX, 1), None);
        assert_eq!(allocator.allocate(8, u64::MAX), None);
        assert_eq!(allocator.available(), 0x1000);
    }
}
