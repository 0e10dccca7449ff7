//! OPT attention kernel.
//!
//! (Being written: see the workload issue. The decoder refuses every command until then.)

use crate::hal::DeviceMemory;
use crate::kernels::ItemSpec;
use shared_abi::{CommandDescriptor, Status};

/// A decoded, validated launch of this kernel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OptKernel {
    items: u32,
}

impl OptKernel {
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

    /// Stages.
    pub fn stages(&self) -> u32 {
        1
    }

    /// Items of stage `stage`.
    pub fn stage_items(&self, stage: u32) -> core::ops::Range<u32> {
        if stage == 0 {
            0..self.items
        } else {
            0..0
        }
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
