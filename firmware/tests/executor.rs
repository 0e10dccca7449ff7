// The DMA executor against the fake HAL: slot packing, metadata records, chain order (edges
// D1-D4), the streaming factor, out-of-order and in-order streaming, credits from flow control
// (edge D5), back-pressure, natural batching while the DMA engine is full, and BROKEN latching.
//
// This file is compiled twice (see `firmware::testing`): as a unit-test module of the firmware
// crate and, with `--features test-utils`, as an integration test. It therefore uses only
// `firmware::` paths and has no inner attributes.

use firmware::hal::DmaKind;
use firmware::testing::{
    AxleBench, DmaWrite, KnnLaunch, RegionPlace, SubmittedRequest, TestRegion,
};
use firmware::trace::TraceEvent;
use firmware::StreamingFactor;
use proptest::prelude::*;
use shared_abi::command::CommandFlags;
use shared_abi::{control, MetadataFlags, MetadataRecord, Status, Ticks};
use std::collections::{BTreeMap, BTreeSet};

const SLOT: u32 = 32;

fn slots(count: u64) -> StreamingFactor {
    StreamingFactor::Bytes(count * u64::from(SLOT))
}

// A bench with one KNN launch of `rows` rows (dim 16, one query: `rows * 4` result bytes) on a
// region of `metadata_capacity` records and `payload_capacity` 32-byte slots, launched.
fn bench(
    rows: u32,
    metadata_capacity: u32,
    payload_capacity: u32,
    streaming_factor: StreamingFactor,
    out_of_order: bool,
) -> AxleBench {
    let region = TestRegion::new(metadata_capacity, payload_capacity, SLOT);
    let launch = KnnLaunch::new(rows, 16, 1);
    let mut bench = AxleBench::new(region, launch, streaming_factor, out_of_order);
    bench.start(CommandFlags::empty());
    bench
}

fn chunk_length(bench: &AxleBench, chunk: u32) -> u64 {
    let start = u64::from(chunk * SLOT);
    (bench.launch.result_length() - start).min(u64::from(SLOT))
}

fn kinds(request: &SubmittedRequest) -> Vec<DmaKind> {
    request.writes().iter().map(|write| write.kind).collect()
}

// Every payload write (D1) paired with the record (D3) that follows it in its chain.
fn payloads_with_records(bench: &AxleBench) -> Vec<(DmaWrite, MetadataRecord, DmaWrite)> {
    let mut pairs = Vec::new();
    for request in bench.hal.dma.submitted() {
        let writes = request.writes();
        for (position, write) in writes.iter().enumerate() {
            if write.kind == DmaKind::Payload {
                let metadata = writes[position + 1..]
                    .iter()
                    .find(|w| w.kind == DmaKind::Metadata)
                    .expect("a payload without a record after it");
                pairs.push((write.clone(), metadata.record().unwrap(), metadata.clone()));
            }
        }
    }
    pairs
}

// ---------------------------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------------------------

#[test]
fn spec_iv_c_every_payload_gets_exactly_one_metadata_record_naming_it() {
    // 60 rows: 240 result bytes, 8 chunks, the last one 16 bytes.
    let mut bench = bench(60, 64, 64, slots(1), true);
    let order = [3, 0, 7, 1, 6, 2, 5, 4];
    for chunk in order {
        bench.finish_chunks([chunk]);
        bench.step();
    }
    bench.hal.complete_all_dma();
    bench.step();

    let expected = bench.launch.expected_result();
    let pairs = payloads_with_records(&bench);
    assert_eq!(pairs.len(), 8);
    assert_eq!(bench.records().len(), 8, "one record per payload, no more");
    assert_eq!(bench.firmware.counters().payloads, 8);
    let layout = *bench.region.layout();
    for (position, (payload, record, metadata_write)) in pairs.iter().enumerate() {
        let position = position as u64;
        let chunk = order[position as usize];
        // The record's sequence is its own metadata index, and its slot is that index's.
        assert_eq!(record.sequence, position);
        assert_eq!(metadata_write.index, position);
        assert_eq!(
            metadata_write.destination,
            bench
                .region
                .host_address(layout.metadata_slot_offset(position))
        );
        // It names the payload's slot, data, length and launch.
        assert_eq!(payload.index, position, "payload index");
        assert_eq!(record.payload_slot, (payload.index % 64) as u32);
        assert_eq!(
            bench.region.place(payload.destination),
            RegionPlace::PayloadSlot {
                slot: record.payload_slot,
                within: 0
            }
        );
        assert_eq!(record.result_offset, u64::from(chunk * SLOT));
        assert_eq!(
            payload.source.0,
            bench.launch.result.0 + record.result_offset
        );
        assert_eq!(u64::from(record.length), chunk_length(&bench, chunk));
        assert_eq!(record.tag, bench.tag);
        let start = record.result_offset as usize;
        let end = start + record.length as usize;
        assert_eq!(
            &payload.bytes[..record.length as usize],
            &expected[start..end]
        );
        let last = position == 7;
        assert_eq!(
            record.flag_set().contains(MetadataFlags::LAST),
            last,
            "LAST on record {position}"
        );
        assert!(!record.flag_set().contains(MetadataFlags::ERROR));
    }
}

#[test]
fn spec_iv_c_completed_requests_leave_every_record_and_both_tails_in_host_memory() {
    let mut bench = bench(60, 64, 64, slots(2), true);
    bench.finish_chunks(0..8);
    bench.hal.settle(&mut bench.firmware, 16);

    let host = &bench.hal.host;
    assert_eq!(bench.region.metadata_tail(host), 8);
    assert_eq!(bench.region.payload_tail(host), 8);
    assert_eq!(bench.region.device_status(host), 0);
    let expected = bench.launch.expected_result();
    for index in 0..8 {
        let record = bench.region.record(host, index);
        assert_eq!(record.sequence, index);
        let data = bench
            .region
            .payload(host, record.payload_slot, u64::from(record.length));
        let start = record.result_offset as usize;
        assert_eq!(data, &expected[start..start + record.length as usize]);
    }
}

// ---------------------------------------------------------------------------------------------
// Chain order: D1 before D3 before D4, one D2 last
// ---------------------------------------------------------------------------------------------

#[test]
fn spec_iv_c_payload_written_before_its_metadata_before_the_metadata_tail() {
    let mut bench = bench(80, 64, 64, slots(4), true);
    bench.finish_chunks([5, 1, 9, 0, 2, 8, 3, 7, 4, 6]);
    bench.step();
    let requests = bench.hal.dma.payload_requests();
    assert!(!requests.is_empty());
    for request in requests {
        let kinds = kinds(request);
        let (groups, tail) = kinds.split_at(kinds.len() - 1);
        assert_eq!(groups.len() % 3, 0, "{kinds:?}");
        for group in groups.chunks(3) {
            assert_eq!(
                group,
                [DmaKind::Payload, DmaKind::Metadata, DmaKind::MetadataTail],
                "{kinds:?}"
            );
        }
        assert_eq!(tail, [DmaKind::PayloadTail]);
        assert_eq!(groups.len() / 3, request.request.payloads as usize);
    }
}

