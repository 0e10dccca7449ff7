//! The result monitor: watches µthreads populate the result space and says which slot-sized
//! chunks of it are complete.
//!
//! The result space of a launch is cut into chunks of the DMA slot size (the last one may be
//! shorter). Each finished work item adds the bytes it wrote to the counters of the chunks it
//! overlaps (the counters live in device scratch memory, see [`crate::scratch`]); a chunk whose
//! counter reaches its length is complete. Complete chunks are offered to the DMA executor in
//! completion order (out-of-order streaming) or strictly by offset (in-order streaming).

use crate::error::FirmwareError;
use crate::hal::DeviceMemory;
use crate::scratch::ScratchLayout;
use shared_abi::DeviceAddress;

/// Where the monitor's arrays lie in scratch memory: the chunk counters and the ready queue
/// ([`ScratchLayout::counters_base`], [`ScratchLayout::ready_base`]), computed once for the
/// many calls of a step or a pump.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MonitorArrays {
    counters: DeviceAddress,
    ready: DeviceAddress,
}

impl MonitorArrays {
    /// The arrays of `scratch`.
    #[inline]
    pub const fn of(scratch: &ScratchLayout) -> MonitorArrays {
        MonitorArrays {
            counters: scratch.counters_base(),
            ready: scratch.ready_base(),
        }
    }
}

/// The monitor's fixed-size state; the per-chunk state is in scratch memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResultMonitor {
    result_length: u64,
    chunk_bytes: u64,
    /// `log2(chunk_bytes)` when it is a power of two (every slot size the ABI allows), so
    /// that an offset's chunk is a shift, not a division; [`NO_SHIFT`] otherwise. (The
    /// default monitor's 0 goes with a result of no bytes: no offset is ever in a chunk.)
    chunk_shift: u32,
    chunks: u32,
    items_total: u32,
    items_done: u32,
    /// Chunks that became complete (ready-queue tail).
    completed: u32,
    /// Chunks handed to the executor (ready-queue head, or the in-order cursor).
    taken: u32,
    in_order: bool,
}

