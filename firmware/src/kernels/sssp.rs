//! SSSP relaxation kernel: one round of topology-driven, pull-style Bellman-Ford over every
//! vertex, after M²NDP's own SSSP benchmark (`examples/benchmarks/sssp/kernel0.py`).
//!
//! # Device memory
//!
//! The weighted graph lives in device memory in CSR form, described by a [`SsspParameters`]
//! block the host writes once at load time (`args[0]` points at it; the block's layout is part
//! of the ABI, [`shared_abi::params::sssp`], re-exported here):
//!
//! | array | layout |
//! |---|---|
//! | offsets | `vertices + 1` little-endian `u32`: the arcs of `v` are `offsets[v]..offsets[v + 1]` (arcs sorted by their first endpoint) |
//! | targets | `arcs` `u32`: the other endpoint of each arc |
//! | weights | `arcs` `u32`: the length of each arc |
//!
//! The distances of the previous round are a vector of `vertices` `u32` (`args[1]`); the new
//! ones go to the result space, in the same layout. [`INFINITY`] means unreached.
//!
//! # Command ([`shared_abi::KernelId::SsspRelax`])
//!
//! | field | meaning |
//! |---|---|
//! | `args[0]` | device address of the [`SsspParameters`] block (8-byte aligned) |
//! | `args[1]` | device address of the previous distances: `vertices` `u32` |
//! | `args[2]`, `args[3]` | reserved, must be zero |
//! | `result_address`, `result_length` | the result space: exactly `4 * vertices` bytes, the new distances |
//! | `flags` | reserved, must be zero |
//!
//! A host runs rounds by ping-pong: launch `k`'s result space is launch `k + 1`'s previous
//! distances, so the host never writes a launch input (M²NDP's `vector1` and `vector2`).
//!
//! # Work items and result layout
//!
//! As in M²NDP, which runs one µthread per 32-byte packet of the kernel's base region (here
//! the previous distances): item `i` covers the [`VERTICES_PER_ITEM`] = 8 vertices `8 i ..
//! min(8 i + 8, vertices)` and writes, for each vertex `v`, at result offset `4 v`:
//!
//! `new[v] = min(prev[v], min over the arcs (v, u, w) of candidate(prev[u], w))`
//!
//! with [`candidate`]`(d, w) = d + w` saturating at [`INFINITY`]: an unreached neighbour never
//! improves anything, and a sum that would reach `u32::MAX` counts as unreached. This is exact
//! integer arithmetic (a minimum is order-free), and an item reads only the graph and the
//! previous distances, which no item writes: the result does not depend on the order or the
//! timing of the items (a Jacobi round, M²NDP's `vector1` to `vector2`). On an undirected graph
//! stored as two arcs per edge, pulling over a vertex's own arcs sees every arc into it, so the
//! round is exactly one Bellman-Ford round; rounds repeated until nothing changes give the
//! shortest distances from the vertices at distance 0.
//!
//! # Cost (kernel0's instruction sequence, by functional unit)
//!
//! The modelled µthread runs kernel0 with two changes of operation, not of count: `vsaddu.vv`
//! for its `vadd.vv` and `vredminu.vs` for its `vredmin.vs` (unsigned, saturating: M²NDP's
//! benchmark keeps signed 32-bit distances below a 99,999,999 sentinel instead). Its cost is
//! [`PACKET`] per item, [`PER_VERTEX`] per vertex, [`PER_ARC_GROUP`] per group of up to 8 arcs
//! of one vertex (kernel0's inner loop runs at least once, so a vertex without arcs costs one
//! group), [`PARTIAL_PACKET_EXIT`] for an item of fewer than 8 vertices, and
//! [`BYTES_PER_ARC`] per arc ([`item_cost`]). Classes follow M²NDP's `get_unit`
//! ([`ItemCost`]): `vsetvli` and `csrw` are scalar there; `vmv.x.s`, `vmv.s.x`, `vid.v`
//! and mask compares are vector.
//!
//! An indexed load (`vluxei32.v`) is one vector-memory instruction that keeps the vector
//! address unit busy one cycle per distinct 32-byte packet it touches (M²NDP
//! `execution_unit.cc`: `inst_issue_interval *= inst.addr_set.size()`): a pass gathering `k`
//! neighbours' distances adds `k - 1` cycles ([`ItemCost::indexed_extra_cycles`]); the targets
//! and weights are contiguous. [`BYTES_PER_ARC`] carries each gathered neighbour's burst.
//!
//! # Validation (everything a hostile host can send)
//!
//! - `kernel` is not SSSP: [`FirmwareError::UnknownKernel`]; `flags != 0`: [`FirmwareError::MalformedDescriptor`].
//! - `args[2]` or `args[3]` not zero, any address unaligned (parameters: 8, arrays, previous
//!   distances and result: 4), the parameter block, any array, the previous distances or the
//!   result overflowing or ending beyond device memory, `vertices` zero or `vertices + 1` not
//!   fitting a `u32`, `arcs` not fitting a `u32`, `result_length != 4 * vertices`, or the result
//!   overlapping the parameter block, an array or the previous distances:
//!   [`FirmwareError::ArgumentOutOfRange`] at decode.
//! - An item whose offsets decrease or exceed `arcs` fails with [`FirmwareError::ArgumentOutOfRange`]
//!   when it is described or executed; an arc whose target is `>= vertices` fails the item's
//!   execution with [`FirmwareError::ArgumentOutOfRange`]. A failed item writes nothing.
//!
//! Every size is computed with checked arithmetic; nothing here can panic.

use crate::error::FirmwareError;
use crate::hal::DeviceMemory;
use crate::kernels::ranges::{checked_csr_offsets, checked_range, overlaps, word_bytes};
use crate::kernels::{ItemCost, ItemSpec, VECTOR_LANES};
use shared_abi::{CommandDescriptor, DeviceAddress, KernelId};
use zerocopy::IntoBytes;

// The command's contract: the parameter block and the unreached distance.
pub use shared_abi::params::sssp::{
    SsspParameters, INFINITY, PARAMETERS_ALIGNMENT, PARAMETERS_BYTES,
};

/// Vertices per work item: one 32-byte packet of 4-byte distances, [`VECTOR_LANES`] (M²NDP's
/// `packet_size=32` and `simd_width=256`; kernel0's `elems_per_packet`).
pub const VERTICES_PER_ITEM: u32 = VECTOR_LANES as u32;

/// Arcs per group of kernel0's inner loop: one 8-lane indexed load of targets, weights and
/// neighbour distances.
pub const ARCS_PER_GROUP: u32 = VECTOR_LANES as u32;

/// Bytes of one packet (M²NDP's `packet_size=32`): 8 distances or 8 offsets.
pub const PACKET_BYTES: u64 = 32;

/// Bytes of result per vertex: its new distance.
pub const RESULT_BYTES_PER_VERTEX: u64 = 4;

/// Words the kernel stages per stack buffer (one unrolled loop iteration: 256 bytes).
pub const CHUNK_WORDS: usize = 64;

/// Bytes a random 4-byte access really moves: one DRAM burst ([`super::DRAM_BURST_BYTES`]).
/// Graph kernels read a neighbour's distance at an unpredictable address, so each such access
/// costs a full burst of device memory bandwidth.
pub const RANDOM_ACCESS_BYTES: u64 = super::DRAM_BURST_BYTES;

/// Per item (one packet), kernel0's lines outside its vertex loop:
///
/// - scalar, 11: `vsetvli`; `li x1` (scratchpad base); `add x4, x13, x2` and `add x13, x12, x2`
///   (the packet's row and `vector1` addresses); `addi`, `srli`, `sub` and `bgez` (does a next
///   row packet exist?); `li x7, 8`; `li x13, 0`; `add x13, x3, x2` (the store address);
/// - scalar memory, 8: seven `ld` of the kernel arguments from the scratchpad (row, `vector1`,
///   `vector2`, node count, col, data, node bound; scratchpad: no device bytes) and the `lw`
///   of the next packet's first row offset (the end of the packet's last vertex; kernel0 skips
///   it on the last packet, our item always loads it: the offsets hold `vertices + 1` words);
/// - vector, 4: `vmv.v.i v3` (the new distances start at infinity), `vmv.v.v`,
///   `vslide1down.vx` and `vsub.vv` (the 8 degrees from the row packet);
/// - vector memory, 3: `vle32.v` of the row packet and of the `vector1` packet, `vse32.v` of
///   the new packet;
/// - bytes, 96: the row-offset packet and the distance packet streamed, the 32-byte store. (The
///   next packet's first offset is the first word of the next item's row packet: the offsets
///   stream once over the launch.)
pub const PACKET: ItemCost = ItemCost {
    scalar: 11,
    scalar_memory: 8,
    vector: 4,
    vector_memory: 3,
    indexed_extra_cycles: 0,
    bytes: 3 * PACKET_BYTES,
};

/// Per vertex, kernel0's vertex loop (`.LOOP0`) outside the arc loop:
///
/// - scalar, 10: `srli`, `add` and `ble` (the vertex bound check), three `csrw vstart` (to
///   extract lane `count`), `add x11` (the end of its arcs), `csrw vstart` (to insert it),
///   `addi x13` and `bgt` (the vertex loop);
/// - vector, 4: three `vmv.x.s` (its distance, first arc and degree out of the packet
///   registers) and `vmv.s.x v3` (its new distance into the result packet).
pub const PER_VERTEX: ItemCost = ItemCost {
    scalar: 10,
    scalar_memory: 0,
    vector: 4,
    vector_memory: 0,
    indexed_extra_cycles: 0,
    bytes: 0,
};

