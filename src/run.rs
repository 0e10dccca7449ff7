//! One run: a workload, a mechanism, a configuration; the emulator and the host runtime wired
//! together, the answer verified.
//!
//! The emulator runs either in this process ([`run`]) or in another one, `axle emu`, to which
//! the host attaches over a Unix socket ([`run_attached`]). Both share the preparation (the
//! workload, the rings, host memory's size), the host runtime, and the checks and assembly
//! of the report; only where the device lives differs, and the co-simulation contract makes
//! the two print exactly the same report.
//!
//! [`run_traced`] is [`run`] that also writes the run's timeline as a Chrome / Perfetto trace
//! ([`crate::trace`]).
//!
//! [`run_wall`] is the in-process run in wall-clock mode ([`crate::wall`]): the same wiring,
//! with the device and the host free-running on two threads against the real clock;
//! [`run_wall_attached`] the same with the device in the emulator process.
//!
//! [`run_sharing`] is [`run`] for a sweep of many runs over the same large data sets
//! (`axle eval`): a workload whose load can be shared ([`Application::image_key`]) is loaded
//! once into a frozen device image ([`DeviceImages`]), and each run's device memory is a
//! copy-on-write view of it ([`emulator::shm::DeviceSegment::copy_of`]), so a run neither
//! generates nor writes the data set again, and owns only the pages it writes. The device
//! memory a run starts from is byte for byte the one its own load would have made, so the
//! report is [`run`]'s.
//!
//! [`Application::image_key`]: host_runtime::app::Application::image_key
//!
//! # Every run ends
//!
//! Before anything is allocated, [`AxleConfig::validate`] and [`AxleConfig::check_workload`]
//! bound every size of the configuration (`cosim_link::limits`). Then two limits bound the
//! run itself: virtual time ([`VIRTUAL_TIME_LIMIT_NS`], 100 s, the emulator's) and wall time
//! ([`RunRequest::wall_limit`], by default [`default_wall_limit`] of the scale). The wall
//! clock is read by a wrapper around the host runtime (`WallBudget`) every
//! [`WALL_CHECK_EVERY`] calls of the co-simulation into the host (turns and deliveries); past
//! the budget it ends the host's part and the run fails with an error that says how much
//! wall and virtual time passed. The budget never changes a run that finishes within it: the
//! wrapper passes every call through unchanged, so a run either completes with exactly the
//! figures it always has or fails with that error.
//!
//! # Errors
//!
//! A run that started and failed ends in a [`RunFailed`]: the workload, the mode and a
//! [`RunFailure`] that keeps the type of the library error it came from (the host runtime's,
//! the co-simulation's, the wall-clock channels', the ring's), or the emulator process's
//! message where it came over the socket as text. Errors before the run (configuration,
//! workload, memory) and the end-of-run checks of a wall-clock run are plain `anyhow` errors
//! with context.

use crate::config::{AxleConfig, VIRTUAL_TIME_LIMIT_NS};
use anyhow::Context;
use cosim_link::link::{DeviceLink, HostAgent, LinkResponse, Wake};
use emulator::{DeviceMetrics, Emulator};
use host_driver::dma::DmaRegion;
use host_driver::frames::FrameAllocator;
use host_driver::phys::PhysicalMemory;
use host_driver::sync::Arc;
use host_runtime::app::{DeviceLoader, LoadError};
use host_runtime::metrics::DeviceFigures;
use host_runtime::modes::axle::{AxleRing, AxleRingError};
use host_runtime::trace::HostSpanKind;
use host_runtime::{Mode, PollPolicy, RunMetrics, Runtime};
use serde::Serialize;
use shared_abi::region::RingLayout;
use shared_abi::{DeviceAddress, Ticks};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Virtual-time limit of a run: far beyond any workload, so hitting it means a bug.
pub(crate) const VIRTUAL_TIME_LIMIT: Ticks = Ticks::from_ns(VIRTUAL_TIME_LIMIT_NS);

/// The wall-time budget of a run at `scale` unless `--wall-limit` says otherwise: 10 minutes
/// at paper scale (the longest paper-scale run, OPT-2.7B, takes 3.5 s on the idle 2-core
/// development machine, and attached runs on a busy machine took several times their
/// in-process time: README, "Cost"), 1 minute at small scale (every small run takes well
/// under a second).
pub fn default_wall_limit(scale: workloads::Scale) -> Duration {
    match scale {
        workloads::Scale::Paper => Duration::from_secs(600),
        workloads::Scale::Small => Duration::from_secs(60),
    }
}

/// Calls of the co-simulation into the host (turns and deliveries) between two looks at the
/// wall clock. A look (`Instant::now`, a vDSO call of tens of nanoseconds) every 1024 calls
/// costs nothing measurable; a call takes at least hundreds of nanoseconds, so the budget is
/// overrun by well under a millisecond.
pub const WALL_CHECK_EVERY: u32 = 1024;

