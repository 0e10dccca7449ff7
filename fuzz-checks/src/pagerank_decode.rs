//! `Kernel::decode` of PageRank gather commands (`firmware::kernels::pagerank`) against a
//! device memory holding an in-neighbour CSR graph and its contributions, then a few of the
//! launch's items.
//!
//! Input (`arbitrary`): the shape of a small valid launch (vertices, in-degrees, a seed for the
//! bulk contents, gaps between the arrays, the memory's slack) and up to
//! four mutations of the command, the parameter block or words of the offsets and sources.
//! With no mutation the launch is valid.
//!
//! Checked, beyond "never panics":
//! - `Kernel::decode` (and `PageRankKernel::decode`) is `Ok` exactly when a model of the module
//!   docs' validation rules accepts, with the documented status otherwise;
//! - an accepted launch has one item per vertex, one stage; `item(items())` is refused;
//! - for the first, a middle and the last item (vertex `v`): if its offsets are consistent and
//!   its sources are `< vertices`, it is described as result bytes `4 v .. 4 v + 4` (inside the
//!   result space) with the documented cost of its in-degree, and executes with `Ok`;
//!   otherwise it fails to execute with `ArgumentOutOfRange` (and if it is described at all,
//!   it is described that way); executing writes nothing outside the item's 4 result bytes.

use crate::kernel_check::{
    assert_one_stage, dword, execute_within, first_middle_last, memory_size, put_words, word, Bump,
    KernelTarget, Mutation, Rng, Span, TweakContext, Watched, MAX_MUTATIONS,
};
use crate::FakeDeviceMemory;
use arbitrary::Arbitrary;
use firmware::kernels::pagerank::{item_cost, PageRankKernel, PageRankParameters};
use firmware::kernels::Kernel;
use firmware::FirmwareError;
use shared_abi::{CommandDescriptor, KernelId};

#[derive(Arbitrary, Debug)]
struct Input {
    vertices: u8,
    degrees: Vec<u8>,
    seed: u64,
    start: u16,
    gaps: [u8; 5],
    slack: i16,
    fill: u8,
    mutations: Vec<Mutation>,
}

/// Where the valid layout put each array.
struct Layout {
    parameters: u64,
    offsets: u64,
    sources: u64,
    vertices: u64,
    arcs: u64,
}

/// What the model knows of an accepted launch.
#[derive(Debug)]
struct Model {
    vertices: u64,
    arcs: u64,
    offsets: u64,
    sources: u64,
}

/// The module docs' validation rules, over a snapshot of device memory.
fn model(command: &CommandDescriptor, memory: &[u8]) -> Result<Model, FirmwareError> {
    if command.kernel != KernelId::PageRankGather as u32 {
        return Err(FirmwareError::UnknownKernel);
    }
    if command.flags != 0 {
        return Err(FirmwareError::MalformedDescriptor);
    }
    let refuse = Err(FirmwareError::ArgumentOutOfRange);
    let size = memory.len() as u64;
    let [parameters_address, contributions, per_item, reserved] = command.args;
    if reserved != 0 || per_item != 1 {
        return refuse;
    }
    let parameters = Span::new(parameters_address, 32);
    if !parameters.fits(8, size) {
        return refuse;
    }
    let field = |i: u128| dword(memory, u128::from(parameters_address) + 8 * i).expect("inside");
    let (vertices, arcs, offsets, sources) = (field(0), field(1), field(2), field(3));
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
        Span::new(sources, words(arcs)),
        Span::new(contributions, words(vertices)),
    ];
    let result = Span::new(command.result_address, u128::from(command.result_length));
    if inputs.iter().any(|s| !s.fits(4, size))
        || u128::from(command.result_length) != words(vertices)
        || !result.fits(4, size)
        || inputs.iter().any(|s| s.overlaps(&result))
    {
        return refuse;
    }
    Ok(Model {
        vertices,
        arcs,
        offsets,
        sources,
    })
}

