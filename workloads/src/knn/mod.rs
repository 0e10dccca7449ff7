//! KNN, paper Table IV (a), (b), (c): VectorDB, `Dim x #Rows` = 2048 x 128, 1024 x 256,
//! 512 x 512.
//!
//! # The offload
//!
//! One launch of the device kernel `firmware::kernels::knn` computes the squared L2 distance
//! of every (query, row) pair, 4 bytes each, query-major: the distance of query `q` to row `r`
//! is at result offset `4 (q rows + r)`. The host selects each query's `k` nearest rows.
//!
//! Table IV gives the database shape but no query count. The paper's Figure 14(a) does: KNN
//! (a)'s result is 2048 bytes ("512 rows * 4 bytes"), which with Table IV's 128 rows of (a) is
//! a batch of 4 queries (4 x 128 distances of 4 bytes). [`DEFAULT_QUERIES`] is that batch, for
//! (b) and (c) too; the `queries` option changes it. `k` defaults to [`DEFAULT_K`]; the order is smaller
//! squared distance first, ties broken by the lower row index.
//!
//! # Work items, and why not M²NDP's decomposition
//!
//! One CCM work item computes one distance (one query, one row): the µthread is "assigned a
//! fixed-size input vector" (paper Section V-A), a database row, and writes its 4-byte result
//! once, which the result monitor sees complete. M²NDP's own distance kernel
//! (`examples/benchmarks/kmeans/kmeans_kernel0.py`) instead gives each µthread one 32-byte
//! packet of a row, adds the packet's partial sum into the result with vector atomics in the
//! scratchpad, and writes the results out in a finalizer at the end of the kernel: every
//! distance would then reach the result space only when the whole kernel has run, and nothing
//! could be streamed early, so we do not follow it here. A consequence to know when reading
//! the figures: at paper scale knn-a has 512 items (4 queries x 128 rows) for the CCM's 1,024
//! µthreads, so they run in one wave, share device memory equally and end together; knn-c's
//! 2,048 items run in two waves (see REPRODUCTION.md, Figure 10(a)).
//!
//! # Host tasks
//!
//! Each task covers `task_rows` (default [`DEFAULT_TASK_ROWS`], 128 bytes) consecutive
//! distances of one query; a query's last task may be shorter, and no task spans two queries.
//! Tasks are numbered query-major and together cover every result byte exactly once. A task
//! keeps its chunk's local top-k ([`host::chunk_top_k`]) and folds it into its query's
//! running top-k ([`host::merge_top_k`]) at once, so the launch's final step only copies the
//! answers out: a streaming host finishes a query as soon as its last chunk has arrived.
//!
//! All tasks share one [`HostTask::chain`]: the selection runs on one application thread, as
//! the host side of KNN is one thread selecting over the streamed distances (one heap per
//! query). This is what makes KNN's host processing a serial component of the end-to-end
//! pipeline (paper Section III-B, Figure 4), which back-streaming can overlap with the CCM's
//! distance computation. Costs are in [`host`].
//!
//! # Checking
//!
//! [`reference::brute_force`] sorts every distance of every query; the answer must match it
//! exactly: the same rows in the same order with bit-identical distances.

pub mod data;
pub mod host;
pub mod reference;

use std::fmt;

use host_runtime::app::{
    AppError, AppProblem, Application, BadResult, DeviceLoader, HostCost, HostTask, LaunchPlan,
    LoadError, Scope, Verification,
};
use shared_abi::params::knn::{pack_shape, RESULT_BYTES_PER_ITEM};
use shared_abi::{CommandDescriptor, DeviceAddress, KernelId};

use crate::{OptionError, WorkloadError, WorkloadInfo, WorkloadOptions};
use data::{to_le_bytes, KnnData};
use host::Neighbor;

/// Queries per batch unless the `queries` option says otherwise: 4, from the paper's Figure
/// 14(a) (KNN (a)'s result is 2048 bytes, 4 queries x 128 rows x 4 bytes).
pub const DEFAULT_QUERIES: u32 = 4;

