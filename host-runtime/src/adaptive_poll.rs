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
//! It is built for one goal (issue 14), measured on the run's end to end: within
//! [`RUNTIME_SLACK_PERCENT`] (3%) of p1's end to end, with host core stall within
//! [`STALL_SLACK_POINTS`] (2 points) of p100's. The two figures are the goal's, not tuned to a
//! workload; rules 5 and 7 turn them into intervals.
//!
//! The rules, each a fact the runtime holds:
//!
//! 1. **Records arrive in bursts.** A poll that found records resets the back-off to the
//!    shortest interval (`host.poll_interval_ns`, p1 by default), and when the poll before it
//!    found none (a burst begins: a DMA request's writes have started to land) the next poll
//!    comes at the shortest interval whatever rule 6 says, to see the burst land.
//! 2. **Nothing came: back off.** After an empty poll the interval doubles, up to the longest
//!    (`host.adaptive_poll_longest_ns`, p100 by default), or before the launch's first record
//!    up to the blind interval (rule 5).
//! 3. **No task can use new bytes: wait.** When no task still waiting for result bytes
//!    could start if they came now, a record seen sooner would start nothing sooner: the next
//!    poll is the longest interval away, and comes forward when a task ends and leaves a
//!    worker free that one of them can use. A task could start when a worker is free that no
//!    ready task takes first (the runtime hands ready tasks out before anything else: under
//!    round-robin every ready task whose chain is idle, under FIFO the front while it is
//!    ready), its chain neither runs nor has a ready task to run next, and the policy would
//!    take it (FIFO: only the front) (`sched::Scheduler::could_any_start_now`). With one
//!    shared queue a freed worker takes the next ready task at once, so a worker that is free
//!    for an instant between a task's end and the next start is not free for bytes, nor is a
//!    chain (KNN's selection) between two of its tasks whose bytes have come.
//! 4. **The ring is filling: poll.** Freed slots go back to the device only after a poll
//!    (the flow-control store follows it); while more than half of the ring's payload slots
//!    are held or not yet returned, the shortest interval is used, so the device is not
//!    stopped for credit that the host already has.
//! 5. **Before the first record: nothing before the bound, then poll densely.** Until a
//!    launch's first record the tail does not move, and the device may not even have
//!    finished an item (KNN's 512 items run in one wave and end together). But the host
//!    knows what it launched and what the device publishes, and so a time before which the
//!    record cannot be in host memory ([`first_record_bound`]: the launch store crossing the
//!    link, the first wave of items moving the bytes the command fixes at the device's memory
//!    bandwidth, a DMA preparation, the write crossing back). No poll comes before it: the
//!    first poll is at the bound, then the interval backs off from the shortest up to the
//!    *blind interval*: the shortest interval whose polls cost at most
//!    [`STALL_SLACK_POINTS`] of a core more than polling at the longest interval does,
//!    `c / (c / longest + 2%)` for a poll of cost `c` (`host.uncached_load_ns`): 2.2 µs with
//!    the defaults, so waiting past a loose bound costs no more than the goal allows however
//!    long the wait. Where the command fixes its items' traffic (KNN) the bound is within 50
//!    ns of the record; elsewhere it is the device's fixed latencies, about 0.8 µs. Without
//!    the device's figures (no [`DeviceDatasheet`]) the bound is zero and the first launch
//!    polls every blind interval from its store. Later launches also learn: an iterative
//!    workload's launches are alike (SSSP rounds, PageRank iterations, OPT layers, DLRM
//!    batches), so the first poll comes three quarters of the way to the time the previous
//!    launch's first record was seen (hybrid polling sleeps half of the mean; our launches
//!    vary less than a block device's requests), or at the bound if that is later, then
//!    backs off from the shortest interval up to the blind interval.
//! 6. **Pace the stream.** Once records flow, the launch's result size and the rate seen
//!    since its first record say when the stream should end; the next poll is at most half
//!    of that away (hybrid polling's half of the expected time), within the shortest and
//!    longest intervals. Near the end the polls close in on the last record, which every
//!    iterative workload waits for.
//! 7. **A late record costs at most 3% of the run.** While a task waiting for bytes could
//!    start at once (rule 3's test), a record seen an interval late delays that task by up
//!    to the interval, and when the host is the bottleneck (SSB: 13 µs tasks on every
//!    worker) the delay carries through the tasks the idle worker runs after it: mid-stream
//!    lateness is not free. So once the launch's records flow at a rate the host has seen,
//!    the interval (and the one a backlog's end brings the poll forward to, rule 3) is at
//!    most [`RUNTIME_SLACK_PERCENT`] of the run's predicted length: the time since the run's
//!    first launch plus the rest of the stream at that rate. Without a rate yet (one batch
//!    seen) the run's length is unknown, and the rule stands aside (taking the time so far
//!    for it would poll a short first launch at p1 between its first two batches). Measured
//!    from the run, not the launch: a record of an iterative workload's tenth launch delays a
//!    run ten launches long, and the cap then rarely binds (from SSSP's second launch on, 3%
//!    of the run exceeds the longest interval).
//!
//! What it cannot do: the bound is a lower bound, and on a launch whose items' traffic
//! depends on its data (graphs, bags) or that has several stages (OPT) it is only the
//! device's fixed latencies; a short single launch of such a kernel may see its first record
//! up to a blind interval late. `docs/beyond.md` has the measurements, and what a schedule
//! that knew the arrival times would achieve (`--poll oracle`).

