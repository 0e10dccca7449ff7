//! DLRM host tasks: the dense part, the top MLP over each pooled vector, giving the click
//! probability (CTR) of its sample.
//!
//! # Arithmetic
//!
//! In `f32`: each output of a layer starts at its bias and adds `weight * input` for the
//! inputs in increasing order (a multiply, then an add: two roundings); ReLU after the hidden
//! layers; `1 / (1 + exp(-z))` after the last. The order is fixed, so a run is deterministic;
//! the check against the `f64` reference ([`super::reference`]) allows a tolerance.
//!
//! # Cost model (host µthread instructions; a 16-lane AVX-512 instruction counts 1)
//!
//! The modelled code is the usual output-stationary loop: a hidden layer of `n` inputs and
//! `m` outputs keeps its `V = ceil(m / 16)` output vectors in registers (8 for 128 outputs)
//! and, per input, broadcasts it and issues `V` FMAs with the weights as memory operands.
//!
//! - hidden layer: `n * (`[`OPERATIONS_PER_INPUT`]` + V) + V * `[`OPERATIONS_PER_OUTPUT_VECTOR`];
//! - output layer (one output): `ceil(n / 16)` FMAs of the input vectors (already in registers)
//!   with the weights, plus [`REDUCTION_OPERATIONS`];
//! - then [`SIGMOID_OPERATIONS`] and [`PER_BAG_OPERATIONS`] per bag, and
//!   [`TASK_FIXED_OPERATIONS`] per task.
//!
//! For the paper's 256-128-64-1: 256 x (2 + 8) + 8 x 2 = 2576, 128 x (2 + 4) + 4 x 2 = 776,
//! 4 + 9 = 13, then 24 + 4: 3393 instructions per bag, about 2.3 µs at IPC 0.5 and 3 GHz.
//!
//! Memory: the task's pooled vectors are its result bytes (the runtime charges reading them);
//! the weights, 160 KiB for the paper's MLP, stay in each core's L2 (2 MiB) across the tasks it
//! runs, so they are not charged as memory traffic (as KNN's query in µthread scratch is not);
//! each bag stores its 4-byte CTR ([`CTR_BYTES`]).

use host_runtime::app::HostCost;

use super::data::{Layer, TopMlp};

/// Lanes of a host vector instruction (AVX-512, `f32`).
pub const HOST_LANES: u64 = 16;

/// Per input of a hidden layer: the broadcast of the input (`vbroadcastss`) and the loop's
/// share of pointer bumps and branches (the input loop unrolled by 4: about 1 per input).
pub const OPERATIONS_PER_INPUT: u64 = 2;

/// Per output vector of a hidden layer: loading the bias into the accumulator and the ReLU
/// (`vmaxps` with zero).
pub const OPERATIONS_PER_OUTPUT_VECTOR: u64 = 2;

/// The output layer's horizontal sum of one vector (4 shuffle-and-add pairs: 8) and its bias
/// add (1).
pub const REDUCTION_OPERATIONS: u64 = 9;

/// The sigmoid: negate, a polynomial `exp` (range reduction, a degree-6 polynomial, the
/// exponent insert: about 18), add one, divide, and the conversion moves.
pub const SIGMOID_OPERATIONS: u64 = 24;

/// Per bag besides the layers: its pooled vector's and CTR's addresses (2), storing the CTR
/// (1) and the bag loop's branch (1).
pub const PER_BAG_OPERATIONS: u64 = 4;

/// Per task: call and return, the bag range from the task index, loop set-up.
pub const TASK_FIXED_OPERATIONS: u64 = 20;

/// Bytes of one stored CTR.
pub const CTR_BYTES: u64 = 4;

/// The layer's outputs for `input` (ReLU unless `last`), in the documented order.
fn layer_forward(layer: &Layer, input: &[f32], last: bool) -> Vec<f32> {
    (0..layer.outputs)
        .map(|output| {
            let mut sum = layer.bias.get(output as usize).copied().unwrap_or(0.0);
            for (weight, x) in layer.row(output).iter().zip(input) {
                sum += weight * x;
            }
            if last {
                sum
            } else {
                sum.max(0.0)
            }
        })
        .collect()
}

