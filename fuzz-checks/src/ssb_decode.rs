//! `Kernel::decode` of SSB filter commands (`firmware::kernels::ssb`) against a device memory
//! holding the two filter columns, then a few of the launch's items.
//!
//! Input (`arbitrary`): the shape of a small valid launch (rows, rows per item, the predicate,
//! whether the two columns share one array, a seed for the column values, gaps between the
//! arrays, the memory's slack) and up to four mutations of the command's fields. With no
//! mutation the launch is valid.
//!
//! Checked, beyond "never panics":
//! - `Kernel::decode` (and `SsbKernel::decode`) is `Ok` exactly when a model of the module
//!   docs' validation rules accepts, with the documented status otherwise;
//! - an accepted launch has `ceil(rows / rows_per_item)` items, one stage; `item(items())` is
//!   refused; the first, a middle and the last item are described as the bytes of their rows
//!   (offset `i rows_per_item / 8`, `ceil(rows_in_item / 8)` bytes), inside the result space,
//!   with the cost of one 23-instruction µthread body and 65 bytes per 8-row packet;
//! - executing those items succeeds, writes nothing outside the item's bytes, and the bytes
//!   are the documented bitmap of the item's rows (bits past `rows` zero).

use crate::kernel_check::{
    assert_one_stage, execute_within, first_middle_last, memory_size, put_words, word, Bump,
    KernelTarget, Mutation, Rng, Span, TweakContext, Watched, MAX_MUTATIONS,
};
use crate::FakeDeviceMemory;
use arbitrary::Arbitrary;
use firmware::kernels::ssb::SsbKernel;
use firmware::kernels::{ItemCost, Kernel};
use firmware::FirmwareError;
use shared_abi::{CommandDescriptor, KernelId};

#[derive(Arbitrary, Debug)]
struct Input {
    rows: u16,
    rows_per_item: u8,
    bounds: [u8; 4],
    shared_column: bool,
    seed: u64,
    start: u16,
    gaps: [u8; 3],
    slack: i16,
    fill: u8,
    mutations: Vec<Mutation>,
}

/// What the model knows of an accepted launch.
#[derive(Debug)]
struct Model {
    quantity: u64,
    discount: u64,
    rows: u64,
    rows_per_item: u64,
    bounds: [u32; 4],
}

/// The module docs' validation rules against a device memory of `size` bytes.
fn model(command: &CommandDescriptor, size: u64) -> Result<Model, FirmwareError> {
    if command.kernel != KernelId::SsbFilter as u32 {
        return Err(FirmwareError::UnknownKernel);
    }
    if command.flags != 0 {
        return Err(FirmwareError::MalformedDescriptor);
    }
    let refuse = Err(FirmwareError::ArgumentOutOfRange);
    let [quantity, discount, shape, bounds] = command.args;
    let rows = shape & 0xFFFF_FFFF;
    let rows_per_item = shape >> 32;
    if rows == 0 || rows_per_item == 0 || rows_per_item % 8 != 0 {
        return refuse;
    }
    if command.result_length != rows.div_ceil(8) {
        return refuse;
    }
    let columns = [
        Span::new(quantity, 4 * u128::from(rows)),
        Span::new(discount, 4 * u128::from(rows)),
    ];
    let result = Span::new(command.result_address, u128::from(command.result_length));
    if columns
        .iter()
        .any(|c| !c.fits(4, size) || c.overlaps(&result))
        || !result.fits(1, size)
    {
        return refuse;
    }
    let bound = |i: u32| ((bounds >> (16 * i)) & 0xFFFF) as u32;
    Ok(Model {
        quantity,
        discount,
        rows,
        rows_per_item,
        bounds: [bound(0), bound(1), bound(2), bound(3)],
    })
}

/// Builds the valid layout, the memory and the command the input describes.
fn build(input: &Input) -> (FakeDeviceMemory, CommandDescriptor, TweakContext) {
    let mut rng = Rng::new(input.seed);
    let rows = 1 + u64::from(input.rows % 3000);
    let rows_per_item = 8 * (1 + u64::from(input.rows_per_item % 64));
    let mut column = || -> Vec<u32> {
        (0..rows)
            .map(|_| match rng.below(16) {
                0 => rng.next_u64() as u32,
                1 => 0x1_0000 + rng.below(4) as u32,
                _ => rng.below(64) as u32,
            })
            .collect()
    };
    let quantities = column();
    let discounts = column();
    let gap = |i: usize| u64::from(input.gaps[i]) * 4;
    let mut bump = Bump::new(u64::from(input.start) % 0x4000);
    let quantity = bump.take(4 * rows, 4, gap(0));
    let discount = if input.shared_column {
        quantity
    } else {
        bump.take(4 * rows, 4, gap(1))
    };
    let result_length = rows.div_ceil(8);
    let result = bump.take(result_length, 1, u64::from(input.gaps[2]));
    let size = memory_size(bump.end(), input.slack);

    let mut memory = FakeDeviceMemory::new(size as usize);
    memory.fill(0, &vec![input.fill; size as usize]);
    put_words(&mut memory, quantity, &quantities);
    if discount != quantity {
        put_words(&mut memory, discount, &discounts);
    }
    let [a, b, c, d] = input.bounds.map(|x| u64::from(x % 72));
    let command = CommandDescriptor {
        kernel: KernelId::SsbFilter as u32,
        mode: 0,
        tag: 0,
        flags: 0,
        result_address: result,
        result_length,
        args: [
            quantity,
            discount,
            rows | rows_per_item << 32,
            a | b << 16 | c << 32 | d << 48,
        ],
    };
    let context = TweakContext {
        memory_size: size,
        addresses: vec![quantity, discount, result],
    };
    (memory, command, context)
}

