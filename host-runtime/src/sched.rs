//! The host scheduler: hands ready host tasks to free worker µthreads.
//!
//! Both policies keep one queue of the launch's tasks in result-offset order (task `i` reads
//! the results at its offsets; a launch's plan lists its tasks by offset), and a task is
//! *ready* when its inputs have arrived and no other task of its chain is running (the paper,
//! Section V-E: "We evaluate both round-robin (RR) and FIFO scheduling, applied symmetrically
//! to CCM and host schedulers"):
//!
//! - Round-robin ([`HostScheduling::Rr`], Table III's policy): "if the task at the front of the
//!   queue is not yet ready, it is moved to the back of the queue and the scheduler proceeds
//!   with the next available task". A free worker takes the first ready task at or after the
//!   queue's front, in offset order and cyclically; the tasks it passed over go behind the
//!   others, so the front moves to the task after the one taken.
//! - FIFO ([`HostScheduling::Fifo`]): "tasks are already processed in offset order". The
//!   front is the lowest-offset task not yet started; a free worker takes it once it is ready
//!   and nothing else meanwhile (head-of-line waiting).
//!
//! Workers are tried in index order (the lowest free one takes the task), so every choice is
//! deterministic.

use crate::config::HostScheduling;
use std::collections::BTreeSet;

/// Workers and the tasks waiting for them.
#[derive(Debug)]
pub struct Scheduler {
    policy: HostScheduling,
    busy: Vec<bool>,
    /// Tasks whose inputs have arrived and that have not started, by offset.
    ready: BTreeSet<u32>,
    /// Round-robin: the queue's front, where the next scan for a ready task starts.
    cursor: u32,
    /// FIFO: which tasks of the launch have started (index = task id).
    started: Vec<bool>,
    /// FIFO: the lowest-offset task not started (the queue's front).
    front: u32,
    /// The chain of each task of the current launch.
    chains: Vec<Option<u32>>,
    /// Chains with a task running.
    chain_running: BTreeSet<u32>,
}

impl Scheduler {
    /// `workers` idle workers under `policy`.
    pub fn new(policy: HostScheduling, workers: u32) -> Scheduler {
        // At most `MAX_HOST_UTHREADS` in a configuration that passed `HostConfig::validate`,
        // as every run's does before its runtime is built.
        let workers = workers.max(1) as usize;
        Scheduler {
            policy,
            busy: vec![false; workers],
            ready: BTreeSet::new(),
            cursor: 0,
            started: Vec::new(),
            front: 0,
            chains: Vec::new(),
            chain_running: BTreeSet::new(),
        }
    }

    /// Sets the chain of every task of a new launch (index = task id): a new queue, its front
    /// at the first task.
    pub fn set_chains(&mut self, chains: Vec<Option<u32>>) {
        self.started = vec![false; chains.len()];
        self.chains = chains;
        self.chain_running.clear();
        self.cursor = 0;
        self.front = 0;
    }

    fn chain_of(&self, task: u32) -> Option<u32> {
        self.chains.get(task as usize).copied().flatten()
    }

    /// Whether no other task of `task`'s chain is running.
    fn chain_idle(&self, task: u32) -> bool {
        self.chain_of(task)
            .is_none_or(|chain| !self.chain_running.contains(&chain))
    }

    /// Task `task`'s inputs have arrived.
    pub fn ready(&mut self, task: u32) {
        self.ready.insert(task);
    }

    /// The ready task the policy takes next, if any (whether a worker is free aside).
    fn pick(&self) -> Option<u32> {
        match self.policy {
            HostScheduling::Fifo => self
                .ready
                .first()
                .copied()
                .filter(|&task| self.at_front(task) && self.chain_idle(task)),
            HostScheduling::Rr => self
                .ready
                .range(self.cursor..)
                .chain(self.ready.range(..self.cursor))
                .copied()
                .find(|&task| self.chain_idle(task)),
        }
    }

