//! The event queue: earliest time first; events at the same time in insertion order.
//!
//! That tie rule is the engine's only ordering decision, and it makes every run deterministic:
//! the same configuration and seed give the same event order, hence the same cycle counts.
//!
//! Events come from two stores that share one sequence counter: a binary heap for events in
//! any time order, and a FIFO for the events a caller pushes in time order
//! ([`EventQueue::push_in_order`]: the DMA landings, which the link serialises, millions of
//! them on a large run). [`EventQueue::pop`] takes the earlier of the two fronts by (time,
//! insertion order), so the FIFO changes the cost of an event, never the order. The heap holds
//! small keys (time, sequence, slot); the events themselves wait in a slab of reused slots, so
//! a push or pop moves 24 bytes per heap level instead of a whole event.
//!
//! **Owners.** A device shared by several tenants (`crate::cosim::tenants`) runs each event in
//! the context of the tenant it belongs to. Every push is stamped with the queue's current
//! owner ([`EventQueue::set_owner`], 0 unless the emulator serves several tenants) and
//! [`EventQueue::popped_owner`] tells whose the last popped event was, so the code that
//! pushes events (the HAL, the link port) needs no tenant argument: an event belongs to the
//! tenant in whose context it was scheduled. The owner never decides an order.

use shared_abi::Ticks;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

#[derive(Debug)]
struct Entry<E> {
    at: Ticks,
    sequence: u64,
    owner: u8,
    event: E,
}

/// A heap entry: when, the tie-breaking sequence number, and where the event waits in the
/// slab. 24 bytes whatever the event's size (the device's events are 72), so the heap's
/// sifting moves little; `slot` never decides an order (sequences are unique).
type Key = Reverse<(u64, u64, u32)>;

/// A deterministic priority queue of timed events.
#[derive(Debug)]
pub struct EventQueue<E> {
    heap: BinaryHeap<Key>,
    /// The events of the heap's entries and their owners, by slot; `None`: a free slot.
    slab: Vec<Option<(u8, E)>>,
    /// Free slots of `slab`.
    free: Vec<u32>,
    /// Events pushed in time order (times never decrease from front to back).
    in_order: VecDeque<Entry<E>>,
    next_sequence: u64,
    /// The owner stamped on every push.
    owner: u8,
    /// The owner of the event popped last.
    popped_owner: u8,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            slab: Vec::new(),
            free: Vec::new(),
            in_order: VecDeque::new(),
            next_sequence: 0,
            owner: 0,
            popped_owner: 0,
        }
    }
}

impl<E> EventQueue<E> {
    /// Stamps the events pushed from now on as `owner`'s (see "Owners" in the module docs).
    pub fn set_owner(&mut self, owner: u8) {
        self.owner = owner;
    }

    /// The owner of the event [`EventQueue::pop`] returned last.
    pub fn popped_owner(&self) -> u8 {
        self.popped_owner
    }

    /// Schedules `event` at `at`.
    pub fn push(&mut self, at: Ticks, event: E) {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        let slot = match self.free.pop() {
            Some(slot) => {
                if let Some(free) = self.slab.get_mut(slot as usize) {
                    *free = Some((self.owner, event));
                }
                slot
            }
            None => {
                // More than 2^32 events waiting at once cannot fit in memory anyway.
                let slot = u32::try_from(self.slab.len()).unwrap_or(u32::MAX);
                self.slab.push(Some((self.owner, event)));
                slot
            }
        };
        self.heap.push(Reverse((at.0, sequence, slot)));
    }

    /// Schedules `event` at `at`, for a caller whose events mostly come in time order: kept
    /// in the FIFO when `at` is no earlier than the last event there, otherwise in the heap.
    /// Either way it leaves exactly when [`EventQueue::push`] would have let it leave.
    pub fn push_in_order(&mut self, at: Ticks, event: E) {
        if self.in_order.back().is_some_and(|last| at < last.at) {
            self.push(at, event);
            return;
        }
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        self.in_order.push_back(Entry {
            at,
            sequence,
            owner: self.owner,
            event,
        });
    }

