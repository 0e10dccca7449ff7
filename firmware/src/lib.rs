//! The AXLE CCM firmware.
//!
//! Command processing for the three launch paths (RP mailbox, BS synchronous launch, AXLE
//! asynchronous launch), the result monitor, the DMA executor and the device kernels. It talks
//! to hardware only through [`hal::Hal`], which it defines and never implements; the board's
//! main loop (or the emulator's event queue) calls [`Firmware::step`], which never waits.
//!
//! | module | what |
//! |--------|------|
//! | [`hal`] | the traits a board implements |
//! | `conformance` | (feature `conformance`) checks of a port's HAL against the MUST clauses |
//! | [`error`] | the firmware's error type and its one mapping onto the wire's `Status` |
//! | [`command`] | decoding and validating launches |
//! | [`monitor`] | the result monitor |
//! | [`executor`] | the DMA executor |
//! | [`flow`] | credits from the host's flow control |
//! | [`translate`] | the shadow scatter-gather table |
//! | [`kernels`] | device compute kernels |
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects,
        clippy::panic
    )
)]

pub mod command;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
mod device;
pub mod error;
pub mod executor;
pub mod flow;
pub mod hal;
pub mod kernels;
pub mod monitor;
pub mod scratch;
#[cfg(any(test, feature = "test-utils"))]
pub mod testing;
pub mod trace;
pub mod translate;

pub use device::{Firmware, FirmwareConfig, StepOutcome, StreamingFactor, LAUNCH_QUEUE};
pub use error::{FirmwareError, HalBreach};
pub use kernels::run_item;
