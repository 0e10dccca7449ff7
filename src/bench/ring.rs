//! Both sides of the ring, live: the device's producer (D1 to D5, as the emulator lands DMA)
//! and the host's consumer (the real `host_runtime::ring` code, H1 to H3).

use crate::bench::limits::{fill, holds, now_ns, pattern};
use crate::bench::wire::{ProducerStats, RingKind, RingPhase, Watch};
use crate::bench::Fault;
use anyhow::{bail, Context};
use host_driver::dma::{DeviceView, HostRegion, MappedRegion, ResolvedDeviceView, ResolvedRegion};
use host_driver::phys::PhysicalMemory;
use host_driver::sync::AtomicU64;
use host_driver::sync::{Arc, Ordering};
use host_runtime::flow::FlowControl;
use host_runtime::ring::{publish_heads, read_payload, MetadataConsumer, PayloadHeadTracker};
use shared_abi::control::{
    StaticLine, METADATA_HEAD_OFFSET, METADATA_TAIL_OFFSET, PAYLOAD_HEAD_OFFSET,
    PAYLOAD_TAIL_OFFSET,
};
use shared_abi::region::{RingLayout, METADATA_RECORD_SIZE, PAGE_SIZE};
use shared_abi::ring::{free_slots, head_update_is_valid, RingIndex};
use shared_abi::{MetadataFlags, MetadataRecord};
use zerocopy::FromBytes;

/// Metadata records per page (the ring starts on a page boundary).
const RECORDS_PER_PAGE: u32 = (PAGE_SIZE / METADATA_RECORD_SIZE) as u32;
/// Words of a metadata record.
const RECORD_WORDS: usize = (METADATA_RECORD_SIZE / 8) as usize;
/// The host takes at most this fraction of the ring per poll (a sixteenth: 256 records of the
/// records phase's 4,096, 16 payloads of the 4 KiB phase's 256), so that its heads go back to
/// the device at least sixteen times a lap and the device refills freed slots while the host
/// reads the next ones, instead of waiting for a whole ring to be read.
const POLLS_PER_LAP: u64 = 16;

/// The launch tag of every record the benchmark produces.
pub const BENCH_TAG: u32 = 0xa71e;

/// The device's producer: the firmware executor's publishing and credit rules, landing its
/// writes as `emulator::hal_impl::Hardware::land` does.
///
/// Per payload, in the firmware's chain order: the data (D1) and the record (D3) with Relaxed
/// word stores, the metadata tail with a Release store (D4); when the batch is full, or the
/// rings are out of credit, the payload tail with a Release store (D2). The heads are cached
/// and read from the host line (Acquire) only when the cached copy says a ring is full (D5);
/// a head that moves backwards or passes a tail is a protocol violation.
///
/// The region's pages are resolved once, when the producer is made (the translation a DMA
/// engine caches): a payload, a record and a tail are then stores into words already at
/// hand, with the credit (the end of what the cached heads grant) and the slots of both rings
/// kept as running values rather than recomputed per payload.
pub struct Producer<'a> {
    region: ResolvedDeviceView<'a>,
    layout: RingLayout,
    /// The words of the metadata ring, page by page (records never straddle a page).
    metadata_pages: Vec<&'a [AtomicU64]>,
    /// The words of the payload ring, page by page, when a slot never straddles a page (the
    /// slot size divides 4096); otherwise each payload goes through the region's checked path.
    payload_pages: Option<Vec<&'a [AtomicU64]>>,
    /// The metadata tail's word (D4) and the payload tail's (D2).
    metadata_tail_word: &'a AtomicU64,
    payload_tail_word: &'a AtomicU64,
    batch: u32,
    metadata_tail: u64,
    payload_tail: u64,
    metadata_head: u64,
    payload_head: u64,
    /// The first index that the cached heads do not grant on both rings (the smaller of
    /// `head + capacity` over the two rings, which advance together here): there is credit
    /// while the tails are below it. Recomputed only when the heads are read (D5).
    credit_end: u64,
    /// `payload_tail % payload capacity`, kept as the tail moves (no division per payload).
    payload_slot: u32,
    /// `metadata_tail % metadata capacity`, likewise.
    metadata_slot: u32,
    open: u32,
    stats: ProducerStats,
}

