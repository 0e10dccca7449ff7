//! DLRM data: the seeded embedding table, the Zipf-distributed bag batches and the top-MLP
//! weights. Everything comes from one seed through separate ChaCha8 streams, so each part can
//! be regenerated alone.
//!
//! # The embedding table
//!
//! Row `r`, element `e` is word `r * dim + e` of the ChaCha8 stream [`TABLE_STREAM`] of the
//! seed, mapped to `f32` by [`table_value`] (uniform in `[-1, 1)` on a 2^-23 grid, exact).
//! [`TableRows`] produces rows in order (loading the table) or seeks to any row (the
//! reference), so the host never holds the 1 GiB table: it streams it into device memory.
//!
//! # Batches
//!
//! Per bag: a length uniform in `[min_pooling, max_pooling]`, then that many lookups whose
//! popularity *rank* follows Zipf(`zipf_exponent`) over the table's rows; ranks map to rows
//! through a seeded permutation, so the hot rows are scattered over the table as in a real
//! hashed categorical feature rather than packed at its start. Stream [`BATCH_STREAM`].
//!
//! # Top MLP
//!
//! `dim -> 128 -> 64 -> 1`, weights and biases uniform in `[-1/sqrt(in), 1/sqrt(in))` (PyTorch's
//! default `nn.Linear` initialisation), stream [`WEIGHT_STREAM`].

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Zipf};

/// ChaCha stream of the table's values.
pub const TABLE_STREAM: u64 = 1;
/// ChaCha stream of the batches.
pub const BATCH_STREAM: u64 = 2;
/// ChaCha stream of the MLP weights.
pub const WEIGHT_STREAM: u64 = 3;

/// Widths of the top MLP's layers after its input (the pooled vector, `dim` wide).
pub const TOP_MLP_WIDTHS: [u32; 3] = [128, 64, 1];

/// The sizes of one DLRM instance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DlrmShape {
    /// Embedding table rows.
    pub rows: u32,
    /// Elements per row (a multiple of 8, the kernel's vector lanes).
    pub dim: u32,
    /// Batches (one launch each).
    pub batches: u32,
    /// Bags per batch.
    pub bags: u32,
    /// Fewest lookups in a bag.
    pub min_pooling: u32,
    /// Most lookups in a bag.
    pub max_pooling: u32,
    /// Zipf exponent of the lookups' popularity.
    pub zipf_exponent: f64,
}

/// Table IV (i): 2^20 rows of 256 `f32` (1 GiB); 2 batches of 512 bags of 64..=192 lookups
/// (mean 128), Zipf 1.05.
pub const PAPER: DlrmShape = DlrmShape {
    rows: 1 << 20,
    dim: 256,
    batches: 2,
    bags: 512,
    min_pooling: 64,
    max_pooling: 192,
    zipf_exponent: 1.05,
};

/// The test instance: 4096 rows of 256, 2 batches of 32 bags of 8..=24 lookups.
pub const SMALL: DlrmShape = DlrmShape {
    rows: 4096,
    dim: 256,
    batches: 2,
    bags: 32,
    min_pooling: 8,
    max_pooling: 24,
    zipf_exponent: 1.05,
};

impl DlrmShape {
    /// Bytes of the table: `rows * dim * 4`.
    pub fn table_bytes(&self) -> u64 {
        u64::from(self.rows) * u64::from(self.dim) * 4
    }

    /// Bytes of one pooled vector (one bag's result): `dim * 4`.
    pub fn pooled_bytes(&self) -> u64 {
        u64::from(self.dim) * 4
    }
}

/// The table value of a stream word: its top 24 bits `k` as `k * 2^-23 - 1`, uniform in
/// `[-1, 1)` and exact in `f32`.
pub fn table_value(word: u32) -> f32 {
    const SCALE: f32 = 1.0 / (1 << 23) as f32;
    (word >> 8) as f32 * SCALE - 1.0
}

/// The table's rows, generated in order or at any row.
#[derive(Clone, Debug)]
pub struct TableRows {
    rng: ChaCha8Rng,
    dim: u32,
}

impl TableRows {
    /// Positioned at row 0 of the table of `seed` with rows of `dim` elements.
    pub fn new(seed: u64, dim: u32) -> TableRows {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(TABLE_STREAM);
        TableRows { rng, dim }
    }

    /// Moves to row `row`.
    pub fn seek(&mut self, row: u32) {
        self.rng
            .set_word_pos(u128::from(row) * u128::from(self.dim));
    }

    /// Writes the next row's first `out.len()` elements into `out` and moves to the row after
    /// it (`out` should be `dim` long; a shorter one skips the rest of the row).
    pub fn next_row(&mut self, out: &mut [f32]) {
        for value in out.iter_mut() {
            *value = table_value(self.rng.next_u32());
        }
        let skipped = (self.dim as usize).saturating_sub(out.len());
        for _ in 0..skipped {
            self.rng.next_u32();
        }
    }

