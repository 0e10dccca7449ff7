//! Every claim of the paper's Section V, in the paper's order: the numbers it gives and the
//! statements it makes (inequalities and words), each with its direction and, where ours has
//! differed, a note that quotes today's figures.
//!
//! Workloads are named by Table IV's annotation: (a)-(c) KNN, (d) SSSP, (e) PageRank, (f)
//! SSB Q1.1, (g) SSB Q1.2, (h) OPT-2.7B, (i) DLRM.

use super::claim::{held, per, percent, share, time, Claim, Ctx, Held};
use crate::eval::figures::{
    capacity_configs, figure11_config, figure11_label, scheduling_configs, streaming_factor_configs,
};
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
    claims.extend(setup_claims());
    claims.extend(runtime_claims());
    claims.extend(idle_claims());
    claims.extend(stall_claims());
    claims.extend(parameter_claims());
    claims
}

// ----- V-A: the workloads' characteristics (Figure 10's components) --------------------------

fn setup_claims() -> Vec<Claim> {
    vec![
        Claim::statement(
            "10",
            "OLAP (f), (g) and LLM (h): host processing is RP's largest component",
            "dominated by host-side execution",
            |c| {
                let shares = each(c, &[SSB_1, SSB_2, OPT], |w| rp_components(c, w))?;
                held(
                    shares.iter().all(|(_, [ccm, data, host])| host > ccm && host > data),
                    shares.iter().map(|(w, s)| components_text(w, *s)).collect::<Vec<_>>().join("; "),
                )
            },
        ),
        Claim::statement(
            "10",
            "DLRM (i): CCM processing is RP's largest component",
            "dominated by CCM-side computation",
            |c| {
                let [ccm, data, host] = rp_components(c, DLRM)?;
                held(ccm > data && ccm > host, components_text(DLRM, [ccm, data, host]))
            },
        ),
        Claim::statement(
            "10",
            "VectorDB (a)-(c): data movement is RP's smallest component",
            "data movement time is marginal",
            |c| {
                let shares = each(c, &[KNN_A, KNN_B, KNN_C], |w| rp_components(c, w))?;
                held(
                    shares.iter().all(|(_, [ccm, data, host])| data < ccm && data < host),
                    shares.iter().map(|(w, s)| components_text(w, *s)).collect::<Vec<_>>().join("; "),
                )
            },
        ),
        Claim::statement(
            "10",
            "Graph (d), (e): data movement is a larger share of RP than in any VectorDB workload (a)-(c)",
            "a large portion of data movement time",
            |c| {
                let graph = each(c, &[SSSP, PAGERANK], |w| c.fig10(w, "RP data movement"))?;
                let vector = each(c, &[KNN_A, KNN_B, KNN_C], |w| c.fig10(w, "RP data movement"))?;
                let least_graph = graph.iter().map(|(_, v)| *v).fold(f64::INFINITY, f64::min);
                let most_vector = vector.iter().map(|(_, v)| *v).fold(f64::NEG_INFINITY, f64::max);
                held(
                    least_graph > most_vector,
                    format!(
                        "{}; VectorDB at most {}",
                        graph
                            .iter()
                            .map(|(w, v)| format!("{} {}", label(w), percent(*v)))
                            .collect::<Vec<_>>()
                            .join(", "),
                        percent(most_vector)
                    ),
                )
            },
        ),
    ]
}

// ----- V-B: end-to-end runtime (Figures 10 and 11) --------------------------------------------