    /// FIFO: whether `task` is the queue's front (every task before it has started; a task
    /// beyond the launch's plan counts as the front once the plan's tasks all have).
    fn at_front(&self, task: u32) -> bool {
        task == self.front
            || (task as usize >= self.started.len() && self.front as usize >= self.started.len())
    }

    /// The next (worker, task) pair that can start now, marking the worker busy.
    pub fn next_start(&mut self) -> Option<(u32, u32)> {
        let worker = self.busy.iter().position(|busy| !busy)?;
        let task = self.pick()?;
        self.ready.remove(&task);
        self.claim(worker);
        if let Some(chain) = self.chain_of(task) {
            self.chain_running.insert(chain);
        }
        // Round-robin: the tasks passed over went to the back; the front is the next one.
        self.cursor = task.saturating_add(1);
        if let Some(started) = self.started.get_mut(task as usize) {
            *started = true;
        }
        while self
            .started
            .get(self.front as usize)
            .is_some_and(|&started| started)
        {
            self.front += 1;
        }
        Some((worker as u32, task))
    }

    fn claim(&mut self, worker: usize) {
        if let Some(busy) = self.busy.get_mut(worker) {
            *busy = true;
        }
    }

    /// A free worker for a task outside the plan (a launch's final step), marking it busy.
    pub fn claim_any(&mut self) -> Option<u32> {
        let worker = self.busy.iter().position(|busy| !busy)?;
        self.claim(worker);
        Some(worker as u32)
    }

    /// Worker `worker` finished `task` (or a launch's final step, `None`): the next task of
    /// its chain may start.
    pub fn release(&mut self, worker: u32, task: Option<u32>) {
        if let Some(busy) = self.busy.get_mut(worker as usize) {
            *busy = false;
        }
        if let Some(chain) = task.and_then(|t| self.chain_of(t)) {
            self.chain_running.remove(&chain);
        }
    }

    /// Tasks whose inputs have arrived but that have not started.
    pub fn waiting(&self) -> usize {
        self.ready.len()
    }

    /// Some task whose inputs have arrived cannot start now: every worker is busy, a task of
    /// its chain runs, or (FIFO) a task before it has not started. A task a free worker can
    /// start is not counted: it starts as soon as the runtime hands it out.
    pub fn blocked(&self) -> bool {
        let free = self.busy.iter().any(|busy| !busy);
        self.ready
            .iter()
            .any(|&task| !free || !self.chain_idle(task) || !self.policy_allows(task))
    }

    /// Whether the policy would take `task` now were it ready (FIFO: only the front).
    fn policy_allows(&self, task: u32) -> bool {
        match self.policy {
            HostScheduling::Fifo => self.at_front(task),
            HostScheduling::Rr => true,
        }
    }

    /// Whether `task`, not ready yet, could start at once if its bytes arrived now
    /// ([`Scheduler::could_any_start_now`] for one task).
    pub fn could_start_now(&self, task: u32) -> bool {
        self.could_any_start_now(std::iter::once(task))
    }

