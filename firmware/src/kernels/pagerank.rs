//! PageRank gather kernel: for every vertex, the sum of its in-neighbours' contributions
//! (pull-based PageRank's neighbour traversal and accumulation).
//!
//! # Device memory
//!
//! The graph lives in device memory as an in-neighbour CSR described by a [`PageRankParameters`]
//! block written once at load time (`args[0]` points at it):
//!
//! | array | layout |
//! |---|---|
//! | offsets | `vertices + 1` little-endian `u32`: the in-neighbours of `v` are `sources[offsets[v]..offsets[v + 1]]` |
//! | sources | `arcs` `u32` vertex ids |
//!
//! The host rewrites the contribution array (`vertices` `f32`, `c[u] = rank[u] / outdeg[u]`,
//! 0 for a vertex without out-arcs) before every launch; `args[1]` names it.
//!
//! # Command ([`shared_abi::KernelId::PageRankGather`])
//!
//! | field | meaning |
//! |---|---|
//! | `args[0]` | device address of the [`PageRankParameters`] block (8-byte aligned) |
//! | `args[1]` | device address of the contributions: `vertices` `f32` |
//! | `args[2]` | vertices per item, `1..=`[`MAX_VERTICES_PER_ITEM`] |
//! | `args[3]` | reserved, must be zero |
//! | `result_address`, `result_length` | the result space: exactly `4 * vertices` bytes |
//! | `flags` | reserved, must be zero |
//!
//! # Work items and result layout
//!
//! Item `i` covers vertices `i * per_item .. min((i + 1) * per_item, vertices)` and writes, for
//! each vertex `v`, [`gather_sum`] of its in-neighbours' contributions (`f32`, little-endian) at
//! result offset `4 v`: the result is the vertex-ordered array of sums.
//!
//! # Arithmetic and summation order (bit-exact contract with the host reference)
//!
//! The µthread gathers scalar-wise: `s = +0.0`, then `s = s + c[sources[k]]` for `k =
//! offsets[v], offsets[v] + 1, ...` in increasing order, each addition rounded in `f32` (the
//! mean degree of the paper's graph is 6.5, too short for full 16-lane vectors). The host
//! reference calls the same [`gather_sum`] order, so results are bit-identical.
//!
//! # Validation (everything a hostile host can send)
//!
//! - `kernel` is not PageRank: [`Status::UnknownKernel`]; `flags != 0`: [`Status::MalformedDescriptor`].
//! - Any address unaligned (parameters: 8, arrays and result: 4), any array or the result
//!   overflowing or ending beyond device memory, `vertices` zero or `vertices + 1` not fitting
//!   a `u32`, `arcs` not fitting a `u32`, vertices per item outside `1..=`[`MAX_VERTICES_PER_ITEM`],
//!   `args[3] != 0`, the result overlapping any input, or `result_length != 4 * vertices`:
//!   [`Status::ArgumentOutOfRange`] at decode. An item whose offsets decrease or exceed `arcs`,
//!   or whose source ids are `>= vertices`, fails with [`Status::ArgumentOutOfRange`] when it is
//!   described or executed.
//!
//! Every size is computed with checked arithmetic; nothing here can panic.

use crate::hal::DeviceMemory;
use crate::kernels::ranges::{checked_range, overlaps};
use crate::kernels::sssp::{read_word, read_words, word_address, CHUNK_WORDS, RANDOM_ACCESS_BYTES};
use crate::kernels::{ItemCost, ItemSpec};
use shared_abi::{CommandDescriptor, DeviceAddress, KernelId, Status};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Largest vertices-per-item value accepted.
pub const MAX_VERTICES_PER_ITEM: u32 = 65_536;

/// Bytes of result per vertex: one `f32` sum.
pub const RESULT_BYTES_PER_VERTEX: u64 = 4;

/// Instructions per in-arc: `lw` the source id, `slli` + `add` its contribution's address (2),
/// `flw` the contribution (a gather from a random line), `fadd.s`, and the loop's pointer bump
/// and branch (2): 6.
pub const OPERATIONS_PER_ARC: u64 = 6;

