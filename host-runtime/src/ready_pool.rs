//! The ready pool: metadata records the poller has taken off the ring, waiting for the host
//! scheduler. A lock-free bounded MPMC queue (`crossbeam_queue::ArrayQueue`), so that in wall
//! mode the poller and the scheduler's workers can run on different threads; its capacity is
//! the metadata ring's, so a push can never fail while the ring protocol holds.

use crossbeam_queue::ArrayQueue;
use shared_abi::MetadataRecord;

/// The pool.
#[derive(Debug)]
pub struct ReadyPool {
    queue: ArrayQueue<MetadataRecord>,
}

/// The pool is full: more records are outstanding than the metadata ring holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "ready pool full ({capacity} records): more records outstanding than the metadata ring holds"
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

    /// Adds a record.
    pub fn push(&self, record: MetadataRecord) -> Result<(), PoolFull> {
        self.queue.push(record).map_err(|_| PoolFull {
            capacity: self.queue.capacity(),
        })
    }

    /// Takes the oldest record.
    pub fn pop(&self) -> Option<MetadataRecord> {
        self.queue.pop()
    }

    /// Records waiting.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether no record waits.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_leave_in_arrival_order_and_overflow_is_an_error() {
        let pool = ReadyPool::new(2);
        let record = |sequence| MetadataRecord {
            sequence,
            ..MetadataRecord::default()
        };
        pool.push(record(1)).unwrap();
        pool.push(record(2)).unwrap();
        assert!(pool.push(record(3)).is_err());
        assert_eq!(pool.pop().map(|r| r.sequence), Some(1));
        assert_eq!(pool.pop().map(|r| r.sequence), Some(2));
        assert!(pool.is_empty());
    }
}
