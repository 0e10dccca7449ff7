//! KNN data sets: seeded synthetic vectors, or real embeddings from an explicit path.
//!
//! # Seeded (default)
//!
//! A [`rand_chacha::ChaCha8Rng`] seeded with the run's seed draws the database first (row 0
//! element 0, row 0 element 1, ..., row-major) and then the queries, every value uniform in
//! `[-1, 1)` (`rand`'s `gen_range(-1.0..1.0)` on `f32`). Same seed, same shape, same data.
//!
//! # Real embeddings
//!
//! `bge-m3-1024d-paragraph-queries.vec` (see `shared/data/README.md`): 500 unit-norm
//! 1024-dimensional bge-m3 embeddings of paragraphs, raw little-endian `f32`, no header. The
//! file is read as one stream of `f32` and cut into vectors of the workload's `dim`, dropping
//! an incomplete tail; the first `rows` vectors are the database and the next `queries` the
//! queries. For the three Table IV shapes that means:
//!
//! - (b) dim 1024: the embeddings as they are (500 vectors): rows 0..256, queries from 256
//!   (at most 244).
//! - (a) dim 2048: consecutive pairs joined, embedding `2j` then `2j + 1` (250 vectors):
//!   rows 0..128, queries from 128 (at most 122). The joined vectors have norm √2.
//! - (c) dim 512: every embedding split into its first and second half (1000 vectors):
//!   rows 0..512, queries from 512 (at most 488). The halves are not unit-norm.
//!
//! The file is read only if it is a regular file whose size is a whole number of embeddings,
//! at most [`MAX_EMBEDDINGS_BYTES`] and within the machine's memory, all checked before
//! anything is allocated for it; its size and SHA-256 are compared with the paper's file
//! ([`crate::datafile::BGE_M3_EMBEDDINGS`]) and the data's [`DataSource`] says what was read
//! and, for another file, that it is not the paper's data set.

use std::fmt;
use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// File name of the real embeddings inside the data directory.
pub const EMBEDDINGS_FILE: &str = "bge-m3-1024d-paragraph-queries.vec";

/// Elements per embedding in the file.
pub const EMBEDDING_DIM: usize = 1024;

/// Bytes per embedding in the file: the file size must be a multiple of it.
pub const EMBEDDING_BYTES: usize = EMBEDDING_DIM * 4;

/// Where a data set came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataSource {
    /// Generated from this seed.
    Seeded {
        /// The seed.
        seed: u64,
    },
    /// Read from this embeddings file.
    Embeddings {
        /// The file.
        path: PathBuf,
        /// Embeddings the file held.
        embeddings: u64,
        /// Whether it is the paper's file: [`crate::datafile::Identity::note`].
        note: String,
    },
}

impl fmt::Display for DataSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataSource::Seeded { seed } => write!(f, "seeded data, seed {seed}"),
            DataSource::Embeddings {
                path,
                embeddings,
                note,
            } => write!(
                f,
                "{}: {embeddings} {EMBEDDING_DIM}-d f32 embeddings read{note}",
                path.display()
            ),
        }
    }
}

/// A KNN data set: `rows` database vectors and `queries` query vectors of `dim` elements.
///
/// # Invariants
///
/// `database.len() == rows * dim` and `query_vectors.len() == queries * dim`.
#[derive(Clone, PartialEq)]
pub struct KnnData {
    dim: u32,
    rows: u32,
    queries: u32,
    database: Vec<f32>,
    query_vectors: Vec<f32>,
    source: DataSource,
}

