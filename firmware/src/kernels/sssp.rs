//! SSSP edge relaxation kernel: one frontier step of a frontier-based Bellman-Ford, with the
//! vertex update done in device memory.
//!
//! # Device memory
//!
//! The graph lives in device memory in CSR form, described by a [`SsspParameters`] block the
//! host writes once at load time (`args[0]` points at it):
//!
//! | array | layout |
//! |---|---|
//! | offsets | `vertices + 1` little-endian `u32`: the out-arcs of `u` are `offsets[u]..offsets[u + 1]` |
//! | targets | `arcs` `u32`: the head of each arc |
//! | weights | `arcs` `u32`: the length of each arc |
//! | distances | `vertices` `u32`: the tentative distance of each vertex, [`INFINITY`] = unreached; the kernel lowers them |
//! | claims | `vertices` `u32`: the last launch stamp that claimed each vertex (0 initially); the kernel writes them |
//!
//! Per launch the host writes the *frontier* (the vertices whose distance fell in the previous
//! step) and its *slot prefix*: `prefix[j]` is the first result slot of frontier vertex `j`,
//! `prefix[0] = 0` and `prefix[j + 1] = prefix[j] + outdegree(frontier[j])`. The host knows the
//! out-degrees (it built the graph), and the prefix lets an item find where its result goes by
//! reading two words.
//!
//! # Command ([`shared_abi::KernelId::SsspRelax`])
//!
//! | field | meaning |
//! |---|---|
//! | `args[0]` | device address of the [`SsspParameters`] block (8-byte aligned) |
//! | `args[1]` | device address of the frontier: `count` `u32` vertex ids |
//! | `args[2]` | `count` in the low 32 bits, the launch's non-zero stamp in the high 32 bits ([`pack_frontier`]) |
//! | `args[3]` | device address of the slot prefix: `count + 1` `u32` |
//! | `result_address`, `result_length` | the result space: exactly `4 * prefix[count]` bytes, one `u32` per relaxed arc |
//! | `flags` | reserved, must be zero |
//!
//! # Work items and result layout
//!
//! Item `i` relaxes the out-arcs of frontier vertices `i * per_item .. min((i + 1) * per_item,
//! count)` (`per_item` is the parameter block's `vertices_per_item`). For frontier vertex `j`
//! with `d = distances[frontier[j]]` (read when the item reaches it) and its `k`-th out-arc
//! `(t, w)`, the candidate is `c = d + w`, or [`INFINITY`] if that reaches [`CLAIMED`]
//! (distances are limited to 31 bits, so an unreached `d` never improves anything). The kernel
//! performs an atomic minimum of `distances[t]` with `c` (an `amominu.w`). If `c` was strictly
//! smaller than the old `distances[t]` (the arc improved `t`), it also swaps the launch stamp
//! into `claims[t]` (an `amoswap.w`): the first improving arc of `t` in this launch finds an
//! older stamp and *claims* `t`. Result slot `prefix[j] + k` (4 bytes, little-endian) is
//! [`INFINITY`] if the arc improved nothing, `c` if it improved `t`, and `c |` [`CLAIMED`] if it
//! also claimed `t`. Item `i` therefore writes the contiguous bytes `4 * prefix[i * per_item]
//! .. 4 * prefix[end]`.
//!
//! Whatever order the items run in, the final `distances` are the minimum over every
//! candidate, and every vertex whose distance fell in this launch is claimed by exactly one
//! slot: the claimed slots name the next frontier without duplicates, so the host needs no
//! sort or deduplication. Which slot claims a vertex, and a frontier vertex's `d` when it was
//! itself lowered earlier in the same launch (asynchronous, Gauss-Seidel-style relaxation),
//! follow the item completion order, which the emulator's CCM model fixes deterministically.
//!
//! # Validation (everything a hostile host can send)
//!
//! - `kernel` is not SSSP: [`Status::UnknownKernel`]; `flags != 0`: [`Status::MalformedDescriptor`].
//! - Any address unaligned (parameters: 8, arrays and result: 4), any array or the result
//!   overflowing or ending beyond device memory, `vertices` zero or `vertices + 1` not fitting a
//!   `u32`, `arcs` not fitting a `u32`, `count` or the stamp zero, vertices per item outside
//!   `1..=`[`MAX_VERTICES_PER_ITEM`], the written arrays (result, distances, claims)
//!   overlapping each other or any array the kernel reads, `prefix[0] != 0`, the prefix decreasing, a
//!   frontier vertex `>= vertices`, a vertex's CSR offsets decreasing or beyond `arcs`, a prefix
//!   step different from the vertex's out-degree, or `result_length != 4 * prefix[count]` (or
//!   zero): [`Status::ArgumentOutOfRange`]. Decoding reads the frontier and prefix once (the
//!   command processor's check, not modelled as item work); an arc whose target is `>=
//!   vertices` is found during execution and fails the item with
//!   [`Status::ArgumentOutOfRange`].
//!
//! Every size is computed with checked arithmetic; nothing here can panic.

use crate::hal::DeviceMemory;
use crate::kernels::ranges::{checked_range, overlaps};
use crate::kernels::{ItemCost, ItemSpec};
use shared_abi::{CommandDescriptor, DeviceAddress, KernelId, Status};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// The distance of an unreached vertex, and the result of an arc that improved nothing.
pub const INFINITY: u32 = u32::MAX;

