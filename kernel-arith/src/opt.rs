//! The OPT attention block's arithmetic (`firmware::kernels::opt`), step by step.
//!
//! Dot products and LayerNorm's sums use [`LaneSum`] at [`LANES`] = 8 lanes, the register
//! layout of M²NDP's kernels at `simd_width=256`: element `j` goes to lane `j % 8`, each lane
//! adds the element's value (for a dot product the product `a[j] * b[j]`, rounded, then
//! added, rounded), lanes start at `+0.0`, and the lanes are reduced in order `((0 + lane0) +
//! lane1) + ... + lane7` (`vfredosum.vs`). The output projection's part `s` is such a sum over
//! the columns of its blocks, in increasing column order ([`split_dot`]). Maxima are taken left
//! to right, a value replacing the max only when greater ([`running_max`]); the packet sums
//! and the block sums are ordered sums from `+0.0` ([`ordered_sum`]); the block's weighted
//! values add the packets' in packet order from `+0.0` ([`add_into`]); stage 7 accumulates the
//! blocks' weighted values times their factors in block order ([`accumulate_weighted`]) and
//! multiplies by the reciprocal of the total ([`block_factors`]); stage 9 adds the parts in
//! part order from `+0.0`, then the bias, then `x` ([`project`], [`residual`]). The softmax
//! uses `libm::expf`, LayerNorm `libm::sqrtf`.
//!
//! The modelled instructions are M²NDP's fused `vfmacc`; the arithmetic rounds the product and
//! the sum separately (the firmware's module docs say why).

/// Vector lanes of the modelled µthread: [`shared_abi::params::VECTOR_LANES`] (M²NDP's
/// `simd_width=256`, 8 `f32`); also the elements of one packet.
pub const LANES: usize = shared_abi::params::VECTOR_LANES;

/// Columns of one GEMV block: the 8 packets M²NDP's GEMV loop loads per iteration
/// (`unroll_level = 8`), the unit of its K split (and so of [`split_dot`]'s order).
pub const GEMV_BLOCK_ELEMENTS: u32 = 64;

/// The LayerNorm epsilon (OPT's).
pub const LAYER_NORM_EPSILON: f32 = 1e-5;

/// A sum in a fixed lane order (see the module docs): `N` lane partial sums and the lane the
/// next element goes to. Feeding elements in several calls gives exactly the result of one
/// call with all of them. The device's sums are `LaneSum<LANES>` (the default); the host's
/// MLP tasks, which model 16-lane AVX-512 vectors, use `LaneSum<16>`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LaneSum<const N: usize = LANES> {
    lanes: [f32; N],
    next_lane: usize,
}

impl<const N: usize> Default for LaneSum<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> LaneSum<N> {
    /// Every lane at `+0.0`, next element to lane 0.
    pub const fn new() -> Self {
        LaneSum {
            lanes: [0.0; N],
            next_lane: 0,
        }
    }

    /// Adds one value to the next lane.
    fn push(&mut self, value: f32) {
        if let Some(lane) = self.lanes.get_mut(self.next_lane) {
            *lane += value;
        }
        self.next_lane = self
            .next_lane
            .checked_add(1)
            .filter(|next| *next < N)
            .unwrap_or(0);
    }

    /// Adds the products `a[j] * b[j]` for `j < min(a.len(), b.len())`: each product rounded,
    /// then added to its lane.
    pub fn add_products(&mut self, a: &[f32], b: &[f32]) {
        let mut a = a;
        let mut b = b;
        // Up to the next lane-0 boundary one at a time.
        while self.next_lane != 0 {
            let (Some((x, a_rest)), Some((y, b_rest))) = (a.split_first(), b.split_first()) else {
                return;
            };
            self.push(x * y);
            a = a_rest;
            b = b_rest;
        }
        // Whole groups as N-lane vector operations.
        let mut a_groups = a.chunks_exact(N);
        let mut b_groups = b.chunks_exact(N);
        for (x, y) in (&mut a_groups).zip(&mut b_groups) {
            if let (Ok(x), Ok(y)) = (<&[f32; N]>::try_from(x), <&[f32; N]>::try_from(y)) {
                for ((lane, x), y) in self.lanes.iter_mut().zip(x).zip(y) {
                    *lane += x * y;
                }
            }
        }
        for (x, y) in a_groups.remainder().iter().zip(b_groups.remainder()) {
            self.push(x * y);
        }
    }

