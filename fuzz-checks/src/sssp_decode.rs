//! `Kernel::decode` of SSSP relaxation commands (`firmware::kernels::sssp`) against a device
//! memory holding a weighted graph and a vector of previous distances, then a few of the
//! launch's items.
//!
//! Input (`arbitrary`): the shape of a small valid launch (vertices, degrees, a seed for the
//! bulk contents, gaps between the arrays, the memory's slack) and up to four mutations of the
//! command, the parameter block or words of the offsets, targets and previous distances. With
//! no mutation the launch is valid, so the fuzzer reaches the accepting paths as often as the
//! refusing ones.
//!
//! Checked, beyond "never panics":
//! - `Kernel::decode` (and `SsspKernel::decode`) is `Ok` exactly when a model of the module
//!   docs' validation rules accepts, with the status the docs give otherwise; the model reads
//!   the parameter block out of a snapshot of memory;
//! - an accepted launch has `ceil(vertices / 8)` items, one stage; `item(i)` of the first, a
//!   middle and the last item is refused exactly when its offsets decrease or exceed `arcs`,
//!   and is otherwise the result words `4 * 8i .. 4 * min(8i + 8, vertices)` with the cost of
//!   the docs' formula (per packet, per vertex, per pass of 8 arcs, per arc); `item(items())`
//!   is refused;
//! - executing those items fails exactly when the offsets are inconsistent or an arc's target
//!   is `>= vertices` (then writing nothing), writes nothing but the item's result words, and
//!   writes there the docs' `min(prev[v], prev[u] + w saturating)` over the vertex's arcs.

use crate::kernel_check::{
    assert_one_stage, dword, execute_within, first_middle_last, memory_size, put_words, word, Bump,
    KernelTarget, Mutation, Rng, Span, TweakContext, Watched, MAX_MUTATIONS,
};
use crate::FakeDeviceMemory;
use arbitrary::Arbitrary;
use firmware::kernels::sssp::{SsspKernel, SsspParameters};
use firmware::kernels::{ItemCost, Kernel};
use firmware::FirmwareError;
use shared_abi::{CommandDescriptor, KernelId};

/// The docs' cost constants, restated (kernel0's lines by functional unit).
const PACKET: ItemCost = ItemCost {
    scalar: 11,
    scalar_memory: 8,
    vector: 4,
    vector_memory: 3,
    indexed_extra_cycles: 0,
    bytes: 96,
};
const PER_VERTEX: ItemCost = ItemCost {
    scalar: 10,
    scalar_memory: 0,
    vector: 4,
    vector_memory: 0,
    indexed_extra_cycles: 0,
    bytes: 0,
};
const PER_ARC_GROUP: ItemCost = ItemCost {
    scalar: 2,
    scalar_memory: 0,
    vector: 10,
    vector_memory: 3,
    indexed_extra_cycles: 0,
    bytes: 0,
};
const PARTIAL_PACKET_SCALAR: u64 = 3;
const BYTES_PER_ARC: u64 = 8 + 64;

#[derive(Arbitrary, Debug)]
struct Input {
    vertices: u8,
    degrees: Vec<u8>,
    seed: u64,
    start: u16,
    gaps: [u8; 6],
    slack: i16,
    fill: u8,
    mutations: Vec<Mutation>,
}

/// Where the valid layout put each array.
struct Layout {
    parameters: u64,
    offsets: u64,
    targets: u64,
    previous: u64,
    vertices: u64,
    arcs: u64,
}

/// What the model knows of an accepted launch.
#[derive(Debug)]
struct Model {
    vertices: u64,
    arcs: u64,
    offsets: u64,
    targets: u64,
    weights: u64,
    previous: u64,
}

/// The parameter block's five little-endian `u64` fields.
fn read_parameters(memory: &[u8], address: u64) -> Option<[u64; 5]> {
    let mut fields = [0_u64; 5];
    for (i, field) in fields.iter_mut().enumerate() {
        *field = dword(memory, u128::from(address) + 8 * i as u128)?;
    }
    Some(fields)
}