fn runtime_claims() -> Vec<Claim> {
    vec![
        Claim::number("10(a)", "KNN (a): BS end-to-end, % of RP", 90.46, |c| {
            c.fig10(KNN_A, "BS total")
        })
        .below("below RP (100%)", 100.0),
        Claim::statement(
            "10",
            "BS end-to-end below RP's on every workload",
            "BS shows a slightly lower value",
            |c| {
                let bs = every(c, |w| c.fig10(w, "BS total"))?;
                let (worst, value) = bs
                    .iter()
                    .copied()
                    .max_by(|a, b| a.1.total_cmp(&b.1))?;
                held(
                    bs.iter().all(|(_, v)| *v < 100.0),
                    format!(
                        "below on {} of {}; largest {} {}",
                        bs.iter().filter(|(_, v)| *v < 100.0).count(),
                        bs.len(),
                        label(worst),
                        percent(value)
                    ),
                )
            },
        ),
        Claim::number("10(a)", "KNN (a): AXLE (p1) end-to-end, % of RP", 63.41, |c| {
            c.fig10(KNN_A, "AXLE p1")
        })
        .direction("below BS (and RP)", |c, ours| {
            Some(ours? < c.fig10(KNN_A, "BS total")?.min(100.0))
        })
        .note(note_knn_a_wave),
        Claim::number(
            "10(a)",
            "KNN (a): AXLE_Interrupt end-to-end, % of RP",
            214.64,
            |c| c.fig10(KNN_A, "AXLE_Interrupt"),
        )
        .above("above RP (100%)", 100.0)
        .note(note_interrupt),
        Claim::statement(
            "10(a)-(d), (i)",
            "AXLE_Interrupt slower than RP on (a)-(d) and (i)",
            "a severe bottleneck for lightweight tasks",
            |c| {
                let irq = each(c, &[KNN_A, KNN_B, KNN_C, SSSP, DLRM], |w| {
                    c.fig10(w, "AXLE_Interrupt")
                })?;
                let (least, value) = irq.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1))?;
                held(
                    irq.iter().all(|(_, v)| *v > 100.0),
                    format!("smallest {} {}", label(least), percent(value)),
                )
            },
        )
        .direction("AXLE_Interrupt slower than AXLE (p1) on them", |c, _| {
            let pairs = each(c, &[KNN_A, KNN_B, KNN_C, SSSP, DLRM], |w| {
                Some((c.fig10(w, "AXLE_Interrupt")?, c.fig10(w, "AXLE p1")?))
            })?;
            Some(pairs.iter().all(|(_, (irq, p1))| irq > p1))
        })
        .note(note_interrupt),
        Claim::statement(
            "10(e)-(g)",
            "AXLE_Interrupt slower than AXLE (p1) on (e)-(g)",
            "still incurs higher overhead than AXLE with local polling",
            |c| {
                let pairs = each(c, &[PAGERANK, SSB_1, SSB_2], |w| {
                    Some((c.fig10(w, "AXLE_Interrupt")?, c.fig10(w, "AXLE p1")?))
                })?;
                held(
                    pairs.iter().all(|(_, (irq, p1))| irq > p1),
                    pairs
                        .iter()
                        .map(|(w, (irq, p1))| {
                            format!("{} {} vs {}", label(w), percent(*irq), percent(*p1))
                        })
                        .collect::<Vec<_>>()
                        .join("; "),
                )
            },
        ),
        Claim::statement(
            "10",
            "AXLE (p1) faster than RP and BS on every workload but (h)",
            "consistently reduces the end-to-end runtime for most workloads, except in Figure 10(h)",
            |c| {
                let values = every(c, |w| {
                    Some((c.fig10(w, "AXLE p1")?, c.fig10(w, "BS total")?))
                })?;
                let others: Vec<_> = values.iter().filter(|(w, _)| *w != OPT).collect();
                if others.is_empty() {
                    return None;
                }
                let missed: Vec<String> = others
                    .iter()
                    .filter(|(_, (p1, bs))| *p1 >= 100.0 || p1 >= bs)
                    .map(|(w, (p1, bs))| {
                        format!("{} AXLE {} vs BS {}", label(w), percent(*p1), percent(*bs))
                    })
                    .collect();
                let shown = if missed.is_empty() {
                    let slowest = others
                        .iter()
                        .map(|(w, (p1, bs))| (*w, p1 / bs.min(100.0)))
                        .max_by(|a, b| a.1.total_cmp(&b.1))?;
                    format!(
                        "faster on all {}; closest {} at {:.2}x the faster baseline",
                        others.len(),
                        label(slowest.0),
                        slowest.1
                    )
                } else {
                    format!("not faster on: {}", missed.join("; "))
                };
                held(missed.is_empty(), shown)
            },
        )
        .direction("AXLE (p1) below RP on most (more than half) of them", |c, _| {
            let values = every(c, |w| c.fig10(w, "AXLE p1"))?;
            let others: Vec<f64> = values
                .iter()
                .filter(|(w, _)| *w != OPT)
                .map(|(_, v)| *v)
                .collect();
            Some(2 * others.iter().filter(|v| **v < 100.0).count() > others.len())
        }),
        Claim::number(
            "10(e)",
            "PageRank: AXLE (p1) reduction against RP, %",
            50.14,
            |c| Some(100.0 - c.fig10(PAGERANK, "AXLE p1")?),
        )
        .above("a reduction (above 0)", 0.0)
        .note(note_pagerank_ccm),
        Claim::number(
            "10(e)",
            "PageRank: AXLE (p1) reduction against BS, %",
            48.88,
            |c| {
                Some(100.0 * (1.0 - c.fig10(PAGERANK, "AXLE p1")? / c.fig10(PAGERANK, "BS total")?))
            },
        )
        .above("a reduction (above 0)", 0.0)
        .note(note_pagerank_ccm),
        Claim::statement(
            "10(e)",
            "PageRank: the polling interval changes AXLE less than on KNN (b) (|p100 / p1 - 1| smaller)",
            "increasing the polling interval has little effect (in contrast to KNN (b))",
            |c| {
                let ratio = |w: &str| Some(c.fig10(w, "AXLE p100")? / c.fig10(w, "AXLE p1")?);
                let (pagerank, knn) = (ratio(PAGERANK)?, ratio(KNN_B)?);
                held(
                    (pagerank - 1.0).abs() < (knn - 1.0).abs(),
                    format!("(e) {pagerank:.3}, (b) {knn:.3}"),
                )
            },
        ),
        Claim::number("10(b)", "KNN (b): AXLE p100 / p1 end-to-end", 1.18, |c| {
            Some(c.fig10(KNN_B, "AXLE p100")? / c.fig10(KNN_B, "AXLE p1")?)
        })
        .above("p100 slower than p1 (above 1)", 1.0)
        .note(note_knn_b_interval),
        Claim::number("10(j)", "average reduction at p1 against RP, %", 30.21, |c| {
            c.fig10j("p1", "RP", "average")
        })
        .above("a reduction (above 0)", 0.0)
        .note(|c| note_average_reduction(c, false)),
        Claim::number("10(j)", "average reduction at p1 against BS, %", 26.22, |c| {
            c.fig10j("p1", "BS", "average")
        })
        .above("a reduction (above 0)", 0.0)
        .note(|c| note_average_reduction(c, true)),
        Claim::statement(
            "10(j)",
            "average reduction at p100 below p1's, against RP and against BS",
            "extending the interval to p100 diminishes the benefit",
            |c| {
                let rp = (c.fig10j("p1", "RP", "average")?, c.fig10j("p100", "RP", "average")?);
                let bs = (c.fig10j("p1", "BS", "average")?, c.fig10j("p100", "BS", "average")?);
                held(
                    rp.1 < rp.0 && bs.1 < bs.0,
                    format!(
                        "RP: p1 {}, p100 {}; BS: p1 {}, p100 {}",
                        percent(rp.0),
                        percent(rp.1),
                        percent(bs.0),
                        percent(bs.1)
                    ),
                )
            },
        ),
        Claim::statement(
            "10(j)",
            "average reduction at p100 above 0, against RP and against BS",
            "polling intervals of a few microseconds provide substantial improvements",
            |c| {
                let rp = c.fig10j("p100", "RP", "average")?;
                let bs = c.fig10j("p100", "BS", "average")?;
                held(
                    rp > 0.0 && bs > 0.0,
                    format!("RP {}, BS {}", percent(rp), percent(bs)),
                )
            },
        ),
        Claim::number("10(f)", "SSB Q1.1: BS CCM processing, % of RP", 22.24, |c| {
            c.fig10(SSB_1, "BS CCM")
        })
        .direction("below BS host processing (host-dominated)", |c, ours| {
            Some(ours? < c.fig10(SSB_1, "BS host")?)
        })
        .note(note_ssb_bs),
        Claim::number("10(f)", "SSB Q1.1: BS data movement, % of RP", 0.58, |c| {
            c.fig10(SSB_1, "BS data movement")
        })
        .direction("the smallest of BS's CCM, data movement and host", |c, ours| {
            let ours = ours?;
            Some(ours < c.fig10(SSB_1, "BS CCM")? && ours < c.fig10(SSB_1, "BS host")?)
        })
        .note(note_ssb_bs_data),
        Claim::number("10(f)", "SSB Q1.1: BS host processing, % of RP", 75.84, |c| {
            c.fig10(SSB_1, "BS host")
        })
        .direction("the largest of BS's CCM, data movement and host", |c, ours| {
            let ours = ours?;
            Some(ours > c.fig10(SSB_1, "BS CCM")? && ours > c.fig10(SSB_1, "BS data movement")?)
        })
        .note(note_ssb_bs),
        Claim::number("10(f)", "SSB Q1.1: BS end-to-end, % of RP", 98.66, |c| {
            c.fig10(SSB_1, "BS total")
        })
        .below("below RP (100%)", 100.0)
        .note(note_ssb_bs),
        Claim::number("10(f)", "SSB Q1.1: AXLE (p1) end-to-end, % of RP", 77.12, |c| {
            c.fig10(SSB_1, "AXLE p1")
        })
        .direction("below BS", |c, ours| Some(ours? < c.fig10(SSB_1, "BS total")?))
        .note(note_ssb_axle),
        Claim::statement(
            "10(h)",
            "OPT-2.7B (h) is where AXLE (p1) gains least: its % of RP is the largest of all workloads",
            "the performance improvement can be marginal (Figure 10(h))",
            |c| {
                let values = every(c, |w| c.fig10(w, "AXLE p1"))?;
                let opt = values.iter().find(|(w, _)| *w == OPT)?.1;
                let next = values
                    .iter()
                    .filter(|(w, _)| *w != OPT)
                    .copied()
                    .max_by(|a, b| a.1.total_cmp(&b.1));
                let shown = match next {
                    Some((w, v)) => format!(
                        "(h) {} of RP; next largest {} {}",
                        percent(opt),
                        label(w),
                        percent(v)
                    ),
                    None => format!("(h) {} of RP", percent(opt)),
                };
                held(next.is_none_or(|(_, v)| opt > v), shown)
            },
        )
        .direction("AXLE (p1) at or below RP on (h) (an improvement, however small)", |c, _| {
            Some(c.fig10(OPT, "AXLE p1")? <= 100.0)
        })
        .note(note_opt_stream),
        Claim::number(
            "11",
            "OPT-2.7B with fewer processing units: AXLE (p10), % of RP",
            75.99,
            |c| c.cell("fig11", &figure11_label(&figure11_config(c.config())), "AXLE p10"),
        )
        .below("below RP (100%)", 100.0)
        .note(note_figure11),
        Claim::statement(
            "11",
            "OPT-2.7B: AXLE (p10) gains more against RP on the reduced hardware than on Table III's",
            "making AXLE's overlap more effective",
            |c| {
                let reduced = c.cell("fig11", &figure11_label(&figure11_config(c.config())), "AXLE p10")?;
                let full = c.cell("fig11", &figure11_label(c.config()), "AXLE p10")?;
                held(
                    reduced < full,
                    format!("{} reduced, {} Table III (% of RP)", percent(reduced), percent(full)),
                )
            },
        )
        .note(note_figure11),
    ]
}

