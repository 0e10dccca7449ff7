//! A clean-room generator of the SSB columns Q1.1 and Q1.2 touch, from the specification's
//! distributions (see `shared/data/README.md`; no dbgen code or output is used, so the
//! answers differ from the published ones).
//!
//! # LINEORDER
//!
//! `1,500,000 x SF` orders (SF in thousandths, [`ScaleFactor`]), each of 1 to 7 lines
//! (uniform), so about `6,000,000 x SF` rows. A [`rand_chacha::ChaCha8Rng`] seeded with the
//! run's seed draws, per order: the line count, then the order date (uniform over the 2,406
//! days 1992-01-01 ..= 1998-08-02, shared by the order's lines); then per line:
//! `lo_quantity` uniform in 1..=50, `lo_discount` uniform in 0..=10, `lo_partkey` uniform in
//! `1..=parts` (see [`ScaleFactor::parts`]). `lo_extendedprice = retail_price(partkey) x
//! quantity` in cents, with the part's retail price `90000 + ((p / 10) % 20001) + 100 (p %
//! 1000)`. Only the columns the two queries read are kept: `lo_quantity`, `lo_discount`,
//! `lo_orderdate` (`YYYYMMDD`) and `lo_extendedprice` (at most 191,900 x 50 cents). The
//! tables the run models, on the device and on the host, hold all four as the schema's 4-byte
//! integers; the generator keeps quantity and discount in one byte each (their domains fit)
//! and widens them when it writes them out ([`to_u32_le_bytes`]). The other columns
//! (`lo_tax`, the keys, ...) are not drawn.
//!
//! # DATE
//!
//! Every day of 1992-01-01 ..= 1998-12-31 (2,557 rows) in order: `d_datekey = YYYYMMDD`,
//! `d_year`, `d_yearmonthnum = YYYYMM`.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// `d_datekey` of the first day of the DATE table (and of the order dates).
pub const FIRST_DATEKEY: u32 = 19920101;

/// `d_datekey` of the last day of the DATE table.
pub const LAST_DATEKEY: u32 = 19981231;

/// Days of the DATE table: 1992-01-01 ..= 1998-12-31.
pub const DATE_ROWS: usize = 2557;

/// Days an order date is drawn from: 1992-01-01 ..= 1998-08-02.
pub const ORDER_DATE_DAYS: usize = 2406;

/// Orders per unit of scale factor.
pub const ORDERS_PER_SF: u64 = 1_500_000;

/// Largest number of lines of one order.
pub const MAX_LINES_PER_ORDER: u32 = 7;

/// Parts per unit of the part-count formula's factor.
pub const PARTS_PER_SF: u64 = 200_000;

/// A scale factor in thousandths (SF 1 is 1000; SF 0.002 is 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ScaleFactor {
    /// Thousandths of the scale factor (positive).
    pub millis: u32,
}

impl ScaleFactor {
    /// SF 1, the paper's.
    pub const PAPER: ScaleFactor = ScaleFactor { millis: 1000 };
    /// SF 0.002 (3,000 orders, about 12,000 rows), for tests.
    pub const SMALL: ScaleFactor = ScaleFactor { millis: 2 };

    /// Orders: `1,500,000 x SF`, rounded down, at least one.
    pub fn orders(self) -> u64 {
        (ORDERS_PER_SF * u64::from(self.millis) / 1000).max(1)
    }

    /// Parts `lo_partkey` is drawn from: the specification's `200,000 x floor(1 + log2 SF)`
    /// for SF >= 1; below SF 1 (where the formula is not positive) `200,000 x SF`, at least
    /// one, as the other tables scale.
    pub fn parts(self) -> u64 {
        let whole = u64::from(self.millis / 1000);
        if whole >= 1 {
            PARTS_PER_SF * (1 + u64::from(whole.ilog2()))
        } else {
            (PARTS_PER_SF * u64::from(self.millis) / 1000).max(1)
        }
    }
}