    /// Adds the values themselves.
    pub fn add_values(&mut self, values: &[f32]) {
        for value in values {
            self.push(*value);
        }
    }

    /// Adds the squares `v * v` (each rounded, then added).
    pub fn add_squares(&mut self, values: &[f32]) {
        for value in values {
            self.push(value * value);
        }
    }

    /// Adds the squared deviations `(v - mean) * (v - mean)`.
    pub fn add_squared_deviations(&mut self, values: &[f32], mean: f32) {
        for value in values {
            let deviation = value - mean;
            self.push(deviation * deviation);
        }
    }

    /// The ordered horizontal reduction: `((0 + lane0) + lane1) + ... + lane(N-1)`.
    pub fn finish(&self) -> f32 {
        self.lanes.iter().fold(0.0_f32, |sum, lane| sum + lane)
    }
}

/// `sum a[j] b[j]` in `N`-lane order.
pub fn dot_lanes<const N: usize>(a: &[f32], b: &[f32]) -> f32 {
    let mut sum = LaneSum::<N>::new();
    sum.add_products(a, b);
    sum.finish()
}

/// `sum a[j] b[j]` in the device's [`LANES`]-lane order.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    dot_lanes::<LANES>(a, b)
}

/// Part `part` of `split` of the dot product of a GEMV row with its input (stage 8): the
/// [`LANES`]-lane sum over the columns of the 64-column blocks `part, part + split, ...`, in
/// increasing column order (every block but the last is a multiple of [`LANES`] long, so
/// column `j` goes to lane `j % 8`).
pub fn split_dot(row: &[f32], input: &[f32], part: u32, split: u32) -> f32 {
    let mut sum: LaneSum = LaneSum::new();
    let block = GEMV_BLOCK_ELEMENTS as usize;
    let step = (split as usize).saturating_mul(block);
    let mut start = (part as usize).saturating_mul(block);
    while step > 0 && start < row.len().min(input.len()) {
        let end = start.saturating_add(block);
        if let (Some(a), Some(b)) = (
            row.get(start..end.min(row.len())),
            input.get(start..end.min(input.len())),
        ) {
            sum.add_products(a, b);
        }
        start = start.saturating_add(step);
    }
    sum.finish()
}

/// LayerNorm0's statistics as stage 0 accumulates them: the sum and the sum of squares of
/// the elements, each a [`LaneSum`], fed in order.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LayerNormMoments {
    sum: LaneSum,
    squares: LaneSum,
    count: u32,
}

impl LayerNormMoments {
    /// No elements yet.
    pub const fn new() -> Self {
        LayerNormMoments {
            sum: LaneSum::new(),
            squares: LaneSum::new(),
            count: 0,
        }
    }

    /// Adds the next elements.
    pub fn add(&mut self, values: &[f32]) {
        self.sum.add_values(values);
        self.squares.add_squares(values);
        let added = u32::try_from(values.len()).unwrap_or(u32::MAX);
        self.count = self.count.saturating_add(added);
    }

    /// `(mean, 1 / sqrt(variance + epsilon))` with M²NDP's moments (`OptLayerNorm0`, then
    /// `OptLayerNorm1`'s initializer): `mean = sum / n`, `mean_square = squares / n`,
    /// `variance = mean_square - mean * mean`, `n` the element count as `f32`.
    pub fn finish(&self) -> (f32, f32) {
        let count = self.count as f32;
        let mean = self.sum.finish() / count;
        let mean_square = self.squares.finish() / count;
        let variance = mean_square - mean * mean;
        (mean, 1.0 / libm::sqrtf(variance + LAYER_NORM_EPSILON))
    }
}

/// [`LayerNormMoments`] of `x` in one call.
pub fn layer_norm_moments(x: &[f32]) -> (f32, f32) {
    let mut moments = LayerNormMoments::new();
    moments.add(x);
    moments.finish()
}

/// One normalized element: `((value - mean) * reciprocal) * gamma + beta`.
pub fn normalize(value: f32, mean: f32, reciprocal: f32, gamma: f32, beta: f32) -> f32 {
    (value - mean) * reciprocal * gamma + beta
}

