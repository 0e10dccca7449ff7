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
//! | `result_address`, `result_length` | the result space: the bitmap, exactly [`bitmap_bytes`]`(rows)` bytes, 8-byte aligned |
//! | `flags` | reserved, must be zero |
//!
//! The columns hold the SSB schema's 4-byte integers, uncompressed, as a plain column store
//! keeps them. `mode` and `tag` belong to the command processor and are not looked at here.
//!
//! # Result: a row bitmap
//!
//! Row `r` is marked when `quantity_low <= lo_quantity[r] <= quantity_high` and
//! `discount_low <= lo_discount[r] <= discount_high` (the bounds zero-extended to 32 bits).
//! Its bit is bit `r % 64` of the little-endian `u64` word `r / 64`, so byte `r / 8` holds
//! rows `8 (r / 8) ..` with row `r` at bit `r % 8`. The last word's bits past `rows` are
//! zero. The result is `ceil(rows / 64) * 8` bytes.
//!
//! # Work items
//!
//! Item `i` covers rows `i * rows_per_item ..` (at most `rows_per_item` of them; the last
//! item takes the remainder) and writes their words: result offset `i * rows_per_item / 8`,
//! length `ceil(rows_in_item / 64) * 8`. `rows_per_item` is a multiple of 64 so every item
//! writes whole words and items never share one.
//!
//! # Validation (everything a hostile host can send)
//!
//! - `kernel` is not the SSB filter: [`Status::UnknownKernel`]; `flags != 0`:
//!   [`Status::MalformedDescriptor`].
//! - `rows` or `rows_per_item` zero, `rows_per_item` not a multiple of 64,
//!   `result_length` different from [`bitmap_bytes`]`(rows)`, a column address not 4-byte
//!   aligned or a result address not 8-byte aligned, any of the three byte ranges
//!   overflowing or ending beyond device memory, or the result overlapping a column:
//!   [`Status::ArgumentOutOfRange`]. The columns may overlap each other (they are only read).
//!   Bounds with `low > high` are accepted: that predicate marks nothing.
//!
//! Every size is computed with checked arithmetic; nothing here can panic.
//!
//! # Cost model
//!
//! The modelled µthread has a 512-bit vector datapath: 16 lanes of 32 bits per cycle. It
//! processes one bitmap word of 64 rows with `vsetvli e32, m4` (64 lanes in a group of four
//! registers), so each vector instruction takes four datapath beats; an operation below is
//! one beat (one issue cycle of the unit), which is what the emulator's
//! `operations x µthreads` cycles charges.

use crate::hal::DeviceMemory;
use crate::kernels::ranges::{checked_range, overlaps};
use crate::kernels::{ItemCost, ItemSpec};
use shared_abi::{CommandDescriptor, DeviceAddress, KernelId, Status};

/// Rows per bitmap word: one 64-bit mask register, from one `e32, m4` vector group.
pub const ROWS_PER_WORD: u32 = 64;

/// Bytes of one bitmap word.
pub const WORD_BYTES: u64 = 8;

/// Bytes of one column value (`u32`).
pub const VALUE_BYTES: u64 = 4;

/// Rows the kernel reads per chunk into its stack buffers (1 KiB per column).
pub const CHUNK_ROWS: usize = 256;

/// Bytes of device memory each row costs to read: one value of each filter column.
pub const COLUMN_BYTES_PER_ROW: u64 = 2 * VALUE_BYTES;

/// Datapath beats per word of 64 rows: seven `e32, m4` instructions at four beats each,
/// `vle32.v` of the quantities and of the discounts (2), each inclusive range test as one
/// unsigned comparison `x - low <= high - low` (`vsub.vx` then `vmsleu.vx`, 2 per column,
/// 4) and `vmand.mm` of the two masks (1): 28; plus `vsm.v` storing the 64-bit mask word
/// (1). The bounds live in scalar registers, set up once per item.
pub const OPERATIONS_PER_WORD: u64 = 29;

