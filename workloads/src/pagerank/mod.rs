//! PageRank, paper Table IV (e): Graph Analytics, the coAuthorsDBLP co-authorship graph.
//!
//! # Input
//!
//! With real data (`options.data_dir` is the data directory or the file itself) the graph is
//! [`DATA_FILE`], DIMACS10 coAuthorsDBLP from the SuiteSparse collection: a Matrix Market
//! pattern (one triangle of a symmetric matrix) of 299,067 vertices and 977,676 undirected
//! edges = 1,955,352 arcs. Without it, [`crate::graph::power_law`] generates a seeded
//! power-law graph of exactly the same size. `--scale small` always uses the generator with
//! [`SMALL_VERTICES`] vertices and the same edge-to-vertex ratio.
//!
//! # The offload: pull-based PageRank
//!
//! The in-neighbour CSR (the graph is symmetric: the same lists) lives in device memory; each
//! launch gathers, for every vertex, the sum of its in-neighbours' contributions
//! `c[u] = rank[u] / degree(u)` (`firmware::kernels::pagerank`): the CCM's neighbour
//! traversal and accumulation. One item per vertex, as M²NDP's PageRank SpMV gives each
//! µthread one row (299,067 items per launch at paper scale), gathering 8 in-arcs per vector
//! instruction; the kernel's module docs compare it with M²NDP's kernels line by line. The
//! result is one `f32` per vertex in vertex order (1.2 MB at paper scale). The contributions
//! are the launch's input: the first launch's are loaded with the graph, every later one's are
//! written by the host ([`LaunchPlan::inputs`]) from the previous iteration's ranks. (M²NDP
//! runs the rank update on the device, its kernel3; here it is the host task that the sums are
//! streamed to, which is the point of the workload.)
//!
//! Damping [`DAMPING`] = 0.85, ranks start at `1 / n`, vertices without arcs spread their
//! rank uniformly (the dangling share), and the run performs a fixed [`ITERATIONS`] = 10
//! launches (the L1 change of the last one is reported; a fixed count keeps every mode's work
//! identical).
//!
//! # Host tasks
//!
//! Tasks of [`TASK_VERTICES`] consecutive vertices update their ranks and the next
//! contributions and measure their L1 change ([`host::update_ranks`]); they are independent
//! (disjoint vertices), and each needs exactly its vertices' sums. The final step adds the L1
//! changes in task order and computes the next dangling share; the next launch depends on
//! every task of this one.
//!
//! Why 1,024 vertices: a task per item (4 bytes) would be absurd, and a task's sums, ranks and
//! contributions are then one 4 KiB page each, so the task streams whole pages, and its fixed
//! part ([`host::TASK_FIXED_OPERATIONS`] and the runtime's dispatch) is small against its 64
//! vector steps. A task waits for 1,024 items; items are handed out in vertex order, so at any
//! time only the tasks whose vertices are still running are incomplete (a window of about the
//! CCM's 1,024 µthreads, stretched by the few high-degree vertices), far fewer than the
//! tasks a small ring holds.
//!
//! # Checking
//!
//! The ranks must equal [`reference::mirrored`] bit for bit (the same `f32` arithmetic in the
//! same order), and be within an L1 distance of [`F64_TOLERANCE`] of [`reference::plain_f64`],
//! plain power iteration in `f64`.

pub mod host;
pub mod reference;

use std::fmt;
use std::sync::{Arc, OnceLock};

use host_runtime::app::{
    AppError, AppProblem, Application, DeviceInput, DeviceLoader, HostCost, HostTask, LaunchPlan,
    LoadError, Scope, Verification,
};
use shared_abi::params::pagerank::{PageRankParameters, VERTICES_PER_ITEM};
use shared_abi::{CommandDescriptor, DeviceAddress, KernelId};

use crate::graph::{self, words_to_le_bytes, Csr, EdgeList, GraphInput, GraphSource};
use crate::shared::Shared;
use crate::{WorkloadError, WorkloadInfo, WorkloadOptions};

/// Catalog name.
pub const NAME: &str = "pagerank";

/// The real input's file name in the data directory.
pub const DATA_FILE: &str = "coAuthorsDBLP.tar.gz";

/// Table IV's vertices.
pub const PAPER_VERTICES: u32 = 299_067;

/// Table IV's undirected edges.
pub const PAPER_EDGES: usize = 977_676;

/// Vertices at `--scale small`.
pub const SMALL_VERTICES: u32 = 4096;

/// The damping factor.
pub const DAMPING: f64 = 0.85;

/// Launches (power iterations) per run.
pub const ITERATIONS: u32 = 10;

