//! OPT attention block ([`crate::KernelId::OptAttention`]): `args = [parameters, key cache, value
//! cache, position]`; the [`OptParameters`] block holds the shape and the addresses of the
//! weights, the input and the kernel's workspace. The shape limits the device enforces and the
//! sizes the host allocates (the KV caches, the workspace) are here; the kernel's stages and
//! their validation are `firmware::kernels::opt`.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::VECTOR_LANES;

/// Elements of one 32-byte packet: one vector register of [`VECTOR_LANES`] `f32`. `head_dim`
/// must be a multiple of it.
pub const PACKET_ELEMENTS: u32 = VECTOR_LANES as u32;

/// Token packets of one softmax block: 64 tokens, the 256-byte chunk of a head's scores that
/// one processing unit holds (M²NDP `m2ndp_interleave_size=256`; `configs.stride` of its
/// examples). Shapes the workspace ([`WorkspaceLayout`]) and the softmax's summation order.
pub const SOFTMAX_BLOCK_PACKETS: u32 = 8;

/// Largest hidden size (bounds the work of one launch).
pub const MAX_HIDDEN: u32 = 4096;

/// Largest head dimension (a head's query, one key row and a partial are stack buffers).
pub const MAX_HEAD_DIM: u32 = 256;

/// Largest KV cache capacity: OPT's 2048 positions.
pub const MAX_POSITIONS: u32 = 2048;

/// Largest K split of the output projection.
pub const MAX_OUTPUT_SPLIT: u32 = 16;

/// Bytes of one element (`f32`).
pub const ELEMENT_BYTES: u64 = 4;

/// Alignment of the parameter block.
pub const PARAMETER_ALIGNMENT: u64 = 8;

/// Alignment of every other address (the `f32` natural alignment).
pub const ADDRESS_ALIGNMENT: u64 = 4;

/// The parameter block the command's `args[0]` points at.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct OptParameters {
    /// Hidden size (`heads * head_dim`).
    pub hidden: u32,
    /// Attention heads.
    pub heads: u32,
    /// Dimensions per head (a multiple of [`PACKET_ELEMENTS`]).
    pub head_dim: u32,
    /// Positions each KV cache holds.
    pub capacity: u32,
    /// Parts of the output projection's columns (M²NDP's `OptOutProj` uses 4).
    pub output_split: u32,
    /// Must be zero.
    pub reserved: [u32; 3],
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
const _: () = assert!(core::mem::offset_of!(OptParameters, hidden) == 0);
const _: () = assert!(core::mem::offset_of!(OptParameters, heads) == 4);
const _: () = assert!(core::mem::offset_of!(OptParameters, head_dim) == 8);
const _: () = assert!(core::mem::offset_of!(OptParameters, capacity) == 12);
const _: () = assert!(core::mem::offset_of!(OptParameters, output_split) == 16);
const _: () = assert!(core::mem::offset_of!(OptParameters, reserved) == 20);
const _: () = assert!(core::mem::offset_of!(OptParameters, input) == 32);
const _: () = assert!(core::mem::offset_of!(OptParameters, ln_gamma) == 40);
const _: () = assert!(core::mem::offset_of!(OptParameters, ln_beta) == 48);
const _: () = assert!(core::mem::offset_of!(OptParameters, qkv_weight) == 56);
const _: () = assert!(core::mem::offset_of!(OptParameters, qkv_bias) == 64);
const _: () = assert!(core::mem::offset_of!(OptParameters, output_weight) == 72);
const _: () = assert!(core::mem::offset_of!(OptParameters, output_bias) == 80);
const _: () = assert!(core::mem::offset_of!(OptParameters, workspace) == 88);

impl OptParameters {
    /// The block's bytes as the kernel reads them (for a host to write into device memory).
    pub fn bytes(&self) -> &[u8] {
        self.as_bytes()
    }
}

/// Bytes of the parameter block.
pub const PARAMETER_BYTES: u64 = core::mem::size_of::<OptParameters>() as u64;

/// `ceil(count / per)`, 0 when `per` is 0.
const fn ceil_div(count: u64, per: u64) -> u64 {
    if per == 0 {
        0
    } else {
        count.div_ceil(per)
    }
}

/// Where each region of the workspace starts, in elements from its start (see
/// [`workspace_bytes`]). The device alone reads and writes the workspace; the host allocates
/// its size and passes its address, so its layout is part of the contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkspaceLayout {
    /// LayerNorm0's mean and reciprocal deviation (one packet).
    pub statistics: u64,
    /// The normalized input (`hidden`).
    pub normalized: u64,
    /// The query (`hidden`).
    pub query: u64,
    /// Scores, then exponents, `[heads][capacity]`.
    pub scores: u64,
    /// Token packets' maxima, `[heads][packets]` with `packets = ceil(capacity / 8)`.
    pub packet_maxima: u64,
    /// Token packets' exponent sums, `[heads][packets]`.
    pub packet_sums: u64,
    /// Token packets' weighted values, `[heads][packets][head_dim]`.
    pub packet_partials: u64,
    /// Softmax blocks' maxima, `[heads][blocks]` with `blocks = ceil(packets / 8)`.
    pub block_maxima: u64,
    /// Softmax blocks' exponent sums, `[heads][blocks]`.
    pub block_sums: u64,
    /// Softmax blocks' weighted values, `[heads][blocks][head_dim]`.
    pub block_partials: u64,
    /// The attention output (`hidden`).
    pub attention: u64,
    /// The output projection's part sums, `[output_split][hidden]`.
    pub out_partials: u64,
    /// Elements in all.
    pub elements: u64,
}

