//! The host scheduler: hands ready host tasks to free worker µthreads.

use crate::config::HostScheduling;
use std::collections::{BTreeMap, VecDeque};

/// Workers and the tasks waiting for them.
#[derive(Debug)]
pub struct Scheduler {
    policy: HostScheduling,
    busy: Vec<bool>,
    fifo: VecDeque<u32>,
    per_worker: Vec<VecDeque<u32>>,
    waiting: usize,
    /// The chain of each task of the current launch.
    chains: Vec<Option<u32>>,
    /// Chains with a task queued or running, and the tasks parked behind it.
    chain_parked: BTreeMap<u32, VecDeque<u32>>,
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
            fifo: VecDeque::new(),
            per_worker: vec![VecDeque::new(); workers],
            waiting: 0,
            chains: Vec::new(),
            chain_parked: BTreeMap::new(),
        }
    }

    /// Sets the chain of every task of a new launch (index = task id).
    pub fn set_chains(&mut self, chains: Vec<Option<u32>>) {
        self.chains = chains;
        self.chain_parked.clear();
    }

    fn chain_of(&self, task: u32) -> Option<u32> {
        self.chains.get(task as usize).copied().flatten()
    }

    /// Task `task` is ready to run. A task whose chain already has a task queued or running
    /// is parked until that one finishes.
    pub fn ready(&mut self, task: u32) {
        if let Some(chain) = self.chain_of(task) {
            match self.chain_parked.get_mut(&chain) {
                Some(parked) => {
                    parked.push_back(task);
                    return;
                }
                None => {
                    self.chain_parked.insert(chain, VecDeque::new());
                }
            }
        }
        self.enqueue(task);
    }

    fn enqueue(&mut self, task: u32) {
        self.waiting += 1;
        match self.policy {
            HostScheduling::Fifo => self.fifo.push_back(task),
            HostScheduling::Rr => {
                let worker = task as usize % self.per_worker.len();
                if let Some(queue) = self.per_worker.get_mut(worker) {
                    queue.push_back(task);
                }
            }
        }
    }

    /// The next (worker, task) pair that can start now, marking the worker busy. Workers are
    /// tried in index order, so the choice is deterministic.
    pub fn next_start(&mut self) -> Option<(u32, u32)> {
        match self.policy {
            HostScheduling::Fifo => {
                if self.fifo.is_empty() {
                    return None;
                }
                let worker = self.busy.iter().position(|busy| !busy)?;
                let task = self.fifo.pop_front()?;
                self.claim(worker);
                Some((worker as u32, task))
            }
            HostScheduling::Rr => {
                let worker = (0..self.busy.len()).find(|&w| {
                    !self.busy.get(w).copied().unwrap_or(true)
                        && self.per_worker.get(w).is_some_and(|q| !q.is_empty())
                })?;
                let task = self.per_worker.get_mut(worker)?.pop_front()?;
                self.claim(worker);
                Some((worker as u32, task))
            }
        }
    }

    fn claim(&mut self, worker: usize) {
        if let Some(busy) = self.busy.get_mut(worker) {
            *busy = true;
        }
        self.waiting = self.waiting.saturating_sub(1);
    }

    /// A free worker for a task outside the plan (a launch's final step), marking it busy.
    pub fn claim_any(&mut self) -> Option<u32> {
        let worker = self.busy.iter().position(|busy| !busy)?;
        self.claim_without_task(worker);
        Some(worker as u32)
    }

    fn claim_without_task(&mut self, worker: usize) {
        if let Some(busy) = self.busy.get_mut(worker) {
            *busy = true;
        }
    }

    /// Worker `worker` finished `task` (or a launch's final step, `None`): the next task parked
    /// on its chain becomes ready.
    pub fn release(&mut self, worker: u32, task: Option<u32>) {
        if let Some(busy) = self.busy.get_mut(worker as usize) {
            *busy = false;
        }
        let Some(chain) = task.and_then(|t| self.chain_of(t)) else {
            return;
        };
        match self
            .chain_parked
            .get_mut(&chain)
            .and_then(VecDeque::pop_front)
        {
            Some(next) => self.enqueue(next),
            None => {
                self.chain_parked.remove(&chain);
            }
        }
    }

    /// Tasks ready but not started.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    /// Some ready task cannot start now: its worker is busy (round-robin), every worker is
    /// (FIFO), or it is parked behind a running task of its chain. Tasks that a free worker
    /// can start are not counted: they start as soon as the runtime hands them out.
    pub fn blocked(&self) -> bool {
        let parked = self.chain_parked.values().any(|parked| !parked.is_empty());
        let queued = match self.policy {
            HostScheduling::Fifo => !self.fifo.is_empty() && self.busy.iter().all(|busy| *busy),
            HostScheduling::Rr => self
                .busy
                .iter()
                .zip(&self.per_worker)
                .any(|(busy, queue)| *busy && !queue.is_empty()),
        };
        parked || queued
    }

    /// Whether `task`, not ready yet, could start at once if its bytes arrived now: a worker
    /// it may run on is free (round-robin: its own; FIFO: any) and no task of its chain is
    /// queued or running.
    pub fn could_start_now(&self, task: u32) -> bool {
        if self
            .chain_of(task)
            .is_some_and(|chain| self.chain_parked.contains_key(&chain))
        {
            return false;
        }
        match self.policy {
            HostScheduling::Fifo => self.busy.iter().any(|busy| !busy),
            HostScheduling::Rr => {
                let worker = task as usize % self.busy.len().max(1);
                self.busy.get(worker).is_some_and(|busy| !busy)
            }
        }
    }

    /// Workers running something.
    pub fn running(&self) -> usize {
        self.busy.iter().filter(|busy| **busy).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_a_free_worker_can_start_is_not_blocked_one_behind_a_busy_worker_is() {
        let mut rr = Scheduler::new(HostScheduling::Rr, 2);
        rr.ready(0);
        assert!(!rr.blocked(), "worker 0 is free to start task 0");
        assert_eq!(rr.next_start(), Some((0, 0)));
        rr.ready(2); // also worker 0's, which is busy
        assert!(rr.blocked());
        rr.release(0, Some(0));
        assert!(!rr.blocked());
        let mut fifo = Scheduler::new(HostScheduling::Fifo, 1);
        fifo.ready(0);
        assert!(!fifo.blocked());
        assert_eq!(fifo.next_start(), Some((0, 0)));
        fifo.ready(1);
        assert!(fifo.blocked(), "the only worker is busy");
    }

    #[test]
    fn a_task_could_start_now_only_on_a_free_worker_and_an_idle_chain() {
        let mut rr = Scheduler::new(HostScheduling::Rr, 2);
        rr.set_chains(vec![Some(7), None, Some(7), None]);
        assert!(rr.could_start_now(1) && rr.could_start_now(2));
        rr.ready(0);
        assert_eq!(rr.next_start(), Some((0, 0)));
        assert!(
            !rr.could_start_now(2),
            "worker 0 is busy, and so is chain 7"
        );
        assert!(rr.could_start_now(3), "worker 1 is free");
        rr.release(0, Some(0));
        assert!(rr.could_start_now(2));
        let mut fifo = Scheduler::new(HostScheduling::Fifo, 1);
        fifo.ready(0);
        assert_eq!(fifo.next_start(), Some((0, 0)));
        assert!(!fifo.could_start_now(1), "the only worker is busy");
    }

    #[test]
    fn fifo_runs_tasks_in_ready_order_on_the_lowest_free_worker() {
        let mut scheduler = Scheduler::new(HostScheduling::Fifo, 2);
        scheduler.ready(7);
        scheduler.ready(3);
        scheduler.ready(5);
        assert_eq!(scheduler.next_start(), Some((0, 7)));
        assert_eq!(scheduler.next_start(), Some((1, 3)));
        assert_eq!(scheduler.next_start(), None);
        scheduler.release(1, Some(3));
        assert_eq!(scheduler.next_start(), Some((1, 5)));
    }

    #[test]
    fn round_robin_keeps_a_task_for_its_own_worker_even_when_another_is_free() {
        let mut scheduler = Scheduler::new(HostScheduling::Rr, 2);
        scheduler.ready(0);
        scheduler.ready(2);
        assert_eq!(scheduler.next_start(), Some((0, 0)));
        // Task 2 belongs to worker 0, which is busy; worker 1 stays idle.
        assert_eq!(scheduler.next_start(), None);
        scheduler.release(0, Some(0));
        assert_eq!(scheduler.next_start(), Some((0, 2)));
    }

    #[test]
    fn tasks_of_one_chain_never_run_together_but_others_do() {
        let mut scheduler = Scheduler::new(HostScheduling::Fifo, 4);
        scheduler.set_chains(vec![Some(0), Some(0), None, Some(0)]);
        for task in 0..4 {
            scheduler.ready(task);
        }
        assert_eq!(scheduler.next_start(), Some((0, 0)));
        assert_eq!(scheduler.next_start(), Some((1, 2)));
        // Tasks 1 and 3 wait for task 0 although workers 2 and 3 are free.
        assert_eq!(scheduler.next_start(), None);
        scheduler.release(0, Some(0));
        assert_eq!(scheduler.next_start(), Some((0, 1)));
        assert_eq!(scheduler.next_start(), None);
        scheduler.release(0, Some(1));
        assert_eq!(scheduler.next_start(), Some((0, 3)));
    }
}