impl fmt::Debug for KnnData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KnnData")
            .field("dim", &self.dim)
            .field("rows", &self.rows)
            .field("queries", &self.queries)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// The real data could not be used.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The file is larger than the reader accepts.
    #[error("{}: {refused}", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The size refused, the limit and why.
        refused: cosim_link::limits::Refused,
    },
    /// The file could not be read (missing, unreadable).
    #[error("cannot read KNN embeddings {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file size is not a whole number of embeddings.
    #[error(
        "{}: {bytes} bytes is not a whole number of {EMBEDDING_DIM}-d f32 embeddings (a multiple of {EMBEDDING_BYTES} bytes)",
        path.display()
    )]
    Size {
        /// The file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
    },
    /// An element is NaN or infinite.
    #[error("{}: element {index} is not finite ({value})", path.display())]
    NonFinite {
        /// The file.
        path: PathBuf,
        /// Index of the element in the file.
        index: usize,
        /// The value.
        value: f32,
    },
    /// Not enough vectors for the requested rows and queries.
    #[error(
        "{}: {available} vectors of dim {dim} can be derived, {needed} needed ({rows} rows + {queries} queries); ask for at most {} queries",
        path.display(),
        available.saturating_sub(*rows as usize)
    )]
    TooFewVectors {
        /// The file.
        path: PathBuf,
        /// Vector dimension.
        dim: u32,
        /// Vectors the file gives at that dimension.
        available: usize,
        /// Vectors needed.
        needed: usize,
        /// Database rows.
        rows: u32,
        /// Queries.
        queries: u32,
    },
}

impl KnnData {
    /// Seeded synthetic data (see the module docs).
    pub fn generate(dim: u32, rows: u32, queries: u32, seed: u64) -> KnnData {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut draw = |count: usize| -> Vec<f32> {
            (0..count).map(|_| rng.gen_range(-1.0_f32..1.0)).collect()
        };
        let database = draw(rows as usize * dim as usize);
        let query_vectors = draw(queries as usize * dim as usize);
        KnnData {
            dim,
            rows,
            queries,
            database,
            query_vectors,
            source: DataSource::Seeded { seed },
        }
    }

    /// The real embeddings at `data` (the data directory or the file itself), cut into
    /// vectors of `dim` (see the module docs).
    pub fn from_embeddings_file(
        data: &Path,
        dim: u32,
        rows: u32,
        queries: u32,
    ) -> Result<KnnData, DataError> {
        let path = embeddings_path(data);
        let values = read_embeddings(&path)?;
        let mut knn = KnnData::from_embeddings(&values, path.clone(), dim, rows, queries)?;
        let note = match crate::datafile::identify(&path, crate::datafile::BGE_M3_EMBEDDINGS) {
            Ok(identity) => identity.note(),
            Err(error) => format!(
                "; not checked against the paper's {} ({error})",
                crate::datafile::BGE_M3_EMBEDDINGS.name
            ),
        };
        knn.source = DataSource::Embeddings {
            path,
            embeddings: (values.len() / EMBEDDING_DIM) as u64,
            note,
        };
        Ok(knn)
    }

    /// `values` (the embeddings as one `f32` stream, read from `path`) cut into vectors of
    /// `dim`: the first `rows` are the database, the next `queries` the queries.
    pub fn from_embeddings(
        values: &[f32],
        path: PathBuf,
        dim: u32,
        rows: u32,
        queries: u32,
    ) -> Result<KnnData, DataError> {
        let width = dim as usize;
        let available = values.len().checked_div(width).unwrap_or(0);
        let needed = rows as usize + queries as usize;
        if available < needed || width == 0 {
            return Err(DataError::TooFewVectors {
                path,
                dim,
                available,
                needed,
                rows,
                queries,
            });
        }
        let database_end = rows as usize * width;
        let query_end = needed * width;
        Ok(KnnData {
            dim,
            rows,
            queries,
            database: values[..database_end].to_vec(),
            query_vectors: values[database_end..query_end].to_vec(),
            source: DataSource::Embeddings {
                path,
                embeddings: (values.len() / EMBEDDING_DIM) as u64,
                note: String::new(),
            },
        })
    }

    /// Elements per vector.
    pub fn dim(&self) -> u32 {
        self.dim
    }

    /// Database vectors.
    pub fn rows(&self) -> u32 {
        self.rows
    }

    /// Query vectors.
    pub fn queries(&self) -> u32 {
        self.queries
    }

