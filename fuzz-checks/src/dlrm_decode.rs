//! `Kernel::decode` of DLRM sparse-length-sum commands (`firmware::kernels::dlrm`) against a
//! device memory holding an embedding table and a batch of bags, then a few of the launch's
//! items.
//!
//! Input (`arbitrary`): the shape of a small valid launch (rows, `dim`, bags and their lengths,
//! a seed for the bulk contents, gaps between the arrays, the memory's slack) and up to four
//! mutations of the command's fields or of words of the batch (offsets or indices). With no
//! mutation the launch is valid.
//!
//! Checked, beyond "never panics":
//! - `Kernel::decode` (and `DlrmKernel::decode`) is `Ok` exactly when a model of the module
//!   docs' validation rules accepts, with the documented status otherwise;
//! - an accepted launch has one item per 32-byte packet of each bag (`bags * dim / 8`), one
//!   stage; `item(items())` is refused;
//! - for the first, a middle and the last item `i` (packet `i mod (dim / 8)` of bag `b = i /
//!   (dim / 8)`): if bag `b`'s offsets are consistent, the item is described as the 32 bytes at
//!   `32 i` (inside the result space, inside bag `b`'s pooled vector) with the documented cost
//!   of the bag's length; if not, it is refused with `ArgumentOutOfRange` when described and
//!   executed, writing nothing; executing a consistent bag's item succeeds unless one of the
//!   bag's indices is `>= rows` (then `ArgumentOutOfRange`, writing nothing), and never writes
//!   outside the item's 32 bytes.

use crate::kernel_check::{
    assert_one_stage, execute_within, first_middle_last, memory_size, put_words, word, Bump,
    KernelTarget, Mutation, Rng, Span, TweakContext, Watched, MAX_MUTATIONS,
};
use crate::FakeDeviceMemory;
use arbitrary::Arbitrary;
use firmware::kernels::dlrm::{item_cost, DlrmKernel};
use firmware::kernels::Kernel;
use firmware::FirmwareError;
use shared_abi::{CommandDescriptor, KernelId};

#[derive(Arbitrary, Debug)]
struct Input {
    rows: u8,
    dim: u8,
    bags: u8,
    lengths: Vec<u8>,
    seed: u64,
    start: u16,
    gaps: [u8; 3],
    slack: i16,
    fill: u8,
    mutations: Vec<Mutation>,
}

/// Where the valid layout put the batch.
struct Layout {
    batch: u64,
    bags: u64,
    index_count: u64,
}

/// What the model knows of an accepted launch.
#[derive(Debug)]
struct Model {
    rows: u64,
    dim: u64,
    bags: u64,
    index_count: u64,
    batch: u64,
}

/// The module docs' validation rules, over a snapshot of device memory.
fn model(command: &CommandDescriptor, memory: &[u8]) -> Result<Model, FirmwareError> {
    if command.kernel != KernelId::DlrmSls as u32 {
        return Err(FirmwareError::UnknownKernel);
    }
    if command.flags != 0 {
        return Err(FirmwareError::MalformedDescriptor);
    }
    let refuse = Err(FirmwareError::ArgumentOutOfRange);
    let size = memory.len() as u64;
    let [table, shape, batch, counts] = command.args;
    let (rows, dim) = (shape & 0xFFFF_FFFF, shape >> 32);
    let (bags, index_count) = (counts & 0xFFFF_FFFF, counts >> 32);
    if rows == 0
        || dim == 0
        || bags == 0
        || dim % 8 != 0
        || 4 * dim > u64::from(u32::MAX)
        || bags * (dim / 8) > u64::from(u32::MAX)
    {
        return refuse;
    }
    let row_bytes = 4 * u128::from(dim);
    let table_span = Span::new(table, u128::from(rows) * row_bytes);
    let batch_span = Span::new(batch, 4 * u128::from(bags + 1 + index_count));
    let result = Span::new(command.result_address, u128::from(command.result_length));
    if !table_span.fits(4, size)
        || !batch_span.fits(4, size)
        || u128::from(command.result_length) != u128::from(bags) * row_bytes
        || !result.fits(4, size)
        || result.overlaps(&table_span)
        || result.overlaps(&batch_span)
    {
        return refuse;
    }
    let offset = |bag: u64| word(memory, u128::from(batch) + 4 * u128::from(bag)).expect("inside");
    if offset(0) != 0 || u64::from(offset(bags)) != index_count {
        return refuse;
    }
    Ok(Model {
        rows,
        dim,
        bags,
        index_count,
        batch,
    })
}

