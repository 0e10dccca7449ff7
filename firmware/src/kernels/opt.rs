//! OPT attention block kernel: the device half of one decoder layer of an OPT decode step
//! (paper Table IV (h)): LayerNorm0, the Q/K/V projections (appending the token's key and
//! value to the layer's KV cache), Attention1 (scores), Attention2 (softmax and the weighted
//! sum of values), and the output projection split by head (split-K, as tensor-parallel
//! attention computes it before its all-reduce), the bias and the residual folded into head
//! 0's partial. The host adds the per-head partials.
//!
//! # Command ([`shared_abi::KernelId::OptAttention`])
//!
//! | field | meaning |
//! |---|---|
//! | `args[0]` | device address of the [`OptParameters`] block (8-byte aligned) |
//! | `args[1]` | device address of this layer's key cache: `heads x capacity x head_dim` `f32`, head-major |
//! | `args[2]` | device address of this layer's value cache, the same layout |
//! | `args[3]` | `position`: tokens already in the cache; the current token goes there (`< capacity`) |
//! | `result_address`, `result_length` | the result space: exactly `heads * hidden * 4` bytes |
//! | `flags` | reserved, must be zero |
//!
//! The parameter block holds the shapes, the work split, and the addresses of the input hidden
//! state `x` (`hidden` `f32`), the LayerNorm0 `gamma` and `beta` (`hidden` each), the stacked
//! Q/K/V weight (`3 hidden` rows of `hidden`, row-major: output row `r` is the dot product of
//! weight row `r` with the normalized input) and bias (`3 hidden`), the output weight
//! (`hidden x hidden`) and bias (`hidden`), and the kernel's workspace ([`workspace_bytes`]):
//! `q` (`hidden`), the scores (`heads x capacity`), the attention output (`hidden`).
//! All values are little-endian `f32`.
//!
//! # Stages and work items
//!
//! Items are numbered globally, stage after stage:
//!
//! 0. **LayerNorm0 + QKV.** Item `i` computes output rows `[i r, min((i + 1) r, 3 hidden))`
//!    with `r = qkv_rows_per_item`, each item recomputing LayerNorm0 of `x` (cheap next to its
//!    rows). Row `j < hidden` is `q[j]` (workspace); row `hidden + j` is the key of head
//!    `j / head_dim`, dimension `j % head_dim`, written into the key cache at `position`; row
//!    `2 hidden + j` likewise into the value cache.
//! 1. **Attention1.** Item `(head, block)` (head-major) computes the scaled scores of tokens
//!    `[block s, min((block + 1) s, position + 1))`, `s = score_tokens_per_item`: `dot(q_head,
//!    key[head][t]) * (1 / sqrt(head_dim))`, written to the workspace.
//! 2. **Attention2.** Item `(head, dims)` (head-major, [`LANES`] dimensions each) computes the
//!    softmax weights of its head's `position + 1` scores ([`softmax_weights`]) and the
//!    weighted sum of those 16 value dimensions ([`accumulate_weighted`]) divided by the
//!    weights' sum, written to the workspace's attention output.
//! 3. **Per-head partial output projections.** The result space is `[heads][hidden]` `f32`:
//!    row `j` of head `h`'s partial is `partial[h][j] = dot(output_weight[j][h d .. (h + 1) d],
//!    attention[h d .. (h + 1) d])` (`d = head_dim`: the head's columns of the output weight
//!    against the head's attention output), except head 0's, which also carries the bias and
//!    the residual: `partial[0][j] = x[j] + (dot(..) + output_bias[j])`. So
//!    `(((partial[0][j] + partial[1][j]) + partial[2][j]) + ...)`, heads in order, is the
//!    attention block's output (what the host computes). Local item `i` of the stage computes
//!    head `i % heads`, rows `[b r, min((b + 1) r, hidden))` with `b = i / heads` and `r =
//!    output_rows_per_item`: consecutive items belong to different heads, so under
//!    round-robin scheduling the heads' partials are produced (and streamed) interleaved.
//!    Its result is contiguous: `4 (h hidden + b r)`, `4` bytes per row. These are the only
//!    items with a result.
//!
//! Items of stages 0 to 2 have `result_offset` 0 and `result_length` 0.
//!
//! # Validation (everything a hostile host can send)
//!
//! - `kernel` is not OPT: [`Status::UnknownKernel`]; `flags != 0`: [`Status::MalformedDescriptor`].
//! - The parameter block not 8-byte aligned or not inside device memory, any shape zero,
//!   `head_dim` not a multiple of [`LANES`] or above [`MAX_HEAD_DIM`], `hidden != heads *
//!   head_dim` or above [`MAX_HIDDEN`], `capacity` above [`MAX_POSITIONS`], `position >=
//!   capacity`, a work split of zero, `reserved != 0`, any address not 4-byte aligned, any
//!   range overflowing or ending beyond device memory, `result_length != heads * hidden * 4`, the item
//!   count not fitting a `u32`, or any written range (the two caches, the workspace, the
//!   result) overlapping another range: [`Status::ArgumentOutOfRange`]. Read-only inputs may
//!   overlap each other.
//!
//! Every size is computed with checked arithmetic; nothing here can panic.
//!
//! # Arithmetic and summation order (bit-exact contract with the host reference)
//!
//! Every reduction uses [`LaneSum`]: element `j` goes to lane `j % 16`, each lane adds the
//! element's value (for a dot product the product `a[j] * b[j]`, rounded, then added, rounded:
//! a multiply and an add, not a fused multiply-add), lanes start at `+0.0`, and the lanes are
//! reduced in order `((0 + lane0) + lane1) + ... + lane15`. The softmax uses `libm::expf`,
//! LayerNorm `libm::sqrtf`. The weighted sum of values accumulates token after token, each
//! dimension in its own lane ([`accumulate_weighted`]). The host reference (crate
//! `workloads`) calls these same public helpers, so device and reference agree bit for bit.
//!
//! Unfused multiply-add is a deliberate choice: the emulator and the reference run on hosts
//! without a guaranteed hardware FMA, where `fmaf` is a slow software routine; separate
//! rounding vectorizes on any host and keeps a paper-scale run within seconds. The cost model
//! counts the multiply and the add as two vector instructions accordingly.

use core::ops::Range;

use crate::hal::DeviceMemory;
use crate::kernels::ranges::{checked_range, overlaps};
use crate::kernels::{ItemCost, ItemSpec};
use shared_abi::{CommandDescriptor, DeviceAddress, KernelId, Status};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Vector lanes of the modelled µthread (512-bit vectors of `f32`).
pub const LANES: usize = 16;

/// Largest hidden size: the µthread keeps the normalized input (stage 0) in its scratch, a
/// 16 KiB stack buffer here.
pub const MAX_HIDDEN: u32 = 4096;

/// Largest head dimension (a head's query and one key row are stack buffers).
pub const MAX_HEAD_DIM: u32 = 256;

/// Largest KV cache capacity: OPT's 2048 positions (a head's softmax weights are a stack
/// buffer of this many `f32`).
pub const MAX_POSITIONS: u32 = 2048;

/// The LayerNorm epsilon (OPT's).
pub const LAYER_NORM_EPSILON: f32 = 1e-5;

/// Stages of every launch.
pub const STAGES: u32 = 4;

/// Bytes of one element.
pub const ELEMENT_BYTES: u64 = 4;

/// Elements the kernel reads per device-memory access into its stack buffers.
pub const CHUNK_ELEMENTS: usize = 256;

/// Bytes of one chunk buffer.
const CHUNK_BYTES: usize = CHUNK_ELEMENTS * 4;

/// Alignment of the parameter block.
pub const PARAMETER_ALIGNMENT: u64 = 8;

/// Alignment of every other address (the `f32` natural alignment).
pub const ADDRESS_ALIGNMENT: u64 = 4;

// ---------------------------------------------------------------------------------------------
// Cost model
// ---------------------------------------------------------------------------------------------

/// Instructions per 16-element group of a dot product against a streamed weight or key row:
/// `vle32.v` of the row chunk from device memory, `vle32.v` of the other operand from scratch,
/// `vfmul.vv` and `vfadd.vv` into the 16 lane partial sums.
pub const DOT_OPERATIONS_PER_GROUP: u64 = 4;

/// Instructions per group of a dot product whose other operand stays in vector registers (a
/// head's query of up to 8 vectors in stage 1): the row load, the multiply and the add.
pub const REGISTER_DOT_OPERATIONS_PER_GROUP: u64 = 3;

/// Loop control of a streamed dot product, per 4 groups (the loop is unrolled 4 times): a
/// pointer bump, a count decrement and a compare-and-branch.
pub const LOOP_OPERATIONS_PER_UNROLL: u64 = 3;

/// Groups per unrolled loop iteration.
pub const UNROLL_GROUPS: u64 = 4;

/// LayerNorm per 16-element group: the mean pass (`vle32.v`, `vfadd.vv`: 2), the variance pass
/// (`vle32.v`, `vfsub.vf`, `vfmul.vv`, `vfadd.vv`: 4) and the normalizing pass (`vle32.v` of
/// `x`, `gamma` and `beta`, `vfsub.vf`, `vfmul.vf` by the reciprocal deviation, `vfmul.vv` by
/// `gamma`, `vfadd.vv` of `beta`, `vse32.v` to scratch: 8).
pub const LAYER_NORM_OPERATIONS_PER_GROUP: u64 = 14;

/// LayerNorm fixed work: two ordered reductions with their moves (4), the two divisions by
/// `n` (2), the epsilon add, `fsqrt.s` and the reciprocal (3), loop set-ups (3).
pub const LAYER_NORM_FIXED_OPERATIONS: u64 = 12;

/// Per projected row (stage 0): `vsetvli` and clearing the accumulator (2), the ordered
/// reduction `vfredosum.vs` and `vfmv.f.s` (2), the bias load and add (2), the row and
/// destination addresses (3), the 4-byte store (1).
pub const ROW_OPERATIONS: u64 = 10;

/// Per partial row in stage 3 (beyond its register dot product): clearing the accumulator
/// (1), the ordered reduction and move (2), the destination address (1), the 4-byte store (1),
/// the weight-row pointer bump by the `hidden` stride and the loop branch (2).
pub const PARTIAL_ROW_OPERATIONS: u64 = 7;

