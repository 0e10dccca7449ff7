//! The plain SSSP references over the same weighted CSR: Dijkstra with a binary heap (the
//! shortest distances), and rounds of Jacobi Bellman-Ford (what a given number of launches
//! must have computed).
//!
//! Both treat a path of length `u32::MAX` or more as no path ([`INFINITY`]), the kernel's
//! convention; they share no code with the kernel.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use shared_abi::params::sssp::INFINITY;

use crate::graph::Csr;

/// Exact shortest distances from `source` ([`INFINITY`] for unreachable vertices).
pub fn dijkstra(graph: &Csr, source: u32) -> Vec<u32> {
    let mut distance = vec![INFINITY; graph.vertices() as usize];
    let mut heap = BinaryHeap::new();
    distance[source as usize] = 0;
    heap.push(Reverse((0_u64, source)));
    while let Some(Reverse((d, vertex))) = heap.pop() {
        if d > u64::from(distance[vertex as usize]) {
            continue;
        }
        for arc in graph.arc_range(vertex) {
            let target = graph.targets()[arc];
            let next = d + u64::from(graph.weights()[arc]);
            if next < u64::from(distance[target as usize]) {
                distance[target as usize] = next as u32;
                heap.push(Reverse((next, target)));
            }
        }
    }
    distance
}

/// The distances after `rounds` rounds of Jacobi Bellman-Ford from `source`: round `r`
/// computes every vertex's `min(d[v], d[u] + w)` over its arcs `(v, u, w)` from round `r - 1`'s
/// distances only (round 0: 0 at `source`, [`INFINITY`] elsewhere).
pub fn bellman_ford_rounds(graph: &Csr, source: u32, rounds: u32) -> Vec<u32> {
    let vertices = graph.vertices() as usize;
    let mut current = vec![u64::from(INFINITY); vertices];
    current[source as usize] = 0;
    let mut next = current.clone();
    for _ in 0..rounds {
        for (vertex, best) in next.iter_mut().enumerate() {
            *best = current[vertex];
            for arc in graph.arc_range(vertex as u32) {
                let neighbour = current[graph.targets()[arc] as usize];
                let through =
                    (neighbour + u64::from(graph.weights()[arc])).min(u64::from(INFINITY));
                *best = (*best).min(through);
            }
        }
        std::mem::swap(&mut current, &mut next);
    }
    current.into_iter().map(|d| d as u32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::EdgeList;

    /// 0 -4- 1, 0 -1- 2, 2 -2- 1, 1 -5- 3, 2 -8- 3; 4 isolated.
    fn graph() -> Csr {
        let graph = EdgeList {
            vertices: 5,
            edges: vec![(0, 1), (0, 2), (2, 1), (1, 3), (2, 3)],
        };
        Csr::symmetric(&graph, Some(&[4, 1, 2, 5, 8])).unwrap()
    }

    #[test]
    fn hand_checked_graph() {
        let csr = graph();
        assert_eq!(dijkstra(&csr, 0), [0, 3, 1, 8, INFINITY]);
        assert_eq!(dijkstra(&csr, 3), [8, 5, 7, 0, INFINITY]);
    }

    #[test]
    fn jacobi_rounds_by_hand_reach_dijkstra() {
        let csr = graph();
        const I: u32 = INFINITY;
        assert_eq!(bellman_ford_rounds(&csr, 0, 0), [0, I, I, I, I]);
        assert_eq!(bellman_ford_rounds(&csr, 0, 1), [0, 4, 1, I, I]);
        // Round 2 sees vertex 2 at 1 (round 1), not a value of the same round.
        assert_eq!(bellman_ford_rounds(&csr, 0, 2), [0, 3, 1, 9, I]);
        assert_eq!(bellman_ford_rounds(&csr, 0, 3), [0, 3, 1, 8, I]);
        assert_eq!(bellman_ford_rounds(&csr, 0, 50), dijkstra(&csr, 0));
    }

    #[test]
    fn a_path_as_long_as_infinity_is_no_path() {
        let graph = EdgeList {
            vertices: 3,
            edges: vec![(0, 1), (1, 2)],
        };
        let csr = Csr::symmetric(&graph, Some(&[u32::MAX - 10, 10])).unwrap();
        assert_eq!(
            bellman_ford_rounds(&csr, 0, 3),
            [0, u32::MAX - 10, INFINITY]
        );
        assert_eq!(dijkstra(&csr, 0), [0, u32::MAX - 10, INFINITY]);
    }
}
