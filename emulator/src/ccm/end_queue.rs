//! The items whose parts are both done, in order of their ends: a min-heap of
//! `(end, order of arrival, slot)` with a fast path for the usual case.
//!
//! Most ends arrive in order (an item's end is `now` or its start plus the access latency, and
//! time only moves on), so an entry whose end is at or after the last one queued in order goes
//! to the back of a list that is thereby sorted, and only the others to a binary heap. The
//! order of arrival is distinct per entry and increases, so both hold their entries sorted by
//! `(end, order)`, and taking the lesser of their fronts pops exactly what one heap of every
//! entry would. The sorted list is a vector read from a front index (no ring arithmetic per
//! push and pop), which starts over when it empties and drops its popped front once that is
//! long.

use shared_abi::Ticks;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// An end: `(end, order of arrival, slot)`.
type Entry = (Ticks, u64, u32);

/// Popped entries at the front of the sorted list past which it is compacted (when they are
/// also at least half of it): a copy of what is left, at most one entry per µthread, once per
/// this many pops.
const COMPACT_AFTER: usize = 4096;

/// The items' ends.
#[derive(Debug, Default)]
pub(crate) struct EndQueue {
    /// Entries that arrived in order of their ends, from `head` on (those before it popped).
    sorted: Vec<Entry>,
    /// The first entry of `sorted` not popped (`sorted` is empty when it would be its length).
    head: usize,
    /// The others.
    heap: BinaryHeap<Reverse<Entry>>,
    /// Entries pushed so far (the order of the next).
    pushed: u64,
}

impl EndQueue {
    /// Queues `slot` ending at `at`; ties at one end keep the order of arrival.
    #[inline]
    pub(crate) fn push(&mut self, at: Ticks, slot: u32) {
        let entry = (at, self.pushed, slot);
        self.pushed += 1;
        // (The last entry is not popped: the list is emptied when its last one is.)
        match self.sorted.last() {
            Some(&(last, _, _)) if at < last => self.heap.push(Reverse(entry)),
            _ => self.sorted.push(entry),
        }
    }

    /// The earliest `(end, slot)`.
    #[inline]
    pub(crate) fn peek(&self) -> Option<(Ticks, u32)> {
        self.front().map(|(at, _, slot)| (at, slot))
    }

    /// Removes the earliest entry.
    #[inline]
    pub(crate) fn pop(&mut self) {
        let sorted = self.sorted.get(self.head);
        let from_heap = match (sorted, self.heap.peek()) {
            (Some(sorted), Some(Reverse(heap))) => heap < sorted,
            (None, Some(_)) => true,
            _ => false,
        };
        if from_heap {
            self.heap.pop();
        } else if sorted.is_some() {
            self.pop_sorted();
        }
    }

    /// Removes the sorted list's front.
    #[inline]
    fn pop_sorted(&mut self) {
        self.head += 1;
        if self.head >= self.sorted.len() {
            self.sorted.clear();
            self.head = 0;
        } else if self.head >= COMPACT_AFTER && 2 * self.head >= self.sorted.len() {
            self.sorted.drain(..self.head);
            self.head = 0;
        }
    }

    /// Drops every entry (a stage cut short); the order of arrival goes on.
    pub(crate) fn clear(&mut self) {
        self.sorted.clear();
        self.head = 0;
        self.heap.clear();
    }

    #[inline]
    fn front(&self) -> Option<Entry> {
        match (self.sorted.get(self.head), self.heap.peek()) {
            (Some(&sorted), Some(&Reverse(heap))) => Some(sorted.min(heap)),
            (Some(&sorted), None) => Some(sorted),
            (None, Some(&Reverse(heap))) => Some(heap),
            (None, None) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn pops_what_one_heap_of_every_end_pops() {
        // A seeded mix of pushes (mostly at or after the time, some before) and pops, against
        // `BinaryHeap<Reverse<(end, order, slot)>>`.
        let mut queue = EndQueue::default();
        let mut reference = BinaryHeap::new();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x2545_f491_4f6c_dd1d);
        let mut next = || rng.gen::<u64>();
        let mut order = 0_u64;
        let mut now = 0_u64;
        let mut from_heap = 0;
        for _ in 0..50_000 {
            now += next() % 3;
            if next() % 3 != 0 || reference.is_empty() {
                let at = match next() % 4 {
                    0 => now.saturating_sub(next() % 50),
                    1 => now,
                    _ => now + next() % 20,
                };
                let slot = (next() % 1024) as u32;
                if queue
                    .sorted
                    .last()
                    .is_some_and(|&(last, _, _)| Ticks(at) < last)
                {
                    from_heap += 1;
                }
                queue.push(Ticks(at), slot);
                reference.push(Reverse((Ticks(at), order, slot)));
                order += 1;
            } else {
                queue.pop();
                reference.pop();
            }
            assert_eq!(
                queue.peek(),
                reference.peek().map(|&Reverse((at, _, slot))| (at, slot))
            );
        }
        assert!(from_heap > 1_000, "{from_heap}");
        while let Some(Reverse((at, _, slot))) = reference.pop() {
            assert_eq!(queue.peek(), Some((at, slot)));
            queue.pop();
        }
        assert_eq!(queue.peek(), None);
    }
}
