//! The host side of one AXLE ring: the DMA region, the poller's consumer, the ready pool, the
//! gap-aware heads and batched flow control.
//!
//! # When a record's slot is released
//!
//! The poller only takes the new records as a batch (the index range `[head, tail)`) into the
//! ready pool; it reads none of them. The runtime copies the records of a batch out of the ring
//! when the scheduler takes it, to learn which tasks became ready (bookkeeping the model gives
//! no time), and in the model a record is read by the host task that consumes it, together
//! with its payload. So a record's metadata slot must not go back to the device before that
//! task has run: every record names exactly one payload slot (the firmware advances both tails
//! together), and the record's slot is released with that payload slot, when the last task
//! reading the payload finishes ([`AxleRing::consume`]). The metadata head is gap-aware like
//! the payload head: it advances over the contiguous released prefix, so the device never
//! overwrites a record the model has not read yet.
//!
//! - A record whose payload no task reads is read by no task either; both slots are released
//!   when the scheduler takes the record.
//! - A record whose payload several tasks read is read by each of them (each pays for it);
//!   both slots are released after the last one.
//! - A task that needs no result bytes reads no record.
//!
//! # Who owns the region
//!
//! [`AxleRing::new`] programs the region ([`host_driver::shadow::program`]): the control block
//! is initialised there, the region becomes the device's ([`MappedRegion`]), and the shadow
//! stores wait in the ring until the first launch issues them ([`AxleRing::take_setup_stores`]).
//! From then on the ring only loads, reads and publishes heads. The ring never gives the
//! region back: a run's ring lives until the run ends, and the frames go with the run.

use crate::flow::FlowControl;
use crate::ready_pool::{PoolFull, ReadyPool};
use crate::ring::{publish_heads, read_payload, GapAwareHead, MetadataConsumer, RingError};
use host_driver::dma::{DmaError, DmaRegion, MappedRegion};
use host_driver::shadow::{program, DeviceStore, ShadowError};
use host_driver::sync::{AtomicU64, Ordering};
use shared_abi::region::{RingLayout, METADATA_RECORD_SIZE};
use shared_abi::{device_map, DeviceAddress, FlowControlMessage, MetadataRecord, RingIndex};
use std::ops::Range;

