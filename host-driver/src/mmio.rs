//! The device's memory window (its HDM range) mapped into the host, with volatile accessors.
//!
//! A kernel driver maps a CXL Type 3 device's memory (and a device's register BARs) with
//! `ioremap`/`memremap` and touches it only through `readq`/`writeq`-style accessors: the
//! compiler may not merge, split, elide or reorder them, because the memory is not ordinary
//! RAM. Here the device memory is the emulator's anonymous shared-memory segment, which the
//! emulator hands over when the host attaches; [`DeviceWindow`] maps it and gives the same
//! discipline through `volatile::VolatilePtr`: every access is a volatile load or store of a
//! byte or of an aligned 8-byte word, bounds-checked, and never a reference into the window.
//! The mapping and its volatile pointers are the transport's
//! ([`cosim_link::shm::MappedVolatile`], which holds their `unsafe`); this module is the
//! register-style access on top: bounds, faults, and splitting a range into bytes and words.
//!
//! The host uses this mapping for the untimed bulk set-up (loading a data set before the run,
//! DESIGN.md section 4) and, mapping the device's register page the same way, for the attach
//! probe of its identity registers ([`crate::registers`]). Every timed access (launch stores,
//! flow control, RP and BS result loads) goes through the link model, over the co-simulation turn ([`cosim_link::turn`]).

use cosim_link::shm::{MappedVolatile, SegmentError};
use shared_abi::DeviceAddress;
use std::os::fd::BorrowedFd;

/// An access outside the window; nothing was read or written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("access of {length} bytes at device address {:#x} is outside the device memory window", .address.0)]
pub struct WindowFault {
    /// First byte.
    pub address: DeviceAddress,
    /// Bytes.
    pub length: u64,
}

/// The device's memory, mapped.
///
/// # Invariants
///
/// Device address `a` is byte `a` of `map` (a checked, sealed segment mapped by
/// [`cosim_link::shm::MappedVolatile`], which holds the `unsafe` of the mapping).
pub struct DeviceWindow {
    map: MappedVolatile,
}

impl core::fmt::Debug for DeviceWindow {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DeviceWindow")
            .field("bytes", &self.map.len())
            .finish()
    }
}

impl DeviceWindow {
    /// Maps the device-memory segment `fd` of `bytes` bytes.
    pub fn map(fd: BorrowedFd<'_>, bytes: u64) -> Result<DeviceWindow, SegmentError> {
        let map = MappedVolatile::map(fd, bytes, "mapping the device memory window")?;
        Ok(DeviceWindow { map })
    }

    /// Bytes of the window.
    pub fn len(&self) -> u64 {
        self.map.len()
    }

    /// Whether the window has no bytes.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The byte offset range of `[address, address + length)`, if inside the window.
    fn range(&self, address: DeviceAddress, length: usize) -> Result<(usize, usize), WindowFault> {
        let fault = WindowFault {
            address,
            length: length as u64,
        };
        let start = usize::try_from(address.0).map_err(|_| fault)?;
        let end = start.checked_add(length).ok_or(fault)?;
        if end as u64 > self.map.len() {
            return Err(fault);
        }
        Ok((start, end))
    }

    /// Writes `data` at `address` with volatile stores (aligned 8-byte words where possible).
    /// Fails, writing nothing, when any byte lies outside the window (the whole range is
    /// checked first, so no per-access check can fail after a partial write).
    pub fn write(&self, address: DeviceAddress, data: &[u8]) -> Result<(), WindowFault> {
        let (start, _) = self.range(address, data.len())?;
        let fault = WindowFault {
            address,
            length: data.len() as u64,
        };
        let mut offset = start;
        let mut rest = data;
        while let Some((&byte, tail)) = rest.split_first() {
            if offset % 8 == 0 && rest.len() >= 8 {
                break;
            }
            self.map.at::<u8>(offset).ok_or(fault)?.write(byte);
            offset += 1;
            rest = tail;
        }
        let mut words = rest.chunks_exact(8);
        for word in &mut words {
            let mut value = [0u8; 8];
            value.copy_from_slice(word);
            self.map
                .at::<u64>(offset)
                .ok_or(fault)?
                .write(u64::from_le_bytes(value));
            offset += 8;
        }
        for &byte in words.remainder() {
            self.map.at::<u8>(offset).ok_or(fault)?.write(byte);
            offset += 1;
        }
        Ok(())
    }

    /// Reads `buffer.len()` bytes at `address` with volatile loads. Fails, reading nothing,
    /// when any byte lies outside the window.
    pub fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), WindowFault> {
        let (start, _) = self.range(address, buffer.len())?;
        let fault = WindowFault {
            address,
            length: buffer.len() as u64,
        };
        let mut offset = start;
        let mut rest = buffer;
        while !rest.is_empty() && (offset % 8 != 0 || rest.len() < 8) {
            let (first, tail) = rest.split_at_mut(1);
            first[0] = self.map.at::<u8>(offset).ok_or(fault)?.read();
            offset += 1;
            rest = tail;
        }
        let mut words = rest.chunks_exact_mut(8);
        for word in &mut words {
            word.copy_from_slice(
                &self
                    .map
                    .at::<u64>(offset)
                    .ok_or(fault)?
                    .read()
                    .to_le_bytes(),
            );
            offset += 8;
        }
        for byte in words.into_remainder() {
            *byte = self.map.at::<u8>(offset).ok_or(fault)?.read();
            offset += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn window(bytes: u64) -> DeviceWindow {
        let fd = cosim_link::shm::sealed_memfd("axle-test-window", bytes).unwrap();
        DeviceWindow::map(fd.as_fd(), bytes).unwrap()
    }

    #[test]
    fn unaligned_writes_read_back_across_word_boundaries() {
        let window = window(4096);
        let data: Vec<u8> = (0..37).collect();
        window.write(DeviceAddress(5), &data).unwrap();
        let mut back = vec![0u8; 37];
        window.read(DeviceAddress(5), &mut back).unwrap();
        assert_eq!(back, data);
        let mut around = [0xffu8; 2];
        window.read(DeviceAddress(3), &mut around).unwrap();
        assert_eq!(around, [0, 0]);
    }

    #[test]
    fn an_access_past_the_end_faults_and_touches_nothing() {
        let window = window(4096);
        assert!(window.write(DeviceAddress(4090), &[1; 8]).is_err());
        assert!(window.write(DeviceAddress(u64::MAX), &[1]).is_err());
        let mut back = [9u8; 6];
        window.read(DeviceAddress(4090), &mut back).unwrap();
        assert_eq!(back, [0; 6]);
    }
}
