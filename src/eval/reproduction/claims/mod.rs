//! Every claim of the paper's Section V, in the paper's order: the numbers it gives and the
//! statements it makes (inequalities and words), each with its direction and, where ours has
//! differed, a note that quotes today's figures.
//!
//! Workloads are named by Table IV's annotation: (a)-(c) KNN, (d) SSSP, (e) PageRank, (f)
//! SSB Q1.1, (g) SSB Q1.2, (h) OPT-2.7B, (i) DLRM.

mod idle;
mod parameters;
mod runtime;
mod stall;

use super::claim::{time, Claim, Ctx};
use crate::eval::figures::{capacity_configs, scheduling_configs, streaming_factor_configs};
use host_runtime::{Mode, RunMetrics};

const KNN_A: &str = "knn-a";
const KNN_B: &str = "knn-b";
const KNN_C: &str = "knn-c";
const SSSP: &str = "sssp";
const PAGERANK: &str = "pagerank";
const SSB_1: &str = "ssb-q1.1";
const SSB_2: &str = "ssb-q1.2";
const OPT: &str = "opt-2.7b";
const DLRM: &str = "dlrm";

/// Table IV's annotation of `workload`: `(d)`.
fn label(workload: &str) -> String {
    workloads::names()
        .iter()
        .position(|name| *name == workload)
        .and_then(|index| u8::try_from(index).ok())
        .map_or_else(
            || workload.to_owned(),
            |index| format!("({})", char::from(b'a' + index)),
        )
}

/// `f` of each of `names`, or `None` if any of them did not run.
fn each<T>(
    c: &Ctx,
    names: &[&'static str],
    f: impl Fn(&'static str) -> Option<T>,
) -> Option<Vec<(&'static str, T)>> {
    names
        .iter()
        .map(|name| {
            if !c.has(name) {
                return None;
            }
            Some((*name, f(name)?))
        })
        .collect()
}

/// `f` of every workload that ran (`None` if it gives none for one of them, or none ran).
fn every<'e, T>(c: &Ctx<'e>, f: impl Fn(&'e str) -> Option<T>) -> Option<Vec<(&'e str, T)>> {
    let values: Option<Vec<(&str, T)>> = c.workloads().map(|name| Some((name, f(name)?))).collect();
    values.filter(|values| !values.is_empty())
}

/// RP's CCM, data movement and host shares of Figure 10, % of RP.
fn rp_components(c: &Ctx, workload: &str) -> Option<[f64; 3]> {
    Some([
        c.fig10(workload, "RP CCM")?,
        c.fig10(workload, "RP data movement")?,
        c.fig10(workload, "RP host")?,
    ])
}

fn components_text(workload: &str, [ccm, data, host]: [f64; 3]) -> String {
    format!(
        "{} CCM {ccm:.1}%, data movement {data:.1}%, host {host:.1}%",
        label(workload)
    )
}

/// Figure 14's cell of `workload` (x SF1).
fn fig14(c: &Ctx, workload: &str, column: &str) -> Option<f64> {
    c.cell("fig14", workload, column)
}

/// The run of Figure 14's setting `label` (`SF64`).
fn sf_run<'e>(c: &Ctx<'e>, workload: &str, label: &str) -> Option<&'e RunMetrics> {
    let (_, config) = streaming_factor_configs(c.config())
        .into_iter()
        .find(|(l, _)| l == label)?;
    c.run(workload, Mode::Axle, &config)
}

/// The run of Figure 15's setting `label` (`RR OoO`).
fn scheduling_run<'e>(c: &Ctx<'e>, workload: &str, label: &str) -> Option<&'e RunMetrics> {
    let (_, config) = scheduling_configs(c.config())
        .into_iter()
        .find(|(l, _)| l == label)?;
    c.run(workload, Mode::Axle, &config)
}

/// The configuration of Figure 16's capacity `label` (`12.5%`).
fn capacity(c: &Ctx, label: &str) -> Option<crate::config::AxleConfig> {
    capacity_configs(c.config())
        .into_iter()
        .find(|(l, _)| l == label)
        .map(|(_, config)| config)
}

/// Every claim, in the paper's order.
pub fn all() -> Vec<Claim> {
    let mut claims = Vec::new();
    claims.extend(runtime::setup_claims());
    claims.extend(runtime::runtime_claims());
    claims.extend(idle::idle_claims());
    claims.extend(stall::stall_claims());
    claims.extend(parameters::parameter_claims());
    claims
}