#[test]
fn spec_iv_c_one_payload_tail_per_request_last_in_chain_with_the_new_tails() {
    let mut bench = bench(80, 64, 64, slots(4), true);
    bench.finish_chunks(0..10);
    bench.step();
    let metadata_tail_word = bench.region.control_word(control::METADATA_TAIL_OFFSET);
    let payload_tail_word = bench.region.control_word(control::PAYLOAD_TAIL_OFFSET);
    let mut payloads_so_far = 0;
    for request in bench.hal.dma.payload_requests() {
        let writes = request.writes();
        let payload_tails: Vec<&DmaWrite> = request.writes_of(DmaKind::PayloadTail).collect();
        assert_eq!(payload_tails.len(), 1, "exactly one D2 per request");
        let d2 = writes.last().unwrap();
        assert_eq!(d2.kind, DmaKind::PayloadTail, "D2 is last in the chain");
        payloads_so_far += u64::from(request.request.payloads);
        assert_eq!(
            d2.value(),
            payloads_so_far,
            "D2 carries the payload tail after the batch"
        );
        assert_eq!(d2.destination, payload_tail_word);
        assert_eq!(d2.bytes.len(), 8);
        // Each D4 carries the record's sequence + 1.
        for (position, write) in writes.iter().enumerate() {
            if write.kind == DmaKind::MetadataTail {
                let record = writes[position - 1]
                    .record()
                    .expect("D4 follows its record");
                assert_eq!(write.value(), record.sequence + 1);
                assert_eq!(write.destination, metadata_tail_word);
                assert_eq!(write.bytes.len(), 8);
            }
        }
    }
    assert_eq!(payloads_so_far, 10);
}

// ---------------------------------------------------------------------------------------------
// Streaming factor
// ---------------------------------------------------------------------------------------------

#[test]
fn sf_of_one_slot_makes_each_complete_chunk_its_own_request() {
    let mut bench = bench(80, 64, 64, slots(1), true);
    bench.finish_chunks([0, 1, 2]);
    bench.step();
    assert_eq!(bench.payloads_per_request(), [1, 1, 1]);
    for request in bench.hal.dma.payload_requests() {
        assert_eq!(request.writes_of(DmaKind::Payload).count(), 1);
    }
    assert_eq!(bench.firmware.counters().dma_requests, 3);
}

#[test]
fn sf_of_four_slots_puts_four_payloads_in_each_request() {
    let mut bench = bench(80, 64, 64, slots(4), true);
    bench.finish_chunks(0..3);
    bench.step();
    assert!(
        bench.hal.dma.submitted().is_empty(),
        "3 payloads are below the streaming factor"
    );
    bench.finish_chunks(3..9);
    bench.step();
    assert_eq!(bench.payloads_per_request(), [4, 4]);
    for request in bench.hal.dma.payload_requests() {
        assert_eq!(request.writes_of(DmaKind::Payload).count(), 4);
    }
    assert_eq!(
        bench.firmware.counters().payloads,
        9,
        "the ninth waits in the open batch"
    );
}

#[test]
fn short_final_batch_is_flushed_when_the_last_chunk_is_taken() {
    let mut bench = bench(80, 64, 64, slots(4), true);
    // Every chunk but 5, then 5: the last chunk taken is not the last by offset.
    bench.finish_chunks([0, 1, 2, 3, 4, 6, 7, 8, 9]);
    bench.step();
    assert_eq!(bench.payloads_per_request(), [4, 4]);
    bench.finish_chunks([5]);
    bench.step();
    assert_eq!(bench.payloads_per_request(), [4, 4, 2]);
    let records = bench.records();
    let last = records.last().unwrap();
    assert_eq!(last.result_offset, 5 * u64::from(SLOT));
    assert!(last.flag_set().contains(MetadataFlags::LAST));
    assert_eq!(
        records
            .iter()
            .filter(|r| r.flag_set().contains(MetadataFlags::LAST))
            .count(),
        1
    );
}

#[test]
fn sf_percent_of_result_is_taken_from_the_launch_result_length() {
    // 320 result bytes: 25% is 80 bytes, so a batch closes at its third 32-byte payload.
    let mut quarter = bench(80, 64, 64, StreamingFactor::PercentOfResult(25), true);
    quarter.finish_chunks(0..10);
    quarter.step();
    assert_eq!(quarter.payloads_per_request(), [3, 3, 3, 1]);

    let mut whole = bench(80, 64, 64, StreamingFactor::PercentOfResult(100), true);
    whole.finish_chunks(0..9);
    whole.step();
    assert!(
        whole.hal.dma.submitted().is_empty(),
        "SF 100% waits for the whole result"
    );
    whole.finish_chunks([9]);
    whole.step();
    assert_eq!(whole.payloads_per_request(), [10]);
}

// ---------------------------------------------------------------------------------------------
// Out-of-order and in-order streaming
// ---------------------------------------------------------------------------------------------

#[test]
fn out_of_order_mode_streams_chunks_in_completion_order() {
    let mut bench = bench(32, 64, 64, slots(1), true);
    for chunk in [2, 0, 3, 1] {
        bench.finish_chunks([chunk]);
        bench.step();
    }
    assert_eq!(bench.streamed_offsets(), [64, 0, 96, 32]);
}

#[test]
fn out_of_order_mode_follows_completion_order_within_one_step() {
    let mut bench = bench(32, 64, 64, slots(4), true);
    bench.finish_chunks([3, 1, 2, 0]);
    bench.step();
    assert_eq!(bench.streamed_offsets(), [96, 32, 64, 0]);
}

#[test]
fn in_order_mode_holds_later_chunks_until_the_next_offset_completes() {
    let mut bench = bench(32, 64, 64, slots(1), false);
    bench.finish_chunks([2]);
    bench.step();
    bench.finish_chunks([1]);
    bench.step();
    assert!(
        bench.hal.dma.submitted().is_empty(),
        "chunks 1 and 2 wait for chunk 0"
    );
    bench.finish_chunks([0]);
    bench.step();
    assert_eq!(bench.streamed_offsets(), [0, 32, 64]);
    bench.finish_chunks([3]);
    bench.step();
    assert_eq!(bench.streamed_offsets(), [0, 32, 64, 96]);
    assert!(bench.records()[3].flag_set().contains(MetadataFlags::LAST));
}

// ---------------------------------------------------------------------------------------------
// Credits, edge D5, back-pressure
// ---------------------------------------------------------------------------------------------

// 8 chunks into a payload ring of 4 slots (the metadata ring is large), SF one slot.
fn credit_bench() -> AxleBench {
    bench(64, 64, 4, slots(1), true)
}

