//! Byte-range checks every kernel's decoder shares: a command's buffer must be aligned and lie
//! inside device memory, and the result space must not overlap an input.

use crate::error::FirmwareError;
use shared_abi::DeviceAddress;

/// `[start, start + length)` if `start` is a multiple of `alignment` and the range neither
/// overflows nor ends beyond `memory_size`; otherwise [`FirmwareError::ArgumentOutOfRange`].
pub(crate) fn checked_range(
    start: u64,
    length: u64,
    alignment: u64,
    memory_size: u64,
) -> Result<(u64, u64), FirmwareError> {
    if start.checked_rem(alignment) != Some(0) {
        return Err(FirmwareError::ArgumentOutOfRange);
    }
    let end = start
        .checked_add(length)
        .ok_or(FirmwareError::ArgumentOutOfRange)?;
    if end > memory_size {
        return Err(FirmwareError::ArgumentOutOfRange);
    }
    Ok((start, end))
}

/// Bytes of `count` 32-bit words, checked.
pub(crate) fn word_bytes(count: u64) -> Result<u64, FirmwareError> {
    count
        .checked_mul(4)
        .ok_or(FirmwareError::ArgumentOutOfRange)
}

/// The checks a CSR graph's parameters share (SSSP's and PageRank's): at least one vertex and
/// fewer than `u32::MAX` (a vertex index and its one-past-the-end offset fit a word), at most
/// `u32::MAX` arcs, and its `vertices + 1` offsets, word-aligned, inside `memory_size`. The
/// offsets' byte range.
pub(crate) fn checked_csr_offsets(
    vertices: u64,
    arcs: u64,
    offsets: u64,
    memory_size: u64,
) -> Result<(u64, u64), FirmwareError> {
    if vertices == 0 || vertices >= u64::from(u32::MAX) || arcs > u64::from(u32::MAX) {
        return Err(FirmwareError::ArgumentOutOfRange);
    }
    let count = vertices
        .checked_add(1)
        .ok_or(FirmwareError::ArgumentOutOfRange)?;
    checked_range(offsets, word_bytes(count)?, 4, memory_size)
}

/// Whether two half-open ranges share a byte (an empty range shares none, even one lying
/// strictly inside the other).
pub(crate) fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < a.1 && b.0 < b.1 && a.0 < b.1 && b.0 < a.1
}

/// `base + index * stride`, checked.
pub(crate) fn offset_address(
    base: DeviceAddress,
    index: u64,
    stride: u64,
) -> Result<DeviceAddress, FirmwareError> {
    index
        .checked_mul(stride)
        .and_then(|offset| base.checked_add(offset))
        .ok_or(FirmwareError::ArgumentOutOfRange)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_range_overlaps_nothing_even_inside_another() {
        assert!(!overlaps((0x808, 0x808), (0x800, 0x810)));
        assert!(!overlaps((0x800, 0x810), (0x808, 0x808)));
        assert!(overlaps((0x800, 0x810), (0x80f, 0x811)));
        assert!(!overlaps((0x800, 0x810), (0x810, 0x820)));
    }

    #[test]
    fn ranges_must_be_aligned_and_inside_memory() {
        assert_eq!(checked_range(8, 8, 4, 16), Ok((8, 16)));
        assert_eq!(
            checked_range(6, 8, 4, 16),
            Err(FirmwareError::ArgumentOutOfRange)
        );
        assert_eq!(
            checked_range(12, 8, 4, 16),
            Err(FirmwareError::ArgumentOutOfRange)
        );
        assert_eq!(
            checked_range(u64::MAX - 3, 8, 4, u64::MAX),
            Err(FirmwareError::ArgumentOutOfRange)
        );
        assert_eq!(checked_csr_offsets(3, 5, 8, 24), Ok((8, 24)));
        for (vertices, arcs, offsets, size) in [
            (0, 0, 8, 1024),                       // no vertex
            (u64::from(u32::MAX), 0, 8, u64::MAX), // a vertex index past a word
            (3, u64::from(u32::MAX) + 1, 8, 1024), // an arc index past a word
            (3, 5, 10, 1024),                      // offsets not word-aligned
            (3, 5, 12, 24),                        // the last offset past the memory
            (u64::MAX / 2, 5, 8, u64::MAX),        // too many vertices
        ] {
            assert_eq!(
                checked_csr_offsets(vertices, arcs, offsets, size),
                Err(FirmwareError::ArgumentOutOfRange),
                "{vertices} {arcs} {offsets} {size}"
            );
        }
        assert_eq!(
            offset_address(DeviceAddress(8), 3, 4),
            Ok(DeviceAddress(20))
        );
        assert_eq!(
            offset_address(DeviceAddress(8), u64::MAX, 4),
            Err(FirmwareError::ArgumentOutOfRange)
        );
    }
}
