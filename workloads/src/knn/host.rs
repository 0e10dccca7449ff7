//! KNN host tasks: top-k selection over streamed distances, and the final merge.
//!
//! A host task receives the `f32` distances of consecutive rows of one query and keeps that
//! chunk's `k` best in a bounded max-heap (the root is the current k-th best). The final step
//! of a launch merges each query's chunk lists into its top-k. Order: smaller squared distance
//! first, ties broken by the lower row index (`f32::total_cmp`, so even a NaN sorts
//! deterministically, after every number).
//!
//! # Cost model (host µthread instructions)
//!
//! A task costs [`TASK_FIXED_OPERATIONS`] + candidates × ([`SCAN_OPERATIONS_PER_CANDIDATE`] +
//! [`AMORTISED_INSERT_OPERATIONS_PER_CANDIDATE`]) + kept × [`STORE_OPERATIONS_PER_KEPT`]
//! instructions and touches kept × [`NEIGHBOR_BYTES`] bytes of ordinary memory (the stored
//! list; the heap itself stays in registers and L1). The merge costs candidates ×
//! [`MERGE_OPERATIONS_PER_CANDIDATE`] instructions and touches candidates × [`NEIGHBOR_BYTES`]
//! (reading the lists) plus k × [`NEIGHBOR_BYTES`] per query (the answer).
//!
//! Heap arithmetic behind the amortised constants: feeding `n` candidates in no particular
//! order into a top-`k`, the expected number that enter it is `k + k (H(n) - H(k))` (`H` the
//! harmonic numbers): the first `k` fill the heap (a sift-up, about 6 instructions), the rest
//! replace the root and sift down `ceil(log2 k)` levels at 4 instructions (load the two
//! children, compare, store) plus 4 for the root's two words, about 20 for `k = 10`.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use host_runtime::app::HostCost;

/// Instructions per candidate of a task's scan: load the 4-byte distance, compare it with the
/// k-th best kept in a register, the conditional branch, the index increment and the loop
/// branch.
pub const SCAN_OPERATIONS_PER_CANDIDATE: u64 = 5;

/// Heap-insert instructions per candidate, amortised for the default task (n = 32 candidates,
/// k = 10): 10 + 10 (H(32) - H(10)) ≈ 21.3 of the 32 enter the heap, 10 fills at about 6
/// instructions and 11.3 replacements at about 20: (60 + 226) / 32 ≈ 9.
pub const AMORTISED_INSERT_OPERATIONS_PER_CANDIDATE: u64 = 9;

/// Instructions per entry of the stored chunk list: store the distance and the row.
pub const STORE_OPERATIONS_PER_KEPT: u64 = 2;

/// Fixed instructions per task: call and return, clearing the heap, computing the chunk's
/// first row and loop bounds, publishing the list.
pub const TASK_FIXED_OPERATIONS: u64 = 20;

/// Instructions per candidate of the final merge: load its distance and row (2), compare with
/// the k-th best including the row tie-break and branch (3), loop control (2), plus the
/// amortised heap insert: for knn-b's defaults (8 chunk lists of 10 into a top-10, n = 80)
/// 10 + 10 (H(80) - H(10)) ≈ 30.4 enter, (10 × 6 + 20.4 × 20) / 80 ≈ 6. Total 13.
pub const MERGE_OPERATIONS_PER_CANDIDATE: u64 = 13;

/// Bytes of one stored neighbour: `f32` distance and `u32` row.
pub const NEIGHBOR_BYTES: u64 = 8;

/// One candidate neighbour of a query.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Neighbor {
    /// Database row.
    pub row: u32,
    /// Squared L2 distance to the query.
    pub distance: f32,
}

impl Neighbor {
    /// The ranking order: smaller distance first (`total_cmp`), then lower row.
    pub fn rank_cmp(&self, other: &Neighbor) -> Ordering {
        self.distance
            .total_cmp(&other.distance)
            .then(self.row.cmp(&other.row))
    }
}

/// A [`Neighbor`] ordered by [`Neighbor::rank_cmp`], so a max-heap's root is the worst kept.
#[derive(Clone, Copy, Debug)]
struct Ranked(Neighbor);

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ranked {}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.rank_cmp(&other.0)
    }
}

/// The `k` best neighbours seen so far (a bounded max-heap).
#[derive(Clone, Debug)]
pub struct TopK {
    k: usize,
    heap: BinaryHeap<Ranked>,
}

impl TopK {
    /// An empty selection of the `k` best.
    pub fn new(k: usize) -> TopK {
        TopK {
            k,
            heap: BinaryHeap::with_capacity(k.saturating_add(1)),
        }
    }

    /// Offers a candidate; returns whether it was kept.
    pub fn offer(&mut self, candidate: Neighbor) -> bool {
        if self.heap.len() < self.k {
            self.heap.push(Ranked(candidate));
            return true;
        }
        match self.heap.peek_mut() {
            Some(mut worst) if candidate.rank_cmp(&worst.0) == Ordering::Less => {
                *worst = Ranked(candidate);
                true
            }
            _ => false,
        }
    }

