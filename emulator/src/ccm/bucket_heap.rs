//! A min-queue of `u64` keys in buckets of equal width: a small binary heap holds the keys of
//! the current bucket (and any below it), the next buckets up to a window's end wait in
//! unsorted lists, and the keys past the window in one more list. For the packed keys of a
//! channel's finish queue ([`super::finish_queue`]): a part joins with a tag a little above the
//! channel's served bytes and parts end in the order of their tags, so most keys join inside
//! the window and the heap they are popped from is a bucket's, a few levels deep, not the
//! whole queue's (up to one key per µthread, ten levels at 1,024).
//!
//! Order: every key of the heap is below every listed key (the heap's bucket comes first), and
//! every key of the window's lists below every key past the window, so the heap's least is the
//! least key. When the heap empties, the next non-empty bucket of the window is heapified;
//! when the window is empty too, the keys past it are dealt into a new window whose bucket
//! width fits their spread into half of its buckets.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Buckets of a window (one bit each in a mask of `WORDS` words). 256, not 64: for PageRank
/// at paper scale a bucket of a 64-bucket window gathered about 157 keys over its life (the
/// keys that join fall into the window's remaining buckets), so a pop sifted through a heap of
/// some seven levels. `FinishQueue::pop_due` (callgrind, the PageRank run, 2.97 M pops): 436.1 M
/// instructions at 64 buckets, 382.2 M at 256, 324.8 M at 1,024. Not 1,024 either: its 24 KiB
/// of bucket headers (half the first-level data cache) missed the cache at nearly every push.
/// Emulator loop, callgrind `--cache-sim=yes`, 256 against 1,024 buckets (2026-12-03): SSSP
/// paper axle D1 read misses 11.05 M -> 10.85 M, write misses 5.04 M -> 4.98 M, instructions
/// 1,581.1 M -> 1,579.4 M; PageRank paper axle D1 read misses 39.95 M -> 39.28 M, write misses
/// 9.75 M -> 9.20 M, instructions 8,930.9 M -> 8,975.6 M.
const WINDOW: u64 = 256;

/// Words of the occupancy mask.
const WORDS: usize = (WINDOW / 64) as usize;

/// The queue.
#[derive(Debug)]
pub(crate) struct BucketHeap {
    /// The keys of bucket `current` and below.
    heap: BinaryHeap<Reverse<u64>>,
    /// Bucket `id`, for `current < id < end`, at `id % WINDOW`.
    window: [Vec<Reverse<u64>>; WINDOW as usize],
    /// Bit `i`: `window[i]` is not empty.
    occupied: [u64; WORDS],
    /// The keys of buckets `end` and up.
    beyond: Vec<Reverse<u64>>,
    /// The heap's bucket.
    current: u64,
    /// The window's end (a bucket id): at most `current + WINDOW`.
    end: u64,
    /// A key's bucket is `key >> width`.
    width: u32,
    /// Buckets a dealt spread fills (at most `WINDOW`; half of it: room for the keys that
    /// join above).
    fill: u64,
    len: usize,
}

impl Default for BucketHeap {
    fn default() -> Self {
        BucketHeap {
            heap: BinaryHeap::new(),
            window: std::array::from_fn(|_| Vec::new()),
            occupied: [0; WORDS],
            beyond: Vec::new(),
            current: 0,
            end: 0,
            width: 0,
            fill: WINDOW / 2,
            len: 0,
        }
    }
}

impl BucketHeap {
    /// Keys queued.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The least key.
    #[inline]
    pub(crate) fn peek(&self) -> Option<u64> {
        self.heap.peek().map(|key| key.0)
    }

    /// Queues `key`.
    #[inline(always)]
    pub(crate) fn push(&mut self, key: u64) {
        let id = key >> self.width;
        self.len += 1;
        if self.len == 1 {
            // Empty: a window from this key's bucket.
            self.current = id;
            self.end = id.saturating_add(WINDOW);
            self.heap.push(Reverse(key));
        } else if id <= self.current {
            self.heap.push(Reverse(key));
        } else if id < self.end {
            self.list(id).push(Reverse(key));
        } else {
            self.push_beyond(key);
        }
    }

    /// Queues `key`, past the window.
    #[cold]
    fn push_beyond(&mut self, key: u64) {
        self.beyond.push(Reverse(key));
    }

    /// The list of window bucket `id`, marked not empty.
    #[inline]
    fn list(&mut self, id: u64) -> &mut Vec<Reverse<u64>> {
        let index = (id % WINDOW) as usize;
        if let Some(word) = self.occupied.get_mut(index / 64) {
            *word |= 1 << (index % 64);
        }
        &mut self.window[index]
    }

