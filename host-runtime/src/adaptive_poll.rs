//! Adaptive local polling (`--poll adaptive`): the polling interval follows the arrival of
//! records instead of being fixed.
//!
//! The paper leaves the interval to the user: "p10 (or smaller intervals) can be chosen to
//! optimize a single workload performance, whereas p100 provides a better balance between
//! workload performance and host core efficiency" (section V). A poll costs the control
//! thread one uncached load whether or not it finds anything, so every empty poll is stall,
//! and every record that lands between two polls waits for the next one. This policy polls
//! often only when a record is likely and a task is waiting for it, in the spirit of two
//! Linux mechanisms: NAPI (poll while packets arrive, stop when the queue runs dry) and the
//! block layer's hybrid polling (`blk_mq_poll_hybrid_sleep`: sleep for part of the expected
//! completion time, learned from earlier requests, then poll).
//!
//! The rules, each a fact the runtime holds:
//!
//! 1. **Records arrive in bursts.** A poll that found records resets the back-off to the
//!    shortest interval (`host.poll_interval_ns`, p1 by default).
//! 2. **Nothing came: back off.** After an empty poll the interval doubles, up to the longest
//!    (`host.adaptive_poll_longest_ns`, p100 by default).
//! 3. **No task can use new bytes: wait.** When every task still waiting for result bytes
//!    belongs to a busy worker (round-robin) or a busy chain, or every worker is busy (FIFO),
//!    a record seen sooner would start nothing sooner: the next poll is the longest interval
//!    away, and comes forward when a task ends and frees a worker that one of them can use.
//! 4. **The ring is filling: poll.** Freed slots go back to the device only after a poll
//!    (the flow-control store follows it); while more than half of the ring's payload slots
//!    are held or not yet returned, the shortest interval is used, so the device is not
//!    stopped for credit that the host already has.
//! 5. **Launches repeat: learn.** An iterative workload's launches are alike (SSSP rounds,
//!    PageRank iterations, OPT layers, DLRM batches). The first poll after a launch store
//!    comes three quarters of the way to the time the previous launch's first record was
//!    seen (hybrid polling sleeps half of the mean; our launches vary less than a block
//!    device's requests, and the back-off from the shortest interval covers the rest). The
//!    first launch of a run, with nothing learned, starts at the shortest interval.
//! 6. **Pace the stream.** Once records flow, the launch's result size and the rate seen
//!    since its first record say when the stream should end; the next poll is at most half
//!    of that away (and at most half of the time watched so far, since a stream often
//!    trickles before its burst), within the shortest and longest intervals. Mid-stream a
//!    record seen a little late costs nothing while the host keeps up; near the end the
//!    polls close in on the last record, which every iterative workload waits for.
//!
//! What it cannot do: a run of one short launch (KNN) gives it nothing to learn from, so it
//! either polls often before the first record or sees it late; rule 2's back-off bounds the
//! lateness to the interval reached. And rule 6 assumes that a late record delays only its
//! own tasks: when the host is the bottleneck and each worker runs a long sequence of tasks
//! (SSB Q1.2: 13 µs tasks bound round-robin), every late record delays the rest of its
//! worker's sequence. `axle eval --figure beyond` reports where it lands against p1 and p100.

use shared_abi::Ticks;

/// What the control thread knows when it schedules the next poll.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PollFacts {
    /// The poll just done found records.
    pub(crate) found_records: bool,
    /// No task waiting for bytes could start if they came now (rule 3).
    pub(crate) backlog: bool,
    /// More than half of the ring's payload slots are held or not returned (rule 4).
    pub(crate) ring_filling: bool,
    /// Result chunks of the launch seen so far (rule 6).
    pub(crate) arrived: u64,
    /// Result chunks of the launch in all.
    pub(crate) chunks: u64,
}

