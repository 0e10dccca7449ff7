//! Loom models of the AXLE ring protocol, with the ordering edges of DESIGN.md section 5.
//!
//! The models run the real code: `cosim_link::phys::PhysicalMemory` (under `--cfg loom` the
//! `cosim_link::sync` shim gives it loom atomics), host-driver's `DmaRegion`, the frame allocator,
//! `shadow::program` (which initialises the control block and hands the region to the device
//! as a `MappedRegion`), and host-runtime's `MetadataConsumer`, `PayloadHeadTracker`,
//! `read_payload` and `publish_heads`. The device side is a few lines per model that do what
//! the emulator's DMA engine does: Relaxed word writes for data (D1, D3) and one store per
//! tail (D2, D4), all at host physical addresses translated through the region's frames. The
//! host thread holds the region as the driver does while the device owns it: a `MappedRegion`,
//! through which it can only load, read and publish its heads.
//!
//! Each model has a broken twin with one edge weakened or moved; a test asserts that loom
//! rejects the twin with the model's own assertion (not a loom limit).
//!
//! Run:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release -p host-runtime --test loom_ring
//! ```
//!
//! A build from scratch takes about 80 s on 2 cores. Models (i) and (ii) are explored
//! exhaustively (no preemption bound) and take under 2 s; model (iii) is bounded
//! ([`PREEMPTION_BOUND`]) and takes about a minute of CPU. Prefixing `CARGO_TARGET_DIR=target/loom`
//! keeps the `--cfg loom` build from invalidating the ordinary one.
//!
//! Under `--cfg loom` every crate linked into this test is compiled with loom atomics, so any
//! code that builds an `Arc<PhysicalMemory>` for a `DmaRegion` must take `Arc` from
//! `cosim_link::sync`, not `std::sync`. The models live in host-runtime, the lowest crate that
//! has every piece they run (firmware is a dev-dependency under `--cfg loom`), so the loom build
//! compiles neither the emulator nor the CLI.
#![cfg(loom)]

use cosim_link::phys::PhysicalMemory;
use cosim_link::sync::{Arc, Ordering};
use host_driver::dma::{DmaRegion, MappedRegion};
use host_driver::frames::{FrameAllocator, FRAME_SIZE};
use host_driver::shadow::program;
use host_runtime::ring::{publish_heads, read_payload, MetadataConsumer, PayloadHeadTracker};
use loom::thread;
use shared_abi::control::{METADATA_TAIL_OFFSET, PAYLOAD_HEAD_OFFSET, PAYLOAD_TAIL_OFFSET};
use shared_abi::device_map::FLOW_CONTROL;
use shared_abi::region::RingLayout;
use shared_abi::MetadataRecord;

/// Bytes per payload slot in the models: two words, so a torn payload is observable.
const SLOT_SIZE: u32 = 16;
/// Frames of physical memory: frame 0 is reserved and the 3-page region is scattered over
/// frames 1, 3 and 4.
const MEMORY_FRAMES: u64 = 5;
/// Marker in every assertion message of the models, so the twin tests can tell a model
/// failure from a loom limit.
const VIOLATION: &str = "PROTOCOL VIOLATION";