/// Vertices per host task: 1,024 sums, one 4 KiB page (128 DMA slots of 32 bytes); see the
/// module docs for why.
pub const TASK_VERTICES: u32 = 1024;

/// Largest accepted L1 distance between the `f32` ranks and the `f64` power iteration.
pub const F64_TOLERANCE: f64 = 1e-4;

/// Alignment of every device allocation (a 64-byte line).
pub const DEVICE_ALIGNMENT: u64 = 64;

/// The undirected edge count the generator uses for `vertices` (Table IV's ratio).
fn generated_edges(vertices: u32) -> usize {
    (u64::from(vertices) * PAPER_EDGES as u64 / u64::from(PAPER_VERTICES)) as usize
}

/// Where the instance's graph comes from.
pub(crate) fn source(options: &WorkloadOptions) -> GraphSource {
    GraphSource::of(options, DATA_FILE, PAPER_VERTICES, SMALL_VERTICES)
}

/// The graph's file, reader and generator.
const GRAPH: GraphInput = GraphInput {
    workload: NAME,
    known: crate::datafile::COAUTHORS_DBLP,
    read_file: graph::read_mtx_tar_gz,
    generator: "seeded power-law graph",
    generate: graph::power_law,
    generated_edges,
};

/// The catalog entry with the sizes `options` would use.
pub fn info(options: &WorkloadOptions) -> WorkloadInfo {
    WorkloadInfo {
        name: NAME,
        domain: "Graph Analytics",
        application: "PageRank",
        table_iv: "#V: 299067, #E: 977676",
        characteristics: format!(
            "{}; damping {DAMPING}, {ITERATIONS} iterations, one vertex per item (8-lane gather), {TASK_VERTICES} vertices per host task",
            GRAPH.catalog(&source(options), options.seed)
        ),
        offloaded: "neighbour traversal and accumulation: the sum of in-neighbour contributions per vertex (4 B each)",
        host_task: "rank update, next contributions and L1 change (convergence); contributions written back to the device",
    }
}

/// Builds the workload.
pub fn build(options: &WorkloadOptions) -> Result<Box<dyn Application>, WorkloadError> {
    Ok(Box::new(PageRankApplication::new(options)?))
}

/// Where the data lives in device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DeviceBuffers {
    parameters: DeviceAddress,
    contributions: DeviceAddress,
    result: DeviceAddress,
}

/// The graph, what it is, and its reference ranks (made when first needed): a function of the
/// input and the seed, shared by the runs of a process that read the same input
/// ([`crate::shared`]; `axle eval` makes 21 runs of PageRank).
struct Input {
    graph: Csr,
    description: String,
    mirrored: OnceLock<Vec<f32>>,
    exact: OnceLock<Vec<f64>>,
}

impl Input {
    fn new(graph: Csr, description: String) -> Input {
        Input {
            graph,
            description,
            mirrored: OnceLock::new(),
            exact: OnceLock::new(),
        }
    }
}

/// The last input read, by source and seed.
static INPUT: Shared<(GraphSource, u64), Input> = Shared::new();

/// Forgets the shared input ([`crate::shared::release`]).
pub(crate) fn release_shared() {
    INPUT.clear();
}

/// A PageRank instance.
pub struct PageRankApplication {
    input: Arc<Input>,
    device: Option<DeviceBuffers>,
    rank: Vec<f32>,
    contributions: Vec<f32>,
    base: f32,
    dangling_share: f32,
    iterations: u32,
    in_flight: bool,
    changes: Vec<Option<f64>>,
    last_change: f64,
}

impl fmt::Debug for PageRankApplication {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PageRankApplication")
            .field("vertices", &self.input.graph.vertices())
            .field("arcs", &self.input.graph.arcs())
            .field("iterations", &self.iterations)
            .finish()
    }
}

impl PageRankApplication {
    /// An instance with `options` (see the module docs for the input).
    pub fn new(options: &WorkloadOptions) -> Result<PageRankApplication, WorkloadError> {
        let source = source(options);
        let input = INPUT.try_get_or_make((source.clone(), options.seed), || {
            Self::read(&source, options)
        })?;
        Ok(Self::with_input(input))
    }

    /// Reads (or generates) the graph `source` names.
    fn read(source: &GraphSource, options: &WorkloadOptions) -> Result<Input, WorkloadError> {
        let edges: EdgeList = GRAPH.edges(source, options.seed)?;
        let graph = Csr::symmetric(&edges, None).map_err(|reason| GRAPH.error(source, reason))?;
        let description = GRAPH.description(source, &edges, options.seed);
        log::info!(
            "pagerank: {} vertices {} arcs ({description})",
            graph.vertices(),
            graph.arcs()
        );
        Ok(Input::new(graph, description))
    }

