//! PageRank gather kernel: for every vertex, the sum of its in-neighbours' contributions
//! (pull-based PageRank's neighbour traversal and accumulation).
//!
//! # Device memory
//!
//! The graph lives in device memory as an in-neighbour CSR described by a [`PageRankParameters`]
//! block written once at load time (`args[0]` points at it; the block's layout is part of the
//! ABI, [`shared_abi::params::pagerank`], re-exported here):
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
//! | `args[2]` | vertices per item: must be [`VERTICES_PER_ITEM`] (1) |
//! | `args[3]` | reserved, must be zero |
//! | `result_address`, `result_length` | the result space: exactly `4 * vertices` bytes |
//! | `flags` | reserved, must be zero |
//!
//! # Work items and result layout: one µthread per vertex, as M²NDP's SpMV
//!
//! Item `v` is vertex `v` and writes [`gather_sum`] of its in-neighbours' contributions (`f32`,
//! little-endian) at result offset `4 v`: the result is the vertex-ordered array of sums.
//!
//! This is the decomposition of M²NDP's PageRank SpMV (`examples/benchmarks/pagerank/
//! kernel2.py`, whose base region gives each µthread one 32-byte packet and so one row): the
//! µthread reads its row's two CSR offsets, then walks the row 8 in-arcs at a time with masked
//! indexed loads ([`VECTOR_LANES`] lanes, `vluxei32.v` under the mask `index < end`), adds the
//! gathered values into a lane accumulator, and ends with an ordered reduction
//! (`vfredosum.vs`) and a scalar store. The µthread's instructions, by functional unit:
//!
//! ```text
//! FIXED      vsetvli; li spad; ld x4 (bases of offsets, sources, contributions, result);
//!            li 8; li -1; vmset.m; vid.v; vmv.v.i + vfcvt (M2NDP's unused v2, kept);
//!            srli + add (offsets[v]'s address); lw offsets[v]; lw offsets[v + 1];
//!            li 0; vmv.v.i + vfcvt (clear the lanes); ble (no in-arcs: to the reduction);
//!            vmv.v.i (the reduction's zero); vfredosum.vs; vfmv.f.s; srli + add; fsw; li 1
//! PER_CHUNK  vadd.vx + vmslt.vx (lane indices and mask); vsll.vi; vluxei32 sources;
//!            vsll.vi; vluxei32 contributions; vfadd.vv; sub + addi + bgt (loop)
//! ```
//!
//! Item cost: [`FIXED`] + `ceil(in-arcs / 8)` × [`PER_CHUNK`] + in-arcs × [`BYTES_PER_ARC`]
//! bytes, plus `in-arcs - ceil(in-arcs / 8)` extra cycles of the vector address unit (a
//! gather of `k` contributions from random lines touches `k` packets: M²NDP
//! `execution_unit.cc`, `inst_issue_interval *= inst.addr_set.size()`) ([`item_cost`]).
//!
//! Where ours differs from M²NDP's kernel2, and why:
//!
//! - **No per-arc weight.** M²NDP multiplies `x[col[j]]` by a per-arc `data[j] = 1 /
//!   outdeg(col[j])` that its kernel1 precomputes, and its kernel3 updates the ranks on the
//!   device. Here the rank update is the host task (it is what AXLE streams the sums to), and
//!   the host writes the per-vertex contribution `rank / outdeg` as the next launch's input:
//!   the same quantity without the 4-byte-per-arc weight array (7.8 MB at paper scale), its
//!   base-address load, its `vluxei32.v` per chunk and its 4 bytes per arc, and `vfadd.vv`
//!   takes the place of `vfmacc.vv`.
//! - **Every vertex writes its sum.** M²NDP's kernel2 skips a vertex without in-arcs and leaves
//!   the output its kernel3 cleared; our result space is streamed to the host, so every item
//!   writes its 4 bytes: a vertex without in-arcs branches to the reduction of the cleared
//!   lanes and stores `+0.0`, at the same fixed cost.
//!
//! # Arithmetic and summation order (bit-exact contract with the host reference)
//!
//! In-arc `k` of a vertex (`k = 0, 1, ...` from `offsets[v]`) goes to lane `k mod 8`; each lane
//! starts at `+0.0` and adds its contributions in increasing `k`, one rounded `f32` addition
//! each (the masked `vfadd.vv`: a masked-off lane keeps its value). The sum is then the
//! ordered reduction `((((+0.0 + lane[0]) + lane[1]) + ...) + lane[7])`. [`GatherSum`] is that
//! order; it lives in the `kernel-arith` crate (re-exported here) and the host reference calls
//! the same [`gather_sum`], so results are bit-identical.
//!
//! # Validation (everything a hostile host can send)
//!
//! - `kernel` is not PageRank: [`FirmwareError::UnknownKernel`]; `flags != 0`: [`FirmwareError::MalformedDescriptor`].
//! - Any address unaligned (parameters: 8, arrays and result: 4), any array or the result
//!   overflowing or ending beyond device memory, `vertices` zero or `vertices + 1` not fitting
//!   a `u32`, `arcs` not fitting a `u32`, `args[2]` other than [`VERTICES_PER_ITEM`],
//!   `args[3] != 0`, the result overlapping any input, or `result_length != 4 * vertices`:
//!   [`FirmwareError::ArgumentOutOfRange`] at decode. An item whose offsets decrease or exceed `arcs`,
//!   or whose source ids are `>= vertices`, fails with [`FirmwareError::ArgumentOutOfRange`] when it is
//!   described or executed.
//!
//! Every size is computed with checked arithmetic; nothing here can panic.

