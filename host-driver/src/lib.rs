//! The AXLE host driver: what a kernel driver would do for a CXL computational memory device,
//! in user space against the emulator.
//!
//! - [`phys`]: the memory that stands for host physical memory (atomic words, bounds-checked);
//! - [`frames`]: the page-frame allocator, which scatters regions on purpose;
//! - [`dma`]: DMA regions, contiguous in region offsets and scattered physically;
//! - [`jitter`]: seeded random delays for the wall-clock stress runs;
//! - [`limits`]: the bounds on every size from outside (host messages, configuration, data
//!   files), checked before allocating;
//! - [`sgl`]: the scatter-gather list of a region;
//! - [`shadow`]: the CXL.mem stores that program a region into the device, and the region's
//!   control block;
//! - [`sync`]: the loom shim (the models in `tests/loom_ring.rs` build this crate with
//!   `--cfg loom`).
//!
//! The multi-process form (not under loom) adds:
//!
//! - [`dma::MappedWords`]: host physical memory as an anonymous shared-memory segment;
//! - [`mmio`]: the device's memory window mapped into the host (volatile accessors);
//! - [`hdm`]: the allocator of the device's data memory (shared with the in-process emulator);
//! - [`turn`]: the co-simulation turn over shared memory, and the host's side of it;
//! - [`wall`]: the wall-clock mode's channels, clock and host thread;
//! - [`wall_socket`]: those channels over an attached session's socket;
//! - [`attach`]: the attach handshake with an emulator process over its Unix socket.
//!
//! `unsafe` lives in [`dma`] and [`mmio`] only; every other module forbids it.
#![deny(unsafe_code)]

#[cfg(not(loom))]
pub mod attach;
#[allow(unsafe_code)]
pub mod dma;
pub mod frames;
pub mod hdm;
pub mod jitter;
pub mod limits;
pub mod link;
#[cfg(not(loom))]
#[allow(unsafe_code)]
pub mod mmio;
pub mod phys;
#[cfg(not(loom))]
pub mod registers;
pub mod sgl;
pub mod shadow;
pub mod sync;
#[cfg(not(loom))]
pub mod turn;
#[cfg(not(loom))]
pub mod wall;
#[cfg(not(loom))]
pub mod wall_socket;