/// The flag of a result slot whose arc claimed its target (see the module docs); distances
/// stay below it.
pub const CLAIMED: u32 = 1 << 31;

/// Largest vertices-per-item value accepted: an item is a block of a frontier, bounded so one
/// item cannot hold a µthread for the whole launch.
pub const MAX_VERTICES_PER_ITEM: u32 = 4096;

/// Words the kernel stages per stack buffer (one unrolled loop iteration: 256 bytes).
pub const CHUNK_WORDS: usize = 64;

/// Bytes of one result slot (one `u32` per arc).
pub const RESULT_BYTES_PER_ARC: u64 = 4;

/// Bytes a random 4-byte access really moves: one 64-byte DRAM burst (a cache line). Graph
/// kernels read a neighbour's distance at an unpredictable address, so each such access costs
/// a full burst of device memory bandwidth.
pub const RANDOM_ACCESS_BYTES: u64 = 64;

/// Instructions per relaxed arc (scalar: each arc's update is a separate atomic): `lw` target,
/// `lw` weight, `add` candidate with the 31-bit guard (`sltu` + `or`, 3), `slli`+`add` for the
/// distance address (2), `amominu.w` (the vertex update, returns the old distance), `sltu`
/// improved? and its branch (2), a branch-free select of candidate or infinity (2), `sw` the
/// result slot, pointer bump and loop branch (2): 15; plus the claim on an improving arc
/// (claim address, `amoswap.w`, compare, `or` the flag: 4), charged at half of it (2): an
/// item's cost is fixed before it runs, and half is our estimate of the share of relaxed arcs
/// that improve their target in frontier Bellman-Ford: 17.
pub const OPERATIONS_PER_ARC: u64 = 17;

/// Bytes per relaxed arc: the target and weight words (4 + 4, streamed sequentially), the
/// target's distance ([`RANDOM_ACCESS_BYTES`], a random read-modify-write of one line), its
/// claim line on an improving arc (charged at half, as for [`OPERATIONS_PER_ARC`]) and the
/// 4-byte result slot.
pub const BYTES_PER_ARC: u64 =
    8 + RANDOM_ACCESS_BYTES + RANDOM_ACCESS_BYTES / 2 + RESULT_BYTES_PER_ARC;

/// Instructions per frontier vertex: `lw` its id, bound check and branch (2), address of its
/// offsets (2), `lw` both offsets (2), `lw` its distance (with its address, 3), the arc-loop
/// set-up (2): 12 (the prefix word is read once per item, its consistency was checked at
/// decode).
pub const OPERATIONS_PER_VERTEX: u64 = 12;

/// Bytes per frontier vertex: its id and prefix word (4 + 4, sequential), its two offsets (one
/// random line) and its distance (one random line).
pub const BYTES_PER_VERTEX: u64 = 8 + 2 * RANDOM_ACCESS_BYTES;

/// Fixed instructions per item: item index to first and last frontier positions (a multiply
/// and a minimum, 3), the two prefix reads and the result address (4), loop set-up (3) and the
/// return (1): 11, rounded to 12 for the call overhead.
pub const FIXED_OPERATIONS: u64 = 12;

/// The parameter block of a graph in device memory (64 bytes, little-endian `u64` fields).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct SsspParameters {
    /// Vertices.
    pub vertices: u64,
    /// Arcs.
    pub arcs: u64,
    /// Device address of the CSR offsets (`vertices + 1` `u32`).
    pub offsets: u64,
    /// Device address of the arc targets (`arcs` `u32`).
    pub targets: u64,
    /// Device address of the arc weights (`arcs` `u32`).
    pub weights: u64,
    /// Device address of the distances (`vertices` `u32`), updated by the kernel.
    pub distances: u64,
    /// Device address of the claim stamps (`vertices` `u32`), updated by the kernel.
    pub claims: u64,
    /// Frontier vertices per work item, `1..=`[`MAX_VERTICES_PER_ITEM`].
    pub vertices_per_item: u64,
}

const _: () = assert!(core::mem::size_of::<SsspParameters>() == 64);

impl SsspParameters {
    /// The block as the bytes the host writes into device memory.
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut bytes = [0_u8; 64];
        bytes.copy_from_slice(self.as_bytes());
        bytes
    }
}

/// `args[2]` for a frontier of `count` vertices and the launch stamp `stamp` (non-zero, and
/// different from every earlier launch's over the same claims array).
pub const fn pack_frontier(count: u32, stamp: u32) -> u64 {
    (count as u64) | ((stamp as u64) << 32)
}

