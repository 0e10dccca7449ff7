//! The KNN kernel's squared L2 distance (`firmware::kernels::knn`).
//!
//! The modelled µthread computes a distance with 8-lane (256-bit, M²NDP's `simd_width`) `f32`
//! vector instructions, and [`DistanceAccumulator`] reproduces that order exactly, in `f32`:
//!
//! 1. Element `j` of the vectors (counting from 0) belongs to lane `j % 8`.
//! 2. For `j = 0, 1, 2, ...` in increasing order: `d = a[j] - b[j]` (one `f32` subtraction,
//!    rounded), then `lane[j % 8] = fma(d, d, lane[j % 8])` (one fused multiply-add, rounded
//!    once, as a `vfmacc.vv` does). Every lane starts at `+0.0`.
//! 3. The ordered horizontal reduction (`vfredosum`): `s = +0.0`, then `s = s + lane[0]`,
//!    `s = s + lane[1]`, ..., `s = s + lane[7]`, each addition rounded in `f32`.
//!
//! Any other order (a plain sequential sum, `f64` accumulation) would differ in the last bits
//! and break exact verification.

/// Vector lanes of the modelled µthread ([`shared_abi::params::VECTOR_LANES`]).
pub const LANES: usize = shared_abi::params::VECTOR_LANES;

/// The running state of one squared L2 distance in the kernel's fixed summation order (see
/// the module docs): [`LANES`] lane partial sums and the lane the next element goes to. Feeding the
/// elements in several calls of [`DistanceAccumulator::add`] gives exactly the result of one
/// call with all of them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DistanceAccumulator {
    lanes: [f32; LANES],
    next_lane: usize,
}

impl Default for DistanceAccumulator {
    fn default() -> Self {
        Self::new()
    }
}

impl DistanceAccumulator {
    /// Every lane at `+0.0`, next element to lane 0.
    pub const fn new() -> Self {
        DistanceAccumulator {
            lanes: [0.0; LANES],
            next_lane: 0,
        }
    }

    /// Adds the next elements: pairs `(a[j], b[j])` for `j < min(a.len(), b.len())`.
    pub fn add(&mut self, a: &[f32], b: &[f32]) {
        for (x, y) in a.iter().zip(b) {
            let difference = x - y;
            if let Some(lane) = self.lanes.get_mut(self.next_lane) {
                *lane = libm::fmaf(difference, difference, *lane);
            }
            self.next_lane = self
                .next_lane
                .checked_add(1)
                .filter(|next| *next < LANES)
                .unwrap_or(0);
        }
    }

    /// The ordered horizontal reduction: `((0 + lane0) + lane1) + ... + lane7`.
    pub fn finish(&self) -> f32 {
        self.lanes.iter().fold(0.0_f32, |sum, lane| sum + lane)
    }
}

/// The squared L2 distance of `a` and `b` (over `min(a.len(), b.len())` elements) in the
/// kernel's exact arithmetic and order: the one function both the device kernel and the host
/// reference use, so their results are bit-identical.
pub fn squared_distance(a: &[f32], b: &[f32]) -> f32 {
    let mut accumulator = DistanceAccumulator::new();
    accumulator.add(a, b);
    accumulator.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squared_distance_follows_the_documented_lane_order() {
        // Values whose sum depends on the order: a large lane-0 term and small other terms.
        let a: Vec<f32> = (0..16)
            .map(|j| {
                if j % 8 == 0 {
                    4096.0
                } else {
                    0.000_123 * j as f32
                }
            })
            .collect();
        let b = vec![0.0_f32; 16];
        let mut lanes = [0.0_f32; 8];
        for (j, (x, y)) in a.iter().zip(&b).enumerate() {
            let d = x - y;
            lanes[j % 8] = d.mul_add(d, lanes[j % 8]);
        }
        let mut expected = 0.0_f32;
        for lane in lanes {
            expected += lane;
        }
        assert_eq!(squared_distance(&a, &b).to_bits(), expected.to_bits());
    }

    #[test]
    fn accumulator_split_feeding_equals_one_call() {
        let a: Vec<f32> = (0..75).map(|j| (j as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..75).map(|j| (j as f32 * 0.11).cos()).collect();
        let mut split = DistanceAccumulator::default();
        split.add(&a[..3], &b[..3]);
        split.add(&a[3..64], &b[3..64]);
        split.add(&a[64..], &b[64..]);
        assert_eq!(split.finish().to_bits(), squared_distance(&a, &b).to_bits());
    }
}