thread_local! {
    /// Executions loom ran of the current test's model. loom runs a model's threads as
    /// coroutines on the test's own OS thread, so a thread-local counts one test only.
    static EXECUTIONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Exhaustive exploration (no preemption bound): the models are small enough.
fn builder() -> loom::model::Builder {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = None;
    builder
}

/// A ring in fresh, scattered memory, initialised as the driver does.
fn setup(metadata_capacity: u32, payload_capacity: u32) -> (Arc<MappedRegion>, RingLayout) {
    let layout = RingLayout::new(metadata_capacity, payload_capacity, SLOT_SIZE).unwrap();
    let memory = Arc::new(PhysicalMemory::new(MEMORY_FRAMES * FRAME_SIZE).unwrap());
    let mut allocator = FrameAllocator::new(memory.len());
    let region = DmaRegion::allocate(memory, &mut allocator, layout.region_length()).unwrap();
    // The shadow stores are what the device would be sent; the model's device knows the frames.
    let region = program(region, &layout, 1).unwrap().region;
    let frames = region.frames();
    assert!(
        frames
            .windows(2)
            .any(|pair| pair[0].0 + FRAME_SIZE != pair[1].0),
        "the model's region should be physically scattered: {frames:?}"
    );
    (Arc::new(region), layout)
}

/// Word `word` of payload `index`: non-zero and different for every (index, word).
fn payload_word(index: u64, word: u64) -> u64 {
    ((index + 1) << 8) | word
}

fn payload_bytes(index: u64) -> Vec<u8> {
    (0..u64::from(SLOT_SIZE) / 8)
        .flat_map(|word| payload_word(index, word).to_le_bytes())
        .collect()
}

/// The 32 bytes of a metadata record, field by field in ABI order.
fn record_bytes(sequence: u64, slot: u32, length: u32) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(32);
    bytes.extend_from_slice(&sequence.to_le_bytes());
    bytes.extend_from_slice(&(sequence * u64::from(SLOT_SIZE)).to_le_bytes()); // result_offset
    bytes.extend_from_slice(&slot.to_le_bytes());
    bytes.extend_from_slice(&length.to_le_bytes());
    bytes.extend_from_slice(&1u32.to_le_bytes()); // tag
    bytes.extend_from_slice(&0u32.to_le_bytes()); // flags
    assert_eq!(bytes.len(), std::mem::size_of::<MetadataRecord>());
    bytes
}

/// The device's DMA data write: Relaxed word stores at host physical addresses (D1, D3).
fn dma_write(region: &MappedRegion, offset: u64, data: &[u8]) {
    let address = region.translate(offset, data.len() as u64).unwrap();
    region.memory().write_words(address, data).unwrap();
}

/// The device's DMA index write (D2, D4).
fn dma_publish(region: &MappedRegion, offset: u64, value: u64, ordering: Ordering) {
    let address = region.translate(offset, 8).unwrap();
    region.memory().store_u64(address, value, ordering).unwrap();
}

/// The device produces payload `index` into its slot: D1, D2, D3, D4.
fn produce(region: &MappedRegion, layout: &RingLayout, index: u64, metadata_tail: Ordering) {
    let slot = (index % u64::from(layout.payload_capacity())) as u32;
    // D1: payload data.
    dma_write(
        region,
        layout.payload_slot_offset(slot).unwrap(),
        &payload_bytes(index),
    );
    // D2: payload tail, Release.
    dma_publish(region, PAYLOAD_TAIL_OFFSET, index + 1, Ordering::Release);
    // D3: the record naming the payload.
    dma_write(
        region,
        layout.metadata_slot_offset(index),
        &record_bytes(index, slot, SLOT_SIZE),
    );
    // D4: metadata tail (Release in the protocol; the twin weakens it).
    dma_publish(region, METADATA_TAIL_OFFSET, index + 1, metadata_tail);
}

/// Polls until `records` holds `count` records (H1 inside `poll`).
fn poll_until(
    consumer: &mut MetadataConsumer,
    region: &MappedRegion,
    records: &mut Vec<MetadataRecord>,
    count: usize,
) {
    while records.len() < count {
        match consumer.poll(region, 8, records) {
            Ok(0) => thread::yield_now(),
            Ok(_) => {}
            Err(error) => panic!("{VIOLATION}: poll failed: {error}"),
        }
    }
}

/// Reads the payload a record names and asserts it is complete and the right one.
fn read_and_check(region: &MappedRegion, layout: &RingLayout, record: &MetadataRecord) {
    let mut out = [0u8; SLOT_SIZE as usize];
    read_payload(region, layout, record.payload_slot, record.length, &mut out).unwrap();
    assert_eq!(
        out.to_vec(),
        payload_bytes(record.sequence),
        "{VIOLATION}: payload {} read torn or overwritten",
        record.sequence
    );
}

