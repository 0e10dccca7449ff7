//! Device compute kernels.
//!
//! A launch is split by the CCM scheduler into *work items*; each item runs on one µthread,
//! produces one contiguous range of the launch's result space, and has a cost ([`ItemCost`]:
//! instructions by functional unit, and bytes) from which the emulator derives its duration.
//! The kernel code really runs: results in device memory are the real answer the host
//! verifies.
//!
//! Adding a kernel: a module here, a [`shared_abi::KernelId`] variant, and an arm in each
//! method of [`Kernel`]; what the host must agree on (argument packing, parameter block, shape
//! limits) in a module of [`shared_abi::params`], folded into [`shared_abi::LAYOUT_HASH`]; and
//! any arithmetic a host reference must reproduce bit for bit in the `kernel-arith` crate.
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
//! whose edge count (its cost, and whether the item is consistent at all) is in the graph's
//! offsets array. The read is part of the kernel's modelled work and must not change anything.
//! Where an item's result goes does not depend on it for any kernel today
//! ([`Kernel::result_range`]): the command processor takes the range from there for an item
//! that ran, and describes the item again only when it failed.

//! # Shared writes: which words two items may touch
//!
//! Items run through [`run_item`] with shared access to device memory, possibly at once (see
//! [`crate::hal`], "What may run concurrently"). No kernel today has two items of one stage
//! write the same byte, so none needs [`DeviceAtomics`]; where neighbouring items write
//! neighbouring bytes of one word they rely on [`DeviceMemory::write`] changing exactly its
//! bytes.
//!
//! - [`knn`]: item `i` writes its own query block's distances (a contiguous result range).
//! - [`sssp`]: pull-style (Jacobi) relaxation: item `i` writes the new distances of its own 8
//!   vertices only and reads the previous round's, which no item writes. (An earlier
//!   push-style kernel updated neighbours with an atomic minimum; it is gone, and the kernel
//!   names no atomic instruction.)
//! - [`pagerank`]: a pull gather: item `i` writes its own vertices' new ranks.
//! - [`ssb`]: item `i` writes its own rows' part of the result.
//! - [`dlrm`]: item `i` writes its own packet of one bag's pooled row.
//! - [`opt`]: within a stage, items write disjoint workspace elements (their packet's scores
//!   and maximum, their rows of the projection, their part's partial sums) or the caches'
//!   rows at `position`; reductions across items happen in the next stage, after the barrier,
//!   in a fixed order (the module's "No floating-point atomics").
//!
//! The result monitor refuses two items claiming the same result bytes (a kernel bug,
//! reported, never a panic). A kernel that lets two items update one word MUST use
//! [`DeviceAtomics`] for it, and its docs must say so here.
//!
//! The emulator checks these claims: `axle run W --interleave SEED` (`emulator::ccm::interleave`)
//! runs the items a CCM has running at once with their device-memory accesses interleaved one
//! word at a time, in a seeded order, and every workload verifies with the same figures as
//! without it; a twin of a kernel that updates a shared word with a plain read and write
//! loses updates there (the emulator's tests), the same kernel with `fetch_add_u32` does not.

pub mod dlrm;
pub mod knn;
pub mod opt;
pub mod pagerank;
mod ranges;
pub mod ssb;
pub mod sssp;

use crate::error::FirmwareError;
use core::ops::Range;

use crate::hal::{DeviceAtomics, DeviceMemory};
use shared_abi::{CommandDescriptor, KernelId};

/// Vector lanes of a CCM µthread (8, M²NDP's `simd_width=256`): part of the contract with the
/// host, so defined in [`shared_abi::params::VECTOR_LANES`].
pub use shared_abi::params::VECTOR_LANES;

/// Bytes of one device-memory burst: paper Table III's DDR5-4800 moves 64 bytes per access
/// (a 32-bit sub-channel at burst length 16, JEDEC JESD79-5). A random access to fewer bytes
/// still costs a whole burst; M²NDP's own 32-byte packets (its `packet_size=32`, on LPDDR5)
/// are half of one, and neighbouring packets that neighbouring µthreads read together are
/// counted at their size, as one burst between two of them.
pub const DRAM_BURST_BYTES: u64 = 64;