/// The modelled cost of an item relaxing `vertices` frontier vertices with `arcs` out-arcs in
/// all: see [`FIXED_OPERATIONS`], [`OPERATIONS_PER_VERTEX`], [`OPERATIONS_PER_ARC`],
/// [`BYTES_PER_VERTEX`] and [`BYTES_PER_ARC`]. Saturates instead of overflowing.
pub fn item_cost(vertices: u64, arcs: u64) -> ItemCost {
    // Interim: every instruction counted as scalar until this kernel's cost is split by
    // functional unit.
    ItemCost {
        scalar: FIXED_OPERATIONS
            .saturating_add(vertices.saturating_mul(OPERATIONS_PER_VERTEX))
            .saturating_add(arcs.saturating_mul(OPERATIONS_PER_ARC)),
        bytes: vertices
            .saturating_mul(BYTES_PER_VERTEX)
            .saturating_add(arcs.saturating_mul(BYTES_PER_ARC)),
        ..ItemCost::ZERO
    }
}

/// The candidate distance through an arc of length `weight` from a vertex at `distance`: the
/// sum, or [`INFINITY`] if it reaches [`CLAIMED`] (so an unreached vertex never improves
/// anything).
pub const fn candidate(distance: u32, weight: u32) -> u32 {
    match distance.checked_add(weight) {
        Some(sum) if sum < CLAIMED => sum,
        _ => INFINITY,
    }
}

/// `base + index * 4`, checked.
pub(crate) fn word_address(base: u64, index: u64) -> Result<DeviceAddress, Status> {
    index
        .checked_mul(4)
        .and_then(|offset| base.checked_add(offset))
        .map(DeviceAddress)
        .ok_or(Status::ArgumentOutOfRange)
}

/// The little-endian `u32` at `base + 4 * index`.
pub(crate) fn read_word<M: DeviceMemory>(memory: &M, base: u64, index: u64) -> Result<u32, Status> {
    let mut word = [0_u8; 4];
    memory.read(word_address(base, index)?, &mut word)?;
    Ok(u32::from_le_bytes(word))
}

/// Reads `count` (at most [`CHUNK_WORDS`]) little-endian `u32` at `base + 4 * index` into the
/// front of `words`.
pub(crate) fn read_words<M: DeviceMemory>(
    memory: &M,
    base: u64,
    index: u64,
    count: usize,
    words: &mut [u32; CHUNK_WORDS],
) -> Result<(), Status> {
    let mut bytes = [0_u8; CHUNK_WORDS * 4];
    let length = count.checked_mul(4).ok_or(Status::ArgumentOutOfRange)?;
    let bytes = bytes.get_mut(..length).ok_or(Status::ArgumentOutOfRange)?;
    memory.read(word_address(base, index)?, bytes)?;
    for (word, chunk) in words.iter_mut().zip(bytes.chunks_exact(4)) {
        *word =
            u32::from_le_bytes(<[u8; 4]>::try_from(chunk).map_err(|_| Status::ArgumentOutOfRange)?);
    }
    Ok(())
}

/// Writes the first `count` (at most [`CHUNK_WORDS`]) of `words` little-endian at `base + 4 *
/// index`.
pub(crate) fn write_words<M: DeviceMemory>(
    memory: &mut M,
    base: u64,
    index: u64,
    count: usize,
    words: &[u32; CHUNK_WORDS],
) -> Result<(), Status> {
    let mut bytes = [0_u8; CHUNK_WORDS * 4];
    for (chunk, word) in bytes.chunks_exact_mut(4).zip(words.iter().take(count)) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    let length = count.checked_mul(4).ok_or(Status::ArgumentOutOfRange)?;
    let bytes = bytes.get(..length).ok_or(Status::ArgumentOutOfRange)?;
    memory.write(word_address(base, index)?, bytes)?;
    Ok(())
}

/// A decoded, validated SSSP relaxation launch.
///
/// # Invariants
///
/// Every array named by the parameters, the frontier, the prefix and the result lie inside the
/// device memory the command was decoded against; the result and the distances overlap
/// nothing else; the prefix starts at 0, never decreases, ends at `result_length / 4`, and
/// steps by each frontier vertex's out-degree; every frontier vertex is `< vertices`; `items
/// == ceil(count / per_item)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SsspKernel {
    parameters: SsspParameters,
    frontier: u64,
    prefix: u64,
    result: u64,
    count: u32,
    stamp: u32,
    per_item: u32,
    items: u32,
}