/// The module docs' validation rules, over a snapshot of device memory.
fn model(command: &CommandDescriptor, memory: &[u8]) -> Result<Model, FirmwareError> {
    if command.kernel != KernelId::SsspRelax as u32 {
        return Err(FirmwareError::UnknownKernel);
    }
    if command.flags != 0 {
        return Err(FirmwareError::MalformedDescriptor);
    }
    let refuse = Err(FirmwareError::ArgumentOutOfRange);
    let size = memory.len() as u64;
    let [parameters_address, previous, reserved_a, reserved_b] = command.args;
    if reserved_a != 0 || reserved_b != 0 {
        return refuse;
    }
    let parameters = Span::new(parameters_address, 40);
    if !parameters.fits(8, size) {
        return refuse;
    }
    let Some([vertices, arcs, offsets, targets, weights]) =
        read_parameters(memory, parameters_address)
    else {
        return refuse;
    };
    if vertices == 0
        || u128::from(vertices) + 1 > u128::from(u32::MAX)
        || arcs > u64::from(u32::MAX)
    {
        return refuse;
    }
    let words = |n: u64| 4 * u128::from(n);
    let inputs = [
        parameters,
        Span::new(offsets, words(vertices) + 4),
        Span::new(targets, words(arcs)),
        Span::new(weights, words(arcs)),
        Span::new(previous, words(vertices)),
    ];
    if inputs.iter().any(|s| !s.fits(4, size)) {
        return refuse;
    }
    if u128::from(command.result_length) != words(vertices) {
        return refuse;
    }
    let result = Span::new(command.result_address, u128::from(command.result_length));
    if !result.fits(4, size) || inputs.iter().any(|input| input.overlaps(&result)) {
        return refuse;
    }
    Ok(Model {
        vertices,
        arcs,
        offsets,
        targets,
        weights,
        previous,
    })
}

/// Builds the valid layout, the memory and the command the input describes.
fn build(input: &Input) -> (FakeDeviceMemory, CommandDescriptor, Layout, TweakContext) {
    let mut rng = Rng::new(input.seed);
    let vertices = 1 + u64::from(input.vertices % 64);
    let degrees: Vec<u32> = (0..vertices as usize)
        .map(|v| match input.degrees.get(v) {
            Some(&d) if d >= 240 => 60 + u32::from(d - 240) * 6,
            Some(&d) => u32::from(d % 10),
            None => rng.below(4) as u32,
        })
        .collect();
    let mut offsets = vec![0_u32];
    for degree in &degrees {
        offsets.push(offsets.last().unwrap() + degree);
    }
    let arcs = u64::from(*offsets.last().unwrap());
    let targets: Vec<u32> = (0..arcs).map(|_| rng.below(vertices) as u32).collect();
    let weights: Vec<u32> = (0..arcs)
        .map(|_| match rng.below(8) {
            0 => u32::MAX,
            1 => u32::MAX - rng.below(300) as u32,
            _ => rng.below(100) as u32,
        })
        .collect();
    let previous: Vec<u32> = (0..vertices)
        .map(|_| match rng.below(3) {
            0 => u32::MAX,
            1 => u32::MAX - 1 - rng.below(200) as u32,
            _ => rng.below(200) as u32,
        })
        .collect();

    let gap = |i: usize| u64::from(input.gaps[i]) * 4;
    let mut bump = Bump::new(u64::from(input.start) % 0x4000);
    let parameters_address = bump.take(40, 8, gap(0));
    let offsets_address = bump.take(4 * (vertices + 1), 4, gap(1));
    let targets_address = bump.take(4 * arcs, 4, gap(2));
    let weights_address = bump.take(4 * arcs, 4, gap(3));
    let previous_address = bump.take(4 * vertices, 4, gap(4));
    let result_address = bump.take(4 * vertices, 4, gap(5));
    let size = memory_size(bump.end(), input.slack);

    let mut memory = FakeDeviceMemory::new(size as usize);
    memory.fill(0, &vec![input.fill; size as usize]);
    put_words(&mut memory, offsets_address, &offsets);
    put_words(&mut memory, targets_address, &targets);
    put_words(&mut memory, weights_address, &weights);
    put_words(&mut memory, previous_address, &previous);
    let parameters = SsspParameters {
        vertices,
        arcs,
        offsets: offsets_address,
        targets: targets_address,
        weights: weights_address,
    };
    memory.fill(parameters_address, &parameters.to_bytes());
    let command = CommandDescriptor {
        kernel: KernelId::SsspRelax as u32,
        mode: 0,
        tag: 0,
        flags: 0,
        result_address,
        result_length: 4 * vertices,
        args: [parameters_address, previous_address, 0, 0],
    };
    let layout = Layout {
        parameters: parameters_address,
        offsets: offsets_address,
        targets: targets_address,
        previous: previous_address,
        vertices,
        arcs,
    };
    let context = TweakContext {
        memory_size: size,
        addresses: vec![
            parameters_address,
            offsets_address,
            targets_address,
            weights_address,
            previous_address,
            result_address,
        ],
    };
    (memory, command, layout, context)
}

