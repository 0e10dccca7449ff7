//! Graphs shared by SSSP and PageRank: the CSR form, the real inputs' readers and the seeded
//! generators.
//!
//! Both inputs of the paper are undirected graphs; every undirected edge `{u, v}` becomes the
//! two arcs `u -> v` and `v -> u` of a [`Csr`] (so "out-neighbours" and "in-neighbours" are the
//! same lists). Adjacency lists are sorted by target, so the CSR of an edge set does not depend
//! on the order the edges were read or generated in.
//!
//! # Readers
//!
//! - [`read_pace_gr_xz`]: the PACE-2016 `.gr` format (`p tw <vertices> <edges>`, then one
//!   `u v` line per undirected edge, 1-based, `c` comment lines), xz-compressed: the New York
//!   road network `NY.pace16.gr.xz` (264,346 vertices, 365,050 edges).
//! - [`read_mtx_tar_gz`]: a Matrix Market `coordinate pattern symmetric` matrix (one triangle,
//!   1-based, `%` comments) inside a gzip tarball: `coAuthorsDBLP.tar.gz` (299,067 vertices,
//!   977,676 edges).
//!
//! Both reject self-loops, duplicate edges, ids outside `1..=vertices` and an edge count other
//! than the header's, with a [`GraphError`] that names the line and the value. Both are bounded (see [`crate::datafile`]): a regular
//! file only, its decompressed bytes and line lengths counted as they are read, the header's
//! counts checked against [`MAX_VERTICES`], [`MAX_EDGES`] and the machine's memory before
//! anything is sized from them, an edge past the header's count refused where it is read,
//! and the edge list grown with the edges actually read (a header that overstates its count
//! reserves at most a million edges ahead).
//!
//! # Generators (seeded, ChaCha8)
//!
//! - [`road_like`]: a planar, low-degree, large-diameter graph: vertices on a near-square
//!   grid, a random spanning tree of the grid edges (Kruskal over a seeded shuffle) so every
//!   vertex is reachable, then further grid edges in the same shuffled order up to the edge
//!   count. Mean degree and diameter resemble a road network's (degree 2.8 for SSSP's sizes,
//!   diameter in the hundreds of hops at 264,346 vertices).
//! - [`power_law`]: a co-authorship-like graph: a random recursive tree (vertex `i` joins a
//!   uniform earlier vertex, so none is isolated), then Chung-Lu edges whose endpoints are
//!   drawn with density proportional to `(x + 30)^-1/2` over the vertex range (degree
//!   exponent about 3, maximum degree in the hundreds, like DBLP's), without self-loops or
//!   duplicates, and finally a seeded relabelling so hubs are spread over the id range.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::datafile::{open_regular, xz_decoder, BoundedLines, Limited, ReadLimits};
use cosim_link::limits::Refused;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

mod error;
mod input;
pub use error::GraphError;
pub(crate) use input::{vertex_block_tasks, GraphInput};

/// An undirected graph as an edge list: 0-based vertex pairs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdgeList {
    /// Vertices.
    pub vertices: u32,
    /// Undirected edges `(u, v)`, `u != v`, each once.
    pub edges: Vec<(u32, u32)>,
}

/// A directed graph in compressed sparse row form, optionally with arc weights.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Csr {
    offsets: Vec<u32>,
    targets: Vec<u32>,
    weights: Vec<u32>,
}

impl Csr {
    /// The symmetric CSR of `graph`: two arcs per edge, adjacency sorted by target. With
    /// `weights` (one per edge), both arcs of edge `e` get `weights[e]`. Fails on a vertex out
    /// of range, a self-loop, a duplicate edge, more than `u32::MAX` arcs, or a weight count
    /// other than the edge count.
    pub fn symmetric(graph: &EdgeList, weights: Option<&[u32]>) -> Result<Csr, GraphError> {
        let vertices = graph.vertices as usize;
        if let Some(weights) = weights {
            if weights.len() != graph.edges.len() {
                return Err(GraphError::WeightCount {
                    weights: weights.len(),
                    edges: graph.edges.len(),
                });
            }
        }
        let arcs = graph
            .edges
            .len()
            .checked_mul(2)
            .filter(|arcs| u32::try_from(*arcs).is_ok())
            .ok_or(GraphError::TooManyArcs {
                edges: graph.edges.len(),
            })?;
        let mut degree = vec![0_u32; vertices + 1];
        for (index, &(u, v)) in graph.edges.iter().enumerate() {
            if u as usize >= vertices || v as usize >= vertices {
                return Err(GraphError::VertexBeyond {
                    index,
                    u,
                    v,
                    vertices: graph.vertices,
                });
            }
            if u == v {
                return Err(GraphError::SelfLoop { index, vertex: u });
            }
            degree[u as usize] += 1;
            degree[v as usize] += 1;
        }
        let mut offsets = Vec::with_capacity(vertices + 1);
        let mut running = 0_u32;
        offsets.push(0);
        for d in &degree[..vertices] {
            running += d;
            offsets.push(running);
        }
        let mut cursor: Vec<u32> = offsets[..vertices].to_vec();
        let mut pairs = vec![(0_u32, 0_u32); arcs];
        for (index, &(u, v)) in graph.edges.iter().enumerate() {
            let weight = weights.map_or(0, |w| w[index]);
            for (from, to) in [(u, v), (v, u)] {
                let slot = &mut cursor[from as usize];
                pairs[*slot as usize] = (to, weight);
                *slot += 1;
            }
        }
        for vertex in 0..vertices {
            let list = &mut pairs[offsets[vertex] as usize..offsets[vertex + 1] as usize];
            list.sort_unstable();
            if let Some(pair) = list.windows(2).find(|pair| pair[0].0 == pair[1].0) {
                return Err(GraphError::Duplicate {
                    u: vertex as u32,
                    v: pair[0].0,
                });
            }
        }
        let targets = pairs.iter().map(|pair| pair.0).collect();
        let weights = if weights.is_some() {
            pairs.iter().map(|pair| pair.1).collect()
        } else {
            Vec::new()
        };
        Ok(Csr {
            offsets,
            targets,
            weights,
        })
    }

