//! The plain SSSP reference: Dijkstra with a binary heap over the same weighted CSR.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use firmware::kernels::sssp::INFINITY;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::EdgeList;

    #[test]
    fn hand_checked_graph() {
        // 0 -4- 1, 0 -1- 2, 2 -2- 1, 1 -5- 3, 2 -8- 3; 4 isolated.
        let graph = EdgeList {
            vertices: 5,
            edges: vec![(0, 1), (0, 2), (2, 1), (1, 3), (2, 3)],
        };
        let csr = Csr::symmetric(&graph, Some(&[4, 1, 2, 5, 8])).unwrap();
        assert_eq!(dijkstra(&csr, 0), [0, 3, 1, 8, INFINITY]);
        assert_eq!(dijkstra(&csr, 3), [8, 5, 7, 0, INFINITY]);
    }
}
