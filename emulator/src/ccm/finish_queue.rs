//! A memory channel's items in order of their finish tags: a 4-ary min-heap of
//! `(tag bits, slot)` packed into one `u128`.
//!
//! A channel holds one part per item (an item's part on a channel is pushed once and popped
//! once before its slot can take another item), so no two keys are equal and any min-heap pops
//! them in the same order: by tag, then by slot, the order `BinaryHeap<Reverse<(u64, u32)>>`
//! gave. Four children per node halve the depth of a binary heap, and one 128-bit comparison
//! replaces the tuple's two: with every item of a 16-channel CCM on every channel, a channel's
//! heap holds up to one entry per µthread (1,024 by default) and pops once per part.

/// The finish queue of one channel.
#[derive(Debug, Default)]
pub(crate) struct FinishQueue {
    keys: Vec<u128>,
}

/// Children per node.
const ARITY: usize = 4;

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
        self.keys.first().copied().map(unpack)
    }

    /// Queues `slot` finishing at the tag whose bits are `tag_bits` (non-negative tags order
    /// like their bits).
    pub(crate) fn push(&mut self, tag_bits: u64, slot: u32) {
        let key = pack(tag_bits, slot);
        let mut hole = self.keys.len();
        self.keys.push(key);
        while hole > 0 {
            let parent = (hole - 1) / ARITY;
            let Some(&above) = self.keys.get(parent) else {
                break;
            };
            if above <= key {
                break;
            }
            if let Some(entry) = self.keys.get_mut(hole) {
                *entry = above;
            }
            hole = parent;
        }
        if let Some(entry) = self.keys.get_mut(hole) {
            *entry = key;
        }
    }

    /// Removes the least entry.
    pub(crate) fn pop(&mut self) -> Option<(u64, u32)> {
        let last = self.keys.pop()?;
        let Some(&top) = self.keys.first() else {
            return Some(unpack(last));
        };
        // Move `last` down from the root into the hole the least entry leaves.
        let len = self.keys.len();
        let mut hole = 0;
        loop {
            let first = hole * ARITY + 1;
            if first >= len {
                break;
            }
            let (least, least_key) = if let Some(&[a, b, c, d]) = self.keys.get(first..first + ARITY)
            {
                // Every child there (all but the last node's): the least of four in three
                // comparisons (keys are distinct, so ties never decide).
                let (left, left_key) = if b < a { (first + 1, b) } else { (first, a) };
                let (right, right_key) = if d < c { (first + 3, d) } else { (first + 2, c) };
                if right_key < left_key {
                    (right, right_key)
                } else {
                    (left, left_key)
                }
            } else {
                let mut least = first;
                let mut least_key = self.keys.get(first).copied().unwrap_or(u128::MAX);
                for child in first + 1..len {
                    if let Some(&key) = self.keys.get(child) {
                        if key < least_key {
                            least = child;
                            least_key = key;
                        }
                    }
                }
                (least, least_key)
            };
            if last <= least_key {
                break;
            }
            if let Some(entry) = self.keys.get_mut(hole) {
                *entry = least_key;
            }
            hole = least;
        }
        if let Some(entry) = self.keys.get_mut(hole) {
            *entry = last;
        }
        Some(unpack(top))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    #[test]
    fn pops_in_the_order_of_a_binary_heap_of_tag_then_slot() {
        // A seeded mix of pushes and pops with distinct (tag, slot) keys, equal tags included:
        // the same sequence as `BinaryHeap<Reverse<(u64, u32)>>`.
        let mut queue = FinishQueue::default();
        let mut reference = BinaryHeap::new();
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
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
