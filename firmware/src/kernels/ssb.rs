//! SSB predicate filter kernel: boolean marking of the lineorder rows that satisfy a query's
//! predicates on `lo_quantity` and `lo_discount` (paper Table IV (f), (g); the selection
//! offload of M²NDP's OLAP evaluation).
//!
//! # Command ([`shared_abi::KernelId::SsbFilter`])
//!
//! | field | meaning |
//! |---|---|
//! | `args[0]` | device address of the `lo_quantity` column: `rows` little-endian `u32` |
//! | `args[1]` | device address of the `lo_discount` column: `rows` little-endian `u32` |
//! | `args[2]` | `rows` in the low 32 bits, `rows_per_item` in the high 32 bits (see [`pack_rows`]) |
//! | `args[3]` | the predicate's four inclusive bounds, 16 bits each (see [`Predicate::pack`]) |
//! | `result_address`, `result_length` | the result space: the bitmap, exactly [`bitmap_bytes`]`(rows)` bytes |
//! | `flags` | reserved, must be zero |
//!
//! The columns hold the SSB schema's 4-byte integers, uncompressed, as a plain column store
//! keeps them. `mode` and `tag` belong to the command processor and are not looked at here.
//!
//! # Result: a row bitmap
//!
//! Row `r` is marked when `quantity_low <= lo_quantity[r] <= quantity_high` and
//! `discount_low <= lo_discount[r] <= discount_high` (the bounds zero-extended to 32 bits).
//! Its bit is bit `r % 8` of byte `r / 8` (so the bitmap read as little-endian `u64` words has
//! row `r` at bit `r % 64` of word `r / 64`). The last byte's bits past `rows` are zero. The
//! result is `ceil(rows / 8)` bytes.
//!
//! # Work items: M²NDP's µthreads
//!
//! M²NDP runs one µthread per 32-byte packet of a launch's base region (its µthread generator,
//! `src/uthread_generator.cc`, steps the region by `PACKET_SIZE = 32`; the paper, Section V-A:
//! each µthread is "assigned a fixed-size input vector"), and its column filters
//! (`examples/benchmarks/imdb_*`) give each µthread one packet of a column: it loads the packet
//! (`vle64.v`), loads the matching packet of a second column at the same offset
//! (`imdb_two_col_AND`), compares against the predicate's constants (`vmsge.vx`, `vmslt.vx`),
//! combines the masks (`vmand.mm`) and stores the packet's mask byte (`vmv.x.s`, `sb`). This
//! kernel is that µthread for the SSB columns: the base region is `lo_quantity`, a packet holds
//! [`ROWS_PER_PACKET`] rows of `u32` (8 lanes of [`super::VECTOR_LANES`]), and the µthread
//! filters both columns at once and stores one bitmap byte. (M²NDP's IMDB filters use 8-byte
//! columns, 4 rows per packet; with the SSB schema's 4-byte integers a packet is 8 rows, which
//! is exactly one byte of bitmap, so no two µthreads share a result byte.)
//!
//! Where M²NDP would run three launches (a filter per column, then a bitmap AND), this kernel
//! fuses them into one µthread body that reads both columns, as `imdb_two_col_AND` reads two:
//! the paper offloads the selection as one operation (Table IV (f), (g): "predicate
//! filtering"), and three launches would write and re-read two intermediate bitmaps.
//!
//! An item covers `rows_per_item` rows, a multiple of [`ROWS_PER_PACKET`]: with
//! `rows_per_item = 8` an item is exactly one M²NDP µthread; a larger value runs that many
//! µthread bodies one after the other in one item (the same instructions and bytes, fewer items
//! to simulate). Item `i` covers rows `i * rows_per_item ..` (the last item takes the
//! remainder) and writes their bytes: result offset `i * rows_per_item / 8`, length
//! `ceil(rows_in_item / 8)`.
//!
//! # Validation (everything a hostile host can send)
//!
//! - `kernel` is not the SSB filter: [`FirmwareError::UnknownKernel`]; `flags != 0`:
//!   [`FirmwareError::MalformedDescriptor`].
//! - `rows` or `rows_per_item` zero, `rows_per_item` not a multiple of [`ROWS_PER_PACKET`],
//!   `result_length` different from [`bitmap_bytes`]`(rows)`, a column address not 4-byte
//!   aligned, any of the three byte ranges overflowing or ending beyond device memory, or the
//!   result overlapping a column: [`FirmwareError::ArgumentOutOfRange`]. The columns may overlap each
//!   other (they are only read). The result needs no alignment (the µthread stores bytes).
//!   Bounds with `low > high` are accepted: that predicate marks nothing.
//!
//! Every size is computed with checked arithmetic; nothing here can panic.
//!
//! # Cost model
//!
//! One µthread body ([`PER_PACKET`]) per packet of the item, with its bytes
//! ([`BYTES_PER_PACKET`]): the instructions below, by the functional unit that executes them
//! ([`ItemCost`]). The launch's arguments (the second column's and the bitmap's addresses and
//! the four bounds) are in the scratchpad, one 8-byte slot each, as M²NDP's µthread generator
//! stores a launch's arguments there (`UThreadGenerator::launch`); the firmware unpacks the
//! packed bounds once per launch.
//!
//! ```text
//! vsetvli t0, a0, e32, m1     scalar          8 lanes of 32 bits
//! vle32.v v1, (x1)            vector memory   the lo_quantity packet (x1: packet address)
//! li   x7, SPAD               scalar
//! ld   x3..x9, k(x7)          scalar memory   6 arguments from the scratchpad
//! add  x3, x3, x2             scalar          lo_discount packet (x2: packet offset)
//! vle32.v v2, (x3)            vector memory   the lo_discount packet
//! vmsgeu.vx / vmsleu.vx       vector          2 per column: 4
//! vmand.mm                    vector          one per column, one of the two: 3
//! srli x10, x2, 5; add        scalar          the bitmap byte's address: 2
//! vsetvli t0, a0, e8, m1      scalar
//! vmv.x.s x11, v3             vector          the mask byte
//! sb   x11, (x10)             scalar memory
//! ```