/// Per partial row of head 0 beyond [`PARTIAL_ROW_OPERATIONS`]: the bias load and add (2) and
/// the residual load and add (2).
pub const HEAD0_ROW_OPERATIONS: u64 = 4;

/// Bytes head 0 reads per row beyond the other heads': the bias and the residual input.
pub const HEAD0_ROW_BYTES: u64 = 2 * ELEMENT_BYTES;

/// Per token in stage 1: clearing the accumulator (1), the reduction and move (2), the scale
/// multiply (1), the score store (1), the key pointer bump and the loop branch (2).
pub const SCORE_TOKEN_OPERATIONS: u64 = 7;

/// Per 16 scores in stage 2's max pass: `vle32.v` and `vfmax.vv`.
pub const MAX_OPERATIONS_PER_GROUP: u64 = 2;

/// A vector `exp` of 16 lanes: range reduction (`vfmul` by `log2 e`, two conversions, two
/// `vfnmsac` for the remainder: 5), a degree-5 polynomial (5 `vfmadd`) and the exponent
/// insertion (`vsll`, `vadd`: 2).
pub const EXP_OPERATIONS: u64 = 12;

/// Per 16 scores in stage 2's exponent pass beyond [`EXP_OPERATIONS`]: the load, the
/// subtraction of the max, the store of the weights to scratch and the add into the sum.
pub const EXP_PASS_OPERATIONS_PER_GROUP: u64 = 4;

/// Per token in stage 2's weighted pass: `flw` of the weight, `vle32.v` of the 16 value
/// dimensions, `vfmul.vf`, `vfadd.vv`, the pointer bump and the loop branch.
pub const VALUE_TOKEN_OPERATIONS: u64 = 6;

/// Stage 2 fixed work: the max reduction (2), the sum reduction (2), the division (1), the
/// 64-byte store (1), loop set-ups (3).
pub const VALUE_FIXED_OPERATIONS: u64 = 9;

/// Fixed instructions per item: the item index to stage and block (divisions, remainders and
/// compares: 6), base addresses from the parameter block (6), `vsetvli` (1), loop set-up (2),
/// the return (1).
pub const ITEM_OPERATIONS: u64 = 16;

/// Bytes of the 16 value dimensions one stage 2 item reads per token (and stores at the end).
const VALUE_BLOCK_BYTES: u64 = LANES as u64 * ELEMENT_BYTES;

/// Loop control of a streamed dot product of `elements` elements.
fn streamed_dot_operations(elements: u64) -> u64 {
    let groups = elements.div_ceil(LANES as u64);
    groups
        .saturating_mul(DOT_OPERATIONS_PER_GROUP)
        .saturating_add(
            groups
                .div_ceil(UNROLL_GROUPS)
                .saturating_mul(LOOP_OPERATIONS_PER_UNROLL),
        )
}

/// Stage 0 item of `rows` rows: LayerNorm0 of `hidden` elements plus `rows` streamed dot
/// products of `hidden`; bytes: `x`, `gamma` and `beta` read, then per row its weights, its
/// bias and the 4-byte store. Saturates instead of overflowing.
pub fn qkv_item_cost(hidden: u32, rows: u32) -> ItemCost {
    let hidden = u64::from(hidden);
    let rows = u64::from(rows);
    let groups = hidden.div_ceil(LANES as u64);
    let row_operations = streamed_dot_operations(hidden).saturating_add(ROW_OPERATIONS);
    let operations = groups
        .saturating_mul(LAYER_NORM_OPERATIONS_PER_GROUP)
        .saturating_add(LAYER_NORM_FIXED_OPERATIONS)
        .saturating_add(rows.saturating_mul(row_operations))
        .saturating_add(ITEM_OPERATIONS);
    let row_bytes = hidden.saturating_add(2).saturating_mul(ELEMENT_BYTES);
    let bytes = hidden
        .saturating_mul(3 * ELEMENT_BYTES)
        .saturating_add(rows.saturating_mul(row_bytes));
    // Interim: every instruction counted as scalar until this kernel's cost is split by
    // functional unit.
    ItemCost {
        scalar: operations,
        bytes,
        ..ItemCost::ZERO
    }
}

/// Stage 1 item of `tokens` tokens: the query loaded once into registers, then per token a
/// register dot product of `head_dim` and [`SCORE_TOKEN_OPERATIONS`]; bytes: the query, each
/// key row and each 4-byte score stored.
pub fn score_item_cost(head_dim: u32, tokens: u32) -> ItemCost {
    let head_dim = u64::from(head_dim);
    let tokens = u64::from(tokens);
    let groups = head_dim.div_ceil(LANES as u64);
    let token_operations = groups
        .saturating_mul(REGISTER_DOT_OPERATIONS_PER_GROUP)
        .saturating_add(SCORE_TOKEN_OPERATIONS);
    let operations = groups
        .saturating_add(tokens.saturating_mul(token_operations))
        .saturating_add(ITEM_OPERATIONS);
    let token_bytes = head_dim.saturating_add(1).saturating_mul(ELEMENT_BYTES);
    let bytes = head_dim
        .saturating_mul(ELEMENT_BYTES)
        .saturating_add(tokens.saturating_mul(token_bytes));
    // Interim: every instruction counted as scalar until this kernel's cost is split by
    // functional unit.
    ItemCost {
        scalar: operations,
        bytes,
        ..ItemCost::ZERO
    }
}

/// Stage 2 item over `tokens` tokens: the max and exponent passes over the scores (read once
/// from device memory and kept in scratch), the weighted pass over the 16 value dimensions of
/// every token; bytes: the scores, 64 bytes of values per token, the 64-byte store.
pub fn value_item_cost(tokens: u32) -> ItemCost {
    let tokens = u64::from(tokens);
    let groups = tokens.div_ceil(LANES as u64);
    let per_group = MAX_OPERATIONS_PER_GROUP
        .saturating_add(EXP_OPERATIONS)
        .saturating_add(EXP_PASS_OPERATIONS_PER_GROUP);
    let operations = groups
        .saturating_mul(per_group)
        .saturating_add(tokens.saturating_mul(VALUE_TOKEN_OPERATIONS))
        .saturating_add(VALUE_FIXED_OPERATIONS)
        .saturating_add(ITEM_OPERATIONS);
    let lane_bytes = VALUE_BLOCK_BYTES;
    let bytes = tokens
        .saturating_mul(ELEMENT_BYTES.saturating_add(lane_bytes))
        .saturating_add(lane_bytes);
    // Interim: every instruction counted as scalar until this kernel's cost is split by
    // functional unit.
    ItemCost {
        scalar: operations,
        bytes,
        ..ItemCost::ZERO
    }
}

/// Stage 3 item of `rows` rows of one head's partial: the head's attention output (`head_dim`
/// elements, at most 16 vectors) loaded into vector registers once, then per row a register
/// dot product of `head_dim` ([`REGISTER_DOT_OPERATIONS_PER_GROUP`]: the row's `head_dim`
/// weights are contiguous, 320 B at paper scale) and [`PARTIAL_ROW_OPERATIONS`], plus
/// [`HEAD0_ROW_OPERATIONS`] for head 0. Bytes: the head's attention output, then per row its
/// `head_dim` weights and the 4-byte store, plus [`HEAD0_ROW_BYTES`] for head 0.
pub fn output_item_cost(head_dim: u32, rows: u32, head_zero: bool) -> ItemCost {
    let head_dim = u64::from(head_dim);
    let rows = u64::from(rows);
    let groups = head_dim.div_ceil(LANES as u64);
    let (extra_operations, extra_bytes) = if head_zero {
        (HEAD0_ROW_OPERATIONS, HEAD0_ROW_BYTES)
    } else {
        (0, 0)
    };
    let row_operations = groups
        .saturating_mul(REGISTER_DOT_OPERATIONS_PER_GROUP)
        .saturating_add(PARTIAL_ROW_OPERATIONS)
        .saturating_add(extra_operations);
    let operations = groups
        .saturating_add(rows.saturating_mul(row_operations))
        .saturating_add(ITEM_OPERATIONS);
    let row_bytes = head_dim
        .saturating_add(1)
        .saturating_mul(ELEMENT_BYTES)
        .saturating_add(extra_bytes);
    let bytes = head_dim
        .saturating_mul(ELEMENT_BYTES)
        .saturating_add(rows.saturating_mul(row_bytes));
    // Interim: every instruction counted as scalar until this kernel's cost is split by
    // functional unit.
    ItemCost {
        scalar: operations,
        bytes,
        ..ItemCost::ZERO
    }
}

// ---------------------------------------------------------------------------------------------
// Arithmetic shared with the host reference
// ---------------------------------------------------------------------------------------------

/// A sum in the kernel's fixed order (see the module docs): 16 lane partial sums and the lane
/// the next element goes to. Feeding elements in several calls gives exactly the result of one
/// call with all of them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LaneSum {
    lanes: [f32; LANES],
    next_lane: usize,
}

impl Default for LaneSum {
    fn default() -> Self {
        Self::new()
    }
}