/// The adaptive schedule's state for one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AdaptivePoll {
    shortest: Ticks,
    longest: Ticks,
    /// The current back-off interval (rule 2).
    interval: Ticks,
    /// When the current launch's store was posted.
    launched: Ticks,
    /// Whether the current launch's first record has been seen.
    seen_first: bool,
    /// When the poll that saw it started, and the chunks seen then (rule 6).
    first_seen: (Ticks, u64),
    /// How long after its store the previous launch's first record was seen (rule 5).
    learned_first: Option<Ticks>,
    /// The next poll was put back because of a backlog (rule 3): a task's end may bring it
    /// forward, to this interval after the last poll's start (what rules 1, 2 and 6 chose).
    deferred: Option<Ticks>,
}

impl AdaptivePoll {
    /// A schedule between `shortest` and `longest` (`longest >= shortest`, both positive: the
    /// configuration's validation guarantees it).
    pub(crate) fn new(shortest: Ticks, longest: Ticks) -> AdaptivePoll {
        AdaptivePoll {
            shortest,
            longest: longest.max(shortest),
            interval: shortest,
            launched: Ticks::ZERO,
            seen_first: false,
            first_seen: (Ticks::ZERO, 0),
            learned_first: None,
            deferred: None,
        }
    }

    /// A launch store was posted at `now`: how long until the first poll (rule 5).
    pub(crate) fn first_poll_after_launch(&mut self, now: Ticks) -> Ticks {
        self.launched = now;
        self.seen_first = false;
        self.deferred = None;
        self.interval = self.shortest;
        match self.learned_first {
            Some(learned) => Ticks(learned.0 / 4 * 3).max(self.shortest),
            None => self.shortest,
        }
    }

    /// A poll that started at `started` ended at `now`; how long after `started` the next
    /// one should start (rules 1 to 4 and 6).
    pub(crate) fn next_interval(&mut self, started: Ticks, facts: PollFacts) -> Ticks {
        if facts.found_records {
            if !self.seen_first {
                self.seen_first = true;
                self.learned_first = Some(started.since(self.launched));
                self.first_seen = (started, facts.arrived);
            }
            self.interval = self.shortest;
        } else {
            self.interval = Ticks(self.interval.0.saturating_mul(2)).min(self.longest);
        }
        self.deferred = None;
        if facts.ring_filling {
            return self.shortest;
        }
        let chosen = self.interval.max(self.pace(started, facts));
        if facts.backlog {
            // A record seen sooner starts nothing sooner: look again when a task ends and
            // frees a worker that a waiting task can use (rule 3).
            self.deferred = Some(chosen);
            return self.longest;
        }
        chosen
    }

    /// Rule 6: half the time the rest of the stream should take at the rate seen since its
    /// first record, within the shortest and longest intervals; the shortest while no rate
    /// is known yet.
    fn pace(&self, started: Ticks, facts: PollFacts) -> Ticks {
        let (first_at, first_arrived) = self.first_seen;
        let since = started.since(first_at).0;
        let streamed = facts.arrived.saturating_sub(first_arrived);
        if !self.seen_first || since == 0 || streamed == 0 {
            return self.shortest;
        }
        let remaining = facts.chunks.saturating_sub(facts.arrived);
        // remaining / (streamed / since), halved.
        let eta = u128::from(remaining) * u128::from(since) / u128::from(streamed) / 2;
        // A rate from a short look is no rate: a stream often trickles before its burst. Never
        // wait longer than half of what has been watched so far.
        let half_watched = u128::from(since / 2);
        Ticks(u64::try_from(eta.min(half_watched)).unwrap_or(u64::MAX))
            .clamp(self.shortest, self.longest)
    }

