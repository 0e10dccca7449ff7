//! Ring index arithmetic.
//!
//! Ring indexes are free-running `u64` counters; the slot of an index is `index % capacity`.
//! There is no phase bit and no wrap ambiguity: a `u64` incremented once per nanosecond lasts
//! 584 years, so `tail - head` is always the true occupancy and an index is never reused (no
//! ABA). Every function here is a pure `const fn`.

/// A free-running ring index (head or tail).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct RingIndex(pub u64);

impl RingIndex {
    /// The slot this index names in a ring of `capacity` slots (`capacity` > 0).
    pub const fn slot(self, capacity: u32) -> u32 {
        // The remainder is below `capacity`, so it fits in u32; capacity 0 names slot 0.
        match self.0.checked_rem(capacity as u64) {
            Some(slot) => slot as u32,
            None => 0,
        }
    }

    /// The index `n` positions later.
    #[must_use]
    pub const fn advanced(self, n: u64) -> RingIndex {
        RingIndex(self.0.wrapping_add(n))
    }
}

/// Entries produced but not yet consumed, or `None` when `head` is beyond `tail` (a host that
/// claims to have consumed what was never produced: a protocol violation).
pub const fn occupancy(head: RingIndex, tail: RingIndex) -> Option<u64> {
    tail.0.checked_sub(head.0)
}

/// Slots the producer may still fill without overwriting an unconsumed entry, computed from a
/// possibly stale copy of `head`. A stale head is older, hence smaller, so the answer is
/// conservative. `None` on a protocol violation (head beyond tail, or more occupied than fits).
pub const fn free_slots(head: RingIndex, tail: RingIndex, capacity: u32) -> Option<u64> {
    match occupancy(head, tail) {
        Some(used) => (capacity as u64).checked_sub(used),
        _ => None,
    }
}

/// Whether a new head is acceptable: it moves forward from `old_head` (heads never go back)
/// and does not pass `tail`.
pub const fn head_update_is_valid(
    old_head: RingIndex,
    new_head: RingIndex,
    tail: RingIndex,
) -> bool {
    new_head.0 >= old_head.0 && new_head.0 <= tail.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn slot_wraps_modulo_capacity() {
        assert_eq!(RingIndex(0).slot(4), 0);
        assert_eq!(RingIndex(5).slot(4), 1);
        assert_eq!(RingIndex(u64::MAX).slot(7), (u64::MAX % 7) as u32);
    }

    #[test]
    fn head_beyond_tail_is_a_violation_not_a_huge_occupancy() {
        assert_eq!(occupancy(RingIndex(5), RingIndex(3)), None);
        assert_eq!(free_slots(RingIndex(5), RingIndex(3), 8), None);
    }

    #[test]
    fn over_full_ring_is_a_violation() {
        assert_eq!(free_slots(RingIndex(0), RingIndex(9), 8), None);
        assert_eq!(free_slots(RingIndex(1), RingIndex(9), 8), Some(0));
    }

    proptest! {
        #[test]
        fn stale_head_never_grants_more_room_than_the_true_head(
            head in 0u64..1_000_000, consumed_since in 0u64..64, used in 0u64..64, cap in 64u32..128,
        ) {
            let stale = RingIndex(head);
            let fresh = RingIndex(head + consumed_since);
            let tail = RingIndex(head + consumed_since + used);
            let stale_free = free_slots(stale, tail, cap);
            let fresh_free = free_slots(fresh, tail, cap);
            if let (Some(s), Some(f)) = (stale_free, fresh_free) {
                prop_assert!(s <= f);
            }
            prop_assert!(fresh_free.is_some());
        }

        #[test]
        fn producer_filling_free_slots_never_overwrites_unconsumed(head in 0u64..1_000, used in 0u64..32, cap in 1u32..32) {
            let used = used.min(cap as u64);
            let tail = RingIndex(head + used);
            let free = free_slots(RingIndex(head), tail, cap).unwrap();
            // Every index the producer may write lands on a slot that no unconsumed index holds.
            for k in 0..free {
                let write = tail.advanced(k);
                for live in head..tail.0 {
                    prop_assert_ne!(write.slot(cap), RingIndex(live).slot(cap));
                }
            }
        }
    }
}
