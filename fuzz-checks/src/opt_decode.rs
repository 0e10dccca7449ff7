//! `Kernel::decode` of OPT attention commands (`firmware::kernels::opt`) against a device
//! memory holding a parameter block, the layer's weights, its KV caches and the workspace,
//! then a few items of every stage, stage by stage.
//!
//! Input (`arbitrary`): the shape of a small valid launch (heads and head size, cache capacity,
//! position, the output projection's split, which read-only inputs share an array, a seed for
//! the weights, gaps between the arrays, the memory's slack) and up to four mutations of the
//! command or of the parameter block's fields. With no mutation the launch is valid.
//!
//! Checked, beyond "never panics":
//! - `Kernel::decode` (and `OptKernel::decode`) is `Ok` exactly when a model of the module
//!   docs' validation rules accepts, with the documented status otherwise;
//! - an accepted launch has ten stages of the documented item counts (one item per 32-byte
//!   packet of each M²NDP kernel's base region), consecutive, and `item(items())` is refused;
//! - for the first, a middle and the last item of each stage, in stage order: stages 0 to 8
//!   are described with an empty result at offset 0, stage 9 items as their packet of the
//!   result (`32 p`, 32 bytes); every item executes with `Ok` and writes only what its stage
//!   may, in the workspace regions the docs lay out (its statistics, normalized packet, `q`
//!   rows, scores and packet max, exponents and packet sum, packet partial, block max, sum
//!   and partial, attention packet, part sums), the key and value cache slots at `position`
//!   (stage 2) and its result packet (stage 9).

use crate::kernel_check::{
    dword, execute_within, first_middle_last, memory_size, word, Bump, KernelTarget, Mutation, Rng,
    Span, TweakContext, Watched, MAX_MUTATIONS,
};
use crate::FakeDeviceMemory;
use arbitrary::Arbitrary;
use firmware::kernels::opt::OptKernel;
use firmware::kernels::Kernel;
use firmware::FirmwareError;
use shared_abi::{CommandDescriptor, KernelId};

/// `(heads, head_dim)` of the valid layouts: `hidden` at most 80 (two 64-column blocks of
/// the output projection, the second partial), so the memory stays small: every item
/// executed compares the whole memory with its copy from before the item, and the weights
/// grow as `hidden²` (128, the largest shape until the fuzz campaign, was one shape in
/// eight but its memory 46% of the bytes compared, averaged over the layouts).
const SHAPES: [(u32, u32); 8] = [
    (1, 8),
    (2, 8),
    (3, 16),
    (4, 16),
    (1, 24),
    (2, 32),
    (1, 64),
    (2, 40),
];

/// Bytes of the parameter block.
const PARAMETER_BYTES: u64 = 96;

/// Floats of the random tile repeated over the weights, inputs and caches.
const TILE_WORDS: usize = 1024;

#[derive(Arbitrary, Debug)]
struct Input {
    shape: u8,
    capacity: u8,
    position: u8,
    output_split: u8,
    aliases: u8,
    seed: u64,
    start: u16,
    gaps: [u8; 12],
    slack: i16,
    fill: u8,
    mutations: Vec<Mutation>,
}

/// The parameter block's fields, in order: eight `u32` then eight `u64`.
#[derive(Clone, Copy, Debug)]
struct Parameters {
    small: [u32; 8],
    addresses: [u64; 8],
}

impl Parameters {
    fn bytes(&self) -> Vec<u8> {
        let mut bytes: Vec<u8> = self.small.iter().flat_map(|v| v.to_le_bytes()).collect();
        bytes.extend(self.addresses.iter().flat_map(|v| v.to_le_bytes()));
        bytes
    }
}

/// What the model knows of an accepted launch.
#[derive(Debug)]
struct Model {
    hidden: u64,
    head_dim: u64,
    capacity: u64,
    split: u64,
    position: u64,
    key_cache: u64,
    value_cache: u64,
    workspace: Workspace,
    stage_items: [u64; 10],
}

