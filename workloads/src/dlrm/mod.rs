//! DLRM, paper Table IV (i): recommendation inference over one embedding table of dim 256 and
//! 1M rows (here 2^20 = 1,048,576 rows: exactly 1 GiB of `f32`).
//!
//! # The offload
//!
//! The CCM runs the sparse length sum, `firmware::kernels::dlrm`: for each bag of a batch it
//! looks up the bag's rows in the table and sums them into one pooled vector of 256 `f32`
//! (1 KiB per bag, bag-major in the result space). As in M²NDP's SLS, a work item is one
//! 32-byte packet of one bag's pooled vector (8 of its 256 elements): 32 items per bag, 16,384
//! per paper batch, each walking the bag's lookups and loading 32 bytes of each row; the
//! kernel's module docs compare it with M²NDP's kernel line by line. The host runs the dense part: the top MLP
//! `256 -> 128 -> 64 -> 1` with ReLU and a sigmoid over each pooled vector, giving each
//! sample's click probability (CTR). (A full DLRM also has a bottom MLP over dense features
//! and a feature interaction; with one table and no dense features in Table IV, we keep the
//! top MLP only.)
//!
//! The table is loaded once (untimed; seeded values, see [`data`]). Each batch is one launch:
//! its sparse features, the bag offsets and row indices ([`data::Batch`], Zipf-distributed
//! rows), are the launch's [`DeviceInput`], written by the host into one batch buffer before
//! the command, as a serving host receives them with each request batch. The paper scale
//! runs [`data::PAPER`]: 2 batches of 512 bags of 64..=192 lookups (mean 128); `--scale small`
//! runs [`data::SMALL`] (4096 rows, 2 batches of 32 bags of 8..=24).
//!
//! With those sizes the CCM dominates, as in the paper: a mean bag reads 128 KiB of rows (and
//! each of its 32 items its 512 bytes of indices), 512 bags in 16,384 items over the CCM's
//! 1,024 µthreads; the host's MLP is about 2.3 µs per bag over 63 workers.
//!
//! # Host tasks
//!
//! Task `t` of a batch covers bags `t * bags_per_task ..` ([`BAGS_PER_TASK`], the last task may
//! be shorter): it needs exactly those bags' pooled vectors, computes their CTRs, and is
//! independent of every other task (no chain). Tasks are numbered in bag order and together
//! cover every result byte once. `finish_launch` only closes the batch.
//!
//! One bag per task, so 32 items per task: the top MLP needs the whole pooled vector (every
//! first-layer output reads all 256 elements), so a bag is the smallest unit of host work, and
//! a larger one would only make a task wait for more bags. A task waits for its bag's 32
//! packets, which are consecutive items handed out together, so few tasks are incomplete at any
//! time (the bags whose items are still running: about the CCM's 1,024 µthreads / 32), far fewer
//! than a small ring holds.
//!
//! # Checking
//!
//! Every pooled vector the host received must be bit-identical to [`reference::pooled`] (the
//! kernel's summation order from the generator's rows), and every CTR within
//! [`reference::CTR_TOLERANCE`] of the `f64` reference MLP.

pub mod data;
pub mod host;
pub mod reference;

use std::fmt;
use std::ops::Range;

use host_runtime::app::{
    AppError, AppProblem, Application, DeviceInput, DeviceLoader, HostCost, HostTask, LaunchPlan,
    LoadError, Scope, Verification,
};
use shared_abi::params::dlrm::{batch_bytes, pack_batch, pack_shape};
use shared_abi::params::VECTOR_LANES;
use shared_abi::{CommandDescriptor, DeviceAddress, KernelId};

use crate::{OptionError, Scale, WorkloadError, WorkloadInfo, WorkloadOptions};
use data::{Batch, DlrmShape, TableRows, TopMlp};

/// Catalog name.
pub const NAME: &str = "dlrm";

/// Bags per host task: one 1 KiB pooled vector, the top MLP's input (see the module docs).
pub const BAGS_PER_TASK: u32 = 1;

/// Alignment of every device allocation (a 64-byte cache line).
pub const DEVICE_ALIGNMENT: u64 = 64;

/// Table rows generated and written per loader call while loading (2 MiB at dim 256).
const LOAD_ROWS_PER_WRITE: u32 = 2048;

/// Finishing a batch: marking it done and publishing its CTR array (a pointer swap).
const FINISH_OPERATIONS: u64 = 10;