    /// Vertices.
    pub fn vertices(&self) -> u32 {
        (self.offsets.len() - 1) as u32
    }

    /// Arcs.
    pub fn arcs(&self) -> u32 {
        self.targets.len() as u32
    }

    /// The `vertices + 1` offsets.
    pub fn offsets(&self) -> &[u32] {
        &self.offsets
    }

    /// Every arc's target.
    pub fn targets(&self) -> &[u32] {
        &self.targets
    }

    /// Every arc's weight (empty for an unweighted graph).
    pub fn weights(&self) -> &[u32] {
        &self.weights
    }

    /// The arcs of `vertex`: `offsets[vertex]..offsets[vertex + 1]`.
    pub fn arc_range(&self, vertex: u32) -> std::ops::Range<usize> {
        self.offsets[vertex as usize] as usize..self.offsets[vertex as usize + 1] as usize
    }

    /// The neighbours of `vertex`.
    pub fn neighbors(&self, vertex: u32) -> &[u32] {
        &self.targets[self.arc_range(vertex)]
    }

    /// The degree of `vertex`.
    pub fn degree(&self, vertex: u32) -> u32 {
        self.offsets[vertex as usize + 1] - self.offsets[vertex as usize]
    }
}

/// `words` as little-endian bytes (the device layout).
pub fn words_to_le_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|word| word.to_le_bytes()).collect()
}

/// The file to read: `data` itself if it is not a directory, else `data/file_name`.
pub fn resolve(data: &Path, file_name: &str) -> PathBuf {
    if data.is_dir() {
        data.join(file_name)
    } else {
        data.to_path_buf()
    }
}

/// Where a graph workload's input comes from: the real file, read by an explicit data path at
/// paper scale, or otherwise a seeded generator of `vertices` vertices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GraphSource {
    /// The real input.
    File(PathBuf),
    /// A seeded generator.
    Generator {
        /// Vertices to generate.
        vertices: u32,
        /// Whether a data path was given but not used (small scale).
        data_ignored: bool,
    },
}

impl GraphSource {
    /// The source `options` select for a workload whose real input is `file_name`.
    pub fn of(
        options: &crate::WorkloadOptions,
        file_name: &str,
        paper_vertices: u32,
        small_vertices: u32,
    ) -> GraphSource {
        match (&options.data_dir, options.scale) {
            (Some(data), crate::Scale::Paper) => GraphSource::File(resolve(data, file_name)),
            (data, crate::Scale::Paper) => GraphSource::Generator {
                vertices: paper_vertices,
                data_ignored: data.is_some(),
            },
            (data, crate::Scale::Small) => GraphSource::Generator {
                vertices: small_vertices,
                data_ignored: data.is_some(),
            },
        }
    }

    /// The file, or `(generator)`, as input errors name it.
    pub fn path_text(&self) -> String {
        match self {
            GraphSource::File(path) => path.display().to_string(),
            GraphSource::Generator { .. } => "(generator)".into(),
        }
    }

    /// `"; --data is not used at small scale"` when a data path was ignored, else nothing.
    pub fn ignored_note(&self) -> &'static str {
        match self {
            GraphSource::Generator {
                data_ignored: true, ..
            } => "; --data is not used at small scale",
            _ => "",
        }
    }
}

/// Largest vertex count a graph file may announce: vertex ids are `u32` and the CSR holds
/// `vertices + 1` offsets.
pub const MAX_VERTICES: u64 = u32::MAX as u64 - 1;

/// Largest edge count a graph file may announce: every undirected edge is two arcs, counted
/// by `u32` offsets.
pub const MAX_EDGES: u64 = u32::MAX as u64 / 2;