fn payload_indexes(bench: &AxleBench) -> Vec<u64> {
    bench
        .hal
        .dma
        .all_writes()
        .iter()
        .filter(|write| write.kind == DmaKind::Payload)
        .map(|write| write.index)
        .collect()
}

#[test]
fn spec_iv_d_executor_stops_after_ring_capacity_payloads_without_flow_control() {
    let mut bench = credit_bench();
    bench.finish_chunks(0..8);
    let outcome = bench.step();
    assert!(outcome.waiting_for_credit);
    assert_eq!(payload_indexes(&bench), [0, 1, 2, 3]);
    // Nothing changes however often the firmware steps (and the requests complete).
    bench.hal.complete_all_dma();
    for _ in 0..5 {
        bench.hal.clock.advance(Ticks(100));
        assert!(bench.step().waiting_for_credit);
    }
    assert_eq!(payload_indexes(&bench), [0, 1, 2, 3]);
    assert_eq!(bench.firmware.counters().payloads, 4);
}

#[test]
fn metadata_ring_capacity_limits_streaming_too() {
    let mut bench = bench(64, 3, 16, slots(1), true);
    bench.finish_chunks(0..8);
    assert!(bench.step().waiting_for_credit);
    assert_eq!(bench.records().len(), 3);
    bench.hal.send_heads(2, 1);
    bench.step();
    assert_eq!(bench.records().len(), 5, "two metadata slots were freed");
}

#[test]
fn spec_iv_d_device_reads_heads_only_when_its_cached_head_says_full() {
    let mut bench = credit_bench();
    bench.finish_chunks(0..4);
    bench.step();
    assert_eq!(payload_indexes(&bench), [0, 1, 2, 3]);
    assert_eq!(
        bench.firmware.counters().head_reads,
        0,
        "room left: no head read"
    );
    assert!(bench.hal.memory.flow_control_reads().is_empty());
    // The host sends heads; while the cached head grants room the device ignores them.
    bench.hal.send_heads(0, 0);
    bench.step();
    assert_eq!(bench.firmware.counters().head_reads, 0);
    // Now the ring is full and a chunk is ready: one read.
    bench.finish_chunks([4]);
    bench.step();
    assert_eq!(bench.firmware.counters().head_reads, 1);
    assert_eq!(bench.hal.memory.flow_control_reads().len(), 1);
}

#[test]
fn nothing_ready_means_no_head_read_even_when_full() {
    let mut bench = credit_bench();
    bench.finish_chunks(0..4);
    bench.step();
    for _ in 0..3 {
        bench.step();
    }
    assert_eq!(bench.firmware.counters().head_reads, 0);
}

#[test]
fn backpressure_ticks_count_the_time_a_ready_payload_waited_for_credit() {
    let mut bench = credit_bench();
    bench.hal.clock.advance(Ticks(1_000));
    bench.finish_chunks(0..8);
    assert!(bench.step().waiting_for_credit);
    assert_eq!(bench.firmware.counters().backpressure_ticks, 0);
    bench.hal.clock.advance(Ticks(700));
    bench.step();
    bench.hal.clock.advance(Ticks(300));
    bench.hal.send_heads(2, 2);
    bench.step();
    assert_eq!(bench.firmware.counters().backpressure_ticks, 1_000);
    let waits: Vec<_> = bench
        .firmware
        .trace()
        .events()
        .filter(|event| {
            matches!(
                event,
                TraceEvent::CreditWait { .. } | TraceEvent::CreditResume { .. }
            )
        })
        .copied()
        .collect();
    assert_eq!(
        waits[..2],
        [
            TraceEvent::CreditWait { at: Ticks(1_000) },
            TraceEvent::CreditResume { at: Ticks(2_000) }
        ]
    );
}

#[test]
fn spec_iv_d_valid_flow_control_message_resumes_streaming_into_freed_slots() {
    let mut bench = credit_bench();
    bench.finish_chunks(0..8);
    bench.step();
    bench.hal.complete_all_dma();
    // The host consumed payloads 0 and 1 (and read every record).
    bench.hal.send_heads(4, 2);
    assert!(
        bench.step().waiting_for_credit,
        "blocked again after two more"
    );
    assert_eq!(payload_indexes(&bench), [0, 1, 2, 3, 4, 5]);
    assert_eq!(
        bench
            .hal
            .memory
            .last_flow_control_read()
            .unwrap()
            .payload_head,
        2
    );
    // Payloads 4 and 5 reuse the slots of 0 and 1.
    let writes = bench.hal.dma.all_writes();
    let slots: Vec<RegionPlace> = writes
        .iter()
        .filter(|write| write.kind == DmaKind::Payload)
        .map(|write| bench.region.place(write.destination))
        .collect();
    assert_eq!(slots[4], RegionPlace::PayloadSlot { slot: 0, within: 0 });
    assert_eq!(slots[5], RegionPlace::PayloadSlot { slot: 1, within: 0 });
    bench.hal.complete_all_dma();
    bench.hal.send_heads(6, 6);
    assert!(!bench.step().waiting_for_credit);
    assert_eq!(payload_indexes(&bench), [0, 1, 2, 3, 4, 5, 6, 7]);
    assert!(bench
        .records()
        .last()
        .unwrap()
        .flag_set()
        .contains(MetadataFlags::LAST));
}

fn assert_broken_and_silent(bench: &mut AxleBench, status: Status) {
    assert_eq!(bench.firmware.broken(), Some(status));
    let requests = bench.hal.dma.submitted();
    let last = requests.last().unwrap();
    assert_eq!(kinds(last), [DmaKind::DeviceStatus]);
    let write = &last.writes()[0];
    assert_eq!(write.value(), u64::from(status.code()));
    assert_eq!(
        write.destination,
        bench.region.control_word(control::DEVICE_STATUS_OFFSET)
    );
    bench.hal.complete_all_dma();
    assert_eq!(bench.region.device_status(&bench.hal.host), status.code());
    // Nothing more is streamed, whatever the host does next.
    let payloads = payload_indexes(bench).len();
    let total = bench.hal.dma.submitted().len();
    bench.hal.send_heads(64, 64);
    bench.hal.settle(&mut bench.firmware, 8);
    let unfinished = bench.hal.compute.unfinished_items();
    bench.hal.finish_items(unfinished);
    bench.hal.settle(&mut bench.firmware, 8);
    assert_eq!(payload_indexes(bench).len(), payloads);
    assert_eq!(bench.hal.dma.submitted().len(), total);
}

#[test]
fn spec_v_head_beyond_the_tail_latches_broken_and_publishes_device_status() {
    let mut bench = credit_bench();
    bench.finish_chunks(0..6);
    bench.step();
    bench.hal.send_heads(4, 5); // payload tail is 4
    bench.step();
    assert_broken_and_silent(&mut bench, Status::HeadBeyondTail);
}