/// Neighbours per query unless the `k` option says otherwise.
pub const DEFAULT_K: u32 = 10;

/// Distances per host task unless the `task_rows` option says otherwise (32 x 4 = 128 bytes).
pub const DEFAULT_TASK_ROWS: u32 = 32;

/// The chain of every KNN host task: the one application thread that selects.
pub const SELECTION_THREAD: u32 = 0;

/// Alignment of every device allocation (a 64-byte cache line).
pub const DEVICE_ALIGNMENT: u64 = 64;

/// The database shape of one KNN workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnnShape {
    /// Catalog name.
    pub name: &'static str,
    /// Elements per vector (a multiple of 8, the kernel's lanes).
    pub dim: u32,
    /// Database vectors.
    pub rows: u32,
}

/// Table IV (a).
pub const KNN_A: KnnShape = KnnShape {
    name: "knn-a",
    dim: 2048,
    rows: 128,
};
/// Table IV (b).
pub const KNN_B: KnnShape = KnnShape {
    name: "knn-b",
    dim: 1024,
    rows: 256,
};
/// Table IV (c).
pub const KNN_C: KnnShape = KnnShape {
    name: "knn-c",
    dim: 512,
    rows: 512,
};

/// The three shapes, in Table IV order.
pub const SHAPES: [KnnShape; 3] = [KNN_A, KNN_B, KNN_C];

impl KnnShape {
    /// The catalog shape called `name`.
    pub fn by_name(name: &str) -> Option<KnnShape> {
        SHAPES.into_iter().find(|shape| shape.name == name)
    }

    /// Its catalog entry.
    pub fn info(self) -> WorkloadInfo {
        WorkloadInfo {
            name: self.name,
            domain: "VectorDB",
            application: "KNN",
            table_iv: match self.dim {
                2048 => "Dim: 2048, #Rows: 128",
                1024 => "Dim: 1024, #Rows: 256",
                _ => "Dim: 512, #Rows: 512",
            },
            characteristics: format!(
                "Dim: {}, #Rows: {}; a batch of {DEFAULT_QUERIES} queries, top-{DEFAULT_K} (both options)",
                self.dim, self.rows
            ),
            offloaded: "squared L2 distance per (query, row) (4 B each)",
            host_task: "top-k selection on one application thread, folding each arriving chunk into its query's top-k",
        }
    }
}

/// The rows of one query that one host task covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TaskSpan {
    query: u32,
    first_row: u32,
    rows: u32,
}

/// Where the data set lives in device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DeviceBuffers {
    database: DeviceAddress,
    queries: DeviceAddress,
    result: DeviceAddress,
}

/// A KNN workload instance: data, plan, host-task state and answer.
pub struct KnnApplication {
    shape: KnnShape,
    k: u32,
    task_rows: u32,
    data: KnnData,
    spans: Vec<TaskSpan>,
    device: Option<DeviceBuffers>,
    launched: bool,
    partial: Vec<Option<Vec<Neighbor>>>,
    /// Each query's running top-k, best first.
    running: Vec<Vec<Neighbor>>,
    answer: Option<Vec<Vec<Neighbor>>>,
}

impl fmt::Debug for KnnApplication {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KnnApplication")
            .field("shape", &self.shape)
            .field("k", &self.k)
            .field("task_rows", &self.task_rows)
            .field("data", &self.data)
            .field("tasks", &self.spans.len())
            .field("device", &self.device)
            .field("launched", &self.launched)
            .field("answered", &self.answer.is_some())
            .finish()
    }
}

