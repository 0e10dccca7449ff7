//! `axle bench ring`: a live benchmark of the AXLE ring protocol in **wall-clock** time, across
//! two processes, against two baselines and the machine's own limits, all measured in the same
//! run.
//!
//! # What runs
//!
//! The benchmark process is the *host*. It creates host physical memory as an anonymous sealed
//! memfd ([`cosim_link::shm::MappedWords`]), builds the rings there exactly as the driver does
//! ([`host_driver::frames::FrameAllocator`] scatters the frames, a
//! [`host_driver::dma::DmaRegion`] over them, [`shared_abi::region::RingLayout`],
//! [`host_driver::shadow::init_control_block`]) and spawns a copy of itself
//! (`std::env::current_exe()`, the hidden subcommand `axle bench device`) as the *device*.
//! The control socket is the child's standard input; the memfd, a page for the cache-line
//! ping-pong and the data socket of the socket baseline go over it with SCM_RIGHTS.
//!
//! - The device produces as the emulator lands DMA (`emulator::hal_impl::Hardware::land`, in
//!   the firmware's chain order): per payload the data with Relaxed word stores (D1), the
//!   32-byte record (D3) and the metadata tail with a Release store (D4); per batch the
//!   payload tail with a Release store (D2). It keeps cached copies of the heads and reads
//!   the host line (Acquire) only when its cached copy says a ring is full (D5). It writes
//!   through the region's pages resolved once
//!   ([`host_driver::dma::DeviceView::resolve`]), as a DMA engine writes through its cached
//!   translation.
//! - The host consumes with the real code, through the region resolved once
//!   ([`host_driver::dma::MappedRegion::resolve`]):
//!   [`host_runtime::ring::MetadataConsumer::poll_batch`] (H1: the Acquire tail load, checked
//!   against the head and the capacity) takes at most a sixteenth of the ring per poll,
//!   [`host_runtime::ring::MetadataConsumer::read_records`] reads those records a run of whole
//!   cache lines at a time and checks every record's sequence, length and slot,
//!   [`host_runtime::ring::read_payload`] reads each payload, the gap-aware
//!   [`host_runtime::ring::PayloadHeadTracker`] consumes it, and
//!   [`host_runtime::ring::publish_heads`] (H2, H3) runs whenever
//!   [`host_runtime::flow::FlowControl`] says the heads moved: at most once per poll. Polling
//!   interval 0: it polls again at once. While the ring is empty the host touches (loads and
//!   drops) the line of the next record and of the payload slot it will most likely name,
//!   and once the tail moves it touches that payload line before reading the records: a
//!   software prefetch, so that these lines travel together with the tail's and the
//!   record's instead of one after the other. Nothing touched is used; everything is read
//!   below an Acquire tail.
//!
//! # Figures
//!
//! - records/s: 32-byte metadata records with an 8-byte payload each, a batch of `--batch`
//!   payloads per payload-tail update, a ring of `--slots` slots;
//! - one-way notification latency, p50 and p99: the device stamps each record with
//!   `CLOCK_MONOTONIC` (shared by both processes) in its payload and publishes one record at a
//!   time, waiting until the host's payload head passes it; the host records `now - stamp`
//!   when it holds the payload;
//! - payload GB/s with 4 KiB payloads (slot size 4096), every payload's first and last words
//!   checked and every `--verify-every`-th payload checked in full.
//!
//! The same three on a `crossbeam_queue::ArrayQueue` between two threads and on a Unix socket
//! pair between the two processes; and the limits they are compared with: memcpy bandwidth
//! (a buffer larger than the last-level cache, copied several times) and the one-way time of a
//! cache line bouncing between the two processes. Every figure is printed absolute and as a
//! ratio to what it compares with.
//!
//! Nothing is pinned (the machine is shared), and the output says so. Both sides busy-poll,
//! so the figures need two otherwise idle cores. A mismatch anywhere (a record's sequence,
//! tag, offset, a payload's bytes, a message of a baseline) aborts the run with an error.
//!
//! These are wall-clock figures of this machine, unlike everything else `axle` prints (virtual
//! time); they are noisy, and no test asserts any of them.

use clap::{Args, Subcommand, ValueEnum};
use serde::{Deserialize, Serialize};
use std::process::ExitCode;

mod baselines;
mod device;
mod host;
mod limits;
mod report;
mod ring;
mod wire;

pub use report::BenchReport;

/// `axle bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Which benchmark.
    #[command(subcommand)]
    pub which: BenchCommand,
}

