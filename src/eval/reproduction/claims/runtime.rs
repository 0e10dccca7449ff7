//! Sections V-A and V-B: what Figure 10's components say about each workload (which part of
//! RP's runtime dominates), and the end-to-end runtimes of Figures 10 and 11, with the notes
//! that quote today's figures where ours differ.

use super::super::claim::{held, per, percent, share, time, Claim, Ctx};
use super::{
    components_text, each, every, label, note_knn_a_wave, rp_components, DLRM, KNN_A, KNN_B, KNN_C,
    OPT, PAGERANK, SSB_1, SSB_2, SSSP,
};
use crate::eval::figures::{figure11_config, figure11_label};
use host_runtime::Mode;

// ----- V-A: the workloads' characteristics (Figure 10's components) --------------------------

pub(super) fn setup_claims() -> Vec<Claim> {
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

pub(super) fn runtime_claims() -> Vec<Claim> {
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