/// The workspace's regions as the module docs lay them out: absolute byte addresses.
#[derive(Debug)]
struct Workspace {
    statistics: u64,
    normalized: u64,
    query: u64,
    scores: u64,
    packet_maxima: u64,
    packet_sums: u64,
    packet_partials: u64,
    block_maxima: u64,
    block_sums: u64,
    block_partials: u64,
    attention: u64,
    out_partials: u64,
}

/// The workspace's region sizes in elements, in order, for a shape (`u128`: no overflow).
fn workspace_regions(
    hidden: u64,
    heads: u64,
    head_dim: u64,
    capacity: u64,
    split: u64,
) -> [u128; 12] {
    let [h, n, d, c, s] = [hidden, heads, head_dim, capacity, split].map(u128::from);
    let packets = c.div_ceil(8);
    let blocks = packets.div_ceil(8);
    [
        8,
        h,
        h,
        n * c,
        n * packets,
        n * packets,
        n * packets * d,
        n * blocks,
        n * blocks,
        n * blocks * d,
        h,
        s * h,
    ]
}

/// The module docs' validation rules, over a snapshot of device memory.
fn model(command: &CommandDescriptor, memory: &[u8]) -> Result<Model, FirmwareError> {
    if command.kernel != KernelId::OptAttention as u32 {
        return Err(FirmwareError::UnknownKernel);
    }
    if command.flags != 0 {
        return Err(FirmwareError::MalformedDescriptor);
    }
    let refuse = Err(FirmwareError::ArgumentOutOfRange);
    let size = memory.len() as u64;
    let [parameter_address, key_cache, value_cache, position] = command.args;
    let parameters = Span::new(parameter_address, u128::from(PARAMETER_BYTES));
    if !parameters.fits(8, size) {
        return refuse;
    }
    let base = u128::from(parameter_address);
    let small = |i: u128| u64::from(word(memory, base + 4 * i).expect("inside"));
    let address = |i: u128| dword(memory, base + 32 + 8 * i).expect("inside");
    let [hidden, heads, head_dim, capacity, split, reserved0, reserved1, reserved2] =
        [0, 1, 2, 3, 4, 5, 6, 7].map(small);
    let [input, gamma, beta, qkv_weight, qkv_bias, output_weight, output_bias, workspace] =
        [0, 1, 2, 3, 4, 5, 6, 7].map(address);
    if [hidden, heads, head_dim, capacity, split].contains(&0)
        || split > 16
        || [reserved0, reserved1, reserved2] != [0, 0, 0]
        || head_dim % 8 != 0
        || head_dim > 256
        || hidden > 4096
        || heads * head_dim != hidden
        || capacity > 2048
        || position >= capacity
    {
        return refuse;
    }
    let h = u128::from(hidden);
    let result_bytes = h * 4;
    if u128::from(command.result_length) != result_bytes {
        return refuse;
    }
    let cache_bytes = u128::from(heads) * u128::from(capacity) * u128::from(head_dim) * 4;
    let regions = workspace_regions(hidden, heads, head_dim, capacity, split);
    let workspace_bytes = regions.iter().sum::<u128>() * 4;
    let read_only = [
        parameters,
        Span::new(input, 4 * h),
        Span::new(gamma, 4 * h),
        Span::new(beta, 4 * h),
        Span::new(qkv_weight, 3 * h * h * 4),
        Span::new(qkv_bias, 3 * h * 4),
        Span::new(output_weight, h * h * 4),
        Span::new(output_bias, 4 * h),
    ];
    let written = [
        Span::new(key_cache, cache_bytes),
        Span::new(value_cache, cache_bytes),
        Span::new(workspace, workspace_bytes),
        Span::new(command.result_address, result_bytes),
    ];
    if read_only[1..]
        .iter()
        .chain(&written)
        .any(|s| !s.fits(4, size))
    {
        return refuse;
    }
    for (i, target) in written.iter().enumerate() {
        if read_only
            .iter()
            .chain(&written[i + 1..])
            .any(|s| s.overlaps(target))
        {
            return refuse;
        }
    }
    let token_packets = (position + 1).div_ceil(8);
    let blocks = token_packets.div_ceil(8);
    let stage_items = [
        1,
        hidden / 8,
        3 * hidden / 8,
        heads * token_packets,
        heads * token_packets,
        heads * token_packets,
        heads * blocks,
        heads * head_dim / 8,
        split * hidden / 8,
        hidden / 8,
    ];
    if stage_items.iter().sum::<u64>() > u64::from(u32::MAX) {
        return refuse;
    }
    let mut starts = [0_u64; 12];
    let mut next = workspace;
    for (start, elements) in starts.iter_mut().zip(regions) {
        *start = next;
        next += 4 * elements as u64;
    }
    let [statistics, normalized, query, scores, packet_maxima, packet_sums, packet_partials, block_maxima, block_sums, block_partials, attention, out_partials] =
        starts;
    Ok(Model {
        hidden,
        head_dim,
        capacity,
        split,
        position,
        key_cache,
        value_cache,
        workspace: Workspace {
            statistics,
            normalized,
            query,
            scores,
            packet_maxima,
            packet_sums,
            packet_partials,
            block_maxima,
            block_sums,
            block_partials,
            attention,
            out_partials,
        },
        stage_items,
    })
}

