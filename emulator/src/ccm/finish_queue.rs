//! A memory channel's items in order of their finish tags: a min-heap of `(tag bits, slot)`.
//!
//! A channel holds one part per item (an item's part on a channel is pushed once and popped
//! once before its slot can take another item), so no two keys are equal and any min-heap pops
//! them in the same order: by tag, then by slot, the order `BinaryHeap<Reverse<(u64, u32)>>`
//! gave.
//!
//! Most entries live in a queue of one `u64` each, `(tag bits - base) << shift | slot`
//! (`shift` the bits of a slot), which orders like the pair: one 64-bit comparison and one
//! word per level of a pop (128-bit keys took two of each). Tags are the channel's served
//! bytes (which only grow) plus an item's share, so the tags queued at once lie close
//! together, far inside the `2^(64 - shift)` tag bits a key holds. An entry that does not
//! pack (its tag below `base`, or too far above it even after moving `base` up to near the
//! least queued tag, or a slot of more than `shift` bits) waits in a second heap of exact
//! 128-bit keys; peek and pop take the least of the two queues' least, so the order is always
//! the pair's. Moving `base` up by `delta` subtracts `delta << shift` from every key (each
//! key's tag field is at least `delta`): their order is unchanged.
//!
//! A channel holds up to one entry per µthread (1,024 by default; with every item of a
//! 16-channel CCM on every channel, on each channel) and pops once per part. The packed keys
//! are in a [`BucketHeap`]: the tags queued at once spread over about an item's bytes above the
//! served bytes, new ones join above them, and they leave in order, so a pop sifts through the
//! heap of one bucket's keys, not through a binary heap of all of them (ten levels at 1,024,
//! about 150 instructions a pop). For SSSP at paper scale (330,440 parts on the default single
//! channel), `Ccm::memory_due`, which pops them, went from 87.2 M to 73.5 M instructions and the
//! pushes from 15.1 M to about 16 M (callgrind, 2026-12-03). A radix heap on these keys took
//! about 460 instructions a pop. The exact keys stay in the standard library's binary heap.

use super::bucket_heap::BucketHeap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The finish queue of one channel.
#[derive(Debug)]
pub(crate) struct FinishQueue {
    /// Packed keys, `(tag bits - base) << shift | slot`.
    near: BucketHeap,
    /// The entries that do not pack, `tag bits << 32 | slot`.
    far: BinaryHeap<Reverse<u128>>,
    /// Tag bits of a packed key's tag field 0.
    base: u64,
    /// Bits of a slot in a packed key (1 to 32).
    shift: u32,
}

fn pack_far(tag_bits: u64, slot: u32) -> u128 {
    (u128::from(tag_bits) << 32) | u128::from(slot)
}

fn unpack_far(key: u128) -> (u64, u32) {
    ((key >> 32) as u64, key as u32)
}

/// The lesser of two optional entries (`None` counts as none, not least).
fn least(a: Option<(u64, u32)>, b: Option<(u64, u32)>) -> Option<(u64, u32)> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

impl FinishQueue {
    /// An empty queue for slots below `slots` (larger slots are still queued, unpacked).
    pub(crate) fn new(slots: u32) -> FinishQueue {
        let shift = slots
            .max(2)
            .next_power_of_two()
            .trailing_zeros()
            .clamp(1, 32);
        FinishQueue {
            near: BucketHeap::default(),
            far: BinaryHeap::new(),
            base: 0,
            shift,
        }
    }

    /// Entries queued.
    pub(crate) fn len(&self) -> usize {
        self.near.len() + self.far.len()
    }

    /// Drops every entry (a stage cut short: `Ccm::abort`).
    pub(crate) fn clear(&mut self) {
        self.near.clear();
        self.far.clear();
    }

    /// Tag bits a packed key can hold above `base`: `2^(64 - shift)`.
    fn span(&self) -> u64 {
        1_u64 << (64 - self.shift)
    }

    fn unpack_near(&self, key: u64) -> (u64, u32) {
        let slot = key & ((1_u64 << self.shift) - 1);
        ((key >> self.shift).wrapping_add(self.base), slot as u32)
    }

    /// The packed key of `(tag_bits, slot)` at the current base, if it packs.
    fn pack_near(&self, tag_bits: u64, slot: u32) -> Option<u64> {
        let offset = tag_bits.checked_sub(self.base)?;
        if offset >= self.span() || u64::from(slot) >> self.shift != 0 {
            return None;
        }
        Some((offset << self.shift) | u64::from(slot))
    }

    /// The least packed entry.
    fn peek_near(&self) -> Option<(u64, u32)> {
        self.near.peek().map(|key| self.unpack_near(key))
    }

    /// The least `(tag bits, slot)`.
    pub(crate) fn peek(&self) -> Option<(u64, u32)> {
        let near = self.peek_near();
        if self.far.is_empty() {
            return near;
        }
        least(near, self.far.peek().map(|key| unpack_far(key.0)))
    }