/// Why a run that started did not finish cleanly, typed as the library that reported it did.
///
/// The message of each case is its error's message alone: no case names its error as a
/// [`source`](std::error::Error::source), so the CLI's `{:#}` prints it once, as the message
/// has always read.
#[derive(Debug, thiserror::Error)]
pub enum RunFailure {
    /// The host runtime stopped the run (a device error status, a ring violation, a deadlock
    /// or no progress, a short result load, the application's own error).
    #[error("{0}")]
    Runtime(host_runtime::RuntimeError),
    /// The in-process co-simulation failed (deadlock, virtual-time limit, a refused link
    /// request).
    #[error("{0}")]
    CoSim(emulator::CoSimError),
    /// The emulator process ended an attached session with this error; it arrives over the
    /// socket as its message (`cosim_link::attach::SessionEnd::error`).
    #[error("{0}")]
    Remote(String),
    /// The host side of a wall-clock run failed (`cosim_link::wall::serve_host`).
    #[error("{0}")]
    Wall(cosim_link::wall::WallError),
    /// The AXLE rings could not be read back at the end of a wall-clock run.
    #[error("{0}")]
    Ring(AxleRingError),
    /// A wall-clock run outlived its limit (`--wall-limit`).
    #[error(
        "stopped after {} of wall time, unfinished (the wall-clock run's limit); raise --wall-limit if the run is expected to take longer",
        format_duration(*.limit)
    )]
    WallLimit {
        /// The limit.
        limit: Duration,
    },
    /// The wall-time budget of a virtual-time run was spent (the check every
    /// [`WALL_CHECK_EVERY`] calls into the host, [`RunRequest::wall_limit`]).
    #[error(
        "stopped after {:.1} s of wall time (the limit is {}) at {} of virtual time, unfinished; raise --wall-limit if the run is expected to take longer, or check the configuration for very slow rates or a very long host.stall_timeout_ns",
        .elapsed.as_secs_f64(),
        format_duration(*.limit),
        format_virtual(*.at)
    )]
    WallBudget {
        /// Wall time when the budget was found spent.
        elapsed: Duration,
        /// The budget.
        limit: Duration,
        /// Virtual time then.
        at: Ticks,
    },
}

/// A run that started and failed: its workload, its mode and why. It reads
/// `knn-a in mode rp: <why>`; the failure is a field, not a
/// [`source`](std::error::Error::source), so that `{:#}` prints it once.
#[derive(Debug, thiserror::Error)]
#[error("{workload} in mode {}: {failure}", .mode.name())]
pub struct RunFailed {
    /// Workload name.
    pub workload: String,
    /// Mechanism.
    pub mode: Mode,
    /// Why.
    pub failure: RunFailure,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct RunRequest {
    /// Workload name (`knn-a`).
    pub workload: String,
    /// Mechanism.
    pub mode: Mode,
    /// Parameters.
    pub config: AxleConfig,
    /// Real data directory (or file), if any.
    pub data: Option<PathBuf>,
    /// The run fails when it has not finished after this much wall time; `None`:
    /// [`default_wall_limit`] of the configuration's scale.
    pub wall_limit: Option<Duration>,
}

impl RunRequest {
    /// The run's wall-time budget.
    pub fn wall_limit(&self) -> Duration {
        self.wall_limit
            .unwrap_or_else(|| default_wall_limit(self.config.workload.scale))
    }
}

/// The host runtime as the co-simulation sees it, with a wall-time budget: every call passes
/// through unchanged, and every [`WALL_CHECK_EVERY`] calls the wall clock is read; once the
/// budget is spent, the next turn says the host is done (which ends the co-simulation loop,
/// in-process or across the socket) and [`WallBudget::overrun`] says by how much
/// ([`RunFailure::WallBudget`]).
pub(crate) struct WallBudget<'r, 'a> {
    runtime: &'r mut Runtime<'a>,
    started: Instant,
    limit: Duration,
    calls: u32,
    /// The virtual time of the last call.
    now: Ticks,
    /// Wall time and virtual time when the budget was found spent.
    overrun: Option<(Duration, Ticks)>,
    /// A tenant of a shared device: the handle that detaches it once its budget is spent
    /// (`axle run-many`: the others run on).
    detacher: Option<emulator::cosim::tenants::TenantDetacher>,
}

impl<'r, 'a> WallBudget<'r, 'a> {
    pub(crate) fn new(runtime: &'r mut Runtime<'a>, limit: Duration) -> Self {
        WallBudget {
            runtime,
            started: Instant::now(),
            limit,
            calls: 0,
            now: Ticks::ZERO,
            overrun: None,
            detacher: None,
        }
    }

    /// A tenant's budget: once spent, its tenant is detached through `detacher`
    /// ([`DetachReason::WallOverrun`](emulator::cosim::tenants::DetachReason::WallOverrun))
    /// at the turn (or delivery) that found it spent.
    pub(crate) fn detaching(
        mut self,
        detacher: Option<emulator::cosim::tenants::TenantDetacher>,
    ) -> Self {
        self.detacher = detacher;
        self
    }

    fn look(&mut self, now: Ticks) {
        self.now = self.now.max(now);
        self.calls = self.calls.wrapping_add(1);
        if self.calls % WALL_CHECK_EVERY != 0 || self.overrun.is_some() {
            return;
        }
        let elapsed = self.started.elapsed();
        if elapsed > self.limit {
            self.overrun = Some((elapsed, self.now));
            if let Some(detacher) = &self.detacher {
                let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
                detacher.detach(emulator::cosim::tenants::DetachReason::WallOverrun {
                    elapsed_ms: ms(elapsed),
                    limit_ms: ms(self.limit),
                });
            }
        }
    }

    /// The error of a run stopped by the budget, if it was.
    pub(crate) fn overrun(&self) -> Option<RunFailure> {
        let (elapsed, at) = self.overrun?;
        Some(RunFailure::WallBudget {
            elapsed,
            limit: self.limit,
            at,
        })
    }
}

impl HostAgent for WallBudget<'_, '_> {
    fn deliver(&mut self, at: Ticks, response: LinkResponse) {
        self.runtime.deliver(at, response);
        self.look(at);
    }

    fn turn(&mut self, now: Ticks, link: &mut dyn DeviceLink) -> Wake {
        self.look(now);
        if self.overrun.is_some() {
            return Wake::Done;
        }
        self.runtime.turn(now, link)
    }
}

/// `d` as the flag takes it: `90 s`, `10 min`, `250 ms`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 60_000 == 0 && ms > 0 {
        format!("{} min", ms / 60_000)
    } else if ms % 1000 == 0 {
        format!("{} s", ms / 1000)
    } else {
        format!("{ms} ms")
    }
}