/// The benchmarks.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// The ring protocol live, in wall-clock time, across two processes: records/s, one-way
    /// latency and 4 KiB payload GB/s, beside an ArrayQueue between threads, a Unix socket
    /// pair between processes, memcpy bandwidth and cache-line ping-pong latency.
    Ring(RingArgs),
    /// The device side of `axle bench ring` (spawned by it; speaks on standard input).
    #[command(hide = true)]
    Device,
}

/// A fault the device injects, to show that the host's checks abort the run (tests).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fault {
    /// One payload of the records phase carries wrong bytes.
    Payload,
    /// One record of the records phase carries the wrong sequence number.
    Sequence,
}

/// Options of `axle bench ring`; every count has a default (smaller with `--quick`).
#[derive(Args, Debug, Clone)]
pub struct RingArgs {
    /// A smoke run of a few seconds (small counts; figures are rough).
    #[arg(long)]
    pub quick: bool,
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Records (and the ArrayQueue's 32-byte messages) timed for the records/s figure
    /// [default: 20000000; --quick: 2000000].
    #[arg(long, value_name = "N")]
    pub records: Option<u64>,
    /// Payloads per payload-tail update (D2) in the records phase [default: 32].
    #[arg(long, value_name = "N")]
    pub batch: Option<u32>,
    /// Slots of the metadata and payload rings of the records and latency phases (and the
    /// ArrayQueue's capacity) [default: 4096].
    #[arg(long, value_name = "N")]
    pub slots: Option<u32>,
    /// Latency samples (one record in flight at a time) of the ring and the ArrayQueue
    /// [default: 1000000; --quick: 50000].
    #[arg(long, value_name = "N")]
    pub latency_samples: Option<u64>,
    /// 4 KiB payloads timed on the ring and the ArrayQueue for the GB/s figure
    /// [default: 4000000; --quick: 400000].
    #[arg(long, value_name = "N")]
    pub payloads: Option<u64>,
    /// Slots of the 4 KiB payload ring (and buffers of the ArrayQueue's pool) [default: 256].
    #[arg(long, value_name = "N")]
    pub payload_slots: Option<u32>,
    /// Check every N-th 4 KiB payload in full (every payload's first and last words always)
    /// [default: 16].
    #[arg(long, value_name = "N")]
    pub verify_every: Option<u64>,
    /// memcpy buffer in MiB [default: twice the largest CPU cache, 256 to 1024; --quick:
    /// 128].
    #[arg(long, value_name = "MIB")]
    pub memcpy_mib: Option<u64>,
    /// memcpy repetitions (the median is reported) [default: 5; --quick: 3].
    #[arg(long, value_name = "N")]
    pub memcpy_reps: Option<u32>,
    /// Round trips of the cache-line ping-pong [default: 2000000; --quick: 200000].
    #[arg(long, value_name = "N")]
    pub pingpong_rounds: Option<u64>,
    /// 32-byte messages over the Unix socket (default: an eighth of --records; a system
    /// call each, so far slower than the ring).
    #[arg(long, value_name = "N")]
    pub socket_records: Option<u64>,
    /// Latency samples over the Unix socket (default: a tenth of --latency-samples).
    #[arg(long, value_name = "N")]
    pub socket_latency_samples: Option<u64>,
    /// 4 KiB payloads over the Unix socket (default: a quarter of --payloads).
    #[arg(long, value_name = "N")]
    pub socket_payloads: Option<u64>,
    /// Make the device inject a fault (tests of the checks).
    #[arg(long, value_enum, hide = true)]
    pub inject_fault: Option<Fault>,
}

/// The resolved sizes of one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// Whether `--quick` chose the defaults.
    pub quick: bool,
    /// Records (and baseline messages) timed for the records/s figure.
    pub records: u64,
    /// Payloads per payload-tail update.
    pub batch: u32,
    /// Slots of the records and latency rings.
    pub slots: u32,
    /// Latency samples per channel.
    pub latency_samples: u64,
    /// 4 KiB payloads timed per channel.
    pub payloads: u64,
    /// Slots of the 4 KiB payload ring.
    pub payload_slots: u32,
    /// Full check of every N-th 4 KiB payload.
    pub verify_every: u64,
    /// Bytes of the memcpy buffer.
    pub memcpy_bytes: u64,
    /// memcpy repetitions.
    pub memcpy_reps: u32,
    /// Ping-pong round trips.
    pub pingpong_rounds: u64,
    /// 32-byte messages timed on the Unix socket.
    pub socket_records: u64,
    /// Latency samples on the Unix socket.
    pub socket_latency_samples: u64,
    /// 4 KiB payloads timed on the Unix socket.
    pub socket_payloads: u64,
    /// The injected fault, if any.
    pub fault: Option<Fault>,
}

