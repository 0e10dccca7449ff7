//! The plain KNN reference: brute force over every (query, row) pair.
//!
//! Distances come from [`kernel_arith::knn::squared_distance`], the very function the
//! device kernel (`firmware::kernels::knn`) runs, so the reference is bit-identical to a correct
//! device result (the kernel's fixed summation order is documented there). Each query's rows are fully sorted by
//! (distance, row) and the first `k` kept: no heap, no chunking, nothing shared with the host
//! tasks it checks.

use kernel_arith::knn::squared_distance;

use super::data::KnnData;
use super::host::Neighbor;

/// Every query's `k` nearest rows, best first.
pub fn brute_force(data: &KnnData, k: usize) -> Vec<Vec<Neighbor>> {
    (0..data.queries())
        .map(|query| {
            let mut all: Vec<Neighbor> = (0..data.rows())
                .map(|row| Neighbor {
                    row,
                    distance: squared_distance(data.row(row), data.query(query)),
                })
                .collect();
            all.sort_by(Neighbor::rank_cmp);
            all.truncate(k);
            all
        })
        .collect()
}

/// How an answer differs from the reference (the first difference).
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum ReferenceError {
    /// Another number of queries.
    #[error("{answered} queries answered, {expected} expected")]
    Queries {
        /// Queries answered.
        answered: usize,
        /// Queries asked.
        expected: usize,
    },
    /// A query with another number of neighbours.
    #[error("query {query}: {got} neighbours, {expected} expected")]
    Neighbours {
        /// The query.
        query: usize,
        /// Neighbours answered.
        got: usize,
        /// Neighbours expected.
        expected: usize,
    },
    /// Another row, or another distance bit pattern, at a rank.
    #[error(
        "query {query} rank {rank}: row {} distance {:e} ({:#010x}), expected row {} distance {:e} ({:#010x})",
        got.row,
        got.distance,
        got.distance.to_bits(),
        expected.row,
        expected.distance,
        expected.distance.to_bits()
    )]
    Neighbour {
        /// The query.
        query: usize,
        /// The rank (0 = nearest).
        rank: usize,
        /// The answer's neighbour.
        got: Neighbor,
        /// The reference's.
        expected: Neighbor,
    },
}

/// Compares an answer with the reference: the same rows in the same order with bit-identical
/// distances, per query. `Err` describes the first difference.
pub fn compare(answer: &[Vec<Neighbor>], expected: &[Vec<Neighbor>]) -> Result<(), ReferenceError> {
    if answer.len() != expected.len() {
        return Err(ReferenceError::Queries {
            answered: answer.len(),
            expected: expected.len(),
        });
    }
    for (query, (got, want)) in answer.iter().zip(expected).enumerate() {
        if got.len() != want.len() {
            return Err(ReferenceError::Neighbours {
                query,
                got: got.len(),
                expected: want.len(),
            });
        }
        for (rank, (g, w)) in got.iter().zip(want).enumerate() {
            if g.row != w.row || g.distance.to_bits() != w.distance.to_bits() {
                return Err(ReferenceError::Neighbour {
                    query,
                    rank,
                    got: *g,
                    expected: *w,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brute_force_ranks_by_distance_then_row() {
        let data = KnnData::generate(8, 20, 2, 7);
        let answer = brute_force(&data, 5);
        assert_eq!(answer.len(), 2);
        for (query, list) in answer.iter().enumerate() {
            assert_eq!(list.len(), 5);
            assert!(list
                .windows(2)
                .all(|pair| pair[0].rank_cmp(&pair[1]).is_lt()));
            let best = (0..20)
                .map(|row| squared_distance(data.row(row), data.query(query as u32)))
                .fold(f32::INFINITY, f32::min);
            assert_eq!(list[0].distance, best);
        }
    }

    #[test]
    fn compare_reports_the_first_difference() {
        let expected = vec![vec![
            Neighbor {
                row: 1,
                distance: 1.0,
            },
            Neighbor {
                row: 2,
                distance: 2.0,
            },
        ]];
        assert_eq!(compare(&expected, &expected), Ok(()));
        let mut wrong_row = expected.clone();
        wrong_row[0][1].row = 3;
        assert!(compare(&wrong_row, &expected)
            .unwrap_err()
            .to_string()
            .starts_with("query 0 rank 1: row 3"));
        let mut wrong_bits = expected.clone();
        wrong_bits[0][0].distance = f32::from_bits(1.0_f32.to_bits() + 1);
        assert!(compare(&wrong_bits, &expected)
            .unwrap_err()
            .to_string()
            .contains("rank 0"));
        assert!(compare(&[], &expected).is_err());
    }
}