/// Host memory a graph takes at its peak per edge, in bytes, for the memory check of a
/// header's counts: the edge list (8), the CSR build's (target, weight) pairs (16), the
/// targets and weights kept (16), SSSP's weights per edge (4) and the device image of the
/// arcs (8 to 16), rounded up.
pub const HOST_BYTES_PER_EDGE: u64 = 64;

/// Host memory a graph takes per vertex, in bytes (degrees, offsets, cursors, the host's
/// vector and its device image), rounded up.
pub const HOST_BYTES_PER_VERTEX: u64 = 32;

/// Edges reserved ahead from a header's count: the list grows with the edges actually read
/// beyond this, so a header that overstates its count costs nothing.
const RESERVE_AHEAD: u64 = 1 << 20;

/// The counts a graph file's header announces, checked.
#[derive(Clone, Copy, Debug)]
struct Announced {
    vertices: u32,
    edges: usize,
}

/// A header's vertex and edge counts, checked (see [`crate::datafile::check_graph_counts`]),
/// and the edge list sized for them.
fn header_counts(
    line: usize,
    vertices: &str,
    edges: &str,
) -> Result<(Announced, Vec<(u32, u32)>), GraphError> {
    let not_a_count = |token: &str, what| GraphError::NotACount {
        line,
        token: token.to_owned(),
        what,
    };
    let vertices: u64 = vertices
        .parse()
        .map_err(|_| not_a_count(vertices, "a vertex count"))?;
    let edges: u64 = edges
        .parse()
        .map_err(|_| not_a_count(edges, "an edge count"))?;
    let refused = |refused| GraphError::Count { line, refused };
    crate::datafile::check_graph_counts(vertices, edges).map_err(refused)?;
    // Both are checked against `MAX_VERTICES` and `MAX_EDGES`, which fit (the conversions
    // only fail where `usize` is narrower than the limits).
    let vertices = u32::try_from(vertices).map_err(|_| {
        refused(Refused {
            what: "the header's vertex count".into(),
            value: vertices,
            limit: u64::from(u32::MAX),
            reason: "vertex ids are 32-bit".into(),
        })
    })?;
    let count = usize::try_from(edges).map_err(|_| {
        refused(Refused {
            what: "the header's edge count".into(),
            value: edges,
            limit: usize::MAX as u64,
            reason: "an edge list is indexed by usize".into(),
        })
    })?;
    // Within the machine's budget (checked above), and no more than `RESERVE_AHEAD` ahead
    // of the edges actually read.
    let list =
        cosim_link::limits::vec_with_capacity("the header's edge count", edges.min(RESERVE_AHEAD))
            .map_err(refused)?;
    Ok((
        Announced {
            vertices,
            edges: count,
        },
        list,
    ))
}

/// Appends an edge, refusing one more than the header announced.
fn push_edge(
    edges: &mut Vec<(u32, u32)>,
    edge: (u32, u32),
    announced: usize,
    line: usize,
) -> Result<(), GraphError> {
    if edges.len() >= announced {
        return Err(GraphError::MoreEdges { line, announced });
    }
    edges.push(edge);
    Ok(())
}

/// What was read from the graph file at `path`, for a run's output: its name, the counts it
/// held and whether it is the paper's file `known` (size and SHA-256; a warning naming both
/// digests if not, logged once per file).
pub fn file_description(
    path: &Path,
    graph: &EdgeList,
    known: crate::datafile::KnownFile,
) -> String {
    let note = match crate::datafile::identify(path, known) {
        Ok(identity) => identity.note(),
        Err(error) => format!("; not checked against the paper's {} ({error})", known.name),
    };
    format!(
        "{}: {} vertices, {} edges = {} arcs read{note}",
        path.display(),
        graph.vertices,
        graph.edges.len(),
        2 * graph.edges.len() as u64
    )
}

/// A 1-based vertex id of a line, as 0-based.
#[inline]
fn vertex_id(token: Option<&[u8]>, vertices: u32, line: usize) -> Result<u32, GraphError> {
    match token.and_then(parse_u32) {
        Some(id) if id != 0 && id <= vertices => Ok(id - 1),
        _ => Err(not_a_vertex(token, vertices, line)),
    }
}

/// A vertex id read as a number ([`two_ids`]), as 0-based: as [`vertex_id`] reads its token.
#[inline]
fn vertex_id_number(id: u32, vertices: u32, line: usize) -> Result<u32, GraphError> {
    if id == 0 || id > vertices {
        return Err(GraphError::VertexOutOfRange { line, id, vertices });
    }
    Ok(id - 1)
}

