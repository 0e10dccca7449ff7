//! The host side: arbitrary bytes as a metadata ring region (what a faulty or hostile device
//! could have written), read by `host_runtime::ring::MetadataConsumer::poll`, and every record
//! it returns fed to the host's next decoders (`PayloadHeadTracker`, `LaunchTracker::arrive`,
//! `read_payload`), as the runtime does.
//!
//! The region is a real `DmaRegion` of a small canonical layout over scattered frames of a
//! `PhysicalMemory`. Between polls the input "produces": it writes arbitrary records (with
//! their sequence optionally fixed to their index, so that the fuzzer gets past the sequence
//! check) and moves the tail and the status word arbitrarily.
//!
//! Checked, beyond "never panics":
//! - every record `poll` returns has `sequence == index` (the consumer's head when it was
//!   read), a length of at most the slot size and an existing payload slot;
//! - the head advances by exactly the records returned, on success and on error alike, and
//!   never by more than `max` or past the tail;
//! - a non-zero status word is an error before anything is read.

use arbitrary::Arbitrary;
use host_driver::dma::DmaRegion;
use host_driver::frames::FRAME_SIZE;
use host_driver::phys::PhysicalMemory;
use host_driver::shadow::init_control_block;
use host_driver::sync::{Arc, Ordering};
use host_runtime::app::HostTask;
use host_runtime::ring::{read_payload, MetadataConsumer, PayloadHeadTracker, RingError};
use host_runtime::tasks::LaunchTracker;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use shared_abi::control::{DEVICE_STATUS_OFFSET, METADATA_TAIL_OFFSET, PAYLOAD_TAIL_OFFSET};
use shared_abi::region::RingLayout;
use shared_abi::{HostPhysAddr, MetadataRecord};
use zerocopy::IntoBytes;

#[derive(Arbitrary, Debug)]
struct Record {
    fix_sequence: bool,
    sequence: u64,
    result_offset: u64,
    payload_slot: u32,
    length: u32,
    tag: u32,
    flags: u32,
}

#[derive(Arbitrary, Debug)]
enum Action {
    /// Writes records at the tail and moves the tail past them.
    Produce(Vec<Record>),
    /// Stores an arbitrary metadata tail.
    Tail(u64),
    /// Stores an arbitrary payload tail.
    PayloadTail(u64),
    /// Stores an arbitrary device status word.
    Status(u64),
    /// Writes arbitrary words at an arbitrary region offset.
    Scribble(u32, Vec<u64>),
    /// Polls at most this many records.
    Poll(u8),
}

#[derive(Arbitrary, Debug)]
struct Input {
    metadata_capacity: u8,
    payload_capacity: u8,
    slot_words: u8,
    frame_seed: u32,
    initialise: bool,
    result_chunks: u8,
    tasks: Vec<(u16, u16)>,
    actions: Vec<Action>,
}

/// A region of `frames` frames over a memory of `frames + 1`, frames in a seeded order.
fn region(layout: &RingLayout, seed: u32) -> DmaRegion {
    let frames = layout.region_length() / FRAME_SIZE;
    let memory = Arc::new(PhysicalMemory::new((frames + 1) * FRAME_SIZE).expect("memory"));
    let mut order: Vec<u64> = (1..=frames).collect();
    // A deterministic shuffle from the seed.
    order.shuffle(&mut SmallRng::seed_from_u64(u64::from(seed)));
    let frames = order
        .into_iter()
        .map(|f| HostPhysAddr(f * FRAME_SIZE))
        .collect();
    DmaRegion::from_frames(memory, frames, layout.region_length()).expect("region")
}

