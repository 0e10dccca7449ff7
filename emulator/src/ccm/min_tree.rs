//! The earliest of a fixed set of timers (the sub-cores' next ends, the channels' next ends):
//! a tournament tree, so a change and the minimum cost O(log n), not a scan.
//!
//! Each node holds the least `(time, index)` of its subtree packed in one `u64`,
//! `time << shift | index` (`shift` the bits of an index), which orders like the pair: one
//! 64-bit comparison and one word per node (128-bit keys took two of each). Two times do not
//! fit: never packs as the largest time field, and a time too large for the packing (at or
//! past `2^(64 - shift) - 2` ticks, years of simulated time) as the one below it, its exact
//! time kept beside the tree. When the least key is such a far one, the minimum comes from a
//! scan of the exact times, so the answer is always the least `(time, index)`.

use shared_abi::Ticks;

/// The timers: `tree` holds nodes `0..2 * leaves` (leaves from `leaves`, node `i` the least
/// key of its subtree; node 0 unused), `far_times` each timer's exact time while its key is
/// far. The tree's length is a power of two, so an index masked by it is always inside it: the
/// walk of a set has no bounds checks (17 instructions a level with them, 15 without). The
/// constants of the packing are kept beside it, worked out once (a read of the minimum or a
/// set needs them every time).
#[derive(Debug)]
pub(crate) struct MinTree {
    tree: Box<[u64]>,
    far_times: Box<[u64]>,
    /// Bits of an index in a key (`leaves` is `1 << shift`).
    shift: u32,
    /// Leaves (`1 << shift`).
    leaves: usize,
    /// The key of never with index 0 ([`never_key`]).
    never: u64,
    /// The key of a far time with index 0: `never` less one time step.
    far: u64,
    /// Times below this pack as they are (`2^(64 - shift) - 2`).
    near_limit: u64,
}

impl MinTree {
    /// `count` timers, all never.
    pub(crate) fn new(count: usize) -> MinTree {
        let leaves = count.max(1).next_power_of_two();
        let shift = leaves.trailing_zeros();
        let never = never_key(shift);
        // Padding leaves hold the largest key: never the minimum of a real timer's subtree.
        let mut tree = vec![u64::MAX; 2 * leaves];
        for index in 0..count {
            if let Some(node) = tree.get_mut(leaves + index) {
                *node = never | index as u64;
            }
        }
        // Inner nodes from the leaves up.
        for node in (1..leaves).rev() {
            let left = tree.get(2 * node).copied().unwrap_or(u64::MAX);
            let right = tree.get(2 * node + 1).copied().unwrap_or(u64::MAX);
            if let Some(slot) = tree.get_mut(node) {
                *slot = left.min(right);
            }
        }
        MinTree {
            tree: tree.into_boxed_slice(),
            far_times: vec![0; count].into_boxed_slice(),
            shift,
            leaves,
            never,
            far: never - (1 << shift),
            near_limit: (u64::MAX >> shift) - 1,
        }
    }

    /// The earliest `(time, index)`, the least index among equal times.
    #[inline]
    pub(crate) fn min(&self) -> (Ticks, u32) {
        let key = self.tree.get(1).copied().unwrap_or(u64::MAX);
        let never = self.never;
        let index = (key & !never) as u32;
        if key < self.far {
            return (Ticks(key >> self.shift), index);
        }
        if key >= never {
            return (Ticks::NEVER, index);
        }
        self.far_min()
    }

    /// The least key is far (so every timer is far or never): the least by a scan of the
    /// exact times.
    #[cold]
    fn far_min(&self) -> (Ticks, u32) {
        let never = never_key(self.shift);
        let keys = self
            .tree
            .get(self.leaves..2 * self.leaves)
            .unwrap_or_default();
        keys.iter()
            .zip(self.far_times.iter())
            .enumerate()
            .map(|(index, (&key, &at))| {
                let at = if key >= never {
                    Ticks::NEVER
                } else {
                    Ticks(at)
                };
                (at, index as u32)
            })
            .min()
            .unwrap_or((Ticks::NEVER, 0))
    }

