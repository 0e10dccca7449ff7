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

// ---------------------------------------------------------------------------------------------
// Cost model
// ---------------------------------------------------------------------------------------------

/// Stage 0, fixed: `vsetvli`, `li` of the argument block, the conversion of `hidden` to a
/// float, the two divisions by it (mean, mean square), the variance (`fmul`, `fsub`), the
/// epsilon add, `fsqrt.s`, `li` and `fcvt` of 1.0 and the reciprocal's `fdiv` (12 scalar);
/// the `ld` of `x`'s, the workspace's and `hidden`'s slots, the `flw` of epsilon, the two
/// `fsw` of mean and reciprocal deviation (6 scalar memory); clearing the two lane
/// accumulators and the reduction's zero (`vmv.v.i`, 3), two `vfredosum.vs` and two
/// `vfmv.f.s` (7 vector); 8 bytes stored.
pub const STATISTICS_FIXED: ItemCost = ItemCost {
    scalar: 12,
    scalar_memory: 6,
    vector: 7,
    vector_memory: 0,
    indexed_extra_cycles: 0,
    bytes: 8,
};

/// Stage 0, per packet of `x`: `vle32.v` (32 bytes), `vfadd.vv` into the sum lanes,
/// `vfmul.vv` for the squares and `vfadd.vv` into their lanes (M²NDP's body: `vle32.v`,
/// `vfmul.vv`, two `vamoaddei32.v`).
pub const STATISTICS_PER_PACKET: ItemCost = ItemCost {
    scalar: 0,
    scalar_memory: 0,
    vector: 3,
    vector_memory: 1,
    indexed_extra_cycles: 0,
    bytes: PACKET_BYTES,
};

/// Stage 0, per loop iteration of 8 packets: the pointer bump, the count and `blt`.
pub const STATISTICS_PER_ITERATION: ItemCost = ItemCost::scalar(3);

/// Stage 1 (M²NDP `OptLayerNorm1` body, with OPT's `gamma` and `beta`): `vsetvli`, `li`, three
/// `add`s of the packet offset (5 scalar); `ld` of `gamma`'s, `beta`'s and the workspace's
/// slots and `flw` of the mean and the reciprocal deviation (5 scalar memory, L1-resident:
/// no bytes); `vfsub.vf`, `vfmul.vf`, `vfmul.vv` by `gamma`, `vfadd.vv` of `beta` (4
/// vector); `vle32.v` of the `x`, `gamma` and `beta` packets and `vse32.v` of the result (4
/// vector memory, 128 bytes).
pub const NORMALIZE: ItemCost = ItemCost {
    scalar: 5,
    scalar_memory: 5,
    vector: 4,
    vector_memory: 4,
    indexed_extra_cycles: 0,
    bytes: 4 * PACKET_BYTES,
};

/// Stages 2 and 8, fixed part shared by both GEMVs (M²NDP `OptGemvOutputMapSplit`): the
/// staging body's path for a µthread that copies nothing (`vsetvli`, `li`, `slli`, `andi`,
/// `srli`, `slli`, `or`, `slli`, `addi`, `srli`, `bge`: 11 scalar; two `ld`); the main body's
/// set-up (`vsetvli`, `li`, `andi`, `srli`, `slli`, `mul`, `slli`, `add`, `add`, `addi`,
/// `add`, `slli`, `srli`, `add`: 14 scalar; three `ld`; `vmv.v.i`, `vfcvt.f.x.v` and 7
/// `vmv.v.v` clearing the 8 row accumulators: 9 vector); the tail (`vmv.v.i`, 8
/// `vfredosum.vs`, 7 `vslide1up.vx` and `vfadd.vv` assembling the 8 row sums in one vector: 23
/// vector).
pub const GEMV_FIXED: ItemCost = ItemCost {
    scalar: 25,
    scalar_memory: 5,
    vector: 32,
    vector_memory: 0,
    indexed_extra_cycles: 0,
    bytes: 0,
};

/// Stages 2 and 8, per input packet: `vle32.v` of the input packet from the scratchpad and of
/// each of the 8 rows' packets (9 vector memory, 8 x 32 bytes of weights), 8 `vfmacc.vv`.
pub const GEMV_PER_PACKET: ItemCost = ItemCost {
    scalar: 0,
    scalar_memory: 0,
    vector: 8,
    vector_memory: 9,
    indexed_extra_cycles: 0,
    bytes: 8 * PACKET_BYTES,
};

/// Stages 2 and 8, per block of 64 columns (one loop iteration): `addi` of the row pointer, 7
/// `add`s of the row stride, the input and weight pointer bumps and `blt`.
pub const GEMV_PER_BLOCK: ItemCost = ItemCost::scalar(11);

/// Stage 2's tail beyond [`GEMV_FIXED`]: the destination (q in the workspace or the head's
/// cache slot at `position`: `divu`, `remu` by `hidden` and by `head_dim`, two multiply-adds,
/// a branch and the base: 10 scalar), the `ld`s of the bias, the two caches and `position` (4
/// scalar memory), the bias `vle32.v` and `vfadd.vv`, the `vse32.v` of the 8 rows (where
/// M²NDP adds them atomically into a zeroed output); 64 bytes.
pub const QKV_TAIL: ItemCost = ItemCost {
    scalar: 10,
    scalar_memory: 4,
    vector: 1,
    vector_memory: 2,
    indexed_extra_cycles: 0,
    bytes: 2 * PACKET_BYTES,
};

/// Stage 8's tail beyond [`GEMV_FIXED`]: the part's slot in the workspace (`mul`, `add`) and
/// the `vse32.v` of the 8 partial sums (M²NDP: `vmset.m`, `vid.v`, `vsll.vi` and
/// `vamoaddei32.v` into the output); 32 bytes.
pub const OUT_PROJ_TAIL: ItemCost = ItemCost {
    scalar: 2,
    scalar_memory: 0,
    vector: 0,
    vector_memory: 1,
    indexed_extra_cycles: 0,
    bytes: PACKET_BYTES,
};

/// Stage 3 (M²NDP Attention1 body 1), fixed: `vsetvli`, `li`, `li`, `mul`, `slli`, `li`, `add`
/// (7); the scores' scratchpad offset (`andi`, `srli`, `slli`, `or`, `li`, `li`, `add`: 7) and
/// the head and packet of the item with the head's key base (`divu`, `remu`, `mul`, `add`: 4),
/// 18 scalar; the `ld`s of the key cache and `head_dim`, the `flw` of the scale, the `fsw` of
/// the packet's max to the scratchpad (4 scalar memory); `vmv.v.i`, `vfcvt.f.x.v`, 8
/// `vmv.v.v` clearing the token accumulators, 8 `vfredosum.vs`, 7 `vslide1up.vx` and
/// `vfadd.vv`, the scale's `vfmul.vf`, `vfredmax.vs` and `vfmv.f.s` (35 vector; M²NDP's
/// `vmset.m`, `vid.v`, `vsll.vi` and `vamomaxei32.v` give way to the last two and the
/// `fsw`); the scores' `vse32.v` to the scratchpad (1 vector memory).
pub const SCORES_FIXED: ItemCost = ItemCost {
    scalar: 18,
    scalar_memory: 4,
    vector: 35,
    vector_memory: 1,
    indexed_extra_cycles: 0,
    bytes: 0,
};

/// Stage 3, per packet of `head_dim`: `vle32.v` of the query packet (scratchpad) and of the
/// 8 tokens' key packets (8 x 32 bytes), 8 `vfmacc.vv`.
pub const SCORES_PER_DIM_PACKET: ItemCost = ItemCost {
    scalar: 0,
    scalar_memory: 0,
    vector: 8,
    vector_memory: 9,
    indexed_extra_cycles: 0,
    bytes: 8 * PACKET_BYTES,
};

/// Stages 3 and 5, per loop iteration over [`HEAD_UNROLL_PACKETS`] packets of `head_dim`: two
/// pointer `add`s (one in stage 5, where the loop ends with the store pointer's), 8 `add`s
/// of the token stride, `addi` and `blt`.
pub const HEAD_LOOP_PER_ITERATION: ItemCost = ItemCost::scalar(12);

/// Stage 4 (M²NDP Attention1 body 2): `vsetvli`, the scores' offset (`andi`, `srli`, `slli`,
/// `or`), the item's head and packet (`divu`, `remu`), its block's maxima (`li`, `srli`,
/// `slli`, `add`), `li` and `add` (13 scalar); the `fsw` of the packet's sum to the scratchpad
/// (M²NDP: `vamoaddei32.v` into the unit's sum; 1 scalar memory); `vfredmax.vs` and
/// `vfmv.f.s` of the block's max (M²NDP reads the unit's atomic max with one `flw`),
/// `vfsub.vf`, `vfexp.v`, `vmv.v.i`, `vfredosum.vs`, `vfmv.f.s` (7 vector); `vle32.v` of the
/// block's packet maxima and of the scores, `vse32.v` of the exponents, all in the scratchpad
/// (3 vector memory, no bytes).
pub const EXPONENTS: ItemCost = ItemCost {
    scalar: 13,
    scalar_memory: 1,
    vector: 7,
    vector_memory: 3,
    indexed_extra_cycles: 0,
    bytes: 0,
};

