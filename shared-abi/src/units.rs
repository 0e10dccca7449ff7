//! Units and address spaces as `#[repr(transparent)]` newtypes: a bare `u64` address never
//! crosses a crate boundary.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Virtual time in ticks of 1/6 ns.
///
/// One tick is exact for both clock domains of the modelled system: a 3 GHz host cycle is two
/// ticks and a 2 GHz CCM cycle is three. Virtual time is monotonic and never wraps (2^64 ticks
/// is about 97 years).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct Ticks(pub u64);

impl Ticks {
    /// Ticks in one nanosecond.
    pub const PER_NS: u64 = 6;
    /// Time zero.
    pub const ZERO: Ticks = Ticks(0);
    /// A time later than every event of any run.
    pub const NEVER: Ticks = Ticks(u64::MAX);

    /// `ns` nanoseconds.
    pub const fn from_ns(ns: u64) -> Ticks {
        Ticks(ns.saturating_mul(Self::PER_NS))
    }

    /// `ps` picoseconds, rounded up to the next tick (so a non-zero delay never becomes zero).
    pub const fn from_ps_ceil(ps: u64) -> Ticks {
        // 1 tick = 1000/6 ps; ticks = ceil(ps * 6 / 1000).
        Ticks(ps.saturating_mul(6).saturating_add(999) / 1000)
    }

    /// `cycles` cycles of a clock of `mhz` megahertz, rounded up to a whole tick.
    pub const fn from_cycles(cycles: u64, mhz: u64) -> Ticks {
        // ticks = cycles * 6000 / mhz, rounded up.
        match cycles
            .saturating_mul(6000)
            .saturating_add(mhz.saturating_sub(1))
            .checked_div(mhz)
        {
            Some(ticks) => Ticks(ticks),
            None => Ticks::NEVER,
        }
    }

    /// Whole nanoseconds, rounded down.
    pub const fn as_ns(self) -> u64 {
        self.0 / Self::PER_NS
    }

    /// `self + other`, saturating at [`Ticks::NEVER`].
    #[must_use]
    pub const fn plus(self, other: Ticks) -> Ticks {
        Ticks(self.0.saturating_add(other.0))
    }

    /// `self - other`, or zero when `other` is later.
    #[must_use]
    pub const fn since(self, other: Ticks) -> Ticks {
        Ticks(self.0.saturating_sub(other.0))
    }
}

/// An address in the device's HDM range as the host sees it through CXL.mem (offset from the
/// base of the device window).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    FromBytes,
    IntoBytes,
    Immutable,
    KnownLayout,
)]
#[repr(transparent)]
pub struct DeviceAddress(pub u64);

impl DeviceAddress {
    /// `self + bytes`, or `None` on overflow.
    pub const fn checked_add(self, bytes: u64) -> Option<DeviceAddress> {
        match self.0.checked_add(bytes) {
            Some(a) => Some(DeviceAddress(a)),
            None => None,
        }
    }
}

/// A host "physical" address: an offset in the shared-memory file that stands for host
/// physical memory. DMA writes target these; the device learns them only from the shadow
/// scatter-gather table.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    FromBytes,
    IntoBytes,
    Immutable,
    KnownLayout,
)]
#[repr(transparent)]
pub struct HostPhysAddr(pub u64);

/// A byte count.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    FromBytes,
    IntoBytes,
    Immutable,
    KnownLayout,
)]
#[repr(transparent)]
pub struct ByteLength(pub u64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_host_cycle_is_two_ticks_and_one_ccm_cycle_is_three() {
        assert_eq!(Ticks::from_cycles(1, 3000), Ticks(2));
        assert_eq!(Ticks::from_cycles(1, 2000), Ticks(3));
        assert_eq!(Ticks::from_cycles(3000, 3000), Ticks::from_ns(1000));
    }

    #[test]
    fn picoseconds_round_up_so_small_delays_are_never_zero() {
        assert_eq!(Ticks::from_ps_ceil(1), Ticks(1));
        assert_eq!(Ticks::from_ps_ceil(1000), Ticks(6));
        assert_eq!(Ticks::from_ps_ceil(0), Ticks(0));
    }

    #[test]
    fn as_ns_rounds_down_to_whole_nanoseconds() {
        assert_eq!(Ticks::from_ns(1_000).as_ns(), 1_000);
        assert_eq!(Ticks(13).as_ns(), 2);
        assert_eq!(Ticks(5).as_ns(), 0);
    }

    #[test]
    fn since_saturates_at_zero() {
        assert_eq!(Ticks(5).since(Ticks(9)), Ticks(0));
        assert_eq!(Ticks(9).since(Ticks(5)), Ticks(4));
    }
}