/// The two numbers of a line that is exactly one to nine ASCII digits, one space and one to
/// nine ASCII digits (below 10^9 each: no overflow); `None` for any other line.
#[inline]
fn two_ids(line: &[u8]) -> Option<(u32, u32)> {
    let mut first = None;
    let mut value: u32 = 0;
    let mut digits = 0;
    for &byte in line {
        let digit = byte.wrapping_sub(b'0');
        if digit <= 9 && digits < 9 {
            value = value * 10 + u32::from(digit);
            digits += 1;
        } else if byte == b' ' && digits > 0 && first.is_none() {
            first = Some(value);
            value = 0;
            digits = 0;
        } else {
            return None;
        }
    }
    if digits == 0 {
        return None;
    }
    Some((first?, value))
}

/// Why `token` is not a vertex id of a graph of `vertices` vertices (out of line: the
/// parser's loop keeps only the test).
#[cold]
#[inline(never)]
fn not_a_vertex(token: Option<&[u8]>, vertices: u32, line: usize) -> GraphError {
    let Some(token) = token else {
        return GraphError::MissingVertex { line };
    };
    match parse_u32(token) {
        Some(id) => GraphError::VertexOutOfRange { line, id, vertices },
        None => GraphError::NotAVertex {
            line,
            // A token of a line checked as text (split at ASCII whitespace): UTF-8 itself.
            token: String::from_utf8_lossy(token).into_owned(),
        },
    }
}

/// A decimal `u32`, as `str::parse::<u32>` reads it: an optional `+`, then at least one
/// ASCII digit and nothing else; `None` for anything else or a value above `u32::MAX`.
#[inline]
fn parse_u32(token: &[u8]) -> Option<u32> {
    let digits = match token {
        [b'+', rest @ ..] => rest,
        _ => token,
    };
    if digits.is_empty() {
        return None;
    }
    let mut value: u32 = 0;
    if digits.len() <= 9 {
        // Below 10^9: no overflow to check.
        for &byte in digits {
            let digit = byte.wrapping_sub(b'0');
            if digit > 9 {
                return None;
            }
            value = value * 10 + u32::from(digit);
        }
        return Some(value);
    }
    for &byte in digits {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u32::from(digit))?;
    }
    Some(value)
}

/// The tokens of a line separated by ASCII whitespace (`str::split_ascii_whitespace` over
/// bytes).
fn ascii_tokens(line: &[u8]) -> AsciiTokens<'_> {
    AsciiTokens { rest: line }
}

/// See [`ascii_tokens`].
struct AsciiTokens<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for AsciiTokens<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let start = self
            .rest
            .iter()
            .position(|byte| !byte.is_ascii_whitespace())?;
        let rest = self.rest.get(start..).unwrap_or_default();
        let length = rest
            .iter()
            .position(u8::is_ascii_whitespace)
            .unwrap_or(rest.len());
        let (token, after) = rest.split_at(length);
        self.rest = after;
        Some(token)
    }
}

/// Parses a PACE-2016 `.gr` graph (see the module docs) with the default [`ReadLimits`].
pub fn parse_pace_gr(reader: impl BufRead) -> Result<EdgeList, GraphError> {
    parse_pace_gr_with(reader, ReadLimits::default())
}

/// Parses a PACE-2016 `.gr` graph, each line at most `limits.line_bytes`.
pub fn parse_pace_gr_with(
    reader: impl BufRead,
    limits: ReadLimits,
) -> Result<EdgeList, GraphError> {
    let mut lines = BoundedLines::new(reader, limits.line_bytes);
    let mut header: Option<(u32, usize)> = None;
    let mut edges = Vec::new();
    while let Some((number, line)) = lines.next_text_bytes()? {
        // The common line, two ids and one space between (`12 345`), in one pass; any other
        // line goes through the tokens below, which read such a line the same way.
        if let (Some((vertices, count)), Some((u, v))) = (header, two_ids(line)) {
            let u = vertex_id_number(u, vertices, number)?;
            let v = vertex_id_number(v, vertices, number)?;
            push_edge(&mut edges, (u, v), count, number)?;
            continue;
        }
        let mut tokens = ascii_tokens(line);
        match tokens.next() {
            None | Some(b"c") => continue,
            Some(b"p") => {
                if header.is_some() {
                    return Err(GraphError::SecondHeader { line: number });
                }
                let (Some(b"tw"), Some(v), Some(e)) = (tokens.next(), tokens.next(), tokens.next())
                else {
                    return Err(GraphError::Header {
                        line: number,
                        expected: "p tw <vertices> <edges>",
                    });
                };
                // Tokens of a line checked as text: UTF-8 themselves.
                let (v, e) = (String::from_utf8_lossy(v), String::from_utf8_lossy(e));
                let (announced, list) = header_counts(number, &v, &e)?;
                edges = list;
                header = Some((announced.vertices, announced.edges));
            }
            Some(first) => {
                let Some((vertices, count)) = header else {
                    return Err(GraphError::EdgeBeforeHeader { line: number });
                };
                let u = vertex_id(Some(first), vertices, number)?;
                let v = vertex_id(tokens.next(), vertices, number)?;
                push_edge(&mut edges, (u, v), count, number)?;
            }
        }
    }
    let Some((vertices, count)) = header else {
        return Err(GraphError::NoHeader {
            what: "`p tw` header line",
        });
    };
    if edges.len() != count {
        return Err(GraphError::Truncated {
            read: edges.len(),
            announced: count,
            items: "edges",
            header: "the header",
        });
    }
    Ok(EdgeList { vertices, edges })
}