/// Stage 5 (M²NDP Attention1 body 3), fixed: `vsetvli`, `li`, `li`, the scores' offset and
/// `add` (5), `li`, `li`, `srli`, `mul`, `add`, `li`, `li` (7), the item's head and packet
/// and the head's value base (`divu`, `remu`, `mul`, `add`: 4), 19 scalar; the `ld` of the
/// value cache (1 scalar memory); 8 `vfmv.f.s` and 8 `vslide1down.vx` putting the packet's 8
/// exponents in scalar registers (16 vector; M²NDP's `vmset.m`, `vid.v`, `vsll.vi` for its
/// atomics are not needed); the `vle32.v` of the exponents from the scratchpad.
pub const VALUES_FIXED: ItemCost = ItemCost {
    scalar: 19,
    scalar_memory: 1,
    vector: 16,
    vector_memory: 1,
    indexed_extra_cycles: 0,
    bytes: 0,
};

/// Stage 5, per packet of `head_dim`: the accumulator's clear (`vmv.v.v`), 8 `vfmacc.vf` (9
/// vector); `vle32.v` of the 8 tokens' value packets (8 x 32 bytes) and the `vse32.v` of the
/// partial to the scratchpad (M²NDP: `vamoaddei32.v`), 9 vector memory; the store pointer's
/// `addi` (1 scalar).
pub const VALUES_PER_DIM_PACKET: ItemCost = ItemCost {
    scalar: 1,
    scalar_memory: 0,
    vector: 9,
    vector_memory: 9,
    indexed_extra_cycles: 0,
    bytes: 8 * PACKET_BYTES,
};

/// Stage 5, per loop iteration beyond [`HEAD_LOOP_PER_ITERATION`]: the `vfcvt.f.x.v` of the
/// first accumulator's clear.
pub const VALUES_PER_ITERATION: ItemCost = ItemCost::vector(1);

/// Stage 6 (M²NDP Attention1's finalizer, which also holds the reductions its atomics did),
/// fixed: `vsetvli`, `li`, the item's head and block and the three destinations (`divu`,
/// `remu`, three multiply-adds: 8), `li` and `add` of the packets' statistics (12 scalar); the
/// `ld`s of the block partials, `head_dim` and the coefficients, the two `fsw` of the block's
/// max and sum (5 scalar memory, 8 bytes); `vfredmax.vs`, `vfmv.f.s`, `vmv.v.i`,
/// `vfredosum.vs`, `vfmv.f.s` (5 vector); `vle32.v` of the packets' maxima and sums from the
/// scratchpad (2 vector memory).
pub const BLOCKS_FIXED: ItemCost = ItemCost {
    scalar: 12,
    scalar_memory: 5,
    vector: 5,
    vector_memory: 2,
    indexed_extra_cycles: 0,
    bytes: 8,
};

/// Stage 6, per packet of `head_dim`: the accumulator's `vmv.v.i`, the `vse32.v` of the
/// block's partial (32 bytes), two pointer `addi`s.
pub const BLOCKS_PER_DIM_PACKET: ItemCost = ItemCost {
    scalar: 2,
    scalar_memory: 0,
    vector: 1,
    vector_memory: 1,
    indexed_extra_cycles: 0,
    bytes: PACKET_BYTES,
};

/// Stage 6, per packet of `head_dim` and token packet of the block: `vle32.v` of that packet's
/// partial from the scratchpad, `vfadd.vv`, `addi`.
pub const BLOCKS_PER_PART: ItemCost = ItemCost {
    scalar: 1,
    scalar_memory: 0,
    vector: 1,
    vector_memory: 1,
    indexed_extra_cycles: 0,
    bytes: 0,
};

/// Stage 7 (M²NDP Attention2: its per-unit initializer, done by each item, and its body),
/// fixed: `vsetvli`, `li`, the item's head and dimensions with their addresses (`divu`,
/// `remu`, two multiply-adds: 6), `li`, `fmv.w.x`, `fdiv` of the total's reciprocal, the
/// body's `vsetvli`, `li` and `add` (14 scalar); `ld` of the coefficients, `fsw` of the
/// reciprocal, the body's `ld` and `flw` (4 scalar memory); `vmv.v.i` and `vfmv.f.s` of the
/// global max, `vmv.v.i` and `vfmv.f.s` of the total, the body's `vmv.v.i` and final
/// `vfmul.vf` (6 vector); the `vse32.v` of the 8 dimensions (32 bytes).
pub const ATTENTION_FIXED: ItemCost = ItemCost {
    scalar: 14,
    scalar_memory: 4,
    vector: 6,
    vector_memory: 1,
    indexed_extra_cycles: 0,
    bytes: PACKET_BYTES,
};

/// Stage 7, per packet of 8 block coefficients: `vle32.v` of the maxima and of the sums (64
/// bytes), the factors' `vse32.v` to the scratchpad and the body's `vle32.v` of them (4 vector
/// memory); `vfredmax.vs`, `vfsub.vf`, `vfexp.v`, `vfmul.vv` by the sums, `vfredosum.vs` (5
/// vector); three pointer `addi`s.
pub const ATTENTION_PER_COEFFICIENT_PACKET: ItemCost = ItemCost {
    scalar: 3,
    scalar_memory: 0,
    vector: 5,
    vector_memory: 4,
    indexed_extra_cycles: 0,
    bytes: 2 * PACKET_BYTES,
};

/// Stage 7, per block: `vle32.v` of the block's partial for the item's 8 dimensions (32
/// bytes), `addi`, `vfmv.f.s` of its factor, `vfmacc.vf`, `vslide1down.vx`.
pub const ATTENTION_PER_BLOCK: ItemCost = ItemCost {
    scalar: 1,
    scalar_memory: 0,
    vector: 3,
    vector_memory: 1,
    indexed_extra_cycles: 0,
    bytes: PACKET_BYTES,
};

/// Stage 9 (M²NDP `OptResidual`'s vector add, with the parts' sum and the bias), fixed:
/// `vsetvli`, `li`, three `add`s of the packet offset (5 scalar); `ld`s of the partials, the
/// bias, the result and the split (4 scalar memory); `vmv.v.i` of the sum, `vfadd.vv` of the
/// bias and of `x` (3 vector); `vle32.v` of the bias and `x` (`x1`) packets and `vse32.v` of
/// the result (3 vector memory, 96 bytes).
pub const RESIDUAL_FIXED: ItemCost = ItemCost {
    scalar: 5,
    scalar_memory: 4,
    vector: 3,
    vector_memory: 3,
    indexed_extra_cycles: 0,
    bytes: 3 * PACKET_BYTES,
};

/// Stage 9, per part of the output projection: `vle32.v` of its packet (32 bytes),
/// `vfadd.vv`, the pointer's `add`.
pub const RESIDUAL_PER_PART: ItemCost = ItemCost {
    scalar: 1,
    scalar_memory: 0,
    vector: 1,
    vector_memory: 1,
    indexed_extra_cycles: 0,
    bytes: PACKET_BYTES,
};

/// `count.div_ceil(per)` as `u64` (0 for `per == 0`).
fn ceil_div(count: u64, per: u64) -> u64 {
    if per == 0 {
        0
    } else {
        count.div_ceil(per)
    }
}

/// Stage 0's item over `hidden` elements.
pub fn statistics_cost(hidden: u32) -> ItemCost {
    let packets = ceil_div(u64::from(hidden), u64::from(PACKET_ELEMENTS));
    STATISTICS_FIXED
        .plus(STATISTICS_PER_PACKET.times(packets))
        .plus(STATISTICS_PER_ITERATION.times(ceil_div(packets, 8)))
}

/// A GEMV item (stages 2 and 8) whose part covers `columns` columns: [`GEMV_FIXED`], per
/// input packet [`GEMV_PER_PACKET`], per block of 64 columns [`GEMV_PER_BLOCK`].
pub fn gemv_cost(columns: u64) -> ItemCost {
    let packets = ceil_div(columns, u64::from(PACKET_ELEMENTS));
    let blocks = ceil_div(columns, u64::from(GEMV_BLOCK_ELEMENTS));
    GEMV_FIXED
        .plus(GEMV_PER_PACKET.times(packets))
        .plus(GEMV_PER_BLOCK.times(blocks))
}

/// Stage 2's item: [`gemv_cost`] over all `hidden` columns plus [`QKV_TAIL`].
pub fn qkv_cost(hidden: u32) -> ItemCost {
    gemv_cost(u64::from(hidden)).plus(QKV_TAIL)
}

/// Stage 8's item for part `part` of `split`: [`gemv_cost`] over the part's columns (the
/// 64-column blocks `part, part + split, ...`) plus [`OUT_PROJ_TAIL`].
pub fn out_proj_cost(hidden: u32, part: u32, split: u32) -> ItemCost {
    gemv_cost(part_columns(hidden, part, split)).plus(OUT_PROJ_TAIL)
}

