//! Test doubles for the firmware's HAL (STYLE: `Fake*` doubles are stateful), shared behind
//! the `test-utils` feature (and always built for the crate's own tests), as virtio-queue's
//! `mock` is.
//!
//! | double | what it models | what a test does with it |
//! |--------|----------------|--------------------------|
//! | [`FakeClock`] | the device clock | [`FakeClock::advance`] |
//! | [`FakeDeviceMemory`] | a few MiB of device memory | reads, writes, [`FakeDeviceMemory::flow_control_reads`] (edge D5) |
//! | [`FakeDmaEngine`] | the DMA engine | sees every [`SubmittedRequest`] decoded, completes requests, answers `QueueFull` on demand |
//! | [`FakeComputeUnits`] | CCM units and µthreads | sees the dispatched [`KernelLaunch`], reports item completions in any order |
//! | [`FakeRegisters`] | registers, mailbox, interrupt line | queues [`HostEvent`]s, sees mailbox writes, bulk completions, interrupts |
//! | [`FakeHostMemory`] | host physical memory | sees what the DMA writes of completed requests left there |
//!
//! [`FakeHal`] bundles them and implements every HAL trait. [`TestRegion`] programs a ring
//! region (shadow descriptor and scatter-gather entries) into the fake device memory the way
//! the host driver does, and reads the rings back out of [`FakeHostMemory`]. [`KnnLaunch`]
//! builds a small, real KNN launch whose results are known in advance.
//!
//! When a request is submitted, [`FakeHal`] decodes its descriptor chain
//! ([`decode_request`]) from device memory right away, with the bytes each descriptor points
//! at: the staging cells it names are reused once the request completes, so a later decode
//! could see newer bytes. A test therefore asserts on exactly what the engine would have put
//! on the wire, in chain order.
//!
//! The firmware crate's own test suites live in `firmware/tests/{executor,commands}.rs`. They
//! need this module, which only exists with `cfg(test)` or the `test-utils` feature, and a
//! package cannot dev-depend on itself with a feature. So each suite is compiled twice: here,
//! as a unit-test module (with `crate` imported as `firmware`), so a plain
//! `cargo test -p firmware` runs it; and as an integration test with `--features test-utils`
//! (`required-features` in `Cargo.toml`), which also proves this module's API is usable from
//! outside the crate. The suites therefore use only `firmware::` paths and no inner attributes.

// Test-double code: a violated expectation in a double is a failed test, so panicking on it
// (unwrap, indexing, plain arithmetic on small test numbers) is the point, not a hazard. The
// crate root denies these lints for firmware code outside `cfg(test)`; this module is also
// built by the `test-utils` feature for other crates' tests, hence the explicit allow.
#![allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::panic,
    reason = "test doubles: a violated expectation is a failed test, so panicking is the point"
)]

extern crate std;

use crate::error::FirmwareError;
use crate::hal::{
    Clock, ComputeUnits, DeviceAtomics, DeviceMemory, DmaCompletion, DmaDescriptor, DmaEngine,
    DmaError, DmaKind, DmaRequest, DmaTag, HostEvent, ItemCompletion, KernelLaunch, MemoryFault,
    Registers,
};
use crate::kernels::{knn, Kernel};
use crate::scratch::ScratchLayout;
use crate::{Firmware, FirmwareConfig, StepOutcome, StreamingFactor};
use core::cell::RefCell;
use core::ops::Range;
use shared_abi::region::{RingLayout, PAGE_SIZE};
use shared_abi::{
    control, device_map, CommandDescriptor, DeviceAddress, FlowControlMessage, HostPhysAddr,
    KernelId, LaunchMode, MetadataRecord, ScatterGatherEntry, ShadowRegionDescriptor, Status,
    Ticks,
};
use std::collections::{BTreeMap, VecDeque};
use std::vec::Vec;
use zerocopy::{FromBytes, IntoBytes};

/// Bytes of device memory a [`FakeHal::new`] has (4 MiB).
pub const DEVICE_MEMORY_BYTES: u64 = 4 << 20;

/// Where [`test_scratch`] puts the firmware's scratch area (above the data a [`KnnLaunch`]
/// uses, below the end of a [`FakeHal::new`]'s memory).
pub const SCRATCH_BASE: DeviceAddress = DeviceAddress(0x30_0000);

/// Host physical address of the lowest page a [`TestRegion`] maps.
pub const HOST_REGION_BASE: u64 = 0x4000_0000;

/// A scratch layout small enough for a few MiB of device memory: 1024 descriptors, 1024
/// staging cells, 4096 result chunks (96 KiB at [`SCRATCH_BASE`]).
pub const fn test_scratch() -> ScratchLayout {
    ScratchLayout {
        base: SCRATCH_BASE,
        descriptor_capacity: 1024,
        staging_capacity: 1024,
        chunk_capacity: 4096,
    }
}