/// Per group of up to 8 arcs of one vertex, one pass of kernel0's arc loop (`.LOOP1`):
///
/// - vector, 10: `vid.v`, `vadd.vx` (the arc indices), `vmslt.vx` (the lane mask), `vsll.vi`
///   (index to byte offset), `vsll.vi` (target to byte offset), `vsaddu.vv` (the candidates),
///   `vmv.v.i` and `vmv.s.x` (the reduction's start: the running minimum), `vredminu.vs`,
///   `vmv.x.s` (the new running minimum);
/// - vector memory, 3: `vluxei32.v` of the targets, of the weights, and of the neighbours'
///   previous distances;
/// - scalar, 2: `addi x9` and `bgt` (the arc loop).
pub const PER_ARC_GROUP: ItemCost = ItemCost {
    scalar: 2,
    scalar_memory: 0,
    vector: 10,
    vector_memory: 3,
    indexed_extra_cycles: 0,
    bytes: 0,
};

/// For an item of fewer than 8 vertices (the last one), the bound check that ends kernel0's
/// vertex loop early (`srli`, `add`, `ble`: 3 scalar); a full packet leaves the loop through
/// its counter instead.
pub const PARTIAL_PACKET_EXIT: ItemCost = ItemCost::scalar(3);

/// Device bytes per arc: its target and weight words (4 + 4, contiguous for a vertex's arcs,
/// so streamed) and the neighbour's previous distance, gathered from an unpredictable address
/// ([`RANDOM_ACCESS_BYTES`], one burst).
pub const BYTES_PER_ARC: u64 = 8 + RANDOM_ACCESS_BYTES;

/// The candidate distance through an arc of length `weight` from a neighbour at `distance`:
/// the sum, saturating at [`INFINITY`] (an unreached neighbour stays unreached).
pub const fn candidate(distance: u32, weight: u32) -> u32 {
    distance.saturating_add(weight)
}

/// Passes of kernel0's arc loop for a vertex of `degree` arcs: `ceil(degree / 8)`, at least
/// one (the loop tests its condition at the end).
pub const fn arc_groups(degree: u32) -> u64 {
    let groups = degree.div_ceil(ARCS_PER_GROUP) as u64;
    if groups == 0 {
        1
    } else {
        groups
    }
}

/// The modelled cost of an item whose vertices (at most 8) have the out-degrees `degrees`:
/// [`PACKET`], [`PER_VERTEX`] per vertex, [`PER_ARC_GROUP`] per pass of each vertex's arc loop
/// ([`arc_groups`]), [`PARTIAL_PACKET_EXIT`] for a short last packet and [`BYTES_PER_ARC`] per
/// arc, plus the gathers' extra address-unit cycles: a pass's gather of `k` neighbours'
/// distances from random lines addresses `k` distinct packets, `k - 1` cycles more than one
/// instruction, so a vertex of `d` arcs adds `d - arc_groups(d)` (none for a vertex without
/// arcs, whose one pass has every lane masked off; the targets and weights are contiguous: one
/// packet, or two across a boundary, counted as one). Saturates instead of overflowing.
pub fn item_cost(degrees: &[u32]) -> ItemCost {
    match <&[u32; VERTICES_PER_ITEM as usize]>::try_from(degrees) {
        // A full item, the commonest case.
        Ok(full) => full_item_cost(full),
        Err(_) => item_cost_saturating(degrees),
    }
}

/// [`item_cost`] of a full item (8 vertices) in plain (wrapping) arithmetic: nothing can
/// wrap or saturate (8 degrees below 2^32 make fewer than 2^35 arcs and passes, times at most
/// [`BYTES_PER_ARC`] < 2^7), so every sum is the saturating form's exactly.
///
/// Without a branch per vertex: a vertex of `d` arcs makes `ceil(d / 8)` passes, or one more
/// when `d` is 0 ([`arc_groups`]), and `d - ceil(d / 8)` extra gather cycles (0 for `d = 0`,
/// as the saturating form's `d - passes`), so the item's passes are the ceilings' sum plus its
/// vertices without arcs, and its extra cycles its arcs less the ceilings' sum.
#[inline]
fn full_item_cost(degrees: &[u32; VERTICES_PER_ITEM as usize]) -> ItemCost {
    let (mut ceilings, mut arcs, mut empty) = (0_u64, 0_u64, 0_u64);
    for &degree in degrees {
        let degree = u64::from(degree);
        arcs = arcs.wrapping_add(degree);
        let per_group = u64::from(ARCS_PER_GROUP);
        ceilings = ceilings.wrapping_add(degree.div_ceil(per_group));
        empty = empty.wrapping_add(u64::from(degree == 0));
    }
    // At most `arcs`: each vertex's ceiling is at most its degree.
    full_cost(
        ceilings.wrapping_add(empty),
        arcs,
        arcs.wrapping_sub(ceilings),
    )
}

/// [`item_cost`] of a full item whose 9 offsets (its 8 vertices' arcs, `offsets[v]
/// ..offsets[v + 1]`) do not decrease, as [`SsspKernel::span`] checked: [`full_item_cost`] of
/// their differences (each exact; the item's arcs, `offsets[8] - offsets[0]`, fit a `u32`, and
/// the sum of its vertices' ceilings is at most that, so nothing here wraps).
///
/// Without a division per vertex: `8 ceil(d / 8)` is `d` plus the lanes its last pass leaves
/// unused, `-d mod 8` (0 when 8 divides `d`), so the item's ceilings are its arcs plus those
/// lanes (at most 7 per vertex), over 8, exactly.
#[inline(always)]
fn offsets_item_cost(offsets: &[u32; VERTICES_PER_ITEM as usize + 1]) -> ItemCost {
    const _: () = assert!(ARCS_PER_GROUP.is_power_of_two());
    let (mut unused, mut empty) = (0_u32, 0_u32);
    for (start, end) in offsets.iter().zip(offsets.iter().skip(1)) {
        // `-degree mod 8`.
        unused = unused.wrapping_add(start.wrapping_sub(*end) & (ARCS_PER_GROUP - 1));
        empty = empty.wrapping_add(u32::from(start == end));
    }
    let [first, .., last] = *offsets;
    let arcs = u64::from(last.wrapping_sub(first));
    const PER_GROUP: u64 = ARCS_PER_GROUP as u64;
    let ceilings = arcs.wrapping_add(u64::from(unused)) / PER_GROUP;
    full_cost(
        ceilings.wrapping_add(u64::from(empty)),
        arcs,
        arcs.wrapping_sub(ceilings),
    )
}

/// The cost of a full item (8 vertices) of `groups` arc-loop passes, `arcs` arcs and `extra`
/// extra gather cycles, in plain arithmetic (see [`full_item_cost`]: nothing wraps).
#[inline(always)]
fn full_cost(groups: u64, arcs: u64, extra: u64) -> ItemCost {
    let vertices = u64::from(VERTICES_PER_ITEM);
    let sum = |packet: u64, vertex: u64, group: u64| {
        packet
            .wrapping_add(vertex.wrapping_mul(vertices))
            .wrapping_add(group.wrapping_mul(groups))
    };
    ItemCost {
        scalar: sum(PACKET.scalar, PER_VERTEX.scalar, PER_ARC_GROUP.scalar),
        scalar_memory: sum(
            PACKET.scalar_memory,
            PER_VERTEX.scalar_memory,
            PER_ARC_GROUP.scalar_memory,
        ),
        vector: sum(PACKET.vector, PER_VERTEX.vector, PER_ARC_GROUP.vector),
        vector_memory: sum(
            PACKET.vector_memory,
            PER_VERTEX.vector_memory,
            PER_ARC_GROUP.vector_memory,
        ),
        indexed_extra_cycles: sum(
            PACKET.indexed_extra_cycles,
            PER_VERTEX.indexed_extra_cycles,
            PER_ARC_GROUP.indexed_extra_cycles,
        )
        .wrapping_add(extra),
        bytes: sum(PACKET.bytes, PER_VERTEX.bytes, PER_ARC_GROUP.bytes)
            .wrapping_add(arcs.wrapping_mul(BYTES_PER_ARC)),
    }
}

/// [`item_cost`] for any number of degrees, every sum saturating.
fn item_cost_saturating(degrees: &[u32]) -> ItemCost {
    let vertices = degrees.len() as u64;
    let (mut groups, mut arcs, mut extra) = (0_u64, 0_u64, 0_u64);
    for &degree in degrees {
        let passes = arc_groups(degree);
        groups = groups.saturating_add(passes);
        arcs = arcs.saturating_add(u64::from(degree));
        extra = extra.saturating_add(u64::from(degree).saturating_sub(passes));
    }
    let cost = PACKET
        .plus(PER_VERTEX.times(vertices))
        .plus(PER_ARC_GROUP.times(groups))
        .plus(ItemCost::bytes(arcs.saturating_mul(BYTES_PER_ARC)))
        .plus(ItemCost::indexed_extra_cycles(extra));
    if vertices < u64::from(VERTICES_PER_ITEM) {
        cost.plus(PARTIAL_PACKET_EXIT)
    } else {
        cost
    }
}

