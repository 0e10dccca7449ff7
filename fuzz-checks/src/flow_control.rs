//! Arbitrary flow-control messages against arbitrary device tails: `Credits::refresh` (edge
//! D5) and `Credits::free`, over a sequence of steps so that the cached heads move.
//!
//! Each step stores a `FlowControlMessage` at `device_map::FLOW_CONTROL` of a fake device
//! memory and refreshes against the step's tails. A variant byte puts the heads and tails near
//! each other (just below, at, just beyond, behind the cached head), where the rule's edges are.
//!
//! Checked, beyond "never panics":
//! - `refresh` is `Ok` exactly when both heads move forward (or stay) from the cached ones and
//!   stay at or below the tails; then it adopts them; otherwise it fails with
//!   `HeadBeyondTail` and changes nothing;
//! - a memory too small to hold the block fails with `DeviceMemoryFault`, changing nothing;
//! - `free` never grants more than the capacity, and grants exactly `capacity - (tail - head)`
//!   when that is defined, zero otherwise.

use crate::FakeDeviceMemory;
use arbitrary::Arbitrary;
use firmware::flow::Credits;
use firmware::FirmwareError;
use shared_abi::{device_map, FlowControlMessage};
use zerocopy::IntoBytes;

#[derive(Arbitrary, Debug)]
struct Step {
    variant: u8,
    metadata_head: u64,
    payload_head: u64,
    metadata_tail: u64,
    payload_tail: u64,
    metadata_capacity: u32,
    payload_capacity: u32,
}

#[derive(Arbitrary, Debug)]
struct Input {
    memory_cut: u8,
    steps: Vec<Step>,
}

const BLOCK_END: usize = device_map::FLOW_CONTROL.0 as usize + 16;

/// A value near `base`: `base + (raw % 5) - 2`, wrapping (so also near 0 and u64::MAX).
fn near(base: u64, raw: u64) -> u64 {
    base.wrapping_add(raw % 5).wrapping_sub(2)
}

fn expected_free(head: u64, tail: u64, capacity: u32) -> u64 {
    match tail.checked_sub(head) {
        Some(used) => u64::from(capacity).saturating_sub(used),
        None => 0,
    }
}

/// The check: panics exactly where the `flow_control` fuzz target reports a finding (the
/// input decoded as libFuzzer's `fuzz_target!` decodes a typed input).
pub fn check(data: &[u8]) {
    let Some(input) = crate::arbitrary_input::<Input>(data) else {
        return;
    };
    // Mostly a memory that holds the block; sometimes one that ends inside it.
    let size = if input.memory_cut < 16 {
        BLOCK_END - 1 - usize::from(input.memory_cut)
    } else {
        BLOCK_END
    };
    let mut memory = FakeDeviceMemory::new(size);
    let mut credits = Credits::new();
    for step in input.steps.iter().take(256) {
        let old = credits;
        let (old_metadata, old_payload) = (old.metadata_head(), old.payload_head());
        let (mut metadata_tail, mut payload_tail) = (step.metadata_tail, step.payload_tail);
        let (mut metadata_head, mut payload_head) = (step.metadata_head, step.payload_head);
        match step.variant % 4 {
            // Heads near the tails.
            1 => {
                metadata_head = near(metadata_tail, metadata_head);
                payload_head = near(payload_tail, payload_head);
            }
            // Heads near the cached heads (forward, staying, backwards), tails a little ahead.
            2 => {
                metadata_head = near(old_metadata, metadata_head);
                payload_head = near(old_payload, payload_head);
                metadata_tail = old_metadata.saturating_add(metadata_tail % 8);
                payload_tail = old_payload.saturating_add(payload_tail % 8);
            }
            // A well-behaved host: heads between the cached ones and the tails.
            3 => {
                metadata_tail = old_metadata.saturating_add(metadata_tail % 1024);
                payload_tail = old_payload.saturating_add(payload_tail % 1024);
                metadata_head = old_metadata + metadata_head % (metadata_tail - old_metadata + 1);
                payload_head = old_payload + payload_head % (payload_tail - old_payload + 1);
            }
            _ => {}
        }
        let message = FlowControlMessage {
            metadata_head,
            payload_head,
        };
        memory.fill(device_map::FLOW_CONTROL.0, message.as_bytes());

        let result = credits.refresh(&memory, metadata_tail, payload_tail);
        if size < BLOCK_END {
            assert!(matches!(result, Err(FirmwareError::MemoryFault(_))));
            assert_eq!(credits, old);
            continue;
        }
        let valid = metadata_head >= old_metadata
            && metadata_head <= metadata_tail
            && payload_head >= old_payload
            && payload_head <= payload_tail;
        if valid {
            assert_eq!(
                result,
                Ok(()),
                "{message:?} tails {metadata_tail} {payload_tail} from {old:?}"
            );
            assert_eq!(credits.metadata_head(), metadata_head);
            assert_eq!(credits.payload_head(), payload_head);
        } else {
            assert_eq!(
                result,
                Err(FirmwareError::HeadBeyondTail),
                "{message:?} tails {metadata_tail} {payload_tail} from {old:?}"
            );
            assert_eq!(credits, old, "a refused message changed the cached heads");
        }

        let (metadata_free, payload_free) = credits.free(
            metadata_tail,
            step.metadata_capacity,
            payload_tail,
            step.payload_capacity,
        );
        assert!(metadata_free <= u64::from(step.metadata_capacity));
        assert!(payload_free <= u64::from(step.payload_capacity));
        assert_eq!(
            metadata_free,
            expected_free(
                credits.metadata_head(),
                metadata_tail,
                step.metadata_capacity
            )
        );
        assert_eq!(
            payload_free,
            expected_free(credits.payload_head(), payload_tail, step.payload_capacity)
        );
    }
}
