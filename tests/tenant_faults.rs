//! Faults do not spread (docs/tenants.md, "Faults do not spread"): a tenant that dies, stops
//! taking its turns, sends a malformed descriptor or moves its flow-control heads backwards
//! is detached, and every other tenant's run verifies with figures identical to those of a
//! run in which the faulty tenant's host was honest and the device detached it at the same
//! virtual time by the clean mechanism (a scheduled detach: `kill@T`).
//!
//! Run: `cargo test --release --test tenant_faults`.

use axle::config::AxleConfig;
use axle::tenants::faults::{FaultKind, TenantFault};
use axle::tenants::{run_many, ManyReport, ManyRequest, TenantReport, DEFAULT_MAX_TENANTS};
use emulator::cosim::tenants::SharePolicy;
use host_runtime::Mode;
use std::process::Command;

const MODES: [Mode; 4] = [Mode::Rp, Mode::Bs, Mode::Axle, Mode::AxleIrq];
const MIX: [&str; 4] = ["knn-a", "pagerank", "ssb-q1.1", "dlrm"];

fn request(workloads: &[&str], mode: Mode, slots: Option<u32>) -> ManyRequest {
    let mut config = AxleConfig::default();
    config.workload.scale = workloads::Scale::Small;
    if let Some(slots) = slots {
        config.axle.slots = slots;
    }
    ManyRequest {
        workloads: workloads.iter().map(|w| (*w).to_owned()).collect(),
        mode,
        config,
        data: None,
        wall_limit: None,
        policy: SharePolicy::RoundRobin,
        max_tenants: DEFAULT_MAX_TENANTS,
        alone: false,
        faults: Vec::new(),
    }
}

fn with_fault(request: &ManyRequest, tenant: usize, kind: FaultKind, at_ns: u64) -> ManyRequest {
    ManyRequest {
        faults: vec![TenantFault {
            tenant,
            kind,
            at_ns,
        }],
        ..request.clone()
    }
}

/// A tenant's report as JSON without the simulator's own counts (events, turns, link
/// calls: the whole device's, which the faulty tenant's own events move) and its index.
fn figures(tenant: &TenantReport) -> String {
    let mut value = serde_json::to_value(tenant).unwrap();
    value["shared"].as_object_mut().unwrap().remove("simulator");
    value.as_object_mut().unwrap().remove("tenant");
    value.to_string()
}

/// The other tenants' figures, in order.
fn others(report: &ManyReport, faulty: usize) -> Vec<String> {
    report
        .tenants
        .iter()
        .filter(|t| t.tenant != faulty)
        .map(figures)
        .collect()
}

/// Runs `request` with `kind` injected into tenant `faulty` at `at_ns`: the tenant is
/// detached for the fault's reason, every other tenant verifies, the report repeats byte for
/// byte, and the others' figures equal those of a run where the faulty tenant's host is
/// honest and is killed (a scheduled detach) at the virtual time of the detach. Returns the
/// report.
fn faults_do_not_spread(
    request: &ManyRequest,
    faulty: usize,
    kind: FaultKind,
    at_ns: u64,
    reason: &str,
) -> ManyReport {
    let label = format!("{} {kind:?}@{at_ns}", request.mode.name());
    let faulted = run_many(&with_fault(request, faulty, kind, at_ns)).unwrap();
    let again = run_many(&with_fault(request, faulty, kind, at_ns)).unwrap();
    assert_eq!(
        serde_json::to_string(&faulted).unwrap(),
        serde_json::to_string(&again).unwrap(),
        "{label}: the same faulty run twice"
    );
    assert!(!faulted.verified, "{label}");
    let tenant = &faulted.tenants[faulty];
    let detached = tenant
        .detached
        .as_ref()
        .unwrap_or_else(|| panic!("{label}: not detached: {:?}", tenant.failure));
    assert!(detached.reason.contains(reason), "{label}: {detached:?}");
    assert!(detached.at_ns >= at_ns, "{label}: {detached:?}");
    assert!(!tenant.shared.verified, "{label}");
    for other in faulted.tenants.iter().filter(|t| t.tenant != faulty) {
        assert!(other.shared.verified, "{label}: tenant {}", other.tenant);
        assert!(other.completed(), "{label}: tenant {}", other.tenant);
    }
    let clean = run_many(&with_fault(
        request,
        faulty,
        FaultKind::Kill,
        detached.at_ns,
    ))
    .unwrap();
    let killed = clean.tenants[faulty].detached.as_ref().unwrap();
    assert_eq!(killed.at_ns, detached.at_ns, "{label}");
    assert_eq!(
        others(&faulted, faulty),
        others(&clean, faulty),
        "{label}: the others' figures differ from a clean detach at {} ns",
        detached.at_ns
    );
    faulted
}

