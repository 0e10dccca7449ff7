//! Device memory: the HDM range the emulator owns, and [`ChannelProfile`], the view through
//! which the CCM finds the channels a work item's accesses map to (`crate::ccm`).
//!
//! The bytes live in a [`DeviceSegment`] (8-byte atomic words): an anonymous mapping
//! in-process, a shared memory file when the emulator runs as its own process and an attached
//! host maps it for its untimed set-up. Byte access is built on word access here: a read
//! copies the words it covers out with Relaxed loads; a write stores whole words with Relaxed
//! stores and merges the bytes of a partial first or last word with a compare-and-swap loop,
//! so that it changes exactly the bytes it addresses even if another µthread wrote the word's
//! other bytes at the same time (the HAL's `DeviceMemory::write` contract; the emulator makes
//! one access at a time, also when it interleaves items (`crate::ccm::interleave`), so the
//! loop never retries, and it costs one locked instruction per partial word). The 32-bit atomics of `DeviceAtomics` are compare-and-swap loops on the
//! 8-byte word that holds them (AcqRel, stronger than the Relaxed the HAL requires). Ordering
//! with the host's set-up writes comes from the turn hand-over (a Release store and an Acquire
//! load), not from these accesses.

use crate::shm::DeviceSegment;
use firmware::hal::{atomic_word_fault, DeviceAtomics, DeviceMemory, MemoryFault};
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

    #[inline(always)]
    fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
        // The short reads (most of the kernels') and the runs of whole 4-byte words up to 64
        // bytes (a vertex's arcs, an item's offsets) inline into the caller; the other long
        // ones are a call: a longer run of whole 4-byte words (an SSSP item's arcs) to a copy
        // of whole 8-byte words after a first half word when it starts in the middle of one,
        // the rest to the general one.
        let length = buffer.len() as u64;
        if length <= 8 {
            self.read_short(address, buffer)
        } else if (address.0 | length) % 4 == 0 {
            if length <= 64 {
                self.read_halves(address, buffer)
            } else {
                self.read_halves_long(address, buffer)
            }
        } else {
            self.read_long(address, buffer)
        }
    }

    #[inline(always)]
    fn write(&self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
        // As for reads: the short writes (a kernel's 4-byte result) and the whole aligned words
        // up to 64 bytes (the firmware's DMA descriptors and staged records) inline into the
        // caller.
        if data.len() <= 8 {
            self.write_short(address, data)
        } else if data.len() <= 64 && (address.0 | data.len() as u64) % 8 == 0 {
            self.write_words(address, data)
        } else {
            self.write_long(address, data)
        }
    }

    /// A read here moves bytes and nothing else (the views that count or interleave reads
    /// wrap this memory and keep the default).
    #[inline(always)]
    fn unobserved_reads(&self) -> bool {
        true
    }

    /// The same words and outcome as the default's 4-byte reads one by one (each word one
    /// Relaxed load of the 8-byte word holding it, as a 4-byte read makes), with one bounds
    /// check per element: that its 8-byte word lies wholly inside device memory. A base that
    /// is not 4-byte aligned (an element would straddle two words) or a gather with an element
    /// outside those words takes the default's path, which reads the elements one by one and
    /// finds the first failing element's fault.
    #[inline(always)]
    fn read_u32_gather(
        &self,
        base: u64,
        indices: &[u32],
        out: &mut [u32],
    ) -> Result<(), MemoryFault> {
        if base % 4 != 0 || !self.gather_words(base, indices, out) {
            return firmware::hal::gather_u32_by_reads(self, base, indices, out);
        }
        Ok(())
    }

    /// A hardware prefetch of the cache line holding `address` (x86-64: `prefetcht0`; no-op
    /// elsewhere and outside the segment's words). It moves no byte and is not an access: an
    /// address past `size` but inside the segment's last words only hints mapped memory, so
    /// the one check is the word index's (the kernels hint several lines per item).
    #[inline(always)]
    fn prefetch(&self, address: DeviceAddress) {
        let Ok(index) = usize::try_from(address.0 / 8) else {
            return;
        };
        if let Some(word) = self.segment.words().get(index) {
            cosim_link::shm::prefetch_line(word);
        }
    }
}