/// A firmware on [`test_scratch`] with the given streaming behaviour.
pub fn test_firmware(streaming_factor: StreamingFactor, out_of_order: bool) -> Firmware {
    Firmware::new(FirmwareConfig {
        scratch: test_scratch(),
        streaming_factor,
        out_of_order,
    })
}

// ---------------------------------------------------------------------------------------------
// Clock
// ---------------------------------------------------------------------------------------------

/// A clock that moves only when the test says so.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FakeClock {
    now: Ticks,
}

impl FakeClock {
    /// A clock at time zero.
    pub const fn new() -> FakeClock {
        FakeClock { now: Ticks::ZERO }
    }

    /// Moves time forward by `by` (saturating: the clock never wraps).
    pub fn advance(&mut self, by: Ticks) {
        self.now = self.now.plus(by);
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Ticks {
        self.now
    }
}

mod compute;
mod dma;
mod fixtures;
mod hal;
mod memory;
mod region;
mod registers;

pub use compute::FakeComputeUnits;
pub use dma::{decode_request, ChainError, DmaWrite, FakeDmaEngine, SubmittedRequest};
pub use fixtures::{AxleBench, KnnLaunch};
pub use hal::FakeHal;
pub use memory::{FakeDeviceMemory, FakeHostMemory};
pub use region::{RegionPlace, TestRegion};
pub use registers::{BulkCompletion, FakeRegisters};

#[cfg(test)]
mod executor_suite {
    use crate as firmware;
    include!("../../tests/executor.rs");
}

#[cfg(test)]
mod commands_suite {
    use crate as firmware;
    include!("../../tests/commands.rs");
}

/// Device memory that records the deepest stack address any access is made from: kernels
/// reach device memory only through the HAL, with their buffers live in their frames, so the
/// deepest access bounds an item's stack from below (see [`crate::hal`], "Stack per µthread").
#[derive(Debug)]
pub struct StackProbe<'a, M> {
    inner: &'a M,
    deepest: core::cell::Cell<usize>,
    /// What [`DeviceMemory::unobserved_reads`] answers.
    unobserved: bool,
}

impl<'a, M: DeviceAtomics> StackProbe<'a, M> {
    /// Probes accesses to `inner`.
    pub fn new(inner: &'a M) -> Self {
        StackProbe {
            inner,
            deepest: core::cell::Cell::new(usize::MAX),
            unobserved: false,
        }
    }

    /// Probes accesses to `inner`, declaring its reads unobserved
    /// ([`DeviceMemory::unobserved_reads`]), so that a kernel takes the path it takes on the
    /// emulator's memory (the probe's record is a depth, not an order: the figure stays true).
    pub fn unobserved(inner: &'a M) -> Self {
        StackProbe {
            unobserved: true,
            ..StackProbe::new(inner)
        }
    }

    fn mark(&self) {
        let marker = 0_u8;
        let here = core::ptr::addr_of!(marker) as usize;
        self.deepest.set(self.deepest.get().min(here));
    }

    /// Bytes of stack below this call's frame that running `items` of `kernel` in order
    /// reached, at its deepest device-memory access (the stage barrier is the caller's: pass
    /// one stage's items at a time).
    #[inline(never)]
    pub fn high_water(&self, kernel: &Kernel, items: Range<u32>) -> usize {
        let marker = 0_u8;
        let entry = core::ptr::addr_of!(marker) as usize;
        for item in items {
            crate::run_item(kernel, item, self).unwrap();
        }
        entry.saturating_sub(self.deepest.get())
    }
}

impl<M: DeviceAtomics> DeviceMemory for StackProbe<'_, M> {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
        self.mark();
        self.inner.read(address, buffer)
    }
    fn write(&self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
        self.mark();
        self.inner.write(address, data)
    }
    fn unobserved_reads(&self) -> bool {
        self.unobserved
    }
}

impl<M: DeviceAtomics> DeviceAtomics for StackProbe<'_, M> {
    fn fetch_add_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
        self.mark();
        self.inner.fetch_add_u32(address, value)
    }
    fn fetch_min_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
        self.mark();
        self.inner.fetch_min_u32(address, value)
    }
    fn swap_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
        self.mark();
        self.inner.swap_u32(address, value)
    }
    fn compare_exchange_u32(
        &self,
        address: DeviceAddress,
        current: u32,
        new: u32,
    ) -> Result<u32, MemoryFault> {
        self.mark();
        self.inner.compare_exchange_u32(address, current, new)
    }
}
