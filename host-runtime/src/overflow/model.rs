//! An exhaustive state-space check of the abstract streaming protocol, with and without the
//! overflow buffer's spill (see the parent module's docs, "Why it cannot deadlock").
//!
//! The abstract protocol: a launch's result is `chunks` chunks, one payload slot each; a ring
//! of `capacity` slots with a gap-aware head; the device streams any chunk not yet sent into
//! the next slot while the ring has one (out-of-order streaming: every arrival order); the
//! poller takes the records written so far; a task (a set of chunks) becomes ready when all
//! its chunks have been polled and joins its worker's queue (task `t` belongs to worker
//! `t mod workers`, which runs its tasks one at a time in the order they became ready: the
//! host's round-robin before 2026-12-02; today's `crate::sched` hands a ready task to any
//! free worker, so a ready task waits only while every worker is busy, which the spill's
//! condition, no task running, does not depend on);
//! a task finishing releases the chunks no unfinished task needs (their slots, or their
//! copies); a chunk no task needs is released when polled. The spill is the runtime's: it
//! happens when [`super::spill_due`] says so, on the facts the runtime gives it, and moves
//! every held chunk of the window into the buffer.
//!
//! The search visits every reachable state and checks that each state with a task left to
//! finish has a move, and that each move makes progress (so every run ends).

use super::{spill_due, SpillFacts};
use std::collections::{HashSet, VecDeque};

/// One configuration of the abstract protocol.
#[derive(Clone, Debug)]
struct Pattern {
    capacity: usize,
    chunks: u32,
    /// Each task's chunks, a bit mask.
    tasks: Vec<u32>,
    workers: usize,
    spill: bool,
}

/// A state of the protocol.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    /// Chunks the device has sent.
    sent: u32,
    /// The ring's window from the gap-aware head: (chunk, released), oldest first.
    window: VecDeque<(u32, bool)>,
    /// Entries of the window the poller has taken (a prefix).
    polled: usize,
    /// Chunks the host has seen (polled).
    arrived: u32,
    /// Chunks moved to the overflow buffer and not yet released.
    spilled: u32,
    /// Tasks queued (ready) or started, and finished.
    queued: u32,
    finished: u32,
    /// Each worker's queue and running task.
    queues: Vec<VecDeque<usize>>,
    running: Vec<Option<usize>>,
    /// Progress counters (for the termination check).
    polls: u32,
    spills: u32,
}

impl State {
    fn initial(pattern: &Pattern) -> State {
        State {
            sent: 0,
            window: VecDeque::new(),
            polled: 0,
            arrived: 0,
            spilled: 0,
            queued: 0,
            finished: 0,
            queues: vec![VecDeque::new(); pattern.workers],
            running: vec![None; pattern.workers],
            polls: 0,
            spills: 0,
        }
    }

    fn progress(&self) -> u32 {
        let started = self.queued.count_ones()
            - self
                .queues
                .iter()
                .map(|queue| queue.len() as u32)
                .sum::<u32>();
        self.sent.count_ones()
            + self.polls
            + self.spills
            + self.queued.count_ones()
            + started
            + self.finished.count_ones()
    }

    /// Whether an unfinished task needs `chunk`.
    fn needed(&self, pattern: &Pattern, chunk: u32) -> bool {
        pattern
            .tasks
            .iter()
            .enumerate()
            .any(|(t, &needs)| needs & (1 << chunk) != 0 && self.finished & (1 << t) == 0)
    }

    /// Pops the released entries at the head (the gap-aware head advances).
    fn advance_head(&mut self) {
        while self.window.front().is_some_and(|&(_, released)| released) {
            self.window.pop_front();
            self.polled -= 1;
        }
    }

    /// The tasks whose chunks have all arrived join their queues, in task order.
    fn enqueue_ready(&mut self, pattern: &Pattern) {
        for (t, &needs) in pattern.tasks.iter().enumerate() {
            if self.queued & (1 << t) == 0 && needs & !self.arrived == 0 {
                self.queued |= 1 << t;
                self.queues[t % pattern.workers].push_back(t);
            }
        }
    }

    fn running_count(&self) -> usize {
        self.running.iter().flatten().count()
    }

    /// Every state one move away.
    fn moves(&self, pattern: &Pattern) -> Vec<State> {
        let mut next = Vec::new();
        let all = (1u32 << pattern.chunks) - 1;
        // The device streams any chunk not yet sent into a free slot.
        if self.window.len() < pattern.capacity {
            for chunk in 0..pattern.chunks {
                if self.sent & (1 << chunk) == 0 {
                    let mut state = self.clone();
                    state.sent |= 1 << chunk;
                    state.window.push_back((chunk, false));
                    next.push(state);
                }
            }
        }
        // The poller takes the records written so far.
        if self.polled < self.window.len() {
            let mut state = self.clone();
            state.polls += 1;
            for entry in state.polled..state.window.len() {
                let chunk = state.window[entry].0;
                state.arrived |= 1 << chunk;
                if !state.needed(pattern, chunk) {
                    state.window[entry].1 = true;
                }
            }
            state.polled = state.window.len();
            state.enqueue_ready(pattern);
            state.advance_head();
            next.push(state);
        }
        // A free worker starts the oldest task of its queue.
        for worker in 0..pattern.workers {
            if self.running[worker].is_none() && !self.queues[worker].is_empty() {
                let mut state = self.clone();
                state.running[worker] = state.queues[worker].pop_front();
                next.push(state);
            }
        }
        // A running task finishes: the chunks no task needs any more are released.
        for worker in 0..pattern.workers {
            if let Some(task) = self.running[worker] {
                let mut state = self.clone();
                state.running[worker] = None;
                state.finished |= 1 << task;
                for chunk in 0..pattern.chunks {
                    if pattern.tasks[task] & (1 << chunk) != 0 && !state.needed(pattern, chunk) {
                        state.spilled &= !(1 << chunk);
                        for entry in state.window.iter_mut() {
                            if entry.0 == chunk {
                                entry.1 = true;
                            }
                        }
                    }
                }
                state.advance_head();
                next.push(state);
            }
        }
        // The runtime's spill, on the facts it would see.
        let facts = SpillFacts {
            results_to_come: self.arrived != all,
            capacity: pattern.capacity as u64,
            held: self.polled as u64,
            pooled: 0,
            running: self.running_count(),
        };
        if pattern.spill && spill_due(facts) {
            let mut state = self.clone();
            state.spills += 1;
            for entry in 0..state.polled {
                let (chunk, released) = state.window[entry];
                if !released {
                    state.spilled |= 1 << chunk;
                    state.window[entry].1 = true;
                }
            }
            state.advance_head();
            next.push(state);
        }
        next
    }
}