/// A virtual time for a message: `12.345 ms`.
fn format_virtual(at: Ticks) -> String {
    let ns = at.as_ns();
    if ns >= 1_000_000_000 {
        format!("{:.3} s", ns as f64 / 1e9)
    } else if ns >= 1_000_000 {
        format!("{:.3} ms", ns as f64 / 1e6)
    } else if ns >= 1_000 {
        format!("{:.3} µs", ns as f64 / 1e3)
    } else {
        format!("{ns} ns")
    }
}

/// Drives `runtime` with `drive` under a wall-time budget of `limit`: the outcome `drive`
/// reports, replaced by the budget's error when the budget stopped the run.
fn within_budget<T>(
    runtime: &mut Runtime<'_>,
    limit: Duration,
    drive: impl FnOnce(&mut dyn HostAgent) -> anyhow::Result<(Result<(), RunFailure>, T)>,
) -> anyhow::Result<(Result<(), RunFailure>, T)> {
    let mut budget = WallBudget::new(runtime, limit);
    let (outcome, rest) = drive(&mut budget)?;
    match budget.overrun() {
        Some(error) => Err(error.into()),
        None => Ok((outcome, rest)),
    }
}

/// What a run produced. Everything here is deterministic (virtual time), except in a
/// wall-clock run, whose figures are real time and say so (`clock`).
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct RunReport {
    /// Workload name.
    pub workload: String,
    /// Mechanism name.
    pub mode: String,
    /// `Some("wall")` for a wall-clock run, whose figures are real time and vary from run to
    /// run; absent (virtual time) otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock: Option<String>,
    /// The seed of a wall-clock stress run's random delays (`--stress-seed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stress_seed: Option<u64>,
    /// Whether the answer matched the reference.
    pub verified: bool,
    /// What was compared.
    pub verification: String,
    /// The metrics.
    #[serde(flatten)]
    pub metrics: RunMetrics,
    /// The parameters used.
    pub config: AxleConfig,
    /// What the simulator itself did (deterministic counts of a virtual-time run; they vary
    /// in wall-clock mode).
    #[serde(default)]
    pub simulator: emulator::SimulatorCounts,
    /// Where the result came from: version, commit, input ([`crate::provenance`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<crate::provenance::Provenance>,
}

/// Where the emulator of an attached run is.
#[derive(Clone, Debug)]
pub struct AttachTarget {
    /// The socket `axle emu --socket PATH` serves on.
    pub socket: PathBuf,
    /// The ABI version the host claims: [`shared_abi::ABI_VERSION`], except in tests of the
    /// refusal.
    pub abi_version: u32,
}

impl AttachTarget {
    /// The emulator serving on `socket`, with this build's ABI version.
    pub fn new(socket: PathBuf) -> AttachTarget {
        AttachTarget {
            socket,
            abi_version: shared_abi::ABI_VERSION,
        }
    }
}

/// Everything of a run that does not depend on where the emulator runs.
pub(crate) struct Prepared {
    pub(crate) app: Box<dyn host_runtime::app::Application>,
    layout: Option<RingLayout>,
    pub(crate) host_bytes: u64,
    /// The device configuration, with device memory grown to what the workload needs.
    pub(crate) device: emulator::DeviceConfig,
}

/// Device memory beyond a workload's data: the register windows below `DATA_BASE`, the
/// firmware scratch area at the top, and allocation alignment.
const DEVICE_MEMORY_MARGIN_MIB: u64 = 64;

/// Validates the configuration, builds the workload and sizes host memory and the rings.
pub(crate) fn prepare(request: &RunRequest) -> anyhow::Result<Prepared> {
    let config = &request.config;
    config.validate()?;
    config.check_workload(&request.workload)?;
    let options = workloads::WorkloadOptions {
        scale: config.workload.scale,
        seed: config.workload.seed,
        data_dir: request.data.clone(),
        queries: Some(config.workload.queries),
        k: Some(config.workload.k),
        task_rows: Some(config.workload.task_rows),
        iterations: Some(config.workload.iterations),
    };
    // Checked (scatter-gather table, machine memory) before the workload's data is built.
    let ring = config.ring_plan()?;
    let app = workloads::build(&request.workload, &options)?;
    let (layout, host_bytes) = if request.mode.streams() {
        (Some(ring.layout), ring.host_bytes)
    } else {
        // No ring: the host memory of an empty region (the slack only).
        (None, crate::config::host_memory_without_ring())
    };
    let mut device = config.device.clone();
    let needed_mib = app.device_bytes().div_ceil(1 << 20) + DEVICE_MEMORY_MARGIN_MIB;
    if needed_mib > device.device_memory_mib {
        log::info!(
            "{}: device memory grown from {} to {needed_mib} MiB for the data set",
            request.workload,
            device.device_memory_mib
        );
        device.device_memory_mib = needed_mib;
        // The workload's data decided the size: check it before it is mapped.
        device.check_device_memory().map_err(|error| {
            anyhow::anyhow!(
                "{}: the data set needs {needed_mib} MiB of device memory: {error}",
                request.workload
            )
        })?;
    }
    Ok(Prepared {
        app,
        layout,
        host_bytes,
        device,
    })
}

/// The figures of `device` a host may know ([`host_runtime::DeviceDatasheet`]; each field's
/// source is in [`emulator::DeviceConfig`]'s docs): the CCM's µthreads, its memory's bandwidth and
/// latency, the link's one-way latencies (half the CXL.mem round trip for the host's stores,
/// half the CXL.io round trip for the DMA engine's writes, as `emulator::dma` lands them) and
/// the DMA preparation.
pub(crate) fn datasheet(device: &emulator::DeviceConfig) -> host_runtime::DeviceDatasheet {
    host_runtime::DeviceDatasheet {
        uthreads: u64::from(device.ccm_units)
            * u64::from(device.ccm_sub_cores)
            * u64::from(device.ccm_uthreads_per_sub_core),
        memory_gbps: device.ccm_memory_gbps,
        memory_latency_ns: device.ccm_memory_latency_ns,
        link_one_way_ns: device.cxl_mem_round_trip_ns / 2,
        dma_preparation_ns: device.dma_preparation_ns,
        dma_one_way_ns: device.cxl_io_round_trip_ns / 2,
    }
}