/// Builds the valid layout, the memory and the command the input describes.
fn build(input: &Input) -> (FakeDeviceMemory, CommandDescriptor, Layout, TweakContext) {
    let mut rng = Rng::new(input.seed);
    let rows = 1 + u64::from(input.rows % 48);
    let dim = 8 * (1 + u64::from(input.dim % 36));
    let bags = 1 + u64::from(input.bags % 40);
    let mut offsets = vec![0_u32];
    for bag in 0..bags as usize {
        let length = match input.lengths.get(bag) {
            Some(&l) if l >= 248 => 60 + u32::from(l - 248) * 4,
            Some(&l) => u32::from(l % 6),
            None => rng.below(4) as u32,
        };
        offsets.push(offsets.last().unwrap() + length);
    }
    let index_count = u64::from(*offsets.last().unwrap());
    let indices: Vec<u32> = (0..index_count).map(|_| rng.below(rows) as u32).collect();
    let table: Vec<u32> = (0..rows * dim)
        .map(|_| (rng.below(2000) as f32 / 1000.0 - 1.0).to_bits())
        .collect();

    let gap = |i: usize| u64::from(input.gaps[i]) * 4;
    let mut bump = Bump::new(u64::from(input.start) % 0x4000);
    let table_address = bump.take(4 * rows * dim, 4, gap(0));
    let batch_address = bump.take(4 * (bags + 1 + index_count), 4, gap(1));
    let result_address = bump.take(4 * bags * dim, 4, gap(2));
    let size = memory_size(bump.end(), input.slack);

    let mut memory = FakeDeviceMemory::new(size as usize);
    memory.fill(0, &vec![input.fill; size as usize]);
    put_words(&mut memory, table_address, &table);
    put_words(&mut memory, batch_address, &offsets);
    put_words(&mut memory, batch_address + 4 * (bags + 1), &indices);
    let command = CommandDescriptor {
        kernel: KernelId::DlrmSls as u32,
        mode: 0,
        tag: 0,
        flags: 0,
        result_address,
        result_length: 4 * bags * dim,
        args: [
            table_address,
            rows | dim << 32,
            batch_address,
            bags | index_count << 32,
        ],
    };
    let layout = Layout {
        batch: batch_address,
        bags,
        index_count,
    };
    let context = TweakContext {
        memory_size: size,
        addresses: vec![table_address, batch_address, result_address],
    };
    (memory, command, layout, context)
}

