//! The `axle` command: run the paper's workloads on the emulated CXL computational memory
//! under RP, BS, AXLE and AXLE_Interrupt, and print what happened in virtual time.
#![forbid(unsafe_code)]

use anyhow::Context;
use axle::config::{parse_duration_ns, parse_wall_limit, AxleConfig};
use axle::run::{
    run_attached, run_timing_the_loop, run_wall, run_wall_attached, AttachTarget, RunRequest,
};
use clap::{Parser, Subcommand, ValueEnum};
use host_runtime::{HostScheduling, Mode};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "axle",
    version,
    about = "AXLE: asynchronous back-streaming for CXL computational memory",
    long_about = "Runs the paper's workloads on an emulated CXL Type 3 computational-memory device \
                  under four offload mechanisms (RP, BS, AXLE, AXLE_Interrupt). Every figure is \
                  virtual time from a deterministic co-simulation of host and device: the same \
                  command prints the same numbers, and every answer is checked against a plain \
                  reference."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run one workload under one offload mechanism.
    Run(RunArgs),
    /// Run several workloads at once, each a tenant on its own host, sharing one emulated
    /// device (its CCM, DMA engine and link) in one process; each tenant's figures beside the
    /// same workload run alone (docs/tenants.md).
    RunMany(RunManyArgs),
    /// Run the paper's evaluation (Section V, Figures 10 to 16) on the embedded emulator:
    /// tables on the terminal; CSV, JSON and SVG per figure in --out.
    Eval(EvalArgs),
    /// Run the emulated device as its own process, serving hosts (`axle run --attach`) on a
    /// Unix socket, one at a time (or a group of tenants sharing one device: `--max-tenants`),
    /// until SIGINT or SIGTERM.
    Emu(EmuArgs),
    /// Live wall-clock benchmarks (`axle bench ring`: the ring protocol across two processes).
    Bench(axle::bench::BenchArgs),
    /// Print the default configuration (the paper's Table III) as TOML.
    Config,
    /// List the nine workloads: Table IV's characteristics and the sizes a run would use.
    List(ListArgs),
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum ModeArg {
    /// Remote polling: CXL.io mailbox, remote polls every 1 µs, CXL.mem result load.
    Rp,
    /// Bulk synchronous: synchronous CXL.mem launch, barrier, CXL.mem result load.
    Bs,
    /// Asynchronous back-streaming with local polling.
    Axle,
    /// AXLE with an interrupt (50 µs handling) per DMA request instead of polling.
    AxleIrq,
}