impl Prepared {
    /// The AXLE ring in `memory` (the driver's DMA region), for the streaming modes.
    pub(crate) fn ring(&self, memory: &Arc<PhysicalMemory>) -> anyhow::Result<Option<AxleRing>> {
        let Some(layout) = self.layout else {
            return Ok(None);
        };
        let mut frames = FrameAllocator::new(self.host_bytes);
        let region = DmaRegion::allocate(Arc::clone(memory), &mut frames, layout.region_length())
            .context("allocating the DMA region")?;
        let ring = AxleRing::new(region, layout, 1).context("programming the DMA region")?;
        Ok(Some(ring))
    }

    /// Runs the host runtime with `drive`, which co-simulates it with the device and returns
    /// the co-simulation's outcome and the device's metrics; then checks the run (a failure
    /// is a [`RunFailed`]) and assembles its report. The same for both placements of the
    /// emulator.
    fn run_and_report(
        mut self,
        request: &RunRequest,
        ring: Option<AxleRing>,
        drive: impl FnOnce(&mut Runtime<'_>) -> anyhow::Result<(Result<(), RunFailure>, DeviceMetrics)>,
    ) -> anyhow::Result<RunReport> {
        let (measured, failure, (cosim, device_metrics)) = {
            let mut runtime = Runtime::new(
                request.mode,
                request.config.host.clone(),
                self.app.as_mut(),
                ring,
            );
            // What a host knows of the device without watching it: its published figures
            // (adaptive polling bounds each launch's first record with them; no other policy
            // reads them).
            runtime.set_device_datasheet(datasheet(&request.config.device));
            let driven = drive(&mut runtime)
                .with_context(|| format!("{} in mode {}", request.workload, request.mode.name()))?;
            (runtime.measurements(), runtime.failure().cloned(), driven)
        };
        self.report(request, &measured, failure, cosim, &device_metrics)
    }

    /// Checks a finished run (a failure is a [`RunFailed`]) and assembles its report: the
    /// host's measurements and failure, the co-simulation's outcome, the device's metrics.
    pub(crate) fn report(
        &mut self,
        request: &RunRequest,
        measured: &host_runtime::HostMeasurements,
        failure: Option<host_runtime::RuntimeError>,
        cosim: Result<(), RunFailure>,
        device_metrics: &DeviceMetrics,
    ) -> anyhow::Result<RunReport> {
        let config = &request.config;
        let failed = |failure| RunFailed {
            workload: request.workload.clone(),
            mode: request.mode,
            failure,
        };
        if let Some(failure) = failure {
            return Err(failed(RunFailure::Runtime(failure)).into());
        }
        if let Err(failure) = cosim {
            return Err(failed(failure).into());
        }
        let figures = DeviceFigures {
            ccm_busy: device_metrics.ccm_busy,
            dma_busy: device_metrics.dma_busy,
            backpressure: device_metrics.backpressure,
            payloads: device_metrics.payloads,
            dma_requests: device_metrics.dma_requests,
            head_reads: device_metrics.head_reads,
        };
        let metrics = RunMetrics::assemble(request.mode.streams(), measured, &figures);
        let verification = self.app.verify();
        Ok(RunReport {
            workload: request.workload.clone(),
            mode: request.mode.name().into(),
            clock: None,
            stress_seed: None,
            verified: verification.passed,
            verification: verification.detail,
            metrics,
            config: config.clone(),
            simulator: device_metrics.simulator,
            provenance: Some(crate::provenance::Provenance::of_run(
                &request.workload,
                config,
                request.data.as_deref(),
            )),
        })
    }
}

/// Untimed set-up into the in-process emulator.
pub(crate) struct Loader<'a> {
    emulator: &'a mut Emulator,
    /// Whether the emulator's memory is a view of an image holding the load's bytes.
    preloaded: bool,
    /// The allocations made, `(length, align, address)` in order.
    allocations: Vec<(u64, u64, DeviceAddress)>,
}

impl Loader<'_> {
    /// Loads `app` into `emulator` (`preloaded`: whose memory already holds the load's
    /// bytes); returns the allocations it made.
    pub(crate) fn load(
        app: &mut dyn host_runtime::app::Application,
        emulator: &mut Emulator,
        preloaded: bool,
    ) -> anyhow::Result<Vec<(u64, u64, DeviceAddress)>> {
        let mut loader = Loader {
            emulator,
            preloaded,
            allocations: Vec::new(),
        };
        app.load(&mut loader)
            .context("loading the data set into device memory")?;
        Ok(loader.allocations)
    }
}

impl DeviceLoader for Loader<'_> {
    fn allocate(&mut self, length: u64, align: u64) -> Result<DeviceAddress, LoadError> {
        let available = self.emulator.data_available();
        let address = self
            .emulator
            .allocate(length, align)
            .ok_or(LoadError::OutOfMemory {
                requested: length,
                available,
            })?;
        self.allocations.push((length, align, address));
        Ok(address)
    }

    fn preloaded(&self) -> bool {
        self.preloaded
    }

    fn write(&mut self, address: DeviceAddress, bytes: &[u8]) -> Result<(), LoadError> {
        self.emulator
            .write_untimed(address, bytes)
            .map_err(|fault| LoadError::OutOfRange {
                address: fault.address.0,
                length: fault.length,
            })
    }
}

/// What identifies a device image: the workload, its [`Application::image_key`] and the
/// device memory's size (which places the data window).
///
/// [`Application::image_key`]: host_runtime::app::Application::image_key
type ImageKey = (String, String, u64);

/// A frozen device image and the allocations of the load that wrote it.
#[derive(Debug)]
struct LoadedImage {
    image: emulator::shm::DeviceImage,
    allocations: Vec<(u64, u64, DeviceAddress)>,
}