/// `base + index * 4`, checked.
#[inline]
pub(crate) fn word_address(base: u64, index: u64) -> Result<DeviceAddress, FirmwareError> {
    index
        .checked_mul(4)
        .and_then(|offset| base.checked_add(offset))
        .map(DeviceAddress)
        .ok_or(FirmwareError::ArgumentOutOfRange)
}

/// The little-endian `u32` at `base + 4 * index`.
pub(crate) fn read_word<M: DeviceMemory>(
    memory: &M,
    base: u64,
    index: u64,
) -> Result<u32, FirmwareError> {
    let mut word = [0_u8; 4];
    memory.read(word_address(base, index)?, &mut word)?;
    Ok(u32::from_le_bytes(word))
}

/// Reads `count` (at most `words.len()`) little-endian `u32` at `base + 4 * index` into the
/// front of `words` (straight into them: no staging buffer).
///
/// Always inlined: the kernels call it once or twice per vertex, and as a call (the
/// optimiser's choice) its set-up cost more than the short read itself (`docs/testing.md`).
#[inline(always)]
pub(crate) fn read_words<M: DeviceMemory>(
    memory: &M,
    base: u64,
    index: u64,
    count: usize,
    words: &mut [u32],
) -> Result<(), FirmwareError> {
    let words = words
        .get_mut(..count)
        .ok_or(FirmwareError::ArgumentOutOfRange)?;
    memory.read(word_address(base, index)?, words.as_mut_bytes())?;
    for word in words.iter_mut() {
        *word = u32::from_le(*word);
    }
    Ok(())
}

/// Whether every one of `indices` is below `limit`: one pass without a branch per index (the
/// comparisons of a whole vector of indices or-ed together).
#[inline(always)]
pub(crate) fn all_below(indices: &[u32], limit: u32) -> bool {
    indices
        .iter()
        .fold(0_u32, |outside, index| outside | u32::from(*index >= limit))
        == 0
}

/// Items between a description and the later one whose offsets it hints: the CCM starts
/// items about in index order (FIFO) or dealt out over its 16 units (round robin: a unit's
/// next item is 16 on).
pub(crate) const PREFETCH_ITEMS_AHEAD: u64 = 16;

/// Bytes between two [`DeviceMemory::prefetch`] hints along an array: a common cache line.
pub(crate) const PREFETCH_STRIDE_BYTES: u64 = 64;

/// Lines of the distances and of the offsets [`SsspKernel::execute`] hints from the next
/// item's first vertex. A hint changes no result and no figure of the model, only the
/// simulator's speed. Measured (2026-12-03, 11:56 to 11:59 UTC, load 1.3 to 1.5, 30 rounds of
/// `axle run sssp --mode axle --data ../shared/data` alternating four builds, the loop's
/// events a second at the medians of the ratios to 1 and 2 lines): 2 and 4 lines 1.08, 4
/// and 8 lines 1.10 and 1.14, 8 and 16 lines 1.20 and 1.24, 16 and 32 lines 1.23: 8 is
/// where it stops paying.
const RUN_AHEAD_LINES: u64 = 8;

/// Lines of the arcs' targets and of their weights [`SsspKernel::execute`] hints from where
/// the item's arcs end (measured with [`RUN_AHEAD_LINES`]).
const ARCS_AHEAD_LINES: u64 = 16;

/// Hints (no read) `LINES` consecutive lines from the word at `base + 4 * index`: the front
/// of an array run a later read will stream (a line past the run is a harmless hint).
#[inline(always)]
pub(crate) fn prefetch_words<M: DeviceMemory, const LINES: u64>(memory: &M, base: u64, index: u64) {
    let start = base.wrapping_add(index.wrapping_mul(4));
    for line in 0..LINES {
        memory.prefetch(DeviceAddress(
            start.wrapping_add(line.wrapping_mul(PREFETCH_STRIDE_BYTES)),
        ));
    }
}

/// The differences of neighbouring offsets, `offsets[v + 1] - offsets[v]` (negative where they
/// decrease), numbered by `v`.
#[inline(always)]
fn steps_between(
    offsets: &[u32; VERTICES_PER_ITEM as usize + 1],
) -> impl Iterator<Item = (usize, i64)> + '_ {
    offsets
        .iter()
        .zip(offsets.iter().skip(1))
        .map(|(earlier, later)| i64::from(*later).wrapping_sub(i64::from(*earlier)))
        .enumerate()
}

/// An item's vertices and their checked arc offsets.
#[derive(Clone, Copy, Debug)]
struct Span {
    /// First vertex.
    first: u64,
    /// Vertices (1..=8).
    count: usize,
    /// `offsets[first ..= first + count]`, not decreasing, at most `arcs`.
    offsets: [u32; VERTICES_PER_ITEM as usize + 1],
}

impl Span {
    /// The arcs of the item's `lane`-th vertex.
    fn arcs(&self, lane: usize) -> Result<(u64, u64), FirmwareError> {
        let start = self
            .offsets
            .get(lane)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let end = self
            .offsets
            .get(
                lane.checked_add(1)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?,
            )
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        Ok((u64::from(*start), u64::from(*end)))
    }
}

/// A decoded, validated SSSP relaxation launch.
///
/// # Invariants
///
/// The parameter block, the offsets, targets and weights, the previous distances and the
/// result lie inside the device memory the command was decoded against; the result overlaps
/// none of the others; `0 < vertices < u32::MAX`, `arcs <= u32::MAX`; `items ==
/// ceil(vertices / 8)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SsspKernel {
    parameters: SsspParameters,
    previous: u64,
    result: u64,
    items: u32,
}

