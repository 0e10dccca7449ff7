//! Streaming that cannot deadlock (`axle run --no-deadlock`, `host.no_deadlock`; not in the
//! paper): the runtime's overflow buffer.
//!
//! # The deadlock
//!
//! A host task runs when every result chunk it needs has arrived, and a payload slot (with the
//! record naming it) goes back to the device only when the last task reading it has run
//! (`modes::axle`'s gap-aware heads). The DMA executor takes ring credit payload by payload.
//! So when every slot of the ring holds a chunk that some task needs, no task has all of its
//! chunks and no task runs, nothing can move: the device waits for a slot, the tasks for
//! chunks only the device can send. The paper meets it at 12.5% slot capacity for the LLM
//! (Figure 16(h)) and leaves two ways out, a larger ring or in-order streaming; the runtime
//! only detects it (`host.stall_timeout_ns` later, "deadlock detected").
//!
//! # The mechanism: spill the held payloads into private memory
//!
//! With `host.no_deadlock`, as soon as the host is in that state it moves the records and
//! payloads it holds out of the ring into a private buffer ([`Overflow`]) and releases their
//! slots, so the heads move and the device streams on; the tasks that need those chunks read
//! them from the buffer. Precisely, the spill happens when, with nothing left to do in the
//! host's turn ([`spill_due`]):
//!
//! 1. the launch still has results to come;
//! 2. the device has no slot to write: the window from the host's gap-aware payload head to
//!    the newest record polled is the whole ring (the device's credit ends at that head), and
//!    no polled batch waits in the ready pool (its records' tasks are not known yet);
//! 3. no host task is running (and, the turn having started what it could, none can start).
//!
//! Then the host copies every record and payload it holds in that window (oldest first) into
//! the buffer, releases their slots (the gap-aware heads advance to the newest record, over
//! the whole ring) and sends the heads in one flow-control store. The copy is host core stall: in AXLE the control thread reads the
//! records and payloads from the uncached region (one uncached streaming read) and writes
//! them to ordinary memory (at the µthread's bandwidth share), and nothing else runs on it
//! meanwhile; in AXLE_Interrupt the worker or handler that found the ring full does it, as it
//! sends the flow control there. The copies are counted (`overflow_spills`,
//! `overflow_bytes`, `overflow_ns` in the report, absent when zero). A task reading a spilled
//! chunk pays what it would pay to read it in the ring (conservative: the copy is in cacheable
//! memory), and a copy is dropped when its last reader finishes, as its slot would have been.
//!
//! # Why this and not a reservation
//!
//! The other candidate (issue 14) is a reservation in the DMA executor: the host tells the
//! device its tasks' dependency groups and the executor admits a group's results only when the
//! whole group fits. We chose the overflow buffer because:
//!
//! - It needs nothing from the device: no new message through `shared-abi` (no
//!   `LAYOUT_HASH` change), no firmware change, so the paper's protocol and every device
//!   figure stay as they are, and a host with the option runs against any device.
//! - Its minimum ring is one payload slot, the largest single result a task can need at once
//!   (a record names one payload of at most one slot; the executor takes credit payload by
//!   payload). A reservation's minimum is the largest dependency group (OPT-2.7B: every MLP
//!   task needs the layer's 320 payloads at paper scale, so 320 slots), and with groups
//!   that overlap (OPT's tasks all read the same 320 payloads; PageRank's and SSB's read
//!   shared chunks) admission must reserve their union or serialise them.
//! - A reservation holds back results that are complete to keep room for a group, which is
//!   in-order streaming in disguise (the cost the paper names); the spill costs nothing until
//!   the ring is actually stuck, and then a copy of at most the ring's bytes per spill and of
//!   each result byte at most once (a spilled chunk never returns to the ring).
//!
//! A run that never reaches the stuck state is the same with and without the option, figure
//! for figure: the spill's condition is one that, without it, never changes again (the device
//! has no credit, no task runs or can start, no flow-control store is due), i.e. the state the
//! stall check reports as a deadlock.
//!
//! # Why it cannot deadlock
//!
//! Take a state of the abstract protocol with work left (a task not finished). If a task runs,
//! it can finish. If a task is ready and its worker (round-robin) is free, it can start. If the
//! device has a chunk left and a slot free, it can stream it, and a record streamed can be
//! polled. Otherwise every task still to run misses a chunk the device has not sent (else it
//! would be ready: all its chunks arrived, in the ring or in the buffer), so the launch has
//! results to come; the device has no slot and no record waits to be polled, so the window
//! from the head to the newest polled record is the whole ring (of at least one slot), whose
//! head slot is held; and nothing runs: exactly the spill's condition, and the spill frees
//! every slot of the window (at least one). So every state with work left has
//! a move, and every move makes progress (a chunk streamed, polled or spilled, a task started
//! or finished), so every run ends. The test `model` below checks it by an exhaustive search of
//! the abstract protocol's states (rings of 1 to 3 slots, launches of up to 4 chunks, tasks
//! needing any sets of them, every arrival order, one or two round-robin workers) and finds
//! the deadlock in the same search without the spill.
//!
//! The runtime's stall check stays: with the option on it can only report a ring below the
//! minimum (none can be configured: `axle.slots` is at least 1) or a device that stopped.

