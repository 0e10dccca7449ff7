//! The device kernels' floating-point arithmetic, in the exact order the device evaluates it.
//!
//! Results that cross the link are checked bit for bit against plain host references
//! (crate `workloads`): a KNN distance, a PageRank neighbour sum, every step of the OPT
//! attention block. `f32` addition is not associative, so the device's lane layout (element `j`
//! in lane `j % 8` of a [`shared_abi::params::VECTOR_LANES`]-lane register, lanes reduced in
//! order) is part of the answer. This crate holds that arithmetic once: the firmware's kernels
//! (`firmware::kernels::*`, which re-export these items) and the host references call the same
//! functions, so they cannot drift apart.
//!
//! Why a crate of its own rather than a module of `shared-abi`: shared-abi is the byte
//! contract (layouts, constants, index arithmetic; what [`shared_abi::LAYOUT_HASH`] covers), and
//! a summation order is not a layout two builds can compare at attach; it needs `libm` (`fmaf`,
//! `expf`, `sqrtf`), which the driver and the emulator, which speak the ABI, have no use for.
//! And why not in the firmware: the host references must not depend on the device's firmware.
//!
//! | module | kernel |
//! |---|---|
//! | [`knn`] | the squared L2 distance |
//! | [`pagerank`] | the neighbour gather sum |
//! | [`opt`] | lane sums, LayerNorm, softmax and projection steps of the attention block |
//!
//! `no_std`, no allocation, no `unsafe`, and the firmware's lints (no `unwrap`, no slice
//! indexing, no unchecked integer arithmetic): this is device code.
#![cfg_attr(not(test), no_std)]
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

pub mod knn;
pub mod opt;
pub mod pagerank;