impl core::fmt::Debug for Producer<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Producer")
            .field("layout", &self.layout)
            .field("metadata_tail", &self.metadata_tail)
            .field("payload_tail", &self.payload_tail)
            .field("credit_end", &self.credit_end)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<'a> Producer<'a> {
    /// A producer of a freshly initialised ring (every index 0).
    pub fn new(
        region: &'a DeviceView,
        layout: RingLayout,
        batch: u32,
    ) -> anyhow::Result<Producer<'a>> {
        let region = region.resolve()?;
        let pages = |offset: u64, bytes: u64| -> anyhow::Result<Vec<&'a [AtomicU64]>> {
            (0..bytes.div_ceil(PAGE_SIZE))
                .map(|page| {
                    let start = page * PAGE_SIZE;
                    Ok(region.words(offset + start, (bytes - start).min(PAGE_SIZE))?)
                })
                .collect()
        };
        let metadata_pages = pages(
            layout.metadata_offset(),
            u64::from(layout.metadata_capacity()) * METADATA_RECORD_SIZE,
        )?;
        let slot_size = u64::from(layout.slot_size());
        let payload_pages = if PAGE_SIZE % slot_size == 0 {
            Some(pages(
                layout.payload_offset(),
                u64::from(layout.payload_capacity()) * slot_size,
            )?)
        } else {
            None
        };
        let control = layout.control_offset();
        let word = |offset: u64| -> anyhow::Result<&'a AtomicU64> {
            region
                .words(control + offset, 8)?
                .first()
                .context("a tail word outside the region")
        };
        let metadata_tail_word = word(METADATA_TAIL_OFFSET)?;
        let payload_tail_word = word(PAYLOAD_TAIL_OFFSET)?;
        let mut producer = Producer {
            region,
            layout,
            metadata_pages,
            payload_pages,
            metadata_tail_word,
            payload_tail_word,
            batch: batch.max(1),
            metadata_tail: 0,
            payload_tail: 0,
            metadata_head: 0,
            payload_head: 0,
            credit_end: 0,
            payload_slot: 0,
            metadata_slot: 0,
            open: 0,
            stats: ProducerStats::default(),
        };
        producer.credit_end = producer.granted();
        Ok(producer)
    }

    /// What it counted.
    pub fn stats(&self) -> ProducerStats {
        self.stats
    }

    /// The end of the credit the cached heads grant: the first tail that would overwrite an
    /// unconsumed slot of either ring (`shared_abi::ring::free_slots` in closed form: the two
    /// tails move together, so the free slots of both rings are `credit_end - tail`).
    fn granted(&self) -> u64 {
        let metadata = self.metadata_tail
            + free_slots(
                RingIndex(self.metadata_head),
                RingIndex(self.metadata_tail),
                self.layout.metadata_capacity(),
            )
            .unwrap_or(0);
        let payload = self.payload_tail
            + free_slots(
                RingIndex(self.payload_head),
                RingIndex(self.payload_tail),
                self.layout.payload_capacity(),
            )
            .unwrap_or(0);
        metadata.min(payload)
    }

    #[inline]
    fn has_credit(&self) -> bool {
        self.payload_tail < self.credit_end
    }

    /// D5: reads the host's heads (Acquire, pairing with H2/H3) and adopts them.
    fn refresh(&mut self) -> anyhow::Result<()> {
        let control = self.layout.control_offset();
        self.stats.head_reads += 1;
        let metadata = self
            .region
            .load_u64(control + METADATA_HEAD_OFFSET, Ordering::Acquire)?;
        let payload = self
            .region
            .load_u64(control + PAYLOAD_HEAD_OFFSET, Ordering::Acquire)?;
        let valid = head_update_is_valid(
            RingIndex(self.metadata_head),
            RingIndex(metadata),
            RingIndex(self.metadata_tail),
        ) && head_update_is_valid(
            RingIndex(self.payload_head),
            RingIndex(payload),
            RingIndex(self.payload_tail),
        );
        if !valid {
            bail!(
                "the host's heads ({metadata}, {payload}) moved back or passed the tails ({}, {})",
                self.metadata_tail,
                self.payload_tail
            );
        }
        self.metadata_head = metadata;
        self.payload_head = payload;
        self.credit_end = self.granted();
        Ok(())
    }

    /// Waits until both rings have a free slot by the cached heads, reading the heads only
    /// when the cached copy says full.
    #[inline]
    fn wait_for_credit(&mut self, watch: &mut Watch<'_>) -> anyhow::Result<()> {
        if self.has_credit() {
            return Ok(());
        }
        self.wait_for_credit_slow(watch)
    }

    #[inline(never)]
    fn wait_for_credit_slow(&mut self, watch: &mut Watch<'_>) -> anyhow::Result<()> {
        self.refresh()?;
        if self.has_credit() {
            return Ok(());
        }
        // As the firmware does: close the open batch so the host sees everything, then wait.
        self.close_batch()?;
        self.stats.credit_waits += 1;
        while !self.has_credit() {
            watch.tick()?;
            self.refresh()?;
        }
        Ok(())
    }

    /// Publishes one payload of `data` (whole words) with its record; returns its index.
    #[inline]
    pub fn publish(
        &mut self,
        data: &[u8],
        result_offset: u64,
        flags: MetadataFlags,
        watch: &mut Watch<'_>,
    ) -> anyhow::Result<u64> {
        self.publish_with_sequence(data, result_offset, flags, None, watch)
    }

    /// [`Producer::publish`], with a forged record sequence when `forged` is set (tests of
    /// the host's checks).
    #[inline]
    pub fn publish_with_sequence(
        &mut self,
        data: &[u8],
        result_offset: u64,
        flags: MetadataFlags,
        forged: Option<u64>,
        watch: &mut Watch<'_>,
    ) -> anyhow::Result<u64> {
        self.wait_for_credit(watch)?;
        let index = self.payload_tail;
        let slot = self.payload_slot;
        let length = u32::try_from(data.len())?;
        // D1: the payload data, plain stores.
        self.write_payload(slot, data)?;
        // D3: the record, plain stores (the words of `MetadataRecord`, little-endian).
        let words = self
            .metadata_pages
            .get((self.metadata_slot / RECORDS_PER_PAGE) as usize)
            .and_then(|page| {
                let first = (self.metadata_slot % RECORDS_PER_PAGE) as usize * RECORD_WORDS;
                page.get(first..first + RECORD_WORDS)
            })
            .context("metadata slot outside the ring")?;
        for (word, value) in words.iter().zip([
            forged.unwrap_or(self.metadata_tail),
            result_offset,
            u64::from(slot) | u64::from(length) << 32,
            u64::from(BENCH_TAG) | u64::from(flags.bits()) << 32,
        ]) {
            word.store(value, Ordering::Relaxed);
        }
        self.metadata_tail += 1;
        self.payload_tail += 1;
        self.payload_slot += 1;
        if self.payload_slot == self.layout.payload_capacity() {
            self.payload_slot = 0;
        }
        self.metadata_slot += 1;
        if self.metadata_slot == self.layout.metadata_capacity() {
            self.metadata_slot = 0;
        }
        // D4: the metadata tail, Release: the data and the record above are visible to a
        // host that observes it (H1).
        self.metadata_tail_word
            .store(self.metadata_tail, Ordering::Release);
        self.stats.payloads += 1;
        self.open += 1;
        if self.open >= self.batch {
            self.close_batch()?;
        }
        Ok(index)
    }

    /// D1: writes `data` (whole words) into payload slot `slot`.
    #[inline]
    fn write_payload(&self, slot: u32, data: &[u8]) -> anyhow::Result<()> {
        let Some(pages) = &self.payload_pages else {
            // A slot that may straddle a page: the region splits the write.
            let offset = self
                .layout
                .payload_slot_offset(slot)
                .context("payload slot outside the layout")?;
            self.region.write_bytes(offset, data)?;
            return Ok(());
        };
        let slot_size = self.layout.slot_size();
        let per_page = PAGE_SIZE as u32 / slot_size;
        let first = (slot % per_page * slot_size / 8) as usize;
        let words = pages
            .get((slot / per_page) as usize)
            .and_then(|page| page.get(first..first + data.len() / 8))
            .filter(|_| data.len() % 8 == 0 && data.len() <= slot_size as usize)
            .context("payload outside its slot")?;
        for (word, bytes) in words.iter().zip(data.chunks_exact(8)) {
            let mut value = [0u8; 8];
            value.copy_from_slice(bytes);
            word.store(u64::from_le_bytes(value), Ordering::Relaxed);
        }
        Ok(())
    }

    /// D2: publishes the payload tail (Release) if a batch is open.
    pub fn close_batch(&mut self) -> anyhow::Result<()> {
        if self.open == 0 {
            return Ok(());
        }
        self.payload_tail_word
            .store(self.payload_tail, Ordering::Release);
        self.open = 0;
        self.stats.payload_tail_updates += 1;
        Ok(())
    }

    /// Waits until the host's published payload head passes `index` (Acquire): the latency
    /// phase's ping-pong, not a credit check.
    pub fn wait_consumed(&self, index: u64, watch: &mut Watch<'_>) -> anyhow::Result<()> {
        let head = self.layout.control_offset() + PAYLOAD_HEAD_OFFSET;
        while self.region.load_u64(head, Ordering::Acquire)? <= index {
            watch.tick()?;
        }
        Ok(())
    }
}