/// Device images shared between the runs of a sweep ([`run_sharing`]): the last one made,
/// by key. One at a time: a new key drops the image before the next is made, and
/// [`DeviceImages::release`] drops it after its workload's last run (an image is as large as
/// its data set, about a gigabyte for OPT-2.7B and DLRM at paper scale). Runs that hold a view
/// of a dropped image keep its pages until they end.
#[derive(Debug, Default)]
pub struct DeviceImages {
    slot: std::sync::Mutex<Option<(ImageKey, Arc<LoadedImage>)>>,
}

impl DeviceImages {
    /// The image for `key`: the kept one, or `make()`'s, which replaces it (callers asking at
    /// the same time wait for one `make`).
    fn get_or_make(
        &self,
        key: ImageKey,
        make: impl FnOnce() -> anyhow::Result<LoadedImage>,
    ) -> anyhow::Result<Arc<LoadedImage>> {
        let mut slot = self
            .slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((kept, image)) = slot.as_ref() {
            if *kept == key {
                return Ok(Arc::clone(image));
            }
        }
        *slot = None;
        let image = Arc::new(make()?);
        *slot = Some((key, Arc::clone(&image)));
        Ok(image)
    }

    /// Whether the image kept is one of `workload`'s.
    pub fn holds(&self, workload: &str) -> bool {
        self.slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .is_some_and(|((kept, _, _), _)| kept == workload)
    }

    /// Drops the image of `workload`, if it is the one kept.
    pub fn release(&self, workload: &str) {
        let mut slot = self
            .slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot
            .as_ref()
            .is_some_and(|((kept, _, _), _)| kept == workload)
        {
            *slot = None;
        }
    }
}

/// Prepares an in-process run: the workload, host memory with its ring, and the emulator
/// with the data set loaded (into a view of a shared image when `images` is given and the
/// workload's load can be shared).
fn in_process(
    request: &RunRequest,
    images: Option<&DeviceImages>,
) -> anyhow::Result<(Prepared, Option<AxleRing>, Emulator)> {
    let mut prepared = prepare(request)?;
    let config = &request.config;
    let memory = Arc::new(PhysicalMemory::new(prepared.host_bytes).context("host memory")?);
    let ring = prepared.ring(&memory)?;
    let streaming_factor = config.streaming_factor()?;
    let device_config = prepared.device.clone();
    let bytes = Emulator::device_memory_bytes(&device_config);
    let new_device = |dram| {
        Emulator::with_device_memory(
            device_config.clone(),
            Arc::clone(&memory),
            dram,
            streaming_factor,
            config.axle.out_of_order,
        )
    };
    let shared = images.zip(prepared.app.image_key());
    let Some((images, key)) = shared else {
        let mut device = new_device(emulator::dram::DeviceDram::new(bytes));
        Loader::load(prepared.app.as_mut(), &mut device, false)?;
        return Ok((prepared, ring, device));
    };
    let app = prepared.app.as_mut();
    let image = images.get_or_make((request.workload.clone(), key, bytes), || {
        let (image, allocations) = emulator::shm::DeviceImage::make(bytes, |segment| {
            let mut device = new_device(emulator::dram::DeviceDram::from_segment(segment, bytes));
            Loader::load(app, &mut device, false)
        })
        .context("making the device image")?;
        Ok(LoadedImage { image, allocations })
    })?;
    let segment = emulator::shm::DeviceSegment::copy_of(&image.image)
        .context("mapping a view of the device image")?;
    let mut device = new_device(emulator::dram::DeviceDram::from_segment(segment, bytes));
    // The application starts over; its allocations must be the image's.
    let allocations = Loader::load(app, &mut device, true)?;
    if allocations != image.allocations {
        anyhow::bail!(
            "internal: {}'s load over its device image allocated {} areas where the image's load allocated {} (or at other places): its image key does not capture what its load does",
            request.workload,
            allocations.len(),
            image.allocations.len()
        );
    }
    Ok((prepared, ring, device))
}

/// Whether `request` is a `--poll oracle` study: AXLE with `host.poll_policy = "oracle"`.
fn is_oracle(request: &RunRequest) -> bool {
    request.mode == Mode::Axle && request.config.host.poll_policy == PollPolicy::Oracle
}

/// `--poll oracle`'s first run: the same configuration polling every `host.poll_interval_ns`,
/// traced; returns the start times of its polls that found records (what the oracle run
/// polls at: a schedule that knew when records arrive, never polling in vain).
fn oracle_script(
    request: &RunRequest,
    images: Option<&DeviceImages>,
) -> anyhow::Result<Vec<Ticks>> {
    let mut fixed = request.clone();
    fixed.config.host.poll_policy = PollPolicy::Fixed;
    let (prepared, ring, mut device) = in_process(&fixed, images)?;
    let limit = fixed.wall_limit();
    let mut host_trace = None;
    prepared
        .run_and_report(&fixed, ring, |runtime| {
            runtime.enable_trace();
            let driven = within_budget(runtime, limit, |host| {
                let cosim = device.run(host, VIRTUAL_TIME_LIMIT);
                Ok((cosim.map_err(RunFailure::CoSim), device.metrics()))
            });
            host_trace = runtime.take_trace();
            driven
        })
        .context("--poll oracle's first run, at host.poll_interval_ns")?;
    Ok(host_trace
        .map(|trace| {
            trace
                .spans
                .iter()
                .filter(
                    |span| matches!(span.kind, HostSpanKind::LocalPoll { records, .. } if records > 0),
                )
                .map(|span| span.start)
                .collect()
        })
        .unwrap_or_default())
}

/// Runs one configuration in-process. A `--poll oracle` study runs twice: first at
/// `host.poll_interval_ns` to learn when polls find records, then polling only then.
pub fn run(request: &RunRequest) -> anyhow::Result<RunReport> {
    run_with(request, None, &mut Duration::default())
}