use crate::error::FirmwareError;
use crate::hal::DeviceMemory;
use crate::kernels::ranges::{checked_csr_offsets, checked_range, overlaps, word_bytes};
use crate::kernels::sssp::{
    prefetch_words, read_word, read_words, word_address, CHUNK_WORDS, PREFETCH_ITEMS_AHEAD,
    RANDOM_ACCESS_BYTES,
};
use crate::kernels::{ItemCost, ItemSpec, VECTOR_LANES};
use shared_abi::{CommandDescriptor, DeviceAddress, KernelId};

// The sum both the device and the host reference compute (see the module docs).
pub use kernel_arith::pagerank::{gather_sum, GatherSum};
// The command's contract: the parameter block and `args[2]`'s only value.
pub use shared_abi::params::pagerank::{
    PageRankParameters, PARAMETERS_ALIGNMENT, PARAMETERS_BYTES, VERTICES_PER_ITEM,
};

/// Bytes of result per vertex: one `f32` sum.
pub const RESULT_BYTES_PER_VERTEX: u64 = 4;

/// In-arcs per loop iteration: one per vector lane.
pub const ARCS_PER_CHUNK: u64 = VECTOR_LANES as u64;

/// One loop iteration over up to 8 in-arcs (M²NDP kernel2's `.LOOP0`): `vadd.vx` (lane
/// indices), `vmslt.vx` (the mask `index < end`), `vsll.vi` (byte offsets), `vsll.vi` (the
/// source ids to byte offsets) and `vfadd.vv` into the lane accumulator on the vector unit (5);
/// `vluxei32.v` of the source ids and `vluxei32.v` of their contributions on the vector address
/// unit (2); `sub` (arcs left), `addi` (next chunk) and `bgt` on the scalar units (3). The
/// bytes are per arc ([`BYTES_PER_ARC`]): a masked-off lane loads nothing.
pub const PER_CHUNK: ItemCost = ItemCost {
    scalar: 3,
    scalar_memory: 0,
    vector: 5,
    vector_memory: 2,
    indexed_extra_cycles: 0,
    bytes: 0,
};

/// Bytes per in-arc: its 4-byte source id (the row's ids are contiguous: 8 lanes load 32
/// consecutive bytes) and its contribution, gathered from a random line
/// ([`RANDOM_ACCESS_BYTES`]).
pub const BYTES_PER_ARC: u64 = 4 + RANDOM_ACCESS_BYTES;

/// Per vertex, whatever its degree (M²NDP kernel2 outside its loop, see the module docs):
/// scalar: `vsetvli`, `li` of the scratchpad address, `li 8`, `li -1`, `srli` + `add` of the
/// offsets' address, `ble`, `li 0`, `srli` + `add` of the result address and the closing
/// `li 1` (11); scalar memory: the 4 base addresses from the scratchpad (`ld`), the two
/// offsets (`lw`) and the sum (`fsw`) (7); vector: `vmset.m`, `vid.v`, `vmv.v.i` + `vfcvt` of
/// M²NDP's unused `v2`, `vmv.v.i` + `vfcvt` clearing the lanes, `vmv.v.i` of the reduction's
/// zero, `vfredosum.vs` and `vfmv.f.s` (9). Bytes: the two offsets (8, contiguous) and the sum
/// (4); the scratchpad costs no bytes.
pub const FIXED: ItemCost = ItemCost {
    scalar: 11,
    scalar_memory: 7,
    vector: 9,
    vector_memory: 0,
    indexed_extra_cycles: 0,
    bytes: 8 + RESULT_BYTES_PER_VERTEX,
};

