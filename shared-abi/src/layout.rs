//! ABI identity: magic, version and a hash over every layout.

use crate::params::{self, dlrm, knn, opt, pagerank, ssb, sssp};
use crate::{
    control, CommandDescriptor, FlowControlMessage, MetadataRecord, RingControlBlock,
    ScatterGatherEntry, ShadowRegionDescriptor,
};
use core::mem::{offset_of, size_of};

/// "AXLERING" in ASCII, little-endian.
pub const ABI_MAGIC: u64 = u64::from_le_bytes(*b"AXLERING");

/// Bumped on every incompatible change of any layout or protocol rule.
pub const ABI_VERSION: u32 = 1;

const fn fold(hash: u64, value: u64) -> u64 {
    // FNV-1a over the eight bytes of `value`.
    let mut h = hash;
    let bytes = value.to_le_bytes();
    let mut rest: &[u8] = &bytes;
    while let [byte, tail @ ..] = rest {
        h ^= *byte as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        rest = tail;
    }
    h
}

/// FNV-1a's offset basis: where the fold starts.
const HASH_SEED: u64 = 0xcbf2_9ce4_8422_2325;

/// The link's own layouts: control block, metadata record, command descriptor, flow-control
/// message, shadow descriptors, the device address map, mailbox and register offsets.
const fn link_fields() -> [u64; 32] {
    [
        size_of::<RingControlBlock>() as u64,
        control::METADATA_TAIL_OFFSET,
        control::PAYLOAD_TAIL_OFFSET,
        control::DEVICE_STATUS_OFFSET,
        control::METADATA_HEAD_OFFSET,
        control::PAYLOAD_HEAD_OFFSET,
        size_of::<MetadataRecord>() as u64,
        offset_of!(MetadataRecord, sequence) as u64,
        offset_of!(MetadataRecord, result_offset) as u64,
        offset_of!(MetadataRecord, payload_slot) as u64,
        offset_of!(MetadataRecord, length) as u64,
        offset_of!(MetadataRecord, tag) as u64,
        offset_of!(MetadataRecord, flags) as u64,
        size_of::<CommandDescriptor>() as u64,
        offset_of!(CommandDescriptor, result_address) as u64,
        offset_of!(CommandDescriptor, args) as u64,
        size_of::<FlowControlMessage>() as u64,
        offset_of!(FlowControlMessage, payload_head) as u64,
        size_of::<ShadowRegionDescriptor>() as u64,
        offset_of!(ShadowRegionDescriptor, payload_offset) as u64,
        offset_of!(ShadowRegionDescriptor, entry_count) as u64,
        size_of::<ScatterGatherEntry>() as u64,
        crate::device_map::LAUNCH_WINDOW.0,
        crate::device_map::FLOW_CONTROL.0,
        crate::device_map::SHADOW_DESCRIPTOR.0,
        crate::device_map::SHADOW_ENTRIES.0,
        crate::device_map::RP_DESCRIPTOR.0,
        crate::device_map::DATA_BASE.0,
        crate::mailbox::DOORBELL | crate::mailbox::STATUS << 8 | crate::mailbox::DEQUEUE << 16,
        crate::registers::MAGIC
            | crate::registers::DATA_END << 8
            | crate::registers::EPOCH << 24
            | crate::registers::MAILBOX_MIRROR << 16
            | crate::registers::WINDOW_BYTES << 32,
        ABI_VERSION as u64,
        // The highest status code: a build that knows a code its peer does not (a new
        // `Status`) refuses to talk rather than report "unknown status".
        crate::Status::HalContract as u64,
    ]
}

