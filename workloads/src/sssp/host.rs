//! SSSP host tasks: collecting the claimed vertices of a range of result slots, and building
//! the next frontier.
//!
//! A task receives consecutive 4-byte result slots of one launch. Slot `s` belongs to frontier
//! position `j` with `prefix[j] <= s < prefix[j + 1]` and is the `(s - prefix[j])`-th out-arc
//! of `frontier[j]`. A slot other than [`INFINITY`] is an arc that lowered its target's
//! distance on the device: the task lowers the host's copy of that distance to the slot's
//! value (an atomic minimum, since tasks run concurrently). A slot flagged [`CLAIMED`] is the
//! one arc that claimed its target in this launch (see [`firmware::kernels::sssp`]): the task
//! appends the target to its list of next-frontier vertices, unless it has no out-arcs
//! (nothing to relax). Every improved vertex is claimed exactly once, so the lists are
//! disjoint and the launch's final step only concatenates them in task order and computes
//! the slot prefix ([`next_frontier`]); no sort, no deduplication.
//!
//! # Cost model (host µthread instructions)
//!
//! A task costs [`TASK_FIXED_OPERATIONS`] + frontier vertices touched ×
//! [`OPERATIONS_PER_FRONTIER_VERTEX`] + slots × [`OPERATIONS_PER_SLOT`] + improved slots ×
//! [`OPERATIONS_PER_IMPROVED_SLOT`] + claimed slots × [`OPERATIONS_PER_CLAIMED_SLOT`], and
//! touches frontier vertices × [`BYTES_PER_FRONTIER_VERTEX`] + improved slots ×
//! [`BYTES_PER_IMPROVED_SLOT`] + claimed slots × [`BYTES_PER_CLAIMED_SLOT`] of cached host
//! memory (its result bytes are charged by the runtime). The final step costs
//! ceil(next frontier / 16) × [`OPERATIONS_PER_16_NEXT_VERTICES`] instructions and next
//! frontier × [`BYTES_PER_NEXT_VERTEX`] bytes.

use firmware::kernels::sssp::{CLAIMED, INFINITY};
use host_runtime::app::HostCost;

use crate::graph::Csr;

/// Fixed instructions per task: call and return, the binary search of the first slot's
/// frontier position (about 12 probes at 4 instructions for the largest frontiers, 48), loop
/// set-up and publishing the list (12): 60.
pub const TASK_FIXED_OPERATIONS: u64 = 60;

/// Instructions per frontier vertex a task walks: load its id and next prefix word (2), load
/// its first arc offset (1), compute the arc and slot bounds (3), loop control (2): 8.
pub const OPERATIONS_PER_FRONTIER_VERTEX: u64 = 8;

/// Cached bytes per frontier vertex: the line holding its CSR offset and the line of its
/// targets (two random 64-byte lines); the frontier and prefix words stream (8).
pub const BYTES_PER_FRONTIER_VERTEX: u64 = 128 + 8;

/// Instructions per slot: load the 4-byte slot, compare with infinity and branch (2), advance
/// slot and arc and loop (2): 5 (scalar: a frontier vertex has 2.8 arcs on average, too few
/// for vector lanes).
pub const OPERATIONS_PER_SLOT: u64 = 5;

/// Instructions per improved slot: clear the flag (1), load the target (1), the atomic minimum
/// on the host's distance (load, compare, `lock cmpxchg`, branch: 4), test the claim flag (1):
/// 7.
pub const OPERATIONS_PER_IMPROVED_SLOT: u64 = 7;

/// Cached bytes per improved slot: the target's distance line (a random 64-byte line).
pub const BYTES_PER_IMPROVED_SLOT: u64 = 64;

/// Instructions per claimed slot: load the target's two offsets (2), the degree and its zero
/// test (2), append the target and its degree to the task's list (3): 7.
pub const OPERATIONS_PER_CLAIMED_SLOT: u64 = 7;

