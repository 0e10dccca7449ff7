//! The firmware HAL implemented on the emulator's models.
//!
//! [`Hardware`] is everything of the device except the firmware itself: clock, device memory,
//! the CCM, the DMA engine, the link, the mailbox registers and the event queue. The firmware
//! borrows it for each [`firmware::Firmware::step`].

use crate::ccm::Ccm;
use crate::config::DeviceConfig;
use crate::device_queue::DeviceQueue;
use crate::dma::DmaEngineModel;
use crate::dram::DeviceDram;
use crate::link::Link;
use crate::sim::time::one_way;
use crate::trace::{DeviceInstant, DeviceTrace, LinkDirection, LinkTraffic};
use cosim_link::link::LinkResponse;
use cosim_link::phys::PhysicalMemory;
use cosim_link::sync::Arc;
use cosim_link::sync::{AtomicU64, Ordering as AtomicOrdering};
use firmware::hal::{
    Clock, ComputeUnits, DeviceAtomics, DeviceMemory, DmaCompletion, DmaEngine, DmaError, DmaKind,
    DmaRequest, DmaTag, HostEvent, ItemCompletion, KernelLaunch, MemoryFault, Registers,
};
use firmware::FirmwareError;
use shared_abi::{mailbox, DeviceAddress, Status, Ticks};
use std::collections::{BTreeMap, VecDeque};

/// A device event.
#[derive(Debug)]
pub enum Event {
    /// A host CXL.mem store reaches device memory (`token`: a synchronous BS launch).
    HostStore {
        /// Where.
        address: DeviceAddress,
        /// What.
        data: Vec<u8>,
        /// The synchronous store's token.
        token: Option<u64>,
    },
    /// A host CXL.mem load reaches the device; the response is already timed.
    HostLoad {
        /// Where.
        address: DeviceAddress,
        /// Bytes.
        length: u64,
        /// The host's token.
        token: u64,
        /// When the last byte is back at the host.
        respond_at: Ticks,
    },
    /// A host CXL.io register write reaches the device.
    IoWrite {
        /// Register offset.
        register: u64,
        /// Value.
        value: u64,
    },
    /// A host CXL.io register read reaches the device.
    IoRead {
        /// Register offset.
        register: u64,
        /// The host's token.
        token: u64,
    },
    /// The firmware may look at a mailbox write (after its handling latency).
    Firmware(MailboxEvent),
    /// The CCM asked to be woken now (one of its timers is due: see `emulator::ccm`).
    CcmWake,
    /// A DMA request finished preparation and goes on the wire.
    DmaPrepared {
        /// Its tag.
        tag: DmaTag,
        /// The request.
        request: DmaRequest,
    },
    /// A DMA write lands in host memory.
    DmaLand(crate::dma::Landing),
    /// A DMA request has all its writes on the wire.
    DmaSent {
        /// Its tag.
        tag: DmaTag,
        /// Its status.
        status: Status,
        /// First byte on the wire.
        started: Ticks,
        /// Last write landed.
        landed: Ticks,
    },
    /// A response reaches the host.
    Deliver(LinkResponse),
    /// The firmware's mailbox write takes effect (after its handling latency).
    MailboxWrite {
        /// Register offset.
        offset: u64,
        /// Value.
        value: u64,
    },
}

/// A host mailbox write for the firmware ([`Event::Firmware`]): 16 bytes, where a
/// [`HostEvent`] (which may hold a 64-byte launch descriptor) would make every event, the
/// millions of DMA landings included, that large too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MailboxEvent {
    /// An RP doorbell: the device address of the descriptor.
    Doorbell(u64),
    /// An RP dequeue.
    Dequeue,
}

impl From<MailboxEvent> for HostEvent {
    fn from(event: MailboxEvent) -> HostEvent {
        match event {
            MailboxEvent::Doorbell(address) => HostEvent::Doorbell(address),
            MailboxEvent::Dequeue => HostEvent::Dequeue,
        }
    }
}

/// The device's hardware, as the firmware sees it through the HAL.
#[derive(Debug)]
pub struct Hardware {
    /// The current virtual time.
    pub now: Ticks,
    /// Pending events.
    pub queue: DeviceQueue,
    /// Parameters.
    pub config: DeviceConfig,
    /// Device memory.
    pub dram: DeviceDram,
    /// The CCM.
    pub ccm: Ccm,
    /// The DMA engine.
    pub dma: DmaEngineModel,
    /// The link.
    pub link: Link,
    /// Host physical memory (where DMA lands).
    pub host_memory: Arc<PhysicalMemory>,
    /// Mailbox registers.
    pub mailbox: [u64; (mailbox::WINDOW_LENGTH / 8) as usize],
    /// The register page served to an attached host, which mirrors the mailbox.
    pub register_page: Option<crate::registers::RegisterPage>,
    /// Host events for the firmware.
    pub host_events: VecDeque<HostEvent>,
    /// Synchronous launch stores waiting for their response, by tag.
    pub bulk_tokens: BTreeMap<u32, VecDeque<u64>>,
    /// Host CXL.mem stores may write device memory below this address only: above it lies the
    /// firmware's scratch area (DMA descriptor chains, staged records), which the memory
    /// controller keeps private to the device.
    pub host_writable_end: DeviceAddress,
    /// Interrupts raised.
    pub interrupts: u64,
    /// Wall-clock stress only (`None` in virtual time): a random extra delay of each DMA
    /// write's landing. Landings keep their order (each lands no earlier than the one before,
    /// the posted-write ordering the protocol relies on), and an interrupt never reaches the
    /// host before the writes it announces.
    pub landing_jitter: Option<cosim_link::jitter::Jitter>,
    /// The latest landing time handed out so far: an interrupt is posted behind the DMA
    /// writes before it and never reaches the host ahead of them.
    pub last_landing: Ticks,
    /// Fault injection (tests of the stress checks only): the jittered landings may overtake
    /// each other, breaking the posted-write ordering the protocol relies on.
    pub landings_unordered: bool,
    /// The run's timeline (`axle run --trace`); `None`, recording nothing, unless enabled.
    pub trace: Option<Box<DeviceTrace>>,
    /// The host's link requests in flight, bounded (`crate::cosim`'s "Bounds").
    pub host_in_flight: HostInFlight,
    /// What the simulator itself did (events, host turns, link calls).
    pub counts: crate::cosim::SimulatorCounts,
    /// Several tenants share the device ([`crate::cosim::tenants`]): the arbiter in front of
    /// the CCM and the tenants waiting for a DMA channel. `None` (one host, every run but
    /// `axle run-many`'s) leaves every path exactly as it was.
    pub sharing: Option<Box<crate::cosim::tenants::Sharing>>,
}

