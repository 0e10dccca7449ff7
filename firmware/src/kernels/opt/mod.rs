//! OPT attention block kernel: the device half of one decoder layer of an OPT decode step
//! (paper Table IV (h)), decomposed as M²NDP's OPT benchmark decomposes it
//! (`examples/benchmarks/opt/`; the paper's Figure 3 lists its kernels: LayerNorm0, QKVProj,
//! Attention1, Attention2, OutProj, Residual). Its result is the attention block's output,
//! `[1, hidden]` `f32` (10 KB at paper scale), what the paper's Section V-B calls the
//! "considerably small" intermediate the host's MLP needs.
//!
//! # Command ([`shared_abi::KernelId::OptAttention`])
//!
//! | field | meaning |
//! |---|---|
//! | `args[0]` | device address of the [`OptParameters`] block (8-byte aligned) |
//! | `args[1]` | device address of this layer's key cache: `heads x capacity x head_dim` `f32`, head-major |
//! | `args[2]` | device address of this layer's value cache, the same layout |
//! | `args[3]` | `position`: tokens already in the cache; the current token goes there (`< capacity`) |
//! | `result_address`, `result_length` | the result space: exactly `hidden * 4` bytes |
//! | `flags` | reserved, must be zero |
//!
//! The parameter block holds the shapes, the output projection's K split, and the addresses of
//! the input hidden state `x` (`hidden` `f32`), the LayerNorm0 `gamma` and `beta` (`hidden`
//! each), the stacked Q/K/V weight (`3 hidden` rows of `hidden`, row-major: output row `r` is
//! the dot product of weight row `r` with the normalized input) and bias (`3 hidden`), the
//! output weight (`hidden x hidden`, row-major) and bias (`hidden`), and the kernel's
//! workspace ([`workspace_bytes`]). All values are little-endian `f32`. The block's layout, the
//! shape limits and the cache and workspace sizes are part of the ABI
//! ([`shared_abi::params::opt`], re-exported here).
//!
//! # Work items: M²NDP's µthreads
//!
//! M²NDP runs one µthread per 32-byte packet of a kernel's base region (its µthread generator,
//! `src/uthread_generator.cc`, steps the region by `PACKET_SIZE = 32`; the paper, Section V-A:
//! each µthread is "assigned a fixed-size input vector"). A packet is [`LANES`] `f32`, one
//! vector register at M²NDP's `simd_width=256`. Each stage below is one of M²NDP's kernels (or
//! kernel bodies), with its base region and so its µthreads; an item here is one such µthread.
//! Stages are separated by barriers (the command processor dispatches a stage when the previous
//! one has finished: M²NDP's kernel boundaries, and its per-unit barrier between the bodies of
//! one kernel, made device-wide). Items are numbered globally, stage after stage; within a
//! stage, head-major where there are heads. `T = position + 1` tokens are attended; a *token
//! packet* is 8 consecutive tokens, a *softmax block* 8 token packets (64 tokens: the 256-byte
//! chunk of a head's scores that M²NDP's address interleaving, `m2ndp_interleave_size=256`,
//! gives one processing unit).
//!
//! | stage | M²NDP kernel | items | what an item does |
//! |---|---|---|---|
//! | 0 statistics | `OptLayerNorm0` | 1 | sums `x` and `x * x` in packet order; writes `mean` and `1 / sqrt(var + eps)` |
//! | 1 normalize | `OptLayerNorm1` | `hidden / 8` | one packet of `n = ((x - mean) * rstd) * gamma + beta` |
//! | 2 QKV | `OptQKVProj` (`OptGemvOutputMapSplit`, split 1) | `3 hidden / 8` | 8 output rows: `q` to the workspace, the key and value rows to the caches at `position` |
//! | 3 scores | `OptAttention1Kernel`, body 1 | `heads * ceil(T / 8)` | one token packet's scaled scores `dot(q_h, k_t) * (1 / sqrt(head_dim))` and their max |
//! | 4 exponents | `OptAttention1Kernel`, body 2 | the same | `exp(s - m_b)` over the packet (`m_b`: its block's max) and their sum |
//! | 5 values | `OptAttention1Kernel`, body 3 | the same | the packet's weighted values: `sum_t e_t * v_t` (`head_dim` values) |
//! | 6 blocks | `OptAttention1Kernel`, finalizer | `heads * ceil(T / 64)` | a block's max, sum and weighted values from its packets' |
//! | 7 attention | `OptAttention2Kernel` | `heads * head_dim / 8` | 8 dimensions of a head's output: the blocks rescaled to the head's max, over the total |
//! | 8 out-proj | `OptOutProj` (`OptGemvOutputMapSplit`, split `output_split`) | `output_split * hidden / 8` | 8 rows' partial sums over one part of the columns |
//! | 9 residual | `OptResidual` | `hidden / 8` | one packet of `x + ((sum of the parts) + bias)`: the result |
//!
//! Only stage 9's items have a result: item `p` of the stage writes bytes `[32 p, 32 p + 32)`.
//! Every other item has `result_offset` 0 and `result_length` 0 and writes only the workspace
//! (and, in stage 2, the caches).
//!
//! ## The GEMVs (stages 2 and 8)
//!
//! M²NDP's `OptGemvOutputMapSplit` gives a µthread 8 consecutive output rows and one of
//! `split` parts of the columns: with `OFFSET` the µthread's packet offset, part `OFFSET mod
//! 32 split / 32` and rows `8 (OFFSET / 32 split) ..`; part `s` takes the 64-column blocks `s,
//! s + split, s + 2 split, ...`. Its loop loads one block of the input (8 packets, from the
//! scratchpad) and, for each of the 8 rows, the row's 8 packets of that block and 8
//! `vfmacc.vv` into the row's accumulator. So item `i` of stage 8 is part `i mod split` of the
//! rows `8 (i / split) ..`, and item `i` of stage 2 the rows `8 i ..`. QKV uses split 1
//! (`OptQKVProj` for `opt-2.7b`), the output projection split 4 (`OptOutProj`): the parts'
//! partial sums are added by `vamoaddei32` into the output there; here each part's sums go to
//! the workspace and stage 9 adds them in part order (see the arithmetic below).
//! [`OptParameters::output_split`] is that split.
//!
//! ## Where this differs from M²NDP, and why
//!
//! - **No floating-point atomics.** M²NDP reduces across µthreads with atomic adds and maxima
//!   (`vamoaddei32`, `vamomaxei32`, `famoadd.w`) into a unit's scratchpad or into memory, in
//!   the order µthreads happen to finish. The order of a floating-point sum changes its
//!   rounding, and results here must be bit-exact with the host reference (which calls the
//!   same arithmetic helpers), so every reduction has a fixed order: each µthread stores its
//!   partial, and the next stage (or stage 6, M²NDP's per-unit finalizer of Attention1) adds
//!   the partials in index order. LayerNorm0's statistics are one item (stage 0) that
//!   accumulates every packet in order, where M²NDP's 320 µthreads add into the scratchpad and
//!   32 finalizers into memory; the instruction count is about the same, but the work is on
//!   one µthread (about 1,400 instructions, under a microsecond per layer).
//! - **Per-unit set-up is charged per item.** M²NDP's initializers and finalizers run once per
//!   processing unit and launch (staging the input vector or the query into the scratchpad,
//!   Attention2's rescale factors). Here an item is charged its share as the body's own
//!   instructions: Attention2's factors are recomputed by each of its items (10 per head, where
//!   M²NDP's 320-byte base region touches 2 units); the staged input of the GEMVs and the
//!   query are read from the scratchpad (instructions, no device-memory bytes), and the copies
//!   into it (one vector per unit and launch) are not charged.
//! - **OPT's bias, affine LayerNorm and score scale.** M²NDP's benchmark leaves out the
//!   projections' biases, LayerNorm's `gamma` and `beta`, LayerNorm's epsilon and the `1 /
//!   sqrt(head_dim)` of the scores; the model needs them, and they cost a few instructions in
//!   the stages that apply them.
//! - **The softmax maxima start from the first score**, not from M²NDP's zero-initialised
//!   scratchpad (a shift the softmax does not see).
//!
//! ## The previous decomposition, and Figure 16(h)
//!
//! Before this decomposition the last stage streamed every head's partial output projection
//! (split-K by head, `[heads][hidden]`, 320 KB per layer), a shape chosen so that every MLP
//! task needs more than 12.5% of the default ring (6,250 slots of 32 B) and the run deadlocks
//! there as the paper's Figure 16(h) reports. M²NDP's own OutProj splits K in 4 and reduces the
//! parts on the device, and its Residual leaves `[1, hidden]`: a 10 KB result, 320 slots. With
//! it no ring of 12.5% deadlocks, and this model does not reproduce Figure 16(h)'s deadlock;
//! nothing here constructs one.
//!
//! # Validation (everything a hostile host can send)
//!
//! - `kernel` is not OPT: [`FirmwareError::UnknownKernel`]; `flags != 0`: [`FirmwareError::MalformedDescriptor`].
//! - The parameter block not 8-byte aligned or not inside device memory, any shape zero,
//!   `head_dim` not a multiple of [`LANES`] or above [`MAX_HEAD_DIM`], `hidden != heads *
//!   head_dim` or above [`MAX_HIDDEN`], `capacity` above [`MAX_POSITIONS`], `position >=
//!   capacity`, `output_split` zero or above [`MAX_OUTPUT_SPLIT`], `reserved` not all zero, any
//!   address not 4-byte aligned, any range overflowing or ending beyond device memory,
//!   `result_length != hidden * 4`, the item count not fitting a `u32`, or any written range
//!   (the two caches, the workspace, the result) overlapping another range:
//!   [`FirmwareError::ArgumentOutOfRange`]. Read-only inputs may overlap each other.
//!
//! Every size is computed with checked arithmetic; nothing here can panic.
//!
//! # Arithmetic and summation order (bit-exact contract with the host reference)
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
//! uses `libm::expf`, LayerNorm `libm::sqrtf`. These helpers live in the `kernel-arith` crate
//! (re-exported here); the host reference (crate `workloads`) calls the same functions, so
//! device and reference agree bit for bit.
//!
//! The modelled instructions are M²NDP's fused `vfmacc`; the arithmetic rounds the product and
//! the sum separately. A fused multiply-add has no fast portable implementation on the hosts
//! that run the emulator and the reference (`libm::fmaf` measured 2.6 ns per multiply-add
//! against 0.08 ns for the unfused pair, on the development machine; a decode step does some
//! 840 million on the device side, and the reference does them again), and the difference is
//! in the last bits. So the cost model counts one vector instruction per multiply-add, as
//! M²NDP issues it, while the values are those of the unfused pair.
//!
//! # Cost model
//!
//! Each stage's costs are [`ItemCost`] constants beside the M²NDP kernel lines they count,
//! by functional unit: scalar, scalar memory (scratchpad or device memory), vector, vector
//! memory. Bytes are device-memory bytes of streamed 32-byte packets; scratchpad accesses
//! (the staged input vector, the query, Attention1's scores and partials, which M²NDP keeps in the unit's
//! scratchpad between the bodies of one kernel) cost instructions and no bytes, and so do the
//! few values every item of a stage reads (LayerNorm's mean and reciprocal deviation), which
//! stay in the unit's L1 after the first.

