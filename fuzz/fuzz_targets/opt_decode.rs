//! `Kernel::decode` of OPT attention commands (`firmware::kernels::opt`) against a device
//! memory holding a parameter block, the layer's weights, its KV caches and the workspace,
//! then a few items of every stage, stage by stage.
//!
//! Input (`arbitrary`): the shape of a small valid launch (heads and head size, cache capacity,
//! position, the three work splits, which read-only inputs share an array, a seed for the
//! weights, gaps between the arrays, the memory's slack) and up to four mutations of the
//! command or of the parameter block's fields. With no mutation the launch is valid.
//!
//! Checked, beyond "never panics":
//! - `Kernel::decode` (and `OptKernel::decode`) is `Ok` exactly when a model of the module
//!   docs' validation rules accepts, with the documented status otherwise;
//! - an accepted launch has four stages of the documented item counts, consecutive, and
//!   `item(items())` is refused;
//! - for the first, a middle and the last item of each stage, in stage order: stages 0 to 2
//!   are described with an empty result at offset 0, stage 3 items as their head's rows
//!   (`4 (h hidden + first_row)`, `4 rows`) inside the result space; every item executes with
//!   `Ok` and writes only what its stage may: stage 0 its rows of `q` in the workspace and of
//!   the key and value cache slot at `position`, stage 1 its head's scores of its tokens,
//!   stage 2 its 16 dimensions of the attention output, stage 3 its result bytes.
#![no_main]

use arbitrary::Arbitrary;
use axle_fuzz::kernel_check::{
    dword, execute_within, first_middle_last, memory_size, word, Bump, Mutation, Rng, Span,
    TweakContext, Watched, MAX_MUTATIONS,
};
use axle_fuzz::FakeDeviceMemory;
use firmware::kernels::opt::OptKernel;
use firmware::kernels::Kernel;
use libfuzzer_sys::fuzz_target;
use shared_abi::{CommandDescriptor, KernelId, Status};

/// `(heads, head_dim)` of the valid layouts: `hidden` at most 64, so the weights stay small.
const SHAPES: [(u32, u32); 8] = [
    (1, 16),
    (2, 16),
    (3, 16),
    (4, 16),
    (1, 32),
    (2, 32),
    (1, 48),
    (1, 64),
];

/// Bytes of the parameter block.
const PARAMETER_BYTES: u64 = 96;

#[derive(Arbitrary, Debug)]
struct Input {
    shape: u8,
    capacity: u8,
    position: u8,
    qkv_rows_per_item: u8,
    score_tokens_per_item: u8,
    output_rows_per_item: u8,
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
    heads: u64,
    head_dim: u64,
    capacity: u64,
    qkv_rows_per_item: u64,
    score_tokens_per_item: u64,
    output_rows_per_item: u64,
    position: u64,
    key_cache: u64,
    value_cache: u64,
    workspace: u64,
    stage_items: [u64; 4],
}

