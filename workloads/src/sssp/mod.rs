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
//! # The offload: topology-driven Bellman-Ford, as M²NDP's SSSP benchmark
//!
//! The weighted CSR (both arcs of every edge, sorted by their first endpoint) and two distance
//! vectors live in device memory (`firmware::kernels::sssp`). Each launch is one round of
//! pull-style Bellman-Ford over every vertex, M²NDP's `examples/benchmarks/sssp/kernel0.py`:
//! one CCM item per 8 vertices (a 32-byte packet of the distance vector), each vertex's new
//! distance the minimum of its previous one and its neighbours' previous distances plus the
//! arcs' weights. The launch's result is the whole new vector, 4 bytes per vertex (1 MB at
//! paper scale), streamed to the host: Section II's "only the updated vertex data per
//! iteration". The two vectors ping-pong (launch `k`'s result space is launch `k + 1`'s
//! previous distances), so the host stores no launch input ([`LaunchPlan::inputs`] is empty);
//! the first launch reads the vector loaded with the graph (0 at the source, infinity
//! elsewhere).
//!
//! M²NDP's `kernel1` compares the two vectors on the device to decide whether to loop again;
//! here the host does it, as Table I splits graph analytics: the CCM does the edge traversal
//! and the vertex update, the host finds the new frontier.
//!
//! # Host tasks
//!
//! Tasks of [`TASK_VERTICES`] consecutive vertices (4 KiB of the streamed vector, 128 DMA
//! slots of 32 bytes) compare their new distances with the host's copy, store them and list
//! the vertices that changed ([`host::compare_block`]); they are independent (disjoint
//! vertices). The launch's final step adds the lists' lengths ([`host::count_changes`]): if no
//! vertex changed, the distances are converged and no further launch follows.
//!
//! A task needs the results of 128 items, so with out-of-order streaming the ring must hold
//! the partial pages of the items in flight: at paper scale (1,024 µthreads, about 9 pages
//! open) a ring of 1,000 slots deadlocks (detected and reported) and one of 1,500 does not;
//! Figure 16's smallest ring, 12.5% of 50,000, is 6,250 slots. In-order streaming needs one
//! page.
//!
//! # Iterations
//!
//! The paper does not say how many rounds its SSSP runs. Running to convergence takes 673
//! launches on the NY graph and 1,080 on the generator (measured, seed 42; each launch is
//! 33,044 items and, streamed, 33,044 payloads of 32 bytes: 22 million of each per run on NY),
//! more than the evaluation's two dozen SSSP runs can afford; M²NDP's own benchmark
//! checks a single loop (its reference outputs `loop_0_0` and `loop_0_1`). So the run performs
//! [`WorkloadOptions::iterations`] launches (`axle run --iterations N`), by default
//! [`DEFAULT_ITERATIONS`] = 10 (PageRank also runs 10); `0` (`--iterations converge`) runs until
//! a launch changes nothing, and any run ends early if one does. Every launch does the same
//! device work and moves the same bytes, whatever the distances (topology-driven: every
//! vertex, every arc, the whole vector), and the host's work differs only by the changed
//! vertices' list entries: the count changes the absolute runtime, not the per-iteration
//! ratios between modes.
//!
//! Neither the distances nor the lists depend on the order in which items or host tasks run
//! (each round reads only the previous vector; tasks are disjoint), so every mode performs the
//! same launches.
//!
//! # Checking
//!
//! After `N` launches the host's copy must equal [`reference::bellman_ford_rounds`] of `N`
//! rounds exactly; once converged it must also equal [`reference::dijkstra`] exactly.