#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
enum ClockArg {
    /// Deterministic virtual time (every figure the same, run after run).
    #[default]
    Virtual,
    /// Device and host free-running on two threads against the real clock (stress and fault
    /// finding; the figures are wall time and vary).
    Wall,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum SchedArg {
    /// Round-robin (the paper's default): a task (host) or µthread (CCM issue) that is not
    /// ready is passed over for the next available one (docs/model.md, "Scheduling").
    Rr,
    /// FIFO: tasks in offset order; the host waits for the front task, the CCM's oldest
    /// item issues first.
    Fifo,
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Workload: knn-a, knn-b, knn-c, sssp, pagerank, ssb-q1.1, ssb-q1.2, opt-2.7b or dlrm
    /// (`axle list` describes them).
    workload: String,
    /// Offload mechanism.
    #[arg(long, value_enum)]
    mode: ModeArg,
    /// AXLE local polling interval, e.g. 50ns (p1), 500ns (p10), 5us (p100); or `adaptive`:
    /// from host.poll_interval_ns up to host.adaptive_poll_longest_ns (p1 to p100 by default),
    /// following the records' arrival (ours, not the paper's; docs/model.md); or `oracle`, a
    /// study and not a schedule a host can run: two runs, the first at host.poll_interval_ns
    /// to learn when polls find records, the second polling only then (in-process, virtual
    /// time; docs/beyond.md)
    #[arg(long, value_name = "DURATION|adaptive|oracle")]
    poll: Option<String>,
    /// Streaming factor: bytes per DMA batch (32 = SF1) or a share of the result (25%).
    #[arg(long, value_name = "BYTES|PERCENT")]
    sf: Option<String>,
    /// DMA slot size in bytes (32 or 64 in the paper).
    #[arg(long, value_name = "BYTES")]
    slot_size: Option<u32>,
    /// DMA slot capacity of each ring.
    #[arg(long, value_name = "N")]
    slots: Option<u32>,
    /// Scheduling of both the CCM and the host scheduler.
    #[arg(long, value_enum)]
    sched: Option<SchedArg>,
    /// Stream strictly by result offset (out-of-order streaming off).
    #[arg(long)]
    in_order: bool,
    /// AXLE and AXLE_Interrupt: streaming that cannot deadlock, with any ring of at least one
    /// slot: when the ring is full of slots held by tasks waiting for more results, the host
    /// moves them into private memory (host core stall). Config `host.no_deadlock`; ours, not
    /// the paper's (docs/beyond.md).
    #[arg(long)]
    no_deadlock: bool,
    /// A TOML configuration (see `axle config`); flags override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Real data: the directory holding the paper's inputs (e.g. ../shared/data) or a file.
    #[arg(long, value_name = "PATH")]
    data: Option<PathBuf>,
    /// Seed of generated inputs.
    #[arg(long)]
    seed: Option<u64>,
    /// Run the CCM's work items with their device-memory accesses interleaved one word at a
    /// time, in an order drawn from SEED (device.interleave_seed): races between items show.
    /// A correctness test mode, slow; the figures are the default model's.
    #[arg(long, value_name = "SEED")]
    interleave: Option<u64>,
    /// KNN queries in the batch.
    #[arg(long)]
    queries: Option<u32>,
    /// SSSP launches (Bellman-Ford rounds), or `converge`: until a launch changes no distance
    /// (also `0`). Default 10.
    #[arg(long, value_name = "N|converge", value_parser = workloads::sssp::parse_iterations)]
    iterations: Option<u32>,
    /// Input size: paper (Table IV sizes, the default) or small (a quick instance of the
    /// same shape, as the tests use).
    #[arg(long, value_name = "paper|small")]
    scale: Option<workloads::Scale>,
    /// Print one JSON object instead of the human report.
    #[arg(long)]
    json: bool,
    /// Run the host here against the emulator process serving on this socket (`axle emu`)
    /// instead of an emulator in this process; prints exactly the same report.
    #[arg(long, value_name = "SOCKET")]
    attach: Option<PathBuf>,
    /// With --attach: when the emulator process dies mid-run, wait for one started again on
    /// the same socket, check its device epoch (a new device), and rerun the run from the
    /// start (its data set loaded again; virtual time restarts at 0, so the report is an
    /// uninterrupted run's). What was lost and what was found go to standard error.
    /// Virtual time only. With --tenant, the group gathers again on the new device: every
    /// tenant of the group must reattach.
    #[arg(long, requires = "attach")]
    reattach: bool,
    /// With --reattach: seconds to wait for an emulator on the socket each time one is lost.
    #[arg(long, value_name = "SECONDS", requires = "reattach",
          default_value_t = DEFAULT_REATTACH_TIMEOUT_SECS, value_parser = parse_reattach_timeout)]
    reattach_timeout: f64,
    /// With --reattach: most reattaches in one run (1 to 100).
    #[arg(long, value_name = "N", requires = "reattach",
          default_value_t = axle::recover::DEFAULT_REATTACH_ATTEMPTS,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(axle::recover::MAX_REATTACH_ATTEMPTS)))]
    reattach_attempts: u32,
    /// Claim another ABI version when attaching (tests of the refusal).
    #[arg(long, hide = true, requires = "attach")]
    abi_version_override: Option<u32>,
    /// Attach as tenant I of a group of N hosts sharing one device (`axle emu
    /// --max-tenants`), e.g. 0/2; the run starts when all N have attached (see `--group`).
    /// Prints this tenant's report, as `axle run-many` reports it.
    #[arg(long, value_name = "I/N", requires_all = ["attach", "group"], value_parser = parse_tenant)]
    tenant: Option<(u32, u32)>,
    /// The name of the group of `--tenant` (ASCII letters, digits, '-', '_', '.'; at most
    /// 64): every tenant of a group names it alike.
    #[arg(long, value_name = "NAME", requires = "tenant")]
    group: Option<String>,
    /// The CCM's weighted shares for the group of `--tenant`, one weight (1 to 1000) per
    /// tenant; every tenant of the group must give the same (default: round-robin).
    #[arg(long, value_name = "W1,W2,...", requires = "tenant")]
    weights: Option<String>,
    /// Virtual time (deterministic) or wall: the emulator and the host free-running against
    /// the real clock over the same rings; its figures are wall time and vary.
    #[arg(long, value_enum, default_value_t)]
    clock: ClockArg,
    /// Wall clock: add the standard seeded random delays on both sides (stress).
    #[arg(long, hide = true, value_name = "SEED")]
    stress_seed: Option<u64>,
    /// Stop the run with an error when it has not finished after this much wall time, e.g.
    /// 90s, 10m [default: 10m at paper scale, 1m at small scale]. Separate from the 100 s
    /// virtual-time limit; a run that finishes within it prints the same figures.
    #[arg(long, value_name = "DURATION", value_parser = parse_wall_limit)]
    wall_limit: Option<std::time::Duration>,
    /// Write the run's timeline to FILE as a Chrome / Perfetto trace (open it in
    /// ui.perfetto.dev): CCM µthreads, DMA, the link, host polls, flow control and workers.
    /// In-process virtual time only.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
