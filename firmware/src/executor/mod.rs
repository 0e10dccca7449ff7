//! The DMA executor: packs complete result chunks into payloads and streams them into the
//! host's rings.
//!
//! For each complete chunk (from the [`crate::monitor::ResultMonitor`]) the executor takes one
//! payload slot and one metadata slot (if the cached heads grant them, see [`crate::flow`]) and
//! appends three descriptors to the open batch's chain:
//!
//! 1. D1: the chunk's bytes from the result space to the payload slot;
//! 2. D3: the metadata record (staged in scratch memory) to the metadata slot;
//! 3. D4: the new metadata tail (a publishing write, ordered after 1 and 2).
//!
//! Submitting a batch closes its chain with D2, the new payload tail, and hands it to the DMA
//! engine as one request. The host therefore sees a record only after its payload (partial
//! writes are never visible), and one payload-tail update per batch but one metadata-tail
//! update per payload, as the paper describes. Requests complete in submission order (a HAL
//! guarantee), so tails land in the order they were published.
//!
//! # When a batch is submitted
//!
//! - When it holds at least the streaming factor's bytes, or the launch's last chunk, and the
//!   engine takes a request: the streaming factor is honoured whenever the engine can take one.
//! - When the executor cannot add to it: no ring credit (back-pressure: the batch is closed so
//!   that the host can consume it and send credit back) or no descriptor-ring or staging room.
//!
//! # Natural batching
//!
//! A submission can be refused: the engine has no free channel ([`DmaError::QueueFull`]; the
//! engine queues nothing beyond its channels) or the executor's own window of
//! [`MAX_IN_FLIGHT`] requests is full. Then no further submission is tried in that
//! [`DmaExecutor::pump`] (nothing frees a channel before the next DMA completion), and complete
//! chunks keep joining the open batch, as far as ring credit, descriptor-ring and staging room
//! allow. At the first later pump at which the engine takes a request (a later step, typically
//! the one that handles a DMA completion) the whole open batch is submitted as one request,
//! however far past the streaming factor it grew. So while the engine is busy results wait in
//! the batch, not in an engine queue, and leave as few large requests: each pays the
//! per-request preparation and one payload-tail write for many payloads. The same happens after back-pressure: when credit returns, the
//! executor forms many payloads at once and, with the engine's channels busy, they go out as
//! few large requests (the paper's "batching without additional overhead", Section V-E).
//!
//! # Ordering
//!
//! Edges D1-D5 hold for every batch whatever its size: within a chain each payload's D1
//! precedes its D3 and D4, D2 is the chain's last write, and the host's heads are read (D5)
//! only when the cached heads say a ring is full. Payload and metadata indices are assigned
//! when a payload is formed, so batches carry consecutive indices in submission order.
//!
//! # Translations
//!
//! Every descriptor names a host address: a payload slot, a metadata slot or a word of the
//! control block, translated through the region's scatter-gather table. Consecutive slots
//! mostly lie in the same entry (a page holds many), so the executor keeps, per ring, the
//! stretch of the entry it last translated in and translates the next slot from it with one
//! comparison; only a slot outside the stretch is looked up in the table. The addresses and
//! the errors are those of [`ShadowRegion::translate`]; the device memory operations (which
//! descriptor, record and tail is written where, and in which order) do not depend on it.
//!
//! # BROKEN
//!
//! Latching BROKEN abandons the open batch and publishes the device status word with one
//! publishing write. If the engine cannot take that request yet, the status stays pending and
//! is published at the first later step that can ([`DmaExecutor::publish_pending_status`]).

use crate::error::{FirmwareError, HalBreach};
use crate::flow::Credits;
use crate::hal::{
    Clock, DeviceMemory, DmaDescriptor, DmaEngine, DmaError, DmaKind, DmaRequest, DmaTag,
};
use crate::monitor::{MonitorArrays, ResultMonitor};
use crate::scratch::{ScratchLayout, CELL};
use crate::trace::{Counters, Trace, TraceEvent};
use crate::translate::ShadowRegion;
use heapless::Deque;
use shared_abi::region::{METADATA_OFFSET, METADATA_RECORD_SIZE};
use shared_abi::{
    control, DeviceAddress, HostPhysAddr, MetadataFlags, MetadataRecord, Status, Ticks,
};
use zerocopy::{Immutable, IntoBytes};

/// Requests the executor keeps in flight at most: its structural limit (the size of its
/// fixed-capacity bookkeeping of submitted requests). The DMA engine usually refuses earlier
/// (the emulator's engine takes one request per channel, `device.dma_channels`); either way,
/// while no request can be submitted complete chunks keep joining the open batch (see the
/// module docs), so this limit bounds requests, not streaming.
pub const MAX_IN_FLIGHT: usize = 64;

/// Descriptors one payload needs at most (D1 as whole words and a padded last word, D3, D4);
/// one more is reserved for the batch's D2.
const DESCRIPTORS_PER_PAYLOAD: u64 = 4;
/// Staging cells one payload needs at most (a padded last word, the record, the metadata
/// tail); one more is reserved for D2.
const CELLS_PER_PAYLOAD: u64 = 3;

/// What the launch being streamed looks like to the executor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamTarget {
    /// Device address of result byte 0.
    pub result_address: DeviceAddress,
    /// The launch tag.
    pub tag: u32,
}

/// A stretch of the shadow region that one scatter-gather entry maps contiguously: region
/// offsets `[start, end)` are host addresses `host + (offset - start)`.
///
/// The executor keeps the stretch of the last payload slot, of the last metadata slot and of
/// the control block's device line it translated: consecutive slots usually lie in the same
/// entry (a page holds many), so they translate without a lookup in the scatter-gather table.
/// Only a slot outside the stretch is looked up ([`ShadowRegion::translate_prefix`], which
/// also yields the new stretch). The stretches are of the region the executor streams into;
/// [`DmaExecutor::pump`] drops them when handed a region that is not that one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Mapped {
    start: u64,
    end: u64,
    host: u64,
}

