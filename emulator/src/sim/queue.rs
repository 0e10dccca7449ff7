//! The event queue: earliest time first; events at the same time in insertion order.
//!
//! That tie rule is the engine's only ordering decision, and it makes every run deterministic:
//! the same configuration and seed give the same event order, hence the same cycle counts.

use shared_abi::Ticks;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

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
    next_sequence: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
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

    /// The time of the earliest event.
    pub fn peek_time(&self) -> Option<Ticks> {
        self.heap.peek().map(|Reverse(entry)| entry.at)
    }

    /// Removes the earliest event.
    pub fn pop(&mut self) -> Option<(Ticks, E)> {
        self.heap
            .pop()
            .map(|Reverse(entry)| (entry.at, entry.event))
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no event waits.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
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
}
