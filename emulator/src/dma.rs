//! The DMA engine: a bus master that writes host memory with CXL.io posted writes.
//!
//! **Channels.** The engine has `device.dma_channels` channels (default 4: the card-to-host
//! channels of the DMA IP of the paper's prototype class, see
//! [`crate::DeviceConfig::dma_channels`]). A channel takes one request at a time and is busy
//! from the start of the request's preparation (descriptor fetch and set-up, the paper's
//! 500 ns per request, `device.dma_preparation_ns`) until the request's last write is on the
//! link. Preparations on different channels overlap; the writes of all channels share the
//! device-to-host direction of the link.
//!
//! **No queue in front of the channels.** A request is accepted only when a channel is free
//! to take it at once (the engine's queue depth is its channel count); otherwise
//! [`firmware::hal::DmaEngine::submit`] answers `QueueFull`. The XDMA IP has no request queue
//! either: software starts a channel on a descriptor list by setting the channel's Run bit, and
//! the channel works through that list until a descriptor with the Stop bit completes, which
//! its Status register reports (PG195, the H2C/C2H Channel Control and Status registers); only
//! then does it take the next list. A result
//! therefore never waits in an engine queue while it could still join the executor's open
//! batch: the firmware keeps it and sends it with the next request (natural batching, see
//! `firmware::executor`).
//!
//! **Order.** Requests complete in submission order (the firmware relies on it: a later
//! request's tails must never land before an earlier one's). Every request is accepted on a
//! free channel at its submission time and prepares for the same latency, so preparations end
//! in submission order (an end is also never earlier than the previous request's, whatever the
//! latency); the engine then puts a request's descriptors on the link back to back, in chain
//! order, and the link's device-to-host direction is one FIFO serializer
//! ([`crate::link::Direction`]), so a request's writes never go on the wire before an earlier
//! request's. Its completion is posted when its last write is on the wire, hence also in
//! submission order.
//!
//! **Landing.** Each write lands in host memory one half CXL.io round trip after it leaves
//! the wire; publishing writes (tails, status) land as release stores, so they never become
//! visible before the writes ahead of them (posted-write ordering).

use crate::dram::DeviceDram;
use cosim_link::sync::{AtomicU64, Ordering};
use firmware::hal::{DeviceMemory, DmaDescriptor, DmaKind, DmaRequest, DmaTag};
use shared_abi::{Status, Ticks};
use std::collections::VecDeque;
use zerocopy::IntoBytes;

/// One write on its way to host memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Landing {
    /// Host physical address.
    pub destination: u64,
    /// The bytes.
    pub bytes: LandingBytes,
    /// What it is.
    pub kind: DmaKind,
}

/// Bytes a write of at most this many carries in its event, without a buffer.
pub const INLINE_BYTES: usize = 32;

/// A write's bytes: held in the event itself when they are few (a record, a tail, a small
/// payload: most writes), in a buffer otherwise (a simulator economy: no buffer to take and
/// give back per write).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LandingBytes {
    /// `length` (at most [`INLINE_BYTES`]) bytes at the start of `bytes`.
    Inline {
        /// How many of `bytes` are the write's.
        length: u8,
        /// The bytes, zero beyond `length`.
        bytes: [u8; INLINE_BYTES],
    },
    /// More than [`INLINE_BYTES`] bytes.
    Buffer(Vec<u8>),
}

impl LandingBytes {
    /// The write's bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        match self {
            LandingBytes::Inline { length, bytes } => {
                bytes.split_at(usize::from(*length).min(INLINE_BYTES)).0
            }
            LandingBytes::Buffer(bytes) => bytes,
        }
    }

    /// The write's bytes, to fill.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        match self {
            LandingBytes::Inline { length, bytes } => {
                let length = usize::from(*length).min(INLINE_BYTES);
                bytes.split_at_mut(length).0
            }
            LandingBytes::Buffer(bytes) => bytes,
        }
    }
}

