//! ABI identity: magic, version and a hash over every layout.

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

const fn compute_layout_hash() -> u64 {
    let fields: [u64; 31] = [
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
            | crate::registers::MAILBOX_MIRROR << 16
            | crate::registers::WINDOW_BYTES << 32,
        ABI_VERSION as u64,
    ];
    let mut hash = 0xcbf2_9ce4_8422_2325;
    let mut rest: &[u64] = &fields;
    while let [field, tail @ ..] = rest {
        hash = fold(hash, *field);
        rest = tail;
    }
    hash
}

/// A hash over the size and field offsets of every ABI type and over the address map.
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
}
