//! SSB Q1.1 and Q1.2, paper Table IV (f), (g): OLAP on the Star Schema Benchmark.
//!
//! ```sql
//! -- Q1.1
//! select sum(lo_extendedprice * lo_discount) as revenue from lineorder, date
//! where lo_orderdate = d_datekey and d_year = 1993
//!   and lo_discount between 1 and 3 and lo_quantity < 25;
//! -- Q1.2
//! ... and d_yearmonthnum = 199401 and lo_discount between 4 and 6
//!   and lo_quantity between 26 and 35;
//! ```
//!
//! # Data
//!
//! [`data`]: a clean-room, seeded generator of the LINEORDER columns the queries read and of
//! the DATE table, at SF 1 for the paper scale (1.5 M orders, about 6 M rows) and SF 0.002
//! for the small one (about 12,000 rows). Both queries run on the same data for a seed.
//!
//! # The offload: predicate filtering (boolean marking)
//!
//! Device memory holds the two filter columns, `lo_quantity` and `lo_discount`, as the
//! schema's 4-byte integers (uncompressed, as a plain column store keeps them), loaded once
//! by [`Application::load`]. One launch of `firmware::kernels::ssb` marks
//! the rows passing the query's lineorder predicates in a bitmap of one bit per row (about
//! 750 KB at SF 1), in items of [`Granularity::rows_per_item`] rows: at both scales 8 rows,
//! one 32-byte packet of each column and one bitmap byte, which is one M²NDP µthread (the
//! kernel's docs compare it with M²NDP's column filters, `examples/benchmarks/imdb_*`). At SF
//! 1 that is about 750,000 items of 23 instructions and 65 bytes each. Items this small are
//! bound by the memory latency as much as by the bandwidth: each of the CCM's 1,024 µthreads
//! spends, per item, its share of the bandwidth (65 bytes at 614.4 GB/s / 1,024, about 108 ns)
//! and then one access latency (`ccm_memory_latency_ns`, 100 ns), so the launch takes about
//! 750,000 / 1,024 x 208 ns = 152 µs where the 48 MB of columns alone would stream in 79
//! µs.
//!
//! # Host tasks: the join with DATE and the aggregate
//!
//! The host holds its own copy of the columns the rest of the query reads (`lo_orderdate`,
//! `lo_extendedprice`, `lo_discount`) and the DATE table, as a host-side query engine over
//! its in-memory table would: the filter is offloaded, the join and aggregate read the host's
//! columns for the marked rows only. Each task covers [`Granularity::task_bytes`] bytes of the
//! bitmap (the last one the rest): with one byte per item, a task waits for that many items'
//! results (2,048 at paper scale), whichever order they arrive in. It reads its range as `u64`
//! words (a multiple of 8 bytes; the last task's may end in a partial word, which it
//! zero-extends), joins its marked rows with DATE and keeps a partial sum
//! ([`host::join_and_aggregate`], whose cost model is documented there). Tasks are
//! independent (no chain: each writes its own partial, as morsel-driven query workers do);
//! the launch's final step adds the partials. One launch per query; no device inputs.
//!
//! # Checking
//!
//! [`reference::evaluate`] evaluates the whole SQL by a plain scan; the revenue, the number of
//! marked rows and the number of selected rows must match exactly.

pub mod data;
pub mod host;
pub mod reference;

use std::fmt;

use host_runtime::app::{
    AppError, AppProblem, Application, BadResult, DeviceLoader, HostCost, HostTask, LaunchPlan,
    LoadError, Scope, Verification,
};
use shared_abi::params::ssb::{bitmap_bytes, pack_rows, Predicate, ROWS_PER_PACKET, VALUE_BYTES};
use shared_abi::{CommandDescriptor, DeviceAddress, KernelId};

use crate::shared::Shared;
use crate::{OptionError, Scale, WorkloadError, WorkloadInfo, WorkloadOptions};
use data::{ScaleFactor, SsbData};
use host::{DateFilter, DateIndex, HostTables, Partial};
use std::sync::Arc;

