//! The plain reference: the whole decode step on the host, layer by layer, in the device's and
//! the MLP tasks' exact arithmetic (the helpers of crate `kernel-arith` the device kernel runs: [`dot`], [`split_dot`],
//! [`layer_norm_moments`], [`running_max`], [`exponents`], [`accumulate_weighted`],
//! [`block_factors`] and the rest; the host's [`host_dot`] and [`layer_norm`]), so a correct
//! run matches it bit for bit.
//!
//! It shares no code with the offload path beyond those arithmetic helpers and the data
//! generators: the stages, the KV cache append, the attention loops and the MLP split are
//! written out again here in their plainest form, a head, a softmax block and a token packet
//! at a time where the device's reductions are.

use kernel_arith::opt::{
    accumulate_weighted, add_into, attention_scale, block_factors, block_output, dot, exponents,
    layer_norm_moments, normalize, ordered_sum, project, residual, running_max, scale, score,
    split_dot,
};
use shared_abi::params::opt::{PACKET_ELEMENTS, SOFTMAX_BLOCK_PACKETS};

use super::data::{kv_cache, OptWeights};
use super::host::{host_dot, layer_norm, relu};
use super::OptShape;

/// The hidden state after every layer of one decode step (the last one is the answer).
pub fn decode_step(shape: &OptShape, weights: &OptWeights, seed: u64) -> Vec<Vec<f32>> {
    let mut states = Vec::with_capacity(shape.layers as usize);
    let mut x = weights.input.clone();
    for layer in 0..shape.layers {
        let (mut keys, mut values) = kv_cache(shape, seed, layer);
        let attention_output = attention_block(shape, weights, &x, &mut keys, &mut values);
        x = mlp_block(shape, weights, &attention_output);
        states.push(x.clone());
    }
    states
}

/// The device half of a layer: LayerNorm0, Q/K/V (the token's key and value appended to the
/// caches at `position`), attention over positions `0..=position` with the softmax in blocks
/// of 64 tokens rescaled to the head's max, the output projection in `output_split` parts of
/// its columns, and the residual.
pub fn attention_block(
    shape: &OptShape,
    weights: &OptWeights,
    x: &[f32],
    keys: &mut [f32],
    values: &mut [f32],
) -> Vec<f32> {
    let hidden = shape.hidden as usize;
    let head_dim = shape.head_dim as usize;
    let capacity = shape.capacity as usize;
    let position = shape.position as usize;

    let (mean, reciprocal) = layer_norm_moments(x);
    let normalized: Vec<f32> = (0..hidden)
        .map(|j| {
            normalize(
                x[j],
                mean,
                reciprocal,
                weights.ln0_gamma[j],
                weights.ln0_beta[j],
            )
        })
        .collect();
    let qkv: Vec<f32> = (0..3 * hidden)
        .map(|row| {
            project(
                dot(weights.qkv_row(shape, row), &normalized),
                weights.qkv_bias[row],
            )
        })
        .collect();
    let (query, rest) = qkv.split_at(hidden);
    let (key, value) = rest.split_at(hidden);
    let cache_index = |head: usize, token: usize| (head * capacity + token) * head_dim;
    for head in 0..shape.heads as usize {
        let at = cache_index(head, position);
        let own = head * head_dim..(head + 1) * head_dim;
        keys[at..at + head_dim].copy_from_slice(&key[own.clone()]);
        values[at..at + head_dim].copy_from_slice(&value[own]);
    }

    let scale_of_scores = attention_scale(shape.head_dim);
    let packet = PACKET_ELEMENTS as usize;
    let block = SOFTMAX_BLOCK_PACKETS as usize * packet;
    let mut attention = vec![0.0_f32; hidden];
    for head in 0..shape.heads as usize {
        let q = &query[head * head_dim..(head + 1) * head_dim];
        let scores: Vec<f32> = (0..=position)
            .map(|token| {
                let at = cache_index(head, token);
                score(q, &keys[at..at + head_dim], scale_of_scores)
            })
            .collect();
        let mut block_maxima = Vec::new();
        let mut block_sums = Vec::new();
        let mut block_partials = Vec::new();
        for (number, block_scores) in scores.chunks(block).enumerate() {
            let packet_maxima: Vec<f32> = block_scores.chunks(packet).map(running_max).collect();
            let max = running_max(&packet_maxima);
            let mut packet_sums = Vec::new();
            let mut partial = vec![0.0_f32; head_dim];
            for (index, packet_scores) in block_scores.chunks(packet).enumerate() {
                let mut weights_of_tokens = packet_scores.to_vec();
                packet_sums.push(exponents(&mut weights_of_tokens, max));
                let first_token = number * block + index * packet;
                let mut packet_partial = vec![0.0_f32; head_dim];
                for (offset, weight) in weights_of_tokens.iter().enumerate() {
                    let at = cache_index(head, first_token + offset);
                    accumulate_weighted(&mut packet_partial, *weight, &values[at..at + head_dim]);
                }
                add_into(&mut partial, &packet_partial);
            }
            block_maxima.push(max);
            block_sums.push(ordered_sum(&packet_sums));
            block_partials.push(partial);
        }
        let mut factors = vec![0.0_f32; block_maxima.len()];
        let total_reciprocal = block_factors(&block_maxima, &block_sums, &mut factors);
        let output = &mut attention[head * head_dim..(head + 1) * head_dim];
        for (factor, partial) in factors.iter().zip(&block_partials) {
            accumulate_weighted(output, *factor, partial);
        }
        scale(output, total_reciprocal);
    }

    let parts: Vec<Vec<f32>> = (0..shape.output_split)
        .map(|part| {
            (0..hidden)
                .map(|row| {
                    split_dot(
                        weights.output_row(shape, row),
                        &attention,
                        part,
                        shape.output_split,
                    )
                })
                .collect()
        })
        .collect();
    (0..hidden)
        .map(|row| {
            let sums: Vec<f32> = parts.iter().map(|part| part[row]).collect();
            block_output(&sums, weights.output_bias[row], x[row])
        })
        .collect()
}