/// Parses a Matrix Market `coordinate pattern symmetric` square matrix as an undirected graph
/// (see the module docs) with the default [`ReadLimits`].
pub fn parse_mtx(reader: impl BufRead) -> Result<EdgeList, GraphError> {
    parse_mtx_with(reader, ReadLimits::default())
}

/// Parses a Matrix Market graph, each line at most `limits.line_bytes`.
pub fn parse_mtx_with(reader: impl BufRead, limits: ReadLimits) -> Result<EdgeList, GraphError> {
    let mut lines = BoundedLines::new(reader, limits.line_bytes);
    let banner = match lines.next_line()? {
        Some((_, line)) => line.to_owned(),
        None => return Err(GraphError::Empty),
    };
    let banner_words: Vec<String> = banner
        .split_ascii_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    if banner_words
        != [
            "%%matrixmarket",
            "matrix",
            "coordinate",
            "pattern",
            "symmetric",
        ]
    {
        return Err(GraphError::Banner { banner });
    }
    let mut size: Option<(u32, usize)> = None;
    let mut edges = Vec::new();
    while let Some((number, line)) = lines.next_line()? {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('%') {
            continue;
        }
        let mut tokens = trimmed.split_ascii_whitespace();
        match size {
            None => {
                let (Some(rows), Some(columns), Some(entries), None) =
                    (tokens.next(), tokens.next(), tokens.next(), tokens.next())
                else {
                    return Err(GraphError::Header {
                        line: number,
                        expected: "rows columns entries",
                    });
                };
                if rows != columns {
                    return Err(GraphError::NotSquare {
                        line: number,
                        rows: rows.to_owned(),
                        columns: columns.to_owned(),
                    });
                }
                let (announced, list) = header_counts(number, rows, entries)?;
                edges = list;
                size = Some((announced.vertices, announced.edges));
            }
            Some((vertices, count)) => {
                let u = vertex_id(tokens.next().map(str::as_bytes), vertices, number)?;
                let v = vertex_id(tokens.next().map(str::as_bytes), vertices, number)?;
                push_edge(&mut edges, (u, v), count, number)?;
            }
        }
    }
    let Some((vertices, entries)) = size else {
        return Err(GraphError::NoHeader { what: "size line" });
    };
    if edges.len() != entries {
        return Err(GraphError::Truncated {
            read: edges.len(),
            announced: entries,
            items: "entries",
            header: "the size line",
        });
    }
    Ok(EdgeList { vertices, edges })
}

/// Reads an xz-compressed PACE `.gr` file (a regular file, bounded by the default
/// [`ReadLimits`]).
pub fn read_pace_gr_xz(path: &Path) -> Result<EdgeList, GraphError> {
    read_pace_gr_xz_with(path, ReadLimits::default())
}

/// Reads an xz-compressed PACE `.gr` file within `limits`.
pub fn read_pace_gr_xz_with(path: &Path, limits: ReadLimits) -> Result<EdgeList, GraphError> {
    let file = open_regular(path)?;
    let stream = Limited::new(xz_decoder(file)?, limits.decompressed_bytes);
    parse_pace_gr_with(BufReader::new(stream), limits)
}

/// Reads the first `.mtx` entry of a gzip-compressed tarball (a regular file, bounded by the
/// default [`ReadLimits`]).
pub fn read_mtx_tar_gz(path: &Path) -> Result<EdgeList, GraphError> {
    read_mtx_tar_gz_with(path, ReadLimits::default())
}

/// Reads the first `.mtx` entry of a gzip-compressed tarball within `limits`.
pub fn read_mtx_tar_gz_with(path: &Path, limits: ReadLimits) -> Result<EdgeList, GraphError> {
    let file = open_regular(path)?;
    let stream = Limited::new(
        flate2::read::GzDecoder::new(file),
        limits.decompressed_bytes,
    );
    read_mtx_tar_with(stream, limits)
}

/// Reads the first `.mtx` entry of a tar stream.
pub fn read_mtx_tar(stream: impl Read) -> Result<EdgeList, GraphError> {
    read_mtx_tar_with(stream, ReadLimits::default())
}