impl KnnApplication {
    /// A KNN instance of `shape` with `options` (seeded data, or the real embeddings when
    /// `options.data_dir` is set).
    pub fn new(
        shape: KnnShape,
        options: &WorkloadOptions,
    ) -> Result<KnnApplication, WorkloadError> {
        let invalid = |reason: OptionError| WorkloadError::InvalidOption {
            workload: shape.name,
            reason,
        };
        let queries = options.queries.unwrap_or(DEFAULT_QUERIES);
        let k = options.k.unwrap_or(DEFAULT_K);
        let task_rows = options.task_rows.unwrap_or(DEFAULT_TASK_ROWS);
        if queries == 0 {
            return Err(invalid(OptionError::NoQueries));
        }
        if shape
            .rows
            .checked_mul(queries)
            .and_then(|items| items.checked_mul(RESULT_BYTES_PER_ITEM))
            .is_none()
        {
            return Err(invalid(OptionError::TooManyDistances {
                queries,
                rows: shape.rows,
            }));
        }
        if k == 0 || k > shape.rows {
            return Err(invalid(OptionError::KOutOfRange {
                k,
                rows: shape.rows,
            }));
        }
        if task_rows == 0 {
            return Err(invalid(OptionError::NoTaskRows));
        }
        let data = match &options.data_dir {
            Some(path) => KnnData::from_embeddings_file(path, shape.dim, shape.rows, queries)?,
            None => KnnData::generate(shape.dim, shape.rows, queries, options.seed),
        };
        log::info!(
            "knn: {} dim {} rows {} queries {queries} k {k} task_rows {task_rows} ({})",
            shape.name,
            shape.dim,
            shape.rows,
            data.source()
        );
        let spans = task_spans(shape.rows, queries, task_rows);
        Ok(KnnApplication {
            shape,
            k,
            task_rows,
            data,
            partial: vec![None; spans.len()],
            running: vec![Vec::new(); queries as usize],
            spans,
            device: None,
            launched: false,
            answer: None,
        })
    }

    /// The database shape.
    pub fn shape(&self) -> KnnShape {
        self.shape
    }

    /// Neighbours per query.
    pub fn k(&self) -> u32 {
        self.k
    }

    /// Distances per host task.
    pub fn task_rows(&self) -> u32 {
        self.task_rows
    }

    /// The data set.
    pub fn data(&self) -> &KnnData {
        &self.data
    }

    /// Each query's top-k, best first, once the launch is finished.
    pub fn answer(&self) -> Option<&[Vec<Neighbor>]> {
        self.answer.as_deref()
    }

    /// Bytes of the result space: `rows * queries * 4`.
    pub fn result_length(&self) -> u64 {
        u64::from(self.shape.rows)
            * u64::from(self.data.queries())
            * u64::from(RESULT_BYTES_PER_ITEM)
    }

    /// The host tasks of the launch.
    pub fn tasks(&self) -> Vec<HostTask> {
        self.spans
            .iter()
            .enumerate()
            .map(|(id, span)| HostTask {
                id: id as u32,
                needs: self.span_bytes(span),
                chain: Some(SELECTION_THREAD),
            })
            .collect()
    }

    /// Result bytes a span covers.
    fn span_bytes(&self, span: &TaskSpan) -> std::ops::Range<u64> {
        let first = u64::from(span.query) * u64::from(self.shape.rows) + u64::from(span.first_row);
        let bytes = u64::from(RESULT_BYTES_PER_ITEM);
        first * bytes..(first + u64::from(span.rows)) * bytes
    }

    /// A host step's failure (logged; the runtime fails the run with it).
    fn fail(&self, problem: AppProblem) -> AppError {
        let error = AppError::new(self.shape.name, Scope::Whole, problem);
        log::error!("knn: {error}");
        error
    }
}

/// Query-major spans of at most `task_rows` rows, never crossing a query.
fn task_spans(rows: u32, queries: u32, task_rows: u32) -> Vec<TaskSpan> {
    let mut spans = Vec::new();
    for query in 0..queries {
        let mut first_row = 0;
        while first_row < rows {
            let count = task_rows.min(rows - first_row);
            spans.push(TaskSpan {
                query,
                first_row,
                rows: count,
            });
            first_row += count;
        }
    }
    spans
}

impl Application for KnnApplication {
    fn name(&self) -> &str {
        self.shape.name
    }

