//! The device's event queue: an [`EventQueue`] of [`Event`]s, and the DMA writes' landings
//! apart, in a lane of small fixed entries whose bytes wait back to back in one reused buffer.
//!
//! Landings are a large run's commonest events (paper-scale SSSP: 992,794 of 1,161,728; a
//! request's writes, hundreds per request), and they come in time order: the link serialises
//! them. Kept as full [`Event`]s they were built,
//! copied into the queue and copied out again, 80 bytes each; here a landing is 32 bytes
//! (its place in the order, destination, length, kind, owner) and its bytes are appended to a
//! buffer that the landings leave from the front, in the same order.
//!
//! **Order.** A landing takes its sequence number from the [`EventQueue`]'s own counter
//! ([`EventQueue::take_sequence`]) when it is pushed, and [`DeviceQueue::pop`] takes the
//! earlier of the lane's front and the queue's front by (time, sequence): events leave exactly
//! as they would if every landing were an event of the queue (as they were before the lane). A
//! landing earlier than the lane's last one (only with the stress tests' overtaking landings)
//! goes into the [`EventQueue`] as an [`Event::DmaLand`], as `EventQueue::push_in_order` would
//! have put it.

use crate::dma::{Landing, LandingBytes, INLINE_BYTES};
use crate::hal_impl::Event;
use crate::sim::queue::{order_key, EventQueue, EMPTY_KEY};
use firmware::hal::DmaKind;
use shared_abi::Ticks;

/// One landing waiting in the lane; its bytes are the next `length` of the lane's buffer.
#[derive(Clone, Copy, Debug)]
struct Pending {
    /// (time, sequence), as [`order_key`].
    key: u128,
    /// Host physical address.
    destination: u64,
    /// Bytes (at most 4096: `crate::dma::check_descriptor`).
    length: u16,
    /// The tenant that pushed it ([`EventQueue::set_owner`]).
    owner: u8,
    kind: DmaKind,
}

/// The end of the lane at one moment ([`DeviceQueue::mark`]), to go back to
/// ([`DeviceQueue::rewind`]).
#[derive(Clone, Copy, Debug)]
pub struct LaneMark {
    landings: usize,
    bytes: usize,
    back: u64,
}

/// A landing taken from the lane by [`DeviceQueue::pop_landing_before`], its bytes borrowed.
#[derive(Debug)]
pub struct LandingView<'a> {
    /// When it lands.
    pub at: Ticks,
    /// Host physical address.
    pub destination: u64,
    /// What it is.
    pub kind: DmaKind,
    /// The bytes.
    pub bytes: &'a [u8],
}

/// Bytes of landed writes at the buffer's front after which the buffer and the landings'
/// vector are compacted (when those bytes are also at least half of the buffer), so that a
/// lane that never empties does not grow.
const COMPACT_AFTER: usize = 1 << 20;

/// The device's pending events (see the module docs).
#[derive(Debug, Default)]
pub struct DeviceQueue {
    events: EventQueue<Event>,
    /// Landings, each at or after the one before, from `head` on (a plain vector and an
    /// index: taking the front is one increment, no wrap-around).
    landings: Vec<Pending>,
    /// Where the front landing is in `landings`.
    head: usize,
    /// The landings' bytes, back to back in their order, from `read` on; beyond the last
    /// landing's, the bytes staged for the next ([`DeviceQueue::stage`]).
    bytes: Vec<u8>,
    /// Where the front landing's bytes start in `bytes`.
    read: usize,
    /// The time of the lane's last landing (meaningless while the lane is empty).
    back: u64,
    /// The owner of the event popped last.
    popped_owner: u8,
    /// Buffers of landings popped as events ([`DeviceQueue::pop`]) and landed, kept for the
    /// next ones' bytes ([`DeviceQueue::recycle`]; a simulator economy: one allocation per
    /// landing in flight at most, not one per landing).
    spare: Vec<Vec<u8>>,
}

/// Most landed buffers kept for reuse ([`DeviceQueue::recycle`]).
pub const SPARE_BUFFERS: usize = 4096;

/// Largest buffer kept for reuse (a write's bytes are a payload, a record or a tail: a few
/// KiB at most; a larger one is freed).
pub const SPARE_BUFFER_BYTES: usize = 64 << 10;

