//! What `axle bench ring` prints: every figure absolute and as a ratio to what it compares
//! with, as a table or as JSON.

use crate::bench::Plan;
use serde::Serialize;
use std::fmt::Write;

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// `"ring"`.
    pub benchmark: String,
    /// `"wall"`: these are wall-clock figures of this machine, not virtual time.
    pub clock: String,
    /// Where it ran.
    pub machine: Machine,
    /// The machine's limits, measured in the same run.
    pub limits: Limits,
    /// The AXLE ring between two processes.
    pub ring: Channel,
    /// A `crossbeam_queue::ArrayQueue` between two threads.
    pub array_queue: Channel,
    /// A Unix socket pair between two processes.
    pub unix_socket: Channel,
    /// The headline ratios.
    pub ratios: Ratios,
    /// What the ring protocol did in the records phase.
    pub ring_protocol: RingProtocol,
    /// The sizes.
    pub plan: Plan,
    /// Seconds the whole benchmark took.
    pub wall_seconds: f64,
}

/// Where it ran.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// CPUs this process may run on.
    pub cpus: u64,
    /// Always false: nothing is pinned (the machine is shared).
    pub pinned: bool,
    /// What that means for the figures.
    pub note: String,
    /// `/proc/loadavg` when the benchmark started (1, 5, 15 minutes): other load on the
    /// machine makes the figures worse.
    pub load_average: String,
}

/// The machine's limits.
#[derive(Clone, Debug, Serialize)]
pub struct Limits {
    /// memcpy bandwidth, bytes copied per second / 1e9 (median of the repetitions).
    pub memcpy_gbps: f64,
    /// Bytes of the memcpy buffer.
    pub memcpy_buffer_bytes: u64,
    /// One-way time of a cache line between the two processes: p50 of the round trips / 2.
    pub pingpong_one_way_p50_ns: f64,
    /// p99 of the round trips / 2.
    pub pingpong_one_way_p99_ns: f64,
}

/// The three figures of one channel, absolute and as ratios.
#[derive(Clone, Debug, Serialize)]
pub struct Channel {
    /// What it is.
    pub what: String,
    /// 32-byte messages (ring: metadata records) per second.
    pub messages_per_s: f64,
    /// One-way latency, median, ns.
    pub latency_p50_ns: u64,
    /// One-way latency, 99th percentile, ns.
    pub latency_p99_ns: u64,
    /// 4 KiB payload bytes delivered per second / 1e9.
    pub payload_gbps: f64,
    /// `messages_per_s` / the ring's records per second.
    pub messages_per_s_over_ring: f64,
    /// `latency_p50_ns` / the cache-line one-way p50.
    pub latency_p50_over_pingpong: f64,
    /// `latency_p99_ns` / the cache-line one-way p99.
    pub latency_p99_over_pingpong: f64,
    /// `payload_gbps` / memcpy GB/s.
    pub payload_gbps_over_memcpy: f64,
}

/// The headline ratios.
#[derive(Clone, Debug, Serialize)]
pub struct Ratios {
    /// Ring 4 KiB payload GB/s / memcpy GB/s.
    pub ring_payload_gbps_over_memcpy: f64,
    /// Ring one-way latency p50 / cache-line one-way p50.
    pub ring_latency_p50_over_pingpong: f64,
    /// Ring records/s / ArrayQueue messages/s.
    pub ring_records_per_s_over_array_queue: f64,
    /// Ring records/s / Unix socket messages/s.
    pub ring_records_per_s_over_unix_socket: f64,
}

/// What the ring protocol did in the records phase (warm-up included).
#[derive(Clone, Debug, Serialize)]
pub struct RingProtocol {
    /// Records (and payloads) published.
    pub records: u64,
    /// Payload-tail stores (D2).
    pub payload_tail_updates: u64,
    /// Reads of the host's heads because the cached copy said full (D5).
    pub head_reads: u64,
    /// Head publications by the host (H2/H3 pairs; at most one per poll).
    pub head_publications: u64,
}

/// `a / b`, or 0 when `b` is 0.
pub fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

fn rate(value: f64) -> String {
    if value >= 1e6 {
        format!("{:.2} M", value / 1e6)
    } else if value >= 1e3 {
        format!("{:.1} k", value / 1e3)
    } else {
        format!("{value:.0}")
    }
}

impl BenchReport {
    /// The human report.
    pub fn human(&self) -> String {
        let mut out = String::new();
        let _ = self.write_human(&mut out);
        out
    }