impl ResultMonitor {
    /// Starts watching a launch of `items` work items over `result_length` bytes, cut into
    /// chunks of `chunk_bytes`. Clears the chunk counters in scratch memory.
    pub fn start<M: DeviceMemory>(
        memory: &mut M,
        scratch: &ScratchLayout,
        result_length: u64,
        chunk_bytes: u32,
        items: u32,
        in_order: bool,
    ) -> Result<ResultMonitor, FirmwareError> {
        if chunk_bytes == 0 {
            return Err(FirmwareError::MalformedDescriptor);
        }
        let chunk_bytes = u64::from(chunk_bytes);
        let chunks = result_length.div_ceil(chunk_bytes);
        let chunks = u32::try_from(chunks).map_err(|_| FirmwareError::ArgumentOutOfRange)?;
        if chunks > scratch.chunk_capacity {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let zeros = [0u8; 256];
        let mut remaining = u64::from(chunks) * 4;
        let mut address = scratch.counters_base();
        while remaining > 0 {
            let step = remaining.min(zeros.len() as u64);
            let part = zeros
                .get(..step as usize)
                .ok_or(FirmwareError::AddressOverflow)?;
            memory.write(address, part)?;
            address = address
                .checked_add(step)
                .ok_or(FirmwareError::AddressOverflow)?;
            remaining = remaining.saturating_sub(step);
        }
        Ok(ResultMonitor {
            result_length,
            chunk_bytes,
            chunk_shift: if chunk_bytes.is_power_of_two() {
                chunk_bytes.trailing_zeros()
            } else {
                NO_SHIFT
            },
            chunks,
            items_total: items,
            items_done: 0,
            completed: 0,
            taken: 0,
            in_order,
        })
    }

    /// Bytes of chunk `chunk` (the last may be short).
    #[inline]
    pub fn chunk_length(&self, chunk: u32) -> u64 {
        let start = u64::from(chunk).saturating_mul(self.chunk_bytes);
        self.result_length
            .saturating_sub(start)
            .min(self.chunk_bytes)
    }

    /// Chunks in the launch.
    pub fn chunks(&self) -> u32 {
        self.chunks
    }

    /// Whether every work item has finished.
    pub fn all_items_done(&self) -> bool {
        self.items_done >= self.items_total
    }

    /// Whether every chunk has been handed to the executor.
    pub fn all_chunks_taken(&self) -> bool {
        self.taken >= self.chunks
    }

    /// Records that an item finished without a result to count (its description failed, or
    /// a later stage could not be dispatched), so that the launch still completes.
    pub fn item_failed(&mut self) {
        self.items_done = self.items_done.saturating_add(1);
    }

    /// Records that an item wrote `[offset, offset + length)` of the result space.
    #[inline]
    pub fn populated<M: DeviceMemory>(
        &mut self,
        memory: &mut M,
        scratch: &ScratchLayout,
        offset: u64,
        length: u64,
    ) -> Result<(), FirmwareError> {
        self.populated_in(memory, MonitorArrays::of(scratch), offset, length)
    }

    /// [`ResultMonitor::populated`] with the scratch arrays computed by the caller.
    #[inline]
    pub fn populated_in<M: DeviceMemory>(
        &mut self,
        memory: &mut M,
        arrays: MonitorArrays,
        offset: u64,
        length: u64,
    ) -> Result<(), FirmwareError> {
        self.items_done = self.items_done.saturating_add(1);
        let end = offset
            .checked_add(length)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        if end > self.result_length {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        if offset >= end {
            return Ok(());
        }
        // The first chunk by one division (chunk_bytes > 0, checked in `start`), the next ones
        // (an item across chunk boundaries) by adding the chunk size.
        let chunk = if self.chunk_shift < u64::BITS {
            // `offset / chunk_bytes` for a power of two.
            offset >> self.chunk_shift
        } else {
            offset
                .checked_div(self.chunk_bytes)
                .ok_or(FirmwareError::MalformedDescriptor)?
        };
        let mut chunk = u32::try_from(chunk).map_err(|_| FirmwareError::ArgumentOutOfRange)?;
        // chunk * chunk_bytes <= offset: no overflow (`chunk_length`'s product, unsaturated).
        let mut chunk_start = u64::from(chunk).wrapping_mul(self.chunk_bytes);
        let mut position = offset;
        loop {
            // `(chunk + 1) * chunk_bytes`, saturating as that product would.
            let next_start = chunk_start.saturating_add(self.chunk_bytes);
            let chunk_end = next_start.min(end);
            let added = chunk_end.saturating_sub(position);
            let address = entry_address(arrays.counters, chunk);
            let count: u32 = memory.read_value(address)?;
            let count = u64::from(count).saturating_add(added);
            // `chunk_length(chunk)` from the chunk's start.
            let full = self
                .result_length
                .saturating_sub(chunk_start)
                .min(self.chunk_bytes);
            if count > full {
                // Two items claimed the same bytes: a kernel bug, reported, never a panic.
                return Err(FirmwareError::ArgumentOutOfRange);
            }
            memory.write(address, &(count as u32).to_le_bytes())?;
            if count == full && !self.in_order {
                let entry = entry_address(arrays.ready, self.completed);
                memory.write(entry, &chunk.to_le_bytes())?;
                self.completed = self.completed.saturating_add(1);
            }
            if chunk_end >= end {
                return Ok(());
            }
            // chunk_end < end <= result_length: the next chunk exists, its index fits u32.
            position = chunk_end;
            chunk_start = next_start;
            chunk = chunk.saturating_add(1);
        }
    }

    /// The next chunk to stream, if one is complete: the oldest completed (out-of-order mode)
    /// or the next by offset (in-order mode). Does not take it.
    // Inlined: the executor's pump calls it once per chunk (and once more to find none).
    #[inline]
    pub fn peek<M: DeviceMemory>(
        &self,
        memory: &M,
        scratch: &ScratchLayout,
    ) -> Result<Option<u32>, FirmwareError> {
        self.peek_in(memory, MonitorArrays::of(scratch))
    }

    /// [`ResultMonitor::peek`] with the scratch arrays computed by the caller.
    #[inline]
    pub fn peek_in<M: DeviceMemory>(
        &self,
        memory: &M,
        arrays: MonitorArrays,
    ) -> Result<Option<u32>, FirmwareError> {
        if self.taken >= self.chunks {
            return Ok(None);
        }
        if self.in_order {
            let count: u32 = memory.read_value(entry_address(arrays.counters, self.taken))?;
            return Ok((u64::from(count) == self.chunk_length(self.taken)).then_some(self.taken));
        }
        if self.taken >= self.completed {
            return Ok(None);
        }
        let entry = entry_address(arrays.ready, self.taken);
        let chunk: u32 = memory.read_value(entry)?;
        Ok(Some(chunk))
    }

    /// Whether [`ResultMonitor::peek`] finds no chunk without reading device memory: every
    /// chunk taken, or (out-of-order mode) every completed one. `false` says nothing (in-order
    /// mode reads the next chunk's counter to know).
    #[inline]
    pub fn none_complete(&self) -> bool {
        self.taken >= self.chunks || (!self.in_order && self.taken >= self.completed)
    }

    /// Takes the chunk [`ResultMonitor::peek`] returned.
    pub fn take(&mut self) {
        self.taken = self.taken.saturating_add(1);
    }
}

/// [`ResultMonitor`]'s `chunk_shift` for a chunk size that is not a power of two.
const NO_SHIFT: u32 = u32::MAX;

/// Device address of chunk `chunk`'s population counter.
pub const fn counter_address(scratch: &ScratchLayout, chunk: u32) -> DeviceAddress {
    entry_address(scratch.counters_base(), chunk)
}

/// Device address of 4-byte entry `index` of the array at `base` (the chunk counters, the
/// ready queue: neither wraps, an index is below the chunk capacity).
#[inline]
const fn entry_address(base: DeviceAddress, index: u32) -> DeviceAddress {
    // At most 4 * (2^32 - 1): the product does not saturate.
    DeviceAddress(base.0.saturating_add((index as u64).saturating_mul(4)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeDeviceMemory;

    /// A scratch area at device address 0 with room for `chunk_capacity` chunks.
    fn scratch(chunk_capacity: u32) -> ScratchLayout {
        ScratchLayout {
            base: DeviceAddress(0),
            descriptor_capacity: 4,
            staging_capacity: 4,
            chunk_capacity,
        }
    }

    fn memory() -> FakeDeviceMemory {
        FakeDeviceMemory::new(0x4000)
    }

    #[test]
    fn start_accepts_exactly_the_chunk_capacity_and_refuses_one_chunk_more() {
        let (mut memory, scratch) = (memory(), scratch(8));
        let full = ResultMonitor::start(&mut memory, &scratch, 8 * 32, 32, 64, false).unwrap();
        assert_eq!(full.chunks(), 8);
        assert_eq!(
            ResultMonitor::start(&mut memory, &scratch, 8 * 32 + 1, 32, 65, false),
            Err(FirmwareError::ArgumentOutOfRange)
        );
    }

    #[test]
    fn start_refuses_a_zero_chunk_size() {
        assert_eq!(
            ResultMonitor::start(&mut memory(), &scratch(8), 64, 0, 16, false),
            Err(FirmwareError::MalformedDescriptor)
        );
    }

    #[test]
    fn start_clears_the_counters_of_its_chunks_and_nothing_beyond() {
        let (mut memory, scratch) = (memory(), scratch(100));
        // Counters left over from an earlier launch, over the whole capacity.
        memory.write(scratch.counters_base(), &[0xab; 400]).unwrap();
        // 70 chunks: 280 bytes of counters, more than one 256-byte clearing step.
        let monitor = ResultMonitor::start(&mut memory, &scratch, 70 * 32, 32, 560, false).unwrap();
        assert_eq!(monitor.chunks(), 70);
        assert_eq!(memory.bytes(scratch.counters_base(), 280), [0; 280]);
        assert_eq!(
            memory.bytes(counter_address(&scratch, 70), 4),
            [0xab; 4],
            "chunk 70's counter is not the launch's"
        );
    }

    /// `none_complete` is true only where `peek` finds nothing without reading memory.
    #[test]
    fn none_complete_says_peek_finds_nothing_only_when_it_cannot() {
        let (mut memory, scratch) = (memory(), scratch(8));
        let mut out_of_order =
            ResultMonitor::start(&mut memory, &scratch, 64, 32, 2, false).unwrap();
        assert!(out_of_order.none_complete(), "nothing completed yet");
        out_of_order
            .populated(&mut memory, &scratch, 32, 32)
            .unwrap();
        assert!(!out_of_order.none_complete());
        assert_eq!(out_of_order.peek(&memory, &scratch), Ok(Some(1)));
        out_of_order.take();
        assert!(out_of_order.none_complete(), "the completed chunk is taken");
        assert_eq!(out_of_order.peek(&memory, &scratch), Ok(None));
        // In order, only the counter tells: not known without reading it.
        let mut in_order = ResultMonitor::start(&mut memory, &scratch, 64, 32, 2, true).unwrap();
        assert!(!in_order.none_complete());
        assert_eq!(in_order.peek(&memory, &scratch), Ok(None));
        for chunk in 0..2 {
            in_order
                .populated(&mut memory, &scratch, chunk * 32, 32)
                .unwrap();
            in_order.take();
        }
        assert!(in_order.none_complete(), "every chunk taken");
    }

    /// Items of any length, across chunk boundaries and into a short last chunk, count their
    /// bytes into every chunk they overlap: each chunk completes (joins the ready queue) when
    /// its last byte is counted, in that order; a byte claimed twice is refused.
    #[test]
    fn items_across_chunks_complete_each_chunk_with_its_last_byte() {
        // 7 chunks of 24 bytes, the last of 12 (a division), or 5 of 32, the last of 28 (a
        // shift).
        let result = 156u64;
        for (chunk, seed) in [24u64, 32]
            .into_iter()
            .flat_map(|c| (0..20u64).map(move |s| (c, s)))
        {
            let chunks = result.div_ceil(chunk) as usize;
            let (mut memory, scratch) = (memory(), scratch(8));
            let mut monitor =
                ResultMonitor::start(&mut memory, &scratch, result, chunk as u32, 99, false)
                    .unwrap();
            // Cut the result into items of 1 to 60 bytes, populated in a shuffled order.
            let mut items = Vec::new();
            let (mut start, mut draw) = (0u64, seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            while start < result {
                draw ^= draw << 13;
                draw ^= draw >> 7;
                draw ^= draw << 17;
                let length = (1 + draw % 60).min(result - start);
                items.push((start, length));
                start += length;
            }
            for index in (1..items.len()).rev() {
                draw ^= draw << 13;
                draw ^= draw >> 7;
                draw ^= draw << 17;
                items.swap(index, (draw % (index as u64 + 1)) as usize);
            }
            let mut counted = vec![0u64; chunks];
            let mut expected_order = Vec::new();
            for &(offset, length) in &items {
                monitor
                    .populated(&mut memory, &scratch, offset, length)
                    .unwrap();
                for byte in offset..offset + length {
                    let c = (byte / chunk) as usize;
                    counted[c] += 1;
                    if counted[c] == chunk.min(result - c as u64 * chunk) {
                        expected_order.push(c as u32);
                    }
                }
            }
            let mut order = Vec::new();
            while let Some(c) = monitor.peek(&memory, &scratch).unwrap() {
                order.push(c);
                monitor.take();
            }
            assert_eq!(order, expected_order, "seed {seed}: {items:?}");
            assert_eq!(order.len(), chunks);
            let (offset, length) = items[0];
            assert_eq!(
                monitor.populated(&mut memory, &scratch, offset, length),
                Err(FirmwareError::ArgumentOutOfRange),
                "bytes claimed twice"
            );
        }
    }

    #[test]
    fn a_failed_item_counts_towards_the_launch_completing() {
        let (mut memory, scratch) = (memory(), scratch(8));
        let mut monitor = ResultMonitor::start(&mut memory, &scratch, 64, 32, 2, false).unwrap();
        monitor.populated(&mut memory, &scratch, 0, 32).unwrap();
        assert!(!monitor.all_items_done());
        monitor.item_failed();
        assert!(monitor.all_items_done());
    }
}