struct RunManyArgs {
    /// Workloads, one per tenant (tenant 0 first; the same name twice is two tenants).
    #[arg(required = true, num_args = 1..)]
    workloads: Vec<String>,
    /// Offload mechanism of every tenant.
    #[arg(long, value_enum)]
    mode: ModeArg,
    /// Most tenants allowed (1 to 16: a CXL 2.0 multi-logical device has at most 16 logical
    /// devices).
    #[arg(long, value_name = "N", default_value_t = axle::tenants::DEFAULT_MAX_TENANTS)]
    max_tenants: usize,
    /// Weighted shares of the CCM's busy time, one weight (1 to 1000) per tenant, e.g. 1,2;
    /// without it the tenants take turns round-robin, one dispatch each.
    #[arg(long, value_name = "W1,W2,...")]
    weights: Option<String>,
    /// Skip the runs alone (no slowdowns, no fairness index).
    #[arg(long)]
    no_alone: bool,
    /// Run the tenants' hosts here against the emulator process serving on this socket
    /// (`axle emu --max-tenants N`, N at least the tenants): one session per tenant, one
    /// device; prints exactly the same report (the runs alone are attached too).
    #[arg(long, value_name = "SOCKET")]
    attach: Option<PathBuf>,
    /// With --attach: when the emulator process dies mid-run, every tenant reports the launch
    /// it lost, waits for an emulator started again on the same socket (`--max-tenants` at
    /// least the tenants), and the group reruns from the start there (it gathers again, in
    /// tenant order, so the report is an uninterrupted run's). What was lost and what was
    /// found go to standard error.
    #[arg(long, requires = "attach")]
    reattach: bool,
    /// With --reattach: seconds each tenant waits for an emulator on the socket each time one
    /// is lost.
    #[arg(long, value_name = "SECONDS", requires = "reattach",
          default_value_t = DEFAULT_REATTACH_TIMEOUT_SECS, value_parser = parse_reattach_timeout)]
    reattach_timeout: f64,
    /// With --reattach: most reattaches of each tenant in one run (1 to 100).
    #[arg(long, value_name = "N", requires = "reattach",
          default_value_t = axle::recover::DEFAULT_REATTACH_ATTEMPTS,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(axle::recover::MAX_REATTACH_ATTEMPTS)))]
    reattach_attempts: u32,
    /// AXLE local polling interval of every tenant (as for `axle run --poll`).
    #[arg(long, value_name = "DURATION|adaptive")]
    poll: Option<String>,
    /// A TOML configuration (see `axle config`); flags override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Real data: the directory holding the paper's inputs, or a file.
    #[arg(long, value_name = "PATH")]
    data: Option<PathBuf>,
    /// Seed of generated inputs.
    #[arg(long)]
    seed: Option<u64>,
    /// Input size: paper (the default) or small.
    #[arg(long, value_name = "paper|small")]
    scale: Option<workloads::Scale>,
    /// Print one JSON object instead of the human report.
    #[arg(long)]
    json: bool,
    /// Stop with an error when a run has not finished after this much wall time.
    #[arg(long, value_name = "DURATION", value_parser = parse_wall_limit)]
    wall_limit: Option<std::time::Duration>,
    /// Inject a fault into a tenant, to test that faults do not spread: TENANT:KIND@TIME,
    /// KIND kill (its host dies), stop (stops taking turns), malformed (its next launch
    /// descriptor names no kernel), heads-back (its flow-control heads go back to 0), hang
    /// (waits for ever for a response) or spin (polls for ever without a call), at TIME of
    /// virtual time (e.g. 1:kill@20us). At most one per tenant, and a kill beside it (1:hang@5us --fault 1:kill@30us).
    #[arg(long, value_name = "TENANT:KIND@TIME")]
    fault: Vec<axle::tenants::faults::TenantFault>,
}

/// Most weights `--weights` takes (one per tenant).
const MAX_WEIGHTS: usize = emulator::cosim::tenants::MAX_TENANTS;

/// `--weights W1,W2,...` (none: round-robin), each a whole number; at most
/// [`MAX_WEIGHTS`] of them (their range is the policy's check).
fn parse_weights(list: Option<&str>) -> anyhow::Result<emulator::cosim::tenants::SharePolicy> {
    let Some(list) = list else {
        return Ok(emulator::cosim::tenants::SharePolicy::RoundRobin);
    };
    let items: Vec<&str> = list.split(',').collect();
    if items.len() > MAX_WEIGHTS {
        anyhow::bail!(
            "--weights has {} weights; at most {MAX_WEIGHTS} (one per tenant)",
            items.len()
        );
    }
    let weights = items
        .iter()
        .map(|w| {
            w.trim()
                .parse::<u32>()
                .map_err(|_| anyhow::anyhow!("--weights: {w:?} is not a whole number"))
        })
        .collect::<anyhow::Result<Vec<u32>>>()?;
    Ok(emulator::cosim::tenants::SharePolicy::Weighted(weights))
}

/// `--tenant I/N`: tenant I (0 to N-1) of a group of N (1 to 16).
fn parse_tenant(text: &str) -> Result<(u32, u32), String> {
    let max = emulator::cosim::tenants::MAX_TENANTS;
    let (index, count) = text
        .split_once('/')
        .ok_or_else(|| format!("{text:?}: give the tenant as I/N, e.g. 0/2"))?;
    let index: u32 = index
        .trim()
        .parse()
        .map_err(|_| format!("{index:?} is not a tenant index (a whole number)"))?;
    let count: u32 = count
        .trim()
        .parse()
        .map_err(|_| format!("{count:?} is not a tenant count (a whole number)"))?;
    if count == 0 || count as usize > max {
        return Err(format!(
            "a group of {count} tenants: a group has 1 to {max} (a CXL 2.0 multi-logical device has at most 16 logical devices)"
        ));
    }
    if index >= count {
        return Err(format!(
            "tenant {index} of a group of {count}: the indices are 0 to {}",
            count - 1
        ));
    }
    Ok((index, count))
}