impl DeviceQueue {
    /// Stamps the events pushed from now on as `owner`'s ([`EventQueue::set_owner`]).
    pub fn set_owner(&mut self, owner: u8) {
        self.events.set_owner(owner);
    }

    /// The owner of the event [`DeviceQueue::pop`] (or a landing pop) returned last.
    pub fn popped_owner(&self) -> u8 {
        self.popped_owner
    }

    /// Schedules `event` at `at` ([`EventQueue::push`]).
    #[inline]
    pub fn push(&mut self, at: Ticks, event: Event) {
        self.events.push(at, event);
    }

    /// Schedules `event` at `at`, mostly in time order ([`EventQueue::push_in_order`]).
    pub fn push_in_order(&mut self, at: Ticks, event: Event) {
        self.events.push_in_order(at, event);
    }

    /// The lane starts over when nothing waits in it (nor is staged), or is compacted when
    /// its front has passed [`COMPACT_AFTER`] bytes that are at least half of its buffer.
    #[inline]
    fn make_room(&mut self) {
        if self.head == self.landings.len() {
            self.landings.clear();
            self.head = 0;
            self.bytes.clear();
            self.read = 0;
        } else if self.read >= COMPACT_AFTER && self.read * 2 >= self.bytes.len() {
            self.bytes.drain(..self.read);
            self.read = 0;
            self.landings.drain(..self.head);
            self.head = 0;
        }
    }

    /// `length` zero bytes at the end of the lane's buffer, for the next landing's bytes:
    /// [`DeviceQueue::push_landing`] then queues them, or [`DeviceQueue::unstage`] drops them.
    /// Only one landing's bytes are staged at a time.
    #[inline]
    pub fn stage(&mut self, length: usize) -> &mut [u8] {
        self.make_room();
        let start = self.bytes.len();
        match length {
            // A tail, a record or a small payload: fixed-size zeroes, no call.
            8 => self.bytes.extend_from_slice(&[0; 8]),
            32 => self.bytes.extend_from_slice(&[0; 32]),
            _ => self.bytes.resize(start + length, 0),
        }
        self.bytes.get_mut(start..).unwrap_or_default()
    }

    /// The last `length` bytes staged ([`DeviceQueue::stage`]).
    #[inline]
    pub fn staged(&self, length: usize) -> &[u8] {
        let start = self.bytes.len().saturating_sub(length);
        self.bytes.get(start..).unwrap_or_default()
    }

    /// Drops the last `length` bytes staged.
    #[inline]
    pub fn unstage(&mut self, length: usize) {
        self.bytes.truncate(self.bytes.len().saturating_sub(length));
    }

    /// Schedules the landing at `at` of the `length` bytes staged last, to `destination`, of
    /// `kind`: in the lane when `at` is not before its last landing, else (overtaking
    /// landings) in the [`EventQueue`] as an [`Event::DmaLand`]. Either way it leaves exactly
    /// when it would as an event pushed with [`EventQueue::push_in_order`].
    #[inline]
    pub fn push_landing(&mut self, at: Ticks, destination: u64, kind: DmaKind, length: u16) {
        if self.head < self.landings.len() && at.0 < self.back {
            let start = self.bytes.len().saturating_sub(usize::from(length));
            let bytes = owned(&mut self.spare, self.bytes.get(start..).unwrap_or_default());
            self.bytes.truncate(start);
            self.events.push(
                at,
                Event::DmaLand(Landing {
                    destination,
                    bytes,
                    kind,
                }),
            );
            return;
        }
        self.push_in_lane(at, destination, kind, length);
    }

    /// Appends the landing to the lane (not before its last one).
    #[inline(always)]
    fn push_in_lane(&mut self, at: Ticks, destination: u64, kind: DmaKind, length: u16) {
        let sequence = self.events.take_sequence();
        self.back = at.0;
        self.landings.push(Pending {
            key: order_key(at.0, sequence),
            destination,
            length,
            owner: self.events.owner(),
            kind,
        });
    }