#[test]
fn spec_v_head_moving_backwards_latches_broken_and_publishes_device_status() {
    let mut bench = credit_bench();
    bench.finish_chunks(0..7);
    bench.step();
    bench.hal.send_heads(4, 3);
    bench.step();
    assert_eq!(payload_indexes(&bench), [0, 1, 2, 3, 4, 5, 6]);
    bench.hal.send_heads(7, 2); // the payload head goes back from 3 to 2
    bench.finish_chunks([7]);
    bench.step();
    assert_broken_and_silent(&mut bench, Status::HeadBeyondTail);
}

// ---------------------------------------------------------------------------------------------
// DMA resources
// ---------------------------------------------------------------------------------------------

#[test]
fn queue_full_keeps_the_batch_and_streams_it_with_the_next_chunk() {
    let mut bench = bench(32, 64, 64, slots(1), true);
    bench.hal.dma.refuse_next(1);
    bench.finish_chunks([0]);
    bench.step();
    assert_eq!(bench.hal.dma.refusals(), 1);
    assert!(bench.hal.dma.submitted().is_empty());
    bench.finish_chunks([1, 2, 3]);
    bench.hal.settle(&mut bench.firmware, 16);
    let mut offsets = bench.streamed_offsets();
    offsets.sort_unstable();
    assert_eq!(offsets, [0, 32, 64, 96], "nothing lost, nothing twice");
    let records = bench.records();
    let sequences: Vec<u64> = records.iter().map(|r| r.sequence).collect();
    assert_eq!(sequences, [0, 1, 2, 3]);
}

#[test]
fn queue_full_batch_is_resubmitted_after_a_dma_completion() {
    let mut bench = bench(32, 64, 64, slots(1), true);
    bench.hal.dma.set_queue_depth(Some(1));
    bench.finish_chunks([0]);
    bench.step();
    bench.finish_chunks([1]);
    bench.step();
    assert_eq!(
        bench.hal.dma.submitted().len(),
        1,
        "chunk 1 refused: the queue holds chunk 0"
    );
    assert_eq!(bench.hal.dma.refusals(), 1);
    // The engine finishes chunk 0's request: its queue has room again.
    bench.hal.complete_all_dma();
    bench.step();
    assert_eq!(
        bench.hal.dma.submitted().len(),
        2,
        "chunk 1's full batch must go out once the engine has room"
    );
}

// Every metadata-tail and payload-tail value published, in submission and chain order.
fn published_tails(bench: &AxleBench, kind: DmaKind) -> Vec<u64> {
    bench
        .hal
        .dma
        .all_writes()
        .iter()
        .filter(|write| write.kind == kind)
        .map(DmaWrite::value)
        .collect()
}

#[test]
fn full_dma_engine_batches_the_chunks_that_complete_meanwhile() {
    // Four channels, no queue beyond them (the emulator's engine).
    let mut bench = bench(80, 64, 64, slots(1), true);
    bench.hal.dma.set_queue_depth(Some(4));
    bench.finish_chunks(0..4);
    bench.step();
    assert_eq!(
        bench.payloads_per_request(),
        [1, 1, 1, 1],
        "SF1 while a channel is free"
    );
    // Every channel is busy: five chunks complete meanwhile and join the open batch.
    bench.finish_chunks(4..9);
    bench.step();
    assert_eq!(bench.hal.dma.submitted().len(), 4);
    assert_eq!(
        bench.firmware.counters().payloads,
        9,
        "payloads keep forming while the engine is full"
    );
    // A channel frees: the five leave in one request, not five.
    bench.hal.complete_dma(1);
    bench.step();
    assert_eq!(bench.payloads_per_request(), [1, 1, 1, 1, 5]);
    let batch = bench.hal.dma.submitted().last().unwrap();
    assert_eq!(batch.writes_of(DmaKind::Payload).count(), 5);
    assert_eq!(
        batch.writes_of(DmaKind::PayloadTail).count(),
        1,
        "one payload-tail write for the five"
    );
    assert_eq!(kinds(batch).last(), Some(&DmaKind::PayloadTail));
    assert_eq!(batch.published_metadata_tail(), Some(9));
    assert_eq!(bench.firmware.counters().dma_requests, 5);
}

#[test]
fn full_in_flight_window_batches_the_chunks_that_complete_meanwhile() {
    // The engine takes everything: the executor's own window is the limit.
    let window = firmware::executor::MAX_IN_FLIGHT as u32;
    let chunks = window + 6;
    let mut bench = bench(chunks * 8, 128, 128, slots(1), true);
    bench.finish_chunks(0..window);
    bench.step();
    assert_eq!(bench.hal.dma.outstanding(), window as usize);
    bench.finish_chunks(window..chunks);
    bench.step();
    assert_eq!(bench.hal.dma.submitted().len(), window as usize);
    assert_eq!(bench.firmware.counters().payloads, u64::from(chunks));
    bench.hal.complete_dma(1);
    bench.step();
    let per_request = bench.payloads_per_request();
    assert_eq!(per_request.len(), window as usize + 1);
    assert_eq!(per_request.last(), Some(&6), "the six leave together");
    assert!(bench
        .records()
        .last()
        .unwrap()
        .flag_set()
        .contains(MetadataFlags::LAST));
}

#[test]
fn streaming_factor_still_cuts_batches_while_the_engine_takes_requests() {
    let mut bench = bench(80, 64, 64, slots(2), true);
    bench.hal.dma.set_queue_depth(Some(4));
    bench.finish_chunks(0..8);
    bench.step();
    assert_eq!(
        bench.payloads_per_request(),
        [2, 2, 2, 2],
        "an idle engine gets SF-sized batches, not one batch of eight"
    );
}

#[test]
fn launch_end_held_by_a_full_engine_leaves_whole_with_one_last_record() {
    // 10 chunks, SF of 4 slots, one channel.
    let mut bench = bench(80, 64, 64, slots(4), true);
    bench.hal.dma.set_queue_depth(Some(1));
    bench.finish_chunks(0..4);
    bench.step();
    assert_eq!(bench.payloads_per_request(), [4]);
    bench.finish_chunks(4..10);
    bench.step();
    assert_eq!(bench.payloads_per_request(), [4], "the channel is busy");
    assert_eq!(bench.firmware.counters().payloads, 10);
    bench.hal.complete_dma(1);
    let outcome = bench.step();
    assert_eq!(
        bench.payloads_per_request(),
        [4, 6],
        "past the streaming factor, sent whole"
    );
    assert!(outcome.busy, "the last request is in flight");
    let lasts: Vec<bool> = bench
        .records()
        .iter()
        .map(|record| record.flag_set().contains(MetadataFlags::LAST))
        .collect();
    assert_eq!(lasts.iter().filter(|&&last| last).count(), 1);
    assert_eq!(lasts.last(), Some(&true));
    bench.hal.complete_all_dma();
    assert!(!bench.step().busy);
}