/// Applies one mutation: fields 0..9 of the command (the shape's two halves separately).
fn mutate(mutation: &Mutation, command: &mut CommandDescriptor, context: &TweakContext) {
    let tweak = mutation.tweak;
    let low = |value: u64| value & 0xFFFF_FFFF;
    match mutation.field % 9 {
        0 => command.flags = tweak.apply32(command.flags, context),
        1 => command.result_address = tweak.apply(command.result_address, context),
        2 => command.result_length = tweak.apply(command.result_length, context),
        3 => command.args[0] = tweak.apply(command.args[0], context),
        4 => command.args[1] = tweak.apply(command.args[1], context),
        5 => {
            let rows = tweak.apply(low(command.args[2]), context);
            command.args[2] = command.args[2] & !0xFFFF_FFFF | low(rows);
        }
        6 => {
            let per_item = tweak.apply(command.args[2] >> 32, context);
            command.args[2] = low(command.args[2]) | per_item << 32;
        }
        7 => command.args[3] = tweak.apply(command.args[3], context),
        _ => command.kernel = tweak.apply32(command.kernel, context),
    }
}

/// The documented bitmap bytes of rows `first..end` (`first` a multiple of 8).
fn expected_bytes(model: &Model, memory: &[u8], first: u64, end: u64) -> Vec<u8> {
    let [q_low, q_high, d_low, d_high] = model.bounds;
    let mut bytes = vec![0_u8; (end - first).div_ceil(8) as usize];
    for row in first..end {
        let value = |column: u64| word(memory, u128::from(column) + 4 * u128::from(row)).unwrap();
        let (q, d) = (value(model.quantity), value(model.discount));
        if q_low <= q && q <= q_high && d_low <= d && d <= d_high {
            bytes[((row - first) / 8) as usize] |= 1 << ((row - first) % 8);
        }
    }
    bytes
}

/// The documented cost of an item of `rows` rows: per 8-row packet, 6 scalar, 7 scalar
/// memory, 8 vector and 2 vector memory instructions and 65 bytes.
fn expected_cost(rows: u64) -> ItemCost {
    let packets = rows.div_ceil(8);
    ItemCost {
        scalar: 6 * packets,
        scalar_memory: 7 * packets,
        vector: 8 * packets,
        vector_memory: 2 * packets,
        indexed_extra_cycles: 0,
        bytes: 65 * packets,
    }
}

/// Checks the items of an accepted launch and runs a few of them.
fn check_items(kernel: &Kernel, model: &Model, command: &CommandDescriptor, memory: &mut Watched) {
    assert_eq!(
        u64::from(kernel.items()),
        model.rows.div_ceil(model.rows_per_item)
    );
    assert_one_stage(kernel);
    let result = Span::new(command.result_address, u128::from(command.result_length));
    for index in first_middle_last(0..kernel.items()) {
        let first = u64::from(index) * model.rows_per_item;
        let end = (first + model.rows_per_item).min(model.rows);
        let item = kernel
            .item(index, &*memory)
            .expect("an item of an accepted launch");
        assert_eq!(item.result_offset, first / 8, "item {index}");
        assert_eq!(u64::from(item.result_length), (end - first).div_ceil(8));
        assert_eq!(item.cost, expected_cost(end - first), "item {index}: cost");
        let span = Span::new(
            command.result_address + item.result_offset,
            u128::from(item.result_length),
        );
        assert!(result.contains(&span), "item {index} outside the result");
        let expected = expected_bytes(model, &memory.contents(), first, end);
        let outcome = execute_within(memory, &[span], "ssb item", |memory| {
            kernel.execute(index, memory)
        });
        assert_eq!(outcome, Ok(()), "item {index}");
        let start = span.start as usize;
        assert_eq!(
            &memory.contents()[start..start + expected.len()],
            &expected[..],
            "item {index}: bitmap"
        );
    }
}

/// The valid layout `input` describes, with its mutations applied.
fn prepare(input: &Input) -> (FakeDeviceMemory, CommandDescriptor) {
    let (memory, mut command, context) = build(input);
    for mutation in input.mutations.iter().take(MAX_MUTATIONS) {
        mutate(mutation, &mut command, &context);
    }
    (memory, command)
}

/// The check: panics exactly where the `ssb_decode` fuzz target reports a finding.
pub fn check(data: &[u8]) {
    let target = KernelTarget {
        id: KernelId::SsbFilter,
        prepare,
        model: |command, memory| model(command, memory.len() as u64),
        decode: |command, memory| SsbKernel::decode(command, memory),
        wrap: Kernel::Ssb,
        check_items,
    };
    crate::kernel_check::check(&target, data);
}
