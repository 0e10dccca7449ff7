//! SSSP, paper Table IV (d): Graph Analytics, the New York road network (264,346 vertices).
//!
//! # Input
//!
//! With real data (`options.data_dir` is the data directory or the file itself) the graph is
//! [`DATA_FILE`], the DIMACS New York road network in its PACE-2016 form: 264,346 vertices and
//! 365,050 undirected edges, which become **730,100 arcs** (Table IV's 733,846 counts the
//! original DIMACS arcs, whose duplicates the PACE conversion removed). The file has no
//! weights: every undirected edge gets a seeded integer weight uniform in `1..=`[`MAX_WEIGHT`]
//! (ChaCha8 seeded with `seed`, in file order; both arcs share it). Without the file,
//! [`crate::graph::road_like`] generates exactly 264,346 vertices and 366,923 edges (733,846
//! arcs), weighted the same way. `--scale small` always uses the generator with
//! [`SMALL_VERTICES`] vertices and the same edge-to-vertex ratio. The source is vertex 0 (node
//! 1 of the file).
//!
//! # The offload: frontier-based Bellman-Ford
//!
//! The weighted CSR and the distances live in device memory ([`firmware::kernels::sssp`]).
//! Each launch relaxes the out-arcs of the current frontier: the CCM does the edge traversal
//! and the vertex update (an atomic minimum on the target's distance in device memory, and a
//! claim stamp so that each improved vertex is reported once) and writes one 4-byte slot per
//! relaxed arc: the new distance if the arc improved its target (flagged if it claimed it),
//! else infinity. Items are blocks of [`VERTICES_PER_ITEM`] frontier vertices; the launch
//! number is the claim stamp.
//!
//! Per launch the host writes, as [`LaunchPlan::inputs`], the frontier (sorted vertex ids) and
//! its slot prefix (first result slot of each frontier vertex): the previous iteration's host
//! result. The first frontier is the source alone. Iteration stops when a launch improves no
//! vertex with out-arcs (convergence: the distances are then exact).
//!
//! # Host tasks
//!
//! The result space is cut into tasks of [`TASK_SLOTS`] slots (256 bytes, 8 DMA slots): each
//! lowers the host's copy of the improved targets' distances and lists the targets its slots
//! claimed ([`host::collect_claimed`]). Tasks are independent (no chain): their lists are
//! disjoint, and the shared distance array takes atomic minima. The launch's final step
//! concatenates the lists in task order into the next frontier and its slot prefix
//! ([`host::next_frontier`]), so the next launch depends on every task of this one.
//!
//! The frontiers depend only on the device's results, never on the order in which host tasks
//! run, so every mode performs the same launches over the same frontiers (the CCM's item order
//! is the emulator's deterministic model; see the kernel docs).
//!
//! # Checking
//!
//! The host's distances after convergence must equal [`reference::dijkstra`] exactly.

pub mod host;
pub mod reference;

use std::fmt;

