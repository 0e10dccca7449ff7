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
        self.send_span(ready, bytes, gbps).1
    }

    /// [`Direction::send`], returning also when the first byte goes on the wire.
    pub fn send_span(&mut self, ready: Ticks, bytes: u64, gbps: f64) -> (Ticks, Ticks) {
        let start = ready.max(self.free_at);
        let duration = transfer(bytes, gbps);
        let end = start.plus(duration);
        self.free_at = end;
        self.busy = self.busy.plus(duration);
        (start, end)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfers_in_one_direction_never_overtake_each_other() {
        let mut direction = Direction::default();
        // 64 GB/s: 640 bytes take 10 ns (60 ticks).
        let first = direction.send(Ticks::ZERO, 640, 64.0);
        assert_eq!(first, Ticks::from_ns(10));
        // Ready earlier than the wire is free: it waits.
        let second = direction.send(Ticks::from_ns(5), 64, 64.0);
        assert_eq!(second, Ticks::from_ns(11));
        // Ready after the wire is free: it starts when ready.
        let third = direction.send(Ticks::from_ns(100), 64, 64.0);
        assert_eq!(third, Ticks::from_ns(101));
        assert_eq!(direction.busy(), Ticks::from_ns(12));
    }
}