/// The layout of a phase.
pub fn phase_layout(phase: &RingPhase) -> anyhow::Result<RingLayout> {
    RingLayout::new(
        phase.metadata_capacity,
        phase.payload_capacity,
        phase.slot_size,
    )
    .map_err(|status| anyhow::anyhow!("ring layout refused: {status:?}"))
}

/// The device's side of a ring phase: maps the region the host built (and checks its static
/// line), touches its pages, and produces.
pub fn device_phase(
    memory: &Arc<PhysicalMemory>,
    phase: &RingPhase,
    watch: &mut Watch<'_>,
) -> anyhow::Result<ProducerStats> {
    let layout = phase_layout(phase)?;
    let frames = phase
        .frames
        .iter()
        .map(|&frame| shared_abi::HostPhysAddr(frame))
        .collect();
    let region = DeviceView::from_frames(Arc::clone(memory), frames, layout.region_length())?;
    let mut line = [0u8; 128];
    region.read_bytes(layout.control_offset(), &mut line)?;
    let static_line = StaticLine::read_from_bytes(&line)
        .map_err(|_| anyhow::anyhow!("control block static line"))?;
    if static_line != layout.static_line(phase.epoch) {
        bail!("the region's static line does not describe the announced ring");
    }
    // Fault the pages into this process's mapping before anything is timed.
    for page in 0..layout.region_length() / 4096 {
        region.load_u64(page * 4096, Ordering::Relaxed)?;
    }
    let mut producer = Producer::new(&region, layout, phase.batch)?;
    match phase.kind {
        RingKind::Records => produce_records(&mut producer, phase, watch)?,
        RingKind::Latency => {
            let mut data = [0u8; 16];
            for index in 0..phase.total {
                data[..8].copy_from_slice(&now_ns().to_le_bytes());
                data[8..].copy_from_slice(&pattern(index).to_le_bytes());
                producer.publish(&data, index * 16, last_flag(index, phase.total), watch)?;
                producer.close_batch()?;
                producer.wait_consumed(index, watch)?;
            }
        }
        RingKind::Payloads => {
            let mut data = vec![0u8; layout.slot_size() as usize];
            for index in 0..phase.total {
                fill(index, &mut data);
                producer.publish(
                    &data,
                    index * u64::from(layout.slot_size()),
                    last_flag(index, phase.total),
                    watch,
                )?;
            }
        }
    }
    producer.close_batch()?;
    Ok(producer.stats())
}