// ----- V-C: idle times (Figure 12) -------------------------------------------------------------

fn fig12(c: &Ctx, workload: &str, column: &str) -> Option<f64> {
    c.cell("fig12", workload, column)
}

fn reduction(c: &Ctx, workload: &str, column: &str) -> Option<f64> {
    c.cell("fig12-reductions", workload, column)
}

fn idle_claims() -> Vec<Claim> {
    let mut claims = vec![
        Claim::number("12(f)", "SSB Q1.1: BS CCM idle, % of RP", 77.01, |c| {
            fig12(c, SSB_1, "BS CCM idle")
        })
        .direction("above BS's host idle", |c, ours| {
            Some(ours? > fig12(c, SSB_1, "BS host idle")?)
        })
        .note(note_bs_idle),
        Claim::number("12(f)", "SSB Q1.1: BS host idle, % of RP", 22.99, |c| {
            fig12(c, SSB_1, "BS host idle")
        })
        .direction("below BS's CCM idle", |c, ours| {
            Some(ours? < fig12(c, SSB_1, "BS CCM idle")?)
        })
        .note(note_bs_idle),
        Claim::statement(
            "12(f)",
            "SSB Q1.1: BS CCM idle matches BS data movement + host processing of Figure 10(f), within a tenth of the idle time",
            "closely matches the sum of data movement and host runtime",
            |c| {
                let idle = fig12(c, SSB_1, "BS CCM idle")?;
                let sum = c.fig10(SSB_1, "BS data movement")? + c.fig10(SSB_1, "BS host")?;
                held(
                    (idle - sum).abs() <= 0.1 * idle,
                    format!("{} vs {}", percent(idle), percent(sum)),
                )
            },
        )
        .note(note_bs_idle),
        Claim::statement(
            "12(f)",
            "SSB Q1.1: BS host idle matches BS CCM processing + data movement of Figure 10(f), within a tenth of the idle time",
            "aligns with the combined CCM runtime and data movement time",
            |c| {
                let idle = fig12(c, SSB_1, "BS host idle")?;
                let sum = c.fig10(SSB_1, "BS CCM")? + c.fig10(SSB_1, "BS data movement")?;
                held(
                    (idle - sum).abs() <= 0.1 * idle,
                    format!("{} vs {}", percent(idle), percent(sum)),
                )
            },
        )
        .note(note_bs_idle),
        Claim::number("12(a)", "KNN (a): AXLE CCM idle, % of RP", 5.64, |c| {
            fig12(c, KNN_A, "AXLE CCM idle")
        })
        .direction("below RP's CCM idle", |c, ours| {
            Some(ours? < fig12(c, KNN_A, "RP CCM idle")?)
        })
        .note(note_knn_a_idle),
        Claim::number("12(a)", "KNN (a): CCM idle reduction against RP, x", 6.09, |c| {
            reduction(c, KNN_A, "CCM idle vs RP")
        })
        .above("a reduction (above 1x)", 1.0)
        .note(note_knn_a_idle),
        Claim::statement(
            "12(a)",
            "KNN (a): AXLE's host idle at most half of RP's (reduction at least 2x)",
            "the host idle time is also halved relative to RP",
            |c| {
                let value = reduction(c, KNN_A, "host idle vs RP")?;
                held(value >= 2.0, format!("{value:.2}x"))
            },
        )
        .direction("a reduction (above 1x)", |c, _| {
            Some(reduction(c, KNN_A, "host idle vs RP")? > 1.0)
        })
        .note(note_knn_a_idle),
        Claim::number("12(a)", "KNN (a): AXLE host idle, % of RP", 32.36, |c| {
            fig12(c, KNN_A, "AXLE host idle")
        })
        .direction("below RP's host idle", |c, ours| {
            Some(ours? < fig12(c, KNN_A, "RP host idle")?)
        })
        .note(note_knn_a_idle),
        Claim::statement(
            "12(d), (e)",
            "Graph (d), (e): AXLE's CCM and host idle both below RP's",
            "both idle times are greatly reduced relative to RP",
            |c| {
                let values = each(c, &[SSSP, PAGERANK], |w| {
                    Some((reduction(c, w, "CCM idle vs RP")?, reduction(c, w, "host idle vs RP")?))
                })?;
                held(
                    values.iter().all(|(_, (ccm, host))| *ccm > 1.0 && *host > 1.0),
                    values
                        .iter()
                        .map(|(w, (ccm, host))| {
                            format!("{} CCM {ccm:.2}x, host {host:.2}x", label(w))
                        })
                        .collect::<Vec<_>>()
                        .join("; "),
                )
            },
        )
        .note(note_sssp_idle),
        Claim::number("12(d)", "SSSP: CCM idle reduction against RP, x", 1.69, |c| {
            reduction(c, SSSP, "CCM idle vs RP")
        })
        .above("a reduction (above 1x)", 1.0)
        .note(note_sssp_idle),
        Claim::number("12(d)", "SSSP: host idle reduction against RP, x", 4.28, |c| {
            reduction(c, SSSP, "host idle vs RP")
        })
        .above("a reduction (above 1x)", 1.0)
        .note(note_sssp_idle),
        Claim::statement(
            "12(a), (f), (g)",
            "the trend reverses: AXLE's CCM idle below its host idle on (a); its host idle below its CCM idle on (f) and (g)",
            "when host processing dominates, as in the OLAP case, the trend reverses",
            |c| {
                let values = each(c, &[KNN_A, SSB_1, SSB_2], |w| {
                    Some((fig12(c, w, "AXLE CCM idle")?, fig12(c, w, "AXLE host idle")?))
                })?;
                held(
                    values.iter().all(|(w, (ccm, host))| {
                        if *w == KNN_A {
                            ccm < host
                        } else {
                            host < ccm
                        }
                    }),
                    values
                        .iter()
                        .map(|(w, (ccm, host))| {
                            format!("{} CCM {}, host {}", label(w), percent(*ccm), percent(*host))
                        })
                        .collect::<Vec<_>>()
                        .join("; "),
                )
            },
        ),
        Claim::number("12(g)", "SSB Q1.2: CCM idle reduction against RP, x", 2.49, |c| {
            reduction(c, SSB_2, "CCM idle vs RP")
        })
        .above("a reduction (above 1x)", 1.0)
        .note(note_ssb_q12_idle),
        Claim::number("12(g)", "SSB Q1.2: host idle reduction against RP, x", 5.76, |c| {
            reduction(c, SSB_2, "host idle vs RP")
        })
        .above("a reduction (above 1x)", 1.0)
        .note(note_ssb_q12_idle),
        Claim::number("12(g)", "SSB Q1.2: AXLE host idle, % of RP", 6.59, |c| {
            fig12(c, SSB_2, "AXLE host idle")
        })
        .direction("below RP's host idle", |c, ours| {
            Some(ours? < fig12(c, SSB_2, "RP host idle")?)
        })
        .note(note_ssb_q12_idle),
    ];
    for (what, paper, column) in [
        (
            "average CCM idle reduction against RP, x",
            13.99,
            "CCM idle vs RP",
        ),
        (
            "average CCM idle reduction against BS, x",
            13.74,
            "CCM idle vs BS",
        ),
        (
            "average host idle reduction against RP, x",
            3.93,
            "host idle vs RP",
        ),
        (
            "average host idle reduction against BS, x",
            3.79,
            "host idle vs BS",
        ),
    ] {
        claims.push(
            Claim::number("12", what, paper, move |c| reduction(c, "average", column))
                .above("a reduction (above 1x)", 1.0)
                .note(move |c| note_average_idle(c, column)),
        );
    }
    claims
}

