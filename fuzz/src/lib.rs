//! Helpers shared by the fuzz targets: a plain byte-vector device memory and small input
//! readers. Nothing here is fuzzed itself.

use firmware::hal::{DeviceMemory, MemoryFault};
use shared_abi::DeviceAddress;

/// Device memory as a plain byte vector, bounds-checked like the emulator's DRAM: an access
/// with any byte outside fails and touches nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeDeviceMemory {
    /// The bytes.
    pub bytes: Vec<u8>,
}

impl FakeDeviceMemory {
    /// `size` zeroed bytes.
    pub fn new(size: usize) -> FakeDeviceMemory {
        FakeDeviceMemory {
            bytes: vec![0; size],
        }
    }

    /// Copies as much of `data` as fits at `address` (test set-up, never fails).
    pub fn fill(&mut self, address: u64, data: &[u8]) {
        let Ok(start) = usize::try_from(address) else {
            return;
        };
        if start >= self.bytes.len() {
            return;
        }
        let end = start.saturating_add(data.len()).min(self.bytes.len());
        self.bytes[start..end].copy_from_slice(&data[..end - start]);
    }

    fn range(&self, address: DeviceAddress, length: usize) -> Result<(usize, usize), MemoryFault> {
        let fault = MemoryFault {
            address,
            length: length as u64,
        };
        let start = usize::try_from(address.0).map_err(|_| fault)?;
        let end = start.checked_add(length).ok_or(fault)?;
        if end > self.bytes.len() {
            return Err(fault);
        }
        Ok((start, end))
    }
}

impl DeviceMemory for FakeDeviceMemory {
    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
        let (start, end) = self.range(address, buffer.len())?;
        buffer.copy_from_slice(&self.bytes[start..end]);
        Ok(())
    }

    fn write(&mut self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
        let (start, end) = self.range(address, data.len())?;
        self.bytes[start..end].copy_from_slice(data);
        Ok(())
    }
}

/// Reads fixed-size pieces off the front of a fuzz input; past its end, zeros.
#[derive(Debug)]
pub struct Bytes<'a> {
    rest: &'a [u8],
}

impl<'a> Bytes<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Bytes<'a> {
        Bytes { rest: data }
    }

    /// The next `N` bytes, zero-padded.
    pub fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let take = self.rest.len().min(N);
        out[..take].copy_from_slice(&self.rest[..take]);
        self.rest = &self.rest[take..];
        out
    }

    /// The next little-endian `u64`.
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.array())
    }

    /// The next byte.
    pub fn u8(&mut self) -> u8 {
        self.array::<1>()[0]
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The bytes not read yet.
    pub fn remaining(&self) -> &'a [u8] {
        self.rest
    }
}