fn run_many_command(args: RunManyArgs) -> anyhow::Result<ExitCode> {
    let mut config = match &args.config {
        Some(path) => AxleConfig::load(path)?,
        None => AxleConfig::default(),
    };
    match args.poll.as_deref() {
        Some("adaptive") => config.host.poll_policy = host_runtime::PollPolicy::Adaptive,
        Some("oracle") => {
            anyhow::bail!("--poll oracle is a study of one run; run-many cannot take it")
        }
        Some(poll) => {
            config.host.poll_interval_ns = parse_duration_ns(poll).context("--poll")?;
            config.host.poll_policy = host_runtime::PollPolicy::Fixed;
        }
        None => {}
    }
    if let Some(seed) = args.seed {
        config.workload.seed = seed;
    }
    if let Some(scale) = args.scale {
        config.workload.scale = scale;
    }
    config.validate()?;
    let policy = parse_weights(args.weights.as_deref())?;
    let request = axle::tenants::ManyRequest {
        workloads: args.workloads.clone(),
        mode: match args.mode {
            ModeArg::Rp => Mode::Rp,
            ModeArg::Bs => Mode::Bs,
            ModeArg::Axle => Mode::Axle,
            ModeArg::AxleIrq => Mode::AxleIrq,
        },
        config,
        data: args.data.clone(),
        wall_limit: args.wall_limit,
        policy,
        max_tenants: args.max_tenants,
        alone: !args.no_alone,
        faults: args.fault.clone(),
    };
    // The count is bounded before any workload is built.
    request.check()?;
    for name in &request.workloads {
        if !workloads::names().contains(&name.as_str()) {
            anyhow::bail!(
                "unknown workload `{name}`; valid names: {}",
                workloads::names().join(", ")
            );
        }
    }
    let report = match &args.attach {
        Some(socket) => {
            let reattach = args.reattach.then(|| axle::recover::Reattach {
                timeout: std::time::Duration::from_secs_f64(args.reattach_timeout),
                attempts: args.reattach_attempts,
            });
            axle::tenants::run_many_attached(
                &request,
                &AttachTarget::new(socket.clone()),
                reattach.as_ref(),
                &|line| eprintln!("{line}"),
            )?
        }
        None => axle::tenants::run_many(&request)?,
    };
    if args.json {
        axle::write_stdout(&format!("{}\n", serde_json::to_string_pretty(&report)?))?;
    } else {
        axle::write_stdout(&axle::tenants::human(&report))?;
    }
    if !report.verified {
        for tenant in report.tenants.iter().filter(|t| !t.shared.verified) {
            match (&tenant.detached, &tenant.failure) {
                (Some(detached), _) => eprintln!(
                    "error: tenant {} ({}) was detached at {} ns of virtual time: {}",
                    tenant.tenant, tenant.shared.workload, detached.at_ns, detached.reason
                ),
                (None, Some(failure)) => eprintln!(
                    "error: tenant {} ({}) failed: {failure}",
                    tenant.tenant, tenant.shared.workload
                ),
                (None, None) => eprintln!(
                    "error: tenant {} ({}) produced a wrong answer: {}",
                    tenant.tenant, tenant.shared.workload, tenant.shared.verification
                ),
            }
        }
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
struct ListArgs {
    /// The sizes of this scale.
    #[arg(long, value_name = "paper|small", default_value = "paper")]
    scale: workloads::Scale,
    /// Real data directory (as for `axle run --data`): the sizes say which file is used.
    #[arg(long, value_name = "PATH")]
    data: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
struct EmuArgs {
    /// The Unix socket to create (mode 0600; removed on exit).
    #[arg(long, value_name = "PATH")]
    socket: PathBuf,
    /// Seconds an attached host may keep its turn (in a wall-clock run: stay silent) before it
    /// is detached and the next host served.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_TURN_TIMEOUT_SECS,
          value_parser = parse_turn_timeout)]
    turn_timeout: f64,
    /// Seconds one host's session may last in wall time, however quickly it takes its turns
    /// (by default three times `axle run`'s own 10-minute budget at paper scale); a host past
    /// it is detached and the next host served.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_SESSION_LIMIT_SECS,
          value_parser = parse_session_limit)]
    session_limit: f64,
    /// Tests of recovery: kill this process (SIGKILL) instead of handing a virtual-time
    /// session's turn to its host for the K+1-th time.
    #[arg(long, hide = true, value_name = "K")]
    die_after_hand_overs: Option<u64>,
    /// Most tenants of one group (1 to 16): hosts that attach as tenants of a group (`axle
    /// run-many --attach`, or `axle run --attach --tenant I/N --group NAME`) share one device
    /// (its CCM, DMA engine and link), each with its own logical device, and run together
    /// once all have attached. A host that attaches alone is served alone, as ever.
    #[arg(long, value_name = "N", default_value_t = emulator::server::DEFAULT_MAX_TENANTS)]
    max_tenants: usize,
    /// Seconds a group's tenants have to attach, from the first one's attach (at most 100);
    /// then those attached are refused, told which tenants never came, and freed.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_GROUP_TIMEOUT_SECS,
          value_parser = parse_group_timeout)]
    group_timeout: f64,
}

/// `axle run --reattach-timeout`'s default, in seconds.
const DEFAULT_REATTACH_TIMEOUT_SECS: f64 = axle::recover::DEFAULT_REATTACH_TIMEOUT.as_secs_f64();

