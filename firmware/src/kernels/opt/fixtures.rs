//! Test fixtures of the OPT kernel's tests: a small layer with every uneven case, its
//! plain-`f64` and composed-helper references, and helpers to load and run it.

use super::*;

pub(crate) type FakeMemory = crate::testing::FakeDeviceMemory;

pub(crate) const MEMORY: u64 = 1 << 20;

/// A small layer with every uneven case: hidden 128 = 4 heads of 32 (4 dimension
/// packets), capacity 72, position 69 (70 tokens: 9 token packets, the last of 6 tokens;
/// 2 softmax blocks, the last of one packet), the output projection's 2 column blocks in 3
/// parts (the last part empty).
pub(crate) const HIDDEN: u32 = 128;
pub(crate) const HEADS: u32 = 4;
pub(crate) const HEAD_DIM: u32 = 32;
pub(crate) const CAPACITY: u32 = 72;
pub(crate) const POSITION: u64 = 69;
pub(crate) const SPLIT: u32 = 3;

pub(crate) const PARAMETERS: u64 = 0x1000;
pub(crate) const INPUT: u64 = 0x1100;
pub(crate) const GAMMA: u64 = 0x1400;
pub(crate) const BETA: u64 = 0x1600;
pub(crate) const QKV_BIAS: u64 = 0x1800; // 384 x 4 B
pub(crate) const OUTPUT_BIAS: u64 = 0x2000;
pub(crate) const QKV_WEIGHT: u64 = 0x4000; // 384 x 128 x 4 B = 0x30000
pub(crate) const OUTPUT_WEIGHT: u64 = 0x34000; // 0x10000
pub(crate) const KEYS: u64 = 0x44000; // 4 x 72 x 32 x 4 B = 0x9000
pub(crate) const VALUES: u64 = 0x4D000;
pub(crate) const WORKSPACE: u64 = 0x56000; // 2560 elements, 0x2800
pub(crate) const RESULT: u64 = 0x5C000; // 512 B, past the largest workspace (split 16: 0x4200)

pub(crate) fn parameters() -> OptParameters {
    OptParameters {
        hidden: HIDDEN,
        heads: HEADS,
        head_dim: HEAD_DIM,
        capacity: CAPACITY,
        output_split: SPLIT,
        reserved: [0; 3],
        input: INPUT,
        ln_gamma: GAMMA,
        ln_beta: BETA,
        qkv_weight: QKV_WEIGHT,
        qkv_bias: QKV_BIAS,
        output_weight: OUTPUT_WEIGHT,
        output_bias: OUTPUT_BIAS,
        workspace: WORKSPACE,
    }
}

pub(crate) fn command() -> CommandDescriptor {
    CommandDescriptor {
        kernel: KernelId::OptAttention as u32,
        mode: 0,
        tag: 0,
        flags: 0,
        result_address: RESULT,
        result_length: u64::from(HIDDEN) * 4,
        args: [PARAMETERS, KEYS, VALUES, POSITION],
    }
}

pub(crate) fn value(seed: u32) -> f32 {
    ((seed.wrapping_mul(2_654_435_761) >> 20) % 64) as f32 / 32.0 - 1.0
}

pub(crate) fn floats(count: usize, seed: u32) -> Vec<f32> {
    (0..count as u32)
        .map(|j| value(j.wrapping_mul(7).wrapping_add(seed)))
        .collect()
}

pub(crate) fn put_floats(memory: &mut FakeMemory, address: u64, values: &[f32]) {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    memory.write(DeviceAddress(address), &bytes).unwrap();
}

pub(crate) fn get_floats(memory: &FakeMemory, address: u64, count: usize) -> Vec<f32> {
    let mut bytes = vec![0; count * 4];
    memory.read(DeviceAddress(address), &mut bytes).unwrap();
    bytes
        .chunks_exact(4)
        .map(|w| f32::from_le_bytes(w.try_into().unwrap()))
        .collect()
}

pub(crate) struct Layer {
    pub(crate) x: Vec<f32>,
    pub(crate) gamma: Vec<f32>,
    pub(crate) beta: Vec<f32>,
    pub(crate) qkv_weight: Vec<f32>,
    pub(crate) qkv_bias: Vec<f32>,
    pub(crate) output_weight: Vec<f32>,
    pub(crate) output_bias: Vec<f32>,
    pub(crate) keys: Vec<f32>,
    pub(crate) values: Vec<f32>,
}

