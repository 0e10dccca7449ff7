//! OPT-2.7B model data: seeded weights (no real weights exist here) and seeded KV caches.
//!
//! # What is shared and what is not
//!
//! Per-layer distinct weights for 32 layers would take 3.4 GB (attention) plus 6.7 GB (MLP).
//! So **one seeded set of layer weights is shared by all layers**; each layer still has its
//! own seeded KV cache and its own input (the previous layer's output), so every layer
//! computes different values. The KV cache of each layer is distinct and full size (32 x 2 x
//! 1024 x 2560 x 4 B = 671 MB of device memory at paper scale); the host never holds all of
//! it: [`kv_cache`] regenerates one layer's cache from the seed whenever it is needed (at
//! every load, and in the reference, which a process computes once per shape and seed: see
//! [`crate::shared`]).
//!
//! # Generators
//!
//! Every value is [`uniform`]: 24 random bits of a [`ChaCha8Rng`] mapped exactly onto
//! `[-1, 1)` and scaled. The weights come from stream 0 of the generator seeded with the run's
//! seed, tensor after tensor in the order of the fields of [`OptWeights`], row-major; layer
//! `l`'s cache from stream `1 + l` of the same seed, keys then values, head-major, token,
//! dimension. Projection weights are scaled by `sqrt(3 / fan_in)` (unit output variance for a
//! unit-variance input), biases by 0.1, LayerNorm gammas are `1 + 0.1 u` and betas `0.1 u`,
//! the input token's embedding and the cached keys and values are plain `u`.

use rand::RngCore;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::OptShape;

/// Scale of the biases and of the LayerNorm parameters' spread.
pub const BIAS_SCALE: f32 = 0.1;

/// One value uniform in `[-scale, scale)`: 24 random bits `b` give `(b / 2^23 - 1) * scale`.
pub fn uniform(rng: &mut ChaCha8Rng, scale: f32) -> f32 {
    let bits = rng.next_u32() >> 8;
    (bits as f32 * (1.0 / 8_388_608.0) - 1.0) * scale
}

/// `count` values of [`uniform`]`(scale)`, plus `offset`.
fn tensor(rng: &mut ChaCha8Rng, count: usize, scale: f32, offset: f32) -> Vec<f32> {
    (0..count).map(|_| offset + uniform(rng, scale)).collect()
}

/// The weights of one decoder layer (shared by all layers) and the input token's embedding.
///
/// # Invariants
///
/// Every vector has the length its field documents for the [`OptShape`] it was generated for.
#[derive(Clone, PartialEq)]
pub struct OptWeights {
    /// LayerNorm0 gamma (`hidden`).
    pub ln0_gamma: Vec<f32>,
    /// LayerNorm0 beta (`hidden`).
    pub ln0_beta: Vec<f32>,
    /// Q, K and V weights stacked, `3 hidden` rows of `hidden`.
    pub qkv_weight: Vec<f32>,
    /// Q, K and V biases (`3 hidden`).
    pub qkv_bias: Vec<f32>,
    /// Output projection weight, `hidden x hidden`.
    pub output_weight: Vec<f32>,
    /// Output projection bias (`hidden`).
    pub output_bias: Vec<f32>,
    /// LayerNorm1 gamma (`hidden`).
    pub ln1_gamma: Vec<f32>,
    /// LayerNorm1 beta (`hidden`).
    pub ln1_beta: Vec<f32>,
    /// FC1 weight, `ffn` rows of `hidden` (row `c`: FFN unit `c`'s input weights).
    pub fc1_weight: Vec<f32>,
    /// FC1 bias (`ffn`).
    pub fc1_bias: Vec<f32>,
    /// FC2 weight, stored unit-major: `ffn` rows of `hidden` (row `c`: FFN unit `c`'s
    /// contribution to every output), so an MLP task's slice of units is contiguous.
    pub fc2_weight: Vec<f32>,
    /// FC2 bias (`hidden`).
    pub fc2_bias: Vec<f32>,
    /// The input token's embedding (`hidden`): layer 0's input.
    pub input: Vec<f32>,
}

impl std::fmt::Debug for OptWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OptWeights")
            .field("qkv_weight", &self.qkv_weight.len())
            .field("output_weight", &self.output_weight.len())
            .field("fc1_weight", &self.fc1_weight.len())
            .field("fc2_weight", &self.fc2_weight.len())
            .finish_non_exhaustive()
    }
}

