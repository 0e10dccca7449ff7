//! The DMA engine: a bus master that writes host memory with CXL.io posted writes.
//!
//! A request waits for one of the engine's channels, spends the preparation latency there
//! (descriptor fetch and set-up, the paper's 500 ns per request), then its descriptors go on
//! the device-to-host direction of the link back to back, in chain order. Each write lands in
//! host memory one half CXL.io round trip after it leaves the wire; publishing writes (tails,
//! status) land as release stores, so they never become visible before the writes ahead of
//! them (posted-write ordering). Requests are prepared and sent in submission order, so a tail
//! of a later request never lands before one of an earlier request.

use firmware::hal::{DmaDescriptor, DmaKind, DmaRequest, DmaTag};
use shared_abi::{Status, Ticks};
use std::collections::VecDeque;

/// Requests the engine queues at most (beyond that `submit` answers `QueueFull`).
pub const QUEUE_DEPTH: usize = 128;

/// One write on its way to host memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Landing {
    /// Host physical address.
    pub destination: u64,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// What it is.
    pub kind: DmaKind,
}

/// The engine's bookkeeping.
#[derive(Debug)]
pub struct DmaEngineModel {
    next_tag: u64,
    channels_free_at: Vec<Ticks>,
    last_prepared: Ticks,
    queued: usize,
    /// Finished requests for the firmware, in submission order.
    pub completions: VecDeque<firmware::hal::DmaCompletion>,
    busy_until: Ticks,
    busy_total: Ticks,
    /// Requests sent.
    pub requests: u64,
    /// Descriptors sent.
    pub writes: u64,
}

impl DmaEngineModel {
    /// An idle engine with `channels` preparation channels (0: unlimited).
    pub fn new(channels: u32) -> DmaEngineModel {
        DmaEngineModel {
            next_tag: 0,
            channels_free_at: vec![Ticks::ZERO; channels as usize],
            last_prepared: Ticks::ZERO,
            queued: 0,
            completions: VecDeque::new(),
            busy_until: Ticks::ZERO,
            busy_total: Ticks::ZERO,
            requests: 0,
            writes: 0,
        }
    }

    /// Whether the queue has room.
    pub fn has_room(&self) -> bool {
        self.queued < QUEUE_DEPTH
    }

    /// Accepts a request at `now`: returns its tag and when its preparation ends.
    pub fn accept(&mut self, now: Ticks, preparation: Ticks) -> (DmaTag, Ticks) {
        let tag = DmaTag(self.next_tag);
        self.next_tag += 1;
        self.queued += 1;
        if self.channels_free_at.is_empty() {
            // Unlimited channels: a pure latency, still in submission order.
            let end = now.plus(preparation).max(self.last_prepared);
            self.last_prepared = end;
            return (tag, end);
        }
        // The earliest free channel (ties: lowest index), never before an earlier request's
        // preparation started, so requests finish preparing in submission order.
        let (index, free_at) = self
            .channels_free_at
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(i, t)| (t, i))
            .unwrap_or((0, Ticks::ZERO));
        let start = now.max(free_at);
        let end = start.plus(preparation).max(self.last_prepared);
        if let Some(slot) = self.channels_free_at.get_mut(index) {
            *slot = end;
        }
        self.last_prepared = end;
        (tag, end)
    }

    /// A request finished sending at `at` (its writes are all on the wire).
    pub fn finished(&mut self, tag: DmaTag, status: Status, started: Ticks, landed: Ticks) {
        self.queued = self.queued.saturating_sub(1);
        self.requests += 1;
        self.completions
            .push_back(firmware::hal::DmaCompletion { tag, status });
        // Data-movement time: the union of [first byte on the wire, last byte landed].
        if started >= self.busy_until {
            self.busy_total = self.busy_total.plus(landed.since(started));
        } else {
            self.busy_total = self.busy_total.plus(landed.since(self.busy_until));
        }
        self.busy_until = self.busy_until.max(landed);
    }

    /// Time during which some DMA transfer was on the link or landing.
    pub fn busy(&self) -> Ticks {
        self.busy_total
    }
}