impl SsspKernel {
    /// Decodes and validates `command` against device memory (read only; see the module docs
    /// for every rule). Never panics.
    pub fn decode<M: DeviceMemory>(
        command: &CommandDescriptor,
        memory: &M,
    ) -> Result<Self, FirmwareError> {
        if command.kernel != KernelId::SsspRelax as u32 {
            return Err(FirmwareError::UnknownKernel);
        }
        if command.flags != 0 {
            return Err(FirmwareError::MalformedDescriptor);
        }
        let size = memory.size();
        let [parameters_address, previous, reserved_a, reserved_b] = command.args;
        if reserved_a != 0 || reserved_b != 0 {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let parameters_range = checked_range(
            parameters_address,
            PARAMETERS_BYTES as u64,
            PARAMETERS_ALIGNMENT,
            size,
        )?;
        let parameters: SsspParameters = memory
            .read_value(DeviceAddress(parameters_address))
            .map_err(|_| FirmwareError::ArgumentOutOfRange)?;
        let vertices = parameters.vertices;
        let offsets_range =
            checked_csr_offsets(vertices, parameters.arcs, parameters.offsets, size)?;
        let targets_range =
            checked_range(parameters.targets, word_bytes(parameters.arcs)?, 4, size)?;
        let weights_range =
            checked_range(parameters.weights, word_bytes(parameters.arcs)?, 4, size)?;
        let previous_range = checked_range(previous, word_bytes(vertices)?, 4, size)?;
        let result_bytes = vertices
            .checked_mul(RESULT_BYTES_PER_VERTEX)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        if command.result_length != result_bytes {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let result_range = checked_range(command.result_address, result_bytes, 4, size)?;
        if [
            parameters_range,
            offsets_range,
            targets_range,
            weights_range,
            previous_range,
        ]
        .iter()
        .any(|range| overlaps(*range, result_range))
        {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let vertices = u32::try_from(vertices).map_err(|_| FirmwareError::ArgumentOutOfRange)?;
        Ok(SsspKernel {
            parameters,
            previous,
            result: command.result_address,
            items: vertices.div_ceil(VERTICES_PER_ITEM),
        })
    }

    /// The graph's parameter block.
    pub fn parameters(&self) -> SsspParameters {
        self.parameters
    }

    /// Device address of the previous distances.
    pub fn previous(&self) -> u64 {
        self.previous
    }

    /// Work items: `ceil(vertices / 8)`.
    pub fn items(&self) -> u32 {
        self.items
    }

    /// Item `index`'s result range `(offset, length)` without reading device memory: what
    /// [`SsspKernel::item`] gives whenever it accepts the item (`32 i`, 4 bytes per vertex, so
    /// fewer for a short last item); `None` past the last item. An item whose offsets are
    /// inconsistent is refused by [`SsspKernel::item`] and by [`SsspKernel::execute`] alike.
    pub fn result_range(&self, index: u32) -> Option<(u64, u32)> {
        if index >= self.items {
            return None;
        }
        let per_item = u64::from(VERTICES_PER_ITEM);
        let first = u64::from(index).checked_mul(per_item)?;
        let end = first.checked_add(per_item)?.min(self.parameters.vertices);
        let count = end.checked_sub(first)?;
        Some((
            first.checked_mul(RESULT_BYTES_PER_VERTEX)?,
            u32::try_from(count.checked_mul(RESULT_BYTES_PER_VERTEX)?).ok()?,
        ))
    }

    /// Item `index`'s vertices and their offsets (read: the row packet and the next offset),
    /// checked not to decrease nor exceed `arcs`.
    #[inline(always)]
    fn span<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<Span, FirmwareError> {
        if index >= self.items {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let per_item = u64::from(VERTICES_PER_ITEM);
        let first = u64::from(index)
            .checked_mul(per_item)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let end = first
            .checked_add(per_item)
            .ok_or(FirmwareError::ArgumentOutOfRange)?
            .min(self.parameters.vertices);
        let count = usize::try_from(
            end.checked_sub(first)
                .ok_or(FirmwareError::ArgumentOutOfRange)?,
        )
        .map_err(|_| FirmwareError::ArgumentOutOfRange)?;
        // Read straight into the value returned (a copy of the offsets just stored, as wider
        // loads than those stores, would wait for them to reach the cache).
        let mut span = Span {
            first,
            count,
            offsets: [0_u32; VERTICES_PER_ITEM as usize + 1],
        };
        let row = count
            .checked_add(1)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        // A full item (all but the last) reads a constant 9 words, which inlines without a
        // loop. Not decreasing, so at most `arcs` exactly when the last one is (checked for
        // all words at once, without a branch per word: a decreasing pair of neighbouring
        // words has a negative difference, which sets the sign bit of their differences'
        // bitwise or; a pair past the `row` words read counts as ordered).
        let mut steps = 0_i64;
        if row == span.offsets.len() {
            read_words(
                memory,
                self.parameters.offsets,
                first,
                span.offsets.len(),
                &mut span.offsets,
            )?;
            // As `u32` comparisons (a whole vector of pairs at once): a decreasing pair sets
            // the sign bit as its negative difference would.
            let decreasing = span
                .offsets
                .iter()
                .zip(span.offsets.iter().skip(1))
                .fold(0_u32, |decreasing, (earlier, later)| {
                    decreasing | u32::from(later < earlier)
                });
            steps = i64::from(decreasing).wrapping_neg();
        } else {
            read_words(
                memory,
                self.parameters.offsets,
                first,
                row,
                &mut span.offsets,
            )?;
            for (pair, step) in steps_between(&span.offsets) {
                // Pair `pair` joins words `pair` and `pair + 1`: both read when `pair < count`.
                steps |= step & i64::from(pair < count).wrapping_neg();
            }
        }
        let ordered = steps >= 0;
        let last = *span
            .offsets
            .get(count)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        if !ordered || u64::from(last) > self.parameters.arcs {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        Ok(span)
    }

    /// Item `index`: result offset `32 i`, 4 bytes per vertex, cost [`item_cost`] (its
    /// vertices' degrees read from the offsets).
    pub fn item<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<ItemSpec, FirmwareError> {
        let span = self.span(index, memory)?;
        let cost = if span.count == VERTICES_PER_ITEM as usize {
            // A full item, the commonest case: the cost straight from the 9 offsets, which
            // `span` checked not to decrease.
            offsets_item_cost(&span.offsets)
        } else {
            let mut degrees = [0_u32; VERTICES_PER_ITEM as usize];
            for (lane, degree) in (0..span.count).zip(degrees.iter_mut()) {
                let (start, end) = span.arcs(lane)?;
                *degree = end
                    .checked_sub(start)
                    .and_then(|degree| u32::try_from(degree).ok())
                    .ok_or(FirmwareError::ArgumentOutOfRange)?;
            }
            item_cost_saturating(
                degrees
                    .get(..span.count)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?,
            )
        };
        let vertices = span.count as u64;
        self.prefetch_run(&span, memory);
        Ok(ItemSpec {
            result_offset: span
                .first
                .checked_mul(RESULT_BYTES_PER_VERTEX)
                .ok_or(FirmwareError::ArgumentOutOfRange)?,
            result_length: u32::try_from(
                vertices
                    .checked_mul(RESULT_BYTES_PER_VERTEX)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?,
            )
            .map_err(|_| FirmwareError::ArgumentOutOfRange)?,
            cost,
        })
    }

    /// Hints (no read) the offsets a later description reads: those of the item
    /// [`PREFETCH_ITEMS_AHEAD`] on.
    #[inline(always)]
    fn prefetch_run<M: DeviceMemory>(&self, span: &Span, memory: &M) {
        let ahead = span
            .first
            .wrapping_add(PREFETCH_ITEMS_AHEAD * u64::from(VERTICES_PER_ITEM));
        prefetch_words::<_, 1>(memory, self.parameters.offsets, ahead);
    }

    /// Hints (no read) what the items after this one will read, as far as this item's
    /// offsets tell: [`RUN_AHEAD_LINES`] lines of the distances and of the offsets from the next
    /// item's vertex (16 items of 8 vertices), and [`ARCS_AHEAD_LINES`] of the targets and of
    /// the weights from where this item's arcs end (256 arcs: about 11 items of the road
    /// graph's 2.8 arcs a vertex).
    ///
    /// A wide window, not the next item's lines alone, because the items do not end in their
    /// order: with the CCM's round robin over its 16 units, of the paper-scale SSSP run's
    /// items only about 1% end right after the item before them by index, and about 60% more
    /// than 64 items away from the one that ended before them (counted on 2026-12-03 by a
    /// throwaway counter in the CCM's item end). What this item hints, the later items that
    /// end around it find in the cache.
    #[inline(always)]
    fn prefetch_next_run<M: DeviceMemory>(&self, span: &Span, memory: &M) {
        let Some(&next) = span.offsets.get(span.count) else {
            return;
        };
        let next = u64::from(next);
        let parameters = &self.parameters;
        let first = span.first.wrapping_add(u64::from(VERTICES_PER_ITEM));
        prefetch_words::<_, RUN_AHEAD_LINES>(memory, self.previous, first);
        prefetch_words::<_, RUN_AHEAD_LINES>(memory, parameters.offsets, first);
        prefetch_words::<_, ARCS_AHEAD_LINES>(memory, parameters.targets, next);
        prefetch_words::<_, ARCS_AHEAD_LINES>(memory, parameters.weights, next);
    }

    /// Runs item `index`: the new distance of each of its vertices (see the module docs),
    /// written at `4 v` of the result in one store once all are known (a failed item writes
    /// nothing).
    ///
    /// The reads, in order: for each vertex, its previous distance, then per run of up to
    /// [`CHUNK_WORDS`] of its arcs their targets, their weights, and each target's previous
    /// distance (after checking that target), stopping at the first failure. On a memory whose
    /// reads nobody observes ([`DeviceMemory::unobserved_reads`]) an item of at most
    /// [`CHUNK_WORDS`] arcs reads the same words in whole runs instead (its vertices' previous
    /// distances, the targets of all its arcs, checked at once, one
    /// [`DeviceMemory::read_u32_gather`] of their distances, then the weights of all its arcs),
    /// and falls back to that order on any failure: the same result and the same error.
    pub fn execute<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<(), FirmwareError> {
        let span = self.span(index, memory)?;
        let parameters = self.parameters;
        self.prefetch_next_run(&span, memory);
        let mut packet = [0_u8; VECTOR_LANES * 4];
        let length = span
            .count
            .checked_mul(4)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        if memory.unobserved_reads() && self.relax_runs(&span, memory, &mut packet) {
            let address = word_address(self.result, span.first)?;
            if span.count == VERTICES_PER_ITEM as usize {
                // A full item, the commonest: a store of constant length (no test of it).
                memory.write(address, &packet)?;
            } else {
                let bytes = packet
                    .get(..length)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?;
                memory.write(address, bytes)?;
            }
            return Ok(());
        }
        // The per-vertex reads' buffers, set up only on this path.
        let mut targets = [0_u32; CHUNK_WORDS];
        let mut weights = [0_u32; CHUNK_WORDS];
        for (lane, slot) in packet.chunks_exact_mut(4).take(span.count).enumerate() {
            let vertex = span
                .first
                .checked_add(lane as u64)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            let mut best = read_word(memory, self.previous, vertex)?;
            let (mut arc, end) = span.arcs(lane)?;
            while arc < end {
                let chunk = usize::try_from(
                    end.checked_sub(arc)
                        .ok_or(FirmwareError::ArgumentOutOfRange)?
                        .min(CHUNK_WORDS as u64),
                )
                .map_err(|_| FirmwareError::ArgumentOutOfRange)?;
                read_words(memory, parameters.targets, arc, chunk, &mut targets)?;
                read_words(memory, parameters.weights, arc, chunk, &mut weights)?;
                for (target, weight) in targets.iter().zip(weights.iter()).take(chunk) {
                    let target = u64::from(*target);
                    if target >= parameters.vertices {
                        return Err(FirmwareError::ArgumentOutOfRange);
                    }
                    let neighbour = read_word(memory, self.previous, target)?;
                    best = best.min(candidate(neighbour, *weight));
                }
                arc = arc
                    .checked_add(chunk as u64)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?;
            }
            slot.copy_from_slice(&best.to_le_bytes());
        }
        let bytes = packet
            .get(..length)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        memory.write(word_address(self.result, span.first)?, bytes)?;
        Ok(())
    }
}

impl SsspKernel {
    /// [`Self::execute`]'s new distances of `span`'s vertices into `packet`, from whole runs:
    /// the vertices' previous distances, the targets of all their arcs (at most
    /// [`CHUNK_WORDS`]), every target checked at once, one gather of the targets' previous
    /// distances, then the weights of all their arcs (over the targets, no longer needed: two
    /// buffers of [`CHUNK_WORDS`], not three). The same words as the per-vertex reads, in
    /// another order and grouping, so only for a memory whose reads nobody observes.
    /// Returns false, with `packet` unspecified, when the item has more arcs or any read or
    /// target fails: the caller then makes the per-vertex reads, which report the failure in
    /// their order.
    #[inline(always)]
    fn relax_runs<M: DeviceMemory>(
        &self,
        span: &Span,
        memory: &M,
        packet: &mut [u8; VECTOR_LANES * 4],
    ) -> bool {
        let parameters = &self.parameters;
        let (Some(&start), Some(&end)) = (span.offsets.first(), span.offsets.get(span.count))
        else {
            return false;
        };
        // The offsets do not decrease (`span`).
        let Ok(arcs) = usize::try_from(end.wrapping_sub(start)) else {
            return false;
        };
        if arcs > CHUNK_WORDS {
            return false;
        }
        let first_arc = u64::from(start);
        let mut previous = [0_u32; VERTICES_PER_ITEM as usize];
        // The targets, then the weights.
        let mut runs = [0_u32; CHUNK_WORDS];
        let mut all_neighbours = [0_u32; CHUNK_WORDS];
        // A full item, the commonest, reads a constant 8 distances (no test of the count).
        let own = if span.count == previous.len() {
            read_words(
                memory,
                self.previous,
                span.first,
                previous.len(),
                &mut previous,
            )
        } else {
            read_words(memory, self.previous, span.first, span.count, &mut previous)
        };
        if own.is_err()
            || read_words(memory, parameters.targets, first_arc, arcs, &mut runs).is_err()
        {
            return false;
        }
        let (Some(targets), Some(neighbours)) = (runs.get(..arcs), all_neighbours.get_mut(..arcs))
        else {
            return false;
        };
        // Below `u32::MAX` (decode): the bound as a `u32`, compared without widening. Checked
        // up to the next multiple of 8 words (at most `CHUNK_WORDS`), whole vectors without a
        // scalar tail: the words past the targets are the buffer's fresh zeros, below any
        // `vertices` (at least 1).
        let (Ok(vertices), Some(padded)) = (
            u32::try_from(parameters.vertices),
            runs.get(..arcs.next_multiple_of(VECTOR_LANES)),
        ) else {
            return false;
        };
        if !all_below(padded, vertices)
            || memory
                .read_u32_gather(self.previous, targets, neighbours)
                .is_err()
            || read_words(memory, parameters.weights, first_arc, arcs, &mut runs).is_err()
        {
            return false;
        }
        relax_lanes(span, &previous, &mut all_neighbours, &runs, packet);
        true
    }
}

/// [`SsspKernel::relax_runs`]' last step, as a call of its own (its loops then keep their
/// values in registers): the new distance of each of `span`'s vertices into `packet`, its
/// `previous` distance or its arcs' least candidate. Arc `k` of the item (from its first) is
/// `neighbours[k]` (the neighbour's previous distance) and `weights[k]`; a vertex's arcs end
/// at its next offset less the item's first, at most `CHUNK_WORDS` (the offsets do not
/// decrease and `relax_runs` took only items of at most that many arcs), so no arc index goes
/// out of the buffers. First each arc's candidate replaces its neighbour's distance, in whole
/// vectors of 8 arcs (past the item's arcs, up to the next multiple of 8, the lanes hold
/// values nobody reads), then each vertex takes the least of its arcs' candidates.
///
/// A full item (8 vertices, all but the last) takes a copy of the loop made for exactly 8
/// (no test of the count per vertex).
#[inline(never)]
fn relax_lanes(
    span: &Span,
    previous: &[u32; VERTICES_PER_ITEM as usize],
    neighbours: &mut [u32; CHUNK_WORDS],
    weights: &[u32; CHUNK_WORDS],
    packet: &mut [u8; VECTOR_LANES * 4],
) {
    let (Some(start), Some(end)) = (span.offsets.first(), span.offsets.get(span.count)) else {
        return;
    };
    let vectors = (end.wrapping_sub(*start) as usize)
        .min(CHUNK_WORDS)
        .div_ceil(VECTOR_LANES);
    for vector in 0..vectors {
        let first = vector.wrapping_mul(VECTOR_LANES);
        let lanes = first..first.wrapping_add(VECTOR_LANES);
        if let (Some(neighbours), Some(weights)) =
            (neighbours.get_mut(lanes.clone()), weights.get(lanes))
        {
            for (neighbour, weight) in neighbours.iter_mut().zip(weights) {
                *neighbour = candidate(*neighbour, *weight);
            }
        }
    }
    if span.count == VERTICES_PER_ITEM as usize {
        relax_first(
            VERTICES_PER_ITEM as usize,
            span,
            previous,
            neighbours,
            packet,
        );
    } else {
        relax_first(span.count, span, previous, neighbours, packet);
    }
}

/// [`relax_lanes`] of `span`'s first `count` vertices, from the arcs' `candidates`.
#[inline(always)]
fn relax_first(
    count: usize,
    span: &Span,
    previous: &[u32; VERTICES_PER_ITEM as usize],
    candidates: &[u32; CHUNK_WORDS],
    packet: &mut [u8; VECTOR_LANES * 4],
) {
    let [start, ..] = span.offsets;
    let mut arc = 0_usize;
    let lanes = packet
        .chunks_exact_mut(4)
        .zip(previous.iter().zip(span.offsets.iter().skip(1)))
        .take(count);
    for (slot, (own, next)) in lanes {
        let end = (next.wrapping_sub(start) as usize).min(CHUNK_WORDS);
        let mut best = *own;
        while arc < end {
            if let Some(candidate) = candidates.get(arc) {
                best = best.min(*candidate);
            }
            arc = arc.wrapping_add(1);
        }
        slot.copy_from_slice(&best.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    type FakeMemory = crate::testing::FakeDeviceMemory;

    const MEMORY: u64 = 1 << 16;
    const PARAMETERS: u64 = 0x100;
    const OFFSETS: u64 = 0x400;
    const TARGETS: u64 = 0x800;
    const WEIGHTS: u64 = 0x1400;
    /// The two distance buffers the rounds ping-pong between.
    const A: u64 = 0x2000;
    const B: u64 = 0x3000;
    const I: u32 = INFINITY;
    /// What fresh memory holds, so an unwritten result word is visible.
    const UNTOUCHED: u32 = 0xA5A5_A5A5;

    fn put_words(memory: &mut FakeMemory, address: u64, words: &[u32]) {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        memory.write(DeviceAddress(address), &bytes).unwrap();
    }

    fn words(memory: &FakeMemory, address: u64, count: usize) -> Vec<u32> {
        memory
            .bytes(DeviceAddress(address), count as u64 * 4)
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect()
    }

    /// The symmetric CSR of weighted undirected `edges` (arcs sorted by target).
    fn csr(vertices: usize, edges: &[(u32, u32, u32)]) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
        let mut lists = vec![Vec::new(); vertices];
        for &(u, v, w) in edges {
            lists[u as usize].push((v, w));
            lists[v as usize].push((u, w));
        }
        let (mut offsets, mut targets, mut weights) = (vec![0], Vec::new(), Vec::new());
        for list in &mut lists {
            list.sort_unstable();
            for &(t, w) in list.iter() {
                targets.push(t);
                weights.push(w);
            }
            offsets.push(targets.len() as u32);
        }
        (offsets, targets, weights)
    }

    /// 0 -4- 1, 0 -1- 2, 1 -2- 2, 1 -5- 3, 2 -8- 3; 4 isolated.
    fn small_graph() -> (Vec<u32>, Vec<u32>, Vec<u32>) {
        csr(5, &[(0, 1, 4), (0, 2, 1), (1, 2, 2), (1, 3, 5), (2, 3, 8)])
    }

    /// A path 0 - 1 - ... - 19, edge `{v, v + 1}` of length `v + 1`.
    fn path_graph() -> (Vec<u32>, Vec<u32>, Vec<u32>) {
        let edges: Vec<(u32, u32, u32)> = (0..19).map(|v| (v, v + 1, v + 1)).collect();
        csr(20, &edges)
    }

    /// Loads `graph` with `previous` in buffer `A`; returns the memory and the command that
    /// relaxes from `A` into `B`.
    fn setup(
        graph: &(Vec<u32>, Vec<u32>, Vec<u32>),
        previous: &[u32],
    ) -> (FakeMemory, CommandDescriptor) {
        let (offsets, targets, weights) = graph;
        let mut memory = FakeMemory::new(MEMORY as usize);
        memory.fill(0, &vec![0xA5; MEMORY as usize]);
        let parameters = SsspParameters {
            vertices: previous.len() as u64,
            arcs: targets.len() as u64,
            offsets: OFFSETS,
            targets: TARGETS,
            weights: WEIGHTS,
        };
        memory
            .write(DeviceAddress(PARAMETERS), &parameters.to_bytes())
            .unwrap();
        put_words(&mut memory, OFFSETS, offsets);
        put_words(&mut memory, TARGETS, targets);
        put_words(&mut memory, WEIGHTS, weights);
        put_words(&mut memory, A, previous);
        (memory, command(A, B, previous.len()))
    }

    fn command(previous: u64, result: u64, vertices: usize) -> CommandDescriptor {
        CommandDescriptor {
            kernel: KernelId::SsspRelax as u32,
            mode: 0,
            tag: 0,
            flags: 0,
            result_address: result,
            result_length: 4 * vertices as u64,
            args: [PARAMETERS, previous, 0, 0],
        }
    }

    /// Runs every item of `command`, last item first.
    /// The stack figure of `crate::hal` for SSSP (see the OPT kernel's twin of this test).
    #[test]
    fn stack_high_water_of_every_sssp_item_fits_the_uthread_stack() {
        let mut previous = vec![INFINITY; 20];
        previous[0] = 0;
        let (memory, command) = setup(&path_graph(), &previous);
        let kernel = crate::kernels::Kernel::Sssp(SsspKernel::decode(&command, &memory).unwrap());
        let probe = crate::testing::StackProbe::new(&memory);
        let per_vertex = probe.high_water(&kernel, 0..kernel.items());
        // The whole-run path, which the emulator's memory takes.
        let probe = crate::testing::StackProbe::unobserved(&memory);
        let runs = probe.high_water(&kernel, 0..kernel.items());
        let deepest = per_vertex.max(runs);
        std::println!(
            "stack high-water, sssp: {deepest} bytes (per-vertex reads {per_vertex}, whole runs {runs})"
        );
        assert!(per_vertex > 0 && runs > 0 && deepest <= crate::hal::UTHREAD_STACK_BYTES);
    }

    /// The fake memory with its reads declared unobserved: the kernel reads whole runs.
    struct Unobserved<'a>(&'a FakeMemory);

    impl DeviceMemory for Unobserved<'_> {
        fn size(&self) -> u64 {
            self.0.size()
        }
        fn read(
            &self,
            address: DeviceAddress,
            buffer: &mut [u8],
        ) -> Result<(), crate::hal::MemoryFault> {
            self.0.read(address, buffer)
        }
        fn write(
            &self,
            address: DeviceAddress,
            data: &[u8],
        ) -> Result<(), crate::hal::MemoryFault> {
            self.0.write(address, data)
        }
        fn unobserved_reads(&self) -> bool {
            true
        }
    }

    /// The whole-run path gives every item the per-vertex path's outcome and result bytes:
    /// random graphs with items of few and of more than 64 arcs, unreached and near-infinite
    /// distances, and targets scribbled past the graph (just past it, or at or above 2^31).
    #[test]
    fn whole_runs_give_the_per_vertex_reads_outcome_and_result() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5eed_0013);
        let (mut fast, mut hostile) = (0, 0);
        for round in 0..300 {
            let vertices = rng.gen_range(1..=40_usize);
            let mut edges = Vec::new();
            for u in 0..vertices as u32 {
                let degree = if rng.gen_ratio(1, 10) {
                    rng.gen_range(20..40)
                } else {
                    rng.gen_range(0..4)
                };
                for _ in 0..degree {
                    let v = rng.gen_range(0..vertices as u32);
                    let w = match rng.gen_range(0..3) {
                        0 => rng.gen_range(0..10),
                        1 => rng.gen(),
                        _ => u32::MAX - rng.gen_range(0..3),
                    };
                    if edges.len() < 300 {
                        edges.push((u, v, w));
                    }
                }
            }
            let graph = csr(vertices, &edges);
            let previous: Vec<u32> = (0..vertices)
                .map(|_| match rng.gen_range(0..3) {
                    0 => I,
                    1 => I - rng.gen_range(0..3),
                    _ => rng.gen_range(0..1000),
                })
                .collect();
            let (mut memory, command) = setup(&graph, &previous);
            if round % 3 == 0 && !graph.1.is_empty() {
                let arc = rng.gen_range(0..graph.1.len()) as u64;
                // Just past the graph, or with the top bit set (the vectorised check
                // compares as unsigned).
                let target = match rng.gen_range(0..3) {
                    0 => u32::MAX - rng.gen_range(0..3),
                    1 => (1 << 31) + rng.gen_range(0..3),
                    _ => vertices as u32 + rng.gen_range(0..3),
                };
                put_words(&mut memory, TARGETS + 4 * arc, &[target]);
            }
            let kernel = SsspKernel::decode(&command, &memory).unwrap();
            let copy = memory.clone();
            let unobserved = Unobserved(&copy);
            for item in 0..kernel.items() {
                let want = kernel.execute(item, &memory);
                let got = kernel.execute(item, &unobserved);
                assert_eq!(got, want, "round {round}, item {item}");
                fast += usize::from(want.is_ok());
                hostile += usize::from(want.is_err());
            }
            assert_eq!(
                words(&copy, B, vertices),
                words(&memory, B, vertices),
                "round {round}"
            );
        }
        assert!(
            fast > 500 && hostile > 20,
            "{fast} items ran, {hostile} failed"
        );
    }

    /// Device memory that logs its reads and hints, in order: `(hint, address)`.
    struct Logged<'a> {
        inner: &'a FakeMemory,
        log: core::cell::RefCell<Vec<(bool, u64)>>,
    }

    impl DeviceMemory for Logged<'_> {
        fn size(&self) -> u64 {
            self.inner.size()
        }
        fn read(
            &self,
            address: DeviceAddress,
            buffer: &mut [u8],
        ) -> Result<(), crate::hal::MemoryFault> {
            self.log.borrow_mut().push((false, address.0));
            self.inner.read(address, buffer)
        }
        fn write(
            &self,
            address: DeviceAddress,
            data: &[u8],
        ) -> Result<(), crate::hal::MemoryFault> {
            self.inner.write(address, data)
        }
        fn prefetch(&self, address: DeviceAddress) {
            self.log.borrow_mut().push((true, address.0));
        }
    }