    /// Row `row`, `dim` elements.
    pub fn row(&mut self, row: u32) -> Vec<f32> {
        self.seek(row);
        let mut values = vec![0.0; self.dim as usize];
        self.next_row(&mut values);
        values
    }
}

/// One batch of bags in the kernel's layout: bag `b` looks up `indices[offsets[b]..offsets[b + 1]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    /// `bags + 1` offsets, starting at 0 and ending at `indices.len()`.
    pub offsets: Vec<u32>,
    /// Row indices.
    pub indices: Vec<u32>,
}

impl Batch {
    /// Bags in the batch.
    pub fn bags(&self) -> u32 {
        self.offsets.len().saturating_sub(1) as u32
    }

    /// Indices in the batch.
    pub fn index_count(&self) -> u32 {
        self.indices.len() as u32
    }

    /// The rows bag `bag` looks up, in order.
    pub fn bag(&self, bag: u32) -> &[u32] {
        let bag = bag as usize;
        match (self.offsets.get(bag), self.offsets.get(bag + 1)) {
            (Some(&start), Some(&end)) => self
                .indices
                .get(start as usize..end as usize)
                .unwrap_or(&[]),
            _ => &[],
        }
    }

    /// The batch as the kernel reads it: the offsets, then the indices, little-endian `u32`.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        self.offsets
            .iter()
            .chain(&self.indices)
            .flat_map(|word| word.to_le_bytes())
            .collect()
    }
}

/// The batches of `shape` for `seed`.
///
/// # Panics
///
/// If `shape` has no rows, `min_pooling > max_pooling`, or a negative Zipf exponent (the
/// catalog's shapes have none of these).
pub fn generate_batches(shape: &DlrmShape, seed: u64) -> Vec<Batch> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(BATCH_STREAM);
    // Rank -> row: a seeded Fisher-Yates permutation.
    let mut rows: Vec<u32> = (0..shape.rows).collect();
    for i in (1..rows.len()).rev() {
        let j = rng.gen_range(0..=i);
        rows.swap(i, j);
    }
    let zipf = Zipf::new(u64::from(shape.rows), shape.zipf_exponent)
        .expect("DLRM shapes have rows and a non-negative Zipf exponent");
    (0..shape.batches)
        .map(|_| {
            let mut offsets = Vec::with_capacity(shape.bags as usize + 1);
            let mut indices = Vec::new();
            offsets.push(0);
            for _ in 0..shape.bags {
                let length = rng.gen_range(shape.min_pooling..=shape.max_pooling);
                for _ in 0..length {
                    let sample: f64 = zipf.sample(&mut rng);
                    // Zipf samples are integers in [1, rows]; clamp against rounding.
                    let rank = (sample as usize).clamp(1, rows.len()) - 1;
                    indices.push(rows[rank]);
                }
                offsets.push(indices.len() as u32);
            }
            Batch { offsets, indices }
        })
        .collect()
}

/// One fully connected layer: `outputs x inputs` weights (row-major: `weights[o * inputs +
/// i]`) and `outputs` biases.
#[derive(Clone, Debug, PartialEq)]
pub struct Layer {
    /// Input width.
    pub inputs: u32,
    /// Output width.
    pub outputs: u32,
    /// Weights, output-major.
    pub weights: Vec<f32>,
    /// Biases.
    pub bias: Vec<f32>,
}

impl Layer {
    /// The weights of output `output`.
    pub fn row(&self, output: u32) -> &[f32] {
        let start = output as usize * self.inputs as usize;
        self.weights
            .get(start..start + self.inputs as usize)
            .unwrap_or(&[])
    }
}

/// The top MLP: ReLU after every layer but the last, a sigmoid after the last.
#[derive(Clone, Debug, PartialEq)]
pub struct TopMlp {
    /// Layers, input first.
    pub layers: Vec<Layer>,
}

impl TopMlp {
    /// Bytes of its parameters (4 per weight and bias).
    pub fn parameter_bytes(&self) -> u64 {
        self.layers
            .iter()
            .map(|layer| (layer.weights.len() + layer.bias.len()) as u64 * 4)
            .sum()
    }
}