/// Builds the valid layout, the memory, the command and the parameter block (written by the
/// caller after the mutations) the input describes; returns the block's address too.
fn build(
    input: &Input,
) -> (
    FakeDeviceMemory,
    CommandDescriptor,
    Parameters,
    u64,
    TweakContext,
) {
    let mut rng = Rng::new(input.seed);
    let (heads, head_dim) = SHAPES[usize::from(input.shape) % SHAPES.len()];
    let hidden = u64::from(heads * head_dim);
    let capacity = 1 + u32::from(input.capacity % 80);
    let position = u64::from(u32::from(input.position) % capacity);

    let gap = |i: usize| u64::from(input.gaps[i]) * 4;
    let mut bump = Bump::new(u64::from(input.start) % 0x4000);
    let parameter_address = bump.take(PARAMETER_BYTES, 8, gap(0));
    let input_address = bump.take(4 * hidden, 4, gap(1));
    let gamma = if input.aliases & 1 != 0 {
        input_address
    } else {
        bump.take(4 * hidden, 4, gap(2))
    };
    let beta = if input.aliases & 2 != 0 {
        gamma
    } else {
        bump.take(4 * hidden, 4, gap(3))
    };
    let qkv_weight = bump.take(12 * hidden * hidden, 4, gap(4));
    let qkv_bias = bump.take(12 * hidden, 4, gap(5));
    let output_weight = bump.take(4 * hidden * hidden, 4, gap(6));
    let output_bias = if input.aliases & 4 != 0 {
        qkv_bias
    } else {
        bump.take(4 * hidden, 4, gap(7))
    };
    let cache = 4 * u64::from(heads) * u64::from(capacity) * u64::from(head_dim);
    let key_cache = bump.take(cache, 4, gap(8));
    let value_cache = bump.take(cache, 4, gap(9));
    let split = 1 + u32::from(input.output_split % 5);
    let regions = workspace_regions(
        hidden,
        u64::from(heads),
        u64::from(head_dim),
        u64::from(capacity),
        u64::from(split),
    );
    let workspace = bump.take(4 * regions.iter().sum::<u128>() as u64, 4, gap(10));
    let result_length = 4 * hidden;
    let result = bump.take(result_length, 4, gap(11));
    let size = memory_size(bump.end(), input.slack);

    let mut memory = FakeDeviceMemory::new(size as usize);
    memory.fill(0, &vec![input.fill; size as usize]);
    // Weights, inputs and caches: small floats (the workspace and result keep the filler),
    // a tile of `TILE_WORDS` random ones repeated (copies, not a generator call per word:
    // the per-word loop was most of this target's time under the fuzzer's instrumentation;
    // no check depends on the values beyond their being small finite floats, and a row of
    // any shape here, at most 80 floats, still holds distinct values).
    let tile: Vec<u8> = (0..TILE_WORDS)
        .flat_map(|_| (rng.below(2000) as f32 / 1000.0 - 1.0).to_le_bytes())
        .collect();
    let length = usize::try_from(workspace.min(size).saturating_sub(input_address))
        .expect("a memory this target builds");
    let mut values = Vec::with_capacity(length.next_multiple_of(tile.len()));
    while values.len() < length {
        values.extend_from_slice(&tile);
    }
    values.truncate(length);
    memory.fill(input_address, &values);
    let parameters = Parameters {
        small: [hidden as u32, heads, head_dim, capacity, split, 0, 0, 0],
        addresses: [
            input_address,
            gamma,
            beta,
            qkv_weight,
            qkv_bias,
            output_weight,
            output_bias,
            workspace,
        ],
    };
    let command = CommandDescriptor {
        kernel: KernelId::OptAttention as u32,
        mode: 0,
        tag: 0,
        flags: 0,
        result_address: result,
        result_length,
        args: [parameter_address, key_cache, value_cache, position],
    };
    let context = TweakContext {
        memory_size: size,
        addresses: vec![
            parameter_address,
            input_address,
            qkv_weight,
            qkv_bias,
            output_weight,
            key_cache,
            value_cache,
            workspace,
            result,
        ],
    };
    (memory, command, parameters, parameter_address, context)
}

