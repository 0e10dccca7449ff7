//! The input image: the data sets, generated on the host machine by the test that runs the port
//! (`tests/qemu_riscv.rs` at the repository root, with the `workloads` crate's generators) and
//! put at [`crate::board::INPUT_BASE`] by QEMU's
//! `-device loader,file=<image>,addr=0x80200000,force-raw=on`.
//!
//! | offset | what |
//! |--------|------|
//! | 0 | [`ImageHeader`] (64 bytes, little-endian) |
//! | 64 | KNN database: `knn_rows * knn_dim` `f32` |
//! | .. | KNN queries: `knn_queries * knn_dim` `f32` |
//! | .. | SSSP offsets: `sssp_vertices + 1` `u32` |
//! | .. | SSSP targets: `sssp_arcs` `u32` |
//! | .. | SSSP weights: `sssp_arcs` `u32` |
//!
//! Every count is bounded here before use ([`Limits`]), with an error naming the value and the
//! limit.

use crate::board;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// The image's first 8 bytes.
pub const MAGIC: [u8; 8] = *b"AXLEQIMG";
/// The layout version this port reads.
pub const VERSION: u32 = 1;

/// The image header.
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ImageHeader {
    /// [`MAGIC`].
    pub magic: [u8; 8],
    /// [`VERSION`].
    pub version: u32,
    /// Bytes of the header (64).
    pub header_bytes: u32,
    /// KNN: elements per vector.
    pub knn_dim: u32,
    /// KNN: database rows.
    pub knn_rows: u32,
    /// KNN: queries.
    pub knn_queries: u32,
    /// KNN: neighbours per query the host keeps.
    pub knn_k: u32,
    /// SSSP: vertices.
    pub sssp_vertices: u32,
    /// SSSP: arcs.
    pub sssp_arcs: u32,
    /// SSSP: the source vertex.
    pub sssp_source: u32,
    /// SSSP: launches (Jacobi Bellman-Ford rounds).
    pub sssp_rounds: u32,
    /// Bytes after the header.
    pub payload_bytes: u32,
    /// Zero.
    pub reserved: [u32; 3],
}

const _: () = assert!(core::mem::size_of::<ImageHeader>() == 64);

/// The largest sizes this port accepts (its fixed buffers and its memory windows).
#[derive(Clone, Copy, Debug)]
pub struct Limits;

impl Limits {
    /// KNN elements per vector.
    pub const KNN_DIM: u32 = 1024;
    /// KNN rows.
    pub const KNN_ROWS: u32 = 16_384;
    /// KNN queries.
    pub const KNN_QUERIES: u32 = 64;
    /// KNN neighbours per query (the host's top-k array).
    pub const KNN_K: u32 = crate::host::MAX_K as u32;
    /// SSSP vertices.
    pub const SSSP_VERTICES: u32 = 65_536;
    /// SSSP arcs.
    pub const SSSP_ARCS: u32 = 262_144;
    /// SSSP launches.
    pub const SSSP_ROUNDS: u32 = 256;
}

/// Why the image was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageError {
    /// No image at [`board::INPUT_BASE`] (QEMU ran without the loader).
    Missing,
    /// Another layout version.
    Version(u32),
    /// A count above its limit: (what, value, limit).
    TooLarge(&'static str, u64, u64),
    /// A count that must not be zero.
    Zero(&'static str),
    /// The sections do not add up to `payload_bytes`: (computed, declared).
    Length(u64, u64),
}

impl core::fmt::Display for ImageError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ImageError::Missing => write!(
                f,
                "no input image at {:#x}: run QEMU with -device loader,file=<image>,addr={:#x},force-raw=on (the test tests/qemu_riscv.rs writes one)",
                board::INPUT_BASE,
                board::INPUT_BASE
            ),
            ImageError::Version(v) => write!(f, "image version {v}, this port reads {VERSION}"),
            ImageError::TooLarge(what, value, limit) => {
                write!(f, "image {what} = {value} exceeds the limit {limit}")
            }
            ImageError::Zero(what) => write!(f, "image {what} is zero"),
            ImageError::Length(computed, declared) => write!(
                f,
                "image sections need {computed} bytes, the header declares {declared}"
            ),
        }
    }
}