/// Model (i): the device publishes `payloads` payloads; the host polls and reads them.
fn publish_and_consume(metadata_tail: Ordering, payloads: u64) {
    let (region, layout) = setup(2, 2);
    let device_region = Arc::clone(&region);
    let device = thread::spawn(move || {
        for index in 0..payloads {
            produce(&device_region, &layout, index, metadata_tail);
        }
    });
    let mut consumer = MetadataConsumer::new(layout);
    let mut records = Vec::new();
    poll_until(&mut consumer, &region, &mut records, payloads as usize);
    for record in &records {
        read_and_check(&region, &layout, record);
    }
    device.join().unwrap();
}

/// Where the host publishes its payload head relative to its reads of the slots.
#[derive(Clone, Copy, PartialEq, Eq)]
enum HeadPublish {
    /// H3 as the protocol says: after the reads.
    AfterReads,
    /// The twin: the head covering slot 0 goes out before slot 0 is read.
    BeforeRead,
}

/// Model (ii): payload ring of 2 slots, 3 payloads; the device reads the host's payload head
/// only when its cached copy says full (D5) and never writes past cached head + capacity; the
/// host consumes out of order (payload 1 before payload 0), and the gap-aware head decides what
/// it publishes.
///
/// The metadata ring has 4 records, more than the model ever produces, so only the payload ring
/// needs flow control here.
fn out_of_order_with_stale_heads(publish: HeadPublish) {
    let (region, layout) = setup(4, 2);
    let capacity = u64::from(layout.payload_capacity());
    let device_region = Arc::clone(&region);
    let device = thread::spawn(move || {
        let mut cached_head = 0;
        for index in 0..3 {
            // D5: the head is read only when the cached copy says the ring is full.
            while index >= cached_head + capacity {
                cached_head = device_region
                    .load_u64(PAYLOAD_HEAD_OFFSET, Ordering::Acquire)
                    .unwrap();
                if index >= cached_head + capacity {
                    thread::yield_now();
                }
            }
            assert!(
                index < cached_head + capacity,
                "{VIOLATION}: device overran its credit"
            );
            produce(&device_region, &layout, index, Ordering::Release);
        }
    });

    let mut consumer = MetadataConsumer::new(layout);
    let mut tracker = PayloadHeadTracker::new(&layout);
    let mut records = Vec::new();

    // Payloads 0 and 1 fill the ring; take the later one first.
    poll_until(&mut consumer, &region, &mut records, 2);
    let (first, second) = (records[0], records[1]);
    for record in [&second, &first] {
        assert_eq!(
            tracker.slot_index(record.payload_slot),
            record.sequence,
            "{VIOLATION}: slot maps to the wrong payload index"
        );
    }
    read_and_check(&region, &layout, &second);
    assert_eq!(
        tracker.consume(1),
        Ok(false),
        "{VIOLATION}: head passed the gap"
    );
    assert_eq!(tracker.gap_slots(), 1);
    if publish == HeadPublish::BeforeRead {
        assert_eq!(tracker.consume(0), Ok(true));
        publish_heads(&region, consumer.head(), tracker.head()).unwrap();
        read_and_check(&region, &layout, &first);
    } else {
        read_and_check(&region, &layout, &first);
        assert_eq!(tracker.consume(0), Ok(true));
        // H3 after the reads of slots 0 and 1.
        publish_heads(&region, consumer.head(), tracker.head()).unwrap();
    }
    assert_eq!(tracker.head(), 2);
    assert_eq!(tracker.gap_slots(), 0);

    // Payload 2 reuses slot 0.
    poll_until(&mut consumer, &region, &mut records, 3);
    let third = records[2];
    assert_eq!(tracker.slot_index(third.payload_slot), 2);
    read_and_check(&region, &layout, &third);
    assert_eq!(tracker.consume(2), Ok(true));
    publish_heads(&region, consumer.head(), tracker.head()).unwrap();
    device.join().unwrap();
}