/// A host that stops taking its turns, in every mode, before, during and after its
/// CCM work: detached at its first turn not taken; the others are as if it had been killed
/// then. At 60 µs in AXLE mode PageRank holds the CCM: its stage is cut.
#[test]
fn a_stopped_host_is_detached_and_the_others_are_as_after_a_clean_detach() {
    for mode in MODES {
        let request = request(&MIX, mode, None);
        for at in [5_000, 20_000, 60_000] {
            let report = faults_do_not_spread(&request, 1, FaultKind::Stop, at, "stopped");
            if mode == Mode::Axle && at == 60_000 {
                let cut = report.tenants[1].detached.as_ref().unwrap().ccm_items_cut;
                assert!(cut.is_some_and(|items| items > 0), "{cut:?}");
            }
        }
    }
}

/// A malformed launch descriptor in AXLE modes latches the tenant's ring BROKEN: detached at
/// the store's arrival; the others are as if it had been killed then.
#[test]
fn a_malformed_descriptor_detaches_its_tenant_in_axle_modes() {
    for mode in [Mode::Axle, Mode::AxleIrq] {
        let request = request(&MIX, mode, None);
        for at in [0, 20_000, 50_000] {
            faults_do_not_spread(&request, 1, FaultKind::Malformed, at, "unknown kernel id");
        }
    }
}

/// Flow-control heads that go back to 0 after the device adopted later ones: the device
/// notices at its next read of the heads (DLRM with 512-slot rings fills them), latches the
/// ring BROKEN and detaches the tenant; the others are as if it had been killed then.
#[test]
fn heads_moved_backwards_detach_their_tenant() {
    let request = request(&["knn-a", "dlrm", "ssb-q1.1"], Mode::Axle, Some(512));
    for at in [15_000, 20_000, 24_000] {
        faults_do_not_spread(
            &request,
            1,
            FaultKind::HeadsBack,
            at,
            "flow-control head beyond tail or moving backwards",
        );
    }
}

/// Heads moved back to 0 before the device ever adopted a head are valid to it: it waits
/// for credit that never comes, and the tenant's own runtime gives up after its stall
/// timeout (it fails alone); the others verify, their figures those of the run without a
/// fault (DLRM's later work would have come after theirs).
#[test]
fn heads_moved_back_before_the_device_read_any_stall_their_own_tenant_only() {
    let request = request(&["knn-a", "dlrm", "ssb-q1.1"], Mode::Axle, Some(512));
    let clean = run_many(&request).unwrap();
    let report = run_many(&with_fault(&request, 1, FaultKind::HeadsBack, 2_000)).unwrap();
    let tenant = &report.tenants[1];
    assert!(tenant.detached.is_none());
    let failure = tenant.failure.as_deref().unwrap();
    assert!(failure.contains("no progress"), "{failure}");
    assert_eq!(others(&report, 1), others(&clean, 1));
}

/// In RP and BS modes a malformed launch is refused with a status (the protocol's answer):
/// the tenant's runtime fails by itself, is reported as failed, and the others verify.
#[test]
fn a_malformed_launch_in_rp_or_bs_fails_its_own_tenant_only() {
    for mode in [Mode::Rp, Mode::Bs] {
        let report = run_many(&with_fault(
            &request(&MIX, mode, None),
            1,
            FaultKind::Malformed,
            20_000,
        ))
        .unwrap();
        let tenant = &report.tenants[1];
        assert!(tenant.detached.is_none(), "{}", mode.name());
        let failure = tenant.failure.as_deref().unwrap();
        assert!(failure.contains("device reported"), "{failure}");
        assert!(!report.verified);
        for other in report.tenants.iter().filter(|t| t.tenant != 1) {
            assert!(
                other.shared.verified && other.completed(),
                "{}",
                mode.name()
            );
        }
    }
}

/// A tenant killed at time 0, before it sent anything, leaves the others exactly as if it
/// had never been there: their reports (but for the simulator's counts and their index)
/// equal those of the same run without it, in every mode.
#[test]
fn a_tenant_killed_at_time_zero_leaves_the_others_as_if_it_never_was() {
    for mode in MODES {
        let with = run_many(&with_fault(
            &request(&MIX, mode, None),
            1,
            FaultKind::Kill,
            0,
        ))
        .unwrap();
        let without = run_many(&request(&["knn-a", "ssb-q1.1", "dlrm"], mode, None)).unwrap();
        assert!(without.verified);
        let tenants_without: Vec<String> = without.tenants.iter().map(figures).collect();
        assert_eq!(others(&with, 1), tenants_without, "{}", mode.name());
        assert_eq!(with.makespan_ns, without.makespan_ns);
    }
}

