//! The device's timeline of a run, for `axle run --trace` (a Chrome / Perfetto trace).
//!
//! Off by default: [`crate::Emulator::enable_trace`] turns it on, and until then the hardware
//! model holds `None` and records nothing. Recording only appends compact `Copy` records to a
//! vector; it never reads the clock, schedules an event or changes a model's state, so a
//! traced run has exactly the timing of an untraced one.
//!
//! What is recorded, all in virtual time:
//!
//! - every CCM work item, from its start to its end, on a µthread *lane* of its processing
//!   unit. The CCM model shares a unit statically among its µthreads and does not name them;
//!   the trace gives each item the lowest lane of its unit that is free at its start, taking
//!   the items in start order once the run is over ([`DeviceTrace::finish`]): items are
//!   recorded as they end, and handing out lanes in that order could need more lanes than
//!   the unit has µthreads (a lane freed early is taken by a short item that started late,
//!   and a long item that started before it finds none), whereas in start order the lanes
//!   never outnumber the items running at once, which a unit keeps within its µthreads. With
//!   it, the result bytes the item wrote (the kernel's own description of the item, the one
//!   the firmware's result monitor counts), so that a record can be traced back to the item
//!   that completed its chunk;
//! - every DMA request: preparation (submission to the end of preparation) and transfer (end
//!   of preparation to the last write landed in host memory), on a lane allocated the same
//!   way (the engine's channels are a latency model, not named queues);
//! - the link's serialisation intervals, per direction: host stores, CXL.io accesses and
//!   their responses, CXL.mem load responses, and each DMA request's writes (back to back on
//!   the upstream wire, so one interval per request);
//! - the metadata records each DMA request carried ([`DmaRecord`]: sequence, launch tag and
//!   result bytes, read from the request's metadata writes), which identify a record from the
//!   item that completed it to the host task that read it (the flow arrows of the trace);
//! - instants: launch stores, flow-control stores and mailbox doorbells reaching the device,
//!   interrupts raised;
//! - the DMA executor's state after every firmware step ([`DeviceTrace::executor_state`]):
//!   the intervals it waited for ring credit (back-pressure), and its metadata and payload
//!   tails each time they moved (with the host's flow-control stores, the ring's occupancy).

use crate::config::DeviceConfig;
use firmware::hal::DeviceMemory;
use firmware::kernels::Kernel;
use shared_abi::{MetadataRecord, Ticks};
use std::collections::VecDeque;
use zerocopy::FromBytes;

/// Which way a link transfer goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkDirection {
    /// Host to device.
    Downstream,
    /// Device to host.
    Upstream,
}

/// What a link transfer carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkTraffic {
    /// A posted host CXL.mem store (inputs, launch, flow control, shadow descriptors).
    MemStore,
    /// A synchronous host CXL.mem store (RP descriptor, BS launch).
    MemStoreSynchronous,
    /// The response of a host CXL.mem load (RP/BS result load).
    MemLoadResponse,
    /// A host CXL.io register write (doorbell, dequeue).
    IoWrite,
    /// A host CXL.io register read (RP remote poll).
    IoRead,
    /// The response of a CXL.io register read.
    IoReadResponse,
    /// The writes of one DMA request (payloads, records, tails).
    Dma,
}

/// Something the device's control plane saw, at one instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceInstant {
    /// A launch store passed the packet filter.
    LaunchStore {
        /// The launch tag.
        tag: u32,
    },
    /// A flow-control store (the host's heads) reached device memory.
    FlowControl,
    /// The shadow DMA descriptors were programmed.
    RegionProgrammed,
    /// An RP doorbell reached the mailbox.
    Doorbell,
    /// An RP dequeue reached the mailbox.
    Dequeue,
    /// An interrupt was raised.
    Interrupt {
        /// Its message (the metadata tail it announces).
        message: u64,
    },
}