    /// Where the lane ends now, for [`DeviceQueue::rewind`]: taken after
    /// [`DeviceQueue::reserve_run`], before a run's first write is staged.
    #[inline]
    pub fn mark(&self) -> LaneMark {
        LaneMark {
            landings: self.landings.len(),
            bytes: self.bytes.len(),
            back: self.back,
        }
    }

    /// Drops the landings pushed and the bytes staged since `mark` (taken in the same run: no
    /// landing left the lane since, and the run's [`DeviceQueue::reserve_run`] made the only
    /// compaction). The sequence numbers they took stay taken: a gap in the numbers, which
    /// never changes an order.
    #[inline]
    pub fn rewind(&mut self, mark: LaneMark) {
        self.landings.truncate(mark.landings.max(self.head));
        self.bytes.truncate(mark.bytes.max(self.read));
        self.back = mark.back;
    }

    /// [`DeviceQueue::push_landing`] for a landing that goes in the lane, not before its last
    /// one; `false`, and nothing pushed, for one that would overtake (the caller then takes its
    /// general path).
    #[inline(always)]
    pub fn push_landing_in_lane(
        &mut self,
        at: Ticks,
        destination: u64,
        kind: DmaKind,
        length: u16,
    ) -> bool {
        if self.head < self.landings.len() && at.0 < self.back {
            return false;
        }
        self.push_in_lane(at, destination, kind, length);
        true
    }

    /// [`DeviceQueue::rewind`], for a caller that then answers `None` (out of line: its
    /// callers' loops stay short).
    #[cold]
    #[inline(never)]
    pub fn rewind_none<T>(&mut self, mark: LaneMark) -> Option<T> {
        self.rewind(mark);
        None
    }

    /// Makes room for a run of up to `count` landings pushed one after the other (a DMA
    /// request's writes) whose bytes total `length`, once for the run: the lane starts over
    /// or is compacted as [`DeviceQueue::stage`] would before the first, and the run's
    /// [`DeviceQueue::append`]s and [`DeviceQueue::push_landing`]s then find their room.
    #[inline]
    pub fn reserve_run(&mut self, count: usize, length: usize) {
        self.make_room();
        self.landings.reserve(count);
        self.bytes.reserve(length);
    }

    /// Stages the next landing's bytes, `bytes` (as [`DeviceQueue::stage`] and a copy would,
    /// without its check whether the lane can start over: within a run,
    /// [`DeviceQueue::reserve_run`] made that check).
    #[inline(always)]
    pub fn append(&mut self, bytes: &[u8]) {
        self.bytes.extend_from_slice(bytes);
    }

    /// The key ([`order_key`]) of the earliest event of the [`EventQueue`], landings aside:
    /// while nothing is pushed, a landing below it is the earliest event.
    #[inline]
    pub fn landing_bound(&self) -> u128 {
        self.events.front_key()
    }

