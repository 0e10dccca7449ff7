//! `axle run-many`: several tenants, each a workload on its own host, sharing one emulated
//! device in one process ([`emulator::cosim::tenants`]), in the same virtual time.
//!
//! Each tenant is prepared as `axle run` prepares its workload (its own host memory, DMA
//! region and rings, its own logical device with its data set), and runs its own host
//! runtime; the device shares its CCM, DMA engine and link among them under a
//! [`SharePolicy`]. Every tenant's answer is verified, and its figures are reported beside
//! those of the same workload run alone (`axle run`, the same request): its slowdown is its
//! end-to-end time shared over its end-to-end time alone. Jain's fairness index is taken over
//! the tenants' progress rates (alone over shared).
//!
//! Everything is virtual time: the same command prints the same numbers.
//!
//! **Faults do not spread.** A tenant the device detaches (its host died or stopped, or broke
//! the protocol: [`emulator::cosim::tenants::DetachReason`]) or whose runtime fails is
//! reported as such, with its figures up to then, while the others' runs go on and are
//! verified; the command then exits non-zero. `--fault` injects such faults ([`faults`]).

pub mod faults;

use crate::config::AxleConfig;
use crate::run::{
    prepare, run, Loader, Prepared, RunFailed, RunFailure, RunReport, RunRequest, WallBudget,
    VIRTUAL_TIME_LIMIT,
};
use anyhow::Context;
use cosim_link::link::HostAgent;
use emulator::cosim::tenants::{SharePolicy, TenantSetup, MAX_TENANTS};
use emulator::Emulator;
use host_driver::phys::PhysicalMemory;
use host_driver::sync::Arc;
use host_runtime::{Mode, Runtime};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// `axle run-many --max-tenants`' default.
pub const DEFAULT_MAX_TENANTS: usize = 8;

/// What to run: several workloads, one per tenant, in one mode.
#[derive(Clone, Debug)]
pub struct ManyRequest {
    /// One workload per tenant (tenant `i` runs `workloads[i]`).
    pub workloads: Vec<String>,
    /// Mechanism of every tenant.
    pub mode: Mode,
    /// Parameters of every tenant.
    pub config: AxleConfig,
    /// Real data directory (or file), if any.
    pub data: Option<PathBuf>,
    /// Wall-time budget of each run (`None`: the scale's default).
    pub wall_limit: Option<Duration>,
    /// How the device shares its CCM.
    pub policy: SharePolicy,
    /// Most tenants this request may have (`--max-tenants`, at most [`MAX_TENANTS`]).
    pub max_tenants: usize,
    /// Also run each workload alone, for the slowdowns.
    pub alone: bool,
    /// Faults injected (`--fault`), at most one per tenant.
    pub faults: Vec<faults::TenantFault>,
}

impl ManyRequest {
    /// Checks the tenant count against `--max-tenants` and the device's limit, and the
    /// policy.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.max_tenants == 0 || self.max_tenants > MAX_TENANTS {
            anyhow::bail!(
                "--max-tenants {}: it must be 1 to {MAX_TENANTS} (a CXL 2.0 multi-logical device has at most 16 logical devices)",
                self.max_tenants
            );
        }
        let tenants = self.workloads.len();
        if tenants == 0 {
            anyhow::bail!("run-many needs at least one workload");
        }
        if tenants > self.max_tenants {
            anyhow::bail!(
                "{tenants} workloads for at most {} tenants (--max-tenants {}); raise --max-tenants (at most {MAX_TENANTS})",
                self.max_tenants,
                self.max_tenants
            );
        }
        self.policy
            .check(tenants)
            .map_err(|error| anyhow::anyhow!("--weights: {error}"))?;
        faults::check(&self.faults, tenants, crate::config::VIRTUAL_TIME_LIMIT_NS)?;
        Ok(())
    }

    /// Every tenant's request, checked ([`ManyRequest::check`], and no `--poll oracle`).
    fn requests(&self) -> anyhow::Result<Vec<RunRequest>> {
        self.check()?;
        let requests: Vec<RunRequest> =
            (0..self.workloads.len()).map(|t| self.request(t)).collect();
        for (tenant, one) in requests.iter().enumerate() {
            if one.config.host.poll_policy == host_runtime::PollPolicy::Oracle {
                anyhow::bail!(
                    "tenant {tenant}: --poll oracle is a study of one run; run-many cannot take it"
                );
            }
        }
        Ok(requests)
    }

    /// Tenant `tenant`'s request, as `axle run` would make it.
    pub fn request(&self, tenant: usize) -> RunRequest {
        RunRequest {
            workload: self.workloads.get(tenant).cloned().unwrap_or_default(),
            mode: self.mode,
            config: self.config.clone(),
            data: self.data.clone(),
            wall_limit: self.wall_limit,
        }
    }
}