/// Reads the first `.mtx` entry of a tar stream within `limits`: raw entries (a GNU
/// long-name or PAX record is skipped, not read into memory), at most `limits.tar_entries`
/// of them.
pub fn read_mtx_tar_with(stream: impl Read, limits: ReadLimits) -> Result<EdgeList, GraphError> {
    let mut archive = tar::Archive::new(stream);
    let entries = archive.entries().map_err(GraphError::Tar)?.raw(true);
    for (index, entry) in entries.enumerate() {
        cosim_link::limits::check(
            "the number of tarball entries looked at",
            index as u64 + 1,
            limits.tar_entries,
            "the .mtx file is expected among the first entries (workloads::datafile::MAX_TAR_ENTRIES)",
        )
        .map_err(GraphError::TarEntries)?;
        let entry = entry.map_err(GraphError::Tar)?;
        let is_mtx = entry.header().entry_type().is_file()
            && entry
                .path()
                .map_err(GraphError::Tar)?
                .extension()
                .is_some_and(|extension| extension == "mtx");
        if is_mtx {
            let name = entry.path().map_err(GraphError::Tar)?.display().to_string();
            return parse_mtx_with(BufReader::new(entry), limits).map_err(|reason| {
                GraphError::Entry {
                    name,
                    source: Box::new(reason),
                }
            });
        }
    }
    Err(GraphError::NoMtx)
}