    /// Whether one of `tasks`, not ready yet, could start at once if its bytes arrived now:
    /// a worker is free that no ready task takes first, no task of its chain runs or is about
    /// to, and the policy would take it. The ready tasks the policy starts now go first (the
    /// runtime hands them out before anything else happens): round-robin starts every ready
    /// task whose chain is idle, one per chain, while workers are free; FIFO starts the front
    /// while it is ready, and then only the new front could take a worker. So a worker that a
    /// ready task will take, or a chain whose next task is ready, is not free for bytes.
    pub fn could_any_start_now(&self, tasks: impl IntoIterator<Item = u32>) -> bool {
        let mut spare = self.busy.iter().filter(|busy| !**busy).count();
        if spare == 0 {
            return false;
        }
        // Chains that a ready task takes before any arrival.
        let mut taken = BTreeSet::new();
        let takes = |task: u32, spare: &mut usize, taken: &mut BTreeSet<u32>| -> bool {
            let chain = self.chain_of(task);
            if *spare == 0 || !self.chain_idle(task) || chain.is_some_and(|c| taken.contains(&c)) {
                return false;
            }
            *spare -= 1;
            if let Some(chain) = chain {
                taken.insert(chain);
            }
            true
        };
        // FIFO: the front once the ready tasks at it have started.
        let mut front = self.front;
        match self.policy {
            HostScheduling::Rr => {
                for &task in &self.ready {
                    if spare == 0 {
                        return false;
                    }
                    takes(task, &mut spare, &mut taken);
                }
            }
            HostScheduling::Fifo => {
                while self.ready.contains(&front) && takes(front, &mut spare, &mut taken) {
                    front += 1;
                    while self
                        .started
                        .get(front as usize)
                        .is_some_and(|&started| started)
                    {
                        front += 1;
                    }
                }
            }
        }
        if spare == 0 {
            return false;
        }
        tasks.into_iter().any(|task| {
            let allowed = match self.policy {
                HostScheduling::Rr => true,
                HostScheduling::Fifo => {
                    task == front
                        || (task as usize >= self.started.len()
                            && front as usize >= self.started.len())
                }
            };
            allowed
                && self.chain_idle(task)
                && self
                    .chain_of(task)
                    .is_none_or(|chain| !taken.contains(&chain))
        })
    }