/// Runs one configuration in-process, as [`run`] does, and says how long (wall time of the
/// host machine) the co-simulation loop took: the device's events and the host model's turns,
/// without the data set's generation or loading before it nor the verification after (for a
/// `--poll oracle` study, the loop of its second run, the one reported).
pub fn run_timing_the_loop(request: &RunRequest) -> anyhow::Result<(RunReport, Duration)> {
    let mut looped = Duration::ZERO;
    let report = run_with(request, None, &mut looped)?;
    Ok((report, looped))
}

/// Runs one configuration in-process, as [`run`] does, over a shared device image of its data
/// set from `images` where its workload allows (see the module docs): the same report, less
/// set-up.
pub fn run_sharing(request: &RunRequest, images: &DeviceImages) -> anyhow::Result<RunReport> {
    run_with(request, Some(images), &mut Duration::default())
}

/// [`run`], adding the wall time of the co-simulation loop to `looped`.
fn run_with(
    request: &RunRequest,
    images: Option<&DeviceImages>,
    looped: &mut Duration,
) -> anyhow::Result<RunReport> {
    let script = if is_oracle(request) {
        Some(oracle_script(request, images)?)
    } else {
        None
    };
    let (prepared, ring, mut device) = in_process(request, images)?;
    let limit = request.wall_limit();
    prepared.run_and_report(request, ring, |runtime| {
        if let Some(script) = script {
            runtime.set_poll_script(script);
        }
        within_budget(runtime, limit, |host| {
            let started = std::time::Instant::now();
            let cosim = device.run(host, VIRTUAL_TIME_LIMIT);
            *looped += started.elapsed();
            Ok((cosim.map_err(RunFailure::CoSim), device.metrics()))
        })
    })
}

/// Runs one configuration in-process, as [`run`] does, and writes its timeline to `trace` as
/// a Chrome / Perfetto trace ([`crate::trace`]). The file is created before the run starts
/// (a path that cannot be written fails at once), and written even when the run fails, which
/// is when a timeline helps most. Tracing changes no timing: the report is [`run`]'s.
pub fn run_traced(request: &RunRequest, trace: &Path) -> anyhow::Result<RunReport> {
    let file = std::fs::File::create(trace)
        .with_context(|| format!("creating the trace file {}", trace.display()))?;
    let script = if is_oracle(request) {
        Some(oracle_script(request, None)?)
    } else {
        None
    };
    let (prepared, ring, mut device) = in_process(request, None)?;
    device.enable_trace();
    let mut host_trace = None;
    let limit = request.wall_limit();
    let report = prepared.run_and_report(request, ring, |runtime| {
        if let Some(script) = script {
            runtime.set_poll_script(script);
        }
        runtime.enable_trace();
        let driven = within_budget(runtime, limit, |host| {
            let cosim = device.run(host, VIRTUAL_TIME_LIMIT);
            Ok((cosim.map_err(RunFailure::CoSim), device.metrics()))
        });
        host_trace = runtime.take_trace();
        driven
    });
    let device_trace = device.take_trace().unwrap_or_default();
    let host_trace = host_trace.unwrap_or_default();
    let written = crate::trace::write_chrome_trace(
        std::io::BufWriter::with_capacity(1 << 20, file),
        &device_trace,
        &host_trace,
    )
    .with_context(|| format!("writing the trace file {}", trace.display()));
    let report = report?;
    written?;
    Ok(report)
}

/// Runs one configuration in-process in wall-clock mode ([`crate::wall`]): the device and the
/// host on two threads against the real clock. Fails like [`run`] does, and also when the
/// run outlives `options.limit` or an end-of-run check ([`crate::wall::EndState::violations`])
/// fails.
pub fn run_wall(
    request: &RunRequest,
    options: &crate::wall::WallOptions,
) -> anyhow::Result<crate::wall::WallRun> {
    let (prepared, ring, mut device) = in_process(request, None)?;
    let mut side = crate::wall::HostSide::default();
    let mut report = prepared.run_and_report(request, ring, |runtime| {
        let outcome = crate::wall::drive(&mut device, runtime, options, &mut side);
        Ok((outcome, device.metrics()))
    })?;
    report.clock = Some("wall".into());
    report.stress_seed = options.stress.map(|stress| stress.seed);
    let end = crate::wall::end_state(&device, side);
    let violations = end.violations(&report);
    if !violations.is_empty() {
        anyhow::bail!(
            "{} in mode {} (wall clock{}): end-of-run check failed: {}",
            request.workload,
            request.mode.name(),
            report
                .stress_seed
                .map_or(String::new(), |seed| format!(", stress seed {seed}")),
            violations.join("; ")
        );
    }
    Ok(crate::wall::WallRun { report, end })
}

mod attached {
    use super::*;
    use crate::recover::DeviceLost;
    use emulator::server::Setup;
    use host_driver::attachment::{AttachOptions, Attachment};

