//! Data files from outside (`--data`): bounds on what they may make the reader do, and
//! whether a file is the paper's data set.
//!
//! # Bounds
//!
//! A data file is read as a stream, and everything it says is bounded before it is used:
//!
//! - only a regular file is read ([`open_regular`]): a FIFO or a device (`/dev/zero`) could
//!   block or never end;
//! - a compressed file's decompressed bytes are counted as they are produced ([`Limited`]) and
//!   the read stops past [`ReadLimits::decompressed_bytes`] (default
//!   [`MAX_DECOMPRESSED_BYTES`]): a small `.xz` or `.tar.gz` that expands without end (a
//!   decompression bomb) is refused after that many bytes, whatever its lines look like;
//! - a text line is read by [`BoundedLines`], which keeps at most
//!   [`ReadLimits::line_bytes`] (default [`MAX_LINE_BYTES`]) of it: a line longer than that
//!   is refused as soon as the limit is passed, without reading the rest of it into memory
//!   (a 2 GB line costs a few kilobytes and microseconds, not 4 GB and 18 s);
//! - the xz decoder's memory (the dictionary a `.xz` header asks for) is limited to
//!   [`MAX_XZ_DECODER_BYTES`] ([`xz_decoder`]);
//! - a tarball is walked in raw mode (no GNU long-name or PAX record is read into memory on
//!   the reader's behalf) and at most [`ReadLimits::tar_entries`] entries are looked at;
//! - the counts a header announces (a graph's vertices and edges) are checked against the
//!   model's limits and the machine's memory with `cosim_link::limits` before anything is
//!   sized from them (see `graph`).
//!
//! Every refusal is a [`cosim_link::limits::Refused`] (the value, the limit, why), carried in
//! a [`DataFileError`] (or the graph readers' `graph::GraphError`) that adds the line; the
//! workload adds the file's path (`WorkloadError::Input`, whose source the reason is).
//!
//! # Provenance
//!
//! The paper's inputs are the files listed, with their sizes and SHA-256, in
//! `shared/data/README.md`; [`NY_ROAD`], [`COAUTHORS_DBLP`] and [`BGE_M3_EMBEDDINGS`] copy
//! those facts here (the README may not be beside a checkout, so they are not read from it
//! at run time). [`identify`] compares a file with one of them: a file of another size or
//! digest is still used, but it is not the paper's data set and every description of the run
//! says so ([`Identity::warning`], also logged once per file). The digest is computed once
//! per process for a file of a given path, size and modification time (`axle eval` builds
//! the same workload for many runs).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, Read};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::SystemTime;

use cosim_link::limits::{self, Refused};
use sha2::{Digest, Sha256};

/// Longest text line accepted, in bytes (without its line break). The Matrix Market format
/// limits a line to 1,024 characters (`MM_MAX_LINE_LENGTH` of its reference `mmio.h`); a
/// PACE `.gr` line is two vertex ids. The real inputs' longest lines are 80 bytes
/// (`coAuthorsDBLP.mtx`'s comment rule) and 18 bytes (`NY.pace16.gr`).
pub const MAX_LINE_BYTES: usize = 1024;

/// Most bytes a compressed data file may expand to: 1 GiB, 86 times the larger real input
/// (`coAuthorsDBLP.mtx`, 12,359,300 bytes; `NY.pace16.gr` is 4,817,926), room for a graph of
/// about 50 million edges in text. Decompressing that much takes a few seconds.
pub const MAX_DECOMPRESSED_BYTES: u64 = 1 << 30;

/// Most memory the xz decoder may take (its dictionary, which an `.xz` header chooses):
/// 256 MiB, four times what `xz -9` needs (65 MiB, also what `NY.pace16.gr.xz` needs). liblzma
/// refuses a stream that needs more before allocating it.
pub const MAX_XZ_DECODER_BYTES: u64 = 256 << 20;

