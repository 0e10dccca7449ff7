//! DLRM sparse length sum kernel.
//!
//! (Being written: see the workload issue. The decoder refuses every command until then.)

use crate::hal::DeviceMemory;
use crate::kernels::ItemSpec;
use shared_abi::{CommandDescriptor, Status};

/// A decoded, validated launch of this kernel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DlrmKernel {
    items: u32,
}

impl DlrmKernel {
    /// Decodes and validates `command` against device memory (read only).
    pub fn decode<M: DeviceMemory>(
        command: &CommandDescriptor,
        memory: &M,
    ) -> Result<Self, Status> {
        let _ = (command, memory);
        Err(Status::UnknownKernel)
    }

    /// Work items.
    pub fn items(&self) -> u32 {
        self.items
    }

    /// Item `index`.
    pub fn item<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<ItemSpec, Status> {
        let _ = (index, memory);
        Err(Status::ArgumentOutOfRange)
    }

    /// Runs item `index`.
    pub fn execute<M: DeviceMemory>(&self, index: u32, memory: &mut M) -> Result<(), Status> {
        let _ = (index, memory);
        Err(Status::ArgumentOutOfRange)
    }
}
