//! The ready pool: batches of metadata records the poller found, waiting for the host
//! scheduler. A batch is the index range `[head, tail)` of the metadata ring that one poll (or
//! one interrupt handler) found new: the poller pushes it whole, one push per poll, whatever
//! its length, and the scheduler takes the records of a batch out of the ring when it takes
//! the batch (paper section IV-C: "the polling routine only moves metadata to the ready
//! pool").
//!
//! One thread uses it, in every clock mode: the poller (or interrupt handler) pushes and the
//! scheduler pops on the runtime's host thread, which is modelled as µthreads in virtual time
//! (in wall-clock mode too: only the device runs on another thread). The queue is a bounded
//! FIFO; it happens to be a lock-free one (`crossbeam_queue::ArrayQueue`), which nothing here
//! relies on. Its capacity is the metadata ring's: every batch holds at least one record and no
//! more records are outstanding than the ring holds, so a push can never fail while the ring
//! protocol holds.

use crossbeam_queue::ArrayQueue;
use std::ops::Range;

/// The pool.
#[derive(Debug)]
pub struct ReadyPool {
    queue: ArrayQueue<Range<u64>>,
}

/// The pool is full: more batches are outstanding than the metadata ring holds records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "ready pool full ({capacity} batches): more records outstanding than the metadata ring holds"
)]
pub struct PoolFull {
    /// The pool's capacity.
    pub capacity: usize,
}

impl ReadyPool {
    /// A pool for a metadata ring of `capacity` slots.
    pub fn new(capacity: usize) -> ReadyPool {
        ReadyPool {
            queue: ArrayQueue::new(capacity.max(1)),
        }
    }

    /// Adds a batch: the metadata indexes `batch`.
    pub fn push(&self, batch: Range<u64>) -> Result<(), PoolFull> {
        self.queue.push(batch).map_err(|_| PoolFull {
            capacity: self.queue.capacity(),
        })
    }

    /// Takes the oldest batch.
    pub fn pop(&self) -> Option<Range<u64>> {
        self.queue.pop()
    }

    /// Batches waiting.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether no batch waits.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_leave_in_arrival_order_and_overflow_is_an_error() {
        let pool = ReadyPool::new(2);
        pool.push(0..3).unwrap();
        pool.push(3..1003).unwrap();
        assert!(pool.push(1003..1004).is_err());
        assert_eq!(pool.pop(), Some(0..3));
        assert_eq!(pool.pop(), Some(3..1003));
        assert!(pool.is_empty());
    }
}