/// The kernels' side ([`crate::params`]): parameter blocks, argument packings (each a packing
/// of distinct small values, so a moved or resized field changes the packed word), and the
/// limits and sizes both sides must agree on.
const fn kernel_fields() -> [u64; 44] {
    [
        params::VECTOR_LANES as u64,
        knn::pack_shape(1, 2),
        knn::RESULT_BYTES_PER_ITEM as u64,
        size_of::<sssp::SsspParameters>() as u64,
        offset_of!(sssp::SsspParameters, vertices) as u64,
        offset_of!(sssp::SsspParameters, arcs) as u64,
        offset_of!(sssp::SsspParameters, offsets) as u64,
        offset_of!(sssp::SsspParameters, targets) as u64,
        offset_of!(sssp::SsspParameters, weights) as u64,
        sssp::PARAMETERS_ALIGNMENT,
        sssp::INFINITY as u64,
        size_of::<pagerank::PageRankParameters>() as u64,
        offset_of!(pagerank::PageRankParameters, vertices) as u64,
        offset_of!(pagerank::PageRankParameters, arcs) as u64,
        offset_of!(pagerank::PageRankParameters, offsets) as u64,
        offset_of!(pagerank::PageRankParameters, sources) as u64,
        pagerank::PARAMETERS_ALIGNMENT,
        pagerank::VERTICES_PER_ITEM as u64,
        ssb::pack_rows(1, 2),
        ssb::Predicate {
            quantity_low: 1,
            quantity_high: 2,
            discount_low: 3,
            discount_high: 4,
        }
        .pack(),
        ssb::ROWS_PER_PACKET as u64 | ssb::VALUE_BYTES << 32,
        dlrm::pack_shape(1, 2),
        dlrm::pack_batch(1, 2),
        dlrm::ELEMENT_BYTES,
        size_of::<opt::OptParameters>() as u64,
        offset_of!(opt::OptParameters, hidden) as u64,
        offset_of!(opt::OptParameters, heads) as u64,
        offset_of!(opt::OptParameters, head_dim) as u64,
        offset_of!(opt::OptParameters, capacity) as u64,
        offset_of!(opt::OptParameters, output_split) as u64,
        offset_of!(opt::OptParameters, reserved) as u64,
        offset_of!(opt::OptParameters, input) as u64,
        offset_of!(opt::OptParameters, ln_gamma) as u64,
        offset_of!(opt::OptParameters, ln_beta) as u64,
        offset_of!(opt::OptParameters, qkv_weight) as u64,
        offset_of!(opt::OptParameters, qkv_bias) as u64,
        offset_of!(opt::OptParameters, output_weight) as u64,
        offset_of!(opt::OptParameters, output_bias) as u64,
        offset_of!(opt::OptParameters, workspace) as u64,
        opt::PARAMETER_ALIGNMENT | opt::ADDRESS_ALIGNMENT << 8 | opt::ELEMENT_BYTES << 16,
        opt::PACKET_ELEMENTS as u64 | (opt::SOFTMAX_BLOCK_PACKETS as u64) << 32,
        opt::MAX_HIDDEN as u64 | (opt::MAX_HEAD_DIM as u64) << 32,
        opt::MAX_POSITIONS as u64 | (opt::MAX_OUTPUT_SPLIT as u64) << 32,
        sssp::PARAMETERS_BYTES as u64 | (pagerank::PARAMETERS_BYTES as u64) << 32,
    ]
}

const fn compute_layout_hash() -> u64 {
    fold_all(fold_all(HASH_SEED, &link_fields()), &kernel_fields())
}

const fn fold_all(hash: u64, values: &[u64]) -> u64 {
    let mut hash = hash;
    let mut rest: &[u64] = values;
    while let [value, tail @ ..] = rest {
        hash = fold(hash, *value);
        rest = tail;
    }
    hash
}

/// A hash over the size and field offsets of every ABI type (the kernels' parameter blocks
/// included), over the address map, and over the kernels' argument packings and shape limits
/// ([`crate::params`]).
pub const LAYOUT_HASH: u64 = compute_layout_hash();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_spells_axlering() {
        assert_eq!(&ABI_MAGIC.to_le_bytes(), b"AXLERING");
    }

    #[test]
    fn layout_hash_changes_when_any_folded_value_changes() {
        assert_ne!(fold(1, 2), fold(1, 3));
        assert_ne!(LAYOUT_HASH, 0);
    }

    #[test]
    fn fold_is_fnv_1a_over_the_little_endian_bytes() {
        // FNV-1a 64 of the bytes 08 07 06 05 04 03 02 01, from a reference implementation.
        assert_eq!(
            fold(HASH_SEED, 0x0102_0304_0506_0708),
            0x0c6d_4496_e178_59d5
        );
        assert_eq!(fold_all(HASH_SEED, &[]), HASH_SEED);
        assert_eq!(
            fold_all(HASH_SEED, &[1, 2]),
            fold(fold(HASH_SEED, 1), 2),
            "values fold in order"
        );
    }

    #[test]
    fn layout_hash_is_pinned_so_a_layout_change_is_deliberate() {
        // Any change to a folded size, offset, address, packing or limit moves this number.
        // That is the point of the hash; when it moves on purpose, update the pin and say in
        // the commit which layout changed (and whether ABI_VERSION must change with it).
        assert_eq!(LAYOUT_HASH, 0xe3a1_2006_fe10_ac55);
    }

    #[test]
    fn layout_hash_folds_the_highest_status_code() {
        let highest = crate::Status::HalContract as u32;
        assert!(link_fields().contains(&u64::from(highest)));
        // A new code must replace HalContract in `link_fields`.
        assert!(crate::Status::try_from(highest + 1).is_err());
        assert!((0..=highest).all(|code| crate::Status::try_from(code).is_ok()));
    }

    #[test]
    fn layout_hash_covers_the_kernel_parameter_blocks() {
        // Without the kernels' fields the hash would be the fold of the link's alone.
        assert_ne!(LAYOUT_HASH, fold_all(HASH_SEED, &link_fields()));
        let kernel = kernel_fields();
        assert!(kernel.contains(&(size_of::<opt::OptParameters>() as u64)));
        assert!(kernel.contains(&(offset_of!(opt::OptParameters, workspace) as u64)));
        assert!(kernel.contains(&(size_of::<sssp::SsspParameters>() as u64)));
        assert!(kernel.contains(&(offset_of!(sssp::SsspParameters, weights) as u64)));
        assert!(kernel.contains(&(size_of::<pagerank::PageRankParameters>() as u64)));
        assert!(kernel.contains(&(offset_of!(pagerank::PageRankParameters, sources) as u64)));
        // One changed packing changes the hash.
        let mut changed = kernel;
        changed[1] = knn::pack_shape(2, 1);
        assert_ne!(
            fold_all(fold_all(HASH_SEED, &link_fields()), &changed),
            LAYOUT_HASH
        );
    }
}