/// `axle run-many --fault`: the detached tenant is named with its reason and time on
/// standard error, the others' verified results are printed, and the exit status is 1; a
/// fault naming no tenant is refused with status 2.
#[test]
fn run_many_reports_a_detached_tenant_and_exits_non_zero() {
    let axle = env!("CARGO_BIN_EXE_axle");
    let output = Command::new(axle)
        .args(["run-many", "knn-a", "pagerank", "ssb-q1.1", "dlrm"])
        .args(["--mode", "axle", "--scale", "small", "--no-alone"])
        .args(["--fault", "1:kill@20us"])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains(
            "error: tenant 1 (pagerank) was detached at 20000 ns of virtual time: its host died"
        ),
        "{stderr}"
    );
    assert!(
        stdout.contains("tenant 1 (pagerank) DETACHED at 20000 ns"),
        "{stdout}"
    );
    for workload in ["knn-a", "ssb-q1.1", "dlrm"] {
        let line = stdout
            .lines()
            .find(|line| line.contains(workload))
            .unwrap_or_else(|| panic!("{workload}: {stdout}"));
        assert!(line.trim_end().ends_with("yes"), "{line}");
    }
    for (fault, expected) in [
        (
            "4:kill@1us",
            "tenant 4 does not exist; this run has 4 tenants (0 to 3)",
        ),
        ("1:explode@1us", "unknown fault"),
    ] {
        let output = Command::new(axle)
            .args(["run-many", "knn-a", "pagerank", "ssb-q1.1", "dlrm"])
            .args(["--mode", "axle", "--scale", "small", "--fault", fault])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{fault}: {stderr}");
        assert!(stderr.contains(expected), "{fault}: {stderr}");
    }
}

/// `request` with `faults` injected (a kill beside another fault of the same tenant: the
/// faulty host dies then).
fn with_faults(request: &ManyRequest, faults: &[(usize, FaultKind, u64)]) -> ManyRequest {
    ManyRequest {
        faults: faults
            .iter()
            .map(|&(tenant, kind, at_ns)| TenantFault {
                tenant,
                kind,
                at_ns,
            })
            .collect(),
        ..request.clone()
    }
}

/// Tenant `faulty` goes wrong with `kind` at `at_ns` in a way that is its own (it hangs, or
/// spins for ever): it is detached for `reason` at a defined virtual time, the others run to
/// their end and verify, the report repeats byte for byte, and the others' figures equal
/// those of a run where the same faulty host is killed (a scheduled detach) at that time.
/// Returns the report and the detach's time.
fn stuck_tenant_is_detached(
    request: &ManyRequest,
    faulty: usize,
    kind: FaultKind,
    at_ns: u64,
    reason: &str,
) -> (ManyReport, u64) {
    let label = format!("{} {kind:?}@{at_ns}", request.mode.name());
    let faulted = run_many(&with_fault(request, faulty, kind, at_ns))
        .unwrap_or_else(|error| panic!("{label}: the whole run failed: {error:#}"));
    let again = run_many(&with_fault(request, faulty, kind, at_ns)).unwrap();
    assert_eq!(
        serde_json::to_string(&faulted).unwrap(),
        serde_json::to_string(&again).unwrap(),
        "{label}: the same faulty run twice"
    );
    assert!(!faulted.verified, "{label}");
    let detached = faulted.tenants[faulty]
        .detached
        .clone()
        .unwrap_or_else(|| panic!("{label}: not detached"));
    assert!(detached.reason.contains(reason), "{label}: {detached:?}");
    assert!(detached.at_ns >= at_ns, "{label}: {detached:?}");
    for other in faulted.tenants.iter().filter(|t| t.tenant != faulty) {
        assert!(
            other.shared.verified && other.completed(),
            "{label}: tenant {}",
            other.tenant
        );
    }
    let killed = run_many(&with_faults(
        request,
        &[
            (faulty, kind, at_ns),
            (faulty, FaultKind::Kill, detached.at_ns),
        ],
    ))
    .unwrap();
    let record = killed.tenants[faulty].detached.as_ref().unwrap();
    assert!(
        record.reason.contains("its host died"),
        "{label}: {record:?}"
    );
    assert_eq!(record.at_ns, detached.at_ns, "{label}");
    assert_eq!(
        others(&faulted, faulty),
        others(&killed, faulty),
        "{label}: the others' figures differ from a clean detach at {} ns",
        detached.at_ns
    );
    (faulted, detached.at_ns)
}

