//! The 32-byte metadata record: one per payload.

use bitflags::bitflags;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

bitflags! {
    /// Flags of a metadata record.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct MetadataFlags: u32 {
        /// The last payload of its launch: the device has streamed every result byte.
        const LAST = 1 << 0;
        /// The launch failed; `length` is zero and the record carries the status in
        /// `result_offset`.
        const ERROR = 1 << 1;
    }
}

/// One record of the metadata ring.
///
/// Records carry their own sequence number (their absolute ring index), so a stale record (left
/// from the previous lap) or a torn one (read while being written) is detected, not consumed.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct MetadataRecord {
    /// The absolute metadata index of this record.
    pub sequence: u64,
    /// Byte offset of the payload's data in the launch's result space.
    pub result_offset: u64,
    /// Payload ring slot holding the data (`payload index % capacity`).
    pub payload_slot: u32,
    /// Bytes of result data in the slot (at most the slot size).
    pub length: u32,
    /// The launch tag the host gave the command.
    pub tag: u32,
    /// [`MetadataFlags`] bits.
    pub flags: u32,
}

impl MetadataRecord {
    /// The flags, ignoring unknown bits.
    pub const fn flag_set(&self) -> MetadataFlags {
        MetadataFlags::from_bits_truncate(self.flags)
    }
}

const _: () = assert!(core::mem::size_of::<MetadataRecord>() == 32);
const _: () = assert!(core::mem::offset_of!(MetadataRecord, sequence) == 0);
const _: () = assert!(core::mem::offset_of!(MetadataRecord, result_offset) == 8);
const _: () = assert!(core::mem::offset_of!(MetadataRecord, payload_slot) == 16);
const _: () = assert!(core::mem::offset_of!(MetadataRecord, length) == 20);
const _: () = assert!(core::mem::offset_of!(MetadataRecord, tag) == 24);
const _: () = assert!(core::mem::offset_of!(MetadataRecord, flags) == 28);