    /// Untimed set-up through the host's mapping of the emulator's device memory.
    struct RemoteLoader<'a> {
        attachment: &'a mut Attachment,
    }

    impl DeviceLoader for RemoteLoader<'_> {
        fn allocate(&mut self, length: u64, align: u64) -> Result<DeviceAddress, LoadError> {
            let available = self.attachment.data_available();
            self.attachment
                .allocate(length, align)
                .ok_or(LoadError::OutOfMemory {
                    requested: length,
                    available,
                })
        }

        fn write(&mut self, address: DeviceAddress, bytes: &[u8]) -> Result<(), LoadError> {
            self.attachment
                .write_untimed(address, bytes)
                .map_err(|fault| LoadError::OutOfRange {
                    address: fault.address.0,
                    length: fault.length,
                })
        }
    }

    /// What the host asks of the emulator process for the prepared run as it attaches: the
    /// device set-up (`wall`: a wall-clock run's limit) and the host's memory, with the
    /// interrupt line and the tenant claim as [`AttachOptions`] has them.
    fn attach_options(
        request: &RunRequest,
        target: &AttachTarget,
        prepared: &Prepared,
        wall: Option<emulator::server::WallSetup>,
        interrupt_line: bool,
        tenant: Option<cosim_link::attach::TenantClaim>,
    ) -> anyhow::Result<AttachOptions> {
        let config = &request.config;
        let setup = Setup {
            device: prepared.device.clone(),
            streaming_factor: config.streaming_factor()?.into(),
            out_of_order: config.axle.out_of_order,
            limit_ns: VIRTUAL_TIME_LIMIT.as_ns(),
            wall,
        };
        Ok(AttachOptions {
            abi_version: target.abi_version,
            host_memory_bytes: prepared.host_bytes,
            device_setup: serde_json::to_string(&setup)?,
            interrupt_line,
            tenant,
        })
    }

    /// The run's ring in the attachment's host memory, once the data set is loaded into the
    /// emulator's device memory.
    fn load(
        prepared: &mut Prepared,
        attachment: &mut Attachment,
    ) -> anyhow::Result<Option<AxleRing>> {
        let memory = Arc::clone(attachment.host_memory());
        let ring = prepared.ring(&memory)?;
        prepared
            .app
            .load(&mut RemoteLoader { attachment })
            .context("loading the data set into device memory")?;
        Ok(ring)
    }

    /// Runs one configuration with the host here and the device in the emulator process
    /// serving on `target.socket`. Prints exactly what [`run`] prints for the same request.
    /// An emulator that dies mid-run fails it with a [`DeviceLost`] that says which launch
    /// was lost; [`crate::recover::run_attached_reattaching`] reruns it on a restarted one.
    pub fn run_attached(request: &RunRequest, target: &AttachTarget) -> anyhow::Result<RunReport> {
        run_attached_once(request, target, None, &mut |_| {})
    }

    /// [`run_attached`], connecting within `wait` (retrying while nothing listens on the
    /// socket: an emulator being started again; `None`: one try), and telling `attached` the
    /// device epoch it found.
    pub(crate) fn run_attached_once(
        request: &RunRequest,
        target: &AttachTarget,
        wait: Option<Duration>,
        attached: &mut dyn FnMut(u64),
    ) -> anyhow::Result<RunReport> {
        let prepared = prepare(request)?;
        Ok(attached_run(request, target, prepared, None, wait, attached)?.0)
    }

    /// Runs one configuration as tenant `claim.index` of the group `claim.group` sharing one
    /// device in the emulator process serving on `target.socket` (`axle emu
    /// --max-tenants`): the run starts when every tenant of the group has attached. Returns
    /// the tenant's report (its figures on the shared device, as `axle run-many` reports
    /// them) and its share of the device. `prepared` is the request's preparation.
    pub(crate) fn run_attached_tenant(
        request: &RunRequest,
        target: &AttachTarget,
        prepared: Prepared,
        claim: cosim_link::attach::TenantClaim,
    ) -> anyhow::Result<(RunReport, cosim_link::attach::TenantEnd)> {
        tenant_attempt(request, target, prepared, claim, None, &mut |_| {})
    }

    /// [`run_attached_tenant`], and when the emulator process dies, waits for one started
    /// again on the same socket and reruns the tenant from the start, its group gathering
    /// again there ([`crate::recover::reattaching`]); `command` speaks the `notice`s.
    pub(crate) fn run_attached_tenant_reattaching(
        request: &RunRequest,
        target: &AttachTarget,
        prepared: Prepared,
        claim: cosim_link::attach::TenantClaim,
        reattach: &crate::recover::Reattach,
        command: &'static str,
        notice: &mut dyn FnMut(&str),
    ) -> anyhow::Result<(RunReport, cosim_link::attach::TenantEnd)> {
        let subject = crate::recover::Subject::tenant(command, request, &claim);
        let mut first = Some(prepared);
        crate::recover::reattaching(&subject, target, reattach, notice, |wait, attached| {
            // The first attempt's preparation is the one made before the group attached;
            // a rerun builds the workload again.
            let prepared = match first.take() {
                Some(prepared) => prepared,
                None => prepare(request)?,
            };
            tenant_attempt(request, target, prepared, claim.clone(), wait, attached)
        })
    }

    fn tenant_attempt(
        request: &RunRequest,
        target: &AttachTarget,
        prepared: Prepared,
        claim: cosim_link::attach::TenantClaim,
        wait: Option<Duration>,
        attached: &mut dyn FnMut(u64),
    ) -> anyhow::Result<(RunReport, cosim_link::attach::TenantEnd)> {
        let (report, tenant) =
            attached_run(request, target, prepared, Some(claim), wait, attached)?;
        let tenant = tenant.context("the emulator sent no tenant figures for a tenant's run")?;
        Ok((report, tenant))
    }

    fn attached_run(
        request: &RunRequest,
        target: &AttachTarget,
        mut prepared: Prepared,
        tenant: Option<cosim_link::attach::TenantClaim>,
        wait: Option<Duration>,
        attached: &mut dyn FnMut(u64),
    ) -> anyhow::Result<(RunReport, Option<cosim_link::attach::TenantEnd>)> {
        let options = attach_options(request, target, &prepared, None, false, tenant)?;
        let mut attachment = crate::recover::connect(target, &options, wait)?;
        let epoch = attachment.epoch();
        attached(epoch);
        let ring = load(&mut prepared, &mut attachment)?;
        let limit = request.wall_limit();
        let mut share = None;
        let report = prepared.run_and_report(request, ring, |runtime| {
            let driven = within_budget(runtime, limit, |host| {
                let end = attachment.run(host)?;
                share = end.tenant;
                Ok((
                    end.error
                        .map_or(Ok(()), |error| Err(RunFailure::Remote(error))),
                    DeviceMetrics::from(&end.device),
                ))
            });
            driven.map_err(|error| DeviceLost::from_error(error, target, epoch, runtime))
        })?;
        Ok((report, share))
    }

    /// Runs one configuration in wall-clock mode ([`crate::wall`]) with the host here and the
    /// device in the emulator process serving on `target.socket`
    /// (`cosim_link::wall_socket`). Fails like [`run_wall`] does, and also when the
    /// interrupts the host saw on its eventfd differ from those the device raised, and with a
    /// [`DeviceLost`] (the launch it lost) when the emulator process dies mid-run.
    pub fn run_wall_attached(
        request: &RunRequest,
        target: &AttachTarget,
        options: &crate::wall::WallOptions,
    ) -> anyhow::Result<crate::wall::WallRun> {
        if options.stress.is_some() {
            anyhow::bail!(
                "--stress-seed runs in-process only; it cannot be combined with --attach"
            );
        }
        let limit = Ticks::from_ns(u64::try_from(options.limit.as_nanos()).unwrap_or(u64::MAX));
        let mut prepared = prepare(request)?;
        let wall = emulator::server::WallSetup {
            limit_ns: limit.as_ns(),
        };
        let attach = attach_options(request, target, &prepared, Some(wall), true, None)?;
        let mut attachment = Attachment::connect(&target.socket, &attach)?;
        let epoch = attachment.epoch();
        let ring = load(&mut prepared, &mut attachment)?;
        let mut side = crate::wall::HostSide::default();
        let mut device_end = None;
        let mut report = prepared.run_and_report(request, ring, |runtime| {
            runtime.set_real_clock();
            let ended = attachment
                .run_wall(runtime, limit)
                .map_err(|error| DeviceLost::from_error(error.into(), target, epoch, runtime))?;
            side.ring = runtime.ring_state().transpose().map_err(RunFailure::Ring)?;
            let metrics = DeviceMetrics::from(&ended.end.device);
            let outcome = crate::wall::combine_attached(&ended, &mut side);
            device_end = ended.end.wall.map(|end| (end, metrics));
            Ok((outcome, metrics))
        })?;
        report.clock = Some("wall".into());
        let (device_end, metrics) = device_end
            .ok_or_else(|| anyhow::anyhow!("the emulator sent no wall-clock end state"))?;
        let end = crate::wall::remote_end_state(&device_end, metrics, side);
        let mut violations = end.violations(&report);
        if end.host.signalled != end.device.interrupts {
            violations.push(format!(
                "the device raised {} interrupts, the eventfd signalled {}",
                end.device.interrupts, end.host.signalled
            ));
        }
        if !violations.is_empty() {
            anyhow::bail!(
                "{} in mode {} (wall clock, attached): end-of-run check failed: {}",
                request.workload,
                request.mode.name(),
                violations.join("; ")
            );
        }
        Ok(crate::wall::WallRun { report, end })
    }
}