/// Words per iteration of the unrolled loop (256 rows).
pub const WORDS_PER_LOOP: u64 = 4;

/// Loop control per unrolled iteration: bumping the two column pointers and the bitmap
/// pointer (3), decrementing the remaining count and the compare-and-branch (2).
pub const OPERATIONS_PER_LOOP: u64 = 5;

/// Fixed instructions per item: the item's first row and row count (a multiply, a subtract
/// and a minimum: 3), the two column addresses and the result address (3), unpacking the four
/// bounds from the argument and forming `high - low` for each column (8), `vsetvli` (1), the
/// tail word's `vsetvli` with the remaining count and the zeroing of the word's unused bits
/// (3), loop set-up (2), return (1): 21.
pub const FIXED_OPERATIONS: u64 = 21;

/// Alignment of the column addresses (`u32`).
pub const COLUMN_ALIGNMENT: u64 = 4;

/// Alignment of the result address: the bitmap's `u64` words.
pub const RESULT_ALIGNMENT: u64 = 8;

/// `args[2]` for a table of `rows` rows filtered in items of `rows_per_item` rows.
pub const fn pack_rows(rows: u32, rows_per_item: u32) -> u64 {
    (rows as u64) | ((rows_per_item as u64) << 32)
}

/// Bytes of the bitmap of `rows` rows: `ceil(rows / 64) * 8`.
pub const fn bitmap_bytes(rows: u32) -> u64 {
    (rows as u64)
        .div_ceil(ROWS_PER_WORD as u64)
        .saturating_mul(WORD_BYTES)
}

/// The inclusive bounds of a query's predicate on the two filter columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Predicate {
    /// Smallest `lo_quantity` that passes.
    pub quantity_low: u16,
    /// Largest `lo_quantity` that passes.
    pub quantity_high: u16,
    /// Smallest `lo_discount` that passes.
    pub discount_low: u16,
    /// Largest `lo_discount` that passes.
    pub discount_high: u16,
}

impl Predicate {
    /// `args[3]`: bits 0..16 `quantity_low`, 16..32 `quantity_high`, 32..48 `discount_low`,
    /// 48..64 `discount_high`.
    pub const fn pack(self) -> u64 {
        (self.quantity_low as u64)
            | ((self.quantity_high as u64) << 16)
            | ((self.discount_low as u64) << 32)
            | ((self.discount_high as u64) << 48)
    }

    /// The predicate packed in `argument` (every value is one).
    pub fn unpack(argument: u64) -> Predicate {
        let [a, b, c, d, e, f, g, h] = argument.to_le_bytes();
        Predicate {
            quantity_low: u16::from_le_bytes([a, b]),
            quantity_high: u16::from_le_bytes([c, d]),
            discount_low: u16::from_le_bytes([e, f]),
            discount_high: u16::from_le_bytes([g, h]),
        }
    }

    /// Whether a row with these values is marked.
    pub fn matches(self, quantity: u32, discount: u32) -> bool {
        (u32::from(self.quantity_low)..=u32::from(self.quantity_high)).contains(&quantity)
            && (u32::from(self.discount_low)..=u32::from(self.discount_high)).contains(&discount)
    }
}

/// The modelled cost of an item of `rows` rows: [`OPERATIONS_PER_WORD`] per word of 64 rows
/// (a partial last word costs a full one), [`OPERATIONS_PER_LOOP`] per [`WORDS_PER_LOOP`]
/// words, plus [`FIXED_OPERATIONS`]; the bytes are the two columns' `8 * rows` bytes read
/// plus the bitmap words written. Saturates instead of overflowing.
pub fn item_cost(rows: u32) -> ItemCost {
    let words = u64::from(rows).div_ceil(u64::from(ROWS_PER_WORD));
    let loops = words.div_ceil(WORDS_PER_LOOP);
    let operations = words
        .saturating_mul(OPERATIONS_PER_WORD)
        .saturating_add(loops.saturating_mul(OPERATIONS_PER_LOOP))
        .saturating_add(FIXED_OPERATIONS);
    let bytes = u64::from(rows)
        .saturating_mul(COLUMN_BYTES_PER_ROW)
        .saturating_add(words.saturating_mul(WORD_BYTES));
    // Interim: every instruction counted as scalar until this kernel's cost is split by
    // functional unit.
    ItemCost {
        scalar: operations,
        bytes,
        ..ItemCost::ZERO
    }
}