use crate::error::FirmwareError;
use crate::hal::DeviceMemory;
use crate::kernels::ranges::{checked_range, overlaps};
use crate::kernels::{ItemCost, ItemSpec};
use shared_abi::{CommandDescriptor, DeviceAddress, KernelId};

// The command's contract: argument packings, the predicate, the bitmap's size.
pub use shared_abi::params::ssb::{
    bitmap_bytes, pack_rows, Predicate, ROWS_PER_PACKET, VALUE_BYTES,
};

/// Bytes of one M²NDP packet: the µthread's input vector (`PACKET_SIZE = MEM_ACCESS_SIZE = 32`
/// in M²NDP's `src/common_defs.h`; `packet_size=32` in its performance configuration) and one
/// 8-lane vector of 32-bit values; consecutive µthreads read consecutive packets, so the
/// columns stream and each packet costs its 32 bytes (half a DDR5 burst,
/// [`super::DRAM_BURST_BYTES`]).
pub const PACKET_BYTES: u64 = 32;

// A packet of a column holds [`ROWS_PER_PACKET`] values: the bitmap byte of one µthread.
const _: () = assert!(ROWS_PER_PACKET as u64 == PACKET_BYTES / VALUE_BYTES);

/// Rows the kernel reads per chunk into its stack buffers (256 bytes per column, small
/// because every one-packet item clears them); a simulation detail of items of several
/// packets, not part of the model.
pub const CHUNK_ROWS: usize = 64;

/// One µthread body (see the module docs' listing): `vsetvli` twice, `li`, the discount
/// address `add`, the bitmap address `srli` and `add` on the scalar units (6); six argument
/// `ld`s from the scratchpad and the `sb` of the mask byte on the scalar address unit (7);
/// four range compares, three `vmand.mm` and `vmv.x.s` on the vector unit (8); the two
/// `vle32.v` on the vector address unit (2). 23 instructions.
pub const PER_PACKET: ItemCost = ItemCost {
    scalar: 6,
    scalar_memory: 7,
    vector: 8,
    vector_memory: 2,
    indexed_extra_cycles: 0,
    bytes: 0,
};

/// Device-memory bytes of one µthread body: one packet of each column (a partial last packet
/// is counted whole) and the bitmap byte. The byte stores of consecutive µthreads
/// reach DRAM merged into whole bursts by the device's write-back L2 (M²NDP `l2d_config`
/// `...,L:B:...`: write-back), so each costs one byte of bandwidth.
pub const BYTES_PER_PACKET: u64 = 2 * PACKET_BYTES + 1;

/// Alignment of the column addresses (`u32`).
pub const COLUMN_ALIGNMENT: u64 = 4;

/// Alignment of the result address: none (the µthread stores single bytes).
pub const RESULT_ALIGNMENT: u64 = 1;

