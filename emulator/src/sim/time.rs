//! Conversions into virtual time.

use shared_abi::Ticks;

/// Ticks to move `bytes` at `gbps` bytes per nanosecond, rounded up (never zero for a
/// non-empty transfer).
pub fn transfer(bytes: u64, gbps: f64) -> Ticks {
    if bytes == 0 {
        return Ticks::ZERO;
    }
    // bytes / (bytes/ns) = ns; ticks = ns * 6. f64 is exact enough far beyond any run length,
    // and the rounding is deterministic.
    let ticks = (bytes as f64 * Ticks::PER_NS as f64 / gbps).ceil();
    Ticks((ticks as u64).max(1))
}

/// Half a round trip, for one direction.
pub fn one_way(round_trip_ns: u64) -> Ticks {
    Ticks(Ticks::from_ns(round_trip_ns).0 / 2)
}
