//! The event queue: earliest time first; events at the same time in insertion order.
//!
//! That tie rule is the engine's only ordering decision, and it makes every run deterministic:
//! the same configuration and seed give the same event order, hence the same cycle counts.
//!
//! Events wait in one of two kinds of store that share one sequence counter: a binary heap for
//! events in any time order, and FIFO lanes, each holding events whose times never decrease
//! from front to back. [`EventQueue::push_in_order`] (for a caller whose events mostly come in
//! time order) has a lane of its own; [`EventQueue::push`]
//! puts an event in the other lane whose last event is the latest not after it (an empty lane
//! fits any event), and in the heap only when it would go back in time in every lane: the
//! CCM's wakes, a large run's other millions of events, come in time order too, and a lane
//! takes and gives one in a few instructions where the heap moved it through its levels.
//! [`EventQueue::pop`] takes the earliest of the fronts by (time, insertion order), so where an
//! event waits changes its cost, never the order. The heap holds small keys (time, sequence,
//! slot); its events wait in a slab of reused slots, so a push or pop moves 24 bytes per heap
//! level instead of a whole event. The device's DMA landings wait outside, in
//! `crate::device_queue`'s lane of small entries, numbered from this queue's counter
//! ([`EventQueue::take_sequence`]) and merged with it by [`order_key`].
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

/// FIFO lanes: lane 0 is [`EventQueue::push_in_order`]'s, the others [`EventQueue::push`]'s.
const LANES: usize = 3;

/// An event's place in the order, (time, sequence) in one number.
#[inline]
pub fn order_key(at: u64, sequence: u64) -> u128 {
    (u128::from(at) << 64) | u128::from(sequence)
}

use order_key as key;

/// The key of no event: sequences never reach `u64::MAX`.
pub const EMPTY_KEY: u128 = u128::MAX;

use EMPTY_KEY as EMPTY;

/// A deterministic priority queue of timed events.
#[derive(Debug)]
pub struct EventQueue<E> {
    heap: BinaryHeap<Key>,
    /// The events of the heap's entries and their owners, by slot; `None`: a free slot.
    slab: Vec<Option<(u8, E)>>,
    /// Free slots of `slab`.
    free: Vec<u32>,
    /// Events pushed in time order, per lane (times never decrease from front to back).
    lanes: [VecDeque<Entry<E>>; LANES],
    /// The key ([`key`]) of each lane's front event, then of the heap's; [`EMPTY`] for an
    /// empty store. Kept as the stores change, so finding the earliest event compares four
    /// numbers.
    fronts: [u128; LANES + 1],
    /// The index in `fronts` of the least key: where the earliest event waits.
    earliest: usize,
    /// The time of each lane's last event (meaningless for an empty lane), so a push looks
    /// at no lane's storage.
    backs: [u64; LANES],
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
            lanes: std::array::from_fn(|_| VecDeque::new()),
            fronts: [EMPTY; LANES + 1],
            earliest: 0,
            backs: [0; LANES],
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

    /// The owner stamped on pushes now ([`EventQueue::set_owner`]).
    #[inline]
    pub fn owner(&self) -> u8 {
        self.owner
    }

    /// Takes the next sequence number for an event kept outside the queue (a store of the
    /// caller's, merged with this queue by [`order_key`]): from the same counter as every
    /// push's, so ties between the two break in push order.
    #[inline]
    pub fn take_sequence(&mut self) -> u64 {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        sequence
    }

    /// The [`order_key`] of the earliest event; [`EMPTY_KEY`] when none waits.
    #[inline]
    pub fn front_key(&self) -> u128 {
        self.fronts.get(self.earliest).copied().unwrap_or(EMPTY)
    }

    /// Schedules `event` at `at`: in the lane (not lane 0) whose last event is the latest
    /// not after `at`, else in an empty one, else in the heap.
    pub fn push(&mut self, at: Ticks, event: E) {
        let mut fit: Option<(usize, u64)> = None;
        let mut empty = None;
        for index in 1..LANES {
            let (Some(lane), Some(&last)) = (self.lanes.get(index), self.backs.get(index)) else {
                continue;
            };
            if lane.is_empty() {
                empty.get_or_insert(index);
            } else if last <= at.0 && fit.is_none_or(|(_, best)| last > best) {
                fit = Some((index, last));
            }
        }
        match fit.map(|(index, _)| index).or(empty) {
            Some(lane) => self.push_lane(lane, at, event),
            None => self.push_heap(at, event),
        }
    }

    /// Schedules `event` at `at` in the heap.
    fn push_heap(&mut self, at: Ticks, event: E) {
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
        let key = key(at.0, sequence);
        if let Some(front) = self.fronts.get_mut(LANES) {
            if key < *front {
                *front = key;
                self.became_front(LANES, key);
            }
        }
    }

    /// Store `index`'s front changed to `key`, which is not later than it was: it may hold the
    /// earliest event now.
    #[inline]
    fn became_front(&mut self, index: usize, key: u128) {
        if self
            .fronts
            .get(self.earliest)
            .is_none_or(|&least| key <= least)
        {
            self.earliest = index;
        }
    }