/// The modelled cost of one work item: the instructions its µthread issues, by the functional
/// unit of an M²NDP sub-core that executes them, and the bytes of device memory it moves.
///
/// The classes follow M²NDP's execution unit (`src/execution_unit.cc`, `get_unit`) and its
/// performance configuration: scalar integer, floating-point (`use_unified_alu=1`) and branch
/// instructions go to the two scalar units (`num_i_units=2`); scalar loads and stores to the
/// address unit (`num_address_units=1`); vector arithmetic of every type, vector moves,
/// masks and reductions to the one vector unit (`num_v_f_units=1`; M²NDP sends vector integer
/// operations there too); vector loads and stores, unit-stride or indexed, to the vector address
/// unit (`num_v_address_units=1`). The emulator turns these counts into a duration with the
/// sub-core's issue width and unit counts and the µthreads sharing it (`emulator::ccm`).
/// Special-function instructions (division, square root, exponent) are counted in the class
/// of their operands (scalar or vector); their longer initiation interval is not modelled.
/// An indexed (gather or scatter) vector access occupies the vector address unit one cycle per
/// distinct 32-byte packet its active lanes address, not one (M²NDP `execution_unit.cc`:
/// `inst_issue_interval *= inst.addr_set.size()`): [`ItemCost::indexed_extra_cycles`].
///
/// `bytes` is device-memory traffic: a streamed array costs its size, a random 4-byte access a
/// whole burst ([`DRAM_BURST_BYTES`], [`sssp::RANDOM_ACCESS_BYTES`]); reads of the µthread's
/// scratchpad cost instructions but no bytes.
///
/// On a real instruction set the same items retire far more instructions than these counts:
/// the QEMU port (`ports/qemu-riscv`, `rdinstret` per item) measures about 550 times
/// [`ItemCost::instructions`] for a KNN item of 64 elements and about 43 times for an SSSP
/// item. The counts are those of an M²NDP µthread issuing 8-lane vector instructions with a
/// floating-point unit; the port runs the kernels' portable Rust on a scalar rv32imac core
/// without one, where each lane of a `vfsub.vv`/`vfmacc.vv` pair becomes a software `f32`
/// subtraction and fused multiply-add (hundreds of instructions), and every operand is copied
/// through the HAL's bounds-checked [`DeviceMemory::read`]. The model times the modelled CCM,
/// not that core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ItemCost {
    /// Scalar integer, floating-point and branch instructions.
    pub scalar: u64,
    /// Scalar loads and stores.
    pub scalar_memory: u64,
    /// Vector arithmetic, logic, move, mask and reduction instructions.
    pub vector: u64,
    /// Vector loads and stores (unit-stride, strided or indexed).
    pub vector_memory: u64,
    /// Cycles the indexed vector accesses keep the vector address unit busy beyond one per
    /// instruction: for each, the distinct 32-byte packets its active lanes address, less one.
    pub indexed_extra_cycles: u64,
    /// Bytes of device memory the item reads and writes.
    pub bytes: u64,
}

impl ItemCost {
    /// No work.
    pub const ZERO: ItemCost = ItemCost {
        scalar: 0,
        scalar_memory: 0,
        vector: 0,
        vector_memory: 0,
        indexed_extra_cycles: 0,
        bytes: 0,
    };

    /// `count` scalar instructions.
    pub const fn scalar(count: u64) -> ItemCost {
        ItemCost {
            scalar: count,
            ..ItemCost::ZERO
        }
    }

    /// `count` scalar loads or stores.
    pub const fn scalar_memory(count: u64) -> ItemCost {
        ItemCost {
            scalar_memory: count,
            ..ItemCost::ZERO
        }
    }

    /// `count` vector arithmetic instructions.
    pub const fn vector(count: u64) -> ItemCost {
        ItemCost {
            vector: count,
            ..ItemCost::ZERO
        }
    }

    /// `count` vector loads or stores.
    pub const fn vector_memory(count: u64) -> ItemCost {
        ItemCost {
            vector_memory: count,
            ..ItemCost::ZERO
        }
    }

    /// `count` extra cycles of the vector address unit (indexed accesses).
    pub const fn indexed_extra_cycles(count: u64) -> ItemCost {
        ItemCost {
            indexed_extra_cycles: count,
            ..ItemCost::ZERO
        }
    }

    /// Cycles of the vector address unit: one per vector memory instruction, plus the extra
    /// packets of indexed ones.
    pub const fn vector_address_cycles(&self) -> u64 {
        self.vector_memory.saturating_add(self.indexed_extra_cycles)
    }

    /// `count` bytes of device memory.
    pub const fn bytes(count: u64) -> ItemCost {
        ItemCost {
            bytes: count,
            ..ItemCost::ZERO
        }
    }

    /// Every instruction the µthread issues.
    pub const fn instructions(&self) -> u64 {
        self.scalar
            .saturating_add(self.scalar_memory)
            .saturating_add(self.vector)
            .saturating_add(self.vector_memory)
    }