impl Mapped {
    /// The host address of region bytes `[offset, offset + length)`: from the stretch when it
    /// holds them all, else looked up in `region` (the stretch becomes the looked-up entry's,
    /// from `offset` on). The same address, or the same error, as
    /// [`ShadowRegion::translate`].
    #[inline]
    fn translate(
        &mut self,
        region: &ShadowRegion,
        offset: u64,
        length: u64,
    ) -> Result<HostPhysAddr, FirmwareError> {
        if offset >= self.start && length <= self.end.saturating_sub(offset) && length > 0 {
            // Inside the stretch: offset >= start, and host + (offset - start) <= host +
            // (end - start), which the lookup that made the stretch computed without overflow;
            // so neither operation wraps (wrapping: the plain operations, without a check).
            return Ok(HostPhysAddr(
                self.host.wrapping_add(offset.wrapping_sub(self.start)),
            ));
        }
        self.look_up(region, offset, length)
    }

    #[cold]
    fn look_up(
        &mut self,
        region: &ShadowRegion,
        offset: u64,
        length: u64,
    ) -> Result<HostPhysAddr, FirmwareError> {
        // Everything from `offset` to the region's end that the same entry maps; `translate`'s
        // errors for the bytes asked for (none of them is mapped by one entry).
        let rest = region.region_length().saturating_sub(offset);
        let (host, available) = region.translate_prefix(offset, rest)?;
        if available < length || length == 0 {
            return Err(FirmwareError::TranslationFault);
        }
        *self = Mapped {
            start: offset,
            end: offset.saturating_add(available),
            host: host.0,
        };
        Ok(host)
    }
}

/// What the executor's [`Mapped`] stretches were learnt from: a region with another epoch or
/// length (a reprogrammed one) drops them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct MappedFor {
    epoch: u64,
    region_length: u64,
    entries: usize,
}

impl MappedFor {
    fn of(region: &ShadowRegion) -> MappedFor {
        MappedFor {
            epoch: region.epoch(),
            region_length: region.region_length(),
            entries: region.entry_count(),
        }
    }
}

/// The slot of a free-running ring index: `index % capacity` (slot 0 in a ring of no slots,
/// as [`ScratchLayout::cell`] and [`shared_abi::RingIndex::slot`] name it), kept beside the
/// index as it advances, so that the walk over a ring divides only when it wraps.
///
/// The executor advances it exactly where it advances the index (by the same count) and keeps
/// it for the capacity it was computed for: a ring of another capacity computes it anew. The
/// indices are free-running `u64` counters that grow by at most a few per payload, so they never
/// reach `u64::MAX` (where their saturating increments would stop and the slot would not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SlotOf {
    /// The ring's capacity; `u64::MAX` (no ring's: capacities are `u32`) before the first.
    capacity: u64,
    /// `index % capacity`, below the capacity (0 for a capacity of 0).
    slot: u64,
}

impl SlotOf {
    /// Not yet computed for any ring.
    const UNSET: SlotOf = SlotOf {
        capacity: u64::MAX,
        slot: 0,
    };

    /// The slot of `index` in a ring of `capacity`.
    fn of(index: u64, capacity: u32) -> SlotOf {
        let capacity = u64::from(capacity);
        SlotOf {
            capacity,
            slot: index.checked_rem(capacity).unwrap_or(0),
        }
    }

    /// The slot of `index` in a ring of `capacity`, where `self` is the slot of `index` if it
    /// was computed for that capacity.
    #[inline]
    fn synced(self, index: u64, capacity: u32) -> SlotOf {
        if self.capacity == u64::from(capacity) {
            self
        } else {
            SlotOf::of(index, capacity)
        }
    }

    /// The slot `n` (a few) entries later.
    #[inline]
    fn advanced(self, n: u64) -> SlotOf {
        // slot < capacity <= u32::MAX: no overflow.
        let next = self.slot.wrapping_add(n);
        let slot = if next < self.capacity {
            next
        } else {
            // The ring wraps (or has no slots): the only division, once per turn of the ring.
            next.checked_rem(self.capacity).unwrap_or(0)
        };
        SlotOf {
            capacity: self.capacity,
            slot,
        }
    }
}

/// Why [`DmaExecutor::pump`] stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PumpOutcome {
    /// Every complete chunk joined a batch, and every batch that was due went out (an open
    /// batch, if any, is below the streaming factor).
    Drained,
    /// A complete chunk waits for ring credit (back-pressure).
    WaitingForCredit,
    /// A complete chunk waits for descriptor-ring or staging room, or a due batch waits for
    /// the engine to take a request (it is submitted at a later pump).
    WaitingForDma,
}

/// A staged metadata record and, in the next cell, the metadata tail that publishes it, as
/// one write stores them (`DmaExecutor::stage_record_and_tail`).
#[derive(IntoBytes, Immutable)]
#[repr(C)]
struct RecordAndTail {
    record: MetadataRecord,
    tail: [u8; 8],
}

const _: () = assert!(core::mem::size_of::<RecordAndTail>() == CELL as usize + 8);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct InFlight {
    tag: DmaTag,
    descriptor_end: u64,
    staging_end: u64,
    metadata_end: u64,
}