/// Bytes in a MiB.
const MIB: u64 = 1 << 20;

/// Largest memcpy buffer: 16 GiB (the machine's available memory bounds it further, for two
/// buffers).
const MAX_MEMCPY_MIB: u64 = 16 * 1024;

/// Largest count of timed work of any phase: 10^10, 500 times the default `--records`.
const MAX_COUNT: u64 = 10_000_000_000;

impl Plan {
    /// The sizes `args` ask for: explicit options, else the (quick) defaults.
    pub fn from_args(args: &RingArgs) -> anyhow::Result<Plan> {
        let quick = args.quick;
        let pick = |given: Option<u64>, full: u64, small: u64| {
            given.unwrap_or(if quick { small } else { full })
        };
        let memcpy_bytes = match args.memcpy_mib {
            Some(mib) => mib.saturating_mul(MIB),
            None if quick => 128 * MIB,
            None => default_memcpy_bytes(),
        };
        let records = pick(args.records, 20_000_000, 2_000_000);
        let latency_samples = pick(args.latency_samples, 1_000_000, 50_000);
        let payloads = pick(args.payloads, 4_000_000, 400_000);
        let plan = Plan {
            quick,
            records,
            batch: args.batch.unwrap_or(32),
            slots: args.slots.unwrap_or(4096),
            latency_samples,
            payloads,
            payload_slots: args.payload_slots.unwrap_or(256),
            verify_every: pick(args.verify_every, 16, 16),
            memcpy_bytes,
            memcpy_reps: args.memcpy_reps.unwrap_or(if quick { 3 } else { 5 }),
            pingpong_rounds: pick(args.pingpong_rounds, 2_000_000, 200_000),
            socket_records: args.socket_records.unwrap_or((records / 8).max(1)),
            socket_latency_samples: args
                .socket_latency_samples
                .unwrap_or((latency_samples / 10).max(1)),
            socket_payloads: args.socket_payloads.unwrap_or((payloads / 4).max(1)),
            fault: args.inject_fault,
        };
        plan.check()?;
        Ok(plan)
    }

    fn check(&self) -> anyhow::Result<()> {
        let positive = [
            ("--records", self.records),
            ("--batch", u64::from(self.batch)),
            ("--slots", u64::from(self.slots)),
            ("--latency-samples", self.latency_samples),
            ("--payloads", self.payloads),
            ("--payload-slots", u64::from(self.payload_slots)),
            ("--verify-every", self.verify_every),
            ("--memcpy-mib", self.memcpy_bytes / MIB),
            ("--memcpy-reps", u64::from(self.memcpy_reps)),
            ("--pingpong-rounds", self.pingpong_rounds),
            ("--socket-records", self.socket_records),
            ("--socket-latency-samples", self.socket_latency_samples),
            ("--socket-payloads", self.socket_payloads),
        ];
        for (name, value) in positive {
            if value == 0 {
                anyhow::bail!("{name} must be at least 1");
            }
        }
        use cosim_link::limits;
        let mib = self.memcpy_bytes / MIB;
        limits::check(
            "--memcpy-mib",
            mib,
            MAX_MEMCPY_MIB,
            "the memcpy benchmark's limit",
        )?;
        // The source and the destination: two buffers.
        limits::bytes("--memcpy-mib", mib, 2 * MIB)?;
        // Every latency sample is kept as a u64 until sorted, with room for a tenth more of
        // warm-up: 8.8 bytes per sample, 9 rounded up.
        for (name, samples) in [
            ("--latency-samples", self.latency_samples),
            ("--socket-latency-samples", self.socket_latency_samples),
            ("--pingpong-rounds", self.pingpong_rounds),
        ] {
            limits::bytes(name, samples, 9)?;
        }
        // The run's length: each count is timed work (and kept in samples above).
        for (name, count) in [
            ("--records", self.records),
            ("--payloads", self.payloads),
            ("--latency-samples", self.latency_samples),
            ("--pingpong-rounds", self.pingpong_rounds),
            ("--socket-records", self.socket_records),
            ("--socket-latency-samples", self.socket_latency_samples),
            ("--socket-payloads", self.socket_payloads),
        ] {
            limits::check(
                name,
                count,
                MAX_COUNT,
                "500 times the default --records; a bound on the benchmark's length",
            )?;
        }
        // The largest ring the frame allocator and the scatter-gather list are sized for
        // stays far below these.
        limits::check(
            "--slots",
            u64::from(self.slots),
            1 << 20,
            "the records ring's limit, within the frame allocator and scatter-gather list",
        )?;
        limits::check(
            "--payload-slots",
            u64::from(self.payload_slots),
            1 << 16,
            "the 4 KiB payload ring's limit, within the frame allocator and scatter-gather list",
        )?;
        Ok(())
    }
}