/// The host's link requests in flight: sent and not yet handled by the device, or (a load) whose
/// response has not yet been delivered. Bounded so that no host can make the device hold more
/// than its own memory's worth of host data, or more requests than
/// [`crate::cosim::MAX_HOST_REQUESTS_IN_FLIGHT`].
#[derive(Clone, Debug, Default)]
pub struct HostInFlight {
    /// Requests.
    pub requests: u64,
    /// Bytes they carry (store data, load lengths, then load responses).
    pub bytes: u64,
    /// The first request refused, and why; the run ends with it after the host's turn.
    pub refusal: Option<String>,
}

impl HostInFlight {
    /// A request of `bytes` leaves the device's hands.
    pub fn release(&mut self, requests: u64, bytes: u64) {
        self.requests = self.requests.saturating_sub(requests);
        self.bytes = self.bytes.saturating_sub(bytes);
    }
}

/// A DMA write of `bytes` lands at host physical address `destination` (inlined: the landings'
/// loop runs it a million times on a large run).
#[inline(always)]
fn land_bytes(host_memory: &PhysicalMemory, destination: u64, kind: DmaKind, bytes: &[u8]) {
    let address = shared_abi::HostPhysAddr(destination);
    let result = if kind.publishes() {
        // Edges D2 and D4: the tail is published with release semantics, after every
        // write before it in the chain.
        let mut word = [0u8; 8];
        word.copy_from_slice(bytes.get(..8).unwrap_or(&[0; 8]));
        host_memory.store_u64(
            address,
            u64::from_le_bytes(word),
            cosim_link::sync::Ordering::Release,
        )
    } else {
        // Edges D1 and D3: payload data and records, plain stores.
        host_memory.write_words(address, bytes)
    };
    if let Err(error) = result {
        landing_failed(destination, error);
    }
}

/// [`land_bytes`] into `words`, every word of `host_memory`: straight into them when the
/// write is whole aligned words inside them (every write `check_descriptor` let through), else
/// through [`land_bytes`], which reports what is wrong.
#[inline(always)]
fn land_in(
    words: &[AtomicU64],
    host_memory: &PhysicalMemory,
    destination: u64,
    kind: DmaKind,
    bytes: &[u8],
) {
    if let (0, Ok(first)) = (destination % 8, usize::try_from(destination / 8)) {
        if kind.publishes() {
            // Edges D2 and D4: the tail, a release store after every write before it.
            if let (Some(word), Some(value)) = (words.get(first), bytes.first_chunk::<8>()) {
                word.store(u64::from_le_bytes(*value), AtomicOrdering::Release);
                return;
            }
        } else if let (Some(record), Some(target)) = (
            bytes.first_chunk::<32>().filter(|_| bytes.len() == 32),
            words.get(first..).and_then(|rest| rest.first_chunk::<4>()),
        ) {
            // A record or a payload of 32 bytes (the commonest writes): four plain stores,
            // lowest address first, no loop.
            for (word, value) in target.iter().zip(record.chunks_exact(8)) {
                if let Ok(value) = <[u8; 8]>::try_from(value) {
                    word.store(u64::from_le_bytes(value), AtomicOrdering::Relaxed);
                }
            }
            return;
        } else if bytes.len() % 8 == 0 {
            // Edges D1 and D3: plain stores, lowest address first.
            let end = first.checked_add(bytes.len() / 8);
            if let Some(target) = end.and_then(|end| words.get(first..end)) {
                for (word, value) in target.iter().zip(bytes.chunks_exact(8)) {
                    if let Ok(value) = <[u8; 8]>::try_from(value) {
                        word.store(u64::from_le_bytes(value), AtomicOrdering::Relaxed);
                    }
                }
                return;
            }
        }
    }
    land_bytes(host_memory, destination, kind, bytes);
}

/// The `N` words of device memory's `words` from byte `source`, when it is a whole word's
/// address and they lie inside (the caller checked the range inside device memory).
#[inline(always)]
fn words_at<const N: usize>(words: &[AtomicU64], source: u64) -> Option<&[AtomicU64; N]> {
    if source % 8 != 0 {
        return None;
    }
    let first = usize::try_from(source / 8).ok()?;
    words.get(first..)?.first_chunk::<N>()
}

/// Four words' bytes, in address order, as `DeviceDram::read` gives them.
#[inline(always)]
fn words_bytes(words: &[AtomicU64; 4]) -> [u8; 32] {
    let mut bytes = [0; 32];
    for (chunk, word) in bytes.chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&word.load(AtomicOrdering::Relaxed).to_le_bytes());
    }
    bytes
}

/// Appends the bytes of `descriptor`'s write to the landing lane's buffer, for the landing
/// pushed next. Bounded: `check_descriptor` accepted the source range inside device memory
/// (and the firmware, not the host, wrote the chain: the scratch area is not host-writable).
/// A tail or a record of whole aligned words (every one the firmware makes) is copied from
/// device memory's `words` into the buffer; anything else is read through `DeviceDram::read`
/// into bytes staged there, [`Status::DeviceMemoryFault`] (nothing staged) if that fails.
#[inline(always)]
fn stage_write(
    queue: &mut DeviceQueue,
    dram: &DeviceDram,
    words: &[AtomicU64],
    descriptor: &firmware::hal::DmaDescriptor,
) -> Result<(), Status> {
    let length = descriptor.length as usize;
    let copied = match length {
        8 => words_at::<1>(words, descriptor.source)
            .map(|[word]| queue.append(&word.load(AtomicOrdering::Relaxed).to_le_bytes()))
            .is_some(),
        32 => words_at::<4>(words, descriptor.source)
            .map(|four| queue.append(&words_bytes(four)))
            .is_some(),
        _ => false,
    };
    if !copied {
        let bytes = queue.stage(length);
        if dram.read(DeviceAddress(descriptor.source), bytes).is_err() {
            queue.unstage(length);
            return Err(Status::DeviceMemoryFault);
        }
    }
    Ok(())
}

/// The link time of one DMA write, by its length: a record's (32 bytes) and a tail's (8)
/// looked up once per request, any other computed.
struct WireTimes {
    record: Ticks,
    tail: Ticks,
    overhead: u64,
    gbps: f64,
}