impl WorkspaceLayout {
    /// The layout for a shape; `None` on overflow.
    pub fn new(
        hidden: u32,
        heads: u32,
        head_dim: u32,
        capacity: u32,
        output_split: u32,
    ) -> Option<WorkspaceLayout> {
        let hidden = u64::from(hidden);
        let heads = u64::from(heads);
        let head_dim = u64::from(head_dim);
        let packets = ceil_div(u64::from(capacity), u64::from(PACKET_ELEMENTS));
        let blocks = ceil_div(packets, u64::from(SOFTMAX_BLOCK_PACKETS));
        let sizes = [
            u64::from(PACKET_ELEMENTS),
            hidden,
            hidden,
            heads.checked_mul(u64::from(capacity))?,
            heads.checked_mul(packets)?,
            heads.checked_mul(packets)?,
            heads.checked_mul(packets)?.checked_mul(head_dim)?,
            heads.checked_mul(blocks)?,
            heads.checked_mul(blocks)?,
            heads.checked_mul(blocks)?.checked_mul(head_dim)?,
            hidden,
            u64::from(output_split).checked_mul(hidden)?,
        ];
        let mut starts = [0_u64; 13];
        let mut next = 0_u64;
        for (start, size) in starts.iter_mut().zip(sizes) {
            *start = next;
            next = next.checked_add(size)?;
        }
        let [statistics, normalized, query, scores, packet_maxima, packet_sums, packet_partials, block_maxima, block_sums, block_partials, attention, out_partials, _] =
            starts;
        Some(WorkspaceLayout {
            statistics,
            normalized,
            query,
            scores,
            packet_maxima,
            packet_sums,
            packet_partials,
            block_maxima,
            block_sums,
            block_partials,
            attention,
            out_partials,
            elements: next,
        })
    }
}

/// Bytes of the workspace of a shape (the regions of [`WorkspaceLayout`], all `f32`). `None`
/// on overflow.
pub fn workspace_bytes(
    hidden: u32,
    heads: u32,
    head_dim: u32,
    capacity: u32,
    output_split: u32,
) -> Option<u64> {
    WorkspaceLayout::new(hidden, heads, head_dim, capacity, output_split)?
        .elements
        .checked_mul(ELEMENT_BYTES)
}

/// Bytes of one KV cache (keys or values) of one layer: `heads x capacity x head_dim` `f32`,
/// head-major.
pub fn cache_bytes(heads: u32, capacity: u32, head_dim: u32) -> Option<u64> {
    u64::from(heads)
        .checked_mul(u64::from(capacity))?
        .checked_mul(u64::from(head_dim))?
        .checked_mul(ELEMENT_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_five_u32_three_reserved_then_eight_u64_little_endian() {
        let parameters = OptParameters {
            hidden: 1,
            heads: 2,
            head_dim: 3,
            capacity: 4,
            output_split: 5,
            reserved: [0; 3],
            input: 6,
            ln_gamma: 7,
            ln_beta: 8,
            qkv_weight: 9,
            qkv_bias: 10,
            output_weight: 11,
            output_bias: 12,
            workspace: 0x0d00_0000_0000_000e,
        };
        let mut expected = [0_u8; PARAMETER_BYTES as usize];
        let (words, addresses) = expected.split_at_mut(32);
        for (chunk, field) in words.chunks_exact_mut(4).zip([1_u32, 2, 3, 4, 5, 0, 0, 0]) {
            chunk.copy_from_slice(&field.to_le_bytes());
        }
        for (chunk, field) in
            addresses
                .chunks_exact_mut(8)
                .zip([6_u64, 7, 8, 9, 10, 11, 12, 0x0d00_0000_0000_000e])
        {
            chunk.copy_from_slice(&field.to_le_bytes());
        }
        assert_eq!(parameters.bytes(), &expected[..]);
    }

    #[test]
    fn workspace_regions_follow_each_other_and_sum_to_workspace_bytes() {
        // hidden 16 = 2 heads of 8, capacity 72: 9 token packets, 2 softmax blocks; split 3.
        let layout = WorkspaceLayout::new(16, 2, 8, 72, 3).unwrap();
        assert_eq!(layout.statistics, 0);
        assert_eq!(layout.normalized, 8);
        assert_eq!(layout.query, 8 + 16);
        assert_eq!(layout.scores, 8 + 32);
        assert_eq!(layout.packet_maxima, 40 + 2 * 72);
        assert_eq!(layout.packet_sums, 184 + 2 * 9);
        assert_eq!(layout.packet_partials, 202 + 2 * 9);
        assert_eq!(layout.block_maxima, 220 + 2 * 9 * 8);
        assert_eq!(layout.block_sums, 364 + 2 * 2);
        assert_eq!(layout.block_partials, 368 + 2 * 2);
        assert_eq!(layout.attention, 372 + 2 * 2 * 8);
        assert_eq!(layout.out_partials, 404 + 16);
        assert_eq!(layout.elements, 420 + 3 * 16);
        assert_eq!(workspace_bytes(16, 2, 8, 72, 3), Some(468 * 4));
        assert_eq!(
            workspace_bytes(u32::MAX, u32::MAX, u32::MAX, u32::MAX, 1),
            None
        );
        assert_eq!(cache_bytes(2, 72, 8), Some(2 * 72 * 8 * 4));
    }
}