/// The score scale `1 / sqrt(head_dim)`.
pub fn attention_scale(head_dim: u32) -> f32 {
    1.0 / libm::sqrtf(head_dim as f32)
}

/// The scaled score of a query and a key: `dot(query, key) * scale`.
pub fn score(query: &[f32], key: &[f32], scale: f32) -> f32 {
    dot(query, key) * scale
}

/// The max of `values` left to right: starting from the first, a value replaces the max only
/// when it is greater. An empty slice gives `-inf`.
pub fn running_max(values: &[f32]) -> f32 {
    let Some(first) = values.first().copied() else {
        return f32::NEG_INFINITY;
    };
    values
        .iter()
        .fold(first, |max, value| if *value > max { *value } else { max })
}

/// The ordered sum `((0 + v0) + v1) + ...` (`vfredosum.vs` over one vector).
pub fn ordered_sum(values: &[f32]) -> f32 {
    values.iter().fold(0.0_f32, |sum, value| sum + value)
}

/// Replaces a packet's scores by their exponents `expf(s - max)` (`max`: the block's) and
/// returns their [`ordered_sum`] (stage 4).
pub fn exponents(scores: &mut [f32], max: f32) -> f32 {
    for score in scores.iter_mut() {
        *score = libm::expf(*score - max);
    }
    ordered_sum(scores)
}

/// `accumulator[d] = accumulator[d] + weight * values[d]` (the product rounded, then the add):
/// one token's (or block's) contribution to a weighted sum, dimension by dimension.
pub fn accumulate_weighted(accumulator: &mut [f32], weight: f32, values: &[f32]) {
    for (sum, value) in accumulator.iter_mut().zip(values) {
        *sum += weight * value;
    }
}

/// `accumulator[d] = accumulator[d] + values[d]` (stage 6: a packet's partial into its
/// block's).
pub fn add_into(accumulator: &mut [f32], values: &[f32]) {
    for (sum, value) in accumulator.iter_mut().zip(values) {
        *sum += value;
    }
}

/// Stage 7's rescale factors of a head's softmax blocks from their maxima and exponent sums:
/// with `M` the [`running_max`] of `maxima`, `factors[b] = expf(maxima[b] - M)`; returns the
/// reciprocal of the total `((0 + factors[0] * sums[0]) + factors[1] * sums[1]) + ...`
/// (each product rounded, then added). Blocks past the shortest of the three slices are
/// ignored.
pub fn block_factors(maxima: &[f32], sums: &[f32], factors: &mut [f32]) -> f32 {
    let max = running_max(maxima);
    let mut total = 0.0_f32;
    for ((factor, block_max), sum) in factors.iter_mut().zip(maxima).zip(sums) {
        *factor = libm::expf(block_max - max);
        total += *factor * sum;
    }
    1.0 / total
}

/// `values[d] = values[d] * reciprocal` (stage 7's last step).
pub fn scale(values: &mut [f32], reciprocal: f32) {
    for value in values.iter_mut() {
        *value *= reciprocal;
    }
}

/// A projection output: `dot + bias`.
pub fn project(dot: f32, bias: f32) -> f32 {
    dot + bias
}

/// The residual: `input + output`.
pub fn residual(input: f32, output: f32) -> f32 {
    input + output
}