    /// An instance over a ready graph (tests).
    pub fn from_graph(graph: Csr, description: String) -> PageRankApplication {
        Self::with_input(Arc::new(Input::new(graph, description)))
    }

    fn with_input(input: Arc<Input>) -> PageRankApplication {
        PageRankApplication {
            base: reference::base(input.graph.vertices()),
            input,
            device: None,
            rank: Vec::new(),
            contributions: Vec::new(),
            dangling_share: 0.0,
            iterations: 0,
            in_flight: false,
            changes: Vec::new(),
            last_change: f64::NAN,
        }
    }

    /// The graph.
    pub fn graph(&self) -> &Csr {
        &self.input.graph
    }

    /// The current ranks.
    pub fn rank(&self) -> &[f32] {
        &self.rank
    }

    /// The host tasks of a launch over `vertices` vertices.
    pub fn tasks(vertices: u32) -> Vec<HostTask> {
        graph::vertex_block_tasks(vertices, TASK_VERTICES)
    }

    /// A host step's failure (logged; the runtime fails the run with it).
    fn fail(&self, problem: AppProblem) -> AppError {
        let error = AppError::new(NAME, Scope::Launch(self.iterations), problem);
        log::error!("pagerank: {error}");
        error
    }

    fn contribution_bytes(&self) -> Vec<u8> {
        self.contributions
            .iter()
            .flat_map(|c| c.to_le_bytes())
            .collect()
    }
}

impl Application for PageRankApplication {
    fn name(&self) -> &str {
        NAME
    }

    fn device_bytes(&self) -> u64 {
        let vertices = u64::from(self.input.graph.vertices());
        let arcs = u64::from(self.input.graph.arcs());
        // Parameters, offsets, sources, contributions, result, with alignment slack.
        64 + 4 * (vertices + 1) + 4 * arcs + 8 * vertices + 5 * DEVICE_ALIGNMENT
    }

    fn load(&mut self, device: &mut dyn DeviceLoader) -> Result<(), LoadError> {
        let n = self.input.graph.vertices();
        self.rank = vec![(1.0 / f64::from(n)) as f32; n as usize];
        self.contributions = (0..n)
            .map(|v| reference::contribution(self.rank[v as usize], self.input.graph.degree(v)))
            .collect();
        self.dangling_share = reference::dangling_share(&self.input.graph, &self.rank);
        let contribution_bytes = self.contribution_bytes();
        let mut place = |bytes: &[u8]| -> Result<DeviceAddress, LoadError> {
            let address = device.allocate(bytes.len().max(4) as u64, DEVICE_ALIGNMENT)?;
            device.write(address, bytes)?;
            Ok(address)
        };
        let offsets = place(&words_to_le_bytes(self.input.graph.offsets()))?;
        let sources = place(&words_to_le_bytes(self.input.graph.targets()))?;
        let contributions = place(&contribution_bytes)?;
        let result = place(&vec![0; 4 * n as usize])?;
        let parameters = PageRankParameters {
            vertices: u64::from(n),
            arcs: u64::from(self.input.graph.arcs()),
            offsets: offsets.0,
            sources: sources.0,
        };
        let parameters = place(&parameters.to_bytes())?;
        self.device = Some(DeviceBuffers {
            parameters,
            contributions,
            result,
        });
        self.iterations = 0;
        self.in_flight = false;
        self.changes.clear();
        self.last_change = f64::NAN;
        Ok(())
    }

    fn next_launch(&mut self) -> Result<Option<LaunchPlan>, AppError> {
        let Some(buffers) = self.device else {
            return Err(self.fail(AppProblem::NotLoaded));
        };
        if self.in_flight {
            return Err(self.fail(AppProblem::LaunchInFlight));
        }
        if self.iterations >= ITERATIONS {
            log::info!(
                "pagerank: {} iterations, last L1 change {:e}",
                self.iterations,
                self.last_change
            );
            return Ok(None);
        }
        let inputs = if self.iterations == 0 {
            Vec::new()
        } else {
            vec![DeviceInput {
                address: buffers.contributions,
                bytes: self.contribution_bytes(),
            }]
        };
        self.iterations += 1;
        let n = self.input.graph.vertices();
        let tasks = Self::tasks(n);
        self.changes = vec![None; tasks.len()];
        self.in_flight = true;
        Ok(Some(LaunchPlan {
            inputs,
            command: CommandDescriptor {
                kernel: KernelId::PageRankGather as u32,
                mode: 0,
                tag: 0,
                flags: 0,
                result_address: buffers.result.0,
                result_length: u64::from(n) * 4,
                args: [
                    buffers.parameters.0,
                    buffers.contributions.0,
                    u64::from(VERTICES_PER_ITEM),
                    0,
                ],
            },
            tasks,
        }))
    }