/// Builds the valid layout, the memory and the command the input describes.
fn build(input: &Input) -> (FakeDeviceMemory, CommandDescriptor, Layout, TweakContext) {
    let mut rng = Rng::new(input.seed);
    let vertices = 1 + u64::from(input.vertices % 200);
    let mut offsets = vec![0_u32];
    for v in 0..vertices as usize {
        let degree = match input.degrees.get(v) {
            Some(&d) if d >= 240 => 60 + u32::from(d - 240) * 6,
            Some(&d) => u32::from(d % 8),
            None => rng.below(8) as u32,
        };
        offsets.push(offsets.last().unwrap() + degree);
    }
    let arcs = u64::from(*offsets.last().unwrap());
    let sources: Vec<u32> = (0..arcs).map(|_| rng.below(vertices) as u32).collect();
    let contributions: Vec<u32> = (0..vertices)
        .map(|_| (rng.below(1000) as f32 / 997.0).to_bits())
        .collect();

    let gap = |i: usize| u64::from(input.gaps[i]) * 4;
    let mut bump = Bump::new(u64::from(input.start) % 0x4000);
    let parameters_address = bump.take(32, 8, gap(0));
    let offsets_address = bump.take(4 * (vertices + 1), 4, gap(1));
    let sources_address = bump.take(4 * arcs, 4, gap(2));
    let contributions_address = bump.take(4 * vertices, 4, gap(3));
    let result_address = bump.take(4 * vertices, 4, gap(4));
    let size = memory_size(bump.end(), input.slack);

    let mut memory = FakeDeviceMemory::new(size as usize);
    memory.fill(0, &vec![input.fill; size as usize]);
    put_words(&mut memory, offsets_address, &offsets);
    put_words(&mut memory, sources_address, &sources);
    put_words(&mut memory, contributions_address, &contributions);
    let parameters = PageRankParameters {
        vertices,
        arcs,
        offsets: offsets_address,
        sources: sources_address,
    };
    memory.fill(parameters_address, &parameters.to_bytes());
    let command = CommandDescriptor {
        kernel: KernelId::PageRankGather as u32,
        mode: 0,
        tag: 0,
        flags: 0,
        result_address,
        result_length: 4 * vertices,
        args: [parameters_address, contributions_address, 1, 0],
    };
    let layout = Layout {
        parameters: parameters_address,
        offsets: offsets_address,
        sources: sources_address,
        vertices,
        arcs,
    };
    let context = TweakContext {
        memory_size: size,
        addresses: vec![
            parameters_address,
            offsets_address,
            sources_address,
            contributions_address,
            result_address,
        ],
    };
    (memory, command, layout, context)
}

/// Applies one mutation: fields 0..7 of the command, 7..11 of the parameter block (in memory,
/// at the layout's block), 11 and 12 a word of the offsets or sources, 13 the kernel id.
fn mutate(
    mutation: &Mutation,
    memory: &mut FakeDeviceMemory,
    command: &mut CommandDescriptor,
    layout: &Layout,
    context: &TweakContext,
) {
    let tweak = mutation.tweak;
    match mutation.field % 14 {
        0 => command.flags = tweak.apply32(command.flags, context),
        1 => command.result_address = tweak.apply(command.result_address, context),
        2 => command.result_length = tweak.apply(command.result_length, context),
        field @ 3..=6 => {
            let arg = &mut command.args[usize::from(field - 3)];
            *arg = tweak.apply(*arg, context);
        }
        field @ 7..=10 => {
            let address = layout.parameters + 8 * u64::from(field - 7);
            let old = dword(&memory.contents(), u128::from(address)).unwrap_or(0);
            memory.fill(address, &tweak.apply(old, context).to_le_bytes());
        }
        field @ 11..=12 => {
            let (base, length) = if field == 11 {
                (layout.offsets, layout.vertices + 1)
            } else {
                (layout.sources, layout.arcs)
            };
            if length == 0 {
                return;
            }
            let address = base + 4 * (u64::from(mutation.index) % length);
            let old = word(&memory.contents(), u128::from(address)).unwrap_or(0);
            put_words(memory, address, &[tweak.apply32(old, context)]);
        }
        _ => command.kernel = tweak.apply32(command.kernel, context),
    }
}

/// Vertex `v`'s in-degree if its offsets are consistent and its sources `< vertices`.
fn good_degree(model: &Model, memory: &[u8], v: u64) -> Option<u64> {
    let word_at =
        |base: u64, i: u64| word(memory, u128::from(base) + 4 * u128::from(i)).expect("inside");
    let (start, stop) = (word_at(model.offsets, v), word_at(model.offsets, v + 1));
    (start <= stop
        && u64::from(stop) <= model.arcs
        && (start..stop).all(|k| u64::from(word_at(model.sources, u64::from(k))) < model.vertices))
    .then(|| u64::from(stop - start))
}

/// Checks the items of an accepted launch and runs a few of them.
fn check_items(kernel: &Kernel, model: &Model, command: &CommandDescriptor, memory: &mut Watched) {
    assert_eq!(u64::from(kernel.items()), model.vertices);
    assert_one_stage(kernel);
    let result = Span::new(command.result_address, u128::from(command.result_length));
    for index in first_middle_last(0..kernel.items()) {
        let vertex = u64::from(index);
        let degree = good_degree(model, &memory.contents(), vertex);
        let good = degree.is_some();
        let item_span = Span::new(command.result_address + 4 * vertex, 4);
        assert!(result.contains(&item_span));
        match kernel.item(index, &*memory) {
            Ok(item) => {
                assert_eq!(item.result_offset, 4 * vertex, "item {index}");
                assert_eq!(item.result_length, 4);
                if let Some(degree) = degree {
                    assert_eq!(item.cost, item_cost(degree), "item {index}");
                }
            }
            Err(status) => {
                assert!(
                    !good,
                    "item {index} of a consistent graph refused: {status:?}"
                );
                assert_eq!(status, FirmwareError::ArgumentOutOfRange);
            }
        }
        let outcome = execute_within(memory, &[item_span], "pagerank item", |memory| {
            kernel.execute(index, memory)
        });
        if good {
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

/// The check: panics exactly where the `pagerank_decode` fuzz target reports a finding.
pub fn check(data: &[u8]) {
    let target = KernelTarget {
        id: KernelId::PageRankGather,
        prepare,
        model,
        decode: |command, memory| PageRankKernel::decode(command, memory),
        wrap: Kernel::PageRank,
        check_items,
    };
    crate::kernel_check::check(&target, data);
}