impl SsspKernel {
    /// Decodes and validates `command` against device memory (read only; see the module docs
    /// for every rule). Never panics.
    pub fn decode<M: DeviceMemory>(
        command: &CommandDescriptor,
        memory: &M,
    ) -> Result<Self, Status> {
        if command.kernel != KernelId::SsspRelax as u32 {
            return Err(Status::UnknownKernel);
        }
        if command.flags != 0 {
            return Err(Status::MalformedDescriptor);
        }
        let size = memory.size();
        let [parameters_address, frontier, packed, prefix] = command.args;
        let parameters_range = checked_range(parameters_address, 64, 8, size)?;
        let parameters: SsspParameters = memory
            .read_value(DeviceAddress(parameters_address))
            .map_err(|_| Status::ArgumentOutOfRange)?;
        let vertices = parameters.vertices;
        if vertices == 0 || vertices >= u64::from(u32::MAX) || parameters.arcs > u64::from(u32::MAX)
        {
            return Err(Status::ArgumentOutOfRange);
        }
        let count =
            u32::try_from(packed & u64::from(u32::MAX)).map_err(|_| Status::ArgumentOutOfRange)?;
        let stamp = u32::try_from(packed >> 32).map_err(|_| Status::ArgumentOutOfRange)?;
        let per_item =
            u32::try_from(parameters.vertices_per_item).map_err(|_| Status::ArgumentOutOfRange)?;
        if count == 0 || stamp == 0 || per_item == 0 || per_item > MAX_VERTICES_PER_ITEM {
            return Err(Status::ArgumentOutOfRange);
        }
        let words = |n: u64| n.checked_mul(4).ok_or(Status::ArgumentOutOfRange);
        let vertices_plus_one = vertices.checked_add(1).ok_or(Status::ArgumentOutOfRange)?;
        let offsets_range = checked_range(parameters.offsets, words(vertices_plus_one)?, 4, size)?;
        let targets_range = checked_range(parameters.targets, words(parameters.arcs)?, 4, size)?;
        let weights_range = checked_range(parameters.weights, words(parameters.arcs)?, 4, size)?;
        let distances_range = checked_range(parameters.distances, words(vertices)?, 4, size)?;
        let claims_range = checked_range(parameters.claims, words(vertices)?, 4, size)?;
        let count_words = u64::from(count);
        let frontier_range = checked_range(frontier, words(count_words)?, 4, size)?;
        let prefix_range = checked_range(
            prefix,
            words(
                count_words
                    .checked_add(1)
                    .ok_or(Status::ArgumentOutOfRange)?,
            )?,
            4,
            size,
        )?;
        let result_range = checked_range(command.result_address, command.result_length, 4, size)?;
        let read_only = [
            parameters_range,
            offsets_range,
            targets_range,
            weights_range,
            frontier_range,
            prefix_range,
        ];
        let written = [result_range, distances_range, claims_range];
        for (index, range) in written.iter().enumerate() {
            if read_only.iter().any(|other| overlaps(*other, *range))
                || written
                    .iter()
                    .skip(index.saturating_add(1))
                    .any(|other| overlaps(*other, *range))
            {
                return Err(Status::ArgumentOutOfRange);
            }
        }
        // The frontier and its prefix, checked once: positions in chunks.
        let mut ids = [0_u32; CHUNK_WORDS];
        let mut steps = [0_u32; CHUNK_WORDS];
        let mut previous = read_word(memory, prefix, 0)?;
        if previous != 0 {
            return Err(Status::ArgumentOutOfRange);
        }
        let mut position = 0_u64;
        while position < count_words {
            let chunk = usize::try_from(
                count_words
                    .checked_sub(position)
                    .ok_or(Status::ArgumentOutOfRange)?
                    .min(CHUNK_WORDS as u64),
            )
            .map_err(|_| Status::ArgumentOutOfRange)?;
            read_words(memory, frontier, position, chunk, &mut ids)?;
            let next_position = position.checked_add(1).ok_or(Status::ArgumentOutOfRange)?;
            read_words(memory, prefix, next_position, chunk, &mut steps)?;
            for (vertex, next) in ids.iter().zip(steps.iter()).take(chunk) {
                let vertex = u64::from(*vertex);
                if vertex >= vertices {
                    return Err(Status::ArgumentOutOfRange);
                }
                let first = read_word(memory, parameters.offsets, vertex)?;
                let last = read_word(
                    memory,
                    parameters.offsets,
                    vertex.checked_add(1).ok_or(Status::ArgumentOutOfRange)?,
                )?;
                if first > last || u64::from(last) > parameters.arcs {
                    return Err(Status::ArgumentOutOfRange);
                }
                let degree = last.checked_sub(first).ok_or(Status::ArgumentOutOfRange)?;
                if next.checked_sub(previous) != Some(degree) {
                    return Err(Status::ArgumentOutOfRange);
                }
                previous = *next;
            }
            position = position
                .checked_add(chunk as u64)
                .ok_or(Status::ArgumentOutOfRange)?;
        }
        let result_bytes = u64::from(previous)
            .checked_mul(RESULT_BYTES_PER_ARC)
            .ok_or(Status::ArgumentOutOfRange)?;
        if result_bytes == 0 || command.result_length != result_bytes {
            return Err(Status::ArgumentOutOfRange);
        }
        let items = count.div_ceil(per_item);
        Ok(SsspKernel {
            parameters,
            frontier,
            prefix,
            result: command.result_address,
            count,
            stamp,
            per_item,
            items,
        })
    }

    /// The graph's parameter block.
    pub fn parameters(&self) -> SsspParameters {
        self.parameters
    }

    /// Frontier vertices.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The launch stamp.
    pub fn stamp(&self) -> u32 {
        self.stamp
    }

    /// Frontier vertices per item.
    pub fn per_item(&self) -> u32 {
        self.per_item
    }

    /// Work items: `ceil(count / per_item)`.
    pub fn items(&self) -> u32 {
        self.items
    }

    /// Frontier positions of item `index`.
    fn positions(&self, index: u32) -> Result<(u64, u64), Status> {
        if index >= self.items {
            return Err(Status::ArgumentOutOfRange);
        }
        let first = u64::from(index)
            .checked_mul(u64::from(self.per_item))
            .ok_or(Status::ArgumentOutOfRange)?;
        let last = first
            .checked_add(u64::from(self.per_item))
            .ok_or(Status::ArgumentOutOfRange)?
            .min(u64::from(self.count));
        Ok((first, last))
    }