/// Applies one mutation: fields 0..7 of the command, 7..23 of the parameter block, 23 the
/// kernel id.
fn mutate(
    mutation: &Mutation,
    command: &mut CommandDescriptor,
    parameters: &mut Parameters,
    context: &TweakContext,
) {
    let tweak = mutation.tweak;
    match mutation.field % 24 {
        0 => command.flags = tweak.apply32(command.flags, context),
        1 => command.result_address = tweak.apply(command.result_address, context),
        2 => command.result_length = tweak.apply(command.result_length, context),
        field @ 3..=6 => {
            let arg = &mut command.args[usize::from(field - 3)];
            *arg = tweak.apply(*arg, context);
        }
        field @ 7..=14 => {
            let value = &mut parameters.small[usize::from(field - 7)];
            *value = tweak.apply32(*value, context);
        }
        field @ 15..=22 => {
            let value = &mut parameters.addresses[usize::from(field - 15)];
            *value = tweak.apply(*value, context);
        }
        _ => command.kernel = tweak.apply32(command.kernel, context),
    }
}

/// What local item `local` of stage `stage` may write (for stage 9, its result packet only).
fn allowed_writes(m: &Model, command: &CommandDescriptor, stage: u32, local: u64) -> Vec<Span> {
    let w = &m.workspace;
    let span = |base: u64, index: u64, elements: u64| {
        Span::new(base + 4 * index, 4 * u128::from(elements))
    };
    let capacity_packets = m.capacity.div_ceil(8);
    let capacity_blocks = capacity_packets.div_ceil(8);
    let token_packets = (m.position + 1).div_ceil(8);
    let blocks = token_packets.div_ceil(8);
    let tokens_of = |packet: u64| (8 * packet, (8 * packet + 8).min(m.position + 1));
    match stage {
        0 => vec![span(w.statistics, 0, 2)],
        1 => vec![span(w.normalized, 8 * local, 8)],
        2 => {
            let row = 8 * local;
            let slot = |base: u64, column: u64| {
                let (head, dim) = (column / m.head_dim, column % m.head_dim);
                span(base, (head * m.capacity + m.position) * m.head_dim + dim, 8)
            };
            vec![match row / m.hidden {
                0 => span(w.query, row, 8),
                1 => slot(m.key_cache, row - m.hidden),
                _ => slot(m.value_cache, row - 2 * m.hidden),
            }]
        }
        3..=5 => {
            let (head, packet) = (local / token_packets, local % token_packets);
            let (first, end) = tokens_of(packet);
            match stage {
                3 => vec![
                    span(w.scores, head * m.capacity + first, end - first),
                    span(w.packet_maxima, head * capacity_packets + packet, 1),
                ],
                4 => vec![
                    span(w.scores, head * m.capacity + first, end - first),
                    span(w.packet_sums, head * capacity_packets + packet, 1),
                ],
                _ => vec![span(
                    w.packet_partials,
                    (head * capacity_packets + packet) * m.head_dim,
                    m.head_dim,
                )],
            }
        }
        6 => {
            let (head, block) = (local / blocks, local % blocks);
            let index = head * capacity_blocks + block;
            vec![
                span(w.block_maxima, index, 1),
                span(w.block_sums, index, 1),
                span(w.block_partials, index * m.head_dim, m.head_dim),
            ]
        }
        7 => {
            let packets = m.head_dim / 8;
            let (head, packet) = (local / packets, local % packets);
            vec![span(w.attention, head * m.head_dim + 8 * packet, 8)]
        }
        8 => {
            let (packet, part) = (local / m.split, local % m.split);
            vec![span(w.out_partials, part * m.hidden + 8 * packet, 8)]
        }
        _ => vec![Span::new(command.result_address + 32 * local, 32)],
    }
}