/// The check: panics exactly where the `metadata_ring` fuzz target reports a finding (the
/// input decoded as libFuzzer's `fuzz_target!` decodes a typed input).
pub fn check(data: &[u8]) {
    let Some(input) = crate::arbitrary_input::<Input>(data) else {
        return;
    };
    let layout = RingLayout::new(
        1 + u32::from(input.metadata_capacity % 128),
        1 + u32::from(input.payload_capacity % 64),
        8 * (1 + u32::from(input.slot_words % 32)),
    )
    .expect("a canonical layout");
    let region = region(&layout, input.frame_seed);
    if input.initialise {
        init_control_block(&region, &layout, 1).expect("init");
    }
    // Handed to the device: the fuzzed device writes through its view, the host only reads.
    let region = region.hand_to_device();
    let device = region.device_view();
    let slot_size = u64::from(layout.slot_size());
    let result_length = slot_size * u64::from(input.result_chunks) + slot_size / 2;
    let tasks: Vec<HostTask> = input
        .tasks
        .iter()
        .take(16)
        .enumerate()
        .map(|(id, &(a, b))| {
            let start = u64::from(a) % (result_length + 1);
            let end = start + u64::from(b) % (result_length - start + 1);
            HostTask {
                id: id as u32,
                needs: start..end,
                chain: None,
            }
        })
        .collect();
    let mut tracker = LaunchTracker::new(tasks, result_length, slot_size).expect("tasks in range");
    let mut payloads = PayloadHeadTracker::new(&layout);
    let mut consumer = MetadataConsumer::new(layout);
    let mut produced: u64 = 0;
    let mut out = Vec::new();
    let mut buffer = vec![0u8; layout.slot_size() as usize];

    for action in input.actions.iter().take(64) {
        match action {
            Action::Produce(records) => {
                for record in records.iter().take(2 * layout.metadata_capacity() as usize) {
                    let written = MetadataRecord {
                        sequence: if record.fix_sequence {
                            produced
                        } else {
                            record.sequence
                        },
                        result_offset: record.result_offset,
                        payload_slot: record.payload_slot,
                        length: record.length,
                        tag: record.tag,
                        flags: record.flags,
                    };
                    device
                        .write_bytes(layout.metadata_slot_offset(produced), written.as_bytes())
                        .expect("a slot inside the region");
                    produced = produced.wrapping_add(1);
                }
                device
                    .store_u64(METADATA_TAIL_OFFSET, produced, Ordering::Release)
                    .expect("tail word");
            }
            Action::Tail(tail) => {
                produced = *tail;
                device
                    .store_u64(METADATA_TAIL_OFFSET, *tail, Ordering::Release)
                    .expect("tail word");
            }
            Action::PayloadTail(tail) => device
                .store_u64(PAYLOAD_TAIL_OFFSET, *tail, Ordering::Release)
                .expect("payload tail word"),
            Action::Status(word) => device
                .store_u64(DEVICE_STATUS_OFFSET, *word, Ordering::Release)
                .expect("status word"),
            Action::Scribble(offset, words) => {
                let offset = (u64::from(*offset) % layout.region_length()) & !7;
                let bytes: Vec<u8> = words
                    .iter()
                    .take(64)
                    .flat_map(|w| w.to_le_bytes())
                    .collect();
                let room = (layout.region_length() - offset) as usize;
                let _ = device.write_bytes(offset, &bytes[..bytes.len().min(room)]);
            }
            Action::Poll(max) => {
                let head = consumer.head();
                let before = out.len();
                let status = region
                    .load_u64(DEVICE_STATUS_OFFSET, Ordering::Acquire)
                    .expect("status word")
                    & u64::from(u32::MAX);
                let tail = region
                    .load_u64(METADATA_TAIL_OFFSET, Ordering::Acquire)
                    .expect("tail word");
                let result = consumer.poll(&region, usize::from(*max), &mut out);
                let returned = out.len() - before;
                assert_eq!(consumer.head(), head + returned as u64);
                assert!(returned <= usize::from(*max));
                match result {
                    Ok(count) => {
                        assert_eq!(count, returned);
                        assert!(consumer.head() <= tail);
                    }
                    Err(RingError::DeviceBroken { code }) => {
                        assert_eq!(u64::from(code), status);
                        assert_eq!(returned, 0);
                    }
                    Err(_) => {}
                }
                if status != 0 {
                    assert!(result.is_err(), "a BROKEN ring was read");
                }
                for (i, record) in out[before..].iter().enumerate() {
                    assert_eq!(
                        record.sequence,
                        head + i as u64,
                        "record {i} of poll at {head}"
                    );
                    assert!(record.length <= layout.slot_size());
                    assert!(record.payload_slot < layout.payload_capacity());
                    // The runtime's next steps with a record.
                    let index = payloads.slot_index(record.payload_slot);
                    let _ = tracker.arrive(
                        record.result_offset,
                        u64::from(record.length),
                        index,
                        &mut Vec::new(),
                    );
                    let _ = read_payload(
                        &region,
                        &layout,
                        record.payload_slot,
                        record.length,
                        &mut buffer,
                    );
                    let _ = payloads.consume(index);
                }
            }
        }
    }
}
