//! `Kernel::decode` of SSSP relaxation commands (`firmware::kernels::sssp`) against a device
//! memory holding a graph, a frontier and its slot prefix, then a few of the launch's items.
//!
//! Input (`arbitrary`): the shape of a small valid launch (vertices, degrees, frontier, vertices
//! per item, stamp, a seed for the bulk contents, gaps between the arrays, the memory's slack)
//! and up to four mutations of the command, the parameter block or words of the frontier,
//! prefix, offsets and targets. With no mutation the launch is valid, so the fuzzer reaches
//! the accepting paths as often as the refusing ones.
//!
//! Checked, beyond "never panics":
//! - `Kernel::decode` (and `SsspKernel::decode`) is `Ok` exactly when a model of the module
//!   docs' validation rules accepts, with the status the docs give otherwise; the model reads
//!   the parameter block, frontier, prefix and offsets out of a snapshot of memory;
//! - an accepted launch has `ceil(count / per_item)` items, one stage; `item(i)` of the first,
//!   a middle and the last item is the slot range `4 prefix[first] .. 4 prefix[end]` of its
//!   frontier block, inside the result space; `item(items())` is refused;
//! - executing those items succeeds unless one of their arcs has a target `>= vertices` (then
//!   `ArgumentOutOfRange`), and writes nothing but the item's result bytes and the distance
//!   and claim words of its arcs' targets.
#![no_main]

use arbitrary::Arbitrary;
use axle_fuzz::kernel_check::{
    dword, execute_within, first_middle_last, memory_size, put_words, word, Bump, Mutation, Rng,
    Span, TweakContext, Watched, MAX_MUTATIONS,
};
use axle_fuzz::FakeDeviceMemory;
use firmware::kernels::sssp::{SsspKernel, SsspParameters};
use firmware::kernels::Kernel;
use libfuzzer_sys::fuzz_target;
use shared_abi::{CommandDescriptor, KernelId, Status};

#[derive(Arbitrary, Debug)]
struct Input {
    vertices: u8,
    degrees: Vec<u8>,
    count: u8,
    frontier: Vec<u8>,
    per_item: u8,
    stamp: u32,
    seed: u64,
    start: u16,
    gaps: [u8; 9],
    slack: i16,
    fill: u8,
    mutations: Vec<Mutation>,
}

/// Where the valid layout put each array.
struct Layout {
    parameters: u64,
    offsets: u64,
    targets: u64,
    frontier: u64,
    prefix: u64,
    vertices: u64,
    arcs: u64,
    count: u64,
}

/// What the model knows of an accepted launch.
#[derive(Debug)]
struct Model {
    vertices: u64,
    offsets: u64,
    targets: u64,
    distances: u64,
    claims: u64,
    per_item: u64,
    count: u64,
    frontier: Vec<u32>,
    prefix: Vec<u32>,
}

/// The parameter block's eight little-endian `u64` fields.
fn read_parameters(memory: &[u8], address: u64) -> Option<[u64; 8]> {
    let mut fields = [0_u64; 8];
    for (i, field) in fields.iter_mut().enumerate() {
        *field = dword(memory, u128::from(address) + 8 * i as u128)?;
    }
    Some(fields)
}

