//! The device's register window as the emulator serves it to an attached host: a shared page
//! ([`shared_abi::registers`]) holding the device identity and a mirror of the RP mailbox.

use crate::shm::DeviceSegment;
use shared_abi::registers;
use std::os::fd::BorrowedFd;
use std::sync::atomic::Ordering;

/// The register page.
#[derive(Debug)]
pub struct RegisterPage {
    segment: DeviceSegment,
}

/// What the identity registers say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceIdentity {
    /// Bytes of device memory.
    pub device_memory_bytes: u64,
    /// First byte of the data window.
    pub data_base: u64,
    /// End of the data window.
    pub data_end: u64,
}

impl RegisterPage {
    /// A shared page (a sealed memfd, for [`RegisterPage::fd`]) holding `identity`, this
    /// build's magic, ABI version and layout hash, and an idle mailbox.
    pub fn create(identity: DeviceIdentity) -> std::io::Result<RegisterPage> {
        let page = RegisterPage {
            segment: DeviceSegment::shared(registers::WINDOW_BYTES)?,
        };
        page.set(registers::MAGIC, shared_abi::ABI_MAGIC);
        page.set(registers::ABI_VERSION, u64::from(shared_abi::ABI_VERSION));
        page.set(registers::LAYOUT_HASH, shared_abi::LAYOUT_HASH);
        page.set(registers::DEVICE_MEMORY_BYTES, identity.device_memory_bytes);
        page.set(registers::DATA_BASE, identity.data_base);
        page.set(registers::DATA_END, identity.data_end);
        Ok(page)
    }

    /// The page's memory file, for the host.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.segment.fd()
    }

    /// Sets register `offset` (ignored outside the page or unaligned). A release store: a
    /// reader that sees the value sees every earlier register write.
    pub fn set(&self, offset: u64, value: u64) {
        if offset % 8 != 0 {
            return;
        }
        if let Some(word) = self.segment.words().get((offset / 8) as usize) {
            word.store(value, Ordering::Release);
        }
    }

    /// Mirrors mailbox register `offset` ([`shared_abi::mailbox`]).
    pub fn mirror_mailbox(&self, offset: u64, value: u64) {
        self.set(registers::MAILBOX_MIRROR.saturating_add(offset), value);
    }
}
