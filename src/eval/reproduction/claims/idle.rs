//! Section V-C: the CCM and host idle times of Figure 12, with the notes that quote today's
//! figures where ours differ.

use super::super::claim::{held, percent, share, time, Claim, Ctx};
use super::{
    each, every, label, note_knn_a_wave, rp_components, KNN_A, PAGERANK, SSB_1, SSB_2, SSSP,
};
use host_runtime::Mode;

// ----- V-C: idle times (Figure 12) -------------------------------------------------------------

fn fig12(c: &Ctx, workload: &str, column: &str) -> Option<f64> {
    c.cell("fig12", workload, column)
}

fn reduction(c: &Ctx, workload: &str, column: &str) -> Option<f64> {
    c.cell("fig12-reductions", workload, column)
}

pub(super) fn idle_claims() -> Vec<Claim> {
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

// ----- Notes: each quotes today's figures ------------------------------------------------------

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
