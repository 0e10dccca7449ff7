//! The flow-control message: the host's new heads, sent with one CXL.mem store into the
//! device's flow-control block ([`crate::device_map::FLOW_CONTROL`]).

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// New head indexes of one ring pair. Both are free-running; the device accepts them only if
/// they move forward and stay at or below its own tails (see [`crate::ring::head_update_is_valid`]).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct FlowControlMessage {
    /// Metadata records moved to the ready pool (edge H2).
    pub metadata_head: u64,
    /// Payload slots consumed over the contiguous prefix (edge H3).
    pub payload_head: u64,
}

const _: () = assert!(core::mem::size_of::<FlowControlMessage>() == 16);
const _: () = assert!(core::mem::offset_of!(FlowControlMessage, metadata_head) == 0);
const _: () = assert!(core::mem::offset_of!(FlowControlMessage, payload_head) == 8);
