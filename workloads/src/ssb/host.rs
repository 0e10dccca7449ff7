//! SSB host tasks: the join of the marked lineorder rows with DATE and the revenue aggregate.
//!
//! A task receives a range of the bitmap, reads it as little-endian `u64` words (the last task's
//! range may end in a partial word, which it zero-extends) and walks their set bits. For each
//! marked row it loads `lo_orderdate` from the host's own copy of the column, finds the DATE
//! row through [`DateIndex`] (a dense array indexed by `datekey - 19920101`: the join), and
//! tests the query's date predicate (`d_year = 1993` or `d_yearmonthnum = 199401`). A row
//! that passes is *selected*: the task adds `lo_extendedprice x lo_discount` to its own
//! partial revenue. The launch's final step adds the partials.
//!
//! # Cost model (host µthread instructions)
//!
//! A task costs [`TASK_FIXED_OPERATIONS`] + words x [`OPERATIONS_PER_WORD`] + marked rows x
//! [`OPERATIONS_PER_MARKED_ROW`] + selected rows x [`OPERATIONS_PER_SELECTED_ROW`]
//! instructions. Its memory bytes are [`CACHE_LINE_BYTES`] per distinct cache line it touches
//! in the host's lineorder columns: `lo_orderdate` (4 bytes, 16 rows per line) of every marked
//! row, `lo_extendedprice` and `lo_discount` (4 bytes each, 16 rows per line) of every
//! selected row; each column starts on a line boundary (the host's tables hold the schema's
//! 4-byte integers, like the device's). The DATE table (2,557
//! rows of 12 bytes) and the dense index (61,131 `u16`, 120 KiB) stay in each core's L2 and
//! are not charged; nor is the bitmap, which the runtime charges as the task's payload.

use host_runtime::app::HostCost;

use super::data::{DateRow, FIRST_DATEKEY, LAST_DATEKEY};

/// Fixed instructions per task: call and return, the first row and word count from the
/// task's range (4), clearing the three partial counters (3), storing them (3) and publishing
/// the partial (2): about 20.
pub const TASK_FIXED_OPERATIONS: u64 = 20;

/// Instructions per bitmap word: load the word (1), `popcnt` and add it to the marked count
/// (2), test for zero and branch past an empty word (2), advance the row base by 64 (1), the
/// loop's compare-and-branch (1).
pub const OPERATIONS_PER_WORD: u64 = 7;

/// Instructions per marked row: the bit walk (`tzcnt`, row = base + bit, `blsr` clearing the
/// bit, branch while the word is not zero: 4), load `lo_orderdate` (1), the join probe
/// (subtract the first datekey, the bounds compare-and-branch, load the DATE row number from
/// the index: 4), load the DATE row's `d_year` or `d_yearmonthnum` (scaled address and load:
/// 2), compare with the query's constant and branch (2).
pub const OPERATIONS_PER_MARKED_ROW: u64 = 13;

/// Instructions per selected row: load `lo_extendedprice` and `lo_discount` (2), multiply
/// (1), add to the revenue (1), count the row (1).
pub const OPERATIONS_PER_SELECTED_ROW: u64 = 5;

/// Bytes of one host cache line.
pub const CACHE_LINE_BYTES: u64 = 64;

/// Rows of a 4-byte column per cache line.
pub const ROWS_PER_LINE: u64 = CACHE_LINE_BYTES / 4;

/// The join index: DATE row number by `datekey - FIRST_DATEKEY`, [`DateIndex::NONE`] where
/// no DATE row has that key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DateIndex {
    rows: Vec<u16>,
}

impl DateIndex {
    /// No DATE row.
    pub const NONE: u16 = u16::MAX;

    /// The index over `table` (keys outside 1992-01-01 ..= 1998-12-31 are not indexed).
    pub fn new(table: &[DateRow]) -> DateIndex {
        let span = (LAST_DATEKEY - FIRST_DATEKEY + 1) as usize;
        let mut rows = vec![Self::NONE; span];
        for (number, row) in table.iter().enumerate() {
            let slot = row
                .datekey
                .checked_sub(FIRST_DATEKEY)
                .and_then(|offset| rows.get_mut(offset as usize));
            if let (Some(slot), Ok(number)) = (slot, u16::try_from(number)) {
                *slot = number;
            }
        }
        DateIndex { rows }
    }

    /// The DATE row number of `datekey`.
    pub fn lookup(&self, datekey: u32) -> Option<usize> {
        let offset = datekey.checked_sub(FIRST_DATEKEY)?;
        let number = *self.rows.get(offset as usize)?;
        (number != Self::NONE).then_some(usize::from(number))
    }
}

/// The query's predicate on DATE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DateFilter {
    /// `d_year = year`.
    Year(u16),
    /// `d_yearmonthnum = yearmonth`.
    YearMonth(u32),
}

impl DateFilter {
    /// Whether `row` passes.
    pub fn matches(self, row: &DateRow) -> bool {
        match self {
            DateFilter::Year(year) => row.year == year,
            DateFilter::YearMonth(yearmonth) => row.yearmonthnum == yearmonth,
        }
    }
}

