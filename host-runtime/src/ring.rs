//! The host side of the rings: reading metadata records, tracking the gap-aware heads,
//! reading payloads and publishing the heads.
//!
//! Everything here goes through a [`HostRegion`] (atomic words; never a `&[u8]` into memory
//! the device writes) laid out as a [`RingLayout`]: the region is the device's, so the host
//! can only load, read and publish its heads (host-driver's `dma` module docs). That is a
//! [`host_driver::dma::MappedRegion`], which translates every access through the region's
//! frames, or a [`host_driver::dma::ResolvedRegion`], the same region with its frames
//! translated once (the live benchmark's consumer). The ordering edges are DESIGN.md section 5's:
//!
//! | edge | who | what | where |
//! |------|-----|------|-------|
//! | D1 | device | payload data write | emulator DMA (`PhysicalMemory::write_words`) |
//! | D2 | device | payload tail store, Release | emulator DMA |
//! | D3 | device | metadata record write | emulator DMA |
//! | D4 | device | metadata tail store, Release | emulator DMA |
//! | D5 | device | reads a head only when its cached copy says full | firmware |
//! | H1 | host | metadata tail load, Acquire; nothing read beyond it | [`MetadataConsumer::poll`], [`MetadataConsumer::poll_batch`] |
//! | H2 | host | metadata head store, Release, after the reads of the records | [`publish_heads`] |
//! | H3 | host | payload head store, Release, after the reads of the slots | [`publish_heads`] |
//!
//! Release is cumulative: the device writes a payload (D1) before the record that names it
//! (D3) and publishes the record with D4, so the Acquire load of H1 makes the payload of every
//! record below the tail visible too. The host never needs to load the payload tail.
//!
//! Everything read from the rings is validated once, here: the metadata tail against the head
//! and capacity, each record's sequence (its absolute index), its length and its payload slot.
//! The launch tag is checked by the caller, which knows which launches are live.

use host_driver::dma::{DmaError, HostHead, HostRegion};
use host_driver::sync::Ordering;
use shared_abi::control::{DEVICE_STATUS_OFFSET, METADATA_TAIL_OFFSET};
use shared_abi::region::{RingLayout, METADATA_RECORD_SIZE, PAGE_SIZE};
use shared_abi::MetadataRecord;
use zerocopy::IntoBytes;

/// A ring protocol violation or a failed region access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    /// The device latched the ring BROKEN; `code` is its [`shared_abi::Status`] code.
    #[error("device latched the ring BROKEN with status code {code}")]
    DeviceBroken {
        /// The device status word.
        code: u32,
    },
    /// The metadata tail is behind the host's head (the tail went backwards).
    #[error("metadata tail {tail} is behind the head {head}")]
    TailBehindHead {
        /// The host's head.
        head: u64,
        /// The tail loaded.
        tail: u64,
    },
    /// The metadata tail is more than a ring's capacity ahead of the head (the device
    /// overwrote records the host had not read).
    #[error("metadata tail {tail} is more than {capacity} records ahead of the head {head}")]
    TailBeyondCapacity {
        /// The host's head.
        head: u64,
        /// The tail loaded.
        tail: u64,
        /// Records in the ring.
        capacity: u32,
    },
    /// A record below the tail whose sequence is not its index: stale or torn.
    #[error("metadata index {expected} holds a record with sequence {found}")]
    StaleRecord {
        /// The index read.
        expected: u64,
        /// The record's sequence.
        found: u64,
    },
    /// A payload length above the slot size.
    #[error("payload length {length} exceeds the slot size {slot_size}")]
    PayloadTooLong {
        /// The length.
        length: u32,
        /// Bytes per slot.
        slot_size: u32,
    },
    /// A payload slot number not below the payload capacity.
    #[error("payload slot {slot} is not below the capacity {capacity}")]
    PayloadSlotOutOfRange {
        /// The slot.
        slot: u32,
        /// Slots in the ring.
        capacity: u32,
    },
    /// A ring index consumed twice, or below the head.
    #[error("ring index {index} was already consumed")]
    AlreadyConsumed {
        /// The index.
        index: u64,
    },
    /// A ring index at or beyond head + capacity (the device cannot have produced it).
    #[error("ring index {index} is outside the window of {capacity} slots from head {head}")]
    OutsideWindow {
        /// The index.
        index: u64,
        /// The head.
        head: u64,
        /// Slots in the ring.
        capacity: u32,
    },
    /// An output buffer shorter than the payload.
    #[error("buffer of {buffer} bytes cannot hold a payload of {length} bytes")]
    BufferTooSmall {
        /// Bytes in the buffer.
        buffer: usize,
        /// Payload length.
        length: u32,
    },
    /// The region refused an access.
    #[error(transparent)]
    Region(#[from] DmaError),
}

/// Reads metadata records: the poller's side of the metadata ring.
///
/// Two ways to use it. [`MetadataConsumer::poll`] reads the new records at once and counts
/// them consumed: its [`MetadataConsumer::head`] is the metadata head to publish (H2). The AXLE
/// runtime instead takes new records as a *batch*, an index range
/// ([`MetadataConsumer::poll_batch`]), reads the batch's records later, a run at a time
/// ([`MetadataConsumer::read_records`]; one record: [`MetadataConsumer::read_record`]), and
/// releases the slots itself, gap-aware, once the
/// records have been read (`modes::axle::AxleRing`): there [`MetadataConsumer::head`] is only
/// the poll cursor, and the head it publishes is the released one.
#[derive(Clone, Debug)]
pub struct MetadataConsumer {
    layout: RingLayout,
    head: u64,
}

