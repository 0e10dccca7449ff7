//! PageRank gather ([`crate::KernelId::PageRankGather`]): `args = [parameters, contributions,
//! VERTICES_PER_ITEM, 0]`; the in-neighbour CSR lives in device memory described by a
//! [`PageRankParameters`] block; contributions and result are `vertices` little-endian `f32`.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Vertices per item, the only value `args[2]` may hold: one, as M²NDP's kernel2 gives each
/// µthread one row.
pub const VERTICES_PER_ITEM: u32 = 1;

/// Alignment of the parameter block's address.
pub const PARAMETERS_ALIGNMENT: u64 = 8;

/// The parameter block of the in-neighbour graph (32 bytes, little-endian `u64` fields),
/// written once at load time; `args[0]` points at it.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct PageRankParameters {
    /// Vertices.
    pub vertices: u64,
    /// Arcs (in-neighbour entries).
    pub arcs: u64,
    /// Device address of the CSR offsets (`vertices + 1` `u32`).
    pub offsets: u64,
    /// Device address of the in-neighbour ids (`arcs` `u32`).
    pub sources: u64,
}

/// Bytes of [`PageRankParameters`].
pub const PARAMETERS_BYTES: usize = 32;

const _: () = assert!(core::mem::size_of::<PageRankParameters>() == PARAMETERS_BYTES);
const _: () = assert!(core::mem::offset_of!(PageRankParameters, vertices) == 0);
const _: () = assert!(core::mem::offset_of!(PageRankParameters, arcs) == 8);
const _: () = assert!(core::mem::offset_of!(PageRankParameters, offsets) == 16);
const _: () = assert!(core::mem::offset_of!(PageRankParameters, sources) == 24);

impl PageRankParameters {
    /// The block as the bytes the host writes into device memory.
    pub fn to_bytes(&self) -> [u8; PARAMETERS_BYTES] {
        let mut bytes = [0_u8; PARAMETERS_BYTES];
        bytes.copy_from_slice(self.as_bytes());
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_the_fields_little_endian_in_declaration_order() {
        let parameters = PageRankParameters {
            vertices: 1,
            arcs: 0x0200,
            offsets: 0x03_0000,
            sources: 0x0400_0000_0000_0005,
        };
        let mut expected = [0_u8; PARAMETERS_BYTES];
        for (chunk, field) in
            expected
                .chunks_exact_mut(8)
                .zip([1_u64, 0x0200, 0x03_0000, 0x0400_0000_0000_0005])
        {
            chunk.copy_from_slice(&field.to_le_bytes());
        }
        assert_eq!(parameters.to_bytes(), expected);
        assert_eq!(
            PageRankParameters::read_from_bytes(&expected),
            Ok(parameters)
        );
    }
}