/// The engine's bookkeeping.
#[derive(Debug)]
pub struct DmaEngineModel {
    next_tag: u64,
    /// Channels (at least 1, see [`crate::DeviceConfig::validate`]).
    channels: u32,
    /// Channels holding a request: accepted, and not all of its writes on the link yet.
    busy_channels: u32,
    /// When the latest accepted request's preparation ends.
    last_prepared: Ticks,
    /// Finished requests for the firmware, in submission order.
    pub completions: VecDeque<firmware::hal::DmaCompletion>,
    busy_until: Ticks,
    busy_total: Ticks,
    /// Requests sent.
    pub requests: u64,
    /// Descriptors sent.
    pub writes: u64,
    /// The descriptors of the request going on the wire ([`read_chain`]) on the general path
    /// of `crate::hal_impl::Hardware::send_request` (the common case reads them in place,
    /// [`chain_words`]), kept for the next request's (a simulator economy too).
    pub chain: Vec<DmaDescriptor>,
}

impl DmaEngineModel {
    /// An idle engine with `channels` channels.
    pub fn new(channels: u32) -> DmaEngineModel {
        DmaEngineModel {
            next_tag: 0,
            channels,
            busy_channels: 0,
            last_prepared: Ticks::ZERO,
            completions: VecDeque::new(),
            busy_until: Ticks::ZERO,
            busy_total: Ticks::ZERO,
            requests: 0,
            writes: 0,
            chain: Vec::new(),
        }
    }

    /// Whether a channel is free to take a request now (the engine has no queue beyond its
    /// channels).
    pub fn has_room(&self) -> bool {
        self.busy_channels < self.channels
    }

    /// Channels holding a request now.
    pub fn busy_channels(&self) -> u32 {
        self.busy_channels
    }

    /// Accepts a request at `now` on a free channel (the caller checked
    /// [`DmaEngineModel::has_room`]): returns its tag and when its preparation ends. The
    /// channel stays busy until [`DmaEngineModel::finished`].
    pub fn accept(&mut self, now: Ticks, preparation: Ticks) -> (DmaTag, Ticks) {
        let tag = DmaTag(self.next_tag);
        self.next_tag += 1;
        self.busy_channels += 1;
        // Never before an earlier request's preparation ends: requests go on the link, and
        // complete, in submission order.
        let end = now.plus(preparation).max(self.last_prepared);
        self.last_prepared = end;
        (tag, end)
    }

    /// Frees the channels of `requests` accepted requests dropped before any of their writes
    /// went on the wire (their tenant was detached from a shared device,
    /// `crate::cosim::tenants`): they never complete.
    pub fn cancel(&mut self, requests: u32) {
        self.busy_channels = self.busy_channels.saturating_sub(requests);
    }

