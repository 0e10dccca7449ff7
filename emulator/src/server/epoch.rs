//! The device epoch ([`shared_abi::registers::EPOCH`]): a number this emulator process draws
//! once, when it starts serving, and publishes in every session's register window and
//! `SessionReady`. A host that lost its emulator (the process killed and started again on the
//! same socket) reads it when it attaches again and knows it found a new device, whose memory
//! holds nothing of the old one's.
//!
//! It must differ between two starts, so it is drawn from what does: the wall clock's
//! nanoseconds when the process first asks for it and the process id, mixed by a bijection
//! (SplitMix64's finaliser, so two different inputs never give the same epoch). It names the
//! device instance and nothing else: it never enters the model or a figure, and runs stay
//! deterministic.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// This process's device epoch (drawn on the first call; never 0, which means "none").
pub fn device_epoch() -> u64 {
    static EPOCH: OnceLock<u64> = OnceLock::new();
    *EPOCH.get_or_init(|| {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos() as u64);
        draw(now, std::process::id())
    })
}

/// The epoch of process `pid` started at `now_ns`: SplitMix64's finaliser (a bijection) of
/// `now_ns` with the pid folded into its high bits, 0 moved to 1.
fn draw(now_ns: u64, pid: u32) -> u64 {
    let mut z = now_ns ^ u64::from(pid).rotate_left(40);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    z.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_starts_a_nanosecond_or_a_pid_apart_draw_different_epochs() {
        let base = draw(1_764_650_000_000_000_000, 4242);
        assert_ne!(base, draw(1_764_650_000_000_000_001, 4242));
        assert_ne!(base, draw(1_764_650_000_000_000_000, 4243));
        assert_ne!(draw(0, 0), 0);
    }

    #[test]
    fn the_process_draws_once() {
        assert_eq!(device_epoch(), device_epoch());
        assert_ne!(device_epoch(), 0);
    }
}