fn produce_records(
    producer: &mut Producer<'_>,
    phase: &RingPhase,
    watch: &mut Watch<'_>,
) -> anyhow::Result<()> {
    let faulty = phase.total / 2;
    let mut data = [0u8; 8];
    for index in 0..phase.total {
        fill(index, &mut data);
        let flags = last_flag(index, phase.total);
        match phase.fault {
            Some(Fault::Payload) if index == faulty => {
                data[0] ^= 1;
                producer.publish(&data, index * 8, flags, watch)?;
            }
            Some(Fault::Sequence) if index == faulty => {
                producer.publish_with_sequence(&data, index * 8, flags, Some(index + 1), watch)?;
            }
            _ => {
                producer.publish(&data, index * 8, flags, watch)?;
            }
        }
    }
    Ok(())
}

fn last_flag(index: u64, total: u64) -> MetadataFlags {
    if index + 1 == total {
        MetadataFlags::LAST
    } else {
        MetadataFlags::empty()
    }
}

/// The host's consumer: the real poller, payload reads, gap-aware payload head and batched
/// head publication.
#[derive(Debug)]
pub struct Consumer<'a> {
    region: ResolvedRegion<'a>,
    layout: RingLayout,
    metadata: MetadataConsumer,
    payloads: PayloadHeadTracker,
    flow: FlowControl,
    records: Vec<MetadataRecord>,
    buffer: Vec<u8>,
}