/// Checks one descriptor the firmware wrote, against device and host memory sizes.
pub fn check_descriptor(
    descriptor: &DmaDescriptor,
    device_size: u64,
    host_size: u64,
) -> Result<DmaKind, Status> {
    let kind = DmaKind::try_from(descriptor.kind)?;
    let length = u64::from(descriptor.length);
    if length == 0 || length % 8 != 0 || length > 4096 {
        return Err(Status::MalformedDescriptor);
    }
    if kind.publishes() && length != 8 {
        return Err(Status::MalformedDescriptor);
    }
    let source_end = descriptor
        .source
        .checked_add(length)
        .ok_or(Status::DeviceMemoryFault)?;
    if source_end > device_size {
        return Err(Status::DeviceMemoryFault);
    }
    let destination_end = descriptor
        .destination
        .checked_add(length)
        .ok_or(Status::TranslationFault)?;
    if destination_end > host_size || descriptor.destination % 8 != 0 {
        return Err(Status::TranslationFault);
    }
    Ok(kind)
}

/// Reads descriptor `index` of `request`'s ring address.
pub fn descriptor_address(request: &DmaRequest, offset: u32) -> shared_abi::DeviceAddress {
    firmware::scratch::ScratchLayout::cell(
        request.ring_base,
        request.first.wrapping_add(u64::from(offset)),
        request.ring_capacity,
        32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn descriptor(source: u64, destination: u64, length: u32, kind: DmaKind) -> DmaDescriptor {
        DmaDescriptor {
            source,
            destination,
            length,
            kind: kind as u32,
            index: 0,
        }
    }

    #[test]
    fn preparation_is_pipelined_and_ends_in_submission_order() {
        let mut engine = DmaEngineModel::new(0);
        let (_, first) = engine.accept(Ticks::ZERO, Ticks::from_ns(500));
        let (_, second) = engine.accept(Ticks::from_ns(10), Ticks::from_ns(500));
        assert_eq!(first, Ticks::from_ns(500));
        assert_eq!(second, Ticks::from_ns(510));
    }

    #[test]
    fn limited_channels_queue_requests_behind_each_other() {
        let mut engine = DmaEngineModel::new(1);
        let (_, first) = engine.accept(Ticks::ZERO, Ticks::from_ns(500));
        let (_, second) = engine.accept(Ticks::ZERO, Ticks::from_ns(500));
        assert_eq!(first, Ticks::from_ns(500));
        assert_eq!(second, Ticks::from_ns(1000));
    }

    #[test]
    fn data_movement_time_counts_overlapping_requests_once() {
        let mut engine = DmaEngineModel::new(0);
        let (a, _) = engine.accept(Ticks::ZERO, Ticks::ZERO);
        let (b, _) = engine.accept(Ticks::ZERO, Ticks::ZERO);
        engine.finished(a, Status::Ok, Ticks(0), Ticks(100));
        engine.finished(b, Status::Ok, Ticks(50), Ticks(150));
        assert_eq!(engine.busy(), Ticks(150));
        assert_eq!(engine.completions.len(), 2);
    }

    #[test]
    fn descriptors_must_stay_inside_both_memories_and_tails_are_single_words() {
        let ok = descriptor(0, 8, 32, DmaKind::Payload);
        assert_eq!(check_descriptor(&ok, 64, 64), Ok(DmaKind::Payload));
        assert_eq!(
            check_descriptor(&descriptor(40, 0, 32, DmaKind::Payload), 64, 64),
            Err(Status::DeviceMemoryFault)
        );
        assert_eq!(
            check_descriptor(&descriptor(0, 40, 32, DmaKind::Payload), 64, 64),
            Err(Status::TranslationFault)
        );
        assert_eq!(
            check_descriptor(
                &descriptor(0, u64::MAX - 4, 8, DmaKind::Payload),
                64,
                u64::MAX
            ),
            Err(Status::TranslationFault)
        );
        assert_eq!(
            check_descriptor(&descriptor(0, 0, 12, DmaKind::Payload), 64, 64),
            Err(Status::MalformedDescriptor)
        );
        assert_eq!(
            check_descriptor(&descriptor(0, 0, 16, DmaKind::MetadataTail), 64, 64),
            Err(Status::MalformedDescriptor)
        );
        let mut unknown = ok;
        unknown.kind = 99;
        assert_eq!(
            check_descriptor(&unknown, 64, 64),
            Err(Status::MalformedDescriptor)
        );
    }
}
