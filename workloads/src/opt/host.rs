//! The host half of an OPT decoder layer: the MLP, split into equal tasks.
//!
//! # The split
//!
//! The device's result is the attention block's output (`hidden` `f32`,
//! `firmware::kernels::opt`, stage 9). Task `t` of `T` owns the FFN units `[t u, (t + 1)
//! u)`, `u = ffn / T`: it computes LayerNorm1 of the attention block's output (every task
//! recomputes it: 2560 elements, cheap next to its weights), its units' FC1 rows and ReLU, and
//! its units' *partial* FC2 contribution to every output: `partial[i] = sum over its units c,
//! in increasing order, of act[c] * fc2[c][i]` (accumulated unit after unit,
//! [`accumulate_weighted`], the way a vectorized FC2 slice runs over the outputs). The
//! launch's final step ([`finish`]) adds, for every output `i`, the FC2 bias and the partials
//! in task order, then the residual.
//!
//! # Arithmetic
//!
//! The host models 16-lane (AVX-512) `f32` vectors: its dot products and LayerNorm1's sums are
//! [`LaneSum`]s of [`HOST_LANES`] lanes ([`host_dot`], [`layer_norm`]: the mean, then the
//! variance of the deviations, two passes), with the device's rounding rules (product
//! rounded, then added; lanes reduced in order), so the reference reproduces them bit for
//! bit. The device's own arithmetic is at 8 lanes; the two never need to agree.
//!
//! # Costs
//!
//! A host µthread runs 16-lane `f32` vector instructions (one instruction each); the weights
//! stream from host DRAM: each task's FC1 and FC2 slices (2 x 320 x 2560 x 4 B = 6.6 MB at
//! paper scale with 32 tasks, 210 MB per layer in all) are its `memory_bytes`, which is what
//! makes the host side dominate an OPT decode step, as in the paper. Each task also reads the
//! whole device result (10 KB at paper scale) from the uncached ring, which the runtime
//! charges as its payload.

use host_runtime::app::HostCost;
use kernel_arith::opt::{
    accumulate_weighted, dot_lanes, normalize, project, residual, LaneSum, LAYER_NORM_EPSILON,
};

use super::data::OptWeights;
use super::OptShape;

/// Lanes of the host's vectors (AVX-512: 16 `f32`).
pub const HOST_LANES: usize = 16;

/// Bytes of one `f32`.
pub const ELEMENT_BYTES: u64 = 4;

/// LayerNorm1 per 16-element group: the mean pass (load, add: 2), the variance pass (load,
/// subtract, multiply, add: 4) and the normalizing pass (loads of `x`, gamma and beta,
/// subtract, two multiplies, add, store: 8).
pub const LAYER_NORM_OPERATIONS_PER_GROUP: u64 = 14;

/// LayerNorm1 fixed work: two ordered 16-lane reductions (15 dependent adds and the
/// extracts: 32), two divisions, the epsilon add, the square root and the reciprocal (5).
pub const LAYER_NORM_FIXED_OPERATIONS: u64 = 37;

/// FC1 per 16-element group of a row: load of the weights, load of the normalized input (L1
/// resident), multiply, add.
pub const FC1_OPERATIONS_PER_GROUP: u64 = 4;

/// FC1 per row: clearing the accumulator (1), the ordered 16-lane reduction (15 dependent adds
/// and the extracts: 16), the bias add, the ReLU (`max`) and the store (3), loop control (3).
pub const FC1_ROW_OPERATIONS: u64 = 23;

/// FC2 per 16 outputs of one unit: load of the unit's weights, load of the partial (L1
/// resident, 10 KB), multiply by the broadcast activation, add, store.
pub const FC2_OPERATIONS_PER_GROUP: u64 = 5;

/// FC2 per unit: the activation broadcast (1) and loop control (3).
pub const FC2_UNIT_OPERATIONS: u64 = 4;

/// Loop control of a row of vector work, per 4 groups (unrolled 4 times).
pub const LOOP_OPERATIONS_PER_UNROLL: u64 = 3;

/// Groups per unrolled iteration.
pub const UNROLL_GROUPS: u64 = 4;

/// The final step per 16 outputs: loads of the attention output and the bias (2), the add
/// (1), per task a load and an add of its partial (2 each), the residual add and the store
/// (2), loop control (1).
pub const FINISH_OPERATIONS_PER_GROUP: u64 = 6;

/// The final step per task and 16 outputs.
pub const FINISH_OPERATIONS_PER_TASK_GROUP: u64 = 2;

/// Fixed instructions of a task: task set-up, slice bounds, calls (as a KNN task's).
pub const TASK_FIXED_OPERATIONS: u64 = 40;

/// The FFN units of task `task`: `[task u, (task + 1) u)`.
pub fn task_units(shape: &OptShape, task: u32) -> std::ops::Range<usize> {
    let per_task = (shape.ffn / shape.mlp_tasks) as usize;
    let first = task as usize * per_task;
    first..first + per_task
}

/// ReLU: `value` if it is greater than zero, else `+0.0` (NaN gives `+0.0`).
pub fn relu(value: f32) -> f32 {
    if value > 0.0 {
        value
    } else {
        0.0
    }
}