/// Cached bytes per claimed slot: the target's offsets line (random, 64) and the 8-byte list
/// entry.
pub const BYTES_PER_CLAIMED_SLOT: u64 = 64 + 8;

/// Instructions per 16 vertices of the next frontier in the final step, with 16-lane vectors:
/// load 16 ids and 16 degrees (2), the in-register prefix sum of the degrees (4 shift-and-add
/// steps), add the running total and broadcast the new one (2), store the ids and the prefix
/// words (2), loop control (2): 12.
pub const OPERATIONS_PER_16_NEXT_VERTICES: u64 = 12;

/// Cached bytes per vertex of the next frontier in the final step: its list entry read (8)
/// and its frontier and prefix words written (8).
pub const BYTES_PER_NEXT_VERTEX: u64 = 16;

/// One next-frontier vertex a task found: the vertex and its out-degree.
pub type Claimed = (u32, u32);

/// Runs one task over the slots `first_slot .. first_slot + result.len() / 4` of the launch
/// with `frontier` and `prefix`: lowers `distances` and returns the claimed vertices that have
/// out-arcs, in slot order, with the task's cost. A slot beyond the prefix's end is an `Err`.
pub fn collect_claimed(
    graph: &Csr,
    frontier: &[u32],
    prefix: &[u32],
    first_slot: u32,
    result: &[u8],
    distances: &mut [u32],
) -> Result<(Vec<Claimed>, HostCost), String> {
    let mut claimed = Vec::new();
    let slots = (result.len() / 4) as u64;
    // Frontier position of the first slot: the last j with prefix[j] <= first_slot.
    let mut position = prefix
        .partition_point(|start| *start <= first_slot)
        .saturating_sub(1);
    let mut current = None;
    let (mut vertices_touched, mut improved, mut claims) = (0_u64, 0_u64, 0_u64);
    for (k, word) in result.chunks_exact(4).enumerate() {
        let slot = first_slot + k as u32;
        while position + 1 < prefix.len() && prefix[position + 1] <= slot {
            position += 1;
        }
        let beyond = || format!("result slot {slot} lies beyond the frontier's arcs");
        let (Some(&vertex), Some(&end)) = (frontier.get(position), prefix.get(position + 1)) else {
            return Err(beyond());
        };
        if slot >= end {
            return Err(beyond());
        }
        if current != Some(position) {
            current = Some(position);
            vertices_touched += 1;
        }
        let value = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        if value == INFINITY {
            continue;
        }
        improved += 1;
        let arc = graph.arc_range(vertex).start + (slot - prefix[position]) as usize;
        let target = graph.targets()[arc];
        let distance = value & !CLAIMED;
        let known = &mut distances[target as usize];
        *known = (*known).min(distance);
        if value & CLAIMED != 0 {
            claims += 1;
            let degree = graph.degree(target);
            if degree > 0 {
                claimed.push((target, degree));
            }
        }
    }
    let cost = HostCost {
        operations: TASK_FIXED_OPERATIONS
            + vertices_touched * OPERATIONS_PER_FRONTIER_VERTEX
            + slots * OPERATIONS_PER_SLOT
            + improved * OPERATIONS_PER_IMPROVED_SLOT
            + claims * OPERATIONS_PER_CLAIMED_SLOT,
        memory_bytes: vertices_touched * BYTES_PER_FRONTIER_VERTEX
            + improved * BYTES_PER_IMPROVED_SLOT
            + claims * BYTES_PER_CLAIMED_SLOT,
    };
    Ok((claimed, cost))
}