/// The module docs' validation rules, over a snapshot of device memory.
fn model(command: &CommandDescriptor, memory: &[u8]) -> Result<Model, Status> {
    if command.kernel != KernelId::OptAttention as u32 {
        return Err(Status::UnknownKernel);
    }
    if command.flags != 0 {
        return Err(Status::MalformedDescriptor);
    }
    let refuse = Err(Status::ArgumentOutOfRange);
    let size = memory.len() as u64;
    let [parameter_address, key_cache, value_cache, position] = command.args;
    let parameters = Span::new(parameter_address, u128::from(PARAMETER_BYTES));
    if !parameters.fits(8, size) {
        return refuse;
    }
    let base = u128::from(parameter_address);
    let small = |i: u128| u64::from(word(memory, base + 4 * i).expect("inside"));
    let address = |i: u128| dword(memory, base + 32 + 8 * i).expect("inside");
    let [hidden, heads, head_dim, capacity, qkv_rows, score_tokens, output_rows, reserved] =
        [0, 1, 2, 3, 4, 5, 6, 7].map(small);
    let [input, gamma, beta, qkv_weight, qkv_bias, output_weight, output_bias, workspace] =
        [0, 1, 2, 3, 4, 5, 6, 7].map(address);
    if [
        hidden,
        heads,
        head_dim,
        capacity,
        qkv_rows,
        score_tokens,
        output_rows,
    ]
    .contains(&0)
        || reserved != 0
        || head_dim % 16 != 0
        || head_dim > 256
        || hidden > 4096
        || heads * head_dim != hidden
        || capacity > 2048
        || position >= capacity
    {
        return refuse;
    }
    let h = u128::from(hidden);
    let result_bytes = u128::from(heads) * h * 4;
    if u128::from(command.result_length) != result_bytes {
        return refuse;
    }
    let cache_bytes = u128::from(heads) * u128::from(capacity) * u128::from(head_dim) * 4;
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
        Span::new(
            workspace,
            (2 * h + u128::from(heads) * u128::from(capacity)) * 4,
        ),
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
    let stage_items = [
        (3 * hidden).div_ceil(qkv_rows),
        heads * (position + 1).div_ceil(score_tokens),
        heads * (head_dim / 16),
        heads * hidden.div_ceil(output_rows),
    ];
    if stage_items.iter().sum::<u64>() > u64::from(u32::MAX) {
        return refuse;
    }
    Ok(Model {
        hidden,
        heads,
        head_dim,
        capacity,
        qkv_rows_per_item: qkv_rows,
        score_tokens_per_item: score_tokens,
        output_rows_per_item: output_rows,
        position,
        key_cache,
        value_cache,
        workspace,
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
    let capacity = 1 + u32::from(input.capacity % 40);
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
    let workspace = bump.take(4 * (2 * hidden + u64::from(heads * capacity)), 4, gap(10));
    let result_length = 4 * u64::from(heads) * hidden;
    let result = bump.take(result_length, 4, gap(11));
    let size = memory_size(bump.end(), input.slack);

    let mut memory = FakeDeviceMemory::new(size as usize);
    memory.fill(0, &vec![input.fill; size as usize]);
    // Weights, inputs and caches: small floats (the workspace and result keep the filler).
    let values: Vec<u8> = (input_address..workspace.min(size))
        .step_by(4)
        .flat_map(|_| (rng.below(2000) as f32 / 1000.0 - 1.0).to_le_bytes())
        .collect();
    memory.fill(input_address, &values);
    let parameters = Parameters {
        small: [
            hidden as u32,
            heads,
            head_dim,
            capacity,
            1 + u32::from(input.qkv_rows_per_item % 50),
            1 + u32::from(input.score_tokens_per_item % 20),
            1 + u32::from(input.output_rows_per_item % 20),
            0,
        ],
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

/// `[start, end)` of block `block` of `per_item` out of `total`.
fn block(block: u64, per_item: u64, total: u64) -> (u64, u64) {
    let start = block * per_item;
    (start, (start + per_item).min(total))
}

/// What local item `local` of stage `stage` may write, and its result range (stage 3).
fn allowed_writes(m: &Model, command: &CommandDescriptor, stage: u32, local: u64) -> Vec<Span> {
    let element = |base: u64, index: u64| Span::new(base + 4 * index, 4);
    let cache_slot = |base: u64, column: u64| {
        let (head, dim) = (column / m.head_dim, column % m.head_dim);
        element(base, (head * m.capacity + m.position) * m.head_dim + dim)
    };
    match stage {
        0 => {
            let (first, end) = block(local, m.qkv_rows_per_item, 3 * m.hidden);
            (first..end)
                .map(|row| match row / m.hidden {
                    0 => element(m.workspace, row),
                    1 => cache_slot(m.key_cache, row - m.hidden),
                    _ => cache_slot(m.value_cache, row - 2 * m.hidden),
                })
                .collect()
        }
        1 => {
            let blocks = (m.position + 1).div_ceil(m.score_tokens_per_item);
            let (head, local_block) = (local / blocks, local % blocks);
            let (first, end) = block(local_block, m.score_tokens_per_item, m.position + 1);
            let row = m.hidden + head * m.capacity;
            vec![Span::new(
                m.workspace + 4 * (row + first),
                4 * u128::from(end - first),
            )]
        }
        2 => {
            let blocks = m.head_dim / 16;
            let (head, first_dim) = (local / blocks, 16 * (local % blocks));
            let attention = m.hidden + m.heads * m.capacity;
            vec![Span::new(
                m.workspace + 4 * (attention + head * m.head_dim + first_dim),
                64,
            )]
        }
        _ => {
            let (head, row_block) = (local % m.heads, local / m.heads);
            let (first, end) = block(row_block, m.output_rows_per_item, m.hidden);
            vec![Span::new(
                command.result_address + 4 * (head * m.hidden + first),
                4 * u128::from(end - first),
            )]
        }
    }
}

/// Checks the stages and items of an accepted launch and runs a few items of each stage.
fn check_items(
    kernel: &Kernel,
    model: &Model,
    command: &CommandDescriptor,
    memory: FakeDeviceMemory,
) {
    assert_eq!(kernel.stages(), 4);
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
    assert!(kernel.stage_items(4).is_empty());
    assert_eq!(u64::from(kernel.items()), next);
    assert_eq!(
        kernel.item(kernel.items(), &memory),
        Err(Status::ArgumentOutOfRange)
    );
    let result = Span::new(command.result_address, u128::from(command.result_length));
    let mut memory = Watched::new(memory);
    for stage in 0..4 {
        let range = kernel.stage_items(stage);
        for index in first_middle_last(range.clone()) {
            let local = u64::from(index - range.start);
            let allowed = allowed_writes(model, command, stage, local);
            let item = kernel
                .item(index, &memory)
                .expect("an item of an accepted launch");
            if stage < 3 {
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
            let outcome = execute_within(&mut memory, &allowed, "opt item", |memory| {
                kernel.execute(index, memory)
            });
            assert_eq!(outcome, Ok(()), "item {index} (stage {stage})");
        }
    }
    assert_eq!(
        kernel.execute(kernel.items(), &mut memory),
        Err(Status::ArgumentOutOfRange)
    );
}

fuzz_target!(|input: Input| {
    let (mut memory, mut command, mut parameters, parameter_address, context) = build(&input);
    for mutation in input.mutations.iter().take(MAX_MUTATIONS) {
        mutate(mutation, &mut command, &mut parameters, &context);
    }
    memory.fill(parameter_address, &parameters.bytes());
    let expected = model(&command, memory.contents());
    let direct = OptKernel::decode(&command, &memory);
    match (&direct, &expected) {
        (Ok(_), Ok(_)) => {}
        (Err(got), Err(want)) => assert_eq!(got, want, "{command:?}"),
        _ => panic!("decoder {direct:?} but the docs' rules say {expected:?} for {command:?}"),
    }
    if command.kernel != KernelId::OptAttention as u32 {
        let _ = Kernel::decode(&command, &memory);
        return;
    }
    match (Kernel::decode(&command, &memory), expected) {
        (Ok(kernel), Ok(model)) => {
            assert_eq!(Kernel::Opt(direct.expect("accepted above")), kernel);
            check_items(&kernel, &model, &command, memory);
        }
        (Err(got), Err(want)) => assert_eq!(got, want),
        (got, want) => panic!("Kernel::decode {got:?} but the docs' rules say {want:?}"),
    }
});
