//! KNN distance kernel: the squared L2 distance of every (query, database row) pair.
//!
//! # Command ([`shared_abi::KernelId::KnnDistance`])
//!
//! | field | meaning |
//! |---|---|
//! | `args[0]` | device address of the database: `rows` vectors of `dim` little-endian `f32`, row-major |
//! | `args[1]` | device address of the queries: `query_count` vectors of `dim` `f32`, row-major |
//! | `args[2]` | `rows` in the low 32 bits, `dim` in the high 32 bits (see [`pack_shape`]) |
//! | `args[3]` | `query_count` (must fit 32 bits) |
//! | `result_address`, `result_length` | the result space: exactly `rows * query_count * 4` bytes |
//! | `flags` | reserved, must be zero |
//!
//! `mode` and `tag` belong to the command processor (they decide how completion is reported)
//! and are not looked at here.
//!
//! # Work items
//!
//! One item per (query `q`, row `r`), query-major: item `i = q * rows + r` writes one `f32`
//! (little-endian) at `result_address + 4 * i`. The result space is therefore `query_count`
//! blocks of `rows` distances each, so every run of consecutive rows of one query is one
//! contiguous byte range (what a host top-k task consumes).
//!
//! # Validation (everything a hostile host can send)
//!
//! - `kernel` is not KNN: [`FirmwareError::UnknownKernel`]; `flags != 0`: [`FirmwareError::MalformedDescriptor`].
//! - `rows`, `dim` or `query_count` zero, `query_count` wider than 32 bits, `dim` not a
//!   multiple of [`LANES`], `rows * query_count` not fitting a `u32` item count, any address not
//!   4-byte aligned (the `f32` natural alignment, which a vector load unit wants), any of the
//!   three byte ranges overflowing or ending beyond device memory, the result space
//!   overlapping an input (results would then depend on item order), or `result_length`
//!   different from `rows * query_count * 4`: [`FirmwareError::ArgumentOutOfRange`].
//!
//! Every size is computed with checked arithmetic; nothing here can panic.
//!
//! # Arithmetic and summation order (bit-exact contract with the host reference)
//!
//! The modelled µthread computes a distance with 8-lane (256-bit, M²NDP's `simd_width`) `f32`
//! vector instructions, and
//! [`DistanceAccumulator`] reproduces that order exactly, in `f32`:
//!
//! 1. Element `j` of the vectors (counting from 0) belongs to lane `j % 8`.
//! 2. For `j = 0, 1, 2, ...` in increasing order: `d = a[j] - b[j]` (one `f32` subtraction,
//!    rounded), then `lane[j % 8] = fma(d, d, lane[j % 8])` (one fused multiply-add, rounded
//!    once, as a `vfmacc.vv` does). Every lane starts at `+0.0`.
//! 3. The ordered horizontal reduction (`vfredosum`): `s = +0.0`, then `s = s + lane[0]`,
//!    `s = s + lane[1]`, ..., `s = s + lane[7]`, each addition rounded in `f32`.
//!
//! [`squared_distance`] lives in the `kernel-arith` crate (re-exported here) and the host
//! reference (crate `workloads`) calls the same function, so device and reference results are
//! bit-identical; any other order (a plain sequential sum, `f64`
//! accumulation) would differ in the last bits and break exact verification.

use crate::error::FirmwareError;
use crate::hal::DeviceMemory;
use crate::kernels::ranges::{checked_range, offset_address, overlaps};
use crate::kernels::{ItemCost, ItemSpec};
use shared_abi::{CommandDescriptor, DeviceAddress, KernelId};

// The distance both the device and the host reference compute (see the module docs).
pub use kernel_arith::knn::{squared_distance, DistanceAccumulator};
// The command's contract: the argument packing and the result's element size.
pub use shared_abi::params::knn::{pack_shape, RESULT_BYTES_PER_ITEM};