/// A reattach timeout: a positive number of seconds, at most a day.
fn parse_reattach_timeout(text: &str) -> Result<f64, String> {
    parse_seconds(text, "the reattach timeout", 86_400.0, "a day")
}

/// `axle emu --group-timeout`'s default, in seconds.
const DEFAULT_GROUP_TIMEOUT_SECS: f64 = emulator::server::DEFAULT_GROUP_TIMEOUT.as_secs_f64();

/// A group timeout: a positive number of seconds, at most 100.
fn parse_group_timeout(text: &str) -> Result<f64, String> {
    parse_seconds(
        text,
        "the group timeout",
        emulator::server::MAX_GROUP_TIMEOUT.as_secs_f64(),
        "a host waits 120 s for its session",
    )
}

/// `axle emu --turn-timeout`'s default, in seconds.
const DEFAULT_TURN_TIMEOUT_SECS: f64 = emulator::server::DEFAULT_TURN_TIMEOUT.as_secs_f64();
/// `axle emu --session-limit`'s default, in seconds.
const DEFAULT_SESSION_LIMIT_SECS: f64 = emulator::server::DEFAULT_SESSION_LIMIT.as_secs_f64();

/// A turn timeout: a positive number of seconds, at most a day.
fn parse_turn_timeout(text: &str) -> Result<f64, String> {
    parse_seconds(text, "the turn timeout", 86_400.0, "a day")
}

/// A session limit: a positive number of seconds, at most a week.
fn parse_session_limit(text: &str) -> Result<f64, String> {
    parse_seconds(text, "the session limit", 7.0 * 86_400.0, "a week")
}

/// A positive number of seconds, at most `most` (`most_words` in words).
fn parse_seconds(text: &str, what: &str, most: f64, most_words: &str) -> Result<f64, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !(seconds > 0.0 && seconds <= most) {
        return Err(format!(
            "{seconds} s: {what} must be more than 0 and at most {most} s ({most_words})"
        ));
    }
    Ok(seconds)
}

#[derive(clap::Args, Debug)]
struct EvalArgs {
    /// Which figures: 10 to 16, a comma-separated list, or all (the paper's Figures 10 to 16).
    /// `beyond` (not the paper's: adaptive polling and --no-deadlock, docs/beyond.md) and
    /// `tenants` (not the paper's: 1 to 8 tenants sharing one device, docs/tenants.md) are made
    /// only when named (`--figure beyond`, or `--figure all,beyond,tenants`): `all` and the
    /// default evaluation, REPRODUCTION.md included, stay the paper's.
    #[arg(
        long,
        default_value = "all",
        value_name = "10|11|...|16|all|beyond|tenants"
    )]
    figure: String,
    /// Input size of every workload: paper (Table IV, the default) or small.
    #[arg(long, value_name = "paper|small")]
    scale: Option<workloads::Scale>,
    /// Directory for the CSV, JSON and SVG files of every figure (created if missing).
    #[arg(long, value_name = "DIR", default_value = "axle-eval")]
    out: PathBuf,
    /// Configurations run in parallel (default: the machine's cores). Results do not depend
    /// on it.
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Only these workloads (comma-separated; default: all nine).
    #[arg(long, value_name = "NAMES")]
    workloads: Option<String>,
    /// Also write REPRODUCTION.md (the paper's Section V numbers beside ours) to this path.
    #[arg(long, value_name = "FILE")]
    reproduction: Option<PathBuf>,
    /// A TOML configuration (see `axle config`) as the base of every run.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The real data directory (see shared/data/README.md). Default: ../shared/data relative
    /// to the current directory, else to the repository root, when it exists; without one,
    /// every workload uses its seeded generator (and the output says so).
    #[arg(long, value_name = "DIR", conflicts_with = "no_data")]
    data: Option<PathBuf>,
    /// Use the seeded generators for every workload, even where real data is found.
    #[arg(long)]
    no_data: bool,
    /// Print the tables as one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// No progress bar (it is drawn only on a terminal anyway).
    #[arg(long)]
    quiet: bool,
    /// The wall-time budget of each run, e.g. 90s, 10m [default: 10m at paper scale, 1m at
    /// small scale]; a run that outlives it fails the evaluation.
    #[arg(long, value_name = "DURATION", value_parser = parse_wall_limit)]
    wall_limit: Option<std::time::Duration>,
    /// For a cluster: print one line per distinct run of the selection (its identifier, the
    /// workload, the mode) and run nothing.
    #[arg(long, conflicts_with_all = ["run", "merge"])]
    list_runs: bool,
    /// For a cluster: make only run ID (from --list-runs, with the same selection flags) and
    /// write its result to OUT/runs/ID.json.
    #[arg(long, value_name = "ID", conflicts_with = "merge")]
    run: Option<String>,
    /// For a cluster: build the figures, CSV, JSON, SVG and REPRODUCTION.md from the run files
    /// that --run wrote into these directories (the same selection flags), byte-identical to
    /// an evaluation made on one machine.
    #[arg(long, value_name = "DIR", num_args = 1..)]
    merge: Vec<PathBuf>,
}

