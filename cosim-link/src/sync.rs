//! The loom shim: every atomic that the host shares with the device goes through here, so that
//! the loom models (`host-runtime/tests/loom_ring.rs`, built with `RUSTFLAGS="--cfg loom"`)
//! check the real [`crate::phys::PhysicalMemory`] and everything built on it.
//!
//! Under `--cfg loom` these are loom's types; otherwise the standard library's.

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicU64, Ordering};
#[cfg(loom)]
pub use loom::sync::Arc;

#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicU64, Ordering};
#[cfg(not(loom))]
pub use std::sync::Arc;