/// `sqrt(3 / fan_in)`: the uniform scale of unit variance times `1 / fan_in`.
fn projection_scale(fan_in: u32) -> f32 {
    (3.0 / fan_in as f32).sqrt()
}

impl OptWeights {
    /// The weights for `shape` from `seed` (stream 0).
    pub fn generate(shape: &OptShape, seed: u64) -> OptWeights {
        let hidden = shape.hidden as usize;
        let ffn = shape.ffn as usize;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(0);
        let projection = projection_scale(shape.hidden);
        OptWeights {
            ln0_gamma: tensor(&mut rng, hidden, BIAS_SCALE, 1.0),
            ln0_beta: tensor(&mut rng, hidden, BIAS_SCALE, 0.0),
            qkv_weight: tensor(&mut rng, 3 * hidden * hidden, projection, 0.0),
            qkv_bias: tensor(&mut rng, 3 * hidden, BIAS_SCALE, 0.0),
            output_weight: tensor(&mut rng, hidden * hidden, projection, 0.0),
            output_bias: tensor(&mut rng, hidden, BIAS_SCALE, 0.0),
            ln1_gamma: tensor(&mut rng, hidden, BIAS_SCALE, 1.0),
            ln1_beta: tensor(&mut rng, hidden, BIAS_SCALE, 0.0),
            fc1_weight: tensor(&mut rng, ffn * hidden, projection, 0.0),
            fc1_bias: tensor(&mut rng, ffn, BIAS_SCALE, 0.0),
            fc2_weight: tensor(&mut rng, ffn * hidden, projection_scale(shape.ffn), 0.0),
            fc2_bias: tensor(&mut rng, hidden, BIAS_SCALE, 0.0),
            input: tensor(&mut rng, hidden, 1.0, 0.0),
        }
    }

    /// Row `row` of the stacked Q/K/V weight.
    pub fn qkv_row(&self, shape: &OptShape, row: usize) -> &[f32] {
        row_of(&self.qkv_weight, shape.hidden as usize, row)
    }

    /// Row `row` of the output weight.
    pub fn output_row(&self, shape: &OptShape, row: usize) -> &[f32] {
        row_of(&self.output_weight, shape.hidden as usize, row)
    }

    /// FC1 row of FFN unit `unit`.
    pub fn fc1_row(&self, shape: &OptShape, unit: usize) -> &[f32] {
        row_of(&self.fc1_weight, shape.hidden as usize, unit)
    }

    /// FC2 row of FFN unit `unit` (its contribution to every output).
    pub fn fc2_row(&self, shape: &OptShape, unit: usize) -> &[f32] {
        row_of(&self.fc2_weight, shape.hidden as usize, unit)
    }
}

/// Row `row` of a row-major matrix with rows of `width` (empty past the end).
pub fn row_of(matrix: &[f32], width: usize, row: usize) -> &[f32] {
    matrix
        .get(row * width..(row + 1) * width)
        .unwrap_or_default()
}

/// Layer `layer`'s key and value caches (`heads x capacity x head_dim` each, head-major):
/// tokens `0..position` seeded (stream `1 + layer`, keys first), the rest zero (the kernel
/// appends the current token at `position`).
pub fn kv_cache(shape: &OptShape, seed: u64, layer: u32) -> (Vec<f32>, Vec<f32>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(1 + u64::from(layer));
    let head_dim = shape.head_dim as usize;
    let capacity = shape.capacity as usize;
    let filled = shape.position as usize * head_dim;
    let mut cache = || {
        let mut values = vec![0.0_f32; shape.heads as usize * capacity * head_dim];
        for head in values.chunks_exact_mut(capacity * head_dim) {
            for value in &mut head[..filled] {
                *value = uniform(&mut rng, 1.0);
            }
        }
        values
    };
    let keys = cache();
    let values = cache();
    (keys, values)
}

/// Little-endian bytes of `values`.
pub fn to_le_bytes(values: &[f32]) -> Vec<u8> {
    // Sized once and filled in place (a `flat_map` collect grows and copies as it goes: the
    // KV caches are 21 MB each at paper scale).
    let mut bytes = vec![0_u8; values.len() * 4];
    for (word, value) in bytes.chunks_exact_mut(4).zip(values) {
        word.copy_from_slice(&value.to_le_bytes());
    }
    bytes
}