impl WireTimes {
    fn new(upstream: &mut crate::link::Direction, overhead: u64, gbps: f64) -> Self {
        Self {
            record: upstream.duration_of(32 + overhead, gbps),
            tail: upstream.duration_of(8 + overhead, gbps),
            overhead,
            gbps,
        }
    }

    /// The time on the wire of a write of `length` bytes.
    #[inline(always)]
    fn of(&self, upstream: &mut crate::link::Direction, length: u32) -> Ticks {
        match length {
            32 => self.record,
            8 => self.tail,
            _ => upstream.duration_of(u64::from(length) + self.overhead, self.gbps),
        }
    }
}

/// A request's writes on the wire ([`Hardware::send_request`]).
struct Sent {
    /// When the engine took it.
    started: Ticks,
    /// Its first write's first byte on the wire; `None`: no write.
    first_on_wire: Option<Ticks>,
    /// Its last write off the wire.
    last_on_wire: Ticks,
    /// Its last write landed.
    last_landed: Ticks,
    /// Writes and their bytes.
    written: (u32, u64),
    /// The link's upstream direction after them.
    upstream: crate::link::Direction,
}

/// check_descriptor bounds-checked the destination: this cannot happen, but a failed write
/// is logged, never a crash (out of line: the landings' path stays a few instructions).
#[cold]
#[inline(never)]
fn landing_failed(destination: u64, error: cosim_link::phys::PhysError) {
    log::error!("dma: landing at {destination:#x} failed: {error}");
}

impl Hardware {
    /// Moves the CCM's wake requests into the event queue.
    pub(crate) fn schedule_ccm(&mut self) {
        for at in self.ccm.take_wakes() {
            self.queue.push(at, Event::CcmWake);
        }
    }

    /// The CCM's wake is due now; returns whether an item ended (the firmware has work).
    pub fn ccm_wake(&mut self) -> bool {
        let now = self.now;
        let ended = self.ccm.on_wake_listed(now, &self.dram);
        self.schedule_ccm();
        if let Some(trace) = self.trace.as_deref_mut() {
            for item in self.ccm.ended() {
                let result = trace.result_of(item.tag, item.item, &self.dram);
                trace.item(item.unit, item.tag, item.item, item.started, now, result);
            }
        }
        ended > 0
    }

    /// A prepared request goes on the wire.
    pub fn send_request(&mut self, tag: DmaTag, request: DmaRequest) {
        let device_size = self.dram.size();
        let host_size = self.host_memory.len();
        if self.landing_jitter.is_none() && self.trace.is_none() {
            // The common case: the chain checked and sent in one pass over the ring.
            if let Some(sent) = self.send_in_place(&request, device_size, host_size) {
                self.finish_send(tag, Status::Ok, sent);
                return;
            }
        }
        // The general path: jittered or traced writes, and whatever `send_in_place` leaves to
        // it (a chain that fails, or that does not lie in plain runs of whole words).
        // Check the whole chain first: a bad descriptor fails the request, and nothing of it
        // reaches host memory.
        // `count` is the firmware's, bounded by its descriptor ring.
        let mut status = Status::Ok;
        // The whole chain in one or two reads when it lies in plain runs of device memory,
        // else one descriptor at a time (each appended to `chain`). The writes are the first
        // `valid` descriptors of `chain`: all of them, or none when one fails its check.
        let mut chain = std::mem::take(&mut self.dma.chain);
        let whole_chain = crate::dma::read_chain(&self.dram, &request, &mut chain).is_some();
        if !whole_chain {
            chain.clear();
        }
        // How many descriptors passed their check, and the bytes their writes take (staged
        // for them at once below).
        let (mut valid, mut staged) = (0usize, 0usize);
        if whole_chain {
            // `read_chain` read `count` descriptors: checked in place.
            for descriptor in &chain {
                if let Err(error) = crate::dma::check_descriptor(descriptor, device_size, host_size)
                {
                    status = error;
                    break;
                }
                valid += 1;
                staged += descriptor.length as usize;
            }
        } else {
            for offset in 0..request.count {
                let checked = self
                    .dram
                    .read_value::<firmware::hal::DmaDescriptor>(crate::dma::descriptor_address(
                        &request, offset,
                    ))
                    .inspect(|descriptor| chain.push(*descriptor))
                    // The engine's status register reports a descriptor it cannot read as a
                    // device memory fault.
                    .map_err(|_| Status::DeviceMemoryFault)
                    .and_then(|d| {
                        crate::dma::check_descriptor(&d, device_size, host_size)
                            .map(|_| d.length as usize)
                    });
                match checked {
                    Ok(length) => {
                        valid += 1;
                        staged += length;
                    }
                    Err(error) => {
                        status = error;
                        break;
                    }
                }
            }
        }
        if status != Status::Ok {
            (valid, staged) = (0, 0);
        }
        let started = self.now;
        let mut last_on_wire = self.now;
        let mut last_landed = self.now;
        let latency = one_way(self.config.cxl_io_round_trip_ns);
        let mut first_on_wire = None;
        // Writes sent and their bytes.
        let mut written = (0u32, 0u64);
        // Whether a landing is jittered and a record traced, looked up once per request, not
        // once per write (the loop changes neither).
        let (jittered, traced) = (self.landing_jitter.is_some(), self.trace.is_some());
        // Device memory's words, for the writes from whole aligned words (every one the
        // firmware makes); the others read through `DeviceDram::read`.
        let words = self.dram.segment().words();
        // The link time of a record's and of a tail's write, looked up once per request.
        let (overhead, gbps) = (self.config.link_overhead_bytes, self.config.link_gbps);
        // The upstream direction of the link, worked on in a copy during the loop (its state in
        // registers, not stored back after each write) and put back after it.
        let mut upstream = self.link.upstream;
        let wire = WireTimes::new(&mut upstream, overhead, gbps);
        let now = self.now;
        // Room in the landing lane for the writes and their bytes, made once.
        self.queue.reserve_run(valid, staged);
        let writes = chain.get(..valid).unwrap_or_default();
        // Each write's landing (jittered in the wall-clock stress tests) and record (traced by
        // `axle run --trace`) handled as it goes; unjittered and untraced writes come here only
        // when `send_in_place` leaves them to this path.
        for descriptor in writes {
            // `check_descriptor` accepted the kind.
            let Ok(kind) = DmaKind::try_from(descriptor.kind) else {
                status = Status::MalformedDescriptor;
                break;
            };
            if let Err(error) = stage_write(&mut self.queue, &self.dram, words, descriptor) {
                status = error;
                break;
            }
            let length = descriptor.length as usize;
            let duration = wire.of(&mut upstream, descriptor.length);
            let (wire_start, on_wire) = upstream.send_span_taking(now, duration);
            first_on_wire.get_or_insert(wire_start);
            written = (written.0 + 1, written.1 + u64::from(descriptor.length));
            last_on_wire = on_wire;
            last_landed = on_wire.plus(latency);
            if jittered {
                if let Some(jitter) = self.landing_jitter.as_mut() {
                    last_landed = last_landed.plus(jitter.next_ticks());
                    if !self.landings_unordered {
                        last_landed = last_landed.max(self.last_landing);
                    }
                }
                self.last_landing = self.last_landing.max(last_landed);
            }
            if traced && kind == DmaKind::Metadata {
                if let Some(trace) = self.trace.as_deref_mut() {
                    trace.dma_record(tag.0, self.queue.staged(length));
                }
            }
            // The link serialises the writes, so landings come in time order (jittered ones
            // too, unless the fault injection lets them overtake): the queue's landing lane.
            // `check_descriptor` bounded the length to 4096: it fits 16 bits.
            self.queue
                .push_landing(last_landed, descriptor.destination, kind, length as u16);
        }
        self.dma.chain = chain;
        self.finish_send(
            tag,
            status,
            Sent {
                started,
                first_on_wire,
                last_on_wire,
                last_landed,
                written,
                upstream,
            },
        );
    }

