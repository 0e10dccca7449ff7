//! The offload command descriptor: what a launch store (BS, AXLE) or the RP mailbox carries.

use bitflags::bitflags;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::status::Status;

/// A device kernel, as the host names it in a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum KernelId {
    /// Squared L2 distance of each (query, row) pair: `args = [database, queries, rows | dim << 32, query_count]`.
    KnnDistance = 1,
    /// SSSP relaxation: one pull-style Bellman-Ford round over every vertex (`firmware::kernels::sssp`).
    SsspRelax = 2,
    /// PageRank neighbour gather and accumulation (`firmware::kernels::pagerank`).
    PageRankGather = 3,
    /// SSB predicate filtering into a row bitmap (`firmware::kernels::ssb`).
    SsbFilter = 4,
    /// OPT decoder attention block of one layer for one token (`firmware::kernels::opt`).
    OptAttention = 5,
    /// DLRM embedding sparse length sum (`firmware::kernels::dlrm`).
    DlrmSls = 6,
}

impl TryFrom<u32> for KernelId {
    type Error = Status;
    fn try_from(value: u32) -> Result<Self, Status> {
        match value {
            1 => Ok(KernelId::KnnDistance),
            2 => Ok(KernelId::SsspRelax),
            3 => Ok(KernelId::PageRankGather),
            4 => Ok(KernelId::SsbFilter),
            5 => Ok(KernelId::OptAttention),
            6 => Ok(KernelId::DlrmSls),
            _ => Err(Status::UnknownKernel),
        }
    }
}

/// How the host launched a command; decides how completion is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum LaunchMode {
    /// Remote polling: enqueued through the CXL.io mailbox; completion in the mailbox status.
    RemotePolling = 1,
    /// Bulk synchronous: the launch store's response returns when the kernel completes.
    BulkSynchronous = 2,
    /// Asynchronous back-streaming: results are streamed into the host rings.
    BackStreaming = 3,
}

impl TryFrom<u32> for LaunchMode {
    type Error = Status;
    fn try_from(value: u32) -> Result<Self, Status> {
        match value {
            1 => Ok(LaunchMode::RemotePolling),
            2 => Ok(LaunchMode::BulkSynchronous),
            3 => Ok(LaunchMode::BackStreaming),
            _ => Err(Status::MalformedDescriptor),
        }
    }
}

bitflags! {
    /// Flags of a command, handled by the firmware's command processor (kernels see none).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct CommandFlags: u32 {
        /// AXLE_Interrupt: raise the interrupt line once per finished DMA request.
        const INTERRUPT = 1 << 0;
    }
}

/// The 64-byte offload command descriptor (one cache line, one CXL.mem store).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct CommandDescriptor {
    /// [`KernelId`] as `u32`.
    pub kernel: u32,
    /// [`LaunchMode`] as `u32`.
    pub mode: u32,
    /// Launch tag chosen by the host; echoed in every metadata record and completion.
    pub tag: u32,
    /// [`CommandFlags`] bits; unknown bits are a malformed descriptor.
    pub flags: u32,
    /// Device address of the kernel's result space.
    pub result_address: u64,
    /// Bytes of the result space.
    pub result_length: u64,
    /// Kernel arguments (meaning per [`KernelId`]).
    pub args: [u64; 4],
}

const _: () = assert!(core::mem::size_of::<CommandDescriptor>() == 64);
const _: () = assert!(core::mem::offset_of!(CommandDescriptor, kernel) == 0);
const _: () = assert!(core::mem::offset_of!(CommandDescriptor, mode) == 4);
const _: () = assert!(core::mem::offset_of!(CommandDescriptor, tag) == 8);
const _: () = assert!(core::mem::offset_of!(CommandDescriptor, flags) == 12);
const _: () = assert!(core::mem::offset_of!(CommandDescriptor, result_address) == 16);
const _: () = assert!(core::mem::offset_of!(CommandDescriptor, result_length) == 24);
const _: () = assert!(core::mem::offset_of!(CommandDescriptor, args) == 32);

#[cfg(test)]
mod tests {
    use super::*;

    const KERNELS: [KernelId; 6] = [
        KernelId::KnnDistance,
        KernelId::SsspRelax,
        KernelId::PageRankGather,
        KernelId::SsbFilter,
        KernelId::OptAttention,
        KernelId::DlrmSls,
    ];

    #[test]
    fn every_kernel_id_decodes_from_its_own_code_and_no_other_code_does() {
        for kernel in KERNELS {
            assert_eq!(KernelId::try_from(kernel as u32), Ok(kernel));
        }
        for code in [0, 7, u32::MAX] {
            assert_eq!(
                KernelId::try_from(code),
                Err(Status::UnknownKernel),
                "{code}"
            );
        }
    }

    #[test]
    fn every_launch_mode_decodes_from_its_own_code_and_no_other_code_does() {
        for mode in [
            LaunchMode::RemotePolling,
            LaunchMode::BulkSynchronous,
            LaunchMode::BackStreaming,
        ] {
            assert_eq!(LaunchMode::try_from(mode as u32), Ok(mode));
        }
        for code in [0, 4, u32::MAX] {
            assert_eq!(
                LaunchMode::try_from(code),
                Err(Status::MalformedDescriptor),
                "{code}"
            );
        }
    }
}