impl DeviceDram {
    /// [`DeviceMemory::write`] of more than 8 bytes.
    #[inline(never)]
    fn write_long(&self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
        let (words, skip) = self.span(address, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        let mut words = words;
        let mut rest = data;
        if skip != 0 || rest.len() < 8 {
            // A partial first word.
            if let Some((word, others)) = words.split_first() {
                let (head, tail) = rest.split_at((8 - skip).min(rest.len()));
                merge_bytes(word, skip, head);
                rest = tail;
                words = others;
            }
        }
        // Whole words, as fixed-size copies (iterated by value, as in `read`).
        let whole = rest.len() / 8;
        let (groups, tail) = rest.split_at(whole * 8);
        for (chunk, word) in groups.chunks_exact(8).zip(words) {
            if let Ok(bytes) = <[u8; 8]>::try_from(chunk) {
                word.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
            }
        }
        if !tail.is_empty() {
            // A partial last word.
            if let Some(word) = words.get(whole) {
                merge_bytes(word, 0, tail);
            }
        }
        Ok(())
    }

    /// [`DeviceMemory::write`] of whole 8-byte words at an 8-byte aligned address: the same
    /// Relaxed stores as [`DeviceDram::write_long`] makes (no partial word), with less set-up.
    #[inline(always)]
    fn write_words(&self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
        let length = data.len() as u64;
        let fault = MemoryFault { address, length };
        if !self.fits(address, length) {
            return Err(fault);
        }
        // Below `size`: cannot overflow. The address is aligned and the length whole words
        // (the caller's condition), so the words are `length / 8` from `first`: counted from
        // the data's length, which the compiler knows where the write is inlined (a loop of
        // that many stores, unrolled, no check per word).
        let first = usize::try_from(address.0 / 8).map_err(|_| fault)?;
        let words = self
            .segment
            .words()
            .get(first..)
            .and_then(|words| words.get(..data.len() / 8))
            .ok_or(fault)?;
        for (chunk, word) in data.chunks_exact(8).zip(words) {
            if let Ok(bytes) = <[u8; 8]>::try_from(chunk) {
                word.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// [`DeviceMemory::write`] of at most 8 bytes: the same stores as a longer write makes (a
    /// whole aligned word stored, a partial one merged), with less bookkeeping.
    #[inline(always)]
    fn write_short(&self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
        let length = data.len() as u64;
        let fault = MemoryFault { address, length };
        let end = address.0.checked_add(length).ok_or(fault)?;
        if end > self.size {
            return Err(fault);
        }
        if data.is_empty() {
            return Ok(());
        }
        let words = self.segment.words();
        let index = usize::try_from(address.0 / 8).map_err(|_| fault)?;
        let skip = (address.0 % 8) as usize;
        let word = words.get(index).ok_or(fault)?;
        if let (0, Ok(bytes)) = (skip, <[u8; 8]>::try_from(data)) {
            word.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
        } else if skip + data.len() <= 8 {
            merge_bytes(word, skip, data);
        } else {
            let (head, tail) = data.split_at(8 - skip);
            let next = words.get(index + 1).ok_or(fault)?;
            merge_bytes(word, skip, head);
            merge_bytes(next, 0, tail);
        }
        Ok(())
    }

    /// [`DeviceMemory::read`] of more than 8 bytes.
    #[inline(never)]
    fn read_long(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
        let (words, skip) = self.span(address, buffer.len())?;
        // Every copy below has a fixed size, so none becomes a call to `memcpy` (the kernels'
        // reads are short: a 4-byte word, a packet of up to 32 bytes, 4-byte aligned; or long
        // and aligned: a row of weights). Each output byte comes from one Relaxed load of the
        // word holding it.
        let whole = buffer.len() / 8;
        let shift = (skip * 8) as u32;
        // The whole 8-byte groups, then the tail. (Iterating the groups by value, not through
        // a `&mut` of the iterator, lets the loop run without a bounds check per word: twice
        // as fast on long reads.)
        let (groups, tail) = buffer.split_at_mut(whole * 8);
        if shift == 0 {
            for (chunk, word) in groups.chunks_exact_mut(8).zip(words) {
                if let Ok(chunk) = <&mut [u8; 8]>::try_from(chunk) {
                    *chunk = word.load(Ordering::Relaxed).to_le_bytes();
                }
            }
        } else {
            // Each 8 output bytes straddle two words: the high bytes of one and the low bytes
            // of the next.
            for (chunk, pair) in groups.chunks_exact_mut(8).zip(words.windows(2)) {
                if let (Ok(chunk), [low, high]) = (<&mut [u8; 8]>::try_from(chunk), pair) {
                    let low = low.load(Ordering::Relaxed) >> shift;
                    let high = high.load(Ordering::Relaxed) << (64 - shift);
                    *chunk = (low | high).to_le_bytes();
                }
            }
        }
        if !tail.is_empty() {
            // Fewer than 8 bytes left, `skip` bytes into word `whole` of the span; the span
            // ends with the word holding the last of them, so the next word is there only if
            // they need it.
            let mut value = words
                .get(whole)
                .map_or(0, |word| word.load(Ordering::Relaxed) >> shift);
            if shift != 0 {
                if let Some(high) = words.get(whole + 1) {
                    value |= high.load(Ordering::Relaxed) << (64 - shift);
                }
            }
            put_low_bytes(tail, value);
        }
        Ok(())
    }

    /// Whether `[address, address + length)` lies inside device memory (`address + length
    /// <= size`, without overflow), written as `address <= size - length` so that for the
    /// constant length of a kernel's word reads the limit is worked out once per loop, not
    /// once per access.
    #[inline(always)]
    fn fits(&self, address: DeviceAddress, length: u64) -> bool {
        self.size
            .checked_sub(length)
            .is_some_and(|last| address.0 <= last)
    }

    /// [`DeviceMemory::read`] of whole 4-byte words from a 4-byte aligned address (a
    /// kernel's run of array words: a vertex's targets or weights): the same loads as
    /// [`DeviceDram::read_long`] (a first half word, whole words, a last half word), with less
    /// set-up.
    #[inline(always)]
    fn read_halves(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
        let length = buffer.len() as u64;
        let fault = MemoryFault { address, length };
        if !self.fits(address, length) {
            return Err(fault);
        }
        // Below `size`: cannot overflow.
        let end = address.0 + length;
        let first = usize::try_from(address.0 / 8).map_err(|_| fault)?;
        let last = usize::try_from(end.div_ceil(8)).map_err(|_| fault)?;
        let mut words = self.segment.words().get(first..last).ok_or(fault)?.iter();
        let rest = if address.0 % 8 == 0 {
            buffer
        } else {
            // The first word's high half.
            let Some((head, rest)) = buffer.split_first_chunk_mut::<4>() else {
                return Ok(());
            };
            if let Some(word) = words.next() {
                *head = ((word.load(Ordering::Relaxed) >> 32) as u32).to_le_bytes();
            }
            rest
        };
        // Whole words, as fixed-size copies.
        let (whole, tail) = rest.split_at_mut(rest.len() / 8 * 8);
        for (chunk, word) in whole.chunks_exact_mut(8).zip(&mut words) {
            if let Ok(chunk) = <&mut [u8; 8]>::try_from(chunk) {
                *chunk = word.load(Ordering::Relaxed).to_le_bytes();
            }
        }
        if let (Ok(tail), Some(word)) = (<&mut [u8; 4]>::try_from(tail), words.next()) {
            // The last word's low half.
            *tail = (word.load(Ordering::Relaxed) as u32).to_le_bytes();
        }
        Ok(())
    }

    /// [`DeviceMemory::read_u32_gather`] from a 4-byte aligned `base` when every element's
    /// word is one of the whole 8-byte words inside device memory (checked per element, as
    /// the index of the word that holds it, no other check): each element's word out of the
    /// 8-byte word that holds it. Returns false, having read nothing that counts (`out`
    /// unspecified), when some element is not in one of those words (it may still fit: the
    /// low half of a last partial word, which the caller's fallback reads; or its address
    /// does not fit a `u64`: its word index is then past any memory).
    ///
    /// A call of its own: inlined into a kernel's long body, its loop reloaded spilled values
    /// from the stack (25 instructions a pair of elements in SSSP's `execute`, 21 here).
    #[inline(never)]
    fn gather_words(&self, base: u64, indices: &[u32], out: &mut [u32]) -> bool {
        let Some(words) = usize::try_from(self.size / 8)
            .ok()
            .and_then(|whole| self.segment.words().get(..whole))
        else {
            return false;
        };
        // Elements are numbered in 4-byte units from address 0 (`base` is 4-byte aligned):
        // element `index` is unit `base / 4 + index` (below 2^63: no overflow), the low
        // (even unit) or high (odd unit) half of word `unit / 2`.
        let first_unit = base / 4;
        let element = |index: u32| {
            let unit = first_unit + u64::from(index);
            let holder = usize::try_from(unit / 2)
                .ok()
                .and_then(|index| words.get(index))?;
            // By a shift of 0 or 32 bits (no branch on the unit's parity, which is random).
            let value = holder.load(Ordering::Relaxed);
            Some((value >> ((unit & 1) * 32)) as u32)
        };
        let count = indices.len().min(out.len());
        let (Some(indices), Some(out)) = (indices.get(..count), out.get_mut(..count)) else {
            return false;
        };
        // Two elements a pass (half the loop's own instructions), then an odd last one.
        let pairs = indices.chunks_exact(2);
        let last = pairs.remainder();
        let mut slots = out.chunks_exact_mut(2);
        for (pair, slot) in pairs.zip(&mut slots) {
            if let ([first, second], [into_first, into_second]) = (pair, slot) {
                let (Some(first), Some(second)) = (element(*first), element(*second)) else {
                    return false;
                };
                *into_first = first;
                *into_second = second;
            }
        }
        if let ([index], [slot]) = (last, slots.into_remainder()) {
            let Some(value) = element(*index) else {
                return false;
            };
            *slot = value;
        }
        true
    }

    /// [`DeviceDram::read_halves`] of more than 64 bytes, as a call, its whole words copied
    /// as [`DeviceDram::read_long`] copies them (iterated by value: no bounds check per
    /// word). The same loads: a first half word when `address` is in the middle of a word,
    /// whole words, a last half word.
    #[inline(never)]
    fn read_halves_long(
        &self,
        address: DeviceAddress,
        buffer: &mut [u8],
    ) -> Result<(), MemoryFault> {
        let (words, skip) = self.span(address, buffer.len())?;
        let (words, rest) = if skip == 0 {
            (words, buffer)
        } else {
            // The first word's high half.
            let (Some((head, rest)), Some((word, others))) =
                (buffer.split_first_chunk_mut::<4>(), words.split_first())
            else {
                return Ok(());
            };
            *head = ((word.load(Ordering::Relaxed) >> 32) as u32).to_le_bytes();
            (others, rest)
        };
        let whole = rest.len() / 8;
        let (groups, tail) = rest.split_at_mut(whole * 8);
        for (chunk, word) in groups.chunks_exact_mut(8).zip(words) {
            if let Ok(chunk) = <&mut [u8; 8]>::try_from(chunk) {
                *chunk = word.load(Ordering::Relaxed).to_le_bytes();
            }
        }
        if let (Ok(tail), Some(word)) = (<&mut [u8; 4]>::try_from(tail), words.get(whole)) {
            // The last word's low half.
            *tail = (word.load(Ordering::Relaxed) as u32).to_le_bytes();
        }
        Ok(())
    }

    /// [`DeviceMemory::read`] of at most 8 bytes (the kernels' commonest access: a 4-byte
    /// word), the same loads with less bookkeeping: the word holding the first byte, and the
    /// next one only when the bytes straddle the two.
    #[inline(always)]
    fn read_short(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
        let length = buffer.len() as u64;
        let fault = MemoryFault { address, length };
        if !self.fits(address, length) {
            return Err(fault);
        }
        if length == 0 {
            return Ok(());
        }
        let words = self.segment.words();
        let index = usize::try_from(address.0 / 8).map_err(|_| fault)?;
        let skip = address.0 % 8;
        let shift = (skip * 8) as u32;
        let mut value = words.get(index).ok_or(fault)?.load(Ordering::Relaxed) >> shift;
        if skip + length > 8 {
            let high = words.get(index + 1).ok_or(fault)?;
            value |= high.load(Ordering::Relaxed) << (64 - shift);
        }
        put_low_bytes(buffer, value);
        Ok(())
    }
}

/// Writes `bytes` (fewer than 8) at byte `skip` of `word`, atomically (a compare-and-swap
/// loop), so a neighbour's concurrent bytes in the same word survive.
#[inline]
fn merge_bytes(word: &AtomicU64, skip: usize, bytes: &[u8]) {
    let shift = (skip * 8) as u32;
    let mask = ((1_u64 << (bytes.len() * 8)) - 1) << shift;
    let bits = bytes
        .iter()
        .rev()
        .fold(0_u64, |bits, byte| (bits << 8) | u64::from(*byte))
        << shift;
    // The closure always returns `Some`: the update cannot be refused.
    let _ = word.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
        Some((old & !mask) | bits)
    });
}

/// Stores the low `destination.len()` (at most 8) bytes of `value`, little-endian; the common
/// lengths as fixed-size copies.
#[inline(always)]
fn put_low_bytes(destination: &mut [u8], value: u64) {
    let bytes = value.to_le_bytes();
    match destination.len() {
        8 => destination.copy_from_slice(&bytes),
        4 => destination.copy_from_slice(&bytes[..4]),
        _ => {
            for (to, from) in destination.iter_mut().zip(bytes) {
                *to = from;
            }
        }
    }
}

impl DeviceDram {
    /// Applies `update` to the little-endian 32-bit word at `address` atomically (a
    /// compare-and-swap loop on the 8-byte word that holds it); returns the word before.
    fn update_u32(
        &self,
        address: DeviceAddress,
        update: impl Fn(u32) -> u32,
    ) -> Result<u32, MemoryFault> {
        if let Some(fault) = atomic_word_fault(address, self.size) {
            return Err(fault);
        }
        let (words, _) = self.span(address, 4)?;
        let fault = MemoryFault { address, length: 4 };
        let word = words.first().ok_or(fault)?;
        let shift = (address.0 % 8) * 8;
        let previous = word
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                let value = update((old >> shift) as u32);
                Some((old & !(0xffff_ffff << shift)) | (u64::from(value) << shift))
            })
            .unwrap_or_else(|old| old);
        Ok((previous >> shift) as u32)
    }
}

