//! Device compute kernels.
//!
//! A launch is split by the CCM scheduler into *work items*; each item runs on one µthread,
//! produces one contiguous range of the launch's result space, and has a cost (operations and
//! bytes) from which the emulator derives its duration. The kernel code really runs: results
//! in device memory are the real answer the host verifies.
//!
//! Adding a kernel: a module here, a [`shared_abi::KernelId`] variant, and an arm in each
//! method of [`Kernel`].
//!
//! # Stages
//!
//! A kernel whose work has internal dependencies (the OPT attention block: projections, then
//! attention per head, then the output projection) splits its items into *stages*: the items
//! of stage `s` are `stage_items(s)`, consecutive and in stage order, and the command processor
//! dispatches a stage only when every item of the previous one has finished (a barrier, as a
//! device-wide kernel boundary would be). Items of an earlier stage write only the kernel's
//! own workspace in device memory and have a zero-length result; the last stage writes the
//! result space. Single-stage kernels have one stage holding every item.
//!
//! # Item descriptions may read device memory
//!
//! [`Kernel::item`] takes the device memory: a graph kernel's item covers a block of vertices
//! whose edge count (its cost, and where its result goes) is in the graph's offsets array. The
//! read is part of the kernel's modelled work and must not change anything.

pub mod dlrm;
pub mod knn;
pub mod opt;
pub mod pagerank;
mod ranges;
pub mod ssb;
pub mod sssp;

use core::ops::Range;

use crate::hal::DeviceMemory;
use shared_abi::{CommandDescriptor, KernelId, Status};

/// The modelled cost of one work item.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ItemCost {
    /// Instructions the µthread issues.
    pub operations: u64,
    /// Bytes of device memory the item reads and writes.
    pub bytes: u64,
}

/// One work item: the result bytes it produces and its cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ItemSpec {
    /// Offset of the item's result bytes in the result space.
    pub result_offset: u64,
    /// Bytes of result the item writes.
    pub result_length: u32,
    /// Modelled cost.
    pub cost: ItemCost,
}

/// A decoded, validated kernel launch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kernel {
    /// KNN distance.
    Knn(knn::KnnKernel),
    /// SSSP edge relaxation.
    Sssp(sssp::SsspKernel),
    /// PageRank gather.
    PageRank(pagerank::PageRankKernel),
    /// SSB predicate filter.
    Ssb(ssb::SsbKernel),
    /// OPT attention block.
    Opt(opt::OptKernel),
    /// DLRM sparse length sum.
    Dlrm(dlrm::DlrmKernel),
}

/// Calls `$method` on whichever kernel `$self` holds.
macro_rules! each_kernel {
    ($self:expr, $k:ident => $body:expr) => {
        match $self {
            Kernel::Knn($k) => $body,
            Kernel::Sssp($k) => $body,
            Kernel::PageRank($k) => $body,
            Kernel::Ssb($k) => $body,
            Kernel::Opt($k) => $body,
            Kernel::Dlrm($k) => $body,
        }
    };
}

impl Kernel {
    /// Decodes and validates a command against device memory: every input and the result
    /// space must lie inside it, and the result space must be exactly the size the kernel
    /// writes. A kernel with more arguments than the command holds reads a parameter block
    /// from `memory` (read only). Malformed input yields a status, never a panic.
    pub fn decode<M: DeviceMemory>(
        command: &CommandDescriptor,
        memory: &M,
    ) -> Result<Kernel, Status> {
        let memory_size = memory.size();
        Ok(match KernelId::try_from(command.kernel)? {
            KernelId::KnnDistance => Kernel::Knn(knn::KnnKernel::decode(command, memory_size)?),
            KernelId::SsspRelax => Kernel::Sssp(sssp::SsspKernel::decode(command, memory)?),
            KernelId::PageRankGather => {
                Kernel::PageRank(pagerank::PageRankKernel::decode(command, memory)?)
            }
            KernelId::SsbFilter => Kernel::Ssb(ssb::SsbKernel::decode(command, memory)?),
            KernelId::OptAttention => Kernel::Opt(opt::OptKernel::decode(command, memory)?),
            KernelId::DlrmSls => Kernel::Dlrm(dlrm::DlrmKernel::decode(command, memory)?),
        })
    }

    /// Work items in the launch, over all stages.
    pub fn items(&self) -> u32 {
        each_kernel!(self, k => k.items())
    }

    /// Stages of the launch (at least one).
    pub fn stages(&self) -> u32 {
        match self {
            Kernel::Opt(k) => k.stages(),
            _ => 1,
        }
    }

    /// The items of stage `stage` (empty past the last stage).
    pub fn stage_items(&self, stage: u32) -> Range<u32> {
        match self {
            Kernel::Opt(k) => k.stage_items(stage),
            _ if stage == 0 => 0..self.items(),
            _ => 0..0,
        }
    }

    /// Item `index` (`index < items()`, else [`Status::ArgumentOutOfRange`]), read from the
    /// launch's arguments and, where the kernel needs it, from `memory` (read only).
    pub fn item<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<ItemSpec, Status> {
        match self {
            Kernel::Knn(k) => k.item(index),
            Kernel::Sssp(k) => k.item(index, memory),
            Kernel::PageRank(k) => k.item(index, memory),
            Kernel::Ssb(k) => k.item(index, memory),
            Kernel::Opt(k) => k.item(index, memory),
            Kernel::Dlrm(k) => k.item(index, memory),
        }
    }

    /// Runs item `index`: reads its inputs and writes its result bytes in device memory.
    pub fn execute<M: DeviceMemory>(&self, index: u32, memory: &mut M) -> Result<(), Status> {
        each_kernel!(self, k => k.execute(index, memory))
    }
}