/// Why a data file could not be opened or read as lines.
///
/// A variant that wraps another error keeps it as its [`source`](std::error::Error::source)
/// and does not repeat it in its own message: `{:#}` (the CLI) prints the chain, for example
/// `line 3: the decompressed size in bytes (read so far) is ...`.
#[derive(Debug, thiserror::Error)]
pub enum DataFileError {
    /// The file could not be opened, or its metadata read.
    #[error("cannot open")]
    Open(#[source] io::Error),
    /// Not a regular file (a FIFO, a device, a directory).
    #[error("not a regular file (a data file is read to its end; give the file itself)")]
    NotRegular,
    /// liblzma refused to start a decoder.
    #[error("cannot start an xz decoder")]
    XzDecoder(#[source] xz2::stream::Error),
    /// Reading failed before the end of line `line` (the stream, the decompressor, or a
    /// [`Limited`] refusal, which is an [`io::Error`] holding a [`Refused`]).
    #[error("line {line}")]
    Read {
        /// The line being read (1-based).
        line: usize,
        /// What the reader said.
        #[source]
        source: io::Error,
    },
    /// A line longer than the limit (the refusal names the line, its length so far and the
    /// limit).
    #[error(transparent)]
    LineTooLong(Refused),
    /// A line is not UTF-8 text.
    #[error("line {line}: not text (invalid UTF-8)")]
    NotText {
        /// The line (1-based).
        line: usize,
    },
}

/// An xz decoder of `file` whose memory is limited to [`MAX_XZ_DECODER_BYTES`].
pub fn xz_decoder<R: Read>(file: R) -> Result<XzReader<R>, DataFileError> {
    let stream = xz2::stream::Stream::new_stream_decoder(MAX_XZ_DECODER_BYTES, 0)
        .map_err(DataFileError::XzDecoder)?;
    Ok(XzReader(xz2::read::XzDecoder::new_stream(file, stream)))
}

/// An xz decoder whose refusal of a stream beyond its memory limit names the limit.
pub struct XzReader<R: Read>(xz2::read::XzDecoder<R>);

impl<R: Read> std::fmt::Debug for XzReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XzReader")
            .field("total_out", &self.0.total_out())
            .finish_non_exhaustive()
    }
}

impl<R: Read> Read for XzReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf).map_err(|error| {
            let over = error
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<xz2::stream::Error>())
                .is_some_and(|inner| matches!(inner, xz2::stream::Error::MemLimit));
            if over {
                io::Error::other(format!(
                    "the .xz stream needs more memory to decode (its dictionary) than the limit of {MAX_XZ_DECODER_BYTES} bytes (workloads::datafile::MAX_XZ_DECODER_BYTES; `xz -9` needs 65 MiB)"
                ))
            } else {
                error
            }
        })
    }
}

/// Most tarball entries looked at for the `.mtx` file (the real tarball has one).
pub const MAX_TAR_ENTRIES: u64 = 64;

/// Most bytes hashed to identify a file: a file larger than this is not any of the paper's
/// (the largest is 3,206,075 bytes) and is reported by its size alone.
pub const MAX_HASHED_BYTES: u64 = 256 << 20;

/// Bounds of one read (the defaults are the constants above; tests lower them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadLimits {
    /// Longest line, in bytes.
    pub line_bytes: usize,
    /// Most decompressed bytes.
    pub decompressed_bytes: u64,
    /// Most tarball entries looked at.
    pub tar_entries: u64,
}

impl Default for ReadLimits {
    fn default() -> Self {
        ReadLimits {
            line_bytes: MAX_LINE_BYTES,
            decompressed_bytes: MAX_DECOMPRESSED_BYTES,
            tar_entries: MAX_TAR_ENTRIES,
        }
    }
}

/// Opens `path` for reading if it is a regular file.
pub fn open_regular(path: &Path) -> Result<File, DataFileError> {
    let file = File::open(path).map_err(DataFileError::Open)?;
    let metadata = file.metadata().map_err(DataFileError::Open)?;
    if !metadata.is_file() {
        return Err(DataFileError::NotRegular);
    }
    Ok(file)
}

/// A reader that fails once more than `limit` bytes have come through it (a decompressor's
/// output: the bytes a small file expands to).
#[derive(Debug)]
pub struct Limited<R> {
    inner: R,
    read: u64,
    limit: u64,
}