#[test]
fn spec_v_e_credit_returning_while_the_engine_is_busy_streams_few_large_requests() {
    // 20 chunks, SF1, 8 payload slots, one channel.
    let mut bench = bench(160, 64, 8, slots(1), true);
    bench.hal.dma.set_queue_depth(Some(1));
    bench.finish_chunks(0..20);
    assert!(bench.step().waiting_for_credit);
    assert_eq!(
        bench.firmware.counters().payloads,
        8,
        "all eight slots filled while the channel was busy"
    );
    assert_eq!(bench.payloads_per_request(), [1]);
    // The channel frees: the seven waiting payloads go out together, so the host can consume
    // them; the executor still waits for credit.
    bench.hal.complete_dma(1);
    assert!(bench.step().waiting_for_credit);
    assert_eq!(bench.payloads_per_request(), [1, 7]);
    bench.hal.complete_dma(1);
    // Credit returns: eight more payloads form at once; the first leaves alone (the channel
    // is free, SF1), the seven after it batch behind it.
    bench.hal.send_heads(8, 8);
    assert!(bench.step().waiting_for_credit);
    assert_eq!(bench.payloads_per_request(), [1, 7, 1]);
    bench.hal.complete_dma(1);
    bench.step();
    assert_eq!(bench.payloads_per_request(), [1, 7, 1, 7]);
    bench.hal.complete_all_dma();
    bench.hal.send_heads(16, 16);
    bench.hal.settle(&mut bench.firmware, 16);
    assert_eq!(bench.payloads_per_request(), [1, 7, 1, 7, 1, 3]);
    // Tails were published, and landed, in order.
    let metadata_tails = published_tails(&bench, DmaKind::MetadataTail);
    assert_eq!(metadata_tails, (1..=20).collect::<Vec<u64>>());
    assert_eq!(
        published_tails(&bench, DmaKind::PayloadTail),
        [1, 8, 9, 16, 17, 20]
    );
    assert_eq!(bench.region.metadata_tail(&bench.hal.host), 20);
    assert_eq!(bench.region.payload_tail(&bench.hal.host), 20);
}

#[test]
fn broken_status_waits_for_a_free_channel_and_is_then_published() {
    // Eight chunks, four payload slots, one channel.
    let mut bench = credit_bench();
    bench.hal.dma.set_queue_depth(Some(1));
    bench.finish_chunks(0..6);
    assert!(bench.step().waiting_for_credit);
    assert_eq!(bench.payloads_per_request(), [1]);
    // A payload head beyond the tail (4): BROKEN while the only channel is busy.
    bench.hal.send_heads(4, 5);
    let outcome = bench.step();
    assert_eq!(bench.firmware.broken(), Some(Status::HeadBeyondTail));
    assert!(
        bench
            .hal
            .dma
            .submitted()
            .iter()
            .all(|request| request.writes_of(DmaKind::DeviceStatus).count() == 0),
        "no channel for the status write yet"
    );
    assert!(outcome.busy, "the status still has to go out");
    // The channel frees: the status goes out at once.
    bench.hal.complete_dma(1);
    bench.step();
    assert_broken_and_silent(&mut bench, Status::HeadBeyondTail);
}

#[test]
fn short_final_chunk_payload_stays_inside_device_memory() {
    // 5 rows: 20 result bytes, one chunk of 20 bytes, padded to 24 on the wire.
    let memory_end = firmware::testing::DEVICE_MEMORY_BYTES;
    let launch =
        KnnLaunch::new(5, 16, 1).with_result_at(shared_abi::DeviceAddress(memory_end - 20));
    let mut bench = AxleBench::new(TestRegion::new(8, 8, SLOT), launch, slots(1), true);
    bench.start(CommandFlags::empty());
    bench.finish_chunks([0]);
    bench.step();
    assert_eq!(bench.firmware.broken(), None);
    let request = &bench.hal.dma.submitted()[0];
    assert!(
        request.chain.is_ok(),
        "undecodable chain: {:?}",
        request.chain
    );
}

#[test]
fn descriptor_and_staging_rings_wrap_without_corrupting_chains() {
    // A scratch area of 16 descriptors and 12 staging cells: 40 payloads wrap both many times.
    let region = TestRegion::new(64, 64, SLOT);
    let mut bench = AxleBench::new(region, KnnLaunch::new(320, 16, 1), slots(2), true);
    bench.firmware = firmware::Firmware::new(firmware::FirmwareConfig {
        scratch: firmware::scratch::ScratchLayout {
            descriptor_capacity: 16,
            staging_capacity: 12,
            ..firmware::testing::test_scratch()
        },
        streaming_factor: slots(2),
        out_of_order: true,
    });
    bench.region.clone().program(&mut bench.hal);
    bench.step();
    bench.start(CommandFlags::empty());
    assert_eq!(bench.chunks(), 40);
    let order: Vec<u32> = (0..20).rev().chain(20..40).collect();
    for chunk in order.chunks(3) {
        bench.finish_chunks(chunk.iter().copied());
        bench.hal.settle(&mut bench.firmware, 64);
    }
    let expected = bench.launch.expected_result();
    let host = &bench.hal.host;
    assert_eq!(bench.region.metadata_tail(host), 40);
    let records = bench.records();
    assert_eq!(records.len(), 40);
    for (index, (record, payload)) in records
        .iter()
        .zip(payloads_with_records(&bench))
        .enumerate()
    {
        assert_eq!(record.sequence, index as u64);
        let start = record.result_offset as usize;
        assert_eq!(&payload.0.bytes[..32], &expected[start..start + 32]);
    }
    let mut offsets = bench.streamed_offsets();
    offsets.sort_unstable();
    assert_eq!(
        offsets,
        (0..40).map(|chunk| chunk * 32).collect::<Vec<u64>>()
    );
    assert!(!bench.step().busy);
}

// SF 4: one request in flight and two payloads in the open batch; then the request fails.
fn bench_with_failed_request() -> AxleBench {
    let mut bench = bench(80, 64, 64, slots(4), true);
    bench.finish_chunks(0..6);
    bench.step();
    assert_eq!(bench.payloads_per_request(), [4]);
    bench.hal.complete_next_dma(Status::TranslationFault);
    bench.step();
    bench
}

#[test]
fn failed_dma_request_latches_broken_and_streams_nothing_more() {
    let mut bench = bench_with_failed_request();
    assert_eq!(bench.firmware.broken(), Some(Status::TranslationFault));
    let last = bench.hal.dma.submitted().last().unwrap();
    assert_eq!(kinds(last), [DmaKind::DeviceStatus]);
    bench.hal.complete_all_dma();
    bench.hal.finish_all_items();
    bench.hal.settle(&mut bench.firmware, 8);
    assert_eq!(
        bench.payloads_per_request(),
        [4],
        "nothing streamed after BROKEN"
    );
    assert_eq!(
        bench.region.device_status(&bench.hal.host),
        Status::TranslationFault.code()
    );
}

