//! Every byte that crosses the AXLE host/device boundary.
//!
//! This crate is the contract between the host (driver and runtime) and the CCM firmware: the
//! device address map, the RP mailbox registers, the offload command descriptor, the shadow
//! scatter-gather descriptors, the ring control block, the 32-byte metadata record, the
//! flow-control message, the error codes, and the kernels' side ([`params`]: each kernel's
//! argument packing, the parameter blocks the host writes into device memory, the shape limits
//! the device enforces). It holds layouts, constants and pure index arithmetic only: no I/O, no
//! timing, no allocation, no `unsafe`, no floating point (the arithmetic the device kernels and
//! the host references share bit for bit is the `kernel-arith` crate).
//!
//! Every type that the other side reads has a compile-time assertion of its size and of the
//! offset of every field; [`LAYOUT_HASH`] folds all of them (and the kernels' argument packings
//! and limits) into one number that attach compares, so two builds that disagree on any layout
//! refuse to talk.
#![no_std]
#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects,
        clippy::panic
    )
)]

pub mod command;
pub mod control;
pub mod device_map;
pub mod flow;
pub mod layout;
pub mod mailbox;
pub mod metadata;
pub mod params;
pub mod region;
pub mod registers;
pub mod ring;
pub mod sgl;
pub mod status;
pub mod units;

pub use command::{CommandDescriptor, KernelId, LaunchMode};
pub use control::{RingControlBlock, RING_LINE};
pub use flow::FlowControlMessage;
pub use layout::{ABI_MAGIC, ABI_VERSION, LAYOUT_HASH};
pub use metadata::{MetadataFlags, MetadataRecord};
pub use ring::RingIndex;
pub use sgl::{ScatterGatherEntry, ShadowRegionDescriptor};
pub use status::Status;
pub use units::{ByteLength, DeviceAddress, HostPhysAddr, Ticks};