/// The executor's fixed-size state.
#[derive(Debug)]
pub struct DmaExecutor {
    streaming_factor: u64,
    metadata_tail: u64,
    payload_tail: u64,
    credits: Credits,
    descriptor_head: u64,
    descriptor_tail: u64,
    staging_head: u64,
    staging_tail: u64,
    batch_first: u64,
    batch_payloads: u32,
    batch_bytes: u64,
    in_flight: Deque<InFlight, MAX_IN_FLIGHT>,
    blocked_since: Option<Ticks>,
    /// Set when a submission is refused (no free engine channel, or the in-flight window is
    /// full): nothing frees a channel before the next DMA completion ([`DmaExecutor::complete`]
    /// clears it), so no submission is tried until then and complete chunks join the open
    /// batch instead. With nothing in flight it is cleared at the next pump (an engine that
    /// refuses with nothing in flight gets asked again).
    engine_full: bool,
    /// A device status to publish once the engine takes the request (BROKEN).
    pending_status: Option<Status>,
    /// Stretches of the region the last payload slot, metadata slot and control-block word
    /// were translated in (see [`Mapped`]), and the region they are of.
    payload_map: Mapped,
    metadata_map: Mapped,
    control_map: Mapped,
    mapped_for: MappedFor,
    /// The host addresses of the control block's metadata-tail and payload-tail words in
    /// the region the stretches are of, once translated (they do not move while it stays).
    metadata_tail_destination: Option<HostPhysAddr>,
    payload_tail_destination: Option<HostPhysAddr>,
    /// The slots of the descriptor-ring and staging tails in the scratch rings, and of the
    /// payload and metadata tails in the host's rings (see [`SlotOf`]).
    descriptor_slot: SlotOf,
    staging_slot: SlotOf,
    payload_slot: SlotOf,
    metadata_slot: SlotOf,
}

impl DmaExecutor {
    /// An executor for a freshly programmed ring; `streaming_factor` is in bytes (at least 1).
    pub fn new(streaming_factor: u64) -> DmaExecutor {
        DmaExecutor {
            streaming_factor,
            metadata_tail: 0,
            payload_tail: 0,
            credits: Credits::new(),
            descriptor_head: 0,
            descriptor_tail: 0,
            staging_head: 0,
            staging_tail: 0,
            batch_first: 0,
            batch_payloads: 0,
            batch_bytes: 0,
            in_flight: Deque::new(),
            blocked_since: None,
            engine_full: false,
            pending_status: None,
            payload_map: Mapped::default(),
            metadata_map: Mapped::default(),
            control_map: Mapped::default(),
            mapped_for: MappedFor::default(),
            metadata_tail_destination: None,
            payload_tail_destination: None,
            descriptor_slot: SlotOf::UNSET,
            staging_slot: SlotOf::UNSET,
            payload_slot: SlotOf::UNSET,
            metadata_slot: SlotOf::UNSET,
        }
    }

    /// Sets the streaming factor for the next launch.
    pub fn set_streaming_factor(&mut self, bytes: u64) {
        self.streaming_factor = bytes;
    }

    /// Records published so far.
    pub fn metadata_tail(&self) -> u64 {
        self.metadata_tail
    }

    /// Payloads published so far.
    pub fn payload_tail(&self) -> u64 {
        self.payload_tail
    }

    /// Whether no request is in flight, no batch is open and no status waits to be published.
    pub fn idle(&self) -> bool {
        self.in_flight.is_empty() && self.batch_payloads == 0 && self.pending_status.is_none()
    }

    /// Whether the executor is waiting for credit.
    pub fn blocked(&self) -> bool {
        self.blocked_since.is_some()
    }