    /// A request has all its writes on the wire: its channel is free, and its completion is
    /// posted. `started`: its first byte on the wire; `landed`: its last write landed.
    pub fn finished(&mut self, tag: DmaTag, status: Status, started: Ticks, landed: Ticks) {
        self.busy_channels = self.busy_channels.saturating_sub(1);
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

/// Reads `request`'s descriptors into `chain` with one device-memory read per contiguous run
/// of its ring (two at most): the descriptors [`descriptor_address`] names, in chain order.
/// `None` (`chain` then holds nothing of use) when that takes more than a plain run: a ring
/// of no slots, a chain longer than its ring or whose indices wrap around, a ring whose end
/// address overflows, or a run outside device memory. The caller then reads the descriptors
/// one by one, as the engine's status must name the first that fails.
pub fn read_chain(
    dram: &DeviceDram,
    request: &DmaRequest,
    chain: &mut Vec<DmaDescriptor>,
) -> Option<()> {
    let capacity = u64::from(request.ring_capacity);
    let count = u64::from(request.count);
    if capacity == 0 || count > capacity {
        return None;
    }
    request.first.checked_add(count)?;
    let ring_bytes = capacity.checked_mul(DESCRIPTOR_BYTES)?;
    // The whole ring inside device memory before anything is sized from its count (a
    // request's count never exceeds its ring's capacity, checked above).
    let ring_end = request.ring_base.0.checked_add(ring_bytes)?;
    if ring_end > dram.size() {
        return None;
    }
    // start < capacity, and the ring's end does not overflow: no address below saturates.
    let start = request.first.checked_rem(capacity)?;
    let first_run = usize::try_from(count.min(capacity.checked_sub(start)?)).ok()?;
    chain.clear();
    chain.resize(usize::try_from(count).ok()?, DmaDescriptor::default());
    let (head, tail) = chain.split_at_mut_checked(first_run)?;
    let address = request
        .ring_base
        .0
        .checked_add(start.checked_mul(DESCRIPTOR_BYTES)?)?;
    dram.read(shared_abi::DeviceAddress(address), head.as_mut_bytes())
        .ok()?;
    if !tail.is_empty() {
        dram.read(request.ring_base, tail.as_mut_bytes()).ok()?;
    }
    Some(())
}

/// The words of device memory `words` (of `dram`) that hold `request`'s descriptors, in
/// chain order: one or two runs of whole descriptors, four words each, for the engine to
/// check and send in one pass without copying them out first. `None` whenever
/// [`read_chain`] would return `None`, and also when the ring's base is not a whole word's
/// address (the caller then reads the chain with [`read_chain`] or one descriptor at a
/// time).
pub fn chain_words<'a>(
    dram: &DeviceDram,
    words: &'a [AtomicU64],
    request: &DmaRequest,
) -> Option<(&'a [AtomicU64], &'a [AtomicU64])> {
    let capacity = u64::from(request.ring_capacity);
    let count = u64::from(request.count);
    if capacity == 0 || count > capacity || request.ring_base.0 % 8 != 0 {
        return None;
    }
    request.first.checked_add(count)?;
    let ring_end = request
        .ring_base
        .0
        .checked_add(capacity.checked_mul(DESCRIPTOR_BYTES)?)?;
    if ring_end > dram.size() {
        return None;
    }
    let start = request.first.checked_rem(capacity)?;
    let first_run = count.min(capacity.checked_sub(start)?);
    let base = usize::try_from(request.ring_base.0 / 8).ok()?;
    // Word index of a descriptor slot, and the words of `descriptors` slots from it.
    let run = |slot: u64, descriptors: u64| -> Option<&'a [AtomicU64]> {
        let first = base.checked_add(usize::try_from(slot.checked_mul(DESCRIPTOR_WORDS)?).ok()?)?;
        let length = usize::try_from(descriptors.checked_mul(DESCRIPTOR_WORDS)?).ok()?;
        words.get(first..first.checked_add(length)?)
    };
    Some((run(start, first_run)?, run(0, count - first_run)?))
}

/// The descriptor held in four words of device memory (as [`read_chain`] reads it).
#[inline(always)]
pub fn descriptor_in(words: &[AtomicU64; 4]) -> DmaDescriptor {
    let mut descriptor = DmaDescriptor::default();
    for (chunk, word) in descriptor.as_mut_bytes().chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
    }
    descriptor
}

/// Words of one descriptor in the firmware's ring.
const DESCRIPTOR_WORDS: u64 = DESCRIPTOR_BYTES / 8;