/// Applies one mutation: fields 0..7 of the command, 7..12 of the parameter block (in memory,
/// at the layout's block), 12..15 a word of the offsets, targets or previous distances, 15
/// the kernel id.
fn mutate(
    mutation: &Mutation,
    memory: &mut FakeDeviceMemory,
    command: &mut CommandDescriptor,
    layout: &Layout,
    context: &TweakContext,
) {
    let tweak = mutation.tweak;
    match mutation.field % 16 {
        0 => command.flags = tweak.apply32(command.flags, context),
        1 => command.result_address = tweak.apply(command.result_address, context),
        2 => command.result_length = tweak.apply(command.result_length, context),
        field @ 3..=6 => {
            let arg = usize::from(field - 3);
            command.args[arg] = tweak.apply(command.args[arg], context);
        }
        field @ 7..=11 => {
            let address = layout.parameters + 8 * u64::from(field - 7);
            let old = dword(&memory.contents(), u128::from(address)).unwrap_or(0);
            memory.fill(address, &tweak.apply(old, context).to_le_bytes());
        }
        field @ 12..=14 => {
            let (base, length) = match field {
                12 => (layout.offsets, layout.vertices + 1),
                13 => (layout.targets, layout.arcs),
                _ => (layout.previous, layout.vertices),
            };
            if length == 0 {
                return;
            }
            let address = base + 4 * (u64::from(mutation.index) % length);
            let old = word(&memory.contents(), u128::from(address)).unwrap_or(0);
            put_words(memory, address, &[tweak.apply32(old, context)]);
        }
        _ => {
            // Another kernel id: refused as unknown by the SSSP decoder.
            command.kernel = tweak.apply32(command.kernel, context);
        }
    }
}

/// What the docs say item `index` is, from a memory snapshot: its vertices' offsets (`None`
/// when they decrease or exceed `arcs`), or for an executable item its new distances (`None`
/// when an arc's target is `>= vertices`).
struct Expected {
    first: u64,
    count: u64,
    offsets: Option<Vec<u64>>,
    distances: Option<Vec<u32>>,
}

fn expected(model: &Model, snapshot: &[u8], index: u32) -> Expected {
    let word_at = |base: u64, i: u64| {
        word(snapshot, u128::from(base) + 4 * u128::from(i)).expect("checked at decode")
    };
    let first = 8 * u64::from(index);
    let count = (model.vertices - first).min(8);
    let offsets: Vec<u64> = (first..=first + count)
        .map(|v| u64::from(word_at(model.offsets, v)))
        .collect();
    let consistent = offsets.windows(2).all(|pair| pair[0] <= pair[1])
        && offsets.iter().all(|o| *o <= model.arcs);
    if !consistent {
        return Expected {
            first,
            count,
            offsets: None,
            distances: None,
        };
    }
    let mut distances = Vec::new();
    for lane in 0..count as usize {
        let vertex = first + lane as u64;
        let mut best = u64::from(word_at(model.previous, vertex));
        for arc in offsets[lane]..offsets[lane + 1] {
            let target = u64::from(word_at(model.targets, arc));
            if target >= model.vertices {
                return Expected {
                    first,
                    count,
                    offsets: Some(offsets),
                    distances: None,
                };
            }
            let through =
                u64::from(word_at(model.previous, target)) + u64::from(word_at(model.weights, arc));
            best = best.min(through.min(u64::from(u32::MAX)));
        }
        distances.push(best as u32);
    }
    Expected {
        first,
        count,
        offsets: Some(offsets),
        distances: Some(distances),
    }
}

