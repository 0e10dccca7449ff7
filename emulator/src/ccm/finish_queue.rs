//! A memory channel's items in order of their finish tags: a min-heap of `(tag bits, slot)`
//! packed into one `u128`.
//!
//! A channel holds one part per item (an item's part on a channel is pushed once and popped
//! once before its slot can take another item), so no two keys are equal and any min-heap pops
//! them in the same order: by tag, then by slot, the order `BinaryHeap<Reverse<(u64, u32)>>`
//! gave. One 128-bit comparison replaces the tuple's two. The heap is the standard library's
//! binary one: its pop moves the hole down to a leaf at one comparison per level and sifts the
//! last entry up from there, fewer instructions than a 4-ary heap's three or four comparisons
//! per level at half the depth (SSSP: `Ccm::on_wake` 41 M of 1,626 M less). With every item of
//! a 16-channel CCM on every channel, a channel's heap holds up to one entry per µthread
//! (1,024 by default) and pops once per part.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The finish queue of one channel.
#[derive(Debug, Default)]
pub(crate) struct FinishQueue {
    keys: BinaryHeap<Reverse<u128>>,
}

fn pack(tag_bits: u64, slot: u32) -> u128 {
    (u128::from(tag_bits) << 32) | u128::from(slot)
}

fn unpack(key: u128) -> (u64, u32) {
    ((key >> 32) as u64, key as u32)
}

impl FinishQueue {
    /// Entries queued.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Drops every entry (a stage cut short: `Ccm::abort`).
    pub(crate) fn clear(&mut self) {
        self.keys.clear();
    }

    /// The least `(tag bits, slot)`.
    pub(crate) fn peek(&self) -> Option<(u64, u32)> {
        self.keys.peek().map(|key| unpack(key.0))
    }

    /// Queues `slot` finishing at the tag whose bits are `tag_bits` (non-negative tags order
    /// like their bits).
    pub(crate) fn push(&mut self, tag_bits: u64, slot: u32) {
        self.keys.push(Reverse(pack(tag_bits, slot)));
    }

    /// Removes the least entry.
    pub(crate) fn pop(&mut self) -> Option<(u64, u32)> {
        self.keys.pop().map(|key| unpack(key.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn pops_in_the_order_of_a_binary_heap_of_tag_then_slot() {
        // A seeded mix of pushes and pops with distinct (tag, slot) keys, equal tags included:
        // the same sequence as `BinaryHeap<Reverse<(u64, u32)>>`.
        let mut queue = FinishQueue::default();
        let mut reference = BinaryHeap::new();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x2545_f491_4f6c_dd1d);
        let mut next = || rng.gen::<u64>();
        let mut slot = 0_u32;
        for _ in 0..50_000 {
            if next() % 3 != 0 || reference.is_empty() {
                let tag = (next() % 64) as f64 * 0.5 + 1.0;
                slot += 1;
                queue.push(tag.to_bits(), slot);
                reference.push(Reverse((tag.to_bits(), slot)));
            } else {
                assert_eq!(queue.pop(), reference.pop().map(|Reverse(key)| key));
            }
            assert_eq!(queue.peek(), reference.peek().map(|&Reverse(key)| key));
            assert_eq!(queue.len(), reference.len());
        }
        while let Some(Reverse(key)) = reference.pop() {
            assert_eq!(queue.pop(), Some(key));
        }
        assert_eq!(queue.pop(), None);
    }
}