/// The modelled cost of the item of a vertex with `arcs` in-arcs: [`FIXED`], plus
/// `ceil(arcs / 8)` × [`PER_CHUNK`], plus `arcs` × [`BYTES_PER_ARC`] bytes, plus the gathers'
/// extra address-unit cycles: a chunk's gather of `k` contributions from random lines
/// addresses `k` distinct packets, `k - 1` cycles more than one instruction (the source ids
/// are contiguous: one packet, or two across a boundary, counted as one). Saturates instead
/// of overflowing.
pub fn item_cost(arcs: u64) -> ItemCost {
    let chunks = arcs.div_ceil(ARCS_PER_CHUNK);
    FIXED
        .plus(PER_CHUNK.times(chunks))
        .plus(ItemCost::bytes(arcs.saturating_mul(BYTES_PER_ARC)))
        .plus(ItemCost::indexed_extra_cycles(arcs.saturating_sub(chunks)))
}

/// A decoded, validated PageRank gather launch.
///
/// # Invariants
///
/// The parameter block, offsets, sources, contributions and result lie inside the device
/// memory the command was decoded against; the result overlaps none of them; `vertices` (the
/// item count) fits a `u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageRankKernel {
    parameters: PageRankParameters,
    contributions: u64,
    result: u64,
    vertices: u32,
}