impl std::fmt::Display for ScaleFactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}", self.millis / 1000, self.millis % 1000)
    }
}

/// The retail price of part `part` in cents (SSB's PART formula).
pub fn retail_price(part: u64) -> u32 {
    // At most 90,000 + 20,000 + 99,900: fits u32.
    (90_000 + (part / 10) % 20_001 + 100 * (part % 1000)) as u32
}

/// One row of the DATE table (the columns the queries read).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DateRow {
    /// `YYYYMMDD`.
    pub datekey: u32,
    /// `YYYY`.
    pub year: u16,
    /// `YYYYMM`.
    pub yearmonthnum: u32,
}

/// Whether `year` is a Gregorian leap year.
fn is_leap(year: u32) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

/// Days of `month` (1-based) in `year`.
fn month_days(year: u32, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// The DATE table: every day of 1992 ..= 1998, in order.
pub fn date_table() -> Vec<DateRow> {
    let mut rows = Vec::with_capacity(DATE_ROWS);
    for year in 1992..=1998_u32 {
        for month in 1..=12 {
            for day in 1..=month_days(year, month) {
                rows.push(DateRow {
                    datekey: year * 10_000 + month * 100 + day,
                    year: year as u16,
                    yearmonthnum: year * 100 + month,
                });
            }
        }
    }
    rows
}

/// The generated columns.
///
/// # Invariants
///
/// The four columns have the same length, which fits a `u32`.
#[derive(Clone, PartialEq, Eq)]
pub struct SsbData {
    scale: ScaleFactor,
    seed: u64,
    orders: u64,
    /// `lo_quantity`, 1..=50.
    pub quantity: Vec<u8>,
    /// `lo_discount`, 0..=10.
    pub discount: Vec<u8>,
    /// `lo_orderdate`, a `d_datekey`.
    pub orderdate: Vec<u32>,
    /// `lo_extendedprice` in cents.
    pub extendedprice: Vec<u32>,
    /// The DATE table.
    pub date: Vec<DateRow>,
}

impl std::fmt::Debug for SsbData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SsbData")
            .field("scale", &self.scale)
            .field("seed", &self.seed)
            .field("orders", &self.orders)
            .field("rows", &self.rows())
            .finish_non_exhaustive()
    }
}

impl SsbData {
    /// The columns at `scale` from `seed` (see the module docs for the draw order).
    pub fn generate(scale: ScaleFactor, seed: u64) -> SsbData {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let date = date_table();
        let orders = scale.orders();
        let parts = scale.parts();
        let capacity = usize::try_from(orders * 4).unwrap_or(0);
        let mut data = SsbData {
            scale,
            seed,
            orders,
            quantity: Vec::with_capacity(capacity),
            discount: Vec::with_capacity(capacity),
            orderdate: Vec::with_capacity(capacity),
            extendedprice: Vec::with_capacity(capacity),
            date,
        };
        for _ in 0..orders {
            let lines = rng.gen_range(1..=MAX_LINES_PER_ORDER);
            let day = rng.gen_range(0..ORDER_DATE_DAYS);
            let orderdate = data.date[day].datekey;
            for _ in 0..lines {
                let quantity: u8 = rng.gen_range(1..=50);
                let discount: u8 = rng.gen_range(0..=10);
                let part = rng.gen_range(1..=parts);
                data.quantity.push(quantity);
                data.discount.push(discount);
                data.orderdate.push(orderdate);
                data.extendedprice
                    .push(retail_price(part) * u32::from(quantity));
            }
        }
        data
    }