use shared_abi::{CommandDescriptor, Ticks};

/// The runtime goal's slack (issue 14: end to end within 3% of p1): rule 7 keeps the interval
/// within this share of the run's predicted length while a record could start a task.
pub const RUNTIME_SLACK_PERCENT: u64 = 3;

/// The stall goal's slack (issue 14: host core stall within 2 percentage points of p100's):
/// rule 5's blind interval polls at most this share of a core more than the longest interval.
pub const STALL_SLACK_POINTS: u64 = 2;

/// What a host may know of the device without watching it run, for the bound on a launch's
/// first record ([`first_record_bound`]): figures the device and its link publish (a CXL
/// device's CDAT gives its memory's bandwidth and latency, its DSLBIS entries; the port's the
/// link's latency) and its configuration (µthreads, DMA preparation). Never the state of a
/// run. The `axle` CLI fills it from the device configuration (`emulator::DeviceConfig`,
/// whose field docs give each figure's source: paper Table III, M²NDP's configuration) with
/// [`crate::Runtime::set_device_datasheet`]; without one, the bound is zero.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeviceDatasheet {
    /// µthreads the CCM runs at once: units x sub-cores x µthreads per sub-core (paper Table
    /// III: 16 x 4 x 16 = 1,024).
    pub uthreads: u64,
    /// Device memory bandwidth in GB/s (bytes per ns), shared equally by the work items that
    /// move bytes (paper Table III: DDR5-4800 x 16 channels, 614.4 GB/s).
    pub memory_gbps: f64,
    /// The least time a work item takes, in ns: its first device-memory access's latency.
    pub memory_latency_ns: u64,
    /// One way over the link for the host's CXL.mem stores (the launch store), in ns: half
    /// the CXL.mem round trip (paper Table III: 70 ns).
    pub link_one_way_ns: u64,
    /// DMA preparation per request, in ns (paper Table III: 500 ns).
    pub dma_preparation_ns: u64,
    /// One way over the link for the DMA engine's posted writes, in ns: half the CXL.io
    /// round trip (paper Table III: 350 ns).
    pub dma_one_way_ns: u64,
}