pub(crate) fn layer() -> Layer {
    let h = HIDDEN as usize;
    let cache = (HEADS * CAPACITY * HEAD_DIM) as usize;
    let scaled = |v: Vec<f32>, s: f32| v.into_iter().map(|x| x * s).collect::<Vec<_>>();
    Layer {
        x: floats(h, 1),
        gamma: floats(h, 2).iter().map(|g| 1.0 + g / 8.0).collect(),
        beta: scaled(floats(h, 3), 0.1),
        qkv_weight: scaled(floats(3 * h * h, 4), 0.15),
        qkv_bias: scaled(floats(3 * h, 5), 0.1),
        output_weight: scaled(floats(h * h, 6), 0.15),
        output_bias: scaled(floats(h, 7), 0.1),
        keys: floats(cache, 8),
        values: floats(cache, 9),
    }
}

pub(crate) fn loaded(layer: &Layer) -> FakeMemory {
    let mut memory = FakeMemory::new(MEMORY as usize);
    memory.put(DeviceAddress(PARAMETERS), &parameters());
    put_floats(&mut memory, INPUT, &layer.x);
    put_floats(&mut memory, GAMMA, &layer.gamma);
    put_floats(&mut memory, BETA, &layer.beta);
    put_floats(&mut memory, QKV_WEIGHT, &layer.qkv_weight);
    put_floats(&mut memory, QKV_BIAS, &layer.qkv_bias);
    put_floats(&mut memory, OUTPUT_WEIGHT, &layer.output_weight);
    put_floats(&mut memory, OUTPUT_BIAS, &layer.output_bias);
    put_floats(&mut memory, KEYS, &layer.keys);
    put_floats(&mut memory, VALUES, &layer.values);
    memory
}

/// The layer in plain `f64`, sequential sums and one softmax over all tokens: the
/// attention block's output and the caches.
pub(crate) fn plain(layer: &Layer) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let h = HIDDEN as usize;
    let hd = HEAD_DIM as usize;
    let cap = CAPACITY as usize;
    let pos = POSITION as usize;
    let x: Vec<f64> = layer.x.iter().map(|v| f64::from(*v)).collect();
    let mean = x.iter().sum::<f64>() / h as f64;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / h as f64;
    let r = 1.0 / (var + 1e-5).sqrt();
    let n: Vec<f64> = (0..h)
        .map(|j| (x[j] - mean) * r * f64::from(layer.gamma[j]) + f64::from(layer.beta[j]))
        .collect();
    let qkv: Vec<f64> = (0..3 * h)
        .map(|row| {
            (0..h)
                .map(|j| f64::from(layer.qkv_weight[row * h + j]) * n[j])
                .sum::<f64>()
                + f64::from(layer.qkv_bias[row])
        })
        .collect();
    let mut keys: Vec<f64> = layer.keys.iter().map(|v| f64::from(*v)).collect();
    let mut values: Vec<f64> = layer.values.iter().map(|v| f64::from(*v)).collect();
    let mut attention = vec![0.0; h];
    for head in 0..HEADS as usize {
        for d in 0..hd {
            keys[(head * cap + pos) * hd + d] = qkv[h + head * hd + d];
            values[(head * cap + pos) * hd + d] = qkv[2 * h + head * hd + d];
        }
        let scores: Vec<f64> = (0..=pos)
            .map(|t| {
                (0..hd)
                    .map(|d| qkv[head * hd + d] * keys[(head * cap + t) * hd + d])
                    .sum::<f64>()
                    / (hd as f64).sqrt()
            })
            .collect();
        let max = scores.iter().cloned().fold(f64::MIN, f64::max);
        let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
        let sum: f64 = e.iter().sum();
        for d in 0..hd {
            attention[head * hd + d] = (0..=pos)
                .map(|t| e[t] * values[(head * cap + t) * hd + d])
                .sum::<f64>()
                / sum;
        }
    }
    let result = (0..h)
        .map(|row| {
            x[row]
                + (0..h)
                    .map(|j| f64::from(layer.output_weight[row * h + j]) * attention[j])
                    .sum::<f64>()
                + f64::from(layer.output_bias[row])
        })
        .collect();
    (result, keys, values)
}

