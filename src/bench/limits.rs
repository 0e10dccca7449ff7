//! What every channel is compared with: the machine's memcpy bandwidth and the one-way time
//! of a cache line between two processes; and what every phase shares: the clock, the data
//! pattern, percentiles.

use crate::bench::wire::Watch;
use nix::time::{clock_gettime, ClockId};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// `CLOCK_MONOTONIC` in nanoseconds: one clock for both processes (an [`Instant`] is opaque
/// outside its process).
#[inline]
pub fn now_ns() -> u64 {
    clock_gettime(ClockId::CLOCK_MONOTONIC)
        .map(|time| {
            (time.tv_sec() as u64)
                .wrapping_mul(1_000_000_000)
                .wrapping_add(time.tv_nsec() as u64)
        })
        .unwrap_or_default()
}

/// The golden-ratio multiplier: consecutive indexes get far-apart patterns.
const SPREAD: u64 = 0x9e37_79b9_7f4a_7c15;

/// The first word of the data of payload (or message) `index`; word `i` is this plus `i`.
#[inline]
pub fn pattern(index: u64) -> u64 {
    index.wrapping_mul(SPREAD) ^ 0xa71e_0000_0000_0000
}

/// Fills `buffer` (whole words) with the data of payload `index`.
#[inline]
pub fn fill(index: u64, buffer: &mut [u8]) {
    let base = pattern(index);
    for (i, word) in buffer.chunks_exact_mut(8).enumerate() {
        word.copy_from_slice(&base.wrapping_add(i as u64).to_le_bytes());
    }
}

fn word(buffer: &[u8], i: usize) -> Option<u64> {
    let bytes = buffer.get(i * 8..i * 8 + 8)?;
    let mut word = [0u8; 8];
    word.copy_from_slice(bytes);
    Some(u64::from_le_bytes(word))
}

/// Whether `buffer` holds the data of payload `index`: every word when `full`, else the
/// first and the last.
#[inline]
pub fn holds(index: u64, buffer: &[u8], full: bool) -> bool {
    let base = pattern(index);
    let words = buffer.len() / 8;
    if words == 0 {
        return false;
    }
    if full {
        buffer
            .chunks_exact(8)
            .enumerate()
            .all(|(i, bytes)| bytes == base.wrapping_add(i as u64).to_le_bytes())
    } else {
        word(buffer, 0) == Some(base)
            && word(buffer, words - 1) == Some(base.wrapping_add(words as u64 - 1))
    }
}

/// The value at quantile `q` (0..=1) of `sorted` (nearest rank); 0 for no samples.
pub fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted.get(rank).copied().unwrap_or(0)
}

/// p50 and p99 of `samples` (sorted here).
pub fn p50_p99(samples: &mut [u64]) -> (u64, u64) {
    samples.sort_unstable();
    (quantile(samples, 0.50), quantile(samples, 0.99))
}

/// memcpy bandwidth: the median over `reps` copies of a `bytes` buffer (after one untimed
/// copy that faults every page in), in bytes copied per second / 1e9. Each byte is read once
/// and written once.
pub fn memcpy_gbps(bytes: u64, reps: u32) -> anyhow::Result<f64> {
    // Bounded by `Plan::check` (--memcpy-mib: two buffers against the machine's memory).
    let length = usize::try_from(bytes)?;
    let source: Vec<u8> = (0..length).map(|i| i as u8).collect();
    let mut destination = vec![0u8; length];
    destination.copy_from_slice(&source);
    let mut rates = Vec::with_capacity(reps as usize);
    for _ in 0..reps {
        let started = Instant::now();
        destination.copy_from_slice(std::hint::black_box(&source));
        std::hint::black_box(&mut destination);
        let seconds = started.elapsed().as_secs_f64().max(1e-9);
        rates.push(bytes as f64 / seconds / 1e9);
    }
    if destination.get(length / 2) != source.get(length / 2) {
        anyhow::bail!("memcpy copied the wrong bytes");
    }
    rates.sort_by(f64::total_cmp);
    Ok(rates.get(rates.len() / 2).copied().unwrap_or(0.0))
}

/// The word the host bounces its counter on (line 0 of the page).
pub const PING_WORD: usize = 0;
/// The word the device answers on (line 1: 128 bytes further, so the two never share a line
/// or an adjacent-line prefetch pair).
pub const PONG_WORD: usize = 128 / 8;

const _: () = assert!(PONG_WORD * 8 - PING_WORD * 8 >= 128);

/// The host's side of the ping-pong: for each round, stores the round number in the ping
/// word (Release) and spins (Acquire) until the device stores it in the pong word. Returns
/// the round trips in ns (`rounds / 10` warm-up rounds left out).
pub fn pingpong_host(
    words: &[AtomicU64],
    rounds: u64,
    watch: &mut Watch<'_>,
) -> anyhow::Result<Vec<u64>> {
    let (ping, pong) = ping_pong_words(words)?;
    let warmup = rounds / 10;
    // Bounded by `Plan::check` (--pingpong-rounds against the machine's memory).
    let mut samples = Vec::with_capacity(usize::try_from(rounds)?);
    for round in 1..=rounds + warmup {
        let started = now_ns();
        ping.store(round, Ordering::Release);
        while pong.load(Ordering::Acquire) != round {
            watch.tick()?;
        }
        let ended = now_ns();
        if round > warmup {
            samples.push(ended.saturating_sub(started));
        }
    }
    Ok(samples)
}

/// The device's side of the ping-pong: answers every round in the pong word.
pub fn pingpong_device(
    words: &[AtomicU64],
    rounds: u64,
    watch: &mut Watch<'_>,
) -> anyhow::Result<()> {
    let (ping, pong) = ping_pong_words(words)?;
    for round in 1..=rounds + rounds / 10 {
        while ping.load(Ordering::Acquire) != round {
            watch.tick()?;
        }
        pong.store(round, Ordering::Release);
    }
    Ok(())
}

fn ping_pong_words(words: &[AtomicU64]) -> anyhow::Result<(&AtomicU64, &AtomicU64)> {
    match (words.get(PING_WORD), words.get(PONG_WORD)) {
        (Some(ping), Some(pong)) => Ok((ping, pong)),
        _ => anyhow::bail!("the ping-pong page has {} words", words.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_holds_its_own_pattern_and_not_its_neighbours() {
        let mut buffer = vec![0u8; 4096];
        fill(7, &mut buffer);
        assert!(holds(7, &buffer, true));
        assert!(holds(7, &buffer, false));
        assert!(!holds(8, &buffer, false));
        buffer[2048] ^= 1;
        assert!(!holds(7, &buffer, true));
        assert!(holds(7, &buffer, false));
        assert!(!holds(7, &[], true));
    }

    #[test]
    fn quantiles_by_nearest_rank() {
        let mut samples: Vec<u64> = (1..=100).rev().collect();
        let (p50, p99) = p50_p99(&mut samples);
        assert_eq!((p50, p99), (51, 99));
        assert_eq!(quantile(&[], 0.5), 0);
        assert_eq!(quantile(&[4], 0.99), 4);
    }

    #[test]
    fn the_clock_moves_forward() {
        let first = now_ns();
        let second = now_ns();
        assert!(first > 0 && second >= first);
    }

    #[test]
    fn memcpy_of_a_small_buffer_has_a_positive_rate() {
        assert!(memcpy_gbps(1 << 20, 3).unwrap() > 0.0);
    }
}
