//! DLRM sparse length sum (SLS) kernel: embedding-table lookup and sum pooling per bag.
//!
//! A *bag* is one sample's list of categorical feature values (row indices into one embedding
//! table); the kernel sums the bag's rows into one pooled vector, the input of the model's
//! dense part (which runs on the host).
//!
//! # Command ([`shared_abi::KernelId::DlrmSls`])
//!
//! | field | meaning |
//! |---|---|
//! | `args[0]` | device address of the embedding table: `rows` vectors of `dim` little-endian `f32`, row-major |
//! | `args[1]` | `rows` in the low 32 bits, `dim` in the high 32 bits (see [`pack_shape`]) |
//! | `args[2]` | device address of the batch: `bags + 1` little-endian `u32` offsets, then `index_count` `u32` row indices |
//! | `args[3]` | `bags` in the low 32 bits, `index_count` in the high 32 bits (see [`pack_batch`]) |
//! | `result_address`, `result_length` | the result space: exactly `bags * dim * 4` bytes |
//! | `flags` | reserved, must be zero |
//!
//! The batch is the sparse features of a mini-batch, in the usual compressed layout: bag `b`
//! looks up `indices[offsets[b]..offsets[b + 1]]`, in that order. `offsets[0]` must be 0 and
//! `offsets[bags]` must be `index_count`. The host writes the batch before each launch (it is
//! the launch's input); the table is loaded once.
//!
//! `mode` and `tag` belong to the command processor and are not looked at here.
//!
//! # Work items: one µthread per 32-byte packet of a bag's pooled vector, as M²NDP's SLS
//!
//! A bag's pooled vector of `dim` `f32` is cut into `dim / 8` packets of [`VECTOR_LANES`] = 8
//! elements (32 bytes). Item `i` is packet `p = i mod (dim / 8)` of bag `b = i / (dim / 8)`: it
//! sums elements `8p .. 8p + 8` of the bag's rows and writes them (32 bytes, little-endian) at
//! result offset `32 i = b * dim * 4 + 32 p`, so the result is the bag-major array of pooled
//! vectors. An empty bag pools to all `+0.0`. `bags * dim / 8` items (16,384 for a batch of 512
//! bags of dim 256).
//!
//! This is the decomposition of M²NDP's sparse length sum (`examples/benchmarks/dlrm/
//! dlrm_sls.py`: its base region is the output, one 32-byte packet per µthread): the µthread
//! finds its bag and packet from its offset, reads the bag's two offsets, and per lookup loads
//! the index, forms the row's address, loads the row's 32 bytes with one `vle32.v` and adds
//! them with one `vfadd.vv`; at the end one `vse32.v` stores the packet. Its instructions, by
//! functional unit:
//!
//! ```text
//! FIXED       vsetvli; vmv.v.i + vfcvt (clear the accumulator); li spad; ld x3 (bases of
//!             table, indices, offsets); divu + remu (bag and packet offset from the item's
//!             result offset); add (table + packet offset); slli + add (offsets[b]'s address);
//!             lw offsets[b + 1]; lw offsets[b]; bge (empty bag: to the store); vse32.v
//! PER_LOOKUP  slli + add (index address); lw index; bgeu (index < rows); mul + add (row
//!             address); vle32.v (the row's packet); vfadd.vv; addi + blt (loop)
//! ```
//!
//! Item cost: [`FIXED`] + lookups × [`PER_LOOKUP`] ([`item_cost`]).
//!
//! Where ours differs from M²NDP's `dlrm_sls.py`, and why:
//!
//! - **Indices are `u32`**, loaded with `lw` after `slli 2` (M²NDP's are 64-bit, `ld` after a
//!   multiply by 8): a 1M-row table needs 20 bits; same instruction count, half the bytes.
//! - **The index is checked against `rows`** (one `bgeu` per lookup): a hostile host must not
//!   make the kernel read beyond the table; M²NDP trusts its indices.
//! - **An empty bag is allowed**: one `bge` before the loop (M²NDP's loop runs its body once
//!   before its test, and its benchmark has no empty bag).
//! - **The bag and packet come from a division by the row's bytes** (`divu`, `remu`): M²NDP's
//!   `srli`/`andi` need a power-of-two `dim`; same count.
//!
//! # Validation (everything a hostile host can send)
//!
//! At decode:
//! - `kernel` is not SLS: [`FirmwareError::UnknownKernel`]; `flags != 0`: [`FirmwareError::MalformedDescriptor`].
//! - `rows`, `dim` or `bags` zero, `dim` not a multiple of [`VECTOR_LANES`], `bags * dim / 8`
//!   (the items) not fitting a `u32`, any address not 4-byte aligned, the table, batch or
//!   result byte range overflowing or ending beyond device memory, the result space
//!   overlapping the table or the batch, `result_length` other than `bags * dim * 4`, or the
//!   batch's `offsets[0] != 0` or `offsets[bags] != index_count`: [`FirmwareError::ArgumentOutOfRange`].
//!
//! Per item (the batch is data, read when the item is described and run):
//! - `offsets[b] > offsets[b + 1]` or `offsets[b + 1] > index_count`: the item is refused
//!   with [`FirmwareError::ArgumentOutOfRange`].
//! - Any index of the bag `>= rows`: [`FirmwareError::ArgumentOutOfRange`] at execute, before any read
//!   of that row; the item writes nothing (it stores its packet only at the end).
//!
//! Every size is computed with checked arithmetic; nothing here can panic. A memory smaller
//! than the one the command was validated against yields [`FirmwareError::MemoryFault`].
//!
//! # Arithmetic and summation order (bit-exact contract with the host reference)
//!
//! Element `e` of the pooled vector is `((+0.0 + row[i0][e]) + row[i1][e]) + ...` over the
//! bag's indices in batch order, each addition one rounded `f32` addition (a lane-wise
//! `vfadd.vv`: the lanes are independent, so neither the vector width nor the cut into
//! packets changes the result). A host reference that adds in the same order in `f32` is
//! bit-identical.