    fn device_bytes(&self) -> u64 {
        let dim = u64::from(self.data.dim());
        // The database, the query vectors and the result, with a line of alignment slack each.
        4 * dim * u64::from(self.data.rows())
            + 4 * dim * u64::from(self.data.queries())
            + self.result_length()
            + 3 * DEVICE_ALIGNMENT
    }

    fn load(&mut self, device: &mut dyn DeviceLoader) -> Result<(), LoadError> {
        let database_bytes = to_le_bytes(self.data.database());
        let query_bytes = to_le_bytes(self.data.query_vectors());
        let result_length = self.result_length();
        let database = device.allocate(database_bytes.len() as u64, DEVICE_ALIGNMENT)?;
        device.write(database, &database_bytes)?;
        let queries = device.allocate(query_bytes.len() as u64, DEVICE_ALIGNMENT)?;
        device.write(queries, &query_bytes)?;
        let result = device.allocate(result_length, DEVICE_ALIGNMENT)?;
        device.write(result, &vec![0; result_length as usize])?;
        log::debug!(
            "knn: loaded database {database_bytes} B at {:#x}, queries {query_bytes} B at {:#x}, result {result_length} B at {:#x}",
            database.0,
            queries.0,
            result.0,
            database_bytes = database_bytes.len(),
            query_bytes = query_bytes.len(),
        );
        self.device = Some(DeviceBuffers {
            database,
            queries,
            result,
        });
        self.launched = false;
        self.partial = vec![None; self.spans.len()];
        self.running = vec![Vec::new(); self.data.queries() as usize];
        self.answer = None;
        Ok(())
    }

    fn next_launch(&mut self) -> Result<Option<LaunchPlan>, AppError> {
        if self.launched {
            return Ok(None);
        }
        let Some(buffers) = self.device else {
            return Err(self.fail(AppProblem::NotLoaded));
        };
        self.launched = true;
        let command = CommandDescriptor {
            kernel: KernelId::KnnDistance as u32,
            mode: 0,
            tag: 0,
            flags: 0,
            result_address: buffers.result.0,
            result_length: self.result_length(),
            args: [
                buffers.database.0,
                buffers.queries.0,
                pack_shape(self.shape.rows, self.shape.dim),
                u64::from(self.data.queries()),
            ],
        };
        Ok(Some(LaunchPlan {
            inputs: Vec::new(),
            command,
            tasks: self.tasks(),
        }))
    }

    fn run_task(&mut self, task: &HostTask, result: &[u8]) -> Result<HostCost, AppError> {
        let Some(span) = self.spans.get(task.id as usize).copied() else {
            return Err(self.fail(AppProblem::NoSuchTask {
                task: task.id,
                tasks: self.spans.len(),
            }));
        };
        let needs = self.span_bytes(&span);
        let expected = span.rows as usize * RESULT_BYTES_PER_ITEM as usize;
        if task.needs != needs || result.len() != expected {
            return Err(self.fail(AppProblem::WrongInput {
                task: task.id,
                needs: task.needs.clone(),
                bytes: result.len(),
                planned: needs,
            }));
        }
        if self.running.get(span.query as usize).is_none() {
            return Err(self.fail(AppProblem::BadResult {
                task: task.id,
                what: BadResult::NoSuchQuery { query: span.query },
            }));
        }
        if self
            .partial
            .get(task.id as usize)
            .is_some_and(Option::is_some)
        {
            return Err(self.fail(AppProblem::RanTwice { task: task.id }));
        }
        let (kept, chunk_cost) = host::chunk_top_k(span.first_row, result, self.k as usize);
        let Some(running) = self.running.get_mut(span.query as usize) else {
            return Ok(chunk_cost);
        };
        let (folded, fold_cost) =
            host::merge_top_k([running.as_slice(), kept.as_slice()], self.k as usize);
        *running = folded;
        let cost = chunk_cost.plus(fold_cost);
        log::trace!(
            "knn: task {} query {} rows {}+{} kept {}",
            task.id,
            span.query,
            span.first_row,
            span.rows,
            kept.len()
        );
        if let Some(slot) = self.partial.get_mut(task.id as usize) {
            *slot = Some(kept);
        }
        Ok(cost)
    }