use std::collections::BTreeMap;

/// What decides a spill (see the module docs): the host's state at the end of a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpillFacts {
    /// The launch has result chunks that have not arrived.
    pub results_to_come: bool,
    /// Payload slots of the ring.
    pub capacity: u64,
    /// Slots from the host's gap-aware payload head to the newest record polled (held, or
    /// released behind a held one): the device may write none of them.
    pub held: u64,
    /// Batches polled but not yet taken (records whose tasks are not known yet).
    pub pooled: usize,
    /// Host tasks running.
    pub running: usize,
}

/// Whether the host must spill: the launch has results to come, the window from the payload
/// head to the newest polled record is the whole ring, no batch waits in the ready pool, and
/// no task runs (the module docs' three conditions). Without a spill such a state never changes again.
pub fn spill_due(facts: SpillFacts) -> bool {
    facts.results_to_come
        && facts.capacity > 0
        && facts.held >= facts.capacity
        && facts.pooled == 0
        && facts.running == 0
}

/// The smallest ring the option works with, in payload slots: one, the largest single result a
/// task can need at once (a record names one payload of at most one slot).
pub const MINIMUM_SLOTS: u64 = 1;

/// The overflow buffer: copies of payloads moved out of the ring, by payload index, until the
/// last task reading each has run.
#[derive(Clone, Debug, Default)]
pub struct Overflow {
    copies: BTreeMap<u64, Vec<u8>>,
    spills: u64,
    bytes: u64,
}

impl Overflow {
    /// An empty buffer.
    pub fn new() -> Overflow {
        Overflow::default()
    }

    /// Keeps `copies` (payload index, bytes) from one spill that read `read` bytes of records
    /// and payloads.
    pub fn keep(&mut self, copies: Vec<crate::modes::axle::SpilledPayload>, read: u64) {
        self.spills += 1;
        self.bytes = self.bytes.saturating_add(read);
        self.copies.extend(copies);
    }

    /// The copy of payload `index`, if it was spilled and is still needed.
    pub fn get(&self, index: u64) -> Option<&[u8]> {
        self.copies.get(&index).map(Vec::as_slice)
    }

    /// Drops the copy of payload `index` (its last reader ran); whether there was one.
    pub fn release(&mut self, index: u64) -> bool {
        self.copies.remove(&index).is_some()
    }

    /// Spills so far.
    pub fn spills(&self) -> u64 {
        self.spills
    }

    /// Bytes of records and payloads copied so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Copies held now.
    pub fn held(&self) -> usize {
        self.copies.len()
    }
}

#[cfg(test)]
mod model;

#[cfg(test)]
mod tests {
    use super::*;

    fn stuck() -> SpillFacts {
        SpillFacts {
            results_to_come: true,
            capacity: 4,
            held: 4,
            pooled: 0,
            running: 0,
        }
    }

    #[test]
    fn a_spill_is_due_only_when_the_ring_is_full_of_held_slots_and_nothing_runs() {
        assert!(spill_due(stuck()));
        for facts in [
            SpillFacts {
                results_to_come: false,
                ..stuck()
            },
            SpillFacts { held: 3, ..stuck() },
            SpillFacts {
                pooled: 1,
                ..stuck()
            },
            SpillFacts {
                running: 1,
                ..stuck()
            },
            SpillFacts {
                capacity: 0,
                held: 0,
                ..stuck()
            },
        ] {
            assert!(!spill_due(facts), "{facts:?}");
        }
    }

    #[test]
    fn a_copy_is_kept_until_released_and_counted_once() {
        let mut overflow = Overflow::new();
        overflow.keep(vec![(7, vec![1, 2]), (8, vec![3])], 99);
        assert_eq!(overflow.get(7), Some(&[1u8, 2][..]));
        assert!(overflow.release(7));
        assert!(!overflow.release(7));
        assert_eq!(overflow.get(7), None);
        assert_eq!(
            (overflow.spills(), overflow.bytes(), overflow.held()),
            (1, 99, 1)
        );
    }
}
