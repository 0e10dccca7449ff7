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

use crate::config::AxleConfig;
use anyhow::Context;
use emulator::{DeviceMetrics, Emulator};
use host_driver::dma::DmaRegion;
use host_driver::frames::FrameAllocator;
use host_driver::phys::PhysicalMemory;
use host_driver::sync::Arc;
use host_runtime::app::{DeviceLoader, LoadError};
use host_runtime::metrics::DeviceFigures;
use host_runtime::modes::axle::AxleRing;
use host_runtime::{Mode, RunMetrics, Runtime};
use serde::Serialize;
use shared_abi::region::RingLayout;
use shared_abi::{DeviceAddress, Ticks};
use std::path::{Path, PathBuf};

/// Host "physical" memory beyond twice the DMA region. Twice, because the frame allocator
/// leaves at least one free frame after every run of frames it hands out (runs are never
/// physically adjacent); the slack covers the reserved frame 0 and rounding. Keeping host
/// memory this small matters across processes, where all of it is pinned with `mlock`.
const HOST_MEMORY_SLACK: u64 = 64 << 10;

/// Virtual-time limit of a run: far beyond any workload, so hitting it means a bug.
const VIRTUAL_TIME_LIMIT: Ticks = Ticks::from_ns(100_000_000_000);

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
}

/// What a run produced. Everything here is deterministic (virtual time), except in a
/// wall-clock run, whose figures are real time and say so (`clock`).
#[derive(Clone, Debug, Serialize)]
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
struct Prepared {
    app: Box<dyn host_runtime::app::Application>,
    layout: Option<RingLayout>,
    host_bytes: u64,
    /// The device configuration, with device memory grown to what the workload needs.
    device: emulator::DeviceConfig,
}

/// Device memory beyond a workload's data: the register windows below `DATA_BASE`, the
/// firmware scratch area at the top, and allocation alignment.
const DEVICE_MEMORY_MARGIN_MIB: u64 = 64;

/// Validates the configuration, builds the workload and sizes host memory and the rings.
fn prepare(request: &RunRequest) -> anyhow::Result<Prepared> {
    let config = &request.config;
    config.validate()?;
    let options = workloads::WorkloadOptions {
        scale: config.workload.scale,
        seed: config.workload.seed,
        data_dir: request.data.clone(),
        queries: Some(config.workload.queries),
        k: Some(config.workload.k),
        task_rows: Some(config.workload.task_rows),
        iterations: Some(config.workload.iterations),
    };
    let app = workloads::build(&request.workload, &options)?;
    let layout = if request.mode.streams() {
        Some(
            RingLayout::new(config.axle.slots, config.axle.slots, config.axle.slot_size)
                .map_err(|status| anyhow::anyhow!("invalid ring shape: {status}"))?,
        )
    } else {
        None
    };
    let region_length = layout.map_or(0, |l| l.region_length());
    let host_bytes = (region_length * 2 + HOST_MEMORY_SLACK).next_multiple_of(4096);
    let mut device = config.device.clone();
    let needed_mib = app.device_bytes().div_ceil(1 << 20) + DEVICE_MEMORY_MARGIN_MIB;
    if needed_mib > device.device_memory_mib {
        log::info!(
            "{}: device memory grown from {} to {needed_mib} MiB for the data set",
            request.workload,
            device.device_memory_mib
        );
        device.device_memory_mib = needed_mib;
    }
    Ok(Prepared {
        app,
        layout,
        host_bytes,
        device,
    })
}

impl Prepared {
    /// The AXLE ring in `memory` (the driver's DMA region), for the streaming modes.
    fn ring(&self, memory: &Arc<PhysicalMemory>) -> anyhow::Result<Option<AxleRing>> {
        let Some(layout) = self.layout else {
            return Ok(None);
        };
        let mut frames = FrameAllocator::new(self.host_bytes);
        let region = DmaRegion::allocate(Arc::clone(memory), &mut frames, layout.region_length())
            .context("allocating the DMA region")?;
        Ok(Some(AxleRing::new(region, layout, 1)))
    }