    /// Item `index`: reads its two prefix words; result bytes `4 * prefix[first] .. 4 *
    /// prefix[last]`, cost [`item_cost`].
    pub fn item<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<ItemSpec, Status> {
        let (first, last) = self.positions(index)?;
        let start = read_word(memory, self.prefix, first)?;
        let end = read_word(memory, self.prefix, last)?;
        let arcs = end.checked_sub(start).ok_or(Status::ArgumentOutOfRange)?;
        let result_length = arcs
            .checked_mul(RESULT_BYTES_PER_ARC as u32)
            .ok_or(Status::ArgumentOutOfRange)?;
        Ok(ItemSpec {
            result_offset: u64::from(start)
                .checked_mul(RESULT_BYTES_PER_ARC)
                .ok_or(Status::ArgumentOutOfRange)?,
            result_length,
            cost: item_cost(
                last.checked_sub(first).ok_or(Status::ArgumentOutOfRange)?,
                u64::from(arcs),
            ),
        })
    }

    /// Runs item `index`: relaxes every out-arc of its frontier vertices (see the module
    /// docs), staging arcs and results through stack buffers of [`CHUNK_WORDS`] words.
    pub fn execute<M: DeviceMemory>(&self, index: u32, memory: &mut M) -> Result<(), Status> {
        let (first, last) = self.positions(index)?;
        let parameters = self.parameters;
        let mut targets = [0_u32; CHUNK_WORDS];
        let mut weights = [0_u32; CHUNK_WORDS];
        let mut results = [INFINITY; CHUNK_WORDS];
        for position in first..last {
            let vertex = u64::from(read_word(memory, self.frontier, position)?);
            if vertex >= parameters.vertices {
                return Err(Status::ArgumentOutOfRange);
            }
            let mut slot = u64::from(read_word(memory, self.prefix, position)?);
            let arc_first = u64::from(read_word(memory, parameters.offsets, vertex)?);
            let arc_last = u64::from(read_word(
                memory,
                parameters.offsets,
                vertex.checked_add(1).ok_or(Status::ArgumentOutOfRange)?,
            )?);
            if arc_first > arc_last || arc_last > parameters.arcs {
                return Err(Status::ArgumentOutOfRange);
            }
            let distance = read_word(memory, parameters.distances, vertex)?;
            let mut arc = arc_first;
            while arc < arc_last {
                let chunk = usize::try_from(
                    arc_last
                        .checked_sub(arc)
                        .ok_or(Status::ArgumentOutOfRange)?
                        .min(CHUNK_WORDS as u64),
                )
                .map_err(|_| Status::ArgumentOutOfRange)?;
                read_words(memory, parameters.targets, arc, chunk, &mut targets)?;
                read_words(memory, parameters.weights, arc, chunk, &mut weights)?;
                for ((target, weight), result) in targets
                    .iter()
                    .zip(weights.iter())
                    .zip(results.iter_mut())
                    .take(chunk)
                {
                    let target = u64::from(*target);
                    if target >= parameters.vertices {
                        return Err(Status::ArgumentOutOfRange);
                    }
                    let offered = candidate(distance, *weight);
                    let old = read_word(memory, parameters.distances, target)?;
                    *result = if offered < old {
                        memory.write(
                            word_address(parameters.distances, target)?,
                            &offered.to_le_bytes(),
                        )?;
                        let claim = word_address(parameters.claims, target)?;
                        let previous = read_word(memory, parameters.claims, target)?;
                        if previous == self.stamp {
                            offered
                        } else {
                            memory.write(claim, &self.stamp.to_le_bytes())?;
                            offered | CLAIMED
                        }
                    } else {
                        INFINITY
                    };
                }
                write_words(memory, self.result, slot, chunk, &results)?;
                let step = chunk as u64;
                arc = arc.checked_add(step).ok_or(Status::ArgumentOutOfRange)?;
                slot = slot.checked_add(step).ok_or(Status::ArgumentOutOfRange)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type FakeMemory = crate::testing::FakeDeviceMemory;

    const MEMORY: u64 = 1 << 16;
    const PARAMETERS: u64 = 0x100;
    const OFFSETS: u64 = 0x200;
    const TARGETS: u64 = 0x400;
    const WEIGHTS: u64 = 0x800;
    const DISTANCES: u64 = 0xC00;
    const CLAIMS: u64 = 0xE00;
    const C: u32 = CLAIMED;
    const FRONTIER: u64 = 0x1000;
    const PREFIX: u64 = 0x1400;
    const RESULT: u64 = 0x2000;

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

    /// A 5-vertex graph: 0 -> 1 (4), 0 -> 2 (1), 2 -> 1 (2), 1 -> 3 (5), 2 -> 3 (8),
    /// 4 isolated.
    fn graph() -> (Vec<u32>, Vec<u32>, Vec<u32>) {
        (
            vec![0, 2, 3, 5, 5, 5],
            vec![1, 2, 3, 1, 3],
            vec![4, 1, 5, 2, 8],
        )
    }

    /// Loads the graph with distances `distances` and the frontier `frontier` (prefix from the
    /// degrees); returns the memory and a valid command.
    fn setup(
        distances: &[u32],
        frontier: &[u32],
        per_item: u32,
    ) -> (FakeMemory, CommandDescriptor) {
        let mut memory = FakeMemory::new(MEMORY as usize);
        let (offsets, targets, weights) = graph();
        let parameters = SsspParameters {
            vertices: 5,
            arcs: 5,
            offsets: OFFSETS,
            targets: TARGETS,
            weights: WEIGHTS,
            distances: DISTANCES,
            claims: CLAIMS,
            vertices_per_item: u64::from(per_item),
        };
        memory
            .write(DeviceAddress(PARAMETERS), &parameters.to_bytes())
            .unwrap();
        put_words(&mut memory, OFFSETS, &offsets);
        put_words(&mut memory, TARGETS, &targets);
        put_words(&mut memory, WEIGHTS, &weights);
        put_words(&mut memory, DISTANCES, distances);
        put_words(&mut memory, FRONTIER, frontier);
        let mut prefix = vec![0_u32];
        for vertex in frontier {
            let degree = offsets[*vertex as usize + 1] - offsets[*vertex as usize];
            prefix.push(prefix.last().unwrap() + degree);
        }
        put_words(&mut memory, PREFIX, &prefix);
        let command = CommandDescriptor {
            kernel: KernelId::SsspRelax as u32,
            mode: 0,
            tag: 0,
            flags: 0,
            result_address: RESULT,
            result_length: u64::from(*prefix.last().unwrap()) * 4,
            args: [
                PARAMETERS,
                FRONTIER,
                pack_frontier(frontier.len() as u32, 1),
                PREFIX,
            ],
        };
        (memory, command)
    }

    fn run_all(memory: &mut FakeMemory, command: &CommandDescriptor) -> SsspKernel {
        let kernel = SsspKernel::decode(command, memory).unwrap();
        for item in 0..kernel.items() {
            kernel.execute(item, memory).unwrap();
        }
        kernel
    }

    #[test]
    fn source_step_improves_its_neighbours_and_reports_each_arc() {
        let (mut memory, command) = setup(&[0, INFINITY, INFINITY, INFINITY, INFINITY], &[0], 4);
        let kernel = run_all(&mut memory, &command);
        assert_eq!(kernel.items(), 1);
        assert_eq!(words(&memory, RESULT, 2), [4 | C, 1 | C]);
        assert_eq!(words(&memory, CLAIMS, 5), [0, 1, 1, 0, 0]);
        assert_eq!(words(&memory, DISTANCES, 5), [0, 4, 1, INFINITY, INFINITY]);
    }

    #[test]
    fn second_step_reports_only_improving_arcs_and_final_distances_are_the_minimum() {
        // After the source step: frontier {1, 2}.
        let (mut memory, command) = setup(&[0, 4, 1, INFINITY, INFINITY], &[1, 2], 1);
        let kernel = run_all(&mut memory, &command);
        assert_eq!(kernel.items(), 2);
        // Slots: 1 -> 3 (9, claims 3), 2 -> 1 (3 < 4, claims 1), 2 -> 3 (9: not better than
        // the 9 already there).
        assert_eq!(words(&memory, RESULT, 3), [9 | C, 3 | C, INFINITY]);
        assert_eq!(words(&memory, DISTANCES, 5), [0, 3, 1, 9, INFINITY]);
    }

    #[test]
    fn a_vertex_improved_twice_in_a_launch_is_claimed_once() {
        let (mut memory, mut command) = setup(&[0, INFINITY, 1, INFINITY, INFINITY], &[0, 2], 2);
        run_all(&mut memory, &command);
        // 0 -> 1 claims 1 at 4; 0 -> 2 (1) is no better; 2 -> 1 improves 1 to 3 without a
        // claim; 2 -> 3 claims 3.
        assert_eq!(words(&memory, RESULT, 4), [4 | C, INFINITY, 3, 9 | C]);
        // The next launch (a new stamp) claims again; the same stamp would not.
        put_words(
            &mut memory,
            DISTANCES,
            &[0, INFINITY, 1, INFINITY, INFINITY],
        );
        command.args[2] = pack_frontier(2, 2);
        run_all(&mut memory, &command);
        assert_eq!(words(&memory, RESULT, 4), [4 | C, INFINITY, 3, 9 | C]);
        put_words(
            &mut memory,
            DISTANCES,
            &[0, INFINITY, 1, INFINITY, INFINITY],
        );
        run_all(&mut memory, &command);
        assert_eq!(words(&memory, RESULT, 4), [4, INFINITY, 3, 9]);
    }

    #[test]
    fn candidates_stay_below_the_claim_flag() {
        assert_eq!(candidate(5, 7), 12);
        assert_eq!(candidate(CLAIMED - 2, 1), CLAIMED - 1);
        assert_eq!(candidate(CLAIMED - 2, 2), INFINITY);
        assert_eq!(candidate(INFINITY, 0), INFINITY);
        assert_eq!(candidate(INFINITY, 1), INFINITY);
    }

    #[test]
    fn unreached_vertices_improve_nothing() {
        let (mut memory, command) = setup(&[INFINITY; 5], &[0, 2], 8);
        run_all(&mut memory, &command);
        assert_eq!(words(&memory, RESULT, 4), [INFINITY; 4]);
        assert_eq!(words(&memory, DISTANCES, 5), [INFINITY; 5]);
    }

    #[test]
    fn items_are_blocks_of_the_frontier_with_prefix_offsets_and_cost() {
        let (memory, command) = setup(&[0; 5], &[0, 1, 2, 3], 3);
        let kernel = SsspKernel::decode(&command, &memory).unwrap();
        assert_eq!(kernel.items(), 2);
        let first = kernel.item(0, &memory).unwrap();
        assert_eq!((first.result_offset, first.result_length), (0, 20));
        assert_eq!(first.cost, item_cost(3, 5));
        let second = kernel.item(1, &memory).unwrap();
        assert_eq!((second.result_offset, second.result_length), (20, 0));
        assert_eq!(
            second.cost.instructions(),
            FIXED_OPERATIONS + OPERATIONS_PER_VERTEX
        );
        assert_eq!(kernel.item(2, &memory), Err(Status::ArgumentOutOfRange));
        assert_eq!(
            item_cost(2, 3).bytes,
            2 * BYTES_PER_VERTEX + 3 * BYTES_PER_ARC
        );
    }

    #[test]
    fn long_adjacency_lists_cross_chunks() {
        // A star: vertex 0 with 150 arcs to vertices 1..=150, weight = target.
        let vertices = 151_u32;
        let mut offsets = vec![0_u32, 150];
        offsets.extend(std::iter::repeat_n(150, 150));
        let targets: Vec<u32> = (1..=150).collect();
        let mut memory = FakeMemory::new(MEMORY as usize);
        let parameters = SsspParameters {
            vertices: u64::from(vertices),
            arcs: 150,
            offsets: 0x4000,
            targets: 0x5000,
            weights: 0x6000,
            distances: 0x7000,
            claims: 0x7400,
            vertices_per_item: 16,
        };
        memory
            .write(DeviceAddress(PARAMETERS), &parameters.to_bytes())
            .unwrap();
        put_words(&mut memory, 0x4000, &offsets);
        put_words(&mut memory, 0x5000, &targets);
        put_words(&mut memory, 0x6000, &targets);
        let mut distances = vec![INFINITY; 151];
        distances[0] = 10;
        distances[100] = 50;
        put_words(&mut memory, 0x7000, &distances);
        put_words(&mut memory, FRONTIER, &[0]);
        put_words(&mut memory, PREFIX, &[0, 150]);
        let command = CommandDescriptor {
            kernel: KernelId::SsspRelax as u32,
            mode: 0,
            tag: 0,
            flags: 0,
            result_address: 0x8000,
            result_length: 600,
            args: [PARAMETERS, FRONTIER, pack_frontier(1, 3), PREFIX],
        };
        run_all(&mut memory, &command);
        let results = words(&memory, 0x8000, 150);
        for (k, result) in results.iter().enumerate() {
            let target = k as u32 + 1;
            let expected = if target == 100 {
                INFINITY
            } else {
                (10 + target) | C
            };
            assert_eq!(*result, expected, "slot {k}");
        }
    }

    fn rejected(memory: &FakeMemory, command: &CommandDescriptor, status: Status) {
        assert_eq!(
            SsspKernel::decode(command, memory),
            Err(status),
            "{command:?}"
        );
    }

    #[test]
    fn wrong_kernel_flags_and_bad_shapes_are_rejected() {
        let (memory, valid) = setup(&[0; 5], &[0, 2], 2);
        assert!(SsspKernel::decode(&valid, &memory).is_ok());
        let mut c = valid;
        c.kernel = 1;
        rejected(&memory, &c, Status::UnknownKernel);
        let mut c = valid;
        c.flags = 4;
        rejected(&memory, &c, Status::MalformedDescriptor);
        for packed in [pack_frontier(0, 2), pack_frontier(2, 0)] {
            let mut c = valid;
            c.args[2] = packed;
            rejected(&memory, &c, Status::ArgumentOutOfRange);
        }
        // Result length other than 4 * prefix[count].
        for length in [0, 12, 20, 15] {
            let mut c = valid;
            c.result_length = length;
            rejected(&memory, &c, Status::ArgumentOutOfRange);
        }
        // Unaligned parameters, frontier, result.
        for (field, value) in [(0, PARAMETERS + 4), (1, FRONTIER + 2), (3, PREFIX + 1)] {
            let mut c = valid;
            c.args[field] = value;
            rejected(&memory, &c, Status::ArgumentOutOfRange);
        }
        let mut c = valid;
        c.result_address = RESULT + 2;
        rejected(&memory, &c, Status::ArgumentOutOfRange);
    }

    #[test]
    fn inconsistent_frontier_or_prefix_is_rejected() {
        let (mut memory, valid) = setup(&[0; 5], &[0, 2], 2);
        // prefix[0] != 0.
        put_words(&mut memory, PREFIX, &[1, 3, 5]);
        rejected(&memory, &valid, Status::ArgumentOutOfRange);
        // A step that is not the degree.
        put_words(&mut memory, PREFIX, &[0, 1, 4]);
        rejected(&memory, &valid, Status::ArgumentOutOfRange);
        // Decreasing.
        put_words(&mut memory, PREFIX, &[0, 2, 1]);
        rejected(&memory, &valid, Status::ArgumentOutOfRange);
        put_words(&mut memory, PREFIX, &[0, 2, 4]);
        assert!(SsspKernel::decode(&valid, &memory).is_ok());
        // A frontier vertex beyond the graph.
        put_words(&mut memory, FRONTIER, &[0, 5]);
        rejected(&memory, &valid, Status::ArgumentOutOfRange);
        put_words(&mut memory, FRONTIER, &[0, 2]);
        // Offsets beyond the arcs.
        put_words(&mut memory, OFFSETS, &[0, 2, 3, 9, 9, 9]);
        rejected(&memory, &valid, Status::ArgumentOutOfRange);
    }

    #[test]
    fn bad_graph_parameters_and_overlaps_are_rejected() {
        let (mut memory, valid) = setup(&[0; 5], &[0, 2], 2);
        let good = SsspParameters {
            vertices: 5,
            arcs: 5,
            offsets: OFFSETS,
            targets: TARGETS,
            weights: WEIGHTS,
            distances: DISTANCES,
            claims: CLAIMS,
            vertices_per_item: 2,
        };
        let bad = [
            SsspParameters {
                vertices_per_item: 0,
                ..good
            },
            SsspParameters {
                vertices_per_item: u64::from(MAX_VERTICES_PER_ITEM) + 1,
                ..good
            },
            // Claims overlapping the distances, the offsets or the result; unaligned.
            SsspParameters {
                claims: DISTANCES + 4,
                ..good
            },
            SsspParameters {
                claims: OFFSETS,
                ..good
            },
            SsspParameters {
                claims: RESULT + 8,
                ..good
            },
            SsspParameters {
                claims: CLAIMS + 2,
                ..good
            },
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
            SsspParameters { targets: 2, ..good },
            SsspParameters {
                distances: u64::MAX - 3,
                ..good
            },
            // Distances overlapping the frontier, the weights, or the result.
            SsspParameters {
                distances: FRONTIER,
                ..good
            },
            SsspParameters {
                distances: WEIGHTS + 8,
                ..good
            },
            SsspParameters {
                distances: RESULT,
                ..good
            },
        ];
        for parameters in bad {
            memory
                .write(DeviceAddress(PARAMETERS), &parameters.to_bytes())
                .unwrap();
            rejected(&memory, &valid, Status::ArgumentOutOfRange);
        }
        memory
            .write(DeviceAddress(PARAMETERS), &good.to_bytes())
            .unwrap();
        // The result overlapping an input.
        for address in [OFFSETS, TARGETS + 4, FRONTIER, PREFIX, PARAMETERS] {
            let mut c = valid;
            c.result_address = address;
            rejected(&memory, &c, Status::ArgumentOutOfRange);
        }
        // The parameter block beyond memory.
        let mut c = valid;
        c.args[0] = MEMORY - 40;
        rejected(&memory, &c, Status::ArgumentOutOfRange);
        c.args[0] = u64::MAX - 7;
        rejected(&memory, &c, Status::ArgumentOutOfRange);
    }

    #[test]
    fn an_arc_target_beyond_the_graph_fails_the_item() {
        let (mut memory, command) = setup(&[0; 5], &[0], 1);
        put_words(&mut memory, TARGETS, &[7]);
        let kernel = SsspKernel::decode(&command, &memory).unwrap();
        assert_eq!(
            kernel.execute(0, &mut memory),
            Err(Status::ArgumentOutOfRange)
        );
        assert_eq!(
            kernel.execute(1, &mut memory),
            Err(Status::ArgumentOutOfRange)
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
        for round in 0..4000 {
            let (mut memory, mut command) = setup(&[0, 3, INFINITY, 7, 1], &[0, 1, 2], 2);
            // Scribble over a few words of the graph, frontier, prefix or parameters.
            for _ in 0..(round % 4) {
                let address = pick(
                    &mut state,
                    &[PARAMETERS, OFFSETS, TARGETS, FRONTIER, PREFIX, DISTANCES],
                ) + 4 * (next(&mut state) % 12);
                let random = next(&mut state);
                let value = pick(&mut state, &[0, 1, 5, 6, u64::from(u32::MAX), random]) as u32;
                put_words(&mut memory, address, &[value]);
            }
            let field = next(&mut state) % 7;
            let random = next(&mut state);
            let value = pick(
                &mut state,
                &[
                    0,
                    1,
                    4,
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
                5 => command.result_length = value,
                _ => command.args[2] = pack_frontier((value % 5) as u32, (value >> 8) as u32 % 5),
            }
            if let Ok(kernel) = SsspKernel::decode(&command, &memory) {
                for item in 0..kernel.items().min(64) {
                    let _ = kernel.item(item, &memory);
                    let _ = kernel.execute(item, &mut memory);
                }
                assert_eq!(
                    kernel.item(kernel.items(), &memory),
                    Err(Status::ArgumentOutOfRange)
                );
            }
            // A memory smaller than the command assumes.
            let small = FakeMemory::new(0x300);
            let _ = SsspKernel::decode(&command, &small);
        }
    }
}