impl MetadataConsumer {
    /// A consumer of a freshly initialised ring (head 0).
    pub fn new(layout: RingLayout) -> MetadataConsumer {
        MetadataConsumer { layout, head: 0 }
    }

    /// Records taken so far (read by [`MetadataConsumer::poll`] or handed out in batches by
    /// [`MetadataConsumer::poll_batch`]). With `poll`, the metadata head to publish (H2).
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Checks the device status word, then loads the metadata tail with Acquire (H1) and
    /// validates it against the cursor and against `released`, the oldest index whose slot
    /// the host has not given back to the device (at most the cursor): the device writes at
    /// most a ring's capacity beyond it.
    fn load_tail<R: HostRegion + ?Sized>(
        &self,
        region: &R,
        released: u64,
    ) -> Result<u64, RingError> {
        let control = self.layout.control_offset();
        // The status is the low half of its 8-byte word (little-endian); the high half is
        // reserved.
        let status_word = region.load_u64(control + DEVICE_STATUS_OFFSET, Ordering::Acquire)?;
        let code = (status_word & u64::from(u32::MAX)) as u32;
        if code != 0 {
            return Err(RingError::DeviceBroken { code });
        }
        // H1: Acquire pairs with the device's Release tail store (D4), making every record
        // below `tail` (D3) and every payload those records name (D1) visible.
        let tail = region.load_u64(control + METADATA_TAIL_OFFSET, Ordering::Acquire)?;
        let head = self.head;
        if tail < head {
            return Err(RingError::TailBehindHead { head, tail });
        }
        let released = released.min(head);
        let capacity = self.layout.metadata_capacity();
        if tail - released > u64::from(capacity) {
            return Err(RingError::TailBeyondCapacity {
                head: released,
                tail,
                capacity,
            });
        }
        Ok(tail)
    }

    /// Takes up to `max` new records as one batch, the index range `[cursor, tail)` clipped
    /// to `max` records, without reading them, and advances the cursor past it. `released` is
    /// the metadata head the host gives back to the device (the records below it have been
    /// read and their slots freed): the tail may be at most a ring's capacity beyond it.
    ///
    /// Checks the device status word and the tail as [`MetadataConsumer::poll`] does; each
    /// record is validated when it is read ([`MetadataConsumer::read_record`]).
    pub fn poll_batch<R: HostRegion + ?Sized>(
        &mut self,
        region: &R,
        released: u64,
        max: u64,
    ) -> Result<std::ops::Range<u64>, RingError> {
        let tail = self.load_tail(region, released)?;
        let start = self.head;
        let end = start + (tail - start).min(max);
        self.head = end;
        if end > start {
            log::trace!("poller: metadata tail {tail}, batch {start}..{end}");
        }
        Ok(start..end)
    }

    /// Reads up to `max` new records into `out` and returns how many it read.
    ///
    /// Checks the device status word first, then loads the metadata tail with Acquire (H1)
    /// and reads only below it, as [`MetadataConsumer::read_records`] does. On an error the
    /// records read before the bad one are in `out` and counted in
    /// [`MetadataConsumer::head`]; the bad one is not.
    pub fn poll<R: HostRegion + ?Sized>(
        &mut self,
        region: &R,
        max: usize,
        out: &mut Vec<MetadataRecord>,
    ) -> Result<usize, RingError> {
        let tail = self.load_tail(region, self.head)?;
        let count = (tail - self.head).min(max as u64);
        let start = self.head;
        let before = out.len();
        let read = self.read_records(region, start..start + count, out);
        // Only the records read and validated are taken (at most `count`).
        self.head = start + (out.len() - before) as u64;
        read?;
        if count > 0 {
            log::trace!("poller: metadata tail {tail} head {}", self.head);
        }
        // count <= max, a usize.
        Ok(count as usize)
    }

    /// Reads and validates the records of `batch` (indexes that
    /// [`MetadataConsumer::poll_batch`] returned, whose slots the host has not yet given back)
    /// and appends them to `out`.
    ///
    /// The records are read a run at a time: every record of the batch up to the end of the
    /// ring or of a page in one region access (whole cache lines of records, one translation
    /// per page), not one access per record. Each is then validated as
    /// [`MetadataConsumer::read_record`] does. On an error the records before the bad one are
    /// in `out`; the bad one is not.
    pub fn read_records<R: HostRegion + ?Sized>(
        &self,
        region: &R,
        batch: std::ops::Range<u64>,
        out: &mut Vec<MetadataRecord>,
    ) -> Result<(), RingError> {
        let capacity = u64::from(self.layout.metadata_capacity());
        let mut index = batch.start;
        while index < batch.end {
            let slot = index % capacity;
            // Records never straddle a page (the ring starts on one, 4096 / 32 per page).
            let page_left = RECORDS_PER_PAGE - slot % RECORDS_PER_PAGE;
            // At most RECORDS_PER_PAGE, a usize.
            let run = (batch.end - index).min(capacity - slot).min(page_left) as usize;
            let first = out.len();
            out.resize(first + run, MetadataRecord::default());
            let records = out.get_mut(first..).unwrap_or_default();
            if let Err(error) = region.read_bytes(
                self.layout.metadata_slot_offset(index),
                records.as_mut_bytes(),
            ) {
                out.truncate(first);
                return Err(error.into());
            }
            let mut refused = None;
            for (taken, record) in records.iter().enumerate() {
                if let Err(error) = self.validate(record, index) {
                    refused = Some((taken, error));
                    break;
                }
                index += 1;
            }
            if let Some((taken, error)) = refused {
                out.truncate(first + taken);
                return Err(error);
            }
        }
        Ok(())
    }