    #[test]
    fn an_item_hints_what_the_next_items_run_and_a_later_description_read_first() {
        let (memory, command) = setup(&path_graph(), &[7; 20]);
        let kernel = SsspKernel::decode(&command, &memory).unwrap();
        let logged = Logged {
            inner: &memory,
            log: Default::default(),
        };
        let hints = |log: &[(bool, u64)]| -> Vec<u64> {
            log.iter()
                .filter(|(hint, _)| *hint)
                .map(|(_, address)| *address)
                .collect()
        };
        // Item 1 ends at arc offsets[16] = 31 (vertex 0 has one arc, 1..16 two each): from
        // item 2's on, `RUN_AHEAD_LINES` lines of distances and of offsets, then
        // `ARCS_AHEAD_LINES` of targets and of weights.
        kernel.execute(1, &logged).unwrap();
        let log = logged.log.take();
        let lines = |start: u64, count: u64| (0..count).map(move |line| start + 64 * line);
        let expected: Vec<u64> = lines(A + 4 * 16, RUN_AHEAD_LINES)
            .chain(lines(OFFSETS + 4 * 16, RUN_AHEAD_LINES))
            .chain(lines(TARGETS + 4 * 31, ARCS_AHEAD_LINES))
            .chain(lines(WEIGHTS + 4 * 31, ARCS_AHEAD_LINES))
            .collect();
        assert_eq!(hints(&log), expected);
        // The reads are the run's own: the offsets row, then per vertex its distance, its
        // targets and weights, and its two neighbours' distances.
        let reads: Vec<u64> = log
            .iter()
            .filter(|(hint, _)| !hint)
            .map(|(_, address)| *address)
            .collect();
        assert_eq!(reads.len(), 1 + 8 * 5);
        assert_eq!(reads[0], OFFSETS + 4 * 8);
        // A description hints the offsets of the item 16 on (past the array: ignored).
        kernel.item(1, &logged).unwrap();
        assert_eq!(hints(&logged.log.take()), [OFFSETS + 4 * (8 + 16 * 8)]);
    }