    /// Takes the lane's front landing if it is the earliest event given `bound` (the
    /// [`DeviceQueue::landing_bound`] taken with no push since) and not after `until`; `None`
    /// (and nothing taken) otherwise. What [`DeviceQueue::pop`] would have returned, with the
    /// bytes borrowed instead of copied into an [`Event`].
    #[inline]
    pub fn pop_landing_before(&mut self, bound: u128, until: Ticks) -> Option<LandingView<'_>> {
        let (front, start) = self.take_landing_before(bound, until)?;
        Some(LandingView {
            at: Ticks((front.key >> 64) as u64),
            destination: front.destination,
            kind: front.kind,
            bytes: self.bytes.get(start..self.read).unwrap_or_default(),
        })
    }

    /// Takes the landings that [`DeviceQueue::pop_landing_before`] called again and again
    /// with `bound` and `until` would take, in order, and hands each to `land` (time,
    /// destination, kind, bytes) as it goes; returns how many, and the last one's time. The
    /// lane's positions stay in registers for the run and are stored once at its end.
    #[inline(always)]
    pub fn land_run_before(
        &mut self,
        bound: u128,
        until: Ticks,
        mut land: impl FnMut(Ticks, u64, DmaKind, &[u8]),
    ) -> (u64, Ticks) {
        // A landing leaves while its key is below `bound` and its time not after `until`,
        // that is while its key is below both `bound` and the key of the last possible
        // sequence at `until` (no landing has that sequence: sequences never reach u64::MAX).
        let limit = bound.min(order_key(until.0, u64::MAX));
        let waiting = self.landings.get(self.head..).unwrap_or_default();
        // The bytes of the landings from the front one on, back to back (each landing's were
        // staged before it was pushed).
        let mut rest = self.bytes.get(self.read..).unwrap_or_default();
        let mut left = waiting;
        while let Some((front, behind)) = left.split_first() {
            if front.key >= limit {
                break;
            }
            let (bytes, tail) = rest
                .split_at_checked(usize::from(front.length))
                .unwrap_or((rest, &[]));
            land(
                Ticks((front.key >> 64) as u64),
                front.destination,
                front.kind,
                bytes,
            );
            rest = tail;
            left = behind;
        }
        let taken = waiting.len() - left.len();
        let Some(last) = taken.checked_sub(1).and_then(|last| waiting.get(last)) else {
            return (0, Ticks::ZERO);
        };
        let (owner, at) = (last.owner, Ticks((last.key >> 64) as u64));
        self.read = self.bytes.len() - rest.len();
        self.head += taken;
        self.popped_owner = owner;
        (taken as u64, at)
    }

    /// [`DeviceQueue::pop_landing_before`]'s landing, and where its bytes start in `bytes`
    /// (they end at `read`).
    #[inline]
    fn take_landing_before(&mut self, bound: u128, until: Ticks) -> Option<(Pending, usize)> {
        let front = *self.landings.get(self.head)?;
        // Keys are unique below EMPTY_KEY: `front.key < bound` means the landing is the
        // earliest event.
        if front.key >= bound || ((front.key >> 64) as u64) > until.0 {
            return None;
        }
        self.head += 1;
        self.popped_owner = front.owner;
        let start = self.read;
        self.read = start + usize::from(front.length);
        Some((front, start))
    }

    /// Removes the [`EventQueue`]'s earliest event (the caller knows no landing is earlier:
    /// [`DeviceQueue::pop_landing_before`] refused with its bound).
    #[inline]
    pub fn pop_event(&mut self) -> Option<(Ticks, Event)> {
        let popped = self.events.pop();
        self.popped_owner = self.events.popped_owner();
        popped
    }

    /// The time of the earliest event, and whether it is the lane's front landing (then it
    /// leaves through [`DeviceQueue::pop_landing_before`] with the bound
    /// [`DeviceQueue::landing_bound`], else through [`DeviceQueue::pop_event`]).
    #[inline]
    pub fn peek(&self) -> Option<(Ticks, bool)> {
        let landing = self.landing_key();
        let event = self.events.front_key();
        let (key, is_landing) = if landing < event {
            (landing, true)
        } else {
            (event, false)
        };
        (key != EMPTY_KEY).then_some((Ticks((key >> 64) as u64), is_landing))
    }

    /// The time of the earliest event.
    #[inline]
    pub fn peek_time(&self) -> Option<Ticks> {
        let key = self.landing_key().min(self.events.front_key());
        (key != EMPTY_KEY).then_some(Ticks((key >> 64) as u64))
    }

    /// Removes the earliest event; a landing as an [`Event::DmaLand`] holding a copy of its
    /// bytes.
    pub fn pop(&mut self) -> Option<(Ticks, Event)> {
        let bound = self.events.front_key();
        if self.landing_key() < bound {
            let (front, start) = self.take_landing_before(bound, Ticks::NEVER)?;
            let bytes = self.bytes.get(start..self.read).unwrap_or_default();
            let event = Event::DmaLand(Landing {
                destination: front.destination,
                bytes: owned(&mut self.spare, bytes),
                kind: front.kind,
            });
            return Some((Ticks((front.key >> 64) as u64), event));
        }
        self.pop_event()
    }

    /// Keeps the buffer of a landed [`Event::DmaLand`]'s bytes for a later one (up to
    /// [`SPARE_BUFFERS`] buffers of at most [`SPARE_BUFFER_BYTES`]); inline bytes need
    /// nothing.
    pub fn recycle(&mut self, bytes: LandingBytes) {
        if let LandingBytes::Buffer(bytes) = bytes {
            if self.spare.len() < SPARE_BUFFERS && bytes.capacity() <= SPARE_BUFFER_BYTES {
                self.spare.push(bytes);
            }
        }
    }

    /// Events waiting, landings included.
    pub fn len(&self) -> usize {
        self.events.len() + (self.landings.len() - self.head)
    }

    /// Whether no event waits.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.head == self.landings.len()
    }

    /// The key of the lane's front landing; [`EMPTY_KEY`] for an empty lane.
    #[inline]
    fn landing_key(&self) -> u128 {
        self.landings
            .get(self.head)
            .map_or(EMPTY_KEY, |front| front.key)
    }
}