    /// The common case of [`Hardware::send_request`] (no jitter, no trace): each descriptor is
    /// read from the ring in device memory, checked, and its write staged and queued, in one
    /// pass; what [`Hardware::send_request`]'s general path would have sent, with nothing left
    /// of it in the queue. `None`, and the queue as it was, when that path has something else
    /// to do: a chain not in plain runs of whole words ([`crate::dma::chain_words`]), a
    /// descriptor that fails its check (nothing of the request is sent), a write whose bytes
    /// cannot be read, a landing that would overtake the lane's last.
    ///
    /// One pass because the chain of a large request (hundreds of descriptors, 32 bytes each)
    /// read into a buffer, checked there and read again to send it was out of the first-level
    /// cache by the second read: three streams of misses where the ring read is one.
    fn send_in_place(
        &mut self,
        request: &DmaRequest,
        device_size: u64,
        host_size: u64,
    ) -> Option<Sent> {
        let words = self.dram.segment().words();
        let (head, tail) = crate::dma::chain_words(&self.dram, words, request)?;
        let latency = one_way(self.config.cxl_io_round_trip_ns);
        let (overhead, gbps) = (self.config.link_overhead_bytes, self.config.link_gbps);
        let mut upstream = self.link.upstream;
        let wire = WireTimes::new(&mut upstream, overhead, gbps);
        let now = self.now;
        // Room for the writes (their bytes grow the buffer as they come), made once.
        self.queue
            .reserve_run(usize::try_from(request.count).unwrap_or(0), 0);
        let mark = self.queue.mark();
        let idle_from = upstream.free_at();
        let mut written = (0u32, 0u64);
        for run in [head, tail] {
            for four in run.chunks_exact(4) {
                let Ok(four) = <&[AtomicU64; 4]>::try_from(four) else {
                    continue;
                };
                let descriptor = crate::dma::descriptor_in(four);
                let Ok(kind) = crate::dma::check_descriptor(&descriptor, device_size, host_size)
                else {
                    return self.queue.rewind_none(mark);
                };
                if stage_write(&mut self.queue, &self.dram, words, &descriptor).is_err() {
                    return self.queue.rewind_none(mark);
                }
                let length = descriptor.length;
                let duration = wire.of(&mut upstream, length);
                let (_, on_wire) = upstream.send_span_taking(now, duration);
                written = (written.0 + 1, written.1 + u64::from(length));
                // `check_descriptor` bounded the length to 4096: it fits 16 bits.
                if !self.queue.push_landing_in_lane(
                    on_wire.plus(latency),
                    descriptor.destination,
                    kind,
                    length as u16,
                ) {
                    return self.queue.rewind_none(mark);
                }
            }
        }
        let (mut first_on_wire, mut last_on_wire, mut last_landed) = (None, now, now);
        if written.0 > 0 {
            // As `send_span_taking` computed them: the first write went on the wire when
            // both it and the link were ready, the last left it when the link became free.
            first_on_wire = Some(now.max(idle_from));
            last_on_wire = upstream.free_at();
            last_landed = last_on_wire.plus(latency);
        }
        Some(Sent {
            started: now,
            first_on_wire,
            last_on_wire,
            last_landed,
            written,
            upstream,
        })
    }

    /// What follows a request's writes: the link's state kept, the completion scheduled.
    fn finish_send(&mut self, tag: DmaTag, status: Status, sent: Sent) {
        let Sent {
            started,
            first_on_wire,
            mut last_on_wire,
            last_landed,
            written,
            upstream,
        } = sent;
        let jittered = self.landing_jitter.is_some();
        self.link.upstream = upstream;
        if !jittered && written.0 > 0 {
            // Unjittered, each landing is no earlier than the one before (the link sends the
            // writes one after the other, each landing the same latency after it leaves the
            // wire): the latest handed out is the last's.
            self.last_landing = self.last_landing.max(last_landed);
        }
        self.dma.writes += u64::from(written.0);
        if first_on_wire.is_none() {
            // Nothing of the request goes on the wire (a descriptor failed its check): it
            // still completes behind the writes of earlier requests already on the wire, so
            // completions stay in submission order (the HAL's `DmaEngine` contract; found by
            // `firmware::conformance::dma_completion_order` with more channels than one). A
            // zero-byte send only reads when the upstream direction is free.
            last_on_wire = self
                .link
                .upstream
                .send_span(self.now, 0, self.config.link_gbps)
                .1;
        }
        if let Some(trace) = self.trace.as_deref_mut() {
            if let Some(first) = first_on_wire {
                trace.link(
                    LinkDirection::Upstream,
                    LinkTraffic::Dma,
                    written.1,
                    first,
                    last_on_wire,
                );
            }
            trace.dma_sent(
                tag.0,
                started,
                last_landed,
                written.0,
                written.1,
                status.code(),
            );
        }
        self.queue.push(
            last_on_wire,
            Event::DmaSent {
                tag,
                status,
                started,
                landed: last_landed,
            },
        );
    }