/// What a device span is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceSpanKind {
    /// A CCM work item.
    Item {
        /// Processing unit.
        unit: u32,
        /// µthread lane within the unit.
        lane: u32,
        /// The launch tag.
        tag: u32,
        /// The item index.
        item: u32,
        /// Offset of the result bytes the item wrote in the launch's result space.
        result_offset: u64,
        /// Bytes of result it wrote (0: none, or its description failed).
        result_length: u32,
    },
    /// A DMA request's preparation.
    DmaPrepare {
        /// Lane.
        lane: u32,
        /// The request's tag.
        request: u64,
    },
    /// A DMA request's writes, from the end of preparation to the last landing.
    DmaTransfer {
        /// Lane.
        lane: u32,
        /// The request's tag.
        request: u64,
        /// Writes (descriptors) in it.
        writes: u32,
        /// Bytes written to host memory.
        bytes: u64,
        /// Its status code (0: success).
        status: u32,
    },
    /// The link serialising a transfer.
    Link {
        /// Direction.
        direction: LinkDirection,
        /// What it carries.
        traffic: LinkTraffic,
        /// Bytes, without per-transaction overhead.
        bytes: u64,
    },
}

/// One interval of the device's timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceSpan {
    /// What.
    pub kind: DeviceSpanKind,
    /// Start.
    pub start: Ticks,
    /// End (not before `start`).
    pub end: Ticks,
}

/// A metadata record a DMA request carried to the host (edge D3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaRecord {
    /// The request's tag.
    pub request: u64,
    /// The record's sequence number (its absolute metadata index).
    pub sequence: u64,
    /// The launch tag.
    pub tag: u32,
    /// Offset of its payload's bytes in the launch's result space.
    pub result_offset: u64,
    /// Bytes of result data in the payload.
    pub length: u32,
}

/// The device's timeline of a run.
#[derive(Debug, Default)]
pub struct DeviceTrace {
    /// µthreads per processing unit (sizes the CCM lanes).
    pub uthreads: u32,
    /// Spans, in the order they were recorded.
    pub spans: Vec<DeviceSpan>,
    /// Instants, in time order.
    pub instants: Vec<(Ticks, DeviceInstant)>,
    /// When each DMA lane frees up.
    dma_lanes: Vec<Ticks>,
    /// DMA requests submitted and not yet sent: tag and submission time.
    submitted: VecDeque<(u64, Ticks)>,
    /// Back-pressure: the intervals the DMA executor waited for ring credit (the firmware's
    /// `waiting_for_credit`, sampled after every firmware step), in time order. An interval
    /// still open when the trace is taken ends then ([`DeviceTrace::finish`]).
    pub backpressure: Vec<(Ticks, Ticks)>,
    /// The executor's metadata and payload tails (records and payloads claimed in the rings)
    /// each time they changed: (time, metadata tail, payload tail), in time order.
    pub tails: Vec<(Ticks, u64, u64)>,
    /// The metadata records the DMA requests carried, in the order they were sent.
    pub records: Vec<DmaRecord>,
    /// The kernel last dispatched to the CCM, with its launch tag (describes the items).
    kernel: Option<(u32, Kernel)>,
    /// When the open back-pressure interval began.
    blocked_since: Option<Ticks>,
    /// The last firmware step's time.
    last_step: Ticks,
}

/// The lowest lane free at `start` (growing the lanes if none is), now busy until `end`.
fn take_lane(lanes: &mut Vec<Ticks>, start: Ticks, end: Ticks) -> u32 {
    let index = match lanes.iter().position(|&free_at| free_at <= start) {
        Some(index) => index,
        None => {
            lanes.push(Ticks::ZERO);
            lanes.len() - 1
        }
    };
    if let Some(free_at) = lanes.get_mut(index) {
        *free_at = end;
    }
    u32::try_from(index).unwrap_or(u32::MAX)
}

impl DeviceTrace {
    /// An empty trace for a device of `config`.
    pub fn new(config: &DeviceConfig) -> DeviceTrace {
        DeviceTrace {
            uthreads: config
                .ccm_sub_cores
                .saturating_mul(config.ccm_uthreads_per_sub_core),
            ..DeviceTrace::default()
        }
    }

    /// Launch `tag`'s `kernel` (a stage of it) was dispatched to the CCM.
    pub fn dispatched(&mut self, tag: u32, kernel: Kernel) {
        self.kernel = Some((tag, kernel));
    }

    /// The result bytes item `item` of launch `tag` writes, `(offset, length)`, as the
    /// kernel describes it (read from `memory`, as the firmware's result monitor does when
    /// the item ends); `(0, 0)` when it is not known.
    pub fn result_of<M: DeviceMemory>(&self, tag: u32, item: u32, memory: &M) -> (u64, u32) {
        match self.kernel {
            Some((dispatched, ref kernel)) if dispatched == tag => kernel
                .item(item, memory)
                .map_or((0, 0), |spec| (spec.result_offset, spec.result_length)),
            _ => (0, 0),
        }
    }