use firmware::kernels::sssp::{pack_frontier, SsspParameters, INFINITY};
use host_runtime::app::{
    Application, DeviceInput, DeviceLoader, HostCost, HostTask, LaunchPlan, LoadError, Verification,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use shared_abi::{CommandDescriptor, DeviceAddress, KernelId};

use crate::graph::{self, words_to_le_bytes, Csr, EdgeList, GraphSource};
use crate::{WorkloadError, WorkloadInfo, WorkloadOptions};

/// Catalog name.
pub const NAME: &str = "sssp";

/// The real input's file name in the data directory.
pub const DATA_FILE: &str = "NY.pace16.gr.xz";

/// Table IV's vertices.
pub const PAPER_VERTICES: u32 = 264_346;

/// Table IV's arcs (the generator's undirected edges are half of them).
pub const PAPER_ARCS: usize = 733_846;

/// Vertices at `--scale small` (a 64 x 64 grid).
pub const SMALL_VERTICES: u32 = 4096;

/// Largest synthetic edge weight; weights are uniform in `1..=MAX_WEIGHT`.
pub const MAX_WEIGHT: u32 = 1000;

/// The source vertex.
pub const SOURCE: u32 = 0;

/// Frontier vertices per CCM work item: 4 vertices of a road network carry about 11 arcs,
/// about 2 µs of µthread time, so a frontier of a few hundred vertices still spreads over
/// many µthreads (fine-grained offloading, as the paper describes SSSP).
pub const VERTICES_PER_ITEM: u32 = 4;

/// Result slots (4 bytes each) per host task: 256 bytes, 8 DMA slots, about 1 µs of host
/// work; a launch's few kilobytes of result then spread over many host µthreads.
pub const TASK_SLOTS: u32 = 64;

/// Alignment of every device allocation (a 64-byte line).
pub const DEVICE_ALIGNMENT: u64 = 64;

/// Seed offset of the weight generator (so weights and the generated topology use different
/// streams of the same seed).
const WEIGHT_STREAM: u64 = 0x5353_5350_5745_4947;

/// The undirected edge count the generator uses for `vertices` (Table IV's ratio).
fn generated_edges(vertices: u32) -> usize {
    if vertices == PAPER_VERTICES {
        PAPER_ARCS / 2
    } else {
        (u64::from(vertices) * (PAPER_ARCS as u64 / 2) / u64::from(PAPER_VERTICES)) as usize
    }
}

/// Where the instance's graph comes from.
pub(crate) fn source(options: &WorkloadOptions) -> GraphSource {
    GraphSource::of(options, DATA_FILE, PAPER_VERTICES, SMALL_VERTICES)
}

/// The source, as the output states it.
fn source_description(options: &WorkloadOptions) -> String {
    let source = source(options);
    match &source {
        GraphSource::File(path) => format!(
            "{} (DIMACS NY road network, PACE-2016 form): 264346 vertices, 365050 edges = 730100 arcs",
            path.display()
        ),
        GraphSource::Generator { vertices, .. } => {
            let edges = generated_edges(*vertices);
            format!(
                "seeded road-like grid graph (seed {}): {vertices} vertices, {edges} edges = {} arcs{}",
                options.seed,
                2 * edges,
                source.ignored_note()
            )
        }
    }
}

/// The catalog entry with the sizes `options` would use.
pub fn info(options: &WorkloadOptions) -> WorkloadInfo {
    WorkloadInfo {
        name: NAME,
        domain: "Graph Analytics",
        application: "SSSP",
        table_iv: "#V: 264346, #E: 733846",
        characteristics: format!(
            "{}; seeded integer weights uniform in 1..={MAX_WEIGHT} (seed {}); source vertex {SOURCE}; frontier Bellman-Ford to convergence, {VERTICES_PER_ITEM} frontier vertices per item, {TASK_SLOTS} arcs per host task",
            source_description(options),
            options.seed
        ),
        offloaded: "edge traversal and vertex update (atomic min in device memory), 4 B per relaxed arc",
        host_task: "lower the host copy of improved distances and list the claimed vertices; concatenate the lists into the next frontier and write it to the device",
    }
}

/// Builds the workload.
pub fn build(options: &WorkloadOptions) -> Result<Box<dyn Application>, WorkloadError> {
    Ok(Box::new(SsspApplication::new(options)?))
}

/// Where the data lives in device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DeviceBuffers {
    parameters: DeviceAddress,
    frontier: DeviceAddress,
    prefix: DeviceAddress,
    result: DeviceAddress,
}

/// An SSSP instance: graph, plan, host state and answer.
pub struct SsspApplication {
    graph: Csr,
    description: String,
    seed: u64,
    device: Option<DeviceBuffers>,
    /// The host's copy of the distances.
    distances: Vec<u32>,
    /// The frontier and slot prefix of the launch in flight (or the next one).
    frontier: Vec<u32>,
    prefix: Vec<u32>,
    /// Whether a launch is in flight (its tasks' lists are in `lists`).
    in_flight: bool,
    lists: Vec<Option<Vec<host::Claimed>>>,
    iterations: u32,
    relaxed_arcs: u64,
    largest_frontier: usize,
    converged: bool,
    problems: Vec<String>,
}

impl fmt::Debug for SsspApplication {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SsspApplication")
            .field("vertices", &self.graph.vertices())
            .field("arcs", &self.graph.arcs())
            .field("iterations", &self.iterations)
            .field("converged", &self.converged)
            .field("problems", &self.problems)
            .finish()
    }
}

/// Seeded weights, one per edge.
fn weights(edges: usize, seed: u64) -> Vec<u32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ WEIGHT_STREAM);
    (0..edges).map(|_| rng.gen_range(1..=MAX_WEIGHT)).collect()
}