/// Twice the largest CPU cache Linux reports (so the copy streams from memory), at least
/// 256 MiB, at most 1 GiB.
fn default_memcpy_bytes() -> u64 {
    let largest = (0..8)
        .filter_map(|index| {
            std::fs::read_to_string(format!(
                "/sys/devices/system/cpu/cpu0/cache/index{index}/size"
            ))
            .ok()
        })
        .filter_map(|text| parse_cache_size(text.trim()))
        .max()
        .unwrap_or(0);
    largest
        .saturating_mul(2)
        .div_ceil(MIB)
        .saturating_mul(MIB)
        .clamp(256 * MIB, 1024 * MIB)
}

/// `"266240K"`, `"2M"` or `"512"` (bytes) as bytes.
fn parse_cache_size(text: &str) -> Option<u64> {
    let (digits, scale) = match text.as_bytes().last()? {
        b'K' => (&text[..text.len() - 1], 1024),
        b'M' => (&text[..text.len() - 1], MIB),
        b'G' => (&text[..text.len() - 1], 1024 * MIB),
        _ => (text, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(scale)
}

/// Runs `axle bench ...`.
pub fn command(args: BenchArgs) -> anyhow::Result<ExitCode> {
    match args.which {
        BenchCommand::Ring(args) => ring_command(&args),
        BenchCommand::Device => device_command(),
    }
}

fn ring_command(args: &RingArgs) -> anyhow::Result<ExitCode> {
    let plan = Plan::from_args(args)?;
    let report = host::run(&plan)?;
    if args.json {
        crate::write_stdout(&format!("{}\n", serde_json::to_string_pretty(&report)?))?;
    } else {
        crate::write_stdout(&report.human())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn device_command() -> anyhow::Result<ExitCode> {
    device::main()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_parse_with_their_unit() {
        assert_eq!(parse_cache_size("48K"), Some(48 * 1024));
        assert_eq!(parse_cache_size("266240K"), Some(266_240 * 1024));
        assert_eq!(parse_cache_size("2M"), Some(2 * MIB));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size(""), None);
        assert_eq!(parse_cache_size("xK"), None);
    }

    #[test]
    fn the_default_memcpy_buffer_is_between_256_mib_and_1_gib() {
        let bytes = default_memcpy_bytes();
        assert!((256 * MIB..=1024 * MIB).contains(&bytes), "{bytes}");
        assert_eq!(bytes % MIB, 0);
    }

    fn args() -> RingArgs {
        RingArgs {
            quick: false,
            json: false,
            records: None,
            batch: None,
            slots: None,
            latency_samples: None,
            payloads: None,
            payload_slots: None,
            verify_every: None,
            memcpy_mib: None,
            memcpy_reps: None,
            pingpong_rounds: None,
            socket_records: None,
            socket_latency_samples: None,
            socket_payloads: None,
            inject_fault: None,
        }
    }

    #[test]
    fn explicit_options_win_over_quick_defaults() {
        let mut given = args();
        given.quick = true;
        given.records = Some(1234);
        let plan = Plan::from_args(&given).unwrap();
        assert_eq!(plan.records, 1234);
        assert_eq!(plan.socket_records, 1234 / 8);
        assert_eq!(plan.latency_samples, 50_000);
        assert_eq!(plan.memcpy_bytes, 128 * MIB);
    }

    #[test]
    fn sizes_beyond_the_machine_are_refused_before_the_run() {
        // 16 GiB of memcpy buffers (32 GiB for both) used to exhaust the machine.
        let mut given = args();
        given.memcpy_mib = Some(16 * 1024);
        if cosim_link::limits::Machine::get().memory_budget < 32 << 30 {
            let error = Plan::from_args(&given).unwrap_err().to_string();
            assert!(
                error.contains("--memcpy-mib") && error.contains("16384"),
                "{error}"
            );
        }
        let mut given = args();
        given.latency_samples = Some(1 << 62);
        let error = Plan::from_args(&given).unwrap_err().to_string();
        assert!(error.contains("--latency-samples"), "{error}");
        let mut given = args();
        given.pingpong_rounds = Some(1 << 62);
        assert!(Plan::from_args(&given).is_err());
    }

    #[test]
    fn zero_counts_are_refused() {
        let mut given = args();
        given.batch = Some(0);
        assert!(Plan::from_args(&given).is_err());
        let mut given = args();
        given.memcpy_mib = Some(0);
        assert!(Plan::from_args(&given).is_err());
    }
}