impl<'a> Consumer<'a> {
    /// A consumer of a freshly initialised ring.
    pub fn new(region: &'a MappedRegion, layout: RingLayout) -> anyhow::Result<Consumer<'a>> {
        Ok(Consumer {
            region: region.resolve()?,
            layout,
            metadata: MetadataConsumer::new(layout),
            payloads: PayloadHeadTracker::new(&layout),
            flow: FlowControl::default(),
            // At most 2^20 records (`Plan::check` bounds --slots).
            records: Vec::with_capacity(layout.metadata_capacity() as usize),
            buffer: vec![0u8; layout.slot_size() as usize],
        })
    }

    /// One poll: takes the new records, at most [`Consumer::per_poll`] of them (H1: the
    /// poller loads the tail with Acquire and checks it), reads them a run at a time (the
    /// poller checks each record's sequence, length and slot), hands each with its payload to
    /// `each`, consumes the payload, then publishes the heads if they moved (H2, H3, after
    /// the reads). Returns how many records it took.
    pub fn poll(
        &mut self,
        mut each: impl FnMut(&MetadataRecord, &[u8]) -> anyhow::Result<()>,
    ) -> anyhow::Result<usize> {
        let mut records = std::mem::take(&mut self.records);
        records.clear();
        let result = self.poll_into(&mut records, &mut each);
        self.records = records;
        result
    }

    fn poll_into(
        &mut self,
        records: &mut Vec<MetadataRecord>,
        each: &mut impl FnMut(&MetadataRecord, &[u8]) -> anyhow::Result<()>,
    ) -> anyhow::Result<usize> {
        // Every record taken so far has been read and its payload consumed: the poller's
        // cursor is the metadata head the device may have back.
        let released = self.metadata.head();
        let batch = self
            .metadata
            .poll_batch(&self.region, released, self.per_poll())
            .context("the host's poller refused the ring")?;
        if batch.is_empty() {
            // Nothing new: the record and the payload the device writes next will be read
            // the moment the tail says so; fetch their lines meanwhile.
            self.touch(self.layout.metadata_slot_offset(batch.end));
            self.touch_payload();
            return Ok(0);
        }
        // The first record's payload line travels while the records' do.
        self.touch_payload();
        let count = batch.end - batch.start;
        self.metadata
            .read_records(&self.region, batch, records)
            .context("the host's poller refused the ring")?;
        for record in records.iter() {
            self.take(record, each)?;
        }
        self.publish()?;
        // At most per_poll(), itself at most the ring's capacity (a u32).
        Ok(count as usize)
    }

    /// A software prefetch in safe code: loads the word at `offset` and drops it, so that
    /// its cache line comes over from the device's core now rather than when it is read.
    /// Nothing loaded is used: a record or payload is read (again) only below a tail loaded
    /// with Acquire (H1).
    #[inline]
    fn touch(&self, offset: u64) {
        let _ = std::hint::black_box(HostRegion::load_u64(
            &self.region,
            offset,
            Ordering::Relaxed,
        ));
    }

    /// Touches the payload slot the next record most likely names: the payload head's, as
    /// the device fills the slots in order.
    #[inline]
    fn touch_payload(&self) {
        let slot = (self.payloads.head() % u64::from(self.layout.payload_capacity())) as u32;
        if let Some(offset) = self.layout.payload_slot_offset(slot) {
            self.touch(offset);
        }
    }

    /// Records taken per poll (see [`POLLS_PER_LAP`]).
    fn per_poll(&self) -> u64 {
        (u64::from(self.layout.metadata_capacity()) / POLLS_PER_LAP).max(1)
    }

    #[inline(always)]
    fn take(
        &mut self,
        record: &MetadataRecord,
        each: &mut impl FnMut(&MetadataRecord, &[u8]) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let index = self.payloads.slot_index(record.payload_slot);
        if index != record.sequence {
            bail!(
                "record {} names payload slot {} (payload index {index})",
                record.sequence,
                record.payload_slot
            );
        }
        let length = record.length;
        read_payload(
            &self.region,
            &self.layout,
            record.payload_slot,
            length,
            &mut self.buffer,
        )?;
        each(record, self.buffer.get(..length as usize).unwrap_or(&[]))?;
        self.payloads.consume(index)?;
        Ok(())
    }

    fn publish(&mut self) -> anyhow::Result<()> {
        if let Some(message) = self.flow.due(self.metadata.head(), self.payloads.head()) {
            publish_heads(&self.region, message.metadata_head, message.payload_head)?;
            self.flow.sent(message);
        }
        Ok(())
    }

    /// Head publications (H2/H3 pairs) so far.
    pub fn publications(&self) -> u64 {
        self.flow.stores()
    }
}

/// Checks the fields of record `sequence` of a phase of `total` payloads of `length` bytes.
pub fn check_record(record: &MetadataRecord, total: u64, length: u64) -> anyhow::Result<()> {
    let index = record.sequence;
    let flags = if index + 1 == total {
        MetadataFlags::LAST.bits()
    } else {
        0
    };
    if record.tag != BENCH_TAG
        || record.result_offset != index * length
        || u64::from(record.length) != length
        || record.flags != flags
    {
        bail!("record {index} has the wrong fields: {record:?}");
    }
    Ok(())
}

/// A throughput measurement: items after the warm-up, and the ns they took.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timed {
    /// Items counted.
    pub items: u64,
    /// Nanoseconds from the end of the warm-up to the last item.
    pub ns: u64,
}