/// The device's flow-control block (`shared_abi::device_map::FLOW_CONTROL`, a
/// [`shared_abi::FlowControlMessage`]) as two loom words: the host's CXL.mem stores of its heads
/// (Release) and the executor's reads of them in the real `firmware::flow::Credits::refresh`
/// (Acquire, edge D5).
struct FlowBlock {
    /// The metadata head (H2) and the payload head (H3).
    heads: [loom::sync::atomic::AtomicU64; 2],
}

impl FlowBlock {
    fn new() -> FlowBlock {
        FlowBlock {
            heads: [
                loom::sync::atomic::AtomicU64::new(0),
                loom::sync::atomic::AtomicU64::new(0),
            ],
        }
    }

    /// The host's CXL.mem store of its heads, after the reads of every slot below them.
    fn store(&self, metadata_head: u64, payload_head: u64) {
        self.heads[0].store(metadata_head, Ordering::Release);
        self.heads[1].store(payload_head, Ordering::Release);
    }
}

impl firmware::hal::DeviceMemory for FlowBlock {
    fn size(&self) -> u64 {
        FLOW_CONTROL.0 + 16
    }

    /// Only the whole block is ever read (`Credits::refresh` reads one `FlowControlMessage`).
    fn read(
        &self,
        address: shared_abi::DeviceAddress,
        buffer: &mut [u8],
    ) -> Result<(), firmware::hal::MemoryFault> {
        let fault = firmware::hal::MemoryFault {
            address,
            length: buffer.len() as u64,
        };
        if address != FLOW_CONTROL || buffer.len() != 16 {
            return Err(fault);
        }
        for (word, bytes) in self.heads.iter().zip(buffer.chunks_exact_mut(8)) {
            bytes.copy_from_slice(&word.load(Ordering::Acquire).to_le_bytes());
        }
        Ok(())
    }

    fn write(
        &self,
        address: shared_abi::DeviceAddress,
        data: &[u8],
    ) -> Result<(), firmware::hal::MemoryFault> {
        // The device never writes the host's heads.
        Err(firmware::hal::MemoryFault {
            address,
            length: data.len() as u64,
        })
    }
}

/// How the device decides it has room for the next payload.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Room {
    /// The firmware's own rule: `firmware::flow::Credits::free` (free-running indices,
    /// `shared_abi::ring::free_slots`).
    Credits,
    /// The twin: one slot too many (the classic `<=` for `<` at the wrap), so the device may
    /// write index `head + capacity` into the slot of `head` before the host has read it.
    OneTooMany,
}

/// Model (iii): both rings of `capacity` slots (2 or 3) and five payloads, so the indices wrap
/// (twice at two slots, once at three). The device (the real `Credits`) writes only while its cached heads
/// grant room and refreshes them from the flow-control block only when they say full (D5); the
/// host reads each record and payload, checks that the free-running index of the slot is the
/// record's (`GapAwareHead::slot_index`), and stores both heads after its reads (H2, H3) while
/// the device runs.
fn flow_control_at_the_wrap(capacity: u32, room: Room) {
    let (region, layout) = setup(capacity, capacity);
    let payloads = 5;
    let block = Arc::new(FlowBlock::new());
    let device_region = Arc::clone(&region);
    let device_block = Arc::clone(&block);
    let device = thread::spawn(move || {
        let mut credits = firmware::flow::Credits::new();
        let free = |credits: &firmware::flow::Credits, tail: u64| {
            let (metadata, payload) = credits.free(tail, capacity, tail, capacity);
            let free = metadata.min(payload);
            match room {
                Room::Credits => free,
                Room::OneTooMany => free + 1,
            }
        };
        for index in 0..payloads {
            while free(&credits, index) == 0 {
                // D5: refresh only when the cached heads say full.
                if let Err(status) = credits.refresh(&*device_block, index, index) {
                    panic!(
                        "{VIOLATION}: device refused the host's heads at index {index}: {status:?}"
                    );
                }
                if free(&credits, index) == 0 {
                    thread::yield_now();
                }
            }
            produce(&device_region, &layout, index, Ordering::Release);
        }
    });

    let mut consumer = MetadataConsumer::new(layout);
    let mut tracker = PayloadHeadTracker::new(&layout);
    let mut records = Vec::new();
    for index in 0..payloads {
        poll_until(&mut consumer, &region, &mut records, index as usize + 1);
        let record = records[index as usize];
        assert_eq!(
            tracker.slot_index(record.payload_slot),
            record.sequence,
            "{VIOLATION}: slot {} maps to the wrong free-running index",
            record.payload_slot
        );
        read_and_check(&region, &layout, &record);
        match tracker.consume(record.sequence) {
            Ok(_) => {}
            Err(error) => panic!("{VIOLATION}: consume {}: {error}", record.sequence),
        }
        publish_heads(&region, consumer.head(), tracker.head()).unwrap();
        block.store(consumer.head(), tracker.head());
    }
    assert_eq!(tracker.head(), payloads);
    device.join().unwrap();
}