/// Alignment of every device allocation (a 64-byte cache line).
pub const DEVICE_ALIGNMENT: u64 = 64;

/// Instructions per partial in the final step: load the three counters (3), add them (3),
/// loop control (2).
pub const FINISH_OPERATIONS_PER_PARTIAL: u64 = 8;

/// Bytes of one stored partial: three `u64`.
pub const PARTIAL_BYTES: u64 = 24;

/// The two queries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Query {
    /// Q1.1 (Table IV (f)).
    Q1_1,
    /// Q1.2 (Table IV (g)).
    Q1_2,
}

/// What a query asks: the lineorder predicate the device evaluates and the DATE predicate
/// the host's join applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QuerySpec {
    /// `lo_quantity` and `lo_discount` bounds (inclusive).
    pub filter: Predicate,
    /// The predicate on DATE.
    pub date: DateFilter,
}

impl Query {
    /// Catalog name.
    pub const fn name(self) -> &'static str {
        match self {
            Query::Q1_1 => "ssb-q1.1",
            Query::Q1_2 => "ssb-q1.2",
        }
    }

    /// The query called `name`.
    pub fn by_name(name: &str) -> Option<Query> {
        [Query::Q1_1, Query::Q1_2]
            .into_iter()
            .find(|query| query.name() == name)
    }

    /// Its predicates: Q1.1 `lo_quantity < 25` (0..=24), `lo_discount between 1 and 3`,
    /// `d_year = 1993`; Q1.2 `lo_quantity between 26 and 35`, `lo_discount between 4 and 6`,
    /// `d_yearmonthnum = 199401`.
    pub const fn spec(self) -> QuerySpec {
        match self {
            Query::Q1_1 => QuerySpec {
                filter: Predicate {
                    quantity_low: 0,
                    quantity_high: 24,
                    discount_low: 1,
                    discount_high: 3,
                },
                date: DateFilter::Year(1993),
            },
            Query::Q1_2 => QuerySpec {
                filter: Predicate {
                    quantity_low: 26,
                    quantity_high: 35,
                    discount_low: 4,
                    discount_high: 6,
                },
                date: DateFilter::YearMonth(199401),
            },
        }
    }
}

/// How the work is cut: rows per CCM item and bitmap bytes per host task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Granularity {
    /// Rows per work item (a multiple of [`ROWS_PER_PACKET`]).
    pub rows_per_item: u32,
    /// Bitmap bytes per host task (a multiple of 8: a task reads the bitmap in `u64` words).
    pub task_bytes: u64,
}

impl Granularity {
    /// Paper scale: items of one packet, 8 rows (one M²NDP µthread, one bitmap byte; about
    /// 750,000 items at SF 1) and tasks of 2 KiB of bitmap (16,384 rows, 2,048 items' results;
    /// about 370 tasks, some six per host worker).
    pub const PAPER: Granularity = Granularity {
        rows_per_item: ROWS_PER_PACKET,
        task_bytes: 2048,
    };
    /// Small scale: the same one-packet items (about 1,500) and tasks of 256 bytes (2,048
    /// rows), so the small instance still has several tasks.
    pub const SMALL: Granularity = Granularity {
        rows_per_item: ROWS_PER_PACKET,
        task_bytes: 256,
    };
}

/// The scale factor and granularity of `scale`.
fn sizes(scale: Scale) -> (ScaleFactor, Granularity) {
    match scale {
        Scale::Paper => (ScaleFactor::PAPER, Granularity::PAPER),
        Scale::Small => (ScaleFactor::SMALL, Granularity::SMALL),
    }
}