/// Where each section lies, as offsets into the input window.
#[derive(Clone, Copy, Debug)]
pub struct Image {
    /// The header.
    pub header: ImageHeader,
    /// KNN database (bytes at offset).
    pub knn_database: Section,
    /// KNN queries.
    pub knn_queries: Section,
    /// SSSP offsets.
    pub sssp_offsets: Section,
    /// SSSP targets.
    pub sssp_targets: Section,
    /// SSSP weights.
    pub sssp_weights: Section,
}

/// A byte range of the input window.
#[derive(Clone, Copy, Debug)]
pub struct Section {
    /// First byte, from the window's start.
    pub offset: usize,
    /// Bytes.
    pub bytes: usize,
}

fn bounded(what: &'static str, value: u32, limit: u32) -> Result<u64, ImageError> {
    if value == 0 {
        return Err(ImageError::Zero(what));
    }
    if value > limit {
        return Err(ImageError::TooLarge(what, value.into(), limit.into()));
    }
    Ok(value.into())
}

impl Image {
    /// Reads and checks the header in the input window.
    pub fn load() -> Result<Image, ImageError> {
        let mut header = ImageHeader::default();
        if !board::INPUT.read(0, header.as_mut_bytes()) || header.magic != MAGIC {
            return Err(ImageError::Missing);
        }
        if header.version != VERSION || header.header_bytes != 64 {
            return Err(ImageError::Version(header.version));
        }
        let dim = bounded("knn_dim", header.knn_dim, Limits::KNN_DIM)?;
        let rows = bounded("knn_rows", header.knn_rows, Limits::KNN_ROWS)?;
        let queries = bounded("knn_queries", header.knn_queries, Limits::KNN_QUERIES)?;
        bounded("knn_k", header.knn_k, Limits::KNN_K.min(header.knn_rows))?;
        let vertices = bounded("sssp_vertices", header.sssp_vertices, Limits::SSSP_VERTICES)?;
        let arcs = bounded("sssp_arcs", header.sssp_arcs, Limits::SSSP_ARCS)?;
        bounded("sssp_rounds", header.sssp_rounds, Limits::SSSP_ROUNDS)?;
        if header.sssp_source >= header.sssp_vertices {
            return Err(ImageError::TooLarge(
                "sssp_source",
                header.sssp_source.into(),
                u64::from(header.sssp_vertices).saturating_sub(1),
            ));
        }
        // Products of values bounded above: no overflow in u64.
        let sizes = [
            rows.saturating_mul(dim).saturating_mul(4),
            queries.saturating_mul(dim).saturating_mul(4),
            vertices.saturating_add(1).saturating_mul(4),
            arcs.saturating_mul(4),
            arcs.saturating_mul(4),
        ];
        let total: u64 = sizes.iter().fold(0, |sum, size| sum.saturating_add(*size));
        let window = board::INPUT_BYTES.saturating_sub(64) as u64;
        if total > window {
            return Err(ImageError::TooLarge("payload bytes", total, window));
        }
        if total != u64::from(header.payload_bytes) {
            return Err(ImageError::Length(total, header.payload_bytes.into()));
        }
        let mut offset = 64_usize;
        let mut sections = [Section {
            offset: 0,
            bytes: 0,
        }; 5];
        for (section, size) in sections.iter_mut().zip(sizes) {
            // Below the 2 MiB window: fits usize.
            let bytes = size as usize;
            *section = Section { offset, bytes };
            offset = offset.saturating_add(bytes);
        }
        let [knn_database, knn_queries, sssp_offsets, sssp_targets, sssp_weights] = sections;
        Ok(Image {
            header,
            knn_database,
            knn_queries,
            sssp_offsets,
            sssp_targets,
            sssp_weights,
        })
    }
}