    /// Forms payloads from complete chunks while ring credit and descriptor-ring and staging
    /// room last, and submits batches that are due (see the module docs): a batch that waited
    /// for the engine goes first, whole; while the engine takes no request, chunks keep
    /// joining the open batch.
    ///
    /// `region` is the ring's programmed region. The executor keeps translations of it from
    /// one pump to the next (see the module docs, "Translations"): [`crate::Firmware`] makes a
    /// new executor whenever the host programs the region, and a pump handed a region of
    /// another epoch, length or entry count drops them.
    ///
    /// A pump with nothing to do (no batch due, no complete chunk, as far as the executor and
    /// the monitor know without reading device memory) returns at once, inline in the caller.
    #[expect(
        clippy::too_many_arguments,
        reason = "the hardware, the monitor, the ring and the per-run state are separate borrows"
    )]
    #[inline]
    pub fn pump<H: Clock + DeviceMemory + DmaEngine>(
        &mut self,
        hw: &mut H,
        monitor: &mut ResultMonitor,
        region: &ShadowRegion,
        scratch: &ScratchLayout,
        target: StreamTarget,
        counters: &mut Counters,
        trace: &mut Trace,
    ) -> Result<PumpOutcome, FirmwareError> {
        // With nothing in flight no completion will come to clear a refusal: try again.
        if self.in_flight.is_empty() {
            self.engine_full = false;
        }
        if (self.engine_full || !self.batch_due(monitor)) && monitor.none_complete() {
            // What the whole pump would find: nothing to submit, no chunk to take.
            return Ok(self.outcome());
        }
        self.pump_chunks(hw, monitor, region, scratch, target, counters, trace)
    }

    /// How a pump that formed every payload it could ends.
    #[inline]
    fn outcome(&self) -> PumpOutcome {
        if self.engine_full && self.batch_payloads > 0 {
            PumpOutcome::WaitingForDma
        } else {
            PumpOutcome::Drained
        }
    }

    /// [`DmaExecutor::pump`] past its first check (the engine refusal already cleared when
    /// nothing is in flight).
    #[expect(
        clippy::too_many_arguments,
        reason = "the hardware, the monitor, the ring and the per-run state are separate borrows"
    )]
    #[inline(never)]
    fn pump_chunks<H: Clock + DeviceMemory + DmaEngine>(
        &mut self,
        hw: &mut H,
        monitor: &mut ResultMonitor,
        region: &ShadowRegion,
        scratch: &ScratchLayout,
        target: StreamTarget,
        counters: &mut Counters,
        trace: &mut Trace,
    ) -> Result<PumpOutcome, FirmwareError> {
        let layout = *region.layout();
        self.map(region, scratch);
        // A batch that became due while the engine took no request goes out first, whole
        // (unless the engine still refuses: no completion came since it last did).
        if !self.engine_full && self.batch_due(monitor) {
            self.engine_full = !self.submit(hw, region, scratch, counters, trace)?;
        }
        // Payloads the cached heads grant (a slot in each ring per payload): counted once
        // here and down by one per payload formed, as both tails advance by one each.
        let mut credit = self.credit(&layout);
        let arrays = MonitorArrays::of(scratch);
        while let Some(chunk) = monitor.peek_in(hw, arrays)? {
            if credit == 0 {
                // Edge D5: only now read the host's heads.
                counters.head_reads = counters.head_reads.saturating_add(1);
                self.credits
                    .refresh(hw, self.metadata_tail, self.payload_tail)?;
                credit = self.credit(&layout);
                if credit == 0 {
                    // Close the open batch so the host can consume it and send credit back
                    // (if the engine takes no request now, at the first pump it does).
                    if !self.engine_full {
                        self.submit(hw, region, scratch, counters, trace)?;
                    }
                    if self.blocked_since.is_none() {
                        let now = hw.now();
                        self.blocked_since = Some(now);
                        trace.record(TraceEvent::CreditWait { at: now });
                    }
                    return Ok(PumpOutcome::WaitingForCredit);
                }
            }
            if let Some(since) = self.blocked_since.take() {
                let now = hw.now();
                counters.backpressure_ticks = counters
                    .backpressure_ticks
                    .saturating_add(now.since(since).0);
                trace.record(TraceEvent::CreditResume { at: now });
            }
            if !self.has_ring_room(scratch) {
                if !self.engine_full {
                    self.submit(hw, region, scratch, counters, trace)?;
                }
                return Ok(PumpOutcome::WaitingForDma);
            }
            monitor.take();
            let last = monitor.all_chunks_taken();
            self.form_payload(hw, monitor, region, scratch, target, chunk, last)?;
            credit = credit.saturating_sub(1);
            counters.payloads = counters.payloads.saturating_add(1);
            if !self.engine_full && self.batch_due(monitor) {
                self.engine_full = !self.submit(hw, region, scratch, counters, trace)?;
            }
        }
        Ok(self.outcome())
    }

    /// Whether the open batch must go out as soon as the engine takes it: it holds the
    /// streaming factor's bytes, or the launch's last chunk.
    fn batch_due(&self, monitor: &ResultMonitor) -> bool {
        self.batch_payloads > 0
            && (self.batch_bytes >= self.streaming_factor || monitor.all_chunks_taken())
    }

    /// Handles one DMA completion: frees its descriptors and staging cells. Returns the
    /// metadata tail the request published, or [`FirmwareError::HalContract`] when the engine
    /// reports a request that is not the oldest in flight.
    pub fn complete(&mut self, tag: DmaTag) -> Result<u64, FirmwareError> {
        match self.in_flight.pop_front() {
            Some(entry) if entry.tag == tag => {
                self.descriptor_head = entry.descriptor_end;
                self.staging_head = entry.staging_end;
                self.engine_full = false;
                Ok(entry.metadata_end)
            }
            // Completions must come back in submission order (a HAL guarantee).
            other => Err(FirmwareError::HalContract(
                HalBreach::CompletionOutOfOrder {
                    reported: tag.0,
                    expected: other.map(|entry| entry.tag.0),
                },
            )),
        }
    }

    /// How many more payloads the cached heads grant: each takes one payload slot and one
    /// metadata slot.
    #[inline]
    fn credit(&self, layout: &shared_abi::region::RingLayout) -> u64 {
        let (metadata_free, payload_free) = self.credits.free(
            self.metadata_tail,
            layout.metadata_capacity(),
            self.payload_tail,
            layout.payload_capacity(),
        );
        metadata_free.min(payload_free)
    }

    /// Keeps the translated stretches ([`Mapped`]) and tail addresses only while `region` is
    /// the one they were learnt from, and the tails' slots ([`SlotOf`]) for the capacities of
    /// `region`'s rings and of `scratch`'s.
    #[inline]
    fn map(&mut self, region: &ShadowRegion, scratch: &ScratchLayout) {
        let of = MappedFor::of(region);
        if of != self.mapped_for {
            self.payload_map = Mapped::default();
            self.metadata_map = Mapped::default();
            self.control_map = Mapped::default();
            self.metadata_tail_destination = None;
            self.payload_tail_destination = None;
            self.mapped_for = of;
        }
        let layout = region.layout();
        self.payload_slot = self
            .payload_slot
            .synced(self.payload_tail, layout.payload_capacity());
        self.metadata_slot = self
            .metadata_slot
            .synced(self.metadata_tail, layout.metadata_capacity());
        self.sync_scratch(scratch);
    }

    /// Keeps the descriptor-ring and staging tails' slots for `scratch`'s capacities.
    #[inline]
    fn sync_scratch(&mut self, scratch: &ScratchLayout) {
        self.descriptor_slot = self
            .descriptor_slot
            .synced(self.descriptor_tail, scratch.descriptor_capacity);
        self.staging_slot = self
            .staging_slot
            .synced(self.staging_tail, scratch.staging_capacity);
    }

    /// The host address of the control block's word at `offset` (a tail), translated once
    /// per region and kept in `kept` (see [`DmaExecutor::map`]).
    #[inline]
    fn control_word(
        kept: &mut Option<HostPhysAddr>,
        control_map: &mut Mapped,
        region: &ShadowRegion,
        offset: u64,
    ) -> Result<HostPhysAddr, FirmwareError> {
        if let Some(address) = *kept {
            return Ok(address);
        }
        let address = control_map.translate(region, offset, 8)?;
        *kept = Some(address);
        Ok(address)
    }

    /// Whether the descriptor ring and the staging cells have room for `descriptors` and
    /// `cells` more (beside the open batch and the requests in flight).
    fn has_scratch_room(&self, scratch: &ScratchLayout, descriptors: u64, cells: u64) -> bool {
        let descriptors_used = self.descriptor_tail.saturating_sub(self.descriptor_head);
        let cells_used = self.staging_tail.saturating_sub(self.staging_head);
        descriptors_used.saturating_add(descriptors) <= u64::from(scratch.descriptor_capacity)
            && cells_used.saturating_add(cells) <= u64::from(scratch.staging_capacity)
    }

    /// Whether one more payload fits the descriptor ring and the staging cells, with the
    /// batch's D2 still to come. (A full in-flight window does not stop payloads from
    /// forming: they join the open batch.)
    fn has_ring_room(&self, scratch: &ScratchLayout) -> bool {
        self.has_scratch_room(scratch, DESCRIPTORS_PER_PAYLOAD + 1, CELLS_PER_PAYLOAD + 1)
    }

    fn push_descriptor<M: DeviceMemory>(
        &mut self,
        memory: &mut M,
        scratch: &ScratchLayout,
        descriptor: DmaDescriptor,
    ) -> Result<(), FirmwareError> {
        let address = cell(scratch.descriptor_base(), self.descriptor_slot);
        memory.write(address, descriptor.as_bytes())?;
        self.descriptor_tail = self.descriptor_tail.saturating_add(1);
        self.descriptor_slot = self.descriptor_slot.advanced(1);
        Ok(())
    }

    /// Pushes two descriptors, the second after the first: one write of both when their
    /// slots are adjacent in the descriptor ring (not across its wrap), else one each.
    #[inline]
    fn push_descriptor_pair<M: DeviceMemory>(
        &mut self,
        memory: &mut M,
        scratch: &ScratchLayout,
        descriptors: [DmaDescriptor; 2],
    ) -> Result<(), FirmwareError> {
        if let Some(first) = cell_pair(scratch.descriptor_base(), self.descriptor_slot) {
            memory.write(first, descriptors.as_bytes())?;
            self.descriptor_tail = self.descriptor_tail.saturating_add(2);
            self.descriptor_slot = self.descriptor_slot.advanced(2);
            return Ok(());
        }
        let [d3, d4] = descriptors;
        self.push_descriptor(memory, scratch, d3)?;
        self.push_descriptor(memory, scratch, d4)
    }

    /// Stages a metadata record and, in the next cell, the metadata tail that publishes it:
    /// one write of both when the cells are adjacent (not across the staging ring's wrap),
    /// else one each. Returns the two cells.
    #[inline]
    fn stage_record_and_tail<M: DeviceMemory>(
        &mut self,
        memory: &mut M,
        scratch: &ScratchLayout,
        record: &MetadataRecord,
        tail: u64,
    ) -> Result<(DeviceAddress, DeviceAddress), FirmwareError> {
        if let Some(record_cell) = cell_pair(scratch.staging_base(), self.staging_slot) {
            let tail_cell = DeviceAddress(record_cell.0.saturating_add(CELL));
            // The record's 32 bytes, then the tail's 8: the bytes the two writes would store.
            let both = RecordAndTail {
                record: *record,
                tail: tail.to_le_bytes(),
            };
            memory.write(record_cell, both.as_bytes())?;
            self.staging_tail = self.staging_tail.saturating_add(2);
            self.staging_slot = self.staging_slot.advanced(2);
            return Ok((record_cell, tail_cell));
        }
        let record_cell = self.stage(memory, scratch, record.as_bytes())?;
        let tail_cell = self.stage(memory, scratch, &tail.to_le_bytes())?;
        Ok((record_cell, tail_cell))
    }

    #[inline]
    fn stage<M: DeviceMemory>(
        &mut self,
        memory: &mut M,
        scratch: &ScratchLayout,
        bytes: &[u8],
    ) -> Result<DeviceAddress, FirmwareError> {
        let address = cell(scratch.staging_base(), self.staging_slot);
        memory.write(address, bytes)?;
        self.staging_tail = self.staging_tail.saturating_add(1);
        self.staging_slot = self.staging_slot.advanced(1);
        Ok(address)
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "the hardware, the monitor, the ring, the launch and the chunk are separate"
    )]
    fn form_payload<M: DeviceMemory>(
        &mut self,
        memory: &mut M,
        monitor: &ResultMonitor,
        region: &ShadowRegion,
        scratch: &ScratchLayout,
        target: StreamTarget,
        chunk: u32,
        last: bool,
    ) -> Result<(), FirmwareError> {
        let layout = *region.layout();
        if self.batch_payloads == 0 {
            self.batch_first = self.descriptor_tail;
        }
        let length = monitor.chunk_length(chunk);
        let offset = u64::from(chunk).saturating_mul(u64::from(layout.slot_size()));
        let source = target
            .result_address
            .checked_add(offset)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let payload_index = self.payload_tail;
        // The payload tail's slot (`RingIndex::slot`), below the capacity: it fits u32.
        let slot = self.payload_slot.slot as u32;
        let slot_offset = layout
            .payload_slot_offset(slot)
            .ok_or(FirmwareError::TranslationFault)?;
        // D1: the payload data. DMA moves whole 8-byte words: the whole words come straight
        // from the result space; a short last chunk's final partial word is staged with zero
        // padding, so nothing beyond the result space is ever read or sent (the record's
        // length carries the true size).
        let whole = length & !7;
        if whole > 0 {
            let destination = self.payload_map.translate(region, slot_offset, whole)?;
            self.push_descriptor(
                memory,
                scratch,
                DmaDescriptor {
                    source: source.0,
                    destination: destination.0,
                    length: whole as u32,
                    kind: DmaKind::Payload as u32,
                    index: payload_index,
                },
            )?;
        }
        let partial = length.saturating_sub(whole);
        if partial > 0 {
            let mut word = [0u8; 8];
            let tail_source = source
                .checked_add(whole)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            let bytes = word
                .get_mut(..partial as usize)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            memory.read(tail_source, bytes)?;
            let cell = self.stage(memory, scratch, &word)?;
            let destination =
                self.payload_map
                    .translate(region, slot_offset.saturating_add(whole), 8)?;
            self.push_descriptor(
                memory,
                scratch,
                DmaDescriptor {
                    source: cell.0,
                    destination: destination.0,
                    length: 8,
                    kind: DmaKind::Payload as u32,
                    index: payload_index,
                },
            )?;
        }
        // D3: the metadata record naming it.
        let metadata_index = self.metadata_tail;
        let mut flags = MetadataFlags::empty();
        if last {
            flags |= MetadataFlags::LAST;
        }
        let record = MetadataRecord {
            sequence: metadata_index,
            result_offset: offset,
            payload_slot: slot,
            length: length as u32,
            tag: target.tag,
            flags: flags.bits(),
        };
        // D4's value, the new metadata tail, is staged in the cell after the record's.
        let new_metadata_tail = metadata_index.saturating_add(1);
        let (record_cell, tail_cell) =
            self.stage_record_and_tail(memory, scratch, &record, new_metadata_tail)?;
        // `RingLayout::metadata_slot_offset` of the metadata tail, from its slot (below the
        // capacity: the offset ends inside the region, no saturation).
        let record_offset = METADATA_OFFSET
            .saturating_add(self.metadata_slot.slot.saturating_mul(METADATA_RECORD_SIZE));
        let record_destination = self.metadata_map.translate(region, record_offset, 32)?;
        // D4: the metadata tail, published after the payload and the record (it follows D3
        // in the chain).
        let tail_destination = Self::control_word(
            &mut self.metadata_tail_destination,
            &mut self.control_map,
            region,
            control::METADATA_TAIL_OFFSET,
        )?;
        self.push_descriptor_pair(
            memory,
            scratch,
            [
                DmaDescriptor {
                    source: record_cell.0,
                    destination: record_destination.0,
                    length: 32,
                    kind: DmaKind::Metadata as u32,
                    index: metadata_index,
                },
                DmaDescriptor {
                    source: tail_cell.0,
                    destination: tail_destination.0,
                    length: 8,
                    kind: DmaKind::MetadataTail as u32,
                    index: new_metadata_tail,
                },
            ],
        )?;
        self.metadata_tail = new_metadata_tail;
        self.payload_tail = payload_index.saturating_add(1);
        self.metadata_slot = self.metadata_slot.advanced(1);
        self.payload_slot = self.payload_slot.advanced(1);
        self.batch_payloads = self.batch_payloads.saturating_add(1);
        self.batch_bytes = self.batch_bytes.saturating_add(length);
        Ok(())
    }

    /// Closes the open batch with D2 (the payload tail) and submits it. `Ok(false)` when the
    /// in-flight window is full or the engine refuses (no free channel): the batch stays open,
    /// keeps growing, and is submitted at a later pump.
    fn submit<H: DeviceMemory + DmaEngine>(
        &mut self,
        hw: &mut H,
        region: &ShadowRegion,
        scratch: &ScratchLayout,
        counters: &mut Counters,
        trace: &mut Trace,
    ) -> Result<bool, FirmwareError> {
        if self.batch_payloads == 0 {
            return Ok(true);
        }
        if self.in_flight.is_full() {
            return Ok(false);
        }
        // D2: the payload tail, once per batch.
        let tail_cell = self.stage(hw, scratch, &self.payload_tail.to_le_bytes())?;
        let tail_destination = Self::control_word(
            &mut self.payload_tail_destination,
            &mut self.control_map,
            region,
            control::PAYLOAD_TAIL_OFFSET,
        )?;
        self.push_descriptor(
            hw,
            scratch,
            DmaDescriptor {
                source: tail_cell.0,
                destination: tail_destination.0,
                length: 8,
                kind: DmaKind::PayloadTail as u32,
                index: self.payload_tail,
            },
        )?;
        let count = self.descriptor_tail.saturating_sub(self.batch_first);
        let request = DmaRequest {
            ring_base: scratch.descriptor_base(),
            ring_capacity: scratch.descriptor_capacity,
            first: self.batch_first,
            count: u32::try_from(count).map_err(|_| FirmwareError::ArgumentOutOfRange)?,
            payloads: self.batch_payloads,
        };
        if !self.send(hw, request)? {
            // The D2 descriptor and its cell are undone; the batch stays open.
            return Ok(false);
        }
        counters.dma_requests = counters.dma_requests.saturating_add(1);
        trace.record(TraceEvent::DmaSubmit {
            payloads: self.batch_payloads,
            payload_tail: self.payload_tail,
        });
        self.batch_payloads = 0;
        self.batch_bytes = 0;
        Ok(true)
    }

    /// Submits `request`, whose last descriptor and staging cell were just written: on
    /// acceptance it joins the in-flight requests (`Ok(true)`); when the engine refuses
    /// ([`DmaError::QueueFull`]), that descriptor and cell are undone (`Ok(false)`).
    fn send<H: DmaEngine>(
        &mut self,
        hw: &mut H,
        request: DmaRequest,
    ) -> Result<bool, FirmwareError> {
        match hw.submit(request) {
            Ok(tag) => {
                let entry = InFlight {
                    tag,
                    descriptor_end: self.descriptor_tail,
                    staging_end: self.staging_tail,
                    metadata_end: self.metadata_tail,
                };
                self.in_flight
                    .push_back(entry)
                    .map_err(|_| FirmwareError::Busy)?;
                Ok(true)
            }
            Err(DmaError::QueueFull) => {
                self.descriptor_tail = self.descriptor_tail.saturating_sub(1);
                self.staging_tail = self.staging_tail.saturating_sub(1);
                // Rare (a refused submission): the slots anew, for the same capacities.
                self.descriptor_slot =
                    SlotOf::of(self.descriptor_tail, self.descriptor_slot.capacity as u32);
                self.staging_slot =
                    SlotOf::of(self.staging_tail, self.staging_slot.capacity as u32);
                Ok(false)
            }
        }
    }

    /// Drops the open batch (the ring is BROKEN: nothing more is streamed). Its descriptors and
    /// cells are never submitted; reprogramming the region resets the executor.
    pub fn abandon_batch(&mut self) {
        self.batch_payloads = 0;
        self.batch_bytes = 0;
        self.blocked_since = None;
    }

    /// Writes the ring's device status word (latching BROKEN) with one publishing DMA write,
    /// now if the engine takes the request, otherwise at a later
    /// [`DmaExecutor::publish_pending_status`].
    pub fn publish_status<H: DeviceMemory + DmaEngine>(
        &mut self,
        hw: &mut H,
        region: &ShadowRegion,
        scratch: &ScratchLayout,
        status: Status,
    ) -> Result<(), FirmwareError> {
        self.pending_status = Some(status);
        self.publish_pending_status(hw, region, scratch)
    }

    /// Submits the pending device-status write, if any, when the in-flight window, the
    /// scratch rings and the engine can take it; otherwise it stays pending (the next DMA
    /// completion makes room). Without one, an inline check and nothing more (every step asks).
    #[inline]
    pub fn publish_pending_status<H: DeviceMemory + DmaEngine>(
        &mut self,
        hw: &mut H,
        region: &ShadowRegion,
        scratch: &ScratchLayout,
    ) -> Result<(), FirmwareError> {
        match self.pending_status {
            None => Ok(()),
            Some(status) => self.publish_status_now(hw, region, scratch, status),
        }
    }

    #[inline(never)]
    fn publish_status_now<H: DeviceMemory + DmaEngine>(
        &mut self,
        hw: &mut H,
        region: &ShadowRegion,
        scratch: &ScratchLayout,
        status: Status,
    ) -> Result<(), FirmwareError> {
        if self.in_flight.is_full() || !self.has_scratch_room(scratch, 1, 1) {
            return Ok(());
        }
        self.sync_scratch(scratch);
        let first = self.descriptor_tail;
        let cell = self.stage(hw, scratch, &u64::from(status.code()).to_le_bytes())?;
        let destination = region.translate(control::DEVICE_STATUS_OFFSET, 8)?;
        self.push_descriptor(
            hw,
            scratch,
            DmaDescriptor {
                source: cell.0,
                destination: destination.0,
                length: 8,
                kind: DmaKind::DeviceStatus as u32,
                index: u64::from(status.code()),
            },
        )?;
        let request = DmaRequest {
            ring_base: scratch.descriptor_base(),
            ring_capacity: scratch.descriptor_capacity,
            first,
            count: 1,
            payloads: 0,
        };
        // Refused: the descriptor and its cell are undone and the status stays pending.
        if self.send(hw, request)? {
            self.pending_status = None;
        }
        Ok(())
    }
}