    /// Keeps the exact time of timer `index`, set to a far `at`.
    #[cold]
    fn set_far(&mut self, index: u32, at: Ticks) {
        if let Some(time) = self.far_times.get_mut(index as usize) {
            *time = at.0;
        }
    }

    /// Sets timer `index` to `at` (nothing for an index past the timers).
    pub(crate) fn set(&mut self, index: u32, at: Ticks) {
        if index as usize >= self.far_times.len() {
            return;
        }
        let key = if at.0 < self.near_limit {
            (at.0 << self.shift) | u64::from(index)
        } else if at == Ticks::NEVER {
            self.never | u64::from(index)
        } else {
            self.set_far(index, at);
            self.far | u64::from(index)
        };
        let tree = &mut *self.tree;
        // The tree's length is a power of two (never 0): every index masked by `mask` is in it,
        // and every node of the walk (a leaf, `leaves + index` below `2 * leaves`, and those
        // above it) is its own masked value.
        let mask = tree.len().wrapping_sub(1);
        if tree.is_empty() {
            return;
        }
        let mut node = (self.leaves + index as usize) & mask;
        let leaf = &mut tree[node];
        let old = *leaf;
        if old == key {
            // Unchanged: so is every node above.
            return;
        }
        *leaf = key;
        if key < old {
            // Earlier: each node above held the least of its subtree with the old key, so it
            // holds the lesser of that and the new key, no sibling to read; where it already
            // holds less, so does every node above it.
            while node > 1 {
                node >>= 1;
                let parent = &mut tree[node & mask];
                if *parent <= key {
                    break;
                }
                *parent = key;
            }
            return;
        }
        // `value` is what `node` holds now: its parent is the least of it and its sibling.
        let mut value = key;
        while node > 1 {
            value = value.min(tree[(node ^ 1) & mask]);
            node >>= 1;
            let parent = &mut tree[node & mask];
            if *parent == value {
                // Unchanged here, so unchanged above.
                break;
            }
            *parent = value;
        }
    }
}

/// The key of never with index 0, for indices of `shift` bits: the largest time field. The
/// time field below it is the far one.
fn never_key(shift: u32) -> u64 {
    (u64::MAX >> shift) << shift
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The least `(time, index)` of `times`.
    fn reference(times: &[Ticks]) -> (Ticks, u32) {
        times
            .iter()
            .enumerate()
            .map(|(index, &at)| (at, index as u32))
            .min()
            .unwrap_or((Ticks::NEVER, 0))
    }

    #[test]
    fn min_is_the_least_time_then_index_near_and_far() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5eed_7133);
        for count in [1_usize, 2, 3, 5, 64, 100] {
            let mut tree = MinTree::new(count);
            let mut times = vec![Ticks::NEVER; count];
            assert_eq!(tree.min(), reference(&times));
            let limit = (u64::MAX >> count.next_power_of_two().trailing_zeros()) - 1;
            let mut far_least = 0;
            for step in 0..20_000 {
                let index = rng.gen_range(0..count);
                // Mostly never or far, some near; in every other stretch of 2,000 only far and
                // never, so that the least is often far.
                let near = if (step / 2_000) % 2 == 0 { 10 } else { 8 };
                let at = match rng.gen_range(0..near) {
                    0..=3 => Ticks(rng.gen_range(limit.saturating_sub(2)..u64::MAX)),
                    4..=7 => Ticks::NEVER,
                    // Equal times: ties by index.
                    8 => Ticks(rng.gen_range(0..4)),
                    _ => Ticks(rng.gen_range(0..1_000_000)),
                };
                tree.set(index as u32, at);
                times[index] = at;
                let least = reference(&times);
                assert_eq!(tree.min(), least, "{count} {times:?}");
                if least.0 >= Ticks(limit) && least.0 != Ticks::NEVER {
                    far_least += 1;
                }
            }
            assert!(far_least > 100, "{count}: {far_least}");
        }
    }
}