/// The catalog entry with the sizes `options` would use.
pub fn info(query: Query, options: &WorkloadOptions) -> WorkloadInfo {
    let (scale, granularity) = sizes(options.scale);
    WorkloadInfo {
        name: query.name(),
        domain: "OLAP",
        application: "SSB",
        table_iv: match query {
            Query::Q1_1 => "Query: Q1_1",
            Query::Q1_2 => "Query: Q1_2",
        },
        characteristics: format!(
            "SF {scale}: {} orders, about {} lineorder rows (clean-room seeded generator, seed {}); \
             device filter columns lo_quantity, lo_discount (4 B/row each); bitmap result 1 bit/row; \
             items of {} rows (every 8 rows: a 32-byte packet of each column, one M2NDP µthread), host tasks of {} bitmap bytes",
            scale.orders(),
            scale.orders() * 4,
            options.seed,
            granularity.rows_per_item,
            granularity.task_bytes
        ),
        offloaded: "predicate filtering (boolean marking) on lo_quantity, lo_discount: 1-bit-per-row bitmap",
        host_task: "join of the marked rows with DATE (dense datekey index) and the revenue partial sum; final add of the partials",
    }
}

/// Builds the workload.
pub fn build(
    query: Query,
    options: &WorkloadOptions,
) -> Result<Box<dyn Application>, WorkloadError> {
    if options.data_dir.is_some() {
        log::warn!(
            "{}: no real SSB data exists; the data directory is ignored and the seeded generator used",
            query.name()
        );
    }
    let (scale, granularity) = sizes(options.scale);
    let seed = options.seed;
    let data = DATA.get_or_make((scale, seed), || SsbData::generate(scale, seed));
    Ok(Box::new(SsbApplication::new(query, data, granularity)?))
}

/// Where the data set lives in device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DeviceBuffers {
    quantity: DeviceAddress,
    discount: DeviceAddress,
    result: DeviceAddress,
}

/// The data set of the last scale and seed generated, shared by the instances of both queries
/// made for them ([`crate::shared`]).
static DATA: Shared<(ScaleFactor, u64), SsbData> = Shared::new();

/// The reference answers computed for the shared data set, by its scale factor and seed and
/// the query ([`reference::evaluate`] scans every row: a seventh of a run, the same for
/// every run of `axle eval` over the data set).
static ANSWERS: std::sync::Mutex<Vec<(AnswerKey, reference::Answer)>> =
    std::sync::Mutex::new(Vec::new());

/// What identifies a reference answer: the data set's scale factor and seed, and the query.
type AnswerKey = (ScaleFactor, u64, Query);

/// Forgets the shared data set and its answers ([`crate::shared::release`]).
pub(crate) fn release_shared() {
    DATA.clear();
    ANSWERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clear();
}

/// [`reference::evaluate`] of `query` on `data` (a function of its scale factor and seed),
/// computed once per process.
fn reference_answer(data: &SsbData, query: Query) -> reference::Answer {
    let key = (data.scale(), data.seed(), query);
    let kept = ANSWERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .find(|(made, _)| *made == key)
        .map(|(_, answer)| *answer);
    kept.unwrap_or_else(|| {
        let answer = reference::evaluate(data, &query.spec());
        ANSWERS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((key, answer));
        answer
    })
}

/// An SSB query instance: data, plan, host-task state and answer.
pub struct SsbApplication {
    query: Query,
    granularity: Granularity,
    data: Arc<SsbData>,
    index: DateIndex,
    device: Option<DeviceBuffers>,
    launched: bool,
    partials: Vec<Option<Partial>>,
    answer: Option<Partial>,
}

impl fmt::Debug for SsbApplication {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SsbApplication")
            .field("query", &self.query)
            .field("granularity", &self.granularity)
            .field("data", &self.data)
            .field("device", &self.device)
            .field("launched", &self.launched)
            .field("answer", &self.answer)
            .finish_non_exhaustive()
    }
}