/// The final step: the next frontier (the tasks' lists concatenated in task order), its slot
/// prefix, and the step's cost.
pub fn next_frontier<'a>(
    lists: impl IntoIterator<Item = &'a [Claimed]>,
) -> (Vec<u32>, Vec<u32>, HostCost) {
    let mut frontier = Vec::new();
    let mut prefix = vec![0_u32];
    let mut running = 0_u32;
    for &(vertex, degree) in lists.into_iter().flatten() {
        frontier.push(vertex);
        running += degree;
        prefix.push(running);
    }
    let next = frontier.len() as u64;
    let cost = HostCost {
        operations: next.div_ceil(16) * OPERATIONS_PER_16_NEXT_VERTICES,
        memory_bytes: next * BYTES_PER_NEXT_VERTEX,
    };
    (frontier, prefix, cost)
}

/// `prefix[0] = 0`, `prefix[j + 1] = prefix[j] + degree(frontier[j])`.
pub fn slot_prefix(graph: &Csr, frontier: &[u32]) -> Vec<u32> {
    let mut prefix = Vec::with_capacity(frontier.len() + 1);
    let mut running = 0_u32;
    prefix.push(0);
    for vertex in frontier {
        running += graph.degree(*vertex);
        prefix.push(running);
    }
    prefix
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::EdgeList;

    const C: u32 = CLAIMED;

    fn graph() -> Csr {
        // 0: {1, 2}, 1: {0, 2, 3}, 2: {0, 1}, 3: {1}, 4: {}... 4 joined to nothing.
        let edges = EdgeList {
            vertices: 5,
            edges: vec![(0, 1), (0, 2), (2, 1), (1, 3)],
        };
        Csr::symmetric(&edges, Some(&[4, 1, 2, 5])).unwrap()
    }

    fn bytes(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn tasks_map_slots_to_arcs_across_frontier_vertices() {
        let graph = graph();
        let frontier = [1, 2];
        let prefix = slot_prefix(&graph, &frontier);
        assert_eq!(prefix, [0, 3, 5]);
        let mut distances = [0, 4, 1, INFINITY, INFINITY];
        // Slots 1..4: vertex 1's arcs to 2 and 3, vertex 2's arc to 0.
        let (claimed, cost) = collect_claimed(
            &graph,
            &frontier,
            &prefix,
            1,
            &bytes(&[INFINITY, 9 | C, INFINITY]),
            &mut distances,
        )
        .unwrap();
        assert_eq!(claimed, [(3, 1)]);
        assert_eq!(distances, [0, 4, 1, 9, INFINITY]);
        assert_eq!(
            cost.operations,
            TASK_FIXED_OPERATIONS
                + 2 * OPERATIONS_PER_FRONTIER_VERTEX
                + 3 * OPERATIONS_PER_SLOT
                + OPERATIONS_PER_IMPROVED_SLOT
                + OPERATIONS_PER_CLAIMED_SLOT
        );
        // Slot 4: vertex 2's arc to 1; an unclaimed improvement lowers the distance only.
        let (claimed, _) =
            collect_claimed(&graph, &frontier, &prefix, 4, &bytes(&[3]), &mut distances).unwrap();
        assert!(claimed.is_empty());
        assert_eq!(distances[1], 3);
        // A larger value arriving later does not raise it.
        collect_claimed(
            &graph,
            &frontier,
            &prefix,
            4,
            &bytes(&[4 | C]),
            &mut distances,
        )
        .unwrap();
        assert_eq!(distances[1], 3);
        assert!(
            collect_claimed(&graph, &frontier, &prefix, 5, &bytes(&[1]), &mut distances).is_err()
        );
    }

    #[test]
    fn next_frontier_concatenates_in_task_order_with_the_prefix() {
        let (frontier, prefix, cost) =
            next_frontier([&[(3_u32, 1_u32), (1, 3)][..], &[][..], &[(0, 2)][..]]);
        assert_eq!(frontier, [3, 1, 0]);
        assert_eq!(prefix, [0, 1, 4, 6]);
        assert_eq!(cost.operations, OPERATIONS_PER_16_NEXT_VERTICES);
        assert_eq!(cost.memory_bytes, 3 * BYTES_PER_NEXT_VERTEX);
    }
}
