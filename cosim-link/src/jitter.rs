//! Seeded random delays for the wall-clock stress runs.
//!
//! A [`Jitter`] answers "how much extra delay here?" from a [`JitterSpec`] (how often, how
//! much) and a seed: the same spec and seed give the same sequence of delays, so a failing
//! stress case can be named by its seed and rerun. Both sides draw from it: the emulator
//! (DMA landing times, its loop) and the host (its turns, its polls, its task completions).
//! Virtual-time runs never create one.
//!
//! The generator is SplitMix64: tiny, dependency-free, and good enough to spread delays; it is
//! not for anything that needs real randomness.

use shared_abi::Ticks;

/// How often and how much a stress point delays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JitterSpec {
    /// Draws out of 1000 that add a delay (0: never, 1000: always).
    pub per_mille: u32,
    /// Longest delay added, in nanoseconds (a delay is uniform in `[0, max_ns]`).
    pub max_ns: u64,
}

impl JitterSpec {
    /// Never delays.
    pub const NONE: JitterSpec = JitterSpec {
        per_mille: 0,
        max_ns: 0,
    };

    /// Delays `per_mille` draws out of 1000 by up to `max_ns`.
    pub const fn new(per_mille: u32, max_ns: u64) -> JitterSpec {
        JitterSpec { per_mille, max_ns }
    }

    /// Whether this spec can ever delay.
    pub const fn is_active(&self) -> bool {
        self.per_mille > 0 && self.max_ns > 0
    }
}

/// A seeded stream of delays.
#[derive(Clone, Debug)]
pub struct Jitter {
    spec: JitterSpec,
    state: u64,
}

impl Jitter {
    /// Delays per `spec`, from `seed`; `stream` separates the streams of one seed (each stress
    /// point takes its own, so adding draws at one point never shifts another's).
    pub fn new(spec: JitterSpec, seed: u64, stream: u64) -> Jitter {
        let mut jitter = Jitter {
            spec,
            state: seed ^ stream.wrapping_mul(0xa076_1d64_78bd_642f),
        };
        // Decorrelate neighbouring seeds.
        let _ = jitter.next_u64();
        jitter
    }

    /// The next raw 64-bit draw (SplitMix64).
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A draw uniform in `[0, bound)` (0 when `bound` is 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            return 0;
        }
        self.next_u64() % bound
    }

    /// The next extra delay, in nanoseconds (mostly 0, per the spec).
    pub fn next_ns(&mut self) -> u64 {
        if !self.spec.is_active() {
            return 0;
        }
        if self.below(1000) >= u64::from(self.spec.per_mille) {
            return 0;
        }
        self.below(self.spec.max_ns.saturating_add(1))
    }

    /// The next extra delay, in ticks.
    pub fn next_ticks(&mut self) -> Ticks {
        Ticks::from_ns(self.next_ns())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_delays_and_streams_differ() {
        let spec = JitterSpec::new(500, 1000);
        let draw = |seed, stream| {
            let mut jitter = Jitter::new(spec, seed, stream);
            (0..64).map(|_| jitter.next_ns()).collect::<Vec<_>>()
        };
        assert_eq!(draw(7, 1), draw(7, 1));
        assert_ne!(draw(7, 1), draw(7, 2));
        assert_ne!(draw(7, 1), draw(8, 1));
    }

    #[test]
    fn delays_stay_in_range_and_follow_the_rate() {
        let mut jitter = Jitter::new(JitterSpec::new(250, 100), 1, 0);
        let delays: Vec<u64> = (0..10_000).map(|_| jitter.next_ns()).collect();
        assert!(delays.iter().all(|&d| d <= 100));
        let delayed = delays.iter().filter(|&&d| d > 0).count();
        assert!(
            (2_000..3_000).contains(&delayed),
            "{delayed} of 10000 delayed"
        );
        let mut never = Jitter::new(JitterSpec::NONE, 1, 0);
        assert!((0..100).all(|_| never.next_ns() == 0));
    }
}
