//! DLRM sparse length sum ([`crate::KernelId::DlrmSls`]): `args = [table, rows | dim << 32,
//! batch, bags | index_count << 32]`; the batch in device memory is `bags + 1` little-endian
//! `u32` offsets followed by `index_count` `u32` row indices; the result space holds `bags`
//! pooled vectors of `dim` `f32`.

/// Bytes of one `f32` element, `u32` index and `u32` offset.
pub const ELEMENT_BYTES: u64 = 4;

/// `args[1]` for a table of `rows` vectors of `dim` elements.
pub const fn pack_shape(rows: u32, dim: u32) -> u64 {
    (rows as u64) | ((dim as u64) << 32)
}

/// `args[3]` for a batch of `bags` bags holding `index_count` indices in all.
pub const fn pack_batch(bags: u32, index_count: u32) -> u64 {
    (bags as u64) | ((index_count as u64) << 32)
}

/// Bytes of a batch of `bags` bags and `index_count` indices: `(bags + 1 + index_count) * 4`.
/// (Cannot overflow: at most `(2^33 - 1) * 4`.)
pub fn batch_bytes(bags: u32, index_count: u32) -> u64 {
    u64::from(bags)
        .saturating_add(1)
        .saturating_add(u64::from(index_count))
        .saturating_mul(ELEMENT_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packings_put_the_first_value_low_and_batches_count_offsets_and_indices() {
        assert_eq!(pack_shape(7, 256), 7 | 256 << 32);
        assert_eq!(pack_batch(512, 0x1_0000), 512 | 0x1_0000 << 32);
        assert_eq!(batch_bytes(2, 5), (2 + 1 + 5) * 4);
        assert_eq!(
            batch_bytes(u32::MAX, u32::MAX),
            (2 * u64::from(u32::MAX) + 1) * 4
        );
    }
}
