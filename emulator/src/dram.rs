//! Device memory: the HDM range the emulator owns.

use firmware::hal::{DeviceMemory, MemoryFault};
use shared_abi::DeviceAddress;

/// Device memory, bounds-checked on every access.
#[derive(Debug)]
pub struct DeviceDram {
    bytes: Vec<u8>,
}

impl DeviceDram {
    /// `size` bytes of zeroed device memory.
    pub fn new(size: u64) -> DeviceDram {
        DeviceDram {
            bytes: vec![0; usize::try_from(size).unwrap_or(usize::MAX)],
        }
    }

    fn range(
        &self,
        address: DeviceAddress,
        length: usize,
    ) -> Result<std::ops::Range<usize>, MemoryFault> {
        let fault = MemoryFault {
            address,
            length: length as u64,
        };
        let start = usize::try_from(address.0).map_err(|_| fault)?;
        let end = start.checked_add(length).ok_or(fault)?;
        if end > self.bytes.len() {
            return Err(fault);
        }
        Ok(start..end)
    }
}

impl DeviceMemory for DeviceDram {
    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
        let range = self.range(address, buffer.len())?;
        buffer.copy_from_slice(&self.bytes[range]);
        Ok(())
    }

    fn write(&mut self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
        let range = self.range(address, data.len())?;
        self.bytes[range].copy_from_slice(data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_past_the_end_faults_without_touching_memory() {
        let mut dram = DeviceDram::new(16);
        assert!(dram.write(DeviceAddress(12), &[1; 8]).is_err());
        assert!(dram.write(DeviceAddress(u64::MAX), &[1]).is_err());
        let mut buffer = [9u8; 16];
        dram.read(DeviceAddress(0), &mut buffer).unwrap();
        assert_eq!(buffer, [0; 16]);
    }
}