impl SsbApplication {
    /// `query` over `data`, cut by `granularity`.
    pub fn new(
        query: Query,
        data: impl Into<Arc<SsbData>>,
        granularity: Granularity,
    ) -> Result<SsbApplication, WorkloadError> {
        let data: Arc<SsbData> = data.into();
        let invalid = |reason: OptionError| WorkloadError::InvalidOption {
            workload: query.name(),
            reason,
        };
        if granularity.rows_per_item == 0 || granularity.rows_per_item % ROWS_PER_PACKET != 0 {
            return Err(invalid(OptionError::RowsPerItem {
                rows_per_item: granularity.rows_per_item,
                multiple: ROWS_PER_PACKET,
            }));
        }
        if granularity.task_bytes == 0 || granularity.task_bytes % 8 != 0 {
            return Err(invalid(OptionError::TaskBytes {
                task_bytes: granularity.task_bytes,
                multiple: 8,
            }));
        }
        if data.rows() == 0 {
            return Err(invalid(OptionError::EmptyTable));
        }
        log::info!(
            "ssb: {} SF {} seed {}: {} orders, {} rows, {} items of {} rows, tasks of {} bitmap bytes",
            query.name(),
            data.scale(),
            data.seed(),
            data.orders(),
            data.rows(),
            data.rows().div_ceil(granularity.rows_per_item),
            granularity.rows_per_item,
            granularity.task_bytes
        );
        let index = DateIndex::new(&data.date);
        let tasks = bitmap_bytes(data.rows()).div_ceil(granularity.task_bytes) as usize;
        Ok(SsbApplication {
            query,
            granularity,
            data,
            index,
            device: None,
            launched: false,
            partials: vec![None; tasks],
            answer: None,
        })
    }

    /// The query.
    pub fn query(&self) -> Query {
        self.query
    }

    /// The data set.
    pub fn data(&self) -> &SsbData {
        &self.data
    }

    /// The final aggregate, once the launch is finished.
    pub fn answer(&self) -> Option<Partial> {
        self.answer
    }

    /// Bytes of the result space: the bitmap.
    pub fn result_length(&self) -> u64 {
        bitmap_bytes(self.data.rows())
    }

    /// The bitmap bytes task `id` covers.
    fn task_bytes(&self, id: usize) -> std::ops::Range<u64> {
        let length = self.result_length();
        let start = (id as u64 * self.granularity.task_bytes).min(length);
        start..(start + self.granularity.task_bytes).min(length)
    }

    /// The host tasks of the launch.
    pub fn tasks(&self) -> Vec<HostTask> {
        (0..self.partials.len())
            .map(|id| HostTask {
                id: id as u32,
                needs: self.task_bytes(id),
                chain: None,
            })
            .collect()
    }

    /// A host step's failure (logged; the runtime fails the run with it).
    fn fail(&self, problem: AppProblem) -> AppError {
        let error = AppError::new(self.query.name(), Scope::Whole, problem);
        log::error!("ssb: {error}");
        error
    }
}

impl Application for SsbApplication {
    fn name(&self) -> &str {
        self.query.name()
    }

    fn device_bytes(&self) -> u64 {
        2 * VALUE_BYTES * u64::from(self.data.rows()) + self.result_length() + 3 * DEVICE_ALIGNMENT
    }

