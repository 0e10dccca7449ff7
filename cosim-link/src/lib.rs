//! The AXLE co-simulation transport: everything that carries the host's calls to the device
//! and the device's answers back, in one process or across two. The device (`emulator`) and
//! the host's driver (`host-driver`) both build on it; neither depends on the other.
//!
//! - [`link`]: the link calls ([`link::DeviceLink`]), their answers ([`link::LinkResponse`])
//!   and the host as a co-simulated party ([`link::HostAgent`]);
//! - [`phys`]: the memory that stands for host physical memory (atomic words,
//!   bounds-checked), which the host's driver builds DMA regions on and the device's DMA
//!   lands in;
//! - [`hdm`]: the allocator of the device's data memory, run alike by the in-process emulator
//!   and an attached host so that both place every buffer at the same device address;
//! - [`jitter`]: seeded random delays for the wall-clock stress runs (both sides draw from it);
//! - [`limits`]: the bounds on every size from outside (host messages, configuration, data
//!   files), checked before allocating (both sides use it);
//! - [`sync`]: the loom shim (the models in `host-runtime/tests/loom_*.rs` build this crate
//!   with `--cfg loom`): the atomics, and the wall-clock mode's channels;
//! - [`wall`]: the wall-clock mode's channels, clock and host loop (under loom, without
//!   `wall::serve_host`, which encodes its turns with `turn`'s recording link; the wake-up
//!   model runs `wall::serve_host_with`).
//!
//! The multi-process form (not under loom) adds:
//!
//! - [`shm`]: shared-memory segments (sealed memfds, their mapping as atomic words, and
//!   descriptors received over SCM_RIGHTS), and the futex a process sleeps on until the other
//!   changes a word of one ([`shm::futex`]);
//! - [`turn`]: the co-simulation turn over a shared page, and the host's side of it;
//! - [`attach`]: the attach handshake with an emulator process over its Unix socket (the
//!   messages and their framing; the host's probe is `host_driver::attachment`, the
//!   emulator's side `emulator::server`);
//! - [`wall_socket`]: those channels over an attached session's socket.
//!
//! `unsafe` lives in [`shm`] only; every other module denies it.
#![deny(unsafe_code)]

#[cfg(not(loom))]
pub mod attach;
pub mod hdm;
pub mod jitter;
pub mod limits;
pub mod link;
pub mod phys;
#[cfg(not(loom))]
#[allow(
    unsafe_code,
    reason = "memfd mappings, SCM_RIGHTS, futex, a cache-line prefetch; the crate's only unsafe"
)]
pub mod shm;
pub mod sync;
#[cfg(not(loom))]
pub mod turn;
pub mod wall;
#[cfg(not(loom))]
pub mod wall_socket;