    /// A DMA write lands in host memory.
    pub fn land(&self, landing: &crate::dma::Landing) {
        land_bytes(
            &self.host_memory,
            landing.destination,
            landing.kind,
            landing.bytes.as_slice(),
        );
    }

    /// Lands the landing lane's front write if it is the earliest event given `bound` (the
    /// queue's [`DeviceQueue::landing_bound`] with no push since) and not after `until`, then
    /// the writes behind it while each is too, as the event loop would (one more event each,
    /// the clock at the last one's time); whether one landed. Inlined into the loop: a
    /// CCM-bound run (PageRank) lands one or two at a time, and a call's set-up would cost
    /// as much as the landing.
    #[inline(always)]
    pub fn land_run_before(&mut self, bound: u128, until: Ticks) -> bool {
        // Host memory's words resolved once for the run (each landing then checks only its
        // own range).
        let host_memory = &self.host_memory;
        let words = host_memory
            .words(shared_abi::HostPhysAddr(0), host_memory.len())
            .unwrap_or_default();
        let (landed, last) =
            self.queue
                .land_run_before(bound, until, |_, destination, kind, bytes| {
                    land_in(words, host_memory, destination, kind, bytes);
                });
        if landed == 0 {
            return false;
        }
        self.now = last;
        self.counts.events += landed;
        true
    }

    /// A DMA write lands ([`Hardware::land`]); its bytes' buffer, if it has one, is kept for
    /// a later write.
    #[inline]
    pub fn land_and_recycle(&mut self, landing: crate::dma::Landing) {
        self.land(&landing);
        self.queue.recycle(landing.bytes);
    }

    /// Sets a mailbox register now (and its mirror in the register page, if one is served).
    pub fn set_mailbox(&mut self, offset: u64, value: u64) {
        if let Some(register) = self.mailbox.get_mut((offset / 8) as usize) {
            *register = value;
            if let Some(page) = &self.register_page {
                page.mirror_mailbox(offset, value);
            }
        }
    }

    /// Delivers `response` to the host at `at`.
    pub fn respond(&mut self, at: Ticks, response: LinkResponse) {
        self.queue.push(at, Event::Deliver(response));
    }
}

impl Clock for Hardware {
    fn now(&self) -> Ticks {
        self.now
    }
}

impl DeviceMemory for Hardware {
    fn size(&self) -> u64 {
        self.dram.size()
    }
    #[inline(always)]
    fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
        self.dram.read(address, buffer)
    }
    #[inline(always)]
    fn unobserved_reads(&self) -> bool {
        self.dram.unobserved_reads()
    }
    #[inline(always)]
    fn read_u32_gather(
        &self,
        base: u64,
        indices: &[u32],
        out: &mut [u32],
    ) -> Result<(), MemoryFault> {
        self.dram.read_u32_gather(base, indices, out)
    }
    #[inline(always)]
    fn write(&self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
        self.dram.write(address, data)
    }
    #[inline(always)]
    fn prefetch(&self, address: DeviceAddress) {
        self.dram.prefetch(address)
    }
}

impl DeviceAtomics for Hardware {
    fn fetch_add_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
        self.dram.fetch_add_u32(address, value)
    }
    fn fetch_min_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
        self.dram.fetch_min_u32(address, value)
    }
    fn swap_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
        self.dram.swap_u32(address, value)
    }
    fn compare_exchange_u32(
        &self,
        address: DeviceAddress,
        current: u32,
        new: u32,
    ) -> Result<u32, MemoryFault> {
        self.dram.compare_exchange_u32(address, current, new)
    }
}

impl DmaEngine for Hardware {
    fn submit(&mut self, request: DmaRequest) -> Result<DmaTag, DmaError> {
        if !self.dma.has_room() {
            if let Some(sharing) = self.sharing.as_deref_mut() {
                // Another tenant's requests may hold every channel: this tenant's firmware is
                // stepped again when one frees ([`crate::cosim::tenants`]).
                sharing.wait_for_dma();
            }
            return Err(DmaError::QueueFull);
        }
        let (tag, prepared_at) = self
            .dma
            .accept(self.now, Ticks::from_ns(self.config.dma_preparation_ns));
        if let Some(trace) = self.trace.as_deref_mut() {
            trace.dma_submitted(tag.0, self.now);
        }
        if let Some(sharing) = self.sharing.as_deref_mut() {
            // Counted per tenant, so that a detached tenant's requests still in preparation
            // give their channels back at once ([`crate::cosim::tenants`]).
            sharing.dma_accepted();
        }
        self.queue
            .push(prepared_at, Event::DmaPrepared { tag, request });
        Ok(tag)
    }

    fn poll_completion(&mut self) -> Option<DmaCompletion> {
        self.dma.completions.pop_front()
    }
}

impl ComputeUnits for Hardware {
    fn dispatch(&mut self, launch: KernelLaunch) -> Result<(), FirmwareError> {
        if let Some(sharing) = self.sharing.as_deref_mut() {
            // Shared: the launch waits for the arbiter, which gives the CCM to one tenant's
            // dispatch at a time ([`crate::cosim::tenants`]).
            return sharing.request_ccm(launch, self.now);
        }
        if self.ccm.is_running() {
            return Err(FirmwareError::Busy);
        }
        if let Some(trace) = self.trace.as_deref_mut() {
            trace.dispatched(launch.tag, launch.kernel);
        }
        // The kernel as the firmware decoded it when the command arrived: no second read of
        // the command or its parameter block, which the host may have overwritten since.
        self.ccm.dispatch(
            self.now,
            launch.kernel,
            launch.tag,
            launch.item_range(),
            &self.dram,
        );
        self.schedule_ccm();
        Ok(())
    }

    fn poll_item(&mut self) -> Option<ItemCompletion> {
        self.ccm.completions.pop_front()
    }
}

impl Registers for Hardware {
    fn take_event(&mut self) -> Option<HostEvent> {
        self.host_events.pop_front()
    }

    fn write_mailbox(&mut self, offset: u64, value: u64) {
        if offset == mailbox::STATUS && value & 0xffff_ffff == mailbox::status::COMPLETE {
            // The firmware core notices the completion and posts it: one handling latency, as
            // for a doorbell.
            let handling = Ticks::from_cycles(
                self.config.firmware_mailbox_cycles,
                self.config.firmware_mhz,
            );
            self.queue.push(
                self.now.plus(handling),
                Event::MailboxWrite { offset, value },
            );
            return;
        }
        self.set_mailbox(offset, value);
    }