    fn run_all(memory: &mut FakeMemory, command: &CommandDescriptor) -> SsspKernel {
        let kernel = SsspKernel::decode(command, memory).unwrap();
        for item in (0..kernel.items()).rev() {
            kernel.execute(item, memory).unwrap();
        }
        kernel
    }

    #[test]
    fn rounds_ping_pong_between_two_buffers_and_reach_the_shortest_distances() {
        let graph = small_graph();
        let (mut memory, _) = setup(&graph, &[0, I, I, I, I]);
        let expected = [
            [0, 4, 1, I, I],
            [0, 3, 1, 9, I],
            [0, 3, 1, 8, I],
            [0, 3, 1, 8, I],
        ];
        let (mut from, mut to) = (A, B);
        for (round, want) in expected.iter().enumerate() {
            run_all(&mut memory, &command(from, to, 5));
            assert_eq!(words(&memory, to, 5), want, "round {}", round + 1);
            (from, to) = (to, from);
        }
    }

    #[test]
    fn a_round_reads_only_the_previous_distances_jacobi_not_gauss_seidel() {
        // On the path, round 1 from vertex 0 reaches vertex 1 only, whatever the item order:
        // vertex 2 must not see vertex 1's new distance in the same round.
        let graph = path_graph();
        let mut previous = vec![I; 20];
        previous[0] = 0;
        let (memory, command) = setup(&graph, &previous);
        let kernel = SsspKernel::decode(&command, &memory).unwrap();
        for item in 0..kernel.items() {
            kernel.execute(item, &memory).unwrap();
        }
        let mut want = vec![I; 20];
        want[0] = 0;
        want[1] = 1;
        assert_eq!(words(&memory, B, 20), want);
        assert_eq!(words(&memory, A, 20), previous, "the input never changes");
    }