impl Timed {
    /// Items per second.
    pub fn per_second(&self) -> f64 {
        self.items as f64 * 1e9 / self.ns.max(1) as f64
    }
}

/// Counts `total` items arriving in groups, timing those after the first `warmup`.
#[derive(Debug)]
pub struct Clockwork {
    warmup: u64,
    received: u64,
    started: Option<(u64, u64)>,
}

impl Clockwork {
    /// Times items after the first `warmup`.
    pub fn new(warmup: u64) -> Clockwork {
        Clockwork {
            warmup,
            received: 0,
            started: None,
        }
    }

    /// `count` more items arrived.
    #[inline]
    pub fn arrived(&mut self, count: u64) {
        self.received += count;
        if self.started.is_none() && self.received >= self.warmup {
            self.started = Some((now_ns(), self.received));
        }
    }

    /// Items so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The measurement, now that the last item arrived.
    pub fn finish(&self) -> Timed {
        let now = now_ns();
        match self.started {
            Some((at, received)) => Timed {
                items: self.received - received,
                ns: now.saturating_sub(at),
            },
            None => Timed::default(),
        }
    }
}

/// The host's side of the records phase: `total` records of 8-byte payloads, each record's
/// fields and payload checked; timed after `warmup`.
pub fn host_records(
    consumer: &mut Consumer<'_>,
    total: u64,
    warmup: u64,
    watch: &mut Watch<'_>,
) -> anyhow::Result<Timed> {
    consume_timed(consumer, total, warmup, 8, 1, watch)
}

/// The host's side of the latency phase: one-way latencies (ns) of the records after
/// `warmup`.
pub fn host_latency(
    consumer: &mut Consumer<'_>,
    total: u64,
    warmup: u64,
    watch: &mut Watch<'_>,
) -> anyhow::Result<Vec<u64>> {
    // Bounded by `Plan::check` (--latency-samples against the machine's memory).
    let mut samples = Vec::with_capacity(usize::try_from(total.saturating_sub(warmup))?);
    let mut received = 0;
    while received < total {
        let count = consumer.poll(|record, payload| {
            let now = now_ns();
            check_record(record, total, 16)?;
            let (stamp, rest) = payload.split_at(8.min(payload.len()));
            if rest != pattern(record.sequence).to_le_bytes() {
                bail!("latency payload {} holds the wrong bytes", record.sequence);
            }
            let mut word = [0u8; 8];
            word.copy_from_slice(stamp);
            if record.sequence >= warmup {
                samples.push(now.saturating_sub(u64::from_le_bytes(word)));
            }
            Ok(())
        })?;
        if count == 0 {
            watch.tick()?;
        } else {
            received += count as u64;
        }
    }
    Ok(samples)
}