impl DeviceAtomics for DeviceDram {
    fn fetch_add_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
        self.update_u32(address, |old| old.wrapping_add(value))
    }
    fn fetch_min_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
        self.update_u32(address, |old| old.min(value))
    }
    fn swap_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
        self.update_u32(address, |_| value)
    }
    fn compare_exchange_u32(
        &self,
        address: DeviceAddress,
        current: u32,
        new: u32,
    ) -> Result<u32, MemoryFault> {
        self.update_u32(address, |old| if old == current { new } else { old })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use firmware::conformance;
    use rand::{Rng, SeedableRng};

    /// The HAL conformance checks of `firmware::conformance` on the emulator's device memory,
    /// the contended case on four OS threads (the emulator's memory is `Sync`: atomic words).
    #[test]
    fn device_dram_passes_the_hal_conformance_checks() {
        let dram = DeviceDram::new(1 << 16);
        let window = DeviceAddress(4096);
        assert_eq!(conformance::memory_bounds(&dram, window), Ok(()));
        assert_eq!(conformance::partial_writes(&dram, window), Ok(()));
        assert_eq!(conformance::atomics(&dram, window), Ok(()));
        assert_eq!(
            conformance::contended_atomics(&dram, window, 4, |workers, worker| {
                std::thread::scope(|scope| {
                    for index in 0..workers {
                        scope.spawn(move || worker(index));
                    }
                });
            }),
            Ok(())
        );
        // A size that is not whole words: an atomic on the last, partial word faults.
        let odd = DeviceDram::new(4098);
        assert_eq!(
            conformance::atomics(&odd, window.min(DeviceAddress(1024))),
            Ok(())
        );
    }

    /// Two threads writing the two halves of the same 8-byte words at the same time, each
    /// word once (so a lost update stays lost): every byte is the one its writer wrote (the
    /// partial-word merge is atomic, so neither write undoes the other).
    #[test]
    fn concurrent_partial_writes_to_one_word_lose_nothing() {
        const WORDS: u64 = 1 << 17;
        let dram = DeviceDram::new(WORDS * 8);
        std::thread::scope(|scope| {
            for (offset, value) in [(0_u64, 0xaa_u8), (4, 0x55)] {
                let dram = &dram;
                scope.spawn(move || {
                    for word in 0..WORDS {
                        dram.write(DeviceAddress(word * 8 + offset), &[value; 4])
                            .unwrap();
                    }
                });
            }
        });
        let mut back = vec![0_u8; (WORDS * 8) as usize];
        dram.read(DeviceAddress(0), &mut back).unwrap();
        for word in back.chunks_exact(8) {
            assert_eq!(word, [0xaa, 0xaa, 0xaa, 0xaa, 0x55, 0x55, 0x55, 0x55]);
        }
    }

    /// The word-shifting read and the masked partial-word write agree with a plain byte
    /// array for every alignment and length from 0 to 72 bytes (seeded mix of both; the
    /// 4-byte aligned runs of 12 to 64 bytes take the half-word path).
    #[test]
    fn reads_and_writes_of_every_alignment_and_length_match_a_byte_model() {
        const SIZE: usize = 256;
        let dram = DeviceDram::new(SIZE as u64);
        let mut model = vec![0_u8; SIZE];
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x9e37_79b9_7f4a_7c15);
        let mut next = || rng.gen::<u64>();
        for round in 0..20_000 {
            let length = (next() % 73) as usize;
            let address = (next() as usize) % (SIZE - length + 1);
            if round % 2 == 0 {
                let data: Vec<u8> = (0..length).map(|_| next() as u8).collect();
                dram.write(DeviceAddress(address as u64), &data).unwrap();
                model[address..address + length].copy_from_slice(&data);
            } else {
                let mut back = vec![0x5a_u8; length];
                dram.read(DeviceAddress(address as u64), &mut back).unwrap();
                assert_eq!(
                    back,
                    model[address..address + length],
                    "at {address}+{length}"
                );
            }
        }
        let mut all = vec![0_u8; SIZE];
        dram.read(DeviceAddress(0), &mut all).unwrap();
        assert_eq!(all, model);
    }

    /// Every read path (short, half words, long) faults with the access's own address and
    /// length when it ends one byte past the end or wraps around the address space, and
    /// succeeds when it ends exactly at the end.
    #[test]
    fn reads_of_every_path_fault_exactly_past_the_end() {
        const SIZE: u64 = 256;
        let dram = DeviceDram::new(SIZE);
        for length in [4_usize, 8, 12, 32, 64, 68, 80] {
            let mut buffer = vec![0_u8; length];
            let last = SIZE - length as u64;
            assert_eq!(dram.read(DeviceAddress(last), &mut buffer), Ok(()));
            for address in [last + 4, u64::MAX - 3, !3] {
                assert_eq!(
                    dram.read(DeviceAddress(address), &mut buffer),
                    Err(MemoryFault {
                        address: DeviceAddress(address),
                        length: length as u64
                    }),
                    "{length} bytes at {address}"
                );
            }
        }
    }

    /// Runs of whole 4-byte words longer than 64 bytes from a 4-byte aligned address (the
    /// call that copies whole words after a first half word) and from an 8-byte aligned one
    /// agree with a byte model, and fault with their own address and length past the end.
    #[test]
    fn long_runs_of_whole_words_match_a_byte_model() {
        const SIZE: usize = 1024;
        let dram = DeviceDram::new(SIZE as u64);
        let model: Vec<u8> = (0..SIZE).map(|at| (at * 7 + at / 256) as u8).collect();
        dram.write(DeviceAddress(0), &model).unwrap();
        for words in [17_usize, 18, 31, 64, 100] {
            let length = 4 * words;
            for address in (0..=SIZE - length).step_by(4) {
                let mut back = vec![0x5a_u8; length];
                dram.read(DeviceAddress(address as u64), &mut back).unwrap();
                assert_eq!(
                    back,
                    model[address..address + length],
                    "at {address}+{length}"
                );
            }
            let mut back = vec![0_u8; length];
            for address in [SIZE - length + 4, SIZE - length + 8] {
                assert_eq!(
                    dram.read(DeviceAddress(address as u64), &mut back),
                    Err(MemoryFault {
                        address: DeviceAddress(address as u64),
                        length: length as u64
                    })
                );
            }
        }
    }

    /// The little-endian word at byte `at` of `bytes`.
    fn word_at(bytes: &[u8], at: usize) -> u32 {
        u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
    }

    /// The gather's per-element word checks and loads give what the per-element reads give
    /// (`gather_u32_by_reads`, the HAL's default): the same words inside memory, the same
    /// fault (the first failing element's address, 4 bytes) for an index past the end or a
    /// base whose elements wrap around the address space, and the same for a base that is
    /// not 4-byte aligned or an element in the last, partial word (which take the
    /// per-element path).
    #[test]
    fn a_gather_equals_the_per_element_reads() {
        const SIZE: u64 = 4100;
        let dram = DeviceDram::new(SIZE);
        let bytes: Vec<u8> = (0..SIZE).map(|at| (at * 13 + at / 251) as u8).collect();
        dram.write(DeviceAddress(0), &bytes).unwrap();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x6a7e_4e55);
        let mut faults = 0;
        for round in 0..4000 {
            let base = match round % 5 {
                0 => 0,
                1 => 4 * rng.gen_range(0..512),
                2 => rng.gen_range(0..2048),
                3 => u64::MAX - 4 * rng.gen_range(0..4),
                _ => SIZE - 4 * rng.gen_range(1..8),
            };
            let count = rng.gen_range(0..70);
            let indices: Vec<u32> = (0..count)
                .map(|_| match rng.gen_range(0..20) {
                    0 => rng.gen(),
                    1 => rng.gen_range(1020..1030),
                    _ => rng.gen_range(0..64),
                })
                .collect();
            let mut want = vec![0_u32; count];
            let expected = firmware::hal::gather_u32_by_reads(&dram, base, &indices, &mut want);
            let mut got = vec![0_u32; count];
            let outcome = dram.read_u32_gather(base, &indices, &mut got);
            assert_eq!(outcome, expected, "round {round}: {base:#x} {indices:?}");
            if expected.is_ok() {
                assert_eq!(got, want, "round {round}");
                for (index, word) in indices.iter().zip(&got) {
                    let address = (base + 4 * u64::from(*index)) as usize;
                    let mut one = [0_u8; 4];
                    one.copy_from_slice(&bytes[address..address + 4]);
                    assert_eq!(*word, u32::from_le_bytes(one));
                }
            } else {
                faults += 1;
            }
        }
        assert!(faults > 500, "only {faults} gathers faulted");
        // The fault is the first failing element's, not the largest index's.
        let mut out = [0_u32; 3];
        assert_eq!(
            dram.read_u32_gather(4096, &[2000, 1, 0], &mut out),
            Err(MemoryFault {
                address: DeviceAddress(4096 + 8000),
                length: 4
            })
        );
        assert_eq!(
            dram.read_u32_gather(4096, &[0, 2000, 1], &mut out),
            Err(MemoryFault {
                address: DeviceAddress(4096 + 8000),
                length: 4
            })
        );
        // An element whose address does not fit a `u64`.
        assert_eq!(
            dram.read_u32_gather(u64::MAX - 3, &[0, 1], &mut out),
            Err(MemoryFault {
                address: DeviceAddress(u64::MAX - 3),
                length: 4
            })
        );
        assert_eq!(
            dram.read_u32_gather(u64::MAX - 3, &[1], &mut out),
            Err(MemoryFault {
                address: DeviceAddress(u64::MAX - 3),
                length: 8
            })
        );
        // The low half of the last, partial word (4100 bytes): inside memory, read by the
        // fallback.
        let mut last = [0_u32; 2];
        dram.read_u32_gather(4092, &[1, 0], &mut last).unwrap();
        assert_eq!(last, [word_at(&bytes, 4096), word_at(&bytes, 4092)]);
        // Misaligned: the words straddle two 8-byte words.
        let mut got = [0_u32; 3];
        dram.read_u32_gather(6, &[0, 1, 2], &mut got).unwrap();
        let mut want = [0_u8; 12];
        dram.read(DeviceAddress(6), &mut want).unwrap();
        let want: Vec<u32> = want
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        assert_eq!(got.to_vec(), want);
        assert!(dram.unobserved_reads());
    }

    #[test]
    fn access_past_the_end_faults_without_touching_memory() {
        let dram = DeviceDram::new(16);
        assert!(dram.write(DeviceAddress(12), &[1; 8]).is_err());
        assert!(dram.write(DeviceAddress(u64::MAX), &[1]).is_err());
        let mut buffer = [9u8; 16];
        dram.read(DeviceAddress(0), &mut buffer).unwrap();
        assert_eq!(buffer, [0; 16]);
    }

    #[test]
    fn unaligned_writes_merge_with_their_neighbours() {
        let dram = DeviceDram::new(64);
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
        let dram = DeviceDram::new(13);
        assert_eq!(dram.size(), 13);
        assert!(dram.write(DeviceAddress(12), &[1]).is_ok());
        assert!(dram.write(DeviceAddress(12), &[1, 2]).is_err());
        let mut empty = [];
        assert!(dram.read(DeviceAddress(13), &mut empty).is_ok());
        assert!(dram.read(DeviceAddress(14), &mut empty).is_err());
    }
}