/// The host half of a layer: LayerNorm1, FC1 and ReLU, FC2 as `mlp_tasks` partial sums over
/// consecutive equal slices of the FFN units added in slice order after the bias, the
/// residual.
pub fn mlp_block(shape: &OptShape, weights: &OptWeights, attention_output: &[f32]) -> Vec<f32> {
    let hidden = shape.hidden as usize;
    let mut normalized = vec![0.0; hidden];
    layer_norm(
        attention_output,
        &weights.ln1_gamma,
        &weights.ln1_beta,
        &mut normalized,
    );
    let activations: Vec<f32> = (0..shape.ffn as usize)
        .map(|unit| {
            relu(project(
                host_dot(weights.fc1_row(shape, unit), &normalized),
                weights.fc1_bias[unit],
            ))
        })
        .collect();
    let per_slice = (shape.ffn / shape.mlp_tasks) as usize;
    let mut output = weights.fc2_bias.clone();
    for slice in activations.chunks_exact(per_slice).enumerate() {
        let (index, slice) = slice;
        let mut partial = vec![0.0_f32; hidden];
        for (offset, activation) in slice.iter().enumerate() {
            let unit = index * per_slice + offset;
            accumulate_weighted(&mut partial, *activation, weights.fc2_row(shape, unit));
        }
        for (sum, value) in output.iter_mut().zip(&partial) {
            *sum += value;
        }
    }
    attention_output
        .iter()
        .zip(&output)
        .map(|(input, output)| residual(*input, *output))
        .collect()
}

/// How a final hidden state differs from the reference.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum ReferenceError {
    /// Another number of values.
    #[error("{got} values, {expected} expected")]
    Length {
        /// Values answered.
        got: usize,
        /// Values expected.
        expected: usize,
    },
    /// The first element whose bits differ.
    #[error(
        "element {index}: {got} but the reference has {expected} ({mismatches} of {length} differ)"
    )]
    Element {
        /// Its index.
        index: usize,
        /// The answer's value.
        got: f32,
        /// The reference's.
        expected: f32,
        /// How many elements differ in all.
        mismatches: usize,
        /// Elements compared.
        length: usize,
    },
}