use crate::error::FirmwareError;
use core::ops::Range;

use crate::hal::DeviceMemory;
use crate::kernels::ranges::{checked_range, overlaps};
use crate::kernels::{ItemCost, ItemSpec};
use shared_abi::{CommandDescriptor, DeviceAddress, KernelId};

// The arithmetic shared with the host reference (see the module docs), from `kernel-arith`.
pub use kernel_arith::opt::{
    accumulate_weighted, add_into, attention_scale, block_factors, block_output, dot, dot_lanes,
    exponents, layer_norm_moments, normalize, ordered_sum, project, residual, running_max, scale,
    score, split_dot, LaneSum, LayerNormMoments, GEMV_BLOCK_ELEMENTS, LAYER_NORM_EPSILON,
};
// The command's contract (parameter block, limits, workspace and cache sizes), from
// `shared-abi`.
pub use shared_abi::params::opt::{
    cache_bytes, workspace_bytes, OptParameters, WorkspaceLayout, ADDRESS_ALIGNMENT, ELEMENT_BYTES,
    MAX_HEAD_DIM, MAX_HIDDEN, MAX_OUTPUT_SPLIT, MAX_POSITIONS, PACKET_ELEMENTS,
    PARAMETER_ALIGNMENT, PARAMETER_BYTES, SOFTMAX_BLOCK_PACKETS,
};