// ----- V-D: host core stall (Figure 13) --------------------------------------------------------

fn fig13(c: &Ctx, workload: &str, column: &str) -> Option<f64> {
    c.cell("fig13", workload, column)
}

/// "AXLE (`column`) below `baseline` on every workload", shown with the exceptions.
fn stall_below(c: &Ctx, column: &str, baseline: &str) -> Option<Held> {
    let values = every(c, |w| Some((fig13(c, w, column)?, fig13(c, w, baseline)?)))?;
    let missed: Vec<String> = values
        .iter()
        .filter(|(_, (axle, base))| axle >= base)
        .map(|(w, (axle, base))| format!("{} {} vs {}", label(w), percent(*axle), percent(*base)))
        .collect();
    let shown = if missed.is_empty() {
        let (w, ratio) = values
            .iter()
            .map(|(w, (axle, base))| (*w, axle / base))
            .max_by(|a, b| a.1.total_cmp(&b.1))?;
        format!(
            "below on all {}; closest {} at {ratio:.2}x",
            values.len(),
            label(w)
        )
    } else {
        format!("not below on: {}", missed.join("; "))
    };
    held(missed.is_empty(), shown)
}

fn stall_claims() -> Vec<Claim> {
    vec![
        Claim::number(
            "13(e)",
            "PageRank: RP host core stall, % of its runtime",
            65.99,
            |c| fig13(c, PAGERANK, "RP"),
        )
        .direction("above AXLE (p10)'s", |c, ours| {
            Some(ours? > fig13(c, PAGERANK, "AXLE p10")?)
        })
        .note(note_rp_stall),
        Claim::number(
            "13(e)",
            "PageRank: BS host core stall, % of its runtime",
            97.83,
            |c| fig13(c, PAGERANK, "BS"),
        )
        .direction("above AXLE (p10)'s", |c, ours| {
            Some(ours? > fig13(c, PAGERANK, "AXLE p10")?)
        }),
        Claim::number(
            "13(e)",
            "PageRank: AXLE (p10) host core stall, % of its runtime",
            30.71,
            |c| fig13(c, PAGERANK, "AXLE p10"),
        )
        .direction("below RP's and BS's", |c, ours| {
            let ours = ours?;
            Some(ours < fig13(c, PAGERANK, "RP")? && ours < fig13(c, PAGERANK, "BS")?)
        })
        .note(|c| note_axle_stall(c, PAGERANK)),
        Claim::number(
            "13(e)",
            "PageRank: stall reduction of AXLE (p10) against BS, x",
            3.19,
            |c| Some(fig13(c, PAGERANK, "BS")? / fig13(c, PAGERANK, "AXLE p10")?),
        )
        .above("a reduction (above 1x)", 1.0)
        .note(|c| note_axle_stall(c, PAGERANK)),
        Claim::statement(
            "13",
            "AXLE (p10) host core stall below RP's on every workload",
            "minimizing host core stall time across all workloads",
            |c| stall_below(c, "AXLE p10", "RP"),
        ),
        Claim::statement(
            "13",
            "AXLE (p10) host core stall below BS's on every workload",
            "significantly reduces host core stall time compared to the baselines",
            |c| stall_below(c, "AXLE p10", "BS"),
        ),
        Claim::statement(
            "13",
            "AXLE (p100) host core stall single-digit (below 10%) on every workload",
            "a single-digit ratio of host core stall time",
            |c| {
                let values = every(c, |w| fig13(c, w, "AXLE p100"))?;
                let (w, largest) = values.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
                held(
                    largest < 10.0,
                    format!(
                        "largest {} {}; single-digit on {} of {}",
                        label(w),
                        percent(largest),
                        values.iter().filter(|(_, v)| *v < 10.0).count(),
                        values.len()
                    ),
                )
            },
        )
        .direction("p100's stall at most p10's on every workload", |c, _| {
            let values = every(c, |w| {
                Some((fig13(c, w, "AXLE p100")?, fig13(c, w, "AXLE p10")?))
            })?;
            Some(values.iter().all(|(_, (p100, p10))| p100 <= p10))
        })
        .note(note_single_digit),
        Claim::statement(
            "13",
            "AXLE (p100) host core stall at most p10's on every workload",
            "this configuration maximizes the reduction of host core stall time",
            stall_below_or_equal,
        ),
    ]
}

