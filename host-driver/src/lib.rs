//! The AXLE host driver: what a kernel driver would do for a CXL computational memory device,
//! in user space against the emulator.
//!
//! - [`phys`]: the memory that stands for host physical memory (atomic words, bounds-checked);
//! - [`frames`]: the page-frame allocator, which scatters regions on purpose;
//! - [`dma`]: DMA regions, contiguous in region offsets and scattered physically;
//! - [`sgl`]: the scatter-gather list of a region;
//! - [`shadow`]: the CXL.mem stores that program a region into the device, and the region's
//!   control block;
//! - [`sync`]: the loom shim (the models in `tests/loom_ring.rs` build this crate with
//!   `--cfg loom`).
//!
//! This step is the in-process form: no `mmap`, no `unsafe` (the later multi-process form puts
//! its `unsafe` in `dma` and `mmio` only).
#![forbid(unsafe_code)]

pub mod dma;
pub mod frames;
pub mod link;
pub mod phys;
pub mod sgl;
pub mod shadow;
pub mod sync;