impl<R> Limited<R> {
    /// `inner`, limited to `limit` bytes.
    pub fn new(inner: R, limit: u64) -> Limited<R> {
        Limited {
            inner,
            read: 0,
            limit,
        }
    }

    /// Bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        self.read
    }
}

impl<R: Read> Read for Limited<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // At most one byte past the limit is asked for, so the refusal comes exactly there.
        let room = self.limit.saturating_sub(self.read).saturating_add(1);
        let want = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        let slice = buf.get_mut(..want).unwrap_or_default();
        let count = self.inner.read(slice)?;
        self.read = self.read.saturating_add(count as u64);
        if self.read > self.limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                Refused {
                    what: "the decompressed size in bytes (read so far)".into(),
                    value: self.read,
                    limit: self.limit,
                    reason: "a larger expansion is refused as a decompression bomb \
                             (workloads::datafile::MAX_DECOMPRESSED_BYTES)"
                        .into(),
                },
            ));
        }
        Ok(count)
    }
}

/// Lines of a text stream, each at most `limit` bytes: a longer line is refused as soon as
/// the limit is passed, having kept only `limit` bytes of it.
#[derive(Debug)]
pub struct BoundedLines<R> {
    reader: R,
    line: Vec<u8>,
    /// Bytes of the reader's buffer that the last line, returned in place, took (with its
    /// line break): consumed at the next call.
    pending: usize,
    number: usize,
    limit: usize,
}

impl<R: BufRead> BoundedLines<R> {
    /// The lines of `reader`, each at most `limit` bytes.
    pub fn new(reader: R, limit: usize) -> BoundedLines<R> {
        BoundedLines {
            reader,
            // `limit` is a constant of this module or a test's, not a file's.
            line: Vec::with_capacity(limit.min(MAX_LINE_BYTES)),
            pending: 0,
            number: 0,
            limit,
        }
    }

    /// The next line (1-based number, text without the line break), or `None` at the end.
    pub fn next_line(&mut self) -> Result<Option<(usize, &str)>, DataFileError> {
        let Some((number, line)) = self.next_raw()? else {
            return Ok(None);
        };
        let text =
            std::str::from_utf8(line).map_err(|_| DataFileError::NotText { line: number })?;
        Ok(Some((number, text)))
    }

    /// The next line as [`BoundedLines::next_line`] checks it (UTF-8 text, at most the limit),
    /// as its bytes: for a parser that reads ASCII tokens. An ASCII line (every line of the
    /// real inputs) is checked with one pass over its bytes, not the full UTF-8 decoder.
    pub fn next_text_bytes(&mut self) -> Result<Option<(usize, &[u8])>, DataFileError> {
        let Some((number, line)) = self.next_raw()? else {
            return Ok(None);
        };
        if !line.is_ascii() && std::str::from_utf8(line).is_err() {
            return Err(DataFileError::NotText { line: number });
        }
        Ok(Some((number, line)))
    }

    /// The next line's bytes, not yet checked as text (at most the limit).
    fn next_raw(&mut self) -> Result<Option<(usize, &[u8])>, DataFileError> {
        self.reader.consume(std::mem::take(&mut self.pending));
        self.line.clear();
        let number = self.number + 1;
        // The common case: the whole line, with its line break, is in the reader's buffer. It
        // is returned from there, not copied (the buffer is consumed at the next call).
        let in_place = {
            let buffer = fill(&mut self.reader, number)?;
            find_newline(buffer).filter(|&length| length <= self.limit)
        };
        if let Some(length) = in_place {
            // A second look at the same buffer (`BufRead`: it is unchanged until consumed).
            let buffer = fill(&mut self.reader, number)?;
            self.pending = length + 1;
            self.number = number;
            let mut line = buffer.get(..length).unwrap_or_default();
            if let [rest @ .., b'\r'] = line {
                line = rest;
            }
            return Ok(Some((number, line)));
        }
        let mut any = false;
        loop {
            let buffer = fill(&mut self.reader, number)?;
            if buffer.is_empty() {
                break;
            }
            any = true;
            let newline = find_newline(buffer);
            let take = newline.unwrap_or(buffer.len());
            let length = self.line.len().saturating_add(take);
            if length > self.limit {
                let refused = Refused {
                    what: format!("the length of line {number} in bytes (read so far)"),
                    value: length as u64,
                    limit: self.limit as u64,
                    reason: "a data file's lines are short (the Matrix Market format allows \
                             1024 characters); workloads::datafile::MAX_LINE_BYTES"
                        .into(),
                };
                return Err(DataFileError::LineTooLong(refused));
            }
            self.line
                .extend_from_slice(buffer.get(..take).unwrap_or_default());
            self.reader.consume(take + usize::from(newline.is_some()));
            if newline.is_some() {
                break;
            }
        }
        if !any {
            return Ok(None);
        }
        self.number = number;
        if self.line.last() == Some(&b'\r') {
            self.line.pop();
        }
        Ok(Some((number, &self.line)))
    }
}