#[test]
fn a_dma_completion_out_of_submission_order_latches_broken_as_a_hal_breach() {
    let mut bench = bench(80, 64, 64, slots(4), true);
    bench.finish_chunks(0..6);
    bench.step();
    assert_eq!(bench.payloads_per_request(), [4]);
    let oldest = bench.hal.dma.submitted()[0].tag;
    let bogus = firmware::hal::DmaTag(oldest.0 + 1000);
    bench.hal.report_spurious_dma_completion(bogus);
    bench.step();
    assert_eq!(
        bench.firmware.broken_error(),
        Some(firmware::FirmwareError::HalContract(
            firmware::HalBreach::CompletionOutOfOrder {
                reported: bogus.0,
                expected: Some(oldest.0),
            }
        ))
    );
    // On the wire the host reads a HAL breach, not a malformed descriptor of its own.
    assert_eq!(bench.firmware.broken(), Some(Status::HalContract));
    let last = bench.hal.dma.submitted().last().unwrap();
    assert_eq!(kinds(last), [DmaKind::DeviceStatus]);
    assert_eq!(
        last.writes()[0].value(),
        u64::from(Status::HalContract.code())
    );
}

#[test]
fn broken_ring_with_an_open_batch_is_not_busy_once_every_item_finished() {
    let mut bench = bench_with_failed_request();
    bench.hal.complete_all_dma();
    bench.hal.finish_all_items();
    bench.hal.settle(&mut bench.firmware, 8);
    assert_eq!(bench.hal.dma.outstanding(), 0);
    assert!(
        !bench.step().busy,
        "BROKEN, every item done, nothing in flight: not busy"
    );
}

// ---------------------------------------------------------------------------------------------
// What the device sees of the executor, the retry path, and scratch room
// ---------------------------------------------------------------------------------------------

#[test]
fn stream_tails_and_the_credit_wait_are_what_the_executor_published_and_waits_for() {
    let mut bench = credit_bench();
    assert_eq!(bench.firmware.stream_tails(), (0, 0));
    assert!(!bench.firmware.waiting_for_credit());
    bench.finish_chunks(0..6);
    bench.step();
    assert_eq!(
        bench.firmware.stream_tails(),
        (4, 4),
        "four records and payloads"
    );
    assert!(
        bench.firmware.waiting_for_credit(),
        "chunks 4 and 5 wait for credit"
    );
    bench.hal.complete_all_dma();
    bench.hal.send_heads(4, 4);
    bench.step();
    assert_eq!(bench.firmware.stream_tails(), (6, 6));
    assert!(!bench.firmware.waiting_for_credit(), "credit came back");
}

#[test]
fn a_batch_resubmitted_after_a_completion_lets_the_next_due_batch_follow_in_the_same_step() {
    // Three channels, SF1: chunk 3's batch is refused, then two requests complete.
    let mut bench = bench(80, 64, 64, slots(1), true);
    bench.hal.dma.set_queue_depth(Some(3));
    bench.finish_chunks(0..4);
    bench.step();
    assert_eq!(bench.payloads_per_request(), [1, 1, 1]);
    assert_eq!(bench.hal.dma.refusals(), 1);
    bench.hal.complete_dma(2);
    bench.finish_chunks([4]);
    bench.step();
    // The retried batch took one free channel; chunk 4's batch takes the other at once
    // rather than joining a new open batch behind a channel the executor thinks is busy.
    assert_eq!(bench.payloads_per_request(), [1, 1, 1, 1, 1]);
    assert_eq!(bench.streamed_offsets(), [0, 32, 64, 96, 128]);
}

// A bench of `rows` KNN rows whose firmware has a scratch area of `descriptors` descriptor
// slots and `cells` staging cells (the rest as in `test_scratch`).
fn bench_with_scratch(
    rows: u32,
    payload_capacity: u32,
    streaming_factor: StreamingFactor,
    descriptors: u32,
    cells: u32,
) -> AxleBench {
    let region = TestRegion::new(64, payload_capacity, SLOT);
    let mut bench = AxleBench::new(region, KnnLaunch::new(rows, 16, 1), streaming_factor, true);
    bench.firmware = firmware::Firmware::new(firmware::FirmwareConfig {
        scratch: firmware::scratch::ScratchLayout {
            descriptor_capacity: descriptors,
            staging_capacity: cells,
            ..firmware::testing::test_scratch()
        },
        streaming_factor,
        out_of_order: true,
    });
    bench.region.clone().program(&mut bench.hal);
    bench.step();
    bench.start(CommandFlags::empty());
    bench
}

#[test]
fn a_batch_below_the_streaming_factor_leaves_when_the_descriptor_ring_is_full() {
    // 16 descriptors: a whole-chunk payload takes 3 (D1, D3, D4) and one more payload needs
    // room for 4 plus the batch's D2, so the fifth payload does not fit beside four.
    let mut bench = bench_with_scratch(80, 64, slots(8), 16, 1024);
    bench.finish_chunks(0..10);
    bench.step();
    assert_eq!(
        bench.payloads_per_request(),
        [4],
        "the open batch is closed for want of descriptors, not held for SF 8"
    );
    bench.hal.complete_all_dma();
    bench.step();
    assert_eq!(bench.payloads_per_request(), [4, 4]);
    bench.hal.complete_all_dma();
    bench.step();
    assert_eq!(bench.payloads_per_request(), [4, 4, 2]);
}

// Checks one request's chain against the launch: for each payload in order its D1 (whole
// words, then a zero-padded last word), its record D3 and its metadata tail D4, then one D2
// with the new payload tail. Returns the payload indices it carried.
fn assert_chain_streams_the_result(bench: &AxleBench, request: &SubmittedRequest) -> Vec<u64> {
    let result = bench
        .hal
        .memory
        .bytes(bench.launch.result, bench.launch.result_length());
    let layout = *bench.region.layout();
    let writes = request.writes();
    let (d2, groups) = writes.split_last().expect("an empty chain");
    let mut payload_bytes: Vec<u8> = Vec::new();
    let mut payload_index = None;
    let mut carried = Vec::new();
    let mut position = 0;
    while position < groups.len() {
        let write = &groups[position];
        match write.kind {
            DmaKind::Payload => {
                assert!(payload_index.is_none_or(|index| index == write.index));
                payload_index = Some(write.index);
                payload_bytes.extend_from_slice(&write.bytes);
                position += 1;
            }
            DmaKind::Metadata => {
                let record = write.record().unwrap();
                let index = payload_index.take().expect("a record without its payload");
                assert_eq!(record.sequence, index, "record {index} names its own index");
                assert_eq!(write.index, index);
                assert_eq!(
                    u64::from(record.payload_slot),
                    index % u64::from(layout.payload_capacity())
                );
                let start = record.result_offset as usize;
                let length = record.length as usize;
                assert_eq!(
                    &payload_bytes[..length],
                    &result[start..start + length],
                    "payload {index} carries its chunk"
                );
                assert!(
                    payload_bytes[length..].iter().all(|&byte| byte == 0),
                    "padding of payload {index} is zero"
                );
                assert_eq!(payload_bytes.len(), length.div_ceil(8) * 8);
                let tail = &groups[position + 1];
                assert_eq!(tail.kind, DmaKind::MetadataTail);
                assert_eq!(tail.value(), index + 1);
                carried.push(index);
                payload_bytes.clear();
                position += 2;
            }
            kind => panic!("unexpected {kind:?} in a payload chain"),
        }
    }
    assert!(payload_index.is_none(), "a payload without its record");
    assert_eq!(d2.kind, DmaKind::PayloadTail);
    assert_eq!(Some(d2.value()), carried.last().map(|index| index + 1));
    assert_eq!(carried.len() as u32, request.request.payloads);
    carried
}