fn stall_below_or_equal(c: &Ctx) -> Option<Held> {
    let values = every(c, |w| {
        Some((fig13(c, w, "AXLE p100")?, fig13(c, w, "AXLE p10")?))
    })?;
    let missed: Vec<String> = values
        .iter()
        .filter(|(_, (p100, p10))| p100 > p10)
        .map(|(w, (p100, p10))| {
            format!(
                "{} p100 {} vs p10 {}",
                label(w),
                percent(*p100),
                percent(*p10)
            )
        })
        .collect();
    let shown = if missed.is_empty() {
        format!("on all {}", values.len())
    } else {
        format!("not on: {}", missed.join("; "))
    };
    held(missed.is_empty(), shown)
}

// ----- V-E: streaming factor, OoO streaming, flow control (Figures 14 to 16) -------------------

fn parameter_claims() -> Vec<Claim> {
    let mut claims = vec![
        Claim::statement(
            "14(a)",
            "KNN (a): AXLE at SF64 slower than BS",
            "slightly slower than BS",
            |c| {
                let sf64 = fig14(c, KNN_A, "SF64")?;
                let bs = fig14(c, KNN_A, "BS")?;
                held(sf64 > bs, format!("SF64 {sf64:.2}, BS {bs:.2} (x SF1)"))
            },
        )
        .direction("SF64 slower than SF1", |c, _| Some(fig14(c, KNN_A, "SF64")? > 1.0))
        .note(note_sf64),
        Claim::number("14(d)", "SSSP: SF2-SF32 / SF1 (mean)", 0.93, |c| {
            let values: Option<Vec<f64>> = ["SF2", "SF4", "SF8", "SF16", "SF32"]
                .iter()
                .map(|column| fig14(c, SSSP, column))
                .collect();
            let values = values?;
            Some(values.iter().sum::<f64>() / values.len() as f64)
        })
        .below("faster than SF1 (below 1)", 1.0)
        .note(note_sssp_sf),
        Claim::number("14(i)", "DLRM: SF_25% / SF1", 1.04, |c| fig14(c, DLRM, "SF_25%"))
            .direction("no faster than SF1 (at least 1)", |_, ours| Some(ours? >= 1.0))
            .note(note_dlrm_sf),
        Claim::statement(
            "14(d)",
            "SSSP: AXLE at SF_100% slower than RP and BS",
            "excessive SF values such as SF_50% and SF_100% can degrade performance, even relative to the baselines",
            |c| {
                let sf = fig14(c, SSSP, "SF_100%")?;
                let rp = fig14(c, SSSP, "RP")?;
                let bs = fig14(c, SSSP, "BS")?;
                held(
                    sf > rp && sf > bs,
                    format!("SF_100% {sf:.2}, RP {rp:.2}, BS {bs:.2} (x SF1)"),
                )
            },
        )
        .direction("SF_100% slower than SF1", |c, _| Some(fig14(c, SSSP, "SF_100%")? > 1.0)),
    ];
    for (figure, what, paper, workload) in [
        ("15(d)", "SSSP: RR without OoO streaming / with", 1.74, SSSP),
        (
            "15(e)",
            "PageRank: RR without OoO streaming / with",
            1.38,
            PAGERANK,
        ),
        ("15(i)", "DLRM: RR without OoO streaming / with", 1.41, DLRM),
    ] {
        claims.push(
            Claim::number(figure, what, paper, move |c| {
                c.cell("fig15", workload, "RR in-order")
            })
            .above("in-order slower than out-of-order (above 1)", 1.0)
            .note(move |c| note_ooo(c, workload)),
        );
    }
    claims.extend([
        Claim::statement(
            "15",
            "FIFO: turning OoO streaming off changes the runtime less than under RR, on (d), (e) and (i)",
            "with FIFO scheduling ... enabling or disabling OoO streaming has little impact",
            |c| {
                let values = each(c, &[SSSP, PAGERANK, DLRM], |w| {
                    Some((c.cell("fig15", w, "FIFO in-order")?, c.cell("fig15", w, "RR in-order")?))
                })?;
                held(
                    values
                        .iter()
                        .all(|(_, (fifo, rr))| (fifo - 1.0).abs() < (rr - 1.0).abs()),
                    values
                        .iter()
                        .map(|(w, (fifo, rr))| format!("{} FIFO {fifo:.2}, RR {rr:.2}", label(w)))
                        .collect::<Vec<_>>()
                        .join("; "),
                )
            },
        ),
        Claim::number(
            "16(b)",
            "SSSP: back-pressure at 12.5% slot capacity, % of the run",
            50.8,
            |c| c.cell("fig16b", SSSP, "12.5%"),
        )
        .above("some back-pressure (above 0)", 0.0)
        .note(note_sssp_backpressure),
        Claim::statement(
            "16(a)",
            "SSSP: runtime at 12.5% slot capacity below 100%'s",
            "the end-to-end runtime is rather slightly reduced",
            |c| {
                let value = c.cell("fig16a", SSSP, "12.5%")?;
                held(value < 1.0, format!("{value:.4} (x 100%)"))
            },
        )
        .note(note_sssp_backpressure),
        Claim::statement(
            "16(a)",
            "OPT-2.7B deadlocks at 12.5% slot capacity",
            "deadlock",
            |c| {
                if !c.has(OPT) {
                    return None;
                }
                match c.text("fig16a", OPT, "12.5%") {
                    Some(text) => held(text == "deadlock", text),
                    None => {
                        let value = c.cell("fig16a", OPT, "12.5%")?;
                        held(false, format!("ran: {value:.4} (x 100%)"))
                    }
                }
            },
        )
        .direction("slower at 12.5% than at 100%, or deadlocked", |c, _| {
            if c.text("fig16a", OPT, "12.5%") == Some("deadlock") {
                return Some(true);
            }
            Some(c.cell("fig16a", OPT, "12.5%")? > 1.0)
        })
        .note(note_opt_deadlock),
        Claim::statement(
            "16",
            "every workload but (d) and (h): no slower at 50%, 25% and 12.5% slot capacity than at 100%, and no back-pressure",
            "workloads whose performance matches that with abundant DMA slot capacity are omitted, where they incur zero back-pressure cycles",
            no_degradation,
        ),
    ]);
    claims
}