impl SsspApplication {
    /// An instance with `options` (see the module docs for the input).
    pub fn new(options: &WorkloadOptions) -> Result<SsspApplication, WorkloadError> {
        let input_error = |path: String, reason: String| WorkloadError::Input {
            workload: NAME,
            path,
            reason,
        };
        let source = source(options);
        let edges: EdgeList = match &source {
            GraphSource::File(path) => graph::read_pace_gr_xz(path),
            GraphSource::Generator { vertices, .. } => {
                graph::road_like(*vertices, generated_edges(*vertices), options.seed)
            }
        }
        .map_err(|reason| input_error(source.path_text(), reason))?;
        let weights = weights(edges.edges.len(), options.seed);
        let graph = Csr::symmetric(&edges, Some(&weights))
            .map_err(|reason| input_error(source.path_text(), reason))?;
        let description = source_description(options);
        log::info!(
            "sssp: {} vertices {} arcs ({description})",
            graph.vertices(),
            graph.arcs()
        );
        Ok(Self::from_graph(graph, description, options.seed))
    }

    /// An instance over a ready weighted graph (tests).
    pub fn from_graph(graph: Csr, description: String, seed: u64) -> SsspApplication {
        SsspApplication {
            graph,
            description,
            seed,
            device: None,
            distances: Vec::new(),
            frontier: Vec::new(),
            prefix: Vec::new(),
            in_flight: false,
            lists: Vec::new(),
            iterations: 0,
            relaxed_arcs: 0,
            largest_frontier: 0,
            converged: false,
            problems: Vec::new(),
        }
    }

    /// The weighted graph.
    pub fn graph(&self) -> &Csr {
        &self.graph
    }

    /// The host's distances (the answer once converged).
    pub fn distances(&self) -> &[u32] {
        &self.distances
    }

    /// Launches so far.
    pub fn iterations(&self) -> u32 {
        self.iterations
    }

    /// The host tasks over a launch of `slots` result slots.
    pub fn tasks(slots: u32) -> Vec<HostTask> {
        let mut tasks = Vec::new();
        let mut first = 0_u32;
        while first < slots {
            let last = (first + TASK_SLOTS).min(slots);
            tasks.push(HostTask {
                id: tasks.len() as u32,
                needs: u64::from(first) * 4..u64::from(last) * 4,
                chain: None,
            });
            first = last;
        }
        tasks
    }

    fn problem(&mut self, text: String) {
        log::error!("sssp: {text}");
        self.problems.push(text);
    }
}

impl Application for SsspApplication {
    fn name(&self) -> &str {
        NAME
    }

    fn device_bytes(&self) -> u64 {
        let vertices = u64::from(self.graph.vertices());
        let arcs = u64::from(self.graph.arcs());
        // Parameters, offsets, targets, weights, distances, claims, frontier, prefix, result,
        // with a line of alignment slack each.
        64 + 4 * (vertices + 1)
            + 8 * arcs
            + 12 * vertices
            + 4 * (vertices + 1)
            + 4 * arcs
            + 9 * DEVICE_ALIGNMENT
    }

    fn load(&mut self, device: &mut dyn DeviceLoader) -> Result<(), LoadError> {
        let vertices = self.graph.vertices() as usize;
        let mut place = |bytes: &[u8]| -> Result<DeviceAddress, LoadError> {
            let address = device.allocate(bytes.len().max(4) as u64, DEVICE_ALIGNMENT)?;
            device.write(address, bytes)?;
            Ok(address)
        };
        let offsets = place(&words_to_le_bytes(self.graph.offsets()))?;
        let targets = place(&words_to_le_bytes(self.graph.targets()))?;
        let weights = place(&words_to_le_bytes(self.graph.weights()))?;
        let mut distances = vec![INFINITY; vertices];
        if let Some(source) = distances.get_mut(SOURCE as usize) {
            *source = 0;
        }
        let distances_address = place(&words_to_le_bytes(&distances))?;
        let claims = place(&vec![0; 4 * vertices])?;
        let frontier = place(&vec![0; 4 * vertices])?;
        let prefix = place(&vec![0; 4 * (vertices + 1)])?;
        let result = place(&vec![0; 4 * self.graph.arcs() as usize])?;
        let parameters = SsspParameters {
            vertices: vertices as u64,
            arcs: u64::from(self.graph.arcs()),
            offsets: offsets.0,
            targets: targets.0,
            weights: weights.0,
            distances: distances_address.0,
            claims: claims.0,
            vertices_per_item: u64::from(VERTICES_PER_ITEM),
        };
        let parameters_address = place(&parameters.to_bytes())?;
        self.device = Some(DeviceBuffers {
            parameters: parameters_address,
            frontier,
            prefix,
            result,
        });
        self.distances = distances;
        self.frontier = if vertices > SOURCE as usize && self.graph.degree(SOURCE) > 0 {
            vec![SOURCE]
        } else {
            Vec::new()
        };
        self.prefix = host::slot_prefix(&self.graph, &self.frontier);
        self.in_flight = false;
        self.lists.clear();
        self.iterations = 0;
        self.relaxed_arcs = 0;
        self.largest_frontier = 0;
        self.converged = false;
        self.problems.clear();
        Ok(())
    }