/// One tenant of a shared run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TenantReport {
    /// Its index (its turn order at equal times).
    pub tenant: usize,
    /// Its run on the shared device (figures: its own, the CCM's and DMA's while serving it).
    pub shared: RunReport,
    /// End-to-end time of the same request run alone (`axle run`), if it was run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alone_end_to_end_ns: Option<u64>,
    /// Shared end-to-end time over alone end-to-end time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slowdown: Option<f64>,
    /// Dispatches the CCM's arbiter granted it.
    pub ccm_grants: u64,
    /// Time its dispatches waited for the CCM.
    pub ccm_wait_ns: u64,
    /// The device detached it: when and why (its figures are those up to then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detached: Option<DetachedReport>,
    /// Its host runtime failed (the device's answer to it, a wall-time overrun...): why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// A tenant the device detached.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DetachedReport {
    /// Virtual time of the detach.
    pub at_ns: u64,
    /// Why, in words.
    pub reason: String,
    /// Work items of its stage the CCM cut (absent: the CCM was not granted to it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ccm_items_cut: Option<u32>,
    /// Whether its dispatch waiting for the CCM was dropped.
    pub dispatch_dropped: bool,
    /// Its DMA requests in preparation cancelled.
    pub dma_cancelled: u32,
}

impl DetachedReport {
    fn of(detached: &emulator::cosim::tenants::Detached) -> DetachedReport {
        DetachedReport {
            at_ns: detached.at.as_ns(),
            reason: detached.reason.to_string(),
            ccm_items_cut: detached.ccm_items_cut,
            dispatch_dropped: detached.dispatch_dropped,
            dma_cancelled: detached.dma_cancelled,
        }
    }
}

impl TenantReport {
    /// Whether it ran to its end: neither detached nor failed.
    pub fn completed(&self) -> bool {
        self.detached.is_none() && self.failure.is_none()
    }
}

/// What `axle run-many` produced.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ManyReport {
    /// Mechanism.
    pub mode: String,
    /// The CCM's share policy: `round-robin` or `weighted 1,2,...`.
    pub policy: String,
    /// Every tenant's figures, by tenant.
    pub tenants: Vec<TenantReport>,
    /// When the last tenant that ran to its end finished (the tenants all start at 0).
    pub makespan_ns: u64,
    /// CCM busy time of the whole device.
    pub ccm_busy_ns: u64,
    /// DMA busy time (union) of the whole device.
    pub dma_busy_ns: u64,
    /// CCM busy over the makespan.
    pub ccm_utilisation: f64,
    /// Jain's fairness index of the tenants' progress rates (alone / shared), when they ran
    /// alone too: 1 when every tenant slowed down equally, 1/n at worst.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jain_fairness: Option<f64>,
    /// Whether every tenant's answer verified.
    pub verified: bool,
    /// What the simulator did (the whole device).
    pub simulator: emulator::SimulatorCounts,
}