/// The first difference between `answer` and `expected`, bit for bit.
pub fn compare(answer: &[f32], expected: &[f32]) -> Result<(), ReferenceError> {
    if answer.len() != expected.len() {
        return Err(ReferenceError::Length {
            got: answer.len(),
            expected: expected.len(),
        });
    }
    let mismatches = answer
        .iter()
        .zip(expected)
        .filter(|(a, e)| a.to_bits() != e.to_bits())
        .count();
    match answer
        .iter()
        .zip(expected)
        .position(|(a, e)| a.to_bits() != e.to_bits())
    {
        None => Ok(()),
        Some(index) => Err(ReferenceError::Element {
            index,
            got: answer[index],
            expected: expected[index],
            mismatches,
            length: answer.len(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::opt::SMALL;

    /// The same decode step in `f64` with plain sequential sums and `exp`, no shared helpers.
    fn naive_f64(shape: &OptShape, weights: &OptWeights, seed: u64) -> Vec<f64> {
        let hidden = shape.hidden as usize;
        let head_dim = shape.head_dim as usize;
        let capacity = shape.capacity as usize;
        let position = shape.position as usize;
        let w = |v: &[f32]| v.iter().map(|x| f64::from(*x)).collect::<Vec<f64>>();
        let layer_norm = |x: &[f64], gamma: &[f32], beta: &[f32]| -> Vec<f64> {
            let n = x.len() as f64;
            let mean = x.iter().sum::<f64>() / n;
            let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
            let r = 1.0 / (var + 1e-5).sqrt();
            x.iter()
                .zip(gamma)
                .zip(beta)
                .map(|((v, g), b)| (v - mean) * r * f64::from(*g) + f64::from(*b))
                .collect()
        };
        let matvec = |m: &[f32], v: &[f64], bias: &[f32]| -> Vec<f64> {
            m.chunks_exact(v.len())
                .zip(bias)
                .map(|(row, b)| {
                    row.iter()
                        .zip(v)
                        .map(|(a, x)| f64::from(*a) * x)
                        .sum::<f64>()
                        + f64::from(*b)
                })
                .collect()
        };
        let mut x = w(&weights.input);
        for layer in 0..shape.layers {
            let (keys, values) = kv_cache(shape, seed, layer);
            let (mut keys, mut values) = (w(&keys), w(&values));
            let n = layer_norm(&x, &weights.ln0_gamma, &weights.ln0_beta);
            let qkv = matvec(&weights.qkv_weight, &n, &weights.qkv_bias);
            let mut attention = vec![0.0; hidden];
            for head in 0..shape.heads as usize {
                let at = (head * capacity + position) * head_dim;
                for d in 0..head_dim {
                    keys[at + d] = qkv[hidden + head * head_dim + d];
                    values[at + d] = qkv[2 * hidden + head * head_dim + d];
                }
                let q = &qkv[head * head_dim..(head + 1) * head_dim];
                let scores: Vec<f64> = (0..=position)
                    .map(|t| {
                        let k = &keys[(head * capacity + t) * head_dim..][..head_dim];
                        q.iter().zip(k).map(|(a, b)| a * b).sum::<f64>() / (head_dim as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f64::MIN, f64::max);
                let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let sum: f64 = e.iter().sum();
                for d in 0..head_dim {
                    attention[head * head_dim + d] = (0..=position)
                        .map(|t| e[t] * values[(head * capacity + t) * head_dim + d])
                        .sum::<f64>()
                        / sum;
                }
            }
            let o = matvec(&weights.output_weight, &attention, &weights.output_bias);
            let h: Vec<f64> = x.iter().zip(&o).map(|(a, b)| a + b).collect();
            let n = layer_norm(&h, &weights.ln1_gamma, &weights.ln1_beta);
            let act: Vec<f64> = matvec(&weights.fc1_weight, &n, &weights.fc1_bias)
                .into_iter()
                .map(|v| v.max(0.0))
                .collect();
            let mut out: Vec<f64> = w(&weights.fc2_bias);
            for (unit, a) in act.iter().enumerate() {
                for (i, o) in out.iter_mut().enumerate() {
                    *o += a * f64::from(weights.fc2_weight[unit * hidden + i]);
                }
            }
            x = h.iter().zip(&out).map(|(a, b)| a + b).collect();
        }
        x
    }

    #[test]
    fn reference_agrees_with_a_naive_f64_decode_step() {
        let shape = SMALL;
        let weights = OptWeights::generate(&shape, 11);
        let states = decode_step(&shape, &weights, 11);
        assert_eq!(states.len(), shape.layers as usize);
        let answer = states.last().unwrap();
        let expected = naive_f64(&shape, &weights, 11);
        let largest = expected.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
        for (a, e) in answer.iter().zip(&expected) {
            assert!(
                (f64::from(*a) - e).abs() <= 1e-4 * largest.max(1.0),
                "{a} vs {e}"
            );
        }
        // The layers really change the state.
        assert!(states[0] != states[1]);
    }

    #[test]
    fn one_head_one_token_attention_is_its_own_value() {
        // With a single cached position (position 0: only the current token), the softmax
        // weight is 1 and the attention output is the token's own value projection.
        let shape = OptShape {
            capacity: 1,
            position: 0,
            ..SMALL
        };
        let weights = OptWeights::generate(&shape, 3);
        let (mut keys, mut values) = kv_cache(&shape, 3, 0);
        let x = weights.input.clone();
        let out = attention_block(&shape, &weights, &x, &mut keys, &mut values);
        let hidden = shape.hidden as usize;
        let (mean, reciprocal) = layer_norm_moments(&x);
        let normalized: Vec<f32> = (0..hidden)
            .map(|j| {
                normalize(
                    x[j],
                    mean,
                    reciprocal,
                    weights.ln0_gamma[j],
                    weights.ln0_beta[j],
                )
            })
            .collect();
        let value: Vec<f32> = (0..hidden)
            .map(|j| {
                project(
                    dot(weights.qkv_row(&shape, 2 * hidden + j), &normalized),
                    weights.qkv_bias[2 * hidden + j],
                )
            })
            .collect();
        // The cache now holds that value (head-major, capacity 1).
        assert_eq!(values, value);
        // Weight exp(0) = 1, sums 1, factor 1: the attention output is the value itself. With
        // 64 columns the output projection's only block is part 0's, so parts 1 to 3 add
        // zeros: the output is x + (dot + bias) over the whole row.
        let expected: Vec<f32> = (0..hidden)
            .map(|row| {
                residual(
                    x[row],
                    project(
                        dot(weights.output_row(&shape, row), &value),
                        weights.output_bias[row],
                    ),
                )
            })
            .collect();
        assert_eq!(out, expected);
    }

    #[test]
    fn output_parts_are_added_in_part_order() {
        // Part order matters in f32: (1e8 + -1e8) + 1 = 1, while 1e8 + (-1e8 + 1) = 0.
        assert_eq!(block_output(&[1e8, -1e8, 1.0], 0.0, 0.0), 1.0);
        assert_eq!(block_output(&[1e8, -1e8 + 1.0], 0.0, 0.0), 0.0);
        // Then the bias, then the input.
        assert_eq!(block_output(&[1.0, 2.0], 4.0, 8.0), 15.0);
    }

    #[test]
    fn compare_reports_the_first_difference() {
        assert!(compare(&[1.0, 2.0], &[1.0, 2.0]).is_ok());
        let error = compare(&[1.0, 2.5, 3.0], &[1.0, 2.0, 4.0])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("element 1") && error.contains("2 of 3"),
            "{error}"
        );
        assert!(compare(&[1.0], &[1.0, 2.0]).is_err());
    }
}