/// Columns of part `part` of `split`: the 64-column blocks `part, part + split, ...` of
/// `hidden` columns (the last block may be short).
pub fn part_columns(hidden: u32, part: u32, split: u32) -> u64 {
    let block = u64::from(GEMV_BLOCK_ELEMENTS);
    let hidden = u64::from(hidden);
    let blocks = ceil_div(hidden, block);
    let (part, split) = (u64::from(part), u64::from(split));
    if split == 0 || part >= blocks {
        return 0;
    }
    // Blocks part, part + split, ... below `blocks`.
    let mine = ceil_div(blocks.saturating_sub(part), split);
    let last = part.saturating_add(mine.saturating_sub(1).saturating_mul(split));
    let full = mine.saturating_mul(block);
    if last.saturating_add(1) == blocks {
        // The part holds the last block, which may be short.
        full.saturating_sub(blocks.saturating_mul(block).saturating_sub(hidden))
    } else {
        full
    }
}

/// Iterations of a loop over `head_dim`'s packets, [`HEAD_UNROLL_PACKETS`] at a time.
fn head_iterations(head_dim: u32) -> u64 {
    ceil_div(
        ceil_div(u64::from(head_dim), u64::from(PACKET_ELEMENTS)),
        u64::from(HEAD_UNROLL_PACKETS),
    )
}

/// Stage 3's item: a full token packet (M²NDP's µthread always runs 8 tokens; a short last
/// packet costs a whole one).
pub fn scores_cost(head_dim: u32) -> ItemCost {
    let packets = ceil_div(u64::from(head_dim), u64::from(PACKET_ELEMENTS));
    SCORES_FIXED
        .plus(SCORES_PER_DIM_PACKET.times(packets))
        .plus(HEAD_LOOP_PER_ITERATION.times(head_iterations(head_dim)))
}

/// Stage 5's item (a full token packet).
pub fn values_cost(head_dim: u32) -> ItemCost {
    let packets = ceil_div(u64::from(head_dim), u64::from(PACKET_ELEMENTS));
    VALUES_FIXED
        .plus(VALUES_PER_DIM_PACKET.times(packets))
        .plus(
            HEAD_LOOP_PER_ITERATION
                .plus(VALUES_PER_ITERATION)
                .times(head_iterations(head_dim)),
        )
}

/// Stage 6's item for a block of `packets` token packets.
pub fn blocks_cost(head_dim: u32, packets: u32) -> ItemCost {
    let dim_packets = ceil_div(u64::from(head_dim), u64::from(PACKET_ELEMENTS));
    BLOCKS_FIXED.plus(
        BLOCKS_PER_DIM_PACKET
            .plus(BLOCKS_PER_PART.times(u64::from(packets)))
            .times(dim_packets),
    )
}

/// Stage 7's item for a head of `blocks` softmax blocks.
pub fn attention_cost(blocks: u32) -> ItemCost {
    let blocks = u64::from(blocks);
    ATTENTION_FIXED
        .plus(ATTENTION_PER_COEFFICIENT_PACKET.times(ceil_div(blocks, u64::from(PACKET_ELEMENTS))))
        .plus(ATTENTION_PER_BLOCK.times(blocks))
}

/// Stage 9's item with `split` parts.
pub fn residual_cost(split: u32) -> ItemCost {
    RESIDUAL_FIXED.plus(RESIDUAL_PER_PART.times(u64::from(split)))
}

// ---------------------------------------------------------------------------------------------
// Command
// ---------------------------------------------------------------------------------------------

/// What one item does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Work {
    /// Stage 0.
    Statistics,
    /// Stage 1: one packet of the normalized input.
    Normalize { packet: u32 },
    /// Stage 2: output rows `8 packet ..` of the stacked projection.
    Qkv { packet: u32 },
    /// Stage 3: one token packet of one head.
    Scores { head: u32, packet: u32 },
    /// Stage 4.
    Exponents { head: u32, packet: u32 },
    /// Stage 5.
    Values { head: u32, packet: u32 },
    /// Stage 6: one softmax block of one head.
    Blocks { head: u32, block: u32 },
    /// Stage 7: dimensions `8 packet ..` of one head.
    Attention { head: u32, packet: u32 },
    /// Stage 8: rows `8 packet ..`, part `part`.
    OutProj { part: u32, packet: u32 },
    /// Stage 9: one packet of the result.
    Residual { packet: u32 },
}

/// A decoded, validated OPT attention launch.
///
/// # Invariants
///
/// The parameters passed every check of the module docs against the device memory size the
/// command was decoded against; `stage_starts` is non-decreasing with `stage_starts[STAGES]`
/// the item count; `tokens = position + 1`, `token_packets = ceil(tokens / 8)`, `blocks =
/// ceil(token_packets / 8)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptKernel {
    parameters: OptParameters,
    key_cache: u64,
    value_cache: u64,
    position: u32,
    result: u64,
    layout: WorkspaceLayout,
    tokens: u32,
    token_packets: u32,
    blocks: u32,
    stage_starts: [u32; STAGES as usize + 1],
}

/// `a * b` as `u64`, or out of range.
fn product(a: u64, b: u64) -> Result<u64, FirmwareError> {
    a.checked_mul(b).ok_or(FirmwareError::ArgumentOutOfRange)
}

/// `a * b` as `u32`, or out of range.
fn product32(a: u32, b: u32) -> Result<u32, FirmwareError> {
    a.checked_mul(b).ok_or(FirmwareError::ArgumentOutOfRange)
}

/// `a / PACKET_ELEMENTS` (every caller's `a` is a multiple of it or wants the floor).
fn packets_of(a: u32) -> u32 {
    a / PACKET_ELEMENTS
}