    /// Where the data came from.
    pub fn source(&self) -> &DataSource {
        &self.source
    }

    /// Every database element, row-major.
    pub fn database(&self) -> &[f32] {
        &self.database
    }

    /// Every query element, query-major.
    pub fn query_vectors(&self) -> &[f32] {
        &self.query_vectors
    }

    /// Database row `row` (`row < rows`).
    pub fn row(&self, row: u32) -> &[f32] {
        vector(&self.database, self.dim, row)
    }

    /// Query `query` (`query < queries`).
    pub fn query(&self, query: u32) -> &[f32] {
        vector(&self.query_vectors, self.dim, query)
    }
}

/// Vector `index` of a row-major array of `dim`-element vectors.
fn vector(values: &[f32], dim: u32, index: u32) -> &[f32] {
    let start = index as usize * dim as usize;
    &values[start..start + dim as usize]
}

/// The embeddings file: `data` itself if it is not a directory, else `data/`[`EMBEDDINGS_FILE`].
pub fn embeddings_path(data: &Path) -> PathBuf {
    if data.is_dir() {
        data.join(EMBEDDINGS_FILE)
    } else {
        data.to_path_buf()
    }
}

/// Largest embeddings file read, in bytes: 256 MiB, 65,536 embeddings, 128 times the real
/// file (2,048,000 bytes) and far more than the largest shape needs (512 rows of 512 plus the
/// queries).
pub const MAX_EMBEDDINGS_BYTES: u64 = 256 << 20;

/// Reads the raw little-endian `f32` embeddings file at `path`: a regular file whose size is
/// a multiple of [`EMBEDDING_BYTES`], at most [`MAX_EMBEDDINGS_BYTES`] and within the
/// machine's memory, checked before anything is allocated for it.
pub fn read_embeddings(path: &Path) -> Result<Vec<f32>, DataError> {
    read_embeddings_within(path, MAX_EMBEDDINGS_BYTES)
}

/// [`read_embeddings`] with the size limit `max_bytes`.
pub fn read_embeddings_within(path: &Path, max_bytes: u64) -> Result<Vec<f32>, DataError> {
    use std::io::Read;
    let read_error = |source| DataError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let metadata = file.metadata().map_err(read_error)?;
    if !metadata.is_file() {
        return Err(read_error(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (give the embeddings file or its directory)",
        )));
    }
    let size = metadata.len();
    if size % EMBEDDING_BYTES as u64 != 0 {
        return Err(DataError::Size {
            path: path.to_path_buf(),
            bytes: size,
        });
    }
    let too_large = |refused| DataError::TooLarge {
        path: path.to_path_buf(),
        refused,
    };
    cosim_link::limits::check(
        "the embeddings file's size in bytes",
        size,
        max_bytes,
        "the real file is 2,048,000 bytes and the largest KNN shape reads less \
         (workloads::knn::data::MAX_EMBEDDINGS_BYTES)",
    )
    .map_err(too_large)?;
    // The bytes, then as many bytes of f32s: two bytes of memory per byte of the file.
    let capacity = cosim_link::limits::bytes("the embeddings file's size in bytes", size, 2)
        .map_err(too_large)?;
    let mut bytes: Vec<u8> = Vec::with_capacity(capacity);
    // At most the size just checked, even if the file grows meanwhile.
    file.take(size)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() as u64 != size {
        return Err(DataError::Size {
            path: path.to_path_buf(),
            bytes: bytes.len() as u64,
        });
    }
    let values: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|word| f32::from_le_bytes([word[0], word[1], word[2], word[3]]))
        .collect();
    if let Some((index, value)) = values
        .iter()
        .enumerate()
        .find(|(_, value)| !value.is_finite())
    {
        return Err(DataError::NonFinite {
            path: path.to_path_buf(),
            index,
            value: *value,
        });
    }
    Ok(values)
}