/// Bytes per in-arc: the 4-byte source id (streamed) and the contribution's line
/// ([`RANDOM_ACCESS_BYTES`]: a random 4-byte read moves a 64-byte burst).
pub const BYTES_PER_ARC: u64 = 4 + RANDOM_ACCESS_BYTES;

/// Instructions per vertex: `lw` the next offset (the previous one is kept in a register),
/// clear the accumulator, loop set-up and bound check (3), `fsw` the sum, vertex loop bump and
/// branch (2): 8.
pub const OPERATIONS_PER_VERTEX: u64 = 8;

/// Bytes per vertex: its offset word and its result word (both sequential).
pub const BYTES_PER_VERTEX: u64 = 4 + RESULT_BYTES_PER_VERTEX;

/// Fixed instructions per item: the first and last vertex from the index (3), the first
/// offset and the base addresses (4), the return and call overhead (5).
pub const FIXED_OPERATIONS: u64 = 12;

/// The parameter block of the in-neighbour graph (32 bytes, little-endian `u64` fields).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct PageRankParameters {
    /// Vertices.
    pub vertices: u64,
    /// Arcs (in-neighbour entries).
    pub arcs: u64,
    /// Device address of the CSR offsets (`vertices + 1` `u32`).
    pub offsets: u64,
    /// Device address of the in-neighbour ids (`arcs` `u32`).
    pub sources: u64,
}

const _: () = assert!(core::mem::size_of::<PageRankParameters>() == 32);

impl PageRankParameters {
    /// The block as the bytes the host writes into device memory.
    pub fn to_bytes(&self) -> [u8; 32] {
        let mut bytes = [0_u8; 32];
        bytes.copy_from_slice(self.as_bytes());
        bytes
    }
}

/// The modelled cost of an item over `vertices` vertices with `arcs` in-arcs in all: see
/// [`FIXED_OPERATIONS`], [`OPERATIONS_PER_VERTEX`], [`OPERATIONS_PER_ARC`], [`BYTES_PER_VERTEX`]
/// and [`BYTES_PER_ARC`]. Saturates instead of overflowing.
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

/// The running sum of one vertex in the kernel's order: `s = s + c` per in-neighbour, in `f32`.
/// Feeding contributions in several calls equals one call with all of them.
pub fn gather_sum(sum: f32, contributions: impl IntoIterator<Item = f32>) -> f32 {
    contributions
        .into_iter()
        .fold(sum, |sum, contribution| sum + contribution)
}

/// A decoded, validated PageRank gather launch.
///
/// # Invariants
///
/// The parameter block, offsets, sources, contributions and result lie inside the device
/// memory the command was decoded against; the result overlaps none of them; `items ==
/// ceil(vertices / per_item)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageRankKernel {
    parameters: PageRankParameters,
    contributions: u64,
    result: u64,
    per_item: u32,
    items: u32,
}