/// The device-memory channels an item's accesses map to, from a dry run of its code: a
/// read-only view of device memory that passes reads through, drops writes, and counts, per
/// channel, the DRAM bursts ([`firmware::kernels::DRAM_BURST_BYTES`]) the accesses touch.
///
/// The channel of an address is [`channel_of`] it: M²NDP's IPOLY hash of the address bits
/// above its `channel_interleave_size`. A burst
/// found in the CCM's cache of recently touched bursts ([`BurstCache`]) is not counted: a
/// µthread's 4-byte reads along an array, the lanes of one vector access, or a vector every
/// item reads (KNN's query, which the kernels' costs take from the scratchpad) are not DRAM
/// traffic, as the bytes of [`firmware::kernels::ItemCost`] do not count them.
pub struct ChannelProfile<'a, M> {
    inner: &'a M,
    channels: u64,
    interleave_shift: u32,
    state: std::cell::RefCell<ProfileState<'a>>,
}

struct ProfileState<'a> {
    counts: &'a mut [u64],
    cache: &'a mut BurstCache,
    total: u64,
}

impl<M> std::fmt::Debug for ChannelProfile<'_, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelProfile")
            .field("channels", &self.channels)
            .field("interleave_shift", &self.interleave_shift)
            .field("bursts", &self.state.borrow().total)
            .finish_non_exhaustive()
    }
}

