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
    /// Durations computed before, by `(bytes / 8) % 4`: `(bytes, gbps bits, duration)`. A DMA
    /// request's writes come in a few sizes (payload, record, tail), and a duration depends on
    /// its two inputs only, so a hit gives exactly what [`transfer`] would (whose `f64`
    /// rounding was a third of a DMA write's link cost). The all-zero entry is correct too:
    /// no bytes take no time.
    durations: [(u64, u64, Ticks); 4],
}

impl Direction {
    /// Sends `bytes` (payload plus the configured overhead) no earlier than `ready`; returns
    /// when the last byte leaves the wire.
    pub fn send(&mut self, ready: Ticks, bytes: u64, gbps: f64) -> Ticks {
        self.send_span(ready, bytes, gbps).1
    }

    /// [`Direction::send`], returning also when the first byte goes on the wire.
    #[inline]
    pub fn send_span(&mut self, ready: Ticks, bytes: u64, gbps: f64) -> (Ticks, Ticks) {
        let duration = self.duration(bytes, gbps);
        self.send_span_taking(ready, duration)
    }

    /// How long `bytes` (payload plus overhead) occupy the direction at `gbps`: what
    /// [`Direction::send_span`] of them takes, for a caller sending many of one size.
    #[inline]
    pub fn duration_of(&mut self, bytes: u64, gbps: f64) -> Ticks {
        self.duration(bytes, gbps)
    }

    /// [`Direction::send_span`] of a transfer that takes `duration` ([`Direction::duration_of`]).
    #[inline]
    pub fn send_span_taking(&mut self, ready: Ticks, duration: Ticks) -> (Ticks, Ticks) {
        let start = ready.max(self.free_at);
        let end = start.plus(duration);
        self.free_at = end;
        self.busy = self.busy.plus(duration);
        (start, end)
    }

    /// [`transfer`]`(bytes, gbps)`, remembered.
    fn duration(&mut self, bytes: u64, gbps: f64) -> Ticks {
        let bits = gbps.to_bits();
        let index = ((bytes >> 3) & 3) as usize;
        if let Some(entry) = self.durations.get_mut(index) {
            if entry.0 == bytes && entry.1 == bits {
                return entry.2;
            }
            let duration = transfer(bytes, gbps);
            *entry = (bytes, bits, duration);
            return duration;
        }
        transfer(bytes, gbps)
    }

    /// When the direction is next free: the end of the last transfer sent.
    pub fn free_at(&self) -> Ticks {
        self.free_at
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

    #[test]
    fn a_remembered_duration_is_the_one_transfer_computes() {
        let mut direction = Direction::default();
        // Sizes that share a memory entry, rates that differ in the last bit, and no bytes.
        let rates = [64.0, f64::from_bits(64.0_f64.to_bits() + 1), 3.3, 0.7];
        for round in 0..3u64 {
            for bytes in [0, 8, 40, 72, 16, 48, 4104, 4136, 1, 7] {
                for &gbps in &rates {
                    let bytes = bytes + round * 32;
                    assert_eq!(
                        direction.duration(bytes, gbps),
                        transfer(bytes, gbps),
                        "{bytes} bytes at {gbps}"
                    );
                }
            }
        }
    }
}