impl PageRankKernel {
    /// Decodes and validates `command` against device memory (read only; see the module docs).
    /// Never panics.
    pub fn decode<M: DeviceMemory>(
        command: &CommandDescriptor,
        memory: &M,
    ) -> Result<Self, Status> {
        if command.kernel != KernelId::PageRankGather as u32 {
            return Err(Status::UnknownKernel);
        }
        if command.flags != 0 {
            return Err(Status::MalformedDescriptor);
        }
        let size = memory.size();
        let [parameters_address, contributions, per_item, reserved] = command.args;
        if reserved != 0 {
            return Err(Status::ArgumentOutOfRange);
        }
        let per_item = u32::try_from(per_item).map_err(|_| Status::ArgumentOutOfRange)?;
        if per_item == 0 || per_item > MAX_VERTICES_PER_ITEM {
            return Err(Status::ArgumentOutOfRange);
        }
        let parameters_range = checked_range(parameters_address, 32, 8, size)?;
        let parameters: PageRankParameters = memory
            .read_value(DeviceAddress(parameters_address))
            .map_err(|_| Status::ArgumentOutOfRange)?;
        let vertices = parameters.vertices;
        if vertices == 0 || vertices >= u64::from(u32::MAX) || parameters.arcs > u64::from(u32::MAX)
        {
            return Err(Status::ArgumentOutOfRange);
        }
        let words = |n: u64| n.checked_mul(4).ok_or(Status::ArgumentOutOfRange);
        let offsets_range = checked_range(
            parameters.offsets,
            words(vertices.checked_add(1).ok_or(Status::ArgumentOutOfRange)?)?,
            4,
            size,
        )?;
        let sources_range = checked_range(parameters.sources, words(parameters.arcs)?, 4, size)?;
        let contributions_range = checked_range(contributions, words(vertices)?, 4, size)?;
        let result_bytes = words(vertices)?;
        if command.result_length != result_bytes {
            return Err(Status::ArgumentOutOfRange);
        }
        let result_range = checked_range(command.result_address, result_bytes, 4, size)?;
        if [
            parameters_range,
            offsets_range,
            sources_range,
            contributions_range,
        ]
        .iter()
        .any(|range| overlaps(*range, result_range))
        {
            return Err(Status::ArgumentOutOfRange);
        }
        let vertices = u32::try_from(vertices).map_err(|_| Status::ArgumentOutOfRange)?;
        Ok(PageRankKernel {
            parameters,
            contributions,
            result: command.result_address,
            per_item,
            items: vertices.div_ceil(per_item),
        })
    }

    /// The graph's parameter block.
    pub fn parameters(&self) -> PageRankParameters {
        self.parameters
    }

    /// Vertices per item.
    pub fn per_item(&self) -> u32 {
        self.per_item
    }

    /// Work items: `ceil(vertices / per_item)`.
    pub fn items(&self) -> u32 {
        self.items
    }

    /// Vertices of item `index`, and their first and last offsets (checked: not decreasing,
    /// within the arcs).
    fn span<M: DeviceMemory>(
        &self,
        index: u32,
        memory: &M,
    ) -> Result<(u64, u64, u64, u64), Status> {
        if index >= self.items {
            return Err(Status::ArgumentOutOfRange);
        }
        let first = u64::from(index)
            .checked_mul(u64::from(self.per_item))
            .ok_or(Status::ArgumentOutOfRange)?;
        let last = first
            .checked_add(u64::from(self.per_item))
            .ok_or(Status::ArgumentOutOfRange)?
            .min(self.parameters.vertices);
        let arc_first = u64::from(read_word(memory, self.parameters.offsets, first)?);
        let arc_last = u64::from(read_word(memory, self.parameters.offsets, last)?);
        if arc_first > arc_last || arc_last > self.parameters.arcs {
            return Err(Status::ArgumentOutOfRange);
        }
        Ok((first, last, arc_first, arc_last))
    }

    /// Item `index`: result offset `4 * first`, `4 * vertices` bytes, cost [`item_cost`] (its
    /// arc count read from the offsets).
    pub fn item<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<ItemSpec, Status> {
        let (first, last, arc_first, arc_last) = self.span(index, memory)?;
        let vertices = last.checked_sub(first).ok_or(Status::ArgumentOutOfRange)?;
        Ok(ItemSpec {
            result_offset: first
                .checked_mul(RESULT_BYTES_PER_VERTEX)
                .ok_or(Status::ArgumentOutOfRange)?,
            result_length: u32::try_from(
                vertices
                    .checked_mul(RESULT_BYTES_PER_VERTEX)
                    .ok_or(Status::ArgumentOutOfRange)?,
            )
            .map_err(|_| Status::ArgumentOutOfRange)?,
            cost: item_cost(
                vertices,
                arc_last
                    .checked_sub(arc_first)
                    .ok_or(Status::ArgumentOutOfRange)?,
            ),
        })
    }