/// The order of a batch's writes in the crash model.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BatchOrder {
    /// The executor's order: the payloads (D1), the payload tail (D2), the records (D3), the
    /// metadata tail (D4).
    Protocol,
    /// The twin: the records and both tails first, the payloads last.
    TailsFirst,
}

/// One write of a batch.
#[derive(Clone, Copy)]
enum BatchStep {
    Payload(u64),
    PayloadTail(u64),
    Record(u64),
    MetadataTail(u64),
}

/// The writes of the batch of payloads `range`, in `order`.
fn batch_steps(range: std::ops::Range<u64>, order: BatchOrder) -> Vec<BatchStep> {
    let payloads = range.clone().map(BatchStep::Payload);
    let records = range.clone().map(BatchStep::Record);
    let tails = [
        BatchStep::PayloadTail(range.end),
        BatchStep::MetadataTail(range.end),
    ];
    match order {
        BatchOrder::Protocol => payloads
            .chain([tails[0]])
            .chain(records)
            .chain([tails[1]])
            .collect(),
        BatchOrder::TailsFirst => records.chain(tails).chain(payloads).collect(),
    }
}

/// Does one write of a batch.
fn do_step(region: &MappedRegion, layout: &RingLayout, step: BatchStep) {
    let slot = |index: u64| (index % u64::from(layout.payload_capacity())) as u32;
    match step {
        BatchStep::Payload(index) => dma_write(
            region,
            layout.payload_slot_offset(slot(index)).unwrap(),
            &payload_bytes(index),
        ),
        BatchStep::PayloadTail(tail) => {
            dma_publish(region, PAYLOAD_TAIL_OFFSET, tail, Ordering::Release)
        }
        BatchStep::Record(index) => dma_write(
            region,
            layout.metadata_slot_offset(index),
            &record_bytes(index, slot(index), SLOT_SIZE),
        ),
        BatchStep::MetadataTail(tail) => {
            dma_publish(region, METADATA_TAIL_OFFSET, tail, Ordering::Release)
        }
    }
}

