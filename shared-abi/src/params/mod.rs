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

use crate::{CommandDescriptor, KernelId};

/// What a command alone says about the work of its launch's first items: how many items the
/// launch's first stage has, and the fewest device-memory bytes any one of them moves.
///
/// The host reads it at launch (adaptive polling's bound on the first record, host-runtime's
/// `adaptive_poll`): the CCM shares its memory bandwidth equally among the items moving bytes
/// (`emulator::ccm`), so when a launch's first wave of `min(items, µthreads)` items starts
/// together, none of them ends before the wave has moved `item_bytes` each. The firmware's
/// tests check, kernel by kernel, that every item it describes moves at least `item_bytes`
/// and that the first stage has `items` items (`firmware::kernels`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkFloor {
    /// Items of the launch's first stage.
    pub items: u64,
    /// The fewest device-memory bytes any of those items moves.
    pub item_bytes: u64,
}

/// The [`WorkFloor`] of `command`, for kernels whose items' traffic the command's arguments
/// fix; `None` for the others (a graph item's traffic is its vertices' degrees, a DLRM item's
/// its bag's length, an SSB launch's last item may be short, OPT's stages read a parameter
/// block), and for a command the device would refuse. Then only the device's fixed latencies
/// bound the first record.
pub fn work_floor(command: &CommandDescriptor) -> Option<WorkFloor> {
    match KernelId::try_from(command.kernel) {
        Ok(KernelId::KnnDistance) => knn::work_floor(command.args),
        _ => None,
    }
}

/// Vector lanes of a CCM µthread: `f32` (or `u32`) elements per vector instruction. M²NDP's
/// performance configuration (`config/performance/M2NDP/m2ndp.config`) has `simd_width=256`
/// bits, 8 lanes of 32 bits, as its kernels' `vle32.v` over 32-byte packets show. Part of the
/// contract twice over: vector lengths a host sends must be multiples of it (KNN's and DLRM's
/// `dim`, OPT's `head_dim`), and every kernel's vector arithmetic (and so its summation order,
/// which the host references reproduce bit for bit) is written for this width.
pub const VECTOR_LANES: usize = 8;