    fn next_launch(&mut self) -> Option<LaunchPlan> {
        let Some(buffers) = self.device else {
            self.problem("next_launch called before load".into());
            return None;
        };
        if self.in_flight {
            self.problem("next_launch called before the launch finished".into());
            return None;
        }
        if self.frontier.is_empty() {
            self.converged = true;
            log::info!(
                "sssp: converged after {} launches, {} arcs relaxed, largest frontier {}",
                self.iterations,
                self.relaxed_arcs,
                self.largest_frontier
            );
            return None;
        }
        let slots = self.prefix.last().copied().unwrap_or(0);
        self.iterations += 1;
        self.relaxed_arcs += u64::from(slots);
        self.largest_frontier = self.largest_frontier.max(self.frontier.len());
        let tasks = Self::tasks(slots);
        self.lists = vec![None; tasks.len()];
        self.in_flight = true;
        let command = CommandDescriptor {
            kernel: KernelId::SsspRelax as u32,
            mode: 0,
            tag: 0,
            flags: 0,
            result_address: buffers.result.0,
            result_length: u64::from(slots) * 4,
            args: [
                buffers.parameters.0,
                buffers.frontier.0,
                pack_frontier(self.frontier.len() as u32, self.iterations),
                buffers.prefix.0,
            ],
        };
        log::debug!(
            "sssp: launch {} frontier {} slots {slots} tasks {}",
            self.iterations,
            self.frontier.len(),
            tasks.len()
        );
        Some(LaunchPlan {
            inputs: vec![
                DeviceInput {
                    address: buffers.frontier,
                    bytes: words_to_le_bytes(&self.frontier),
                },
                DeviceInput {
                    address: buffers.prefix,
                    bytes: words_to_le_bytes(&self.prefix),
                },
            ],
            command,
            tasks,
        })
    }

    fn run_task(&mut self, task: &HostTask, result: &[u8]) -> HostCost {
        let expected = result.len() as u64 == task.needs.end.saturating_sub(task.needs.start);
        if !self.in_flight || !expected || task.needs.start % 4 != 0 || result.len() % 4 != 0 {
            self.problem(format!(
                "task {} over {:?} with {} bytes does not fit the launch",
                task.id,
                task.needs,
                result.len()
            ));
            return HostCost::default();
        }
        let first_slot = (task.needs.start / 4) as u32;
        match host::collect_claimed(
            &self.graph,
            &self.frontier,
            &self.prefix,
            first_slot,
            result,
            &mut self.distances,
        ) {
            Ok((claimed, cost)) => {
                match self.lists.get_mut(task.id as usize) {
                    Some(slot) if slot.is_none() => *slot = Some(claimed),
                    _ => self.problem(format!("task {} ran twice or does not exist", task.id)),
                }
                cost
            }
            Err(reason) => {
                self.problem(format!("task {}: {reason}", task.id));
                HostCost::default()
            }
        }
    }

    fn finish_launch(&mut self) -> HostCost {
        if let Some(missing) = self.lists.iter().position(Option::is_none) {
            self.problem(format!(
                "launch {}: task {missing} never ran",
                self.iterations
            ));
        }
        let lists = std::mem::take(&mut self.lists);
        let (frontier, prefix, cost) =
            host::next_frontier(lists.iter().flatten().map(Vec::as_slice));
        self.frontier = frontier;
        self.prefix = prefix;
        self.in_flight = false;
        cost
    }