/// Address of the entry in slot `at` of a scratch ring of 32-byte cells at `base`:
/// [`ScratchLayout::cell`] of an index whose slot `at` is, without a division.
#[inline]
fn cell(base: DeviceAddress, at: SlotOf) -> DeviceAddress {
    // slot < 2^32: the product does not saturate.
    DeviceAddress(base.0.saturating_add(at.slot.wrapping_mul(CELL)))
}

/// [`ScratchLayout::cell_pair`] of an index whose slot `at` is, without a division: the
/// entry after it is the cell right after it exactly when its slot is not the ring's last
/// (and the address does not overflow). For any index below `u64::MAX`: a tail at
/// `u64::MAX` has no next entry (the layout's saturating `index + 1` names the same cell),
/// and no tail gets there (one descriptor or cell per entry).
#[inline]
fn cell_pair(base: DeviceAddress, at: SlotOf) -> Option<DeviceAddress> {
    // slot < capacity <= u32::MAX: neither operation wraps.
    if at.slot.wrapping_add(1) >= at.capacity {
        return None;
    }
    let first = base.0.checked_add(at.slot.wrapping_mul(CELL))?;
    first.checked_add(CELL)?;
    Some(DeviceAddress(first))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{test_scratch, FakeHal, TestRegion};
    use rand::{Rng, SeedableRng};

    /// An executor streaming a launch of `chunks` whole 32-byte chunks (one item each) into
    /// a freshly programmed ring, driven directly: the test populates chunks and pumps.
    struct Rig {
        hal: FakeHal,
        region: ShadowRegion,
        scratch: ScratchLayout,
        monitor: ResultMonitor,
        executor: DmaExecutor,
        counters: Counters,
        trace: Trace,
    }

    impl Rig {
        fn new(chunks: u32, streaming_factor: u64) -> Rig {
            let mut hal = FakeHal::new();
            TestRegion::new(64, 64, 32).program(&mut hal);
            let region = ShadowRegion::load(&hal.memory).unwrap();
            let scratch = test_scratch();
            let monitor = ResultMonitor::start(
                &mut hal,
                &scratch,
                u64::from(chunks) * 32,
                32,
                chunks,
                false,
            )
            .unwrap();
            Rig {
                hal,
                region,
                scratch,
                monitor,
                executor: DmaExecutor::new(streaming_factor),
                counters: Counters::default(),
                trace: Trace::default(),
            }
        }

        fn populate(&mut self, chunk: u32) {
            self.monitor
                .populated(&mut self.hal, &self.scratch, u64::from(chunk) * 32, 32)
                .unwrap();
        }

        fn pump(&mut self) -> PumpOutcome {
            let target = StreamTarget {
                result_address: shared_abi::device_map::DATA_BASE,
                tag: 7,
            };
            self.executor
                .pump(
                    &mut self.hal,
                    &mut self.monitor,
                    &self.region,
                    &self.scratch,
                    target,
                    &mut self.counters,
                    &mut self.trace,
                )
                .unwrap()
        }
    }

    /// The executor's one-division cell helpers give [`ScratchLayout`]'s addresses, across the
    /// wrap, for rings of 0 to 5 cells and near the end of the address space (pairs: for an
    /// index below `u64::MAX`, see [`cell_pair`]).
    #[test]
    fn the_cell_helpers_agree_with_the_scratch_layout() {
        for base in [DeviceAddress(0x1000), DeviceAddress(u64::MAX - 100)] {
            for capacity in 0..=5u32 {
                for index in (0..12).chain([u64::MAX - 2, u64::MAX - 1, u64::MAX]) {
                    let at = SlotOf::of(index, capacity);
                    assert_eq!(
                        cell(base, at),
                        ScratchLayout::cell(base, index, capacity, CELL),
                        "cell {index} of {capacity}"
                    );
                    if index < u64::MAX {
                        assert_eq!(
                            cell_pair(base, at),
                            ScratchLayout::cell_pair(base, index, capacity, CELL),
                            "pair {index} of {capacity}"
                        );
                    }
                }
            }
        }
    }

    /// A stretch translates what [`ShadowRegion::translate`] does, the same errors included,
    /// whatever was translated before (inside a page, across pages, outside the region).
    #[test]
    fn a_mapped_stretch_translates_as_the_region_does() {
        let mut hal = FakeHal::new();
        TestRegion::new(64, 300, 32).program(&mut hal);
        let region = ShadowRegion::load(&hal.memory).unwrap();
        let length = region.region_length();
        let mut mapped = Mapped::default();
        let mut draws = rand::rngs::SmallRng::seed_from_u64(13);
        let (mut hits, mut offset) = (0, 0);
        for _ in 0..4000 {
            // Mostly the next slot, as the executor goes; sometimes anywhere, or past the end.
            offset = match draws.gen_range(0..100) {
                0..=1 => draws.gen_range(length - 8..length + 64),
                2..=9 => draws.gen_range(0..length) & !7,
                _ => (offset + 32) % length,
            };
            let bytes = [0, 8, 32, 4096, 8192][draws.gen_range(0..5)];
            let before = mapped;
            let got = mapped.translate(&region, offset, bytes);
            assert_eq!(got, region.translate(offset, bytes), "{offset} + {bytes}");
            hits += usize::from(got.is_ok() && mapped == before);
        }
        assert!(
            hits > 1000,
            "most translations come from the stretch: {hits}"
        );
    }

    #[test]
    fn an_open_batch_below_the_streaming_factor_is_drained_not_waiting() {
        let mut rig = Rig::new(4, 64);
        rig.populate(0);
        assert_eq!(rig.pump(), PumpOutcome::Drained);
        assert!(rig.hal.dma.submitted().is_empty(), "one slot of SF 2 slots");
        assert!(!rig.executor.idle(), "the batch is open");
    }

    #[test]
    fn a_refused_batch_waits_for_dma_and_drains_once_the_engine_takes_it() {
        let mut rig = Rig::new(4, 32);
        rig.hal.dma.refuse_next(1);
        rig.populate(0);
        assert_eq!(rig.pump(), PumpOutcome::WaitingForDma);
        assert!(rig.hal.dma.submitted().is_empty());
        // Nothing in flight, so no completion will come: the next pump asks again.
        assert_eq!(rig.pump(), PumpOutcome::Drained);
        assert_eq!(rig.hal.dma.submitted().len(), 1);
    }

    #[test]
    fn completions_in_order_return_the_published_tail_and_a_skipped_tag_is_a_hal_breach() {
        let mut rig = Rig::new(4, 32);
        for chunk in 0..3 {
            rig.populate(chunk);
        }
        rig.pump();
        let tags: Vec<DmaTag> = rig.hal.dma.submitted().iter().map(|r| r.tag).collect();
        assert_eq!(tags.len(), 3);
        assert_eq!(rig.executor.complete(tags[0]), Ok(1));
        // The third request's tag while the second is the oldest in flight.
        assert_eq!(
            rig.executor.complete(tags[2]),
            Err(FirmwareError::HalContract(
                HalBreach::CompletionOutOfOrder {
                    reported: tags[2].0,
                    expected: Some(tags[1].0),
                }
            ))
        );
    }
}