    /// Reads and validates the record with index `index`: its sequence must equal its index,
    /// its length must fit a slot and its payload slot must exist.
    ///
    /// Call it only for an index of a batch that [`MetadataConsumer::poll_batch`] returned
    /// (its H1 load made the record visible) whose slot the host has not yet given back to
    /// the device (H2).
    pub fn read_record<R: HostRegion + ?Sized>(
        &self,
        region: &R,
        index: u64,
    ) -> Result<MetadataRecord, RingError> {
        let mut record = MetadataRecord::default();
        region.read_bytes(
            self.layout.metadata_slot_offset(index),
            record.as_mut_bytes(),
        )?;
        self.validate(&record, index)?;
        Ok(record)
    }

    /// Validates the record read at index `index`.
    #[inline]
    fn validate(&self, record: &MetadataRecord, index: u64) -> Result<(), RingError> {
        // The sequence first: the other fields of a stale record mean nothing.
        if record.sequence != index {
            return Err(RingError::StaleRecord {
                expected: index,
                found: record.sequence,
            });
        }
        if record.length > self.layout.slot_size() {
            return Err(RingError::PayloadTooLong {
                length: record.length,
                slot_size: self.layout.slot_size(),
            });
        }
        if record.payload_slot >= self.layout.payload_capacity() {
            return Err(RingError::PayloadSlotOutOfRange {
                slot: record.payload_slot,
                capacity: self.layout.payload_capacity(),
            });
        }
        Ok(())
    }
}

/// Metadata records per page: a run of records that one region access reads (the ring starts
/// on a page boundary, so no record straddles one).
const RECORDS_PER_PAGE: u64 = PAGE_SIZE / METADATA_RECORD_SIZE;

/// A gap-aware head: the slots of a ring are consumed in any order, and the head advances
/// only over the contiguous consumed prefix. The payload ring's head (the paper's gap-aware
/// payload consumption) and, in the AXLE runtime, the metadata ring's too (a record's slot is
/// released with the payload slot it names, see `modes::axle::AxleRing`).
///
/// Every index in the window `[head, head + capacity)` has its own slot (`index % capacity`),
/// so one bit per slot says whether that index is consumed.
///
/// # Invariants
///
/// - the bit of `head`'s slot is clear (the head is the oldest unconsumed index);
/// - `held` is the number of set bits: consumed indexes beyond the head.
#[derive(Clone, Debug)]
pub struct GapAwareHead {
    capacity: u32,
    head: u64,
    /// `head % capacity`, kept as the head advances: no division per consumed index.
    head_slot: u32,
    consumed: Vec<u64>,
    held: u64,
}

/// The gap-aware head of a payload ring (what the ring benches and the loom model call it).
pub type PayloadHeadTracker = GapAwareHead;

impl GapAwareHead {
    /// The head of `layout`'s payload ring, at 0.
    pub fn new(layout: &RingLayout) -> GapAwareHead {
        GapAwareHead::with_capacity(layout.payload_capacity())
    }

    /// The head of a ring of `capacity` slots, at 0.
    pub fn with_capacity(capacity: u32) -> GapAwareHead {
        GapAwareHead {
            capacity,
            head: 0,
            head_slot: 0,
            consumed: vec![0; (capacity as usize).div_ceil(64)],
            held: 0,
        }
    }

    /// The oldest unconsumed index (the value to publish with edge H3, or H2 for the
    /// metadata ring).
    #[inline]
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Consumed slots held behind the oldest unconsumed one (the gap, in slots).
    pub fn gap_slots(&self) -> u64 {
        self.held
    }

    /// The unique index in `[head, head + capacity)` whose slot is `slot` (taken modulo the
    /// capacity; a slot the poller validated is already below it).
    #[inline]
    pub fn slot_index(&self, slot: u32) -> u64 {
        let slot = if slot < self.capacity {
            slot
        } else {
            slot % self.capacity
        };
        // Both slots are below the capacity, so neither form overflows.
        let distance = if slot >= self.head_slot {
            slot - self.head_slot
        } else {
            slot + (self.capacity - self.head_slot)
        };
        self.head.wrapping_add(u64::from(distance))
    }

    /// The slot of the index `offset` places after the head (`offset` below the capacity).
    fn slot_after_head(&self, offset: u64) -> u64 {
        let slot = u64::from(self.head_slot) + offset;
        let capacity = u64::from(self.capacity);
        if slot >= capacity {
            slot - capacity
        } else {
            slot
        }
    }