/// The shape `options` selects.
pub fn shape(options: &WorkloadOptions) -> DlrmShape {
    match options.scale {
        Scale::Paper => data::PAPER,
        Scale::Small => data::SMALL,
    }
}

/// The catalog entry with the sizes `options` would use.
pub fn info(options: &WorkloadOptions) -> WorkloadInfo {
    let shape = shape(options);
    WorkloadInfo {
        name: NAME,
        domain: "DLRM",
        application: "Criteo",
        table_iv: "Dim: 256, #Rows: 1M",
        characteristics: format!(
            "Dim: {}, #Rows: {} ({} MiB of seeded f32 in [-1, 1)); {} batches x {} bags of {}..={} lookups, Zipf {} over the rows; one item per 32-byte packet of a bag ({} per bag); top MLP {}-128-64-1 on the host, {BAGS_PER_TASK} bag(s) per host task",
            shape.dim,
            shape.rows,
            shape.table_bytes() >> 20,
            shape.batches,
            shape.bags,
            shape.min_pooling,
            shape.max_pooling,
            shape.zipf_exponent,
            shape.dim / VECTOR_LANES as u32,
            shape.dim,
        ),
        offloaded: "embedding lookup, sparse length sum (one pooled 1 KiB vector per bag)",
        host_task: "the dense part: top MLP and sigmoid per pooled vector (CTR), independent tasks",
    }
}

/// Builds the workload.
pub fn build(options: &WorkloadOptions) -> Result<Box<dyn Application>, WorkloadError> {
    Ok(Box::new(DlrmApplication::new(shape(options), options)?))
}

/// Where the data lives in device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DeviceBuffers {
    table: DeviceAddress,
    batch: DeviceAddress,
    result: DeviceAddress,
}

/// A DLRM instance: data, plan, host-task state and answers.
pub struct DlrmApplication {
    shape: DlrmShape,
    seed: u64,
    batches: Vec<Batch>,
    mlp: TopMlp,
    device: Option<DeviceBuffers>,
    /// The batch of the launch in flight, if any.
    current: Option<usize>,
    /// Batches launched so far.
    launched: usize,
    /// Batches whose launch finished.
    finished: usize,
    /// Per batch: the pooled vectors the tasks received (bag-major).
    received: Vec<Vec<f32>>,
    /// Per batch: each bag's CTR.
    ctr: Vec<Vec<f32>>,
    /// Per batch: which tasks ran.
    ran: Vec<Vec<bool>>,
}