impl OptKernel {
    /// Decodes and validates `command` against device memory (read only: the parameter
    /// block). See the module docs for every rule. Never panics.
    pub fn decode<M: DeviceMemory>(
        command: &CommandDescriptor,
        memory: &M,
    ) -> Result<Self, FirmwareError> {
        if command.kernel != KernelId::OptAttention as u32 {
            return Err(FirmwareError::UnknownKernel);
        }
        if command.flags != 0 {
            return Err(FirmwareError::MalformedDescriptor);
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
            || p.output_split == 0
            || p.output_split > MAX_OUTPUT_SPLIT
            || p.reserved != [0; 3]
            || p.head_dim > MAX_HEAD_DIM
            || p.hidden > MAX_HIDDEN
            || p.capacity > MAX_POSITIONS
            || p.head_dim.checked_rem(PACKET_ELEMENTS) != Some(0)
            || p.heads.checked_mul(p.head_dim) != Some(p.hidden)
        {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let position = u32::try_from(position).map_err(|_| FirmwareError::ArgumentOutOfRange)?;
        if position >= p.capacity {
            return Err(FirmwareError::ArgumentOutOfRange);
        }

        let hidden = u64::from(p.hidden);
        let vector_bytes = product(hidden, ELEMENT_BYTES)?;
        if command.result_length != vector_bytes {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let qkv_rows = product(hidden, 3)?;
        let cache = cache_bytes(p.heads, p.capacity, p.head_dim)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let layout =
            WorkspaceLayout::new(p.hidden, p.heads, p.head_dim, p.capacity, p.output_split)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let workspace = product(layout.elements, ELEMENT_BYTES)?;
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
            range(command.result_address, vector_bytes)?,
        ];
        for (index, target) in written.iter().enumerate() {
            if read_only.iter().any(|input| overlaps(*target, *input))
                || written
                    .iter()
                    .skip(index.saturating_add(1))
                    .any(|other| overlaps(*target, *other))
            {
                return Err(FirmwareError::ArgumentOutOfRange);
            }
        }

        let tokens = position
            .checked_add(1)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let token_packets = tokens.div_ceil(PACKET_ELEMENTS);
        let blocks = token_packets.div_ceil(SOFTMAX_BLOCK_PACKETS);
        let hidden_packets = packets_of(p.hidden);
        let dim_packets = packets_of(p.head_dim);
        let per_head = product32(p.heads, token_packets)?;
        let counts = [
            1,
            hidden_packets,
            product32(hidden_packets, 3)?,
            per_head,
            per_head,
            per_head,
            product32(p.heads, blocks)?,
            product32(p.heads, dim_packets)?,
            product32(hidden_packets, p.output_split)?,
            hidden_packets,
        ];
        let mut stage_starts = [0_u32; STAGES as usize + 1];
        let mut next = 0_u32;
        for (start, items) in stage_starts.iter_mut().skip(1).zip(counts) {
            next = next
                .checked_add(items)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            *start = next;
        }
        Ok(OptKernel {
            parameters,
            key_cache,
            value_cache,
            position,
            result: command.result_address,
            layout,
            tokens,
            token_packets,
            blocks,
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

    /// The workspace's layout.
    pub fn layout(&self) -> &WorkspaceLayout {
        &self.layout
    }

    /// Work items, over all stages.
    pub fn items(&self) -> u32 {
        self.stage_starts.get(STAGES as usize).copied().unwrap_or(0)
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

    /// The stage of item `index` and its index within the stage.
    fn locate(&self, index: u32) -> Result<(u32, u32), FirmwareError> {
        if index >= self.items() {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        for stage in 0..STAGES {
            let items = self.stage_items(stage);
            if items.contains(&index) {
                let local = index
                    .checked_sub(items.start)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?;
                return Ok((stage, local));
            }
        }
        Err(FirmwareError::ArgumentOutOfRange)
    }

    /// What item `index` does.
    fn work(&self, index: u32) -> Result<Work, FirmwareError> {
        let p = &self.parameters;
        let (stage, local) = self.locate(index)?;
        let split = |per: u32| -> Result<(u32, u32), FirmwareError> {
            Ok((
                local
                    .checked_div(per)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?,
                local
                    .checked_rem(per)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?,
            ))
        };
        Ok(match stage {
            0 => Work::Statistics,
            1 => Work::Normalize { packet: local },
            2 => Work::Qkv { packet: local },
            3..=5 => {
                let (head, packet) = split(self.token_packets)?;
                match stage {
                    3 => Work::Scores { head, packet },
                    4 => Work::Exponents { head, packet },
                    _ => Work::Values { head, packet },
                }
            }
            6 => {
                let (head, block) = split(self.blocks)?;
                Work::Blocks { head, block }
            }
            7 => {
                let (head, packet) = split(packets_of(p.head_dim))?;
                Work::Attention { head, packet }
            }
            8 => {
                let (packet, part) = split(p.output_split)?;
                Work::OutProj { part, packet }
            }
            9 => Work::Residual { packet: local },
            _ => return Err(FirmwareError::ArgumentOutOfRange),
        })
    }

    /// Token packets of softmax block `block` (the last block may have fewer than 8).
    fn block_packets(&self, block: u32) -> Range<u32> {
        let start = block.saturating_mul(SOFTMAX_BLOCK_PACKETS);
        start
            ..start
                .saturating_add(SOFTMAX_BLOCK_PACKETS)
                .min(self.token_packets)
    }

    /// Item `index`: its result range (only stage 9's items have one: `32 p`, 32 bytes) and
    /// its cost (the stage's, see the cost constants). Reads nothing from `memory`.
    pub fn item<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<ItemSpec, FirmwareError> {
        let _ = memory;
        let p = &self.parameters;
        let none = |cost: ItemCost| ItemSpec {
            result_offset: 0,
            result_length: 0,
            cost,
        };
        Ok(match self.work(index)? {
            Work::Statistics => none(statistics_cost(p.hidden)),
            Work::Normalize { .. } => none(NORMALIZE),
            Work::Qkv { .. } => none(qkv_cost(p.hidden)),
            Work::Scores { .. } => none(scores_cost(p.head_dim)),
            Work::Exponents { .. } => none(EXPONENTS),
            Work::Values { .. } => none(values_cost(p.head_dim)),
            Work::Blocks { block, .. } => {
                let packets = self.block_packets(block);
                none(blocks_cost(
                    p.head_dim,
                    packets.end.saturating_sub(packets.start),
                ))
            }
            Work::Attention { .. } => none(attention_cost(self.blocks)),
            Work::OutProj { part, .. } => none(out_proj_cost(p.hidden, part, p.output_split)),
            Work::Residual { packet } => ItemSpec {
                result_offset: product(u64::from(packet), PACKET_BYTES)?,
                result_length: PACKET_BYTES as u32,
                cost: residual_cost(p.output_split),
            },
        })
    }

    /// Runs item `index` (see the module docs for what each stage reads and writes). A memory
    /// fault (a memory smaller than the one the command was validated against) is reported
    /// as [`FirmwareError::MemoryFault`].
    pub fn execute<M: DeviceMemory>(
        &self,
        index: u32,
        memory: &mut M,
    ) -> Result<(), FirmwareError> {
        match self.work(index)? {
            Work::Statistics => self.execute_statistics(memory),
            Work::Normalize { packet } => self.execute_normalize(packet, memory),
            Work::Qkv { packet } => self.execute_qkv(packet, memory),
            Work::Scores { head, packet } => self.execute_scores(head, packet, memory),
            Work::Exponents { head, packet } => self.execute_exponents(head, packet, memory),
            Work::Values { head, packet } => self.execute_values(head, packet, memory),
            Work::Blocks { head, block } => self.execute_blocks(head, block, memory),
            Work::Attention { head, packet } => self.execute_attention(head, packet, memory),
            Work::OutProj { part, packet } => self.execute_out_proj(part, packet, memory),
            Work::Residual { packet } => self.execute_residual(packet, memory),
        }
    }

    /// Device address of workspace element `index` of the region starting at element
    /// `region`.
    fn workspace(&self, region: u64, index: u64) -> Result<u64, FirmwareError> {
        element_address(
            self.parameters.workspace,
            region
                .checked_add(index)
                .ok_or(FirmwareError::ArgumentOutOfRange)?,
        )
    }

    /// Element index of `(head, token, dim)` in a cache.
    fn cache_element(&self, head: u32, token: u32, dim: u32) -> Result<u64, FirmwareError> {
        let p = &self.parameters;
        product(u64::from(head), u64::from(p.capacity))?
            .checked_add(u64::from(token))
            .ok_or(FirmwareError::ArgumentOutOfRange)
            .and_then(|row| product(row, u64::from(p.head_dim)))?
            .checked_add(u64::from(dim))
            .ok_or(FirmwareError::ArgumentOutOfRange)
    }

    /// Index of token packet `packet` of head `head` in the `[heads][packets]` regions (whose
    /// row length is the capacity's packet count).
    fn packet_index(&self, head: u32, packet: u32) -> Result<u64, FirmwareError> {
        let capacity_packets = u64::from(self.parameters.capacity.div_ceil(PACKET_ELEMENTS));
        product(u64::from(head), capacity_packets)?
            .checked_add(u64::from(packet))
            .ok_or(FirmwareError::ArgumentOutOfRange)
    }

    /// Index of softmax block `block` of head `head` in the `[heads][blocks]` regions.
    fn block_index(&self, head: u32, block: u32) -> Result<u64, FirmwareError> {
        let capacity_blocks = u64::from(
            self.parameters
                .capacity
                .div_ceil(PACKET_ELEMENTS)
                .div_ceil(SOFTMAX_BLOCK_PACKETS),
        );
        product(u64::from(head), capacity_blocks)?
            .checked_add(u64::from(block))
            .ok_or(FirmwareError::ArgumentOutOfRange)
    }

    /// Tokens of token packet `packet`: `8 packet .. min(8 packet + 8, tokens)`.
    fn packet_tokens(&self, packet: u32) -> Range<u32> {
        let start = packet.saturating_mul(PACKET_ELEMENTS);
        start..start.saturating_add(PACKET_ELEMENTS).min(self.tokens)
    }

    fn execute_statistics<M: DeviceMemory>(&self, memory: &mut M) -> Result<(), FirmwareError> {
        let p = &self.parameters;
        let mut moments = LayerNormMoments::new();
        let mut chunk = [0.0_f32; CHUNK_ELEMENTS];
        let mut done = 0_usize;
        let hidden = p.hidden as usize;
        while done < hidden {
            let length = hidden.saturating_sub(done).min(CHUNK_ELEMENTS);
            let values = chunk
                .get_mut(..length)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            read_floats(memory, element_address(p.input, done as u64)?, values)?;
            moments.add(values);
            done = done.saturating_add(length);
        }
        let (mean, reciprocal) = moments.finish();
        write_floats(
            memory,
            self.workspace(self.layout.statistics, 0)?,
            &[mean, reciprocal],
        )
    }

    fn execute_normalize<M: DeviceMemory>(
        &self,
        packet: u32,
        memory: &mut M,
    ) -> Result<(), FirmwareError> {
        let p = &self.parameters;
        let mut statistics = [0.0_f32; 2];
        read_floats(
            memory,
            self.workspace(self.layout.statistics, 0)?,
            &mut statistics,
        )?;
        let [mean, reciprocal] = statistics;
        let first = product(u64::from(packet), u64::from(PACKET_ELEMENTS))?;
        let mut x = [0.0_f32; LANES];
        let mut gamma = [0.0_f32; LANES];
        let mut beta = [0.0_f32; LANES];
        read_floats(memory, element_address(p.input, first)?, &mut x)?;
        read_floats(memory, element_address(p.ln_gamma, first)?, &mut gamma)?;
        read_floats(memory, element_address(p.ln_beta, first)?, &mut beta)?;
        for ((value, gamma), beta) in x.iter_mut().zip(gamma).zip(beta) {
            *value = normalize(*value, mean, reciprocal, gamma, beta);
        }
        write_floats(memory, self.workspace(self.layout.normalized, first)?, &x)
    }

    /// Where output row `row` (a multiple of 8) of the stacked projection and the 7 after it
    /// go: q in the workspace, or the head's cache slot at `position`.
    fn qkv_destination(&self, row: u32) -> Result<u64, FirmwareError> {
        let p = &self.parameters;
        let matrix = row
            .checked_div(p.hidden)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let column = row
            .checked_rem(p.hidden)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        if matrix == 0 {
            return self.workspace(self.layout.query, u64::from(column));
        }
        let head = column
            .checked_div(p.head_dim)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let dim = column
            .checked_rem(p.head_dim)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let element = self.cache_element(head, self.position, dim)?;
        let base = if matrix == 1 {
            self.key_cache
        } else {
            self.value_cache
        };
        element_address(base, element)
    }

    /// The 8 rows `first_row ..` of a row-major `columns`-wide matrix at `matrix`, each
    /// dotted with the vector at `input` over the columns of part `part` of `split` (all
    /// columns for split 1), in [`split_dot`]'s order, streamed a block at a time.
    fn gemv_rows<M: DeviceMemory>(
        &self,
        memory: &M,
        matrix: u64,
        first_row: u32,
        columns: u32,
        input: u64,
        (part, split): (u32, u32),
    ) -> Result<[f32; GEMV_ROWS as usize], FirmwareError> {
        let mut sums = [LaneSum::<LANES>::new(); GEMV_ROWS as usize];
        let block = GEMV_BLOCK_ELEMENTS as usize;
        let mut input_block = [0.0_f32; GEMV_BLOCK_ELEMENTS as usize];
        let mut row_block = [0.0_f32; GEMV_BLOCK_ELEMENTS as usize];
        let columns = columns as usize;
        let step = (split as usize).saturating_mul(block);
        let mut start = (part as usize).saturating_mul(block);
        while step > 0 && start < columns {
            let length = columns.saturating_sub(start).min(block);
            let input_values = input_block
                .get_mut(..length)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            read_floats(memory, element_address(input, start as u64)?, input_values)?;
            for (row, sum) in (first_row..).zip(sums.iter_mut()) {
                let values = row_block
                    .get_mut(..length)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?;
                let element = product(u64::from(row), columns as u64)?
                    .checked_add(start as u64)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?;
                read_floats(memory, element_address(matrix, element)?, values)?;
                sum.add_products(values, input_values);
            }
            start = start.saturating_add(step);
        }
        let mut out = [0.0_f32; GEMV_ROWS as usize];
        for (value, sum) in out.iter_mut().zip(&sums) {
            *value = sum.finish();
        }
        Ok(out)
    }

    fn execute_qkv<M: DeviceMemory>(
        &self,
        packet: u32,
        memory: &mut M,
    ) -> Result<(), FirmwareError> {
        let p = &self.parameters;
        let first_row = product32(packet, GEMV_ROWS)?;
        let normalized = self.workspace(self.layout.normalized, 0)?;
        let mut rows = self.gemv_rows(
            memory,
            p.qkv_weight,
            first_row,
            p.hidden,
            normalized,
            (0, 1),
        )?;
        let mut bias = [0.0_f32; GEMV_ROWS as usize];
        read_floats(
            memory,
            element_address(p.qkv_bias, u64::from(first_row))?,
            &mut bias,
        )?;
        for (value, bias) in rows.iter_mut().zip(bias) {
            *value = project(*value, bias);
        }
        write_floats(memory, self.qkv_destination(first_row)?, &rows)
    }

    fn execute_scores<M: DeviceMemory>(
        &self,
        head: u32,
        packet: u32,
        memory: &mut M,
    ) -> Result<(), FirmwareError> {
        let p = &self.parameters;
        let head_dim = p.head_dim as usize;
        let mut query = [0.0_f32; MAX_HEAD_DIM as usize];
        let query = query
            .get_mut(..head_dim)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let query_start = product(u64::from(head), u64::from(p.head_dim))?;
        read_floats(
            memory,
            self.workspace(self.layout.query, query_start)?,
            query,
        )?;
        let scale = attention_scale(p.head_dim);
        let mut key = [0.0_f32; MAX_HEAD_DIM as usize];
        let key = key
            .get_mut(..head_dim)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let mut scores = [0.0_f32; LANES];
        let tokens = self.packet_tokens(packet);
        let count = tokens.end.saturating_sub(tokens.start) as usize;
        for (token, value) in tokens.clone().zip(scores.iter_mut()) {
            read_floats(
                memory,
                element_address(self.key_cache, self.cache_element(head, token, 0)?)?,
                key,
            )?;
            *value = score(query, key, scale);
        }
        let scores = scores
            .get(..count)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let score_row = product(u64::from(head), u64::from(p.capacity))?;
        let first = score_row
            .checked_add(u64::from(tokens.start))
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        write_floats(memory, self.workspace(self.layout.scores, first)?, scores)?;
        write_floats(
            memory,
            self.workspace(self.layout.packet_maxima, self.packet_index(head, packet)?)?,
            &[running_max(scores)],
        )
    }

    fn execute_exponents<M: DeviceMemory>(
        &self,
        head: u32,
        packet: u32,
        memory: &mut M,
    ) -> Result<(), FirmwareError> {
        let p = &self.parameters;
        let block = packet / SOFTMAX_BLOCK_PACKETS;
        let packets = self.block_packets(block);
        let mut maxima = [0.0_f32; SOFTMAX_BLOCK_PACKETS as usize];
        let maxima = maxima
            .get_mut(..packets.end.saturating_sub(packets.start) as usize)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        read_floats(
            memory,
            self.workspace(
                self.layout.packet_maxima,
                self.packet_index(head, packets.start)?,
            )?,
            maxima,
        )?;
        let max = running_max(maxima);
        let tokens = self.packet_tokens(packet);
        let mut scores = [0.0_f32; LANES];
        let scores = scores
            .get_mut(..tokens.end.saturating_sub(tokens.start) as usize)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let first = product(u64::from(head), u64::from(p.capacity))?
            .checked_add(u64::from(tokens.start))
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let address = self.workspace(self.layout.scores, first)?;
        read_floats(memory, address, scores)?;
        let sum = exponents(scores, max);
        write_floats(memory, address, scores)?;
        write_floats(
            memory,
            self.workspace(self.layout.packet_sums, self.packet_index(head, packet)?)?,
            &[sum],
        )
    }

    fn execute_values<M: DeviceMemory>(
        &self,
        head: u32,
        packet: u32,
        memory: &mut M,
    ) -> Result<(), FirmwareError> {
        let p = &self.parameters;
        let head_dim = p.head_dim as usize;
        let tokens = self.packet_tokens(packet);
        let mut weights = [0.0_f32; LANES];
        let weights = weights
            .get_mut(..tokens.end.saturating_sub(tokens.start) as usize)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let first = product(u64::from(head), u64::from(p.capacity))?
            .checked_add(u64::from(tokens.start))
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        read_floats(memory, self.workspace(self.layout.scores, first)?, weights)?;
        let mut accumulator = [0.0_f32; MAX_HEAD_DIM as usize];
        let accumulator = accumulator
            .get_mut(..head_dim)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let mut values = [0.0_f32; MAX_HEAD_DIM as usize];
        let values = values
            .get_mut(..head_dim)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        for (token, weight) in tokens.zip(weights.iter()) {
            read_floats(
                memory,
                element_address(self.value_cache, self.cache_element(head, token, 0)?)?,
                values,
            )?;
            accumulate_weighted(accumulator, *weight, values);
        }
        let slot = product(self.packet_index(head, packet)?, u64::from(p.head_dim))?;
        write_floats(
            memory,
            self.workspace(self.layout.packet_partials, slot)?,
            accumulator,
        )
    }

    fn execute_blocks<M: DeviceMemory>(
        &self,
        head: u32,
        block: u32,
        memory: &mut M,
    ) -> Result<(), FirmwareError> {
        let p = &self.parameters;
        let head_dim = p.head_dim as usize;
        let packets = self.block_packets(block);
        let count = packets.end.saturating_sub(packets.start) as usize;
        let first = self.packet_index(head, packets.start)?;
        let mut maxima = [0.0_f32; SOFTMAX_BLOCK_PACKETS as usize];
        let maxima = maxima
            .get_mut(..count)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        read_floats(
            memory,
            self.workspace(self.layout.packet_maxima, first)?,
            maxima,
        )?;
        let mut sums = [0.0_f32; SOFTMAX_BLOCK_PACKETS as usize];
        let sums = sums
            .get_mut(..count)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        read_floats(
            memory,
            self.workspace(self.layout.packet_sums, first)?,
            sums,
        )?;
        let mut accumulator = [0.0_f32; MAX_HEAD_DIM as usize];
        let accumulator = accumulator
            .get_mut(..head_dim)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let mut partial = [0.0_f32; MAX_HEAD_DIM as usize];
        let partial = partial
            .get_mut(..head_dim)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        for packet in packets {
            let slot = product(self.packet_index(head, packet)?, u64::from(p.head_dim))?;
            read_floats(
                memory,
                self.workspace(self.layout.packet_partials, slot)?,
                partial,
            )?;
            add_into(accumulator, partial);
        }
        let index = self.block_index(head, block)?;
        write_floats(
            memory,
            self.workspace(self.layout.block_maxima, index)?,
            &[running_max(maxima)],
        )?;
        write_floats(
            memory,
            self.workspace(self.layout.block_sums, index)?,
            &[ordered_sum(sums)],
        )?;
        let slot = product(index, u64::from(p.head_dim))?;
        write_floats(
            memory,
            self.workspace(self.layout.block_partials, slot)?,
            accumulator,
        )
    }

    fn execute_attention<M: DeviceMemory>(
        &self,
        head: u32,
        packet: u32,
        memory: &mut M,
    ) -> Result<(), FirmwareError> {
        let p = &self.parameters;
        let blocks = self.blocks as usize;
        let first = self.block_index(head, 0)?;
        let mut maxima = [0.0_f32; MAX_BLOCKS as usize];
        let maxima = maxima
            .get_mut(..blocks)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        read_floats(
            memory,
            self.workspace(self.layout.block_maxima, first)?,
            maxima,
        )?;
        let mut sums = [0.0_f32; MAX_BLOCKS as usize];
        let sums = sums
            .get_mut(..blocks)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        read_floats(memory, self.workspace(self.layout.block_sums, first)?, sums)?;
        let mut factors = [0.0_f32; MAX_BLOCKS as usize];
        let factors = factors
            .get_mut(..blocks)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let reciprocal = block_factors(maxima, sums, factors);
        let first_dim = product32(packet, PACKET_ELEMENTS)?;
        let mut accumulator = [0.0_f32; LANES];
        let mut partial = [0.0_f32; LANES];
        for (block, factor) in (0_u32..).zip(factors.iter()) {
            let slot = product(self.block_index(head, block)?, u64::from(p.head_dim))?
                .checked_add(u64::from(first_dim))
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            read_floats(
                memory,
                self.workspace(self.layout.block_partials, slot)?,
                &mut partial,
            )?;
            accumulate_weighted(&mut accumulator, *factor, &partial);
        }
        scale(&mut accumulator, reciprocal);
        let out = product(u64::from(head), u64::from(p.head_dim))?
            .checked_add(u64::from(first_dim))
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        write_floats(
            memory,
            self.workspace(self.layout.attention, out)?,
            &accumulator,
        )
    }

    fn execute_out_proj<M: DeviceMemory>(
        &self,
        part: u32,
        packet: u32,
        memory: &mut M,
    ) -> Result<(), FirmwareError> {
        let p = &self.parameters;
        let first_row = product32(packet, GEMV_ROWS)?;
        let attention = self.workspace(self.layout.attention, 0)?;
        let rows = self.gemv_rows(
            memory,
            p.output_weight,
            first_row,
            p.hidden,
            attention,
            (part, p.output_split),
        )?;
        let slot = product(u64::from(part), u64::from(p.hidden))?
            .checked_add(u64::from(first_row))
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        write_floats(
            memory,
            self.workspace(self.layout.out_partials, slot)?,
            &rows,
        )
    }

    fn execute_residual<M: DeviceMemory>(
        &self,
        packet: u32,
        memory: &mut M,
    ) -> Result<(), FirmwareError> {
        let p = &self.parameters;
        let first = product(u64::from(packet), u64::from(PACKET_ELEMENTS))?;
        let mut parts = [[0.0_f32; LANES]; MAX_OUTPUT_SPLIT as usize];
        let parts = parts
            .get_mut(..p.output_split as usize)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        for (part, values) in (0_u64..).zip(parts.iter_mut()) {
            let slot = product(part, u64::from(p.hidden))?
                .checked_add(first)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            read_floats(
                memory,
                self.workspace(self.layout.out_partials, slot)?,
                values,
            )?;
        }
        let mut bias = [0.0_f32; LANES];
        read_floats(memory, element_address(p.output_bias, first)?, &mut bias)?;
        let mut x = [0.0_f32; LANES];
        read_floats(memory, element_address(p.input, first)?, &mut x)?;
        let mut out = [0.0_f32; LANES];
        let mut column = [0.0_f32; MAX_OUTPUT_SPLIT as usize];
        for (lane, ((out, bias), x)) in out.iter_mut().zip(bias).zip(x).enumerate() {
            let column = column
                .get_mut(..parts.len())
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            for (value, part) in column.iter_mut().zip(parts.iter()) {
                *value = part.get(lane).copied().unwrap_or_default();
            }
            *out = block_output(column, bias, x);
        }
        write_floats(memory, element_address(self.result, first)?, &out)
    }
}

/// `base + 4 * index`, checked.
fn element_address(base: u64, index: u64) -> Result<u64, FirmwareError> {
    index
        .checked_mul(ELEMENT_BYTES)
        .and_then(|offset| base.checked_add(offset))
        .ok_or(FirmwareError::ArgumentOutOfRange)
}

/// Reads `values.len()` little-endian `f32` at `address`, a chunk at a time.
fn read_floats<M: DeviceMemory>(
    memory: &M,
    address: u64,
    values: &mut [f32],
) -> Result<(), FirmwareError> {
    let mut bytes = [0_u8; CHUNK_BYTES];
    let mut address = address;
    for chunk in values.chunks_mut(CHUNK_ELEMENTS) {
        let length = chunk
            .len()
            .checked_mul(4)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let buffer = bytes
            .get_mut(..length)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        memory.read(DeviceAddress(address), buffer)?;
        for (value, word) in chunk.iter_mut().zip(buffer.chunks_exact(4)) {
            let word = <[u8; 4]>::try_from(word).map_err(|_| FirmwareError::ArgumentOutOfRange)?;
            *value = f32::from_le_bytes(word);
        }
        address = address
            .checked_add(length as u64)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
    }
    Ok(())
}

/// Writes `values` as little-endian `f32` at `address`, a chunk at a time.
fn write_floats<M: DeviceMemory>(
    memory: &mut M,
    address: u64,
    values: &[f32],
) -> Result<(), FirmwareError> {
    let mut bytes = [0_u8; CHUNK_BYTES];
    let mut address = address;
    for chunk in values.chunks(CHUNK_ELEMENTS) {
        let length = chunk
            .len()
            .checked_mul(4)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let buffer = bytes
            .get_mut(..length)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        for (word, value) in buffer.chunks_exact_mut(4).zip(chunk) {
            word.copy_from_slice(&value.to_le_bytes());
        }
        memory.write(DeviceAddress(address), buffer)?;
        address = address
            .checked_add(length as u64)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use shared_abi::Status;

    type FakeMemory = crate::testing::FakeDeviceMemory;

    const MEMORY: u64 = 1 << 20;

    /// A small layer with every uneven case: hidden 128 = 4 heads of 32 (4 dimension
    /// packets), capacity 72, position 69 (70 tokens: 9 token packets, the last of 6 tokens;
    /// 2 softmax blocks, the last of one packet), the output projection's 2 column blocks in 3
    /// parts (the last part empty).
    const HIDDEN: u32 = 128;
    const HEADS: u32 = 4;
    const HEAD_DIM: u32 = 32;
    const CAPACITY: u32 = 72;
    const POSITION: u64 = 69;
    const SPLIT: u32 = 3;

    const PARAMETERS: u64 = 0x1000;
    const INPUT: u64 = 0x1100;
    const GAMMA: u64 = 0x1400;
    const BETA: u64 = 0x1600;
    const QKV_BIAS: u64 = 0x1800; // 384 x 4 B
    const OUTPUT_BIAS: u64 = 0x2000;
    const QKV_WEIGHT: u64 = 0x4000; // 384 x 128 x 4 B = 0x30000
    const OUTPUT_WEIGHT: u64 = 0x34000; // 0x10000
    const KEYS: u64 = 0x44000; // 4 x 72 x 32 x 4 B = 0x9000
    const VALUES: u64 = 0x4D000;
    const WORKSPACE: u64 = 0x56000; // 2560 elements, 0x2800
    const RESULT: u64 = 0x5C000; // 512 B, past the largest workspace (split 16: 0x4200)

    fn parameters() -> OptParameters {
        OptParameters {
            hidden: HIDDEN,
            heads: HEADS,
            head_dim: HEAD_DIM,
            capacity: CAPACITY,
            output_split: SPLIT,
            reserved: [0; 3],
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
            result_length: u64::from(HIDDEN) * 4,
            args: [PARAMETERS, KEYS, VALUES, POSITION],
        }
    }

    fn value(seed: u32) -> f32 {
        ((seed.wrapping_mul(2_654_435_761) >> 20) % 64) as f32 / 32.0 - 1.0
    }

    fn floats(count: usize, seed: u32) -> Vec<f32> {
        (0..count as u32)
            .map(|j| value(j.wrapping_mul(7).wrapping_add(seed)))
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
            qkv_weight: scaled(floats(3 * h * h, 4), 0.15),
            qkv_bias: scaled(floats(3 * h, 5), 0.1),
            output_weight: scaled(floats(h * h, 6), 0.15),
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

    /// The layer in plain `f64`, sequential sums and one softmax over all tokens: the
    /// attention block's output and the caches.
    fn plain(layer: &Layer) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
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
        let result = (0..h)
            .map(|row| {
                x[row]
                    + (0..h)
                        .map(|j| f64::from(layer.output_weight[row * h + j]) * attention[j])
                        .sum::<f64>()
                    + f64::from(layer.output_bias[row])
            })
            .collect();
        (result, keys, values)
    }

    /// The layer in `f32` with the kernel's public helpers composed in plain loops (what the
    /// workload's reference does): the attention block's output.
    fn composed(layer: &Layer) -> Vec<f32> {
        let h = HIDDEN as usize;
        let hd = HEAD_DIM as usize;
        let cap = CAPACITY as usize;
        let pos = POSITION as usize;
        let (mean, reciprocal) = layer_norm_moments(&layer.x);
        let n: Vec<f32> = (0..h)
            .map(|j| normalize(layer.x[j], mean, reciprocal, layer.gamma[j], layer.beta[j]))
            .collect();
        let qkv: Vec<f32> = (0..3 * h)
            .map(|row| {
                project(
                    dot(&layer.qkv_weight[row * h..][..h], &n),
                    layer.qkv_bias[row],
                )
            })
            .collect();
        let mut keys = layer.keys.clone();
        let mut values = layer.values.clone();
        let mut attention = vec![0.0_f32; h];
        for head in 0..HEADS as usize {
            let at = (head * cap + pos) * hd;
            keys[at..at + hd].copy_from_slice(&qkv[h + head * hd..][..hd]);
            values[at..at + hd].copy_from_slice(&qkv[2 * h + head * hd..][..hd]);
            let q = &qkv[head * hd..][..hd];
            let scores: Vec<f32> = (0..=pos)
                .map(|t| {
                    score(
                        q,
                        &keys[(head * cap + t) * hd..][..hd],
                        attention_scale(HEAD_DIM),
                    )
                })
                .collect();
            let (mut maxima, mut sums, mut partials) = (vec![], vec![], vec![]);
            for (b, block) in scores.chunks(64).enumerate() {
                let max = running_max(&block.chunks(8).map(running_max).collect::<Vec<_>>());
                let mut packet_sums = vec![];
                let mut partial = vec![0.0_f32; hd];
                for (p, packet) in block.chunks(8).enumerate() {
                    let mut e = packet.to_vec();
                    packet_sums.push(exponents(&mut e, max));
                    let mut own = vec![0.0_f32; hd];
                    for (i, weight) in e.iter().enumerate() {
                        let t = 64 * b + 8 * p + i;
                        accumulate_weighted(
                            &mut own,
                            *weight,
                            &values[(head * cap + t) * hd..][..hd],
                        );
                    }
                    add_into(&mut partial, &own);
                }
                maxima.push(max);
                sums.push(ordered_sum(&packet_sums));
                partials.push(partial);
            }
            let mut factors = vec![0.0_f32; maxima.len()];
            let reciprocal = block_factors(&maxima, &sums, &mut factors);
            let out = &mut attention[head * hd..][..hd];
            for (factor, partial) in factors.iter().zip(&partials) {
                accumulate_weighted(out, *factor, partial);
            }
            scale(out, reciprocal);
        }
        (0..h)
            .map(|row| {
                let parts: Vec<f32> = (0..SPLIT)
                    .map(|part| {
                        split_dot(
                            &layer.output_weight[row * h..][..h],
                            &attention,
                            part,
                            SPLIT,
                        )
                    })
                    .collect();
                block_output(&parts, layer.output_bias[row], layer.x[row])
            })
            .collect()
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

    /// The stage ranges of the test layer: 1, 128/8, 384/8, 4 heads x 9 token packets three
    /// times, 4 heads x 2 blocks, 4 heads x 4 dimension packets, 3 parts x 16, 16.
    const STAGE_RANGES: [Range<u32>; 10] = [
        0..1,
        1..17,
        17..65,
        65..101,
        101..137,
        137..173,
        173..181,
        181..197,
        197..245,
        245..261,
    ];

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
        for (stage, items) in STAGE_RANGES.iter().enumerate() {
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
        assert_eq!(hal.compute.launches().len(), 10);
        assert_eq!(
            hal.registers.bulk_completions(),
            [BulkCompletion {
                tag: 7,
                status: Status::Ok
            }]
        );
        // The stages ran in order on real data: the result is the layer's answer.
        let (result, _, _) = plain(&layer());
        let got = get_floats(&hal.memory, RESULT, HIDDEN as usize);
        assert_close(&got, &result, "output");
    }

    #[test]
    fn stages_are_m2ndps_kernels_with_one_item_per_packet() {
        let memory = loaded(&layer());
        let kernel = OptKernel::decode(&command(), &memory).unwrap();
        assert_eq!(kernel.stages(), 10);
        for (stage, items) in STAGE_RANGES.iter().enumerate() {
            assert_eq!(kernel.stage_items(stage as u32), items.clone(), "{stage}");
        }
        assert_eq!(kernel.stage_items(10), 0..0);
        assert_eq!(kernel.stage_items(u32::MAX), 0..0);
        assert_eq!(kernel.items(), 261);
        assert_eq!(kernel.position(), 69);
        assert_eq!(kernel.parameters(), &parameters());
        assert_eq!(
            kernel.layout().elements * 4,
            workspace_bytes(HIDDEN, HEADS, HEAD_DIM, CAPACITY, SPLIT).unwrap()
        );
        assert_eq!(kernel.layout().elements, 2560);
    }

    #[test]
    fn only_the_residual_items_have_results_and_they_tile_the_result_space() {
        let memory = loaded(&layer());
        let kernel = OptKernel::decode(&command(), &memory).unwrap();
        for item in 0..245 {
            let spec = kernel.item(item, &memory).unwrap();
            assert_eq!((spec.result_offset, spec.result_length), (0, 0));
            assert!(spec.cost.instructions() > 0, "item {item}");
        }
        for (packet, item) in (245..261).enumerate() {
            let spec = kernel.item(item, &memory).unwrap();
            assert_eq!(spec.result_offset, 32 * packet as u64);
            assert_eq!(spec.result_length, 32);
            assert_eq!(spec.cost, residual_cost(SPLIT));
        }
        assert_eq!(
            kernel.item(261, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
        assert_eq!(
            kernel.item(u32::MAX, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
    }

    #[test]
    fn item_costs_follow_the_stage_and_the_item_shape() {
        let memory = loaded(&layer());
        let kernel = OptKernel::decode(&command(), &memory).unwrap();
        let cost = |item: u32| kernel.item(item, &memory).unwrap().cost;
        assert_eq!(cost(0), statistics_cost(HIDDEN));
        assert_eq!(cost(1), NORMALIZE);
        assert_eq!(cost(17), qkv_cost(HIDDEN));
        assert_eq!(cost(65), scores_cost(HEAD_DIM));
        // The short last token packet costs a whole one (M²NDP's µthreads run whole packets).
        assert_eq!(cost(73), scores_cost(HEAD_DIM));
        assert_eq!(cost(101), EXPONENTS);
        assert_eq!(cost(137), values_cost(HEAD_DIM));
        // Blocks of 8 and of 1 token packets.
        assert_eq!(cost(173), blocks_cost(HEAD_DIM, 8));
        assert_eq!(cost(174), blocks_cost(HEAD_DIM, 1));
        assert!(cost(173).vector_memory > cost(174).vector_memory);
        assert_eq!(cost(181), attention_cost(2));
        // Parts 0 and 1 hold one 64-column block each, part 2 none.
        assert_eq!(cost(197), out_proj_cost(HIDDEN, 0, SPLIT));
        assert_eq!(cost(197).bytes, 8 * 8 * 32 + 32);
        assert_eq!(cost(198).bytes, 8 * 8 * 32 + 32);
        assert_eq!(cost(199), GEMV_FIXED.plus(OUT_PROJ_TAIL));
        assert_eq!(part_columns(HIDDEN, 2, SPLIT), 0);
        assert_eq!(part_columns(100, 1, 2), 36);
        assert_eq!(part_columns(2560, 3, 4), 640);
    }

    /// Paper scale (hidden 2560, 32 heads of 80, 1024 tokens, split 4), each total from the
    /// listing beside its constant.
    #[test]
    fn paper_item_costs() {
        let unit = |scalar, scalar_memory, vector, vector_memory, bytes| ItemCost {
            scalar,
            scalar_memory,
            vector,
            vector_memory,
            indexed_extra_cycles: 0,
            bytes,
        };
        // 320 packets of x, 40 loop iterations.
        assert_eq!(
            statistics_cost(2560),
            unit(12 + 120, 6, 7 + 960, 320, 8 + 10_240)
        );
        // 8 rows x 2560: 320 input packets, 40 blocks; the bias, the store.
        assert_eq!(
            qkv_cost(2560),
            unit(
                25 + 440 + 10,
                5 + 4,
                32 + 2560 + 1,
                2880 + 2,
                320 * 256 + 64
            )
        );
        // 10 dimension packets, one unrolled iteration.
        assert_eq!(scores_cost(80), unit(18 + 12, 4, 35 + 80, 1 + 90, 2560));
        assert_eq!(
            values_cost(80),
            unit(19 + 10 + 12, 1, 16 + 90 + 1, 1 + 90, 2560)
        );
        assert_eq!(
            blocks_cost(80, 8),
            unit(12 + 100, 5, 5 + 90, 2 + 90, 8 + 320)
        );
        // 16 blocks in 2 coefficient packets.
        assert_eq!(
            attention_cost(16),
            unit(14 + 6 + 16, 4, 6 + 10 + 48, 1 + 8 + 16, 32 + 128 + 512)
        );
        // A quarter of the columns: 10 blocks, 80 packets.
        assert_eq!(
            out_proj_cost(2560, 1, 4),
            unit(25 + 110 + 2, 5, 32 + 640, 720 + 1, 80 * 256 + 32)
        );
        assert_eq!(residual_cost(4), unit(9, 4, 7, 7, 96 + 128));
        // A layer's device-memory traffic: the weights and the KV cache dominate.
        let layer_bytes = statistics_cost(2560).bytes
            + 320 * NORMALIZE.bytes
            + 960 * qkv_cost(2560).bytes
            + 4096 * (scores_cost(80).bytes + EXPONENTS.bytes + values_cost(80).bytes)
            + 512 * blocks_cost(80, 8).bytes
            + 320 * attention_cost(16).bytes
            + 4 * 320 * out_proj_cost(2560, 0, 4).bytes
            + 320 * residual_cost(4).bytes;
        let weights_and_cache = (3 + 1) * 2560 * 2560 * 4 + 2 * 32 * 1024 * 80 * 4;
        assert!(layer_bytes > weights_and_cache);
        assert!(layer_bytes < weights_and_cache + weights_and_cache / 50);
    }

    #[test]
    fn kernel_matches_a_plain_f64_layer_and_appends_the_token_to_the_caches() {
        let layer = layer();
        let mut memory = loaded(&layer);
        run(&mut memory);
        let (result, keys, values) = plain(&layer);
        let cache = (HEADS * CAPACITY * HEAD_DIM) as usize;
        let got = get_floats(&memory, RESULT, HIDDEN as usize);
        assert_close(&got, &result, "output");
        assert_close(&get_floats(&memory, KEYS, cache), &keys, "key");
        assert_close(&get_floats(&memory, VALUES, cache), &values, "value");
        // Positions past the current one are untouched.
        let keys_after = get_floats(&memory, KEYS, cache);
        for head in 0..HEADS as usize {
            let from = (head * CAPACITY as usize + 70) * HEAD_DIM as usize;
            let to = (head + 1) * (CAPACITY * HEAD_DIM) as usize;
            assert_eq!(keys_after[from..to], layer.keys[from..to]);
        }
    }

    #[test]
    fn kernel_is_bit_identical_to_its_helpers_composed_in_plain_loops() {
        let layer = layer();
        let mut memory = loaded(&layer);
        run(&mut memory);
        let got = get_floats(&memory, RESULT, HIDDEN as usize);
        let expected = composed(&layer);
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            expected.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        // The order of execution within a stage does not matter.
        let mut reversed = loaded(&layer);
        let kernel = OptKernel::decode(&command(), &reversed).unwrap();
        for stage in 0..kernel.stages() {
            for item in kernel.stage_items(stage).rev() {
                kernel.execute(item, &mut reversed).unwrap();
            }
        }
        assert_eq!(get_floats(&reversed, RESULT, HIDDEN as usize), got);
    }

    #[test]
    fn residual_adds_the_parts_in_part_order_then_the_bias_then_the_input() {
        let layer = layer();
        let mut memory = loaded(&layer);
        let kernel = OptKernel::decode(&command(), &memory).unwrap();
        // Part sums of row 9 (packet 1, lane 1) chosen so that the order shows: (1e8 + -1e8)
        // + 1 = 1, while any order adding the 1 before both large terms gives 0.
        let out_partials = WORKSPACE + 4 * kernel.layout().out_partials;
        for (part, value) in [1e8_f32, -1e8, 1.0].into_iter().enumerate() {
            put_floats(
                &mut memory,
                out_partials + 4 * (part as u64 * 128 + 9),
                &[value],
            );
        }
        kernel
            .execute(STAGE_RANGES[9].start + 1, &mut memory)
            .unwrap();
        let got = get_floats(&memory, RESULT + 4 * 9, 1)[0];
        assert_eq!(got, layer.x[9] + (1.0 + layer.output_bias[9]));
        assert_eq!(
            got,
            block_output(&[1e8, -1e8, 1.0], layer.output_bias[9], layer.x[9])
        );
    }

    #[test]
    fn the_split_changes_only_the_rounding_of_the_output_projection() {
        let layer = layer();
        let mut memory = loaded(&layer);
        run(&mut memory);
        let expected = get_floats(&memory, RESULT, HIDDEN as usize);
        for split in [1, 2, 4, MAX_OUTPUT_SPLIT] {
            let mut other = loaded(&layer);
            let mut p = parameters();
            p.output_split = split;
            other.put(DeviceAddress(PARAMETERS), &p);
            run(&mut other);
            let got = get_floats(&other, RESULT, HIDDEN as usize);
            for (g, e) in got.iter().zip(&expected) {
                assert!((g - e).abs() <= 1e-5 * e.abs().max(1.0), "split {split}");
            }
        }
    }

    fn rejected(memory: &FakeMemory, command: &CommandDescriptor, status: FirmwareError) {
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
        rejected(&memory, &c, FirmwareError::UnknownKernel);
        let mut c = command();
        c.flags = 1;
        rejected(&memory, &c, FirmwareError::MalformedDescriptor);
        for position in [72, 73, u64::from(u32::MAX), 1 << 32, u64::MAX] {
            let mut c = command();
            c.args[3] = position;
            rejected(&memory, &c, FirmwareError::ArgumentOutOfRange);
        }
        for length in [0, 508, 511, 513, 516, 1024, 2048, u64::MAX] {
            let mut c = command();
            c.result_length = length;
            rejected(&memory, &c, FirmwareError::ArgumentOutOfRange);
        }
        // Position 71 (the last slot) and position 0 are fine.
        for position in [0, 71] {
            let mut c = command();
            c.args[3] = position;
            assert!(OptKernel::decode(&c, &memory).is_ok());
        }
    }

    #[test]
    fn bad_parameter_blocks_are_rejected() {
        let changes: [fn(&mut OptParameters); 19] = [
            |p| p.hidden = 0,
            |p| p.heads = 0,
            |p| p.head_dim = 0,
            |p| p.capacity = 0,
            |p| p.output_split = 0,
            |p| p.output_split = MAX_OUTPUT_SPLIT + 1,
            |p| p.reserved = [0, 1, 0],
            |p| p.reserved = [0, 0, u32::MAX],
            |p| {
                p.head_dim = 36;
                p.hidden = 144;
            },
            |p| p.hidden = 96,
            |p| {
                p.heads = 1;
                p.head_dim = 264;
                p.hidden = 264;
            },
            |p| p.capacity = MAX_POSITIONS + 1,
            |p| p.capacity = 5,
            |p| p.input = 0x1101,
            |p| p.qkv_weight = MEMORY - 0x100,
            |p| p.workspace = QKV_WEIGHT + 0x100,
            |p| p.workspace = RESULT - 4,
            |p| p.workspace = u64::MAX - 3,
            |p| p.output_bias = MEMORY - 4,
        ];
        for change in changes {
            let mut memory = loaded(&layer());
            let mut p = parameters();
            change(&mut p);
            memory.put(DeviceAddress(PARAMETERS), &p);
            rejected(&memory, &command(), FirmwareError::ArgumentOutOfRange);
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
            // Value cache over the workspace, over the parameter block, over the keys.
            (2, WORKSPACE - 0x100),
            (2, PARAMETERS),
            (2, KEYS),
        ];
        for (arg, address) in cases {
            let mut c = command();
            c.args[arg] = address;
            rejected(&memory, &c, FirmwareError::ArgumentOutOfRange);
        }
        for result in [
            INPUT,
            WORKSPACE + 4,
            KEYS + 0x3FC,
            VALUES - 0x1FC,
            MEMORY - 4,
            MEMORY - 0x1FC,
            RESULT + 1,
        ] {
            let mut c = command();
            c.result_address = result;
            rejected(&memory, &c, FirmwareError::ArgumentOutOfRange);
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
        for stage in STAGE_RANGES {
            let item = stage.start;
            assert!(
                matches!(
                    kernel.execute(item, &mut small),
                    Err(FirmwareError::MemoryFault(_))
                ),
                "item {item}"
            );
        }
        assert_eq!(
            kernel.execute(261, &mut small),
            Err(FirmwareError::ArgumentOutOfRange)
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
            shape in (0_u32..4, 0_u32..4, 0_u32..40),
            split in (0_u32..6, prop_oneof![Just(0_u32), any::<u32>()]),
            addresses in prop_oneof![
                proptest::array::uniform8((0_u64..0x1000).prop_map(|a| a * 16)),
                proptest::array::uniform8(any::<u64>()),
            ],
        ) {
            let mut memory = FakeMemory::new(0x10000);
            let (heads, dim_packets, capacity) = shape;
            let head_dim = dim_packets * 8;
            let parameters = OptParameters {
                hidden: heads * head_dim,
                heads,
                head_dim,
                capacity,
                output_split: split.0,
                reserved: [0, split.1, 0],
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
            let command = CommandDescriptor { kernel, mode: 0, tag: 0, flags, result_address, result_length, args };
            if let Ok(decoded) = OptKernel::decode(&command, &memory) {
                prop_assert_eq!(decoded.stage_items(9).end, decoded.items());
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
                    0 => p.output_split = nudge32(p.output_split),
                    1 => p.reserved[1] = nudge32(p.reserved[1]),
                    2 => p.head_dim = nudge32(p.head_dim),
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
                        // Another consistent shape: heads x 8 or 16 dims, smaller than the
                        // layout.
                        p.heads = shape.0;
                        p.head_dim = 8 * shape.1;
                        p.hidden = p.heads * p.head_dim;
                        p.capacity = shape.2;
                        c.result_length = u64::from(p.hidden) * 4;
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
