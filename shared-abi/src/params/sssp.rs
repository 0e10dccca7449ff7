//! SSSP relaxation ([`crate::KernelId::SsspRelax`]): `args = [parameters, previous distances, 0,
//! 0]`; the graph is a CSR in device memory described by an [`SsspParameters`] block; distances
//! (previous and result) are `vertices` little-endian `u32`, [`INFINITY`] for unreached.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// The distance of an unreached vertex.
pub const INFINITY: u32 = u32::MAX;

/// Alignment of the parameter block's address.
pub const PARAMETERS_ALIGNMENT: u64 = 8;

/// The parameter block of a graph in device memory (40 bytes, little-endian `u64` fields),
/// written once at load time; `args[0]` points at it.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct SsspParameters {
    /// Vertices.
    pub vertices: u64,
    /// Arcs.
    pub arcs: u64,
    /// Device address of the CSR offsets (`vertices + 1` `u32`).
    pub offsets: u64,
    /// Device address of the arc targets (`arcs` `u32`).
    pub targets: u64,
    /// Device address of the arc weights (`arcs` `u32`).
    pub weights: u64,
}

/// Bytes of [`SsspParameters`].
pub const PARAMETERS_BYTES: usize = 40;

const _: () = assert!(core::mem::size_of::<SsspParameters>() == PARAMETERS_BYTES);
const _: () = assert!(core::mem::offset_of!(SsspParameters, vertices) == 0);
const _: () = assert!(core::mem::offset_of!(SsspParameters, arcs) == 8);
const _: () = assert!(core::mem::offset_of!(SsspParameters, offsets) == 16);
const _: () = assert!(core::mem::offset_of!(SsspParameters, targets) == 24);
const _: () = assert!(core::mem::offset_of!(SsspParameters, weights) == 32);

impl SsspParameters {
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
        let parameters = SsspParameters {
            vertices: 1,
            arcs: 2,
            offsets: 0x0300,
            targets: 0x04_0000,
            weights: 0x0500_0000_0000_0006,
        };
        let mut expected = [0_u8; PARAMETERS_BYTES];
        for (chunk, field) in
            expected
                .chunks_exact_mut(8)
                .zip([1_u64, 2, 0x0300, 0x04_0000, 0x0500_0000_0000_0006])
        {
            chunk.copy_from_slice(&field.to_le_bytes());
        }
        assert_eq!(parameters.to_bytes(), expected);
        assert_eq!(SsspParameters::read_from_bytes(&expected), Ok(parameters));
    }
}