impl fmt::Debug for DlrmApplication {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DlrmApplication")
            .field("shape", &self.shape)
            .field("seed", &self.seed)
            .field("device", &self.device)
            .field("current", &self.current)
            .field("launched", &self.launched)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl DlrmApplication {
    /// An instance of `shape` with `options` (only the seed is used: DLRM has no real data
    /// file, and the KNN options do not apply).
    pub fn new(
        shape: DlrmShape,
        options: &WorkloadOptions,
    ) -> Result<DlrmApplication, WorkloadError> {
        let invalid = |reason: OptionError| WorkloadError::InvalidOption {
            workload: NAME,
            reason,
        };
        if shape.rows == 0
            || shape.bags == 0
            || shape.dim == 0
            || shape.dim % VECTOR_LANES as u32 != 0
        {
            return Err(invalid(OptionError::DlrmShape { shape }));
        }
        if shape.min_pooling > shape.max_pooling
            || shape.zipf_exponent.is_nan()
            || shape.zipf_exponent < 0.0
        {
            return Err(invalid(OptionError::DlrmPooling { shape }));
        }
        if options.data_dir.is_some() {
            log::info!("dlrm: no real data set; the data directory is not used");
        }
        let batches = data::generate_batches(&shape, options.seed);
        if batches
            .iter()
            .any(|batch| u32::try_from(batch.indices.len()).is_err())
        {
            return Err(invalid(OptionError::BatchTooLarge));
        }
        let mlp = data::generate_mlp(shape.dim, options.seed);
        log::info!(
            "dlrm: {} rows x {} dim, {} batches x {} bags, {} lookups",
            shape.rows,
            shape.dim,
            shape.batches,
            shape.bags,
            batches.iter().map(|b| b.indices.len()).sum::<usize>()
        );
        let mut app = DlrmApplication {
            shape,
            seed: options.seed,
            batches,
            mlp,
            device: None,
            current: None,
            launched: 0,
            finished: 0,
            received: Vec::new(),
            ctr: Vec::new(),
            ran: Vec::new(),
        };
        app.reset();
        Ok(app)
    }

    /// The shape.
    pub fn shape(&self) -> &DlrmShape {
        &self.shape
    }

    /// The batches.
    pub fn batches(&self) -> &[Batch] {
        &self.batches
    }

    /// The top MLP.
    pub fn mlp(&self) -> &TopMlp {
        &self.mlp
    }

    /// Each batch's CTRs (complete once every launch finished).
    pub fn ctr(&self) -> &[Vec<f32>] {
        &self.ctr
    }

    /// Bytes of one launch's result space: `bags * dim * 4`.
    pub fn result_length(&self) -> u64 {
        u64::from(self.shape.bags) * self.shape.pooled_bytes()
    }

    /// Bytes of the largest batch buffer.
    fn batch_buffer_bytes(&self) -> u64 {
        self.batches
            .iter()
            .map(|batch| batch_bytes(batch.bags(), batch.index_count()))
            .max()
            .unwrap_or(0)
    }

    /// Tasks per launch.
    fn task_count(&self) -> u32 {
        self.shape.bags.div_ceil(BAGS_PER_TASK)
    }

    /// The bags task `task` covers.
    fn task_bags(&self, task: u32) -> Range<u32> {
        let start = task.saturating_mul(BAGS_PER_TASK).min(self.shape.bags);
        start..start.saturating_add(BAGS_PER_TASK).min(self.shape.bags)
    }

    /// The host tasks of a launch.
    pub fn tasks(&self) -> Vec<HostTask> {
        let pooled = self.shape.pooled_bytes();
        (0..self.task_count())
            .map(|id| {
                let bags = self.task_bags(id);
                HostTask {
                    id,
                    needs: u64::from(bags.start) * pooled..u64::from(bags.end) * pooled,
                    chain: None,
                }
            })
            .collect()
    }

    /// Clears every answer.
    fn reset(&mut self) {
        let bags = self.shape.bags as usize;
        let batches = self.batches.len();
        self.current = None;
        self.launched = 0;
        self.finished = 0;
        self.received = vec![vec![f32::NAN; bags * self.shape.dim as usize]; batches];
        self.ctr = vec![vec![f32::NAN; bags]; batches];
        self.ran = vec![vec![false; self.task_count() as usize]; batches];
    }

    /// A host step's failure in `scope` (logged; the runtime fails the run with it).
    fn fail(&self, scope: Scope, problem: AppProblem) -> AppError {
        let error = AppError::new(NAME, scope, problem);
        log::error!("dlrm: {error}");
        error
    }
}

impl Application for DlrmApplication {
    fn name(&self) -> &str {
        NAME
    }

    fn device_bytes(&self) -> u64 {
        self.shape.table_bytes()
            + self.batch_buffer_bytes()
            + self.result_length()
            + 3 * DEVICE_ALIGNMENT
    }

    fn image_key(&self) -> Option<String> {
        // The load writes the table (a function of the shape and the seed) and a zeroed
        // result; the batches (the seed) size the allocations.
        Some(format!("{:?} seed {}", self.shape, self.seed))
    }

    fn load(&mut self, device: &mut dyn DeviceLoader) -> Result<(), LoadError> {
        let table = device.allocate(self.shape.table_bytes(), DEVICE_ALIGNMENT)?;
        // A preloaded device already holds the table and the zeroed result: only the
        // allocations are made.
        let preloaded = device.preloaded();
        let mut rows = TableRows::new(self.seed, self.shape.dim);
        let dim = self.shape.dim as usize;
        let mut values = vec![0.0_f32; LOAD_ROWS_PER_WRITE as usize * dim];
        let mut bytes = vec![0_u8; values.len() * 4];
        let mut first = 0_u32;
        while first < self.shape.rows && !preloaded {
            let count = LOAD_ROWS_PER_WRITE.min(self.shape.rows - first) as usize;
            let values = &mut values[..count * dim];
            for row in values.chunks_exact_mut(dim) {
                rows.next_row(row);
            }
            let bytes = &mut bytes[..count * dim * 4];
            for (word, value) in bytes.chunks_exact_mut(4).zip(values.iter()) {
                word.copy_from_slice(&value.to_le_bytes());
            }
            let address = DeviceAddress(table.0 + u64::from(first) * self.shape.pooled_bytes());
            device.write(address, bytes)?;
            first += count as u32;
        }
        let batch = device.allocate(self.batch_buffer_bytes(), DEVICE_ALIGNMENT)?;
        let result_length = self.result_length();
        let result = device.allocate(result_length, DEVICE_ALIGNMENT)?;
        if !preloaded {
            device.write(result, &vec![0; result_length as usize])?;
        }
        log::debug!(
            "dlrm: loaded table {} B at {:#x}, batch buffer at {:#x}, result {result_length} B at {:#x}",
            self.shape.table_bytes(),
            table.0,
            batch.0,
            result.0
        );
        self.device = Some(DeviceBuffers {
            table,
            batch,
            result,
        });
        self.reset();
        Ok(())
    }

