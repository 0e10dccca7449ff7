//! The device's register window (its BAR), mapped: the driver's probe reads the identity
//! registers ([`shared_abi::registers`]) with volatile loads and refuses a device that is not
//! the one the session announced, and anyone holding the attachment can read the mailbox
//! mirror the same way.
//!
//! No `unsafe` here: the mapping and its volatile accessors are [`crate::mmio::DeviceWindow`]'s.

use crate::mmio::{DeviceWindow, WindowFault};
use shared_abi::{registers, DeviceAddress};

/// The register page, mapped.
#[derive(Debug)]
pub struct RegisterWindow {
    window: DeviceWindow,
}

/// What the probe expects the identity registers to say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExpectedIdentity {
    /// Bytes of device memory the session announced.
    pub device_memory_bytes: u64,
    /// The announced data window.
    pub data_base: u64,
    /// The announced data window's end.
    pub data_end: u64,
}

/// The register window is unusable, or the device behind it is not the one expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// The mapped page is shorter than the register window.
    #[error("the register window has {bytes} bytes, {expected} expected")]
    TooShort {
        /// Bytes mapped.
        bytes: u64,
        /// Bytes of the window.
        expected: u64,
    },
    /// A register load faulted.
    #[error("register window: {0}")]
    Fault(#[from] WindowFault),
    /// An identity register reads another value than this build and the session expect.
    #[error("register window: {name} register at {offset:#x} reads {got:#x}, expected {want:#x}")]
    Mismatch {
        /// The register's name.
        name: &'static str,
        /// Its offset in the window.
        offset: u64,
        /// What it reads.
        got: u64,
        /// What was expected.
        want: u64,
    },
}

impl RegisterWindow {
    /// Wraps a mapped register page; it must be at least [`registers::WINDOW_BYTES`] long.
    pub fn new(window: DeviceWindow) -> Result<RegisterWindow, RegisterError> {
        if window.len() < registers::WINDOW_BYTES {
            return Err(RegisterError::TooShort {
                bytes: window.len(),
                expected: registers::WINDOW_BYTES,
            });
        }
        Ok(RegisterWindow { window })
    }

    /// Register `offset`, by one volatile 8-byte load.
    pub fn read(&self, offset: u64) -> Result<u64, WindowFault> {
        let mut bytes = [0u8; 8];
        self.window.read(DeviceAddress(offset), &mut bytes)?;
        Ok(u64::from_le_bytes(bytes))
    }

    /// The device epoch ([`registers::EPOCH`]): which start of the emulator process this
    /// device is (0: none published).
    pub fn epoch(&self) -> Result<u64, WindowFault> {
        self.read(registers::EPOCH)
    }

    /// Mailbox register `register` ([`shared_abi::mailbox`]) as the mirror shows it.
    pub fn mailbox(&self, register: u64) -> Result<u64, WindowFault> {
        self.read(registers::MAILBOX_MIRROR.saturating_add(register))
    }

    /// The probe: every identity register must hold what this build and the session expect.
    /// The error names the first register that differs, with both values.
    pub fn probe(&self, expected: &ExpectedIdentity) -> Result<(), RegisterError> {
        let checks = [
            ("magic", registers::MAGIC, shared_abi::ABI_MAGIC),
            (
                "ABI version",
                registers::ABI_VERSION,
                u64::from(shared_abi::ABI_VERSION),
            ),
            (
                "layout hash",
                registers::LAYOUT_HASH,
                shared_abi::LAYOUT_HASH,
            ),
            (
                "device memory size",
                registers::DEVICE_MEMORY_BYTES,
                expected.device_memory_bytes,
            ),
            ("data window base", registers::DATA_BASE, expected.data_base),
            ("data window end", registers::DATA_END, expected.data_end),
        ];
        for (name, offset, want) in checks {
            let got = self.read(offset)?;
            if got != want {
                return Err(RegisterError::Mismatch {
                    name,
                    offset,
                    got,
                    want,
                });
            }
        }
        Ok(())
    }
}
