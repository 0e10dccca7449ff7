//! SSSP host tasks: compare a block of the streamed distances with the host's copy and list
//! the vertices that changed (the new frontier); the launch's final step.
//!
//! A task receives the new distances of consecutive vertices (4 bytes each, little-endian) and
//! compares each with the host's copy: a vertex whose distance differs goes on the task's
//! list, in vertex order, and the copy takes the new value. Tasks cover disjoint vertices, so
//! they are independent. The final step adds the lengths of the tasks' lists: no vertex
//! changed means the distances are a fixed point of the relaxation (converged).
//!
//! # Cost model (host µthread instructions, AVX-512-style: a 16-lane vector op counts 1)
//!
//! The counts are the instructions of the loops written out below (the same convention as
//! PageRank's host tasks, [`crate::pagerank::host`]). A task costs [`TASK_FIXED_OPERATIONS`] +
//! ceil(vertices / 16) × [`OPERATIONS_PER_16_VERTICES`] instructions and touches vertices ×
//! [`BYTES_PER_VERTEX`] + changed vertices × [`BYTES_PER_CHANGED_VERTEX`] bytes of cached host
//! memory (its result bytes are charged by the runtime). The final step costs
//! [`FINAL_FIXED_OPERATIONS`] + tasks × [`FINAL_OPERATIONS_PER_TASK`] instructions and tasks ×
//! [`FINAL_BYTES_PER_TASK`] bytes.

use host_runtime::app::{BadResult, HostCost};

/// Fixed instructions per task: call and return (2), the block's first vertex, vertex count,
/// host-copy and result pointers (4), the list pointer (1), the lane index vector (broadcast
/// the first vertex, add the lane ids: 2), the loop bound (1), publishing the list's length
/// (1): 11.
pub const TASK_FIXED_OPERATIONS: u64 = 11;

/// Instructions per 16 vertices: load the 16 new distances and the 16 of the host's copy (2),
/// compare not-equal into a mask (1), store the new ones into the copy (1), compress the
/// changed lanes' vertex ids into the list (`vpcompressd`, 1), count them and advance the
/// list pointer (`kmovw`, `popcnt`, `add`: 3), advance the lane index vector (1), loop
/// control (2): 11. The last, partial group of a block uses masked loads: the same count.
pub const OPERATIONS_PER_16_VERTICES: u64 = 11;

/// Cached bytes per vertex: its distance in the host's copy read and written (4 + 4; a task's
/// block is one 4 KiB page of the copy, streamed).
pub const BYTES_PER_VERTEX: u64 = 8;

/// Cached bytes per changed vertex: its 4-byte id appended to the list.
pub const BYTES_PER_CHANGED_VERTEX: u64 = 4;

/// Fixed instructions of the final step: compare the total with zero and branch (2).
pub const FINAL_FIXED_OPERATIONS: u64 = 2;

/// Final-step instructions per task: load its list length and add it (2).
pub const FINAL_OPERATIONS_PER_TASK: u64 = 2;

/// Final-step bytes per task: the line holding its list length, written by the core that ran
/// the task (one 64-byte line moves).
pub const FINAL_BYTES_PER_TASK: u64 = 64;

/// Runs one task over vertices `first .. first + result.len() / 4`: compares the new
/// distances in `result` with `distances` (the host's copy), stores them, and returns the
/// vertices that changed, in vertex order, with the task's cost. A block that does not fit
/// `distances` or is not whole words is an `Err`.
pub fn compare_block(
    first: u32,
    result: &[u8],
    distances: &mut [u32],
) -> Result<(Vec<u32>, HostCost), BadResult> {
    if result.len() % 4 != 0 {
        return Err(BadResult::PartialWords {
            bytes: result.len(),
        });
    }
    let count = result.len() / 4;
    let start = first as usize;
    let Some(copy) = start
        .checked_add(count)
        .and_then(|end| distances.get_mut(start..end))
    else {
        return Err(BadResult::VerticesBeyond {
            first,
            end: start.saturating_add(count),
            vertices: distances.len(),
        });
    };
    let mut changed = Vec::new();
    // Sixteen vertices at a time: a group whose distances all equal the copy's (most groups
    // once the front has passed) is skipped after one comparison of the whole group.
    let mut vertex = first;
    let mut words = result.chunks_exact(4 * GROUP);
    let mut known = copy.chunks_exact_mut(GROUP);
    for (bytes, known) in (&mut words).zip(&mut known) {
        let mut new = [0_u32; GROUP];
        for (value, word) in new.iter_mut().zip(bytes.chunks_exact(4)) {
            *value = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        }
        let differ = new
            .iter()
            .zip(known.iter())
            .fold(0, |any, (new, known)| any | (new ^ known));
        if differ != 0 {
            compare_words(vertex, &new, known, &mut changed);
        }
        vertex = vertex.wrapping_add(GROUP as u32);
    }
    let mut rest = [0_u32; GROUP];
    let tail = known.into_remainder();
    for (value, word) in rest.iter_mut().zip(words.remainder().chunks_exact(4)) {
        *value = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
    }
    compare_words(
        vertex,
        rest.get(..tail.len()).unwrap_or_default(),
        tail,
        &mut changed,
    );
    let vertices = count as u64;
    let cost = HostCost {
        operations: TASK_FIXED_OPERATIONS + vertices.div_ceil(16) * OPERATIONS_PER_16_VERTICES,
        memory_bytes: vertices * BYTES_PER_VERTEX + changed.len() as u64 * BYTES_PER_CHANGED_VERTEX,
    };
    Ok((changed, cost))
}