/// The bursts the CCM touched recently, direct-mapped by burst address: 2,048 bursts of 64
/// bytes (128 KiB) per memory channel, the size of the L2 slice M²NDP gives each channel
/// (`src/ndp_ramulator.cc`: one `DataCache` per channel; `m2ndp.config`:
/// `l2d_config=S:64:128:16`, 64 sets x 16 ways x 128-byte lines). Deterministic: the items fill
/// it in the order they start.
#[derive(Debug, Clone)]
pub struct BurstCache {
    tags: Vec<u64>,
    /// `tags.len() - 1` when that is a power of two (the burst's index is then its low bits,
    /// as the remainder would be, without a division); 0 otherwise.
    mask: u64,
}

/// Bursts a [`BurstCache`] holds per memory channel.
pub const BURST_CACHE_ENTRIES: usize = 2048;

impl Default for BurstCache {
    /// One channel's slice.
    fn default() -> Self {
        BurstCache::for_channels(1)
    }
}

impl BurstCache {
    /// An empty cache of [`BURST_CACHE_ENTRIES`] per channel (`channels` is bounded by
    /// `DeviceConfig::validate`, at most 64).
    pub fn for_channels(channels: u32) -> BurstCache {
        let entries = BURST_CACHE_ENTRIES * channels.clamp(1, 64) as usize;
        BurstCache {
            tags: vec![u64::MAX; entries],
            mask: if entries.is_power_of_two() {
                entries as u64 - 1
            } else {
                0
            },
        }
    }

