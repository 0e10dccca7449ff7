//! Credits from flow control: the device's stale copies of the host's heads.
//!
//! The host sends its new heads with CXL.mem stores into the flow-control block of device
//! memory and never waits for the device. The executor keeps cached copies and reads the block
//! only when its cached copy says a ring is full (edge D5). A stale head is older, hence
//! smaller, than the true one, so it grants less room, never more: the device never writes past
//! its cached head plus the capacity.

use crate::error::FirmwareError;
use crate::hal::DeviceMemory;
use shared_abi::ring::{free_slots, head_update_is_valid, RingIndex};
use shared_abi::{device_map, FlowControlMessage};

/// The cached heads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Credits {
    metadata_head: u64,
    payload_head: u64,
}

impl Credits {
    /// Fresh credits for a newly programmed ring (both heads at zero).
    pub const fn new() -> Credits {
        Credits {
            metadata_head: 0,
            payload_head: 0,
        }
    }

    /// The cached metadata head.
    pub const fn metadata_head(&self) -> u64 {
        self.metadata_head
    }

    /// The cached payload head.
    pub const fn payload_head(&self) -> u64 {
        self.payload_head
    }

    /// Free slots in both rings by the cached heads: `(metadata, payload)`. A cached head beyond
    /// a tail cannot happen (refresh validates), but is treated as zero room, not a panic.
    pub fn free(
        &self,
        metadata_tail: u64,
        metadata_capacity: u32,
        payload_tail: u64,
        payload_capacity: u32,
    ) -> (u64, u64) {
        let metadata = free_slots(
            RingIndex(self.metadata_head),
            RingIndex(metadata_tail),
            metadata_capacity,
        )
        .unwrap_or(0);
        let payload = free_slots(
            RingIndex(self.payload_head),
            RingIndex(payload_tail),
            payload_capacity,
        )
        .unwrap_or(0);
        (metadata, payload)
    }

    /// Edge D5: reads the host's heads from the flow-control block and adopts them. A head that
    /// moves backwards or passes the device's own tail is a protocol violation:
    /// [`FirmwareError::HeadBeyondTail`], and the caller latches the ring BROKEN.
    pub fn refresh<M: DeviceMemory>(
        &mut self,
        memory: &M,
        metadata_tail: u64,
        payload_tail: u64,
    ) -> Result<(), FirmwareError> {
        let message: FlowControlMessage = memory.read_value(device_map::FLOW_CONTROL)?;
        let metadata_ok = head_update_is_valid(
            RingIndex(self.metadata_head),
            RingIndex(message.metadata_head),
            RingIndex(metadata_tail),
        );
        let payload_ok = head_update_is_valid(
            RingIndex(self.payload_head),
            RingIndex(message.payload_head),
            RingIndex(payload_tail),
        );
        if !(metadata_ok && payload_ok) {
            return Err(FirmwareError::HeadBeyondTail);
        }
        self.metadata_head = message.metadata_head;
        self.payload_head = message.payload_head;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeDeviceMemory;

    fn memory_with_heads(metadata_head: u64, payload_head: u64) -> FakeDeviceMemory {
        let memory = FakeDeviceMemory::new(0x2000);
        memory.put(
            device_map::FLOW_CONTROL,
            &FlowControlMessage {
                metadata_head,
                payload_head,
            },
        );
        memory
    }

    #[test]
    fn refresh_adopts_valid_heads_and_the_accessors_report_them() {
        let mut credits = Credits::new();
        assert_eq!((credits.metadata_head(), credits.payload_head()), (0, 0));
        credits.refresh(&memory_with_heads(3, 2), 5, 4).unwrap();
        assert_eq!(credits.metadata_head(), 3);
        assert_eq!(credits.payload_head(), 2);
        // Free room follows the adopted heads: 8 - (5 - 3) and 4 - (4 - 2).
        assert_eq!(credits.free(5, 8, 4, 4), (6, 2));
    }

    #[test]
    fn refused_refresh_keeps_the_cached_heads() {
        let mut credits = Credits::new();
        credits.refresh(&memory_with_heads(3, 2), 5, 4).unwrap();
        // The payload head passes the payload tail (4): nothing is adopted, not even the
        // metadata head, which alone would be valid.
        assert_eq!(
            credits.refresh(&memory_with_heads(4, 5), 5, 4),
            Err(FirmwareError::HeadBeyondTail)
        );
        assert_eq!((credits.metadata_head(), credits.payload_head()), (3, 2));
    }
}