    /// Runs the host runtime with `drive`, which co-simulates it with the device and returns
    /// the co-simulation's outcome (its error message) and the device's metrics; then checks
    /// the run and assembles its report. The same for both placements of the emulator.
    fn run_and_report(
        mut self,
        request: &RunRequest,
        ring: Option<AxleRing>,
        drive: impl FnOnce(&mut Runtime<'_>) -> anyhow::Result<(Result<(), String>, DeviceMetrics)>,
    ) -> anyhow::Result<RunReport> {
        let config = &request.config;
        let (measured, failure, (cosim, device_metrics)) = {
            let mut runtime =
                Runtime::new(request.mode, config.host.clone(), self.app.as_mut(), ring);
            let driven = drive(&mut runtime)?;
            (runtime.measurements(), runtime.failure().cloned(), driven)
        };
        if let Some(failure) = failure {
            anyhow::bail!(
                "{} in mode {}: {failure}",
                request.workload,
                request.mode.name()
            );
        }
        if let Err(error) = cosim {
            anyhow::bail!(
                "{} in mode {}: {error}",
                request.workload,
                request.mode.name()
            );
        }
        let figures = DeviceFigures {
            ccm_busy: device_metrics.ccm_busy,
            dma_busy: device_metrics.dma_busy,
            backpressure: device_metrics.backpressure,
            payloads: device_metrics.payloads,
            dma_requests: device_metrics.dma_requests,
            head_reads: device_metrics.head_reads,
        };
        let metrics = RunMetrics::assemble(request.mode.streams(), &measured, &figures);
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
        })
    }
}

/// Untimed set-up into the in-process emulator.
struct Loader<'a> {
    emulator: &'a mut Emulator,
}

