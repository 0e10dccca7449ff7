//! PageRank host tasks: the rank update of a range of vertices, and the launch's final step.
//!
//! A task receives the gathered sums of consecutive vertices. For each vertex `v` it computes
//! the new rank [`reference::update`]`(sum, base, dangling_share)`, adds `|new - old|` to its
//! L1 change (in `f64`), stores the rank, and stores the next launch's contribution
//! `new / degree(v)`. The final step adds the tasks' L1 changes in task order (the convergence
//! measure) and sums the ranks of the vertices without arcs in vertex order (the next dangling
//! share).
//!
//! # Cost model (host µthread instructions, AVX-512-style: a 16-lane vector op counts 1)
//!
//! A task costs [`TASK_FIXED_OPERATIONS`] + ceil(vertices / 16) × [`OPERATIONS_PER_16_VERTICES`]
//! instructions and touches vertices × [`BYTES_PER_VERTEX`] bytes of cached host memory (its
//! result bytes are charged by the runtime). The final step costs tasks ×
//! [`OPERATIONS_PER_TASK_TOTAL`] + dangling vertices × [`OPERATIONS_PER_DANGLING_VERTEX`]
//! instructions and dangling vertices × 64 bytes (one random line each).

use host_runtime::app::HostCost;

use super::reference;
use crate::graph::Csr;

/// Fixed instructions per task: call and return, loop bounds, broadcasting the base and the
/// dangling share, reducing the L1 lanes and publishing the partial: 30.
pub const TASK_FIXED_OPERATIONS: u64 = 30;

/// Instructions per 16 vertices: load the sums (1), add the dangling share and the
/// multiply-add with the damping and base (2), load the old ranks (1), subtract, absolute
/// value, widen to two `f64` halves and accumulate the L1 change (5), store the ranks (1), load
/// the degrees and convert (2), divide (1), store the contributions (1), loop control (2): 16.
pub const OPERATIONS_PER_16_VERTICES: u64 = 16;

/// Cached bytes per vertex: its old rank read and new rank written (8), its degree read (4)
/// and its contribution written (4).
pub const BYTES_PER_VERTEX: u64 = 16;

/// Final-step instructions per task: load and add its L1 partial: 2.
pub const OPERATIONS_PER_TASK_TOTAL: u64 = 2;

/// Final-step instructions per vertex without arcs: load its id and its rank, widen, add: 4.
pub const OPERATIONS_PER_DANGLING_VERTEX: u64 = 4;

/// Updates vertices `first .. first + sums.len() / 4` from their gathered sums (`f32`,
/// little-endian): writes `rank` and `contributions`, returns the L1 change and the cost.
pub fn update_ranks(
    graph: &Csr,
    first: u32,
    sums: &[u8],
    base: f32,
    dangling_share: f32,
    rank: &mut [f32],
    contributions: &mut [f32],
) -> (f64, HostCost) {
    let mut change = 0.0_f64;
    let mut vertices = 0_u64;
    for (vertex, word) in (first..).zip(sums.chunks_exact(4)) {
        let sum = f32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        let new = reference::update(sum, base, dangling_share);
        let slot = &mut rank[vertex as usize];
        change += (f64::from(new) - f64::from(*slot)).abs();
        *slot = new;
        contributions[vertex as usize] = reference::contribution(new, graph.degree(vertex));
        vertices += 1;
    }
    let cost = HostCost {
        operations: TASK_FIXED_OPERATIONS + vertices.div_ceil(16) * OPERATIONS_PER_16_VERTICES,
        memory_bytes: vertices * BYTES_PER_VERTEX,
    };
    (change, cost)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::EdgeList;

    #[test]
    fn a_task_updates_its_vertices_and_reports_the_l1_change() {
        let graph = Csr::symmetric(
            &EdgeList {
                vertices: 4,
                edges: vec![(0, 1), (1, 2)],
            },
            None,
        )
        .unwrap();
        let mut rank = vec![0.25_f32; 4];
        let mut contributions = vec![0.0_f32; 4];
        let sums: Vec<u8> = [0.5_f32, 0.125]
            .iter()
            .flat_map(|s| s.to_le_bytes())
            .collect();
        let (change, cost) =
            update_ranks(&graph, 1, &sums, 0.0375, 0.0, &mut rank, &mut contributions);
        let one = 0.0375 + 0.85 * 0.5_f32;
        let two = 0.0375 + 0.85 * 0.125_f32;
        assert_eq!(rank, [0.25, one, two, 0.25]);
        assert_eq!(contributions, [0.0, one / 2.0, two, 0.0]);
        let expected = (f64::from(one) - 0.25).abs() + (f64::from(two) - 0.25).abs();
        assert!((change - expected).abs() < 1e-12);
        assert_eq!(
            cost.operations,
            TASK_FIXED_OPERATIONS + OPERATIONS_PER_16_VERTICES
        );
        assert_eq!(cost.memory_bytes, 2 * BYTES_PER_VERTEX);
    }
}