/// Vector lanes of the modelled µthread (`f32` lanes per vector instruction, M²NDP's
/// `simd_width=256`: [`super::VECTOR_LANES`]). `dim` must be a multiple of it so every vector
/// instruction is full.
pub const LANES: usize = super::VECTOR_LANES;

/// Elements the kernel reads per chunk into its stack buffers (one unrolled loop iteration of
/// the modelled µthread: 8 lane groups). 256 bytes per operand.
pub const CHUNK_ELEMENTS: usize = 64;

/// Bytes of one `f32` element.
pub const ELEMENT_BYTES: u64 = 4;

/// Instructions per group of [`LANES`] elements: `vle32.v` of the row chunk from device
/// memory and `vle32.v` of the query chunk from the µthread's scratchpad (the query is copied
/// there on the item's first touch; no device-memory bytes) on the vector address unit,
/// `vfsub.vv` for the difference and `vfmacc.vv` accumulating its square into the lane partial
/// sums on the vector unit. (The structure of M²NDP's own distance-like kernels, e.g.
/// `examples/benchmarks/kmeans`.)
pub const PER_LANE_GROUP: ItemCost = ItemCost {
    vector: 2,
    vector_memory: 2,
    ..ItemCost::ZERO
};

/// Loop control per chunk of [`CHUNK_ELEMENTS`] elements: the inner loop is unrolled over the
/// chunk's lane groups, leaving one pointer bump, one remaining-count decrement and one
/// compare-and-branch per chunk (scalar).
pub const PER_CHUNK: ItemCost = ItemCost::scalar(3);

/// Fixed instructions per item: item index to (query, row) by a division and a remainder (2),
/// row, query and result addresses as multiply-adds (6), `vsetvli` (1), loop set-up (2) and the
/// return (1) on the scalar units; clearing the lane accumulator (`vmv.v.i`), the ordered
/// horizontal reduction `vfredosum.vs` and `vfmv.f.s` on the vector unit (3); the 4-byte result
/// store `fsw` (1, scalar memory). 16 in all.
pub const FIXED: ItemCost = ItemCost {
    scalar: 12,
    scalar_memory: 1,
    vector: 3,
    vector_memory: 0,
    indexed_extra_cycles: 0,
    bytes: 0,
};

/// Alignment every address of the command must have (the `f32` natural alignment).
pub const ADDRESS_ALIGNMENT: u64 = 4;

/// The modelled cost of one item of a launch with vectors of `dim` elements: see
/// [`PER_LANE_GROUP`], [`PER_CHUNK`] and [`FIXED`]; the bytes are the row's `dim * 4` bytes
/// read plus the 4-byte result written (the query lives in scratch after the first touch and
/// is not counted). Saturates instead of overflowing.
pub fn item_cost(dim: u32) -> ItemCost {
    let dim = u64::from(dim);
    let lane_groups = dim.div_ceil(LANES as u64);
    let chunks = dim.div_ceil(CHUNK_ELEMENTS as u64);
    PER_LANE_GROUP
        .times(lane_groups)
        .plus(PER_CHUNK.times(chunks))
        .plus(FIXED)
        .plus(ItemCost::bytes(
            dim.saturating_mul(ELEMENT_BYTES)
                .saturating_add(u64::from(RESULT_BYTES_PER_ITEM)),
        ))
}

/// A decoded, validated KNN distance launch.
///
/// # Invariants
///
/// `rows`, `dim`, `query_count` are non-zero, `dim % LANES == 0`, `items == rows *
/// query_count`, and the database, query and result byte ranges lie inside the device memory
/// size the command was decoded against (the result range disjoint from both inputs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnnKernel {
    database: DeviceAddress,
    queries: DeviceAddress,
    result: DeviceAddress,
    rows: u32,
    dim: u32,
    query_count: u32,
    items: u32,
}