    /// A CCM item of launch `tag` started on `unit` at `start` and ends at `end`, having
    /// written `result` (offset and length, [`DeviceTrace::result_of`]). Its lane is given
    /// when the recording ends ([`DeviceTrace::finish`]).
    pub fn item(
        &mut self,
        unit: u32,
        tag: u32,
        item: u32,
        start: Ticks,
        end: Ticks,
        result: (u64, u32),
    ) {
        self.spans.push(DeviceSpan {
            kind: DeviceSpanKind::Item {
                unit,
                lane: 0,
                tag,
                item,
                result_offset: result.0,
                result_length: result.1,
            },
            start,
            end,
        });
    }

    /// DMA request `request` carries the metadata record `bytes` (a metadata write's data;
    /// anything shorter than a record is ignored).
    pub fn dma_record(&mut self, request: u64, bytes: &[u8]) {
        if let Ok((record, _)) = MetadataRecord::read_from_prefix(bytes) {
            self.records.push(DmaRecord {
                request,
                sequence: record.sequence,
                tag: record.tag,
                result_offset: record.result_offset,
                length: record.length,
            });
        }
    }

    /// DMA request `request` was submitted at `at`.
    pub fn dma_submitted(&mut self, request: u64, at: Ticks) {
        self.submitted.push_back((request, at));
    }

    /// DMA request `request` finished preparing at `prepared`; its `writes` writes of `bytes`
    /// bytes in all landed by `landed`, with `status`.
    pub fn dma_sent(
        &mut self,
        request: u64,
        prepared: Ticks,
        landed: Ticks,
        writes: u32,
        bytes: u64,
        status: u32,
    ) {
        // Requests are sent in submission order, so this is almost always the front.
        let submitted = match self.submitted.iter().position(|&(tag, _)| tag == request) {
            Some(index) => self.submitted.remove(index).map_or(prepared, |(_, at)| at),
            None => prepared,
        };
        let lane = take_lane(&mut self.dma_lanes, submitted, landed.max(prepared));
        self.spans.push(DeviceSpan {
            kind: DeviceSpanKind::DmaPrepare { lane, request },
            start: submitted,
            end: prepared,
        });
        self.spans.push(DeviceSpan {
            kind: DeviceSpanKind::DmaTransfer {
                lane,
                request,
                writes,
                bytes,
                status,
            },
            start: prepared,
            end: landed.max(prepared),
        });
    }

    /// The link carried `bytes` of `traffic` in `direction` over `[start, end]`.
    pub fn link(
        &mut self,
        direction: LinkDirection,
        traffic: LinkTraffic,
        bytes: u64,
        start: Ticks,
        end: Ticks,
    ) {
        self.spans.push(DeviceSpan {
            kind: DeviceSpanKind::Link {
                direction,
                traffic,
                bytes,
            },
            start,
            end,
        });
    }

    /// Something happened at `at`.
    pub fn instant(&mut self, at: Ticks, instant: DeviceInstant) {
        self.instants.push((at, instant));
    }

    /// After a firmware step at `now`: whether the DMA executor waits for ring credit, and
    /// its metadata and payload tails. Records only changes (a back-pressure interval opening
    /// or closing, a tail moving).
    pub fn executor_state(&mut self, now: Ticks, waiting_for_credit: bool, tails: (u64, u64)) {
        self.last_step = self.last_step.max(now);
        match (self.blocked_since, waiting_for_credit) {
            (None, true) => self.blocked_since = Some(now),
            (Some(since), false) => {
                self.blocked_since = None;
                self.backpressure.push((since, now));
            }
            _ => {}
        }
        let moved = self
            .tails
            .last()
            .is_none_or(|&(_, metadata, payload)| (metadata, payload) != tails);
        if moved && (tails != (0, 0) || !self.tails.is_empty()) {
            self.tails.push((now, tails.0, tails.1));
        }
    }

    /// Closes a back-pressure interval still open (a run that ended waiting, such as one
    /// that deadlocked) at `now`, the end of the recording.
    /// Also gives each CCM item its lane: per unit, in start order (equal starts in the
    /// order the items ended), the lowest lane free at its start.
    pub fn finish(&mut self, now: Ticks) {
        self.assign_item_lanes();
        if let Some(since) = self.blocked_since.take() {
            self.backpressure
                .push((since, now.max(self.last_step).max(since)));
        }
    }