    /// Queues `slot` finishing at the tag whose bits are `tag_bits` (non-negative tags order
    /// like their bits).
    #[inline(always)]
    pub(crate) fn push(&mut self, tag_bits: u64, slot: u32) {
        if let Some(key) = self.pack_near(tag_bits, slot) {
            self.near.push(key);
            return;
        }
        self.push_unpacked(tag_bits, slot);
    }

    /// [`FinishQueue::push`] of an entry that does not pack at the current base: packed after
    /// moving the base up (to a quarter span below the least of the packed tags and this
    /// one, never above the least packed tag) if that makes it fit, else kept exact.
    #[cold]
    fn push_unpacked(&mut self, tag_bits: u64, slot: u32) {
        if u64::from(slot) >> self.shift == 0 {
            let margin = self.span() / 4;
            let floor = match self.peek_near() {
                Some((least_bits, _)) => least_bits.min(tag_bits),
                None => tag_bits,
            };
            let new_base = floor.saturating_sub(margin);
            let fits = tag_bits
                .checked_sub(new_base)
                .is_some_and(|offset| offset < self.span());
            if fits && (new_base > self.base || self.near.is_empty()) {
                self.rebase(new_base);
                if let Some(key) = self.pack_near(tag_bits, slot) {
                    self.near.push(key);
                    return;
                }
            }
        }
        self.far.push(Reverse(pack_far(tag_bits, slot)));
    }

    /// Sets the base to `new_base`: at least the old one, or any when nothing is packed.
    fn rebase(&mut self, new_base: u64) {
        if self.near.is_empty() {
            self.base = new_base;
            return;
        }
        let delta = new_base.saturating_sub(self.base);
        // Every key's tag field is at least `delta` (`new_base` is at most the least packed
        // tag): the subtraction keeps each slot field and the keys' order.
        let step = delta << self.shift;
        self.near.rebuild(|key| key.wrapping_sub(step));
        self.base = self.base.wrapping_add(delta);
    }

    /// Removes every entry whose tag is at most `limit`, least first (what [`FinishQueue::pop`]
    /// of each while [`FinishQueue::peek`]'s tag, as an `f64`, is at most `limit` removes, in
    /// its order), and appends their slots to `out`.
    ///
    /// With every entry packed and `limit` non-negative (not NaN), the test is on the packed
    /// keys against one threshold key worked out once: non-negative values order like their
    /// bits, and the keys like their tags' bits, so a tag is at most `limit` exactly when its
    /// key is at most the key of `limit`'s bits with the largest slot field. Otherwise the
    /// entries are compared one by one.
    pub(crate) fn pop_due(&mut self, limit: f64, out: &mut Vec<u32>) {
        if !self.far.is_empty() || limit.is_nan() || limit.is_sign_negative() {
            while let Some((bits, slot)) = self.peek() {
                if f64::from_bits(bits) > limit {
                    break;
                }
                self.pop();
                out.push(slot);
            }
            return;
        }
        let Some(offset) = limit.to_bits().checked_sub(self.base) else {
            // Below every packed tag.
            return;
        };
        let slot_mask = (1_u64 << self.shift) - 1;
        let threshold = if offset >= self.span() {
            u64::MAX
        } else {
            (offset << self.shift) | slot_mask
        };
        while let Some(key) = self.near.peek() {
            if key > threshold {
                break;
            }
            self.near.pop();
            out.push((key & slot_mask) as u32);
        }
    }