/// `bytes` as a [`Landing`]'s own: inline up to [`INLINE_BYTES`]; beyond, in a buffer of
/// `spare` when one is kept, a new one otherwise.
fn owned(spare: &mut Vec<Vec<u8>>, bytes: &[u8]) -> LandingBytes {
    match u8::try_from(bytes.len()) {
        Ok(length) if bytes.len() <= INLINE_BYTES => {
            let mut inline = [0; INLINE_BYTES];
            if let Some(head) = inline.get_mut(..bytes.len()) {
                head.copy_from_slice(bytes);
            }
            LandingBytes::Inline {
                length,
                bytes: inline,
            }
        }
        _ => {
            let mut buffer = spare.pop().unwrap_or_default();
            buffer.clear();
            buffer.extend_from_slice(bytes);
            LandingBytes::Buffer(buffer)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn landing(queue: &mut DeviceQueue, at: u64, value: u8, length: usize) {
        queue.stage(length).fill(value);
        queue.push_landing(Ticks(at), u64::from(value), DmaKind::Payload, length as u16);
    }

    /// What an event is, for comparing orders: a landing by its destination and bytes, any
    /// other by its register value.
    fn name(event: &Event) -> (u64, Vec<u8>) {
        match event {
            Event::DmaLand(landing) => (landing.destination, landing.bytes.as_slice().to_vec()),
            Event::MailboxWrite { value, .. } => (*value, Vec::new()),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn landings_and_events_leave_as_they_would_all_from_one_event_queue() {
        // The same seeded pushes into a DeviceQueue and into a plain EventQueue (landings
        // with `push_in_order`, some going back in time): the same events in the same order,
        // with the same bytes and owners, drained by `pop` or by runs of `pop_landing_before`.
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5851_f42d_4c95_7f2d);
        for drain_in_runs in [false, true] {
            let mut lane = DeviceQueue::default();
            let mut plain = EventQueue::default();
            let mut clock = 0u64;
            let mut expected = Vec::new();
            let mut seen = Vec::new();
            let (mut fell_back, mut in_runs) = (false, 0);
            for step in 0..4000u64 {
                let owner = (step / 500) as u8;
                lane.set_owner(owner);
                plain.set_owner(owner);
                let draw = rng.gen::<u64>();
                if draw % 3 == 0 {
                    let at = Ticks(clock + rng.gen::<u64>() % 50);
                    let event = |value| Event::MailboxWrite { offset: 0, value };
                    lane.push(at, event(step));
                    plain.push(at, event(step));
                } else {
                    clock += rng.gen::<u64>() % 3;
                    let at = if draw % 29 == 0 { clock / 2 } else { clock };
                    let length = [8, 32, 64, 8][(draw >> 8) as usize % 4];
                    let value = (step % 251) as u8;
                    let before = lane.events.len();
                    landing(&mut lane, at, value, length);
                    fell_back |= lane.events.len() > before;
                    plain.push_in_order(
                        Ticks(at),
                        Event::DmaLand(Landing {
                            destination: u64::from(value),
                            bytes: owned(&mut Vec::new(), &vec![value; length]),
                            kind: DmaKind::Payload,
                        }),
                    );
                }
                assert_eq!(lane.len(), plain.len());
                assert_eq!(lane.peek_time(), plain.peek_time());
                assert_eq!(lane.peek().map(|(at, _)| at), plain.peek_time());
                if draw % 7 == 0 {
                    for _ in 0..rng.gen::<u64>() % 6 {
                        let Some((at, event)) = plain.pop() else {
                            break;
                        };
                        expected.push((at, name(&event), plain.popped_owner()));
                        let popped = if drain_in_runs {
                            let bound = lane.landing_bound();
                            let landing_first = lane.peek().is_some_and(|(_, landing)| landing);
                            match lane.pop_landing_before(bound, Ticks::NEVER) {
                                Some(view) => {
                                    assert!(landing_first, "peek said an event");
                                    in_runs += 1;
                                    (view.at, (view.destination, view.bytes.to_vec()))
                                }
                                None if landing_first => panic!("peek said a landing"),
                                None => match lane.pop_event() {
                                    Some((at, event)) => (at, name(&event)),
                                    None => panic!("the lane lost an event"),
                                },
                            }
                        } else {
                            match lane.pop() {
                                Some((at, event)) => (at, name(&event)),
                                None => panic!("the lane lost an event"),
                            }
                        };
                        seen.push((popped.0, popped.1, lane.popped_owner()));
                    }
                }
            }
            while let Some((at, event)) = plain.pop() {
                expected.push((at, name(&event), plain.popped_owner()));
            }
            while let Some((at, event)) = lane.pop() {
                seen.push((at, name(&event), lane.popped_owner()));
            }
            assert_eq!(seen, expected);
            assert!(lane.is_empty());
            // Both paths taken: a landing back in time kept as an event, and (draining in
            // runs) many landings leaving the lane through `pop_landing_before`.
            assert!(fell_back);
            assert!(!drain_in_runs || in_runs > 100, "only {in_runs} in runs");
        }
    }

    /// A run of landings ([`DeviceQueue::land_run_before`]) takes exactly what
    /// [`DeviceQueue::pop_landing_before`] called until it refuses takes, with any bound and
    /// limit of time: the same landings, bytes and last owner, and the same events after.
    #[test]
    fn a_run_lands_what_pop_landing_before_would_take() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x2f4a_7c15_9e37_79b9);
        let (mut by_run, mut by_pop) = (DeviceQueue::default(), DeviceQueue::default());
        let mut clock = 0u64;
        let (mut runs, mut long_runs, mut cut_by_time, mut cut_by_event) = (0, 0, 0, 0);
        for step in 0..6000u64 {
            let owner = (step / 700) as u8;
            by_run.set_owner(owner);
            by_pop.set_owner(owner);
            let draw = rng.gen::<u64>();
            if draw % 4 == 0 {
                let at = Ticks(clock + rng.gen::<u64>() % 40);
                let event = |value| Event::MailboxWrite { offset: 0, value };
                by_run.push(at, event(step));
                by_pop.push(at, event(step));
            } else {
                clock += rng.gen::<u64>() % 3;
                let at = if draw % 31 == 0 { clock / 2 } else { clock };
                let length = [8, 32, 64, 32][(draw >> 8) as usize % 4];
                let value = (step % 251) as u8;
                landing(&mut by_run, at, value, length);
                landing(&mut by_pop, at, value, length);
            }
            if draw % 5 != 0 {
                continue;
            }
            let Some((front, true)) = by_run.peek() else {
                match (by_run.pop(), by_pop.pop()) {
                    (Some((a, x)), Some((b, y))) => assert_eq!((a, name(&x)), (b, name(&y))),
                    (None, None) => {}
                    other => panic!("{other:?}"),
                }
                continue;
            };
            let until = Ticks(front.0 + rng.gen::<u64>() % 30);
            let bound = by_run.landing_bound();
            assert_eq!(bound, by_pop.landing_bound());
            let mut landed = Vec::new();
            let (count, last) =
                by_run.land_run_before(bound, until, |at, destination, kind, bytes| {
                    assert_eq!(kind, DmaKind::Payload);
                    landed.push((at, destination, bytes.to_vec()));
                });
            let mut popped = Vec::new();
            while let Some(view) = by_pop.pop_landing_before(bound, until) {
                popped.push((view.at, view.destination, view.bytes.to_vec()));
            }
            assert_eq!(landed, popped);
            assert_eq!(count, landed.len() as u64);
            assert!(count >= 1, "the front landing is within the limit");
            assert_eq!(Some(last), landed.last().map(|(at, _, _)| *at));
            assert_eq!(by_run.popped_owner(), by_pop.popped_owner());
            assert_eq!(by_run.len(), by_pop.len());
            runs += 1;
            long_runs += usize::from(count > 3);
            match by_run.peek() {
                Some((at, true)) if at > until => cut_by_time += 1,
                Some((_, false)) => cut_by_event += 1,
                _ => {}
            }
        }
        loop {
            match (by_run.pop(), by_pop.pop()) {
                (Some((a, x)), Some((b, y))) => {
                    assert_eq!((a, name(&x)), (b, name(&y)));
                    assert_eq!(by_run.popped_owner(), by_pop.popped_owner());
                }
                (None, None) => break,
                other => panic!("{other:?}"),
            }
        }
        // Runs of several landings, cut by the limit of time and by an earlier event.
        assert!(
            runs > 200 && long_runs > 20,
            "{runs} runs, {long_runs} long"
        );
        assert!(
            cut_by_time > 20 && cut_by_event > 20,
            "{cut_by_time} {cut_by_event}"
        );
    }

    /// A landing popped as an event holds its bytes inline up to [`INLINE_BYTES`], in a
    /// buffer beyond; a landed buffer is used again for a later landing's bytes, one larger
    /// than [`SPARE_BUFFER_BYTES`] is not kept.
    #[test]
    fn popped_landings_hold_short_bytes_inline_and_reuse_landed_buffers() {
        let mut queue = DeviceQueue::default();
        for (at, length) in [(1, 8), (2, INLINE_BYTES), (3, 64), (4, 40), (5, 48)] {
            landing(&mut queue, at, at as u8, length);
        }
        let pop = |queue: &mut DeviceQueue| match queue.pop() {
            Some((_, Event::DmaLand(landing))) => landing.bytes,
            other => panic!("{other:?}"),
        };
        for (value, length) in [(1, 8), (2, INLINE_BYTES)] {
            let bytes = pop(&mut queue);
            assert!(matches!(bytes, LandingBytes::Inline { .. }), "{length}");
            assert_eq!(bytes.as_slice(), vec![value; length]);
        }
        let first = pop(&mut queue);
        assert_eq!(first.as_slice(), [3; 64]);
        let address = first.as_slice().as_ptr();
        queue.recycle(first);
        let second = pop(&mut queue);
        assert_eq!(second.as_slice(), [4; 40]);
        assert_eq!(
            second.as_slice().as_ptr(),
            address,
            "the landed buffer reused"
        );
        queue.recycle(LandingBytes::Buffer(vec![1; SPARE_BUFFER_BYTES + 1]));
        let third = pop(&mut queue);
        assert_eq!(third.as_slice(), [5; 48]);
        assert!(
            matches!(&third, LandingBytes::Buffer(bytes) if bytes.capacity() <= SPARE_BUFFER_BYTES),
            "a new buffer, not the large one"
        );
        assert!(queue.is_empty());
    }

    /// A lane that never empties keeps its buffers bounded (compacted as its front moves on)
    /// and every landing's bytes its own across the compactions.
    #[test]
    fn a_lane_that_never_empties_stays_bounded_and_keeps_each_landings_bytes() {
        let mut queue = DeviceQueue::default();
        let mut next_pop = 0u64;
        for at in 0..200_000u64 {
            landing(&mut queue, at, (at % 251) as u8, 32);
            // Ten landings always wait.
            if at >= 10 {
                let bound = queue.landing_bound();
                let view = queue
                    .pop_landing_before(bound, Ticks::NEVER)
                    .expect("the front landing");
                assert_eq!(view.at, Ticks(next_pop));
                assert_eq!(view.bytes, [(next_pop % 251) as u8; 32]);
                next_pop += 1;
            }
        }
        assert_eq!(queue.len(), 10);
        // 6.4 MB of bytes and 200,000 entries of 32 bytes went through; the buffers hold
        // about two compaction thresholds at most.
        assert!(
            queue.bytes.capacity() <= 4 * COMPACT_AFTER,
            "{}",
            queue.bytes.capacity()
        );
        assert!(queue.landings.capacity() * 32 <= 4 * COMPACT_AFTER);
    }
}
