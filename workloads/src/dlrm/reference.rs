//! The plain DLRM reference: sum pooling straight from the generator, and the top MLP in `f64`.
//!
//! Pooling regenerates each looked-up row ([`TableRows::row`], never device memory) and adds
//! the bag's rows in bag order, one `f32` addition per element: the kernel's documented order,
//! so a correct device result is bit-identical. The MLP runs in `f64` with its own plain loops,
//! independent of the host tasks' `f32` code; CTRs are compared within [`CTR_TOLERANCE`].

use super::data::{Batch, DlrmShape, TableRows, TopMlp};

/// Largest allowed difference between a run's `f32` CTR and the `f64` reference. The `f32`
/// forward pass over 256 + 128 + 64 terms of magnitude up to ~10 carries relative errors of a
/// few 1e-7 into the logit; through the sigmoid (slope at most 1/4) that is far below 1e-5.
pub const CTR_TOLERANCE: f64 = 1e-5;

/// The pooled vectors of every bag of `batch` (bag-major, `dim` each).
pub fn pooled(shape: &DlrmShape, seed: u64, batch: &Batch) -> Vec<f32> {
    let dim = shape.dim as usize;
    let mut table = TableRows::new(seed, shape.dim);
    let mut out = vec![0.0_f32; batch.bags() as usize * dim];
    for (bag, sums) in out.chunks_exact_mut(dim).enumerate() {
        for &row in batch.bag(bag as u32) {
            let values = table.row(row);
            for (sum, value) in sums.iter_mut().zip(&values) {
                *sum += *value;
            }
        }
    }
    out
}

/// The CTR of one pooled vector, in `f64`.
pub fn click_probability(mlp: &TopMlp, pooled: &[f32]) -> f64 {
    let mut activations: Vec<f64> = pooled.iter().map(|&x| f64::from(x)).collect();
    let last = mlp.layers.len().saturating_sub(1);
    for (index, layer) in mlp.layers.iter().enumerate() {
        let mut next = Vec::with_capacity(layer.outputs as usize);
        for output in 0..layer.outputs {
            let mut sum = f64::from(layer.bias[output as usize]);
            for (weight, activation) in layer.row(output).iter().zip(&activations) {
                sum += f64::from(*weight) * activation;
            }
            next.push(if index == last { sum } else { sum.max(0.0) });
        }
        activations = next;
    }
    1.0 / (1.0 + (-activations[0]).exp())
}

/// How a batch's results differ from the reference (the first difference).
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum ReferenceError {
    /// Another number of pooled values.
    #[error("{got} pooled values, {expected} expected")]
    PooledLength {
        /// Values received.
        got: usize,
        /// Values expected.
        expected: usize,
    },
    /// A pooled element whose bits differ.
    #[error(
        "bag {bag} element {element}: {got:e} ({:#010x}), expected {expected:e} ({:#010x})",
        got.to_bits(),
        expected.to_bits()
    )]
    Pooled {
        /// The bag.
        bag: usize,
        /// The element within the bag's vector.
        element: usize,
        /// The value received.
        got: f32,
        /// The reference's.
        expected: f32,
    },
    /// Another number of CTRs.
    #[error("{got} CTRs, {expected} expected")]
    CtrLength {
        /// CTRs received.
        got: usize,
        /// CTRs expected.
        expected: usize,
    },
    /// A CTR farther than [`CTR_TOLERANCE`] from the reference (or NaN).
    #[error("bag {bag}: CTR {got}, expected {expected} (difference {difference:e})")]
    Ctr {
        /// The bag.
        bag: usize,
        /// The CTR received.
        got: f32,
        /// The reference's.
        expected: f64,
        /// Their distance.
        difference: f64,
    },
}

/// Compares pooled vectors bit for bit; `Err` names the first difference.
pub fn compare_pooled(got: &[f32], expected: &[f32], dim: usize) -> Result<(), ReferenceError> {
    if got.len() != expected.len() {
        return Err(ReferenceError::PooledLength {
            got: got.len(),
            expected: expected.len(),
        });
    }
    match got
        .iter()
        .zip(expected)
        .position(|(g, e)| g.to_bits() != e.to_bits())
    {
        None => Ok(()),
        Some(at) => Err(ReferenceError::Pooled {
            bag: at / dim,
            element: at % dim,
            got: got[at],
            expected: expected[at],
        }),
    }
}