/// The reader's buffer, refilled if empty; a read error is reported at line `line`.
fn fill<R: BufRead>(reader: &mut R, line: usize) -> Result<&[u8], DataFileError> {
    reader
        .fill_buf()
        .map_err(|source| DataFileError::Read { line, source })
}

/// The position of the first `\n` in `bytes` (the `memchr` crate's search).
#[inline]
fn find_newline(bytes: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', bytes)
}

/// One of the paper's data files, as `shared/data/README.md` lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownFile {
    /// File name.
    pub name: &'static str,
    /// What it is.
    pub what: &'static str,
    /// Size in bytes.
    pub bytes: u64,
    /// SHA-256, lowercase hex.
    pub sha256: &'static str,
}

/// The SSSP input (source: `shared/data/README.md`, its size from the file it lists).
pub const NY_ROAD: KnownFile = KnownFile {
    name: "NY.pace16.gr.xz",
    what: "DIMACS NY road network, PACE-2016 form: 264346 vertices, 365050 edges",
    bytes: 600_520,
    sha256: "12fe28df6045ea94f84af244a37f6e47eec1909e89f0c5571a928b53f374a9b1",
};

/// The PageRank input (source: `shared/data/README.md`).
pub const COAUTHORS_DBLP: KnownFile = KnownFile {
    name: "coAuthorsDBLP.tar.gz",
    what: "DIMACS10 coAuthorsDBLP, SuiteSparse: 299067 vertices, 977676 edges",
    bytes: 3_206_075,
    sha256: "e74e2319f100b51468732f06f31643007e59aea6623cc34a54ee80cb0f63420d",
};

/// The KNN input (source: `shared/data/README.md`).
pub const BGE_M3_EMBEDDINGS: KnownFile = KnownFile {
    name: "bge-m3-1024d-paragraph-queries.vec",
    what: "500 bge-m3 1024-d paragraph embeddings",
    bytes: 2_048_000,
    sha256: "15d24cbc1bbdac8ffeb1946e60107860d30d3b7abf329714f546893f77a1c255",
};

/// What a file is, compared with the paper's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its SHA-256 (lowercase hex); `None` if larger than [`MAX_HASHED_BYTES`].
    pub sha256: Option<String>,
    /// The paper's file it was compared with.
    pub known: KnownFile,
}

impl Identity {
    /// Whether this is the paper's file (same size and digest).
    pub fn is_known(&self) -> bool {
        self.bytes == self.known.bytes && self.sha256.as_deref() == Some(self.known.sha256)
    }

    /// `None` for the paper's file; otherwise a sentence saying that it is not, naming the
    /// file and both digests.
    pub fn warning(&self) -> Option<String> {
        if self.is_known() {
            return None;
        }
        let digest = self.sha256.as_deref().map_or_else(
            || format!("not hashed, larger than {MAX_HASHED_BYTES} bytes"),
            str::to_owned,
        );
        Some(format!(
            "{} is not the paper's data set: {} bytes, SHA-256 {digest}; the paper's {} ({}) has {} bytes, SHA-256 {} (shared/data/README.md)",
            self.path.display(),
            self.bytes,
            self.known.name,
            self.known.what,
            self.known.bytes,
            self.known.sha256
        ))
    }

