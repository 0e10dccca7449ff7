//! What SSSP and PageRank share of their input: the graph a [`GraphSource`] names, read from
//! the paper's file or generated, and the text that says which.

use std::path::Path;

use host_runtime::app::HostTask;

use super::{file_description, EdgeList, GraphError, GraphSource};
use crate::datafile::KnownFile;
use crate::WorkloadError;

/// A graph workload's input: its real file and reader, its generator and the generator's size.
#[derive(Clone, Copy)]
pub(crate) struct GraphInput {
    /// The workload, as input errors name it.
    pub workload: &'static str,
    /// The paper's file.
    pub known: KnownFile,
    /// Reads the file.
    pub read_file: fn(&Path) -> Result<EdgeList, GraphError>,
    /// What the generator makes, as the catalog names it ("seeded power-law graph").
    pub generator: &'static str,
    /// Generates `(vertices, edges, seed)`.
    pub generate: fn(u32, usize, u64) -> Result<EdgeList, GraphError>,
    /// The undirected edge count the generator uses for a vertex count.
    pub generated_edges: fn(u32) -> usize,
}

impl GraphInput {
    /// The source, as the catalog states it before reading anything (a run's own output says
    /// what it read: [`GraphInput::description`]).
    pub fn catalog(&self, source: &GraphSource, seed: u64) -> String {
        match source {
            GraphSource::File(path) => format!(
                "{}: the paper's {} if its size and SHA-256 are {}'s (the run reports the counts it reads and warns if not)",
                path.display(),
                self.known.what,
                self.known.name
            ),
            GraphSource::Generator { vertices, .. } => {
                let edges = (self.generated_edges)(*vertices);
                format!(
                    "{} (seed {seed}): {vertices} vertices, {edges} edges = {} arcs{}",
                    self.generator,
                    2 * edges,
                    source.ignored_note()
                )
            }
        }
    }

    /// The edges `source` names: the file read, or the graph generated with `seed`.
    pub fn edges(&self, source: &GraphSource, seed: u64) -> Result<EdgeList, WorkloadError> {
        match source {
            GraphSource::File(path) => (self.read_file)(path),
            GraphSource::Generator { vertices, .. } => {
                (self.generate)(*vertices, (self.generated_edges)(*vertices), seed)
            }
        }
        .map_err(|reason| self.error(source, reason))
    }

    /// `reason` as the input error of `source`.
    pub fn error(&self, source: &GraphSource, reason: GraphError) -> WorkloadError {
        WorkloadError::Input {
            workload: self.workload,
            path: source.path_text(),
            reason,
        }
    }

    /// What was read, for a run's output: [`file_description`] of the file's `edges`, or the
    /// generator's [`GraphInput::catalog`] text.
    pub fn description(&self, source: &GraphSource, edges: &EdgeList, seed: u64) -> String {
        match source {
            GraphSource::File(path) => file_description(path, edges, self.known),
            GraphSource::Generator { .. } => self.catalog(source, seed),
        }
    }
}

/// The host tasks of a launch whose result is one 4-byte value per vertex of `vertices`: blocks
/// of `per_task` consecutive vertices in order, independent of each other.
pub(crate) fn vertex_block_tasks(vertices: u32, per_task: u32) -> Vec<HostTask> {
    let mut tasks = Vec::new();
    let mut first = 0_u32;
    while first < vertices {
        let last = first.saturating_add(per_task).min(vertices);
        tasks.push(HostTask {
            id: tasks.len() as u32,
            needs: u64::from(first) * 4..u64::from(last) * 4,
            chain: None,
        });
        first = last;
    }
    tasks
}