    fn run_task(&mut self, task: &HostTask, result: &[u8]) -> Result<HostCost, AppError> {
        if !self.in_flight {
            return Err(self.fail(AppProblem::NoLaunch { call: "run_task" }));
        }
        let length = task.needs.end.saturating_sub(task.needs.start);
        if result.len() as u64 != length
            || task.needs.start % 4 != 0
            || length % 4 != 0
            || task.needs.end > u64::from(self.input.graph.vertices()) * 4
        {
            return Err(self.fail(AppProblem::DoesNotFit {
                task: task.id,
                needs: task.needs.clone(),
                bytes: result.len(),
            }));
        }
        match self.changes.get(task.id as usize) {
            None => {
                return Err(self.fail(AppProblem::NoSuchTask {
                    task: task.id,
                    tasks: self.changes.len(),
                }))
            }
            Some(Some(_)) => return Err(self.fail(AppProblem::RanTwice { task: task.id })),
            Some(None) => {}
        }
        let (change, cost) = host::update_ranks(
            &self.input.graph,
            (task.needs.start / 4) as u32,
            result,
            self.base,
            self.dangling_share,
            &mut self.rank,
            &mut self.contributions,
        );
        if let Some(slot) = self.changes.get_mut(task.id as usize) {
            *slot = Some(change);
        }
        Ok(cost)
    }

    fn finish_launch(&mut self) -> Result<HostCost, AppError> {
        if let Some(problem) = AppProblem::never_ran(self.changes.iter().map(Option::is_some)) {
            return Err(self.fail(problem));
        }
        self.last_change = self.changes.iter().flatten().sum();
        self.dangling_share = reference::dangling_share(&self.input.graph, &self.rank);
        self.in_flight = false;
        let dangling = (0..self.input.graph.vertices())
            .filter(|v| self.input.graph.degree(*v) == 0)
            .count() as u64;
        log::debug!(
            "pagerank: iteration {} L1 change {:e}",
            self.iterations,
            self.last_change
        );
        Ok(HostCost {
            operations: self.changes.len() as u64 * host::OPERATIONS_PER_TASK_TOTAL
                + dangling * host::OPERATIONS_PER_DANGLING_VERTEX,
            memory_bytes: dangling * 64,
        })
    }