pub mod host;
pub mod reference;

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use host_runtime::app::{
    AppError, AppProblem, Application, BadResult, DeviceLoader, HostCost, HostTask, LaunchPlan,
    LoadError, Scope, Verification,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use shared_abi::params::sssp::{SsspParameters, INFINITY};
use shared_abi::{CommandDescriptor, DeviceAddress, KernelId};

use crate::graph::{self, words_to_le_bytes, Csr, EdgeList, GraphInput, GraphSource};
use crate::shared::Shared;
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

/// Launches (Bellman-Ford rounds) per run unless `--iterations` says otherwise: the paper
/// gives no count; PageRank's fixed count (see the module docs).
pub const DEFAULT_ITERATIONS: u32 = 10;

/// Vertices per host task: 1,024 distances are one 4 KiB page of the host's page-aligned
/// copy, so a task reads and writes exactly one page (one TLB entry, no line shared with
/// another task), and a launch of 264,346 vertices makes 259 tasks for the host's µthreads to
/// share.
pub const TASK_VERTICES: u32 = 1024;

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

/// The launches `options` ask for: `Some(n)`, or `None` for "until nothing changes".
fn rounds(options: &WorkloadOptions) -> Option<u32> {
    match options.iterations.unwrap_or(DEFAULT_ITERATIONS) {
        0 => None,
        n => Some(n),
    }
}

/// Parses an iteration count as the CLI takes it: a number of launches, or `converge` (also
/// `0`) for "until a launch changes no distance", which is `0`.
pub fn parse_iterations(text: &str) -> Result<u32, NotIterations> {
    match text.trim() {
        "converge" => Ok(0),
        number => number.parse().map_err(|_| NotIterations(number.to_owned())),
    }
}

/// Text that is not an iteration count ([`parse_iterations`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a number of launches (0..={max}) or `converge`", max = u32::MAX)]
pub struct NotIterations(pub String);

/// The graph's file, reader and generator.
const GRAPH: GraphInput = GraphInput {
    workload: NAME,
    known: crate::datafile::NY_ROAD,
    read_file: graph::read_pace_gr_xz,
    generator: "seeded road-like grid graph",
    generate: graph::road_like,
    generated_edges,
};

/// The catalog entry with the sizes `options` would use.
pub fn info(options: &WorkloadOptions) -> WorkloadInfo {
    let iterations = match rounds(options) {
        Some(n) => format!("{n} launches (rounds; fewer if one changes nothing)"),
        None => "launches until no distance changes".to_owned(),
    };
    WorkloadInfo {
        name: NAME,
        domain: "Graph Analytics",
        application: "SSSP",
        table_iv: "#V: 264346, #E: 733846",
        characteristics: format!(
            "{}; seeded integer weights uniform in 1..={MAX_WEIGHT} (seed {}); source vertex {SOURCE}; topology-driven Bellman-Ford (M2NDP's SSSP kernel0), {iterations}; 8 vertices (a 32 B packet) per item, {TASK_VERTICES} vertices (a 4 KiB page of distances) per host task",
            GRAPH.catalog(&source(options), options.seed),
            options.seed
        ),
        offloaded: "edge traversal and vertex update: one pull-style Bellman-Ford round over every vertex (min over its arcs of the neighbour's previous distance + weight); the whole vector, 4 B per vertex",
        host_task: "compare a 4 KiB page of new distances with the host's copy and list the changed vertices (the new frontier); launch again unless none changed",
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
    /// The two distance vectors: launch `k` (from 0) reads `vectors[k % 2]` and writes
    /// `vectors[(k + 1) % 2]`.
    vectors: [DeviceAddress; 2],
}

/// The weighted graph, what it is, and its reference distances (made when first needed): a
/// function of the input and the seed, shared by the runs of a process that read the same
/// input ([`crate::shared`]; `axle eval` makes 21 runs of SSSP).
struct Input {
    graph: Csr,
    description: String,
    shortest: OnceLock<Vec<u32>>,
    /// The last rounds of Bellman-Ford asked for, and their distances.
    rounds: Mutex<Option<(u32, Arc<Vec<u32>>)>>,
}

impl Input {
    fn new(graph: Csr, description: String) -> Input {
        Input {
            graph,
            description,
            shortest: OnceLock::new(),
            rounds: Mutex::new(None),
        }
    }

    /// [`reference::dijkstra`] from [`SOURCE`].
    fn shortest(&self) -> &[u32] {
        self.shortest
            .get_or_init(|| reference::dijkstra(&self.graph, SOURCE))
    }

    /// [`reference::bellman_ford_rounds`] from [`SOURCE`].
    fn rounds(&self, rounds: u32) -> Arc<Vec<u32>> {
        let mut kept = self.rounds.lock().unwrap_or_else(PoisonError::into_inner);
        match kept.as_ref() {
            Some((made, distances)) if *made == rounds => Arc::clone(distances),
            _ => {
                let distances =
                    Arc::new(reference::bellman_ford_rounds(&self.graph, SOURCE, rounds));
                *kept = Some((rounds, Arc::clone(&distances)));
                distances
            }
        }
    }
}

/// The last input read, by source and seed.
static INPUT: Shared<(GraphSource, u64), Input> = Shared::new();

/// Forgets the shared input ([`crate::shared::release`]).
pub(crate) fn release_shared() {
    INPUT.clear();
}

/// An SSSP instance: graph, plan, host state and answer.
pub struct SsspApplication {
    input: Arc<Input>,
    seed: u64,
    /// Launches to run; `None`: until one changes nothing.
    rounds: Option<u32>,
    device: Option<DeviceBuffers>,
    /// The host's copy of the distances.
    distances: Vec<u32>,
    /// Launches so far.
    launches: u32,
    /// Whether a launch is in flight (its tasks' lists are in `lists`).
    in_flight: bool,
    lists: Vec<Option<Vec<u32>>>,
    /// Vertices changed by each finished launch.
    changes: Vec<u64>,
    converged: bool,
}

impl fmt::Debug for SsspApplication {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SsspApplication")
            .field("vertices", &self.input.graph.vertices())
            .field("arcs", &self.input.graph.arcs())
            .field("rounds", &self.rounds)
            .field("launches", &self.launches)
            .field("converged", &self.converged)
            .finish()
    }
}

/// Seeded weights, one per edge.
fn weights(edges: usize, seed: u64) -> Vec<u32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ WEIGHT_STREAM);
    (0..edges).map(|_| rng.gen_range(1..=MAX_WEIGHT)).collect()
}

