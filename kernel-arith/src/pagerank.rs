//! The PageRank gather kernel's neighbour sum (`firmware::kernels::pagerank`).
//!
//! In-arc `k` of a vertex (`k = 0, 1, ...` from `offsets[v]`) goes to lane `k mod 8`; each lane
//! starts at `+0.0` and adds its contributions in increasing `k`, one rounded `f32` addition
//! each (the masked `vfadd.vv`: a masked-off lane keeps its value). The sum is then the
//! ordered reduction `((((+0.0 + lane[0]) + lane[1]) + ...) + lane[7])`. [`GatherSum`] is that
//! order.

use shared_abi::params::VECTOR_LANES;

/// The kernel's sum of one vertex's contributions, fed in in-arc order: in-arc `k` goes to lane
/// `k mod 8` (each lane a running `f32` sum from `+0.0`), and [`GatherSum::sum`] is the ordered
/// reduction of the lanes (see the module docs). Feeding the contributions in several batches
/// equals feeding them at once.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GatherSum {
    lanes: [f32; VECTOR_LANES],
    next: usize,
}

impl Default for GatherSum {
    fn default() -> Self {
        GatherSum::new()
    }
}

impl GatherSum {
    /// No contribution yet: every lane `+0.0`.
    pub const fn new() -> GatherSum {
        GatherSum {
            lanes: [0.0; VECTOR_LANES],
            next: 0,
        }
    }

    /// Adds the next in-arc's contribution to its lane.
    pub fn add(&mut self, contribution: f32) {
        if let Some(lane) = self.lanes.get_mut(self.next) {
            *lane += contribution;
        }
        self.next = match self.next.checked_add(1) {
            Some(next) if next < VECTOR_LANES => next,
            _ => 0,
        };
    }

    /// The ordered reduction `(((+0.0 + lane[0]) + lane[1]) + ...) + lane[7]` (`vfredosum.vs`
    /// with a zero start).
    pub fn sum(&self) -> f32 {
        self.lanes.iter().fold(0.0, |sum, lane| sum + *lane)
    }
}

/// The kernel's sum of `contributions`, in in-arc order (see [`GatherSum`]).
pub fn gather_sum(contributions: impl IntoIterator<Item = f32>) -> f32 {
    let mut sum = GatherSum::new();
    for contribution in contributions {
        sum.add(contribution);
    }
    sum.sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_sum_adds_lane_by_lane_then_reduces_in_lane_order() {
        // Lane 0 gets 1e8 and -1e8 (arcs 0 and 8), lane 1 gets 1.0 (arc 1): the lanes are
        // exact, 0 and 1, so the sum is 1. A running scalar sum would lose the 1.0 to 1e8 and
        // give 0.
        let mut values = [0.0_f32; 9];
        values[0] = 1.0e8;
        values[1] = 1.0;
        values[8] = -1.0e8;
        assert_eq!(gather_sum(values), 1.0);
        assert_eq!(values.iter().fold(0.0_f32, |s, v| s + v), 0.0);
        // The reduction adds the lanes in order, each addition rounded: lanes 1e8, 1, -1e8
        // (arcs 0, 1, 2) give ((1e8 + 1) - 1e8) = 0 in f32 (exactly, 1).
        assert_eq!(gather_sum([1.0e8, 1.0, -1.0e8]), 0.0);
        // Feeding in batches equals feeding at once, across the lane wrap.
        let many: Vec<f32> = (0..37).map(|k| 1.0 / (k as f32 + 3.0)).collect();
        let mut split = GatherSum::new();
        for value in &many[..13] {
            split.add(*value);
        }
        for value in &many[13..] {
            split.add(*value);
        }
        assert_eq!(
            split.sum().to_bits(),
            gather_sum(many.iter().copied()).to_bits()
        );
        // No contribution: +0.0.
        assert_eq!(gather_sum([]).to_bits(), 0);
    }
}