/// The earliest a launch's first metadata record can be in host memory, counted from when its
/// launch store leaves the host. Each term is a time the record cannot skip:
///
/// 1. the store crosses the link: `link_one_way_ns`;
/// 2. the first work item ends: no sooner than `memory_latency_ns` after it starts, and, when
///    the command fixes its items' traffic ([`shared_abi::params::work_floor`]: `n` items of
///    at least `b` bytes each), no sooner than `min(n, uthreads) x b / memory_gbps`. Why: the
///    launch's first wave, `k = min(n, uthreads)` items, starts at once (every µthread is free
///    at a launch, since the previous launch's results have all arrived, and round-robin and
///    FIFO both fill every µthread before queueing; no item of the launch starts before one
///    of these ends), and the memory is shared equally by the items that still move bytes
///    (processor sharing, `emulator::ccm`), so until one of them has moved its bytes all `k`
///    move at `memory_gbps / k` or less;
/// 3. the result monitor hands the item's result to a DMA request, prepared for
///    `dma_preparation_ns` before its first write;
/// 4. the write, and after it the record, cross the link as CXL.io posted writes:
///    `dma_one_way_ns`.
///
/// The launch's inputs cross before its store, and the command processor's own time, the
/// link's serialisation and the writes' queueing only add, so they are left out: the bound
/// must never be late. Rounded down to a whole tick, less one tick for the emulator's
/// floating-point shares (it rounds its ends up).
pub fn first_record_bound(sheet: &DeviceDatasheet, command: &CommandDescriptor) -> Ticks {
    let wave = shared_abi::params::work_floor(command).map_or(0, |floor| {
        let first_wave = floor.items.min(sheet.uthreads.max(1));
        let bytes = u128::from(first_wave) * u128::from(floor.item_bytes);
        // bytes / (GB/s) = ns; in ticks, less one.
        let ticks = bytes as f64 * Ticks::PER_NS as f64 / sheet.memory_gbps;
        if ticks.is_finite() && ticks >= 1.0 {
            (ticks.floor() as u64).saturating_sub(1)
        } else {
            0
        }
    });
    let item = Ticks(wave.max(Ticks::from_ns(sheet.memory_latency_ns).0));
    Ticks::from_ns(sheet.link_one_way_ns)
        .plus(item)
        .plus(Ticks::from_ns(sheet.dma_preparation_ns))
        .plus(Ticks::from_ns(sheet.dma_one_way_ns))
}

/// What the control thread knows when it schedules the next poll.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PollFacts {
    /// The poll just done found records.
    pub(crate) found_records: bool,
    /// No task waiting for bytes could start if they came now (rule 3).
    pub(crate) backlog: bool,
    /// More than half of the ring's payload slots are held or not returned (rule 4).
    pub(crate) ring_filling: bool,
    /// Result chunks of the launch seen so far (rules 6 and 7).
    pub(crate) arrived: u64,
    /// Result chunks of the launch in all.
    pub(crate) chunks: u64,
}

/// The adaptive schedule's state for one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AdaptivePoll {
    shortest: Ticks,
    longest: Ticks,
    /// Rule 5's blind interval, between `shortest` and `longest`.
    blind: Ticks,
    /// The current back-off interval (rule 2).
    interval: Ticks,
    /// When the run's first launch store was posted (rule 7), once one was.
    run_started: Option<Ticks>,
    /// When the current launch's store was posted.
    launched: Ticks,
    /// Whether the current launch's first record has been seen.
    seen_first: bool,
    /// When the poll that saw it started, and the chunks seen then (rules 6 and 7).
    first_seen: (Ticks, u64),
    /// The last poll found records (rule 1: a burst that has just begun is watched).
    found_last: bool,
    /// How long after its store the previous launch's first record was seen (rule 5).
    learned_first: Option<Ticks>,
    /// The next poll was put back because of a backlog (rule 3): a task's end may bring it
    /// forward, to this interval after the last poll's start (what the other rules chose).
    deferred: Option<Ticks>,
}

/// Rule 5's blind interval for polls of cost `poll_cost` between `shortest` and `longest`:
/// `c / (c / longest + STALL_SLACK_POINTS%)`, the shortest interval whose polls cost at most
/// the stall slack more than polls at `longest` do, within `[shortest, longest]`.
fn blind_interval(shortest: Ticks, longest: Ticks, poll_cost: Ticks) -> Ticks {
    let cost = u128::from(poll_cost.0.max(1));
    let longest_ticks = u128::from(longest.0.max(1));
    // c / (c / L + s / 100) = 100 c L / (100 c + s L).
    let interval =
        100 * cost * longest_ticks / (100 * cost + u128::from(STALL_SLACK_POINTS) * longest_ticks);
    Ticks(u64::try_from(interval).unwrap_or(u64::MAX)).clamp(shortest, longest)
}

