//! The runtime's timers, in the order they fire: by time, and timers due at the same time in
//! the order they were scheduled (each carries a sequence number, unique and increasing).
//!
//! Most timers are never cancelled (polls, task and launch ends): they wait in a binary heap,
//! where scheduling and taking the first cost a few comparisons. The few that may be
//! cancelled (AXLE_Interrupt's stall watchdog) wait in an ordered map, which can remove them;
//! the first timer is the earlier of the two firsts.

use super::Timer;
use shared_abi::Ticks;
use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap};

/// A scheduled timer: when, its sequence number, what.
#[derive(Clone, Copy, Debug)]
struct Entry {
    at: Ticks,
    sequence: u64,
    timer: Timer,
}

impl Entry {
    fn key(&self) -> (Ticks, u64) {
        (self.at, self.sequence)
    }
}

// Entries are ordered by their key alone (time, then sequence): unique, so two entries are
// equal only if they are the same.
impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

/// The timers scheduled and not yet fired nor cancelled.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    /// Timers that cannot be cancelled, earliest on top.
    fixed: BinaryHeap<Reverse<Entry>>,
    /// Timers that may be cancelled, by key.
    cancellable: BTreeMap<(Ticks, u64), Timer>,
}

impl Timers {
    /// Schedules `timer` at `at` with sequence number `sequence` (greater than every one
    /// given before).
    pub(crate) fn schedule(&mut self, at: Ticks, sequence: u64, timer: Timer) {
        self.fixed.push(Reverse(Entry {
            at,
            sequence,
            timer,
        }));
    }

    /// [`Timers::schedule`] for a timer that may be cancelled ([`Timers::cancel`]).
    pub(crate) fn schedule_cancellable(&mut self, at: Ticks, sequence: u64, timer: Timer) {
        self.cancellable.insert((at, sequence), timer);
    }

    /// Removes the cancellable timer scheduled at `at` with `sequence`, if it has not fired.
    pub(crate) fn cancel(&mut self, at: Ticks, sequence: u64) {
        self.cancellable.remove(&(at, sequence));
    }

    /// When the first timer fires, if any is scheduled.
    pub(crate) fn first_at(&self) -> Option<Ticks> {
        self.first_key().map(|(at, _)| at)
    }

    /// The first timer's key, and whether it is a cancellable one.
    fn first(&self) -> Option<((Ticks, u64), bool)> {
        let fixed = self.fixed.peek().map(|Reverse(entry)| entry.key());
        let cancellable = self.cancellable.first_key_value().map(|(&key, _)| key);
        match (fixed, cancellable) {
            (Some(fixed), Some(cancellable)) if cancellable < fixed => Some((cancellable, true)),
            (Some(fixed), _) => Some((fixed, false)),
            (None, Some(cancellable)) => Some((cancellable, true)),
            (None, None) => None,
        }
    }

    fn first_key(&self) -> Option<(Ticks, u64)> {
        self.first().map(|(key, _)| key)
    }

    /// Takes the first timer if it is due at or before `now`.
    pub(crate) fn pop_due(&mut self, now: Ticks) -> Option<Timer> {
        let ((at, _), cancellable) = self.first()?;
        if at > now {
            return None;
        }
        if cancellable {
            self.cancellable.pop_first().map(|(_, timer)| timer)
        } else {
            self.fixed.pop().map(|Reverse(entry)| entry.timer)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modes::ModeTimer;

    fn task(task: u32) -> Timer {
        Timer::TaskDone { worker: 0, task }
    }

    /// Everything due by `now`, in firing order.
    fn fire(timers: &mut Timers, now: u64) -> Vec<Timer> {
        std::iter::from_fn(|| timers.pop_due(Ticks(now))).collect()
    }

    #[test]
    fn timers_fire_by_time_then_in_the_order_scheduled_whichever_kind() {
        let mut timers = Timers::default();
        let watchdog = Timer::Mode(ModeTimer::StallCheck);
        timers.schedule(Ticks(20), 1, task(1));
        timers.schedule_cancellable(Ticks(10), 2, watchdog);
        timers.schedule(Ticks(10), 3, task(3));
        timers.schedule(Ticks(5), 4, task(4));
        timers.schedule_cancellable(Ticks(20), 5, watchdog);
        timers.schedule(Ticks(10), 6, task(6));
        assert_eq!(timers.first_at(), Some(Ticks(5)));
        assert_eq!(fire(&mut timers, 4), vec![]);
        assert_eq!(
            fire(&mut timers, 10),
            vec![task(4), watchdog, task(3), task(6)]
        );
        assert_eq!(timers.first_at(), Some(Ticks(20)));
        assert_eq!(fire(&mut timers, 30), vec![task(1), watchdog]);
        assert_eq!(timers.first_at(), None);
    }

    #[test]
    fn a_cancelled_timer_never_fires_and_cancelling_a_fired_one_changes_nothing() {
        let mut timers = Timers::default();
        let watchdog = Timer::Mode(ModeTimer::StallCheck);
        timers.schedule_cancellable(Ticks(5), 1, watchdog);
        timers.schedule(Ticks(7), 2, task(2));
        timers.schedule_cancellable(Ticks(9), 3, watchdog);
        timers.cancel(Ticks(5), 1);
        assert_eq!(timers.first_at(), Some(Ticks(7)));
        assert_eq!(fire(&mut timers, 9), vec![task(2), watchdog]);
        timers.cancel(Ticks(9), 3);
        assert_eq!(timers.first_at(), None);
    }
}