    /// The scale factor.
    pub fn scale(&self) -> ScaleFactor {
        self.scale
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Orders generated.
    pub fn orders(&self) -> u64 {
        self.orders
    }

    /// LINEORDER rows.
    pub fn rows(&self) -> u32 {
        // INVARIANT: generation stops far below u32::MAX (7 x 1.5M x SF, SF < 400).
        self.quantity.len() as u32
    }
}

/// `values` as little-endian `u32` (the 4-byte integer columns of the modelled tables).
pub fn to_u32_le_bytes(values: &[u8]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|value| u32::from(*value).to_le_bytes())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_table_has_every_day_of_1992_to_1998() {
        let table = date_table();
        assert_eq!(table.len(), DATE_ROWS);
        assert_eq!(table[0].datekey, FIRST_DATEKEY);
        assert_eq!(table[DATE_ROWS - 1].datekey, LAST_DATEKEY);
        assert_eq!(table[ORDER_DATE_DAYS - 1].datekey, 19980802);
        // 1992 and 1996 are leap years.
        assert_eq!(table[59].datekey, 19920229);
        assert_eq!(table.iter().filter(|d| d.year == 1993).count(), 365);
        assert_eq!(table.iter().filter(|d| d.year == 1996).count(), 366);
        assert_eq!(
            table.iter().filter(|d| d.yearmonthnum == 199401).count(),
            31
        );
        assert!(table
            .windows(2)
            .all(|pair| pair[0].datekey < pair[1].datekey));
        let row = table.iter().find(|d| d.datekey == 19950714).unwrap();
        assert_eq!((row.year, row.yearmonthnum), (1995, 199507));
    }

    #[test]
    fn scale_factor_sizes() {
        assert_eq!(ScaleFactor::PAPER.orders(), 1_500_000);
        assert_eq!(ScaleFactor::PAPER.parts(), 200_000);
        assert_eq!(ScaleFactor { millis: 4000 }.parts(), 600_000);
        assert_eq!(ScaleFactor::SMALL.orders(), 3000);
        assert_eq!(ScaleFactor::SMALL.parts(), 400);
        assert_eq!(ScaleFactor::SMALL.to_string(), "0.002");
        assert_eq!(ScaleFactor::PAPER.to_string(), "1.000");
    }

    #[test]
    fn retail_price_follows_the_part_formula() {
        assert_eq!(retail_price(1), 90_000 + 100);
        assert_eq!(retail_price(123_456), 90_000 + 12_345 + 45_600);
        assert_eq!(retail_price(200_000), 90_000 + 20_000);
    }

    #[test]
    fn generated_columns_have_the_specified_domains_and_sizes() {
        let data = SsbData::generate(ScaleFactor::SMALL, 7);
        assert_eq!(data.orders(), 3000);
        let rows = data.rows() as usize;
        // 1..=7 lines per order.
        assert!((3000..=21_000).contains(&rows));
        assert!((11_000..13_000).contains(&rows), "{rows}");
        assert_eq!(data.discount.len(), rows);
        assert_eq!(data.orderdate.len(), rows);
        assert_eq!(data.extendedprice.len(), rows);
        assert!(data.quantity.iter().all(|q| (1..=50).contains(q)));
        assert!(data.discount.iter().all(|d| *d <= 10));
        assert!(data
            .orderdate
            .iter()
            .all(|d| (FIRST_DATEKEY..=19980802).contains(d)));
        for (price, quantity) in data.extendedprice.iter().zip(&data.quantity) {
            assert_eq!(price % u32::from(*quantity), 0);
            let retail = price / u32::from(*quantity);
            assert!((90_000..=90_000 + 400 / 10 + 100 * 400).contains(&retail));
        }
        // Every value of the small domains occurs.
        for q in 1..=50 {
            assert!(data.quantity.contains(&q));
        }
        for d in 0..=10 {
            assert!(data.discount.contains(&d));
        }
    }

    #[test]
    fn generation_is_seed_deterministic() {
        let a = SsbData::generate(ScaleFactor::SMALL, 42);
        let b = SsbData::generate(ScaleFactor::SMALL, 42);
        let c = SsbData::generate(ScaleFactor::SMALL, 43);
        assert!(a == b);
        assert!(a != c);
    }
}