    fn complete_bulk_launch(&mut self, tag: u32, status: Status) {
        // The response of the synchronous store travels back over CXL.mem.
        let token = self.bulk_tokens.get_mut(&tag).and_then(VecDeque::pop_front);
        if self.bulk_tokens.get(&tag).is_some_and(VecDeque::is_empty) {
            self.bulk_tokens.remove(&tag);
        }
        match token {
            Some(token) => {
                let at = self.now.plus(one_way(self.config.cxl_mem_round_trip_ns));
                self.respond(
                    at,
                    LinkResponse::StoreDone {
                        token,
                        status: status.code(),
                    },
                );
            }
            None => log::warn!("emulator: bulk completion for tag {tag} with no waiting store"),
        }
    }

    fn raise_interrupt(&mut self, message: u64) {
        self.interrupts += 1;
        if let Some(trace) = self.trace.as_deref_mut() {
            trace.instant(self.now, DeviceInstant::Interrupt { message });
        }
        // The MSI-X write is posted behind the DMA writes: it never overtakes them, however
        // short the configured handling latency.
        let at = self
            .now
            .plus(Ticks::from_ns(self.config.interrupt_ns))
            .max(self.last_landing);
        self.respond(at, LinkResponse::Interrupt { message });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use firmware::hal::DmaDescriptor;
    use zerocopy::IntoBytes;

    /// Descriptor ring of the tests, in device memory.
    const RING: DeviceAddress = DeviceAddress(0x1000);
    /// Its capacity.
    const RING_CAPACITY: u32 = 256;
    /// Where the payload bytes come from (and, after them, each tail value).
    const SOURCE: u64 = 0x10000;

    /// A landing written straight into host memory's words leaves memory as the general path
    /// does, for the writes `check_descriptor` lets through and for those it would not (which
    /// write nothing, or the tail's zeroes).
    #[test]
    fn a_landing_into_resolved_words_writes_what_the_general_path_writes() {
        let cases: [(u64, DmaKind, Vec<u8>); 8] = [
            (0, DmaKind::Payload, (1..=16).collect()),
            (16, DmaKind::Metadata, (17..=48).collect()),
            (8, DmaKind::MetadataTail, (49..=56).collect()),
            (52, DmaKind::Payload, vec![9; 8]),
            (56, DmaKind::Payload, vec![7; 16]),
            (48, DmaKind::Payload, vec![5; 12]),
            (56, DmaKind::Payload, vec![6; 8]),
            (56, DmaKind::PayloadTail, vec![3; 4]),
        ];
        let direct = PhysicalMemory::new(64).unwrap();
        let general = PhysicalMemory::new(64).unwrap();
        let words = direct
            .words(shared_abi::HostPhysAddr(0), direct.len())
            .unwrap();
        for (destination, kind, bytes) in &cases {
            land_in(words, &direct, *destination, *kind, bytes);
            land_bytes(&general, *destination, *kind, bytes);
            let (mut seen, mut expected) = ([0u8; 64], [0u8; 64]);
            direct
                .read_words(shared_abi::HostPhysAddr(0), &mut seen)
                .unwrap();
            general
                .read_words(shared_abi::HostPhysAddr(0), &mut expected)
                .unwrap();
            assert_eq!(seen, expected, "after {destination:#x} {kind:?}");
        }
        // The cases wrote something, and the last tail its zeroes over the payload before.
        let mut all = [0u8; 64];
        direct
            .read_words(shared_abi::HostPhysAddr(0), &mut all)
            .unwrap();
        assert_eq!(all[..8], [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(all[8..16], [49, 50, 51, 52, 53, 54, 55, 56]);
        assert_eq!(all[56..], [0; 8]);
    }

    /// An event is no larger than a DMA landing's (56 bytes: destination, up to 32 inline
    /// bytes, kind): every event is copied into the event queue and out again (the landings
    /// wait apart, in the queue's landing lane, but for those that overtake).
    #[test]
    fn an_event_is_no_larger_than_a_landing() {
        println!("Event {} bytes", std::mem::size_of::<Event>());
        assert!(std::mem::size_of::<Event>() <= std::mem::size_of::<crate::dma::Landing>().max(56));
        assert_eq!(
            HostEvent::from(MailboxEvent::Doorbell(0x40)),
            HostEvent::Doorbell(0x40)
        );
        assert_eq!(HostEvent::from(MailboxEvent::Dequeue), HostEvent::Dequeue);
    }

    fn hardware(channels: u32) -> Hardware {
        let config = DeviceConfig {
            dma_channels: channels,
            ..DeviceConfig::default()
        };
        Hardware {
            now: Ticks::ZERO,
            queue: DeviceQueue::default(),
            dram: DeviceDram::new(1 << 20),
            ccm: Ccm::new(&config),
            dma: DmaEngineModel::new(config.dma_channels),
            link: Link::default(),
            host_memory: Arc::new(PhysicalMemory::new(1 << 20).unwrap()),
            mailbox: [0; (mailbox::WINDOW_LENGTH / 8) as usize],
            register_page: None,
            host_events: VecDeque::new(),
            bulk_tokens: BTreeMap::new(),
            host_writable_end: DeviceAddress(0x1000),
            interrupts: 0,
            landing_jitter: None,
            last_landing: Ticks::ZERO,
            landings_unordered: false,
            trace: None,
            host_in_flight: Default::default(),
            counts: Default::default(),
            sharing: None,
            config,
        }
    }

    /// Writes a chain of `payloads` 32-byte payload writes and one payload-tail write (value
    /// `tail`) at descriptor `first`; returns its request.
    fn chain(hw: &mut Hardware, first: u64, payloads: u32, tail: u64) -> DmaRequest {
        let tail_source = SOURCE + 8 * tail;
        hw.dram
            .write(DeviceAddress(tail_source), &tail.to_le_bytes())
            .unwrap();
        let mut descriptors: Vec<DmaDescriptor> = (0..payloads)
            .map(|i| DmaDescriptor {
                source: SOURCE,
                destination: 0x1000 + 32 * u64::from(i),
                length: 32,
                kind: DmaKind::Payload as u32,
                index: 0,
            })
            .collect();
        descriptors.push(DmaDescriptor {
            source: tail_source,
            destination: 0x8000 + 8 * tail,
            length: 8,
            kind: DmaKind::PayloadTail as u32,
            index: tail,
        });
        for (offset, descriptor) in descriptors.iter().enumerate() {
            let request = DmaRequest {
                ring_base: RING,
                ring_capacity: RING_CAPACITY,
                first,
                count: 1,
                payloads: 0,
            };
            let address = crate::dma::descriptor_address(&request, offset as u32);
            hw.dram.write(address, descriptor.as_bytes()).unwrap();
        }
        DmaRequest {
            ring_base: RING,
            ring_capacity: RING_CAPACITY,
            first,
            count: payloads + 1,
            payloads,
        }
    }

    /// What the DMA events did, in the order they ran.
    #[derive(Debug, Default)]
    struct Observed {
        /// (time, tail value) of each payload-tail landing.
        tails: Vec<(Ticks, u64)>,
        /// (time, request) of each request's first write on the wire (its preparation end).
        prepared: Vec<(Ticks, DmaTag)>,
        /// (time, request) of each completion.
        completed: Vec<(Ticks, DmaTag)>,
    }

    /// Runs the DMA events due up to `until` (all of them with `None`).
    fn run(hw: &mut Hardware, until: Option<Ticks>, seen: &mut Observed) {
        while let Some(at) = hw.queue.peek_time() {
            if until.is_some_and(|until| at > until) {
                break;
            }
            let (at, event) = hw.queue.pop().unwrap();
            hw.now = at;
            match event {
                Event::DmaPrepared { tag, request } => {
                    seen.prepared.push((at, tag));
                    hw.send_request(tag, request);
                }
                Event::DmaLand(landing) => {
                    if landing.kind == DmaKind::PayloadTail {
                        let mut word = [0; 8];
                        word.copy_from_slice(landing.bytes.as_slice());
                        seen.tails.push((at, u64::from_le_bytes(word)));
                    }
                    hw.land(&landing);
                }
                Event::DmaSent {
                    tag,
                    status,
                    started,
                    landed,
                } => {
                    assert_eq!(status, Status::Ok);
                    seen.completed.push((at, tag));
                    hw.dma.finished(tag, status, started, landed);
                }
                other => panic!("unexpected event {other:?}"),
            }
        }
    }

    #[test]
    fn one_channel_serialises_preparation() {
        let mut hw = hardware(1);
        let preparation = Ticks::from_ns(hw.config.dma_preparation_ns);
        let first = chain(&mut hw, 0, 2, 1);
        let second = chain(&mut hw, 3, 2, 2);
        let a = hw.submit(first).unwrap();
        assert_eq!(
            hw.submit(second),
            Err(DmaError::QueueFull),
            "the only channel prepares the first request: no queue takes the second"
        );
        let mut seen = Observed::default();
        // Preparation ended but the writes are not all on the wire yet: still refused.
        run(&mut hw, Some(preparation), &mut seen);
        assert_eq!(seen.prepared, [(preparation, a)]);
        assert!(seen.completed.is_empty());
        assert_eq!(hw.submit(second), Err(DmaError::QueueFull));
        run(&mut hw, None, &mut seen);
        let (sent, tag) = seen.completed[0];
        assert_eq!(tag, a);
        assert!(sent > preparation);
        // The channel is free once the first request's last write is on the wire.
        hw.now = sent;
        let b = hw.submit(second).unwrap();
        run(&mut hw, None, &mut seen);
        assert_eq!(seen.prepared[1], (sent.plus(preparation), b));
        assert_eq!(seen.tails.iter().map(|t| t.1).collect::<Vec<_>>(), [1, 2]);
    }

    /// A chain is checked and sent in one pass over the ring; a descriptor failing its check
    /// after others were staged and queued leaves nothing of its request in the queue but
    /// its completion, with the failure, behind the writes of the request before it. A chain
    /// that wraps around its ring sends every write, in chain order.
    #[test]
    fn a_descriptor_failing_its_check_mid_chain_sends_nothing_of_its_request() {
        let mut hw = hardware(2);
        let good = chain(&mut hw, 0, 3, 1);
        hw.send_request(DmaTag(0), good);
        assert_eq!(hw.queue.len(), 5, "four writes and the completion");
        let bad = chain(&mut hw, 4, 3, 2);
        let address = crate::dma::descriptor_address(&bad, 2);
        let mut descriptor: DmaDescriptor = hw.dram.read_value(address).unwrap();
        descriptor.kind = 99;
        hw.dram.write(address, descriptor.as_bytes()).unwrap();
        let link = hw.link.upstream.free_at();
        hw.send_request(DmaTag(1), bad);
        assert_eq!(hw.queue.len(), 6, "only the failed request's completion");
        assert_eq!(
            hw.link.upstream.free_at(),
            link,
            "nothing of it on the link"
        );
        assert_eq!(hw.dma.writes, 4);
        // Wraps around the 256-slot ring: descriptors 254, 255, 0 and 1.
        let wrapped = chain(&mut hw, 254, 3, 3);
        hw.send_request(DmaTag(2), wrapped);
        assert_eq!(hw.dma.writes, 8);
        let mut sent = Vec::new();
        let mut landed = Vec::new();
        while let Some((_, event)) = hw.queue.pop() {
            match event {
                Event::DmaLand(landing) => landed.push((landing.destination, landing.kind)),
                Event::DmaSent { tag, status, .. } => sent.push((tag, status)),
                other => panic!("unexpected event {other:?}"),
            }
        }
        assert_eq!(
            sent,
            [
                (DmaTag(0), Status::Ok),
                (DmaTag(1), Status::MalformedDescriptor),
                (DmaTag(2), Status::Ok)
            ]
        );
        let one_chain = |tail: u64| {
            [0x1000, 0x1020, 0x1040]
                .map(|destination| (destination, DmaKind::Payload))
                .into_iter()
                .chain([(0x8000 + 8 * tail, DmaKind::PayloadTail)])
        };
        assert_eq!(landed, one_chain(1).chain(one_chain(3)).collect::<Vec<_>>());
    }

    #[test]
    fn requests_land_and_complete_in_submission_order_across_channels() {
        let mut hw = hardware(4);
        // A long request first, then three short ones a nanosecond apart: their preparations
        // overlap on four channels, their writes follow each other on the link.
        let mut first = 0;
        let mut tags = Vec::new();
        for (i, payloads) in [40u32, 1, 1, 1].into_iter().enumerate() {
            hw.now = Ticks::from_ns(i as u64);
            let request = chain(&mut hw, first, payloads, i as u64 + 1);
            first += u64::from(payloads) + 1;
            tags.push(hw.submit(request).unwrap());
        }
        let fifth = chain(&mut hw, first, 1, 5);
        assert_eq!(
            hw.submit(fifth),
            Err(DmaError::QueueFull),
            "four channels, four requests"
        );
        let mut seen = Observed::default();
        run(&mut hw, None, &mut seen);
        let prepared: Vec<DmaTag> = seen.prepared.iter().map(|p| p.1).collect();
        let completed: Vec<DmaTag> = seen.completed.iter().map(|c| c.1).collect();
        assert_eq!(prepared, tags);
        assert_eq!(completed, tags, "completions in submission order");
        let tail_values: Vec<u64> = seen.tails.iter().map(|t| t.1).collect();
        assert_eq!(tail_values, [1, 2, 3, 4], "tails land in submission order");
        assert!(
            seen.tails.windows(2).all(|pair| pair[0].0 < pair[1].0),
            "each tail lands after the one before: {:?}",
            seen.tails
        );
        // The three short requests were prepared long before the first one's 40 writes were
        // on the wire, and waited for them.
        assert!(seen.prepared[3].0 < seen.completed[0].0);
        assert_eq!(hw.dma.busy_channels(), 0);
        assert!(hw.submit(fifth).is_ok());
    }

    /// The emulator's HAL under `firmware::conformance`'s checks that need time to pass:
    /// [`conformance::Harness::advance`] runs the next event of the device's queue (DMA
    /// preparation, landing, completion, an interrupt's delivery to the host).
    struct Harness {
        hw: Hardware,
        /// MSI-X messages delivered to the host, oldest first.
        delivered: VecDeque<u64>,
    }

    use firmware::conformance;

    impl conformance::Harness for Harness {
        type Hal = Hardware;
        fn hal(&mut self) -> &mut Hardware {
            &mut self.hw
        }
        fn advance(&mut self) -> bool {
            let Some((at, event)) = self.hw.queue.pop() else {
                return false;
            };
            self.hw.now = at;
            match event {
                Event::DmaPrepared { tag, request } => self.hw.send_request(tag, request),
                Event::DmaLand(landing) => self.hw.land(&landing),
                Event::DmaSent {
                    tag,
                    status,
                    started,
                    landed,
                } => self.hw.dma.finished(tag, status, started, landed),
                Event::Deliver(LinkResponse::Interrupt { message }) => {
                    self.delivered.push_back(message);
                }
                other => panic!("unexpected event {other:?}"),
            }
            true
        }
        fn host_read(&mut self, address: u64, buffer: &mut [u8]) -> bool {
            self.hw
                .host_memory
                .read_words(shared_abi::HostPhysAddr(address), buffer)
                .is_ok()
        }
        fn host_write(&mut self, address: u64, data: &[u8]) -> bool {
            self.hw
                .host_memory
                .write_words(shared_abi::HostPhysAddr(address), data)
                .is_ok()
        }
        fn take_interrupt(&mut self) -> Option<u64> {
            self.delivered.pop_front()
        }
    }

    /// The device window of the checks (clear of the tests' descriptor ring and sources).
    const CHECK_DEVICE: DeviceAddress = DeviceAddress(0x4_0000);
    /// The host window of the checks.
    const CHECK_HOST: u64 = 0x2_0000;

    #[test]
    fn the_emulators_hal_passes_the_dma_and_interrupt_conformance_checks() {
        for channels in [1, 4, 64] {
            let mut harness = Harness {
                hw: hardware(channels),
                delivered: VecDeque::new(),
            };
            assert_eq!(
                conformance::dma_completion_order(&mut harness, CHECK_DEVICE, CHECK_HOST),
                Ok(()),
                "{channels} channels"
            );
            assert_eq!(
                conformance::interrupt_delivery(&mut harness, CHECK_DEVICE, CHECK_HOST),
                Ok(()),
                "{channels} channels"
            );
        }
    }

    #[test]
    fn dma_landings_that_overtake_each_other_fail_the_completion_order_check() {
        // The wall-clock stress's fault injection: jittered landings may overtake, so a
        // payload can land after the tail that publishes it.
        let mut hw = hardware(4);
        hw.landing_jitter = Some(cosim_link::jitter::Jitter::new(
            cosim_link::jitter::JitterSpec::new(1000, 5_000),
            3,
            0,
        ));
        hw.landings_unordered = true;
        let mut harness = Harness {
            hw,
            delivered: VecDeque::new(),
        };
        let violation = conformance::dma_completion_order(&mut harness, CHECK_DEVICE, CHECK_HOST)
            .expect_err("overtaking landings must be a violation");
        assert!(violation.clause.contains("tail"), "{violation:?}");
    }

    #[test]
    fn an_interrupt_that_overtakes_its_dma_writes_fails_the_delivery_check() {
        // Delivered 1 ns after it is raised, ignoring the landings still on their way: the
        // posted-write ordering broken.
        struct Early(Harness);
        impl conformance::Harness for Early {
            type Hal = Hardware;
            fn hal(&mut self) -> &mut Hardware {
                // Interrupts raised through the HAL are delivered early (the hook below).
                &mut self.0.hw
            }
            fn advance(&mut self) -> bool {
                // Deliver any interrupt already queued ahead of everything else.
                let mut rest = Vec::new();
                let mut delivered = false;
                while let Some((at, event)) = self.0.hw.queue.pop() {
                    match event {
                        Event::Deliver(LinkResponse::Interrupt { message }) => {
                            self.0.delivered.push_back(message);
                            delivered = true;
                        }
                        other => rest.push((at, other)),
                    }
                }
                for (at, event) in rest {
                    self.0.hw.queue.push_in_order(at, event);
                }
                delivered || self.0.advance()
            }
            fn host_read(&mut self, address: u64, buffer: &mut [u8]) -> bool {
                self.0.host_read(address, buffer)
            }
            fn host_write(&mut self, address: u64, data: &[u8]) -> bool {
                self.0.host_write(address, data)
            }
            fn take_interrupt(&mut self) -> Option<u64> {
                self.0.take_interrupt()
            }
        }
        let mut harness = Early(Harness {
            hw: hardware(4),
            delivered: VecDeque::new(),
        });
        let violation = conformance::interrupt_delivery(&mut harness, CHECK_DEVICE, CHECK_HOST)
            .expect_err("an interrupt ahead of its writes must be a violation");
        assert!(violation.clause.contains("after"), "{violation:?}");
    }
}
