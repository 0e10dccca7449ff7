//! The PageRank references.
//!
//! [`mirrored`] repeats the workload's arithmetic exactly (the kernel's [`gather_sum`] order
//! in `f32`: 8 lane sums of every eighth in-arc, then their ordered reduction; the same `f32`
//! update and the same `f64` dangling sum in vertex order): a correct run matches it bit for
//! bit. [`plain_f64`] is the textbook power iteration in `f64`, an
//! independent check that the `f32` answer is PageRank at all (within a stated tolerance).

use kernel_arith::pagerank::gather_sum;

use crate::graph::Csr;

use super::{DAMPING, ITERATIONS};

/// The rank update of one vertex, in `f32`: `base + damping * (sum + dangling_share)`.
pub fn update(sum: f32, base: f32, dangling_share: f32) -> f32 {
    base + DAMPING as f32 * (sum + dangling_share)
}

/// `(1 - d) / n` in `f32`.
pub fn base(vertices: u32) -> f32 {
    ((1.0 - DAMPING) / f64::from(vertices)) as f32
}

/// The dangling share `sum(rank of vertices without arcs) / n`, summed in `f64` in vertex
/// order and rounded to `f32`.
pub fn dangling_share(graph: &Csr, rank: &[f32]) -> f32 {
    let sum: f64 = (0..graph.vertices())
        .filter(|v| graph.degree(*v) == 0)
        .map(|v| f64::from(rank[v as usize]))
        .sum();
    (sum / f64::from(graph.vertices())) as f32
}

/// A vertex's contribution `rank / degree` (0 without arcs).
pub fn contribution(rank: f32, degree: u32) -> f32 {
    if degree == 0 {
        0.0
    } else {
        rank / degree as f32
    }
}

/// [`ITERATIONS`] iterations from the uniform `1 / n`, in the workload's exact arithmetic.
pub fn mirrored(graph: &Csr) -> Vec<f32> {
    let n = graph.vertices();
    let mut rank = vec![(1.0 / f64::from(n)) as f32; n as usize];
    let base = base(n);
    for _ in 0..ITERATIONS {
        let contributions: Vec<f32> = (0..n)
            .map(|v| contribution(rank[v as usize], graph.degree(v)))
            .collect();
        let share = dangling_share(graph, &rank);
        rank = (0..n)
            .map(|v| {
                let sum = gather_sum(
                    graph
                        .neighbors(v)
                        .iter()
                        .map(|u| contributions[*u as usize]),
                );
                update(sum, base, share)
            })
            .collect();
    }
    rank
}

/// [`ITERATIONS`] iterations of plain power iteration in `f64`.
pub fn plain_f64(graph: &Csr) -> Vec<f64> {
    let n = graph.vertices() as usize;
    let mut rank = vec![1.0 / n as f64; n];
    for _ in 0..ITERATIONS {
        let dangling: f64 = (0..graph.vertices())
            .filter(|v| graph.degree(*v) == 0)
            .map(|v| rank[v as usize])
            .sum();
        let mut next = vec![(1.0 - DAMPING) / n as f64 + DAMPING * dangling / n as f64; n];
        for u in 0..graph.vertices() {
            let degree = graph.degree(u);
            for v in graph.neighbors(u) {
                next[*v as usize] += DAMPING * rank[u as usize] / f64::from(degree);
            }
        }
        rank = next;
    }
    rank
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::EdgeList;

    #[test]
    fn symmetric_star_by_hand() {
        // A star 0 - {1, 2, 3} plus an isolated vertex 4 (dangling).
        let graph = Csr::symmetric(
            &EdgeList {
                vertices: 5,
                edges: vec![(0, 1), (0, 2), (0, 3)],
            },
            None,
        )
        .unwrap();
        let exact = plain_f64(&graph);
        assert!((exact.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        // The centre gathers everything from its leaves; the leaves share the centre's rank.
        assert!(exact[0] > exact[1] && (exact[1] - exact[3]).abs() < 1e-15);
        let mirrored = mirrored(&graph);
        for (a, b) in mirrored.iter().zip(&exact) {
            assert!((f64::from(*a) - b).abs() < 1e-6, "{a} vs {b}");
        }
        // One iteration by hand: ranks 0.2; leaves give 0.2 each to 0; 0 gives 0.2/3 to each.
        let share = 0.2 / 5.0;
        let leaf = 0.15 / 5.0 + 0.85 * (0.2 / 3.0 + share);
        let centre = 0.15 / 5.0 + 0.85 * (0.6 + share);
        let one = update(gather_sum([0.2_f32 / 3.0]), base(5), share as f32);
        assert!((f64::from(one) - leaf).abs() < 1e-7);
        let one = update(gather_sum([0.2_f32; 3]), base(5), share as f32);
        assert!((f64::from(one) - centre).abs() < 1e-7);
    }
}