/// Figure 16's statement on the workloads it omits.
fn no_degradation(c: &Ctx) -> Option<Held> {
    let table = c.table("fig16a")?;
    let capacities: Vec<&str> = table.columns.iter().skip(2).map(String::as_str).collect();
    let others: Vec<&str> = c.workloads().filter(|w| *w != SSSP && *w != OPT).collect();
    if others.is_empty() {
        return None;
    }
    let mut slowest: Option<(&str, &str, f64)> = None;
    let mut pressure: Option<(&str, &str, f64)> = None;
    let mut deadlocks = Vec::new();
    for w in &others {
        for capacity in &capacities {
            if c.text("fig16a", w, capacity) == Some("deadlock") {
                deadlocks.push(format!("{} at {capacity}", label(w)));
                continue;
            }
            let runtime = c.cell("fig16a", w, capacity)?;
            let backpressure = c.cell("fig16b", w, capacity)?;
            if slowest.is_none_or(|(_, _, v)| runtime > v) {
                slowest = Some((w, capacity, runtime));
            }
            if pressure.is_none_or(|(_, _, v)| backpressure > v) {
                pressure = Some((w, capacity, backpressure));
            }
        }
    }
    let (sw, sc, runtime) = slowest?;
    let (pw, pc, backpressure) = pressure?;
    let mut shown = format!(
        "largest runtime {runtime:.4} x 100% ({} at {sc}); {}",
        label(sw),
        if backpressure > 0.0 {
            format!(
                "largest back-pressure {} ({} at {pc})",
                percent(backpressure),
                label(pw)
            )
        } else {
            "no back-pressure".to_owned()
        }
    );
    if !deadlocks.is_empty() {
        shown.push_str(&format!("; deadlock: {}", deadlocks.join(", ")));
    }
    held(
        deadlocks.is_empty() && runtime <= 1.0 && backpressure == 0.0,
        shown,
    )
}

// ----- Notes: each quotes today's figures ------------------------------------------------------

fn note_interrupt(c: &Ctx) -> Option<String> {
    let m = c.base(KNN_A, Mode::AxleIrq)?;
    let handling = c.config().device.interrupt_ns;
    Some(format!(
        "AXLE_Interrupt on (a): {} interrupts for {} DMA requests in {} launch(es), {} each: {} if they were serialised, against an end-to-end of {} (the handling of one request overlaps the requests after it).",
        m.polls,
        m.dma_requests,
        m.launches,
        time(handling),
        time(handling.saturating_mul(m.polls)),
        time(m.end_to_end_ns)
    ))
}

fn note_pagerank_ccm(c: &Ctx) -> Option<String> {
    let rp = c.base(PAGERANK, Mode::Rp)?;
    let axle = c.axle(PAGERANK, 50)?;
    let ccm = share(rp.ccm_busy_ns, rp.end_to_end_ns);
    let verdict = if ccm >= 50.0 {
        "CCM-bound"
    } else {
        "Not CCM-bound"
    };
    Some(format!(
        "{verdict}: CCM busy is {} of RP's runtime (data movement {}, host {}); AXLE (p1)'s own CCM busy is {} of RP's runtime, a floor under its end-to-end.",
        percent(ccm),
        percent(share(rp.data_movement_ns, rp.end_to_end_ns)),
        percent(share(rp.host_busy_ns, rp.end_to_end_ns)),
        percent(share(axle.ccm_busy_ns, rp.end_to_end_ns))
    ))
}

fn note_knn_b_interval(c: &Ctx) -> Option<String> {
    let p1 = c.axle(KNN_B, 50)?;
    let p100 = c.axle(KNN_B, 5000)?;
    let difference = p100.end_to_end_ns.saturating_sub(p1.end_to_end_ns);
    Some(format!(
        "(b): AXLE p1 {}, p100 {}: {} longer, {:.1} intervals of 5 µs; {} host tasks in {} launch(es), {} polls at p1.",
        time(p1.end_to_end_ns),
        time(p100.end_to_end_ns),
        time(difference),
        difference as f64 / 5000.0,
        p1.host_tasks,
        p1.launches,
        p1.polls
    ))
}

