//! Section V-D: the host core stall of Figure 13, with the notes that quote today's figures
//! where ours differ.

use super::super::claim::{held, per, percent, share, time, Claim, Ctx, Held};
use super::{every, label, PAGERANK};
use host_runtime::Mode;

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

pub(super) fn stall_claims() -> Vec<Claim> {
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

// ----- Notes: each quotes today's figures ------------------------------------------------------

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
