//! The event queue: earliest time first; events at the same time in insertion order.
//!
//! That tie rule is the engine's only ordering decision, and it makes every run deterministic:
//! the same configuration and seed give the same event order, hence the same cycle counts.
//!
//! Events come from two stores that share one sequence counter: a binary heap for events in
//! any time order, and a FIFO for the events a caller pushes in time order
//! ([`EventQueue::push_in_order`]: the DMA landings, which the link serialises, millions of
//! them on a large run). [`EventQueue::pop`] takes the earlier of the two fronts by (time,
//! insertion order), so the FIFO changes the cost of an event, never the order.

use shared_abi::Ticks;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

#[derive(Debug)]
struct Entry<E> {
    at: Ticks,
    sequence: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.sequence) == (other.at, other.sequence)
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.sequence).cmp(&(other.at, other.sequence))
    }
}

/// A deterministic priority queue of timed events.
#[derive(Debug)]
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<Entry<E>>>,
    /// Events pushed in time order (times never decrease from front to back).
    in_order: VecDeque<Entry<E>>,
    next_sequence: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            in_order: VecDeque::new(),
            next_sequence: 0,
        }
    }
}

impl<E> EventQueue<E> {
    /// Schedules `event` at `at`.
    pub fn push(&mut self, at: Ticks, event: E) {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        self.heap.push(Reverse(Entry {
            at,
            sequence,
            event,
        }));
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
            event,
        });
    }

    /// Whether the earliest event is the FIFO's front (`None`: no event waits).
    fn earliest_in_order(&self) -> Option<bool> {
        match (self.heap.peek(), self.in_order.front()) {
            (Some(Reverse(heap)), Some(fifo)) => {
                Some((fifo.at, fifo.sequence) < (heap.at, heap.sequence))
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
            false => self.heap.peek().map(|Reverse(entry)| entry.at),
        }
    }

    /// Removes the earliest event.
    pub fn pop(&mut self) -> Option<(Ticks, E)> {
        let entry = match self.earliest_in_order()? {
            true => self.in_order.pop_front()?,
            false => self.heap.pop()?.0,
        };
        Some((entry.at, entry.event))
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