impl DeviceLoader for Loader<'_> {
    fn allocate(&mut self, length: u64, align: u64) -> Result<DeviceAddress, LoadError> {
        let available = self.emulator.data_available();
        self.emulator
            .allocate(length, align)
            .ok_or(LoadError::OutOfMemory {
                requested: length,
                available,
            })
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

/// Prepares an in-process run: the workload, host memory with its ring, and the emulator
/// with the data set loaded.
fn in_process(request: &RunRequest) -> anyhow::Result<(Prepared, Option<AxleRing>, Emulator)> {
    let mut prepared = prepare(request)?;
    let config = &request.config;
    let memory = Arc::new(PhysicalMemory::new(prepared.host_bytes).context("host memory")?);
    let ring = prepared.ring(&memory)?;
    let mut device = Emulator::new(
        prepared.device.clone(),
        Arc::clone(&memory),
        config.streaming_factor()?,
        config.axle.out_of_order,
    );
    prepared
        .app
        .load(&mut Loader {
            emulator: &mut device,
        })
        .context("loading the data set into device memory")?;
    Ok((prepared, ring, device))
}

/// Runs one configuration in-process.
pub fn run(request: &RunRequest) -> anyhow::Result<RunReport> {
    let (prepared, ring, mut device) = in_process(request)?;
    prepared.run_and_report(request, ring, |runtime| {
        let cosim = device.run(runtime, VIRTUAL_TIME_LIMIT);
        Ok((cosim.map_err(|error| error.to_string()), device.metrics()))
    })
}

/// Runs one configuration in-process, as [`run`] does, and writes its timeline to `trace` as
/// a Chrome / Perfetto trace ([`crate::trace`]). The file is created before the run starts
/// (a path that cannot be written fails at once), and written even when the run fails, which
/// is when a timeline helps most. Tracing changes no timing: the report is [`run`]'s.
pub fn run_traced(request: &RunRequest, trace: &Path) -> anyhow::Result<RunReport> {
    let file = std::fs::File::create(trace)
        .with_context(|| format!("creating the trace file {}", trace.display()))?;
    let (prepared, ring, mut device) = in_process(request)?;
    device.enable_trace();
    let mut host_trace = None;
    let report = prepared.run_and_report(request, ring, |runtime| {
        runtime.enable_trace();
        let cosim = device.run(runtime, VIRTUAL_TIME_LIMIT);
        host_trace = runtime.take_trace();
        Ok((cosim.map_err(|error| error.to_string()), device.metrics()))
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
#[cfg(not(loom))]
pub fn run_wall(
    request: &RunRequest,
    options: &crate::wall::WallOptions,
) -> anyhow::Result<crate::wall::WallRun> {
    let (prepared, ring, mut device) = in_process(request)?;
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

/// Wall-clock mode does not exist in a loom build.
#[cfg(loom)]
pub fn run_wall(
    _: &RunRequest,
    _: &crate::wall::WallOptions,
) -> anyhow::Result<crate::wall::WallRun> {
    anyhow::bail!("--clock wall is not available in a loom build")
}

#[cfg(not(loom))]
mod attached {
    use super::*;
    use emulator::server::Setup;
    use host_driver::attach::{AttachOptions, Attachment};

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

    /// Runs one configuration with the host here and the device in the emulator process
    /// serving on `target.socket`. Prints exactly what [`run`] prints for the same request.
    pub fn run_attached(request: &RunRequest, target: &AttachTarget) -> anyhow::Result<RunReport> {
        let mut prepared = prepare(request)?;
        let config = &request.config;
        let setup = Setup {
            device: prepared.device.clone(),
            streaming_factor: config.streaming_factor()?.into(),
            out_of_order: config.axle.out_of_order,
            limit_ns: VIRTUAL_TIME_LIMIT.as_ns(),
            wall: None,
        };
        let options = AttachOptions {
            abi_version: target.abi_version,
            host_memory_bytes: prepared.host_bytes,
            device_setup: serde_json::to_string(&setup)?,
            interrupt_line: false,
        };
        let mut attachment = Attachment::connect(&target.socket, &options)?;
        let memory = Arc::clone(attachment.host_memory());
        let ring = prepared.ring(&memory)?;
        prepared
            .app
            .load(&mut RemoteLoader {
                attachment: &mut attachment,
            })
            .context("loading the data set into device memory")?;
        prepared.run_and_report(request, ring, |runtime| {
            let end = attachment.run(runtime)?;
            Ok((
                end.error.map_or(Ok(()), Err),
                DeviceMetrics::from(&end.device),
            ))
        })
    }

    /// Runs one configuration in wall-clock mode ([`crate::wall`]) with the host here and the
    /// device in the emulator process serving on `target.socket`
    /// (`host_driver::wall_socket`). Fails like [`run_wall`] does, and also when the
    /// interrupts the host saw on its eventfd differ from those the device raised.
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
        let config = &request.config;
        let setup = Setup {
            device: prepared.device.clone(),
            streaming_factor: config.streaming_factor()?.into(),
            out_of_order: config.axle.out_of_order,
            limit_ns: VIRTUAL_TIME_LIMIT.as_ns(),
            wall: Some(emulator::server::WallSetup {
                limit_ns: limit.as_ns(),
            }),
        };
        let attach = AttachOptions {
            abi_version: target.abi_version,
            host_memory_bytes: prepared.host_bytes,
            device_setup: serde_json::to_string(&setup)?,
            interrupt_line: true,
        };
        let mut attachment = Attachment::connect(&target.socket, &attach)?;
        let memory = Arc::clone(attachment.host_memory());
        let ring = prepared.ring(&memory)?;
        prepared
            .app
            .load(&mut RemoteLoader {
                attachment: &mut attachment,
            })
            .context("loading the data set into device memory")?;
        let mut side = crate::wall::HostSide::default();
        let mut device_end = None;
        let mut report = prepared.run_and_report(request, ring, |runtime| {
            let ended = attachment.run_wall(runtime, limit)?;
            side.ring = runtime
                .ring_state()
                .transpose()
                .map_err(anyhow::Error::msg)?;
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

#[cfg(not(loom))]
pub use attached::{run_attached, run_wall_attached};

/// The multi-process transport does not exist in a loom build.
#[cfg(loom)]
pub fn run_wall_attached(
    _: &RunRequest,
    _: &AttachTarget,
    _: &crate::wall::WallOptions,
) -> anyhow::Result<crate::wall::WallRun> {
    anyhow::bail!("--attach is not available in a loom build")
}

/// The multi-process transport does not exist in a loom build.
#[cfg(loom)]
pub fn run_attached(_: &RunRequest, _: &AttachTarget) -> anyhow::Result<RunReport> {
    anyhow::bail!("--attach is not available in a loom build")
}
