//! The host side of one AXLE ring: the DMA region, the poller's consumer, the ready pool, the
//! gap-aware payload head and batched flow control.

use crate::flow::FlowControl;
use crate::ready_pool::ReadyPool;
use crate::ring::{publish_heads, read_payload, MetadataConsumer, PayloadHeadTracker};
use host_driver::dma::DmaRegion;
use host_driver::shadow::{init_control_block, shadow_stores, DeviceStore, ShadowError};
use host_driver::sync::Ordering;
use shared_abi::region::RingLayout;
use shared_abi::{device_map, DeviceAddress, FlowControlMessage, MetadataRecord, RingIndex};
use std::ops::Range;

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
    /// Records the poller has read: the host's metadata head.
    pub metadata_head: u64,
    /// The host's gap-aware payload head (the oldest unconsumed payload index).
    pub payload_head: u64,
    /// Payload slots consumed behind an unconsumed one (the gap, in slots).
    pub gap_slots: u64,
    /// Records in the ready pool, not yet taken by the scheduler.
    pub pooled: usize,
    /// Records per metadata ring.
    pub metadata_capacity: u32,
    /// Slots per payload ring.
    pub payload_capacity: u32,
}

/// One ring pair in a pinned DMA region.
#[derive(Debug)]
pub struct AxleRing {
    region: DmaRegion,
    layout: RingLayout,
    epoch: u64,
    consumer: MetadataConsumer,
    payloads: PayloadHeadTracker,
    pool: ReadyPool,
    flow: FlowControl,
    scratch: Vec<MetadataRecord>,
    max_gap_slots: u64,
}

impl AxleRing {
    /// A ring over `region`, laid out as `layout` (the region must be exactly
    /// `layout.region_length()` bytes).
    pub fn new(region: DmaRegion, layout: RingLayout, epoch: u64) -> AxleRing {
        AxleRing {
            consumer: MetadataConsumer::new(layout),
            payloads: PayloadHeadTracker::new(&layout),
            pool: ReadyPool::new(layout.metadata_capacity() as usize),
            region,
            layout,
            epoch,
            flow: FlowControl::default(),
            scratch: Vec::new(),
            max_gap_slots: 0,
        }
    }

    /// Bytes per payload slot.
    pub fn slot_size(&self) -> u32 {
        self.layout.slot_size()
    }

    /// The region (for tests and tools).
    pub fn region(&self) -> &DmaRegion {
        &self.region
    }

    /// Initialises the control block and returns the CXL.mem stores that program the shadow
    /// descriptors (entries first, header last).
    pub fn setup_stores(&mut self) -> Result<Vec<DeviceStore>, ShadowError> {
        init_control_block(&self.region, &self.layout, self.epoch)?;
        shadow_stores(&self.region, &self.layout, self.epoch)
    }

    /// Polls the metadata tail (H1) and moves every new record below `limit` (all of them
    /// when `None`) into the ready pool, advancing the metadata head. Returns how many moved.
    pub fn poll(&mut self, limit: Option<u64>) -> Result<usize, String> {
        self.scratch.clear();
        let mut capacity = self.layout.metadata_capacity() as usize;
        if let Some(limit) = limit {
            let allowed = limit.saturating_sub(self.consumer.head());
            capacity = capacity.min(usize::try_from(allowed).unwrap_or(usize::MAX));
            if capacity == 0 {
                return Ok(0);
            }
        }
        let moved = self
            .consumer
            .poll(&self.region, capacity, &mut self.scratch)
            .map_err(|e| e.to_string())?;
        for record in self.scratch.drain(..) {
            self.pool.push(record).map_err(|e| e.to_string())?;
        }
        Ok(moved)
    }

    /// The ready pool.
    pub fn pool(&self) -> &ReadyPool {
        &self.pool
    }

    /// Drops records that arrived with no launch to take them.
    pub fn drain_stale(&mut self) {
        while self.pool.pop().is_some() {}
    }