/// The layer in `f32` with the kernel's public helpers composed in plain loops (what the
/// workload's reference does): the attention block's output.
pub(crate) fn composed(layer: &Layer) -> Vec<f32> {
    let h = HIDDEN as usize;
    let hd = HEAD_DIM as usize;
    let cap = CAPACITY as usize;
    let pos = POSITION as usize;
    let (mean, reciprocal) = layer_norm_moments(&layer.x);
    let n: Vec<f32> = (0..h)
        .map(|j| normalize(layer.x[j], mean, reciprocal, layer.gamma[j], layer.beta[j]))
        .collect();
    let qkv: Vec<f32> = (0..3 * h)
        .map(|row| {
            project(
                dot(&layer.qkv_weight[row * h..][..h], &n),
                layer.qkv_bias[row],
            )
        })
        .collect();
    let mut keys = layer.keys.clone();
    let mut values = layer.values.clone();
    let mut attention = vec![0.0_f32; h];
    for head in 0..HEADS as usize {
        let at = (head * cap + pos) * hd;
        keys[at..at + hd].copy_from_slice(&qkv[h + head * hd..][..hd]);
        values[at..at + hd].copy_from_slice(&qkv[2 * h + head * hd..][..hd]);
        let q = &qkv[head * hd..][..hd];
        let scores: Vec<f32> = (0..=pos)
            .map(|t| {
                score(
                    q,
                    &keys[(head * cap + t) * hd..][..hd],
                    attention_scale(HEAD_DIM),
                )
            })
            .collect();
        let (mut maxima, mut sums, mut partials) = (vec![], vec![], vec![]);
        for (b, block) in scores.chunks(64).enumerate() {
            let max = running_max(&block.chunks(8).map(running_max).collect::<Vec<_>>());
            let mut packet_sums = vec![];
            let mut partial = vec![0.0_f32; hd];
            for (p, packet) in block.chunks(8).enumerate() {
                let mut e = packet.to_vec();
                packet_sums.push(exponents(&mut e, max));
                let mut own = vec![0.0_f32; hd];
                for (i, weight) in e.iter().enumerate() {
                    let t = 64 * b + 8 * p + i;
                    accumulate_weighted(&mut own, *weight, &values[(head * cap + t) * hd..][..hd]);
                }
                add_into(&mut partial, &own);
            }
            maxima.push(max);
            sums.push(ordered_sum(&packet_sums));
            partials.push(partial);
        }
        let mut factors = vec![0.0_f32; maxima.len()];
        let reciprocal = block_factors(&maxima, &sums, &mut factors);
        let out = &mut attention[head * hd..][..hd];
        for (factor, partial) in factors.iter().zip(&partials) {
            accumulate_weighted(out, *factor, partial);
        }
        scale(out, reciprocal);
    }
    (0..h)
        .map(|row| {
            let parts: Vec<f32> = (0..SPLIT)
                .map(|part| {
                    split_dot(
                        &layer.output_weight[row * h..][..h],
                        &attention,
                        part,
                        SPLIT,
                    )
                })
                .collect();
            block_output(&parts, layer.output_bias[row], layer.x[row])
        })
        .collect()
}

pub(crate) fn run(memory: &mut FakeMemory) -> OptKernel {
    let kernel = OptKernel::decode(&command(), memory).unwrap();
    for stage in 0..kernel.stages() {
        for item in kernel.stage_items(stage) {
            kernel.execute(item, memory).unwrap();
        }
    }
    kernel
}

pub(crate) fn assert_close(got: &[f32], expected: &[f64], what: &str) {
    for (index, (g, e)) in got.iter().zip(expected).enumerate() {
        assert!(
            (f64::from(*g) - e).abs() <= 1e-4 * e.abs().max(1.0),
            "{what} {index}: {g} vs {e}"
        );
    }
}

/// The stage ranges of the test layer: 1, 128/8, 384/8, 4 heads x 9 token packets three
/// times, 4 heads x 2 blocks, 4 heads x 4 dimension packets, 3 parts x 16, 16.
pub(crate) const STAGE_RANGES: [Range<u32>; 10] = [
    0..1,
    1..17,
    17..65,
    65..101,
    101..137,
    137..173,
    173..181,
    181..197,
    197..245,
    245..261,
];
pub(crate) fn rejected(memory: &FakeMemory, command: &CommandDescriptor, status: FirmwareError) {
    assert_eq!(
        OptKernel::decode(command, memory),
        Err(status),
        "{command:?}"
    );
}