/// The module docs' validation rules, over a snapshot of device memory.
fn model(command: &CommandDescriptor, memory: &[u8]) -> Result<Model, Status> {
    if command.kernel != KernelId::SsspRelax as u32 {
        return Err(Status::UnknownKernel);
    }
    if command.flags != 0 {
        return Err(Status::MalformedDescriptor);
    }
    let refuse = Err(Status::ArgumentOutOfRange);
    let size = memory.len() as u64;
    let [parameters_address, frontier, packed, prefix] = command.args;
    let parameters = Span::new(parameters_address, 64);
    if !parameters.fits(8, size) {
        return refuse;
    }
    let Some([vertices, arcs, offsets, targets, weights, distances, claims, per_item]) =
        read_parameters(memory, parameters_address)
    else {
        return refuse;
    };
    let count = packed & 0xFFFF_FFFF;
    let stamp = packed >> 32;
    if vertices == 0
        || u128::from(vertices) + 1 > u128::from(u32::MAX)
        || arcs > u64::from(u32::MAX)
        || count == 0
        || stamp == 0
        || !(1..=4096).contains(&per_item)
    {
        return refuse;
    }
    let words = |n: u64| 4 * u128::from(n);
    let read_only = [
        parameters,
        Span::new(offsets, words(vertices) + 4),
        Span::new(targets, words(arcs)),
        Span::new(weights, words(arcs)),
        Span::new(frontier, words(count)),
        Span::new(prefix, words(count) + 4),
    ];
    let written = [
        Span::new(command.result_address, u128::from(command.result_length)),
        Span::new(distances, words(vertices)),
        Span::new(claims, words(vertices)),
    ];
    if read_only.iter().chain(&written).any(|s| !s.fits(4, size)) {
        return refuse;
    }
    for (i, target) in written.iter().enumerate() {
        if read_only.iter().any(|r| r.overlaps(target))
            || written[i + 1..].iter().any(|w| w.overlaps(target))
        {
            return refuse;
        }
    }
    let word_at = |base: u64, index: u64| {
        word(memory, u128::from(base) + 4 * u128::from(index)).expect("checked inside memory")
    };
    let frontier_ids: Vec<u32> = (0..count).map(|j| word_at(frontier, j)).collect();
    let prefix_words: Vec<u32> = (0..=count).map(|j| word_at(prefix, j)).collect();
    if prefix_words[0] != 0 {
        return refuse;
    }
    for (j, &vertex) in frontier_ids.iter().enumerate() {
        let vertex = u64::from(vertex);
        if vertex >= vertices {
            return refuse;
        }
        let (first, last) = (word_at(offsets, vertex), word_at(offsets, vertex + 1));
        if first > last || u64::from(last) > arcs {
            return refuse;
        }
        if u64::from(prefix_words[j + 1]) != u64::from(prefix_words[j]) + u64::from(last - first) {
            return refuse;
        }
    }
    let total = u128::from(prefix_words[count as usize]);
    if total == 0 || u128::from(command.result_length) != 4 * total {
        return refuse;
    }
    Ok(Model {
        vertices,
        offsets,
        targets,
        distances,
        claims,
        per_item,
        count,
        frontier: frontier_ids,
        prefix: prefix_words,
    })
}