impl SsspApplication {
    /// An instance with `options` (see the module docs for the input and the iterations).
    pub fn new(options: &WorkloadOptions) -> Result<SsspApplication, WorkloadError> {
        let source = source(options);
        let input = INPUT.try_get_or_make((source.clone(), options.seed), || {
            Self::read(&source, options)
        })?;
        Ok(Self::with_input(input, options.seed, rounds(options)))
    }

    /// Reads (or generates) the graph `source` names, weighted by `options.seed`.
    fn read(source: &GraphSource, options: &WorkloadOptions) -> Result<Input, WorkloadError> {
        let edges: EdgeList = GRAPH.edges(source, options.seed)?;
        let weights = weights(edges.edges.len(), options.seed);
        let graph =
            Csr::symmetric(&edges, Some(&weights)).map_err(|reason| GRAPH.error(source, reason))?;
        let description = GRAPH.description(source, &edges, options.seed);
        log::info!(
            "sssp: {} vertices {} arcs ({description})",
            graph.vertices(),
            graph.arcs()
        );
        Ok(Input::new(graph, description))
    }

    /// An instance over a ready weighted graph running `rounds` launches (`None`: until one
    /// changes nothing).
    pub fn from_graph(
        graph: Csr,
        description: String,
        seed: u64,
        rounds: Option<u32>,
    ) -> SsspApplication {
        Self::with_input(Arc::new(Input::new(graph, description)), seed, rounds)
    }

    fn with_input(input: Arc<Input>, seed: u64, rounds: Option<u32>) -> SsspApplication {
        SsspApplication {
            input,
            seed,
            rounds,
            device: None,
            distances: Vec::new(),
            launches: 0,
            in_flight: false,
            lists: Vec::new(),
            changes: Vec::new(),
            converged: false,
        }
    }

    /// The weighted graph.
    pub fn graph(&self) -> &Csr {
        &self.input.graph
    }

    /// The host's distances.
    pub fn distances(&self) -> &[u32] {
        &self.distances
    }

    /// Launches so far.
    pub fn launches(&self) -> u32 {
        self.launches
    }

    /// Vertices changed by each finished launch.
    pub fn changes(&self) -> &[u64] {
        &self.changes
    }

    /// Whether a launch changed nothing.
    pub fn converged(&self) -> bool {
        self.converged
    }

    /// The host tasks over the vector of `vertices` distances: blocks of [`TASK_VERTICES`].
    pub fn tasks(vertices: u32) -> Vec<HostTask> {
        graph::vertex_block_tasks(vertices, TASK_VERTICES)
    }

