//! The AXLE host driver: what a kernel driver would do for a CXL computational memory device,
//! in user space against the emulator.
//!
//! - [`frames`]: the page-frame allocator, which scatters regions on purpose;
//! - [`dma`]: DMA regions, contiguous in region offsets and scattered physically;
//! - [`sgl`]: the scatter-gather list of a region;
//! - [`shadow`]: the CXL.mem stores that program a region into the device, and the region's
//!   control block;
//! - [`phys`] and [`sync`]: host physical memory and the loom shim, which the transport
//!   (`cosim-link`) owns because the device's DMA lands in that memory too; re-exported here
//!   because the host reaches its memory through its driver.
//!
//! The multi-process form (not under loom) adds:
//!
//! - [`mmio`]: the device's memory window mapped into the host (volatile accessors);
//! - [`registers`]: the device's register window and the identity the probe checks;
//! - [`attachment`]: the probe of an emulator process: the attach handshake of
//!   `cosim_link::attach` from the host's side, its segments mapped, the run.
//!
//! The co-simulation transport itself (link calls, the turn, the handshake's messages, the
//! wall-clock channels, shared-memory segments, bounds) is the `cosim-link` crate.
//!
//! No `unsafe`: the mappings behind [`mmio`] and the DMA regions' memory are
//! `cosim_link::shm`'s.
#![forbid(unsafe_code)]

#[cfg(not(loom))]
pub mod attachment;
pub mod dma;
pub mod frames;
#[cfg(not(loom))]
pub mod mmio;
#[cfg(not(loom))]
pub mod registers;
pub mod sgl;
pub mod shadow;

pub use cosim_link::{phys, sync};