    /// The payload index of `slot` (within the window the device may have written).
    pub fn payload_index(&self, slot: u32) -> Result<u64, String> {
        if slot >= self.layout.payload_capacity() {
            return Err(format!(
                "record names payload slot {slot} of {}",
                self.layout.payload_capacity()
            ));
        }
        Ok(self.payloads.slot_index(slot))
    }

    /// The payload `index` has been read by every task that needs it.
    pub fn consume(&mut self, index: u64) -> Result<(), String> {
        self.payloads.consume(index).map_err(|e| e.to_string())?;
        self.max_gap_slots = self.max_gap_slots.max(self.payloads.gap_slots());
        Ok(())
    }

    /// Copies the bytes `needs` out of the payload slots holding `chunks` (offset, length,
    /// payload index). Returns the bytes and how many bytes of slots were read.
    pub fn gather(
        &self,
        chunks: &[(u64, u64, Option<u64>)],
        needs: &Range<u64>,
    ) -> Result<(Vec<u8>, u64), String> {
        let mut bytes = vec![0u8; (needs.end - needs.start) as usize];
        let mut slot_bytes = vec![0u8; self.layout.slot_size() as usize];
        let mut read = 0;
        for &(offset, length, index) in chunks {
            let index = index.ok_or_else(|| format!("chunk at offset {offset} has not arrived"))?;
            let slot = RingIndex(index).slot(self.layout.payload_capacity());
            read_payload(
                &self.region,
                &self.layout,
                slot,
                length as u32,
                &mut slot_bytes,
            )
            .map_err(|e| e.to_string())?;
            read += length;
            let start = needs.start.max(offset);
            let end = needs.end.min(offset + length);
            if start < end {
                let from = (start - offset) as usize..(end - offset) as usize;
                let to = (start - needs.start) as usize..(end - needs.start) as usize;
                bytes[to].copy_from_slice(&slot_bytes[from]);
            }
        }
        Ok((bytes, read))
    }

    /// The flow-control store to send, if the heads moved: H2/H3 are published to the host
    /// line too (the mirror) after the reads they cover.
    pub fn flow_control_due(&self) -> Option<(DeviceAddress, FlowControlMessage)> {
        self.flow
            .due(self.consumer.head(), self.payloads.head())
            .map(|message| (device_map::FLOW_CONTROL, message))
    }

    /// The flow-control store was sent.
    pub fn flow_control_sent(&mut self, message: FlowControlMessage) {
        if let Err(error) = publish_heads(
            &self.region,
            &self.layout,
            message.metadata_head,
            message.payload_head,
        ) {
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
    pub fn state(&self) -> Result<RingState, String> {
        use shared_abi::control::{
            DEVICE_STATUS_OFFSET, METADATA_HEAD_OFFSET, METADATA_TAIL_OFFSET, PAYLOAD_HEAD_OFFSET,
            PAYLOAD_TAIL_OFFSET,
        };
        let control = self.layout.control_offset();
        let load = |offset: u64| {
            self.region
                .load_u64(control + offset, Ordering::Acquire)
                .map_err(|e| e.to_string())
        };
        Ok(RingState {
            metadata_tail: load(METADATA_TAIL_OFFSET)?,
            payload_tail: load(PAYLOAD_TAIL_OFFSET)?,
            device_status: load(DEVICE_STATUS_OFFSET)?,
            published_metadata_head: load(METADATA_HEAD_OFFSET)?,
            published_payload_head: load(PAYLOAD_HEAD_OFFSET)?,
            metadata_head: self.consumer.head(),
            payload_head: self.payloads.head(),
            gap_slots: self.payloads.gap_slots(),
            pooled: self.pool.len(),
            metadata_capacity: self.layout.metadata_capacity(),
            payload_capacity: self.layout.payload_capacity(),
        })
    }

    /// Payload slots between the payload head and the newest record (held by the host).
    pub fn held_slots(&self) -> u64 {
        self.consumer.head().saturating_sub(self.payloads.head())
    }
}