    /// Removes the least key.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<u64> {
        let Reverse(key) = self.heap.pop()?;
        self.len -= 1;
        if self.heap.is_empty() && self.len > 0 {
            self.next_bucket();
        }
        Some(key)
    }

    /// The heap is empty and keys are left: heapifies the next non-empty bucket of the window,
    /// or deals the keys past it into a new window.
    #[cold]
    fn next_bucket(&mut self) {
        if self.occupied.iter().all(|&word| word == 0) {
            let keys = std::mem::take(&mut self.beyond);
            self.deal(keys);
            return;
        }
        // The window's buckets after `current`, in id order, start at bit `(current + 1) %
        // WINDOW` of the mask.
        let first = ((self.current + 1) % WINDOW) as usize;
        let step = self.next_occupied(first);
        self.current += 1 + step;
        let index = (self.current % WINDOW) as usize;
        if let Some(word) = self.occupied.get_mut(index / 64) {
            *word &= !(1 << (index % 64));
        }
        let list = &mut self.window[index];
        // The list becomes the heap (heapified in place) and the heap's empty buffer the list.
        let keys = std::mem::take(list);
        let spare = std::mem::replace(&mut self.heap, BinaryHeap::from(keys)).into_vec();
        *list = spare;
    }

    /// Buckets from window index `first` (cyclic) to the first occupied one (some is).
    fn next_occupied(&self, first: usize) -> u64 {
        let word = first / 64;
        let bit = first % 64;
        let head = self.occupied.get(word).copied().unwrap_or(0) >> bit;
        if head != 0 {
            return u64::from(head.trailing_zeros());
        }
        // The next words, wrapping round to `word` again (whose bits from `bit` on are clear).
        let mut step = (64 - bit) as u64;
        for next in 1..=WORDS {
            let bits = self
                .occupied
                .get((word + next) % WORDS)
                .copied()
                .unwrap_or(0);
            if bits != 0 {
                return step + u64::from(bits.trailing_zeros());
            }
            step += 64;
        }
        step
    }

    /// Deals `keys` (every key queued; the heap and the window are empty) into a new window
    /// whose bucket width puts their spread within half of its buckets; the lowest bucket's
    /// keys into the heap.
    fn deal(&mut self, mut keys: Vec<Reverse<u64>>) {
        let (Some(&Reverse(least)), Some(&Reverse(most))) = (keys.iter().max(), keys.iter().min())
        else {
            return;
        };
        let spread = (most - least) / self.fill.clamp(1, WINDOW);
        self.width = u64::BITS - spread.leading_zeros();
        self.current = least >> self.width;
        self.end = self.current.saturating_add(WINDOW);
        let mut heap = std::mem::take(&mut self.heap).into_vec();
        let mut past = Vec::new();
        for &key in &keys {
            let id = key.0 >> self.width;
            if id <= self.current {
                heap.push(key);
            } else if id < self.end {
                self.list(id).push(key);
            } else {
                past.push(key);
            }
        }
        // (None past the window while the spread fills at most `WINDOW - 1` buckets.)
        keys.clear();
        self.beyond = if past.is_empty() { keys } else { past };
        self.heap = BinaryHeap::from(heap);
    }

    /// Drops every key.
    pub(crate) fn clear(&mut self) {
        self.heap.clear();
        self.window.iter_mut().for_each(Vec::clear);
        self.occupied = [0; WORDS];
        self.beyond.clear();
        self.len = 0;
    }

    /// Replaces every key `k` by `change(k)` (a new window is dealt).
    pub(crate) fn rebuild(&mut self, mut change: impl FnMut(u64) -> u64) {
        let mut keys = std::mem::take(&mut self.heap).into_vec();
        for list in &mut self.window {
            keys.append(list);
        }
        keys.append(&mut self.beyond);
        keys.iter_mut().for_each(|key| key.0 = change(key.0));
        self.occupied = [0; WORDS];
        self.len = keys.len();
        self.deal(keys);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Pushes (mostly a little above the last key popped, some below it, some far above),
    /// pops and rebuilds, against a binary heap of every key, over spreads from a few units
    /// to the whole range.
    #[test]
    fn pops_what_a_binary_heap_of_every_key_pops() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0xb0c4_e7ed);
        let mut total_dealt = 0;
        for (spread, fill) in [
            (1_u64, WINDOW / 2),
            (40, WINDOW / 2),
            (1 << 20, WINDOW / 2),
            (1 << 50, WINDOW / 2),
            (u64::MAX / 2, WINDOW / 2),
            (1 << 20, WINDOW),
            (40, WINDOW),
        ] {
            let mut heap = BucketHeap {
                fill,
                ..BucketHeap::default()
            };
            let mut reference = BinaryHeap::new();
            let mut last = 0_u64;
            let (mut popped, mut dealt) = (0, 0);
            for step in 0..40_000 {
                match rng.gen_range(0..20) {
                    0..=9 => {
                        let key = match rng.gen_range(0..20) {
                            0 => last.saturating_sub(rng.gen_range(0..=spread)),
                            1 => last.saturating_add(spread.saturating_mul(8)),
                            2 => rng.gen(),
                            _ => last.saturating_add(rng.gen_range(0..=spread)),
                        };
                        heap.push(key);
                        reference.push(Reverse(key));
                    }
                    10..=18 => {
                        let before = heap.beyond.len();
                        let expected = reference.pop().map(|Reverse(key)| key);
                        assert_eq!(heap.pop(), expected, "{spread} {step}");
                        if let Some(key) = expected {
                            last = key;
                            popped += 1;
                        }
                        if heap.beyond.len() < before {
                            dealt += 1;
                        }
                    }
                    _ => {
                        if rng.gen_range(0..40) == 0 {
                            // An order-keeping change: down by the least key.
                            let delta = heap.peek().unwrap_or(0);
                            heap.rebuild(|key| key - delta);
                            let keys: Vec<u64> =
                                reference.drain().map(|Reverse(key)| key - delta).collect();
                            reference.extend(keys.into_iter().map(Reverse));
                            last -= delta.min(last);
                        }
                        if rng.gen_range(0..400) == 0 {
                            heap.clear();
                            reference.clear();
                        }
                    }
                }
                assert_eq!(heap.peek(), reference.peek().map(|Reverse(key)| *key));
                assert_eq!(heap.len(), reference.len());
                assert_eq!(heap.is_empty(), reference.is_empty());
            }
            while let Some(Reverse(key)) = reference.pop() {
                assert_eq!(heap.pop(), Some(key));
            }
            assert_eq!(heap.pop(), None);
            assert!(popped > 10_000, "{spread}: {popped}");
            total_dealt += dealt;
        }
        assert!(total_dealt > 20, "{total_dealt}");
    }
}