// Completes the oldest outstanding request after checking that its descriptors and staging
// cells still hold what they held when it was submitted: a real engine reads them while the
// request runs, so the executor must not reuse them before the completion.
fn complete_oldest_checking_its_chain(bench: &mut AxleBench) {
    let request = bench
        .hal
        .dma
        .submitted()
        .iter()
        .find(|request| request.completed.is_none())
        .expect("nothing outstanding");
    let now = firmware::testing::decode_request(&bench.hal.memory, &request.request);
    assert_eq!(
        now, request.chain,
        "request {:?} was overwritten while in flight",
        request.tag
    );
    bench.hal.complete_next_dma(Status::Ok).unwrap();
}

#[test]
fn descriptors_and_staging_cells_in_use_are_never_reused_whatever_the_scratch_room() {
    // Every small scratch area (at least the 5 descriptors and 4 cells one payload and D2
    // need), whole and short last chunks, streaming factors of 1 and 3 slots, and an engine
    // that keeps 0 to 2 requests outstanding: every chain streams its payloads intact, no
    // request's descriptors or cells change while it is in flight, and every chunk arrives.
    for descriptors in 5..=14 {
        for cells in 4..=10 {
            for rows in [61, 72] {
                for (sf, lag) in [(1, 0), (1, 2), (3, 1)] {
                    let case = format!(
                        "{descriptors} descriptors, {cells} cells, {rows} rows, SF {sf}, lag {lag}"
                    );
                    let mut bench = bench_with_scratch(rows, 64, slots(sf), descriptors, cells);
                    let chunks = bench.chunks();
                    let mut next_chunk = 0;
                    let mut rounds = 0;
                    loop {
                        rounds += 1;
                        assert!(rounds < 200, "no progress: {case}");
                        if next_chunk < chunks {
                            bench.finish_chunks([next_chunk]);
                            next_chunk += 1;
                        }
                        let before = bench.hal.dma.submitted().len();
                        let busy = bench.step().busy;
                        if !busy && next_chunk == chunks {
                            break;
                        }
                        let idle = bench.hal.dma.submitted().len() == before;
                        while bench.hal.dma.outstanding() > lag
                            || (idle && bench.hal.dma.outstanding() > 0)
                        {
                            complete_oldest_checking_its_chain(&mut bench);
                            if idle {
                                break;
                            }
                        }
                    }
                    let mut streamed = Vec::new();
                    for request in bench.hal.dma.submitted() {
                        streamed.extend(assert_chain_streams_the_result(&bench, request));
                    }
                    assert_eq!(
                        streamed,
                        (0..u64::from(chunks)).collect::<Vec<u64>>(),
                        "{case}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_broken_status_waits_while_the_in_flight_window_is_full() {
    // The engine takes everything; 64 one-payload requests fill the executor's window and the
    // payload ring (64 slots), so the 65th chunk reads the heads: the host's payload head is
    // beyond the tail.
    let window = firmware::executor::MAX_IN_FLIGHT;
    let mut bench = bench(65 * 8, 128, 64, slots(1), true);
    bench.finish_chunks(0..64);
    bench.step();
    assert_eq!(bench.hal.dma.outstanding(), window);
    bench.hal.send_heads(0, 65);
    bench.finish_chunks([64]);
    bench.step();
    assert_eq!(bench.firmware.broken(), Some(Status::HeadBeyondTail));
    bench.step();
    assert_eq!(
        bench.hal.dma.submitted().len(),
        window,
        "no status write while {window} requests are in flight"
    );
    bench.hal.complete_dma(1);
    bench.step();
    bench.step();
    let statuses: Vec<&SubmittedRequest> = bench
        .hal
        .dma
        .submitted()
        .iter()
        .filter(|request| request.writes_of(DmaKind::DeviceStatus).count() > 0)
        .collect();
    assert_eq!(statuses.len(), 1, "published once, when a slot freed");
    assert_eq!(bench.hal.dma.submitted().len(), window + 1);
    assert_broken_and_silent(&mut bench, Status::HeadBeyondTail);
}

// ---------------------------------------------------------------------------------------------
// The property: random orders, capacities, factors, and a gap-aware host
// ---------------------------------------------------------------------------------------------

// A test-side host: moves records to a ready pool as the metadata tail shows them, consumes
// payloads in a random order, advances its payload head over the contiguous consumed prefix
// only, and sends both heads back.
#[derive(Default)]
struct GapAwareHost {
    metadata_head: u64,
    payload_head: u64,
    ready: Vec<MetadataRecord>,
    consumed: BTreeSet<u64>,
    streamed: BTreeMap<u64, u32>,
    records: Vec<MetadataRecord>,
    sent: (u64, u64),
}

impl GapAwareHost {
    // Edge H1: read the metadata tail, then every record up to it.
    fn poll(&mut self, bench: &AxleBench) -> Result<(), TestCaseError> {
        let tail = bench.region.metadata_tail(&bench.hal.host);
        let layout = bench.region.layout();
        while self.metadata_head < tail {
            let record = bench.region.record(&bench.hal.host, self.metadata_head);
            prop_assert_eq!(record.sequence, self.metadata_head, "stale or torn record");
            prop_assert_eq!(record.tag, bench.tag);
            // One payload per record: record m names payload index m.
            prop_assert_eq!(
                record.payload_slot,
                (self.metadata_head % u64::from(layout.payload_capacity())) as u32
            );
            self.ready.push(record);
            self.records.push(record);
            self.metadata_head += 1;
        }
        Ok(())
    }

    fn consume(
        &mut self,
        bench: &AxleBench,
        picks: &mut impl Iterator<Item = usize>,
        expected: &[u8],
    ) -> Result<(), TestCaseError> {
        let count = picks.next().unwrap_or(0) % (self.ready.len() + 1);
        for _ in 0..count {
            let position = picks.next().unwrap_or(0) % self.ready.len();
            let record = self.ready.swap_remove(position);
            let data = bench.region.payload(
                &bench.hal.host,
                record.payload_slot,
                u64::from(record.length),
            );
            let start = record.result_offset as usize;
            prop_assert_eq!(
                &data[..],
                &expected[start..start + record.length as usize],
                "payload overwritten before it was consumed"
            );
            *self.streamed.entry(record.result_offset).or_default() += 1;
            self.consumed.insert(record.sequence);
        }
        while self.consumed.contains(&self.payload_head) {
            self.payload_head += 1;
        }
        Ok(())
    }

    fn send(&mut self, bench: &mut AxleBench) {
        if self.sent != (self.metadata_head, self.payload_head) {
            self.sent = (self.metadata_head, self.payload_head);
            bench.hal.send_heads(self.metadata_head, self.payload_head);
        }
    }
}

#[expect(
    clippy::too_many_arguments,
    reason = "one parameter per dimension the property test draws"
)]
fn streaming_run(
    rows: u32,
    metadata_capacity: u32,
    payload_capacity: u32,
    sf_slots: u64,
    engine_channels: Option<usize>,
    item_order: Vec<u32>,
    mut choices: Vec<usize>,
    out_of_order: bool,
) -> Result<(), TestCaseError> {
    let mut bench = bench(
        rows,
        metadata_capacity,
        payload_capacity,
        slots(sf_slots),
        out_of_order,
    );
    bench.hal.dma.set_queue_depth(engine_channels);
    let expected = bench.launch.expected_result();
    let chunks = u64::from(bench.chunks());
    choices.extend(std::iter::repeat_n(1, 64));
    let mut picks = choices.into_iter().cycle();
    let mut host = GapAwareHost::default();
    let mut items = item_order.into_iter().peekable();
    let mut checked_requests = 0;
    let mut rounds = 0;
    while host.streamed.len() as u64 != chunks || bench.hal.dma.outstanding() > 0 {
        rounds += 1;
        prop_assert!(
            rounds < 20_000,
            "no progress: host saw {} of {} chunks",
            host.streamed.len(),
            chunks
        );
        // Some items finish.
        let batch = picks.next().unwrap() % 5;
        let finished: Vec<u32> = items.by_ref().take(batch).collect();
        bench.hal.finish_items(finished);
        bench
            .hal
            .clock
            .advance(Ticks(1 + (picks.next().unwrap() % 50) as u64));
        // Now and then the engine's queue is full.
        if picks.next().unwrap() % 11 == 0 {
            bench.hal.dma.refuse_next(1);
        }
        bench.step();
        // Every new request respects the credits of the last heads the device read.
        let last_read = bench
            .hal
            .memory
            .last_flow_control_read()
            .unwrap_or_default();
        for request in &bench.hal.dma.submitted()[checked_requests..] {
            for write in request.writes() {
                match write.kind {
                    DmaKind::Payload => prop_assert!(
                        write.index < last_read.payload_head + u64::from(payload_capacity),
                        "payload {} beyond read head {} + capacity {}",
                        write.index,
                        last_read.payload_head,
                        payload_capacity
                    ),
                    DmaKind::Metadata => prop_assert!(
                        write.index < last_read.metadata_head + u64::from(metadata_capacity),
                        "record {} beyond read head {} + capacity {}",
                        write.index,
                        last_read.metadata_head,
                        metadata_capacity
                    ),
                    DmaKind::DeviceStatus => {
                        prop_assert!(false, "ring latched BROKEN: {:?}", bench.firmware.broken())
                    }
                    _ => {}
                }
            }
        }
        checked_requests = bench.hal.dma.submitted().len();
        // Some requests land, the host polls, consumes, and sends heads.
        let land = picks.next().unwrap() % 3;
        bench.hal.complete_dma(land);
        host.poll(&bench)?;
        host.consume(&bench, &mut picks, &expected)?;
        host.send(&mut bench);
        if items.peek().is_none() && rounds % 7 == 0 {
            // Drain: make sure the run ends.
            bench.hal.complete_all_dma();
        }
    }
    bench.step();
    prop_assert!(
        host.streamed.values().all(|&times| times == 1),
        "a chunk streamed twice"
    );
    let offsets: Vec<u64> = host.streamed.keys().copied().collect();
    let all: Vec<u64> = (0..chunks).map(|chunk| chunk * u64::from(SLOT)).collect();
    prop_assert_eq!(offsets, all);
    prop_assert_eq!(host.records.len() as u64, chunks, "one record per chunk");
    // Tails are published in submission order: the metadata tail counts up one by one, the
    // payload tail never goes back, and the last of each names every chunk.
    prop_assert_eq!(
        published_tails(&bench, DmaKind::MetadataTail),
        (1..=chunks).collect::<Vec<u64>>()
    );
    let payload_tails = published_tails(&bench, DmaKind::PayloadTail);
    prop_assert!(payload_tails.windows(2).all(|pair| pair[0] < pair[1]));
    prop_assert_eq!(payload_tails.last().copied(), Some(chunks));
    if !out_of_order {
        let in_metadata_order: Vec<u64> = host
            .records
            .iter()
            .map(|record| record.result_offset)
            .collect();
        prop_assert!(
            in_metadata_order.windows(2).all(|pair| pair[0] < pair[1]),
            "in-order mode out of order: {:?}",
            in_metadata_order
        );
    }
    let last_flags: Vec<bool> = host
        .records
        .iter()
        .map(|record| record.flag_set().contains(MetadataFlags::LAST))
        .collect();
    prop_assert!(
        last_flags.last().copied().unwrap_or(false),
        "the final record is not LAST"
    );
    prop_assert_eq!(
        last_flags.iter().filter(|&&last| last).count(),
        1,
        "LAST more than once"
    );
    prop_assert_eq!(bench.firmware.broken(), None);
    prop_assert!(
        !bench.step().busy,
        "the firmware is still busy after the launch streamed"
    );
    Ok(())
}

fn run_shape() -> impl Strategy<Value = (u32, Vec<u32>)> {
    (1u32..=120).prop_flat_map(|rows| {
        (
            Just(rows),
            Just((0..rows).collect::<Vec<u32>>()).prop_shuffle(),
        )
    })
}

proptest! {
    #[test]
    fn spec_iv_streaming_respects_credits_and_streams_every_chunk_once_with_last_at_the_end(
        (rows, item_order) in run_shape(),
        metadata_capacity in 1u32..=16,
        payload_capacity in 1u32..=16,
        sf_slots in 1u64..=8,
        engine_channels in proptest::option::of(1usize..=4),
        choices in proptest::collection::vec(0usize..1000, 1..64),
    ) {
        streaming_run(rows, metadata_capacity, payload_capacity, sf_slots, engine_channels, item_order, choices, true)?;
    }

    #[test]
    fn in_order_streaming_respects_credits_and_streams_by_offset(
        (rows, item_order) in run_shape(),
        payload_capacity in 1u32..=16,
        sf_slots in 1u64..=8,
        engine_channels in proptest::option::of(1usize..=4),
        choices in proptest::collection::vec(0usize..1000, 1..64),
    ) {
        streaming_run(rows, 16, payload_capacity, sf_slots, engine_channels, item_order, choices, false)?;
    }
}