/// What the host holds for the join and the aggregate: its copy of the lineorder columns,
/// DATE and the join index.
#[derive(Clone, Copy, Debug)]
pub struct HostTables<'a> {
    /// `lo_orderdate`.
    pub orderdate: &'a [u32],
    /// `lo_extendedprice`.
    pub extendedprice: &'a [u32],
    /// `lo_discount`.
    pub discount: &'a [u8],
    /// DATE.
    pub date: &'a [DateRow],
    /// The join index over `date`.
    pub index: &'a DateIndex,
}

/// One task's partial aggregate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Partial {
    /// `sum(lo_extendedprice * lo_discount)` over the selected rows.
    pub revenue: u64,
    /// Rows marked by the device's filter.
    pub marked: u64,
    /// Marked rows that join a DATE row passing the date predicate.
    pub selected: u64,
}

impl Partial {
    /// `self + other`.
    #[must_use]
    pub fn plus(self, other: Partial) -> Partial {
        Partial {
            revenue: self.revenue.wrapping_add(other.revenue),
            marked: self.marked + other.marked,
            selected: self.selected + other.selected,
        }
    }
}

/// Counts distinct cache lines touched by increasing row numbers.
#[derive(Clone, Copy, Debug, Default)]
struct LineCounter {
    last: Option<u64>,
    lines: u64,
}

impl LineCounter {
    fn touch(&mut self, row: u64, rows_per_line: u64) {
        let line = row / rows_per_line;
        if self.last != Some(line) {
            self.last = Some(line);
            self.lines += 1;
        }
    }
}

/// A task's result: its partial, its cost, and the first marked row that does not exist
/// (a bit past the table: a wrong bitmap), if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskOutcome {
    /// The partial aggregate.
    pub partial: Partial,
    /// The modelled cost.
    pub cost: HostCost,
    /// A marked row at or past the table's end.
    pub stray_row: Option<u64>,
}