/// The docs' cost of an item with these offsets.
fn cost(offsets: &[u64]) -> ItemCost {
    let vertices = (offsets.len() - 1) as u64;
    let mut cost = PACKET.plus(PER_VERTEX.times(vertices));
    let mut arcs = 0;
    for pair in offsets.windows(2) {
        let degree = pair[1] - pair[0];
        let passes = degree.div_ceil(8).max(1);
        cost = cost.plus(PER_ARC_GROUP.times(passes));
        // A pass gathering k neighbours from random lines keeps the address unit k cycles.
        cost = cost.plus(ItemCost::indexed_extra_cycles(
            degree.saturating_sub(passes),
        ));
        arcs += degree;
    }
    if vertices < 8 {
        cost = cost.plus(ItemCost::scalar(PARTIAL_PACKET_SCALAR));
    }
    cost.plus(ItemCost::bytes(arcs * BYTES_PER_ARC))
}

/// Checks the items of an accepted launch and runs a few of them.
fn check_items(kernel: &Kernel, model: &Model, command: &CommandDescriptor, memory: &mut Watched) {
    assert_eq!(u64::from(kernel.items()), model.vertices.div_ceil(8));
    assert_one_stage(kernel);
    let result = Span::new(command.result_address, u128::from(command.result_length));
    for index in first_middle_last(0..kernel.items()) {
        // The inputs never change: the result overlaps none of them.
        let want = expected(model, &memory.contents(), index);
        let described = kernel.item(index, &*memory);
        let Some(offsets) = &want.offsets else {
            assert_eq!(
                described,
                Err(FirmwareError::ArgumentOutOfRange),
                "item {index}"
            );
            let outcome = execute_within(memory, &[], "sssp item", |memory| {
                kernel.execute(index, memory)
            });
            assert_eq!(
                outcome,
                Err(FirmwareError::ArgumentOutOfRange),
                "item {index}"
            );
            continue;
        };
        let item = described.expect("an item with consistent offsets");
        assert_eq!(item.result_offset, 4 * want.first, "item {index}");
        assert_eq!(u64::from(item.result_length), 4 * want.count);
        assert_eq!(item.cost, cost(offsets), "item {index}");
        let item_span = Span::new(
            command.result_address + item.result_offset,
            u128::from(item.result_length),
        );
        assert!(
            result.contains(&item_span),
            "item {index} outside the result"
        );
        let allowed = if want.distances.is_some() {
            vec![item_span]
        } else {
            Vec::new()
        };
        let outcome = execute_within(memory, &allowed, "sssp item", |memory| {
            kernel.execute(index, memory)
        });
        match &want.distances {
            None => assert_eq!(
                outcome,
                Err(FirmwareError::ArgumentOutOfRange),
                "item {index}"
            ),
            Some(distances) => {
                assert_eq!(outcome, Ok(()), "item {index}");
                let written: Vec<u32> = (0..want.count)
                    .map(|lane| {
                        word(&memory.contents(), item_span.start + 4 * u128::from(lane))
                            .expect("inside memory")
                    })
                    .collect();
                assert_eq!(&written, distances, "item {index}");
            }
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

/// The check: panics exactly where the `sssp_decode` fuzz target reports a finding.
pub fn check(data: &[u8]) {
    let target = KernelTarget {
        id: KernelId::SsspRelax,
        prepare,
        model,
        decode: |command, memory| SsspKernel::decode(command, memory),
        wrap: Kernel::Sssp,
        check_items,
    };
    crate::kernel_check::check(&target, data);
}