    /// A host step's failure (logged; the runtime fails the run with it).
    fn fail(&self, problem: AppProblem) -> AppError {
        let error = AppError::new("sssp", Scope::Launch(self.launches), problem);
        log::error!("sssp: {error}");
        error
    }
}

impl Application for SsspApplication {
    fn name(&self) -> &str {
        NAME
    }

    fn device_bytes(&self) -> u64 {
        let vertices = u64::from(self.input.graph.vertices());
        let arcs = u64::from(self.input.graph.arcs());
        // Parameters, offsets, targets, weights, two distance vectors, with a line of
        // alignment slack each.
        SsspParameters::default().to_bytes().len() as u64
            + 4 * (vertices + 1)
            + 8 * arcs
            + 8 * vertices
            + 6 * DEVICE_ALIGNMENT
    }

    fn load(&mut self, device: &mut dyn DeviceLoader) -> Result<(), LoadError> {
        let vertices = self.input.graph.vertices() as usize;
        let mut place = |bytes: &[u8]| -> Result<DeviceAddress, LoadError> {
            let address = device.allocate(bytes.len().max(4) as u64, DEVICE_ALIGNMENT)?;
            device.write(address, bytes)?;
            Ok(address)
        };
        let offsets = place(&words_to_le_bytes(self.input.graph.offsets()))?;
        let targets = place(&words_to_le_bytes(self.input.graph.targets()))?;
        let weights = place(&words_to_le_bytes(self.input.graph.weights()))?;
        let mut distances = vec![INFINITY; vertices];
        if let Some(source) = distances.get_mut(SOURCE as usize) {
            *source = 0;
        }
        let first = place(&words_to_le_bytes(&distances))?;
        let second = place(&words_to_le_bytes(&distances))?;
        let parameters = SsspParameters {
            vertices: vertices as u64,
            arcs: u64::from(self.input.graph.arcs()),
            offsets: offsets.0,
            targets: targets.0,
            weights: weights.0,
        };
        let parameters_address = place(&parameters.to_bytes())?;
        self.device = Some(DeviceBuffers {
            parameters: parameters_address,
            vectors: [first, second],
        });
        self.distances = distances;
        self.launches = 0;
        self.in_flight = false;
        self.lists.clear();
        self.changes.clear();
        self.converged = false;
        Ok(())
    }

    fn next_launch(&mut self) -> Result<Option<LaunchPlan>, AppError> {
        let Some(buffers) = self.device else {
            return Err(self.fail(AppProblem::NotLoaded));
        };
        if self.in_flight {
            return Err(self.fail(AppProblem::LaunchInFlight));
        }
        if self.converged || self.rounds.is_some_and(|rounds| self.launches >= rounds) {
            log::info!(
                "sssp: {} launches{}, vertices changed per launch {:?}",
                self.launches,
                if self.converged { ", converged" } else { "" },
                self.changes
            );
            return Ok(None);
        }
        let parity = (self.launches % 2) as usize;
        let (previous, result) = (buffers.vectors[parity], buffers.vectors[1 - parity]);
        self.launches += 1;
        let vertices = self.input.graph.vertices();
        let tasks = Self::tasks(vertices);
        self.lists = vec![None; tasks.len()];
        self.in_flight = true;
        let command = CommandDescriptor {
            kernel: KernelId::SsspRelax as u32,
            mode: 0,
            tag: 0,
            flags: 0,
            result_address: result.0,
            result_length: u64::from(vertices) * 4,
            args: [buffers.parameters.0, previous.0, 0, 0],
        };
        log::debug!(
            "sssp: launch {} from {previous:?} into {result:?}, {} tasks",
            self.launches,
            tasks.len()
        );
        Ok(Some(LaunchPlan {
            inputs: Vec::new(),
            command,
            tasks,
        }))
    }