    fn bit(slot: u64) -> (usize, u64) {
        ((slot / 64) as usize, 1u64 << (slot % 64))
    }

    fn is_consumed(&self, slot: u64) -> bool {
        let (word, mask) = GapAwareHead::bit(slot);
        self.consumed.get(word).is_some_and(|bits| bits & mask != 0)
    }

    fn set_consumed(&mut self, slot: u64, consumed: bool) {
        let (word, mask) = GapAwareHead::bit(slot);
        if let Some(bits) = self.consumed.get_mut(word) {
            if consumed {
                *bits |= mask;
            } else {
                *bits &= !mask;
            }
        }
    }

    /// Moves the head one index on (its slot's bit is clear).
    fn advance(&mut self) {
        self.head += 1;
        self.head_slot += 1;
        if self.head_slot >= self.capacity {
            self.head_slot = 0;
        }
    }

    /// Marks index `index` consumed (the host has read its slot). Returns whether the head
    /// advanced. Errors, changing nothing, on an index consumed before (or below the
    /// head) or at or beyond head + capacity.
    #[inline(always)]
    pub fn consume(&mut self, index: u64) -> Result<bool, RingError> {
        if index < self.head {
            return Err(RingError::AlreadyConsumed { index });
        }
        // The window check comes before the bit test: an index beyond the window shares its
        // slot's bit with an index inside it.
        let offset = index - self.head;
        if offset >= u64::from(self.capacity) {
            return Err(RingError::OutsideWindow {
                index,
                head: self.head,
                capacity: self.capacity,
            });
        }
        if offset == 0 && self.held == 0 {
            // In order with no gap (the common case): no bit is set, the head moves on.
            self.advance();
            return Ok(true);
        }
        if offset != 0 {
            // Beyond the head (out of order, the common case when tasks finish in any order):
            // the head's own slot stays unconsumed, so the head cannot move; only the bit.
            let (word, mask) = GapAwareHead::bit(self.slot_after_head(offset));
            if let Some(bits) = self.consumed.get_mut(word) {
                if *bits & mask != 0 {
                    return Err(RingError::AlreadyConsumed { index });
                }
                *bits |= mask;
            }
            self.held += 1;
            return Ok(false);
        }
        self.consume_beyond_gap(offset)
    }

    /// [`GapAwareHead::consume`] of the index `offset` (inside the window) places after the
    /// head, with a gap or out of order ([`GapAwareHead::consume`] calls it for the head's own
    /// index with a gap behind it; any offset gives the same answer).
    fn consume_beyond_gap(&mut self, offset: u64) -> Result<bool, RingError> {
        let slot = self.slot_after_head(offset);
        if self.is_consumed(slot) {
            return Err(RingError::AlreadyConsumed {
                index: self.head + offset,
            });
        }
        self.set_consumed(slot, true);
        self.held += 1;
        let mut advanced = false;
        // The head moves over the run of consumed slots from its own, a word of bits at a
        // time (no bit at or beyond the capacity is ever set, so a run ends there).
        loop {
            let slot = u64::from(self.head_slot);
            let Some(bits) = self.consumed.get_mut((slot / 64) as usize) else {
                break;
            };
            // The run is the ones from the head's bit up (at most 64 - shift of them).
            let shift = slot % 64;
            let run = (*bits >> shift).trailing_ones();
            if run == 0 {
                break;
            }
            let ones = if run == 64 { u64::MAX } else { (1 << run) - 1 };
            *bits &= !(ones << shift);
            // run <= the slots from the head's to the capacity (the bits beyond are clear).
            self.head += u64::from(run);
            self.head_slot += run;
            if self.head_slot >= self.capacity {
                self.head_slot = 0;
            }
            self.held -= u64::from(run);
            advanced = true;
        }
        Ok(advanced)
    }
}

/// Copies the first `length` bytes of payload slot `slot` into `out[..length]`.
///
/// Call it only for a slot named by a record that [`MetadataConsumer::poll`] returned (its H1
/// load made the payload visible) and before the payload head passes it (H3).
#[inline(always)]
pub fn read_payload<R: HostRegion + ?Sized>(
    region: &R,
    layout: &RingLayout,
    slot: u32,
    length: u32,
    out: &mut [u8],
) -> Result<(), RingError> {
    let offset = layout
        .payload_slot_offset(slot)
        .ok_or(RingError::PayloadSlotOutOfRange {
            slot,
            capacity: layout.payload_capacity(),
        })?;
    if length > layout.slot_size() {
        return Err(RingError::PayloadTooLong {
            length,
            slot_size: layout.slot_size(),
        });
    }
    let length_bytes = length as usize;
    let buffer = out.len();
    let destination = out
        .get_mut(..length_bytes)
        .ok_or(RingError::BufferTooSmall { buffer, length })?;
    let whole = length_bytes & !7;
    let (words, rest) = destination.split_at_mut(whole);
    region.read_bytes(offset, words)?;
    if !rest.is_empty() {
        // The slot is a whole number of words, so the last partial word is inside it.
        let word = region.load_u64(offset + whole as u64, Ordering::Relaxed)?;
        rest.copy_from_slice(&word.to_le_bytes()[..rest.len()]);
    }
    Ok(())
}

