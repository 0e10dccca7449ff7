//! One run: a workload, a mechanism, a configuration; the emulator and the host runtime wired
//! together in-process, the answer verified.

use crate::config::AxleConfig;
use anyhow::Context;
use emulator::Emulator;
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
use std::path::PathBuf;

/// Host "physical" memory beyond the DMA region (room for the frame allocator's scatter).
const HOST_MEMORY_SLACK: u64 = 4 << 20;

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

/// What a run produced. Everything here is deterministic (virtual time).
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// Workload name.
    pub workload: String,
    /// Mechanism name.
    pub mode: String,
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

/// Runs one configuration in-process.
pub fn run(request: &RunRequest) -> anyhow::Result<RunReport> {
    let config = &request.config;
    config.validate()?;
    let options = workloads::WorkloadOptions {
        seed: config.workload.seed,
        data_dir: request.data.clone(),
        queries: Some(config.workload.queries),
        k: Some(config.workload.k),
        task_rows: Some(config.workload.task_rows),
    };
    let mut app = workloads::build(&request.workload, &options)?;

    let streams = request.mode.streams();
    let layout = if streams {
        Some(
            RingLayout::new(config.axle.slots, config.axle.slots, config.axle.slot_size)
                .map_err(|status| anyhow::anyhow!("invalid ring shape: {status}"))?,
        )
    } else {
        None
    };
    let region_length = layout.map_or(0, |l| l.region_length());
    let host_bytes = (region_length + HOST_MEMORY_SLACK).next_multiple_of(4096) * 2;
    let memory = Arc::new(PhysicalMemory::new(host_bytes).context("host memory")?);
    let mut frames = FrameAllocator::new(host_bytes);
    let ring = match layout {
        Some(layout) => {
            let region =
                DmaRegion::allocate(Arc::clone(&memory), &mut frames, layout.region_length())
                    .context("allocating the DMA region")?;
            Some(AxleRing::new(region, layout, 1))
        }
        None => None,
    };

    let mut device = Emulator::new(
        config.device.clone(),
        Arc::clone(&memory),
        config.streaming_factor()?,
        config.axle.out_of_order,
    );
    app.load(&mut Loader {
        emulator: &mut device,
    })
    .context("loading the data set into device memory")?;

    let (measured, failure, cosim) = {
        let mut runtime = Runtime::new(request.mode, config.host.clone(), app.as_mut(), ring);
        let cosim = device.run(&mut runtime, VIRTUAL_TIME_LIMIT);
        (runtime.measurements(), runtime.failure().cloned(), cosim)
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
    let device_metrics = device.metrics();
    let figures = DeviceFigures {
        ccm_busy: device_metrics.ccm_busy,
        dma_busy: device_metrics.dma_busy,
        backpressure: device_metrics.backpressure,
        payloads: device_metrics.payloads,
        dma_requests: device_metrics.dma_requests,
        head_reads: device_metrics.head_reads,
    };
    let metrics = RunMetrics::assemble(streams, &measured, &figures);
    let verification = app.verify();
    Ok(RunReport {
        workload: request.workload.clone(),
        mode: request.mode.name().into(),
        verified: verification.passed,
        verification: verification.detail,
        metrics,
        config: config.clone(),
    })
}