/// `groups` of vector work with [`LOOP_OPERATIONS_PER_UNROLL`] loop control.
fn loop_operations(groups: u64) -> u64 {
    groups.div_ceil(UNROLL_GROUPS) * LOOP_OPERATIONS_PER_UNROLL
}

/// The modelled cost of one MLP task of `shape` (see the module docs).
pub fn task_cost(shape: &OptShape) -> HostCost {
    let hidden = u64::from(shape.hidden);
    let units = u64::from(shape.ffn / shape.mlp_tasks);
    let groups = hidden.div_ceil(HOST_LANES as u64);
    let layer_norm = groups * LAYER_NORM_OPERATIONS_PER_GROUP + LAYER_NORM_FIXED_OPERATIONS;
    let fc1 =
        units * (groups * FC1_OPERATIONS_PER_GROUP + loop_operations(groups) + FC1_ROW_OPERATIONS);
    let fc2 =
        units * (groups * FC2_OPERATIONS_PER_GROUP + loop_operations(groups) + FC2_UNIT_OPERATIONS);
    // FC1 rows and biases, FC2 rows, gamma and beta, and the partial written.
    let memory_bytes = (2 * units * hidden + units + 3 * hidden) * ELEMENT_BYTES;
    HostCost {
        operations: layer_norm + fc1 + fc2 + TASK_FIXED_OPERATIONS,
        memory_bytes,
    }
}

/// The modelled cost of the final step of a layer.
pub fn finish_cost(shape: &OptShape) -> HostCost {
    let hidden = u64::from(shape.hidden);
    let tasks = u64::from(shape.mlp_tasks);
    let groups = hidden.div_ceil(HOST_LANES as u64);
    HostCost {
        operations: groups
            * (FINISH_OPERATIONS_PER_GROUP + tasks * FINISH_OPERATIONS_PER_TASK_GROUP),
        // The attention output, the bias, every partial read; the new hidden state written.
        memory_bytes: (tasks + 3) * hidden * ELEMENT_BYTES,
    }
}

/// `sum a[j] b[j]` in the host's [`HOST_LANES`]-lane order.
pub fn host_dot(a: &[f32], b: &[f32]) -> f32 {
    dot_lanes::<HOST_LANES>(a, b)
}

/// LayerNorm statistics of `x` on the host: `(mean, 1 / sqrt(variance + epsilon))`, with the
/// mean and the (biased) variance of the deviations as [`HOST_LANES`]-lane sums divided by
/// `x.len()` as `f32`.
pub fn layer_norm_statistics(x: &[f32]) -> (f32, f32) {
    let count = x.len() as f32;
    let mut sum = LaneSum::<HOST_LANES>::new();
    sum.add_values(x);
    let mean = sum.finish() / count;
    let mut squares = LaneSum::<HOST_LANES>::new();
    squares.add_squared_deviations(x, mean);
    let variance = squares.finish() / count;
    (mean, 1.0 / (variance + LAYER_NORM_EPSILON).sqrt())
}

/// LayerNorm of `x` into `out` on the host (over the shortest of the four slices' common
/// length, which for a consistent call is `x.len()`).
pub fn layer_norm(x: &[f32], gamma: &[f32], beta: &[f32], out: &mut [f32]) {
    let (mean, reciprocal) = layer_norm_statistics(x);
    for (((out, value), gamma), beta) in out.iter_mut().zip(x).zip(gamma).zip(beta) {
        *out = normalize(*value, mean, reciprocal, *gamma, *beta);
    }
}

/// LayerNorm1 of `attention_output` (the attention block's result, residual included).
pub fn layer_norm1(weights: &OptWeights, attention_output: &[f32]) -> Vec<f32> {
    let mut normalized = vec![0.0; attention_output.len()];
    layer_norm(
        attention_output,
        &weights.ln1_gamma,
        &weights.ln1_beta,
        &mut normalized,
    );
    normalized
}

/// MLP task `task`: its partial FC2 contribution to every output (`hidden` values).
pub fn mlp_task(
    shape: &OptShape,
    weights: &OptWeights,
    attention_output: &[f32],
    task: u32,
) -> Vec<f32> {
    let normalized = layer_norm1(weights, attention_output);
    let mut partial = vec![0.0_f32; shape.hidden as usize];
    for unit in task_units(shape, task) {
        let bias = weights.fc1_bias.get(unit).copied().unwrap_or_default();
        let activation = relu(project(
            host_dot(weights.fc1_row(shape, unit), &normalized),
            bias,
        ));
        accumulate_weighted(&mut partial, activation, weights.fc2_row(shape, unit));
    }
    partial
}

/// The layer's output: for every `i`, `o = fc2_bias[i]`, then `o = o + partials[t][i]` for
/// `t = 0, 1, ...`, then the residual `attention_output[i] + o`.
pub fn finish(weights: &OptWeights, attention_output: &[f32], partials: &[Vec<f32>]) -> Vec<f32> {
    attention_output
        .iter()
        .zip(&weights.fc2_bias)
        .enumerate()
        .map(|(i, (input, bias))| {
            let output = partials.iter().fold(*bias, |sum, partial| {
                sum + partial.get(i).copied().unwrap_or_default()
            });
            residual(*input, output)
        })
        .collect()
}

