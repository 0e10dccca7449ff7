//! KNN distance ([`crate::KernelId::KnnDistance`]): `args = [database, queries, rows | dim << 32,
//! query_count]`; the result space holds one `f32` distance per (query, row), query-major.

/// Bytes of result each item writes: one little-endian `f32` distance.
pub const RESULT_BYTES_PER_ITEM: u32 = 4;

/// `args[2]` for `rows` database vectors of `dim` elements: `rows` in the low 32 bits, `dim` in
/// the high 32 bits.
pub const fn pack_shape(rows: u32, dim: u32) -> u64 {
    (rows as u64) | ((dim as u64) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_shape_puts_rows_low_and_dim_high() {
        assert_eq!(pack_shape(0x1234, 0x0800), 0x0000_0800_0000_1234);
        assert_eq!(pack_shape(u32::MAX, 0), u64::from(u32::MAX));
    }
}