use crate::error::FirmwareError;
use crate::hal::DeviceMemory;
use crate::kernels::ranges::{checked_range, offset_address, overlaps};
use crate::kernels::{ItemCost, ItemSpec, VECTOR_LANES};
use shared_abi::{CommandDescriptor, DeviceAddress, KernelId};

// The command's contract: argument packings and the batch's size.
pub use shared_abi::params::dlrm::{batch_bytes, pack_batch, pack_shape, ELEMENT_BYTES};

/// Elements of one item's packet: one vector register of [`VECTOR_LANES`] `f32`.
pub const PACKET_ELEMENTS: usize = VECTOR_LANES;

/// Bytes of one item's packet (M²NDP's `packet_size=32`).
pub const PACKET_BYTES: u64 = PACKET_ELEMENTS as u64 * ELEMENT_BYTES;

/// Indices the kernel reads per chunk into its stack buffer (one 256-byte burst).
pub const INDEX_CHUNK: usize = 64;

/// One lookup (M²NDP `dlrm_sls.py`'s `.LOOP1`): scalar: `slli` + `add` of the index's
/// address, the bound check `bgeu` against `rows`, `mul` + `add` of the row packet's address,
/// `addi` + `blt` of the loop (7); scalar memory: `lw` of the index (1); vector: `vfadd.vv`
/// (1); vector memory: `vle32.v` of the row's 8 elements (1). Bytes: the 4-byte index
/// (contiguous with the bag's others) and the row's 32-byte packet: half a DDR5 burst
/// ([`super::DRAM_BURST_BYTES`]), whose other half the bag's neighbouring packet item reads
/// at about the same time (M²NDP's memory requests are 32-byte sectors, `packet_size=32`, and
/// `l1d_config` is sectored), so the two share the burst: 32 bytes each.
///
/// Each of a bag's `dim / 8` items reads the bag's indices: there is no cache model, so the
/// repeats are charged as DRAM traffic (where M²NDP's L1D would serve most of them); they are
/// 4 of the lookup's 36 bytes.
pub const PER_LOOKUP: ItemCost = ItemCost {
    scalar: 7,
    scalar_memory: 1,
    vector: 1,
    vector_memory: 1,
    indexed_extra_cycles: 0,
    bytes: ELEMENT_BYTES + PACKET_BYTES,
};

/// Per item, whatever its bag's length: scalar: `vsetvli`, `li` of the scratchpad address,
/// `divu` + `remu` (bag and packet offset), `add` (table + packet offset), `slli` + `add` (the
/// bag's offsets address), `bge` (empty bag) (8); scalar memory: the 3 base addresses from the
/// scratchpad (`ld`) and the bag's two offsets (`lw`) (5); vector: `vmv.v.i` + `vfcvt.f.x.v`
/// clearing the accumulator (2); vector memory: the packet's `vse32.v` (1). Bytes: the two
/// offsets (8) and the 32-byte packet written; the scratchpad costs no bytes.
pub const FIXED: ItemCost = ItemCost {
    scalar: 8,
    scalar_memory: 5,
    vector: 2,
    vector_memory: 1,
    indexed_extra_cycles: 0,
    bytes: 2 * ELEMENT_BYTES + PACKET_BYTES,
};

/// Alignment every address of the command must have (the `f32` and `u32` natural alignment).
pub const ADDRESS_ALIGNMENT: u64 = 4;

/// The modelled cost of one packet of a bag of `lookups` rows: [`FIXED`] + `lookups` ×
/// [`PER_LOOKUP`]. Nothing is cached: Zipf-hot rows are read again, as a µthread without a
/// data cache would. Saturates instead of overflowing.
pub fn item_cost(lookups: u32) -> ItemCost {
    FIXED.plus(PER_LOOKUP.times(u64::from(lookups)))
}

/// Adds `row` into `accumulator` element-wise (one rounded `f32` addition each), over
/// `min(accumulator.len(), row.len())` elements: one step of the kernel's pooling order.
pub fn accumulate(accumulator: &mut [f32], row: &[f32]) {
    for (sum, value) in accumulator.iter_mut().zip(row) {
        *sum += *value;
    }
}

/// A decoded, validated SLS launch.
///
/// # Invariants
///
/// `rows`, `dim`, `bags` are non-zero, `dim % 8 == 0`, `dim * 4` fits a `u32`, `items ==
/// bags * dim / 8` fits a `u32`, and the table, batch and result byte ranges lie inside the
/// device memory the command was decoded against (the result disjoint from both inputs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DlrmKernel {
    table: DeviceAddress,
    batch: DeviceAddress,
    result: DeviceAddress,
    rows: u32,
    dim: u32,
    bags: u32,
    index_count: u32,
    /// Packets per bag: `dim / 8`.
    packets: u32,
    items: u32,
}

