//! Loom models of the AXLE ring protocol, with the ordering edges of DESIGN.md section 5.
//!
//! The models run the real code: `host_driver::phys::PhysicalMemory` (under `--cfg loom` the
//! `host_driver::sync` shim gives it loom atomics), `DmaRegion`, the frame allocator,
//! `init_control_block`, and host-runtime's `MetadataConsumer`, `PayloadHeadTracker`,
//! `read_payload` and `publish_heads`. The device side is a few lines per model that do what
//! the emulator's DMA engine does: Relaxed word writes for data (D1, D3) and one store per
//! tail (D2, D4), all at host physical addresses translated through the region's frames.
//!
//! Each model has a broken twin with one edge weakened or moved; a test asserts that loom
//! rejects the twin with the model's own assertion (not a loom limit).
//!
//! Run:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test --release --test loom_ring
//! ```
//!
//! A build from scratch takes about 80 s on 2 cores; the four tests then take under 2 s
//! (exploration is exhaustive: no preemption bound). Prefixing `CARGO_TARGET_DIR=target/loom`
//! keeps the `--cfg loom` build from invalidating the ordinary one.
//!
//! Under `--cfg loom` every crate linked into this test is compiled with loom atomics, so any
//! code that builds an `Arc<PhysicalMemory>` for a `DmaRegion` must take `Arc` from
//! `host_driver::sync`, not `std::sync`.
#![cfg(loom)]

use host_driver::dma::DmaRegion;
use host_driver::frames::{FrameAllocator, FRAME_SIZE};
use host_driver::phys::PhysicalMemory;
use host_driver::shadow::init_control_block;
use host_driver::sync::{Arc, Ordering};
use host_runtime::ring::{publish_heads, read_payload, MetadataConsumer, PayloadHeadTracker};
use loom::thread;
use shared_abi::control::{METADATA_TAIL_OFFSET, PAYLOAD_HEAD_OFFSET, PAYLOAD_TAIL_OFFSET};
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
fn setup(metadata_capacity: u32, payload_capacity: u32) -> (Arc<DmaRegion>, RingLayout) {
    let layout = RingLayout::new(metadata_capacity, payload_capacity, SLOT_SIZE).unwrap();
    let memory = Arc::new(PhysicalMemory::new(MEMORY_FRAMES * FRAME_SIZE).unwrap());
    let mut allocator = FrameAllocator::new(memory.len());
    let region = DmaRegion::allocate(memory, &mut allocator, layout.region_length()).unwrap();
    init_control_block(&region, &layout, 1).unwrap();
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
fn dma_write(region: &DmaRegion, offset: u64, data: &[u8]) {
    let address = region.translate(offset, data.len() as u64).unwrap();
    region.memory().write_words(address, data).unwrap();
}

/// The device's DMA index write (D2, D4).
fn dma_publish(region: &DmaRegion, offset: u64, value: u64, ordering: Ordering) {
    let address = region.translate(offset, 8).unwrap();
    region.memory().store_u64(address, value, ordering).unwrap();
}

/// The device produces payload `index` into its slot: D1, D2, D3, D4.
fn produce(region: &DmaRegion, layout: &RingLayout, index: u64, metadata_tail: Ordering) {
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
    region: &DmaRegion,
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
fn read_and_check(region: &DmaRegion, layout: &RingLayout, record: &MetadataRecord) {
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
        publish_heads(&region, &layout, consumer.head(), tracker.head()).unwrap();
        read_and_check(&region, &layout, &first);
    } else {
        read_and_check(&region, &layout, &first);
        assert_eq!(tracker.consume(0), Ok(true));
        // H3 after the reads of slots 0 and 1.
        publish_heads(&region, &layout, consumer.head(), tracker.head()).unwrap();
    }
    assert_eq!(tracker.head(), 2);
    assert_eq!(tracker.gap_slots(), 0);

    // Payload 2 reuses slot 0.
    poll_until(&mut consumer, &region, &mut records, 3);
    let third = records[2];
    assert_eq!(tracker.slot_index(third.payload_slot), 2);
    read_and_check(&region, &layout, &third);
    assert_eq!(tracker.consume(2), Ok(true));
    publish_heads(&region, &layout, consumer.head(), tracker.head()).unwrap();
    device.join().unwrap();
}

/// Runs `model` under loom and returns how many executions it explored.
fn check(model: fn()) -> usize {
    EXECUTIONS.set(0);
    builder().check(move || {
        EXECUTIONS.set(EXECUTIONS.get() + 1);
        model();
    });
    EXECUTIONS.get()
}

/// Runs a broken twin and returns loom's panic message; fails if loom accepted it.
fn rejection_message(model: fn()) -> String {
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
