//! Why a graph could not be read, generated or put in CSR form.

use cosim_link::limits::Refused;

use crate::datafile::DataFileError;

/// Why a graph could not be read, generated or put in CSR form.
///
/// A variant that wraps another error keeps it as its [`source`](std::error::Error::source)
/// and does not repeat it in its own message (the CLI's `{:#}` prints the chain:
/// `line 1: the header's edge count is ...`); the others say everything themselves.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// The file could not be opened or read as lines (see [`DataFileError`]).
    #[error(transparent)]
    File(#[from] DataFileError),
    /// The tarball could not be walked.
    #[error("cannot read the tarball")]
    Tar(#[source] std::io::Error),
    /// A tarball entry's graph is wrong (the entry's name, then why).
    #[error("{name}")]
    Entry {
        /// The entry's path inside the tarball.
        name: String,
        /// What is wrong with its graph.
        #[source]
        source: Box<GraphError>,
    },
    /// More tarball entries than [`ReadLimits::tar_entries`](crate::datafile::ReadLimits::tar_entries) were looked at.
    #[error(transparent)]
    TarEntries(Refused),
    /// The tarball holds no `.mtx` file.
    #[error("the archive holds no .mtx file")]
    NoMtx,
    /// A header count is refused (beyond the model's limits or the machine's memory).
    #[error("line {line}")]
    Count {
        /// The header's line.
        line: usize,
        /// The refusal (the value, the limit, why).
        #[source]
        refused: Refused,
    },
    /// A header count is not a number.
    #[error("line {line}: `{token}` is not {what}")]
    NotACount {
        /// The header's line.
        line: usize,
        /// The text.
        token: String,
        /// `a vertex count` or `an edge count`.
        what: &'static str,
    },
    /// A header line of the wrong shape.
    #[error("line {line}: expected `{expected}`")]
    Header {
        /// The line.
        line: usize,
        /// The shape expected.
        expected: &'static str,
    },
    /// A second PACE `p` line.
    #[error("line {line}: a second `p` line")]
    SecondHeader {
        /// The line.
        line: usize,
    },
    /// A PACE edge line before the `p` line.
    #[error("line {line}: an edge before the `p` line")]
    EdgeBeforeHeader {
        /// The line.
        line: usize,
    },
    /// No header line at all: `no `p tw` header line` or `no size line`.
    #[error("no {what}")]
    NoHeader {
        /// The header missing.
        what: &'static str,
    },
    /// A Matrix Market file without its first line.
    #[error("empty file")]
    Empty,
    /// A Matrix Market banner other than `matrix coordinate pattern symmetric`.
    #[error("line 1: `{banner}` is not a `matrix coordinate pattern symmetric` banner")]
    Banner {
        /// The banner read.
        banner: String,
    },
    /// A Matrix Market size line of a matrix that is not square.
    #[error("line {line}: {rows} x {columns} is not square")]
    NotSquare {
        /// The line.
        line: usize,
        /// Rows, as written.
        rows: String,
        /// Columns, as written.
        columns: String,
    },
    /// An edge line with one vertex id.
    #[error("line {line}: missing vertex id")]
    MissingVertex {
        /// The line.
        line: usize,
    },
    /// A vertex id that is not a number.
    #[error("line {line}: `{token}` is not a vertex id")]
    NotAVertex {
        /// The line.
        line: usize,
        /// The text.
        token: String,
    },
    /// A vertex id outside `1..=vertices`.
    #[error("line {line}: vertex {id} is not in 1..={vertices} (the header's vertex count)")]
    VertexOutOfRange {
        /// The line.
        line: usize,
        /// The id, 1-based as written.
        id: u32,
        /// The header's vertex count.
        vertices: u32,
    },
    /// An edge past the header's count.
    #[error("line {line}: more edges than the header's {announced} (a file that says less than it holds is refused)")]
    MoreEdges {
        /// The line.
        line: usize,
        /// The header's edge count.
        announced: usize,
    },
    /// Fewer edges than the header announced.
    #[error("{read} {items}, {header} says {announced} (a truncated file?)")]
    Truncated {
        /// Edges read.
        read: usize,
        /// The header's count.
        announced: usize,
        /// `edges` or `entries`.
        items: &'static str,
        /// `the header` or `the size line`.
        header: &'static str,
    },
    /// A weight count other than the edge count ([`Csr::symmetric`](super::Csr::symmetric)).
    #[error("{weights} weights for {edges} edges")]
    WeightCount {
        /// Weights given.
        weights: usize,
        /// Edges.
        edges: usize,
    },
    /// More arcs than a `u32` offset counts ([`Csr::symmetric`](super::Csr::symmetric)).
    #[error("{edges} edges are too many arcs")]
    TooManyArcs {
        /// Edges.
        edges: usize,
    },
    /// An edge names a vertex beyond the vertex count ([`Csr::symmetric`](super::Csr::symmetric)).
    #[error("edge {index} ({u}, {v}) names a vertex beyond {vertices}")]
    VertexBeyond {
        /// The edge's index.
        index: usize,
        /// One end.
        u: u32,
        /// The other end.
        v: u32,
        /// The vertex count.
        vertices: u32,
    },
    /// An edge from a vertex to itself ([`Csr::symmetric`](super::Csr::symmetric)).
    #[error("edge {index} is a self-loop at vertex {vertex}")]
    SelfLoop {
        /// The edge's index.
        index: usize,
        /// The vertex.
        vertex: u32,
    },
    /// The same edge twice ([`Csr::symmetric`](super::Csr::symmetric)).
    #[error("duplicate edge between vertices {u} and {v}")]
    Duplicate {
        /// One end.
        u: u32,
        /// The other end.
        v: u32,
    },
    /// A generator asked for no vertices.
    #[error("no vertices")]
    NoVertices,
    /// A generator asked for an edge count it cannot make ([`road_like`](super::road_like): `for a
    /// <vertices>-vertex grid`; [`power_law`](super::power_law): `for <vertices> vertices`).
    #[error("{edges} edges is not in {least}..={most} for {shape}")]
    EdgeCount {
        /// Edges asked for.
        edges: usize,
        /// Fewest possible (a spanning tree).
        least: usize,
        /// Most possible.
        most: usize,
        /// The graph the generator was asked for.
        shape: String,
    },
}