    fn next_launch(&mut self) -> Result<Option<LaunchPlan>, AppError> {
        if self.launched >= self.batches.len() {
            return Ok(None);
        }
        let Some(buffers) = self.device else {
            return Err(self.fail(Scope::Whole, AppProblem::NotLoaded));
        };
        if let Some(current) = self.current {
            return Err(self.fail(Scope::Batch(current), AppProblem::LaunchInFlight));
        }
        let index = self.launched;
        let batch = &self.batches[index];
        let command = CommandDescriptor {
            kernel: KernelId::DlrmSls as u32,
            mode: 0,
            tag: 0,
            flags: 0,
            result_address: buffers.result.0,
            result_length: self.result_length(),
            args: [
                buffers.table.0,
                pack_shape(self.shape.rows, self.shape.dim),
                buffers.batch.0,
                pack_batch(batch.bags(), batch.index_count()),
            ],
        };
        let inputs = vec![DeviceInput {
            address: buffers.batch,
            bytes: batch.to_le_bytes(),
        }];
        log::debug!(
            "dlrm: batch {index}: {} bags, {} lookups",
            batch.bags(),
            batch.index_count()
        );
        self.current = Some(index);
        self.launched += 1;
        Ok(Some(LaunchPlan {
            inputs,
            command,
            tasks: self.tasks(),
        }))
    }