    /// Rule 3: the backlog is gone. When the next poll was put back because of it, returns
    /// how long after the last poll's start it may now come (what the other rules chose),
    /// once.
    pub(crate) fn backlog_cleared(&mut self) -> Option<Ticks> {
        self.deferred.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(value: u64) -> Ticks {
        Ticks::from_ns(value)
    }

    fn schedule() -> AdaptivePoll {
        AdaptivePoll::new(ns(50), ns(5000))
    }

    const EMPTY: PollFacts = PollFacts {
        found_records: false,
        backlog: false,
        ring_filling: false,
        arrived: 0,
        chunks: 100,
    };

    #[test]
    fn empty_polls_back_off_by_doubling_up_to_the_longest_interval() {
        let mut poll = schedule();
        assert_eq!(poll.first_poll_after_launch(ns(0)), ns(50));
        let intervals: Vec<u64> = (0..9)
            .map(|_| poll.next_interval(ns(0), EMPTY).as_ns())
            .collect();
        assert_eq!(
            intervals,
            [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000]
        );
    }

    #[test]
    fn a_poll_that_finds_records_returns_to_the_shortest_interval() {
        let mut poll = schedule();
        poll.first_poll_after_launch(ns(0));
        for _ in 0..5 {
            poll.next_interval(ns(0), EMPTY);
        }
        let found = PollFacts {
            found_records: true,
            ..EMPTY
        };
        assert_eq!(poll.next_interval(ns(1000), found), ns(50));
        assert_eq!(poll.next_interval(ns(1050), EMPTY), ns(100));
    }

    #[test]
    fn a_backlog_defers_and_a_filling_ring_hurries() {
        let mut poll = schedule();
        poll.first_poll_after_launch(ns(0));
        let backlog = PollFacts {
            found_records: true,
            backlog: true,
            ..EMPTY
        };
        assert_eq!(poll.next_interval(ns(100), backlog), ns(5000));
        assert_eq!(poll.backlog_cleared(), Some(ns(50)));
        assert_eq!(poll.backlog_cleared(), None, "brought forward once");
        assert_eq!(poll.next_interval(ns(150), backlog), ns(5000));
        let both = PollFacts {
            ring_filling: true,
            ..backlog
        };
        assert_eq!(poll.next_interval(ns(200), both), ns(50));
        assert_eq!(
            poll.backlog_cleared(),
            None,
            "not put back, so not brought forward"
        );
    }

    #[test]
    fn mid_stream_polls_are_paced_by_the_rate_and_close_in_on_the_end() {
        let mut poll = schedule();
        poll.first_poll_after_launch(ns(0));
        let seen = |arrived| PollFacts {
            found_records: true,
            arrived,
            chunks: 1000,
            ..EMPTY
        };
        // First records at 1 µs (100 chunks), then 100 chunks per µs.
        assert_eq!(
            poll.next_interval(ns(1000), seen(100)),
            ns(50),
            "no rate yet"
        );
        // 800 seen at 21 µs: 700 streamed in 20 µs, 200 left: 5.7 µs left, half 2.86 µs.
        assert_eq!(poll.next_interval(ns(21_000), seen(800)).as_ns(), 2857);
        // Near the end: 990 seen at 26 µs, 10 left at 890/25 µs: 0.28 µs, half 0.14 µs.
        assert_eq!(poll.next_interval(ns(26_000), seen(990)).as_ns(), 140);
        // A trickle is not a rate: 1 more chunk 1 µs after the first record would say
        // "899 left at 1 per µs", but the wait is capped at half the time watched.
        let mut trickle = schedule();
        trickle.first_poll_after_launch(ns(0));
        trickle.next_interval(ns(1000), seen(100));
        assert_eq!(trickle.next_interval(ns(2000), seen(101)).as_ns(), 500);
    }

    #[test]
    fn the_first_poll_of_a_later_launch_comes_three_quarters_of_the_way_to_the_learned_arrival() {
        let mut poll = schedule();
        poll.first_poll_after_launch(ns(1000));
        poll.next_interval(ns(1100), EMPTY);
        let found = PollFacts {
            found_records: true,
            ..EMPTY
        };
        // First seen 8 µs after the store.
        poll.next_interval(ns(9000), found);
        // A later record does not change what was learned.
        poll.next_interval(ns(9050), found);
        assert_eq!(poll.first_poll_after_launch(ns(50_000)), ns(6000));
    }
}