pub use attached::{run_attached, run_wall_attached};
pub(crate) use attached::{
    run_attached_once, run_attached_tenant, run_attached_tenant_reattaching,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_run_keeps_the_runtime_error_typed_and_prints_it_once_after_workload_and_mode() {
        let mut config = AxleConfig::default();
        config.workload.queries = 2;
        // Two slots cannot hold one KNN host task's four: the runtime reports a deadlock.
        config.axle.slots = 2;
        let request = RunRequest {
            workload: "knn-a".into(),
            mode: Mode::Axle,
            config,
            data: None,
            wall_limit: None,
        };
        let error = match run(&request) {
            Ok(report) => panic!("a 2-slot ring finished: {}", report.verification),
            Err(error) => error,
        };
        let failed = error
            .downcast_ref::<RunFailed>()
            .unwrap_or_else(|| panic!("not a RunFailed: {error:#}"));
        assert_eq!(
            (failed.workload.as_str(), failed.mode),
            ("knn-a", Mode::Axle)
        );
        assert!(
            matches!(
                failed.failure,
                RunFailure::Runtime(host_runtime::RuntimeError::Deadlock { .. })
            ),
            "{:?}",
            failed.failure
        );
        let text = format!("{error:#}");
        assert!(
            text.starts_with("knn-a in mode axle: deadlock detected at "),
            "{text}"
        );
        assert_eq!(text.matches("deadlock detected").count(), 1, "{text}");
    }

    /// OPT and DLRM (the workloads whose load can be shared) report byte for byte the same
    /// over a shared device image as with their own load, both for the run that makes the
    /// image and for the next one, which reuses it; releasing the workload drops it.
    #[test]
    fn runs_over_a_shared_device_image_report_exactly_what_their_own_load_gives() {
        let images = DeviceImages::default();
        for workload in ["opt-2.7b", "dlrm"] {
            for mode in [Mode::Axle, Mode::Bs] {
                let mut config = AxleConfig::default();
                config.workload.scale = workloads::Scale::Small;
                let request = RunRequest {
                    workload: workload.into(),
                    mode,
                    config,
                    data: None,
                    wall_limit: None,
                };
                let own = serde_json::to_string(&run(&request).unwrap()).unwrap();
                let shared =
                    serde_json::to_string(&run_sharing(&request, &images).unwrap()).unwrap();
                assert_eq!(own, shared, "{workload} {}", mode.name());
                assert!(
                    images.holds(workload),
                    "{workload}: no image was made (the run did not share)"
                );
            }
            images.release(workload);
            assert!(!images.holds(workload));
        }
        let mut config = AxleConfig::default();
        config.workload.scale = workloads::Scale::Small;
        let sssp = RunRequest {
            workload: "sssp".into(),
            mode: Mode::Axle,
            config,
            data: None,
            wall_limit: None,
        };
        run_sharing(&sssp, &images).unwrap();
        assert!(!images.holds("sssp"), "SSSP's load is not shared");
    }
}