/// One output of the attention block from the output projection's part sums (stage 9):
/// `residual(input, project(ordered_sum(parts), bias))`.
pub fn block_output(parts: &[f32], bias: f32, input: f32) -> f32 {
    residual(input, project(ordered_sum(parts), bias))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lane_sum_follows_the_documented_order_however_it_is_fed() {
        let a: Vec<f32> = (0..75).map(|j| (j as f32 * 0.37).sin() * 1000.0).collect();
        let b: Vec<f32> = (0..75).map(|j| (j as f32 * 0.11).cos()).collect();
        let mut lanes = [0.0_f32; 8];
        for j in 0..75 {
            lanes[j % 8] += a[j] * b[j];
        }
        let mut expected = 0.0_f32;
        for lane in lanes {
            expected += lane;
        }
        assert_eq!(dot(&a, &b).to_bits(), expected.to_bits());
        let mut split: LaneSum = LaneSum::default();
        split.add_products(&a[..3], &b[..3]);
        split.add_products(&a[3..40], &b[3..40]);
        split.add_products(&a[40..], &b[40..]);
        assert_eq!(split.finish().to_bits(), expected.to_bits());
        // 16 lanes is another order.
        let mut sixteen = [0.0_f32; 16];
        for j in 0..75 {
            sixteen[j % 16] += a[j] * b[j];
        }
        let other = sixteen.iter().fold(0.0_f32, |s, l| s + l);
        assert_eq!(dot_lanes::<16>(&a, &b).to_bits(), other.to_bits());
    }

    #[test]
    fn split_dot_sums_each_parts_blocks_in_column_order() {
        // 200 columns: blocks 0..64, 64..128, 128..192, 192..200. Split 2: part 0 has blocks
        // 0 and 2, part 1 blocks 1 and 3.
        let row: Vec<f32> = (0..200).map(|j| (j as f32 * 0.7).sin()).collect();
        let input: Vec<f32> = (0..200).map(|j| (j as f32 * 0.3).cos() * 3.0).collect();
        let columns = |blocks: &[usize]| -> f32 {
            let mut sum: LaneSum = LaneSum::new();
            for block in blocks {
                let range = block * 64..(block * 64 + 64).min(200);
                sum.add_products(&row[range.clone()], &input[range]);
            }
            sum.finish()
        };
        assert_eq!(
            split_dot(&row, &input, 0, 2).to_bits(),
            columns(&[0, 2]).to_bits()
        );
        assert_eq!(
            split_dot(&row, &input, 1, 2).to_bits(),
            columns(&[1, 3]).to_bits()
        );
        assert_eq!(
            split_dot(&row, &input, 0, 1).to_bits(),
            dot(&row, &input).to_bits()
        );
        assert_eq!(split_dot(&row, &input, 4, 5), 0.0);
        assert_eq!(split_dot(&row, &input, 0, 0), 0.0);
    }

    #[test]
    fn softmax_and_layer_norm_helpers_on_hand_checkable_inputs() {
        // M²NDP's moments: mean 2, mean square 5, variance 1.
        let (mean, reciprocal) = layer_norm_moments(&[1.0, 3.0, 1.0, 3.0]);
        assert_eq!(mean, 2.0);
        assert_eq!(reciprocal, 1.0 / libm::sqrtf(1.0 + LAYER_NORM_EPSILON));
        let mut fed = LayerNormMoments::new();
        fed.add(&[1.0]);
        fed.add(&[3.0, 1.0, 3.0]);
        assert_eq!(fed.finish(), (mean, reciprocal));
        assert_eq!(normalize(3.0, 2.0, 0.5, 2.0, 1.0), 2.0);
        assert_eq!(running_max(&[1.0, 3.0, 2.0]), 3.0);
        assert_eq!(running_max(&[]), f32::NEG_INFINITY);
        assert_eq!(ordered_sum(&[1e8, 1.0, -1e8]), 0.0);
        let mut scores = [1.0_f32, 3.0, 2.0];
        let sum = exponents(&mut scores, 3.0);
        assert_eq!(scores, [libm::expf(-2.0), 1.0, libm::expf(-1.0)]);
        assert_eq!(sum, (0.0 + libm::expf(-2.0)) + 1.0 + libm::expf(-1.0));
        // Two blocks: maxima 1 and 3, sums 2 and 4: factors e^-2 and 1, total 2 e^-2 + 4.
        let mut factors = [0.0_f32; 2];
        let reciprocal = block_factors(&[1.0, 3.0], &[2.0, 4.0], &mut factors);
        assert_eq!(factors, [libm::expf(-2.0), 1.0]);
        assert_eq!(reciprocal, 1.0 / (libm::expf(-2.0) * 2.0 + 4.0));
        let mut values = [2.0_f32, 4.0];
        scale(&mut values, 0.25);
        assert_eq!(values, [0.5, 1.0]);
        let mut accumulator = [1.0_f32, 2.0];
        accumulate_weighted(&mut accumulator, 0.5, &[2.0, 4.0]);
        assert_eq!(accumulator, [2.0, 4.0]);
        add_into(&mut accumulator, &[1.0, 1.0]);
        assert_eq!(accumulator, [3.0, 5.0]);
        assert_eq!(attention_scale(16), 0.25);
        assert_eq!(block_output(&[1.0, 2.0], 4.0, 8.0), 15.0);
    }
}
