//! The host side of `axle bench ring`: sets up the segments and the device process, runs every
//! phase, and assembles the report.
//!
//! Order: memcpy first (before the device process exists, so nothing else spins), then the
//! cache-line ping-pong, the three ring phases, the ArrayQueue phases (the device process
//! waits for its next order, blocked, meanwhile) and the three socket phases.

use crate::bench::baselines::{array_queue, socket_host, ChannelRun, Sizes, SocketResult};
use crate::bench::limits::{memcpy_gbps, p50_p99, pingpong_host};
use crate::bench::report::{ratio, BenchReport, Channel, Limits, Machine, Ratios, RingProtocol};
use crate::bench::ring::{host_latency, host_payloads, host_records, Consumer, Timed};
use crate::bench::wire::{
    Order, Peer, ProducerStats, Reply, RingKind, RingPhase, SocketKind, SocketPhase, Watch,
    PHASE_TIMEOUT,
};
use crate::bench::Plan;
use anyhow::{bail, Context};
use cosim_link::shm::MappedWords;
use host_driver::dma::{DmaRegion, Quiesced};
use host_driver::frames::{FrameAllocator, FRAME_SIZE};
use host_driver::phys::PhysicalMemory;
use host_driver::shadow::init_control_block;
use host_driver::sync::Arc;
use shared_abi::region::RingLayout;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::time::Instant;

/// Bytes of a 4 KiB payload.
const PAYLOAD_BYTES: u32 = 4096;

fn layout(capacity: u32, slot_size: u32) -> anyhow::Result<RingLayout> {
    RingLayout::new(capacity, capacity, slot_size)
        .map_err(|status| anyhow::anyhow!("ring of {capacity} x {slot_size} B: {status:?}"))
}

/// Everything the host holds during the run.
struct Host {
    plan: Plan,
    peer: Peer,
    memory: Arc<PhysicalMemory>,
    allocator: FrameAllocator,
    page: MappedWords,
    socket: UnixStream,
    epoch: u64,
}

/// Runs the benchmark `plan` describes.
pub fn run(plan: &Plan) -> anyhow::Result<BenchReport> {
    let started = Instant::now();
    let load_average = std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".into());
    let memcpy = memcpy_gbps(plan.memcpy_bytes, plan.memcpy_reps).context("memcpy")?;
    log::info!(
        "bench: memcpy took {:.2} s",
        started.elapsed().as_secs_f64()
    );

    let layouts = [
        layout(plan.slots, 8)?,
        layout(plan.slots, 16)?,
        layout(plan.payload_slots, PAYLOAD_BYTES)?,
    ];
    // Room for every region twice over: the frame allocator scatters on purpose and never
    // makes two runs of a region adjacent.
    let memory_bytes = layouts
        .iter()
        .map(RingLayout::region_length)
        .sum::<u64>()
        .saturating_mul(2)
        .saturating_add(64 * FRAME_SIZE);
    let (memory_words, memory_fd) = MappedWords::create("axle-bench-host-memory", memory_bytes)?;
    if let Err(error) = memory_words.lock() {
        log::debug!("bench: cannot mlock host memory ({error}); pages are touched instead");
    }
    let memory =
        Arc::new(PhysicalMemory::from_mapped(memory_words).map_err(|e| anyhow::anyhow!("{e}"))?);
    let (page, page_fd) = MappedWords::create("axle-bench-pingpong", 4096)?;
    let (socket, device_socket) = UnixStream::pair()?;
    socket.set_read_timeout(Some(PHASE_TIMEOUT))?;

    let mut peer = Peer::spawn()?;
    peer.order(
        &Order::Setup {
            memory_bytes,
            page_bytes: 4096,
        },
        &[memory_fd.as_fd(), page_fd.as_fd(), device_socket.as_fd()],
    )?;
    // Only the device holds its end now: its death is end-of-file on ours.
    drop(device_socket);
    drop(memory_fd);
    drop(page_fd);
    match peer.reply()? {
        Reply::Ready => {}
        other => bail!("device process answered {other:?} to Setup"),
    }
    let mut host = Host {
        plan: plan.clone(),
        peer,
        allocator: FrameAllocator::new(memory.len()),
        memory,
        page,
        socket,
        epoch: 0,
    };
    let mut report = host.measure(memcpy, &layouts, started)?;
    report.machine.load_average = load_average;
    host.peer.finish()?;
    Ok(report)
}