/// Compares CTRs with the reference within [`CTR_TOLERANCE`]; `Ok` holds the largest
/// difference, `Err` names the first one beyond it.
pub fn compare_ctr(got: &[f32], expected: &[f64]) -> Result<f64, ReferenceError> {
    if got.len() != expected.len() {
        return Err(ReferenceError::CtrLength {
            got: got.len(),
            expected: expected.len(),
        });
    }
    let mut largest = 0.0_f64;
    for (bag, (&g, &e)) in got.iter().zip(expected).enumerate() {
        let difference = (f64::from(g) - e).abs();
        if difference.is_nan() || difference > CTR_TOLERANCE {
            return Err(ReferenceError::Ctr {
                bag,
                got: g,
                expected: e,
                difference,
            });
        }
        largest = largest.max(difference);
    }
    Ok(largest)
}

#[cfg(test)]
mod tests {
    use super::super::data::{generate_mlp, Layer, SMALL};
    use super::*;

    #[test]
    fn pooled_sums_the_bags_rows_and_leaves_empty_bags_zero() {
        let shape = DlrmShape {
            rows: 6,
            dim: 16,
            ..SMALL
        };
        let batch = Batch {
            offsets: vec![0, 3, 3, 4],
            indices: vec![2, 5, 2, 0],
        };
        let got = pooled(&shape, 9, &batch);
        let mut table = TableRows::new(9, 16);
        let (row0, row2, row5) = (table.row(0), table.row(2), table.row(5));
        for e in 0..16 {
            assert_eq!(got[e], (0.0 + row2[e] + row5[e]) + row2[e]);
            assert_eq!(got[16 + e].to_bits(), 0);
            assert_eq!(got[32 + e], row0[e]);
        }
    }

    #[test]
    fn f64_mlp_by_hand() {
        let mlp = TopMlp {
            layers: vec![
                Layer {
                    inputs: 2,
                    outputs: 1,
                    weights: vec![0.5, -1.0],
                    bias: vec![0.25],
                },
                Layer {
                    inputs: 1,
                    outputs: 1,
                    weights: vec![2.0],
                    bias: vec![0.0],
                },
            ],
        };
        // Hidden: 0.25 + 1 - 2 = -0.75 -> ReLU 0; logit 0; CTR 0.5.
        assert_eq!(click_probability(&mlp, &[2.0, 2.0]), 0.5);
        // Hidden: 0.25 + 2 = 2.25; logit 4.5.
        let ctr = click_probability(&mlp, &[4.0, 0.0]);
        assert!((ctr - 1.0 / (1.0 + (-4.5_f64).exp())).abs() < 1e-15);
    }

    #[test]
    fn host_f32_ctr_is_within_the_tolerance_of_the_f64_reference() {
        let mlp = generate_mlp(256, 5);
        let mut table = TableRows::new(5, 256);
        let mut pooled = vec![0.0_f32; 256];
        for row in 0..128 {
            for (sum, value) in pooled.iter_mut().zip(table.row(row * 31)) {
                *sum += value;
            }
        }
        let host = super::super::host::click_probability(&mlp, &pooled);
        let reference = click_probability(&mlp, &pooled);
        assert!(compare_ctr(&[host], &[reference]).unwrap() < CTR_TOLERANCE / 10.0);
    }

    #[test]
    fn comparisons_report_the_first_difference() {
        let expected = [1.0_f32, 2.0, 3.0, 4.0];
        assert_eq!(compare_pooled(&expected, &expected, 2), Ok(()));
        let mut wrong = expected;
        wrong[3] = f32::from_bits(4.0_f32.to_bits() + 1);
        let error = compare_pooled(&wrong, &expected, 2)
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("bag 1 element 1"), "{error}");
        assert!(compare_pooled(&expected[..3], &expected, 2).is_err());

        assert_eq!(compare_ctr(&[0.5, 0.25], &[0.5, 0.25]), Ok(0.0));
        assert!(compare_ctr(&[0.5, 0.25], &[0.5, 0.26])
            .unwrap_err()
            .to_string()
            .starts_with("bag 1"));
        assert!(compare_ctr(&[f32::NAN], &[0.5]).is_err());
        assert!(compare_ctr(&[0.5], &[]).is_err());
    }
}