/// Model (iv): the device writes a batch of one payload, then a batch of two, and stops for
/// good after `stop` writes (a crash at any point of either batch: after some payloads, before
/// or after the payload tail, before a record, before the metadata tail). The host polls and
/// consumes while the device runs, learns that it stopped, then drains what the metadata tail
/// published. It never consumes a record whose payload is not fully written, never frees a
/// slot twice (`GapAwareHead::consume` refuses), and ends with a consistent reclaimed state:
/// its heads equal the published metadata tail, with no gap.
fn crash_mid_batch(stop: usize, order: BatchOrder) {
    let (region, layout) = setup(4, 4);
    let steps: Vec<BatchStep> = batch_steps(0..1, order)
        .into_iter()
        .chain(batch_steps(1..3, order))
        .collect();
    assert!(stop <= steps.len());
    // The metadata tail the device will have published when it stops.
    let published = steps[..stop]
        .iter()
        .filter_map(|step| match step {
            BatchStep::MetadataTail(tail) => Some(*tail),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let stopped = Arc::new(loom::sync::atomic::AtomicBool::new(false));
    let device_region = Arc::clone(&region);
    let device_stopped = Arc::clone(&stopped);
    let device = thread::spawn(move || {
        for step in steps.into_iter().take(stop) {
            do_step(&device_region, &layout, step);
        }
        // The crash: the host learns it later (the emulator's death, a latched status).
        device_stopped.store(true, Ordering::Release);
    });

    let mut consumer = MetadataConsumer::new(layout);
    let mut tracker = PayloadHeadTracker::new(&layout);
    let mut records = Vec::new();
    let mut consume = |records: &mut Vec<MetadataRecord>, consumer: &mut MetadataConsumer| {
        let before = records.len();
        if let Err(error) = consumer.poll(&region, 8, records) {
            panic!("{VIOLATION}: poll failed: {error}");
        }
        for record in &records[before..] {
            read_and_check(&region, &layout, record);
            if let Err(error) = tracker.consume(record.sequence) {
                panic!(
                    "{VIOLATION}: slot of {} freed twice: {error}",
                    record.sequence
                );
            }
        }
        records.len() > before
    };
    // While the device runs: poll and consume what arrives.
    while !stopped.load(Ordering::Acquire) {
        if !consume(&mut records, &mut consumer) {
            thread::yield_now();
        }
    }
    // The device is gone: drain what the tail published, then reclaim.
    consume(&mut records, &mut consumer);
    assert_eq!(
        consumer.head(),
        published,
        "{VIOLATION}: drained {} records, the device published {published}",
        consumer.head()
    );
    assert_eq!(tracker.head(), published, "{VIOLATION}: payload head");
    assert_eq!(tracker.gap_slots(), 0, "{VIOLATION}: a gap after the drain");
    publish_heads(&region, consumer.head(), tracker.head()).unwrap();
    device.join().unwrap();
}

/// Writes in the two batches of model (iv).
const CRASH_STEPS: usize = 4 + 6;

/// Model (iv) with a crash after `STOP` writes, as a `fn()` for loom.
fn crash_after<const STOP: usize>() {
    crash_mid_batch(STOP, BatchOrder::Protocol);
}

/// Model (iv) at every crash point, 0 to [`CRASH_STEPS`] writes.
const CRASH_MODELS: [fn(); CRASH_STEPS + 1] = [
    crash_after::<0>,
    crash_after::<1>,
    crash_after::<2>,
    crash_after::<3>,
    crash_after::<4>,
    crash_after::<5>,
    crash_after::<6>,
    crash_after::<7>,
    crash_after::<8>,
    crash_after::<9>,
    crash_after::<10>,
];

/// Runs `model` under `builder` and returns how many executions it explored.
fn check_with(builder: loom::model::Builder, model: fn()) -> usize {
    EXECUTIONS.set(0);
    builder.check(move || {
        EXECUTIONS.set(EXECUTIONS.get() + 1);
        model();
    });
    EXECUTIONS.get()
}

/// Runs `model` under loom, exhaustively, and returns how many executions it explored.
fn check(model: fn()) -> usize {
    check_with(builder(), model)
}

/// Preemptions per execution in the bounded models: model (iii) has two threads of some 60
/// atomic steps each, beyond exhaustive exploration; loom's documentation recommends a bound
/// of 2 or 3, which finds most bugs (CHESS, Musuvathi and Qadeer, PLDI 2007).
const PREEMPTION_BOUND: usize = 2;

/// Runs `model` under loom with [`PREEMPTION_BOUND`] and returns the executions explored.
fn check_bounded(model: fn()) -> usize {
    let mut builder = builder();
    builder.preemption_bound = Some(PREEMPTION_BOUND);
    check_with(builder, model)
}

/// Runs a broken twin under `check` and returns loom's panic message; fails if loom accepted
/// it.
fn rejection_message_with(check: fn(fn()) -> usize, model: fn()) -> String {
    let result = std::panic::catch_unwind(|| check(model));
    let payload = match result {
        Ok(executions) => panic!("loom accepted a broken twin after {executions} executions"),
        Err(payload) => payload,
    };
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Runs a broken twin exhaustively and returns loom's panic message.
fn rejection_message(model: fn()) -> String {
    rejection_message_with(check, model)
}

/// Runs a broken twin with [`PREEMPTION_BOUND`] and returns loom's panic message.
fn rejection_message_bounded(model: fn()) -> String {
    rejection_message_with(check_bounded, model)
}

#[test]
fn model_i_host_reads_only_complete_payloads_behind_a_release_metadata_tail() {
    let executions = check(|| publish_and_consume(Ordering::Release, 2));
    eprintln!("model (i): {executions} executions explored");
    assert!(executions > 1);
}

#[test]
fn model_i_twin_relaxed_metadata_tail_is_rejected() {
    let message = rejection_message(|| publish_and_consume(Ordering::Relaxed, 1));
    eprintln!(
        "model (i) twin rejected after {} executions: {message}",
        EXECUTIONS.get()
    );
    assert!(
        message.contains(VIOLATION),
        "rejected for another reason: {message}"
    );
}

#[test]
fn model_ii_out_of_order_consumption_never_reads_an_overwritten_slot() {
    let executions = check(|| out_of_order_with_stale_heads(HeadPublish::AfterReads));
    eprintln!("model (ii): {executions} executions explored");
    assert!(executions > 1);
}

#[test]
fn model_ii_twin_head_published_before_slot_read_is_rejected() {
    let message = rejection_message(|| out_of_order_with_stale_heads(HeadPublish::BeforeRead));
    eprintln!(
        "model (ii) twin rejected after {} executions: {message}",
        EXECUTIONS.get()
    );
    assert!(
        message.contains(VIOLATION),
        "rejected for another reason: {message}"
    );
}

#[test]
fn model_iii_flow_control_wraps_a_two_slot_ring() {
    let executions = check_bounded(|| flow_control_at_the_wrap(2, Room::Credits));
    eprintln!("model (iii), 2 slots: {executions} executions explored");
    assert!(executions > 1);
}

#[test]
fn model_iii_flow_control_wraps_a_three_slot_ring() {
    let executions = check_bounded(|| flow_control_at_the_wrap(3, Room::Credits));
    eprintln!("model (iii), 3 slots: {executions} executions explored");
    assert!(executions > 1);
}

#[test]
fn model_iii_twin_one_slot_too_many_is_rejected() {
    let message = rejection_message_bounded(|| flow_control_at_the_wrap(2, Room::OneTooMany));
    eprintln!(
        "model (iii) twin rejected after {} executions: {message}",
        EXECUTIONS.get()
    );
    assert!(
        message.contains(VIOLATION),
        "rejected for another reason: {message}"
    );
}

#[test]
fn model_iv_a_crash_at_any_point_of_a_batch_leaves_a_consistent_ring() {
    let mut total = 0;
    for (stop, model) in CRASH_MODELS.into_iter().enumerate() {
        let executions = check(model);
        eprintln!("model (iv), crash after {stop} writes: {executions} executions");
        total += executions;
    }
    assert!(total > CRASH_STEPS);
}

#[test]
fn model_iv_twin_tails_before_payloads_is_rejected() {
    // A crash after the second batch's records and tails, before its payloads.
    let message = rejection_message(|| crash_mid_batch(7, BatchOrder::TailsFirst));
    eprintln!(
        "model (iv) twin rejected after {} executions: {message}",
        EXECUTIONS.get()
    );
    assert!(
        message.contains(VIOLATION),
        "rejected for another reason: {message}"
    );
}