impl AdaptivePoll {
    /// A schedule between `shortest` and `longest` (`longest >= shortest`, both positive: the
    /// configuration's validation guarantees it) for polls that cost `poll_cost` when they
    /// find nothing (one uncached load).
    pub(crate) fn new(shortest: Ticks, longest: Ticks, poll_cost: Ticks) -> AdaptivePoll {
        let longest = longest.max(shortest);
        AdaptivePoll {
            shortest,
            longest,
            blind: blind_interval(shortest, longest, poll_cost),
            interval: shortest,
            run_started: None,
            launched: Ticks::ZERO,
            seen_first: false,
            first_seen: (Ticks::ZERO, 0),
            found_last: false,
            learned_first: None,
            deferred: None,
        }
    }

    /// A launch store was posted at `now`, and its first record cannot be in host memory
    /// sooner than `bound` after it ([`first_record_bound`]; zero when the host knows
    /// nothing of the device): how long until the first poll (rule 5).
    pub(crate) fn first_poll_after_launch(&mut self, now: Ticks, bound: Ticks) -> Ticks {
        self.launched = now;
        self.run_started.get_or_insert(now);
        self.seen_first = false;
        self.deferred = None;
        match self.learned_first {
            Some(learned) => {
                self.interval = self.shortest;
                Ticks(learned.0 / 4 * 3).max(bound).max(self.shortest)
            }
            None if bound > Ticks::ZERO => {
                // Nothing learned, but nothing can come before the bound: poll there, then
                // back off from the shortest interval up to the blind interval.
                self.interval = self.shortest;
                bound.max(self.shortest)
            }
            None => {
                // Nothing learned nor bounded: every blind interval until the first record.
                self.interval = self.blind;
                self.blind
            }
        }
    }

    /// A poll that started at `started` ended; how long after `started` the next one should
    /// start (rules 1 to 7).
    pub(crate) fn next_interval(&mut self, started: Ticks, facts: PollFacts) -> Ticks {
        if facts.found_records {
            if !self.seen_first {
                self.seen_first = true;
                self.learned_first = Some(started.since(self.launched));
                self.first_seen = (started, facts.arrived);
            }
            self.interval = self.shortest;
        } else {
            let ceiling = if self.seen_first {
                self.longest
            } else {
                self.blind
            };
            self.interval = Ticks(self.interval.0.saturating_mul(2)).min(ceiling);
        }
        self.deferred = None;
        if facts.ring_filling {
            return self.shortest;
        }
        // A burst that has just begun (records after an empty poll) is watched at the
        // shortest interval: the rate since the launch's first record includes the gap
        // before it, and would put the next poll off while the burst lands (rule 1 before
        // rule 6).
        let burst_begins = facts.found_records && !self.found_last;
        self.found_last = facts.found_records;
        let mut chosen = if burst_begins {
            self.shortest
        } else {
            self.interval.max(self.pace(started, facts))
        };
        if let Some(slack) = self.slack(started, facts) {
            chosen = chosen.min(slack);
        }
        if facts.backlog {
            // A record seen sooner starts nothing sooner: look again when a task ends and
            // frees a worker that a waiting task can use (rule 3).
            self.deferred = Some(chosen);
            return self.longest;
        }
        chosen
    }

    /// The stream's predicted rest at the rate seen since the launch's first record: `None`
    /// before a rate is known.
    fn rest_of_stream(&self, started: Ticks, facts: PollFacts) -> Option<u128> {
        let (first_at, first_arrived) = self.first_seen;
        let since = started.since(first_at).0;
        let streamed = facts.arrived.saturating_sub(first_arrived);
        if !self.seen_first || since == 0 || streamed == 0 {
            return None;
        }
        let remaining = facts.chunks.saturating_sub(facts.arrived);
        // remaining / (streamed / since).
        Some(u128::from(remaining) * u128::from(since) / u128::from(streamed))
    }

    /// Rule 6: half the time the rest of the stream should take at the rate seen since its
    /// first record, within the shortest and longest intervals; the shortest while no rate
    /// is known yet.
    fn pace(&self, started: Ticks, facts: PollFacts) -> Ticks {
        match self.rest_of_stream(started, facts) {
            Some(rest) => Ticks(u64::try_from(rest / 2).unwrap_or(u64::MAX))
                .clamp(self.shortest, self.longest),
            None => self.shortest,
        }
    }