    /// Runs item `index`: the [`gather_sum`] of every vertex of the item, written at `4 v` of
    /// the result.
    pub fn execute<M: DeviceMemory>(&self, index: u32, memory: &mut M) -> Result<(), Status> {
        let (first, last, _, _) = self.span(index, memory)?;
        let parameters = self.parameters;
        let mut sources = [0_u32; CHUNK_WORDS];
        let mut arc_first = u64::from(read_word(memory, parameters.offsets, first)?);
        for vertex in first..last {
            let arc_last = u64::from(read_word(
                memory,
                parameters.offsets,
                vertex.checked_add(1).ok_or(Status::ArgumentOutOfRange)?,
            )?);
            if arc_first > arc_last || arc_last > parameters.arcs {
                return Err(Status::ArgumentOutOfRange);
            }
            let mut sum = 0.0_f32;
            let mut arc = arc_first;
            while arc < arc_last {
                let chunk = usize::try_from(
                    arc_last
                        .checked_sub(arc)
                        .ok_or(Status::ArgumentOutOfRange)?
                        .min(CHUNK_WORDS as u64),
                )
                .map_err(|_| Status::ArgumentOutOfRange)?;
                read_words(memory, parameters.sources, arc, chunk, &mut sources)?;
                for source in sources.iter().take(chunk) {
                    let source = u64::from(*source);
                    if source >= parameters.vertices {
                        return Err(Status::ArgumentOutOfRange);
                    }
                    let contribution =
                        f32::from_bits(read_word(memory, self.contributions, source)?);
                    sum = gather_sum(sum, [contribution]);
                }
                arc = arc
                    .checked_add(chunk as u64)
                    .ok_or(Status::ArgumentOutOfRange)?;
            }
            memory.write(word_address(self.result, vertex)?, &sum.to_le_bytes())?;
            arc_first = arc_last;
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
    const SOURCES: u64 = 0x400;
    const CONTRIBUTIONS: u64 = 0x800;
    const RESULT: u64 = 0x1000;

    fn put_words(memory: &mut FakeMemory, address: u64, words: &[u32]) {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        memory.write(DeviceAddress(address), &bytes).unwrap();
    }

    fn floats(memory: &FakeMemory, address: u64, count: usize) -> Vec<f32> {
        memory
            .bytes(DeviceAddress(address), count as u64 * 4)
            .chunks_exact(4)
            .map(|w| f32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect()
    }

    fn parameters() -> PageRankParameters {
        PageRankParameters {
            vertices: 4,
            arcs: 6,
            offsets: OFFSETS,
            sources: SOURCES,
        }
    }

    /// The undirected path 0 - 1 - 2 - 3 as in-neighbours: 0: {1}, 1: {0, 2}, 2: {1, 3},
    /// 3: {2}; contributions 0.5, 0.25, 0.125, 1.0 (sums exact in `f32`).
    fn setup(per_item: u64) -> (FakeMemory, CommandDescriptor) {
        let mut memory = FakeMemory::new(MEMORY as usize);
        memory
            .write(DeviceAddress(PARAMETERS), &parameters().to_bytes())
            .unwrap();
        put_words(&mut memory, OFFSETS, &[0, 1, 3, 5, 6]);
        put_words(&mut memory, SOURCES, &[1, 0, 2, 1, 3, 2]);
        let contributions = [0.5_f32, 0.25, 0.125, 1.0];
        put_words(&mut memory, CONTRIBUTIONS, &contributions.map(f32::to_bits));
        let command = CommandDescriptor {
            kernel: KernelId::PageRankGather as u32,
            mode: 0,
            tag: 0,
            flags: 0,
            result_address: RESULT,
            result_length: 16,
            args: [PARAMETERS, CONTRIBUTIONS, per_item, 0],
        };
        (memory, command)
    }

    #[test]
    fn every_vertex_gets_the_sum_of_its_in_neighbours() {
        for per_item in [1, 3, 4, 100] {
            let (mut memory, command) = setup(per_item);
            let kernel = PageRankKernel::decode(&command, &memory).unwrap();
            assert_eq!(u64::from(kernel.items()), 4_u64.div_ceil(per_item));
            for item in 0..kernel.items() {
                kernel.execute(item, &mut memory).unwrap();
            }
            assert_eq!(floats(&memory, RESULT, 4), [0.25, 0.625, 1.25, 0.125]);
        }
    }

    #[test]
    fn items_cover_vertex_blocks_with_their_arc_counts() {
        let (memory, command) = setup(3);
        let kernel = PageRankKernel::decode(&command, &memory).unwrap();
        let first = kernel.item(0, &memory).unwrap();
        assert_eq!((first.result_offset, first.result_length), (0, 12));
        assert_eq!(first.cost, item_cost(3, 5));
        let second = kernel.item(1, &memory).unwrap();
        assert_eq!((second.result_offset, second.result_length), (12, 4));
        assert_eq!(
            second.cost.instructions(),
            FIXED_OPERATIONS + OPERATIONS_PER_VERTEX + OPERATIONS_PER_ARC
        );
        assert_eq!(second.cost.bytes, BYTES_PER_VERTEX + BYTES_PER_ARC);
        assert_eq!(kernel.item(2, &memory), Err(Status::ArgumentOutOfRange));
    }

    #[test]
    fn gather_sum_is_sequential_f32() {
        let values = [1.0e8_f32, 1.0, -1.0e8, 1.0];
        // Sequential f32: (1e8 + 1) rounds to 1e8, minus 1e8 is 0, plus 1 is 1.
        assert_eq!(gather_sum(0.0, values), 1.0);
        assert_eq!(
            gather_sum(
                gather_sum(0.0, values[..2].iter().copied()),
                values[2..].iter().copied()
            ),
            1.0
        );
    }

    #[test]
    fn long_in_lists_cross_chunks() {
        let mut memory = FakeMemory::new(MEMORY as usize);
        let p = PageRankParameters {
            vertices: 2,
            arcs: 200,
            offsets: OFFSETS,
            sources: SOURCES,
        };
        memory
            .write(DeviceAddress(PARAMETERS), &p.to_bytes())
            .unwrap();
        put_words(&mut memory, OFFSETS, &[0, 150, 200]);
        let sources: Vec<u32> = (0..200).map(|k| k % 2).collect();
        put_words(&mut memory, SOURCES, &sources);
        put_words(
            &mut memory,
            CONTRIBUTIONS + 0x400,
            &[0.5_f32.to_bits(), 2.0_f32.to_bits()],
        );
        let command = CommandDescriptor {
            kernel: KernelId::PageRankGather as u32,
            mode: 0,
            tag: 0,
            flags: 0,
            result_address: RESULT,
            result_length: 8,
            args: [PARAMETERS, CONTRIBUTIONS + 0x400, 1, 0],
        };
        let kernel = PageRankKernel::decode(&command, &memory).unwrap();
        kernel.execute(0, &mut memory).unwrap();
        kernel.execute(1, &mut memory).unwrap();
        assert_eq!(floats(&memory, RESULT, 2), [75.0 * 2.5, 25.0 * 2.5]);
    }

    fn rejected(memory: &FakeMemory, command: &CommandDescriptor) {
        assert_eq!(
            PageRankKernel::decode(command, memory),
            Err(Status::ArgumentOutOfRange),
            "{command:?}"
        );
    }

    #[test]
    fn malformed_commands_are_rejected() {
        let (mut memory, valid) = setup(2);
        let mut c = valid;
        c.kernel = KernelId::SsspRelax as u32;
        assert_eq!(
            PageRankKernel::decode(&c, &memory),
            Err(Status::UnknownKernel)
        );
        let mut c = valid;
        c.flags = 1;
        assert_eq!(
            PageRankKernel::decode(&c, &memory),
            Err(Status::MalformedDescriptor)
        );
        for (field, value) in [
            (2, 0),
            (2, u64::from(MAX_VERTICES_PER_ITEM) + 1),
            (3, 1),
            (0, PARAMETERS + 4),
            (0, MEMORY - 16),
            (0, u64::MAX - 7),
            (1, CONTRIBUTIONS + 2),
            (1, MEMORY - 8),
            (1, RESULT + 4),
        ] {
            let mut c = valid;
            c.args[field] = value;
            rejected(&memory, &c);
        }
        for length in [0, 12, 20] {
            let mut c = valid;
            c.result_length = length;
            rejected(&memory, &c);
        }
        for address in [
            RESULT + 1,
            MEMORY - 12,
            OFFSETS + 16,
            SOURCES + 20,
            PARAMETERS + 16,
        ] {
            let mut c = valid;
            c.result_address = address;
            rejected(&memory, &c);
        }
        for bad in [
            PageRankParameters {
                vertices: 0,
                ..parameters()
            },
            PageRankParameters {
                vertices: u64::from(u32::MAX),
                ..parameters()
            },
            PageRankParameters {
                arcs: 1 << 32,
                ..parameters()
            },
            PageRankParameters {
                sources: MEMORY - 8,
                ..parameters()
            },
            PageRankParameters {
                offsets: 3,
                ..parameters()
            },
        ] {
            memory
                .write(DeviceAddress(PARAMETERS), &bad.to_bytes())
                .unwrap();
            rejected(&memory, &valid);
        }
    }

    #[test]
    fn bad_offsets_or_sources_fail_the_item() {
        let (mut memory, command) = setup(2);
        let kernel = PageRankKernel::decode(&command, &memory).unwrap();
        put_words(&mut memory, OFFSETS, &[0, 4, 3, 5, 6]);
        assert_eq!(
            kernel.execute(0, &mut memory),
            Err(Status::ArgumentOutOfRange)
        );
        put_words(&mut memory, OFFSETS, &[0, 1, 3, 5, 9]);
        assert_eq!(kernel.item(1, &memory), Err(Status::ArgumentOutOfRange));
        put_words(&mut memory, OFFSETS, &[0, 1, 3, 5, 6]);
        put_words(&mut memory, SOURCES, &[1, 0, 2, 1, 3, 4]);
        assert_eq!(
            kernel.execute(1, &mut memory),
            Err(Status::ArgumentOutOfRange)
        );
        assert_eq!(
            kernel.execute(2, &mut memory),
            Err(Status::ArgumentOutOfRange)
        );
    }

    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn hostile_commands_and_memory_never_panic() {
        let mut state = 0x2545_F491_4F6C_DD1D_u64;
        for round in 0..4000 {
            let (mut memory, mut command) = setup(2);
            for _ in 0..(round % 4) {
                let address = [PARAMETERS, OFFSETS, SOURCES][(next(&mut state) % 3) as usize]
                    + 4 * (next(&mut state) % 10);
                let value = [0, 1, 3, 7, u32::MAX, next(&mut state) as u32]
                    [(next(&mut state) % 6) as usize];
                put_words(&mut memory, address, &[value]);
            }
            let value = [
                0,
                1,
                4,
                MEMORY - 4,
                MEMORY,
                u64::MAX,
                next(&mut state),
                next(&mut state) % MEMORY,
            ][(next(&mut state) % 8) as usize];
            match next(&mut state) % 6 {
                field @ 0..=3 => command.args[field as usize] = value,
                4 => command.result_address = value,
                _ => command.result_length = value,
            }
            if let Ok(kernel) = PageRankKernel::decode(&command, &memory) {
                for item in 0..kernel.items().min(64) {
                    let _ = kernel.item(item, &memory);
                    let _ = kernel.execute(item, &mut memory);
                }
                assert_eq!(
                    kernel.item(kernel.items(), &memory),
                    Err(Status::ArgumentOutOfRange)
                );
            }
            let _ = PageRankKernel::decode(&command, &FakeMemory::new(0x300));
        }
    }
}