/// Vector lanes of the modelled µthread: [`super::VECTOR_LANES`] (M²NDP's `simd_width=256`, 8
/// `f32`); also the elements of one packet.
pub const LANES: usize = super::VECTOR_LANES;

/// Bytes of one packet: M²NDP's µthread input vector (half a DDR5 burst,
/// [`super::DRAM_BURST_BYTES`]; the stages' packets stream, so each costs its size).
pub const PACKET_BYTES: u64 = 32;

/// Output rows of one GEMV µthread (stages 2 and 8): one packet's worth, as M²NDP's
/// `OptGemvOutputMapSplit` keeps one accumulator register per row of its output packet.
pub const GEMV_ROWS: u32 = PACKET_ELEMENTS;

/// Dimension packets per iteration of Attention1's loops over `head_dim`: M²NDP's unroll level
/// for a head dimension that is a multiple of 10 (OPT-2.7B's 80: one iteration).
pub const HEAD_UNROLL_PACKETS: u32 = 10;

/// Largest softmax block count of a head: `MAX_POSITIONS / 64`.
pub const MAX_BLOCKS: u32 = MAX_POSITIONS / (SOFTMAX_BLOCK_PACKETS * PACKET_ELEMENTS);

/// Stages of every launch.
pub const STAGES: u32 = 10;

/// Elements the kernel reads per device-memory access into its stack buffers (a simulation
/// detail, not part of the model).
pub const CHUNK_ELEMENTS: usize = 64;

/// Bytes of one chunk buffer.
const CHUNK_BYTES: usize = CHUNK_ELEMENTS * 4;

/// The stages, in order (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Stage {
    /// LayerNorm0's statistics.
    Statistics = 0,
    /// LayerNorm0's normalization.
    Normalize = 1,
    /// The Q/K/V projection.
    Qkv = 2,
    /// Attention1, body 1: scores.
    Scores = 3,
    /// Attention1, body 2: exponents.
    Exponents = 4,
    /// Attention1, body 3: weighted values.
    Values = 5,
    /// Attention1's finalizer: softmax blocks.
    Blocks = 6,
    /// Attention2.
    Attention = 7,
    /// The output projection's parts.
    OutProj = 8,
    /// The residual: the result.
    Residual = 9,
}

mod cost;
mod execute;
#[cfg(test)]
mod fixtures;
mod plan;

pub use cost::*;
pub use plan::OptKernel;