/// The modelled cost of an item of `rows` rows: [`PER_PACKET`] and [`BYTES_PER_PACKET`] per
/// packet of [`ROWS_PER_PACKET`] rows (a partial last packet costs a whole one). Saturates
/// instead of overflowing.
pub fn item_cost(rows: u32) -> ItemCost {
    let packets = u64::from(rows).div_ceil(u64::from(ROWS_PER_PACKET));
    PER_PACKET
        .times(packets)
        .plus(ItemCost::bytes(packets.saturating_mul(BYTES_PER_PACKET)))
}

/// A decoded, validated SSB filter launch.
///
/// # Invariants
///
/// `rows > 0`, `rows_per_item` is a positive multiple of [`ROWS_PER_PACKET`], `items ==
/// ceil(rows / rows_per_item)`, and both columns (`4 * rows` bytes each, 4-byte aligned) and
/// the result (`bitmap_bytes(rows)` bytes) lie inside the device memory the command was
/// decoded against, the result disjoint from both columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SsbKernel {
    quantity: DeviceAddress,
    discount: DeviceAddress,
    result: DeviceAddress,
    rows: u32,
    rows_per_item: u32,
    items: u32,
    predicate: Predicate,
}

impl SsbKernel {
    /// Decodes and validates `command` against device memory (only its size is read; see the
    /// module docs for every rule). Never panics.
    pub fn decode<M: DeviceMemory>(
        command: &CommandDescriptor,
        memory: &M,
    ) -> Result<Self, FirmwareError> {
        Self::decode_for_size(command, memory.size())
    }