/// `f32` values of little-endian `bytes` (a trailing partial word is ignored).
pub fn from_le_bytes(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|word| f32::from_le_bytes([word[0], word[1], word[2], word[3]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::opt::{PAPER, SMALL};

    #[test]
    fn weights_have_the_documented_sizes() {
        let shape = SMALL;
        let weights = OptWeights::generate(&shape, 7);
        let hidden = shape.hidden as usize;
        let ffn = shape.ffn as usize;
        assert_eq!(weights.ln0_gamma.len(), hidden);
        assert_eq!(weights.ln0_beta.len(), hidden);
        assert_eq!(weights.qkv_weight.len(), 3 * hidden * hidden);
        assert_eq!(weights.qkv_bias.len(), 3 * hidden);
        assert_eq!(weights.output_weight.len(), hidden * hidden);
        assert_eq!(weights.output_bias.len(), hidden);
        assert_eq!(weights.ln1_gamma.len(), hidden);
        assert_eq!(weights.ln1_beta.len(), hidden);
        assert_eq!(weights.fc1_weight.len(), ffn * hidden);
        assert_eq!(weights.fc1_bias.len(), ffn);
        assert_eq!(weights.fc2_weight.len(), ffn * hidden);
        assert_eq!(weights.fc2_bias.len(), hidden);
        assert_eq!(weights.input.len(), hidden);
        assert_eq!(weights.fc2_row(&shape, ffn - 1).len(), hidden);
        assert!(weights.fc2_row(&shape, ffn).is_empty());
        // Gammas near one, projection weights within their scale.
        assert!(weights.ln0_gamma.iter().all(|g| (0.9..1.1).contains(g)));
        let scale = (3.0 / hidden as f32).sqrt();
        assert!(weights.qkv_weight.iter().all(|w| w.abs() <= scale));
    }

    #[test]
    fn same_seed_same_data_other_seed_other_data() {
        let a = OptWeights::generate(&SMALL, 1);
        assert!(a == OptWeights::generate(&SMALL, 1));
        assert!(a != OptWeights::generate(&SMALL, 2));
        assert_eq!(kv_cache(&SMALL, 1, 3), kv_cache(&SMALL, 1, 3));
        assert_ne!(kv_cache(&SMALL, 1, 3).0, kv_cache(&SMALL, 1, 2).0);
        assert_ne!(kv_cache(&SMALL, 1, 3).0, kv_cache(&SMALL, 2, 3).0);
    }

    #[test]
    fn kv_cache_fills_the_past_tokens_and_leaves_the_rest_zero() {
        let shape = SMALL;
        let (keys, values) = kv_cache(&shape, 5, 0);
        let per_head = (shape.capacity * shape.head_dim) as usize;
        assert_eq!(keys.len(), shape.heads as usize * per_head);
        assert_eq!(values.len(), keys.len());
        let filled = (shape.position * shape.head_dim) as usize;
        for head in keys
            .chunks_exact(per_head)
            .chain(values.chunks_exact(per_head))
        {
            assert!(head[..filled].iter().all(|v| (-1.0..1.0).contains(v)));
            assert!(head[..filled].iter().any(|v| *v != 0.0));
            assert!(head[filled..].iter().all(|v| *v == 0.0));
        }
        assert_ne!(keys, values);
    }

    #[test]
    fn paper_shape_is_opt_2_7b() {
        assert_eq!(
            (PAPER.hidden, PAPER.heads, PAPER.head_dim, PAPER.ffn),
            (2560, 32, 80, 10240)
        );
        assert_eq!(
            (PAPER.layers, PAPER.capacity, PAPER.position),
            (32, 1024, 1023)
        );
    }

    #[test]
    fn uniform_maps_bits_exactly_into_the_interval() {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        for _ in 0..1000 {
            let value = uniform(&mut rng, 1.0);
            assert!((-1.0..1.0).contains(&value));
            // 24 bits: an exact multiple of 2^-23.
            assert_eq!((value * 8_388_608.0).fract(), 0.0);
        }
        assert_eq!(from_le_bytes(&to_le_bytes(&[1.5, -2.0])), [1.5, -2.0]);
    }
}