/// Why the host side of an AXLE ring refused to go on: the ring protocol was broken (by the
/// device, or by records that contradict the host's bookkeeping), or the region could not be
/// read. Each variant keeps its source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AxleRingError {
    /// The AXLE mode was started without a DMA ring.
    #[error("AXLE mode without a DMA ring")]
    NoRing,
    /// The consumer refused the tail or a record (see [`RingError`]).
    #[error(transparent)]
    Protocol(#[from] RingError),
    /// The ready pool is full.
    #[error(transparent)]
    PoolFull(#[from] PoolFull),
    /// A load of the region's control block failed.
    #[error(transparent)]
    Region(#[from] DmaError),
    /// A record names a payload slot outside the ring.
    #[error("record {index} names payload slot {slot}")]
    SlotOutOfRange {
        /// The record's index.
        index: u64,
        /// The slot it names.
        slot: u32,
    },
    /// Two records name the same held payload slot.
    #[error("records {other} and {index} both name the held payload slot {slot}")]
    SlotHeldTwice {
        /// The record that holds the slot.
        other: u64,
        /// The record that names it again.
        index: u64,
        /// The slot.
        slot: u32,
    },
    /// A payload was consumed that no taken record names.
    #[error("payload index {index} consumed with no record naming it")]
    UnnamedPayload {
        /// The payload index.
        index: u64,
    },
    /// The payload ring's gap-aware head refused a release.
    #[error("payload: {0}")]
    PayloadHead(#[source] RingError),
    /// The metadata ring's gap-aware head refused a release.
    #[error("metadata: {0}")]
    MetadataHead(#[source] RingError),
    /// A task's input names a chunk that has not arrived.
    #[error("chunk at offset {offset} has not arrived")]
    ChunkMissing {
        /// The chunk's offset in the result.
        offset: u64,
    },
    /// A record carries the tag of another launch.
    #[error("record {sequence} carries tag {tag} during launch {launch}")]
    ForeignTag {
        /// The record's sequence.
        sequence: u64,
        /// Its tag.
        tag: u32,
        /// The running launch's tag.
        launch: u32,
    },
}

/// The rings as both sides left them: the device's words in the control block and the
/// host's own indexes. The end-of-run checks of a wall-clock stress run compare them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingState {
    /// The metadata tail the device published (control block, loaded with Acquire).
    pub metadata_tail: u64,
    /// The payload tail the device published.
    pub payload_tail: u64,
    /// The device status word (0: not BROKEN).
    pub device_status: u64,
    /// The metadata head the host mirrored into the control block at its last flow-control
    /// store (edge H2).
    pub published_metadata_head: u64,
    /// The payload head mirrored likewise (edge H3).
    pub published_payload_head: u64,
    /// The host's gap-aware metadata head: the oldest record whose slot it has not released.
    pub metadata_head: u64,
    /// Records the poller has taken into the ready pool (the poll cursor).
    pub polled: u64,
    /// The host's gap-aware payload head (the oldest unconsumed payload index).
    pub payload_head: u64,
    /// Payload slots consumed behind an unconsumed one (the gap, in slots).
    pub gap_slots: u64,
    /// Batches in the ready pool, not yet taken by the scheduler.
    pub pooled: usize,
    /// Records per metadata ring.
    pub metadata_capacity: u32,
    /// Slots per payload ring.
    pub payload_capacity: u32,
}

/// `AxleRing::record_of` of a payload slot the host does not hold. No record has this
/// index: a record's index is below the metadata tail, which the poller accepts only within a
/// ring's capacity of the head, and the ring would need 2^64 - 1 records to reach it.
const NO_RECORD: u64 = u64::MAX;

/// A payload moved out of the ring ([`AxleRing::spill_held`]): its index and its bytes.
pub type SpilledPayload = (u64, Vec<u8>);

/// One ring pair in a pinned DMA region, handed to the device.
#[derive(Debug)]
pub struct AxleRing {
    region: MappedRegion,
    /// The shadow stores that tell the device the region, until the first launch takes them.
    setup: Option<Vec<DeviceStore>>,
    layout: RingLayout,
    consumer: MetadataConsumer,
    records: GapAwareHead,
    payloads: GapAwareHead,
    /// For each payload slot held by the host, the metadata index of the record naming it
    /// ([`NO_RECORD`] for a slot the host does not hold).
    record_of: Vec<u64>,
    pool: ReadyPool,
    flow: FlowControl,
    max_gap_slots: u64,
}

impl AxleRing {
    /// A ring over `region`, laid out as `layout` (the region must be exactly
    /// `layout.region_length()` bytes): initialises the control block and hands the region to
    /// the device; the shadow stores wait for [`AxleRing::take_setup_stores`].
    pub fn new(region: DmaRegion, layout: RingLayout, epoch: u64) -> Result<AxleRing, ShadowError> {
        let programmed = program(region, &layout, epoch)?;
        Ok(AxleRing {
            consumer: MetadataConsumer::new(layout),
            // The capacities are bounded before the region exists (the region is allocated, and
            // a run's slot count is checked against the scatter-gather table first).
            records: GapAwareHead::with_capacity(layout.metadata_capacity()),
            payloads: GapAwareHead::new(&layout),
            record_of: vec![NO_RECORD; layout.payload_capacity() as usize],
            pool: ReadyPool::new(layout.metadata_capacity() as usize),
            region: programmed.region,
            setup: Some(programmed.stores),
            layout,
            flow: FlowControl::default(),
            max_gap_slots: 0,
        })
    }

    /// Bytes per payload slot.
    pub fn slot_size(&self) -> u32 {
        self.layout.slot_size()
    }

    /// The region, the device's (for tests and tools).
    pub fn region(&self) -> &MappedRegion {
        &self.region
    }

    /// The CXL.mem stores that program the shadow descriptors (header cleared, entries, header
    /// last), the first time; `None` afterwards (the ring is programmed once).
    pub fn take_setup_stores(&mut self) -> Option<Vec<DeviceStore>> {
        self.setup.take()
    }

    /// Polls the metadata tail (H1) and pushes the new records below `limit` (all of them
    /// when `None`), the index range `[head, tail)`, into the ready pool as one batch, without
    /// reading them. Returns the batch (empty when nothing was new).
    pub fn poll(&mut self, limit: Option<u64>) -> Result<Range<u64>, AxleRingError> {
        let cursor = self.consumer.head();
        let mut max = u64::from(self.layout.metadata_capacity());
        if let Some(limit) = limit {
            max = max.min(limit.saturating_sub(cursor));
            if max == 0 {
                return Ok(cursor..cursor);
            }
        }
        let batch = self
            .consumer
            .poll_batch(&self.region, self.records.head(), max)?;
        if !batch.is_empty() {
            self.pool.push(batch.clone())?;
        }
        Ok(batch)
    }

    /// The ready pool.
    pub fn pool(&self) -> &ReadyPool {
        &self.pool
    }

    /// Reads record `index` of a batch taken from the pool (validated: sequence, length,
    /// slot) and returns it with the payload index it names. The record's slot stays held
    /// until that payload is consumed ([`AxleRing::consume`]).
    pub fn take_record(&mut self, index: u64) -> Result<(MetadataRecord, u64), AxleRingError> {
        let record = self.consumer.read_record(&self.region, index)?;
        let payload = self.claim(index, &record)?;
        Ok((record, payload))
    }

    /// Reads the records of `batch`, a batch taken from the pool, into `out` (appended), a
    /// run of records per region access, each validated as [`AxleRing::take_record`]
    /// validates it (sequence, length, slot). On an error the records before the bad one are
    /// in `out`. Each must then be claimed, in order ([`AxleRing::claim`]): reading claims
    /// nothing.
    pub fn read_batch(
        &self,
        batch: Range<u64>,
        out: &mut Vec<MetadataRecord>,
    ) -> Result<(), AxleRingError> {
        Ok(self.consumer.read_records(&self.region, batch, out)?)
    }

    /// Takes record `index` of a batch, read and validated ([`AxleRing::read_batch`]): its
    /// payload slot is held until that payload is consumed ([`AxleRing::consume`]). Returns
    /// the payload index the record names.
    pub fn claim(&mut self, index: u64, record: &MetadataRecord) -> Result<u64, AxleRingError> {
        let slot = record.payload_slot;
        let owner = self
            .record_of
            .get_mut(slot as usize)
            .ok_or(AxleRingError::SlotOutOfRange { index, slot })?;
        if *owner != NO_RECORD {
            return Err(AxleRingError::SlotHeldTwice {
                other: *owner,
                index,
                slot,
            });
        }
        *owner = index;
        Ok(self.payloads.slot_index(slot))
    }

    /// Hints the CPU to fetch what [`AxleRing::claim`] of `record` will touch (its slot's entry
    /// of the table of held slots). Changes nothing.
    #[inline]
    pub fn prefetch_claim(&self, record: &MetadataRecord) {
        if let Some(owner) = self.record_of.get(record.payload_slot as usize) {
            cosim_link::sync::prefetch(owner);
        }
    }

    /// Releases the records of batches no launch will take (arrived with no launch).
    pub fn drain_stale(&mut self) -> Result<(), AxleRingError> {
        while let Some(batch) = self.pool.pop() {
            for index in batch {
                let (_, payload) = self.take_record(index)?;
                self.consume(payload)?;
            }
        }
        Ok(())
    }

    /// The payload `index` has been read by every task that needs it, and so has the record
    /// naming it: both slots are released (gap-aware heads).
    #[inline]
    pub fn consume(&mut self, index: u64) -> Result<(), AxleRingError> {
        let slot = RingIndex(index).slot(self.layout.payload_capacity());
        let record = self
            .record_of
            .get(slot as usize)
            .copied()
            .filter(|&record| record != NO_RECORD)
            .ok_or(AxleRingError::UnnamedPayload { index })?;
        self.payloads
            .consume(index)
            .map_err(AxleRingError::PayloadHead)?;
        if let Some(owner) = self.record_of.get_mut(slot as usize) {
            *owner = NO_RECORD;
        }
        self.records
            .consume(record)
            .map_err(AxleRingError::MetadataHead)?;
        self.max_gap_slots = self.max_gap_slots.max(self.payloads.gap_slots());
        Ok(())
    }

    /// Moves every payload the host holds (taken, not yet consumed) out of the ring: each
    /// record is read again and its payload copied out, oldest first, and both slots are
    /// released as if consumed ([`AxleRing::consume`]), so the heads move past them. Returns
    /// the copies (payload index and bytes) and the bytes of records and payloads read. The
    /// runtime's overflow buffer (`crate::overflow`) keeps the copies; the tasks that need
    /// them read them there. Call it only with no batch in the ready pool (every polled
    /// record taken).
    pub fn spill_held(&mut self) -> Result<(Vec<SpilledPayload>, u64), AxleRingError> {
        let capacity = self.payload_capacity();
        let head = self.payloads.head();
        let mut spilled = Vec::new();
        let mut read = 0;
        for index in head..head.saturating_add(capacity) {
            let slot = RingIndex(index).slot(self.layout.payload_capacity());
            let Some(record) = self
                .record_of
                .get(slot as usize)
                .copied()
                .filter(|&record| record != NO_RECORD)
            else {
                continue;
            };
            let record = self.consumer.read_record(&self.region, record)?;
            let mut bytes = vec![0u8; record.length as usize];
            read_payload(&self.region, &self.layout, slot, record.length, &mut bytes)?;
            read += METADATA_RECORD_SIZE + u64::from(record.length);
            self.consume(index)?;
            spilled.push((index, bytes));
        }
        Ok((spilled, read))
    }

    /// Copies the bytes `needs` out of the payload slots holding `chunks` (offset, length,
    /// payload index), or out of `spilled`, the overflow buffer's copies of payloads moved
    /// out of the ring ([`AxleRing::spill_held`]). Returns the bytes and how many bytes of
    /// slots (or copies) were read. Bytes no chunk covers read as zero.
    pub fn gather(
        &self,
        chunks: impl IntoIterator<Item = (u64, u64, Option<u64>)>,
        needs: &Range<u64>,
        spilled: Option<&crate::overflow::Overflow>,
    ) -> Result<(Vec<u8>, u64), AxleRingError> {
        let mut bytes = Vec::new();
        let read = self.gather_into(chunks, needs, spilled, &mut bytes)?;
        Ok((bytes, read))
    }

    /// [`AxleRing::gather`] into `bytes`, whose old contents are replaced (its storage is
    /// reused: a task's bytes are not allocated and zeroed for each task). Returns how many
    /// bytes of slots (or copies) were read.
    pub fn gather_into(
        &self,
        chunks: impl IntoIterator<Item = (u64, u64, Option<u64>)>,
        needs: &Range<u64>,
        spilled: Option<&crate::overflow::Overflow>,
        bytes: &mut Vec<u8>,
    ) -> Result<u64, AxleRingError> {
        // A task's input range, inside the launch's result, which lives in (bounded) device
        // memory; a slot is at most `shared_abi::region::MAX_SLOT_SIZE` bytes.
        bytes.resize((needs.end - needs.start) as usize, 0);
        // The bytes of the range below `covered` have been written by a chunk or zeroed, and
        // none at or beyond it has: a chunk that starts beyond it leaves a hole no chunk so
        // far covers, zeroed then (a later chunk may still overwrite it), and what is left
        // beyond it after the last chunk is zeroed at the end. So every byte the chunks do
        // not cover reads as zero whatever the buffer held, in any order of the chunks, and
        // when they tile the range (a task's chunks) nothing is zeroed at all.
        let mut covered = needs.start;
        // The overflow buffer is looked up only while it holds copies.
        let spilled = spilled.filter(|overflow| overflow.held() > 0);
        let capacity = self.layout.payload_capacity();
        let slot_size = u64::from(self.layout.slot_size());
        // Slot 0's offset (`None` only for a ring of no slot, where every chunk fails).
        let first_slot = self.layout.payload_slot_offset(0);
        // For a chunk only partly needed or spilled (few): made when the first one comes.
        let mut slot_bytes = Vec::new();
        // Host memory's words resolved once for the task's chunks.
        let words = self.region.words_view();
        let mut read = 0;
        for (offset, length, index) in chunks {
            let index = index.ok_or(AxleRingError::ChunkMissing { offset })?;
            let end = offset + length;
            let whole = needs.start <= offset && end <= needs.end;
            match first_slot {
                // A whole chunk of the range in whole words of one slot, with nothing spilled
                // (most chunks of most tasks): read straight into its place, where
                // `read_payload` would read (the slot is below the capacity, so its offset
                // lies in the region).
                Some(first_slot)
                    if whole && spilled.is_none() && length <= slot_size && length % 8 == 0 =>
                {
                    if offset > covered {
                        zero(bytes, covered - needs.start..offset - needs.start);
                    }
                    covered = covered.max(end);
                    let slot = RingIndex(index).slot(capacity);
                    let to = (offset - needs.start) as usize..(end - needs.start) as usize;
                    let into = bytes
                        .get_mut(to)
                        .ok_or(AxleRingError::ChunkMissing { offset })?;
                    let at = first_slot + u64::from(slot) * slot_size;
                    match words.words(at, length) {
                        // What the region's read reads (Relaxed loads, lowest address first),
                        // without its checks and translation once more; a slot of 32 bytes
                        // (the commonest) in four loads, no loop.
                        Some(words) => match (
                            <&[AtomicU64; 4]>::try_from(words),
                            <&mut [u8; 32]>::try_from(&mut *into),
                        ) {
                            // The same copy at a length the compiler knows.
                            (Ok(words), Ok(into)) => copy_words(words, into),
                            _ => copy_words(words, into),
                        },
                        None => self
                            .region
                            .read_bytes(at, into)
                            .map_err(|error| AxleRingError::Protocol(error.into()))?,
                    }
                }
                _ => {
                    let piece = Piece {
                        offset,
                        length,
                        index,
                    };
                    self.gather_piece(piece, needs, spilled, bytes, &mut covered, &mut slot_bytes)?;
                }
            }
            read += length;
        }
        if covered < needs.end {
            zero(bytes, covered - needs.start..needs.end - needs.start);
        }
        Ok(read)
    }

    /// [`AxleRing::gather_into`]'s way for a chunk it does not read straight into place: one
    /// only partly needed, spilled, or not whole words.
    #[inline(never)]
    fn gather_piece(
        &self,
        piece: Piece,
        needs: &Range<u64>,
        spilled: Option<&crate::overflow::Overflow>,
        bytes: &mut [u8],
        covered: &mut u64,
        slot_bytes: &mut Vec<u8>,
    ) -> Result<(), AxleRingError> {
        let Piece {
            offset,
            length,
            index,
        } = piece;
        let copy = spilled.and_then(|overflow| overflow.get(index));
        let slot = RingIndex(index).slot(self.layout.payload_capacity());
        let start = needs.start.max(offset);
        let end = needs.end.min(offset + length);
        if start < end {
            if start > *covered {
                zero(bytes, *covered - needs.start..start - needs.start);
            }
            *covered = (*covered).max(end);
        }
        if copy.is_none() && needs.start <= offset && offset + length <= needs.end {
            // A whole chunk in the ring: straight into its place.
            let to = (offset - needs.start) as usize..(offset - needs.start + length) as usize;
            let into = bytes
                .get_mut(to)
                .ok_or(AxleRingError::ChunkMissing { offset })?;
            read_payload(&self.region, &self.layout, slot, length as u32, into)?;
            return Ok(());
        }
        if slot_bytes.is_empty() {
            *slot_bytes = vec![0u8; self.layout.slot_size() as usize];
        }
        match copy {
            Some(copy) => {
                let from = slot_bytes
                    .get_mut(..copy.len())
                    .ok_or(AxleRingError::ChunkMissing { offset })?;
                from.copy_from_slice(copy);
            }
            None => read_payload(&self.region, &self.layout, slot, length as u32, slot_bytes)?,
        }
        if start < end {
            let from = (start - offset) as usize..(end - offset) as usize;
            let to = (start - needs.start) as usize..(end - needs.start) as usize;
            bytes[to].copy_from_slice(&slot_bytes[from]);
        }
        Ok(())
    }

    /// The flow-control store to send, if the heads moved: H2/H3 are published to the host
    /// line too (the mirror) after the reads they cover.
    pub fn flow_control_due(&self) -> Option<(DeviceAddress, FlowControlMessage)> {
        self.flow
            .due(self.records.head(), self.payloads.head())
            .map(|message| (device_map::FLOW_CONTROL, message))
    }

    /// The flow-control store was sent.
    pub fn flow_control_sent(&mut self, message: FlowControlMessage) {
        if let Err(error) = publish_heads(&self.region, message.metadata_head, message.payload_head)
        {
            log::warn!("flow: mirroring heads failed: {error}");
        }
        self.flow.sent(message);
    }

    /// Flow-control stores sent.
    pub fn flow_control_stores(&self) -> u64 {
        self.flow.stores()
    }

    /// The largest gap seen, in bytes.
    pub fn max_gap_bytes(&self) -> u64 {
        self.max_gap_slots * u64::from(self.layout.slot_size())
    }

    /// The rings as both sides left them (control-block words and the host's indexes).
    pub fn state(&self) -> Result<RingState, AxleRingError> {
        use shared_abi::control::{
            DEVICE_STATUS_OFFSET, METADATA_HEAD_OFFSET, METADATA_TAIL_OFFSET, PAYLOAD_HEAD_OFFSET,
            PAYLOAD_TAIL_OFFSET,
        };
        let control = self.layout.control_offset();
        let load = |offset: u64| {
            self.region
                .load_u64(control + offset, Ordering::Acquire)
                .map_err(AxleRingError::Region)
        };
        Ok(RingState {
            metadata_tail: load(METADATA_TAIL_OFFSET)?,
            payload_tail: load(PAYLOAD_TAIL_OFFSET)?,
            device_status: load(DEVICE_STATUS_OFFSET)?,
            published_metadata_head: load(METADATA_HEAD_OFFSET)?,
            published_payload_head: load(PAYLOAD_HEAD_OFFSET)?,
            metadata_head: self.records.head(),
            polled: self.consumer.head(),
            payload_head: self.payloads.head(),
            gap_slots: self.payloads.gap_slots(),
            pooled: self.pool.len(),
            metadata_capacity: self.layout.metadata_capacity(),
            payload_capacity: self.layout.payload_capacity(),
        })
    }

    /// Slots in the payload ring.
    pub fn payload_capacity(&self) -> u64 {
        u64::from(self.layout.payload_capacity())
    }

    /// Payload slots between the payload head and the newest record (held by the host).
    pub fn held_slots(&self) -> u64 {
        self.consumer.head().saturating_sub(self.payloads.head())
    }

    /// Payload slots the device still counts as used, as far as the host has seen: from the
    /// payload head last sent to the device to the newest record polled (held slots, and
    /// freed ones whose head has not been sent yet).
    pub fn unreturned_slots(&self) -> u64 {
        self.consumer
            .head()
            .saturating_sub(self.flow.sent_payload_head())
    }
}

/// A chunk for [`AxleRing::gather_into`]: its offset and length in the result, and the
/// payload index holding it.
#[derive(Clone, Copy)]
struct Piece {
    offset: u64,
    length: u64,
    index: u64,
}

/// Zeroes `bytes[range]` (a range of a task's input; nothing outside it).
fn zero(bytes: &mut [u8], range: Range<u64>) {
    if let Some(hole) = bytes.get_mut(range.start as usize..range.end as usize) {
        hole.fill(0);
    }
}

/// Copies `words` into `into`, 8 bytes from one Relaxed load of each word, lowest address
/// first (what the region's read reads there). Inlined, so that a copy of a known length (a
/// 32-byte slot) is four loads and no loop.
#[inline(always)]
fn copy_words(words: &[AtomicU64], into: &mut [u8]) {
    for (word, bytes) in words.iter().zip(into.chunks_exact_mut(8)) {
        bytes.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use host_driver::frames::FrameAllocator;
    use host_driver::phys::PhysicalMemory;
    use host_driver::sync::Arc;
    use shared_abi::control::METADATA_TAIL_OFFSET;
    use zerocopy::IntoBytes;

    fn axle_ring(capacity: u32) -> AxleRing {
        let layout = RingLayout::new(capacity, capacity, 8).unwrap();
        let memory = Arc::new(PhysicalMemory::new(64 * 4096).unwrap());
        let mut allocator = FrameAllocator::new(memory.len());
        let region = DmaRegion::allocate(memory, &mut allocator, layout.region_length()).unwrap();
        let mut ring = AxleRing::new(region, layout, 1).unwrap();
        assert!(ring.take_setup_stores().is_some());
        assert_eq!(ring.take_setup_stores(), None);
        ring
    }

    /// The device streams record `index` naming payload slot `slot`.
    fn produce(ring: &AxleRing, index: u64, slot: u32) {
        let device = ring.region.device_view();
        let record = MetadataRecord {
            sequence: index,
            result_offset: index * 8,
            payload_slot: slot,
            length: 8,
            tag: 1,
            flags: 0,
        };
        device
            .write_bytes(ring.layout.metadata_slot_offset(index), record.as_bytes())
            .unwrap();
        device
            .store_u64(
                ring.layout.control_offset() + METADATA_TAIL_OFFSET,
                index + 1,
                Ordering::Release,
            )
            .unwrap();
    }

    fn heads(ring: &AxleRing) -> (u64, u64) {
        ring.flow_control_due()
            .map_or((0, 0), |(_, m)| (m.metadata_head, m.payload_head))
    }

    #[test]
    fn a_record_slot_is_released_with_its_payload_not_when_polled() {
        let mut ring = axle_ring(4);
        for index in 0..3 {
            produce(&ring, index, index as u32);
        }
        assert_eq!(ring.poll(None), Ok(0..3));
        assert_eq!(ring.pool().pop(), Some(0..3));
        let payloads: Vec<u64> = (0..3).map(|i| ring.take_record(i).unwrap().1).collect();
        assert_eq!(payloads, vec![0, 1, 2]);
        // Taken and copied, but no task has read them: nothing goes back.
        assert_eq!(ring.flow_control_due(), None);
        // Out of order: the tasks reading payloads 1 and 2 finish first.
        ring.consume(1).unwrap();
        ring.consume(2).unwrap();
        assert_eq!(ring.flow_control_due(), None);
        ring.consume(0).unwrap();
        assert_eq!(heads(&ring), (3, 3));
        let state = ring.state().unwrap();
        assert_eq!(
            (state.metadata_head, state.polled, state.gap_slots),
            (3, 3, 0)
        );
    }

    #[test]
    fn gather_places_each_chunk_whatever_the_order_and_zeroes_what_no_chunk_covers() {
        let ring = axle_ring(4);
        let device = ring.region.device_view();
        // Payload i holds the result bytes 8 * i .. 8 * i + 8, byte value = its result offset.
        for index in 0..4u64 {
            let data: Vec<u8> = (0..8).map(|byte| (index * 8 + byte) as u8).collect();
            let offset = ring.layout.payload_slot_offset(index as u32).unwrap();
            device.write_bytes(offset, &data).unwrap();
        }
        let chunk = |index: u64| (index * 8, 8, Some(index));
        let result = |range: Range<u64>| -> Vec<u8> { range.map(|byte| byte as u8).collect() };
        // In order, whole chunks.
        let (bytes, read) = ring.gather([chunk(1), chunk(2)], &(8..24), None).unwrap();
        assert_eq!((bytes, read), (result(8..24), 16));
        // In order, the first and last only partly needed.
        let (bytes, read) = ring
            .gather([chunk(0), chunk(1), chunk(2)], &(4..20), None)
            .unwrap();
        assert_eq!((bytes, read), (result(4..20), 24));
        // Out of order.
        let (bytes, _) = ring
            .gather([chunk(3), chunk(0), chunk(2), chunk(1)], &(0..32), None)
            .unwrap();
        assert_eq!(bytes, result(0..32));
        // A chunk missing from the list: its bytes read as zero.
        let (bytes, _) = ring.gather([chunk(0), chunk(2)], &(0..24), None).unwrap();
        let mut expected = result(0..24);
        expected[8..16].fill(0);
        assert_eq!(bytes, expected);
        let (bytes, _) = ring.gather([chunk(0)], &(0..16), None).unwrap();
        assert_eq!(bytes, [result(0..8), vec![0; 8]].concat());
        assert_eq!(
            ring.gather([(8, 8, None)], &(8..16), None),
            Err(AxleRingError::ChunkMissing { offset: 8 })
        );
    }

    #[test]
    fn gather_into_a_used_buffer_leaves_nothing_of_what_it_held() {
        let ring = axle_ring(4);
        let device = ring.region.device_view();
        for index in 0..4u64 {
            let data: Vec<u8> = (0..8).map(|byte| (index * 8 + byte) as u8).collect();
            let offset = ring.layout.payload_slot_offset(index as u32).unwrap();
            device.write_bytes(offset, &data).unwrap();
        }
        let chunk = |index: u64| (index * 8, 8, Some(index));
        let result = |range: Range<u64>| -> Vec<u8> { range.map(|byte| byte as u8).collect() };
        let used = || vec![0xee_u8; 40];
        // The chunks tile the range: every byte comes from a slot, in any order.
        for chunks in [
            vec![chunk(0), chunk(1), chunk(2)],
            vec![chunk(2), chunk(0), chunk(1)],
        ] {
            let mut bytes = used();
            assert_eq!(ring.gather_into(chunks, &(0..24), None, &mut bytes), Ok(24));
            assert_eq!(bytes, result(0..24));
        }
        // Holes at the start, in the middle and at the end read as zero, whatever the order.
        let mut expected = result(0..32);
        expected[..8].fill(0);
        expected[16..24].fill(0);
        for chunks in [vec![chunk(1), chunk(3)], vec![chunk(3), chunk(1)]] {
            let mut bytes = used();
            ring.gather_into(chunks, &(0..32), None, &mut bytes)
                .unwrap();
            assert_eq!(bytes, expected);
        }
        let mut bytes = used();
        ring.gather_into([chunk(0), chunk(1)], &(4..28), None, &mut bytes)
            .unwrap();
        assert_eq!(bytes, [result(4..16), vec![0; 12]].concat());
        // A shorter range than the buffer held: the buffer is cut to it.
        let mut bytes = used();
        ring.gather_into([chunk(2)], &(16..24), None, &mut bytes)
            .unwrap();
        assert_eq!(bytes, result(16..24));
    }

    #[test]
    fn a_record_naming_a_held_payload_slot_is_refused() {
        let mut ring = axle_ring(4);
        produce(&ring, 0, 0);
        produce(&ring, 1, 0);
        assert_eq!(ring.poll(None), Ok(0..2));
        ring.take_record(0).unwrap();
        let error = ring.take_record(1).unwrap_err();
        assert_eq!(
            error,
            AxleRingError::SlotHeldTwice {
                other: 0,
                index: 1,
                slot: 0
            }
        );
        assert!(
            error
                .to_string()
                .contains("both name the held payload slot 0"),
            "{error}"
        );
    }

    #[test]
    fn an_interrupt_takes_only_the_records_below_the_tail_it_announces() {
        let mut ring = axle_ring(4);
        for index in 0..3 {
            produce(&ring, index, index as u32);
        }
        assert_eq!(ring.poll(Some(2)), Ok(0..2));
        assert_eq!(ring.poll(Some(2)), Ok(2..2));
        assert_eq!(ring.poll(Some(3)), Ok(2..3));
        assert_eq!(ring.pool().len(), 2);
    }
}