    fn verify(&self) -> Verification {
        let fail = |detail: String| Verification {
            passed: false,
            detail,
        };
        if self.iterations != ITERATIONS || self.in_flight {
            return fail(format!(
                "pagerank: {} of {ITERATIONS} iterations finished",
                self.iterations
            ));
        }
        let mirrored = self
            .input
            .mirrored
            .get_or_init(|| reference::mirrored(&self.input.graph));
        if let Some(v) =
            (0..mirrored.len()).find(|v| self.rank[*v].to_bits() != mirrored[*v].to_bits())
        {
            return fail(format!(
                "pagerank: vertex {v}: rank {:e}, the reference says {:e}",
                self.rank[v], mirrored[v]
            ));
        }
        let exact = self
            .input
            .exact
            .get_or_init(|| reference::plain_f64(&self.input.graph));
        let distance: f64 = self
            .rank
            .iter()
            .zip(exact)
            .map(|(a, b)| (f64::from(*a) - b).abs())
            .sum();
        if distance > F64_TOLERANCE {
            return fail(format!(
                "pagerank: L1 distance {distance:e} to the f64 power iteration exceeds {F64_TOLERANCE:e}"
            ));
        }
        Verification {
            passed: true,
            detail: format!(
                "{} ranks after {ITERATIONS} iterations match the mirrored f32 reference bit for bit and the f64 power iteration within L1 {distance:.2e} (tolerance {F64_TOLERANCE:e}); last L1 change {:.3e}; {}",
                self.rank.len(),
                self.last_change,
                self.input.description
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
    fn small_instance_end_to_end_on_a_fake_device_matches_the_references() {
        let mut app = PageRankApplication::new(&small()).unwrap();
        assert_eq!(app.graph().vertices(), SMALL_VERTICES);
        assert_eq!(
            app.graph().arcs() as usize,
            2 * generated_edges(SMALL_VERTICES)
        );
        let (launches, cost) = testing::run(&mut app, |_, _| {});
        assert_eq!(launches, ITERATIONS);
        assert!(cost.operations > 0);
        let verification = app.verify();
        assert!(verification.passed, "{}", verification.detail);
        let sum: f64 = app.rank().iter().map(|r| f64::from(*r)).sum();
        assert!((sum - 1.0).abs() < 1e-4, "{sum}");
    }

    #[test]
    fn one_wrong_sum_fails_verification() {
        let mut app = PageRankApplication::new(&small()).unwrap();
        testing::run(&mut app, |launch, bytes| {
            if launch == ITERATIONS - 1 {
                bytes[40..44].copy_from_slice(&1.0_f32.to_le_bytes());
            }
        });
        let verification = app.verify();
        assert!(!verification.passed);
        assert!(
            verification.detail.contains("vertex 10"),
            "{}",
            verification.detail
        );
    }

    #[test]
    fn tasks_cover_the_result_in_order() {
        let tasks = PageRankApplication::tasks(TASK_VERTICES + 5);
        let needs: Vec<_> = tasks.iter().map(|t| t.needs.clone()).collect();
        let bytes = u64::from(TASK_VERTICES) * 4;
        assert_eq!(needs, [0..bytes, bytes..bytes + 20]);
    }

    #[test]
    fn each_task_needs_exactly_the_items_of_its_1024_vertices() {
        let mut app = PageRankApplication::new(&small()).unwrap();
        let device = testing::FakeDevice::loaded(&mut app);
        let plan = app.next_launch().unwrap().unwrap();
        let kernel = firmware::kernels::Kernel::decode(&plan.command, &device).unwrap();
        assert_eq!(kernel.items(), SMALL_VERTICES);
        assert_eq!(plan.tasks.len(), (SMALL_VERTICES / TASK_VERTICES) as usize);
        for task in &plan.tasks {
            let mut covered = task.needs.start;
            for item in task.id * TASK_VERTICES..(task.id + 1) * TASK_VERTICES {
                let spec = kernel.item(item, &device).unwrap();
                assert_eq!(spec.result_offset, covered, "task {} item {item}", task.id);
                covered += u64::from(spec.result_length);
            }
            assert_eq!(covered, task.needs.end, "task {}", task.id);
        }
    }

    #[test]
    fn generator_sizes_are_table_iv_and_seeded() {
        assert_eq!(generated_edges(PAPER_VERTICES), PAPER_EDGES);
        let a = PageRankApplication::new(&small()).unwrap();
        let b = PageRankApplication::new(&small()).unwrap();
        assert_eq!(a.graph(), b.graph());
    }

    #[test]
    fn missing_data_file_is_an_input_error() {
        let options = WorkloadOptions {
            data_dir: Some(std::env::temp_dir().join("axle-pagerank-no-such-file.tar.gz")),
            ..WorkloadOptions::default()
        };
        let error = PageRankApplication::new(&options).unwrap_err();
        assert!(matches!(error, WorkloadError::Input { .. }), "{error}");
    }

    #[test]
    fn a_different_graph_in_place_of_the_dblp_file_is_described_as_what_was_read() {
        let dir = crate::testing::TempDir::new("pagerank-five");
        let mtx = "%%MatrixMarket matrix coordinate pattern symmetric\n5 5 4\n2 1\n3 2\n4 3\n5 4\n";
        let path = dir.file(
            "five.tar.gz",
            &crate::testing::tar_gz(&[("five/five.mtx", mtx.as_bytes())]),
        );
        // The file itself as the data path.
        let options = WorkloadOptions {
            data_dir: Some(path),
            ..WorkloadOptions::default()
        };
        let app = PageRankApplication::new(&options).unwrap();
        assert_eq!(app.graph().vertices(), 5);
        let description = &app.input.description;
        assert!(
            description.contains("five.tar.gz: 5 vertices, 4 edges = 8 arcs read")
                && description.contains("WARNING")
                && description.contains(crate::datafile::COAUTHORS_DBLP.sha256),
            "{description}"
        );
        // The fixed text of old, which named the paper's counts whatever was read.
        assert!(
            !description.contains("299067 vertices, 977676 edges = 1955352 arcs"),
            "{description}"
        );
    }

    /// The real coAuthorsDBLP graph, when the repository's shared data is present.
    #[test]
    fn real_file_when_present() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/data")
            .join(DATA_FILE);
        if !path.exists() {
            return;
        }
        let graph = crate::graph::read_mtx_tar_gz(&path).unwrap();
        let identity = crate::datafile::identify(&path, crate::datafile::COAUTHORS_DBLP).unwrap();
        assert!(identity.is_known(), "{:?}", identity.warning());
        assert_eq!(graph.vertices, PAPER_VERTICES);
        assert_eq!(graph.edges.len(), PAPER_EDGES);
    }
}
