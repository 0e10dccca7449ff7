//! The kernels' side of the contract: how each kernel's command arguments are packed, the
//! parameter blocks the host writes into device memory for the device to read, the shape
//! limits the device enforces, and the sizes of the inputs and results the host allocates.
//!
//! A [`crate::CommandDescriptor`]'s `args` mean something per [`crate::KernelId`]; several
//! kernels take the address of a parameter block there (a `#[repr(C)]` little-endian struct the
//! host writes once at load time). Both are bytes that cross the link as surely as the
//! descriptor itself, so they live here, with a compile-time assertion of every block's size and
//! field offsets, and [`crate::LAYOUT_HASH`] folds those offsets, the argument packings and the
//! shape limits: a host and a device that disagree on any of them refuse to attach.
//!
//! What each kernel does with its arguments, how it validates them and what it costs stays with
//! the kernel (`firmware::kernels::*`); the arithmetic both the device and the host references
//! must evaluate bit for bit is in the `kernel-arith` crate.
//!
//! | module | kernel |
//! |---|---|
//! | [`knn`] | [`crate::KernelId::KnnDistance`] |
//! | [`sssp`] | [`crate::KernelId::SsspRelax`] |
//! | [`pagerank`] | [`crate::KernelId::PageRankGather`] |
//! | [`ssb`] | [`crate::KernelId::SsbFilter`] |
//! | [`opt`] | [`crate::KernelId::OptAttention`] |
//! | [`dlrm`] | [`crate::KernelId::DlrmSls`] |

pub mod dlrm;
pub mod knn;
pub mod opt;
pub mod pagerank;
pub mod ssb;
pub mod sssp;

/// Vector lanes of a CCM µthread: `f32` (or `u32`) elements per vector instruction. M²NDP's
/// performance configuration (`config/performance/M2NDP/m2ndp.config`) has `simd_width=256`
/// bits, 8 lanes of 32 bits, as its kernels' `vle32.v` over 32-byte packets show. Part of the
/// contract twice over: vector lengths a host sends must be multiples of it (KNN's and DLRM's
/// `dim`, OPT's `head_dim`), and every kernel's vector arithmetic (and so its summation order,
/// which the host references reproduce bit for bit) is written for this width.
pub const VECTOR_LANES: usize = 8;