    #[test]
    fn an_item_relaxes_exactly_its_eight_vertices() {
        // Distances of the path from vertex 0: d(v) = v (v + 1) / 2. Odd vertices start 100
        // too far; one round repairs them from their even neighbours.
        let graph = path_graph();
        let exact: Vec<u32> = (0..20).map(|v| v * (v + 1) / 2).collect();
        let previous: Vec<u32> = (0..20)
            .map(|v| exact[v] + if v % 2 == 1 { 100 } else { 0 })
            .collect();
        let (memory, command) = setup(&graph, &previous);
        let kernel = SsspKernel::decode(&command, &memory).unwrap();
        assert_eq!(kernel.items(), 3);
        kernel.execute(1, &memory).unwrap();
        let result = words(&memory, B, 20);
        assert_eq!(&result[..8], [UNTOUCHED; 8]);
        assert_eq!(&result[8..16], &exact[8..16]);
        assert_eq!(&result[16..], [UNTOUCHED; 4]);
        let spec = kernel.item(1, &memory).unwrap();
        assert_eq!((spec.result_offset, spec.result_length), (32, 32));
        let last = kernel.item(2, &memory).unwrap();
        assert_eq!((last.result_offset, last.result_length), (64, 16));
        kernel.execute(2, &memory).unwrap();
        assert_eq!(&words(&memory, B, 20)[..8], [UNTOUCHED; 8]);
    }

    #[test]
    fn a_vertex_whose_neighbours_are_unreached_keeps_its_distance() {
        let graph = small_graph();
        // Vertex 3's neighbours (1, 2) are unreached: it keeps 7; vertex 1 and 2 pull from 3;
        // vertex 0's neighbours are unreached: it keeps infinity; 4 has no arcs: it keeps 2.
        let (mut memory, command) = setup(&graph, &[I, I, I, 7, 2]);
        run_all(&mut memory, &command);
        assert_eq!(words(&memory, B, 5), [I, 12, 15, 7, 2]);
        let (mut memory, command) = setup(&graph, &[I; 5]);
        run_all(&mut memory, &command);
        assert_eq!(words(&memory, B, 5), [I; 5]);
    }

    #[test]
    fn candidates_saturate_at_infinity() {
        assert_eq!(candidate(5, 7), 12);
        assert_eq!(candidate(I - 2, 1), I - 1);
        assert_eq!(candidate(I - 2, 2), I);
        assert_eq!(candidate(I - 2, 3), I);
        assert_eq!(candidate(I, 0), I);
        assert_eq!(candidate(I, u32::MAX), I);
        // A sum that would reach infinity does not reach the vertex.
        let graph = csr(2, &[(0, 1, u32::MAX - 5)]);
        let (mut memory, command) = setup(&graph, &[10, I]);
        run_all(&mut memory, &command);
        assert_eq!(words(&memory, B, 2), [10, I]);
    }