    fn run_task(&mut self, task: &HostTask, result: &[u8]) -> Result<HostCost, AppError> {
        let Some(batch) = self.current else {
            return Err(self.fail(Scope::Whole, AppProblem::NoLaunch { call: "run_task" }));
        };
        if task.id >= self.task_count() {
            return Err(self.fail(
                Scope::Batch(batch),
                AppProblem::NoSuchTask {
                    task: task.id,
                    tasks: self.task_count() as usize,
                },
            ));
        }
        let bags = self.task_bags(task.id);
        let pooled_bytes = self.shape.pooled_bytes();
        let needs = u64::from(bags.start) * pooled_bytes..u64::from(bags.end) * pooled_bytes;
        if task.needs != needs || result.len() as u64 != needs.end - needs.start {
            return Err(self.fail(
                Scope::Batch(batch),
                AppProblem::WrongInput {
                    task: task.id,
                    needs: task.needs.clone(),
                    bytes: result.len(),
                    planned: needs,
                },
            ));
        }
        if self.ran[batch][task.id as usize] {
            return Err(self.fail(Scope::Batch(batch), AppProblem::RanTwice { task: task.id }));
        }
        let dim = self.shape.dim as usize;
        let first_value = bags.start as usize * dim;
        let pooled: Vec<f32> = result
            .chunks_exact(4)
            .map(|w| f32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        for (offset, vector) in pooled.chunks_exact(dim).enumerate() {
            let ctr = host::click_probability(&self.mlp, vector);
            self.ctr[batch][bags.start as usize + offset] = ctr;
        }
        self.received[batch][first_value..first_value + pooled.len()].copy_from_slice(&pooled);
        self.ran[batch][task.id as usize] = true;
        Ok(host::task_cost(&self.mlp, u64::from(bags.end - bags.start)))
    }

    fn finish_launch(&mut self) -> Result<HostCost, AppError> {
        let Some(batch) = self.current.take() else {
            return Err(self.fail(
                Scope::Whole,
                AppProblem::NoLaunch {
                    call: "finish_launch",
                },
            ));
        };
        if let Some(problem) = AppProblem::never_ran(self.ran[batch].iter().copied()) {
            return Err(self.fail(Scope::Batch(batch), problem));
        }
        self.finished += 1;
        Ok(HostCost {
            operations: FINISH_OPERATIONS,
            memory_bytes: 0,
        })
    }

    fn verify(&self) -> Verification {
        let fail = |detail: String| Verification {
            passed: false,
            detail: format!("{NAME}: {detail}"),
        };
        if self.finished != self.batches.len() {
            return fail(format!(
                "{} of {} batches finished",
                self.finished,
                self.batches.len()
            ));
        }
        let dim = self.shape.dim as usize;
        let mut largest = 0.0_f64;
        let mut ctr_sum = 0.0_f64;
        for (index, batch) in self.batches.iter().enumerate() {
            let expected = reference::pooled(&self.shape, self.seed, batch);
            if let Err(difference) =
                reference::compare_pooled(&self.received[index], &expected, dim)
            {
                return fail(format!("batch {index}: pooled {difference}"));
            }
            let expected_ctr: Vec<f64> = expected
                .chunks_exact(dim)
                .map(|pooled| reference::click_probability(&self.mlp, pooled))
                .collect();
            match reference::compare_ctr(&self.ctr[index], &expected_ctr) {
                Ok(difference) => largest = largest.max(difference),
                Err(difference) => return fail(format!("batch {index}: {difference}")),
            }
            ctr_sum += self.ctr[index].iter().map(|&c| f64::from(c)).sum::<f64>();
        }
        let bags = self.batches.len() * self.shape.bags as usize;
        Verification {
            passed: true,
            detail: format!(
                "{} batches x {} bags: pooled vectors bit-exact, CTRs within {:e} of the f64 reference (largest difference {largest:.3e}, mean CTR {:.4})",
                self.batches.len(),
                self.shape.bags,
                reference::CTR_TOLERANCE,
                ctr_sum / bags as f64
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{self, FakeDevice};

    fn small() -> DlrmApplication {
        DlrmApplication::new(
            data::SMALL,
            &WorkloadOptions {
                scale: Scale::Small,
                ..WorkloadOptions::default()
            },
        )
        .unwrap()
    }

    /// Loads and runs every launch, tasks in reverse order; `corrupt` may change a launch's
    /// result first.
    fn run_all(app: &mut DlrmApplication, corrupt: impl Fn(usize, &mut FakeDevice, &LaunchPlan)) {
        let mut device = FakeDevice::loaded(app);
        let mut index = 0;
        while let Some(plan) = app.next_launch().unwrap() {
            testing::launch(&mut device, &plan);
            corrupt(index, &mut device, &plan);
            for task in plan.tasks.iter().rev() {
                let bytes = testing::result_bytes(&device, &plan, task);
                let cost = app.run_task(task, &bytes).unwrap();
                assert!(cost.operations > 0);
            }
            app.finish_launch().unwrap();
            index += 1;
        }
        assert_eq!(index, 2);
    }

    #[test]
    fn small_end_to_end_on_a_fake_device_verifies() {
        let mut app = small();
        run_all(&mut app, |_, _, _| {});
        let verification = app.verify();
        assert!(verification.passed, "{}", verification.detail);
        assert!(
            verification
                .detail
                .starts_with("2 batches x 32 bags: pooled vectors bit-exact"),
            "{}",
            verification.detail
        );
        assert!(app.ctr().iter().flatten().all(|c| *c > 0.0 && *c < 1.0));
    }

    #[test]
    fn corrupting_one_pooled_bit_fails_verification() {
        let mut app = small();
        run_all(&mut app, |index, device, plan| {
            if index == 1 {
                let address = (plan.command.result_address + 5 * 1024 + 12) as usize;
                device.memory.get_mut()[address] ^= 1;
            }
        });
        let verification = app.verify();
        assert!(!verification.passed);
        assert!(
            verification
                .detail
                .contains("batch 1: pooled bag 5 element 3"),
            "{}",
            verification.detail
        );
    }

    #[test]
    fn plan_command_inputs_and_tasks() {
        let mut app = small();
        FakeDevice::loaded(&mut app);
        let plan = app.next_launch().unwrap().unwrap();
        let command = plan.command;
        assert_eq!(command.kernel, KernelId::DlrmSls as u32);
        assert_eq!((command.mode, command.tag, command.flags), (0, 0, 0));
        assert_eq!(command.args[1], 4096 | (256 << 32));
        let batch = &app.batches()[0];
        assert_eq!(command.args[3], 32 | (u64::from(batch.index_count()) << 32));
        assert_eq!(command.result_length, 32 * 1024);
        assert_eq!(plan.inputs.len(), 1);
        assert_eq!(plan.inputs[0].address.0, command.args[2]);
        assert_eq!(plan.inputs[0].bytes, batch.to_le_bytes());
        // 32 independent tasks of one bag, contiguous, covering every byte once.
        assert_eq!(plan.tasks.len(), 32);
        let mut next = 0;
        for (id, task) in plan.tasks.iter().enumerate() {
            assert_eq!(task.id as usize, id);
            assert_eq!(task.chain, None);
            assert_eq!(task.needs, next..next + 1024);
            next = task.needs.end;
        }
        assert_eq!(next, command.result_length);
    }

    #[test]
    fn each_task_needs_exactly_the_32_packet_items_of_its_bag() {
        let mut app = small();
        let mut device = FakeDevice::loaded(&mut app);
        let plan = app.next_launch().unwrap().unwrap();
        testing::launch(&mut device, &plan);
        let kernel = firmware::kernels::Kernel::decode(&plan.command, &device).unwrap();
        assert_eq!(kernel.items(), 32 * 256 / 8);
        for task in &plan.tasks {
            let items = task.id * 32..task.id * 32 + 32;
            let mut covered = task.needs.start;
            for item in items {
                let spec = kernel.item(item, &device).unwrap();
                assert_eq!(spec.result_offset, covered, "task {} item {item}", task.id);
                covered += u64::from(spec.result_length);
            }
            assert_eq!(covered, task.needs.end, "task {}", task.id);
        }
    }

    #[test]
    fn a_task_that_never_ran_or_got_wrong_bytes_fails_at_the_call() {
        let mut app = small();
        let mut device = FakeDevice::loaded(&mut app);
        let plan = app.next_launch().unwrap().unwrap();
        testing::launch(&mut device, &plan);
        let task = &plan.tasks[1];
        app.run_task(task, &testing::result_bytes(&device, &plan, task))
            .unwrap();
        let error = app.finish_launch().unwrap_err();
        assert_eq!(error.scope, Scope::Batch(0));
        assert_eq!(
            error.problem,
            AppProblem::NeverRan {
                missing: 31,
                first: 0
            }
        );
        assert!(error.to_string().contains("31 tasks never ran"), "{error}");

        let mut app = small();
        FakeDevice::loaded(&mut app);
        let plan = app.next_launch().unwrap().unwrap();
        let error = app.run_task(&plan.tasks[0], &[0; 12]).unwrap_err();
        assert!(
            matches!(
                error.problem,
                AppProblem::WrongInput {
                    task: 0,
                    bytes: 12,
                    ..
                }
            ),
            "{error}"
        );
    }

    #[test]
    fn unfinished_run_fails_verification() {
        let verification = small().verify();
        assert!(!verification.passed);
        assert!(verification.detail.contains("0 of 2 batches finished"));
    }

    #[test]
    fn paper_shape_sizes_device_memory_for_the_table() {
        let app = DlrmApplication::new(data::PAPER, &WorkloadOptions::default()).unwrap();
        assert_eq!(app.shape().table_bytes(), 1 << 30);
        assert!(app.device_bytes() > 1 << 30);
        assert!(app.device_bytes() < (1 << 30) + (2 << 20));
        assert_eq!(app.tasks().len(), 512);
        let lookups: usize = app.batches().iter().map(|b| b.indices.len()).sum();
        assert!((2 * 512 * 64..=2 * 512 * 192).contains(&lookups));
    }

    #[test]
    fn info_names_the_scale_sizes() {
        let paper = info(&WorkloadOptions::default());
        assert_eq!(paper.name, NAME);
        assert!(paper
            .characteristics
            .starts_with("Dim: 256, #Rows: 1048576 (1024 MiB"));
        let small = info(&WorkloadOptions {
            scale: Scale::Small,
            ..WorkloadOptions::default()
        });
        assert!(
            small.characteristics.contains("#Rows: 4096"),
            "{}",
            small.characteristics
        );
        assert!(build(&WorkloadOptions::default()).is_ok());
    }
}