/// Bytes of one descriptor in the firmware's ring.
const DESCRIPTOR_BYTES: u64 = core::mem::size_of::<DmaDescriptor>() as u64;

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

    /// The chain read in runs holds the descriptors read one by one at their addresses, also
    /// when it wraps around its ring; a chain that cannot be read as plain runs is refused.
    #[test]
    fn a_chain_read_in_runs_is_the_descriptors_read_one_by_one() {
        use firmware::hal::DeviceMemory;
        use shared_abi::DeviceAddress;
        let dram = DeviceDram::new(1 << 16);
        let ring_base = DeviceAddress(0x1000);
        let capacity = 8_u32;
        for slot in 0..u64::from(capacity) {
            let written = descriptor(slot, 0x100 * slot, 8, DmaKind::Payload);
            dram.write(DeviceAddress(ring_base.0 + 32 * slot), written.as_bytes())
                .unwrap();
        }
        let request = |first: u64, count: u32, ring_capacity: u32| DmaRequest {
            ring_base,
            ring_capacity,
            first,
            count,
            payloads: 0,
        };
        let mut chain = Vec::new();
        for (first, count) in [(0, 1), (0, 8), (3, 5), (6, 4), (13, 8), (7, 2), (5, 0)] {
            let request = request(first, count, capacity);
            assert_eq!(read_chain(&dram, &request, &mut chain), Some(()));
            let one_by_one: Vec<DmaDescriptor> = (0..count)
                .map(|offset| {
                    dram.read_value(descriptor_address(&request, offset))
                        .unwrap()
                })
                .collect();
            assert_eq!(chain, one_by_one, "first {first}, count {count}");
        }
        assert_eq!(
            read_chain(&dram, &request(0, 9, capacity), &mut chain),
            None
        );
        assert_eq!(read_chain(&dram, &request(0, 1, 0), &mut chain), None);
        assert_eq!(
            read_chain(&dram, &request(u64::MAX, 2, capacity), &mut chain),
            None
        );
        let outside = DmaRequest {
            ring_base: DeviceAddress((1 << 16) - 64),
            ..request(0, 4, capacity)
        };
        assert_eq!(read_chain(&dram, &outside, &mut chain), None);
        // A ring that runs past the end of device memory is refused before its chain is
        // sized, even when the descriptors asked for lie inside (they are then read one by
        // one).
        let past_the_end = DmaRequest {
            ring_base: DeviceAddress((1 << 16) - 64),
            ..request(0, 1, capacity)
        };
        assert_eq!(read_chain(&dram, &past_the_end, &mut chain), None);
    }

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
    fn a_channel_is_busy_from_its_preparation_until_its_request_finishes() {
        let mut engine = DmaEngineModel::new(1);
        assert!(engine.has_room());
        let (tag, prepared) = engine.accept(Ticks::ZERO, Ticks::from_ns(500));
        assert_eq!(prepared, Ticks::from_ns(500));
        assert!(!engine.has_room(), "the only channel holds the request");
        // Preparation is over, but the writes are not all on the link yet: still busy.
        assert_eq!(engine.busy_channels(), 1);
        engine.finished(tag, Status::Ok, Ticks::from_ns(500), Ticks::from_ns(700));
        assert!(
            engine.has_room(),
            "the last write is on the link: the channel is free"
        );
        let (_, second) = engine.accept(Ticks::from_ns(503), Ticks::from_ns(500));
        assert_eq!(second, Ticks::from_ns(1003));
    }

    #[test]
    fn channels_prepare_in_parallel_and_there_is_no_queue_beyond_them() {
        let mut engine = DmaEngineModel::new(4);
        let ends: Vec<Ticks> = (0..4)
            .map(|i| engine.accept(Ticks::from_ns(10 * i), Ticks::from_ns(500)).1)
            .collect();
        assert_eq!(
            ends,
            [500, 510, 520, 530].map(Ticks::from_ns),
            "four preparations overlap"
        );
        assert!(!engine.has_room(), "a fifth request has no channel");
    }

    #[test]
    fn a_preparation_never_ends_before_an_earlier_requests() {
        let mut engine = DmaEngineModel::new(2);
        let (_, first) = engine.accept(Ticks::ZERO, Ticks::from_ns(500));
        let (_, second) = engine.accept(Ticks::from_ns(10), Ticks::from_ns(100));
        assert_eq!(first, Ticks::from_ns(500));
        assert_eq!(second, first, "held back to keep submission order");
    }

    #[test]
    fn data_movement_time_counts_overlapping_requests_once() {
        let mut engine = DmaEngineModel::new(2);
        let (a, _) = engine.accept(Ticks::ZERO, Ticks::ZERO);
        let (b, _) = engine.accept(Ticks::ZERO, Ticks::ZERO);
        engine.finished(a, Status::Ok, Ticks(0), Ticks(100));
        engine.finished(b, Status::Ok, Ticks(50), Ticks(150));
        assert_eq!(engine.busy(), Ticks(150));
        assert_eq!(engine.completions.len(), 2);
        assert_eq!(engine.busy_channels(), 0);
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