/// The top MLP over pooled vectors of `dim` elements for `seed`.
pub fn generate_mlp(dim: u32, seed: u64) -> TopMlp {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(WEIGHT_STREAM);
    let mut inputs = dim;
    let layers = TOP_MLP_WIDTHS
        .iter()
        .map(|&outputs| {
            let bound = 1.0 / (inputs as f32).sqrt();
            let mut uniform = || rng.gen_range(-bound..bound);
            let weights = (0..inputs * outputs).map(|_| uniform()).collect();
            let bias = (0..outputs).map(|_| uniform()).collect();
            let layer = Layer {
                inputs,
                outputs,
                weights,
                bias,
            };
            inputs = outputs;
            layer
        })
        .collect();
    TopMlp { layers }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_values_are_exact_in_minus_one_to_one() {
        assert_eq!(table_value(0), -1.0);
        assert_eq!(table_value(0x8000_0000), 0.0);
        assert_eq!(table_value(u32::MAX), 1.0 - 1.0 / (1 << 23) as f32);
        assert_eq!(table_value(0x0000_0100), -1.0 + 1.0 / (1 << 23) as f32);
    }

    #[test]
    fn seeking_a_row_gives_the_sequential_row() {
        let mut sequential = TableRows::new(7, 32);
        let mut rows = vec![vec![0.0; 32]; 5];
        for row in &mut rows {
            sequential.next_row(row);
        }
        let mut seeking = TableRows::new(7, 32);
        for row in [3_u32, 0, 4, 1] {
            assert_eq!(seeking.row(row), rows[row as usize]);
        }
        // A shorter buffer skips the rest of its row.
        let mut partial = TableRows::new(7, 32);
        let mut head = [0.0; 8];
        partial.next_row(&mut head);
        assert_eq!(head[..], rows[0][..8]);
        let mut next = vec![0.0; 32];
        partial.next_row(&mut next);
        assert_eq!(next, rows[1]);
        // Another seed, another table.
        assert_ne!(TableRows::new(8, 32).row(0), rows[0]);
    }

    #[test]
    fn batches_have_the_shape_and_are_seed_deterministic() {
        let batches = generate_batches(&SMALL, 42);
        assert_eq!(batches.len(), 2);
        for batch in &batches {
            assert_eq!(batch.bags(), 32);
            assert_eq!(batch.offsets[0], 0);
            assert_eq!(*batch.offsets.last().unwrap(), batch.index_count());
            for bag in 0..32 {
                let length = batch.bag(bag).len() as u32;
                assert!((8..=24).contains(&length), "{length}");
            }
            assert!(batch.indices.iter().all(|&row| row < SMALL.rows));
            assert_eq!(batch.to_le_bytes().len(), 4 * (33 + batch.indices.len()));
        }
        assert_eq!(generate_batches(&SMALL, 42), batches);
        assert_ne!(generate_batches(&SMALL, 43), batches);
        assert_ne!(batches[0], batches[1]);
    }

    #[test]
    fn lookups_are_skewed_towards_a_few_hot_rows() {
        let shape = DlrmShape {
            batches: 1,
            bags: 200,
            ..SMALL
        };
        let batch = &generate_batches(&shape, 1)[0];
        let mut counts = std::collections::BTreeMap::new();
        for &row in &batch.indices {
            *counts.entry(row).or_insert(0_u32) += 1;
        }
        let mut sorted: Vec<u32> = counts.values().copied().collect();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let top: u32 = sorted.iter().take(10).sum();
        // Zipf 1.05 over 4096: the 10 hottest ranks carry about a third of the lookups.
        assert!(
            top as usize * 5 > batch.indices.len(),
            "{top} of {}",
            batch.indices.len()
        );
        // ... and they are not simply rows 0..10.
        assert!(counts.keys().any(|&row| row > 100));
    }

    #[test]
    fn batch_layout_round_trips() {
        let batch = Batch {
            offsets: vec![0, 2, 2, 3],
            indices: vec![5, 6, 7],
        };
        assert_eq!(batch.bag(0), [5, 6]);
        assert!(batch.bag(1).is_empty());
        assert_eq!(batch.bag(2), [7]);
        assert!(batch.bag(3).is_empty());
        assert_eq!(
            batch.to_le_bytes(),
            [0, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 7, 0, 0, 0]
        );
    }

    #[test]
    fn mlp_has_the_documented_widths_and_bounds() {
        let mlp = generate_mlp(256, 42);
        let widths: Vec<(u32, u32)> = mlp.layers.iter().map(|l| (l.inputs, l.outputs)).collect();
        assert_eq!(widths, [(256, 128), (128, 64), (64, 1)]);
        for layer in &mlp.layers {
            assert_eq!(layer.weights.len(), (layer.inputs * layer.outputs) as usize);
            assert_eq!(layer.bias.len(), layer.outputs as usize);
            let bound = 1.0 / (layer.inputs as f32).sqrt();
            assert!(layer.weights.iter().all(|w| w.abs() <= bound));
        }
        assert_eq!(
            mlp.parameter_bytes(),
            4 * (256 * 128 + 128 + 128 * 64 + 64 + 64 + 1)
        );
        assert_eq!(generate_mlp(256, 42), mlp);
        assert_ne!(generate_mlp(256, 41), mlp);
    }

    /// How long the paper table takes to generate (run with `--ignored --nocapture`).
    #[test]
    #[ignore = "timing only"]
    fn paper_table_generation_speed() {
        let start = std::time::Instant::now();
        let mut rows = TableRows::new(42, 256);
        let mut row = vec![0.0; 256];
        let mut checksum = 0.0_f32;
        for _ in 0..PAPER.rows {
            rows.next_row(&mut row);
            checksum += row[0];
        }
        println!("{} rows in {:?} ({checksum})", PAPER.rows, start.elapsed());
    }
}