/// The task step: joins and aggregates the rows marked in `bitmap` (read as little-endian
/// `u64` words, a trailing partial word zero-extended; bit `b` of byte `j` is row `first_row +
/// 8 j + b`) under `filter`.
pub fn join_and_aggregate(
    first_row: u64,
    bitmap: &[u8],
    tables: &HostTables<'_>,
    filter: DateFilter,
) -> TaskOutcome {
    let mut partial = Partial::default();
    let mut stray_row = None;
    let mut words = 0_u64;
    let mut orderdate_lines = LineCounter::default();
    let mut price_lines = LineCounter::default();
    let mut discount_lines = LineCounter::default();
    for (number, bytes) in bitmap.chunks(8).enumerate() {
        words += 1;
        let mut padded = [0_u8; 8];
        padded[..bytes.len()].copy_from_slice(bytes);
        let mut word = u64::from_le_bytes(padded);
        let base = first_row + 64 * number as u64;
        partial.marked += u64::from(word.count_ones());
        while word != 0 {
            let row = base + u64::from(word.trailing_zeros());
            word &= word - 1;
            let index = row as usize;
            let (Some(datekey), Some(price), Some(discount)) = (
                tables.orderdate.get(index),
                tables.extendedprice.get(index),
                tables.discount.get(index),
            ) else {
                stray_row.get_or_insert(row);
                continue;
            };
            orderdate_lines.touch(row, ROWS_PER_LINE);
            let passes = tables
                .index
                .lookup(*datekey)
                .and_then(|number| tables.date.get(number))
                .is_some_and(|date| filter.matches(date));
            if passes {
                price_lines.touch(row, ROWS_PER_LINE);
                discount_lines.touch(row, ROWS_PER_LINE);
                partial.revenue = partial
                    .revenue
                    .wrapping_add(u64::from(*price) * u64::from(*discount));
                partial.selected += 1;
            }
        }
    }
    let operations = TASK_FIXED_OPERATIONS
        + words * OPERATIONS_PER_WORD
        + partial.marked * OPERATIONS_PER_MARKED_ROW
        + partial.selected * OPERATIONS_PER_SELECTED_ROW;
    let lines = orderdate_lines.lines + price_lines.lines + discount_lines.lines;
    TaskOutcome {
        partial,
        cost: HostCost {
            operations,
            memory_bytes: lines * CACHE_LINE_BYTES,
        },
        stray_row,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ssb::data::date_table;

    /// 130 rows: dates cycling over 1993-01-01, 1993-12-31, 1994-01-15, 1992-06-01; price
    /// `100 + row`, discount `row % 11`.
    struct Fixture {
        orderdate: Vec<u32>,
        extendedprice: Vec<u32>,
        discount: Vec<u8>,
        date: Vec<DateRow>,
        index: DateIndex,
    }

    impl Fixture {
        fn new() -> Fixture {
            let dates = [19930101, 19931231, 19940115, 19920601];
            let date = date_table();
            Fixture {
                orderdate: (0..130).map(|row| dates[row % 4]).collect(),
                extendedprice: (0..130).map(|row| 100 + row as u32).collect(),
                discount: (0..130).map(|row| (row % 11) as u8).collect(),
                index: DateIndex::new(&date),
                date,
            }
        }

        fn tables(&self) -> HostTables<'_> {
            HostTables {
                orderdate: &self.orderdate,
                extendedprice: &self.extendedprice,
                discount: &self.discount,
                date: &self.date,
                index: &self.index,
            }
        }
    }

    fn bitmap(rows: &[u64], bytes: usize) -> Vec<u8> {
        let mut bitmap = vec![0_u8; bytes];
        for row in rows {
            bitmap[(row / 8) as usize] |= 1 << (row % 8);
        }
        bitmap
    }

    #[test]
    fn date_index_finds_every_day_and_nothing_else() {
        let table = date_table();
        let index = DateIndex::new(&table);
        assert_eq!(index.lookup(19920101), Some(0));
        assert_eq!(index.lookup(19930101), Some(366));
        assert_eq!(index.lookup(19981231), Some(2556));
        assert_eq!(index.lookup(19930230), None);
        assert_eq!(index.lookup(19911231), None);
        assert_eq!(index.lookup(19990101), None);
        assert_eq!(index.lookup(0), None);
        assert_eq!(index.lookup(u32::MAX), None);
    }

    #[test]
    fn hand_checked_year_1993_task() {
        let fixture = Fixture::new();
        // Rows 0 (1993-01-01), 1 (1993-12-31), 2 (1994), 3 (1992), 65 (1993-12-31).
        let outcome = join_and_aggregate(
            0,
            &bitmap(&[0, 1, 2, 3, 65], 16),
            &fixture.tables(),
            DateFilter::Year(1993),
        );
        // Selected: 0 (100 x 0), 1 (101 x 1), 65 (165 x 10).
        assert_eq!(
            outcome.partial,
            Partial {
                revenue: 101 + 1650,
                marked: 5,
                selected: 3
            }
        );
        assert_eq!(outcome.stray_row, None);
        assert_eq!(
            outcome.cost.operations,
            TASK_FIXED_OPERATIONS
                + 2 * OPERATIONS_PER_WORD
                + 5 * OPERATIONS_PER_MARKED_ROW
                + 3 * OPERATIONS_PER_SELECTED_ROW
        );
        // orderdate lines 0 and 4 (rows 0..16, 64..80); price and discount lines 0 and 4.
        assert_eq!(outcome.cost.memory_bytes, 6 * CACHE_LINE_BYTES);
    }

    #[test]
    fn year_month_filter_and_task_offset() {
        let fixture = Fixture::new();
        // The task starts at row 64: its bit 2 is row 66 (1994-01-15), bit 6 row 70 (1994).
        let outcome = join_and_aggregate(
            64,
            &bitmap(&[2, 6, 7], 8),
            &fixture.tables(),
            DateFilter::YearMonth(199401),
        );
        assert_eq!(outcome.partial.marked, 3);
        assert_eq!(outcome.partial.selected, 2);
        // Row 66 has discount 0 (66 % 11), row 70 discount 4.
        assert_eq!(outcome.partial.revenue, 170 * 4);
    }

    #[test]
    fn bits_past_the_table_are_reported() {
        let fixture = Fixture::new();
        let outcome = join_and_aggregate(
            128,
            &bitmap(&[1, 2, 9], 8),
            &fixture.tables(),
            DateFilter::Year(1993),
        );
        assert_eq!(outcome.stray_row, Some(130));
        assert_eq!(outcome.partial.marked, 3);
        assert_eq!(outcome.partial.selected, 1);
    }

    #[test]
    fn a_trailing_partial_word_is_read_too() {
        let fixture = Fixture::new();
        // Three bytes: rows 0..24 of the task; row 17 (1993-12-31, discount 6) marked.
        let outcome = join_and_aggregate(
            0,
            &bitmap(&[17], 3),
            &fixture.tables(),
            DateFilter::Year(1993),
        );
        assert_eq!(
            outcome.partial,
            Partial {
                revenue: 117 * 6,
                marked: 1,
                selected: 1
            }
        );
        assert_eq!(
            outcome.cost.operations,
            TASK_FIXED_OPERATIONS
                + OPERATIONS_PER_WORD
                + OPERATIONS_PER_MARKED_ROW
                + OPERATIONS_PER_SELECTED_ROW
        );
    }

    #[test]
    fn empty_bitmap_costs_only_the_scan() {
        let fixture = Fixture::new();
        let outcome = join_and_aggregate(0, &[0; 16], &fixture.tables(), DateFilter::Year(1993));
        assert_eq!(outcome.partial, Partial::default());
        assert_eq!(
            outcome.cost,
            HostCost {
                operations: TASK_FIXED_OPERATIONS + 2 * OPERATIONS_PER_WORD,
                memory_bytes: 0
            }
        );
    }
}