    /// Removes the least entry.
    pub(crate) fn pop(&mut self) -> Option<(u64, u32)> {
        if self.far.is_empty() {
            return self.near.pop().map(|key| self.unpack_near(key));
        }
        let far = self.far.peek().map(|key| unpack_far(key.0));
        match (self.peek_near(), far) {
            (Some(near), Some(far)) if near < far => {
                self.near.pop();
                Some(near)
            }
            _ => self.far.pop().map(|key| unpack_far(key.0)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Pushes and pops `tag(rng, step)` tags with distinct slots (each slot queued at most once,
    /// as on a channel) against `BinaryHeap<Reverse<(u64, u32)>>`; returns how many entries
    /// were pushed while some entry was unpacked.
    fn matches_the_reference(
        slots: u32,
        queue_slots: u32,
        seed: u64,
        mut tag: impl FnMut(&mut rand::rngs::SmallRng, u32) -> f64,
    ) -> usize {
        let mut queue = FinishQueue::new(queue_slots);
        let mut reference = BinaryHeap::new();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let mut free: Vec<u32> = (0..slots).collect();
        let mut with_far = 0;
        for step in 0..50_000 {
            let push = rng.gen_range(0..3) != 0 || reference.is_empty();
            if push && !free.is_empty() {
                let slot = free.swap_remove(rng.gen_range(0..free.len()));
                let bits = tag(&mut rng, step).to_bits();
                queue.push(bits, slot);
                reference.push(Reverse((bits, slot)));
            } else {
                let popped = reference.pop().map(|Reverse(key)| key);
                assert_eq!(queue.pop(), popped, "step {step}");
                if let Some((_, slot)) = popped {
                    free.push(slot);
                }
            }
            if !queue.far.is_empty() {
                with_far += 1;
            }
            assert_eq!(queue.peek(), reference.peek().map(|&Reverse(key)| key));
            assert_eq!(queue.len(), reference.len());
        }
        while let Some(Reverse(key)) = reference.pop() {
            assert_eq!(queue.pop(), Some(key));
        }
        assert_eq!(queue.pop(), None);
        with_far
    }

    /// `pop_due` against the reference popped while its least tag is at most the limit:
    /// growing tags (mostly packed) and, in every other stretch, some far below the others
    /// (unpacked); limits at, between, below and above the tags, zero, negative zero, NaN and
    /// infinity.
    #[test]
    fn pop_due_takes_what_pops_while_the_least_tag_is_due_take() {
        let mut queue = FinishQueue::new(1_024);
        let mut reference = BinaryHeap::new();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5eed_d0e5);
        let mut free: Vec<u32> = (0..1_024).collect();
        let mut served = 0.0_f64;
        let (mut taken, mut with_far) = (0, 0);
        let mut out = Vec::new();
        for step in 0..40_000 {
            if rng.gen_range(0..4) != 0 && !free.is_empty() {
                let slot = free.swap_remove(rng.gen_range(0..free.len()));
                let tag = if (step / 2_000) % 2 == 1 && rng.gen_range(0..50) == 0 {
                    rng.gen_range(0.0..1.0)
                } else if rng.gen_range(0..20) == 0 {
                    served
                } else {
                    served + rng.gen_range(1.0..5_000.0)
                };
                queue.push(tag.to_bits(), slot);
                reference.push(Reverse((tag.to_bits(), slot)));
                continue;
            }
            served += rng.gen_range(0.0..400.0);
            let limit = match rng.gen_range(0..12) {
                0 => 0.0,
                1 => -0.0,
                2 => f64::NAN,
                3 => f64::INFINITY,
                4 => -1.0,
                5 => reference
                    .peek()
                    .map_or(served, |Reverse((bits, _))| f64::from_bits(*bits)),
                _ => served,
            };
            if !queue.far.is_empty() {
                with_far += 1;
            }
            out.clear();
            queue.pop_due(limit, &mut out);
            let mut expected = Vec::new();
            while let Some(&Reverse((bits, slot))) = reference.peek() {
                if f64::from_bits(bits) > limit {
                    break;
                }
                reference.pop();
                expected.push(slot);
            }
            assert_eq!(out, expected, "step {step}, limit {limit}");
            taken += out.len();
            free.extend_from_slice(&out);
            assert_eq!(queue.len(), reference.len());
        }
        assert!(taken > 10_000, "{taken}");
        assert!(with_far > 100, "{with_far}");
    }

    #[test]
    fn pops_in_the_order_of_a_binary_heap_of_tag_then_slot() {
        // Equal tags among small ones: ties by slot.
        matches_the_reference(1_024, 1_024, 0x2545_f491_4f6c_dd1d, |rng, _| {
            (rng.gen::<u64>() % 64) as f64 * 0.5 + 1.0
        });
    }

    #[test]
    fn growing_tags_and_far_spreads_keep_the_order() {
        // As a channel's tags: served bytes that grow, plus shares from a byte to a megabyte,
        // so the base moves up again and again.
        let mut served = 0.0_f64;
        let far = matches_the_reference(1_024, 1_024, 0x5eed_f1f0, move |rng, _| {
            served += rng.gen_range(0.0..50.0);
            served + 2.0_f64.powi(rng.gen_range(0..20)) * rng.gen_range(1.0..2.0)
        });
        assert!(far > 1_000, "{far}");
        // Tags all over the range of non-negative values (zero included), and now and then
        // one far below the others: most entries unpacked.
        let far =
            matches_the_reference(64, 64, 0x5eed_f1f1, |rng, step| match rng.gen_range(0..4) {
                0 => 0.0,
                1 => f64::from_bits(rng.gen_range(0..0x7ff0_0000_0000_0000)),
                _ => 1.0e6 + f64::from(step),
            });
        assert!(far > 10_000, "{far}");
        // Slots wider than the queue was made for: kept exact.
        let far = matches_the_reference(300, 16, 0x5eed_f1f2, |rng, _| {
            (rng.gen::<u64>() % 16) as f64 + 1.0
        });
        assert!(far > 10_000, "{far}");
    }
}