/// A decoded, validated SSB filter launch.
///
/// # Invariants
///
/// `rows > 0`, `rows_per_item` is a positive multiple of 64, `items == ceil(rows /
/// rows_per_item)`, and both columns (`4 * rows` bytes each, 4-byte aligned) and the result
/// (`bitmap_bytes(rows)` bytes, 8-byte aligned) lie inside the device memory the command was
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
    ) -> Result<Self, Status> {
        Self::decode_for_size(command, memory.size())
    }

    /// [`SsbKernel::decode`] against a device memory of `memory_size` bytes.
    pub fn decode_for_size(command: &CommandDescriptor, memory_size: u64) -> Result<Self, Status> {
        if command.kernel != KernelId::SsbFilter as u32 {
            return Err(Status::UnknownKernel);
        }
        if command.flags != 0 {
            return Err(Status::MalformedDescriptor);
        }
        let [quantity, discount, shape, bounds] = command.args;
        let rows =
            u32::try_from(shape & u64::from(u32::MAX)).map_err(|_| Status::ArgumentOutOfRange)?;
        let rows_per_item = u32::try_from(shape >> 32).map_err(|_| Status::ArgumentOutOfRange)?;
        if rows == 0 || rows_per_item == 0 || rows_per_item.checked_rem(ROWS_PER_WORD) != Some(0) {
            return Err(Status::ArgumentOutOfRange);
        }
        let predicate = Predicate::unpack(bounds);
        let items = rows.div_ceil(rows_per_item);
        let result_bytes = bitmap_bytes(rows);
        if command.result_length != result_bytes {
            return Err(Status::ArgumentOutOfRange);
        }
        let column_bytes = u64::from(rows)
            .checked_mul(VALUE_BYTES)
            .ok_or(Status::ArgumentOutOfRange)?;
        let quantity_range = checked_range(quantity, column_bytes, COLUMN_ALIGNMENT, memory_size)?;
        let discount_range = checked_range(discount, column_bytes, COLUMN_ALIGNMENT, memory_size)?;
        let result_range = checked_range(
            command.result_address,
            result_bytes,
            RESULT_ALIGNMENT,
            memory_size,
        )?;
        if overlaps(result_range, quantity_range) || overlaps(result_range, discount_range) {
            return Err(Status::ArgumentOutOfRange);
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
    fn item_rows(&self, index: u32) -> Result<(u32, u32), Status> {
        if index >= self.items {
            return Err(Status::ArgumentOutOfRange);
        }
        let first = index
            .checked_mul(self.rows_per_item)
            .ok_or(Status::ArgumentOutOfRange)?;
        let count = self
            .rows
            .checked_sub(first)
            .ok_or(Status::ArgumentOutOfRange)?
            .min(self.rows_per_item);
        Ok((first, count))
    }

    /// Item `index`: its rows' words (see the module docs), cost [`item_cost`] of its rows.
    /// Device memory is not read.
    pub fn item<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<ItemSpec, Status> {
        let _ = memory;
        let (first, count) = self.item_rows(index)?;
        let result_length =
            u32::try_from(bitmap_bytes(count)).map_err(|_| Status::ArgumentOutOfRange)?;
        Ok(ItemSpec {
            result_offset: word_offset(first),
            result_length,
            cost: item_cost(count),
        })
    }

    /// Runs item `index`: streams its rows of both columns through stack buffers of
    /// [`CHUNK_ROWS`] values and writes the marking words. A memory fault (a memory smaller
    /// than the one the command was validated against) is [`Status::DeviceMemoryFault`].
    pub fn execute<M: DeviceMemory>(&self, index: u32, memory: &mut M) -> Result<(), Status> {
        let (first, count) = self.item_rows(index)?;
        let mut quantities = [0_u8; CHUNK_BYTES];
        let mut discounts = [0_u8; CHUNK_BYTES];
        let mut words = [0_u8; CHUNK_WORD_BYTES];
        let mut done = 0_u32;
        while done < count {
            let row = first.checked_add(done).ok_or(Status::ArgumentOutOfRange)?;
            let remaining = count.checked_sub(done).ok_or(Status::ArgumentOutOfRange)?;
            let length = usize::try_from(remaining)
                .map_err(|_| Status::ArgumentOutOfRange)?
                .min(CHUNK_ROWS);
            let bytes = length
                .checked_mul(VALUE_BYTES as usize)
                .ok_or(Status::ArgumentOutOfRange)?;
            let quantities = quantities
                .get_mut(..bytes)
                .ok_or(Status::ArgumentOutOfRange)?;
            let discounts = discounts
                .get_mut(..bytes)
                .ok_or(Status::ArgumentOutOfRange)?;
            memory.read(column_address(self.quantity, row)?, quantities)?;
            memory.read(column_address(self.discount, row)?, discounts)?;
            let word_bytes = mark_words(self.predicate, quantities, discounts, &mut words);
            let words = words.get(..word_bytes).ok_or(Status::ArgumentOutOfRange)?;
            let address = self
                .result
                .checked_add(word_offset(row))
                .ok_or(Status::ArgumentOutOfRange)?;
            memory.write(address, words)?;
            let step = u32::try_from(length).map_err(|_| Status::ArgumentOutOfRange)?;
            done = done.checked_add(step).ok_or(Status::ArgumentOutOfRange)?;
        }
        Ok(())
    }
}

/// Bytes of one column chunk buffer.
const CHUNK_BYTES: usize = CHUNK_ROWS * VALUE_BYTES as usize;

/// Column bytes of the rows of one bitmap word.
const GROUP_BYTES: usize = ROWS_PER_WORD as usize * VALUE_BYTES as usize;

/// Bytes of the bitmap words of one chunk.
const CHUNK_WORD_BYTES: usize = CHUNK_ROWS / 8;

/// Offset in the bitmap of the word holding `row` (a multiple of 64 in every call).
fn word_offset(row: u32) -> u64 {
    u64::from(row / ROWS_PER_WORD).saturating_mul(WORD_BYTES)
}

/// `column + 4 row`, checked.
fn column_address(column: DeviceAddress, row: u32) -> Result<DeviceAddress, Status> {
    u64::from(row)
        .checked_mul(VALUE_BYTES)
        .and_then(|offset| column.checked_add(offset))
        .ok_or(Status::ArgumentOutOfRange)
}

/// Marks the rows of one chunk: row `j` has the little-endian `u32` values at bytes `4j..`
/// of `quantities` and `discounts` (rows present in both), its bit is bit `j % 64` of word
/// `j / 64`. Writes the little-endian words into the front of `words` and returns how many
/// bytes it wrote (whole words; bits past the rows are zero). Rows beyond `words` are ignored.
fn mark_words(
    predicate: Predicate,
    quantities: &[u8],
    discounts: &[u8],
    words: &mut [u8; CHUNK_WORD_BYTES],
) -> usize {
    let mut written = 0_usize;
    let groups = quantities
        .chunks(GROUP_BYTES)
        .zip(discounts.chunks(GROUP_BYTES));
    for ((quantity, discount), slot) in groups.zip(words.chunks_exact_mut(WORD_BYTES as usize)) {
        let mut word = 0_u64;
        let values = quantity.chunks_exact(4).zip(discount.chunks_exact(4));
        for (bit, (q, d)) in values.enumerate() {
            let (Ok(q), Ok(d)) = (<[u8; 4]>::try_from(q), <[u8; 4]>::try_from(d)) else {
                continue;
            };
            if predicate.matches(u32::from_le_bytes(q), u32::from_le_bytes(d)) {
                word |= 1_u64.checked_shl(bit as u32).unwrap_or(0);
            }
        }
        slot.copy_from_slice(&word.to_le_bytes());
        written = written.saturating_add(WORD_BYTES as usize);
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

    fn decode(command: &CommandDescriptor, memory_size: u64) -> Result<SsbKernel, Status> {
        SsbKernel::decode_for_size(command, memory_size)
    }

    fn assert_rejected(command: CommandDescriptor, memory_size: u64, status: Status) {
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
    fn items_cover_the_bitmap_in_whole_words_with_the_documented_cost() {
        let kernel = decode(&valid(), MEMORY).unwrap();
        let memory = FakeMemory::new(16);
        let mut next = 0;
        for index in 0..kernel.items() {
            let spec = kernel.item(index, &memory).unwrap();
            assert_eq!(spec.result_offset, next);
            next += u64::from(spec.result_length);
        }
        assert_eq!(next, bitmap_bytes(1000));
        assert_eq!(bitmap_bytes(1000), 128);
        let first = kernel.item(0, &memory).unwrap();
        assert_eq!(first.result_length, 16);
        // 128 rows: 2 groups, 1 loop iteration.
        assert_eq!(
            first.cost.instructions(),
            2 * OPERATIONS_PER_WORD + OPERATIONS_PER_LOOP + FIXED_OPERATIONS
        );
        assert_eq!(first.cost.bytes, 8 * 128 + 16);
        // The last item: rows 896..1000, 104 rows, 2 words.
        let last = kernel.item(7, &memory).unwrap();
        assert_eq!((last.result_offset, last.result_length), (112, 16));
        assert_eq!(last.cost.bytes, 8 * 104 + 16);
        assert_eq!(kernel.item(8, &memory), Err(Status::ArgumentOutOfRange));
        assert_eq!(
            kernel.item(u32::MAX, &memory),
            Err(Status::ArgumentOutOfRange)
        );
    }

    #[test]
    fn item_cost_of_a_paper_scale_item() {
        let cost = item_cost(4096);
        assert_eq!(cost.instructions(), 64 * 29 + 16 * 5 + 21);
        assert_eq!(cost.bytes, 4096 * 8 + 512);
    }

    #[test]
    fn execute_marks_exactly_the_rows_a_plain_scan_selects() {
        let command = valid();
        let kernel = decode(&command, MEMORY).unwrap();
        let mut memory = FakeMemory::new(MEMORY as usize);
        let quantities: Vec<u32> = (0..1000).map(quantity).collect();
        let discounts: Vec<u32> = (0..1000).map(discount).collect();
        memory
            .write(DeviceAddress(0x1000), &le_bytes(&quantities))
            .unwrap();
        memory
            .write(DeviceAddress(0x2000), &le_bytes(&discounts))
            .unwrap();
        // Garbage where the bitmap goes: every byte must be overwritten.
        memory.write(DeviceAddress(0x3000), &[0xFF; 128]).unwrap();
        for item in (0..kernel.items()).rev() {
            kernel.execute(item, &mut memory).unwrap();
        }
        let mut bitmap = [0_u8; 128];
        memory.read(DeviceAddress(0x3000), &mut bitmap).unwrap();
        let mut marked = 0;
        for row in 0..1024 {
            let bit = bitmap[row / 8] >> (row % 8) & 1 == 1;
            let expected = row < 1000 && Q1_1.matches(quantities[row], discounts[row]);
            assert_eq!(bit, expected, "row {row}");
            marked += usize::from(bit);
        }
        // The test data is not degenerate.
        assert!(marked > 50 && marked < 300, "{marked}");
    }

    #[test]
    fn chunks_longer_than_the_stack_buffer_are_marked_too() {
        // One item of 1280 rows: two and a half chunks of 512.
        let command = command(0x1000, 0x3000, 1280, 1280, 0x5000);
        let kernel = decode(&command, MEMORY).unwrap();
        let mut memory = FakeMemory::new(MEMORY as usize);
        let everything = Predicate {
            quantity_low: 0,
            quantity_high: u16::MAX,
            discount_low: 0,
            discount_high: u16::MAX,
        };
        let mut all = command;
        all.args[3] = everything.pack();
        let all = decode(&all, MEMORY).unwrap();
        all.execute(0, &mut memory).unwrap();
        let mut bitmap = [0_u8; 160];
        memory.read(DeviceAddress(0x5000), &mut bitmap).unwrap();
        assert!(bitmap.iter().all(|byte| *byte == 0xFF));
        kernel.execute(0, &mut memory).unwrap();
        memory.read(DeviceAddress(0x5000), &mut bitmap).unwrap();
        // Zero quantities and discounts: quantity 0 passes, discount 0 does not.
        assert!(bitmap.iter().all(|byte| *byte == 0));
    }

    #[test]
    fn wrong_kernel_or_reserved_flags_are_rejected() {
        let mut wrong_kernel = valid();
        wrong_kernel.kernel = KernelId::KnnDistance as u32;
        assert_rejected(wrong_kernel, MEMORY, Status::UnknownKernel);
        let mut flags = valid();
        flags.flags = 2;
        assert_rejected(flags, MEMORY, Status::MalformedDescriptor);
    }

    #[test]
    fn zero_rows_or_items_not_a_multiple_of_64_are_rejected() {
        for (rows, per_item) in [(0, 128), (1000, 0), (1000, 100), (1000, 65), (1000, 32)] {
            assert_rejected(
                command(0x1000, 0x2000, rows, per_item, 0x3000),
                MEMORY,
                Status::ArgumentOutOfRange,
            );
        }
        // One item bigger than the table is fine.
        assert!(decode(&command(0x1000, 0x2000, 1000, 1 << 20, 0x3000), MEMORY).is_ok());
    }

    #[test]
    fn result_length_other_than_the_bitmap_is_rejected() {
        for length in [0, 120, 125, 127, 129, 136, 1000] {
            let mut command = valid();
            command.result_length = length;
            assert_rejected(command, MEMORY, Status::ArgumentOutOfRange);
        }
    }

    #[test]
    fn ranges_beyond_device_memory_or_overflowing_are_rejected() {
        // Columns of 4000 bytes, bitmap of 128, each ending 4 or 8 bytes beyond memory.
        assert_rejected(
            command(MEMORY - 3996, 0x2000, 1000, 128, 0x3000),
            MEMORY,
            Status::ArgumentOutOfRange,
        );
        assert_rejected(
            command(0x1000, MEMORY - 3996, 1000, 128, 0x3000),
            MEMORY,
            Status::ArgumentOutOfRange,
        );
        assert_rejected(
            command(0x1000, 0x2000, 1000, 128, MEMORY - 120),
            MEMORY,
            Status::ArgumentOutOfRange,
        );
        // Exactly at the end is fine.
        assert!(decode(
            &command(MEMORY - 4000, MEMORY - 4000, 1000, 128, MEMORY - 4128),
            MEMORY
        )
        .is_ok());
        for address in [u64::MAX - 3, u64::MAX - 3999] {
            assert_rejected(
                command(address, 0x2000, 1000, 128, 0x3000),
                u64::MAX,
                Status::ArgumentOutOfRange,
            );
            assert_rejected(
                command(0x1000, address, 1000, 128, 0x3000),
                u64::MAX,
                Status::ArgumentOutOfRange,
            );
        }
        assert_rejected(
            command(0x1000, 0x2000, 1000, 128, u64::MAX - 7),
            u64::MAX,
            Status::ArgumentOutOfRange,
        );
        // The largest table: 4 * u32::MAX bytes per column does not fit a small memory.
        let mut huge = command(0, 0, u32::MAX, 64, 0);
        huge.result_length = bitmap_bytes(u32::MAX);
        assert_rejected(huge, 1 << 33, Status::ArgumentOutOfRange);
        assert_rejected(valid(), 0, Status::ArgumentOutOfRange);
    }

    #[test]
    fn unaligned_addresses_are_rejected() {
        for (quantity, discount, result) in [
            (0x1001, 0x2000, 0x3000),
            (0x1000, 0x2002, 0x3000),
            (0x1000, 0x2000, 0x3004),
        ] {
            assert_rejected(
                command(quantity, discount, 1000, 128, result),
                MEMORY,
                Status::ArgumentOutOfRange,
            );
        }
        assert!(decode(&command(0x1004, 0x2008, 1000, 128, 0x3008), MEMORY).is_ok());
    }

    #[test]
    fn result_overlapping_a_column_is_rejected() {
        assert_rejected(
            command(0x1000, 0x2000, 1000, 128, 0x1000 + 3992),
            MEMORY,
            Status::ArgumentOutOfRange,
        );
        assert_rejected(
            command(0x1000, 0x2000, 1000, 128, 0x2000 - 120),
            MEMORY,
            Status::ArgumentOutOfRange,
        );
        // Touching is fine; the columns may overlap each other.
        assert!(decode(&command(0x1000, 0x1000, 1000, 128, 0x1000 + 4000), MEMORY).is_ok());
    }

    #[test]
    fn execute_on_a_smaller_memory_than_validated_reports_a_fault() {
        let kernel = decode(&valid(), MEMORY).unwrap();
        let mut small = FakeMemory::new(0x1800);
        assert_eq!(
            kernel.execute(0, &mut small),
            Err(Status::DeviceMemoryFault)
        );
        assert_eq!(
            kernel.execute(8, &mut small),
            Err(Status::ArgumentOutOfRange)
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
            result in prop_oneof![(0_u64..0x480).prop_map(|a| a * 8), 0_u64..0x2400],
            rows in 0_u32..1000,
            rows_per_item in prop_oneof![(0_u32..40).prop_map(|n| n * 64), 0_u32..5000, Just(u32::MAX - 63)],
            bounds in any::<u64>(),
            length_delta in prop_oneof![Just(0_i64), -9_i64..9],
            memory_size in prop_oneof![Just(0x2000_u64), any::<u64>()],
        ) {
            let mut command = command(quantity, discount, rows, rows_per_item, result);
            command.args[3] = bounds;
            command.result_length = command.result_length.wrapping_add_signed(length_delta);
            let mut memory = FakeMemory::new(0x2000);
            if let Ok(kernel) = decode(&command, memory_size) {
                let mut next = 0;
                for item in 0..kernel.items() {
                    let spec = kernel.item(item, &memory).unwrap();
                    prop_assert_eq!(spec.result_offset, next);
                    next += u64::from(spec.result_length);
                    let outcome = kernel.execute(item, &mut memory);
                    if memory_size <= 0x2000 {
                        prop_assert_eq!(outcome, Ok(()));
                    } else {
                        prop_assert!(outcome == Ok(()) || outcome == Err(Status::DeviceMemoryFault));
                    }
                }
                prop_assert_eq!(next, command.result_length);
                prop_assert_eq!(kernel.execute(kernel.items(), &mut memory), Err(Status::ArgumentOutOfRange));
            }
        }
    }
}
