//! KNN distance ([`crate::KernelId::KnnDistance`]): `args = [database, queries, rows | dim << 32,
//! query_count]`; the result space holds one `f32` distance per (query, row), query-major.

/// Bytes of result each item writes: one little-endian `f32` distance.
pub const RESULT_BYTES_PER_ITEM: u32 = 4;

/// `args[2]` for `rows` database vectors of `dim` elements: `rows` in the low 32 bits, `dim` in
/// the high 32 bits.
pub const fn pack_shape(rows: u32, dim: u32) -> u64 {
    (rows as u64) | ((dim as u64) << 32)
}

/// Bytes of one vector element (`f32`).
pub const ELEMENT_BYTES: u64 = 4;

/// The [`super::WorkFloor`] of a KNN launch with arguments `args`: one item per (query, row),
/// each reading its database row, `dim` elements (the query may stay in the µthread's
/// scratch, so it is not counted, nor the 4-byte result). `None` when the device would
/// refuse the shape (a zero count).
pub fn work_floor(args: [u64; 4]) -> Option<super::WorkFloor> {
    let [_, _, shape, queries] = args;
    let rows = shape & u64::from(u32::MAX);
    let dim = shape >> 32;
    if rows == 0 || dim == 0 || queries == 0 {
        return None;
    }
    Some(super::WorkFloor {
        items: rows.saturating_mul(queries),
        item_bytes: dim.saturating_mul(ELEMENT_BYTES),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_knn_launch_has_one_item_per_query_and_row_each_reading_its_row() {
        let floor = work_floor([0, 0, pack_shape(128, 2048), 4]).unwrap();
        assert_eq!(floor.items, 512);
        assert_eq!(floor.item_bytes, 8192);
        assert_eq!(work_floor([0, 0, pack_shape(0, 2048), 4]), None);
        assert_eq!(work_floor([0, 0, pack_shape(128, 2048), 0]), None);
    }

    #[test]
    fn pack_shape_puts_rows_low_and_dim_high() {
        assert_eq!(pack_shape(0x1234, 0x0800), 0x0000_0800_0000_1234);
        assert_eq!(pack_shape(u32::MAX, 0), u64::from(u32::MAX));
    }
}