/// Runs `work` with a watch that fails when the device process exits or the phase overruns.
fn watched<T>(
    peer: &mut Peer,
    work: impl FnOnce(&mut Watch<'_>) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let deadline = Instant::now() + PHASE_TIMEOUT;
    let mut check = || {
        peer.check_alive()?;
        if Instant::now() > deadline {
            bail!("a phase took more than {} s", PHASE_TIMEOUT.as_secs());
        }
        Ok(())
    };
    let mut watch = Watch::new(&mut check);
    work(&mut watch)
}

impl Host {
    fn measure(
        &mut self,
        memcpy: f64,
        layouts: &[RingLayout; 3],
        started: Instant,
    ) -> anyhow::Result<BenchReport> {
        let plan = self.plan.clone();
        let [records_layout, latency_layout, payloads_layout] = *layouts;
        let records_warmup = 2 * u64::from(plan.slots);
        let latency_warmup = (plan.latency_samples / 10).max(10);
        let payloads_warmup = 2 * u64::from(plan.payload_slots);

        // The cache line between the processes.
        let pingpong_started = Instant::now();
        self.peer.order(
            &Order::PingPong {
                rounds: plan.pingpong_rounds,
            },
            &[],
        )?;
        let words = self.page.words();
        let mut round_trips = watched(&mut self.peer, |watch| {
            pingpong_host(words, plan.pingpong_rounds, watch)
        })?;
        self.peer.done()?;
        log::info!(
            "bench: ping-pong took {:.2} s",
            pingpong_started.elapsed().as_secs_f64()
        );
        let (rtt_p50, rtt_p99) = p50_p99(&mut round_trips);
        let limits = Limits {
            memcpy_gbps: memcpy,
            memcpy_buffer_bytes: plan.memcpy_bytes,
            pingpong_one_way_p50_ns: rtt_p50 as f64 / 2.0,
            pingpong_one_way_p99_ns: rtt_p99 as f64 / 2.0,
        };

        // The ring.
        let (records, protocol) = self.ring_phase(
            RingKind::Records,
            records_layout,
            plan.records + records_warmup,
            |consumer, watch| {
                host_records(
                    consumer,
                    plan.records + records_warmup,
                    records_warmup,
                    watch,
                )
            },
        )?;
        let (mut latencies, _) = self.ring_phase(
            RingKind::Latency,
            latency_layout,
            plan.latency_samples + latency_warmup,
            |consumer, watch| {
                host_latency(
                    consumer,
                    plan.latency_samples + latency_warmup,
                    latency_warmup,
                    watch,
                )
            },
        )?;
        let (payloads, _) = self.ring_phase(
            RingKind::Payloads,
            payloads_layout,
            plan.payloads + payloads_warmup,
            |consumer, watch| {
                host_payloads(
                    consumer,
                    plan.payloads + payloads_warmup,
                    payloads_warmup,
                    plan.verify_every,
                    watch,
                )
            },
        )?;
        let ring_run = ChannelRun {
            messages: records,
            latencies: std::mem::take(&mut latencies),
            payloads,
        };

        // The baselines.
        let sizes = Sizes {
            messages: plan.records,
            messages_warmup: records_warmup,
            latency: plan.latency_samples,
            latency_warmup,
            payloads: plan.payloads,
            payloads_warmup,
            capacity: plan.slots as usize,
            pool: plan.payload_slots as usize,
            verify_every: plan.verify_every,
        };
        let queue_started = Instant::now();
        let queue_run = {
            let deadline = Instant::now() + PHASE_TIMEOUT;
            let mut check = || {
                if Instant::now() > deadline {
                    bail!(
                        "the ArrayQueue phases took more than {} s",
                        PHASE_TIMEOUT.as_secs()
                    );
                }
                Ok(())
            };
            array_queue(&sizes, &mut Watch::new(&mut check)).context("ArrayQueue")?
        };
        log::info!(
            "bench: ArrayQueue phases took {:.2} s",
            queue_started.elapsed().as_secs_f64()
        );
        let socket_run = ChannelRun {
            messages: self
                .socket_phase(SocketKind::Messages, plan.socket_records, records_warmup)?
                .timed()?,
            latencies: self
                .socket_phase(
                    SocketKind::Latency,
                    plan.socket_latency_samples,
                    (plan.socket_latency_samples / 10).max(10),
                )?
                .latencies()?,
            payloads: self
                .socket_phase(SocketKind::Payloads, plan.socket_payloads, payloads_warmup)?
                .timed()?,
        };

        let ring_rate = ring_run.messages.per_second();
        let channel = |what: &str, mut run: ChannelRun| {
            let (p50, p99) = p50_p99(&mut run.latencies);
            let gbps = payload_gbps(&run.payloads);
            Channel {
                what: what.into(),
                messages_per_s: run.messages.per_second(),
                latency_p50_ns: p50,
                latency_p99_ns: p99,
                payload_gbps: gbps,
                messages_per_s_over_ring: ratio(run.messages.per_second(), ring_rate),
                latency_p50_over_pingpong: ratio(p50 as f64, limits.pingpong_one_way_p50_ns),
                latency_p99_over_pingpong: ratio(p99 as f64, limits.pingpong_one_way_p99_ns),
                payload_gbps_over_memcpy: ratio(gbps, memcpy),
            }
        };
        let ring = channel("AXLE ring (2 processes)", ring_run);
        let array_queue = channel("ArrayQueue (2 threads)", queue_run);
        let unix_socket = channel("Unix socket (2 processes)", socket_run);
        let ratios = Ratios {
            ring_payload_gbps_over_memcpy: ring.payload_gbps_over_memcpy,
            ring_latency_p50_over_pingpong: ring.latency_p50_over_pingpong,
            ring_records_per_s_over_array_queue: ratio(
                ring.messages_per_s,
                array_queue.messages_per_s,
            ),
            ring_records_per_s_over_unix_socket: ratio(
                ring.messages_per_s,
                unix_socket.messages_per_s,
            ),
        };
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        Ok(BenchReport {
            benchmark: "ring".into(),
            clock: "wall".into(),
            machine: Machine {
                cpus,
                pinned: false,
                note: "shared machine, nothing pinned; both sides busy-poll, so the figures \
                       assume two otherwise idle CPUs and vary with the load"
                    .into(),
                load_average: String::new(),
            },
            limits,
            ring,
            array_queue,
            unix_socket,
            ratios,
            ring_protocol: RingProtocol {
                records: protocol.0.payloads,
                payload_tail_updates: protocol.0.payload_tail_updates,
                head_reads: protocol.0.head_reads,
                head_publications: protocol.1,
            },
            plan,
            wall_seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// One ring phase: a fresh region (scattered frames, control block initialised), the
    /// order to the device, the host's `consume`, the device's answer.
    fn ring_phase<T>(
        &mut self,
        kind: RingKind,
        layout: RingLayout,
        total: u64,
        consume: impl FnOnce(&mut Consumer<'_>, &mut Watch<'_>) -> anyhow::Result<T>,
    ) -> anyhow::Result<(T, (ProducerStats, u64))> {
        let phase_started = Instant::now();
        self.epoch += 1;
        let region = DmaRegion::allocate(
            Arc::clone(&self.memory),
            &mut self.allocator,
            layout.region_length(),
        )?;
        // Fault every page into this process's mapping before anything is timed.
        let zero = [0u8; FRAME_SIZE as usize];
        for page in 0..region.len() / FRAME_SIZE {
            region.write_bytes(page * FRAME_SIZE, &zero)?;
        }
        init_control_block(&region, &layout, self.epoch)?;
        // The order names the frames: the device may write them from here on.
        let region = region.hand_to_device();
        let phase = RingPhase {
            kind,
            frames: region.frames().iter().map(|frame| frame.0).collect(),
            metadata_capacity: layout.metadata_capacity(),
            payload_capacity: layout.payload_capacity(),
            slot_size: layout.slot_size(),
            epoch: self.epoch,
            total,
            batch: self.plan.batch,
            fault: self.plan.fault.filter(|_| kind == RingKind::Records),
        };
        self.peer.order(&Order::Ring(phase), &[])?;
        let (value, publications) = watched(&mut self.peer, |watch| {
            let mut consumer = Consumer::new(&region, layout)?;
            let value =
                consume(&mut consumer, watch).with_context(|| format!("ring phase {kind:?}"))?;
            Ok((value, consumer.publications()))
        })?;
        let stats = self.peer.done()?;
        log::info!(
            "bench: ring phase {kind:?} took {:.2} s",
            phase_started.elapsed().as_secs_f64()
        );
        // The device's final answer (`done`) is its acknowledgement: the frames are ours again.
        region
            .quiesce(Quiesced::device_acknowledged())
            .release(&mut self.allocator)?;
        Ok((value, (stats, publications)))
    }

    /// One socket phase: the order to the device, the host's reads, the device's answer.
    fn socket_phase(
        &mut self,
        kind: SocketKind,
        count: u64,
        warmup: u64,
    ) -> anyhow::Result<SocketResult> {
        let phase = SocketPhase {
            kind,
            total: count + warmup,
        };
        let phase_started = Instant::now();
        self.peer.order(&Order::Socket(phase), &[])?;
        let result = socket_host(&self.socket, phase, warmup, self.plan.verify_every)
            .with_context(|| format!("socket phase {kind:?}"));
        let result = match result {
            Ok(result) => result,
            Err(error) => {
                // Say why the device stopped writing, if it did.
                self.peer.check_alive().context(format!("{error:#}"))?;
                return Err(error);
            }
        };
        self.peer.done()?;
        log::info!(
            "bench: socket phase {kind:?} took {:.2} s",
            phase_started.elapsed().as_secs_f64()
        );
        Ok(result)
    }
}

impl SocketResult {
    fn timed(self) -> anyhow::Result<Timed> {
        match self {
            SocketResult::Timed(timed) => Ok(timed),
            SocketResult::Latencies(_) => bail!("a socket phase returned latencies"),
        }
    }

    fn latencies(self) -> anyhow::Result<Vec<u64>> {
        match self {
            SocketResult::Latencies(samples) => Ok(samples),
            SocketResult::Timed(_) => bail!("a socket phase returned a rate"),
        }
    }
}

/// 4 KiB payload bytes per second / 1e9.
fn payload_gbps(timed: &Timed) -> f64 {
    timed.per_second() * f64::from(PAYLOAD_BYTES) / 1e9
}