    fn run_task(&mut self, task: &HostTask, result: &[u8]) -> Result<HostCost, AppError> {
        if !self.in_flight {
            return Err(self.fail(AppProblem::NoLaunch { call: "run_task" }));
        }
        let expected = result.len() as u64 == task.needs.end.saturating_sub(task.needs.start);
        if !expected || task.needs.start % 4 != 0 {
            return Err(self.fail(AppProblem::DoesNotFit {
                task: task.id,
                needs: task.needs.clone(),
                bytes: result.len(),
            }));
        }
        let Ok(first) = u32::try_from(task.needs.start / 4) else {
            return Err(self.fail(AppProblem::BadResult {
                task: task.id,
                what: BadResult::BeyondVertices,
            }));
        };
        match self.lists.get(task.id as usize) {
            None => {
                return Err(self.fail(AppProblem::NoSuchTask {
                    task: task.id,
                    tasks: self.lists.len(),
                }))
            }
            Some(Some(_)) => return Err(self.fail(AppProblem::RanTwice { task: task.id })),
            Some(None) => {}
        }
        match host::compare_block(first, result, &mut self.distances) {
            Ok((changed, cost)) => {
                if let Some(slot) = self.lists.get_mut(task.id as usize) {
                    *slot = Some(changed);
                }
                Ok(cost)
            }
            Err(what) => Err(self.fail(AppProblem::BadResult {
                task: task.id,
                what,
            })),
        }
    }

    fn finish_launch(&mut self) -> Result<HostCost, AppError> {
        if let Some(problem) = AppProblem::never_ran(self.lists.iter().map(Option::is_some)) {
            return Err(self.fail(problem));
        }
        let lists = std::mem::take(&mut self.lists);
        let (changed, cost) =
            host::count_changes(lists.iter().map(|list| list.as_ref().map_or(0, Vec::len)));
        self.changes.push(changed);
        self.converged = changed == 0;
        self.in_flight = false;
        Ok(cost)
    }