impl KnnKernel {
    /// Decodes and validates `command` against a device memory of `memory_size` bytes (see the
    /// module docs for every rule). Never panics.
    pub fn decode(
        command: &CommandDescriptor,
        memory_size: u64,
    ) -> Result<KnnKernel, FirmwareError> {
        if command.kernel != KernelId::KnnDistance as u32 {
            return Err(FirmwareError::UnknownKernel);
        }
        if command.flags != 0 {
            return Err(FirmwareError::MalformedDescriptor);
        }
        let [database, queries, shape, query_count] = command.args;
        let rows = u32::try_from(shape & u64::from(u32::MAX))
            .map_err(|_| FirmwareError::ArgumentOutOfRange)?;
        let dim = u32::try_from(shape >> 32).map_err(|_| FirmwareError::ArgumentOutOfRange)?;
        let query_count =
            u32::try_from(query_count).map_err(|_| FirmwareError::ArgumentOutOfRange)?;
        if rows == 0 || dim == 0 || query_count == 0 {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        if usize::try_from(dim)
            .ok()
            .and_then(|dim| dim.checked_rem(LANES))
            != Some(0)
        {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let items = rows
            .checked_mul(query_count)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let vector_bytes = u64::from(dim)
            .checked_mul(ELEMENT_BYTES)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let database_bytes = vector_bytes
            .checked_mul(u64::from(rows))
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let query_bytes = vector_bytes
            .checked_mul(u64::from(query_count))
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let result_bytes = u64::from(items)
            .checked_mul(u64::from(RESULT_BYTES_PER_ITEM))
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        if command.result_length != result_bytes {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let database_range =
            checked_range(database, database_bytes, ADDRESS_ALIGNMENT, memory_size)?;
        let query_range = checked_range(queries, query_bytes, ADDRESS_ALIGNMENT, memory_size)?;
        let result_range = checked_range(
            command.result_address,
            result_bytes,
            ADDRESS_ALIGNMENT,
            memory_size,
        )?;
        if overlaps(result_range, database_range) || overlaps(result_range, query_range) {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        Ok(KnnKernel {
            database: DeviceAddress(database),
            queries: DeviceAddress(queries),
            result: DeviceAddress(command.result_address),
            rows,
            dim,
            query_count,
            items,
        })
    }

    /// Device address of the database.
    pub fn database(&self) -> DeviceAddress {
        self.database
    }

    /// Device address of the queries.
    pub fn queries(&self) -> DeviceAddress {
        self.queries
    }

    /// Device address of the result space.
    pub fn result_address(&self) -> DeviceAddress {
        self.result
    }

    /// Database vectors.
    pub fn rows(&self) -> u32 {
        self.rows
    }

    /// Elements per vector.
    pub fn dim(&self) -> u32 {
        self.dim
    }

    /// Queries in the batch.
    pub fn query_count(&self) -> u32 {
        self.query_count
    }

    /// Work items: `rows * query_count`.
    pub fn items(&self) -> u32 {
        self.items
    }

    /// Item `index`'s result range `(offset, length)`, as [`KnnKernel::item`] gives it:
    /// `4 * index`, 4 bytes; `None` past the last item.
    pub fn result_range(&self, index: u32) -> Option<(u64, u32)> {
        if index >= self.items {
            return None;
        }
        let offset = u64::from(index).checked_mul(u64::from(RESULT_BYTES_PER_ITEM))?;
        Some((offset, RESULT_BYTES_PER_ITEM))
    }

    /// Item `index`: result offset `4 * index`, 4 bytes, cost [`item_cost`]`(dim)`.
    pub fn item(&self, index: u32) -> Result<ItemSpec, FirmwareError> {
        if index >= self.items {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let result_offset = u64::from(index)
            .checked_mul(u64::from(RESULT_BYTES_PER_ITEM))
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        Ok(ItemSpec {
            result_offset,
            result_length: RESULT_BYTES_PER_ITEM,
            cost: item_cost(self.dim),
        })
    }

    /// Runs item `index`: streams the row and the query through fixed-size stack buffers of
    /// [`CHUNK_ELEMENTS`] elements, and writes their [`squared_distance`] (little-endian) at
    /// `result_address + 4 * index`. A memory fault (a memory smaller than the one the command
    /// was validated against) is reported as [`FirmwareError::MemoryFault`].
    pub fn execute<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<(), FirmwareError> {
        let item = self.item(index)?;
        let query = index
            .checked_div(self.rows)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let row = index
            .checked_rem(self.rows)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let vector_bytes = u64::from(self.dim)
            .checked_mul(ELEMENT_BYTES)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let row_address = offset_address(self.database, u64::from(row), vector_bytes)?;
        let query_address = offset_address(self.queries, u64::from(query), vector_bytes)?;

        let mut accumulator = DistanceAccumulator::new();
        let mut row_bytes = [0_u8; CHUNK_BYTES];
        let mut query_bytes = [0_u8; CHUNK_BYTES];
        let mut row_values = [0.0_f32; CHUNK_ELEMENTS];
        let mut query_values = [0.0_f32; CHUNK_ELEMENTS];
        let mut offset = 0_u64;
        while offset < vector_bytes {
            let remaining = vector_bytes
                .checked_sub(offset)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            let length = usize::try_from(remaining.min(CHUNK_BYTES as u64))
                .map_err(|_| FirmwareError::ArgumentOutOfRange)?;
            let elements = read_chunk(
                memory,
                row_address
                    .checked_add(offset)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?,
                row_bytes
                    .get_mut(..length)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?,
                &mut row_values,
            )?;
            read_chunk(
                memory,
                query_address
                    .checked_add(offset)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?,
                query_bytes
                    .get_mut(..length)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?,
                &mut query_values,
            )?;
            accumulator.add(
                row_values
                    .get(..elements)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?,
                query_values
                    .get(..elements)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?,
            );
            offset = offset
                .checked_add(u64::try_from(length).map_err(|_| FirmwareError::ArgumentOutOfRange)?)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
        }
        let result_address = self
            .result
            .checked_add(item.result_offset)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        memory.write(result_address, &accumulator.finish().to_le_bytes())?;
        Ok(())
    }
}

/// Bytes of one chunk buffer.
const CHUNK_BYTES: usize = CHUNK_ELEMENTS * 4;

/// Reads `bytes.len()` bytes at `address` and decodes them as little-endian `f32` into the
/// front of `values`; returns the number of elements decoded.
fn read_chunk<M: DeviceMemory>(
    memory: &M,
    address: DeviceAddress,
    bytes: &mut [u8],
    values: &mut [f32; CHUNK_ELEMENTS],
) -> Result<usize, FirmwareError> {
    memory.read(address, bytes)?;
    let mut elements = 0_usize;
    for (value, word) in values.iter_mut().zip(bytes.chunks_exact(4)) {
        let word = <[u8; 4]>::try_from(word).map_err(|_| FirmwareError::ArgumentOutOfRange)?;
        *value = f32::from_le_bytes(word);
        elements = elements
            .checked_add(1)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
    }
    Ok(elements)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Device memory for the tests: the crate's test double.
    type FakeMemory = crate::testing::FakeDeviceMemory;

    trait Floats {
        fn write_floats(&mut self, address: u64, values: &[f32]);
        fn read_float(&self, address: u64) -> f32;
    }

    impl Floats for FakeMemory {
        fn write_floats(&mut self, address: u64, values: &[f32]) {
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            self.write(DeviceAddress(address), &bytes).unwrap();
        }

        fn read_float(&self, address: u64) -> f32 {
            let mut word = [0; 4];
            self.read(DeviceAddress(address), &mut word).unwrap();
            f32::from_le_bytes(word)
        }
    }

    const MEMORY: u64 = 1 << 20;

    fn command(
        database: u64,
        queries: u64,
        rows: u32,
        dim: u32,
        query_count: u64,
        result: u64,
    ) -> CommandDescriptor {
        CommandDescriptor {
            kernel: KernelId::KnnDistance as u32,
            mode: 0,
            tag: 0,
            flags: 0,
            result_address: result,
            result_length: u64::from(rows) * query_count * 4,
            args: [database, queries, pack_shape(rows, dim), query_count],
        }
    }

    /// A valid command: 5 rows, dim 80 (more than one chunk), 3 queries.
    fn valid() -> CommandDescriptor {
        command(0x1000, 0x4000, 5, 80, 3, 0x8000)
    }

    fn value(seed: u32) -> f32 {
        // Small exact values in [-8, 8) with a quarter step.
        ((seed.wrapping_mul(2_654_435_761) >> 20) % 64) as f32 / 4.0 - 8.0
    }

    /// The host's bound on a launch's first record (host-runtime's `adaptive_poll`) rests on
    /// `shared_abi::params::work_floor`: it must not promise more items or more bytes per item
    /// than the kernel describes, or the host would wait past a record that has come.
    #[test]
    fn the_work_floor_the_host_reads_from_a_command_is_never_above_the_kernels_items() {
        for (rows, dim, query_count) in [(5, 80, 3), (128, 2048, 4), (1, 8, 1), (300, 64, 2)] {
            let database = 0x1000;
            let queries = database + u64::from(rows) * u64::from(dim) * 4;
            let result = queries + query_count * u64::from(dim) * 4;
            let command = command(database, queries, rows, dim, query_count, result);
            let memory = crate::testing::FakeDeviceMemory::new(16 << 20);
            let kernel = crate::kernels::Kernel::decode(&command, &memory)
                .unwrap_or_else(|error| panic!("{rows}x{dim}x{query_count}: {error:?}"));
            let floor = shared_abi::params::work_floor(&command).expect("a KNN floor");
            assert_eq!(kernel.stages(), 1);
            assert_eq!(u64::from(kernel.stage_items(0).len() as u32), floor.items);
            for index in kernel.stage_items(0) {
                let bytes = kernel.item(index, &memory).unwrap().cost.bytes;
                assert!(
                    bytes >= floor.item_bytes,
                    "item {index} of {rows}x{dim}x{query_count} moves {bytes} bytes, the floor says {}",
                    floor.item_bytes
                );
            }
        }
    }

    #[test]
    fn valid_command_decodes_with_its_fields() {
        let kernel = KnnKernel::decode(&valid(), MEMORY).unwrap();
        assert_eq!(kernel.rows(), 5);
        assert_eq!(kernel.dim(), 80);
        assert_eq!(kernel.query_count(), 3);
        assert_eq!(kernel.items(), 15);
        assert_eq!(kernel.database(), DeviceAddress(0x1000));
        assert_eq!(kernel.queries(), DeviceAddress(0x4000));
        assert_eq!(kernel.result_address(), DeviceAddress(0x8000));
    }

    #[test]
    fn items_are_query_major_four_bytes_each_with_the_documented_cost() {
        let kernel = KnnKernel::decode(&valid(), MEMORY).unwrap();
        let spec = kernel.item(7).unwrap();
        assert_eq!(spec.result_offset, 28);
        assert_eq!(spec.result_length, 4);
        // 80 elements: 10 lane groups, 2 chunks.
        assert_eq!(
            spec.cost.instructions(),
            10 * PER_LANE_GROUP.instructions() + 2 * PER_CHUNK.instructions() + 16
        );
        assert_eq!(spec.cost.vector, 10 * 2 + 3);
        assert_eq!(spec.cost.bytes, 80 * 4 + 4);
        assert_eq!(kernel.item(15), Err(FirmwareError::ArgumentOutOfRange));
        assert_eq!(
            kernel.item(u32::MAX),
            Err(FirmwareError::ArgumentOutOfRange)
        );
    }

    #[test]
    fn knn_a_item_cost() {
        let cost = item_cost(2048);
        // 256 lane groups of 8, 32 chunks of 64 elements.
        assert_eq!(cost.instructions(), 256 * 4 + 32 * 3 + 16);
        assert_eq!(cost.vector, 256 * 2 + 3);
        assert_eq!(cost.vector_memory, 256 * 2);
        assert_eq!(cost.bytes, 2048 * 4 + 4);
    }

    #[test]
    fn execute_writes_exact_distances_for_every_pair() {
        let command = valid();
        let kernel = KnnKernel::decode(&command, MEMORY).unwrap();
        let mut memory = FakeMemory::new(MEMORY as usize);
        let database: Vec<f32> = (0..5 * 80).map(value).collect();
        let queries: Vec<f32> = (1000..1000 + 3 * 80).map(value).collect();
        memory.write_floats(0x1000, &database);
        memory.write_floats(0x4000, &queries);
        for item in 0..kernel.items() {
            kernel.execute(item, &memory).unwrap();
        }
        for q in 0..3_usize {
            for r in 0..5_usize {
                let row = &database[r * 80..(r + 1) * 80];
                let query = &queries[q * 80..(q + 1) * 80];
                // Quarter-step values: every partial sum is exact in f32, so any order agrees
                // with the f64 sum.
                let expected: f64 = row
                    .iter()
                    .zip(query)
                    .map(|(a, b)| f64::from(a - b).powi(2))
                    .sum();
                let got = memory.read_float(0x8000 + 4 * (q * 5 + r) as u64);
                assert_eq!(f64::from(got), expected, "query {q} row {r}");
                assert_eq!(got.to_bits(), squared_distance(row, query).to_bits());
            }
        }
    }

    fn assert_rejected(command: CommandDescriptor, memory_size: u64, status: FirmwareError) {
        assert_eq!(
            KnnKernel::decode(&command, memory_size),
            Err(status),
            "{command:?}"
        );
    }

    #[test]
    fn wrong_kernel_or_reserved_flags_are_rejected() {
        let mut wrong_kernel = valid();
        wrong_kernel.kernel = 99;
        assert_rejected(wrong_kernel, MEMORY, FirmwareError::UnknownKernel);
        let mut flags = valid();
        flags.flags = 1;
        assert_rejected(flags, MEMORY, FirmwareError::MalformedDescriptor);
    }

    #[test]
    fn zero_sizes_are_rejected() {
        assert_rejected(
            command(0x1000, 0x4000, 0, 80, 3, 0x8000),
            MEMORY,
            FirmwareError::ArgumentOutOfRange,
        );
        assert_rejected(
            command(0x1000, 0x4000, 5, 0, 3, 0x8000),
            MEMORY,
            FirmwareError::ArgumentOutOfRange,
        );
        assert_rejected(
            command(0x1000, 0x4000, 5, 80, 0, 0x8000),
            MEMORY,
            FirmwareError::ArgumentOutOfRange,
        );
    }

    #[test]
    fn dim_not_a_multiple_of_the_lanes_is_rejected() {
        for dim in [1, 7, 9, 70, 1023] {
            assert_rejected(
                command(0x1000, 0x4000, 5, dim, 3, 0x8000),
                MEMORY,
                FirmwareError::ArgumentOutOfRange,
            );
        }
    }

    #[test]
    fn query_count_wider_than_32_bits_is_rejected() {
        let mut wide = valid();
        wide.args[3] = 1 << 32 | 3;
        assert_rejected(wide, MEMORY, FirmwareError::ArgumentOutOfRange);
    }

    #[test]
    fn item_count_overflowing_u32_is_rejected() {
        let mut huge = command(0, 0, 1 << 16, 8, 1 << 16, 0);
        huge.result_length = 1 << 34;
        assert_rejected(huge, u64::MAX, FirmwareError::ArgumentOutOfRange);
    }

    #[test]
    fn result_length_other_than_rows_times_queries_times_four_is_rejected() {
        for delta in [-4_i64, -1, 1, 4] {
            let mut command = valid();
            command.result_length = (60 + delta) as u64;
            assert_rejected(command, MEMORY, FirmwareError::ArgumentOutOfRange);
        }
        let mut zero = valid();
        zero.result_length = 0;
        assert_rejected(zero, MEMORY, FirmwareError::ArgumentOutOfRange);
    }

    #[test]
    fn ranges_beyond_device_memory_are_rejected() {
        // Database of 5 * 80 * 4 = 1440 bytes ending one byte beyond memory.
        assert_rejected(
            command(MEMORY - 1436, 0x4000, 5, 80, 3, 0x8000),
            MEMORY,
            FirmwareError::ArgumentOutOfRange,
        );
        assert_rejected(
            command(0x1000, MEMORY - 4, 5, 80, 3, 0x8000),
            MEMORY,
            FirmwareError::ArgumentOutOfRange,
        );
        assert_rejected(
            command(0x1000, 0x4000, 5, 80, 3, MEMORY - 56),
            MEMORY,
            FirmwareError::ArgumentOutOfRange,
        );
        // Exactly at the end is fine.
        assert!(KnnKernel::decode(&command(0x1000, 0x4000, 5, 80, 3, MEMORY - 60), MEMORY).is_ok());
        // Everything beyond a tiny memory.
        assert_rejected(valid(), 0, FirmwareError::ArgumentOutOfRange);
    }

    #[test]
    fn address_overflow_is_rejected() {
        assert_rejected(
            command(u64::MAX - 3, 0x4000, 5, 80, 3, 0x8000),
            u64::MAX,
            FirmwareError::ArgumentOutOfRange,
        );
        assert_rejected(
            command(0x1000, u64::MAX - 3, 5, 80, 3, 0x8000),
            u64::MAX,
            FirmwareError::ArgumentOutOfRange,
        );
        assert_rejected(
            command(0x1000, 0x4000, 5, 80, 3, u64::MAX - 3),
            u64::MAX,
            FirmwareError::ArgumentOutOfRange,
        );
        // Byte counts that overflow u64: dim * 4 * rows.
        let mut command = command(0, 0, u32::MAX, 0xFFFF_FFF8, 1, 0);
        command.result_length = u64::from(u32::MAX) * 4;
        assert_rejected(command, u64::MAX, FirmwareError::ArgumentOutOfRange);
    }

    #[test]
    fn unaligned_addresses_are_rejected() {
        assert_rejected(
            command(0x1001, 0x4000, 5, 80, 3, 0x8000),
            MEMORY,
            FirmwareError::ArgumentOutOfRange,
        );
        assert_rejected(
            command(0x1000, 0x4002, 5, 80, 3, 0x8000),
            MEMORY,
            FirmwareError::ArgumentOutOfRange,
        );
        assert_rejected(
            command(0x1000, 0x4000, 5, 80, 3, 0x8003),
            MEMORY,
            FirmwareError::ArgumentOutOfRange,
        );
    }

    #[test]
    fn result_overlapping_an_input_is_rejected() {
        // Result (60 bytes) starting inside the database (1600 bytes at 0x1000).
        assert_rejected(
            command(0x1000, 0x4000, 5, 80, 3, 0x1000 + 1596),
            MEMORY,
            FirmwareError::ArgumentOutOfRange,
        );
        // Ending inside the queries.
        assert_rejected(
            command(0x1000, 0x4000, 5, 80, 3, 0x4000 - 56),
            MEMORY,
            FirmwareError::ArgumentOutOfRange,
        );
        // Touching but not overlapping is fine; inputs may overlap each other (read-only).
        assert!(
            KnnKernel::decode(&command(0x1000, 0x1000, 5, 80, 3, 0x1000 + 1600), MEMORY).is_ok()
        );
    }

    #[test]
    fn execute_on_a_smaller_memory_than_validated_reports_a_fault() {
        let kernel = KnnKernel::decode(&valid(), MEMORY).unwrap();
        let small = FakeMemory::new(0x2000);
        assert!(matches!(
            kernel.execute(0, &small),
            Err(FirmwareError::MemoryFault(_))
        ));
        assert_eq!(
            kernel.execute(15, &small),
            Err(FirmwareError::ArgumentOutOfRange)
        );
    }

    proptest! {
        #[test]
        fn decode_of_arbitrary_commands_never_panics(
            kernel in prop_oneof![Just(1_u32), any::<u32>()],
            flags in prop_oneof![Just(0_u32), any::<u32>()],
            result_address in any::<u64>(),
            result_length in any::<u64>(),
            args in any::<[u64; 4]>(),
            memory_size in any::<u64>(),
        ) {
            let command = CommandDescriptor { kernel, mode: 0, tag: 0, flags, result_address, result_length, args };
            if let Ok(kernel) = KnnKernel::decode(&command, memory_size) {
                prop_assert_eq!(u64::from(kernel.items()) * 4, command.result_length);
                let _ = kernel.item(0);
                let _ = kernel.item(u32::MAX);
            }
        }

        /// Small, mostly plausible commands against a real 8 KiB memory: whatever decodes
        /// runs every item without panicking, and what does not decode is an error status.
        #[test]
        fn plausible_commands_decode_and_execute_without_panicking(
            database in prop_oneof![(0_u64..0x900).prop_map(|a| a * 4), 0_u64..0x2400],
            queries in prop_oneof![(0_u64..0x900).prop_map(|a| a * 4), 0_u64..0x2400],
            result in prop_oneof![(0_u64..0x900).prop_map(|a| a * 4), 0_u64..0x2400],
            rows in 0_u32..12,
            dim in prop_oneof![(1_u32..25).prop_map(|d| d * 8), 0_u32..200],
            query_count in 0_u64..5,
            length_delta in prop_oneof![Just(0_i64), -8_i64..8],
            memory_size in prop_oneof![Just(0x2000_u64), any::<u64>()],
        ) {
            let mut command = command(database, queries, rows, dim, query_count, result);
            command.result_length = command.result_length.wrapping_add_signed(length_delta);
            let memory = FakeMemory::new(0x2000);
            if let Ok(kernel) = KnnKernel::decode(&command, memory_size) {
                for item in 0..kernel.items() {
                    let spec = kernel.item(item).unwrap();
                    prop_assert_eq!(kernel.result_range(item), Some((spec.result_offset, spec.result_length)));
                    let outcome = kernel.execute(item, &memory);
                    if memory_size <= 0x2000 {
                        prop_assert_eq!(outcome, Ok(()));
                    } else {
                        prop_assert!(outcome == Ok(()) || matches!(outcome, Err(FirmwareError::MemoryFault(_))));
                    }
                }
                prop_assert_eq!(kernel.execute(kernel.items(), &memory), Err(FirmwareError::ArgumentOutOfRange));
                prop_assert_eq!(kernel.result_range(kernel.items()), None);
            }
        }
    }

    /// The stack figure of `crate::hal` for KNN (see the OPT kernel's twin of this test).
    #[test]
    fn stack_high_water_of_every_knn_item_fits_the_uthread_stack() {
        let memory = crate::testing::FakeDeviceMemory::new(MEMORY as usize);
        let kernel = crate::kernels::Kernel::Knn(KnnKernel::decode(&valid(), MEMORY).unwrap());
        let probe = crate::testing::StackProbe::new(&memory);
        let deepest = probe.high_water(&kernel, 0..kernel.items());
        std::println!("stack high-water, knn: {deepest} bytes");
        assert!(deepest > 0 && deepest <= crate::hal::UTHREAD_STACK_BYTES);
    }
}