fn note_average_reduction(c: &Ctx, against_bs: bool) -> Option<String> {
    let mut values = every(c, |w| {
        let p1 = c.fig10(w, "AXLE p1")?;
        Some(if against_bs {
            100.0 * (1.0 - p1 / c.fig10(w, "BS total")?)
        } else {
            100.0 - p1
        })
    })?;
    values.sort_by(|a, b| a.1.total_cmp(&b.1));
    let smallest: Vec<String> = values
        .iter()
        .take(2)
        .map(|(w, v)| format!("{} {}", label(w), percent(*v)))
        .collect();
    let (w, largest) = values.last()?;
    Some(format!(
        "Smallest reductions at p1: {}; largest {} {}.",
        smallest.join(", "),
        label(w),
        percent(*largest)
    ))
}

fn note_ssb_bs(c: &Ctx) -> Option<String> {
    Some(format!(
        "BS on (f), % of RP: CCM {}, data movement {}, host {}, overhead {}; RP's overhead {}.",
        percent(c.fig10(SSB_1, "BS CCM")?),
        percent(c.fig10(SSB_1, "BS data movement")?),
        percent(c.fig10(SSB_1, "BS host")?),
        percent(c.fig10(SSB_1, "BS overhead")?),
        percent(c.fig10(SSB_1, "RP overhead")?)
    ))
}

fn note_ssb_bs_data(c: &Ctx) -> Option<String> {
    let bs = c.base(SSB_1, Mode::Bs)?;
    let rp = c.base(SSB_1, Mode::Rp)?;
    Some(format!(
        "BS data movement on (f): {} ({} of RP), the result loaded by one core's CXL.mem loads with {} lines in flight.",
        time(bs.data_movement_ns),
        percent(share(bs.data_movement_ns, rp.end_to_end_ns)),
        c.config().host.load_outstanding
    ))
}

fn note_ssb_axle(c: &Ctx) -> Option<String> {
    let axle = c.axle(SSB_1, 50)?;
    let rp = c.base(SSB_1, Mode::Rp)?;
    Some(format!(
        "AXLE (p1) on (f): host busy {} and CCM busy {} of RP's runtime; the longer one is a floor under its end-to-end.",
        percent(share(axle.host_busy_ns, rp.end_to_end_ns)),
        percent(share(axle.ccm_busy_ns, rp.end_to_end_ns))
    ))
}

fn note_opt_stream(c: &Ctx) -> Option<String> {
    let axle = c.axle(OPT, 50)?;
    let rp = c.base(OPT, Mode::Rp)?;
    let slot = u64::from(c.config().axle.slot_size);
    Some(format!(
        "(h): per layer AXLE streams {:.0} payloads of {slot} B ({:.0} KB) for {:.0} MLP tasks, each needing all of them; data movement AXLE (p1) {}, RP {}.",
        per(axle.payloads, axle.launches),
        per(axle.payloads * slot, axle.launches) / 1024.0,
        per(rp.host_tasks, rp.launches),
        time(axle.data_movement_ns),
        time(rp.data_movement_ns)
    ))
}

fn note_figure11(c: &Ctx) -> Option<String> {
    let reduced = figure11_config(c.config());
    let rp = c.run(OPT, Mode::Rp, &reduced)?;
    let tasks = per(rp.host_tasks, rp.launches);
    let uthreads = u64::from(reduced.host.host_units) * u64::from(reduced.host.host_uthreads);
    let concurrent = if tasks <= uthreads as f64 {
        "all concurrent"
    } else {
        "not all concurrent"
    };
    Some(format!(
        "Reduced hardware: {tasks:.0} MLP tasks per layer on {} host units x {} µthreads = {uthreads} µthreads ({concurrent}); AXLE (p10) {} of RP there, {} on Table III's hardware.",
        reduced.host.host_units,
        reduced.host.host_uthreads,
        percent(c.cell("fig11", &figure11_label(&reduced), "AXLE p10")?),
        percent(c.cell("fig11", &figure11_label(c.config()), "AXLE p10")?)
    ))
}

fn note_bs_idle(c: &Ctx) -> Option<String> {
    Some(format!(
        "BS on (f), % of RP: CCM idle {} against data movement {} + host {} + overhead {}; host idle {} against CCM {} + data movement {} + overhead {}.",
        percent(fig12(c, SSB_1, "BS CCM idle")?),
        percent(c.fig10(SSB_1, "BS data movement")?),
        percent(c.fig10(SSB_1, "BS host")?),
        percent(c.fig10(SSB_1, "BS overhead")?),
        percent(fig12(c, SSB_1, "BS host idle")?),
        percent(c.fig10(SSB_1, "BS CCM")?),
        percent(c.fig10(SSB_1, "BS data movement")?),
        percent(c.fig10(SSB_1, "BS overhead")?)
    ))
}