impl LaneSum {
    /// Every lane at `+0.0`, next element to lane 0.
    pub const fn new() -> Self {
        LaneSum {
            lanes: [0.0; LANES],
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
            .filter(|next| *next < LANES)
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
        // Whole groups as 16-lane vector operations.
        let mut a_groups = a.chunks_exact(LANES);
        let mut b_groups = b.chunks_exact(LANES);
        for (x, y) in (&mut a_groups).zip(&mut b_groups) {
            if let (Ok(x), Ok(y)) = (<&[f32; LANES]>::try_from(x), <&[f32; LANES]>::try_from(y)) {
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

    /// Adds the squared deviations `(v - mean) * (v - mean)`.
    pub fn add_squared_deviations(&mut self, values: &[f32], mean: f32) {
        for value in values {
            let deviation = value - mean;
            self.push(deviation * deviation);
        }
    }

    /// The ordered horizontal reduction: `((0 + lane0) + lane1) + ... + lane15`.
    pub fn finish(&self) -> f32 {
        self.lanes.iter().fold(0.0_f32, |sum, lane| sum + lane)
    }
}

/// `sum a[j] b[j]` in the kernel's order.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut sum = LaneSum::new();
    sum.add_products(a, b);
    sum.finish()
}

/// LayerNorm statistics of `x`: `(mean, 1 / sqrt(variance + epsilon))`, with the mean and the
/// (biased) variance as [`LaneSum`]s divided by `x.len()` as `f32`.
pub fn layer_norm_statistics(x: &[f32]) -> (f32, f32) {
    let count = x.len() as f32;
    let mut sum = LaneSum::new();
    sum.add_values(x);
    let mean = sum.finish() / count;
    let mut squares = LaneSum::new();
    squares.add_squared_deviations(x, mean);
    let variance = squares.finish() / count;
    (mean, 1.0 / libm::sqrtf(variance + LAYER_NORM_EPSILON))
}

/// One normalized element: `((value - mean) * reciprocal) * gamma + beta`.
pub fn normalize(value: f32, mean: f32, reciprocal: f32, gamma: f32, beta: f32) -> f32 {
    (value - mean) * reciprocal * gamma + beta
}

/// LayerNorm of `x` into `out` (over the shortest of the four slices' common length, which
/// for a consistent call is `x.len()`).
pub fn layer_norm(x: &[f32], gamma: &[f32], beta: &[f32], out: &mut [f32]) {
    let (mean, reciprocal) = layer_norm_statistics(x);
    for (((out, value), gamma), beta) in out.iter_mut().zip(x).zip(gamma).zip(beta) {
        *out = normalize(*value, mean, reciprocal, *gamma, *beta);
    }
}

/// The score scale `1 / sqrt(head_dim)`.
pub fn attention_scale(head_dim: u32) -> f32 {
    1.0 / libm::sqrtf(head_dim as f32)
}

/// The scaled score of a query and a key: `dot(query, key) * scale`.
pub fn score(query: &[f32], key: &[f32], scale: f32) -> f32 {
    dot(query, key) * scale
}

/// Replaces the scores of one head by their unnormalized softmax weights `expf(s - max)` and
/// returns the weights' [`LaneSum`]. The max is found left to right (`s > max` replaces it,
/// starting from the first score). An empty slice gives 0.
pub fn softmax_weights(scores: &mut [f32]) -> f32 {
    let Some(first) = scores.first().copied() else {
        return 0.0;
    };
    let max = scores
        .iter()
        .fold(first, |max, score| if *score > max { *score } else { max });
    for score in scores.iter_mut() {
        *score = libm::expf(*score - max);
    }
    let mut sum = LaneSum::new();
    sum.add_values(scores);
    sum.finish()
}

/// `accumulator[d] = accumulator[d] + weight * values[d]` (the product rounded, then the add):
/// one token's contribution to a weighted sum, dimension by dimension.
pub fn accumulate_weighted(accumulator: &mut [f32], weight: f32, values: &[f32]) {
    for (sum, value) in accumulator.iter_mut().zip(values) {
        *sum += weight * value;
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

/// One row of head `head`'s partial output projection from its dot product over the head's
/// columns: head 0's is `residual(input, project(dot, bias))` (`input + (dot + bias)`), every
/// other head's the dot product itself (`bias` and `input` unused).
pub fn head_partial(head: u32, dot: f32, bias: f32, input: f32) -> f32 {
    if head == 0 {
        residual(input, project(dot, bias))
    } else {
        dot
    }
}

// ---------------------------------------------------------------------------------------------
// Command
// ---------------------------------------------------------------------------------------------

/// The parameter block the command's `args[0]` points at (see the module docs).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct OptParameters {
    /// Hidden size (`heads * head_dim`).
    pub hidden: u32,
    /// Attention heads.
    pub heads: u32,
    /// Dimensions per head (a multiple of [`LANES`]).
    pub head_dim: u32,
    /// Positions each KV cache holds.
    pub capacity: u32,
    /// Stage 0: output rows per item.
    pub qkv_rows_per_item: u32,
    /// Stage 1: tokens per item.
    pub score_tokens_per_item: u32,
    /// Stage 3: output rows per item.
    pub output_rows_per_item: u32,
    /// Must be zero.
    pub reserved: u32,
    /// The input hidden state (`hidden` `f32`).
    pub input: u64,
    /// LayerNorm0 gamma.
    pub ln_gamma: u64,
    /// LayerNorm0 beta.
    pub ln_beta: u64,
    /// Q/K/V weight, `3 hidden x hidden`.
    pub qkv_weight: u64,
    /// Q/K/V bias, `3 hidden`.
    pub qkv_bias: u64,
    /// Output weight, `hidden x hidden`.
    pub output_weight: u64,
    /// Output bias, `hidden`.
    pub output_bias: u64,
    /// Workspace of [`workspace_bytes`].
    pub workspace: u64,
}

const _: () = assert!(core::mem::size_of::<OptParameters>() == 96);

impl OptParameters {
    /// The block's bytes as the kernel reads them (for a host to write into device memory).
    pub fn bytes(&self) -> &[u8] {
        self.as_bytes()
    }
}

/// Bytes of the parameter block.
pub const PARAMETER_BYTES: u64 = core::mem::size_of::<OptParameters>() as u64;

/// Bytes of the workspace: `q` (`hidden`), scores (`heads x capacity`), attention output
/// (`hidden`), all `f32`. `None` on overflow.
pub fn workspace_bytes(hidden: u32, heads: u32, capacity: u32) -> Option<u64> {
    let scores = u64::from(heads).checked_mul(u64::from(capacity))?;
    u64::from(hidden)
        .checked_mul(2)?
        .checked_add(scores)?
        .checked_mul(ELEMENT_BYTES)
}

/// Bytes of one KV cache (keys or values) of one layer: `heads x capacity x head_dim` `f32`.
pub fn cache_bytes(heads: u32, capacity: u32, head_dim: u32) -> Option<u64> {
    u64::from(heads)
        .checked_mul(u64::from(capacity))?
        .checked_mul(u64::from(head_dim))?
        .checked_mul(ELEMENT_BYTES)
}

/// What one item does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Work {
    /// Stage 0: these output rows of the stacked Q/K/V projection.
    Qkv { rows: (u32, u32) },
    /// Stage 1: scores of these tokens of one head.
    Scores { head: u32, tokens: (u32, u32) },
    /// Stage 2: 16 attention-output dimensions of one head from `first_dim`.
    Values { head: u32, first_dim: u32 },
    /// Stage 3: these rows of one head's partial output projection.
    Output { head: u32, rows: (u32, u32) },
}

/// A decoded, validated OPT attention launch.
///
/// # Invariants
///
/// The parameters passed every check of the module docs against the device memory size the
/// command was decoded against; `stage_starts` is non-decreasing with `stage_starts[4]` the
/// item count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptKernel {
    parameters: OptParameters,
    key_cache: u64,
    value_cache: u64,
    position: u32,
    result: u64,
    score_blocks: u32,
    value_blocks: u32,
    stage_starts: [u32; 5],
}

/// `a * b` as `u64`, or out of range.
fn product(a: u64, b: u64) -> Result<u64, Status> {
    a.checked_mul(b).ok_or(Status::ArgumentOutOfRange)
}

impl OptKernel {
    /// Decodes and validates `command` against device memory (read only: the parameter
    /// block). See the module docs for every rule. Never panics.
    pub fn decode<M: DeviceMemory>(
        command: &CommandDescriptor,
        memory: &M,
    ) -> Result<Self, Status> {
        if command.kernel != KernelId::OptAttention as u32 {
            return Err(Status::UnknownKernel);
        }
        if command.flags != 0 {
            return Err(Status::MalformedDescriptor);
        }
        let memory_size = memory.size();
        let [parameter_address, key_cache, value_cache, position] = command.args;
        let parameter_range = checked_range(
            parameter_address,
            PARAMETER_BYTES,
            PARAMETER_ALIGNMENT,
            memory_size,
        )?;
        let parameters: OptParameters = memory.read_value(DeviceAddress(parameter_address))?;
        let p = parameters;
        if p.hidden == 0
            || p.heads == 0
            || p.head_dim == 0
            || p.capacity == 0
            || p.qkv_rows_per_item == 0
            || p.score_tokens_per_item == 0
            || p.output_rows_per_item == 0
            || p.reserved != 0
            || p.head_dim > MAX_HEAD_DIM
            || p.hidden > MAX_HIDDEN
            || p.capacity > MAX_POSITIONS
            || p.head_dim.checked_rem(LANES as u32) != Some(0)
            || p.heads.checked_mul(p.head_dim) != Some(p.hidden)
        {
            return Err(Status::ArgumentOutOfRange);
        }
        let position = u32::try_from(position).map_err(|_| Status::ArgumentOutOfRange)?;
        if position >= p.capacity {
            return Err(Status::ArgumentOutOfRange);
        }

        let hidden = u64::from(p.hidden);
        let vector_bytes = product(hidden, ELEMENT_BYTES)?;
        let result_bytes = product(u64::from(p.heads), vector_bytes)?;
        if command.result_length != result_bytes {
            return Err(Status::ArgumentOutOfRange);
        }
        let qkv_rows = product(hidden, 3)?;
        let cache =
            cache_bytes(p.heads, p.capacity, p.head_dim).ok_or(Status::ArgumentOutOfRange)?;
        let workspace =
            workspace_bytes(p.hidden, p.heads, p.capacity).ok_or(Status::ArgumentOutOfRange)?;
        let range =
            |start: u64, length: u64| checked_range(start, length, ADDRESS_ALIGNMENT, memory_size);
        let read_only = [
            parameter_range,
            range(p.input, vector_bytes)?,
            range(p.ln_gamma, vector_bytes)?,
            range(p.ln_beta, vector_bytes)?,
            range(p.qkv_weight, product(qkv_rows, vector_bytes)?)?,
            range(p.qkv_bias, product(qkv_rows, ELEMENT_BYTES)?)?,
            range(p.output_weight, product(hidden, vector_bytes)?)?,
            range(p.output_bias, vector_bytes)?,
        ];
        let written = [
            range(key_cache, cache)?,
            range(value_cache, cache)?,
            range(p.workspace, workspace)?,
            range(command.result_address, result_bytes)?,
        ];
        for (index, target) in written.iter().enumerate() {
            if read_only.iter().any(|input| overlaps(*target, *input))
                || written
                    .iter()
                    .skip(index.saturating_add(1))
                    .any(|other| overlaps(*target, *other))
            {
                return Err(Status::ArgumentOutOfRange);
            }
        }

        let tokens = position.checked_add(1).ok_or(Status::ArgumentOutOfRange)?;
        let qkv_items = p
            .hidden
            .checked_mul(3)
            .ok_or(Status::ArgumentOutOfRange)?
            .div_ceil(p.qkv_rows_per_item);
        let score_blocks = tokens.div_ceil(p.score_tokens_per_item);
        let value_blocks = p
            .head_dim
            .checked_div(LANES as u32)
            .ok_or(Status::ArgumentOutOfRange)?;
        let output_items = p
            .heads
            .checked_mul(p.hidden.div_ceil(p.output_rows_per_item))
            .ok_or(Status::ArgumentOutOfRange)?;
        let score_items = p
            .heads
            .checked_mul(score_blocks)
            .ok_or(Status::ArgumentOutOfRange)?;
        let value_items = p
            .heads
            .checked_mul(value_blocks)
            .ok_or(Status::ArgumentOutOfRange)?;
        let mut stage_starts = [0_u32; 5];
        let mut next = 0_u32;
        for (start, items) in
            stage_starts
                .iter_mut()
                .skip(1)
                .zip([qkv_items, score_items, value_items, output_items])
        {
            next = next.checked_add(items).ok_or(Status::ArgumentOutOfRange)?;
            *start = next;
        }
        Ok(OptKernel {
            parameters,
            key_cache,
            value_cache,
            position,
            result: command.result_address,
            score_blocks,
            value_blocks,
            stage_starts,
        })
    }

    /// The parameter block the launch was decoded with.
    pub fn parameters(&self) -> &OptParameters {
        &self.parameters
    }

    /// The current token's position.
    pub fn position(&self) -> u32 {
        self.position
    }

    /// Work items, over all stages.
    pub fn items(&self) -> u32 {
        self.stage_starts[4]
    }

    /// Stages: [`STAGES`].
    pub fn stages(&self) -> u32 {
        STAGES
    }

    /// Items of stage `stage` (empty past the last).
    pub fn stage_items(&self, stage: u32) -> Range<u32> {
        let index = usize::try_from(stage).unwrap_or(usize::MAX);
        match (
            self.stage_starts.get(index),
            index
                .checked_add(1)
                .and_then(|next| self.stage_starts.get(next)),
        ) {
            (Some(start), Some(end)) => *start..*end,
            _ => 0..0,
        }
    }

    /// What item `index` does.
    fn work(&self, index: u32) -> Result<Work, Status> {
        let p = &self.parameters;
        let [_, qkv_end, score_end, value_end, output_end] = self.stage_starts;
        let block = |local: u32, per_item: u32, total: u32| -> Result<(u32, u32), Status> {
            let start = local
                .checked_mul(per_item)
                .ok_or(Status::ArgumentOutOfRange)?;
            Ok((start, start.saturating_add(per_item).min(total)))
        };
        if index < qkv_end {
            let rows = p.hidden.checked_mul(3).ok_or(Status::ArgumentOutOfRange)?;
            Ok(Work::Qkv {
                rows: block(index, p.qkv_rows_per_item, rows)?,
            })
        } else if index < score_end {
            let local = index
                .checked_sub(qkv_end)
                .ok_or(Status::ArgumentOutOfRange)?;
            let head = local
                .checked_div(self.score_blocks)
                .ok_or(Status::ArgumentOutOfRange)?;
            let local_block = local
                .checked_rem(self.score_blocks)
                .ok_or(Status::ArgumentOutOfRange)?;
            let tokens = self.position.saturating_add(1);
            Ok(Work::Scores {
                head,
                tokens: block(local_block, p.score_tokens_per_item, tokens)?,
            })
        } else if index < value_end {
            let local = index
                .checked_sub(score_end)
                .ok_or(Status::ArgumentOutOfRange)?;
            let head = local
                .checked_div(self.value_blocks)
                .ok_or(Status::ArgumentOutOfRange)?;
            let dims = local
                .checked_rem(self.value_blocks)
                .ok_or(Status::ArgumentOutOfRange)?;
            Ok(Work::Values {
                head,
                first_dim: dims
                    .checked_mul(LANES as u32)
                    .ok_or(Status::ArgumentOutOfRange)?,
            })
        } else if index < output_end {
            let local = index
                .checked_sub(value_end)
                .ok_or(Status::ArgumentOutOfRange)?;
            let head = local
                .checked_rem(p.heads)
                .ok_or(Status::ArgumentOutOfRange)?;
            let row_block = local
                .checked_div(p.heads)
                .ok_or(Status::ArgumentOutOfRange)?;
            Ok(Work::Output {
                head,
                rows: block(row_block, p.output_rows_per_item, p.hidden)?,
            })
        } else {
            Err(Status::ArgumentOutOfRange)
        }
    }

    /// Item `index`: its result range (only stage 3 items have one: `4 * (head * hidden +
    /// first_row)`, `4 * rows`) and cost ([`qkv_item_cost`], [`score_item_cost`], [`value_item_cost`],
    /// [`output_item_cost`]). Reads nothing from `memory`.
    pub fn item<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<ItemSpec, Status> {
        let _ = memory;
        let p = &self.parameters;
        let count = |(start, end): (u32, u32)| end.saturating_sub(start);
        Ok(match self.work(index)? {
            Work::Qkv { rows } => ItemSpec {
                result_offset: 0,
                result_length: 0,
                cost: qkv_item_cost(p.hidden, count(rows)),
            },
            Work::Scores { tokens, .. } => ItemSpec {
                result_offset: 0,
                result_length: 0,
                cost: score_item_cost(p.head_dim, count(tokens)),
            },
            Work::Values { .. } => ItemSpec {
                result_offset: 0,
                result_length: 0,
                cost: value_item_cost(self.position.saturating_add(1)),
            },
            Work::Output { head, rows } => ItemSpec {
                result_offset: element_address(0, self.partial_element(head, rows.0)?)?,
                result_length: count(rows)
                    .checked_mul(ELEMENT_BYTES as u32)
                    .ok_or(Status::ArgumentOutOfRange)?,
                cost: output_item_cost(p.head_dim, count(rows), head == 0),
            },
        })
    }

    /// Runs item `index` (see the module docs for what each stage reads and writes). A memory
    /// fault (a memory smaller than the one the command was validated against) is reported
    /// as [`Status::DeviceMemoryFault`].
    pub fn execute<M: DeviceMemory>(&self, index: u32, memory: &mut M) -> Result<(), Status> {
        match self.work(index)? {
            Work::Qkv { rows } => self.execute_qkv(rows, memory),
            Work::Scores { head, tokens } => self.execute_scores(head, tokens, memory),
            Work::Values { head, first_dim } => self.execute_values(head, first_dim, memory),
            Work::Output { head, rows } => self.execute_output(head, rows, memory),
        }
    }

    /// Workspace address of element `index` of the region starting `offset` elements in.
    fn workspace_element(&self, offset: u64, index: u64) -> Result<u64, Status> {
        element_address(
            self.parameters.workspace,
            offset
                .checked_add(index)
                .ok_or(Status::ArgumentOutOfRange)?,
        )
    }

    /// Element offset of the scores in the workspace.
    fn scores_offset(&self) -> u64 {
        u64::from(self.parameters.hidden)
    }

    /// Element offset of the attention output in the workspace.
    fn attention_offset(&self) -> Result<u64, Status> {
        let p = &self.parameters;
        product(u64::from(p.heads), u64::from(p.capacity))?
            .checked_add(self.scores_offset())
            .ok_or(Status::ArgumentOutOfRange)
    }

    /// Element index of `(head, token, dim)` in a cache.
    fn cache_element(&self, head: u32, token: u32, dim: u32) -> Result<u64, Status> {
        let p = &self.parameters;
        product(u64::from(head), u64::from(p.capacity))?
            .checked_add(u64::from(token))
            .ok_or(Status::ArgumentOutOfRange)
            .and_then(|row| product(row, u64::from(p.head_dim)))?
            .checked_add(u64::from(dim))
            .ok_or(Status::ArgumentOutOfRange)
    }

    /// Where output row `row` of the stacked projection goes.
    fn qkv_destination(&self, row: u32) -> Result<u64, Status> {
        let p = &self.parameters;
        let matrix = row
            .checked_div(p.hidden)
            .ok_or(Status::ArgumentOutOfRange)?;
        let column = row
            .checked_rem(p.hidden)
            .ok_or(Status::ArgumentOutOfRange)?;
        if matrix == 0 {
            return self.workspace_element(0, u64::from(column));
        }
        let head = column
            .checked_div(p.head_dim)
            .ok_or(Status::ArgumentOutOfRange)?;
        let dim = column
            .checked_rem(p.head_dim)
            .ok_or(Status::ArgumentOutOfRange)?;
        let element = self.cache_element(head, self.position, dim)?;
        let base = if matrix == 1 {
            self.key_cache
        } else {
            self.value_cache
        };
        element_address(base, element)
    }

    fn execute_qkv<M: DeviceMemory>(&self, rows: (u32, u32), memory: &mut M) -> Result<(), Status> {
        let p = &self.parameters;
        let hidden = usize::try_from(p.hidden).map_err(|_| Status::ArgumentOutOfRange)?;
        let mut buffer = [0.0_f32; MAX_HIDDEN as usize];
        let x = buffer.get_mut(..hidden).ok_or(Status::ArgumentOutOfRange)?;
        read_floats(memory, p.input, x)?;
        let (mean, reciprocal) = layer_norm_statistics(x);
        let mut gamma = [0.0_f32; CHUNK_ELEMENTS];
        let mut beta = [0.0_f32; CHUNK_ELEMENTS];
        let mut offset = 0_u64;
        for chunk in x.chunks_mut(CHUNK_ELEMENTS) {
            let gamma = gamma
                .get_mut(..chunk.len())
                .ok_or(Status::ArgumentOutOfRange)?;
            let beta = beta
                .get_mut(..chunk.len())
                .ok_or(Status::ArgumentOutOfRange)?;
            read_floats(memory, element_address(p.ln_gamma, offset)?, gamma)?;
            read_floats(memory, element_address(p.ln_beta, offset)?, beta)?;
            for ((value, gamma), beta) in chunk.iter_mut().zip(gamma.iter()).zip(beta.iter()) {
                *value = normalize(*value, mean, reciprocal, *gamma, *beta);
            }
            offset = offset
                .checked_add(chunk.len() as u64)
                .ok_or(Status::ArgumentOutOfRange)?;
        }
        for row in rows.0..rows.1 {
            let weights =
                element_address(p.qkv_weight, product(u64::from(row), u64::from(p.hidden))?)?;
            let sum = dot_with_device_row(memory, weights, x)?;
            let bias = read_float(memory, element_address(p.qkv_bias, u64::from(row))?)?;
            write_floats(memory, self.qkv_destination(row)?, &[project(sum, bias)])?;
        }
        Ok(())
    }

    fn execute_scores<M: DeviceMemory>(
        &self,
        head: u32,
        tokens: (u32, u32),
        memory: &mut M,
    ) -> Result<(), Status> {
        let p = &self.parameters;
        let head_dim = usize::try_from(p.head_dim).map_err(|_| Status::ArgumentOutOfRange)?;
        let mut query = [0.0_f32; MAX_HEAD_DIM as usize];
        let query = query
            .get_mut(..head_dim)
            .ok_or(Status::ArgumentOutOfRange)?;
        let query_start = product(u64::from(head), u64::from(p.head_dim))?;
        read_floats(memory, self.workspace_element(0, query_start)?, query)?;
        let scale = attention_scale(p.head_dim);
        let mut key = [0.0_f32; MAX_HEAD_DIM as usize];
        let key = key.get_mut(..head_dim).ok_or(Status::ArgumentOutOfRange)?;
        let score_row = product(u64::from(head), u64::from(p.capacity))?;
        for token in tokens.0..tokens.1 {
            read_floats(
                memory,
                element_address(self.key_cache, self.cache_element(head, token, 0)?)?,
                key,
            )?;
            let value = score(query, key, scale);
            let destination = self.workspace_element(
                self.scores_offset(),
                score_row
                    .checked_add(u64::from(token))
                    .ok_or(Status::ArgumentOutOfRange)?,
            )?;
            write_floats(memory, destination, &[value])?;
        }
        Ok(())
    }

    fn execute_values<M: DeviceMemory>(
        &self,
        head: u32,
        first_dim: u32,
        memory: &mut M,
    ) -> Result<(), Status> {
        let p = &self.parameters;
        let tokens = usize::try_from(self.position)
            .ok()
            .and_then(|position| position.checked_add(1))
            .ok_or(Status::ArgumentOutOfRange)?;
        let mut weights = [0.0_f32; MAX_POSITIONS as usize];
        let weights = weights
            .get_mut(..tokens)
            .ok_or(Status::ArgumentOutOfRange)?;
        let score_row = product(u64::from(head), u64::from(p.capacity))?;
        read_floats(
            memory,
            self.workspace_element(self.scores_offset(), score_row)?,
            weights,
        )?;
        let sum = softmax_weights(weights);
        let mut accumulator = [0.0_f32; LANES];
        let mut values = [0.0_f32; LANES];
        for (token, weight) in (0_u32..).zip(weights.iter()) {
            read_floats(
                memory,
                element_address(
                    self.value_cache,
                    self.cache_element(head, token, first_dim)?,
                )?,
                &mut values,
            )?;
            accumulate_weighted(&mut accumulator, *weight, &values);
        }
        for value in accumulator.iter_mut() {
            *value /= sum;
        }
        let first = product(u64::from(head), u64::from(p.head_dim))?
            .checked_add(u64::from(first_dim))
            .ok_or(Status::ArgumentOutOfRange)?;
        write_floats(
            memory,
            self.workspace_element(self.attention_offset()?, first)?,
            &accumulator,
        )
    }

    /// Element index of row `row` of head `head`'s partial in the result space.
    fn partial_element(&self, head: u32, row: u32) -> Result<u64, Status> {
        product(u64::from(head), u64::from(self.parameters.hidden))?
            .checked_add(u64::from(row))
            .ok_or(Status::ArgumentOutOfRange)
    }

    fn execute_output<M: DeviceMemory>(
        &self,
        head: u32,
        rows: (u32, u32),
        memory: &mut M,
    ) -> Result<(), Status> {
        let p = &self.parameters;
        let head_dim = usize::try_from(p.head_dim).map_err(|_| Status::ArgumentOutOfRange)?;
        let mut attention = [0.0_f32; MAX_HEAD_DIM as usize];
        let attention = attention
            .get_mut(..head_dim)
            .ok_or(Status::ArgumentOutOfRange)?;
        let first_column = product(u64::from(head), u64::from(p.head_dim))?;
        read_floats(
            memory,
            self.workspace_element(self.attention_offset()?, first_column)?,
            attention,
        )?;
        let mut weights = [0.0_f32; MAX_HEAD_DIM as usize];
        let weights = weights
            .get_mut(..head_dim)
            .ok_or(Status::ArgumentOutOfRange)?;
        for row in rows.0..rows.1 {
            let start = product(u64::from(row), u64::from(p.hidden))?
                .checked_add(first_column)
                .ok_or(Status::ArgumentOutOfRange)?;
            read_floats(memory, element_address(p.output_weight, start)?, weights)?;
            let sum = dot(weights, attention);
            let value = if head == 0 {
                let bias = read_float(memory, element_address(p.output_bias, u64::from(row))?)?;
                let input = read_float(memory, element_address(p.input, u64::from(row))?)?;
                head_partial(0, sum, bias, input)
            } else {
                head_partial(head, sum, 0.0, 0.0)
            };
            write_floats(
                memory,
                element_address(self.result, self.partial_element(head, row)?)?,
                &[value],
            )?;
        }
        Ok(())
    }
}

/// `base + 4 * index`, checked.
fn element_address(base: u64, index: u64) -> Result<u64, Status> {
    index
        .checked_mul(ELEMENT_BYTES)
        .and_then(|offset| base.checked_add(offset))
        .ok_or(Status::ArgumentOutOfRange)
}

/// Reads `values.len()` little-endian `f32` at `address`, a chunk at a time.
fn read_floats<M: DeviceMemory>(
    memory: &M,
    address: u64,
    values: &mut [f32],
) -> Result<(), Status> {
    let mut bytes = [0_u8; CHUNK_BYTES];
    let mut address = address;
    for chunk in values.chunks_mut(CHUNK_ELEMENTS) {
        let length = chunk
            .len()
            .checked_mul(4)
            .ok_or(Status::ArgumentOutOfRange)?;
        let buffer = bytes.get_mut(..length).ok_or(Status::ArgumentOutOfRange)?;
        memory.read(DeviceAddress(address), buffer)?;
        for (value, word) in chunk.iter_mut().zip(buffer.chunks_exact(4)) {
            let word = <[u8; 4]>::try_from(word).map_err(|_| Status::ArgumentOutOfRange)?;
            *value = f32::from_le_bytes(word);
        }
        address = address
            .checked_add(length as u64)
            .ok_or(Status::ArgumentOutOfRange)?;
    }
    Ok(())
}

/// Reads one `f32`.
fn read_float<M: DeviceMemory>(memory: &M, address: u64) -> Result<f32, Status> {
    let mut value = [0.0_f32];
    read_floats(memory, address, &mut value)?;
    Ok(value[0])
}

/// Writes `values` as little-endian `f32` at `address`, a chunk at a time.
fn write_floats<M: DeviceMemory>(
    memory: &mut M,
    address: u64,
    values: &[f32],
) -> Result<(), Status> {
    let mut bytes = [0_u8; CHUNK_BYTES];
    let mut address = address;
    for chunk in values.chunks(CHUNK_ELEMENTS) {
        let length = chunk
            .len()
            .checked_mul(4)
            .ok_or(Status::ArgumentOutOfRange)?;
        let buffer = bytes.get_mut(..length).ok_or(Status::ArgumentOutOfRange)?;
        for (word, value) in buffer.chunks_exact_mut(4).zip(chunk) {
            word.copy_from_slice(&value.to_le_bytes());
        }
        memory.write(DeviceAddress(address), buffer)?;
        address = address
            .checked_add(length as u64)
            .ok_or(Status::ArgumentOutOfRange)?;
    }
    Ok(())
}

/// The dot product of the device-memory row at `address` (`vector.len()` elements, streamed
/// a chunk at a time) with `vector`, in [`LaneSum`] order.
fn dot_with_device_row<M: DeviceMemory>(
    memory: &M,
    address: u64,
    vector: &[f32],
) -> Result<f32, Status> {
    let mut sum = LaneSum::new();
    let mut row = [0.0_f32; CHUNK_ELEMENTS];
    let mut address = address;
    for part in vector.chunks(CHUNK_ELEMENTS) {
        let row = row
            .get_mut(..part.len())
            .ok_or(Status::ArgumentOutOfRange)?;
        read_floats(memory, address, row)?;
        sum.add_products(row, part);
        address = element_address(address, part.len() as u64)?;
    }
    Ok(sum.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    type FakeMemory = crate::testing::FakeDeviceMemory;

    const MEMORY: u64 = 1 << 20;

    /// A tiny layer: hidden 32 = 2 heads of 16, capacity 8, position 5 (6 tokens attended).
    const HIDDEN: u32 = 32;
    const HEADS: u32 = 2;
    const HEAD_DIM: u32 = 16;
    const CAPACITY: u32 = 8;
    const POSITION: u64 = 5;

    const PARAMETERS: u64 = 0x1000;
    const INPUT: u64 = 0x1100;
    const GAMMA: u64 = 0x1200;
    const BETA: u64 = 0x1300;
    const QKV_WEIGHT: u64 = 0x2000; // 96 x 32 x 4 = 12 KiB
    const QKV_BIAS: u64 = 0x6000;
    const OUTPUT_WEIGHT: u64 = 0x7000; // 4 KiB
    const OUTPUT_BIAS: u64 = 0x8000;
    const WORKSPACE: u64 = 0x9000; // (64 + 16) x 4 = 320 B
    const KEYS: u64 = 0xA000; // 2 x 8 x 16 x 4 = 1 KiB
    const VALUES: u64 = 0xB000;
    const RESULT: u64 = 0xC000; // 2 heads x 32 x 4 = 256 B

    fn parameters() -> OptParameters {
        OptParameters {
            hidden: HIDDEN,
            heads: HEADS,
            head_dim: HEAD_DIM,
            capacity: CAPACITY,
            qkv_rows_per_item: 7,
            score_tokens_per_item: 4,
            output_rows_per_item: 5,
            reserved: 0,
            input: INPUT,
            ln_gamma: GAMMA,
            ln_beta: BETA,
            qkv_weight: QKV_WEIGHT,
            qkv_bias: QKV_BIAS,
            output_weight: OUTPUT_WEIGHT,
            output_bias: OUTPUT_BIAS,
            workspace: WORKSPACE,
        }
    }

    fn command() -> CommandDescriptor {
        CommandDescriptor {
            kernel: KernelId::OptAttention as u32,
            mode: 0,
            tag: 0,
            flags: 0,
            result_address: RESULT,
            result_length: u64::from(HEADS * HIDDEN) * 4,
            args: [PARAMETERS, KEYS, VALUES, POSITION],
        }
    }

    fn value(seed: u32) -> f32 {
        ((seed.wrapping_mul(2_654_435_761) >> 20) % 64) as f32 / 32.0 - 1.0
    }

    fn floats(count: usize, seed: u32) -> Vec<f32> {
        (0..count as u32)
            .map(|j| value(j.wrapping_add(seed)))
            .collect()
    }

    fn put_floats(memory: &mut FakeMemory, address: u64, values: &[f32]) {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        memory.write(DeviceAddress(address), &bytes).unwrap();
    }

    fn get_floats(memory: &FakeMemory, address: u64, count: usize) -> Vec<f32> {
        let mut bytes = vec![0; count * 4];
        memory.read(DeviceAddress(address), &mut bytes).unwrap();
        bytes
            .chunks_exact(4)
            .map(|w| f32::from_le_bytes(w.try_into().unwrap()))
            .collect()
    }

    struct Layer {
        x: Vec<f32>,
        gamma: Vec<f32>,
        beta: Vec<f32>,
        qkv_weight: Vec<f32>,
        qkv_bias: Vec<f32>,
        output_weight: Vec<f32>,
        output_bias: Vec<f32>,
        keys: Vec<f32>,
        values: Vec<f32>,
    }

    fn layer() -> Layer {
        let h = HIDDEN as usize;
        let cache = (HEADS * CAPACITY * HEAD_DIM) as usize;
        let scaled = |v: Vec<f32>, s: f32| v.into_iter().map(|x| x * s).collect::<Vec<_>>();
        Layer {
            x: floats(h, 1),
            gamma: floats(h, 2).iter().map(|g| 1.0 + g / 8.0).collect(),
            beta: scaled(floats(h, 3), 0.1),
            qkv_weight: scaled(floats(3 * h * h, 4), 0.3),
            qkv_bias: scaled(floats(3 * h, 5), 0.1),
            output_weight: scaled(floats(h * h, 6), 0.3),
            output_bias: scaled(floats(h, 7), 0.1),
            keys: floats(cache, 8),
            values: floats(cache, 9),
        }
    }

    fn loaded(layer: &Layer) -> FakeMemory {
        let mut memory = FakeMemory::new(MEMORY as usize);
        memory.put(DeviceAddress(PARAMETERS), &parameters());
        put_floats(&mut memory, INPUT, &layer.x);
        put_floats(&mut memory, GAMMA, &layer.gamma);
        put_floats(&mut memory, BETA, &layer.beta);
        put_floats(&mut memory, QKV_WEIGHT, &layer.qkv_weight);
        put_floats(&mut memory, QKV_BIAS, &layer.qkv_bias);
        put_floats(&mut memory, OUTPUT_WEIGHT, &layer.output_weight);
        put_floats(&mut memory, OUTPUT_BIAS, &layer.output_bias);
        put_floats(&mut memory, KEYS, &layer.keys);
        put_floats(&mut memory, VALUES, &layer.values);
        memory
    }

    /// The layer in plain `f64`, sequential sums: the per-head partials (`[head][row]`, head
    /// 0's with the bias and the residual), the attention block's output, the caches.
    #[allow(clippy::type_complexity)]
    fn plain(layer: &Layer) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
        let h = HIDDEN as usize;
        let hd = HEAD_DIM as usize;
        let cap = CAPACITY as usize;
        let pos = POSITION as usize;
        let x: Vec<f64> = layer.x.iter().map(|v| f64::from(*v)).collect();
        let mean = x.iter().sum::<f64>() / h as f64;
        let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / h as f64;
        let r = 1.0 / (var + 1e-5).sqrt();
        let n: Vec<f64> = (0..h)
            .map(|j| (x[j] - mean) * r * f64::from(layer.gamma[j]) + f64::from(layer.beta[j]))
            .collect();
        let qkv: Vec<f64> = (0..3 * h)
            .map(|row| {
                (0..h)
                    .map(|j| f64::from(layer.qkv_weight[row * h + j]) * n[j])
                    .sum::<f64>()
                    + f64::from(layer.qkv_bias[row])
            })
            .collect();
        let mut keys: Vec<f64> = layer.keys.iter().map(|v| f64::from(*v)).collect();
        let mut values: Vec<f64> = layer.values.iter().map(|v| f64::from(*v)).collect();
        let mut attention = vec![0.0; h];
        for head in 0..HEADS as usize {
            for d in 0..hd {
                keys[(head * cap + pos) * hd + d] = qkv[h + head * hd + d];
                values[(head * cap + pos) * hd + d] = qkv[2 * h + head * hd + d];
            }
            let scores: Vec<f64> = (0..=pos)
                .map(|t| {
                    (0..hd)
                        .map(|d| qkv[head * hd + d] * keys[(head * cap + t) * hd + d])
                        .sum::<f64>()
                        / (hd as f64).sqrt()
                })
                .collect();
            let max = scores.iter().cloned().fold(f64::MIN, f64::max);
            let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            for d in 0..hd {
                attention[head * hd + d] = (0..=pos)
                    .map(|t| e[t] * values[(head * cap + t) * hd + d])
                    .sum::<f64>()
                    / sum;
            }
        }
        let mut partials = vec![0.0; HEADS as usize * h];
        for head in 0..HEADS as usize {
            for row in 0..h {
                let mut sum = (0..hd)
                    .map(|j| {
                        f64::from(layer.output_weight[row * h + head * hd + j])
                            * attention[head * hd + j]
                    })
                    .sum::<f64>();
                if head == 0 {
                    sum += x[row] + f64::from(layer.output_bias[row]);
                }
                partials[head * h + row] = sum;
            }
        }
        let result = (0..h)
            .map(|row| {
                x[row]
                    + (0..h)
                        .map(|j| f64::from(layer.output_weight[row * h + j]) * attention[j])
                        .sum::<f64>()
                    + f64::from(layer.output_bias[row])
            })
            .collect();
        (partials, result, keys, values)
    }

    fn run(memory: &mut FakeMemory) -> OptKernel {
        let kernel = OptKernel::decode(&command(), memory).unwrap();
        for stage in 0..kernel.stages() {
            for item in kernel.stage_items(stage) {
                kernel.execute(item, memory).unwrap();
            }
        }
        kernel
    }

    fn assert_close(got: &[f32], expected: &[f64], what: &str) {
        for (index, (g, e)) in got.iter().zip(expected).enumerate() {
            assert!(
                (f64::from(*g) - e).abs() <= 1e-4 * e.abs().max(1.0),
                "{what} {index}: {g} vs {e}"
            );
        }
    }

    /// The command processor's barrier (`crate::device`): a staged launch is dispatched one
    /// stage at a time, the next only once every item of the previous one has finished, and
    /// the launch completes only after the last stage.
    #[test]
    fn the_firmware_dispatches_each_stage_only_after_the_previous_one_finished() {
        use crate::testing::{test_firmware, BulkCompletion, FakeHal};
        use shared_abi::LaunchMode;
        let mut hal = FakeHal::with_memory(crate::testing::DEVICE_MEMORY_BYTES as usize);
        let fixture = loaded(&layer());
        let bytes = fixture.bytes(DeviceAddress(0), MEMORY);
        hal.memory.write(DeviceAddress(0), &bytes).unwrap();
        let mut firmware = test_firmware(crate::StreamingFactor::Bytes(32), true);
        let mut launch = command();
        launch.mode = LaunchMode::BulkSynchronous as u32;
        launch.tag = 7;
        hal.launch_store(launch);
        firmware.step(&mut hal);
        let expected = [0..14, 14..18, 18..20, 20..34];
        for (stage, items) in expected.iter().enumerate() {
            let dispatched = hal.compute.launches();
            assert_eq!(
                dispatched.len(),
                stage + 1,
                "stage {stage} not dispatched alone"
            );
            let current = dispatched[stage];
            assert_eq!(current.item_range(), items.clone(), "stage {stage}");
            // All but one item: the next stage must not start, nor the launch complete.
            let mut pending: Vec<u32> = items.clone().rev().collect();
            let last = pending.pop().unwrap();
            hal.finish_items(pending);
            firmware.step(&mut hal);
            assert_eq!(
                hal.compute.launches().len(),
                stage + 1,
                "stage {stage} overlapped"
            );
            assert!(hal.registers.bulk_completions().is_empty());
            hal.finish_items([last]);
            firmware.step(&mut hal);
        }
        assert_eq!(hal.compute.launches().len(), 4);
        assert_eq!(
            hal.registers.bulk_completions(),
            [BulkCompletion {
                tag: 7,
                status: Status::Ok
            }]
        );
        // The stages ran in order on real data: the result is the layer's answer.
        let (partials, _, _, _) = plain(&layer());
        let got = get_floats(&hal.memory, RESULT, (HEADS * HIDDEN) as usize);
        assert_close(&got, &partials, "partial");
    }

    #[test]
    fn valid_command_decodes_into_four_stages_with_the_documented_items() {
        let memory = loaded(&layer());
        let kernel = OptKernel::decode(&command(), &memory).unwrap();
        assert_eq!(kernel.stages(), 4);
        // 96 rows / 7 = 14; 2 heads x ceil(6 / 4) = 4; 2 heads x 1 block; 2 heads x ceil(32
        // rows / 5) = 14.
        assert_eq!(kernel.stage_items(0), 0..14);
        assert_eq!(kernel.stage_items(1), 14..18);
        assert_eq!(kernel.stage_items(2), 18..20);
        assert_eq!(kernel.stage_items(3), 20..34);
        assert_eq!(kernel.stage_items(4), 0..0);
        assert_eq!(kernel.stage_items(u32::MAX), 0..0);
        assert_eq!(kernel.items(), 34);
        assert_eq!(kernel.position(), 5);
        assert_eq!(kernel.parameters(), &parameters());
    }

    #[test]
    fn only_the_last_stage_has_results_and_they_tile_the_result_space() {
        let memory = loaded(&layer());
        let kernel = OptKernel::decode(&command(), &memory).unwrap();
        for item in 0..20 {
            let spec = kernel.item(item, &memory).unwrap();
            assert_eq!((spec.result_offset, spec.result_length), (0, 0));
            assert!(spec.cost.instructions() > 0 && spec.cost.bytes > 0);
        }
        // Local item i: head i % 2, rows [5 (i / 2), ..): the heads alternate, each item's
        // result is contiguous inside its head's partial, and together they tile [2][32] f32.
        let mut covered = [0_u8; 256];
        for local in 0..14_u32 {
            let spec = kernel.item(20 + local, &memory).unwrap();
            let (head, block) = (local % 2, local / 2);
            let rows = (5 * block).min(32)..(5 * block + 5).min(32);
            assert_eq!(
                spec.result_offset,
                u64::from(head * HIDDEN + rows.start) * 4,
                "item {local}"
            );
            assert_eq!(spec.result_length, rows.len() as u32 * 4);
            assert_eq!(
                spec.cost,
                output_item_cost(HEAD_DIM, rows.len() as u32, head == 0)
            );
            for byte in spec.result_offset..spec.result_offset + u64::from(spec.result_length) {
                covered[byte as usize] += 1;
            }
        }
        assert!(covered.iter().all(|c| *c == 1));
        // The last two output items are short: rows 30 and 31 of heads 0 and 1.
        let last = kernel.item(33, &memory).unwrap();
        assert_eq!((last.result_offset, last.result_length), (128 + 120, 8));
        let last_of_head0 = kernel.item(32, &memory).unwrap();
        assert_eq!(
            (last_of_head0.result_offset, last_of_head0.result_length),
            (120, 8)
        );
        assert_eq!(kernel.item(34, &memory), Err(Status::ArgumentOutOfRange));
        assert_eq!(
            kernel.item(u32::MAX, &memory),
            Err(Status::ArgumentOutOfRange)
        );
    }

    #[test]
    fn paper_item_costs() {
        // Stage 0: 30 rows of 2560 (160 groups, 40 unrolled iterations).
        let qkv = qkv_item_cost(2560, 30);
        assert_eq!(
            qkv.instructions(),
            160 * 14 + 12 + 30 * (160 * 4 + 40 * 3 + 10) + 16
        );
        assert_eq!(qkv.bytes, 3 * 2560 * 4 + 30 * (2560 + 2) * 4);
        let scores = score_item_cost(80, 128);
        assert_eq!(scores.instructions(), 5 + 128 * (5 * 3 + 7) + 16);
        assert_eq!(scores.bytes, 80 * 4 + 128 * 81 * 4);
        let values = value_item_cost(1024);
        assert_eq!(values.instructions(), 64 * 18 + 1024 * 6 + 9 + 16);
        assert_eq!(values.bytes, 1024 * 68 + 64);
        // Stage 3: 320 rows of one head (80 columns, 5 register groups).
        let output = output_item_cost(80, 320, false);
        assert_eq!(output.instructions(), 5 + 320 * (5 * 3 + 7) + 16);
        assert_eq!(output.bytes, 80 * 4 + 320 * 81 * 4);
        let head0 = output_item_cost(80, 320, true);
        assert_eq!(head0.instructions(), 5 + 320 * (5 * 3 + 7 + 4) + 16);
        assert_eq!(head0.bytes, 80 * 4 + 320 * (81 * 4 + 8));
    }

    #[test]
    fn kernel_matches_a_plain_f64_layer_and_appends_the_token_to_the_caches() {
        let layer = layer();
        let mut memory = loaded(&layer);
        run(&mut memory);
        let (partials, result, keys, values) = plain(&layer);
        let cache = (HEADS * CAPACITY * HEAD_DIM) as usize;
        let got = get_floats(&memory, RESULT, (HEADS * HIDDEN) as usize);
        assert_close(&got, &partials, "partial");
        // Adding the partials in head order gives the attention block's output.
        let h = HIDDEN as usize;
        let summed: Vec<f32> = (0..h).map(|row| got[row] + got[h + row]).collect();
        assert_close(&summed, &result, "result");
        assert_close(&get_floats(&memory, KEYS, cache), &keys, "key");
        assert_close(&get_floats(&memory, VALUES, cache), &values, "value");
        // Positions past the current one are untouched.
        let keys_after = get_floats(&memory, KEYS, cache);
        for head in 0..HEADS as usize {
            let from = (head * CAPACITY as usize + 6) * HEAD_DIM as usize;
            let to = (head + 1) * (CAPACITY * HEAD_DIM) as usize;
            assert_eq!(keys_after[from..to], layer.keys[from..to]);
        }
    }

    #[test]
    fn partials_are_the_heads_columns_and_head_zero_carries_bias_and_residual() {
        let layer = layer();
        let mut memory = loaded(&layer);
        run(&mut memory);
        let (h, hd) = (HIDDEN as usize, HEAD_DIM as usize);
        let attention = get_floats(&memory, WORKSPACE + (32 + 2 * 8) * 4, h);
        let got = get_floats(&memory, RESULT, 2 * h);
        for head in 0..2 {
            for row in 0..h {
                let columns = row * h + head * hd..row * h + (head + 1) * hd;
                let sum = dot(
                    &layer.output_weight[columns],
                    &attention[head * hd..(head + 1) * hd],
                );
                let expected = if head == 0 {
                    layer.x[row] + (sum + layer.output_bias[row])
                } else {
                    sum
                };
                assert_eq!(got[head * h + row].to_bits(), expected.to_bits());
            }
        }
        // With a zero output weight head 0's partial is exactly x + bias, head 1's zero.
        let mut zero = loaded(&layer);
        put_floats(&mut zero, OUTPUT_WEIGHT, &vec![0.0; h * h]);
        run(&mut zero);
        let got = get_floats(&zero, RESULT, 2 * h);
        for row in 0..h {
            assert_eq!(got[row], layer.x[row] + layer.output_bias[row]);
            assert_eq!(got[h + row].to_bits(), 0.0_f32.to_bits());
        }
        assert_eq!(head_partial(0, 1.0, 2.0, 4.0), 7.0);
        assert_eq!(head_partial(3, 1.0, 2.0, 4.0), 1.0);
    }

    #[test]
    fn results_do_not_depend_on_the_work_split() {
        let layer = layer();
        let mut memory = loaded(&layer);
        run(&mut memory);
        let expected = get_floats(&memory, RESULT, (HEADS * HIDDEN) as usize);
        for (qkv, scores, output) in [(1, 1, 1), (96, 6, 32), (13, 5, 3), (1000, 1000, 1000)] {
            let mut other = loaded(&layer);
            let mut p = parameters();
            p.qkv_rows_per_item = qkv;
            p.score_tokens_per_item = scores;
            p.output_rows_per_item = output;
            other.put(DeviceAddress(PARAMETERS), &p);
            run(&mut other);
            let got = get_floats(&other, RESULT, (HEADS * HIDDEN) as usize);
            assert_eq!(
                got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                expected.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn lane_sum_follows_the_documented_order_however_it_is_fed() {
        let a: Vec<f32> = (0..75).map(|j| (j as f32 * 0.37).sin() * 1000.0).collect();
        let b: Vec<f32> = (0..75).map(|j| (j as f32 * 0.11).cos()).collect();
        let mut lanes = [0.0_f32; 16];
        for j in 0..75 {
            lanes[j % 16] += a[j] * b[j];
        }
        let mut expected = 0.0_f32;
        for lane in lanes {
            expected += lane;
        }
        assert_eq!(dot(&a, &b).to_bits(), expected.to_bits());
        let mut split = LaneSum::default();
        split.add_products(&a[..3], &b[..3]);
        split.add_products(&a[3..40], &b[3..40]);
        split.add_products(&a[40..], &b[40..]);
        assert_eq!(split.finish().to_bits(), expected.to_bits());
    }

    #[test]
    fn softmax_and_layer_norm_helpers_on_hand_checkable_inputs() {
        let mut scores = [1.0_f32, 3.0, 2.0];
        let sum = softmax_weights(&mut scores);
        assert_eq!(scores[1], 1.0);
        assert_eq!(scores[0], libm::expf(-2.0));
        assert_eq!(sum, (0.0 + libm::expf(-2.0)) + 1.0 + libm::expf(-1.0));
        assert_eq!(softmax_weights(&mut []), 0.0);
        let (mean, reciprocal) = layer_norm_statistics(&[1.0, 3.0, 1.0, 3.0]);
        assert_eq!(mean, 2.0);
        assert_eq!(reciprocal, 1.0 / libm::sqrtf(1.0 + LAYER_NORM_EPSILON));
        let mut out = [0.0; 2];
        layer_norm(&[0.0, 2.0], &[2.0, 2.0], &[1.0, 1.0], &mut out);
        let r = 1.0 / libm::sqrtf(1.0 + LAYER_NORM_EPSILON);
        assert_eq!(out, [-r * 2.0 + 1.0, r * 2.0 + 1.0]);
        let mut accumulator = [1.0_f32, 2.0];
        accumulate_weighted(&mut accumulator, 0.5, &[2.0, 4.0]);
        assert_eq!(accumulator, [2.0, 4.0]);
        assert_eq!(attention_scale(16), 0.25);
    }

    fn rejected(memory: &FakeMemory, command: &CommandDescriptor, status: Status) {
        assert_eq!(
            OptKernel::decode(command, memory),
            Err(status),
            "{command:?}"
        );
    }

    #[test]
    fn wrong_kernel_flags_position_or_result_length_are_rejected() {
        let memory = loaded(&layer());
        let mut c = command();
        c.kernel = KernelId::KnnDistance as u32;
        rejected(&memory, &c, Status::UnknownKernel);
        let mut c = command();
        c.flags = 1;
        rejected(&memory, &c, Status::MalformedDescriptor);
        for position in [8, 9, u64::from(u32::MAX), 1 << 32, u64::MAX] {
            let mut c = command();
            c.args[3] = position;
            rejected(&memory, &c, Status::ArgumentOutOfRange);
        }
        for length in [0, 124, 127, 128, 129, 132, 252, 255, 257, 260, u64::MAX] {
            let mut c = command();
            c.result_length = length;
            rejected(&memory, &c, Status::ArgumentOutOfRange);
        }
        // Position 7 (the last slot) is fine.
        let mut c = command();
        c.args[3] = 7;
        assert!(OptKernel::decode(&c, &memory).is_ok());
    }

    #[test]
    fn bad_parameter_blocks_are_rejected() {
        let changes: [fn(&mut OptParameters); 18] = [
            |p| p.hidden = 0,
            |p| p.heads = 0,
            |p| p.head_dim = 0,
            |p| p.capacity = 0,
            |p| p.qkv_rows_per_item = 0,
            |p| p.score_tokens_per_item = 0,
            |p| p.output_rows_per_item = 0,
            |p| p.reserved = 1,
            |p| p.head_dim = 8,
            |p| p.hidden = 48,
            |p| {
                p.heads = 1;
                p.head_dim = 272;
                p.hidden = 272;
            },
            |p| p.capacity = MAX_POSITIONS + 1,
            |p| p.capacity = 5,
            |p| p.input = 0x1101,
            |p| p.qkv_weight = MEMORY - 0x100,
            |p| p.workspace = QKV_WEIGHT + 0x100,
            |p| p.workspace = RESULT - 4,
            |p| p.workspace = u64::MAX - 3,
        ];
        for change in changes {
            let mut memory = loaded(&layer());
            let mut p = parameters();
            change(&mut p);
            memory.put(DeviceAddress(PARAMETERS), &p);
            rejected(&memory, &command(), Status::ArgumentOutOfRange);
        }
    }

    #[test]
    fn written_ranges_overlapping_anything_are_rejected() {
        let memory = loaded(&layer());
        let cases = [
            // Parameter block misaligned or outside memory.
            (0, PARAMETERS + 4),
            (0, MEMORY - 8),
            (0, u64::MAX - 7),
            // Key cache over the values, over the weights, outside memory, misaligned.
            (1, VALUES - 4),
            (1, QKV_WEIGHT),
            (1, MEMORY - 4),
            (1, KEYS + 2),
            // Value cache over the result, over the parameter block.
            (2, RESULT - 0x100),
            (2, PARAMETERS),
            (2, KEYS),
        ];
        for (arg, address) in cases {
            let mut c = command();
            c.args[arg] = address;
            rejected(&memory, &c, Status::ArgumentOutOfRange);
        }
        for result in [
            INPUT,
            WORKSPACE + 4,
            KEYS + 0x3FC,
            VALUES - 0xFC,
            MEMORY - 4,
            MEMORY - 0xFC,
            RESULT + 1,
        ] {
            let mut c = command();
            c.result_address = result;
            rejected(&memory, &c, Status::ArgumentOutOfRange);
        }
        // Read-only inputs may overlap each other.
        let mut shared = loaded(&layer());
        let mut p = parameters();
        p.ln_beta = GAMMA;
        p.output_bias = INPUT;
        shared.put(DeviceAddress(PARAMETERS), &p);
        assert!(OptKernel::decode(&command(), &shared).is_ok());
    }

    #[test]
    fn execute_on_a_smaller_memory_reports_a_fault() {
        let memory = loaded(&layer());
        let kernel = OptKernel::decode(&command(), &memory).unwrap();
        let mut small = FakeMemory::new(0x3000);
        for item in [0, 14, 18, 20, 21] {
            assert_eq!(
                kernel.execute(item, &mut small),
                Err(Status::DeviceMemoryFault),
                "item {item}"
            );
        }
        assert_eq!(
            kernel.execute(34, &mut small),
            Err(Status::ArgumentOutOfRange)
        );
    }

    proptest! {
        /// Arbitrary commands over arbitrary parameter blocks in a small memory: decoding and
        /// executing whatever decodes never panics, and what decodes has a consistent plan.
        #[test]
        fn hostile_commands_never_panic(
            kernel in prop_oneof![Just(KernelId::OptAttention as u32), any::<u32>()],
            flags in prop_oneof![Just(0_u32), any::<u32>()],
            result_address in prop_oneof![(0_u64..0x1000).prop_map(|a| a * 16), any::<u64>()],
            result_length in prop_oneof![(0_u64..64).prop_map(|l| l * 16), any::<u64>()],
            args in prop_oneof![
                ((0_u64..0x100).prop_map(|a| a * 64), (0_u64..0x1000).prop_map(|a| a * 16), (0_u64..0x1000).prop_map(|a| a * 16), 0_u64..40)
                    .prop_map(|(a, b, c, d)| [a, b, c, d]),
                any::<[u64; 4]>(),
            ],
            shape in (0_u32..4, 0_u32..4, 0_u32..40, 0_u32..10),
            split in (0_u32..9, 0_u32..9, 0_u32..9, prop_oneof![Just(0_u32), any::<u32>()]),
            addresses in prop_oneof![
                proptest::array::uniform8((0_u64..0x1000).prop_map(|a| a * 16)),
                proptest::array::uniform8(any::<u64>()),
            ],
            block in 0_u64..0x4000,
        ) {
            let mut memory = FakeMemory::new(0x10000);
            let (heads, dim_groups, capacity, _) = shape;
            let head_dim = dim_groups * 16;
            let parameters = OptParameters {
                hidden: heads * head_dim,
                heads,
                head_dim,
                capacity,
                qkv_rows_per_item: split.0,
                score_tokens_per_item: split.1,
                output_rows_per_item: split.2,
                reserved: split.3,
                input: addresses[0],
                ln_gamma: addresses[1],
                ln_beta: addresses[2],
                qkv_weight: addresses[3],
                qkv_bias: addresses[4],
                output_weight: addresses[5],
                output_bias: addresses[6],
                workspace: addresses[7],
            };
            let at = (args[0] % 0xFF00) & !7;
            memory.put(DeviceAddress(at), &parameters);
            let _ = block;
            let command = CommandDescriptor { kernel, mode: 0, tag: 0, flags, result_address, result_length, args };
            if let Ok(decoded) = OptKernel::decode(&command, &memory) {
                prop_assert_eq!(decoded.stage_items(3).end, decoded.items());
                let mut covered = 0_u64;
                for item in 0..decoded.items() {
                    let spec = decoded.item(item, &memory);
                    prop_assert!(spec.is_ok());
                    covered += u64::from(spec.unwrap().result_length);
                    prop_assert_eq!(decoded.execute(item, &mut memory), Ok(()));
                }
                prop_assert_eq!(covered, command.result_length);
                prop_assert!(decoded.item(decoded.items(), &memory).is_err());
            }
        }

        /// The valid layer with a few fields nudged: whatever still decodes runs every item
        /// (stage by stage) without panicking, inside memory, and covers the result once.
        #[test]
        fn nudged_valid_commands_decode_and_execute_without_panicking(
            nudges in proptest::collection::vec((0_usize..16, -64_i64..64), 1..4),
            shape in (1_u32..3, 1_u32..3, 1_u32..9),
        ) {
            let layer = layer();
            let mut memory = loaded(&layer);
            let mut p = parameters();
            let mut c = command();
            for (field, delta) in nudges {
                let nudge32 = |v: u32| v.wrapping_add(delta as u32);
                let nudge64 = |v: u64| v.wrapping_add(delta as u64);
                match field {
                    0 => p.qkv_rows_per_item = nudge32(p.qkv_rows_per_item),
                    1 => p.score_tokens_per_item = nudge32(p.score_tokens_per_item),
                    2 => p.output_rows_per_item = nudge32(p.output_rows_per_item),
                    3 => p.capacity = nudge32(p.capacity),
                    4 => p.input = nudge64(p.input),
                    5 => p.qkv_weight = nudge64(p.qkv_weight),
                    6 => p.output_weight = nudge64(p.output_weight),
                    7 => p.workspace = nudge64(p.workspace),
                    8 => c.args[1] = nudge64(c.args[1]),
                    9 => c.args[2] = nudge64(c.args[2]),
                    10 => c.args[3] = nudge64(c.args[3]),
                    11 => c.result_address = nudge64(c.result_address),
                    12 => c.result_length = nudge64(c.result_length),
                    13 => {
                        // Another consistent shape: heads x 16 dims, smaller than the layout.
                        p.heads = shape.0;
                        p.head_dim = 16 * shape.1;
                        p.hidden = p.heads * p.head_dim;
                        p.capacity = shape.2;
                        c.result_length = u64::from(p.heads * p.hidden) * 4;
                        c.args[3] = u64::from(shape.2 - 1);
                    }
                    14 => c.args[0] = nudge64(c.args[0]),
                    _ => p.ln_gamma = nudge64(p.ln_gamma),
                }
            }
            memory.put(DeviceAddress(PARAMETERS), &p);
            if let Ok(decoded) = OptKernel::decode(&c, &memory) {
                let mut covered = vec![0_u8; c.result_length as usize];
                for stage in 0..decoded.stages() {
                    for item in decoded.stage_items(stage) {
                        let spec = decoded.item(item, &memory).unwrap();
                        for byte in spec.result_offset..spec.result_offset + u64::from(spec.result_length) {
                            covered[byte as usize] += 1;
                        }
                        prop_assert_eq!(decoded.execute(item, &mut memory), Ok(()));
                    }
                }
                prop_assert!(covered.iter().all(|c| *c == 1));
            }
        }
    }
}