    /// Rule 7: once the launch's records flow, the runtime slack of the run's predicted
    /// length (the time since the run's first launch plus the rest of the stream), at least
    /// the shortest interval.
    fn slack(&self, started: Ticks, facts: PollFacts) -> Option<Ticks> {
        if !self.seen_first {
            return None;
        }
        let run = u128::from(started.since(self.run_started.unwrap_or(self.launched)).0)
            + self.rest_of_stream(started, facts)?;
        let slack = run * u128::from(RUNTIME_SLACK_PERCENT) / 100;
        Some(Ticks(u64::try_from(slack).unwrap_or(u64::MAX)).max(self.shortest))
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

    /// p1 to p100, with the default poll cost (80 ns).
    fn schedule() -> AdaptivePoll {
        AdaptivePoll::new(ns(50), ns(5000), ns(80))
    }

    const EMPTY: PollFacts = PollFacts {
        found_records: false,
        backlog: false,
        ring_filling: false,
        arrived: 0,
        chunks: 100,
    };

    fn found(arrived: u64) -> PollFacts {
        PollFacts {
            found_records: true,
            arrived,
            ..EMPTY
        }
    }

    /// The paper's device (Table III): 16 x 4 x 16 µthreads, 614.4 GB/s, 100 ns, 70 ns
    /// CXL.mem and 350 ns CXL.io round trips, 500 ns DMA preparation.
    const PAPER_DEVICE: DeviceDatasheet = DeviceDatasheet {
        uthreads: 1024,
        memory_gbps: 614.4,
        memory_latency_ns: 100,
        link_one_way_ns: 35,
        dma_preparation_ns: 500,
        dma_one_way_ns: 175,
    };

    fn knn(rows: u32, dim: u32, queries: u64) -> CommandDescriptor {
        CommandDescriptor {
            kernel: shared_abi::KernelId::KnnDistance as u32,
            args: [
                0,
                0,
                shared_abi::params::knn::pack_shape(rows, dim),
                queries,
            ],
            ..CommandDescriptor::default()
        }
    }

    #[test]
    fn the_first_record_bound_adds_the_store_the_first_wave_the_dma_preparation_and_the_write() {
        // KNN (a): 512 items of a 2048-element row (8 KiB) in one wave: 4 MiB at 614.4 GB/s
        // is 6,826.7 ns; 35 + 6,826.7 + 500 + 175 = 7,536.7 ns (the record lands at 7,582).
        let bound = first_record_bound(&PAPER_DEVICE, &knn(128, 2048, 4));
        assert_eq!(bound.0, 6 * (35 + 500 + 175) + 40_960 - 1);
        // More items than µthreads: the first wave is the µthreads, 1,024 x 8 KiB.
        let wide = first_record_bound(&PAPER_DEVICE, &knn(128, 2048, 16));
        assert_eq!(wide.0, 6 * (35 + 500 + 175) + 81_920 - 1);
        // A kernel whose items' traffic the command does not fix: the memory latency only.
        let other = CommandDescriptor {
            kernel: shared_abi::KernelId::SsspRelax as u32,
            ..CommandDescriptor::default()
        };
        assert_eq!(
            first_record_bound(&PAPER_DEVICE, &other),
            ns(35 + 100 + 500 + 175)
        );
        // A tiny KNN launch: the latency floor, not the wave, decides.
        assert_eq!(
            first_record_bound(&PAPER_DEVICE, &knn(1, 8, 1)),
            ns(35 + 100 + 500 + 175)
        );
    }

    #[test]
    fn a_bounded_first_launch_polls_at_the_bound_then_backs_off_up_to_the_blind_interval() {
        let mut poll = schedule();
        assert_eq!(poll.first_poll_after_launch(ns(1000), ns(7500)), ns(7500));
        let intervals: Vec<u64> = (0..7)
            .map(|_| poll.next_interval(ns(8500), EMPTY).as_ns())
            .collect();
        assert_eq!(intervals, [100, 200, 400, 800, 1600, 2222, 2222]);
    }

    #[test]
    fn a_later_launch_polls_no_sooner_than_its_bound() {
        let mut poll = schedule();
        poll.first_poll_after_launch(ns(0), ns(700));
        // First seen 8 µs after the store: three quarters of it is 6 µs.
        poll.next_interval(ns(8000), found(1));
        assert_eq!(poll.first_poll_after_launch(ns(50_000), ns(700)), ns(6000));
        assert_eq!(poll.first_poll_after_launch(ns(90_000), ns(7000)), ns(7000));
    }

    #[test]
    fn a_burst_that_begins_after_an_empty_poll_is_watched_at_the_shortest_interval() {
        let mut poll = schedule();
        poll.first_poll_after_launch(ns(0), Ticks::ZERO);
        let seen = |arrived| PollFacts {
            chunks: 10_000,
            ..found(arrived)
        };
        poll.next_interval(ns(2222), seen(100));
        // A steady stream: paced (rule 6), 5 µs.
        assert_eq!(poll.next_interval(ns(1_002_222), seen(200)), ns(5000));
        let nothing = PollFacts {
            found_records: false,
            ..seen(200)
        };
        assert_eq!(poll.next_interval(ns(1_007_222), nothing), ns(5000));
        // Records again after the empty poll: the burst is watched.
        assert_eq!(poll.next_interval(ns(1_012_222), seen(300)), ns(50));
    }

    #[test]
    fn the_blind_interval_costs_two_points_of_a_core_more_than_the_longest() {
        // 80 / (80 / 5000 + 2%) = 2222 ns: 80/2222 = 3.6% of a core, 80/5000 = 1.6%.
        assert_eq!(schedule().blind.as_ns(), 2222);
        // Within the shortest and longest intervals.
        assert_eq!(AdaptivePoll::new(ns(50), ns(50), ns(80)).blind, ns(50));
        assert_eq!(
            AdaptivePoll::new(ns(3000), ns(5000), ns(80)).blind,
            ns(3000)
        );
        // A dearer poll waits longer: 400 / (400 / 5000 + 2%) = 4000 ns.
        assert_eq!(
            AdaptivePoll::new(ns(50), ns(5000), ns(400)).blind.as_ns(),
            4000
        );
    }

    #[test]
    fn a_first_launch_polls_every_blind_interval_until_its_first_record() {
        let mut poll = schedule();
        let blind = poll.blind;
        assert_eq!(poll.first_poll_after_launch(ns(0), Ticks::ZERO), blind);
        for step in 1..6 {
            assert_eq!(
                poll.next_interval(Ticks(blind.0 * step), EMPTY),
                blind,
                "empty poll {step}"
            );
        }
    }

    #[test]
    fn once_records_flowed_empty_polls_back_off_by_doubling_up_to_the_longest_interval() {
        let mut poll = schedule();
        poll.first_poll_after_launch(ns(0), Ticks::ZERO);
        assert_eq!(poll.next_interval(ns(2222), found(1)), ns(50));
        let intervals: Vec<u64> = (0..8)
            .map(|_| poll.next_interval(ns(100_000), EMPTY).as_ns())
            .collect();
        // No chunk came since the first, so no rate: rule 6 stands aside at the shortest
        // interval, and rule 7, which cannot predict the run without one, too.
        assert_eq!(intervals, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
    }

    #[test]
    fn a_poll_that_finds_records_returns_to_the_shortest_interval() {
        let mut poll = schedule();
        poll.first_poll_after_launch(ns(0), Ticks::ZERO);
        poll.next_interval(ns(2222), found(1));
        for _ in 0..5 {
            poll.next_interval(ns(100_000), EMPTY);
        }
        assert_eq!(poll.next_interval(ns(100_000), found(1)), ns(50));
        assert_eq!(poll.next_interval(ns(100_050), EMPTY), ns(100));
    }

    #[test]
    fn a_backlog_defers_and_a_filling_ring_hurries() {
        let mut poll = schedule();
        poll.first_poll_after_launch(ns(0), Ticks::ZERO);
        let backlog = PollFacts {
            backlog: true,
            ..found(1)
        };
        assert_eq!(poll.next_interval(ns(2222), backlog), ns(5000));
        assert_eq!(poll.backlog_cleared(), Some(ns(50)));
        assert_eq!(poll.backlog_cleared(), None, "brought forward once");
        assert_eq!(poll.next_interval(ns(2300), backlog), ns(5000));
        let both = PollFacts {
            ring_filling: true,
            ..backlog
        };
        assert_eq!(poll.next_interval(ns(2400), both), ns(50));
        assert_eq!(
            poll.backlog_cleared(),
            None,
            "not put back, so not brought forward"
        );
    }

    #[test]
    fn mid_stream_polls_are_paced_by_the_rate_and_close_in_on_the_end() {
        let mut poll = schedule();
        poll.first_poll_after_launch(ns(0), Ticks::ZERO);
        let seen = |arrived| PollFacts {
            chunks: 100_000,
            ..found(arrived)
        };
        // First records at 2.2 µs (100 chunks), then 10 chunks per µs: the stream would end
        // in 10 ms, so rule 6 says 5 µs (the longest), and rule 7 caps it at 3% of the run
        // so far plus the rest: 3% of 10 ms is more, so 5 µs.
        assert_eq!(
            poll.next_interval(ns(2222), seen(100)),
            ns(50),
            "no rate yet"
        );
        assert_eq!(poll.next_interval(ns(12_222), seen(200)), ns(5000));
        // Near the end: 99,990 seen at 10,001 µs at 9.99 chunks per µs: 10 left, 1 µs;
        // half of it.
        assert_eq!(
            poll.next_interval(ns(10_000_222), seen(99_990)).as_ns(),
            500
        );
    }

    #[test]
    fn while_a_task_waits_the_interval_is_at_most_three_percent_of_the_run() {
        let mut poll = schedule();
        poll.first_poll_after_launch(ns(0), Ticks::ZERO);
        let seen = |arrived| PollFacts {
            chunks: 10_000,
            ..found(arrived)
        };
        poll.next_interval(ns(2222), seen(100));
        // 1,100 seen at 12.2 µs, 100 per µs: 89 µs to go, so rule 6 says 5 µs; the run is
        // predicted 12.2 + 89 = 101.2 µs long, and 3% of it is 3.04 µs.
        assert_eq!(poll.next_interval(ns(12_222), seen(1100)).as_ns(), 3036);
        // The same when no task could use the bytes now: put back, and brought forward to
        // what rule 7 allows once one can.
        let backlog = PollFacts {
            backlog: true,
            ..seen(1100)
        };
        assert_eq!(poll.next_interval(ns(12_222), backlog), ns(5000));
        assert_eq!(poll.backlog_cleared().map(Ticks::as_ns), Some(3036));
    }

    #[test]
    fn rule_seven_measures_the_run_not_the_launch() {
        let mut poll = schedule();
        poll.first_poll_after_launch(ns(0), Ticks::ZERO);
        poll.next_interval(ns(2222), found(1));
        // A second launch 1 ms into the run, with the same stream.
        poll.first_poll_after_launch(ns(1_000_000), Ticks::ZERO);
        let seen = |arrived| PollFacts {
            chunks: 10_000,
            ..found(arrived)
        };
        poll.next_interval(ns(1_002_222), seen(100));
        // 89 µs of stream to go, as in the first launch's test, but the run is 1.1 ms long
        // so far: 3% of it is more than the longest interval, and rule 6 decides.
        assert_eq!(poll.next_interval(ns(1_012_222), seen(1100)), ns(5000));
    }

    #[test]
    fn the_first_poll_of_a_later_launch_comes_three_quarters_of_the_way_to_the_learned_arrival() {
        let mut poll = schedule();
        poll.first_poll_after_launch(ns(1000), Ticks::ZERO);
        poll.next_interval(ns(3222), EMPTY);
        // First seen 8 µs after the store.
        poll.next_interval(ns(9000), found(1));
        // A later record does not change what was learned.
        poll.next_interval(ns(9050), found(2));
        assert_eq!(
            poll.first_poll_after_launch(ns(50_000), Ticks::ZERO),
            ns(6000)
        );
        // Then it backs off from the shortest interval up to the blind interval.
        let intervals: Vec<u64> = (0..7)
            .map(|_| poll.next_interval(ns(56_000), EMPTY).as_ns())
            .collect();
        assert_eq!(intervals, [100, 200, 400, 800, 1600, 2222, 2222]);
    }
}
