//! Firmware observability without format strings: counters and a fixed ring of `Copy` events
//! (Hubris's `counted_ringbuf!`), which the emulator can dump into a run's trace.

use heapless::Deque;
use shared_abi::{Status, Ticks};

/// Something the firmware did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// A launch was accepted.
    Launch {
        /// Its tag.
        tag: u32,
        /// Work items.
        items: u32,
    },
    /// A launch was refused.
    Refused {
        /// Its tag.
        tag: u32,
        /// Why.
        status: Status,
    },
    /// A DMA request was submitted.
    DmaSubmit {
        /// Payloads in it.
        payloads: u32,
        /// Payload tail after it.
        payload_tail: u64,
    },
    /// The executor ran out of credit.
    CreditWait {
        /// When.
        at: Ticks,
    },
    /// Credit came back.
    CreditResume {
        /// When.
        at: Ticks,
    },
    /// The ring was latched BROKEN.
    Broken {
        /// Why.
        status: Status,
    },
}

/// Events kept.
pub const TRACE_DEPTH: usize = 64;

/// Counters the firmware keeps; all monotonic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Launches accepted.
    pub launches: u64,
    /// Launches refused with an error status.
    pub refused: u64,
    /// Payloads streamed (metadata records written).
    pub payloads: u64,
    /// DMA requests submitted.
    pub dma_requests: u64,
    /// Times the executor read the host's heads from the flow-control block (edge D5).
    pub head_reads: u64,
    /// Ticks the executor had a ready payload but no ring credit (back-pressure).
    pub backpressure_ticks: u64,
}

/// The trace ring: the newest [`TRACE_DEPTH`] events.
#[derive(Debug, Default)]
pub struct Trace {
    events: Deque<TraceEvent, TRACE_DEPTH>,
}

impl Trace {
    /// Records `event`, dropping the oldest when full.
    pub fn record(&mut self, event: TraceEvent) {
        if self.events.is_full() {
            let _ = self.events.pop_front();
        }
        let _ = self.events.push_back(event);
    }

    /// The kept events, oldest first.
    pub fn events(&self) -> impl Iterator<Item = &TraceEvent> {
        self.events.iter()
    }
}