/// Checks the stages and items of an accepted launch and runs a few items of each stage.
fn check_items(kernel: &Kernel, model: &Model, command: &CommandDescriptor, memory: &mut Watched) {
    assert_eq!(kernel.stages(), 10);
    let mut next = 0_u64;
    for (stage, items) in (0_u32..).zip(model.stage_items) {
        let range = kernel.stage_items(stage);
        assert_eq!(
            (u64::from(range.start), u64::from(range.end)),
            (next, next + items),
            "stage {stage}"
        );
        next += items;
    }
    assert_eq!(u64::from(kernel.items()), next);
    let result = Span::new(command.result_address, u128::from(command.result_length));
    for stage in 0..10 {
        let range = kernel.stage_items(stage);
        for index in first_middle_last(range.clone()) {
            let local = u64::from(index - range.start);
            let allowed = allowed_writes(model, command, stage, local);
            let item = kernel
                .item(index, &*memory)
                .expect("an item of an accepted launch");
            if stage < 9 {
                assert_eq!(
                    (item.result_offset, item.result_length),
                    (0, 0),
                    "item {index}"
                );
            } else {
                let span = Span::new(
                    command.result_address + item.result_offset,
                    u128::from(item.result_length),
                );
                assert_eq!(span, allowed[0], "item {index}");
                assert!(result.contains(&span), "item {index} outside the result");
            }
            let outcome = execute_within(memory, &allowed, "opt item", |memory| {
                kernel.execute(index, memory)
            });
            assert_eq!(outcome, Ok(()), "item {index} (stage {stage})");
        }
    }
}

/// The valid layout `input` describes, with its mutations applied.
fn prepare(input: &Input) -> (FakeDeviceMemory, CommandDescriptor) {
    let (mut memory, mut command, mut parameters, parameter_address, context) = build(input);
    for mutation in input.mutations.iter().take(MAX_MUTATIONS) {
        mutate(mutation, &mut command, &mut parameters, &context);
    }
    memory.fill(parameter_address, &parameters.bytes());
    (memory, command)
}

/// The check: panics exactly where the `opt_decode` fuzz target reports a finding.
pub fn check(data: &[u8]) {
    let target = KernelTarget {
        id: KernelId::OptAttention,
        prepare,
        model,
        decode: |command, memory| OptKernel::decode(command, memory),
        wrap: Kernel::Opt,
        check_items,
    };
    crate::kernel_check::check(&target, data);
}
