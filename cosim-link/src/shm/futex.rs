//! Futex waits and wake-ups on a word of a shared mapping: how one process sleeps until the
//! other changes a word they both map, and how the other wakes it (`futex(2)`).
//!
//! The turn page's flag is an [`AtomicU64`]; the futex is its low 32-bit half (the first four
//! bytes on a little-endian machine, the last four on a big-endian one), which holds the whole
//! value of every flag the turn writes. The futex is a shared one (no `FUTEX_PRIVATE_FLAG`):
//! the kernel keys it by the page of the memory file, so a wait in one process is woken by a
//! wake in the other, whatever address each maps the page at.
//!
//! A wait may end early (a wake meant for an earlier value, a signal, a spurious return): the
//! caller always looks at the word again. These are the only two system calls of the turn's
//! wait, and the crate's only `unsafe` outside the mappings (the parent module).

use nix::libc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// How a [`wait`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    /// Woken, timed out, interrupted by a signal, or the word no longer held the value
    /// (look at it again).
    Returned,
    /// The kernel refused the wait (a seccomp filter, a kernel without futexes): the caller
    /// must wait some other way. Carries the `errno`.
    Unsupported(i32),
}

/// The address of the low 32 bits of `word`, the futex word.
fn low_half(word: &AtomicU64) -> *const u32 {
    let base = word.as_ptr().cast::<u32>().cast_const();
    if cfg!(target_endian = "big") {
        base.wrapping_add(1)
    } else {
        base
    }
}

/// Sleeps while the low 32 bits of `word` hold `expected`, for at most `timeout`
/// (`FUTEX_WAIT`): returns at once if they hold something else, else when [`wake`] is called
/// on the same word (in this process or another that maps the same memory file), when
/// `timeout` has passed, or on a signal.
pub fn wait(word: &AtomicU64, expected: u32, timeout: Duration) -> Waited {
    let timeout = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        // Below 10^9: fits every `c_long`.
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY:
    // - `low_half(word)` is a 4-byte-aligned address inside the `AtomicU64` that `word`
    //   borrows, alive for the whole call; FUTEX_WAIT only reads the `u32` there, atomically,
    //   as the kernel reads a futex word, and writes nothing;
    // - `&timeout` points to a live `timespec` for the whole call (a relative timeout, as
    //   FUTEX_WAIT takes it), which the kernel only reads;
    // - the two trailing arguments (`uaddr2`, `val3`) are ignored by FUTEX_WAIT.
    let result = unsafe {
        libc::syscall(
            libc::SYS_futex,
            low_half(word),
            libc::FUTEX_WAIT,
            expected,
            &raw const timeout,
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    if result == 0 {
        return Waited::Returned;
    }
    match nix::errno::Errno::last() {
        nix::errno::Errno::EAGAIN | nix::errno::Errno::ETIMEDOUT | nix::errno::Errno::EINTR => {
            Waited::Returned
        }
        errno => Waited::Unsupported(errno as i32),
    }
}

/// Wakes every process and thread sleeping in [`wait`] on `word` (`FUTEX_WAKE`). Cheap when
/// none sleeps, but a system call all the same: the turn calls it only when the waiter said
/// it sleeps.
pub fn wake(word: &AtomicU64) {
    // SAFETY:
    // - FUTEX_WAKE does not access the memory at the address: it only uses it (its page
    //   and offset) as the key of the sleepers to wake, and `low_half(word)` is a
    //   4-byte-aligned address inside the live `AtomicU64` that `word` borrows;
    // - the timeout, `uaddr2` and `val3` arguments are ignored by FUTEX_WAKE.
    let _woken = unsafe {
        libc::syscall(
            libc::SYS_futex,
            low_half(word),
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn a_wait_on_a_word_holding_another_value_returns_at_once() {
        let word = AtomicU64::new(2);
        let started = Instant::now();
        assert_eq!(wait(&word, 1, Duration::from_secs(5)), Waited::Returned);
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_wait_ends_at_its_timeout_without_a_wake() {
        let word = AtomicU64::new(1);
        let started = Instant::now();
        assert_eq!(wait(&word, 1, Duration::from_millis(20)), Waited::Returned);
        assert!(started.elapsed() >= Duration::from_millis(20));
    }

    #[test]
    fn a_wake_through_one_mapping_of_a_memfd_ends_a_wait_through_another() {
        use crate::shm::MappedWords;
        use std::os::fd::AsFd;
        // Two mappings of one memory file, at two addresses, as two processes map it: the
        // futex is keyed by the file's page, not by the address.
        let (first, fd) = MappedWords::create("axle-futex-test", 4096).unwrap();
        let second = MappedWords::map(fd.as_fd(), 4096).unwrap();
        first.words()[0].store(1, Ordering::Release);
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| {
                let started = Instant::now();
                let word = &second.words()[0];
                while word.load(Ordering::Acquire) == 1 {
                    assert_eq!(wait(word, 1, Duration::from_secs(30)), Waited::Returned);
                }
                started.elapsed()
            });
            std::thread::sleep(Duration::from_millis(20));
            first.words()[0].store(2, Ordering::Release);
            wake(&first.words()[0]);
            let waited = waiter.join().unwrap();
            assert!(waited < Duration::from_secs(10), "waited {waited:?}");
        });
    }

    #[test]
    fn a_wake_ends_a_wait_long_before_its_timeout() {
        let word = Arc::new(AtomicU64::new(1));
        let waiter = {
            let word = Arc::clone(&word);
            std::thread::spawn(move || {
                let started = Instant::now();
                while word.load(Ordering::Acquire) == 1 {
                    assert_eq!(wait(&word, 1, Duration::from_secs(30)), Waited::Returned);
                }
                started.elapsed()
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        word.store(2, Ordering::Release);
        wake(&word);
        let waited = waiter.join().unwrap();
        assert!(waited < Duration::from_secs(10), "waited {waited:?}");
    }
}