impl PageRankKernel {
    /// Decodes and validates `command` against device memory (read only; see the module docs).
    /// Never panics.
    pub fn decode<M: DeviceMemory>(
        command: &CommandDescriptor,
        memory: &M,
    ) -> Result<Self, FirmwareError> {
        if command.kernel != KernelId::PageRankGather as u32 {
            return Err(FirmwareError::UnknownKernel);
        }
        if command.flags != 0 {
            return Err(FirmwareError::MalformedDescriptor);
        }
        let size = memory.size();
        let [parameters_address, contributions, per_item, reserved] = command.args;
        if reserved != 0 || per_item != u64::from(VERTICES_PER_ITEM) {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let parameters_range = checked_range(
            parameters_address,
            PARAMETERS_BYTES as u64,
            PARAMETERS_ALIGNMENT,
            size,
        )?;
        let parameters: PageRankParameters = memory
            .read_value(DeviceAddress(parameters_address))
            .map_err(|_| FirmwareError::ArgumentOutOfRange)?;
        let vertices = parameters.vertices;
        let offsets_range =
            checked_csr_offsets(vertices, parameters.arcs, parameters.offsets, size)?;
        let sources_range =
            checked_range(parameters.sources, word_bytes(parameters.arcs)?, 4, size)?;
        let contributions_range = checked_range(contributions, word_bytes(vertices)?, 4, size)?;
        let result_bytes = word_bytes(vertices)?;
        if command.result_length != result_bytes {
            return Err(FirmwareError::ArgumentOutOfRange);
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
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let vertices = u32::try_from(vertices).map_err(|_| FirmwareError::ArgumentOutOfRange)?;
        Ok(PageRankKernel {
            parameters,
            contributions,
            result: command.result_address,
            vertices,
        })
    }

    /// The graph's parameter block.
    pub fn parameters(&self) -> PageRankParameters {
        self.parameters
    }

    /// Work items: one per vertex.
    pub fn items(&self) -> u32 {
        self.vertices
    }

    /// Vertex `index`'s in-arcs `offsets[index]..offsets[index + 1]` (checked: not decreasing,
    /// within the arcs). Two words of device memory: the µthread's two `lw`.
    fn arcs<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<(u64, u64), FirmwareError> {
        if index >= self.vertices {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let mut words = [0_u8; 8];
        memory.read(
            word_address(self.parameters.offsets, u64::from(index))?,
            &mut words,
        )?;
        let [a, b, c, d, e, f, g, h] = words;
        let first = u64::from(u32::from_le_bytes([a, b, c, d]));
        let last = u64::from(u32::from_le_bytes([e, f, g, h]));
        if first > last || last > self.parameters.arcs {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        Ok((first, last))
    }

    /// Item `index`'s result range `(offset, length)` without reading device memory: what
    /// [`PageRankKernel::item`] gives whenever it accepts the item (`4 * index`, 4 bytes);
    /// `None` past the last item. An item whose offsets are inconsistent is refused by
    /// [`PageRankKernel::item`] and by [`PageRankKernel::execute`] alike.
    pub fn result_range(&self, index: u32) -> Option<(u64, u32)> {
        if index >= self.vertices {
            return None;
        }
        let offset = u64::from(index).checked_mul(RESULT_BYTES_PER_VERTEX)?;
        Some((offset, RESULT_BYTES_PER_VERTEX as u32))
    }

    /// Item `index` (vertex `index`): result offset `4 * index`, 4 bytes, cost [`item_cost`] of
    /// its in-degree (read from the offsets).
    pub fn item<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<ItemSpec, FirmwareError> {
        let (first, last) = self.arcs(index, memory)?;
        // A hint (no read) for a later description: the offsets of the item
        // `PREFETCH_ITEMS_AHEAD` on.
        let ahead = u64::from(index).wrapping_add(PREFETCH_ITEMS_AHEAD);
        prefetch_words::<_, 1>(memory, self.parameters.offsets, ahead);
        Ok(ItemSpec {
            result_offset: u64::from(index)
                .checked_mul(RESULT_BYTES_PER_VERTEX)
                .ok_or(FirmwareError::ArgumentOutOfRange)?,
            result_length: RESULT_BYTES_PER_VERTEX as u32,
            cost: item_cost(
                last.checked_sub(first)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?,
            ),
        })
    }

    /// Runs item `index`: the [`gather_sum`] of vertex `index`'s in-neighbours' contributions,
    /// written at `4 * index` of the result.
    pub fn execute<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<(), FirmwareError> {
        let (first, last) = self.arcs(index, memory)?;
        let parameters = self.parameters;
        // Hints (no read) for the later items' runs: 4 lines of offsets from the next vertex's
        // (64 vertices) and 8 of sources from where this vertex's end. A window, not the next
        // item's lines alone, because the items do not end in index order (as SSSP's:
        // `RUN_AHEAD_LINES` there). Measured (2026-12-03, 12:03 to 12:06 UTC, load 1.2 to 1.6,
        // 16 rounds of `axle run pagerank --mode axle --data ../shared/data`, the loop's
        // events a second, ratio medians to 1 and 2 lines): 4 and 8 lines 1.05 and 1.06,
        // 8 and 16 lines 1.04. A hint changes no result and no figure of the model.
        prefetch_words::<_, 4>(memory, parameters.offsets, u64::from(index).wrapping_add(1));
        prefetch_words::<_, 8>(memory, parameters.sources, last);
        let mut sources = [0_u32; CHUNK_WORDS];
        let mut sum = GatherSum::new();
        let mut arc = first;
        while arc < last {
            let chunk = usize::try_from(
                last.checked_sub(arc)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?
                    .min(CHUNK_WORDS as u64),
            )
            .map_err(|_| FirmwareError::ArgumentOutOfRange)?;
            read_words(memory, parameters.sources, arc, chunk, &mut sources)?;
            // The contributions this chunk gathers, hinted before the loop reads them (a hint
            // for a source past the graph is harmless; the loop rejects such a source).
            for source in sources.iter().take(chunk) {
                let address = self
                    .contributions
                    .wrapping_add(u64::from(*source).wrapping_mul(4));
                memory.prefetch(DeviceAddress(address));
            }
            for source in sources.iter().take(chunk) {
                let source = u64::from(*source);
                if source >= parameters.vertices {
                    return Err(FirmwareError::ArgumentOutOfRange);
                }
                sum.add(f32::from_bits(read_word(
                    memory,
                    self.contributions,
                    source,
                )?));
            }
            arc = arc
                .checked_add(chunk as u64)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
        }
        memory.write(
            word_address(self.result, u64::from(index))?,
            &sum.sum().to_le_bytes(),
        )?;
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

    fn command(vertices: u64) -> CommandDescriptor {
        CommandDescriptor {
            kernel: KernelId::PageRankGather as u32,
            mode: 0,
            tag: 0,
            flags: 0,
            result_address: RESULT,
            result_length: 4 * vertices,
            args: [PARAMETERS, CONTRIBUTIONS, u64::from(VERTICES_PER_ITEM), 0],
        }
    }

    /// The undirected path 0 - 1 - 2 - 3 as in-neighbours: 0: {1}, 1: {0, 2}, 2: {1, 3},
    /// 3: {2}; contributions 0.5, 0.25, 0.125, 1.0 (sums exact in `f32`).
    fn setup() -> (FakeMemory, CommandDescriptor) {
        let mut memory = FakeMemory::new(MEMORY as usize);
        memory
            .write(DeviceAddress(PARAMETERS), &parameters().to_bytes())
            .unwrap();
        put_words(&mut memory, OFFSETS, &[0, 1, 3, 5, 6]);
        put_words(&mut memory, SOURCES, &[1, 0, 2, 1, 3, 2]);
        let contributions = [0.5_f32, 0.25, 0.125, 1.0];
        put_words(&mut memory, CONTRIBUTIONS, &contributions.map(f32::to_bits));
        (memory, command(4))
    }

    #[test]
    fn every_vertex_gets_the_sum_of_its_in_neighbours_in_any_item_order() {
        let (memory, command) = setup();
        let kernel = PageRankKernel::decode(&command, &memory).unwrap();
        assert_eq!(kernel.items(), 4);
        for item in [2, 0, 3, 1] {
            kernel.execute(item, &memory).unwrap();
        }
        assert_eq!(floats(&memory, RESULT, 4), [0.25, 0.625, 1.25, 0.125]);
    }

    #[test]
    fn an_item_covers_exactly_its_vertex() {
        let (mut memory, command) = setup();
        let kernel = PageRankKernel::decode(&command, &memory).unwrap();
        for vertex in 0..4_u32 {
            let spec = kernel.item(vertex, &memory).unwrap();
            assert_eq!(spec.result_offset, 4 * u64::from(vertex));
            assert_eq!(spec.result_length, 4);
        }
        // Running vertex 2 writes its 4 bytes and nothing around them.
        put_words(&mut memory, RESULT, &[0xAAAA_AAAA; 4]);
        kernel.execute(2, &memory).unwrap();
        let words: Vec<u32> = floats(&memory, RESULT, 4)
            .iter()
            .map(|f| f.to_bits())
            .collect();
        assert_eq!(
            words,
            [0xAAAA_AAAA, 0xAAAA_AAAA, 1.25_f32.to_bits(), 0xAAAA_AAAA]
        );
        assert_eq!(
            kernel.item(4, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
        assert_eq!(
            kernel.execute(4, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
    }

    #[test]
    fn an_item_costs_the_fixed_part_and_one_chunk_per_eight_in_arcs() {
        assert_eq!(
            FIXED,
            ItemCost {
                scalar: 11,
                scalar_memory: 7,
                vector: 9,
                vector_memory: 0,
                indexed_extra_cycles: 0,
                bytes: 12
            }
        );
        assert_eq!(PER_CHUNK.instructions(), 10);
        assert_eq!(BYTES_PER_ARC, 68);
        // No in-arcs: the fixed part only (it still stores its +0.0).
        assert_eq!(item_cost(0), FIXED);
        // 1..=8 in-arcs: one chunk; 9: two; bytes per arc.
        assert_eq!(
            item_cost(1),
            FIXED.plus(PER_CHUNK).plus(ItemCost::bytes(68))
        );
        // A chunk's gather of 8 contributions addresses 8 packets: 7 address-unit cycles more.
        assert_eq!(
            item_cost(8),
            FIXED
                .plus(PER_CHUNK)
                .plus(ItemCost::bytes(8 * 68))
                .plus(ItemCost::indexed_extra_cycles(7))
        );
        assert_eq!(item_cost(8).vector_address_cycles(), 2 + 7);
        let nine = item_cost(9);
        assert_eq!(nine.vector_memory, 4);
        assert_eq!(nine.scalar, 11 + 6);
        assert_eq!(nine.vector, 9 + 10);
        assert_eq!(nine.bytes, 12 + 9 * 68);
        // Saturates rather than overflowing.
        assert_eq!(item_cost(u64::MAX).bytes, u64::MAX);
        // The items of the path graph: degrees 1, 2, 2, 1.
        let (memory, command) = setup();
        let kernel = PageRankKernel::decode(&command, &memory).unwrap();
        let costs: Vec<ItemCost> = (0..4)
            .map(|v| kernel.item(v, &memory).unwrap().cost)
            .collect();
        assert_eq!(
            costs,
            [item_cost(1), item_cost(2), item_cost(2), item_cost(1)]
        );
    }

    #[test]
    fn long_in_lists_cross_chunks_in_the_lane_order() {
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
        let contributions = [0.1_f32, 0.7];
        put_words(
            &mut memory,
            CONTRIBUTIONS + 0x400,
            &contributions.map(f32::to_bits),
        );
        let mut command = command(2);
        command.args[1] = CONTRIBUTIONS + 0x400;
        let kernel = PageRankKernel::decode(&command, &memory).unwrap();
        kernel.execute(0, &memory).unwrap();
        kernel.execute(1, &memory).unwrap();
        let expected = |arcs: std::ops::Range<usize>| {
            gather_sum(arcs.map(|k| contributions[sources[k] as usize]))
        };
        let got = floats(&memory, RESULT, 2);
        assert_eq!(got[0].to_bits(), expected(0..150).to_bits());
        assert_eq!(got[1].to_bits(), expected(150..200).to_bits());
    }

    fn rejected(memory: &FakeMemory, command: &CommandDescriptor) {
        assert_eq!(
            PageRankKernel::decode(command, memory),
            Err(FirmwareError::ArgumentOutOfRange),
            "{command:?}"
        );
    }

    #[test]
    fn malformed_commands_are_rejected() {
        let (memory, valid) = setup();
        let mut c = valid;
        c.kernel = KernelId::SsspRelax as u32;
        assert_eq!(
            PageRankKernel::decode(&c, &memory),
            Err(FirmwareError::UnknownKernel)
        );
        let mut c = valid;
        c.flags = 1;
        assert_eq!(
            PageRankKernel::decode(&c, &memory),
            Err(FirmwareError::MalformedDescriptor)
        );
        for (field, value) in [
            (2, 0),
            (2, 2),
            (2, 256),
            (2, u64::MAX),
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
    fn bad_offsets_or_sources_fail_only_their_vertex() {
        let (mut memory, command) = setup();
        let kernel = PageRankKernel::decode(&command, &memory).unwrap();
        // offsets[1] = 4 > offsets[2] = 3: vertex 1 runs backwards; vertex 0 (0..4) is fine.
        put_words(&mut memory, OFFSETS, &[0, 4, 3, 5, 6]);
        assert!(kernel.item(0, &memory).is_ok());
        assert_eq!(
            kernel.item(1, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
        assert_eq!(
            kernel.execute(1, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
        // offsets[4] = 9 beyond the 6 arcs: only vertex 3 fails.
        put_words(&mut memory, OFFSETS, &[0, 1, 3, 5, 9]);
        assert!(kernel.item(2, &memory).is_ok());
        assert_eq!(
            kernel.item(3, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
        // A source id >= vertices fails its vertex at execute.
        put_words(&mut memory, OFFSETS, &[0, 1, 3, 5, 6]);
        put_words(&mut memory, SOURCES, &[1, 0, 2, 1, 3, 4]);
        assert!(kernel.execute(2, &memory).is_ok());
        assert_eq!(
            kernel.execute(3, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
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
            let (mut memory, mut command) = setup();
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
            let _ = PageRankKernel::decode(&command, &FakeMemory::new(0x300));
        }
    }

    /// The stack figure of `crate::hal` for PageRank (see the OPT kernel's twin of this test).
    #[test]
    fn stack_high_water_of_every_pagerank_item_fits_the_uthread_stack() {
        let (memory, command) = setup();
        let kernel =
            crate::kernels::Kernel::PageRank(PageRankKernel::decode(&command, &memory).unwrap());
        let probe = crate::testing::StackProbe::new(&memory);
        let deepest = probe.high_water(&kernel, 0..kernel.items());
        std::println!("stack high-water, pagerank: {deepest} bytes");
        assert!(deepest > 0 && deepest <= crate::hal::UTHREAD_STACK_BYTES);
    }
}
