//! The cost model: each stage's [`ItemCost`] constants beside the M²NDP kernel lines they
//! count, and the per-item costs built from them (see the parent module's "Cost model").

use super::*;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
