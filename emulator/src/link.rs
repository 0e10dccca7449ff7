//! The CXL link: one serializer per direction, plus protocol latency.
//!
//! A transfer occupies its direction for `(bytes + overhead) / bandwidth` and arrives one
//! half round trip after it leaves the wire. Transfers in one direction never overtake each
//! other (FIFO), which is what PCIe posted-write ordering gives the DMA engine.

use crate::sim::time::transfer;
use shared_abi::Ticks;

/// One direction of the link.
#[derive(Clone, Copy, Debug, Default)]
pub struct Direction {
    free_at: Ticks,
    busy: Ticks,
}

impl Direction {
    /// Sends `bytes` (payload plus the configured overhead) no earlier than `ready`; returns
    /// when the last byte leaves the wire.
    pub fn send(&mut self, ready: Ticks, bytes: u64, gbps: f64) -> Ticks {
        let start = ready.max(self.free_at);
        let duration = transfer(bytes, gbps);
        let end = start.plus(duration);
        self.free_at = end;
        self.busy = self.busy.plus(duration);
        end
    }

    /// Total time the direction carried data.
    pub fn busy(&self) -> Ticks {
        self.busy
    }
}

/// Both directions.
#[derive(Clone, Copy, Debug, Default)]
pub struct Link {
    /// Host to device.
    pub downstream: Direction,
    /// Device to host.
    pub upstream: Direction,
}