    /// Whether the earliest event is the FIFO's front (`None`: no event waits).
    fn earliest_in_order(&self) -> Option<bool> {
        match (self.heap.peek(), self.in_order.front()) {
            (Some(Reverse((at, sequence, _))), Some(fifo)) => {
                Some((fifo.at.0, fifo.sequence) < (*at, *sequence))
            }
            (None, Some(_)) => Some(true),
            (Some(_), None) => Some(false),
            (None, None) => None,
        }
    }

    /// The time of the earliest event.
    pub fn peek_time(&self) -> Option<Ticks> {
        match self.earliest_in_order()? {
            true => self.in_order.front().map(|entry| entry.at),
            false => self.heap.peek().map(|Reverse((at, _, _))| Ticks(*at)),
        }
    }

    /// Removes the earliest event.
    pub fn pop(&mut self) -> Option<(Ticks, E)> {
        match self.earliest_in_order()? {
            true => self.in_order.pop_front().map(|entry| {
                self.popped_owner = entry.owner;
                (entry.at, entry.event)
            }),
            false => {
                let Reverse((at, _, slot)) = self.heap.pop()?;
                let (owner, event) = self.slab.get_mut(slot as usize)?.take()?;
                self.free.push(slot);
                self.popped_owner = owner;
                Some((Ticks(at), event))
            }
        }
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.heap.len() + self.in_order.len()
    }

    /// Whether no event waits.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty() && self.in_order.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_at_equal_times_leave_in_insertion_order() {
        let mut queue = EventQueue::default();
        queue.push(Ticks(5), "b");
        queue.push(Ticks(1), "a");
        queue.push(Ticks(5), "c");
        assert_eq!(queue.pop(), Some((Ticks(1), "a")));
        assert_eq!(queue.pop(), Some((Ticks(5), "b")));
        assert_eq!(queue.pop(), Some((Ticks(5), "c")));
        assert_eq!(queue.pop(), None);
    }

    #[test]
    fn each_event_leaves_with_the_owner_stamped_when_it_was_pushed() {
        let mut queue = EventQueue::default();
        queue.push(Ticks(5), "zero's");
        queue.set_owner(3);
        queue.push(Ticks(1), "three's");
        queue.push_in_order(Ticks(7), "three's landing");
        queue.set_owner(1);
        queue.push(Ticks(6), "one's");
        let mut seen = Vec::new();
        while let Some((_, event)) = queue.pop() {
            seen.push((event, queue.popped_owner()));
        }
        assert_eq!(
            seen,
            [
                ("three's", 3),
                ("zero's", 0),
                ("one's", 1),
                ("three's landing", 3)
            ]
        );
    }

    #[test]
    fn in_order_events_leave_exactly_as_if_they_were_in_the_heap() {
        // A seeded mix of both kinds of push, some in-order pushes going back in time (they
        // fall back to the heap); the pop order must equal a plain sort by (time, push order).
        let mut queue = EventQueue::default();
        let mut expected = Vec::new();
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut clock = 0;
        for sequence in 0..2000u64 {
            let draw = next();
            if draw % 3 == 0 {
                let at = Ticks(next() % 500);
                queue.push(at, sequence);
                expected.push((at, sequence));
            } else {
                clock += next() % 3;
                let at = if draw % 17 == 0 {
                    Ticks(clock / 2)
                } else {
                    Ticks(clock)
                };
                queue.push_in_order(at, sequence);
                expected.push((at, sequence));
            }
            // Now and then pop some, as the engine does between pushes.
            if draw % 5 == 0 {
                expected.sort();
                for _ in 0..(next() % 4) {
                    if expected.is_empty() {
                        break;
                    }
                    let want = expected.remove(0);
                    assert_eq!(queue.peek_time(), Some(want.0));
                    assert_eq!(queue.pop(), Some(want));
                }
            }
            assert_eq!(queue.len(), expected.len());
        }
        expected.sort();
        for want in expected {
            assert_eq!(queue.pop(), Some(want));
        }
        assert!(queue.is_empty());
        assert_eq!(queue.pop(), None);
    }
}