/// The low and high 32 bits of `value`.
fn split(value: u64) -> (u32, u32) {
    let low = u32::try_from(value & 0xFFFF_FFFF).unwrap_or(0);
    let high = u32::try_from(value >> 32).unwrap_or(0);
    (low, high)
}

/// Reads the little-endian `u32` at `address`.
fn read_u32<M: DeviceMemory>(memory: &M, address: DeviceAddress) -> Result<u32, FirmwareError> {
    let mut word = [0_u8; 4];
    memory.read(address, &mut word)?;
    Ok(u32::from_le_bytes(word))
}

impl DlrmKernel {
    /// Decodes and validates `command` against device memory (see the module docs for every
    /// rule); reads the batch's first and last offsets. Never panics.
    pub fn decode<M: DeviceMemory>(
        command: &CommandDescriptor,
        memory: &M,
    ) -> Result<DlrmKernel, FirmwareError> {
        if command.kernel != KernelId::DlrmSls as u32 {
            return Err(FirmwareError::UnknownKernel);
        }
        if command.flags != 0 {
            return Err(FirmwareError::MalformedDescriptor);
        }
        let [table, shape, batch, counts] = command.args;
        let (rows, dim) = split(shape);
        let (bags, index_count) = split(counts);
        if rows == 0 || dim == 0 || bags == 0 {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        if usize::try_from(dim)
            .ok()
            .and_then(|dim| dim.checked_rem(PACKET_ELEMENTS))
            != Some(0)
        {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let row_bytes = dim
            .checked_mul(4)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let packets = dim
            .checked_div(PACKET_ELEMENTS as u32)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let items = bags
            .checked_mul(packets)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let memory_size = memory.size();
        let table_range = checked_range(
            table,
            u64::from(rows)
                .checked_mul(u64::from(row_bytes))
                .ok_or(FirmwareError::ArgumentOutOfRange)?,
            ADDRESS_ALIGNMENT,
            memory_size,
        )?;
        let batch_range = checked_range(
            batch,
            batch_bytes(bags, index_count),
            ADDRESS_ALIGNMENT,
            memory_size,
        )?;
        let result_length = u64::from(bags)
            .checked_mul(u64::from(row_bytes))
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        if command.result_length != result_length {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let result_range = checked_range(
            command.result_address,
            result_length,
            ADDRESS_ALIGNMENT,
            memory_size,
        )?;
        if overlaps(result_range, table_range) || overlaps(result_range, batch_range) {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let kernel = DlrmKernel {
            table: DeviceAddress(table),
            batch: DeviceAddress(batch),
            result: DeviceAddress(command.result_address),
            rows,
            dim,
            bags,
            index_count,
            packets,
            items,
        };
        let first = read_u32(memory, kernel.offset_address(0)?)
            .map_err(|_| FirmwareError::ArgumentOutOfRange)?;
        let last = read_u32(memory, kernel.offset_address(bags)?)
            .map_err(|_| FirmwareError::ArgumentOutOfRange)?;
        if first != 0 || last != index_count {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        Ok(kernel)
    }

    /// Device address of the table.
    pub fn table(&self) -> DeviceAddress {
        self.table
    }

    /// Device address of the batch (its offsets; the indices follow them).
    pub fn batch(&self) -> DeviceAddress {
        self.batch
    }

    /// Device address of the result space.
    pub fn result_address(&self) -> DeviceAddress {
        self.result
    }

    /// Table rows.
    pub fn rows(&self) -> u32 {
        self.rows
    }

    /// Elements per row (and per pooled vector).
    pub fn dim(&self) -> u32 {
        self.dim
    }

    /// Bags in the batch.
    pub fn bags(&self) -> u32 {
        self.bags
    }

    /// Indices in the batch.
    pub fn index_count(&self) -> u32 {
        self.index_count
    }

    /// Work items: `bags * dim / 8`, one per 32-byte packet of a pooled vector.
    pub fn items(&self) -> u32 {
        self.items
    }

    /// Address of `offsets[bag]`.
    fn offset_address(&self, bag: u32) -> Result<DeviceAddress, FirmwareError> {
        offset_address(self.batch, u64::from(bag), ELEMENT_BYTES)
    }

    /// Address of `indices[position]`.
    fn index_address(&self, position: u32) -> Result<DeviceAddress, FirmwareError> {
        let first_index = u64::from(self.bags)
            .checked_add(1)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        offset_address(
            self.batch,
            first_index
                .checked_add(u64::from(position))
                .ok_or(FirmwareError::ArgumentOutOfRange)?,
            ELEMENT_BYTES,
        )
    }

    /// The positions in `indices` of bag `bag`'s lookups, validated against the batch.
    fn bag_positions<M: DeviceMemory>(
        &self,
        bag: u32,
        memory: &M,
    ) -> Result<(u32, u32), FirmwareError> {
        if bag >= self.bags {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let mut words = [0_u8; 8];
        memory.read(self.offset_address(bag)?, &mut words)?;
        let [a, b, c, d, e, f, g, h] = words;
        let start = u32::from_le_bytes([a, b, c, d]);
        let end = u32::from_le_bytes([e, f, g, h]);
        if start > end || end > self.index_count {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        Ok((start, end))
    }

    /// The bag of item `index` and the packet's byte offset within the row.
    fn bag_and_packet(&self, index: u32) -> Result<(u32, u64), FirmwareError> {
        if index >= self.items {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let bag = index
            .checked_div(self.packets)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let packet = index
            .checked_rem(self.packets)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        Ok((
            bag,
            u64::from(packet)
                .checked_mul(PACKET_BYTES)
                .ok_or(FirmwareError::ArgumentOutOfRange)?,
        ))
    }

    /// Item `index`'s result range `(offset, length)` without reading device memory: what
    /// [`DlrmKernel::item`] gives whenever it accepts the item (`32 * index`, 32 bytes);
    /// `None` past the last item. A bag whose offsets are inconsistent is refused by
    /// [`DlrmKernel::item`] and by [`DlrmKernel::execute`] alike.
    pub fn result_range(&self, index: u32) -> Option<(u64, u32)> {
        self.bag_and_packet(index).ok()?;
        let offset = u64::from(index).checked_mul(PACKET_BYTES)?;
        Some((offset, PACKET_BYTES as u32))
    }

    /// Item `index` (packet `index mod (dim / 8)` of bag `index / (dim / 8)`): result offset
    /// `32 * index`, 32 bytes, cost [`item_cost`] of the bag's length (read from the batch's
    /// offsets).
    pub fn item<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<ItemSpec, FirmwareError> {
        let (bag, _) = self.bag_and_packet(index)?;
        let (start, end) = self.bag_positions(bag, memory)?;
        let lookups = end
            .checked_sub(start)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        Ok(ItemSpec {
            result_offset: u64::from(index)
                .checked_mul(PACKET_BYTES)
                .ok_or(FirmwareError::ArgumentOutOfRange)?,
            result_length: PACKET_BYTES as u32,
            cost: item_cost(lookups),
        })
    }

    /// Runs item `index`: reads the bag's indices [`INDEX_CHUNK`] at a time, adds each
    /// looked-up row's 32-byte packet into the 8-lane accumulator ([`accumulate`]), and writes
    /// the packet (little-endian) to the result.
    pub fn execute<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<(), FirmwareError> {
        let (bag, packet_offset) = self.bag_and_packet(index)?;
        let (start, end) = self.bag_positions(bag, memory)?;
        let row_bytes = u64::from(self.dim)
            .checked_mul(ELEMENT_BYTES)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let mut sums = [0.0_f32; PACKET_ELEMENTS];
        let mut values = [0.0_f32; PACKET_ELEMENTS];
        let mut packet = [0_u8; PACKET_BYTES as usize];
        let mut index_buffer = [0_u8; INDEX_CHUNK_BYTES];
        let mut position = start;
        while position < end {
            let count = usize::try_from(end.saturating_sub(position))
                .map_err(|_| FirmwareError::ArgumentOutOfRange)?
                .min(INDEX_CHUNK);
            let chunk_bytes = count
                .checked_mul(4)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            let chunk = index_buffer
                .get_mut(..chunk_bytes)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            memory.read(self.index_address(position)?, chunk)?;
            for word in chunk.chunks_exact(4) {
                let word =
                    <[u8; 4]>::try_from(word).map_err(|_| FirmwareError::ArgumentOutOfRange)?;
                let row = u32::from_le_bytes(word);
                if row >= self.rows {
                    return Err(FirmwareError::ArgumentOutOfRange);
                }
                let row_address = offset_address(self.table, u64::from(row), row_bytes)?
                    .checked_add(packet_offset)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?;
                memory.read(row_address, &mut packet)?;
                for (value, bytes) in values.iter_mut().zip(packet.chunks_exact(4)) {
                    let bytes = <[u8; 4]>::try_from(bytes)
                        .map_err(|_| FirmwareError::ArgumentOutOfRange)?;
                    *value = f32::from_le_bytes(bytes);
                }
                accumulate(&mut sums, &values);
            }
            position = position
                .checked_add(u32::try_from(count).map_err(|_| FirmwareError::ArgumentOutOfRange)?)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
        }
        for (bytes, sum) in packet.chunks_exact_mut(4).zip(sums.iter()) {
            bytes.copy_from_slice(&sum.to_le_bytes());
        }
        let packet_address = self
            .result
            .checked_add(
                u64::from(index)
                    .checked_mul(PACKET_BYTES)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?,
            )
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        memory.write(packet_address, &packet)?;
        Ok(())
    }
}

/// Bytes of the index buffer.
const INDEX_CHUNK_BYTES: usize = INDEX_CHUNK * 4;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Device memory for the tests: the crate's test double.
    type FakeMemory = crate::testing::FakeDeviceMemory;

    const MEMORY: u64 = 1 << 20;
    const TABLE: u64 = 0x1000;
    const BATCH: u64 = 0x8_0000;
    const RESULT: u64 = 0x9_0000;

    fn write_words<T: Copy>(
        memory: &mut FakeMemory,
        address: u64,
        values: &[T],
        to: fn(T) -> [u8; 4],
    ) {
        let bytes: Vec<u8> = values.iter().flat_map(|v| to(*v)).collect();
        memory.write(DeviceAddress(address), &bytes).unwrap();
    }

    fn read_floats(memory: &FakeMemory, address: u64, count: usize) -> Vec<f32> {
        let mut bytes = vec![0; count * 4];
        memory.read(DeviceAddress(address), &mut bytes).unwrap();
        bytes
            .chunks_exact(4)
            .map(|w| f32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect()
    }

    fn value(seed: u32) -> f32 {
        // Values in [-1, 1) whose sums depend on the order (no quarter-step exactness).
        (seed.wrapping_mul(2_654_435_761) >> 8) as f32 / (1 << 23) as f32 - 1.0
    }

    fn command(rows: u32, dim: u32, bags: u32, index_count: u32) -> CommandDescriptor {
        CommandDescriptor {
            kernel: KernelId::DlrmSls as u32,
            mode: 0,
            tag: 0,
            flags: 0,
            result_address: RESULT,
            result_length: u64::from(bags) * u64::from(dim) * 4,
            args: [
                TABLE,
                pack_shape(rows, dim),
                BATCH,
                pack_batch(bags, index_count),
            ],
        }
    }

    /// A memory with a table of `rows x dim` values and the batch `offsets` / `indices`.
    fn memory_with(
        rows: u32,
        dim: u32,
        offsets: &[u32],
        indices: &[u32],
    ) -> (FakeMemory, Vec<f32>) {
        let mut memory = FakeMemory::new(MEMORY as usize);
        let table: Vec<f32> = (0..rows * dim).map(value).collect();
        write_words(&mut memory, TABLE, &table, f32::to_le_bytes);
        write_words(&mut memory, BATCH, offsets, u32::to_le_bytes);
        write_words(
            &mut memory,
            BATCH + 4 * offsets.len() as u64,
            indices,
            u32::to_le_bytes,
        );
        (memory, table)
    }

    /// Bags of 3, 0, 5 and 2 lookups over a 10-row, 32-dim table (repeats included).
    const OFFSETS: [u32; 5] = [0, 3, 3, 8, 10];
    const INDICES: [u32; 10] = [4, 1, 4, 9, 0, 0, 7, 2, 3, 9];

    fn valid() -> (CommandDescriptor, FakeMemory, Vec<f32>) {
        let (memory, table) = memory_with(10, 32, &OFFSETS, &INDICES);
        (command(10, 32, 4, 10), memory, table)
    }

    fn plain_pool(table: &[f32], dim: usize, rows: &[u32]) -> Vec<f32> {
        let mut sums = vec![0.0_f32; dim];
        for &row in rows {
            for (e, sum) in sums.iter_mut().enumerate() {
                *sum += table[row as usize * dim + e];
            }
        }
        sums
    }

    #[test]
    fn valid_command_decodes_with_its_fields() {
        let (command, memory, _) = valid();
        let kernel = DlrmKernel::decode(&command, &memory).unwrap();
        assert_eq!(kernel.rows(), 10);
        assert_eq!(kernel.dim(), 32);
        assert_eq!(kernel.bags(), 4);
        assert_eq!(kernel.index_count(), 10);
        assert_eq!(kernel.items(), 4 * 32 / 8);
        assert_eq!(kernel.table(), DeviceAddress(TABLE));
        assert_eq!(kernel.batch(), DeviceAddress(BATCH));
        assert_eq!(kernel.result_address(), DeviceAddress(RESULT));
    }

    #[test]
    fn an_item_covers_exactly_one_packet_of_one_bag_costed_by_the_bag_length() {
        let (command, memory, _) = valid();
        let kernel = DlrmKernel::decode(&command, &memory).unwrap();
        // dim 32: 4 packets per bag; item 9 is packet 1 of bag 2 (5 lookups).
        for item in 0..16_u32 {
            let spec = kernel.item(item, &memory).unwrap();
            assert_eq!(spec.result_offset, 32 * u64::from(item));
            assert_eq!(spec.result_length, 32);
            let bag = (item / 4) as usize;
            assert_eq!(
                spec.cost,
                item_cost(OFFSETS[bag + 1] - OFFSETS[bag]),
                "item {item}"
            );
        }
        assert_eq!(kernel.item(9, &memory).unwrap().cost, item_cost(5));
        assert_eq!(kernel.item(4, &memory).unwrap().cost, item_cost(0));
        assert_eq!(
            kernel.item(16, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
        assert_eq!(
            kernel.item(u32::MAX, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
    }

    #[test]
    fn an_item_writes_its_32_bytes_and_nothing_else() {
        let (command, memory, table) = valid();
        let kernel = DlrmKernel::decode(&command, &memory).unwrap();
        memory.write(DeviceAddress(RESULT), &[0xEE; 512]).unwrap();
        kernel.execute(9, &memory).unwrap();
        let mut after = [0_u8; 512];
        memory.read(DeviceAddress(RESULT), &mut after).unwrap();
        let expected = plain_pool(&table, 32, &INDICES[3..8]);
        for (offset, byte) in after.iter().enumerate() {
            if (288..320).contains(&offset) {
                let e = (offset - 288) / 4 + 8;
                let bytes = expected[e].to_le_bytes();
                assert_eq!(*byte, bytes[(offset - 288) % 4], "byte {offset}");
            } else {
                assert_eq!(*byte, 0xEE, "byte {offset}");
            }
        }
    }

    #[test]
    fn costs_are_the_documented_instructions_and_bytes() {
        assert_eq!(
            FIXED,
            ItemCost {
                scalar: 8,
                scalar_memory: 5,
                vector: 2,
                vector_memory: 1,
                indexed_extra_cycles: 0,
                bytes: 40
            }
        );
        assert_eq!(
            PER_LOOKUP,
            ItemCost {
                scalar: 7,
                scalar_memory: 1,
                vector: 1,
                vector_memory: 1,
                indexed_extra_cycles: 0,
                bytes: 36
            }
        );
        // A mean paper bag of 128 lookups, per packet.
        let cost = item_cost(128);
        assert_eq!(cost.instructions(), 16 + 128 * 10);
        assert_eq!(cost.vector_memory, 1 + 128);
        assert_eq!(cost.bytes, 40 + 128 * 36);
        assert_eq!(item_cost(0), FIXED);
        // Saturates rather than overflowing.
        assert_eq!(PER_LOOKUP.times(u64::MAX).plus(FIXED).bytes, u64::MAX);
    }

    #[test]
    fn execute_pools_every_bag_in_order() {
        let (command, memory, table) = valid();
        let kernel = DlrmKernel::decode(&command, &memory).unwrap();
        for item in (0..kernel.items()).rev() {
            kernel.execute(item, &memory).unwrap();
        }
        for bag in 0..4 {
            let rows = &INDICES[OFFSETS[bag] as usize..OFFSETS[bag + 1] as usize];
            let expected = plain_pool(&table, 32, rows);
            let got = read_floats(&memory, RESULT + 128 * bag as u64, 32);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&expected), "bag {bag}");
        }
        // The empty bag is +0.0 everywhere.
        assert!(read_floats(&memory, RESULT + 128, 32)
            .iter()
            .all(|x| x.to_bits() == 0));
    }

    #[test]
    fn wide_rows_have_many_packets_and_long_bags_chunk_their_indices() {
        // dim 272 (34 packets), one bag of 150 lookups (three index chunks).
        let indices: Vec<u32> = (0..150).map(|j| (j * 7) % 12).collect();
        let (memory, table) = memory_with(12, 272, &[0, 150], &indices);
        let kernel = DlrmKernel::decode(&command(12, 272, 1, 150), &memory).unwrap();
        assert_eq!(kernel.items(), 34);
        for item in 0..34 {
            kernel.execute(item, &memory).unwrap();
        }
        let expected = plain_pool(&table, 272, &indices);
        let got = read_floats(&memory, RESULT, 272);
        assert!(got
            .iter()
            .zip(&expected)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
    }

    #[test]
    fn accumulate_is_one_f32_addition_per_element() {
        let mut sums = [1.0e8_f32, 1.0];
        accumulate(&mut sums, &[1.0, 1.0e-8]);
        assert_eq!(sums, [1.0e8, 1.0]);
        accumulate(&mut sums, &[-1.0e8]);
        assert_eq!(sums, [0.0, 1.0]);
    }

    #[test]
    fn out_of_range_index_is_an_error_without_a_write() {
        let (memory, _) = memory_with(10, 32, &[0, 2], &[3, 10]);
        let kernel = DlrmKernel::decode(&command(10, 32, 1, 2), &memory).unwrap();
        memory.write(DeviceAddress(RESULT), &[0xEE; 128]).unwrap();
        for item in 0..4 {
            assert_eq!(
                kernel.execute(item, &memory),
                Err(FirmwareError::ArgumentOutOfRange)
            );
        }
        let mut after = [0_u8; 128];
        memory.read(DeviceAddress(RESULT), &mut after).unwrap();
        assert_eq!(after, [0xEE; 128]);
        let (memory, _) = memory_with(10, 32, &[0, 1], &[u32::MAX]);
        let kernel = DlrmKernel::decode(&command(10, 32, 1, 1), &memory).unwrap();
        assert_eq!(
            kernel.execute(0, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
    }

    #[test]
    fn offsets_out_of_order_or_beyond_the_indices_refuse_the_item() {
        // Bag 1 (items 4..8 at dim 32) runs backwards; bag 0 is fine.
        let (memory, _) = memory_with(10, 32, &[0, 3, 1, 4], &[1, 2, 3, 4]);
        let kernel = DlrmKernel::decode(&command(10, 32, 3, 4), &memory).unwrap();
        assert!(kernel.item(3, &memory).is_ok());
        for item in 4..8 {
            assert_eq!(
                kernel.item(item, &memory),
                Err(FirmwareError::ArgumentOutOfRange)
            );
            assert_eq!(
                kernel.execute(item, &memory),
                Err(FirmwareError::ArgumentOutOfRange)
            );
        }
        assert!(kernel.item(8, &memory).is_ok());
        // Bag 0 ends beyond index_count (decoded with 4 indices).
        let (memory, _) = memory_with(10, 32, &[0, 9, 4], &[1, 2, 3, 4]);
        let kernel = DlrmKernel::decode(&command(10, 32, 2, 4), &memory).unwrap();
        assert_eq!(
            kernel.item(0, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
        assert_eq!(
            kernel.execute(0, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
    }

    fn assert_rejected(command: CommandDescriptor, memory: &FakeMemory, status: FirmwareError) {
        assert_eq!(
            DlrmKernel::decode(&command, memory),
            Err(status),
            "{command:?}"
        );
    }

    #[test]
    fn wrong_kernel_or_reserved_flags_are_rejected() {
        let (command, memory, _) = valid();
        let mut wrong = command;
        wrong.kernel = KernelId::KnnDistance as u32;
        assert_rejected(wrong, &memory, FirmwareError::UnknownKernel);
        let mut flags = command;
        flags.flags = 1;
        assert_rejected(flags, &memory, FirmwareError::MalformedDescriptor);
    }

    #[test]
    fn zero_sizes_and_partial_vectors_are_rejected() {
        let (_, memory, _) = valid();
        for (rows, dim, bags) in [(0, 32, 4), (10, 0, 4), (10, 32, 0), (10, 12, 4), (10, 4, 4)] {
            assert_rejected(
                command(rows, dim, bags, 10),
                &memory,
                FirmwareError::ArgumentOutOfRange,
            );
        }
        // dim * 4 not fitting a u32.
        let mut huge = command(1, 0x4000_0000, 1, 10);
        huge.result_length = 1 << 32;
        assert_rejected(huge, &memory, FirmwareError::ArgumentOutOfRange);
        // dim 8 (one packet per bag) and 24 are whole vectors of 8 lanes.
        let (memory, _) = memory_with(10, 24, &OFFSETS, &INDICES);
        assert_eq!(
            DlrmKernel::decode(&command(10, 24, 4, 10), &memory)
                .unwrap()
                .items(),
            12
        );
        let (memory, _) = memory_with(10, 8, &OFFSETS, &INDICES);
        assert_eq!(
            DlrmKernel::decode(&command(10, 8, 4, 10), &memory)
                .unwrap()
                .items(),
            4
        );
    }

    #[test]
    fn result_length_other_than_bags_times_dim_times_four_is_rejected() {
        let (command, memory, _) = valid();
        for length in [0, 508, 511, 513, 516, 1024] {
            let mut wrong = command;
            wrong.result_length = length;
            assert_rejected(wrong, &memory, FirmwareError::ArgumentOutOfRange);
        }
    }

    #[test]
    fn batch_offsets_inconsistent_with_its_counts_are_rejected() {
        let (command, memory, _) = valid();
        // index_count 9 while offsets[4] is 10, and 11.
        for count in [9, 11] {
            let mut wrong = command;
            wrong.args[3] = pack_batch(4, count);
            assert_rejected(wrong, &memory, FirmwareError::ArgumentOutOfRange);
        }
        // offsets[0] not 0.
        let (memory, _) = memory_with(10, 32, &[1, 3], &[1, 2, 3]);
        assert_rejected(
            command_for(1, 3),
            &memory,
            FirmwareError::ArgumentOutOfRange,
        );
    }

    fn command_for(bags: u32, index_count: u32) -> CommandDescriptor {
        command(10, 32, bags, index_count)
    }

    #[test]
    fn ranges_beyond_memory_unaligned_or_overlapping_are_rejected() {
        let (command, memory, _) = valid();
        let with = |f: &dyn Fn(&mut CommandDescriptor)| {
            let mut c = command;
            f(&mut c);
            c
        };
        let cases = [
            with(&|c| c.args[0] = MEMORY - 1276), // table ends 4 bytes beyond
            with(&|c| c.args[0] = TABLE + 2),     // unaligned
            with(&|c| c.args[0] = u64::MAX - 3),  // overflow
            with(&|c| c.args[2] = MEMORY - 56),   // batch (60 bytes) beyond
            with(&|c| c.args[2] = BATCH + 1),     // unaligned
            with(&|c| c.args[2] = u64::MAX - 3),  // overflow
            with(&|c| c.result_address = MEMORY - 508), // result beyond
            with(&|c| c.result_address = RESULT + 3), // unaligned
            with(&|c| c.result_address = u64::MAX - 3), // overflow
            with(&|c| c.result_address = TABLE + 1276), // overlaps the table's end
            with(&|c| c.result_address = BATCH - 508), // overlaps the batch's start
        ];
        for case in cases {
            assert_rejected(case, &memory, FirmwareError::ArgumentOutOfRange);
        }
        // Touching is fine.
        assert!(DlrmKernel::decode(&with(&|c| c.result_address = TABLE + 1280), &memory).is_ok());
        assert!(DlrmKernel::decode(&with(&|c| c.result_address = BATCH + 60), &memory).is_ok());
        // Nothing fits a tiny memory.
        assert_rejected(
            command,
            &FakeMemory::new(0x100),
            FirmwareError::ArgumentOutOfRange,
        );
    }

    #[test]
    fn execute_on_a_smaller_memory_than_validated_reports_a_fault() {
        let (command, memory, _) = valid();
        let kernel = DlrmKernel::decode(&command, &memory).unwrap();
        let small = FakeMemory::new(0x2000);
        assert!(matches!(
            kernel.execute(0, &small),
            Err(FirmwareError::MemoryFault(_))
        ));
        assert!(matches!(
            kernel.item(0, &small),
            Err(FirmwareError::MemoryFault(_))
        ));
    }

    proptest! {
        #[test]
        fn decode_of_arbitrary_commands_never_panics(
            kernel in prop_oneof![Just(KernelId::DlrmSls as u32), any::<u32>()],
            flags in prop_oneof![Just(0_u32), any::<u32>()],
            result_address in any::<u64>(),
            result_length in any::<u64>(),
            args in any::<[u64; 4]>(),
        ) {
            let (_, memory, _) = valid();
            let command = CommandDescriptor { kernel, mode: 0, tag: 0, flags, result_address, result_length, args };
            if let Ok(kernel) = DlrmKernel::decode(&command, &memory) {
                prop_assert_eq!(u64::from(kernel.items()) * 32, command.result_length);
                let _ = kernel.item(0, &memory);
                let _ = kernel.item(u32::MAX, &memory);
            }
        }

        /// Small, mostly plausible commands over well-formed or hostile batches in a real
        /// memory: whatever decodes runs every item without panicking; an item either
        /// succeeds or reports a status, and well-formed batches over in-range rows succeed.
        #[test]
        fn plausible_commands_with_hostile_batches_never_panic(
            table in prop_oneof![3 => (0_u64..0x100).prop_map(|a| a * 4), 1 => 0_u64..0x10000],
            batch in prop_oneof![3 => (0x2000_u64..0x2100).prop_map(|a| a * 4), 1 => 0_u64..0x10000],
            result in prop_oneof![3 => (0x3000_u64..0x3100).prop_map(|a| a * 4), 1 => 0_u64..0x10000],
            rows in 0_u32..12,
            dim in prop_oneof![3 => (1_u32..40).prop_map(|d| d * 8), 1 => 0_u32..300],
            bags in 0_u32..6,
            lengths in proptest::collection::vec(0_u32..5, 6),
            indices in proptest::collection::vec(prop_oneof![4 => 0_u32..12, 1 => any::<u32>()], 30),
            hostile in proptest::option::of((0_u32..20, proptest::collection::vec(prop_oneof![0_u32..24, any::<u32>()], 7))),
            length_delta in prop_oneof![3 => Just(0_i64), 1 => -8_i64..8],
        ) {
            // Well-formed offsets from the lengths, or hostile ones with consistent ends (so
            // that the command decodes and the middle offsets reach the items).
            let well_formed_batch = hostile.is_none();
            let (offsets, index_count) = match hostile {
                None => {
                    let mut offsets = vec![0_u32];
                    for length in &lengths[..bags as usize] {
                        offsets.push(offsets.last().unwrap() + length);
                    }
                    let count = *offsets.last().unwrap();
                    (offsets, count)
                }
                Some((count, mut words)) => {
                    words.truncate(bags as usize + 1);
                    words[0] = 0;
                    words[bags as usize] = count;
                    (words, count)
                }
            };
            let memory = FakeMemory::new(0x1_0000);
            let words: Vec<u32> = offsets.iter().chain(&indices).copied().collect();
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let _ = memory.write(DeviceAddress(batch), &bytes);
            let mut command = command(rows, dim, bags, index_count);
            command.args[0] = table;
            command.args[2] = batch;
            command.result_address = result;
            command.result_length = command.result_length.wrapping_add_signed(length_delta);
            if let Ok(kernel) = DlrmKernel::decode(&command, &memory) {
                for item in 0..kernel.items() {
                    let described = kernel.item(item, &memory);
                    let outcome = kernel.execute(item, &memory);
                    prop_assert!(outcome == Ok(()) || outcome == Err(FirmwareError::ArgumentOutOfRange));
                    if described.is_err() {
                        prop_assert_eq!(outcome, Err(FirmwareError::ArgumentOutOfRange));
                    }
                    // The range the command processor takes, without reading the batch, for an
                    // item that ran: the described one whenever the item is described.
                    if let Ok(spec) = described {
                        prop_assert_eq!(kernel.result_range(item), Some((spec.result_offset, spec.result_length)));
                    }
                    let bag = (item / (dim / 8)) as usize;
                    let well_formed = well_formed_batch
                        && indices[offsets[bag] as usize..offsets[bag + 1] as usize]
                            .iter()
                            .all(|&row| row < rows);
                    if well_formed {
                        prop_assert_eq!(outcome, Ok(()));
                    }
                }
                prop_assert_eq!(kernel.execute(kernel.items(), &memory), Err(FirmwareError::ArgumentOutOfRange));
                prop_assert_eq!(kernel.result_range(kernel.items()), None);
            }
        }
    }

    /// The stack figure of `crate::hal` for DLRM (see the OPT kernel's twin of this test).
    #[test]
    fn stack_high_water_of_every_dlrm_item_fits_the_uthread_stack() {
        let (command, memory, _) = valid();
        let kernel = crate::kernels::Kernel::Dlrm(DlrmKernel::decode(&command, &memory).unwrap());
        let probe = crate::testing::StackProbe::new(&memory);
        let deepest = probe.high_water(&kernel, 0..kernel.items());
        std::println!("stack high-water, dlrm: {deepest} bytes");
        assert!(deepest > 0 && deepest <= crate::hal::UTHREAD_STACK_BYTES);
    }
}