    fn verify(&self) -> Verification {
        let fail = |detail: String| Verification {
            passed: false,
            detail,
        };
        match self.rounds {
            None if !self.converged => {
                return fail(format!(
                    "sssp: not converged after {} launches",
                    self.launches
                ))
            }
            Some(rounds) if !self.converged && self.launches != rounds => {
                return fail(format!(
                    "sssp: {} launches of the {rounds} asked for",
                    self.launches
                ))
            }
            _ => {}
        }
        let first_difference = |expected: &[u32], what: &str| {
            (0..expected.len())
                .find(|v| self.distances.get(*v) != expected.get(*v))
                .map(|vertex| {
                    format!(
                        "sssp: vertex {vertex}: distance {:?}, {what} says {}",
                        self.distances.get(vertex),
                        expected[vertex]
                    )
                })
        };
        let shortest = self.input.shortest();
        let reached = shortest.iter().filter(|d| **d != INFINITY).count();
        let comparison = if self.converged {
            if let Some(difference) = first_difference(shortest, "Dijkstra") {
                return fail(difference);
            }
            format!(
                "converged after {} launches: the {} distances from vertex {SOURCE} match Dijkstra exactly ({reached} reached)",
                self.launches,
                shortest.len()
            )
        } else {
            let rounds = self.input.rounds(self.launches);
            if let Some(difference) = first_difference(&rounds, "Bellman-Ford") {
                return fail(difference);
            }
            let final_already = (0..shortest.len())
                .filter(|v| {
                    shortest[*v] != INFINITY && self.distances.get(*v) == Some(&shortest[*v])
                })
                .count();
            format!(
                "the {} distances from vertex {SOURCE} after {} launches match {} rounds of Jacobi Bellman-Ford exactly ({final_already} of the {reached} reachable vertices already at their Dijkstra distance)",
                shortest.len(),
                self.launches,
                self.launches
            )
        };
        Verification {
            passed: true,
            detail: format!(
                "{comparison}; vertices changed per launch: first {}, last {}; {}; weights uniform 1..={MAX_WEIGHT}, seed {}",
                self.changes.first().copied().unwrap_or(0),
                self.changes.last().copied().unwrap_or(0),
                self.input.description,
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

    fn with_iterations(iterations: u32) -> WorkloadOptions {
        WorkloadOptions {
            iterations: Some(iterations),
            ..small()
        }
    }

    /// 0 -4- 1, 0 -1- 2, 2 -2- 1, 1 -5- 3, 2 -8- 3; 4 isolated: converges in 3 rounds.
    fn tiny(rounds: Option<u32>) -> SsspApplication {
        let edges = EdgeList {
            vertices: 5,
            edges: vec![(0, 1), (0, 2), (2, 1), (1, 3), (2, 3)],
        };
        let graph = Csr::symmetric(&edges, Some(&[4, 1, 2, 5, 8])).unwrap();
        SsspApplication::from_graph(graph, "tiny".into(), 0, rounds)
    }

    #[test]
    fn small_instance_runs_the_default_ten_rounds_and_matches_bellman_ford() {
        let mut app = SsspApplication::new(&small()).unwrap();
        assert_eq!(app.graph().vertices(), SMALL_VERTICES);
        assert_eq!(
            app.graph().arcs() as usize,
            2 * generated_edges(SMALL_VERTICES)
        );
        let (launches, cost) = testing::run(&mut app, |_, _| {});
        assert_eq!(launches, DEFAULT_ITERATIONS);
        assert_eq!(app.launches(), DEFAULT_ITERATIONS);
        assert!(!app.converged());
        assert!(cost.operations > 0);
        assert!(app.changes().iter().all(|changed| *changed > 0));
        let verification = app.verify();
        assert!(verification.passed, "{}", verification.detail);
        assert!(
            verification
                .detail
                .contains("match 10 rounds of Jacobi Bellman-Ford exactly"),
            "{}",
            verification.detail
        );
        assert_eq!(
            app.distances(),
            reference::bellman_ford_rounds(app.graph(), SOURCE, 10)
        );
    }

    #[test]
    fn a_run_to_convergence_matches_dijkstra() {
        let mut app = SsspApplication::new(&with_iterations(0)).unwrap();
        let (launches, _) = testing::run(&mut app, |_, _| {});
        assert!(app.converged());
        assert!(launches > DEFAULT_ITERATIONS, "{launches} launches");
        assert_eq!(app.changes().last(), Some(&0));
        assert!(app.changes()[..app.changes().len() - 1]
            .iter()
            .all(|changed| *changed > 0));
        let verification = app.verify();
        assert!(verification.passed, "{}", verification.detail);
        assert!(verification.detail.contains("match Dijkstra exactly"));
        assert_eq!(
            app.distances(),
            reference::dijkstra(app.graph(), SOURCE).as_slice()
        );
    }

    #[test]
    fn the_iterations_option_sets_the_launches() {
        let mut app = SsspApplication::new(&with_iterations(3)).unwrap();
        assert_eq!(testing::run(&mut app, |_, _| {}).0, 3);
        assert!(app.verify().passed);
        assert!(info(&with_iterations(3))
            .characteristics
            .contains("3 launches"));
        assert!(info(&small()).characteristics.contains("10 launches"));
        assert!(info(&with_iterations(0))
            .characteristics
            .contains("until no distance changes"));
        // A fixed count that outlasts convergence stops at the launch that changed nothing.
        let mut app = tiny(Some(10));
        assert_eq!(testing::run(&mut app, |_, _| {}).0, 4);
        assert_eq!(app.changes(), [2, 2, 1, 0]);
        assert_eq!(app.distances(), [0, 3, 1, 8, INFINITY]);
        let verification = app.verify();
        assert!(verification.passed, "{}", verification.detail);
        assert!(verification.detail.contains("converged after 4 launches"));
    }

    #[test]
    fn iterations_parse_as_a_count_or_converge() {
        assert_eq!(parse_iterations("10"), Ok(10));
        assert_eq!(parse_iterations("converge"), Ok(0));
        assert_eq!(parse_iterations("0"), Ok(0));
        for bad in ["-1", "ten", "4294967296", ""] {
            let error = parse_iterations(bad).unwrap_err().to_string();
            assert!(error.contains("converge"), "{bad}: {error}");
        }
    }

    #[test]
    fn launches_ping_pong_without_launch_inputs() {
        let mut app = tiny(Some(3));
        let mut device = testing::FakeDevice::loaded(&mut app);
        let mut previous_result = None;
        let mut reads = Vec::new();
        while let Some(plan) = app.next_launch().unwrap() {
            assert!(plan.inputs.is_empty(), "the host writes no launch input");
            assert_eq!(plan.command.result_length, 4 * 5);
            assert_eq!(plan.command.args[2..], [0, 0]);
            let read = plan.command.args[1];
            if let Some(result) = previous_result {
                assert_eq!(read, result, "a launch reads the previous launch's result");
            }
            assert_ne!(read, plan.command.result_address);
            reads.push(read);
            previous_result = Some(plan.command.result_address);
            testing::launch(&mut device, &plan);
            testing::run_tasks(&mut app, &device, &plan);
        }
        assert_eq!(reads.len(), 3);
        assert_eq!(reads[0], reads[2]);
        assert_ne!(reads[0], reads[1]);
        assert_eq!(app.distances(), [0, 3, 1, 8, INFINITY]);
    }

    #[test]
    fn a_wrong_distance_fails_verification() {
        let mut app = SsspApplication::new(&with_iterations(4)).unwrap();
        // Launch 3's copy of vertex 100's distance says 1 (the device keeps the right one).
        testing::run(&mut app, |launch, bytes| {
            if launch == 3 {
                bytes[400..404].copy_from_slice(&1_u32.to_le_bytes());
            }
        });
        let verification = app.verify();
        assert!(!verification.passed, "{}", verification.detail);
        assert!(
            verification.detail.contains("vertex 100")
                && verification.detail.contains("Bellman-Ford says"),
            "{}",
            verification.detail
        );
    }

    #[test]
    fn tasks_are_pages_of_the_vector_in_order() {
        let tasks = SsspApplication::tasks(2 * TASK_VERTICES + 3);
        let needs: Vec<_> = tasks.iter().map(|t| t.needs.clone()).collect();
        let page = u64::from(TASK_VERTICES) * 4;
        assert_eq!(page, 4096);
        assert_eq!(needs, [0..page, page..2 * page, 2 * page..2 * page + 12]);
        assert!(tasks.iter().all(|t| t.chain.is_none()));
        assert_eq!(
            SsspApplication::tasks(PAPER_VERTICES).len(),
            PAPER_VERTICES.div_ceil(TASK_VERTICES) as usize
        );
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
        // The reason is kept typed, as the source; the CLI's text names the workload, the
        // file and the operating system's reason.
        let reason = std::error::Error::source(&error)
            .and_then(|source| source.downcast_ref::<graph::GraphError>());
        assert!(
            matches!(
                reason,
                Some(graph::GraphError::File(
                    crate::datafile::DataFileError::Open(_)
                ))
            ),
            "{reason:?}"
        );
        let text = crate::testing::chain(&error);
        assert!(
            text.starts_with("sssp: ")
                && text.contains("axle-sssp-no-such-dir")
                && text.contains("cannot open: ")
                && text.contains("os error 2"),
            "{text}"
        );
        assert!(info(&options)
            .characteristics
            .contains("axle-sssp-no-such-dir"));
    }

    #[test]
    fn a_different_graph_in_place_of_the_ny_file_is_described_as_what_was_read() {
        let dir = crate::testing::TempDir::new("sssp-five");
        let text = "p tw 5 4\n1 2\n2 3\n3 4\n4 5\n";
        dir.file(DATA_FILE, &crate::testing::xz([text.as_bytes()]));
        let options = WorkloadOptions {
            data_dir: Some(dir.0.clone()),
            ..WorkloadOptions::default()
        };
        let app = SsspApplication::new(&options).unwrap();
        assert_eq!(app.graph().vertices(), 5);
        let description = &app.input.description;
        assert!(
            description.contains("NY.pace16.gr.xz: 5 vertices, 4 edges = 8 arcs read")
                && description.contains("WARNING")
                && description.contains("not the paper's data set")
                && description.contains(crate::datafile::NY_ROAD.sha256),
            "{description}"
        );
        // The fixed text of old, which named the paper's counts whatever was read.
        assert!(
            !description.contains("264346 vertices, 365050 edges = 730100 arcs"),
            "{description}"
        );
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
        let identity = crate::datafile::identify(&path, crate::datafile::NY_ROAD).unwrap();
        assert!(identity.is_known(), "{:?}", identity.warning());
        assert_eq!(graph.vertices, PAPER_VERTICES);
        assert_eq!(graph.edges.len(), 365_050);
    }
}