/// Vertices compared at once by [`compare_block`].
const GROUP: usize = 16;

/// Compares `new` (the distances of vertices `first ..`) with `known`, the copy's, vertex by
/// vertex: each that differs goes on `changed` and the copy takes the new value.
#[inline]
fn compare_words(first: u32, new: &[u32], known: &mut [u32], changed: &mut Vec<u32>) {
    for ((vertex, &new), known) in (first..).zip(new).zip(known) {
        if new != *known {
            changed.push(vertex);
            *known = new;
        }
    }
}

/// The final step over the lengths of a launch's task lists: the vertices that changed in
/// all, and the step's cost.
pub fn count_changes(lengths: impl IntoIterator<Item = usize>) -> (u64, HostCost) {
    let (mut total, mut tasks) = (0_u64, 0_u64);
    for length in lengths {
        total += length as u64;
        tasks += 1;
    }
    let cost = HostCost {
        operations: FINAL_FIXED_OPERATIONS + tasks * FINAL_OPERATIONS_PER_TASK,
        memory_bytes: tasks * FINAL_BYTES_PER_TASK,
    };
    (total, cost)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared_abi::params::sssp::INFINITY;

    fn bytes(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn a_task_lists_exactly_the_changed_vertices_and_updates_the_copy() {
        let mut distances = vec![0, INFINITY, INFINITY, 7, 9, INFINITY];
        // Vertices 2..6: 2 reached, 3 unchanged, 4 lowered, 5 still unreached.
        let (changed, cost) =
            compare_block(2, &bytes(&[12, 7, 8, INFINITY]), &mut distances).unwrap();
        assert_eq!(changed, [2, 4]);
        assert_eq!(distances, [0, INFINITY, 12, 7, 8, INFINITY]);
        assert_eq!(
            cost.operations,
            TASK_FIXED_OPERATIONS + OPERATIONS_PER_16_VERTICES
        );
        assert_eq!(
            cost.memory_bytes,
            4 * BYTES_PER_VERTEX + 2 * BYTES_PER_CHANGED_VERTEX
        );
        // The same block again changes nothing.
        let (changed, _) = compare_block(2, &bytes(&[12, 7, 8, INFINITY]), &mut distances).unwrap();
        assert!(changed.is_empty());
    }

    #[test]
    fn every_length_and_every_changed_lane_is_found_as_vertex_by_vertex() {
        for count in 0..40_u32 {
            for changed_every in [1_u32, 3, 16, 17, 100] {
                let known: Vec<u32> = (0..count + 5).map(|v| v * 7).collect();
                let new: Vec<u32> = (0..count)
                    .map(|i| {
                        if i % changed_every == 0 {
                            i * 7 + 1
                        } else {
                            (i + 2) * 7
                        }
                    })
                    .collect();
                let mut distances = known.clone();
                let (changed, _) = compare_block(2, &bytes(&new), &mut distances).unwrap();
                let mut expected_copy = known.clone();
                let mut expected = Vec::new();
                for (i, &value) in new.iter().enumerate() {
                    let vertex = 2 + i as u32;
                    if value != known[vertex as usize] {
                        expected.push(vertex);
                        expected_copy[vertex as usize] = value;
                    }
                }
                assert_eq!(changed, expected, "{count} {changed_every}");
                assert_eq!(distances, expected_copy, "{count} {changed_every}");
            }
        }
    }

    #[test]
    fn a_block_beyond_the_copy_or_of_partial_words_is_refused() {
        let mut distances = vec![0; 4];
        assert_eq!(
            compare_block(3, &bytes(&[1, 2]), &mut distances).unwrap_err(),
            BadResult::VerticesBeyond {
                first: 3,
                end: 5,
                vertices: 4
            }
        );
        assert!(matches!(
            compare_block(u32::MAX, &bytes(&[1]), &mut distances),
            Err(BadResult::VerticesBeyond { .. })
        ));
        assert_eq!(
            compare_block(0, &[1, 2, 3], &mut distances).unwrap_err(),
            BadResult::PartialWords { bytes: 3 }
        );
        assert_eq!(distances, [0; 4], "a refused block changes nothing");
    }

    #[test]
    fn the_final_step_adds_the_list_lengths() {
        let (total, cost) = count_changes([3, 0, 5]);
        assert_eq!(total, 8);
        assert_eq!(
            cost.operations,
            FINAL_FIXED_OPERATIONS + 3 * FINAL_OPERATIONS_PER_TASK
        );
        assert_eq!(cost.memory_bytes, 3 * FINAL_BYTES_PER_TASK);
        assert_eq!(count_changes([]).0, 0);
    }
}