    fn verify(&self) -> Verification {
        let fail = |detail: String| Verification {
            passed: false,
            detail,
        };
        if let Some(problem) = self.problems.first() {
            return fail(format!("sssp: {problem}"));
        }
        if !self.converged {
            return fail("sssp: the iteration never converged".into());
        }
        let expected = reference::dijkstra(&self.graph, SOURCE);
        if let Some(vertex) = (0..expected.len()).find(|v| self.distances[*v] != expected[*v]) {
            return fail(format!(
                "sssp: vertex {vertex}: distance {}, Dijkstra says {}",
                self.distances[vertex], expected[vertex]
            ));
        }
        let reached = expected.iter().filter(|d| **d != INFINITY).count();
        Verification {
            passed: true,
            detail: format!(
                "{} distances from vertex {SOURCE} match Dijkstra exactly ({reached} reached; {} launches, {} arcs relaxed, largest frontier {}; {}; weights uniform 1..={MAX_WEIGHT}, seed {})",
                expected.len(),
                self.iterations,
                self.relaxed_arcs,
                self.largest_frontier,
                self.description,
                self.seed
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use crate::Scale;

    fn small() -> WorkloadOptions {
        WorkloadOptions {
            scale: Scale::Small,
            ..WorkloadOptions::default()
        }
    }

    #[test]
    fn small_instance_end_to_end_on_a_fake_device_matches_dijkstra() {
        let mut app = SsspApplication::new(&small()).unwrap();
        assert_eq!(app.graph().vertices(), SMALL_VERTICES);
        assert_eq!(
            app.graph().arcs() as usize,
            2 * generated_edges(SMALL_VERTICES)
        );
        let (launches, cost) = testing::run(&mut app, |_, _| {});
        assert!(launches > 10 && cost.operations > 0);
        let verification = app.verify();
        assert!(verification.passed, "{}", verification.detail);
        assert!(verification.detail.contains("match Dijkstra exactly"));
        assert_eq!(app.iterations(), launches);
    }

    #[test]
    fn a_wrong_distance_fails_verification() {
        let mut app = SsspApplication::new(&small()).unwrap();
        // Launch 3's first improving slot says distance 1, below any true distance but the source's.
        testing::run(&mut app, |launch, bytes| {
            if launch == 3 {
                if let Some(word) = bytes
                    .chunks_exact_mut(4)
                    .find(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]) != INFINITY)
                {
                    word.copy_from_slice(&1_u32.to_le_bytes());
                }
            }
        });
        let verification = app.verify();
        assert!(!verification.passed, "{}", verification.detail);
        assert!(
            verification.detail.contains("Dijkstra says"),
            "{}",
            verification.detail
        );
    }

    #[test]
    fn tasks_cover_the_result_in_order() {
        let tasks = SsspApplication::tasks(2 * TASK_SLOTS + 3);
        let needs: Vec<_> = tasks.iter().map(|t| t.needs.clone()).collect();
        let bytes = u64::from(TASK_SLOTS) * 4;
        assert_eq!(
            needs,
            [0..bytes, bytes..2 * bytes, 2 * bytes..2 * bytes + 12]
        );
        assert!(tasks.iter().all(|t| t.chain.is_none()));
    }

    #[test]
    fn generator_sizes_are_table_iv_and_seeded() {
        assert_eq!(2 * generated_edges(PAPER_VERTICES), PAPER_ARCS);
        let a = SsspApplication::new(&small()).unwrap();
        let b = SsspApplication::new(&small()).unwrap();
        assert_eq!(a.graph(), b.graph());
        let other = SsspApplication::new(&WorkloadOptions { seed: 7, ..small() }).unwrap();
        assert_ne!(a.graph().weights(), other.graph().weights());
        assert!(a
            .graph()
            .weights()
            .iter()
            .all(|w| (1..=MAX_WEIGHT).contains(w)));
    }

    #[test]
    fn missing_data_file_is_an_input_error() {
        let options = WorkloadOptions {
            data_dir: Some(std::env::temp_dir().join("axle-sssp-no-such-dir")),
            ..WorkloadOptions::default()
        };
        let error = SsspApplication::new(&options).unwrap_err();
        assert!(matches!(error, WorkloadError::Input { .. }), "{error}");
        assert!(info(&options)
            .characteristics
            .contains("axle-sssp-no-such-dir"));
    }

    /// The real NY road network, when the repository's shared data is present.
    #[test]
    fn real_file_when_present() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/data")
            .join(DATA_FILE);
        if !path.exists() {
            return;
        }
        let graph = crate::graph::read_pace_gr_xz(&path).unwrap();
        assert_eq!(graph.vertices, PAPER_VERTICES);
        assert_eq!(graph.edges.len(), 365_050);
    }
}
