//! The loom shim: every atomic that the host shares with the device goes through here, so that
//! the loom models (`host-runtime/tests/loom_*.rs`, built with `RUSTFLAGS="--cfg loom"`)
//! check the real [`crate::phys::PhysicalMemory`] and everything built on it; and so do the
//! wall-clock mode's channels ([`mpsc`]), so that the wake-up model runs the real
//! `crate::wall` loops.
//!
//! Under `--cfg loom` these are loom's types (and a model of the channels built on them);
//! otherwise the standard library's.

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicU64, Ordering};
#[cfg(loom)]
pub use loom::sync::Arc;

#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicU64, Ordering};
#[cfg(not(loom))]
pub use std::sync::Arc;

/// A cache-line prefetch of `value` ([`crate::shm::prefetch`]), for the host's loops that know
/// which entries of a large table they touch next; under `--cfg loom` nothing (a hint that
/// reads and writes nothing a program can see has nothing for a model to check).
#[inline(always)]
pub fn prefetch<T>(value: &T) {
    #[cfg(not(loom))]
    crate::shm::prefetch(value);
    #[cfg(loom)]
    let _ = value;
}

/// The channels of the wall-clock mode (`crate::wall`): the standard library's, or under
/// `--cfg loom` a model of them (`host-runtime/tests/loom_wake.rs` runs the real host loop and
/// device port over it).
#[cfg(not(loom))]
pub mod mpsc {
    pub use std::sync::mpsc::{
        channel, Receiver, RecvTimeoutError, SendError, Sender, TryRecvError,
    };
}

/// A model of `std::sync::mpsc` for loom, with the semantics the wall-clock loops rely on: a
/// message sent is queued (a send never waits and never wakes a receiver "too early" to
/// matter: the queue latches it); a receive takes the oldest message at once when there is
/// one, and otherwise sleeps until a send or the last sender's drop, re-checking the queue
/// under the lock each time it wakes; a receive on an empty queue whose senders are all gone
/// fails (`Disconnected`); a send to a dropped receiver fails.
///
/// `recv_timeout` never times out: a model has no time, so a receive that only a deadline
/// would end sleeps for ever, and loom reports the model's threads all blocked. That is the
/// question the wake-up model asks (is every wait ended by a message?): in the real runs a
/// lost wake-up would only show as a wait until the deadline (the next poll, the run's limit).
#[cfg(loom)]
pub mod mpsc {
    use loom::sync::{Arc, Condvar, Mutex};
    use std::collections::VecDeque;
    pub use std::sync::mpsc::{RecvTimeoutError, SendError, TryRecvError};

    #[derive(Debug)]
    struct State<T> {
        queue: VecDeque<T>,
        senders: usize,
        receiver: bool,
    }

    #[derive(Debug)]
    struct Shared<T> {
        state: Mutex<State<T>>,
        ready: Condvar,
    }

    /// The sending end.
    #[derive(Debug)]
    pub struct Sender<T> {
        shared: Arc<Shared<T>>,
    }

    /// The receiving end.
    #[derive(Debug)]
    pub struct Receiver<T> {
        shared: Arc<Shared<T>>,
    }

    /// A connected pair.
    pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                senders: 1,
                receiver: true,
            }),
            ready: Condvar::new(),
        });
        (
            Sender {
                shared: Arc::clone(&shared),
            },
            Receiver { shared },
        )
    }

    impl<T> Sender<T> {
        /// Queues `message` and wakes the receiver.
        pub fn send(&self, message: T) -> Result<(), SendError<T>> {
            let mut state = self.shared.state.lock().expect("model lock");
            if !state.receiver {
                return Err(SendError(message));
            }
            state.queue.push_back(message);
            drop(state);
            self.shared.ready.notify_one();
            Ok(())
        }
    }

    impl<T> Clone for Sender<T> {
        fn clone(&self) -> Self {
            self.shared.state.lock().expect("model lock").senders += 1;
            Sender {
                shared: Arc::clone(&self.shared),
            }
        }
    }

    impl<T> Drop for Sender<T> {
        fn drop(&mut self) {
            let mut state = self.shared.state.lock().expect("model lock");
            state.senders -= 1;
            let last = state.senders == 0;
            drop(state);
            if last {
                self.shared.ready.notify_all();
            }
        }
    }

    impl<T> Receiver<T> {
        /// The oldest message, without waiting.
        pub fn try_recv(&self) -> Result<T, TryRecvError> {
            let mut state = self.shared.state.lock().expect("model lock");
            match state.queue.pop_front() {
                Some(message) => Ok(message),
                None if state.senders == 0 => Err(TryRecvError::Disconnected),
                None => Err(TryRecvError::Empty),
            }
        }

        /// The oldest message, waiting for one (for ever: see the module docs).
        pub fn recv_timeout(&self, _timeout: std::time::Duration) -> Result<T, RecvTimeoutError> {
            let mut state = self.shared.state.lock().expect("model lock");
            loop {
                if let Some(message) = state.queue.pop_front() {
                    return Ok(message);
                }
                if state.senders == 0 {
                    return Err(RecvTimeoutError::Disconnected);
                }
                state = self.shared.ready.wait(state).expect("model lock");
            }
        }
    }

    impl<T> Drop for Receiver<T> {
        fn drop(&mut self) {
            let mut state = self.shared.state.lock().expect("model lock");
            state.receiver = false;
            state.queue.clear();
        }
    }
}