    /// Gives each CCM item the lowest lane of its unit free at its start, in start order.
    fn assign_item_lanes(&mut self) {
        // (unit, start, recording order) of each item span.
        let mut items: Vec<(u32, Ticks, usize)> = self
            .spans
            .iter()
            .enumerate()
            .filter_map(|(index, span)| match span.kind {
                DeviceSpanKind::Item { unit, .. } => Some((unit, span.start, index)),
                _ => None,
            })
            .collect();
        items.sort_unstable();
        let mut lanes: Vec<Ticks> = Vec::new();
        let mut current = None;
        for (unit, _, index) in items {
            if current != Some(unit) {
                current = Some(unit);
                lanes.clear();
            }
            if let Some(span) = self.spans.get_mut(index) {
                let (start, end) = (span.start, span.end);
                if let DeviceSpanKind::Item { lane, .. } = &mut span.kind {
                    *lane = take_lane(&mut lanes, start, end);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lanes_of(trace: &DeviceTrace) -> Vec<(u32, u32)> {
        trace
            .spans
            .iter()
            .filter_map(|span| match span.kind {
                DeviceSpanKind::Item { unit, lane, .. } => Some((unit, lane)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn an_item_takes_the_lowest_lane_free_at_its_start() {
        let mut trace = DeviceTrace::new(&DeviceConfig {
            ccm_units: 2,
            ccm_sub_cores: 1,
            ccm_uthreads_per_sub_core: 2,
            ..DeviceConfig::default()
        });
        trace.item(0, 1, 0, Ticks(0), Ticks(10), (0, 0));
        trace.item(0, 1, 2, Ticks(0), Ticks(20), (0, 0));
        trace.item(1, 1, 1, Ticks(0), Ticks(5), (0, 0));
        // Lane 0 of unit 0 frees at 10: the item starting then takes it.
        trace.item(0, 1, 4, Ticks(10), Ticks(30), (0, 0));
        trace.finish(Ticks(30));
        assert_eq!(lanes_of(&trace), vec![(0, 0), (0, 1), (1, 0), (0, 0)]);
    }

    /// Items are recorded as they end. Given lanes in that order, these four (never more than
    /// two at once) would need three: the short item 2 takes lane 0 at 8, and item 3, which
    /// started at 7, finds both lanes busy. In start order two lanes do.
    #[test]
    fn items_recorded_as_they_end_need_no_more_lanes_than_run_at_once() {
        let mut trace = DeviceTrace::new(&DeviceConfig {
            ccm_units: 1,
            ccm_sub_cores: 1,
            ccm_uthreads_per_sub_core: 2,
            ..DeviceConfig::default()
        });
        for (item, start, end) in [(0, 0, 6), (1, 5, 8), (2, 8, 9), (3, 7, 16)] {
            trace.item(0, 1, item, Ticks(start), Ticks(end), (0, 0));
        }
        trace.finish(Ticks(16));
        assert_eq!(lanes_of(&trace), vec![(0, 0), (0, 1), (0, 1), (0, 0)]);
    }

    #[test]
    fn a_dma_request_spans_preparation_then_transfer_on_one_lane() {
        let mut trace = DeviceTrace::new(&DeviceConfig::default());
        trace.dma_submitted(0, Ticks(0));
        trace.dma_submitted(1, Ticks(5));
        trace.dma_sent(0, Ticks(100), Ticks(200), 3, 72, 0);
        trace.dma_sent(1, Ticks(105), Ticks(210), 3, 72, 0);
        let lanes: Vec<(u32, Ticks, Ticks)> = trace
            .spans
            .iter()
            .map(|span| match span.kind {
                DeviceSpanKind::DmaPrepare { lane, .. }
                | DeviceSpanKind::DmaTransfer { lane, .. } => (lane, span.start, span.end),
                _ => (u32::MAX, span.start, span.end),
            })
            .collect();
        assert_eq!(
            lanes,
            vec![
                (0, Ticks(0), Ticks(100)),
                (0, Ticks(100), Ticks(200)),
                (1, Ticks(5), Ticks(105)),
                (1, Ticks(105), Ticks(210)),
            ]
        );
    }
}