/// The CTR of one pooled vector: the top MLP, then the sigmoid, in `f32`.
pub fn click_probability(mlp: &TopMlp, pooled: &[f32]) -> f32 {
    let mut activations = pooled.to_vec();
    let last = mlp.layers.len().saturating_sub(1);
    for (index, layer) in mlp.layers.iter().enumerate() {
        activations = layer_forward(layer, &activations, index == last);
    }
    let logit = activations.first().copied().unwrap_or(0.0);
    1.0 / (1.0 + (-logit).exp())
}

/// The modelled instructions of the MLP and sigmoid for one bag (see the module docs).
pub fn bag_operations(mlp: &TopMlp) -> u64 {
    let last = mlp.layers.len().saturating_sub(1);
    let layers: u64 = mlp
        .layers
        .iter()
        .enumerate()
        .map(|(index, layer)| {
            let inputs = u64::from(layer.inputs);
            if index == last {
                inputs.div_ceil(HOST_LANES) + REDUCTION_OPERATIONS
            } else {
                let vectors = u64::from(layer.outputs).div_ceil(HOST_LANES);
                inputs * (OPERATIONS_PER_INPUT + vectors) + vectors * OPERATIONS_PER_OUTPUT_VECTOR
            }
        })
        .sum();
    layers + SIGMOID_OPERATIONS + PER_BAG_OPERATIONS
}

/// The modelled cost of a task over `bags` bags.
pub fn task_cost(mlp: &TopMlp, bags: u64) -> HostCost {
    HostCost {
        operations: TASK_FIXED_OPERATIONS.saturating_add(bags.saturating_mul(bag_operations(mlp))),
        memory_bytes: bags.saturating_mul(CTR_BYTES),
    }
}

#[cfg(test)]
mod tests {
    use super::super::data::generate_mlp;
    use super::*;

    /// A 2 -> 2 -> 1 MLP computable by hand.
    fn tiny() -> TopMlp {
        TopMlp {
            layers: vec![
                Layer {
                    inputs: 2,
                    outputs: 2,
                    weights: vec![1.0, 2.0, -1.0, -1.0],
                    bias: vec![0.5, 0.0],
                },
                Layer {
                    inputs: 2,
                    outputs: 1,
                    weights: vec![1.0, 3.0],
                    bias: vec![-4.5],
                },
            ],
        }
    }

    #[test]
    fn hand_computed_ctr() {
        // Hidden: [0.5 + 1 + 4, max(0, -1 - 2)] = [5.5, 0]; logit 5.5 - 4.5 = 1.
        let ctr = click_probability(&tiny(), &[1.0, 2.0]);
        assert!((ctr - 1.0 / (1.0 + (-1.0_f32).exp())).abs() < 1e-7, "{ctr}");
        // Both hidden units at -0.5, cut by ReLU: logit -4.5.
        let ctr = click_probability(&tiny(), &[2.0, -1.5]);
        let expected = 1.0 / (1.0 + 4.5_f32.exp());
        assert_eq!(ctr, expected);
    }

    #[test]
    fn paper_bag_costs_the_documented_instructions() {
        let mlp = generate_mlp(256, 1);
        assert_eq!(bag_operations(&mlp), 2576 + 776 + 13 + 24 + 4);
        let cost = task_cost(&mlp, 2);
        assert_eq!(cost.operations, 20 + 2 * 3393);
        assert_eq!(cost.memory_bytes, 8);
    }

    #[test]
    fn ctr_is_a_probability_and_deterministic() {
        let mlp = generate_mlp(32, 3);
        let pooled: Vec<f32> = (0..32).map(|i| (i as f32 * 0.7).sin() * 5.0).collect();
        let ctr = click_probability(&mlp, &pooled);
        assert!(ctr > 0.0 && ctr < 1.0);
        assert_eq!(ctr.to_bits(), click_probability(&mlp, &pooled).to_bits());
    }
}