/// Why KNN (a) streams late: its items all run at once.
fn note_knn_a_wave(c: &Ctx) -> Option<String> {
    let axle = c.base(KNN_A, Mode::Axle)?;
    let rp = c.base(KNN_A, Mode::Rp)?;
    let device = &c.config().device;
    let uthreads = u64::from(device.ccm_units)
        * u64::from(device.ccm_sub_cores)
        * u64::from(device.ccm_uthreads_per_sub_core);
    // One 4-byte distance per work item.
    let items = axle.payloads * u64::from(c.config().axle.slot_size) / 4;
    let waves = items.div_ceil(uthreads.max(1));
    let wave_text = if waves == 1 {
        "one wave, whose items share device memory equally and so end together".to_owned()
    } else {
        format!("{waves} waves")
    };
    Some(format!(
        "(a) has {items} work items (one distance each) for {uthreads} µthreads: {wave_text}; AXLE (p1)'s first distance reaches the host {} after the launch, its CCM work takes {}, and the host's selection ({} in RP, one chained thread) follows the distances as they come.",
        time(axle.first_result_ns),
        time(axle.ccm_busy_ns),
        time(rp.host_busy_ns)
    ))
}

#[cfg(test)]
mod tests {
    use super::super::claim::{Direction, Kind};
    use super::*;
    use crate::eval::reproduction::tests::evaluation;
    use crate::eval::table::{Cell, Table};

    fn find(what: &str) -> Claim {
        all()
            .into_iter()
            .find(|claim| claim.what.contains(what))
            .unwrap_or_else(|| panic!("no claim `{what}`"))
    }

    fn fig13(rows: &[(&str, f64, f64)]) -> Table {
        let mut table = Table::new(
            "fig13",
            "",
            &["workload", "RP", "BS", "AXLE p10", "AXLE p100"],
        );
        for (workload, p10, p100) in rows {
            table.push(vec![
                Cell::text(*workload),
                Cell::Number(50.0),
                Cell::Number(90.0),
                Cell::Number(*p10),
                Cell::Number(*p100),
            ]);
        }
        table
    }

    #[test]
    fn every_number_has_a_direction_of_its_own_and_every_claim_is_listed_once() {
        let claims = all();
        let mut whats: Vec<&str> = claims.iter().map(|c| c.what.as_str()).collect();
        whats.sort_unstable();
        let count = whats.len();
        whats.dedup();
        assert_eq!(whats.len(), count, "a claim is listed twice");
        for claim in &claims {
            if matches!(claim.kind, Kind::Number { .. }) {
                assert!(
                    matches!(claim.direction, Direction::Reference(..)),
                    "{} has no direction",
                    claim.what
                );
            }
        }
    }

    #[test]
    fn single_digit_stall_is_checked_as_an_inequality_on_every_workload() {
        let claim = find("single-digit");
        let good = evaluation(
            &["knn-a", "sssp"],
            vec![fig13(&[("knn-a", 20.0, 4.0), ("sssp", 30.0, 9.5)])],
        );
        let verdict = claim.check(&Ctx::new(&good));
        assert_eq!(verdict.held(), Some(true), "{verdict:?}");
        assert!(
            verdict.ours.contains("largest (d) 9.50%"),
            "{}",
            verdict.ours
        );
        assert_eq!(verdict.within(0.1), None, "a statement is never within 10%");
        let bad = evaluation(
            &["knn-a", "sssp"],
            vec![fig13(&[("knn-a", 20.0, 4.0), ("sssp", 30.0, 10.5)])],
        );
        let verdict = claim.check(&Ctx::new(&bad));
        assert_eq!(verdict.held(), Some(false));
        assert!(
            verdict.ours.contains("single-digit on 1 of 2"),
            "{}",
            verdict.ours
        );
        // Its direction: p100 at most p10 on every workload, which still holds.
        assert_eq!(verdict.direction, Some(true));
    }

    #[test]
    fn a_claim_whose_figure_did_not_run_is_not_run_rather_than_held() {
        let claim = find("single-digit");
        let verdict = claim.check(&Ctx::new(&evaluation(&["knn-a"], Vec::new())));
        assert!(!verdict.ran());
        assert_eq!(verdict.ours, "not run");
        assert_eq!(verdict.direction, None);
    }

    #[test]
    fn a_number_is_read_from_its_cell_and_compared_with_the_papers() {
        let claim = find("KNN (a): BS end-to-end");
        let mut table = Table::new("fig10", "", &["workload", "BS total"]);
        table.push(vec![Cell::text("knn-a"), Cell::Number(99.0)]);
        let verdict = claim.check(&Ctx::new(&evaluation(&["knn-a"], vec![table])));
        assert_eq!(verdict.ours, "99.00");
        assert_eq!(verdict.within(0.1), Some(true)); // 99 / 90.46 = 1.094
        assert_eq!(verdict.direction, Some(true)); // below RP
        let mut table = Table::new("fig10", "", &["workload", "BS total"]);
        table.push(vec![Cell::text("knn-a"), Cell::Number(101.0)]);
        let verdict = claim.check(&Ctx::new(&evaluation(&["knn-a"], vec![table])));
        assert_eq!(verdict.within(0.1), Some(false));
        assert_eq!(verdict.within(0.25), Some(true));
        assert_eq!(verdict.direction, Some(false)); // above RP: the other side
    }
}