/// The policy's name as reported.
fn policy_name(policy: &SharePolicy) -> String {
    match policy {
        SharePolicy::RoundRobin => "round-robin".into(),
        SharePolicy::Weighted(weights) => format!(
            "weighted {}",
            weights
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

/// Jain's fairness index of `rates`: (Σx)² / (n Σx²).
pub fn jain(rates: &[f64]) -> Option<f64> {
    let n = rates.len() as f64;
    let sum: f64 = rates.iter().sum();
    let squares: f64 = rates.iter().map(|x| x * x).sum();
    (squares > 0.0).then(|| sum * sum / (n * squares))
}

/// Runs `request`'s tenants together on one device (and each alone, if asked).
pub fn run_many(request: &ManyRequest) -> anyhow::Result<ManyReport> {
    let requests = request.requests()?;
    let tenants = requests.len();
    // Each tenant prepared as `axle run` prepares it: its workload, host memory and ring,
    // its logical device sized for its data set.
    let mut prepared: Vec<Prepared> = Vec::with_capacity(tenants);
    let mut rings = Vec::with_capacity(tenants);
    let mut setups = Vec::with_capacity(tenants);
    for (tenant, one) in requests.iter().enumerate() {
        let tenant_prepared =
            prepare(one).with_context(|| format!("tenant {tenant} ({})", one.workload))?;
        let memory = Arc::new(
            PhysicalMemory::new(tenant_prepared.host_bytes)
                .with_context(|| format!("tenant {tenant}: host memory"))?,
        );
        rings.push(tenant_prepared.ring(&memory)?);
        let bytes = Emulator::device_memory_bytes(&tenant_prepared.device);
        setups.push(TenantSetup {
            host_memory: memory,
            dram: emulator::dram::DeviceDram::new(bytes),
            streaming_factor: one.config.streaming_factor()?,
            out_of_order: one.config.axle.out_of_order,
        });
        prepared.push(tenant_prepared);
    }
    // The shared parts (CCM, DMA engine, link) are tenant 0's configuration's; every tenant
    // has the same one but for its memory's size.
    let device_config = prepared
        .first()
        .map(|p| p.device.clone())
        .context("no tenant")?;
    let mut device = Emulator::shared(device_config, setups, request.policy.clone())?;
    for fault in &request.faults {
        if fault.kind == faults::FaultKind::Kill {
            device.schedule_detach(
                fault.tenant,
                shared_abi::Ticks::from_ns(fault.at_ns),
                emulator::cosim::tenants::DetachReason::Dead,
            )?;
        }
    }
    let injected: Vec<
        Option<(
            faults::TenantFault,
            emulator::cosim::tenants::TenantDetacher,
        )>,
    > = (0..tenants)
        .map(|tenant| {
            let fault = request
                .faults
                .iter()
                .find(|f| f.tenant == tenant && f.kind != faults::FaultKind::Kill)
                .or_else(|| request.faults.iter().find(|f| f.tenant == tenant))?;
            Some((*fault, device.detacher(tenant)?))
        })
        .collect();
    for (tenant, tenant_prepared) in prepared.iter_mut().enumerate() {
        device.select(tenant);
        Loader::load(tenant_prepared.app.as_mut(), &mut device, false)
            .with_context(|| format!("tenant {tenant}"))?;
    }
    let limit = requests
        .first()
        .map(RunRequest::wall_limit)
        .unwrap_or_default();
    // Every tenant's host runtime, driven together.
    let (outcomes, cosim) = {
        let mut runtimes: Vec<Runtime<'_>> = prepared
            .iter_mut()
            .zip(rings)
            .zip(&requests)
            .map(|((p, ring), one)| {
                let mut runtime =
                    Runtime::new(one.mode, one.config.host.clone(), p.app.as_mut(), ring);
                // As `axle run` does: adaptive polling bounds each launch's first record with
                // the device's published figures (a shared device only delays it further).
                runtime.set_device_datasheet(crate::run::datasheet(&one.config.device));
                runtime
            })
            .collect();
        let (overruns, cosim) = {
            let mut budgets: Vec<WallBudget<'_, '_>> = runtimes
                .iter_mut()
                .enumerate()
                .map(|(tenant, runtime)| {
                    WallBudget::new(runtime, limit).detaching(device.detacher(tenant))
                })
                .collect();
            let mut faulty: Vec<faults::FaultyHost<'_>> = budgets
                .iter_mut()
                .zip(injected)
                .map(|(budget, fault)| faults::FaultyHost::new(budget, fault))
                .collect();
            let mut hosts: Vec<&mut dyn HostAgent> = faulty
                .iter_mut()
                .map(|host| host as &mut dyn HostAgent)
                .collect();
            let cosim = device.run_tenants(&mut hosts, VIRTUAL_TIME_LIMIT);
            drop(hosts);
            drop(faulty);
            let overruns: Vec<Option<RunFailure>> =
                budgets.iter().map(WallBudget::overrun).collect();
            (overruns, cosim)
        };
        let outcomes: Vec<_> = runtimes
            .iter()
            .zip(overruns)
            .map(|(runtime, overrun)| (runtime.measurements(), runtime.failure().cloned(), overrun))
            .collect();
        (outcomes, cosim)
    };
    let whole = device.metrics();
    let mut reports = Vec::with_capacity(tenants);
    for (tenant, ((tenant_prepared, one), (measured, failure, overrun))) in
        prepared.iter_mut().zip(&requests).zip(outcomes).enumerate()
    {
        let metrics = device.tenant_metrics(tenant);
        let figures = device.tenant_figures(tenant).unwrap_or_default();
        let detached = device.detached(tenant).map(DetachedReport::of);
        let outcome = match (&cosim, overrun) {
            // A tenant detached for its overrun is reported as detached, with its figures
            // up to then.
            (_, Some(_)) if detached.is_some() => Ok(()),
            (_, Some(overrun)) => Err(overrun),
            (Err(error), None) => Err(RunFailure::CoSim(error.clone())),
            (Ok(()), None) => Ok(()),
        };
        // A tenant that was detached, or whose runtime failed, is reported with its figures
        // up to then; the others' reports stand. A deadlock or the time limit that is one
        // tenant's (another ran to its end), or its wall-time budget spent, detaches it
        // (`DetachReason`); the device's own (nobody ran to its end) still ends the whole
        // run.
        let failed = failure.as_ref().map(|error| {
            RunFailed {
                workload: one.workload.clone(),
                mode: one.mode,
                failure: RunFailure::Runtime(error.clone()),
            }
            .to_string()
        });
        let failure = if detached.is_some() || failed.is_some() {
            None
        } else {
            failure
        };
        let mut report = tenant_prepared
            .report(one, &measured, failure, outcome, &metrics)
            .map_err(|error| match error.downcast::<RunFailed>() {
                Ok(failed) => anyhow::anyhow!("tenant {tenant}: {failed}"),
                Err(error) => error.context(format!("tenant {tenant}")),
            })?;
        report.simulator = whole.simulator;
        if let Some(detached) = &detached {
            report.verified = false;
            report.verification = format!(
                "not run to its end: detached at {} ns of virtual time ({})",
                detached.at_ns, detached.reason
            );
        } else if let Some(failed) = &failed {
            report.verified = false;
            report.verification = format!("not run to its end: {failed}");
        }
        reports.push(TenantReport {
            tenant,
            shared: report,
            alone_end_to_end_ns: None,
            slowdown: None,
            ccm_grants: figures.grants,
            ccm_wait_ns: figures.ccm_wait.as_ns(),
            detached,
            failure: failed,
        });
    }
    drop(device);
    drop(prepared);
    let whole = Whole {
        ccm_busy_ns: whole.ccm_busy.as_ns(),
        dma_busy_ns: whole.dma_busy.as_ns(),
        simulator: whole.simulator,
    };
    assemble(request, &requests, reports, whole, run)
}

/// What the shared device measured as a whole.
struct Whole {
    ccm_busy_ns: u64,
    dma_busy_ns: u64,
    simulator: emulator::SimulatorCounts,
}

/// The report of a shared run: its tenants' reports, the runs alone (by `alone`, when asked)
/// and the device's figures.
fn assemble(
    request: &ManyRequest,
    requests: &[RunRequest],
    mut reports: Vec<TenantReport>,
    whole: Whole,
    alone_run: impl Fn(&RunRequest) -> anyhow::Result<RunReport>,
) -> anyhow::Result<ManyReport> {
    let tenants = reports.len();
    let mut jain_fairness = None;
    if request.alone {
        // Each distinct workload once, alone: the same request `axle run` makes.
        let mut alone: Vec<(String, u64)> = Vec::new();
        for (one, tenant) in requests.iter().zip(&reports) {
            if !tenant.completed() || alone.iter().any(|(name, _)| *name == one.workload) {
                continue;
            }
            let report = alone_run(one).with_context(|| format!("{} alone", one.workload))?;
            alone.push((one.workload.clone(), report.metrics.end_to_end_ns));
        }
        let mut rates = Vec::with_capacity(tenants);
        for tenant in &mut reports {
            if !tenant.completed() {
                continue;
            }
            let Some((_, ns)) = alone
                .iter()
                .find(|(name, _)| *name == tenant.shared.workload)
            else {
                continue;
            };
            tenant.alone_end_to_end_ns = Some(*ns);
            let shared = tenant.shared.metrics.end_to_end_ns;
            if *ns > 0 && shared > 0 {
                tenant.slowdown = Some(shared as f64 / *ns as f64);
                rates.push(*ns as f64 / shared as f64);
            }
        }
        jain_fairness = jain(&rates);
    }
    let makespan_ns = reports
        .iter()
        .filter(|t| t.completed())
        .map(|t| t.shared.metrics.end_to_end_ns)
        .max()
        .unwrap_or(0);
    let ccm_busy_ns = whole.ccm_busy_ns;
    Ok(ManyReport {
        mode: request.mode.name().into(),
        policy: policy_name(&request.policy),
        verified: reports.iter().all(|t| t.shared.verified),
        tenants: reports,
        makespan_ns,
        ccm_busy_ns,
        dma_busy_ns: whole.dma_busy_ns,
        ccm_utilisation: if makespan_ns > 0 {
            ccm_busy_ns as f64 / makespan_ns as f64
        } else {
            0.0
        },
        jain_fairness,
        simulator: whole.simulator,
    })
}

/// A tenant's run that did not start because another tenant could not be prepared.
#[derive(Debug, thiserror::Error)]
#[error("not attached: another tenant could not be prepared")]
struct NotStarted;

/// The name of this process's next tenant group (`run-many-PID-N`).
fn group_name() -> String {
    static GROUPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = GROUPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("run-many-{}-{n}", std::process::id())
}

/// A tenant's error, named as [`run_many`] names it.
fn tenant_error(tenant: usize, error: anyhow::Error) -> anyhow::Error {
    match error.downcast::<RunFailed>() {
        Ok(failed) => anyhow::anyhow!("tenant {tenant}: {failed}"),
        Err(error) => error.context(format!("tenant {tenant}")),
    }
}

/// [`run_many`] with the device in the emulator process serving on `target.socket` (`axle
/// emu --max-tenants N`, N at least the tenants): one session per tenant, each from a thread
/// of its own with its own host memory and host runtime, as a group named
/// `run-many-PID-N`; the emulator runs them together when all have attached, in tenant
/// order at equal times, so the report is [`run_many`]'s, byte for byte. Every tenant is
/// prepared before any attaches (one that cannot be prepared ends the run before the
/// emulator is asked for anything). The runs alone are attached too.
///
/// With `reattach` (`--reattach`), an emulator process that dies mid-run is waited for on
/// the same socket, each tenant (on its own thread) reporting what it lost to `notice` and
/// rerunning from the start: the group gathers again on the new device under the same name,
/// so the report is still an uninterrupted run's (as
/// [`crate::recover::run_attached_reattaching`] does for one host); a run alone is rerun the
/// same way.
pub fn run_many_attached(
    request: &ManyRequest,
    target: &crate::run::AttachTarget,
    reattach: Option<&crate::recover::Reattach>,
    notice: &(dyn Fn(&str) + Sync),
) -> anyhow::Result<ManyReport> {
    use cosim_link::attach::TenantClaim;
    use std::sync::atomic::{AtomicBool, Ordering};
    if !request.faults.is_empty() {
        anyhow::bail!(
            "--fault injects faults into in-process tenants only; it cannot be combined with --attach (an attached tenant's faults are real: kill or stop its host process)"
        );
    }
    let requests = request.requests()?;
    let tenants = requests.len();
    let group = group_name();
    let weights = match &request.policy {
        SharePolicy::RoundRobin => None,
        SharePolicy::Weighted(weights) => Some(weights.clone()),
    };
    let count = u32::try_from(tenants).context("tenant count")?;
    let barrier = std::sync::Barrier::new(tenants);
    let unprepared = AtomicBool::new(false);
    let results: Vec<anyhow::Result<_>> = std::thread::scope(|scope| {
        let handles: Vec<_> = requests
            .iter()
            .enumerate()
            .map(|(tenant, one)| {
                let claim = TenantClaim {
                    group: group.clone(),
                    index: tenant as u32,
                    count,
                    weights: weights.clone(),
                };
                let (barrier, unprepared) = (&barrier, &unprepared);
                std::thread::Builder::new()
                    .name(format!("tenant-{tenant}"))
                    .spawn_scoped(scope, move || {
                        let prepared = crate::run::prepare(one)
                            .with_context(|| format!("tenant {tenant} ({})", one.workload));
                        if prepared.is_err() {
                            unprepared.store(true, Ordering::SeqCst);
                        }
                        barrier.wait();
                        let prepared = prepared?;
                        if unprepared.load(Ordering::SeqCst) {
                            return Err(NotStarted.into());
                        }
                        match reattach {
                            Some(reattach) => crate::run::run_attached_tenant_reattaching(
                                one,
                                target,
                                prepared,
                                claim,
                                reattach,
                                "axle run-many",
                                &mut |line| notice(line),
                            ),
                            None => crate::run::run_attached_tenant(one, target, prepared, claim),
                        }
                        .map_err(|error| tenant_error(tenant, error))
                    })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .context("starting a tenant's thread")?
                    .join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a tenant's thread panicked")))
            })
            .collect()
    });
    let mut ends = Vec::with_capacity(tenants);
    let mut first_error = None;
    for result in results {
        match result {
            Ok(end) => ends.push(end),
            Err(error) if error.is::<NotStarted>() => {}
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    if let Some(error) = first_error {
        return Err(error);
    }
    let whole = ends
        .first()
        .map(|(_, share)| emulator::DeviceMetrics::from(&share.device))
        .context("no tenant")?;
    let reports = ends
        .into_iter()
        .enumerate()
        .map(|(tenant, (shared, share))| TenantReport {
            tenant,
            shared,
            alone_end_to_end_ns: None,
            slowdown: None,
            ccm_grants: share.ccm_grants,
            ccm_wait_ns: shared_abi::Ticks(share.ccm_wait).as_ns(),
            detached: None,
            failure: None,
        })
        .collect();
    let whole = Whole {
        ccm_busy_ns: whole.ccm_busy.as_ns(),
        dma_busy_ns: whole.dma_busy.as_ns(),
        simulator: whole.simulator,
    };
    assemble(request, &requests, reports, whole, |one| match reattach {
        Some(reattach) => {
            crate::recover::run_attached_reattaching(one, target, reattach, &mut |line| {
                notice(line)
            })
        }
        None => crate::run::run_attached(one, target),
    })
}

/// One tenant of a group sharing one device in the emulator process serving on
/// `target.socket` (`axle run --attach --tenant I/N --group NAME`): `request` run as tenant
/// `claim.index`; its report is its figures on the shared device, as `axle run-many`
/// reports them under `tenants[I].shared`.
///
/// With `reattach` (`--reattach`): when the emulator process dies, the tenant reports what
/// it lost to `notice`, waits for an emulator on the same socket and reruns from the start
/// as the same tenant of the same group, which gathers again there (every tenant of the
/// group must do so: one that gave up leaves the others to be refused at the emulator's
/// `--group-timeout`).
pub fn run_as_tenant(
    request: &RunRequest,
    target: &crate::run::AttachTarget,
    claim: cosim_link::attach::TenantClaim,
    reattach: Option<&crate::recover::Reattach>,
    notice: &mut dyn FnMut(&str),
) -> anyhow::Result<RunReport> {
    let prepared = crate::run::prepare(request)?;
    Ok(match reattach {
        Some(reattach) => crate::run::run_attached_tenant_reattaching(
            request, target, prepared, claim, reattach, "axle run", notice,
        )?,
        None => crate::run::run_attached_tenant(request, target, prepared, claim)?,
    }
    .0)
}

/// The human report: one line per tenant, then the device.
pub fn human(report: &ManyReport) -> String {
    let mut out = format!(
        "{} tenants, mode {}, CCM shared {}\n",
        report.tenants.len(),
        report.mode,
        report.policy
    );
    out.push_str(&format!(
        "  {:>6}  {:<9} {:>14} {:>14} {:>9} {:>12} {:>12} {:>7} {:>8}\n",
        "tenant",
        "workload",
        "shared (ns)",
        "alone (ns)",
        "slowdown",
        "CCM busy ns",
        "CCM wait ns",
        "grants",
        "verified"
    ));
    for tenant in &report.tenants {
        let metrics = &tenant.shared.metrics;
        out.push_str(&format!(
            "  {:>6}  {:<9} {:>14} {:>14} {:>9} {:>12} {:>12} {:>7} {:>8}\n",
            tenant.tenant,
            tenant.shared.workload,
            metrics.end_to_end_ns,
            tenant
                .alone_end_to_end_ns
                .map_or("-".to_owned(), |ns| ns.to_string()),
            tenant
                .slowdown
                .map_or("-".to_owned(), |s| format!("{s:.3}x")),
            metrics.ccm_busy_ns,
            tenant.ccm_wait_ns,
            tenant.ccm_grants,
            match (&tenant.detached, &tenant.failure, tenant.shared.verified) {
                (Some(_), _, _) => "detached",
                (None, Some(_), _) => "failed",
                (None, None, true) => "yes",
                (None, None, false) => "NO",
            }
        ));
    }
    for tenant in &report.tenants {
        if let Some(detached) = &tenant.detached {
            out.push_str(&format!(
                "  tenant {} ({}) DETACHED at {} ns of virtual time: {}\n",
                tenant.tenant, tenant.shared.workload, detached.at_ns, detached.reason
            ));
        }
        if let Some(failure) = &tenant.failure {
            out.push_str(&format!(
                "  tenant {} ({}) FAILED: {failure}\n",
                tenant.tenant, tenant.shared.workload
            ));
        }
    }
    out.push_str(&format!(
        "  makespan {} ns; device CCM busy {} ns ({:.1}%), DMA busy {} ns{}\n",
        report.makespan_ns,
        report.ccm_busy_ns,
        100.0 * report.ccm_utilisation,
        report.dma_busy_ns,
        report
            .jain_fairness
            .map_or(String::new(), |j| format!("; Jain's fairness index {j:.4}"))
    ));
    out
}