    /// Whether `burst` (an address divided by the burst size) was cached; caches it.
    fn touch(&mut self, burst: u64) -> bool {
        let index = if self.mask != 0 {
            (burst & self.mask) as usize
        } else {
            (burst % self.tags.len().max(1) as u64) as usize
        };
        match self.tags.get_mut(index) {
            Some(tag) if *tag == burst => true,
            Some(tag) => {
                *tag = burst;
                false
            }
            None => false,
        }
    }
}

impl<'a, M: DeviceMemory> ChannelProfile<'a, M> {
    /// A view of `inner` counting bursts into `counts` (one counter per channel, `channels`
    /// of them; the caller zeroes them), past `cache`.
    pub fn new(
        inner: &'a M,
        channels: u32,
        interleave_shift: u32,
        counts: &'a mut [u64],
        cache: &'a mut BurstCache,
    ) -> ChannelProfile<'a, M> {
        ChannelProfile {
            inner,
            channels: u64::from(channels.max(1)),
            interleave_shift,
            state: std::cell::RefCell::new(ProfileState {
                counts,
                cache,
                total: 0,
            }),
        }
    }

    /// Bursts counted so far, over every channel.
    pub fn bursts(&self) -> u64 {
        self.state.borrow().total
    }

    /// Counts the bursts of `[address, address + length)` that miss the cache.
    fn touch(&self, address: DeviceAddress, length: usize) {
        if length == 0 {
            return;
        }
        let burst_shift = firmware::kernels::DRAM_BURST_BYTES.ilog2();
        let first = address.0 >> burst_shift;
        let last = address.0.saturating_add(length as u64 - 1) >> burst_shift;
        let mut state = self.state.borrow_mut();
        for burst in first..=last {
            if state.cache.touch(burst) {
                continue;
            }
            let channel = channel_of(burst << burst_shift, self.channels, self.interleave_shift);
            if let Some(count) = state.counts.get_mut(channel as usize) {
                *count += 1;
                state.total += 1;
            }
        }
    }
}

