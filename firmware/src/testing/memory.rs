//! Device memory and host physical memory doubles.

use super::*;

/// Device memory as a byte vector behind a [`RefCell`] (shared access, as the HAL requires;
/// single-threaded, so not `Sync`: the contended cases of `firmware::conformance` run on the
/// emulator's memory and a port's). Every read that touches the flow-control block is recorded
/// with the message the block held, so a test can count and check the device's head reads
/// (edge D5).
#[derive(Clone, Debug)]
pub struct FakeDeviceMemory {
    pub(super) bytes: RefCell<Vec<u8>>,
    pub(super) flow_control_reads: RefCell<Vec<FlowControlMessage>>,
}

impl FakeDeviceMemory {
    /// `size` bytes of zeroed memory.
    pub fn new(size: usize) -> FakeDeviceMemory {
        FakeDeviceMemory {
            bytes: RefCell::new(std::vec![0; size]),
            flow_control_reads: RefCell::new(Vec::new()),
        }
    }

    /// The flow-control messages the firmware read, oldest first.
    pub fn flow_control_reads(&self) -> Vec<FlowControlMessage> {
        self.flow_control_reads.borrow().clone()
    }

    /// The last flow-control message the firmware read, if any.
    pub fn last_flow_control_read(&self) -> Option<FlowControlMessage> {
        self.flow_control_reads.borrow().last().copied()
    }

    /// Copies as much of `data` as fits at `address` (set-up from arbitrary input: never
    /// fails, never panics).
    pub fn fill(&mut self, address: u64, data: &[u8]) {
        let Ok(start) = usize::try_from(address) else {
            return;
        };
        let bytes = self.bytes.get_mut();
        let end = start.saturating_add(data.len()).min(bytes.len());
        if let (Some(target), Some(source)) = (
            bytes.get_mut(start..end),
            data.get(..end.saturating_sub(start)),
        ) {
            target.copy_from_slice(source);
        }
    }

    /// All of device memory (a borrow: do not write while holding it).
    pub fn contents(&self) -> core::cell::Ref<'_, [u8]> {
        core::cell::Ref::map(self.bytes.borrow(), |bytes| bytes.as_slice())
    }

    /// The bytes of `[address, address + length)`; panics outside memory (a test error).
    pub fn bytes(&self, address: DeviceAddress, length: u64) -> Vec<u8> {
        let mut buffer = std::vec![0; usize::try_from(length).unwrap()];
        self.read(address, &mut buffer)
            .unwrap_or_else(|fault| panic!("test read outside device memory: {fault:?}"));
        buffer
    }

    /// Writes a plain-old-data value; panics outside memory (a test error).
    pub fn put<T: IntoBytes + zerocopy::Immutable>(&self, address: DeviceAddress, value: &T) {
        self.write(address, value.as_bytes())
            .unwrap_or_else(|fault| panic!("test write outside device memory: {fault:?}"));
    }

    fn range(&self, address: DeviceAddress, length: usize) -> Result<Range<usize>, MemoryFault> {
        let fault = MemoryFault {
            address,
            length: length as u64,
        };
        let start = usize::try_from(address.0).map_err(|_| fault)?;
        let end = start.checked_add(length).ok_or(fault)?;
        if end > self.bytes.borrow().len() {
            return Err(fault);
        }
        Ok(start..end)
    }

    /// Applies `update` to the little-endian word at `address` (the one step of an atomic:
    /// single-threaded, so trivially indivisible); returns the word before.
    fn update_word(
        &self,
        address: DeviceAddress,
        update: impl FnOnce(u32) -> u32,
    ) -> Result<u32, MemoryFault> {
        if let Some(fault) = crate::hal::atomic_word_fault(address, self.size()) {
            return Err(fault);
        }
        let range = self.range(address, 4)?;
        let mut bytes = self.bytes.borrow_mut();
        let word = &mut bytes[range];
        let old = u32::from_le_bytes(<[u8; 4]>::try_from(&*word).unwrap());
        word.copy_from_slice(&update(old).to_le_bytes());
        Ok(old)
    }
}

impl DeviceMemory for FakeDeviceMemory {
    fn size(&self) -> u64 {
        self.bytes.borrow().len() as u64
    }

    fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
        let range = self.range(address, buffer.len())?;
        let bytes = self.bytes.borrow();
        let block = device_map::FLOW_CONTROL.0..device_map::FLOW_CONTROL.0 + 16;
        if (range.start as u64) < block.end && block.start < range.end as u64 && !buffer.is_empty()
        {
            let start = block.start as usize;
            // A memory too small to hold the whole block has no flow-control block to log.
            if let Some(message) = bytes
                .get(start..start + 16)
                .and_then(|bytes| FlowControlMessage::read_from_bytes(bytes).ok())
            {
                self.flow_control_reads.borrow_mut().push(message);
            }
        }
        buffer.copy_from_slice(&bytes[range]);
        Ok(())
    }

    fn write(&self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
        let range = self.range(address, data.len())?;
        self.bytes.borrow_mut()[range].copy_from_slice(data);
        Ok(())
    }
}

impl DeviceAtomics for FakeDeviceMemory {
    fn fetch_add_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
        self.update_word(address, |old| old.wrapping_add(value))
    }
    fn fetch_min_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
        self.update_word(address, |old| old.min(value))
    }
    fn swap_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
        self.update_word(address, |_| value)
    }
    fn compare_exchange_u32(
        &self,
        address: DeviceAddress,
        current: u32,
        new: u32,
    ) -> Result<u32, MemoryFault> {
        self.update_word(address, |old| if old == current { new } else { old })
    }
}

/// Host physical memory as a sparse byte map (unwritten bytes read as zero). The writes of a
/// request land here, in chain order, when the test completes it with [`Status::Ok`].
#[derive(Debug, Default)]
pub struct FakeHostMemory {
    pub(super) bytes: BTreeMap<u64, u8>,
}

impl FakeHostMemory {
    /// Writes `data` at `address`.
    pub fn write(&mut self, address: HostPhysAddr, data: &[u8]) {
        for (i, byte) in data.iter().enumerate() {
            self.bytes.insert(address.0 + i as u64, *byte);
        }
    }

    /// Reads `length` bytes at `address`.
    pub fn read(&self, address: HostPhysAddr, length: u64) -> Vec<u8> {
        (0..length)
            .map(|i| self.bytes.get(&(address.0 + i)).copied().unwrap_or(0))
            .collect()
    }

    /// Reads a little-endian `u64` at `address`.
    pub fn read_u64(&self, address: HostPhysAddr) -> u64 {
        u64::from_le_bytes(self.read(address, 8).try_into().unwrap())
    }

    /// Lands one DMA write.
    pub fn apply(&mut self, write: &DmaWrite) {
        self.write(write.destination, &write.bytes);
    }
}
