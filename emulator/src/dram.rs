//! Device memory: the HDM range the emulator owns.
//!
//! The bytes live in a [`DeviceSegment`] (8-byte atomic words): an anonymous mapping
//! in-process, a shared memory file when the emulator runs as its own process and an attached
//! host maps it for its untimed set-up. Byte access is built on word access here: a read
//! copies the words it covers out with Relaxed loads; a write stores whole words and merges
//! the bytes of a partial first or last word (a load, then a store: only the emulator writes
//! device memory while the device runs). Ordering with the host's set-up writes comes from
//! the turn hand-over (a Release store and an Acquire load), not from these accesses.

use crate::shm::DeviceSegment;
use firmware::hal::{DeviceMemory, MemoryFault};
use shared_abi::DeviceAddress;
use std::sync::atomic::{AtomicU64, Ordering};

/// Device memory, bounds-checked on every access.
#[derive(Debug)]
pub struct DeviceDram {
    segment: DeviceSegment,
    size: u64,
}

impl DeviceDram {
    /// `size` bytes of zeroed device memory, private to this process.
    ///
    /// # Panics
    ///
    /// When the memory cannot be mapped (the address space is exhausted).
    pub fn new(size: u64) -> DeviceDram {
        let segment = DeviceSegment::anonymous(size)
            .unwrap_or_else(|error| panic!("cannot map {size} bytes of device memory: {error}"));
        DeviceDram::from_segment(segment, size)
    }

    /// Device memory of `size` bytes over `segment` (which must hold at least `size` bytes;
    /// `size` is clamped to it).
    pub fn from_segment(segment: DeviceSegment, size: u64) -> DeviceDram {
        let size = size.min(segment.len());
        DeviceDram { segment, size }
    }

    /// The segment (to hand a shared one to an attached host).
    pub fn segment(&self) -> &DeviceSegment {
        &self.segment
    }

    /// The words covering `[address, address + length)` and the byte offset of `address` in
    /// the first of them, after the bounds check.
    fn span(
        &self,
        address: DeviceAddress,
        length: usize,
    ) -> Result<(&[AtomicU64], usize), MemoryFault> {
        let fault = MemoryFault {
            address,
            length: length as u64,
        };
        let end = address.0.checked_add(length as u64).ok_or(fault)?;
        if end > self.size {
            return Err(fault);
        }
        let first = usize::try_from(address.0 / 8).map_err(|_| fault)?;
        let last = usize::try_from(end.div_ceil(8)).map_err(|_| fault)?;
        let words = self.segment.words().get(first..last).ok_or(fault)?;
        Ok((words, (address.0 % 8) as usize))
    }
}

impl DeviceMemory for DeviceDram {
    fn size(&self) -> u64 {
        self.size
    }

    fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
        let (words, skip) = self.span(address, buffer.len())?;
        let mut words = words.iter();
        let mut rest = &mut buffer[..];
        if skip != 0 {
            // A partial first word.
            if let Some(word) = words.next() {
                let bytes = word.load(Ordering::Relaxed).to_le_bytes();
                let take = (8 - skip).min(rest.len());
                let (head, tail) = rest.split_at_mut(take);
                head.copy_from_slice(&bytes[skip..skip + take]);
                rest = tail;
            }
        }
        let mut whole = rest.chunks_exact_mut(8);
        for (chunk, word) in (&mut whole).zip(&mut words) {
            chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
        }
        let last = whole.into_remainder();
        if let Some(word) = words.next() {
            // A partial last word.
            let bytes = word.load(Ordering::Relaxed).to_le_bytes();
            let take = last.len();
            last.copy_from_slice(&bytes[..take]);
        }
        Ok(())
    }

    fn write(&mut self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
        let (words, skip) = self.span(address, data.len())?;
        let mut rest = data;
        let mut skip = skip;
        for word in words {
            let take = (8 - skip).min(rest.len());
            let (head, tail) = rest.split_at(take);
            let value = if take == 8 {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(head);
                u64::from_le_bytes(bytes)
            } else {
                let mut bytes = word.load(Ordering::Relaxed).to_le_bytes();
                bytes[skip..skip + take].copy_from_slice(head);
                u64::from_le_bytes(bytes)
            };
            word.store(value, Ordering::Relaxed);
            rest = tail;
            skip = 0;
        }
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

    #[test]
    fn unaligned_writes_merge_with_their_neighbours() {
        let mut dram = DeviceDram::new(64);
        dram.write(DeviceAddress(0), &[0xaa; 32]).unwrap();
        let data: Vec<u8> = (1..=13).collect();
        dram.write(DeviceAddress(3), &data).unwrap();
        let mut back = [0u8; 20];
        dram.read(DeviceAddress(0), &mut back).unwrap();
        let mut expected = [0xaa; 20];
        expected[3..16].copy_from_slice(&data);
        assert_eq!(back, expected);
        let mut one = [0u8; 1];
        dram.read(DeviceAddress(15), &mut one).unwrap();
        assert_eq!(one, [13]);
    }

    #[test]
    fn a_size_that_is_not_whole_words_is_bounded_exactly() {
        let mut dram = DeviceDram::new(13);
        assert_eq!(dram.size(), 13);
        assert!(dram.write(DeviceAddress(12), &[1]).is_ok());
        assert!(dram.write(DeviceAddress(12), &[1, 2]).is_err());
        let mut empty = [];
        assert!(dram.read(DeviceAddress(13), &mut empty).is_ok());
        assert!(dram.read(DeviceAddress(14), &mut empty).is_err());
    }
}