/// What the search found.
#[derive(Debug)]
struct Search {
    states: usize,
    /// A state with a task left and no move, if one is reachable.
    deadlock: Option<State>,
}

fn search(pattern: &Pattern) -> Search {
    let done = (1u32 << pattern.tasks.len()) - 1;
    let start = State::initial(pattern);
    let mut seen = HashSet::new();
    let mut stack = vec![start.clone()];
    seen.insert(start);
    while let Some(state) = stack.pop() {
        let moves = state.moves(pattern);
        if moves.is_empty() && state.finished != done {
            return Search {
                states: seen.len(),
                deadlock: Some(state),
            };
        }
        for next in moves {
            assert!(
                next.progress() > state.progress(),
                "a move without progress in {pattern:?}: {state:?} -> {next:?}"
            );
            if seen.insert(next.clone()) {
                stack.push(next);
            }
        }
    }
    Search {
        states: seen.len(),
        deadlock: None,
    }
}

/// Every dependency pattern of `tasks` tasks over `chunks` chunks (each task a non-empty set).
fn patterns(chunks: u32, tasks: usize) -> Vec<Vec<u32>> {
    let sets: Vec<u32> = (1..(1u32 << chunks)).collect();
    let mut out = vec![Vec::new()];
    for _ in 0..tasks {
        out = out
            .into_iter()
            .flat_map(|prefix: Vec<u32>| {
                sets.iter().map(move |&set| {
                    let mut next = prefix.clone();
                    next.push(set);
                    next
                })
            })
            .collect();
    }
    out
}

/// Every pattern of the search: rings of 1 to 3 slots, 1 or 2 round-robin workers, and
/// launches of up to 4 chunks read by 1 or 2 tasks, or of up to 3 chunks read by 3 tasks.
fn every_pattern(spill: bool) -> Vec<Pattern> {
    let mut out = Vec::new();
    for capacity in 1..=3 {
        for workers in 1..=2 {
            for (chunks, tasks) in [(1, 1), (2, 1), (2, 2), (3, 2), (3, 3), (4, 1), (4, 2)] {
                for needs in patterns(chunks, tasks) {
                    out.push(Pattern {
                        capacity,
                        chunks,
                        tasks: needs,
                        workers,
                        spill,
                    });
                }
            }
        }
    }
    out
}

#[test]
fn with_the_spill_every_state_with_work_left_has_a_move() {
    let mut states = 0;
    let all = every_pattern(true);
    for pattern in &all {
        let found = search(pattern);
        assert!(
            found.deadlock.is_none(),
            "deadlock with the spill in {pattern:?}: {:?}",
            found.deadlock
        );
        states += found.states;
    }
    println!("{} patterns, {states} states, no deadlock", all.len());
    // The search is not vacuous: thousands of patterns, tens of thousands of states.
    assert!(
        all.len() > 2000 && states > 50_000,
        "{} patterns, {states} states",
        all.len()
    );
}

#[test]
fn without_the_spill_the_search_finds_the_deadlock() {
    let all = every_pattern(false);
    let stuck: Vec<&Pattern> = all
        .iter()
        .filter(|pattern| search(pattern).deadlock.is_some())
        .collect();
    assert!(!stuck.is_empty());
    // The smallest: one slot, one task needing two chunks.
    let one_slot = Pattern {
        capacity: 1,
        chunks: 2,
        tasks: vec![0b11],
        workers: 1,
        spill: false,
    };
    let found = search(&one_slot)
        .deadlock
        .expect("one slot, a task of two chunks");
    assert_eq!(
        (found.window.len(), found.polled, found.finished),
        (1, 1, 0)
    );
    // And out-of-order streaming is what it needs with a ring that holds the task's chunks
    // but not two tasks' interleaved ones: two slots, two tasks of two chunks each.
    let interleaved = Pattern {
        capacity: 2,
        chunks: 4,
        tasks: vec![0b0011, 0b1100],
        workers: 2,
        spill: false,
    };
    assert!(search(&interleaved).deadlock.is_some());
    // Every deadlock found has a full ring of polled records and nothing running: the
    // spill's condition (so the spill is exactly what the broken variant lacks).
    for pattern in stuck {
        let state = search(pattern).deadlock.expect("found before");
        assert_eq!(state.window.len(), pattern.capacity, "{pattern:?}");
        assert_eq!(state.polled, pattern.capacity, "{pattern:?}");
        assert_eq!(state.running_count(), 0, "{pattern:?}");
    }
}