    fn write_human(&self, out: &mut String) -> std::fmt::Result {
        let limits = &self.limits;
        writeln!(
            out,
            "axle bench ring: the AXLE ring protocol live, wall-clock time (not virtual time)"
        )?;
        writeln!(
            out,
            "machine: {} CPUs, load average {} at the start; {}",
            self.machine.cpus, self.machine.load_average, self.machine.note
        )?;
        if self.plan.quick {
            writeln!(out, "--quick: small counts, rough figures (a smoke run)")?;
        }
        writeln!(out)?;
        writeln!(out, "machine limits (same run)")?;
        writeln!(
            out,
            "  memcpy, {} MiB buffer, median of {} copies     {:>8.2} GB/s",
            limits.memcpy_buffer_bytes >> 20,
            self.plan.memcpy_reps,
            limits.memcpy_gbps
        )?;
        writeln!(
            out,
            "  cache line between the two processes, one way  p50 {:.0} ns, p99 {:.0} ns ({} round trips / 2)",
            limits.pingpong_one_way_p50_ns, limits.pingpong_one_way_p99_ns, self.plan.pingpong_rounds
        )?;
        writeln!(out)?;
        writeln!(
            out,
            "  {:<28} {:>11} {:>8} {:>12} {:>10} {:>9} {:>9} {:>9} {:>8}",
            "channel",
            "msgs/s",
            "/ ring",
            "latency p50",
            "p99",
            "p50/pp",
            "p99/pp",
            "4K GB/s",
            "/memcpy"
        )?;
        for channel in [&self.ring, &self.array_queue, &self.unix_socket] {
            writeln!(
                out,
                "  {:<28} {:>11} {:>8.2} {:>9} ns {:>7} ns {:>9.1} {:>9.1} {:>9.2} {:>8.2}",
                channel.what,
                rate(channel.messages_per_s),
                channel.messages_per_s_over_ring,
                channel.latency_p50_ns,
                channel.latency_p99_ns,
                channel.latency_p50_over_pingpong,
                channel.latency_p99_over_pingpong,
                channel.payload_gbps,
                channel.payload_gbps_over_memcpy
            )?;
        }
        writeln!(out)?;
        let ratios = &self.ratios;
        writeln!(out, "headline ratios")?;
        writeln!(
            out,
            "  ring payload GB/s / memcpy GB/s               {:>8.2}",
            ratios.ring_payload_gbps_over_memcpy
        )?;
        writeln!(
            out,
            "  ring latency p50 / cache-line one way p50     {:>8.2}",
            ratios.ring_latency_p50_over_pingpong
        )?;
        writeln!(
            out,
            "  ring records/s / ArrayQueue messages/s        {:>8.2}",
            ratios.ring_records_per_s_over_array_queue
        )?;
        writeln!(
            out,
            "  ring records/s / Unix socket messages/s       {:>8.2}",
            ratios.ring_records_per_s_over_unix_socket
        )?;
        writeln!(out)?;
        let protocol = &self.ring_protocol;
        writeln!(
            out,
            "ring protocol, records phase: {} records, {} payload-tail stores (D2, batch {}), {} head reads (D5), {} head publications (H2/H3)",
            protocol.records,
            protocol.payload_tail_updates,
            self.plan.batch,
            protocol.head_reads,
            protocol.head_publications
        )?;
        writeln!(
            out,
            "sizes: {} records on {} slots; {} latency samples; {} payloads of 4 KiB on {} slots (ArrayQueue the same; Unix socket {}, {}, {}: a system call per message)",
            self.plan.records,
            self.plan.slots,
            self.plan.latency_samples,
            self.plan.payloads,
            self.plan.payload_slots,
            self.plan.socket_records,
            self.plan.socket_latency_samples,
            self.plan.socket_payloads
        )?;
        writeln!(
            out,
            "checked: every record (sequence, tag, offset, length, flags) and its payload; every 4 KiB payload's first and last words, every {}th in full; every baseline message",
            self.plan.verify_every
        )?;
        writeln!(out, "wall time {:.1} s", self.wall_seconds)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_of_zero_are_zero_not_infinite() {
        assert_eq!(ratio(1.0, 0.0), 0.0);
        assert_eq!(ratio(3.0, 2.0), 1.5);
    }

    #[test]
    fn rates_read_as_millions_or_thousands() {
        assert_eq!(rate(12_345_678.0), "12.35 M");
        assert_eq!(rate(45_600.0), "45.6 k");
        assert_eq!(rate(12.0), "12");
    }
}