impl<M: DeviceMemory> DeviceMemory for ChannelProfile<'_, M> {
    fn size(&self) -> u64 {
        self.inner.size()
    }

    #[inline]
    fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
        self.inner.read(address, buffer)?;
        self.touch(address, buffer.len());
        Ok(())
    }

    #[inline(always)]
    fn prefetch(&self, address: DeviceAddress) {
        // Passed through, not counted: a hint is not an access.
        self.inner.prefetch(address);
    }

    fn write(&self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
        // Dropped: the item's real run writes at its end. Bounds-checked as a write would be.
        let fault = MemoryFault {
            address,
            length: data.len() as u64,
        };
        let end = address.0.checked_add(data.len() as u64).ok_or(fault)?;
        if end > self.inner.size() {
            return Err(fault);
        }
        self.touch(address, data.len());
        Ok(())
    }
}

/// The device-memory channel of `address` among `channels`, interleaved every
/// `2^interleave_shift` bytes, as M²NDP maps it (`m2ndp.config`: `channel_indexing_policy=1`;
/// `src/m2ndp_config.cc`, `get_channel_index`): the channel bits right above the interleave,
/// XORed with IPOLY functions of the address from the highest channel bit up (`src/hashing.cc`,
/// `ipoly_hash_function`: Rau, "Pseudo-randomly interleaved memory", ISCA 1991, the
/// polynomials for 16, 32 and 64 channels), so that accesses a power-of-two stride apart spread
/// over the channels instead of falling on one. M²NDP defines the hash for 16, 32 and 64
/// channels only; other counts take the channel bits alone, `(address >> interleave_shift) mod
/// channels`.
pub fn channel_of(address: u64, channels: u64, interleave_shift: u32) -> u64 {
    // Per channel-index bit, the bits of the higher address part XORed into it (bit `i` of a
    // mask: bit `i` of `address >> highest channel bit`), from M²NDP's equations.
    const IPOLY_16: [u64; 4] = [
        0b1111_0101_1001,   // a11 a10 a9 a8 a6 a4 a3 a0
        0b1_0001_1110_1011, // a12 a8 a7 a6 a5 a3 a1 a0
        0b11_1101_0110,     // a9 a8 a7 a6 a4 a2 a1
        0b111_1010_1100,    // a10 a9 a8 a7 a5 a3 a2
    ];
    const IPOLY_32: [u64; 5] = [
        0b11_1110_0110_1001,  // a13 a12 a11 a10 a9 a6 a5 a3 a0
        0b111_1100_1101_0010, // a14 a13 a12 a11 a10 a7 a6 a4 a1
        0b100_0111_1100_1101, // a14 a10 a9 a8 a7 a6 a3 a2 a0
        0b1111_1001_1010,     // a11 a10 a9 a8 a7 a4 a3 a1
        0b1_1111_0011_0100,   // a12 a11 a10 a9 a8 a5 a4 a2
    ];
    const IPOLY_64: [u64; 6] = [
        0b111_1001_0100_0110_0001, // a18 a17 a16 a15 a12 a10 a6 a5 a0
        0b000_1011_1100_1010_0011, // a15 a13 a12 a11 a10 a7 a5 a1 a0
        0b001_0111_1001_0100_0110, // a16 a14 a13 a12 a11 a8 a6 a2 a1
        0b010_1111_0010_1000_1100, // a17 a15 a14 a13 a12 a9 a7 a3 a2
        0b101_1110_0101_0001_1000, // a18 a16 a15 a14 a13 a10 a8 a4 a3
        0b011_1100_1010_0011_0000, // a17 a16 a15 a14 a11 a9 a5 a4
    ];
    let masks: &[u64] = match channels {
        16 => &IPOLY_16,
        32 => &IPOLY_32,
        64 => &IPOLY_64,
        _ => return (address >> interleave_shift.min(63)) % channels.max(1),
    };
    let bits = channels.ilog2();
    let index = (address >> interleave_shift.min(63)) & (channels - 1);
    // M²NDP's `get_higher_bits`: the address shifted down to its highest channel bit.
    let higher = address >> (interleave_shift + bits - 1).min(63);
    masks
        .iter()
        .enumerate()
        .fold(index, |channel, (bit, &mask)| {
            channel ^ (u64::from((higher & mask).count_ones() & 1) << bit)
        })
}

#[cfg(test)]
mod profile_tests {
    use super::*;

    #[test]
    fn sixteen_channels_hash_a_4_kib_stride_over_every_channel_as_m2ndp_does() {
        // 256-byte interleave: consecutive chunks still take the 16 channels in turn (the
        // second half of each 4 KiB reversed by the highest channel bit, which M²NDP's hash
        // also reads); chunks 4 KiB apart, which the channel bits alone put on channel 0,
        // spread over all 16 (values from M²NDP's IPOLY(5) equations, worked by hand).
        let consecutive: Vec<u64> = (0..16).map(|k| channel_of(k * 256, 16, 8)).collect();
        assert_eq!(
            consecutive,
            [0, 1, 2, 3, 4, 5, 6, 7, 11, 10, 9, 8, 15, 14, 13, 12]
        );
        let strided: Vec<u64> = (0..16).map(|k| channel_of(k * 4096, 16, 8)).collect();
        assert_eq!(
            strided,
            [0, 6, 12, 10, 11, 13, 7, 1, 5, 3, 9, 15, 14, 8, 2, 4]
        );
        // Counts M²NDP has no hash for: the channel bits alone.
        assert_eq!(channel_of(5 * 256, 4, 8), 1);
        assert_eq!(channel_of(7 * 256 + 255, 3, 8), 1);
        // 32 and 64 channels stay within range and use every channel over a stride.
        for channels in [32_u64, 64] {
            let mut seen = vec![false; channels as usize];
            for k in 0..channels {
                let channel = channel_of(k * 256 * channels, channels, 8);
                seen[channel as usize] = true;
            }
            assert!(seen.iter().all(|&hit| hit), "{channels}: {seen:?}");
        }
    }