    /// [`SsbKernel::decode`] against a device memory of `memory_size` bytes.
    pub fn decode_for_size(
        command: &CommandDescriptor,
        memory_size: u64,
    ) -> Result<Self, FirmwareError> {
        if command.kernel != KernelId::SsbFilter as u32 {
            return Err(FirmwareError::UnknownKernel);
        }
        if command.flags != 0 {
            return Err(FirmwareError::MalformedDescriptor);
        }
        let [quantity, discount, shape, bounds] = command.args;
        let rows = u32::try_from(shape & u64::from(u32::MAX))
            .map_err(|_| FirmwareError::ArgumentOutOfRange)?;
        let rows_per_item =
            u32::try_from(shape >> 32).map_err(|_| FirmwareError::ArgumentOutOfRange)?;
        if rows == 0 || rows_per_item == 0 || rows_per_item.checked_rem(ROWS_PER_PACKET) != Some(0)
        {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let predicate = Predicate::unpack(bounds);
        let items = rows.div_ceil(rows_per_item);
        let result_bytes = bitmap_bytes(rows);
        if command.result_length != result_bytes {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let column_bytes = u64::from(rows)
            .checked_mul(VALUE_BYTES)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let quantity_range = checked_range(quantity, column_bytes, COLUMN_ALIGNMENT, memory_size)?;
        let discount_range = checked_range(discount, column_bytes, COLUMN_ALIGNMENT, memory_size)?;
        let result_range = checked_range(
            command.result_address,
            result_bytes,
            RESULT_ALIGNMENT,
            memory_size,
        )?;
        if overlaps(result_range, quantity_range) || overlaps(result_range, discount_range) {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        Ok(SsbKernel {
            quantity: DeviceAddress(quantity),
            discount: DeviceAddress(discount),
            result: DeviceAddress(command.result_address),
            rows,
            rows_per_item,
            items,
            predicate,
        })
    }

    /// Device address of the `lo_quantity` column.
    pub fn quantity(&self) -> DeviceAddress {
        self.quantity
    }

    /// Device address of the `lo_discount` column.
    pub fn discount(&self) -> DeviceAddress {
        self.discount
    }

    /// Device address of the bitmap.
    pub fn result_address(&self) -> DeviceAddress {
        self.result
    }

    /// Rows of the table.
    pub fn rows(&self) -> u32 {
        self.rows
    }

    /// Rows per item (the last item may have fewer).
    pub fn rows_per_item(&self) -> u32 {
        self.rows_per_item
    }

    /// The predicate.
    pub fn predicate(&self) -> Predicate {
        self.predicate
    }

    /// Work items: `ceil(rows / rows_per_item)`.
    pub fn items(&self) -> u32 {
        self.items
    }

    /// First row and row count of item `index`.
    fn item_rows(&self, index: u32) -> Result<(u32, u32), FirmwareError> {
        if index >= self.items {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let first = index
            .checked_mul(self.rows_per_item)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let count = self
            .rows
            .checked_sub(first)
            .ok_or(FirmwareError::ArgumentOutOfRange)?
            .min(self.rows_per_item);
        Ok((first, count))
    }

    /// Item `index`'s result range `(offset, length)`, as [`SsbKernel::item`] gives it: its
    /// rows' bitmap bytes; `None` past the last item.
    pub fn result_range(&self, index: u32) -> Option<(u64, u32)> {
        let (first, count) = self.item_rows(index).ok()?;
        Some((byte_offset(first), u32::try_from(bitmap_bytes(count)).ok()?))
    }

    /// Item `index`: its rows' bitmap bytes (see the module docs), cost [`item_cost`] of its
    /// rows. Device memory is not read.
    pub fn item<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<ItemSpec, FirmwareError> {
        let _ = memory;
        let (first, count) = self.item_rows(index)?;
        let result_length =
            u32::try_from(bitmap_bytes(count)).map_err(|_| FirmwareError::ArgumentOutOfRange)?;
        Ok(ItemSpec {
            result_offset: byte_offset(first),
            result_length,
            cost: item_cost(count),
        })
    }

    /// Runs item `index`: streams its rows of both columns through stack buffers of
    /// [`CHUNK_ROWS`] values and writes the marking bytes. A memory fault (a memory smaller
    /// than the one the command was validated against) is [`FirmwareError::MemoryFault`].
    pub fn execute<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<(), FirmwareError> {
        let (first, count) = self.item_rows(index)?;
        let mut quantities = [0_u8; CHUNK_BYTES];
        let mut discounts = [0_u8; CHUNK_BYTES];
        let mut marks = [0_u8; CHUNK_MARK_BYTES];
        let mut done = 0_u32;
        while done < count {
            let row = first
                .checked_add(done)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            let remaining = count
                .checked_sub(done)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            let length = usize::try_from(remaining)
                .map_err(|_| FirmwareError::ArgumentOutOfRange)?
                .min(CHUNK_ROWS);
            let bytes = length
                .checked_mul(VALUE_BYTES as usize)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            let quantities = quantities
                .get_mut(..bytes)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            let discounts = discounts
                .get_mut(..bytes)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            memory.read(column_address(self.quantity, row)?, quantities)?;
            memory.read(column_address(self.discount, row)?, discounts)?;
            let mark_bytes = mark_packets(self.predicate, quantities, discounts, &mut marks);
            let marks = marks
                .get(..mark_bytes)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            let address = self
                .result
                .checked_add(byte_offset(row))
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            memory.write(address, marks)?;
            let step = u32::try_from(length).map_err(|_| FirmwareError::ArgumentOutOfRange)?;
            done = done
                .checked_add(step)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
        }
        Ok(())
    }
}

/// Bytes of one column chunk buffer.
const CHUNK_BYTES: usize = CHUNK_ROWS * VALUE_BYTES as usize;

/// Bitmap bytes of one chunk.
const CHUNK_MARK_BYTES: usize = CHUNK_ROWS / ROWS_PER_PACKET as usize;

/// Offset in the bitmap of the byte holding `row` (a multiple of 8 in every call).
fn byte_offset(row: u32) -> u64 {
    u64::from(row / ROWS_PER_PACKET)
}

/// `column + 4 row`, checked.
fn column_address(column: DeviceAddress, row: u32) -> Result<DeviceAddress, FirmwareError> {
    u64::from(row)
        .checked_mul(VALUE_BYTES)
        .and_then(|offset| column.checked_add(offset))
        .ok_or(FirmwareError::ArgumentOutOfRange)
}

/// Marks the rows of one chunk, a packet (one µthread body) at a time: row `j` has the
/// little-endian `u32` values at bytes `4j..` of `quantities` and `discounts` (rows present in
/// both), its bit is bit `j % 8` of byte `j / 8`. Writes the bytes into the front of `marks`
/// and returns how many it wrote (bits past the rows are zero). Rows beyond `marks` are
/// ignored.
fn mark_packets(
    predicate: Predicate,
    quantities: &[u8],
    discounts: &[u8],
    marks: &mut [u8; CHUNK_MARK_BYTES],
) -> usize {
    let mut written = 0_usize;
    let packets = quantities
        .chunks(PACKET_BYTES as usize)
        .zip(discounts.chunks(PACKET_BYTES as usize));
    for ((quantity, discount), mark) in packets.zip(marks.iter_mut()) {
        let mut byte = 0_u8;
        let values = quantity.chunks_exact(4).zip(discount.chunks_exact(4));
        for (bit, (q, d)) in values.enumerate() {
            let (Ok(q), Ok(d)) = (<[u8; 4]>::try_from(q), <[u8; 4]>::try_from(d)) else {
                continue;
            };
            if predicate.matches(u32::from_le_bytes(q), u32::from_le_bytes(d)) {
                byte |= 1_u8.checked_shl(bit as u32).unwrap_or(0);
            }
        }
        *mark = byte;
        written = written.saturating_add(1);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    type FakeMemory = crate::testing::FakeDeviceMemory;

    const MEMORY: u64 = 1 << 16;

    const Q1_1: Predicate = Predicate {
        quantity_low: 0,
        quantity_high: 24,
        discount_low: 1,
        discount_high: 3,
    };

    fn command(
        quantity: u64,
        discount: u64,
        rows: u32,
        rows_per_item: u32,
        result: u64,
    ) -> CommandDescriptor {
        CommandDescriptor {
            kernel: KernelId::SsbFilter as u32,
            mode: 0,
            tag: 0,
            flags: 0,
            result_address: result,
            result_length: bitmap_bytes(rows),
            args: [
                quantity,
                discount,
                pack_rows(rows, rows_per_item),
                Q1_1.pack(),
            ],
        }
    }

    /// 1000 rows in items of 128: 8 items, the last of 104 rows.
    fn valid() -> CommandDescriptor {
        command(0x1000, 0x2000, 1000, 128, 0x3000)
    }

    fn decode(command: &CommandDescriptor, memory_size: u64) -> Result<SsbKernel, FirmwareError> {
        SsbKernel::decode_for_size(command, memory_size)
    }

    fn assert_rejected(command: CommandDescriptor, memory_size: u64, status: FirmwareError) {
        assert_eq!(decode(&command, memory_size), Err(status), "{command:?}");
    }

    /// Deterministic column values in the generator's domains.
    fn quantity(row: usize) -> u32 {
        ((row.wrapping_mul(2_654_435_761) >> 7) % 50 + 1) as u32
    }

    fn discount(row: usize) -> u32 {
        ((row.wrapping_mul(40_503) >> 3) % 11) as u32
    }

    fn le_bytes(values: &[u32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn predicate_packs_16_bits_per_bound_and_round_trips() {
        assert_eq!(Q1_1.pack(), 0x0003_0001_0018_0000);
        assert_eq!(Predicate::unpack(Q1_1.pack()), Q1_1);
        assert_eq!(Predicate::unpack(u64::MAX).pack(), u64::MAX);
        assert!(Q1_1.matches(24, 1) && Q1_1.matches(1, 3));
        assert!(!Q1_1.matches(25, 2) && !Q1_1.matches(10, 0) && !Q1_1.matches(10, 4));
    }

    #[test]
    fn valid_command_decodes_with_its_fields() {
        let kernel = decode(&valid(), MEMORY).unwrap();
        assert_eq!(kernel.rows(), 1000);
        assert_eq!(kernel.rows_per_item(), 128);
        assert_eq!(kernel.items(), 8);
        assert_eq!(kernel.predicate(), Q1_1);
        assert_eq!(kernel.quantity(), DeviceAddress(0x1000));
        assert_eq!(kernel.discount(), DeviceAddress(0x2000));
        assert_eq!(kernel.result_address(), DeviceAddress(0x3000));
    }

    #[test]
    fn items_cover_the_bitmap_in_whole_bytes_with_the_documented_cost() {
        let kernel = decode(&valid(), MEMORY).unwrap();
        let memory = FakeMemory::new(16);
        let mut next = 0;
        for index in 0..kernel.items() {
            let spec = kernel.item(index, &memory).unwrap();
            assert_eq!(spec.result_offset, next);
            next += u64::from(spec.result_length);
        }
        assert_eq!(next, bitmap_bytes(1000));
        assert_eq!(bitmap_bytes(1000), 125);
        let first = kernel.item(0, &memory).unwrap();
        assert_eq!(first.result_length, 16);
        // 128 rows: 16 µthread bodies of one packet each.
        assert_eq!(
            first.cost,
            PER_PACKET.times(16).plus(ItemCost::bytes(16 * 65))
        );
        assert_eq!(first.cost.instructions(), 16 * 23);
        // The last item: rows 896..1000, 104 rows, 13 bytes.
        let last = kernel.item(7, &memory).unwrap();
        assert_eq!((last.result_offset, last.result_length), (112, 13));
        assert_eq!(last.cost.bytes, 13 * 65);
        assert_eq!(
            kernel.item(8, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
        assert_eq!(
            kernel.item(u32::MAX, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
    }

    #[test]
    fn an_item_of_one_packet_is_one_m2ndp_uthread() {
        // rows_per_item 8: an item per 32-byte packet of lo_quantity, one bitmap byte each.
        let kernel = decode(&command(0x1000, 0x2000, 1000, 8, 0x3000), MEMORY).unwrap();
        assert_eq!(kernel.items(), 125);
        let memory = FakeMemory::new(16);
        let spec = kernel.item(77, &memory).unwrap();
        assert_eq!((spec.result_offset, spec.result_length), (77, 1));
        // Its cost is the µthread body, by unit: 6 scalar, 7 scalar memory, 8 vector, 2
        // vector memory; two 32-byte packets read and one byte written.
        let expected = ItemCost {
            scalar: 6,
            scalar_memory: 7,
            vector: 8,
            vector_memory: 2,
            indexed_extra_cycles: 0,
            bytes: 65,
        };
        assert_eq!(spec.cost, expected);
        // A partial packet costs a whole one.
        assert_eq!(item_cost(1), expected);
        assert_eq!(item_cost(9), expected.times(2));
        assert_eq!(item_cost(0), ItemCost::ZERO);
    }

    #[test]
    fn execute_marks_exactly_the_rows_a_plain_scan_selects() {
        let command = valid();
        let kernel = decode(&command, MEMORY).unwrap();
        let memory = FakeMemory::new(MEMORY as usize);
        let quantities: Vec<u32> = (0..1000).map(quantity).collect();
        let discounts: Vec<u32> = (0..1000).map(discount).collect();
        memory
            .write(DeviceAddress(0x1000), &le_bytes(&quantities))
            .unwrap();
        memory
            .write(DeviceAddress(0x2000), &le_bytes(&discounts))
            .unwrap();
        // Garbage where the bitmap goes: every byte must be overwritten, and the byte past it
        // left alone.
        memory.write(DeviceAddress(0x3000), &[0xFF; 126]).unwrap();
        for item in (0..kernel.items()).rev() {
            kernel.execute(item, &memory).unwrap();
        }
        let mut bitmap = [0_u8; 126];
        memory.read(DeviceAddress(0x3000), &mut bitmap).unwrap();
        assert_eq!(bitmap[125], 0xFF);
        let mut marked = 0;
        for row in 0..1000 {
            let bit = bitmap[row / 8] >> (row % 8) & 1 == 1;
            let expected = Q1_1.matches(quantities[row], discounts[row]);
            assert_eq!(bit, expected, "row {row}");
            marked += usize::from(bit);
        }
        // The test data is not degenerate.
        assert!(marked > 50 && marked < 300, "{marked}");
    }

    #[test]
    fn chunks_longer_than_the_stack_buffer_are_marked_too() {
        // One item of 1280 rows: twenty chunks of 64.
        let command = command(0x1000, 0x3000, 1280, 1280, 0x5000);
        let kernel = decode(&command, MEMORY).unwrap();
        let memory = FakeMemory::new(MEMORY as usize);
        let everything = Predicate {
            quantity_low: 0,
            quantity_high: u16::MAX,
            discount_low: 0,
            discount_high: u16::MAX,
        };
        let mut all = command;
        all.args[3] = everything.pack();
        let all = decode(&all, MEMORY).unwrap();
        all.execute(0, &memory).unwrap();
        let mut bitmap = [0_u8; 160];
        memory.read(DeviceAddress(0x5000), &mut bitmap).unwrap();
        assert!(bitmap.iter().all(|byte| *byte == 0xFF));
        kernel.execute(0, &memory).unwrap();
        memory.read(DeviceAddress(0x5000), &mut bitmap).unwrap();
        // Zero quantities and discounts: quantity 0 passes, discount 0 does not.
        assert!(bitmap.iter().all(|byte| *byte == 0));
    }

    #[test]
    fn wrong_kernel_or_reserved_flags_are_rejected() {
        let mut wrong_kernel = valid();
        wrong_kernel.kernel = KernelId::KnnDistance as u32;
        assert_rejected(wrong_kernel, MEMORY, FirmwareError::UnknownKernel);
        let mut flags = valid();
        flags.flags = 2;
        assert_rejected(flags, MEMORY, FirmwareError::MalformedDescriptor);
    }

    #[test]
    fn partial_last_packet_marks_only_its_rows() {
        // 13 rows of an everything-passes predicate: bytes 0xFF and 0x1F.
        let mut command = command(0x1000, 0x2000, 13, 8, 0x3000);
        command.args[3] = Predicate {
            quantity_low: 0,
            quantity_high: u16::MAX,
            discount_low: 0,
            discount_high: u16::MAX,
        }
        .pack();
        let kernel = decode(&command, MEMORY).unwrap();
        assert_eq!(kernel.items(), 2);
        let memory = FakeMemory::new(MEMORY as usize);
        memory.write(DeviceAddress(0x3000), &[0xAA; 3]).unwrap();
        kernel.execute(0, &memory).unwrap();
        kernel.execute(1, &memory).unwrap();
        let mut bitmap = [0_u8; 3];
        memory.read(DeviceAddress(0x3000), &mut bitmap).unwrap();
        assert_eq!(bitmap, [0xFF, 0x1F, 0xAA]);
    }

    #[test]
    fn zero_rows_or_items_not_a_multiple_of_a_packet_are_rejected() {
        for (rows, per_item) in [
            (0, 128),
            (1000, 0),
            (1000, 100),
            (1000, 65),
            (1000, 12),
            (1000, 4),
        ] {
            assert_rejected(
                command(0x1000, 0x2000, rows, per_item, 0x3000),
                MEMORY,
                FirmwareError::ArgumentOutOfRange,
            );
        }
        // One item bigger than the table is fine.
        assert!(decode(&command(0x1000, 0x2000, 1000, 1 << 20, 0x3000), MEMORY).is_ok());
    }

    #[test]
    fn result_length_other_than_the_bitmap_is_rejected() {
        for length in [0, 120, 124, 126, 128, 1000] {
            let mut command = valid();
            command.result_length = length;
            assert_rejected(command, MEMORY, FirmwareError::ArgumentOutOfRange);
        }
    }

    #[test]
    fn ranges_beyond_device_memory_or_overflowing_are_rejected() {
        // Columns of 4000 bytes, bitmap of 125, each ending 4 or 5 bytes beyond memory.
        assert_rejected(
            command(MEMORY - 3996, 0x2000, 1000, 128, 0x3000),
            MEMORY,
            FirmwareError::ArgumentOutOfRange,
        );
        assert_rejected(
            command(0x1000, MEMORY - 3996, 1000, 128, 0x3000),
            MEMORY,
            FirmwareError::ArgumentOutOfRange,
        );
        assert_rejected(
            command(0x1000, 0x2000, 1000, 128, MEMORY - 120),
            MEMORY,
            FirmwareError::ArgumentOutOfRange,
        );
        // Exactly at the end is fine.
        assert!(decode(
            &command(MEMORY - 4000, MEMORY - 4000, 1000, 128, MEMORY - 4125),
            MEMORY
        )
        .is_ok());
        assert!(decode(&command(0x1000, 0x2000, 1000, 128, MEMORY - 125), MEMORY).is_ok());
        for address in [u64::MAX - 3, u64::MAX - 3999] {
            assert_rejected(
                command(address, 0x2000, 1000, 128, 0x3000),
                u64::MAX,
                FirmwareError::ArgumentOutOfRange,
            );
            assert_rejected(
                command(0x1000, address, 1000, 128, 0x3000),
                u64::MAX,
                FirmwareError::ArgumentOutOfRange,
            );
        }
        assert_rejected(
            command(0x1000, 0x2000, 1000, 128, u64::MAX - 7),
            u64::MAX,
            FirmwareError::ArgumentOutOfRange,
        );
        // The largest table: 4 * u32::MAX bytes per column does not fit a small memory.
        let mut huge = command(0, 0, u32::MAX, 64, 0);
        huge.result_length = bitmap_bytes(u32::MAX);
        assert_rejected(huge, 1 << 33, FirmwareError::ArgumentOutOfRange);
        assert_rejected(valid(), 0, FirmwareError::ArgumentOutOfRange);
    }

    #[test]
    fn unaligned_columns_are_rejected_and_any_result_address_is_accepted() {
        for (quantity, discount) in [(0x1001, 0x2000), (0x1000, 0x2002)] {
            assert_rejected(
                command(quantity, discount, 1000, 128, 0x3000),
                MEMORY,
                FirmwareError::ArgumentOutOfRange,
            );
        }
        assert!(decode(&command(0x1004, 0x2008, 1000, 128, 0x3003), MEMORY).is_ok());
    }

    #[test]
    fn result_overlapping_a_column_is_rejected() {
        assert_rejected(
            command(0x1000, 0x2000, 1000, 128, 0x1000 + 3992),
            MEMORY,
            FirmwareError::ArgumentOutOfRange,
        );
        assert_rejected(
            command(0x1000, 0x2000, 1000, 128, 0x2000 - 120),
            MEMORY,
            FirmwareError::ArgumentOutOfRange,
        );
        // Touching is fine; the columns may overlap each other.
        assert!(decode(&command(0x1000, 0x1000, 1000, 128, 0x1000 + 4000), MEMORY).is_ok());
    }

    #[test]
    fn execute_on_a_smaller_memory_than_validated_reports_a_fault() {
        let kernel = decode(&valid(), MEMORY).unwrap();
        let small = FakeMemory::new(0x1800);
        assert!(matches!(
            kernel.execute(0, &small),
            Err(FirmwareError::MemoryFault(_))
        ));
        assert_eq!(
            kernel.execute(8, &small),
            Err(FirmwareError::ArgumentOutOfRange)
        );
    }

    proptest! {
        #[test]
        fn decode_of_arbitrary_commands_never_panics(
            kernel in prop_oneof![Just(4_u32), any::<u32>()],
            flags in prop_oneof![Just(0_u32), any::<u32>()],
            result_address in any::<u64>(),
            result_length in any::<u64>(),
            args in any::<[u64; 4]>(),
            memory_size in any::<u64>(),
        ) {
            let command = CommandDescriptor { kernel, mode: 0, tag: 0, flags, result_address, result_length, args };
            if let Ok(kernel) = decode(&command, memory_size) {
                prop_assert_eq!(bitmap_bytes(kernel.rows()), command.result_length);
                let memory = FakeMemory::new(0);
                let _ = kernel.item(0, &memory);
                let _ = kernel.item(u32::MAX, &memory);
            }
        }

        /// Small, mostly plausible commands against a real 8 KiB memory: whatever decodes
        /// runs every item without panicking, and the items tile the result exactly.
        #[test]
        fn plausible_commands_decode_and_execute_without_panicking(
            quantity in prop_oneof![(0_u64..0x900).prop_map(|a| a * 4), 0_u64..0x2400],
            discount in prop_oneof![(0_u64..0x900).prop_map(|a| a * 4), 0_u64..0x2400],
            result in 0_u64..0x2400,
            rows in 0_u32..1000,
            rows_per_item in prop_oneof![(0_u32..40).prop_map(|n| n * 8), 0_u32..5000, Just(u32::MAX - 7)],
            bounds in any::<u64>(),
            length_delta in prop_oneof![Just(0_i64), -9_i64..9],
            memory_size in prop_oneof![Just(0x2000_u64), any::<u64>()],
        ) {
            let mut command = command(quantity, discount, rows, rows_per_item, result);
            command.args[3] = bounds;
            command.result_length = command.result_length.wrapping_add_signed(length_delta);
            let memory = FakeMemory::new(0x2000);
            if let Ok(kernel) = decode(&command, memory_size) {
                let mut next = 0;
                for item in 0..kernel.items() {
                    let spec = kernel.item(item, &memory).unwrap();
                    prop_assert_eq!(kernel.result_range(item), Some((spec.result_offset, spec.result_length)));
                    prop_assert_eq!(spec.result_offset, next);
                    next += u64::from(spec.result_length);
                    let outcome = kernel.execute(item, &memory);
                    if memory_size <= 0x2000 {
                        prop_assert_eq!(outcome, Ok(()));
                    } else {
                        prop_assert!(outcome == Ok(()) || matches!(outcome, Err(FirmwareError::MemoryFault(_))));
                    }
                }
                prop_assert_eq!(next, command.result_length);
                prop_assert_eq!(kernel.execute(kernel.items(), &memory), Err(FirmwareError::ArgumentOutOfRange));
                prop_assert_eq!(kernel.result_range(kernel.items()), None);
            }
        }
    }

    /// The stack figure of `crate::hal` for SSB (see the OPT kernel's twin of this test).
    #[test]
    fn stack_high_water_of_every_ssb_item_fits_the_uthread_stack() {
        let memory = FakeMemory::new(MEMORY as usize);
        let kernel = crate::kernels::Kernel::Ssb(SsbKernel::decode(&valid(), &memory).unwrap());
        let probe = crate::testing::StackProbe::new(&memory);
        let deepest = probe.high_water(&kernel, 0..kernel.items());
        std::println!("stack high-water, ssb: {deepest} bytes");
        assert!(deepest > 0 && deepest <= crate::hal::UTHREAD_STACK_BYTES);
    }
}