    /// Both costs together (saturating).
    #[must_use]
    pub const fn plus(self, other: ItemCost) -> ItemCost {
        ItemCost {
            scalar: self.scalar.saturating_add(other.scalar),
            scalar_memory: self.scalar_memory.saturating_add(other.scalar_memory),
            vector: self.vector.saturating_add(other.vector),
            vector_memory: self.vector_memory.saturating_add(other.vector_memory),
            indexed_extra_cycles: self
                .indexed_extra_cycles
                .saturating_add(other.indexed_extra_cycles),
            bytes: self.bytes.saturating_add(other.bytes),
        }
    }

    /// `count` times this cost (saturating).
    #[must_use]
    pub const fn times(self, count: u64) -> ItemCost {
        ItemCost {
            scalar: self.scalar.saturating_mul(count),
            scalar_memory: self.scalar_memory.saturating_mul(count),
            vector: self.vector.saturating_mul(count),
            vector_memory: self.vector_memory.saturating_mul(count),
            indexed_extra_cycles: self.indexed_extra_cycles.saturating_mul(count),
            bytes: self.bytes.saturating_mul(count),
        }
    }
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
#[expect(
    clippy::large_enum_variant,
    reason = "no allocation in the firmware: the OPT variant's stage table is held inline; a launch decodes one Kernel and keeps it for its lifetime"
)]
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
    ) -> Result<Kernel, FirmwareError> {
        let memory_size = memory.size();
        Ok(
            match KernelId::try_from(command.kernel).map_err(|_| FirmwareError::UnknownKernel)? {
                KernelId::KnnDistance => Kernel::Knn(knn::KnnKernel::decode(command, memory_size)?),
                KernelId::SsspRelax => Kernel::Sssp(sssp::SsspKernel::decode(command, memory)?),
                KernelId::PageRankGather => {
                    Kernel::PageRank(pagerank::PageRankKernel::decode(command, memory)?)
                }
                KernelId::SsbFilter => Kernel::Ssb(ssb::SsbKernel::decode(command, memory)?),
                KernelId::OptAttention => Kernel::Opt(opt::OptKernel::decode(command, memory)?),
                KernelId::DlrmSls => Kernel::Dlrm(dlrm::DlrmKernel::decode(command, memory)?),
            },
        )
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

    /// Item `index` (`index < items()`, else [`FirmwareError::ArgumentOutOfRange`]), read from the
    /// launch's arguments and, where the kernel needs it, from `memory` (read only).
    pub fn item<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<ItemSpec, FirmwareError> {
        match self {
            Kernel::Knn(k) => k.item(index),
            Kernel::Sssp(k) => k.item(index, memory),
            Kernel::PageRank(k) => k.item(index, memory),
            Kernel::Ssb(k) => k.item(index, memory),
            Kernel::Opt(k) => k.item(index, memory),
            Kernel::Dlrm(k) => k.item(index, memory),
        }
    }

    /// Item `index`'s result range `(result_offset, result_length)` from the decoded launch
    /// alone, without device memory: `None` past the last item; otherwise exactly the range
    /// [`Kernel::item`] returns whenever it accepts `index`. A graph or DLRM item, whose
    /// description reads offsets from device memory, has a range that does not depend on
    /// them: the offsets decide only its cost and whether it is refused, and
    /// [`Kernel::execute`] refuses it on the same checks. So an item that ran without error
    /// has this range; the command processor takes it from here instead of describing the
    /// item again (`crate::device`), and describes it only for an item that failed.
    pub fn result_range(&self, index: u32) -> Option<(u64, u32)> {
        each_kernel!(self, k => k.result_range(index))
    }

    /// Runs item `index`: reads its inputs and writes its result bytes in device memory.
    /// Shared access: items of one stage may run at once on other µthreads (see
    /// [`crate::hal`], "What may run concurrently"); each kernel's docs say which of its
    /// writes another item may touch.
    pub fn execute<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<(), FirmwareError> {
        each_kernel!(self, k => k.execute(index, memory))
    }
}

/// The entry point of a µthread: runs item `item` of the decoded `kernel` (the
/// [`crate::hal::KernelLaunch::kernel`] the µthread was handed) on device memory, and returns
/// the outcome the compute units report in [`crate::hal::ItemCompletion::outcome`].
///
/// Call it from any number of µthreads at once for the items of one dispatched stage; it
/// reads nothing but `kernel` and `memory`, allocates nothing, and needs at most
/// [`crate::hal::UTHREAD_STACK_BYTES`] of stack. `memory` is the device memory with its
/// atomics ([`DeviceAtomics`]), as a µthread of a real device has it. An item outside the
/// launch, or an access outside device memory, is an error, never a panic.
pub fn run_item<M: DeviceAtomics>(
    kernel: &Kernel,
    item: u32,
    memory: &M,
) -> Result<(), FirmwareError> {
    kernel.execute(item, memory)
}