    fn load(&mut self, device: &mut dyn DeviceLoader) -> Result<(), LoadError> {
        let rows = u64::from(self.data.rows());
        let column_bytes = rows * VALUE_BYTES;
        let quantity = device.allocate(column_bytes, DEVICE_ALIGNMENT)?;
        device.write(quantity, &data::to_u32_le_bytes(&self.data.quantity))?;
        let discount = device.allocate(column_bytes, DEVICE_ALIGNMENT)?;
        device.write(discount, &data::to_u32_le_bytes(&self.data.discount))?;
        let result_length = self.result_length();
        let result = device.allocate(result_length, DEVICE_ALIGNMENT)?;
        device.write(result, &vec![0; result_length as usize])?;
        log::debug!(
            "ssb: loaded lo_quantity at {:#x}, lo_discount at {:#x} ({column_bytes} B each), bitmap {result_length} B at {:#x}",
            quantity.0,
            discount.0,
            result.0
        );
        self.device = Some(DeviceBuffers {
            quantity,
            discount,
            result,
        });
        self.launched = false;
        self.partials = vec![None; self.partials.len()];
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
            kernel: KernelId::SsbFilter as u32,
            mode: 0,
            tag: 0,
            flags: 0,
            result_address: buffers.result.0,
            result_length: self.result_length(),
            args: [
                buffers.quantity.0,
                buffers.discount.0,
                pack_rows(self.data.rows(), self.granularity.rows_per_item),
                self.query.spec().filter.pack(),
            ],
        };
        Ok(Some(LaunchPlan {
            inputs: Vec::new(),
            command,
            tasks: self.tasks(),
        }))
    }

    fn run_task(&mut self, task: &HostTask, result: &[u8]) -> Result<HostCost, AppError> {
        let id = task.id as usize;
        if id >= self.partials.len() {
            return Err(self.fail(AppProblem::NoSuchTask {
                task: task.id,
                tasks: self.partials.len(),
            }));
        }
        let needs = self.task_bytes(id);
        if task.needs != needs || result.len() as u64 != needs.end - needs.start {
            return Err(self.fail(AppProblem::WrongInput {
                task: task.id,
                needs: task.needs.clone(),
                bytes: result.len(),
                planned: needs,
            }));
        }
        if self.partials[id].is_some() {
            return Err(self.fail(AppProblem::RanTwice { task: task.id }));
        }
        let tables = HostTables {
            orderdate: &self.data.orderdate,
            extendedprice: &self.data.extendedprice,
            discount: &self.data.discount,
            date: &self.data.date,
            index: &self.index,
        };
        let outcome =
            host::join_and_aggregate(needs.start * 8, result, &tables, self.query.spec().date);
        if let Some(row) = outcome.stray_row {
            return Err(self.fail(AppProblem::BadResult {
                task: task.id,
                what: BadResult::RowBeyondTable {
                    row,
                    rows: self.data.rows() as u64,
                },
            }));
        }
        log::trace!(
            "ssb: task {id} bytes {needs:?} marked {} selected {}",
            outcome.partial.marked,
            outcome.partial.selected
        );
        self.partials[id] = Some(outcome.partial);
        Ok(outcome.cost)
    }

    fn finish_launch(&mut self) -> Result<HostCost, AppError> {
        if let Some(problem) = AppProblem::never_ran(self.partials.iter().map(Option::is_some)) {
            return Err(self.fail(problem));
        }
        let answer = self
            .partials
            .iter()
            .flatten()
            .fold(Partial::default(), |sum, partial| sum.plus(*partial));
        let partials = self.partials.len() as u64;
        log::debug!(
            "ssb: {} revenue {} marked {} selected {}",
            self.query.name(),
            answer.revenue,
            answer.marked,
            answer.selected
        );
        self.answer = Some(answer);
        Ok(HostCost {
            operations: partials * FINISH_OPERATIONS_PER_PARTIAL,
            memory_bytes: partials * PARTIAL_BYTES,
        })
    }

    fn verify(&self) -> Verification {
        let name = self.query.name();
        let fail = |detail: String| Verification {
            passed: false,
            detail,
        };
        let Some(answer) = self.answer else {
            return fail(format!("{name}: the launch never finished"));
        };
        let expected = reference_answer(&self.data, self.query);
        let got = (u128::from(answer.revenue), answer.marked, answer.selected);
        let want = (expected.revenue, expected.marked, expected.selected);
        if got != want {
            return fail(format!(
                "{name}: revenue {} marked {} selected {}, expected revenue {} marked {} selected {}",
                got.0, got.1, got.2, want.0, want.1, want.2
            ));
        }
        let rows = f64::from(self.data.rows());
        Verification {
            passed: true,
            detail: format!(
                "{name}: revenue {} matches the plain scan; {} rows marked by the filter ({:.3}%), {} selected ({:.3}%); SF {}, {} rows, seed {}",
                answer.revenue,
                answer.marked,
                100.0 * answer.marked as f64 / rows,
                answer.selected,
                100.0 * answer.selected as f64 / rows,
                self.data.scale(),
                self.data.rows(),
                self.data.seed()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{self, FakeDevice};

    fn small(query: Query, seed: u64) -> SsbApplication {
        let data = SsbData::generate(ScaleFactor::SMALL, seed);
        SsbApplication::new(query, data, Granularity::SMALL).unwrap()
    }

    /// Loads `app`, runs its launch's items on the fake device, returns device and plan.
    fn load_and_compute(app: &mut SsbApplication) -> (FakeDevice, LaunchPlan) {
        let mut device = FakeDevice::loaded(app);
        let plan = app.next_launch().unwrap().unwrap();
        testing::launch(&mut device, &plan);
        (device, plan)
    }

    #[test]
    fn names_round_trip() {
        for query in [Query::Q1_1, Query::Q1_2] {
            assert_eq!(Query::by_name(query.name()), Some(query));
        }
        assert_eq!(Query::by_name("ssb-q1.3"), None);
    }

    #[test]
    fn both_queries_end_to_end_on_a_fake_device_match_the_plain_scan() {
        for query in [Query::Q1_1, Query::Q1_2] {
            let mut app = small(query, 42);
            let (device, plan) = load_and_compute(&mut app);
            let cost = testing::run_tasks(&mut app, &device, &plan);
            assert!(cost.operations > 0);
            assert!(app.next_launch().unwrap().is_none(), "exactly one launch");
            let verification = app.verify();
            assert!(verification.passed, "{}", verification.detail);
            let expected = reference::evaluate(app.data(), &query.spec());
            let answer = app.answer().unwrap();
            assert_eq!(u128::from(answer.revenue), expected.revenue);
            assert!(answer.selected > 0, "{query:?} selects something");
        }
    }

    #[test]
    fn selectivities_are_near_the_specification() {
        // At SF 0.02 (about 120,000 rows) the counts are large enough to compare.
        let data = SsbData::generate(ScaleFactor { millis: 20 }, 42);
        let rows = f64::from(data.rows());
        let q1_1 = reference::evaluate(&data, &Query::Q1_1.spec());
        let q1_2 = reference::evaluate(&data, &Query::Q1_2.spec());
        let percent = |count: u64| 100.0 * count as f64 / rows;
        // Filter: 24/50 x 3/11 = 13.1%; with 1993: x 365/2406 = 1.99% (README: about 1.95%).
        assert!((12.6..13.6).contains(&percent(q1_1.marked)));
        assert!((1.8..2.2).contains(&percent(q1_1.selected)));
        // Filter: 10/50 x 3/11 = 5.45%; with January 1994: x 31/2406 = 0.070% (about 0.065%).
        assert!((5.1..5.8).contains(&percent(q1_2.marked)));
        assert!((0.05..0.09).contains(&percent(q1_2.selected)));
    }

    #[test]
    fn plan_covers_the_bitmap_with_the_command_fields() {
        let mut app = small(Query::Q1_2, 3);
        FakeDevice::loaded(&mut app);
        assert!(app.device_bytes() >= 8 * u64::from(app.data().rows()) + app.result_length());
        let plan = app.next_launch().unwrap().unwrap();
        let command = plan.command;
        let rows = app.data().rows();
        assert_eq!(command.kernel, KernelId::SsbFilter as u32);
        assert_eq!((command.mode, command.tag, command.flags), (0, 0, 0));
        assert_eq!(command.args[2], u64::from(rows) | 8 << 32);
        assert_eq!(command.args[3], Query::Q1_2.spec().filter.pack());
        assert_eq!(command.result_length, u64::from(rows).div_ceil(8));
        assert!(plan.inputs.is_empty());
        let mut next = 0;
        for (id, task) in plan.tasks.iter().enumerate() {
            assert_eq!(task.id as usize, id);
            assert_eq!(task.needs.start, next);
            assert_eq!(task.chain, None);
            assert!(task.needs.end - task.needs.start <= 256);
            assert_eq!(task.needs.start % 8, 0);
            next = task.needs.end;
        }
        assert_eq!(next, command.result_length);
        assert!(plan.tasks.len() > 4);
    }

    #[test]
    fn a_flipped_bit_fails_verification() {
        let mut app = small(Query::Q1_1, 42);
        let (mut device, plan) = load_and_compute(&mut app);
        // Flip the bit of row 77.
        let address = (plan.command.result_address + 77 / 8) as usize;
        device.memory.get_mut()[address] ^= 1 << (77 % 8);
        testing::run_tasks(&mut app, &device, &plan);
        let verification = app.verify();
        assert!(!verification.passed);
        assert!(
            verification.detail.contains("marked"),
            "{}",
            verification.detail
        );
    }

    #[test]
    fn a_bit_past_the_table_fails_the_task() {
        let mut app = small(Query::Q1_1, 42);
        let (mut device, plan) = load_and_compute(&mut app);
        let rows = u64::from(app.data().rows());
        assert_ne!(rows % 8, 0, "the test needs a partial last byte");
        let last = (plan.command.result_address + plan.command.result_length - 1) as usize;
        device.memory.get_mut()[last] = 0x80;
        let task = plan.tasks.last().unwrap();
        let error = app
            .run_task(task, &testing::result_bytes(&device, &plan, task))
            .unwrap_err();
        assert!(
            matches!(
                error.problem,
                AppProblem::BadResult {
                    what: BadResult::RowBeyondTable { .. },
                    ..
                }
            ),
            "{error}"
        );
        assert!(error.to_string().contains("is marked but"), "{error}");
    }

    #[test]
    fn missing_repeated_or_short_tasks_fail_at_the_call() {
        let mut app = small(Query::Q1_2, 1);
        let tasks = app.tasks();
        app.run_task(&tasks[0], &vec![0; 256]).unwrap();
        let error = app.finish_launch().unwrap_err();
        assert!(
            matches!(error.problem, AppProblem::NeverRan { first: 1, .. }),
            "{error}"
        );
        assert!(error.to_string().contains("never ran"), "{error}");

        let mut app = small(Query::Q1_2, 1);
        app.run_task(&tasks[0], &vec![0; 256]).unwrap();
        let error = app.run_task(&tasks[0], &vec![0; 256]).unwrap_err();
        assert_eq!(error.problem, AppProblem::RanTwice { task: 0 });
        assert!(error.to_string().contains("ran twice"), "{error}");

        let mut app = small(Query::Q1_2, 1);
        let error = app.run_task(&tasks[0], &[0; 8]).unwrap_err();
        assert!(
            matches!(
                error.problem,
                AppProblem::WrongInput {
                    task: 0,
                    bytes: 8,
                    ..
                }
            ),
            "{error}"
        );
    }

    #[test]
    fn unfinished_launch_fails_verification() {
        let app = small(Query::Q1_1, 42);
        assert!(app.verify().detail.contains("never finished"));
    }

    #[test]
    fn invalid_granularity_is_an_error() {
        let data = SsbData::generate(ScaleFactor::SMALL, 1);
        for granularity in [
            Granularity {
                rows_per_item: 100,
                task_bytes: 256,
            },
            Granularity {
                rows_per_item: 12,
                task_bytes: 256,
            },
            Granularity {
                rows_per_item: 8,
                task_bytes: 12,
            },
        ] {
            assert!(SsbApplication::new(Query::Q1_1, data.clone(), granularity).is_err());
        }
    }

    #[test]
    fn info_describes_the_scale() {
        let paper = info(Query::Q1_1, &WorkloadOptions::default());
        assert_eq!(paper.name, "ssb-q1.1");
        assert!(paper
            .characteristics
            .starts_with("SF 1.000: 1500000 orders"));
        let small = info(
            Query::Q1_2,
            &WorkloadOptions {
                scale: Scale::Small,
                ..WorkloadOptions::default()
            },
        );
        assert!(small.characteristics.starts_with("SF 0.002: 3000 orders"));
    }
}
