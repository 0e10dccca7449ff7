//! A cycle-timed CXL Type 3 computational-memory device that runs the AXLE firmware.
//!
//! | module | what |
//! |--------|------|
//! | [`sim`] | the discrete-event engine in virtual time |
//! | [`link`] | the CXL link (per-direction bandwidth, CXL.mem and CXL.io latency) |
//! | [`dram`] | device memory |
//! | [`ccm`] | processing units x µthreads and the CCM scheduler |
//! | [`dma`] | the DMA engine |
//! | [`hal_impl`] | the firmware HAL on all of the above |
//! | [`cosim`] | the co-simulation loop with the host (and the wall-clock loop) |
//! | [`trace`] | the device's timeline of a run (`axle run --trace`), off by default |
//! | [`config`] | the device parameters |
//! | [`shm`] | device memory as a segment of atomic words (mapped by `cosim_link::shm`) |
//! | `server` | the emulator as its own process: `axle emu` |
//!
//! No `unsafe`: every mapping of memory is `cosim_link::shm`'s.
#![forbid(unsafe_code)]

pub mod ccm;
pub mod config;
pub mod cosim;
pub mod device_queue;
pub mod dma;
pub mod dram;
pub mod hal_impl;
pub mod link;
pub mod registers;
pub mod server;
pub mod shm;
pub mod sim;
pub mod trace;

pub use config::{DeviceConfig, Scheduling};
pub use cosim::{CoSimError, DeviceMetrics, Emulator, SimulatorCounts};