    /// `; the paper's <name> (size and SHA-256 match)` or `; WARNING: <warning>`: what a
    /// run's description adds after the counts it read.
    pub fn note(&self) -> String {
        match self.warning() {
            None => format!("; the paper's {} (size and SHA-256 match)", self.known.name),
            Some(warning) => format!("; WARNING: {warning}"),
        }
    }
}

/// What the digest cache keys on: the file's path, size and modification time.
type CacheKey = (PathBuf, u64, Option<SystemTime>);

/// Compares the file at `path` with `known` (see the module docs): its size, and its SHA-256
/// computed once per process for a given path, size and modification time. The first time a
/// file is found not to be the paper's, a warning is logged.
pub fn identify(path: &Path, known: KnownFile) -> io::Result<Identity> {
    static DIGESTS: OnceLock<Mutex<HashMap<CacheKey, Option<String>>>> = OnceLock::new();
    let metadata = std::fs::metadata(path)?;
    let bytes = metadata.len();
    let key = (path.to_path_buf(), bytes, metadata.modified().ok());
    // Held while hashing, so that runs in parallel hash a file once.
    let mut digests = DIGESTS
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let (sha256, first) = match digests.get(&key) {
        Some(sha256) => (sha256.clone(), false),
        None => {
            let sha256 = if bytes <= MAX_HASHED_BYTES {
                Some(sha256_of(path, MAX_HASHED_BYTES)?)
            } else {
                None
            };
            digests.insert(key, sha256.clone());
            (sha256, true)
        }
    };
    drop(digests);
    let identity = Identity {
        path: path.to_path_buf(),
        bytes,
        sha256,
        known,
    };
    if first {
        if let Some(warning) = identity.warning() {
            log::warn!("{warning}");
        }
    }
    Ok(identity)
}

/// The SHA-256 of the first `limit` bytes of the file at `path`, lowercase hex.
fn sha256_of(path: &Path, limit: u64) -> io::Result<String> {
    let mut file = File::open(path)?.take(limit);
    let mut hasher = Sha256::new();
    io::copy(&mut file, &mut hasher)?;
    Ok(hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect())
}