fn eval_command(args: EvalArgs) -> anyhow::Result<ExitCode> {
    let figures = axle::eval::figures::Figure::parse(&args.figure)?;
    let mut config = match &args.config {
        Some(path) => AxleConfig::load(path)?,
        None => AxleConfig::default(),
    };
    if let Some(scale) = args.scale {
        config.workload.scale = scale;
    }
    config.validate()?;
    let names: Vec<String> = match &args.workloads {
        Some(list) => {
            let names: Vec<String> = list.split(',').map(|n| n.trim().to_owned()).collect();
            for name in &names {
                if !workloads::names().contains(&name.as_str()) {
                    anyhow::bail!(
                        "--workloads: unknown workload `{name}`; valid names: {}",
                        workloads::names().join(", ")
                    );
                }
            }
            names
        }
        None => workloads::names().iter().map(|n| (*n).to_owned()).collect(),
    };
    let jobs = match args.jobs {
        Some(0) => anyhow::bail!("--jobs is 0; it must be at least 1"),
        Some(jobs) => jobs,
        None => std::thread::available_parallelism().map_or(1, usize::from),
    };
    let data = axle::eval::DataChoice::choose(
        args.data.as_deref(),
        args.no_data,
        &axle::eval::default_data_dirs(),
    )?;
    let options = axle::eval::EvalOptions {
        figures,
        config,
        workloads: names,
        data,
        jobs,
        progress: !args.quiet && !args.json,
        wall_limit: args.wall_limit,
    };
    if args.list_runs || args.run.is_some() {
        let plan = axle::eval::plan(&options)?;
        let distinct = plan.distinct();
        if args.list_runs {
            let mut out = String::new();
            for (id, point) in &distinct {
                out.push_str(&format!("{id} {} {}\n", point.workload, point.mode.name()));
            }
            axle::write_stdout(&out)?;
            return Ok(ExitCode::SUCCESS);
        }
        let id = args.run.as_deref().unwrap_or_default();
        let Some(point) = distinct.get(id) else {
            anyhow::bail!(
                "--run {id}: no such run in this selection ({} runs; `axle eval --list-runs` with the same --figure, --scale, --workloads, --config and data flags lists them)",
                distinct.len()
            );
        };
        let path = axle::eval::sweep::write_run(point, &plan.data, options.wall_limit, &args.out)?;
        eprintln!(
            "axle eval: {id} ({} {}) written to {}",
            point.workload,
            point.mode.name(),
            path.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let inputs = options.inputs()?;
    let width = inputs.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    let mut message = format!("axle eval: inputs: {}\n", options.data.describe());
    for (name, input) in &inputs {
        message.push_str(&format!("  {name:<width$}  {input}\n"));
    }
    eprint!("{message}");
    let started = std::time::Instant::now();
    let evaluation = if args.merge.is_empty() {
        axle::eval::evaluate(&options)?
    } else {
        let plan = axle::eval::plan(&options)?;
        let results = axle::eval::sweep::Results::read_runs(&plan.points(), &args.merge)?;
        axle::eval::assemble(&options, plan, results)?
    };
    let written = axle::eval::write_outputs(&evaluation, &args.out)?;
    if let Some(path) = &args.reproduction {
        let data = match &args.data {
            Some(dir) => format!(" --data {}", dir.display()),
            None if args.no_data => " --no-data".to_owned(),
            None => String::new(),
        };
        let command = format!(
            "axle eval --figure {} --scale {}{data} --reproduction {}",
            args.figure,
            evaluation.config.workload.scale,
            path.display()
        );
        std::fs::write(
            path,
            axle::eval::reproduction::render(&evaluation, &command),
        )
        .with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        let tables: Vec<&axle::eval::table::Table> = evaluation
            .figures
            .iter()
            .flat_map(|figure| &figure.tables)
            .collect();
        axle::write_stdout(&format!("{}\n", serde_json::to_string_pretty(&tables)?))?;
    } else {
        axle::write_stdout(&axle::eval::render(&evaluation))?;
        axle::write_stdout(&format!(
            "{} distinct runs, every one verified against its reference; {} files in {}; wall time {:.1} s with {jobs} {}\n",
            evaluation.results.len(),
            written.len(),
            args.out.display(),
            started.elapsed().as_secs_f64(),
            if jobs == 1 { "job" } else { "jobs" }
        ))?;
        let events: u64 = evaluation.results.total_events();
        let wall = started.elapsed().as_secs_f64();
        if wall > 0.0 {
            eprintln!(
                "axle eval: {events} simulator events in {wall:.1} s of wall time, {:.2} M events/s",
                events as f64 / wall / 1e6
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn build_config(args: &RunArgs) -> anyhow::Result<AxleConfig> {
    let mut config = match &args.config {
        Some(path) => AxleConfig::load(path)?,
        None => AxleConfig::default(),
    };
    match args.poll.as_deref() {
        Some("adaptive") => config.host.poll_policy = host_runtime::PollPolicy::Adaptive,
        Some("oracle") => config.host.poll_policy = host_runtime::PollPolicy::Oracle,
        Some(poll) => {
            config.host.poll_interval_ns = parse_duration_ns(poll).context("--poll")?;
            config.host.poll_policy = host_runtime::PollPolicy::Fixed;
        }
        None => {}
    }
    if let Some(sf) = &args.sf {
        config.axle.streaming_factor = sf.clone();
    }
    if let Some(slot_size) = args.slot_size {
        config.axle.slot_size = slot_size;
    }
    if let Some(slots) = args.slots {
        config.axle.slots = slots;
    }
    if let Some(sched) = args.sched {
        let (host, device) = match sched {
            SchedArg::Rr => (HostScheduling::Rr, emulator::Scheduling::Rr),
            SchedArg::Fifo => (HostScheduling::Fifo, emulator::Scheduling::Fifo),
        };
        config.host.scheduling = host;
        config.device.scheduling = device;
    }
    if args.in_order {
        config.axle.out_of_order = false;
    }
    if args.no_deadlock {
        config.host.no_deadlock = true;
    }
    if let Some(seed) = args.seed {
        config.workload.seed = seed;
    }
    if let Some(scale) = args.scale {
        config.workload.scale = scale;
    }
    if let Some(seed) = args.interleave {
        config.device.interleave_seed = Some(seed);
    }
    // Flags that only some workloads read: the others say so on stderr rather than ignore
    // them silently (a sweep may pass the same flags to every workload).
    if let Some(queries) = args.queries {
        if !args.workload.starts_with("knn-") {
            eprintln!(
                "warning: --queries {queries} has no effect on {}: only the KNN workloads (knn-a, knn-b, knn-c) take a query batch",
                args.workload
            );
        }
        config.workload.queries = queries;
    }
    if let Some(iterations) = args.iterations {
        if args.workload != "sssp" {
            eprintln!(
                "warning: --iterations has no effect on {}: only sssp takes a number of launches; {} runs a fixed number (`axle list` says how many)",
                args.workload, args.workload
            );
        }
        config.workload.iterations = iterations;
    }
    config.validate()?;
    Ok(config)
}

/// The least stall timeout of a wall-clock run from the CLI. The timeout is real time there,
/// and an emulator that falls behind the clock (a paper-scale PageRank stores 1.2 MB of
/// inputs and streams 37,000 records per iteration) can leave the host without a record for
/// longer than the modelled 20 ms without any deadlock; a real one is still reported.
const WALL_STALL_TIMEOUT_NS: u64 = 2_000_000_000;

fn run_command(args: RunArgs) -> anyhow::Result<ExitCode> {
    let mut config = build_config(&args)?;
    if args.clock == ClockArg::Wall {
        config.host.stall_timeout_ns = config.host.stall_timeout_ns.max(WALL_STALL_TIMEOUT_NS);
    }
    let mode = match args.mode {
        ModeArg::Rp => Mode::Rp,
        ModeArg::Bs => Mode::Bs,
        ModeArg::Axle => Mode::Axle,
        ModeArg::AxleIrq => Mode::AxleIrq,
    };
    let request = RunRequest {
        workload: args.workload.clone(),
        mode,
        config,
        data: args.data.clone(),
        wall_limit: args.wall_limit,
    };
    let started = std::time::Instant::now();
    if args.clock == ClockArg::Virtual && args.stress_seed.is_some() {
        anyhow::bail!("--stress-seed needs --clock wall");
    }
    if args.trace.is_some() && (args.attach.is_some() || args.clock == ClockArg::Wall) {
        anyhow::bail!(
            "--trace records an in-process virtual-time run only; it cannot be combined with --attach or --clock wall"
        );
    }
    if request.config.host.poll_policy == host_runtime::PollPolicy::Oracle
        && (args.attach.is_some() || args.clock == ClockArg::Wall)
    {
        anyhow::bail!(
            "--poll oracle learns its poll times from a first in-process virtual-time run; it cannot be combined with --attach or --clock wall"
        );
    }
    if args.reattach && args.clock == ClockArg::Wall {
        anyhow::bail!(
            "--reattach reruns a virtual-time run (whose rerun prints what an uninterrupted run prints); it cannot be combined with --clock wall"
        );
    }
    // The co-simulation loop's own wall time, for the runs that measure it.
    let mut cosim_loop = None;
    let report = match &args.attach {
        Some(socket) if args.tenant.is_some() => {
            if args.clock == ClockArg::Wall {
                anyhow::bail!(
                    "--tenant runs in virtual time; it cannot be combined with --clock wall"
                );
            }
            let (index, count) = args.tenant.unwrap_or((0, 1));
            let policy = parse_weights(args.weights.as_deref())?;
            policy
                .check(count as usize)
                .map_err(|error| anyhow::anyhow!("--weights: {error}"))?;
            let claim = cosim_link::attach::TenantClaim {
                group: args.group.clone().unwrap_or_default(),
                index,
                count,
                weights: match policy {
                    emulator::cosim::tenants::SharePolicy::RoundRobin => None,
                    emulator::cosim::tenants::SharePolicy::Weighted(weights) => Some(weights),
                },
            };
            claim
                .check_name()
                .map_err(|error| anyhow::anyhow!("--group: {error}"))?;
            let mut target = AttachTarget::new(socket.clone());
            if let Some(version) = args.abi_version_override {
                target.abi_version = version;
            }
            let reattach = args.reattach.then(|| axle::recover::Reattach {
                timeout: std::time::Duration::from_secs_f64(args.reattach_timeout),
                attempts: args.reattach_attempts,
            });
            axle::tenants::run_as_tenant(
                &request,
                &target,
                claim,
                reattach.as_ref(),
                &mut |line| eprintln!("{line}"),
            )?
        }
        Some(socket) if args.clock == ClockArg::Wall => {
            if args.stress_seed.is_some() {
                anyhow::bail!(
                    "--stress-seed runs in-process only; it cannot be combined with --attach"
                );
            }
            let mut target = AttachTarget::new(socket.clone());
            if let Some(version) = args.abi_version_override {
                target.abi_version = version;
            }
            let options = axle::wall::WallOptions {
                limit: request.wall_limit(),
                ..Default::default()
            };
            run_wall_attached(&request, &target, &options)?.report
        }
        None if args.clock == ClockArg::Wall => {
            let options = axle::wall::WallOptions {
                limit: request.wall_limit(),
                stress: args.stress_seed.map(axle::wall::WallStress::standard),
            };
            run_wall(&request, &options)?.report
        }
        Some(socket) => {
            let mut target = AttachTarget::new(socket.clone());
            if let Some(version) = args.abi_version_override {
                target.abi_version = version;
            }
            if args.reattach {
                let reattach = axle::recover::Reattach {
                    timeout: std::time::Duration::from_secs_f64(args.reattach_timeout),
                    attempts: args.reattach_attempts,
                };
                axle::recover::run_attached_reattaching(
                    &request,
                    &target,
                    &reattach,
                    &mut |line| eprintln!("{line}"),
                )?
            } else {
                run_attached(&request, &target)?
            }
        }
        None => match &args.trace {
            Some(path) => axle::run::run_traced(&request, path)?,
            None => {
                let (report, looped) = run_timing_the_loop(&request)?;
                cosim_loop = Some(looped.as_secs_f64());
                report
            }
        },
    };
    if args.json {
        axle::write_stdout(&format!("{}\n", serde_json::to_string_pretty(&report)?))?;
    } else {
        axle::write_stdout(&axle::report::human(&report))?;
        let wall = started.elapsed().as_secs_f64();
        axle::write_stdout(&format!(
            "  wall time: {wall:.2} s (host machine, not modelled time)\n"
        ))?;
        // The simulator's speed on this machine: wall time, so on standard error.
        if wall > 0.0 {
            let events = report.simulator.events as f64;
            // In-process runs also time their co-simulation loop alone: the device's events
            // and the host model's turns, without the data set's set-up and the verification.
            let in_loop = match cosim_loop {
                Some(looped) if looped > 0.0 => format!(
                    "; {:.2} M events/s in the co-simulation loop alone ({looped:.2} s of it)",
                    events / looped / 1e6
                ),
                _ => String::new(),
            };
            eprintln!(
                "simulator: {:.2} M events/s over the whole process, {:.2} M host turns/s (wall time {wall:.2} s){in_loop}",
                events / wall / 1e6,
                report.simulator.host_turns as f64 / wall / 1e6
            );
        }
    }
    if !report.verified {
        eprintln!(
            "error: {} in mode {} produced a wrong answer: {}",
            report.workload, report.mode, report.verification
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn emu_command(args: EmuArgs) -> anyhow::Result<ExitCode> {
    let options = emulator::server::ServeOptions {
        turn_timeout: std::time::Duration::from_secs_f64(args.turn_timeout),
        session_limit: std::time::Duration::from_secs_f64(args.session_limit),
        die_after_hand_overs: args.die_after_hand_overs,
        max_tenants: args.max_tenants,
        group_timeout: std::time::Duration::from_secs_f64(args.group_timeout),
    };
    options.check().map_err(|error| anyhow::anyhow!(error))?;
    emulator::server::serve(&args.socket, &options)?;
    Ok(ExitCode::SUCCESS)
}

fn list_command(args: ListArgs) -> anyhow::Result<ExitCode> {
    let options = workloads::WorkloadOptions {
        scale: args.scale,
        data_dir: args.data,
        ..workloads::WorkloadOptions::default()
    };
    let mut text = String::new();
    for (index, name) in workloads::names().iter().enumerate() {
        let Some(info) = workloads::describe(name, &options) else {
            continue;
        };
        let annotation = char::from(b'a' + index as u8);
        text.push_str(&format!(
            "({annotation}) {:<9} {} / {}\n    Table IV: {}\n    used ({}): {}\n    CCM: {}\n    host: {}\n",
            info.name,
            info.domain,
            info.application,
            info.table_iv,
            args.scale,
            info.characteristics,
            info.offloaded,
            info.host_task
        ));
    }
    axle::write_stdout(&text)?;
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The emulator process logs each attach and detach.
    let level = match cli.command {
        Command::Emu(_) => "info",
        _ => "warn",
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level))
        .format_timestamp_micros()
        .init();
    log::trace!("main: start");
    let result = match cli.command {
        Command::Run(args) => run_command(args),
        Command::RunMany(args) => run_many_command(args),
        Command::Emu(args) => emu_command(args),
        Command::Eval(args) => eval_command(args),
        Command::Bench(args) => axle::bench::command(args),
        Command::Config => AxleConfig::default()
            .to_annotated_toml()
            .and_then(|text| Ok(axle::write_stdout(&text)?))
            .map(|()| ExitCode::SUCCESS),
        Command::List(args) => list_command(args),
    };
    log::trace!("main: end");
    match result {
        Ok(code) => code,
        // The reader went away (`axle eval | head`): nothing more to say.
        Err(error)
            if error
                .downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}
