//! SSB predicate filter ([`crate::KernelId::SsbFilter`]): `args = [lo_quantity, lo_discount,
//! rows | rows_per_item << 32, predicate]`; the columns are `rows` little-endian `u32`, the
//! result space is a row bitmap (row `r` at bit `r % 8` of byte `r / 8`).

/// Bytes of one column value (`u32`).
pub const VALUE_BYTES: u64 = 4;

/// Rows per 32-byte packet of a column, hence per bitmap byte: `rows_per_item` must be a
/// multiple of it, so that no two work items share a result byte.
pub const ROWS_PER_PACKET: u32 = 8;

/// `args[2]` for a table of `rows` rows filtered in items of `rows_per_item` rows.
pub const fn pack_rows(rows: u32, rows_per_item: u32) -> u64 {
    (rows as u64) | ((rows_per_item as u64) << 32)
}

/// Bytes of the bitmap of `rows` rows: `ceil(rows / 8)`.
pub const fn bitmap_bytes(rows: u32) -> u64 {
    (rows as u64).div_ceil(ROWS_PER_PACKET as u64)
}

/// The inclusive bounds of a query's predicate on the two filter columns (`args[3]`).
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

    /// Whether a row with these values is marked (the bounds zero-extended to 32 bits).
    pub fn matches(self, quantity: u32, discount: u32) -> bool {
        (u32::from(self.quantity_low)..=u32::from(self.quantity_high)).contains(&quantity)
            && (u32::from(self.discount_low)..=u32::from(self.discount_high)).contains(&discount)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predicate_unpack_inverts_pack() {
        let predicate = Predicate {
            quantity_low: 1,
            quantity_high: 0x2345,
            discount_low: 0x6789,
            discount_high: 0xabcd,
        };
        assert_eq!(predicate.pack(), 0xabcd_6789_2345_0001);
        assert_eq!(Predicate::unpack(predicate.pack()), predicate);
    }
}