/// Builds the valid layout, the memory and the command the input describes.
fn build(input: &Input) -> (FakeDeviceMemory, CommandDescriptor, Layout, TweakContext) {
    let mut rng = Rng::new(input.seed);
    let vertices = 1 + u64::from(input.vertices % 64);
    let degrees: Vec<u32> = (0..vertices as usize)
        .map(|v| match input.degrees.get(v) {
            Some(&d) if d >= 240 => 60 + u32::from(d - 240) * 6,
            Some(&d) => u32::from(d % 6),
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
            1 => (1 << 31) - 1 - rng.below(4) as u32,
            _ => rng.below(100) as u32,
        })
        .collect();
    let distances: Vec<u32> = (0..vertices)
        .map(|_| match rng.below(3) {
            0 => u32::MAX,
            1 => (1 << 31) - 1 - rng.below(4) as u32,
            _ => rng.below(200) as u32,
        })
        .collect();
    let stamp = input.stamp.max(1);
    let claims: Vec<u32> = (0..vertices)
        .map(|_| {
            if rng.below(4) == 0 {
                stamp
            } else {
                rng.below(3) as u32
            }
        })
        .collect();
    let count = 1 + u64::from(input.count % 160);
    let frontier: Vec<u32> = (0..count as usize)
        .map(|j| match input.frontier.get(j) {
            Some(&id) => u32::from(id) % vertices as u32,
            None => rng.below(vertices) as u32,
        })
        .collect();
    let mut prefix = vec![0_u32];
    for &vertex in &frontier {
        prefix.push(prefix.last().unwrap() + degrees[vertex as usize]);
    }
    let total = u64::from(*prefix.last().unwrap());

    let gap = |i: usize| u64::from(input.gaps[i]) * 4;
    let mut bump = Bump::new(u64::from(input.start) % 0x4000);
    let parameters_address = bump.take(64, 8, gap(0));
    let offsets_address = bump.take(4 * (vertices + 1), 4, gap(1));
    let targets_address = bump.take(4 * arcs, 4, gap(2));
    let weights_address = bump.take(4 * arcs, 4, gap(3));
    let distances_address = bump.take(4 * vertices, 4, gap(4));
    let claims_address = bump.take(4 * vertices, 4, gap(5));
    let frontier_address = bump.take(4 * count, 4, gap(6));
    let prefix_address = bump.take(4 * (count + 1), 4, gap(7));
    let result_address = bump.take(4 * total, 4, gap(8));
    let size = memory_size(bump.end(), input.slack);

    let mut memory = FakeDeviceMemory::new(size as usize);
    memory.fill(0, &vec![input.fill; size as usize]);
    put_words(&mut memory, offsets_address, &offsets);
    put_words(&mut memory, targets_address, &targets);
    put_words(&mut memory, weights_address, &weights);
    put_words(&mut memory, distances_address, &distances);
    put_words(&mut memory, claims_address, &claims);
    put_words(&mut memory, frontier_address, &frontier);
    put_words(&mut memory, prefix_address, &prefix);
    let parameters = SsspParameters {
        vertices,
        arcs,
        offsets: offsets_address,
        targets: targets_address,
        weights: weights_address,
        distances: distances_address,
        claims: claims_address,
        vertices_per_item: 1 + u64::from(input.per_item % 70),
    };
    memory.fill(parameters_address, &parameters.to_bytes());
    let command = CommandDescriptor {
        kernel: KernelId::SsspRelax as u32,
        mode: 0,
        tag: 0,
        flags: 0,
        result_address,
        result_length: 4 * total,
        args: [
            parameters_address,
            frontier_address,
            count | u64::from(stamp) << 32,
            prefix_address,
        ],
    };
    let layout = Layout {
        parameters: parameters_address,
        offsets: offsets_address,
        targets: targets_address,
        frontier: frontier_address,
        prefix: prefix_address,
        vertices,
        arcs,
        count,
    };
    let context = TweakContext {
        memory_size: size,
        addresses: vec![
            parameters_address,
            offsets_address,
            targets_address,
            weights_address,
            distances_address,
            claims_address,
            frontier_address,
            prefix_address,
            result_address,
        ],
    };
    (memory, command, layout, context)
}

/// Applies one mutation: fields 0..8 of the command, 8..16 of the parameter block (in
/// memory, at the layout's block), 16..20 a word of the frontier, prefix, offsets or targets.
fn mutate(
    mutation: &Mutation,
    memory: &mut FakeDeviceMemory,
    command: &mut CommandDescriptor,
    layout: &Layout,
    context: &TweakContext,
) {
    let tweak = mutation.tweak;
    let low = |value: u64| value & 0xFFFF_FFFF;
    match mutation.field % 21 {
        0 => command.flags = tweak.apply32(command.flags, context),
        1 => command.result_address = tweak.apply(command.result_address, context),
        2 => command.result_length = tweak.apply(command.result_length, context),
        3 => command.args[0] = tweak.apply(command.args[0], context),
        4 => command.args[1] = tweak.apply(command.args[1], context),
        5 => {
            let count = tweak.apply(low(command.args[2]), context);
            command.args[2] = command.args[2] & !0xFFFF_FFFF | low(count);
        }
        6 => {
            let stamp = tweak.apply(command.args[2] >> 32, context);
            command.args[2] = low(command.args[2]) | stamp << 32;
        }
        7 => command.args[3] = tweak.apply(command.args[3], context),
        field @ 8..=15 => {
            let address = layout.parameters + 8 * u64::from(field - 8);
            let old = dword(memory.contents(), u128::from(address)).unwrap_or(0);
            memory.fill(address, &tweak.apply(old, context).to_le_bytes());
        }
        field => {
            let (base, length) = match field {
                16 => (layout.frontier, layout.count),
                17 => (layout.prefix, layout.count + 1),
                18 => (layout.offsets, layout.vertices + 1),
                19 => (layout.targets, layout.arcs),
                _ => {
                    // Another kernel id: refused as unknown by the SSSP decoder.
                    command.kernel = tweak.apply32(command.kernel, context);
                    return;
                }
            };
            if length == 0 {
                return;
            }
            let address = base + 4 * (u64::from(mutation.index) % length);
            let old = word(memory.contents(), u128::from(address)).unwrap_or(0);
            put_words(memory, address, &[tweak.apply32(old, context)]);
        }
    }
}

