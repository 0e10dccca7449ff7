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
///
/// The heap holds each entry as one `u64`, the tentative distance above the vertex
/// (`distance << 32 | vertex`): ordered as the pair `(distance, vertex)` would be, and every
/// pushed distance is below [`INFINITY`], so it fits 32 bits.
pub fn dijkstra(graph: &Csr, source: u32) -> Vec<u32> {
    let mut distance = vec![INFINITY; graph.vertices() as usize];
    let mut heap = BinaryHeap::new();
    distance[source as usize] = 0;
    heap.push(Reverse(u64::from(source)));
    let (targets, weights) = (graph.targets(), graph.weights());
    while let Some(Reverse(entry)) = heap.pop() {
        let (d, vertex) = (entry >> 32, entry as u32);
        if d > u64::from(distance[vertex as usize]) {
            continue;
        }
        let arcs = graph.arc_range(vertex);
        for (&target, &weight) in targets[arcs.clone()].iter().zip(&weights[arcs]) {
            let next = d + u64::from(weight);
            // `next < distance <= INFINITY = u32::MAX`: it fits the entry's high half.
            if next < u64::from(distance[target as usize]) {
                distance[target as usize] = next as u32;
                heap.push(Reverse(next << 32 | u64::from(target)));
            }
        }
    }
    distance
}

/// The distances after `rounds` rounds of Jacobi Bellman-Ford from `source`: round `r`
/// computes every vertex's `min(d[v], d[u] + w)` over its arcs `(v, u, w)` from round `r - 1`'s
/// distances only (round 0: 0 at `source`, [`INFINITY`] elsewhere).
///
/// Only the vertices with an arc to a vertex that changed in round `r - 1` are recomputed in
/// round `r` (round 1: the source's neighbours): for any other vertex the pull sees the same
/// neighbour distances as in round `r - 1`, whose result its distance already is at most, so
/// it keeps it. A [`Csr`] is symmetric (two arcs per edge, [`Csr::symmetric`]), so the vertices
/// with an arc to `u` are `u`'s own targets. Each recomputed vertex pulls over all its arcs from
/// round `r - 1`'s distances, and the round's new values are applied together after, so the
/// result is the whole-graph round's exactly (`bellman_ford_rounds_every_vertex`, the plain
/// form, checks it in the tests).
pub fn bellman_ford_rounds(graph: &Csr, source: u32, rounds: u32) -> Vec<u32> {
    let vertices = graph.vertices() as usize;
    let (targets, weights) = (graph.targets(), graph.weights());
    let mut current = vec![INFINITY; vertices];
    current[source as usize] = 0;
    let mut changed = vec![source];
    // The round in which a vertex was last queued for recomputing (`u32::MAX`: never).
    let mut queued = vec![u32::MAX; vertices];
    let mut pull = Vec::new();
    let mut updates = Vec::new();
    for round in 0..rounds {
        pull.clear();
        for &vertex in &changed {
            for &neighbour in graph.neighbors(vertex) {
                let mark = &mut queued[neighbour as usize];
                if *mark != round {
                    *mark = round;
                    pull.push(neighbour);
                }
            }
        }
        updates.clear();
        for &vertex in &pull {
            let mut best = current[vertex as usize];
            let arcs = graph.arc_range(vertex);
            for (&target, &weight) in targets[arcs.clone()].iter().zip(&weights[arcs]) {
                best = best.min(current[target as usize].saturating_add(weight));
            }
            if best != current[vertex as usize] {
                updates.push((vertex, best));
            }
        }
        changed.clear();
        for &(vertex, best) in &updates {
            current[vertex as usize] = best;
            changed.push(vertex);
        }
    }
    current
}

/// [`bellman_ford_rounds`] the plain way, every vertex every round (the check of the
/// frontier form).
#[cfg(test)]
fn bellman_ford_rounds_every_vertex(graph: &Csr, source: u32, rounds: u32) -> Vec<u32> {
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
    use rand::{Rng, SeedableRng};

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

    /// The frontier form of the rounds equals the plain one, round by round, on seeded random
    /// graphs (sparse and dense, with unreachable parts, weights up to near `u32::MAX` so that
    /// sums saturate), and Dijkstra equals the rounds run to convergence.
    #[test]
    fn frontier_rounds_match_every_vertex_rounds_on_random_graphs() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x2545_f491_4f6c_dd1d);
        let mut next = move || rng.gen::<u64>();
        for case in 0..40_u64 {
            let vertices = 2 + (next() % 60) as u32;
            let wanted = (next() % (3 * u64::from(vertices))) as usize;
            let mut seen = std::collections::BTreeSet::new();
            let mut edges = Vec::new();
            for _ in 0..wanted {
                let (u, v) = (
                    (next() % u64::from(vertices)) as u32,
                    (next() % u64::from(vertices)) as u32,
                );
                if u != v && seen.insert((u.min(v), u.max(v))) {
                    edges.push((u, v));
                }
            }
            let weights: Vec<u32> = edges
                .iter()
                .map(|_| match next() % 4 {
                    0 => u32::MAX - (next() % 1000) as u32,
                    _ => 1 + (next() % 1000) as u32,
                })
                .collect();
            let csr = Csr::symmetric(&EdgeList { vertices, edges }, Some(&weights)).unwrap();
            let source = (case % u64::from(vertices)) as u32;
            for rounds in 0..=vertices {
                assert_eq!(
                    bellman_ford_rounds(&csr, source, rounds),
                    bellman_ford_rounds_every_vertex(&csr, source, rounds),
                    "case {case}, {rounds} rounds"
                );
            }
            assert_eq!(
                dijkstra(&csr, source),
                bellman_ford_rounds_every_vertex(&csr, source, vertices),
                "case {case}"
            );
        }
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