/// A plain sum in the host's [`LaneSum`] order (for tests and checks).
pub fn lane_sum(values: &[f32]) -> f32 {
    let mut sum = LaneSum::<HOST_LANES>::new();
    sum.add_values(values);
    sum.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::opt::{PAPER, SMALL};

    #[test]
    fn tasks_split_the_ffn_units_evenly_and_completely() {
        for shape in [PAPER, SMALL] {
            let mut next = 0;
            for task in 0..shape.mlp_tasks {
                let units = task_units(&shape, task);
                assert_eq!(units.start, next);
                assert_eq!(units.len(), (shape.ffn / shape.mlp_tasks) as usize);
                next = units.end;
            }
            assert_eq!(next, shape.ffn as usize);
        }
    }

    #[test]
    fn paper_task_cost_is_dominated_by_its_weights() {
        let cost = task_cost(&PAPER);
        // 320 units x 2 rows x 2560 x 4 B of weights, plus biases, gamma, beta and the
        // partial.
        assert_eq!(cost.memory_bytes, (2 * 320 * 2560 + 320 + 3 * 2560) * 4);
        // 160 groups per row: FC1 320 x (640 + 120 + 23), FC2 320 x (800 + 120 + 4).
        let layer_norm = 160 * 14 + 37;
        assert_eq!(
            cost.operations,
            layer_norm + 320 * (640 + 120 + 23) + 320 * (800 + 120 + 4) + 40
        );
    }

    #[test]
    fn host_sums_use_sixteen_lanes() {
        // Elements 0, 8 and 16: in 16 lanes 0 and 16 share lane 0 and 8 has its own; in 8
        // lanes all three share lane 0.
        let mut values = vec![0.0_f32; 17];
        values[0] = 1e8;
        values[8] = -1e8;
        values[16] = 1.0;
        // 16 lanes: lane 0 = 1e8 + 1 = 1e8 (absorbed), lane 8 = -1e8: total 0.
        assert_eq!(lane_sum(&values), 0.0);
        // 8 lanes: lane 0 = (1e8 + -1e8) + 1 = 1.
        let mut eight = LaneSum::<8>::new();
        eight.add_values(&values);
        assert_eq!(eight.finish(), 1.0);
        let ones = vec![1.0_f32; 17];
        assert_eq!(host_dot(&values, &ones), 0.0);
    }

    #[test]
    fn relu_clamps_negatives_and_nan_to_zero() {
        assert_eq!(relu(1.5), 1.5);
        assert_eq!(relu(-1.5).to_bits(), 0.0_f32.to_bits());
        assert_eq!(relu(-0.0).to_bits(), 0.0_f32.to_bits());
        assert_eq!(relu(f32::NAN).to_bits(), 0.0_f32.to_bits());
    }

    #[test]
    fn hand_checkable_mlp_of_two_tasks() {
        // hidden 16 (one lane group), ffn 2, two tasks of one unit each.
        let shape = OptShape {
            hidden: 16,
            heads: 1,
            head_dim: 16,
            ffn: 2,
            mlp_tasks: 2,
            ..SMALL
        };
        let mut weights = OptWeights::generate(&shape, 1);
        weights.ln1_gamma = vec![1.0; 16];
        weights.ln1_beta = vec![0.0; 16];
        // Unit 0 reads element 0 only (weight 1), unit 1 element 0 with weight -1.
        weights.fc1_weight = vec![0.0; 32];
        weights.fc1_weight[0] = 1.0;
        weights.fc1_weight[16] = -1.0;
        weights.fc1_bias = vec![0.5, 0.25];
        weights.fc2_weight = vec![2.0; 32];
        weights.fc2_bias = vec![1.0; 16];
        // Input: +1 at element 0, -1 at element 1, zeros: mean 0, variance 2/16.
        let mut input = vec![0.0_f32; 16];
        input[0] = 1.0;
        input[1] = -1.0;
        let normalized = layer_norm1(&weights, &input);
        let scale = 1.0 / (0.125_f32 + 1e-5).sqrt();
        assert!((normalized[0] - scale).abs() < 1e-5);
        let first = mlp_task(&shape, &weights, &input, 0);
        let second = mlp_task(&shape, &weights, &input, 1);
        // Unit 0: relu(scale + 0.5) times 2 everywhere; unit 1: relu(-scale + 0.25) = 0.
        let active = normalized[0] + 0.5;
        assert!(first.iter().all(|v| *v == 2.0 * active));
        assert!(second.iter().all(|v| *v == 0.0));
        let output = finish(&weights, &input, &[first, second]);
        assert_eq!(output[0], 1.0 + ((1.0 + 2.0 * active) + 0.0));
        assert_eq!(output[2], 0.0 + ((1.0 + 2.0 * active) + 0.0));
        assert_eq!(lane_sum(&[1.0, 2.0]), 3.0);
    }
}