    fn finish_launch(&mut self) -> Result<HostCost, AppError> {
        if let Some(problem) = AppProblem::never_ran(self.partial.iter().map(Option::is_some)) {
            return Err(self.fail(problem));
        }
        let answer = self.running.clone();
        // Copying each query's answer out: one load and one store per neighbour.
        let kept: u64 = answer.iter().map(|list| list.len() as u64).sum();
        let cost = HostCost {
            operations: kept.saturating_mul(host::STORE_OPERATIONS_PER_KEPT),
            memory_bytes: kept.saturating_mul(host::NEIGHBOR_BYTES),
        };
        log::debug!("knn: answered {} queries", answer.len());
        self.answer = Some(answer);
        Ok(cost)
    }

    fn verify(&self) -> Verification {
        let fail = |detail: String| Verification {
            passed: false,
            detail,
        };
        let Some(answer) = &self.answer else {
            return fail(format!("{}: the launch never finished", self.shape.name));
        };
        let expected = reference::brute_force(&self.data, self.k as usize);
        match reference::compare(answer, &expected) {
            Ok(()) => Verification {
                passed: true,
                detail: format!(
                    "{} queries x top-{} match brute force ({}: {}-d x {} rows, {})",
                    answer.len(),
                    self.k,
                    self.shape.name,
                    self.shape.dim,
                    self.shape.rows,
                    self.data.source()
                ),
            },
            Err(difference) => fail(format!("{}: {difference}", self.shape.name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{self, FakeDevice};
    use firmware::hal::DeviceMemory;

    fn options(queries: u32) -> WorkloadOptions {
        WorkloadOptions {
            queries: Some(queries),
            ..WorkloadOptions::default()
        }
    }

    /// Loads `app`, runs its one launch's kernel items on the fake device, and returns the
    /// device and the plan (tasks not yet run).
    fn load_and_compute(app: &mut KnnApplication) -> (FakeDevice, LaunchPlan) {
        // KNN does not size device memory (no `device_bytes`): 4 MiB holds every shape.
        let mut device = FakeDevice::new(4 << 20);
        app.load(&mut device).unwrap();
        let plan = app.next_launch().unwrap().unwrap();
        let launched = testing::launch(&mut device, &plan);
        assert_eq!(
            u64::from(launched.kernel.items()) * 4,
            plan.command.result_length
        );
        (device, plan)
    }

    #[test]
    fn every_shape_end_to_end_on_a_fake_device_matches_brute_force() {
        for shape in SHAPES {
            let mut app = KnnApplication::new(shape, &options(3)).unwrap();
            let (device, plan) = load_and_compute(&mut app);
            let cost = testing::run_tasks(&mut app, &device, &plan);
            assert!(cost.operations > 0);
            assert!(app.next_launch().unwrap().is_none(), "exactly one launch");
            let verification = app.verify();
            assert!(verification.passed, "{}", verification.detail);
            assert!(
                verification
                    .detail
                    .starts_with("3 queries x top-10 match brute force"),
                "{}",
                verification.detail
            );
        }
    }

    #[test]
    fn default_batch_end_to_end() {
        let mut app = KnnApplication::new(KNN_B, &WorkloadOptions::default()).unwrap();
        let (device, plan) = load_and_compute(&mut app);
        assert_eq!(plan.tasks.len(), DEFAULT_QUERIES as usize * 256 / 32);
        testing::run_tasks(&mut app, &device, &plan);
        let verification = app.verify();
        assert!(verification.passed, "{}", verification.detail);
        assert!(verification.detail.starts_with(&format!(
            "{DEFAULT_QUERIES} queries x top-10 match brute force"
        )));
    }

    #[test]
    fn corrupting_one_distance_fails_verification() {
        let mut app = KnnApplication::new(KNN_C, &options(2)).unwrap();
        let (device, plan) = load_and_compute(&mut app);
        // Query 1's worst row becomes its nearest.
        let worst = reference::brute_force(app.data(), 512)[1][511].row;
        let offset = plan.command.result_address + 4 * (512 + u64::from(worst));
        DeviceMemory::write(&device, DeviceAddress(offset), &0.0_f32.to_le_bytes()).unwrap();
        testing::run_tasks(&mut app, &device, &plan);
        let verification = app.verify();
        assert!(!verification.passed);
        assert!(
            verification
                .detail
                .contains(&format!("query 1 rank 0: row {worst}")),
            "{}",
            verification.detail
        );
    }

    #[test]
    fn plan_command_and_tasks_cover_the_result_space() {
        let mut app = KnnApplication::new(
            KNN_A,
            &WorkloadOptions {
                task_rows: Some(48),
                ..options(3)
            },
        )
        .unwrap();
        app.load(&mut FakeDevice::new(4 << 20)).unwrap();
        let plan = app.next_launch().unwrap().unwrap();
        let command = plan.command;
        assert_eq!(command.kernel, KernelId::KnnDistance as u32);
        assert_eq!((command.mode, command.tag, command.flags), (0, 0, 0));
        assert_eq!(command.args[2], 128 | (2048 << 32));
        assert_eq!(command.args[3], 3);
        assert_eq!(command.result_length, 128 * 3 * 4);
        // 128 rows in tasks of 48: 48, 48, 32 per query; contiguous, covering every byte.
        let lengths: Vec<u64> = plan
            .tasks
            .iter()
            .map(|task| task.needs.end - task.needs.start)
            .collect();
        assert_eq!(lengths, [192, 192, 128, 192, 192, 128, 192, 192, 128]);
        let mut next = 0;
        for (id, task) in plan.tasks.iter().enumerate() {
            assert_eq!(task.id as usize, id);
            assert_eq!(task.needs.start, next);
            // Never spans two queries.
            assert_eq!(task.needs.start / 512, (task.needs.end - 1) / 512);
            next = task.needs.end;
        }
        assert_eq!(next, command.result_length);
    }

    #[test]
    fn hand_made_distances_give_the_top_k_with_ties() {
        let shape = KnnShape {
            name: "knn-test",
            dim: 8,
            rows: 6,
        };
        let options = WorkloadOptions {
            queries: Some(2),
            k: Some(3),
            task_rows: Some(4),
            ..WorkloadOptions::default()
        };
        let mut app = KnnApplication::new(shape, &options).unwrap();
        let tasks = app.tasks();
        assert_eq!(tasks.len(), 4);
        let bytes = |distances: &[f32]| -> Vec<u8> {
            distances.iter().flat_map(|d| d.to_le_bytes()).collect()
        };
        // Query 0: rows 0..4 then 4..6. Row 5 ties row 1 at 1.0 (row 1 wins), row 3 ties row 4 at 2.0.
        app.run_task(&tasks[0], &bytes(&[9.0, 1.0, 5.0, 2.0]))
            .unwrap();
        app.run_task(&tasks[1], &bytes(&[2.0, 1.0])).unwrap();
        // Query 1: all equal: the three lowest rows.
        app.run_task(&tasks[3], &bytes(&[7.0, 7.0])).unwrap();
        app.run_task(&tasks[2], &bytes(&[7.0, 7.0, 7.0, 7.0]))
            .unwrap();
        let cost = app.finish_launch().unwrap();
        // The final step only copies the 2 x 3 answers out; selection happened in the tasks.
        assert_eq!(cost.operations, 6 * host::STORE_OPERATIONS_PER_KEPT);
        let answer = app.answer().unwrap();
        let rows = |list: &[Neighbor]| list.iter().map(|n| n.row).collect::<Vec<_>>();
        assert_eq!(rows(&answer[0]), [1, 5, 3]);
        assert_eq!(rows(&answer[1]), [0, 1, 2]);
        assert_eq!(answer[0][2].distance, 2.0);
    }

    #[test]
    fn a_task_that_never_ran_ran_twice_or_got_wrong_bytes_fails_at_the_call() {
        let shape = KnnShape {
            name: "knn-test",
            dim: 8,
            rows: 4,
        };
        let options = WorkloadOptions {
            queries: Some(1),
            k: Some(2),
            task_rows: Some(2),
            ..WorkloadOptions::default()
        };
        let mut app = KnnApplication::new(shape, &options).unwrap();
        let tasks = app.tasks();
        app.run_task(&tasks[0], &[0; 8]).unwrap();
        let error = app.finish_launch().unwrap_err();
        assert_eq!(
            error.problem,
            AppProblem::NeverRan {
                missing: 1,
                first: 1
            }
        );
        assert_eq!(
            error.to_string(),
            "knn-test: 1 tasks never ran (first: task 1)"
        );

        let mut app = KnnApplication::new(shape, &options).unwrap();
        let error = app.run_task(&tasks[1], &[0; 4]).unwrap_err();
        assert!(
            matches!(
                error.problem,
                AppProblem::WrongInput {
                    task: 1,
                    bytes: 4,
                    ..
                }
            ),
            "{error}"
        );
        let error = app
            .run_task(&tasks[0], &[0; 8])
            .and_then(|_| app.run_task(&tasks[0], &[0; 8]));
        assert_eq!(error.unwrap_err().problem, AppProblem::RanTwice { task: 0 });
    }

    #[test]
    fn unfinished_launch_fails_verification() {
        let app = KnnApplication::new(KNN_B, &options(1)).unwrap();
        let verification = app.verify();
        assert!(!verification.passed);
        assert!(verification.detail.contains("never finished"));
    }

    #[test]
    fn invalid_options_are_errors() {
        let bad = |options: WorkloadOptions| {
            KnnApplication::new(KNN_A, &options)
                .unwrap_err()
                .to_string()
        };
        assert!(bad(options(0)).contains("queries"));
        assert!(bad(WorkloadOptions {
            k: Some(0),
            ..options(1)
        })
        .contains("`k`"));
        assert!(bad(WorkloadOptions {
            k: Some(129),
            ..options(1)
        })
        .contains("1..=128"));
        assert!(bad(WorkloadOptions {
            task_rows: Some(0),
            ..options(1)
        })
        .contains("task_rows"));
        assert!(bad(options(u32::MAX)).contains("queries"));
    }

    #[test]
    fn missing_data_file_is_an_error_not_a_panic() {
        let options = WorkloadOptions {
            data_dir: Some(
                std::env::temp_dir()
                    .join("axle-knn-no-such-dir")
                    .join("x.vec"),
            ),
            ..WorkloadOptions::default()
        };
        let error = KnnApplication::new(KNN_B, &options).unwrap_err();
        assert!(
            matches!(error, WorkloadError::Data(data::DataError::Read { .. })),
            "{error}"
        );
    }

    /// The real embeddings end to end, when `AXLE_DATA_DIR` names `shared/data` (or the file).
    #[test]
    #[ignore = "needs AXLE_DATA_DIR pointing at shared/data"]
    fn real_embeddings_end_to_end() {
        let path =
            std::path::PathBuf::from(std::env::var_os("AXLE_DATA_DIR").expect("AXLE_DATA_DIR"));
        for (shape, max_queries) in [(KNN_A, 122), (KNN_B, 244), (KNN_C, 488)] {
            let options = WorkloadOptions {
                data_dir: Some(path.clone()),
                ..WorkloadOptions::default()
            };
            let mut app = KnnApplication::new(shape, &options).unwrap();
            let (device, plan) = load_and_compute(&mut app);
            testing::run_tasks(&mut app, &device, &plan);
            let verification = app.verify();
            assert!(verification.passed, "{}", verification.detail);
            assert!(
                verification.detail.contains("bge-m3"),
                "{}",
                verification.detail
            );
            let too_many = WorkloadOptions {
                queries: Some(max_queries + 1),
                ..options.clone()
            };
            assert!(KnnApplication::new(shape, &too_many).is_err());
            let most = WorkloadOptions {
                queries: Some(max_queries),
                ..options
            };
            assert!(KnnApplication::new(shape, &most).is_ok());
        }
    }
}