/// Publishes the host's heads into the host line of the control block: metadata head (H2),
/// then payload head (H3), both Release.
///
/// This is the host-memory mirror; the device's copy is sent by the runtime with a CXL.mem
/// store of a [`shared_abi::FlowControlMessage`]. Call it only after every read of the slots
/// below `payload_head` (H3 orders those reads before the device's reuse of the slots).
#[inline]
pub fn publish_heads<R: HostRegion + ?Sized>(
    region: &R,
    metadata_head: u64,
    payload_head: u64,
) -> Result<(), RingError> {
    // H2.
    region.store_head(HostHead::Metadata, metadata_head)?;
    // H3.
    region.store_head(HostHead::Payload, payload_head)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use host_driver::dma::{DmaRegion, MappedRegion};
    use host_driver::frames::FrameAllocator;
    use host_driver::phys::PhysicalMemory;
    use host_driver::shadow::program;
    use host_driver::sync::Arc;
    use proptest::prelude::*;
    use shared_abi::control::{METADATA_HEAD_OFFSET, PAYLOAD_HEAD_OFFSET, PAYLOAD_TAIL_OFFSET};
    use zerocopy::IntoBytes;

    fn ring(metadata: u32, payload: u32, slot_size: u32) -> (MappedRegion, RingLayout) {
        let layout = RingLayout::new(metadata, payload, slot_size).unwrap();
        let memory = Arc::new(PhysicalMemory::new(256 * 4096).unwrap());
        let mut allocator = FrameAllocator::new(memory.len());
        let region = DmaRegion::allocate(memory, &mut allocator, layout.region_length()).unwrap();
        (program(region, &layout, 1).unwrap().region, layout)
    }

    fn record(sequence: u64, slot: u32, length: u32) -> MetadataRecord {
        MetadataRecord {
            sequence,
            result_offset: sequence * 64,
            payload_slot: slot,
            length,
            tag: 7,
            flags: 0,
        }
    }

    /// The record [`produce`] writes for index `index`.
    fn record_at(index: u64, layout: &RingLayout, length: u32) -> MetadataRecord {
        record(
            index,
            (index % u64::from(layout.payload_capacity())) as u32,
            length,
        )
    }

    /// What the device does for one payload: D1, D2, D3, D4.
    fn produce(region: &MappedRegion, layout: &RingLayout, index: u64, data: &[u8]) {
        let region = region.device_view();
        let slot = (index % u64::from(layout.payload_capacity())) as u32;
        let offset = layout.payload_slot_offset(slot).unwrap();
        region.write_bytes(offset, data).unwrap();
        region
            .store_u64(PAYLOAD_TAIL_OFFSET, index + 1, Ordering::Release)
            .unwrap();
        let record = record(index, slot, data.len() as u32);
        region
            .write_bytes(layout.metadata_slot_offset(index), record.as_bytes())
            .unwrap();
        region
            .store_u64(METADATA_TAIL_OFFSET, index + 1, Ordering::Release)
            .unwrap();
    }

    #[test]
    fn poll_returns_published_records_in_order_and_advances_head() {
        let (region, layout) = ring(4, 4, 16);
        let mut consumer = MetadataConsumer::new(layout);
        let mut out = Vec::new();
        assert_eq!(consumer.poll(&region, 8, &mut out), Ok(0));
        produce(&region, &layout, 0, &[1; 16]);
        produce(&region, &layout, 1, &[2; 16]);
        assert_eq!(consumer.poll(&region, 8, &mut out), Ok(2));
        assert_eq!(out, vec![record(0, 0, 16), record(1, 1, 16)]);
        assert_eq!(consumer.head(), 2);
    }

    #[test]
    fn poll_reads_runs_across_page_boundaries_and_the_wrap_in_order() {
        // 200 records: the ring spans two pages (128 records each) and wraps at 200.
        let (region, layout) = ring(200, 200, 8);
        let mut consumer = MetadataConsumer::new(layout);
        let mut out = Vec::new();
        let mut produced = 0;
        // Batches of 150 and 170 records: runs split at index 128, at the wrap (200), at
        // 256 (slot 56 to 127 of the second lap), and so on.
        for batch in [150, 170, 199, 200, 7] {
            for _ in 0..batch {
                produce(&region, &layout, produced, &[produced as u8; 8]);
                produced += 1;
            }
            assert_eq!(consumer.poll(&region, 1000, &mut out), Ok(batch as usize));
            // The consumer gives the slots back as the runtime would.
            publish_heads(&region, consumer.head(), consumer.head()).unwrap();
        }
        let sequences: Vec<u64> = out.iter().map(|r| r.sequence).collect();
        assert_eq!(sequences, (0..produced).collect::<Vec<_>>());
        for record in &out {
            assert_eq!(record, &record_at(record.sequence, &layout, 8));
        }
        assert_eq!(consumer.head(), produced);
    }

    #[test]
    fn a_bad_record_in_the_middle_of_a_run_keeps_the_good_ones_before_it() {
        let (region, layout) = ring(8, 8, 8);
        for i in 0..5 {
            produce(&region, &layout, i, &[0; 8]);
        }
        // Record 3 carries another sequence (a torn or stale record).
        region
            .device_view()
            .write_bytes(layout.metadata_slot_offset(3), record(9, 3, 8).as_bytes())
            .unwrap();
        let mut consumer = MetadataConsumer::new(layout);
        let mut out = Vec::new();
        assert_eq!(
            consumer.poll(&region, 8, &mut out),
            Err(RingError::StaleRecord {
                expected: 3,
                found: 9
            })
        );
        let sequences: Vec<u64> = out.iter().map(|r| r.sequence).collect();
        assert_eq!(sequences, vec![0, 1, 2]);
        assert_eq!(consumer.head(), 3);
    }

    #[test]
    fn poll_reads_at_most_max_records() {
        let (region, layout) = ring(4, 4, 16);
        for i in 0..3 {
            produce(&region, &layout, i, &[0; 16]);
        }
        let mut consumer = MetadataConsumer::new(layout);
        let mut out = Vec::new();
        assert_eq!(consumer.poll(&region, 2, &mut out), Ok(2));
        assert_eq!(consumer.head(), 2);
        assert_eq!(consumer.poll(&region, 2, &mut out), Ok(1));
        assert_eq!(out.len(), 3);
        assert_eq!(out[2].sequence, 2);
    }

    #[test]
    fn records_wrap_around_the_metadata_ring() {
        let (region, layout) = ring(2, 8, 8);
        let mut consumer = MetadataConsumer::new(layout);
        let mut out = Vec::new();
        for i in 0..5 {
            produce(&region, &layout, i, &[i as u8; 8]);
            assert_eq!(consumer.poll(&region, 8, &mut out), Ok(1));
        }
        let sequences: Vec<u64> = out.iter().map(|r| r.sequence).collect();
        assert_eq!(sequences, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn unwritten_slot_below_the_tail_is_a_stale_record_not_record_zero() {
        let (region, layout) = ring(4, 4, 16);
        // A tail published without its record (what a Relaxed D4 could let the host see).
        region
            .device_view()
            .store_u64(METADATA_TAIL_OFFSET, 1, Ordering::Release)
            .unwrap();
        let mut consumer = MetadataConsumer::new(layout);
        let mut out = Vec::new();
        assert_eq!(
            consumer.poll(&region, 8, &mut out),
            Err(RingError::StaleRecord {
                expected: 0,
                found: host_driver::shadow::POISON_SEQUENCE
            })
        );
        assert!(out.is_empty());
        assert_eq!(consumer.head(), 0);
    }

    #[test]
    fn record_left_from_the_previous_lap_is_stale() {
        let (region, layout) = ring(2, 4, 8);
        let mut consumer = MetadataConsumer::new(layout);
        let mut out = Vec::new();
        produce(&region, &layout, 0, &[0; 8]);
        produce(&region, &layout, 1, &[0; 8]);
        assert_eq!(consumer.poll(&region, 8, &mut out), Ok(2));
        // Tail moves to 3 but index 2's slot still holds record 0.
        region
            .device_view()
            .store_u64(METADATA_TAIL_OFFSET, 3, Ordering::Release)
            .unwrap();
        assert_eq!(
            consumer.poll(&region, 8, &mut out),
            Err(RingError::StaleRecord {
                expected: 2,
                found: 0
            })
        );
    }

    #[test]
    fn tail_behind_head_is_an_error() {
        let (region, layout) = ring(4, 4, 8);
        let mut consumer = MetadataConsumer::new(layout);
        let mut out = Vec::new();
        produce(&region, &layout, 0, &[0; 8]);
        consumer.poll(&region, 8, &mut out).unwrap();
        region
            .device_view()
            .store_u64(METADATA_TAIL_OFFSET, 0, Ordering::Release)
            .unwrap();
        assert_eq!(
            consumer.poll(&region, 8, &mut out),
            Err(RingError::TailBehindHead { head: 1, tail: 0 })
        );
    }

    #[test]
    fn tail_more_than_capacity_ahead_is_an_error() {
        let (region, layout) = ring(4, 4, 8);
        region
            .device_view()
            .store_u64(METADATA_TAIL_OFFSET, 5, Ordering::Release)
            .unwrap();
        let mut consumer = MetadataConsumer::new(layout);
        assert_eq!(
            consumer.poll(&region, 8, &mut Vec::new()),
            Err(RingError::TailBeyondCapacity {
                head: 0,
                tail: 5,
                capacity: 4
            })
        );
    }

    #[test]
    fn device_status_is_checked_before_anything_is_read() {
        let (region, layout) = ring(4, 4, 8);
        produce(&region, &layout, 0, &[0; 8]);
        // Status 6 (RingBroken) in the low half, garbage in the reserved high half.
        region
            .device_view()
            .store_u64(
                DEVICE_STATUS_OFFSET,
                0xdead_0000_0000_0006,
                Ordering::Release,
            )
            .unwrap();
        let mut consumer = MetadataConsumer::new(layout);
        let mut out = Vec::new();
        assert_eq!(
            consumer.poll(&region, 8, &mut out),
            Err(RingError::DeviceBroken { code: 6 })
        );
        assert!(out.is_empty());
    }

    #[test]
    fn reserved_half_of_the_status_word_does_not_break_the_ring() {
        let (region, layout) = ring(4, 4, 8);
        region
            .device_view()
            .store_u64(
                DEVICE_STATUS_OFFSET,
                0xdead_0000_0000_0000,
                Ordering::Release,
            )
            .unwrap();
        let mut consumer = MetadataConsumer::new(layout);
        assert_eq!(consumer.poll(&region, 8, &mut Vec::new()), Ok(0));
    }

    #[test]
    fn record_with_oversized_length_or_missing_slot_is_refused() {
        let (region, layout) = ring(4, 4, 16);
        let bad_length = record(0, 0, 17);
        region
            .device_view()
            .write_bytes(layout.metadata_slot_offset(0), bad_length.as_bytes())
            .unwrap();
        region
            .device_view()
            .store_u64(METADATA_TAIL_OFFSET, 1, Ordering::Release)
            .unwrap();
        let mut consumer = MetadataConsumer::new(layout);
        assert_eq!(
            consumer.poll(&region, 8, &mut Vec::new()),
            Err(RingError::PayloadTooLong {
                length: 17,
                slot_size: 16
            })
        );
        let bad_slot = record(0, 4, 16);
        region
            .device_view()
            .write_bytes(layout.metadata_slot_offset(0), bad_slot.as_bytes())
            .unwrap();
        assert_eq!(
            consumer.poll(&region, 8, &mut Vec::new()),
            Err(RingError::PayloadSlotOutOfRange {
                slot: 4,
                capacity: 4
            })
        );
    }

    #[test]
    fn read_payload_copies_exactly_length_bytes_even_a_partial_word() {
        let (region, layout) = ring(4, 4, 16);
        let data: Vec<u8> = (1..=16).collect();
        produce(&region, &layout, 0, &data);
        let mut out = [0xee_u8; 16];
        read_payload(&region, &layout, 0, 12, &mut out).unwrap();
        assert_eq!(&out[..12], &data[..12]);
        assert_eq!(&out[12..], &[0xee; 4]);
    }

    #[test]
    fn read_payload_refuses_bad_slot_length_or_buffer() {
        let (region, layout) = ring(4, 4, 16);
        let mut out = [0u8; 16];
        assert_eq!(
            read_payload(&region, &layout, 4, 8, &mut out),
            Err(RingError::PayloadSlotOutOfRange {
                slot: 4,
                capacity: 4
            })
        );
        assert_eq!(
            read_payload(&region, &layout, 0, 24, &mut out),
            Err(RingError::PayloadTooLong {
                length: 24,
                slot_size: 16
            })
        );
        assert!(matches!(
            read_payload(&region, &layout, 0, 16, &mut out[..8]),
            Err(RingError::BufferTooSmall {
                buffer: 8,
                length: 16
            })
        ));
    }

    #[test]
    fn poll_batch_takes_the_new_range_and_each_record_reads_later() {
        let (region, layout) = ring(4, 4, 16);
        let mut consumer = MetadataConsumer::new(layout);
        assert_eq!(consumer.poll_batch(&region, 0, 8), Ok(0..0));
        for i in 0..3 {
            produce(&region, &layout, i, &[i as u8; 16]);
        }
        assert_eq!(consumer.poll_batch(&region, 0, 2), Ok(0..2));
        assert_eq!(consumer.poll_batch(&region, 0, 8), Ok(2..3));
        assert_eq!(consumer.head(), 3);
        assert_eq!(consumer.read_record(&region, 1), Ok(record(1, 1, 16)));
    }

    #[test]
    fn poll_batch_refuses_a_tail_beyond_capacity_from_the_released_head() {
        let (region, layout) = ring(4, 4, 8);
        let mut consumer = MetadataConsumer::new(layout);
        for i in 0..4 {
            produce(&region, &layout, i, &[0; 8]);
        }
        assert_eq!(consumer.poll_batch(&region, 0, 8), Ok(0..4));
        // The device wrote index 4 over record 0, which the host took but has not released.
        produce(&region, &layout, 4, &[0; 8]);
        assert_eq!(
            consumer.poll_batch(&region, 0, 8),
            Err(RingError::TailBeyondCapacity {
                head: 0,
                tail: 5,
                capacity: 4
            })
        );
        // Once record 0 is released, index 4 is legitimate.
        assert_eq!(consumer.poll_batch(&region, 1, 8), Ok(4..5));
    }

    #[test]
    fn publish_heads_lands_in_the_host_line() {
        let (region, _) = ring(4, 4, 8);
        publish_heads(&region, 3, 2).unwrap();
        assert_eq!(
            region
                .load_u64(METADATA_HEAD_OFFSET, Ordering::Acquire)
                .unwrap(),
            3
        );
        assert_eq!(
            region
                .load_u64(PAYLOAD_HEAD_OFFSET, Ordering::Acquire)
                .unwrap(),
            2
        );
    }

    fn tracker(capacity: u32) -> PayloadHeadTracker {
        PayloadHeadTracker::new(&RingLayout::new(1, capacity, 8).unwrap())
    }

    #[test]
    fn payload_head_stays_at_gap_until_slot_zero_consumed() {
        let mut tracker = tracker(4);
        assert_eq!(tracker.consume(1), Ok(false));
        assert_eq!(tracker.consume(2), Ok(false));
        assert_eq!(tracker.head(), 0);
        assert_eq!(tracker.gap_slots(), 2);
        assert_eq!(tracker.consume(0), Ok(true));
        assert_eq!(tracker.head(), 3);
        assert_eq!(tracker.gap_slots(), 0);
    }

    #[test]
    fn double_consume_and_index_below_head_are_refused() {
        let mut tracker = tracker(4);
        tracker.consume(2).unwrap();
        assert_eq!(
            tracker.consume(2),
            Err(RingError::AlreadyConsumed { index: 2 })
        );
        tracker.consume(0).unwrap();
        assert_eq!(
            tracker.consume(0),
            Err(RingError::AlreadyConsumed { index: 0 })
        );
        assert_eq!(tracker.head(), 1);
        assert_eq!(tracker.gap_slots(), 1);
    }

    #[test]
    fn index_beyond_the_window_is_refused_and_changes_nothing() {
        let mut tracker = tracker(4);
        assert_eq!(
            tracker.consume(4),
            Err(RingError::OutsideWindow {
                index: 4,
                head: 0,
                capacity: 4
            })
        );
        assert_eq!(tracker.gap_slots(), 0);
        // Slot 0's bit was not set by the refused index 4.
        assert_eq!(tracker.consume(0), Ok(true));
        assert_eq!(tracker.head(), 1);
    }

    #[test]
    fn index_beyond_the_window_whose_slot_is_consumed_is_outside_not_double() {
        // Found by the property test: index 3 shares slot 1 with the consumed index 1.
        let mut tracker = tracker(2);
        assert_eq!(tracker.consume(1), Ok(false));
        assert_eq!(
            tracker.consume(3),
            Err(RingError::OutsideWindow {
                index: 3,
                head: 0,
                capacity: 2
            })
        );
    }

    #[test]
    fn slot_index_maps_slots_into_the_window_after_wrapping() {
        let mut tracker = tracker(4);
        for i in 0..6 {
            tracker.consume(i).unwrap();
        }
        // head 6: window [6, 10) holds slots 2, 3, 0, 1.
        assert_eq!(tracker.slot_index(2), 6);
        assert_eq!(tracker.slot_index(3), 7);
        assert_eq!(tracker.slot_index(0), 8);
        assert_eq!(tracker.slot_index(1), 9);
    }

    /// The plain reference model: a set of consumed indexes; the head is the length of the
    /// contiguous consumed prefix.
    #[derive(Default)]
    struct Reference {
        consumed: std::collections::BTreeSet<u64>,
    }

    impl Reference {
        fn head(&self) -> u64 {
            (0..).find(|i| !self.consumed.contains(i)).unwrap()
        }
        fn gap(&self) -> u64 {
            let head = self.head();
            self.consumed.iter().filter(|&&i| i > head).count() as u64
        }
    }

    proptest! {
        #[test]
        fn tracker_matches_reference_under_out_of_order_consumption(
            // Small rings, and rings of more than one word of bits (a run across words).
            capacity in prop_oneof![1u32..12, 60u32..140],
            steps in proptest::collection::vec((0u32..160, 0u8..10), 1..400),
        ) {
            let mut tracker = tracker(capacity);
            let mut reference = Reference::default();
            for (pick, kind) in steps {
                let head = reference.head();
                let before = (tracker.head(), tracker.gap_slots());
                match kind {
                    // A double consume of a consumed index (or below the head) is refused.
                    0 if !reference.consumed.is_empty() => {
                        let index = *reference.consumed.iter().nth(pick as usize % reference.consumed.len()).unwrap();
                        prop_assert_eq!(tracker.consume(index), Err(RingError::AlreadyConsumed { index }));
                        prop_assert_eq!((tracker.head(), tracker.gap_slots()), before);
                    }
                    // An index beyond the window is refused.
                    1 => {
                        let index = head + u64::from(capacity) + u64::from(pick);
                        prop_assert_eq!(
                            tracker.consume(index),
                            Err(RingError::OutsideWindow { index, head, capacity })
                        );
                        prop_assert_eq!((tracker.head(), tracker.gap_slots()), before);
                    }
                    // Consume an arbitrary unconsumed index of the window, found by its slot.
                    _ => {
                        let slot = pick % capacity;
                        let index = tracker.slot_index(slot);
                        prop_assert!(index >= head && index < head + u64::from(capacity));
                        prop_assert_eq!(index % u64::from(capacity), u64::from(slot));
                        if reference.consumed.contains(&index) {
                            prop_assert_eq!(tracker.consume(index), Err(RingError::AlreadyConsumed { index }));
                        } else {
                            reference.consumed.insert(index);
                            let advanced = tracker.consume(index).unwrap();
                            prop_assert_eq!(advanced, reference.head() != head);
                        }
                    }
                }
                prop_assert_eq!(tracker.head(), reference.head());
                prop_assert_eq!(tracker.gap_slots(), reference.gap());
                // The head never passes an unconsumed index.
                prop_assert!((0..tracker.head()).all(|i| reference.consumed.contains(&i)));
                prop_assert!(!reference.consumed.contains(&tracker.head()));
            }
        }
    }
}