    /// Finds the store holding the earliest event again (after a pop).
    #[inline]
    fn find_earliest(&mut self) {
        // A tournament of the four keys, without a loop (on equal keys, only ever two empty
        // stores, the lower index wins, as a scan in index order would have it).
        let [a, b, c, d] = self.fronts;
        let (low, low_key) = if b < a { (1, b) } else { (0, a) };
        let (high, high_key) = if d < c { (3, d) } else { (2, c) };
        self.earliest = if high_key < low_key { high } else { low };
    }

    /// Appends `event` at `at` to `lane`, whose last event is not after `at`.
    #[inline]
    fn push_lane(&mut self, index: usize, at: Ticks, event: E) {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        let owner = self.owner;
        if let (Some(front), Some(lane), Some(back)) = (
            self.fronts.get_mut(index),
            self.lanes.get_mut(index),
            self.backs.get_mut(index),
        ) {
            *back = at.0;
            let was_empty = lane.is_empty();
            lane.push_back(Entry {
                at,
                sequence,
                owner,
                event,
            });
            if was_empty {
                let key = key(at.0, sequence);
                *front = key;
                self.became_front(index, key);
            }
        }
    }

    /// Schedules `event` at `at`, for a caller whose events mostly come in time order: kept
    /// in lane 0 when `at` is no earlier than the last event there, otherwise as
    /// [`EventQueue::push`] keeps it. Either way it leaves exactly when [`EventQueue::push`]
    /// would have let it leave.
    #[inline]
    pub fn push_in_order(&mut self, at: Ticks, event: E) {
        if !self.lanes[0].is_empty() && at.0 < self.backs[0] {
            self.push(at, event);
            return;
        }
        self.push_lane(0, at, event);
    }

    /// The time of the earliest event.
    #[inline]
    pub fn peek_time(&self) -> Option<Ticks> {
        self.fronts
            .get(self.earliest)
            .filter(|&&key| key != EMPTY)
            .map(|&key| Ticks((key >> 64) as u64))
    }

    /// Removes the earliest event.
    #[inline]
    pub fn pop(&mut self) -> Option<(Ticks, E)> {
        let index = self.earliest;
        if self.fronts.get(index).is_none_or(|&key| key == EMPTY) {
            return None;
        }
        let popped = match self.lanes.get_mut(index) {
            Some(lane) => {
                let entry = lane.pop_front()?;
                let next = lane
                    .front()
                    .map_or(EMPTY, |next| key(next.at.0, next.sequence));
                if let Some(front) = self.fronts.get_mut(index) {
                    *front = next;
                }
                self.popped_owner = entry.owner;
                Some((entry.at, entry.event))
            }
            None => self.pop_heap(),
        };
        self.find_earliest();
        popped
    }

    /// Removes the heap's earliest event.
    fn pop_heap(&mut self) -> Option<(Ticks, E)> {
        let Reverse((at, _, slot)) = self.heap.pop()?;
        let next = self
            .heap
            .peek()
            .map_or(EMPTY, |&Reverse((at, sequence, _))| key(at, sequence));
        if let Some(front) = self.fronts.get_mut(LANES) {
            *front = next;
        }
        let (owner, event) = self.slab.get_mut(slot as usize)?.take()?;
        self.free.push(slot);
        self.popped_owner = owner;
        Some((Ticks(at), event))
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.heap.len() + self.lanes.iter().map(VecDeque::len).sum::<usize>()
    }

    /// Whether no event waits.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty() && self.lanes.iter().all(VecDeque::is_empty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

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
    fn events_leave_exactly_as_if_they_were_all_in_the_heap() {
        // A seeded mix of both kinds of push: in-order pushes, some going back in time (they
        // fall back to the other lanes or the heap), pushes at any time, and pushes near the
        // clock (mostly in time order, as the CCM's wakes); the pop order must equal a plain
        // sort by (time, push order), and every store must have been used.
        let mut queue = EventQueue::default();
        let mut expected = Vec::new();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x2545_f491_4f6c_dd1d);
        let mut next = || rng.gen::<u64>();
        let mut clock = 0;
        let mut heap_used = false;
        let mut lanes_used = [false; LANES];
        for sequence in 0..2000u64 {
            let draw = next();
            if draw % 4 == 0 {
                let at = Ticks(next() % 500);
                queue.push(at, sequence);
                expected.push((at, sequence));
            } else if draw % 4 == 1 {
                let at = Ticks(clock + next() % 40);
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
            heap_used |= !queue.heap.is_empty();
            for (used, lane) in lanes_used.iter_mut().zip(&queue.lanes) {
                *used |= !lane.is_empty();
            }
        }
        assert!(heap_used && lanes_used.iter().all(|&used| used));
        expected.sort();
        for want in expected {
            assert_eq!(queue.pop(), Some(want));
        }
        assert!(queue.is_empty());
        assert_eq!(queue.pop(), None);
    }
}