    /// The kept neighbours, best first.
    pub fn into_sorted(self) -> Vec<Neighbor> {
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|ranked| ranked.0)
            .collect()
    }
}

/// The task step: the `k` best of `distances` (little-endian `f32`, the distance of row
/// `first_row + j` at bytes `4j..4j + 4`; a trailing partial word is ignored), best first,
/// and the task's modelled cost.
pub fn chunk_top_k(first_row: u32, distances: &[u8], k: usize) -> (Vec<Neighbor>, HostCost) {
    let mut top = TopK::new(k);
    let mut candidates = 0_u64;
    for (row, word) in (first_row..).zip(distances.chunks_exact(4)) {
        let distance = f32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        top.offer(Neighbor { row, distance });
        candidates += 1;
    }
    let kept = top.into_sorted();
    let kept_count = kept.len() as u64;
    let operations = TASK_FIXED_OPERATIONS
        .saturating_add(candidates.saturating_mul(
            SCAN_OPERATIONS_PER_CANDIDATE + AMORTISED_INSERT_OPERATIONS_PER_CANDIDATE,
        ))
        .saturating_add(kept_count.saturating_mul(STORE_OPERATIONS_PER_KEPT));
    let cost = HostCost {
        operations,
        memory_bytes: kept_count.saturating_mul(NEIGHBOR_BYTES),
    };
    (kept, cost)
}

/// The merge step for one query: the `k` best over every chunk list, best first, and its
/// modelled cost.
pub fn merge_top_k<'a>(
    lists: impl IntoIterator<Item = &'a [Neighbor]>,
    k: usize,
) -> (Vec<Neighbor>, HostCost) {
    let mut top = TopK::new(k);
    let mut candidates = 0_u64;
    for candidate in lists.into_iter().flatten() {
        top.offer(*candidate);
        candidates += 1;
    }
    let answer = top.into_sorted();
    let cost = HostCost {
        operations: candidates.saturating_mul(MERGE_OPERATIONS_PER_CANDIDATE),
        memory_bytes: candidates
            .saturating_add(answer.len() as u64)
            .saturating_mul(NEIGHBOR_BYTES),
    };
    (answer, cost)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(distances: &[f32]) -> Vec<u8> {
        distances.iter().flat_map(|d| d.to_le_bytes()).collect()
    }

    fn rows(list: &[Neighbor]) -> Vec<u32> {
        list.iter().map(|n| n.row).collect()
    }

    #[test]
    fn chunk_keeps_the_k_smallest_ties_to_the_lower_row() {
        let (kept, _) = chunk_top_k(100, &bytes(&[5.0, 1.0, 3.0, 1.0, 0.5, 3.0, 9.0]), 4);
        assert_eq!(rows(&kept), [104, 101, 103, 102]);
        assert_eq!(kept[0].distance, 0.5);
        // A tie at the k-th place: the lower row stays, the later one is not kept.
        let (kept, _) = chunk_top_k(0, &bytes(&[2.0, 2.0, 2.0]), 2);
        assert_eq!(rows(&kept), [0, 1]);
        let (kept, _) = chunk_top_k(0, &bytes(&[7.0, 2.0, 2.0, 2.0]), 2);
        assert_eq!(rows(&kept), [1, 2]);
    }

    #[test]
    fn chunk_smaller_than_k_keeps_everything_sorted() {
        let (kept, cost) = chunk_top_k(10, &bytes(&[3.0, 1.0]), 10);
        assert_eq!(rows(&kept), [11, 10]);
        assert_eq!(
            cost.operations,
            TASK_FIXED_OPERATIONS
                + 2 * (SCAN_OPERATIONS_PER_CANDIDATE + AMORTISED_INSERT_OPERATIONS_PER_CANDIDATE)
                + 2 * STORE_OPERATIONS_PER_KEPT
        );
        assert_eq!(cost.memory_bytes, 16);
    }

    #[test]
    fn merge_breaks_ties_across_chunks_by_row() {
        let first = [
            Neighbor {
                row: 40,
                distance: 1.0,
            },
            Neighbor {
                row: 41,
                distance: 2.0,
            },
        ];
        let second = [
            Neighbor {
                row: 3,
                distance: 2.0,
            },
            Neighbor {
                row: 5,
                distance: 4.0,
            },
        ];
        let (answer, cost) = merge_top_k([&first[..], &second[..]], 3);
        assert_eq!(rows(&answer), [40, 3, 41]);
        assert_eq!(cost.operations, 4 * MERGE_OPERATIONS_PER_CANDIDATE);
        assert_eq!(cost.memory_bytes, (4 + 3) * NEIGHBOR_BYTES);
    }

    #[test]
    fn nan_sorts_after_every_number() {
        let (kept, _) = chunk_top_k(0, &bytes(&[f32::NAN, f32::INFINITY, 1.0]), 3);
        assert_eq!(rows(&kept), [2, 1, 0]);
    }
}