/// Checks the items of an accepted launch and runs a few of them.
fn check_items(
    kernel: &Kernel,
    model: &Model,
    command: &CommandDescriptor,
    memory: FakeDeviceMemory,
) {
    let items = model.count.div_ceil(model.per_item);
    assert_eq!(u64::from(kernel.items()), items);
    assert_eq!(kernel.stages(), 1);
    assert_eq!(kernel.stage_items(0), 0..kernel.items());
    assert!(kernel.stage_items(1).is_empty());
    assert_eq!(
        kernel.item(kernel.items(), &memory),
        Err(Status::ArgumentOutOfRange)
    );
    let result = Span::new(command.result_address, u128::from(command.result_length));
    let mut memory = Watched::new(memory);
    for index in first_middle_last(0..kernel.items()) {
        let first = u64::from(index) * model.per_item;
        let end = (first + model.per_item).min(model.count);
        let slots = (
            u64::from(model.prefix[first as usize]),
            u64::from(model.prefix[end as usize]),
        );
        let item = kernel
            .item(index, &memory)
            .expect("an item of an accepted launch");
        assert_eq!(item.result_offset, 4 * slots.0, "item {index}");
        assert_eq!(u64::from(item.result_length), 4 * (slots.1 - slots.0));
        let item_span = Span::new(
            command.result_address + item.result_offset,
            u128::from(item.result_length),
        );
        assert!(
            result.contains(&item_span),
            "item {index} outside the result"
        );

        // The arcs the item relaxes, from the (unchanging) inputs.
        let snapshot = memory.inner.contents();
        let word_at = |base: u64, i: u64| word(snapshot, u128::from(base) + 4 * u128::from(i));
        let mut allowed = vec![item_span];
        let mut bad_target = false;
        for &vertex in &model.frontier[first as usize..end as usize] {
            let vertex = u64::from(vertex);
            let arcs = word_at(model.offsets, vertex).unwrap()
                ..word_at(model.offsets, vertex + 1).unwrap();
            for arc in arcs {
                let target = word_at(model.targets, u64::from(arc)).unwrap();
                if u64::from(target) >= model.vertices {
                    bad_target = true;
                    break;
                }
                allowed.push(Span::new(model.distances + 4 * u64::from(target), 4));
                allowed.push(Span::new(model.claims + 4 * u64::from(target), 4));
            }
            if bad_target {
                break;
            }
        }
        let outcome = execute_within(&mut memory, &allowed, "sssp item", |memory| {
            kernel.execute(index, memory)
        });
        if bad_target {
            assert_eq!(outcome, Err(Status::ArgumentOutOfRange), "item {index}");
        } else {
            assert_eq!(outcome, Ok(()), "item {index}");
        }
    }
    assert_eq!(
        kernel.execute(kernel.items(), &mut memory),
        Err(Status::ArgumentOutOfRange)
    );
}

fuzz_target!(|input: Input| {
    let (mut memory, mut command, layout, context) = build(&input);
    for mutation in input.mutations.iter().take(MAX_MUTATIONS) {
        mutate(mutation, &mut memory, &mut command, &layout, &context);
    }
    let expected = model(&command, memory.contents());
    let direct = SsspKernel::decode(&command, &memory);
    match (&direct, &expected) {
        (Ok(_), Ok(_)) => {}
        (Err(got), Err(want)) => assert_eq!(got, want, "{command:?}"),
        _ => panic!("decoder {direct:?} but the docs' rules say {expected:?} for {command:?}",),
    }
    if command.kernel != KernelId::SsspRelax as u32 {
        // Another kernel's decoder (or none) answers: only "no panic" is checked.
        let _ = Kernel::decode(&command, &memory);
        return;
    }
    let decoded = Kernel::decode(&command, &memory);
    match (decoded, expected) {
        (Ok(kernel), Ok(model)) => {
            assert_eq!(Kernel::Sssp(direct.expect("accepted above")), kernel);
            check_items(&kernel, &model, &command, memory);
        }
        (Err(got), Err(want)) => assert_eq!(got, want),
        (got, want) => panic!("Kernel::decode {got:?} but the docs' rules say {want:?}"),
    }
});