/// A road-like graph with exactly `vertices` vertices and `edges` undirected edges (see the
/// module docs). `edges` must be at least `vertices - 1` and at most the grid's edge count.
pub fn road_like(vertices: u32, edges: usize, seed: u64) -> Result<EdgeList, GraphError> {
    if vertices == 0 {
        return Err(GraphError::NoVertices);
    }
    let width = (f64::from(vertices).sqrt().ceil() as u32).max(1);
    let mut candidates = Vec::new();
    for vertex in 0..vertices {
        if vertex % width + 1 < width && vertex + 1 < vertices {
            candidates.push((vertex, vertex + 1));
        }
        if let Some(below) = vertex.checked_add(width).filter(|below| *below < vertices) {
            candidates.push((vertex, below));
        }
    }
    let tree = vertices as usize - 1;
    if edges < tree || edges > candidates.len() {
        return Err(GraphError::EdgeCount {
            edges,
            least: tree,
            most: candidates.len(),
            shape: format!("a {vertices}-vertex grid"),
        });
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    candidates.shuffle(&mut rng);
    let mut parent: Vec<u32> = (0..vertices).collect();
    fn root(parent: &mut [u32], mut vertex: u32) -> u32 {
        while parent[vertex as usize] != vertex {
            let grand = parent[parent[vertex as usize] as usize];
            parent[vertex as usize] = grand;
            vertex = grand;
        }
        vertex
    }
    let mut chosen = Vec::with_capacity(edges);
    let mut rest = Vec::new();
    for (u, v) in candidates {
        let (a, b) = (root(&mut parent, u), root(&mut parent, v));
        if a == b {
            rest.push((u, v));
        } else {
            parent[a as usize] = b;
            chosen.push((u, v));
        }
    }
    chosen.extend(rest.into_iter().take(edges - tree));
    Ok(EdgeList {
        vertices,
        edges: chosen,
    })
}

/// Offset of the power-law endpoint density `(x + OFFSET)^-1/2`: bounds the largest expected
/// degree (about 50 times the mean at 299,067 vertices).
const POWER_LAW_OFFSET: f64 = 30.0;

/// A power-law graph with exactly `vertices` vertices and `edges` undirected edges (see the
/// module docs). `edges` must be at least `vertices - 1` and well below `vertices^2 / 2`.
pub fn power_law(vertices: u32, edges: usize, seed: u64) -> Result<EdgeList, GraphError> {
    let tree = (vertices as usize).saturating_sub(1);
    let possible = (vertices as usize).saturating_mul((vertices as usize).saturating_sub(1)) / 2;
    if vertices < 2 || edges < tree || edges > possible / 4 {
        return Err(GraphError::EdgeCount {
            edges,
            least: tree,
            most: possible / 4,
            shape: format!("{vertices} vertices"),
        });
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut seen: HashSet<u64> = HashSet::with_capacity(edges);
    let key = |u: u32, v: u32| (u64::from(u.min(v)) << 32) | u64::from(u.max(v));
    let mut list = Vec::with_capacity(edges);
    for vertex in 1..vertices {
        let earlier = rng.gen_range(0..vertex);
        seen.insert(key(vertex, earlier));
        list.push((vertex, earlier));
    }
    let low = POWER_LAW_OFFSET.sqrt();
    let high = (f64::from(vertices) + POWER_LAW_OFFSET).sqrt();
    let endpoint = |rng: &mut ChaCha8Rng| -> u32 {
        let root = low + rng.gen::<f64>() * (high - low);
        let x = root * root - POWER_LAW_OFFSET;
        (x.max(0.0) as u32).min(vertices - 1)
    };
    while list.len() < edges {
        let u = endpoint(&mut rng);
        let v = endpoint(&mut rng);
        if u != v && seen.insert(key(u, v)) {
            list.push((u, v));
        }
    }
    let mut label: Vec<u32> = (0..vertices).collect();
    label.shuffle(&mut rng);
    for edge in &mut list {
        *edge = (label[edge.0 as usize], label[edge.1 as usize]);
    }
    Ok(EdgeList {
        vertices,
        edges: list,
    })
}

#[cfg(test)]
mod hostile;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::chain;

    #[test]
    fn an_edge_line_read_in_one_pass_reads_as_its_tokens_do() {
        for line in [
            "1 2",
            "12 345",
            "0 7",
            "123456789 987654321",
            "1234567890 1",
            "1 1234567890",
            "1  2",
            " 1 2",
            "1 2 ",
            "1\t2",
            "1",
            "1 ",
            " 1",
            "",
            "1 2 3",
            "+1 2",
            "1 -2",
            "c 1",
            "p 1",
            "1a 2",
            "01 002",
        ] {
            let tokens: Vec<&[u8]> = ascii_tokens(line.as_bytes()).collect();
            let expected = match tokens[..] {
                [u, v] if !line.contains(['\t', '+']) && line.split(' ').count() == 2 => {
                    parse_u32(u)
                        .zip(parse_u32(v))
                        .filter(|(u, v)| *u < 1_000_000_000 && *v < 1_000_000_000)
                }
                _ => None,
            };
            assert_eq!(two_ids(line.as_bytes()), expected, "{line:?}");
            if let Some((u, v)) = two_ids(line.as_bytes()) {
                assert_eq!(Some(u), parse_u32(tokens[0]));
                assert_eq!(Some(v), parse_u32(tokens[1]));
            }
        }
    }

    #[test]
    fn vertex_ids_are_read_as_str_parse_reads_them() {
        let tokens: &[&[u8]] = &[
            b"0",
            b"1",
            b"42",
            b"+7",
            b"+",
            b"-3",
            b"-",
            b"",
            b"4294967295",
            b"4294967296",
            b"99999999999",
            b"00012",
            b"1a",
            b"a1",
            b"++1",
            b"+-1",
            b" 1",
            "\u{e9}".as_bytes(),
        ];
        for &token in tokens {
            let text = std::str::from_utf8(token).unwrap();
            assert_eq!(parse_u32(token), text.parse::<u32>().ok(), "{text:?}");
        }
        for line in [
            " p\ttw  12\x0c3 \r",
            "",
            "  \t",
            "1",
            "1 2",
            "c caf\u{e9} x\u{a0}y",
        ] {
            let words: Vec<&[u8]> = ascii_tokens(line.as_bytes()).collect();
            let expected: Vec<&[u8]> = line.split_ascii_whitespace().map(str::as_bytes).collect();
            assert_eq!(words, expected, "{line:?}");
        }
    }

    fn triangle_plus_tail() -> EdgeList {
        EdgeList {
            vertices: 5,
            edges: vec![(0, 1), (2, 0), (1, 2), (3, 2)],
        }
    }

    #[test]
    fn symmetric_csr_has_two_sorted_arcs_per_edge_and_shared_weights() {
        let graph = triangle_plus_tail();
        let csr = Csr::symmetric(&graph, Some(&[10, 20, 30, 40])).unwrap();
        assert_eq!(csr.vertices(), 5);
        assert_eq!(csr.arcs(), 8);
        assert_eq!(csr.offsets(), [0, 2, 4, 7, 8, 8]);
        assert_eq!(csr.targets(), [1, 2, 0, 2, 0, 1, 3, 2]);
        assert_eq!(csr.weights(), [10, 20, 10, 30, 20, 30, 40, 40]);
        assert_eq!(csr.neighbors(2), [0, 1, 3]);
        assert_eq!(csr.degree(4), 0);
        let unweighted = Csr::symmetric(&graph, None).unwrap();
        assert!(unweighted.weights().is_empty());
        assert_eq!(unweighted.targets(), csr.targets());
    }

    #[test]
    fn csr_rejects_bad_edges() {
        let bad = |edges: Vec<(u32, u32)>| {
            Csr::symmetric(&EdgeList { vertices: 3, edges }, None)
                .unwrap_err()
                .to_string()
        };
        assert!(bad(vec![(0, 3)]).contains("beyond"));
        assert!(bad(vec![(1, 1)]).contains("self-loop"));
        assert!(bad(vec![(0, 1), (1, 0)]).contains("duplicate"));
        assert!(Csr::symmetric(&triangle_plus_tail(), Some(&[1])).is_err());
    }

    #[test]
    fn pace_reader_reads_one_based_edges() {
        let text = "c a comment\np tw 4 3\n1 2\n2 3\nc another\n4 1\n";
        let graph = parse_pace_gr(text.as_bytes()).unwrap();
        assert_eq!(graph.vertices, 4);
        assert_eq!(graph.edges, [(0, 1), (1, 2), (3, 0)]);
    }

    #[test]
    fn pace_reader_rejects_malformed_input() {
        for (text, reason) in [
            ("1 2\n", "before the `p` line"),
            ("p tw 3 2\n1 2\n", "1 edges, the header says 2"),
            ("p tw 3 1\n1 4\n", "not in 1..=3"),
            ("p tw 3 1\n0 1\n", "not in 1..=3"),
            ("p tw 3 1\n1 x\n", "not a vertex id"),
            ("p tw 3 1\n1\n", "missing vertex id"),
            ("p cep 3 1\n", "expected `p tw"),
            ("", "no `p tw` header"),
        ] {
            let error = chain(&parse_pace_gr(text.as_bytes()).unwrap_err());
            assert!(error.contains(reason), "{text:?}: {error}");
        }
    }

    const MTX: &str =
        "%%MatrixMarket matrix coordinate pattern symmetric\n% comment\n4 4 3\n2 1\n3 1\n4 3\n";

    #[test]
    fn mtx_reader_reads_one_triangle() {
        let graph = parse_mtx(MTX.as_bytes()).unwrap();
        assert_eq!(graph.vertices, 4);
        assert_eq!(graph.edges, [(1, 0), (2, 0), (3, 2)]);
    }

    #[test]
    fn mtx_reader_rejects_malformed_input() {
        for (text, reason) in [
            (
                "%%MatrixMarket matrix coordinate real general\n1 1 0\n",
                "banner",
            ),
            (
                "%%MatrixMarket matrix coordinate pattern symmetric\n3 4 1\n1 2\n",
                "not square",
            ),
            (
                "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n1 2\n",
                "size line says 2",
            ),
            (
                "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 1\n1 5\n",
                "not in 1..=3",
            ),
            (
                "%%MatrixMarket matrix coordinate pattern symmetric\n",
                "no size line",
            ),
            ("", "empty"),
        ] {
            let error = chain(&parse_mtx(text.as_bytes()).unwrap_err());
            assert!(error.contains(reason), "{text:?}: {error}");
        }
    }

    #[test]
    fn mtx_inside_a_tarball_is_found() {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, body) in [("x/readme.txt", "hello"), ("x/g.mtx", MTX)] {
            let mut header = tar::Header::new_gnu();
            header.set_size(body.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            builder
                .append_data(&mut header, name, body.as_bytes())
                .unwrap();
        }
        let archive = builder.into_inner().unwrap();
        let graph = read_mtx_tar(archive.as_slice()).unwrap();
        assert_eq!(graph.edges.len(), 3);
        let empty = tar::Builder::new(Vec::new()).into_inner().unwrap();
        assert!(matches!(
            read_mtx_tar(empty.as_slice()),
            Err(GraphError::NoMtx)
        ));
    }

    #[test]
    fn missing_files_are_errors() {
        let path = std::env::temp_dir().join("axle-graph-no-such-file.xz");
        assert!(read_pace_gr_xz(&path).is_err());
        assert!(read_mtx_tar_gz(&path).is_err());
    }

    /// Vertices reachable from vertex 0.
    fn reachable(csr: &Csr) -> usize {
        let mut seen = vec![false; csr.vertices() as usize];
        let mut stack = vec![0_u32];
        seen[0] = true;
        let mut count = 1;
        while let Some(vertex) = stack.pop() {
            for &next in csr.neighbors(vertex) {
                if !seen[next as usize] {
                    seen[next as usize] = true;
                    count += 1;
                    stack.push(next);
                }
            }
        }
        count
    }

    #[test]
    fn road_like_has_exact_sizes_is_connected_and_seeded() {
        let graph = road_like(1000, 1400, 7).unwrap();
        assert_eq!(graph.vertices, 1000);
        assert_eq!(graph.edges.len(), 1400);
        let csr = Csr::symmetric(&graph, None).unwrap();
        assert_eq!(csr.arcs(), 2800);
        assert_eq!(reachable(&csr), 1000);
        assert!((0..1000).all(|v| csr.degree(v) <= 4));
        assert_eq!(graph, road_like(1000, 1400, 7).unwrap());
        assert_ne!(graph, road_like(1000, 1400, 8).unwrap());
        assert!(road_like(1000, 998, 7).is_err());
        assert!(road_like(1000, 5000, 7).is_err());
    }

    #[test]
    fn power_law_has_exact_sizes_no_isolated_vertex_and_a_heavy_tail() {
        let graph = power_law(4096, 13_390, 3).unwrap();
        assert_eq!(graph.edges.len(), 13_390);
        let csr = Csr::symmetric(&graph, None).unwrap();
        assert_eq!(csr.arcs(), 26_780);
        assert_eq!(reachable(&csr), 4096);
        let max = (0..4096).map(|v| csr.degree(v)).max().unwrap();
        assert!(max > 30, "max degree {max}");
        assert_eq!(graph, power_law(4096, 13_390, 3).unwrap());
        assert_ne!(graph, power_law(4096, 13_390, 4).unwrap());
        assert!(power_law(10, 100, 3).is_err());
    }
}