/// `values` as little-endian bytes (the device layout).
pub fn to_le_bytes(values: &[f32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|value| value.to_le_bytes())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file in the system temp directory, removed on drop.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(name: &str, bytes: &[u8]) -> TempFile {
            let path = std::env::temp_dir().join(format!("axle-knn-{}-{name}", std::process::id()));
            std::fs::write(&path, bytes).unwrap();
            TempFile(path)
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// `count` embeddings whose element `e` of vector `v` is `v * 10000 + e`.
    fn numbered(count: usize) -> Vec<f32> {
        (0..count * EMBEDDING_DIM)
            .map(|i| ((i / EMBEDDING_DIM) * 10_000 + i % EMBEDDING_DIM) as f32)
            .collect()
    }

    #[test]
    fn seeded_data_is_deterministic_and_in_range() {
        let a = KnnData::generate(16, 5, 3, 42);
        let b = KnnData::generate(16, 5, 3, 42);
        assert_eq!(a, b);
        assert_ne!(a.database(), KnnData::generate(16, 5, 3, 43).database());
        assert_eq!(a.database().len(), 80);
        assert_eq!(a.query_vectors().len(), 48);
        assert!(a
            .database()
            .iter()
            .chain(a.query_vectors())
            .all(|v| (-1.0..1.0).contains(v)));
        assert_eq!(a.source(), &DataSource::Seeded { seed: 42 });
    }

    #[test]
    fn seeded_data_first_values_are_pinned() {
        // Pins the generator (ChaCha8 from the seed, database first, gen_range(-1..1)): a
        // change here changes every recorded run's data.
        let data = KnnData::generate(8, 1, 1, 42);
        let bits: Vec<u32> = data
            .row(0)
            .iter()
            .chain(data.query(0))
            .map(|v| v.to_bits())
            .collect();
        assert_eq!(
            bits[..4],
            [0xbf0d_454c, 0x3eba_42f8, 0xbf35_0ce0, 0x3f66_8a7c],
            "first database values"
        );
        assert_eq!(
            bits[8..10],
            [0x3ef2_d908, 0xbed8_7ae0],
            "queries follow the database in the stream"
        );
        assert_eq!(KnnData::generate(8, 2, 1, 42).row(0), data.row(0));
    }

    #[test]
    fn file_of_1024_d_vectors_is_used_as_is() {
        let file = TempFile::new("as-is.vec", &to_le_bytes(&numbered(5)));
        let data = KnnData::from_embeddings_file(&file.0, 1024, 3, 2).unwrap();
        assert_eq!(data.row(2)[7], 20_007.0);
        assert_eq!(data.query(0)[0], 30_000.0);
        assert_eq!(data.query(1)[1023], 41_023.0);
        let DataSource::Embeddings {
            path, embeddings, ..
        } = data.source()
        else {
            panic!("{:?}", data.source());
        };
        assert_eq!((path, *embeddings), (&file.0, 5));
        // Five numbered embeddings are not the paper's file, and the source says so.
        let source = data.source().to_string();
        assert!(
            source.contains("5 1024-d f32 embeddings read")
                && source.contains("WARNING")
                && source.contains(crate::datafile::BGE_M3_EMBEDDINGS.sha256),
            "{source}"
        );
    }

    #[test]
    fn file_vectors_are_joined_in_pairs_for_dim_2048() {
        let file = TempFile::new("join.vec", &to_le_bytes(&numbered(5)));
        let data = KnnData::from_embeddings_file(&file.0, 2048, 1, 1).unwrap();
        assert_eq!(data.row(0)[1023], 1_023.0);
        assert_eq!(data.row(0)[1024], 10_000.0);
        assert_eq!(data.query(0)[0], 20_000.0);
        assert_eq!(data.query(0)[2047], 31_023.0);
        // 5 embeddings give 2 joined vectors (the fifth is dropped).
        assert!(matches!(
            KnnData::from_embeddings_file(&file.0, 2048, 2, 1),
            Err(DataError::TooFewVectors {
                available: 2,
                needed: 3,
                ..
            })
        ));
    }

    #[test]
    fn file_vectors_are_split_in_halves_for_dim_512() {
        let file = TempFile::new("split.vec", &to_le_bytes(&numbered(2)));
        let data = KnnData::from_embeddings_file(&file.0, 512, 3, 1).unwrap();
        assert_eq!(data.row(0)[0], 0.0);
        assert_eq!(data.row(1)[0], 512.0);
        assert_eq!(data.row(2)[511], 10_511.0);
        assert_eq!(data.query(0)[0], 10_512.0);
    }

    #[test]
    fn a_directory_path_names_the_standard_file() {
        let directory = std::env::temp_dir().join(format!("axle-knn-dir-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        std::fs::write(directory.join(EMBEDDINGS_FILE), to_le_bytes(&numbered(2))).unwrap();
        let data = KnnData::from_embeddings_file(&directory, 1024, 1, 1);
        std::fs::remove_dir_all(&directory).unwrap();
        assert_eq!(data.unwrap().query(0)[5], 10_005.0);
    }

    #[test]
    fn missing_file_is_a_read_error() {
        let missing = std::env::temp_dir().join("axle-knn-does-not-exist.vec");
        let error = KnnData::from_embeddings_file(&missing, 1024, 1, 1).unwrap_err();
        assert!(matches!(error, DataError::Read { .. }));
        assert!(error.to_string().contains("axle-knn-does-not-exist.vec"));
    }

    #[test]
    fn size_not_a_multiple_of_4096_is_rejected() {
        let mut bytes = to_le_bytes(&numbered(1));
        bytes.extend_from_slice(&[0; 4]);
        let file = TempFile::new("bad-size.vec", &bytes);
        let error = KnnData::from_embeddings_file(&file.0, 1024, 1, 0).unwrap_err();
        assert!(
            matches!(error, DataError::Size { bytes: 4100, .. }),
            "{error}"
        );
    }

    #[test]
    fn too_few_vectors_for_the_queries_is_rejected_with_the_maximum() {
        let file = TempFile::new("few.vec", &to_le_bytes(&numbered(4)));
        let error = KnnData::from_embeddings_file(&file.0, 1024, 3, 2).unwrap_err();
        assert!(matches!(
            error,
            DataError::TooFewVectors {
                available: 4,
                needed: 5,
                ..
            }
        ));
        assert!(error.to_string().contains("at most 1 queries"), "{error}");
        let empty = TempFile::new("empty.vec", &[]);
        assert!(matches!(
            KnnData::from_embeddings_file(&empty.0, 1024, 1, 1),
            Err(DataError::TooFewVectors { available: 0, .. })
        ));
    }

    #[test]
    fn a_file_beyond_the_size_limit_or_not_a_regular_file_is_refused_before_reading() {
        let file = TempFile::new("large.vec", &to_le_bytes(&numbered(3)));
        let error = read_embeddings_within(&file.0, 2 * EMBEDDING_BYTES as u64).unwrap_err();
        let text = error.to_string();
        assert!(
            matches!(error, DataError::TooLarge { .. })
                && text.contains("is 12288")
                && text.contains("limit of 8192")
                && text.contains("large.vec"),
            "{text}"
        );
        assert!(read_embeddings_within(&file.0, 3 * EMBEDDING_BYTES as u64).is_ok());
        // A device would be read without end.
        let error = read_embeddings(Path::new("/dev/zero")).unwrap_err();
        assert!(error.to_string().contains("/dev/zero"), "{error}");
        assert!(
            std::error::Error::source(&error)
                .is_some_and(|source| source.to_string().contains("not a regular file")),
            "{error:?}"
        );
    }

    #[test]
    fn non_finite_elements_are_rejected() {
        let mut values = numbered(1);
        values[17] = f32::NAN;
        let file = TempFile::new("nan.vec", &to_le_bytes(&values));
        assert!(matches!(
            KnnData::from_embeddings_file(&file.0, 1024, 1, 0),
            Err(DataError::NonFinite { index: 17, .. })
        ));
    }
}