/// A host that waits for ever for a response that never comes (`hang`), in every mode,
/// early in its run and after the others ended: once nothing else can happen, the deadlock
/// is found to be its own (the others ran to their end) and it alone is detached, then; the
/// others are as if it had been killed at that time. Hung after the others ended, the
/// others' figures are those of the run without a fault, and of a run where its honest host
/// is killed at that time.
#[test]
fn a_tenant_that_deadlocks_alone_is_detached_and_the_others_run_to_their_end() {
    for mode in MODES {
        let request = request(&MIX, mode, None);
        let clean = run_many(&request).unwrap();
        let others_end = clean
            .tenants
            .iter()
            .filter(|t| t.tenant != 1)
            .map(|t| t.shared.metrics.end_to_end_ns)
            .max()
            .unwrap();
        assert!(
            clean.tenants[1].shared.metrics.end_to_end_ns > others_end + 1_000,
            "{}: pagerank ends last",
            mode.name()
        );
        stuck_tenant_is_detached(&request, 1, FaultKind::Hang, 5_000, "deadlock of its own");
        let (late, at_ns) = stuck_tenant_is_detached(
            &request,
            1,
            FaultKind::Hang,
            others_end + 1_000,
            "deadlock of its own",
        );
        assert_eq!(others(&late, 1), others(&clean, 1), "{}", mode.name());
        let honest = run_many(&with_fault(&request, 1, FaultKind::Kill, at_ns)).unwrap();
        assert_eq!(others(&late, 1), others(&honest, 1), "{}", mode.name());
    }
}

/// A host that polls for ever without a call (`spin`) never ends: it alone is detached at
/// the run's virtual-time limit, and the others are as if it had been killed then.
#[test]
fn a_tenant_that_never_ends_is_detached_at_the_time_limit_and_the_others_run_to_their_end() {
    for mode in [Mode::Bs, Mode::Axle] {
        let (_, at_ns) = stuck_tenant_is_detached(
            &request(&MIX, mode, None),
            1,
            FaultKind::Spin,
            20_000,
            "virtual-time limit",
        );
        assert_eq!(at_ns, axle::config::VIRTUAL_TIME_LIMIT_NS);
    }
}

/// When nobody can progress and no tenant ran to its end, the deadlock (or the time limit)
/// is the whole device's: the run fails as a whole, with the co-simulation's error.
#[test]
fn a_deadlock_or_time_limit_of_every_tenant_still_ends_the_whole_run() {
    let request = request(&["knn-a", "pagerank"], Mode::Axle, None);
    let error = run_many(&with_faults(
        &request,
        &[(0, FaultKind::Hang, 1_000), (1, FaultKind::Hang, 1_000)],
    ))
    .unwrap_err();
    assert!(format!("{error:#}").contains("deadlock"), "{error:#}");
    let error = run_many(&with_faults(
        &request,
        &[(0, FaultKind::Spin, 1_000), (1, FaultKind::Hang, 1_000)],
    ))
    .unwrap_err();
    assert!(
        format!("{error:#}").contains("virtual-time limit"),
        "{error:#}"
    );
}

/// A tenant that spends its wall-time budget is detached at the turn that found it spent,
/// with the budget in the reason; the run does not fail as a whole. With a budget of 0,
/// every tenant that makes enough calls for the clock to be read (`WALL_CHECK_EVERY`) is
/// detached, the others run to their end; the report names each.
#[test]
fn a_tenant_over_its_wall_time_budget_is_detached_not_the_whole_run() {
    let mut request = ManyRequest {
        wall_limit: Some(std::time::Duration::ZERO),
        ..request(&MIX, Mode::Axle, None)
    };
    // KNN with 256 queries makes thousands of calls into its host: its clock is read.
    request.config.workload.queries = 256;
    let report = run_many(&request).unwrap();
    let mut detached = 0;
    for tenant in &report.tenants {
        match &tenant.detached {
            Some(record) => {
                assert!(
                    record.reason.contains("overran its wall-time budget")
                        && record.reason.contains("of 0 ms"),
                    "{record:?}"
                );
                detached += 1;
            }
            None => assert!(tenant.shared.verified, "tenant {}", tenant.tenant),
        }
    }
    assert!(
        report.tenants[0].detached.is_some() && detached < report.tenants.len(),
        "{}",
        axle::tenants::human(&report)
    );
}