    #[test]
    fn a_profile_counts_each_burst_once_on_the_channel_its_address_maps_to() {
        let dram = DeviceDram::new(1 << 16);
        let mut counts = [0_u64; 4];
        let mut cache = BurstCache::default();
        let bursts = {
            let profile = ChannelProfile::new(&dram, 4, 8, &mut counts, &mut cache);
            // 1 KiB from 0: four 256-byte chunks, one per channel, 4 bursts each.
            let mut buffer = [0_u8; 1024];
            profile.read(DeviceAddress(0), &mut buffer).unwrap();
            // Read again word by word: cached, not counted.
            let mut word = [0_u8; 4];
            for offset in (0..1024).step_by(4) {
                profile.read(DeviceAddress(offset), &mut word).unwrap();
            }
            // One 4-byte gather at 0x8500: 256-byte chunk 0x85, channel 0x85 mod 4 = 1.
            profile.read(DeviceAddress(0x8500), &mut word).unwrap();
            profile.bursts()
        };
        assert_eq!(bursts, 17);
        assert_eq!(counts, [4, 5, 4, 4]);
    }

    /// A cache whose size is not a power of two (3 channels) maps a burst by the remainder:
    /// bursts one cache size apart evict each other, bursts a power of two apart do not.
    #[test]
    fn a_burst_cache_of_three_channels_maps_by_the_remainder() {
        let mut cache = BurstCache::for_channels(3);
        let size = 3 * BURST_CACHE_ENTRIES as u64;
        assert!(!cache.touch(5));
        assert!(cache.touch(5));
        assert!(!cache.touch(5 + 8192));
        assert!(cache.touch(5), "8192 bursts apart is another entry of 6144");
        assert!(!cache.touch(5 + size));
        assert!(!cache.touch(5), "evicted by the burst one cache size on");
    }

    /// A gather through the profile touches each element's burst in order, as 4-byte reads
    /// one by one do (the burst cache makes the order matter), and stops counting at the
    /// first failing element; the profile declares its reads observed.
    #[test]
    fn a_profile_counts_a_gather_as_the_per_element_reads() {
        let dram = DeviceDram::new(1 << 20);
        // Repeats, and elements whose bursts evict each other: 2,048 bursts (128 KiB, 32,768
        // words) apart in one channel's cache, 6,144 in three channels' (98,304 words); then
        // one past the memory's 262,144 words.
        let indices = [
            0_u32, 16, 0, 32_768, 0, 98_304, 16, 0, 300, 98_304, 0, 300_000, 16,
        ];
        for cache_channels in [1_u32, 3] {
            let gathered = {
                let mut counts = [0_u64; 4];
                let mut cache = BurstCache::for_channels(cache_channels);
                let profile = ChannelProfile::new(&dram, 4, 8, &mut counts, &mut cache);
                let mut out = vec![0_u32; indices.len()];
                let outcome = profile.read_u32_gather(0x40, &indices, &mut out);
                assert!(!profile.unobserved_reads());
                (outcome, profile.bursts(), counts)
            };
            let one_by_one = {
                let mut counts = [0_u64; 4];
                let mut cache = BurstCache::for_channels(cache_channels);
                let profile = ChannelProfile::new(&dram, 4, 8, &mut counts, &mut cache);
                let mut outcome = Ok(());
                for index in &indices {
                    let mut word = [0_u8; 4];
                    let address = DeviceAddress(0x40 + 4 * u64::from(*index));
                    if let Err(fault) = profile.read(address, &mut word) {
                        outcome = Err(fault);
                        break;
                    }
                }
                (outcome, profile.bursts(), counts)
            };
            assert_eq!(gathered, one_by_one, "{cache_channels}");
            assert_eq!(
                gathered.0,
                Err(MemoryFault {
                    address: DeviceAddress(0x40 + 1_200_000),
                    length: 4
                }),
                "index 300,000 is past the 1 MiB"
            );
            // Bursts 1, 2, 1, 2,049, 1, 6,145, 2, 1, 19, 6,145, 1: 9 misses in one channel's
            // cache (2,049 and 6,145 share burst 1's entry), 8 in three channels' (only 6,145
            // does).
            let misses = if cache_channels == 1 { 9 } else { 8 };
            assert_eq!(gathered.1, misses, "{gathered:?}");
        }
    }

    #[test]
    fn a_prefetch_is_not_an_access_the_profile_counts_or_caches() {
        let dram = DeviceDram::new(1 << 16);
        dram.write(DeviceAddress(0x200), &[9; 8]).unwrap();
        let mut counts = [0_u64; 2];
        let mut cache = BurstCache::default();
        let profile = ChannelProfile::new(&dram, 2, 8, &mut counts, &mut cache);
        // Inside, at the last byte, past the end and at the top of the address space: ignored.
        for address in [0x200, (1 << 16) - 1, 1 << 16, u64::MAX] {
            profile.prefetch(DeviceAddress(address));
            dram.prefetch(DeviceAddress(address));
        }
        assert_eq!(profile.bursts(), 0);
        // The prefetched burst is still a miss of the burst cache when really read.
        let mut back = [0_u8; 8];
        profile.read(DeviceAddress(0x200), &mut back).unwrap();
        assert_eq!(back, [9; 8]);
        assert_eq!(profile.bursts(), 1);
        assert_eq!(counts, [1, 0], "0x200: 256-byte chunk 2, channel 0");
    }

    #[test]
    fn a_profile_drops_writes_and_counts_them() {
        let dram = DeviceDram::new(1 << 16);
        let mut counts = [0_u64; 2];
        let mut cache = BurstCache::default();
        let profile = ChannelProfile::new(&dram, 2, 8, &mut counts, &mut cache);
        profile.write(DeviceAddress(0x100), &[7; 8]).unwrap();
        assert!(profile
            .write(DeviceAddress((1 << 16) - 4), &[7; 8])
            .is_err());
        assert_eq!(profile.bursts(), 1);
        assert_eq!(counts, [0, 1]);
        let mut back = [0_u8; 8];
        dram.read(DeviceAddress(0x100), &mut back).unwrap();
        assert_eq!(back, [0; 8]);
    }
}