/// The host's side of the payload phase: `total` payloads of `slot_size` bytes, the first and
/// last words of each and every `verify_every`-th in full checked; timed after `warmup`.
pub fn host_payloads(
    consumer: &mut Consumer<'_>,
    total: u64,
    warmup: u64,
    verify_every: u64,
    watch: &mut Watch<'_>,
) -> anyhow::Result<Timed> {
    let length = u64::from(consumer.layout.slot_size());
    consume_timed(consumer, total, warmup, length, verify_every, watch)
}

/// Consumes `total` records with payloads of `length` bytes, checking every record's fields,
/// the first and last words of every payload and every `verify_every`-th payload in full;
/// timed after `warmup` records.
fn consume_timed(
    consumer: &mut Consumer<'_>,
    total: u64,
    warmup: u64,
    length: u64,
    verify_every: u64,
    watch: &mut Watch<'_>,
) -> anyhow::Result<Timed> {
    let mut clock = Clockwork::new(warmup);
    while clock.received() < total {
        let count = consumer.poll(|record, payload| {
            check_record(record, total, length)?;
            let full = record.sequence % verify_every.max(1) == 0;
            if !holds(record.sequence, payload, full) {
                bail!("payload {} holds the wrong bytes", record.sequence);
            }
            Ok(())
        })?;
        if count == 0 {
            watch.tick()?;
        } else {
            clock.arrived(count as u64);
        }
    }
    Ok(clock.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use host_driver::dma::DmaRegion;
    use host_driver::frames::FrameAllocator;
    use host_driver::shadow::init_control_block;

    /// A ring handed to the device: the host's mapped region and the device's view of it.
    fn ring(metadata: u32, payload: u32, slot_size: u32) -> (MappedRegion, DeviceView, RingLayout) {
        let layout = RingLayout::new(metadata, payload, slot_size).unwrap();
        let memory = Arc::new(PhysicalMemory::new(512 * 4096).unwrap());
        let mut allocator = FrameAllocator::new(memory.len());
        let region = DmaRegion::allocate(memory, &mut allocator, layout.region_length()).unwrap();
        init_control_block(&region, &layout, 1).unwrap();
        let region = region.hand_to_device();
        let device = region.device_view();
        (region, device, layout)
    }

    fn never(what: &str) -> impl FnMut() -> anyhow::Result<()> + '_ {
        move || bail!("{what} would wait forever")
    }

    #[test]
    fn what_the_producer_publishes_the_consumer_reads_and_checks() {
        let (region, device, layout) = ring(8, 8, 8);
        let mut check = never("the producer");
        let mut watch = Watch::new(&mut check);
        let mut producer = Producer::new(&device, layout, 4).unwrap();
        let mut consumer = Consumer::new(&region, layout).unwrap();
        let mut data = [0u8; 8];
        let mut seen = Vec::new();
        for index in 0..20 {
            fill(index, &mut data);
            producer
                .publish(&data, index * 8, last_flag(index, 20), &mut watch)
                .unwrap();
            consumer
                .poll(|record, payload| {
                    check_record(record, 20, 8)?;
                    assert!(holds(record.sequence, payload, true));
                    seen.push(record.sequence);
                    Ok(())
                })
                .unwrap();
        }
        assert_eq!(seen, (0..20).collect::<Vec<_>>());
        // 20 payloads in batches of 4: five payload-tail updates; the heads were read when
        // the cached copy said full (after 8, 16 payloads), not before.
        let stats = producer.stats();
        assert_eq!(stats.payloads, 20);
        assert_eq!(stats.payload_tail_updates, 5);
        assert_eq!(stats.head_reads, 2);
        assert_eq!(stats.credit_waits, 0);
        assert_eq!(consumer.publications(), 20);
    }

    #[test]
    fn records_across_pages_and_slots_across_pages_arrive_intact_lap_after_lap() {
        // 200 records span two pages of the metadata ring; 24-byte slots straddle pages (the
        // producer's checked path), 8-byte and 4 KiB slots do not (its resolved pages: 600
        // 8-byte slots fill one page and go on into the next).
        for (capacity, slot_size) in [(200, 24), (600, 8), (4, 4096)] {
            let (region, device, layout) = ring(capacity, capacity, slot_size);
            let mut check = never("the producer");
            let mut watch = Watch::new(&mut check);
            let mut producer = Producer::new(&device, layout, 4).unwrap();
            let mut consumer = Consumer::new(&region, layout).unwrap();
            let length = u64::from(slot_size);
            let total = 2 * u64::from(capacity) + 5;
            let mut data = vec![0u8; slot_size as usize];
            let mut seen = Vec::new();
            for index in 0..total {
                fill(index, &mut data);
                let flags = last_flag(index, total);
                producer
                    .publish(&data, index * length, flags, &mut watch)
                    .unwrap();
                // The host reads in bursts of up to seven records, never letting the ring
                // fill (the watch would fail).
                let burst = u64::from(capacity - 1).min(7);
                if index % burst == burst - 1 || index + 1 == total {
                    while consumer
                        .poll(|record, payload| {
                            check_record(record, total, length)?;
                            assert!(holds(record.sequence, payload, true), "{slot_size}");
                            seen.push(record.sequence);
                            Ok(())
                        })
                        .unwrap()
                        > 0
                    {}
                }
            }
            assert_eq!(
                seen,
                (0..total).collect::<Vec<_>>(),
                "slot size {slot_size}"
            );
        }
    }

    #[test]
    fn a_full_ring_makes_the_producer_close_its_batch_and_wait() {
        let (region, device, layout) = ring(4, 4, 8);
        let mut waits = 0;
        let mut check = || {
            waits += 1;
            bail!("no credit")
        };
        let mut watch = Watch::new(&mut check);
        let mut producer = Producer::new(&device, layout, 32).unwrap();
        for index in 0..4 {
            producer
                .publish(&[0; 8], index * 8, MetadataFlags::empty(), &mut watch)
                .unwrap();
        }
        let error = producer
            .publish(&[0; 8], 32, MetadataFlags::empty(), &mut watch)
            .unwrap_err();
        assert_eq!(error.to_string(), "no credit");
        let stats = producer.stats();
        assert_eq!(stats.credit_waits, 1);
        // The open batch was closed before waiting: the payload tail is published.
        assert_eq!(stats.payload_tail_updates, 1);
        assert_eq!(
            region
                .load_u64(PAYLOAD_TAIL_OFFSET, Ordering::Acquire)
                .unwrap(),
            4
        );
        assert_eq!(waits, 1);
    }

    #[test]
    fn heads_beyond_the_tails_are_a_violation() {
        let (region, device, layout) = ring(2, 2, 8);
        let mut check = never("the producer");
        let mut watch = Watch::new(&mut check);
        let mut producer = Producer::new(&device, layout, 1).unwrap();
        for index in 0..2 {
            producer
                .publish(&[0; 8], index * 8, MetadataFlags::empty(), &mut watch)
                .unwrap();
        }
        publish_heads(&region, 3, 3).unwrap();
        let error = producer
            .publish(&[0; 8], 16, MetadataFlags::empty(), &mut watch)
            .unwrap_err();
        assert!(error.to_string().contains("passed the tails"), "{error}");
    }

    #[test]
    fn a_forged_sequence_is_refused_by_the_real_poller() {
        let (region, device, layout) = ring(8, 8, 8);
        let mut check = never("the producer");
        let mut watch = Watch::new(&mut check);
        let mut producer = Producer::new(&device, layout, 1).unwrap();
        producer
            .publish_with_sequence(&[0; 8], 0, MetadataFlags::empty(), Some(5), &mut watch)
            .unwrap();
        let mut consumer = Consumer::new(&region, layout).unwrap();
        let error = consumer.poll(|_, _| Ok(())).unwrap_err();
        assert!(format!("{error:#}").contains("sequence 5"), "{error:#}");
    }

    #[test]
    fn wrong_record_fields_are_refused() {
        let good = MetadataRecord {
            sequence: 3,
            result_offset: 24,
            payload_slot: 3,
            length: 8,
            tag: BENCH_TAG,
            flags: 0,
        };
        assert!(check_record(&good, 10, 8).is_ok());
        assert!(
            check_record(&good, 4, 8).is_err(),
            "the last record has LAST"
        );
        let mut bad = good;
        bad.tag = 1;
        assert!(check_record(&bad, 10, 8).is_err());
        let mut bad = good;
        bad.result_offset = 0;
        assert!(check_record(&bad, 10, 8).is_err());
    }
}