fn note_knn_a_idle(c: &Ctx) -> Option<String> {
    let axle = c.axle(KNN_A, 500)?;
    let rp = c.base(KNN_A, Mode::Rp)?;
    Some(format!(
        "AXLE (p10) on (a), % of its own runtime: CCM busy {}, host busy {}; RP's: CCM busy {}, host busy {}. {}",
        percent(share(axle.ccm_busy_ns, axle.end_to_end_ns)),
        percent(share(axle.host_busy_ns, axle.end_to_end_ns)),
        percent(share(rp.ccm_busy_ns, rp.end_to_end_ns)),
        percent(share(rp.host_busy_ns, rp.end_to_end_ns)),
        note_knn_a_wave(c)?
    ))
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

fn note_sssp_idle(c: &Ctx) -> Option<String> {
    let rp = c.base(SSSP, Mode::Rp)?;
    let axle = c.axle(SSSP, 500)?;
    Some(format!(
        "(d): {} launches, each issued only after the host has compared the previous one's distances (the convergence check); per launch RP {}, AXLE (p10) {}; CCM idle per launch RP {}, AXLE {}.",
        rp.launches,
        time(rp.end_to_end_ns / rp.launches.max(1)),
        time(axle.end_to_end_ns / axle.launches.max(1)),
        time(rp.ccm_idle_ns / rp.launches.max(1)),
        time(axle.ccm_idle_ns / axle.launches.max(1))
    ))
}

fn note_ssb_q12_idle(c: &Ctx) -> Option<String> {
    let [ccm, data, host] = rp_components(c, SSB_2)?;
    Some(format!(
        "(g): RP CCM {}, data movement {}, host {}; AXLE (p10) CCM idle {}, host idle {} (% of RP).",
        percent(ccm),
        percent(data),
        percent(host),
        percent(fig12(c, SSB_2, "AXLE CCM idle")?),
        percent(fig12(c, SSB_2, "AXLE host idle")?)
    ))
}

fn note_average_idle(c: &Ctx, column: &str) -> Option<String> {
    let values = every(c, |w| reduction(c, w, column))?;
    let axle_column = if column.starts_with("CCM") {
        "AXLE CCM idle"
    } else {
        "AXLE host idle"
    };
    let (least_w, least) = every(c, |w| fig12(c, w, axle_column))?
        .into_iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    Some(format!(
        "Per workload: {}; AXLE's smallest {} is {} of RP ({}).",
        values
            .iter()
            .map(|(w, v)| format!("{} {v:.2}x", label(w)))
            .collect::<Vec<_>>()
            .join(", "),
        axle_column.trim_start_matches("AXLE "),
        percent(least),
        label(least_w)
    ))
}

fn note_rp_stall(c: &Ctx) -> Option<String> {
    let rp = c.base(PAGERANK, Mode::Rp)?;
    Some(format!(
        "RP on (e): stall {} of the run, data movement (CXL.mem result loads and input stores) {}; the rest of the stall is remote polls every {} ({} CXL.io round trip each).",
        percent(share(rp.host_stall_ns, rp.end_to_end_ns)),
        percent(share(rp.data_movement_ns, rp.end_to_end_ns)),
        time(c.config().host.remote_poll_interval_ns),
        time(c.config().device.cxl_io_round_trip_ns)
    ))
}

fn note_axle_stall(c: &Ctx, workload: &str) -> Option<String> {
    let axle = c.axle(workload, 500)?;
    Some(format!(
        "AXLE (p10) on {}: {} polls, each one uncached load of the metadata tail ({}) plus one ready-pool push when it found records, however many (the {} records, {:.0} per launch, are read by the tasks that use them: host work); stall {} of {} ({}).",
        label(workload),
        axle.polls,
        time(c.config().host.uncached_load_ns),
        axle.payloads,
        per(axle.payloads, axle.launches),
        time(axle.host_stall_ns),
        time(axle.end_to_end_ns),
        percent(share(axle.host_stall_ns, axle.end_to_end_ns))
    ))
}

fn note_single_digit(c: &Ctx) -> Option<String> {
    let values = every(c, |w| {
        let m = c.axle(w, 5000)?;
        Some((
            fig13(c, w, "AXLE p100")?,
            per(m.polls, m.end_to_end_ns / 1000),
            share(m.input_store_ns, m.end_to_end_ns),
        ))
    })?;
    Some(format!(
        "AXLE (p100) stall, with polls per µs and the part that is the control thread storing launch inputs: {}.",
        values
            .iter()
            .map(|(w, (stall, rate, inputs))| {
                format!(
                    "{} {} ({rate:.2}; inputs {})",
                    label(w),
                    percent(*stall),
                    percent(*inputs)
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

fn note_sf64(c: &Ctx) -> Option<String> {
    let sf1 = sf_run(c, KNN_A, "SF1")?;
    let sf64 = sf_run(c, KNN_A, "SF64")?;
    let bs = c.base(KNN_A, Mode::Bs)?;
    Some(format!(
        "(a): SF1 {} with {} DMA requests, SF64 {} with {}, BS {}; BS data movement {}, AXLE SF64's {}.",
        time(sf1.end_to_end_ns),
        sf1.dma_requests,
        time(sf64.end_to_end_ns),
        sf64.dma_requests,
        time(bs.end_to_end_ns),
        time(bs.data_movement_ns),
        time(sf64.data_movement_ns)
    ))
}

fn note_sssp_sf(c: &Ctx) -> Option<String> {
    let sf1 = sf_run(c, SSSP, "SF1")?;
    let sf32 = sf_run(c, SSSP, "SF32")?;
    let per_request =
        |m: &host_runtime::RunMetrics| m.payloads as f64 / m.dma_requests.max(1) as f64;
    Some(format!(
        "(d): SF1 makes {} DMA requests ({:.1} payloads each: while the engine's {} channels are busy, results join the open batch), SF32 {} ({:.1} each), at {} of preparation each; data movement SF1 {}, SF32 {}.",
        sf1.dma_requests,
        per_request(sf1),
        c.config().device.dma_channels,
        sf32.dma_requests,
        per_request(sf32),
        time(c.config().device.dma_preparation_ns),
        time(sf1.data_movement_ns),
        time(sf32.data_movement_ns)
    ))
}

fn note_dlrm_sf(c: &Ctx) -> Option<String> {
    Some(format!(
        "(i) x SF1: SF_25% {:.2}, SF_50% {:.2}, SF_100% {:.2}.",
        fig14(c, DLRM, "SF_25%")?,
        fig14(c, DLRM, "SF_50%")?,
        fig14(c, DLRM, "SF_100%")?
    ))
}

fn note_ooo(c: &Ctx, workload: &str) -> Option<String> {
    let ooo = scheduling_run(c, workload, "RR OoO")?;
    let in_order = scheduling_run(c, workload, "RR in-order")?;
    Some(format!(
        "{} under RR: the largest consumption gap (slots held behind an unconsumed one) is {} B with OoO streaming and {} B in order; back-pressure {} in order; FIFO in-order {:.2}x.",
        label(workload),
        ooo.max_gap_bytes,
        in_order.max_gap_bytes,
        time(in_order.backpressure_ns),
        c.cell("fig15", workload, "FIFO in-order")?
    ))
}

fn note_sssp_backpressure(c: &Ctx) -> Option<String> {
    let config = capacity(c, "12.5%")?;
    let full = c.base(SSSP, Mode::Axle)?;
    let small = c.run(SSSP, Mode::Axle, &config)?;
    Some(format!(
        "(d) at 12.5%: a ring of {} slots of {} B; a launch streams {:.0} payloads on average; back-pressure {} of the run, {} head reads.",
        config.axle.slots,
        config.axle.slot_size,
        per(full.payloads, full.launches),
        percent(share(small.backpressure_ns, small.end_to_end_ns)),
        small.head_reads
    ))
}

fn note_opt_deadlock(c: &Ctx) -> Option<String> {
    let config = capacity(c, "12.5%")?;
    let full = c.base(OPT, Mode::Axle)?;
    Some(format!(
        "(h) at 12.5%: a ring of {} slots; a layer streams {:.0} payloads, which every MLP task needs.",
        config.axle.slots,
        per(full.payloads, full.launches)
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