    /// The plain-arithmetic cost of a full item equals the saturating form's, from no arcs to
    /// the largest degrees (seeded mix, plus the extremes).
    #[test]
    fn a_full_items_cost_is_the_saturating_forms() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x9e37_79b9_7f4a_7c15);
        let mut next = move || rng.gen::<u64>();
        let mut cases = vec![[0_u32; 8], [u32::MAX; 8], [1, 8, 9, 16, 17, 0, 7, 64]];
        for _ in 0..10_000 {
            cases.push(core::array::from_fn(|_| match next() % 4 {
                0 => 0,
                1 => (next() % 20) as u32,
                2 => (next() % 1000) as u32,
                _ => next() as u32,
            }));
        }
        cases.push([u32::MAX, 0, 0, 0, 0, 0, 0, 0]);
        cases.push([0, 0, 0, 0, 0, 0, 0, u32::MAX]);
        cases.push([u32::MAX / 8; 8]);
        // Every residue mod 8 (the unused lanes of a last pass), and the largest arcs.
        cases.push([8, 7, 9, 16, 1, 0, 15, 17]);
        cases.push([u32::MAX - 7, 1, 1, 1, 1, 1, 1, 1]);
        let mut from_offsets = 0;
        for degrees in cases {
            assert_eq!(
                item_cost(&degrees),
                item_cost_saturating(&degrees),
                "{degrees:?}"
            );
            // The same degrees as an item's offsets (from a random first one), where they fit
            // a `u32`: the cost the description computes from them.
            let mut offsets = [(next() % 3) as u32 * (next() as u32 % 1000); 9];
            let mut fits = true;
            for lane in 0..8 {
                let end = offsets[lane].checked_add(degrees[lane]);
                fits &= end.is_some();
                offsets[lane + 1] = end.unwrap_or(0);
            }
            if fits {
                from_offsets += 1;
                assert_eq!(
                    offsets_item_cost(&offsets),
                    item_cost_saturating(&degrees),
                    "{offsets:?}"
                );
            }
        }
        assert!(from_offsets > 5_000, "only {from_offsets} offset cases");
    }

    /// The result range the command processor takes without reading the offsets is the
    /// described item's for every item of random graphs, the last, short one (fewer than 8
    /// vertices) included, and `None` past the last item; with an offset word overwritten, an
    /// item that runs without error is described too (the range is the one it wrote).
    #[test]
    fn the_result_range_is_the_described_items_for_random_graphs() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x51ed_270b_9a3c_4f11);
        let (mut described, mut refused) = (0, 0);
        for round in 0..400 {
            let vertices = rng.gen_range(1..=40_usize);
            let edges: Vec<(u32, u32, u32)> = (0..rng.gen_range(0..3 * vertices))
                .map(|_| {
                    (
                        rng.gen_range(0..vertices as u32),
                        rng.gen_range(0..vertices as u32),
                        rng.gen_range(0..100),
                    )
                })
                .collect();
            let previous: Vec<u32> = (0..vertices).map(|_| rng.gen_range(0..=I)).collect();
            let graph = csr(vertices, &edges);
            let (mut memory, command) = setup(&graph, &previous);
            let kernel = SsspKernel::decode(&command, &memory).unwrap();
            if round % 2 == 1 {
                let word = rng.gen_range(0..=vertices as u64);
                let value = [0, 1, rng.gen(), graph.0[vertices] + 1][rng.gen_range(0..4)];
                put_words(&mut memory, OFFSETS + 4 * word, &[value]);
            }
            assert_eq!(kernel.items() as usize, vertices.div_ceil(8));
            for index in 0..kernel.items() {
                let range = kernel.result_range(index);
                let first = 8 * u64::from(index);
                let count = (vertices as u64 - first).min(8);
                assert_eq!(range, Some((4 * first, 4 * count as u32)), "item {index}");
                match kernel.item(index, &memory) {
                    Ok(spec) => {
                        described += 1;
                        assert_eq!(range, Some((spec.result_offset, spec.result_length)));
                    }
                    Err(status) => {
                        refused += 1;
                        assert_eq!(status, FirmwareError::ArgumentOutOfRange);
                        assert_eq!(kernel.execute(index, &memory), Err(status));
                    }
                }
            }
            for index in [kernel.items(), kernel.items() + 1, u32::MAX] {
                assert_eq!(kernel.result_range(index), None);
                assert!(kernel.item(index, &memory).is_err());
            }
        }
        assert!(
            described > 1000 && refused > 20,
            "{described} described, {refused} refused"
        );
    }

    #[test]
    fn cost_follows_kernel0_per_packet_vertex_and_arc_group() {
        assert_eq!(
            [0, 1, 8, 9, 16, 17].map(arc_groups),
            [1, 1, 1, 2, 2, 3],
            "the arc loop runs at least once"
        );
        assert_eq!(PACKET.instructions(), 26);
        assert_eq!(PER_VERTEX.instructions(), 14);
        assert_eq!(PER_ARC_GROUP.instructions(), 15);
        // The path: item 0 holds vertex 0 (1 arc) and vertices 1..8 (2 arcs each).
        let (memory, command) = setup(&path_graph(), &[I; 20]);
        let kernel = SsspKernel::decode(&command, &memory).unwrap();
        let full = kernel.item(0, &memory).unwrap().cost;
        assert_eq!(full, item_cost(&[1, 2, 2, 2, 2, 2, 2, 2]));
        assert_eq!(
            full,
            ItemCost {
                scalar: 11 + 8 * 10 + 8 * 2,
                scalar_memory: 8,
                vector: 4 + 8 * 4 + 8 * 10,
                vector_memory: 3 + 8 * 3,
                // 8 passes gather 15 neighbours: 7 address-unit cycles beyond one per pass.
                indexed_extra_cycles: 15 - 8,
                bytes: 96 + 15 * 72,
            }
        );
        // The last item: 4 vertices (19 has one arc), and the early loop exit.
        let last = kernel.item(2, &memory).unwrap().cost;
        assert_eq!(last, item_cost(&[2, 2, 2, 1]));
        assert_eq!(last.scalar, 11 + 4 * 10 + 4 * 2 + 3);
        // A vertex of 9 arcs makes two passes; one of none still makes one.
        let star: Vec<(u32, u32, u32)> = (1..10).map(|v| (0, v, 1)).collect();
        let (memory, command) = setup(&csr(11, &star), &[I; 11]);
        let kernel = SsspKernel::decode(&command, &memory).unwrap();
        assert_eq!(
            kernel.item(0, &memory).unwrap().cost,
            item_cost(&[9, 1, 1, 1, 1, 1, 1, 1])
        );
        assert_eq!(kernel.item(1, &memory).unwrap().cost, item_cost(&[1, 1, 0]));
        // A vertex without arcs takes nothing off its neighbours' gathers: 9 arcs in 2 passes
        // beside an isolated vertex still add 7 address-unit cycles.
        assert_eq!(item_cost(&[0, 9]).indexed_extra_cycles, 7);
        assert_eq!(item_cost(&[9]).indexed_extra_cycles, 7);
    }

    #[test]
    fn long_adjacency_lists_cross_chunks() {
        // A star: vertex 0 joined to 1..=150 with weight = the other end.
        let star: Vec<(u32, u32, u32)> = (1..=150).map(|v| (0, v, v)).collect();
        let graph = csr(151, &star);
        let mut previous = vec![I; 151];
        previous[100] = 5;
        previous[149] = 1;
        let (mut memory, command) = setup(&graph, &previous);
        run_all(&mut memory, &command);
        let result = words(&memory, B, 151);
        assert_eq!(result[0], 105, "min(5 + 100, 1 + 149)");
        assert_eq!(result[100], 5);
        assert!(result[1..].iter().enumerate().all(|(k, d)| {
            let v = k + 1;
            *d == previous[v]
        }));
    }

    fn rejected(memory: &FakeMemory, command: &CommandDescriptor, status: FirmwareError) {
        assert_eq!(
            SsspKernel::decode(command, memory),
            Err(status),
            "{command:?}"
        );
    }

    #[test]
    fn wrong_kernel_flags_reserved_arguments_and_bad_shapes_are_rejected() {
        let (memory, valid) = setup(&small_graph(), &[0; 5]);
        assert!(SsspKernel::decode(&valid, &memory).is_ok());
        let mut c = valid;
        c.kernel = KernelId::PageRankGather as u32;
        rejected(&memory, &c, FirmwareError::UnknownKernel);
        let mut c = valid;
        c.flags = 4;
        rejected(&memory, &c, FirmwareError::MalformedDescriptor);
        for (field, value) in [(2, 1), (3, 8), (2, u64::MAX)] {
            let mut c = valid;
            c.args[field] = value;
            rejected(&memory, &c, FirmwareError::ArgumentOutOfRange);
        }
        for length in [0, 16, 24, 21, u64::MAX] {
            let mut c = valid;
            c.result_length = length;
            rejected(&memory, &c, FirmwareError::ArgumentOutOfRange);
        }
        for (field, value) in [
            (0, PARAMETERS + 4),
            (1, A + 2),
            (0, MEMORY - 32),
            (1, MEMORY - 16),
        ] {
            let mut c = valid;
            c.args[field] = value;
            rejected(&memory, &c, FirmwareError::ArgumentOutOfRange);
        }
        for address in [B + 2, MEMORY - 16, u64::MAX - 3] {
            let mut c = valid;
            c.result_address = address;
            rejected(&memory, &c, FirmwareError::ArgumentOutOfRange);
        }
        // The result overlapping each input (the previous distances included: a round must
        // not read what it writes).
        for address in [
            PARAMETERS + 32,
            OFFSETS + 20,
            TARGETS,
            WEIGHTS + 36,
            A,
            A + 16,
        ] {
            let mut c = valid;
            c.result_address = address;
            rejected(&memory, &c, FirmwareError::ArgumentOutOfRange);
        }
        // Touching but not overlapping is fine.
        let mut c = valid;
        c.result_address = A + 20;
        assert!(SsspKernel::decode(&c, &memory).is_ok());
    }

    #[test]
    fn bad_graph_parameters_are_rejected() {
        let (memory, valid) = setup(&small_graph(), &[0; 5]);
        let good = SsspParameters {
            vertices: 5,
            arcs: 10,
            offsets: OFFSETS,
            targets: TARGETS,
            weights: WEIGHTS,
        };
        let bad = [
            SsspParameters {
                vertices: 0,
                ..good
            },
            SsspParameters {
                vertices: u64::from(u32::MAX),
                ..good
            },
            SsspParameters {
                arcs: 1 << 32,
                ..good
            },
            SsspParameters {
                arcs: MEMORY,
                ..good
            },
            SsspParameters {
                offsets: MEMORY - 8,
                ..good
            },
            SsspParameters {
                offsets: OFFSETS + 1,
                ..good
            },
            SsspParameters { targets: 2, ..good },
            SsspParameters {
                weights: u64::MAX - 3,
                ..good
            },
        ];
        for parameters in bad {
            memory
                .write(DeviceAddress(PARAMETERS), &parameters.to_bytes())
                .unwrap();
            // `vertices` also sizes the result: keep the command consistent with it.
            let mut c = valid;
            c.result_length = 4 * parameters.vertices.min(5);
            rejected(&memory, &c, FirmwareError::ArgumentOutOfRange);
        }
        memory
            .write(DeviceAddress(PARAMETERS), &good.to_bytes())
            .unwrap();
        assert!(SsspKernel::decode(&valid, &memory).is_ok());
    }

    #[test]
    fn inconsistent_offsets_and_targets_fail_the_item_and_write_nothing() {
        let (mut memory, command) = setup(&path_graph(), &[0; 20]);
        let kernel = SsspKernel::decode(&command, &memory).unwrap();
        // Offsets decreasing inside item 1, or beyond the arcs at its end.
        put_words(&mut memory, OFFSETS + 4 * 10, &[3]);
        assert_eq!(
            kernel.item(1, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
        assert_eq!(
            kernel.execute(1, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
        assert!(kernel.item(0, &memory).is_ok(), "item 0 ends at offset 8");
        let (offsets, targets, _) = path_graph();
        put_words(&mut memory, OFFSETS, &offsets);
        put_words(&mut memory, OFFSETS + 4 * 16, &[targets.len() as u32 + 1]);
        assert_eq!(
            kernel.item(1, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
        assert_eq!(
            kernel.item(2, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
        put_words(&mut memory, OFFSETS, &offsets);
        // A target beyond the graph fails execution (its description does not read targets).
        put_words(&mut memory, TARGETS + 4 * 20, &[20]);
        assert!(kernel.item(1, &memory).is_ok());
        assert_eq!(
            kernel.execute(1, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
        assert_eq!(words(&memory, B, 20), [UNTOUCHED; 20]);
        assert_eq!(
            kernel.item(3, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
        assert_eq!(
            kernel.execute(3, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
    }

    /// A tiny xorshift for the hostile-command test.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn hostile_commands_and_memory_never_panic() {
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let pick = |state: &mut u64, choices: &[u64]| {
            choices[(next(state) % choices.len() as u64) as usize]
        };
        let mut accepted = 0;
        for round in 0..4000 {
            let (mut memory, mut command) = setup(&path_graph(), &[3; 20]);
            // Scribble over a few words of the parameters, the graph or the distances.
            for _ in 0..(round % 4) {
                let address = pick(&mut state, &[PARAMETERS, OFFSETS, TARGETS, WEIGHTS, A])
                    + 4 * (next(&mut state) % 24);
                let random = next(&mut state);
                let value = pick(&mut state, &[0, 1, 5, 40, u64::from(u32::MAX), random]) as u32;
                put_words(&mut memory, address, &[value]);
            }
            let field = next(&mut state) % 6;
            let random = next(&mut state);
            let value = pick(
                &mut state,
                &[
                    0,
                    1,
                    4,
                    80,
                    MEMORY - 4,
                    MEMORY,
                    u64::MAX,
                    random,
                    random % MEMORY,
                ],
            );
            match field {
                0..=3 => command.args[field as usize] = value,
                4 => command.result_address = value,
                _ => command.result_length = value,
            }
            if let Ok(kernel) = SsspKernel::decode(&command, &memory) {
                accepted += 1;
                for item in 0..kernel.items().min(64) {
                    let described = kernel.item(item, &memory);
                    let executed = kernel.execute(item, &memory);
                    if described.is_err() {
                        assert!(executed.is_err());
                    }
                    // The range the command processor takes, without reading the offsets, for
                    // an item that ran: the described one whenever the item is described.
                    if let Ok(spec) = described {
                        assert_eq!(
                            kernel.result_range(item),
                            Some((spec.result_offset, spec.result_length))
                        );
                    }
                }
                assert_eq!(
                    kernel.item(kernel.items(), &memory),
                    Err(FirmwareError::ArgumentOutOfRange)
                );
                assert_eq!(kernel.result_range(kernel.items()), None);
            }
            // A memory smaller than the command assumes.
            let small = FakeMemory::new(0x300);
            let _ = SsspKernel::decode(&command, &small);
        }
        assert!(accepted > 100, "only {accepted} commands reached the items");
    }
}