/// Applies one mutation: fields 0..9 of the command (packed halves separately), 9 and 10 a
/// word of the batch's offsets or indices, 11 the kernel id.
fn mutate(
    mutation: &Mutation,
    memory: &mut FakeDeviceMemory,
    command: &mut CommandDescriptor,
    layout: &Layout,
    context: &TweakContext,
) {
    let tweak = mutation.tweak;
    let low = |value: u64| value & 0xFFFF_FFFF;
    let set_half = |packed: &mut u64, high: bool| {
        let (old, keep) = if high {
            (*packed >> 32, low(*packed))
        } else {
            (low(*packed), *packed & !0xFFFF_FFFF)
        };
        let new = low(tweak.apply(old, context));
        *packed = keep | if high { new << 32 } else { new };
    };
    match mutation.field % 12 {
        0 => command.flags = tweak.apply32(command.flags, context),
        1 => command.result_address = tweak.apply(command.result_address, context),
        2 => command.result_length = tweak.apply(command.result_length, context),
        3 => command.args[0] = tweak.apply(command.args[0], context),
        4 => set_half(&mut command.args[1], false),
        5 => set_half(&mut command.args[1], true),
        6 => command.args[2] = tweak.apply(command.args[2], context),
        7 => set_half(&mut command.args[3], false),
        8 => set_half(&mut command.args[3], true),
        field @ 9..=10 => {
            let (first, length) = if field == 9 {
                (0, layout.bags + 1)
            } else {
                (layout.bags + 1, layout.index_count)
            };
            if length == 0 {
                return;
            }
            let address = layout.batch + 4 * (first + u64::from(mutation.index) % length);
            let old = word(&memory.contents(), u128::from(address)).unwrap_or(0);
            put_words(memory, address, &[tweak.apply32(old, context)]);
        }
        _ => command.kernel = tweak.apply32(command.kernel, context),
    }
}

/// Checks the items of an accepted launch and runs a few of them.
fn check_items(kernel: &Kernel, model: &Model, command: &CommandDescriptor, memory: &mut Watched) {
    let packets = model.dim / 8;
    assert_eq!(u64::from(kernel.items()), model.bags * packets);
    assert_one_stage(kernel);
    let result = Span::new(command.result_address, u128::from(command.result_length));
    let row_bytes = 4 * model.dim;
    for index in first_middle_last(0..kernel.items()) {
        let bag = u64::from(index) / packets;
        let snapshot = memory.contents().to_vec();
        let batch_word =
            |i: u64| word(&snapshot, u128::from(model.batch) + 4 * u128::from(i)).expect("inside");
        let (start, end) = (u64::from(batch_word(bag)), u64::from(batch_word(bag + 1)));
        let consistent = start <= end && end <= model.index_count;
        let span = Span::new(command.result_address + 32 * u64::from(index), 32);
        assert!(result.contains(&span));
        assert!(Span::new(
            command.result_address + bag * row_bytes,
            u128::from(row_bytes)
        )
        .contains(&span));
        let item = kernel.item(index, &*memory);
        let bad_index = consistent
            && (start..end).any(|p| u64::from(batch_word(model.bags + 1 + p)) >= model.rows);
        if consistent {
            let item = item.expect("a consistent bag");
            assert_eq!(item.result_offset, 32 * u64::from(index), "item {index}");
            assert_eq!(item.result_length, 32);
            assert_eq!(item.cost, item_cost((end - start) as u32), "item {index}");
        } else {
            assert_eq!(item, Err(FirmwareError::ArgumentOutOfRange), "item {index}");
        }
        let allowed: &[Span] = if !consistent || bad_index {
            &[]
        } else {
            &[span]
        };
        let outcome = execute_within(memory, allowed, "dlrm item", |memory| {
            kernel.execute(index, memory)
        });
        if consistent && !bad_index {
            assert_eq!(outcome, Ok(()), "item {index}");
        } else {
            assert_eq!(
                outcome,
                Err(FirmwareError::ArgumentOutOfRange),
                "item {index}"
            );
        }
    }
}

/// The valid layout `input` describes, with its mutations applied.
fn prepare(input: &Input) -> (FakeDeviceMemory, CommandDescriptor) {
    let (mut memory, mut command, layout, context) = build(input);
    for mutation in input.mutations.iter().take(MAX_MUTATIONS) {
        mutate(mutation, &mut memory, &mut command, &layout, &context);
    }
    (memory, command)
}

/// The check: panics exactly where the `dlrm_decode` fuzz target reports a finding.
pub fn check(data: &[u8]) {
    let target = KernelTarget {
        id: KernelId::DlrmSls,
        prepare,
        model,
        decode: |command, memory| DlrmKernel::decode(command, memory),
        wrap: Kernel::Dlrm,
        check_items,
    };
    crate::kernel_check::check(&target, data);
}
