//! Device compute kernels.
//!
//! A launch is split by the CCM scheduler into *work items*; each item runs on one µthread,
//! produces one contiguous range of the launch's result space, and has a cost (operations and
//! bytes) from which the emulator derives its duration. The kernel code really runs: results
//! in device memory are the real answer the host verifies.
//!
//! Adding a kernel: a module here, a [`shared_abi::KernelId`] variant, and an arm in
//! [`Kernel::decode`].

pub mod knn;

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
}

impl Kernel {
    /// Decodes and validates a command against a device memory of `memory_size` bytes: every
    /// input and the result space must lie inside device memory, and the result space must be
    /// exactly the size the kernel writes. Malformed input yields a status, never a panic.
    pub fn decode(command: &CommandDescriptor, memory_size: u64) -> Result<Kernel, Status> {
        match KernelId::try_from(command.kernel)? {
            KernelId::KnnDistance => Ok(Kernel::Knn(knn::KnnKernel::decode(command, memory_size)?)),
        }
    }

    /// Work items in the launch.
    pub fn items(&self) -> u32 {
        match self {
            Kernel::Knn(k) => k.items(),
        }
    }

    /// Item `index` (`index < items()`, else [`Status::ArgumentOutOfRange`]).
    pub fn item(&self, index: u32) -> Result<ItemSpec, Status> {
        match self {
            Kernel::Knn(k) => k.item(index),
        }
    }

    /// Runs item `index`: reads its inputs and writes its result bytes in device memory.
    pub fn execute<M: DeviceMemory>(&self, index: u32, memory: &mut M) -> Result<(), Status> {
        match self {
            Kernel::Knn(k) => k.execute(index, memory),
        }
    }
}