    /// Workers running something.
    pub fn running(&self) -> usize {
        self.busy.iter().filter(|busy| **busy).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(policy: HostScheduling, workers: u32, tasks: usize) -> Scheduler {
        let mut scheduler = Scheduler::new(policy, workers);
        scheduler.set_chains(vec![None; tasks]);
        scheduler
    }

    #[test]
    fn round_robin_takes_a_ready_task_before_a_front_one_that_is_not_ready_and_moves_that_back() {
        let mut rr = launch(HostScheduling::Rr, 1, 5);
        rr.ready(2);
        // Tasks 0 and 1 have no inputs yet: passed over, behind the others.
        assert_eq!(rr.next_start(), Some((0, 2)));
        rr.release(0, Some(2));
        rr.ready(0);
        rr.ready(3);
        // The front is task 3 now; task 0 waits its turn at the back.
        assert_eq!(rr.next_start(), Some((0, 3)));
        rr.release(0, Some(3));
        assert_eq!(rr.next_start(), Some((0, 0)));
    }

    #[test]
    fn fifo_keeps_offset_order_and_waits_for_a_front_task_that_is_not_ready() {
        let mut fifo = launch(HostScheduling::Fifo, 2, 3);
        fifo.ready(2);
        fifo.ready(1);
        assert_eq!(
            fifo.next_start(),
            None,
            "task 0, the front, has no inputs yet"
        );
        assert!(fifo.blocked());
        assert!(fifo.could_start_now(0) && !fifo.could_start_now(3));
        fifo.ready(0);
        assert_eq!(fifo.next_start(), Some((0, 0)));
        assert_eq!(fifo.next_start(), Some((1, 1)));
        assert_eq!(fifo.next_start(), None, "both workers are busy");
        fifo.release(1, Some(1));
        assert_eq!(fifo.next_start(), Some((1, 2)));
        assert_eq!(fifo.waiting(), 0);
    }

    #[test]
    fn round_robin_hands_a_ready_task_to_any_free_worker() {
        let mut rr = launch(HostScheduling::Rr, 2, 4);
        rr.ready(0);
        rr.ready(2);
        assert_eq!(rr.next_start(), Some((0, 0)));
        assert_eq!(rr.next_start(), Some((1, 2)));
        assert_eq!(rr.next_start(), None);
        assert!(!rr.blocked(), "nothing ready waits");
        rr.ready(3);
        assert!(rr.blocked(), "every worker is busy");
        assert!(!rr.could_start_now(1));
        rr.release(1, Some(2));
        assert!(
            !rr.could_start_now(1),
            "task 3, ready, takes the freed worker"
        );
        assert_eq!(rr.next_start(), Some((1, 3)));
        rr.release(0, Some(0));
        assert!(rr.could_start_now(1));
    }

    #[test]
    fn tasks_of_one_chain_never_run_together_but_others_do() {
        for policy in [HostScheduling::Rr, HostScheduling::Fifo] {
            let mut scheduler = Scheduler::new(policy, 4);
            scheduler.set_chains(vec![Some(0), Some(0), None, Some(0)]);
            for task in 0..4 {
                scheduler.ready(task);
            }
            assert_eq!(scheduler.next_start(), Some((0, 0)));
            if policy == HostScheduling::Rr {
                assert_eq!(scheduler.next_start(), Some((1, 2)));
            } else {
                // Task 1, the front, waits for task 0 of its chain; task 2 waits behind it.
                assert_eq!(scheduler.next_start(), None);
            }
            assert!(!scheduler.could_start_now(1), "chain 0 is running");
            assert_eq!(scheduler.next_start(), None);
            scheduler.release(0, Some(0));
            // Round-robin: task 1 was passed over, so task 3, after task 2, comes first;
            // FIFO: offset order.
            let (first, second) = match policy {
                HostScheduling::Rr => (3, 1),
                HostScheduling::Fifo => (1, 3),
            };
            assert_eq!(scheduler.next_start(), Some((0, first)));
            if policy == HostScheduling::Fifo {
                assert_eq!(scheduler.next_start(), Some((1, 2)));
            }
            assert_eq!(scheduler.next_start(), None, "the chain's last task waits");
            scheduler.release(0, Some(first));
            assert_eq!(scheduler.next_start(), Some((0, second)));
        }
    }

    #[test]
    fn a_worker_or_chain_that_a_ready_task_takes_is_not_free_for_bytes() {
        // Round-robin, two workers, one free: task 0 runs, task 1 is ready and takes the
        // free worker as soon as the runtime hands it out, so bytes for task 2 start nothing.
        let mut rr = launch(HostScheduling::Rr, 2, 4);
        rr.ready(0);
        assert_eq!(rr.next_start(), Some((0, 0)));
        rr.ready(1);
        assert!(!rr.could_start_now(2), "task 1 takes the free worker");
        assert_eq!(rr.next_start(), Some((1, 1)));
        rr.release(1, Some(1));
        assert!(
            rr.could_start_now(2),
            "nothing ready: the freed worker waits"
        );
        assert!(rr.could_any_start_now([3, 2]));
        assert!(!rr.could_any_start_now([]));
        // A chain whose next task is ready is taken, though it is idle now and a worker free:
        // a task of it whose bytes come now waits for that one.
        let mut chained = Scheduler::new(HostScheduling::Rr, 2);
        chained.set_chains(vec![Some(0), Some(0), Some(0), Some(1)]);
        chained.ready(0);
        assert!(!chained.could_start_now(1), "task 0 takes chain 0");
        assert!(chained.could_start_now(3), "a worker is left for chain 1");
        // FIFO: the front is ready and takes the free worker; with a second free worker, the
        // task after it is the front once it starts.
        let mut fifo = launch(HostScheduling::Fifo, 1, 3);
        fifo.ready(0);
        assert!(!fifo.could_start_now(1), "task 0 takes the only worker");
        let mut fifo = launch(HostScheduling::Fifo, 2, 3);
        fifo.ready(0);
        assert!(fifo.could_start_now(1) && !fifo.could_start_now(2));
    }

    #[test]
    fn a_new_launch_starts_a_new_queue() {
        let mut fifo = launch(HostScheduling::Fifo, 1, 2);
        fifo.ready(0);
        assert_eq!(fifo.next_start(), Some((0, 0)));
        fifo.release(0, Some(0));
        fifo.set_chains(vec![None; 2]);
        fifo.ready(1);
        assert_eq!(
            fifo.next_start(),
            None,
            "task 0 of the new launch is the front"
        );
        fifo.ready(0);
        assert_eq!(fifo.next_start(), Some((0, 0)));
    }
}