/// Checks the vertex and edge counts a graph file's header announces, before anything is
/// sized from them: against the model's limits (vertex ids and arc offsets are `u32`) and the
/// machine's memory (a graph's peak host footprint per vertex and per edge).
pub fn check_graph_counts(vertices: u64, edges: u64) -> Result<(), Refused> {
    limits::check(
        "the header's vertex count",
        vertices,
        crate::graph::MAX_VERTICES,
        "vertex ids and the CSR's offsets are 32-bit",
    )?;
    limits::check(
        "the header's edge count",
        edges,
        crate::graph::MAX_EDGES,
        "each edge is two arcs and arc offsets are 32-bit",
    )?;
    limits::bytes(
        "the header's vertex count",
        vertices,
        crate::graph::HOST_BYTES_PER_VERTEX,
    )?;
    limits::bytes(
        "the header's edge count",
        edges,
        crate::graph::HOST_BYTES_PER_EDGE,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limited_refuses_one_byte_past_the_limit_naming_both() {
        let data = vec![b'x'; 100];
        let mut exact = Limited::new(data.as_slice(), 100);
        let mut sink = Vec::new();
        assert_eq!(exact.read_to_end(&mut sink).unwrap(), 100);
        let mut over = Limited::new(data.as_slice(), 99);
        let error = over.read_to_end(&mut Vec::new()).unwrap_err().to_string();
        assert!(
            error.contains("is 100") && error.contains("limit of 99") && error.contains("bomb"),
            "{error}"
        );
    }

    #[test]
    fn bounded_lines_split_and_refuse_a_long_line_having_kept_only_the_limit() {
        let text = "a b\r\n\nccc\nlast";
        let mut lines = BoundedLines::new(text.as_bytes(), 4);
        assert_eq!(lines.next_line().unwrap(), Some((1, "a b")));
        assert_eq!(lines.next_line().unwrap(), Some((2, "")));
        assert_eq!(lines.next_line().unwrap(), Some((3, "ccc")));
        assert_eq!(lines.next_line().unwrap(), Some((4, "last")));
        assert_eq!(lines.next_line().unwrap(), None);
        let long = format!("1 2\n{}\n", "9".repeat(100));
        let mut lines = BoundedLines::new(io::BufReader::with_capacity(8, long.as_bytes()), 10);
        assert!(lines.next_line().unwrap().is_some());
        let error = lines.next_line().unwrap_err().to_string();
        assert!(
            error.contains("line 2") && error.contains("limit of 10"),
            "{error}"
        );
        assert!(lines.line.len() <= 10);
    }

    #[test]
    fn lines_in_the_buffer_and_across_its_refills_read_the_same() {
        let text = "c caf\u{e9}\r\np tw 3 2\n\n1 2\r\n2 3\nlast";
        let expected = [
            (1, "c caf\u{e9}"),
            (2, "p tw 3 2"),
            (3, ""),
            (4, "1 2"),
            (5, "2 3"),
            (6, "last"),
        ];
        for capacity in [1, 2, 3, 5, 8, 64] {
            let reader = || io::BufReader::with_capacity(capacity, text.as_bytes());
            let mut lines = BoundedLines::new(reader(), 16);
            let mut bytes = BoundedLines::new(reader(), 16);
            for (number, line) in expected {
                assert_eq!(
                    lines.next_line().unwrap(),
                    Some((number, line)),
                    "{capacity}"
                );
                assert_eq!(
                    bytes.next_text_bytes().unwrap(),
                    Some((number, line.as_bytes())),
                    "{capacity}"
                );
            }
            assert_eq!(lines.next_line().unwrap(), None);
            assert_eq!(bytes.next_text_bytes().unwrap(), None);
        }
        let mut lines = BoundedLines::new(&b"1 2\n3 \xff\n"[..], 16);
        assert!(lines.next_text_bytes().unwrap().is_some());
        assert!(matches!(
            lines.next_text_bytes(),
            Err(DataFileError::NotText { line: 2 })
        ));
    }

    #[test]
    fn a_device_or_directory_is_not_read_as_a_data_file() {
        assert!(matches!(
            open_regular(Path::new("/dev/zero")),
            Err(DataFileError::NotRegular)
        ));
        assert!(open_regular(&std::env::temp_dir()).is_err());
    }

    #[test]
    fn identity_of_another_file_warns_with_both_digests_and_is_cached() {
        let path = std::env::temp_dir().join(format!("axle-identity-{}.vec", std::process::id()));
        std::fs::write(&path, b"abc").unwrap();
        let identity = identify(&path, BGE_M3_EMBEDDINGS).unwrap();
        let again = identify(&path, BGE_M3_EMBEDDINGS).unwrap();
        std::fs::remove_file(&path).unwrap();
        // SHA-256("abc"), FIPS 180-2's first example.
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(identity.sha256.as_deref(), Some(abc));
        assert_eq!(again, identity);
        assert!(!identity.is_known());
        let warning = identity.warning().unwrap();
        assert!(
            warning.contains(abc)
                && warning.contains(BGE_M3_EMBEDDINGS.sha256)
                && warning.contains("axle-identity-")
                && warning.contains("not the paper's"),
            "{warning}"
        );
        assert!(identity.note().starts_with("; WARNING: "));
    }

    #[test]
    fn graph_counts_beyond_the_model_or_the_machine_are_refused() {
        assert!(check_graph_counts(264_346, 365_050).is_ok());
        let refused = check_graph_counts(5_000_000_000, 1).unwrap_err();
        assert_eq!(refused.value, 5_000_000_000);
        assert_eq!(refused.limit, crate::graph::MAX_VERTICES);
        let refused = check_graph_counts(5, 1 << 40).unwrap_err();
        assert_eq!(refused.value, 1 << 40);
        // Within the model's limits, beyond this machine's memory (2^31 - 1 edges of 64 bytes
        // are 128 GiB).
        let footprint = crate::graph::MAX_EDGES * crate::graph::HOST_BYTES_PER_EDGE;
        if limits::Machine::get().memory_budget < footprint {
            let refused = check_graph_counts(5, crate::graph::MAX_EDGES).unwrap_err();
            assert!(refused.to_string().contains("available"), "{refused}");
        }
    }
}
