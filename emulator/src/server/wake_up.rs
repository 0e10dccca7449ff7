//! The wake-up cost the emulator's turn waits measured, kept from one session to the next.
//!
//! Each session's turn page starts a spin budget of its own ([`cosim_link::turn::spin`]),
//! from the wake-up cost of a sleeping waiter. A host is a new process for every run, so
//! without a figure from earlier it would start from a guess (20 µs) and learn the machine's
//! cost an eighth at a time, sleep by sleep; on a guest whose idle cores take 0.8 to 1 ms to
//! wake, a short run (KNN: 28 hand-overs) spent most of its sleeps learning. The emulator
//! process outlives its sessions: what its waits measured in one session starts the next
//! session's page, on both sides (the page carries it to the host).

use cosim_link::turn::TurnPage;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The emulator's last measured wake-up cost, in nanoseconds (0: none yet).
static KNOWN_NS: AtomicU64 = AtomicU64::new(0);

/// Starts a new session's `page` from the wake-up cost measured so far, if any.
pub(super) fn seed(page: &TurnPage) {
    seed_from(&KNOWN_NS, page);
}

/// Keeps what a finished session's `page` measured, if its waits slept (a session caught
/// every turn spinning measured nothing).
pub(super) fn learn(page: &TurnPage) {
    learn_into(&KNOWN_NS, page);
}

/// [`seed`] from `known`.
fn seed_from(known: &AtomicU64, page: &TurnPage) {
    let ns = known.load(Ordering::Relaxed);
    if ns != 0 {
        page.publish_wake_up(Duration::from_nanos(ns));
    }
}

/// [`learn`] into `known`.
fn learn_into(known: &AtomicU64, page: &TurnPage) {
    if page.wait_counts().slept > 0 {
        let ns = page.spin().wake_up().as_nanos() as u64;
        known.store(ns.max(1), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosim_link::turn::{spin, Turn, DEVICE, HOST, TURN_PAGE_BYTES};
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn a_session_that_slept_starts_the_next_sessions_pages_on_both_sides() {
        let known = AtomicU64::new(0);
        // Nothing measured yet: a new page keeps the first guess.
        let (device, fd) = TurnPage::create().unwrap();
        seed_from(&known, &device);
        assert_eq!(device.spin().wake_up(), spin::FIRST_WAKE_UP);
        // A session caught every turn spinning: nothing learned.
        learn_into(&known, &device);
        assert_eq!(known.load(Ordering::Relaxed), 0);
        // The emulator's side of a session sleeps once, for a while.
        let host = TurnPage::map(fd.as_fd(), TURN_PAGE_BYTES).unwrap();
        let (left, _right) = UnixStream::pair().unwrap();
        device.hand_over(HOST, b"the host's turn").unwrap();
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| device.wait_for(DEVICE, &left, &mut || false));
            std::thread::sleep(Duration::from_millis(20));
            host.hand_over(DEVICE, b"late").unwrap();
            assert!(matches!(waiter.join().unwrap(), Ok(Turn::Mine(_))));
        });
        assert_eq!(device.wait_counts().slept, 1);
        learn_into(&known, &device);
        let learned = device.spin().wake_up();
        assert_eq!(known.load(Ordering::Relaxed), learned.as_nanos() as u64);
        // The next session's page starts from it, and so does the host that maps it.
        let (next, fd) = TurnPage::create().unwrap();
        seed_from(&known, &next);
        assert_eq!(next.spin().wake_up(), learned);
        let next_host = TurnPage::map(fd.as_fd(), TURN_PAGE_BYTES).unwrap();
        assert_eq!(next_host.spin().wake_up(), learned);
    }
}
