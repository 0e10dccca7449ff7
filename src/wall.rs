//! Wall-clock mode (`axle run W --mode M --clock wall`): the emulator and the host runtime
//! free-running on two threads against the real clock, with real concurrency over the same
//! rings, for stress and fault finding (DESIGN.md section 3, last paragraph).
//!
//! The run is wired exactly as an in-process virtual-time run ([`crate::run::run_wall`] shares
//! the preparation, the host runtime, the checks and the report with [`crate::run::run`]); only
//! the driving differs (`drive`):
//!
//! - the device thread owns the [`Emulator`] and runs [`Emulator::run_wall`]: now is the real
//!   time since a shared start, the host's link calls arrive over a channel and go through the
//!   same link code as in virtual time, every event runs when its time has come, and DMA
//!   writes land in the shared host memory while the host polls it;
//! - the host thread (the calling thread) runs the unchanged [`Runtime`] under
//!   `cosim_link::wall::serve_host`: responses in, `turn(real now)`, link calls out, wait.
//!
//! Attached (`--clock wall --attach PATH`, [`crate::run::run_wall_attached`]), the device
//! thread is the emulator process's and the two ports are carried over the session's socket
//! (`cosim_link::wall_socket`); the device's end state comes back with the outcome.
//!
//! Its figures are **wall-clock figures** and vary from run to run: the end-to-end runtime,
//! host busy time and host stall are measured by the host on the real clock; the device's
//! components (CCM busy, data movement, back-pressure) are the device's modelled durations on
//! a timeline anchored to the real clock (an event the device thread reaches late keeps its
//! modelled time). The report says `"clock": "wall"`.
//!
//! # Stress
//!
//! A [`WallStress`] adds seeded random delays on both sides: each DMA write's landing time
//! (keeping the landings in chain order, the protocol's premise), the device loop, the host
//! thread's turns, its local polls and its task completions. The same seed draws the same
//! delays (the interleaving of the two threads still varies), so a failing case is named by
//! its seed: `axle run ... --clock wall --stress-seed N` reruns it.
//!
//! # What makes a run fail
//!
//! Everything that fails a virtual-time run (a wrong answer, every ring invariant the host's
//! ring code checks: record sequence equal to its index, tail never behind the head nor
//! beyond capacity, payload slots inside the window, no slot consumed twice, a BROKEN device
//! status), a deadlock (detected exactly by the device thread, or by the runtime's stall
//! timeout, which is real time here: with the ring full, a deadlock; with room in the ring,
//! "no progress", the device stopped or fell behind the clock), the wall-clock limit
//! ([`WallOptions::limit`]), and the end-of-run checks of [`EndState::violations`].

use crate::run::{RunFailure, RunReport};
use cosim_link::jitter::{Jitter, JitterSpec};
use cosim_link::wall::{ports, serve_host, HostOptions, WallClock, WallError};
use emulator::DeviceMetrics;
use emulator::Emulator;
use host_runtime::modes::axle::RingState;
use host_runtime::{Runtime, Stretch};
use shared_abi::Ticks;
use std::time::Duration;

/// Default bound on a wall-clock run's real time in [`WallOptions::default`]; `axle run`
/// passes the run's own budget (`--wall-limit`, `crate::run::default_wall_limit`).
pub const DEFAULT_LIMIT: Duration = Duration::from_secs(60);

/// The stream number of each stress point (so that each draws its own sequence).
mod streams {
    pub const DMA_LANDING: u64 = 1;
    pub const DEVICE_LOOP: u64 = 2;
    pub const HOST_TURN: u64 = 3;
    pub const HOST_POLL: u64 = 4;
    pub const HOST_TASK: u64 = 5;
}

/// Seeded random delays for a stress run (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WallStress {
    /// The seed of every delay.
    pub seed: u64,
    /// Extra delay of each DMA write's landing (modelled time; landings stay in order).
    pub dma_landing: JitterSpec,
    /// Real time the device thread stalls at an iteration of its loop.
    pub device_loop: JitterSpec,
    /// Real time the host thread stalls before a turn.
    pub host_turn: JitterSpec,
    /// Extra delay of the next local poll (AXLE polling).
    pub host_poll: JitterSpec,
    /// Extra duration of a host task (its completion comes later).
    pub host_task: JitterSpec,
    /// Fault injection: the jittered DMA landings may overtake each other, breaking the
    /// posted-write ordering the protocol relies on (a tail may land before what it
    /// publishes). Only for showing that the checks catch a broken protocol; off in
    /// [`WallStress::standard`].
    pub break_landing_order: bool,
}

impl WallStress {
    /// The standard stress profile with `seed`: frequent short delays and rare long ones at
    /// every point, microseconds to a few hundred microseconds, so that polls, landings and
    /// task completions overtake each other in every order.
    pub fn standard(seed: u64) -> WallStress {
        let mut pick = Jitter::new(JitterSpec::NONE, seed, 0);
        // Each seed also draws its own rates, so runs differ in character, not only in detail.
        let mut rate = |low: u64, high: u64| (low + pick.below(high - low + 1)) as u32;
        WallStress {
            seed,
            dma_landing: JitterSpec::new(rate(50, 400), 3_000),
            device_loop: JitterSpec::new(rate(5, 60), 40_000),
            host_turn: JitterSpec::new(rate(5, 60), 40_000),
            host_poll: JitterSpec::new(rate(20, 300), 5_000),
            host_task: JitterSpec::new(rate(50, 400), 20_000),
            break_landing_order: false,
        }
    }

    fn jitter(&self, spec: JitterSpec, stream: u64) -> Option<Jitter> {
        spec.is_active()
            .then(|| Jitter::new(spec, self.seed, stream))
    }
}

/// How a wall-clock run runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WallOptions {
    /// The run fails when it has not finished after this much real time.
    pub limit: Duration,
    /// Random delays, if any.
    pub stress: Option<WallStress>,
}

impl Default for WallOptions {
    fn default() -> Self {
        WallOptions {
            limit: DEFAULT_LIMIT,
            stress: None,
        }
    }
}

/// What both sides left behind at the end of a wall-clock run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndState {
    /// The rings (streaming modes), as the host's ring code reads them.
    pub ring: Option<RingState>,
    /// The firmware's counters.
    pub firmware: firmware::trace::Counters,
    /// The firmware's DMA executor has nothing in flight and no batch open.
    pub streaming_idle: bool,
    /// The executor waits for ring credit (an uncounted back-pressure interval).
    pub waiting_for_credit: bool,
    /// The firmware latched the ring BROKEN with this status code.
    pub broken: Option<u32>,
    /// The executor's metadata and payload tails.
    pub stream_tails: (u64, u64),
    /// The device's measurements.
    pub device: DeviceMetrics,
    /// The device's clock at the end.
    pub device_time: Ticks,
    /// The host thread's counts.
    pub host: HostCounts,
}

/// What the host thread of a wall-clock run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostCounts {
    /// Turns the runtime took.
    pub turns: u64,
    /// Turns sent to the device (those with link calls, and the waits for a response).
    pub sent: u64,
    /// Responses delivered to the runtime.
    pub delivered: u64,
    /// Attached runs: interrupts the emulator signalled on the host's eventfd (0 in-process).
    pub signalled: u64,
}

impl EndState {
    /// Every end-of-run check that fails, in words (empty when all hold):
    ///
    /// - the device status word is 0 and the firmware latched nothing;
    /// - metadata head == metadata tail == payloads streamed (device and firmware counts,
    ///   and the executor's own tails), and payload head == payload tail;
    /// - no gap left, no record left in the ready pool, and the heads mirrored into the
    ///   control block are not ahead of the host's;
    /// - the firmware's counters are sane: no launch refused, every DMA request it submitted
    ///   was sent, the executor idle and not waiting for credit (so no back-pressure interval
    ///   is left uncounted), back-pressure never longer than the device ran, and back-pressure
    ///   only after a read of the heads (edge D5).
    pub fn violations(&self, report: &RunReport) -> Vec<String> {
        let mut found = Vec::new();
        let mut check = |holds: bool, what: String| {
            if !holds {
                found.push(what);
            }
        };
        let counters = &self.firmware;
        check(
            self.broken.is_none(),
            format!("the firmware latched the ring BROKEN ({:?})", self.broken),
        );
        check(
            counters.refused == 0,
            format!("the firmware refused {} launches", counters.refused),
        );
        check(
            counters.launches == report.metrics.launches,
            format!(
                "the firmware accepted {} launches, the host completed {}",
                counters.launches, report.metrics.launches
            ),
        );
        check(
            counters.dma_requests == self.device.dma_requests,
            format!(
                "the firmware submitted {} DMA requests, the engine sent {}",
                counters.dma_requests, self.device.dma_requests
            ),
        );
        check(
            self.streaming_idle,
            "the DMA executor still has a request in flight or a batch open".into(),
        );
        check(
            !self.waiting_for_credit,
            "the DMA executor still waits for credit (back-pressure not counted)".into(),
        );
        check(
            Ticks(counters.backpressure_ticks) <= self.device_time,
            format!(
                "back-pressure of {} ticks in a device run of {} ticks",
                counters.backpressure_ticks, self.device_time.0
            ),
        );
        check(
            counters.backpressure_ticks == 0 || counters.head_reads > 0,
            "back-pressure without a read of the heads".into(),
        );
        let Some(ring) = self.ring else {
            check(
                counters.payloads == 0 && self.device.payloads == 0,
                format!("{} payloads streamed without a ring", counters.payloads),
            );
            return found;
        };
        check(
            ring.device_status == 0,
            format!("device status word {:#x}", ring.device_status),
        );
        check(
            ring.metadata_head == ring.metadata_tail
                && ring.metadata_tail == counters.payloads
                && counters.payloads == self.device.payloads
                && self.stream_tails.0 == ring.metadata_tail,
            format!(
                "metadata head {} / metadata tail {} / payloads streamed {} (device {}, executor tail {})",
                ring.metadata_head,
                ring.metadata_tail,
                counters.payloads,
                self.device.payloads,
                self.stream_tails.0
            ),
        );
        check(
            ring.payload_head == ring.payload_tail
                && ring.payload_tail == ring.metadata_tail
                && self.stream_tails.1 == ring.payload_tail,
            format!(
                "payload head {} / payload tail {} (executor tail {}, metadata tail {})",
                ring.payload_head, ring.payload_tail, self.stream_tails.1, ring.metadata_tail
            ),
        );
        check(
            ring.gap_slots == 0,
            format!("a gap of {} slots at the end", ring.gap_slots),
        );
        check(
            ring.pooled == 0,
            format!("{} batches of records left in the ready pool", ring.pooled),
        );
        check(
            ring.published_metadata_head <= ring.metadata_head
                && ring.published_payload_head <= ring.payload_head,
            format!(
                "mirrored heads {} / {} ahead of the host's {} / {}",
                ring.published_metadata_head,
                ring.published_payload_head,
                ring.metadata_head,
                ring.payload_head
            ),
        );
        found
    }
}

/// A finished wall-clock run: its report and what both sides left behind.
#[derive(Clone, Debug)]
pub struct WallRun {
    /// The report (`clock` is `"wall"`).
    pub report: RunReport,
    /// The end state (already checked: a run with a violation is an error).
    pub end: EndState,
}

/// The host side's part of the end state, taken while the runtime still exists.
#[derive(Debug, Default)]
pub(crate) struct HostSide {
    pub(crate) ring: Option<RingState>,
    pub(crate) host: HostCounts,
}

/// Drives `runtime` and `device` against the real clock on two threads until the host is
/// done (or the run fails). Returns the outcome for the report; fills `side` with what the
/// host side left behind.
pub(crate) fn drive(
    device: &mut Emulator,
    runtime: &mut Runtime<'_>,
    options: &WallOptions,
    side: &mut HostSide,
) -> Result<(), RunFailure> {
    runtime.set_real_clock();
    let stress = options.stress;
    let mut loop_jitter = None;
    let mut turn_jitter = None;
    if let Some(stress) = stress {
        device.set_landing_jitter(stress.jitter(stress.dma_landing, streams::DMA_LANDING));
        device.break_landing_order(stress.break_landing_order);
        loop_jitter = stress.jitter(stress.device_loop, streams::DEVICE_LOOP);
        turn_jitter = stress.jitter(stress.host_turn, streams::HOST_TURN);
        let mut poll = Jitter::new(stress.host_poll, stress.seed, streams::HOST_POLL);
        let mut task = Jitter::new(stress.host_task, stress.seed, streams::HOST_TASK);
        runtime.set_stretch(Box::new(move |point| match point {
            Stretch::Poll => poll.next_ticks(),
            Stretch::TaskCompletion => task.next_ticks(),
        }));
    }
    let limit = Ticks::from_ns(u64::try_from(options.limit.as_nanos()).unwrap_or(u64::MAX));
    let (host_port, device_port) = ports();
    let clock = WallClock::start();
    let (host, device_outcome) = std::thread::scope(|scope| {
        let device_thread = std::thread::Builder::new()
            .name("axle-device".into())
            .spawn_scoped(scope, move || {
                device.run_wall(&device_port, &clock, limit, loop_jitter)
            });
        let device_thread = match device_thread {
            Ok(thread) => thread,
            Err(error) => {
                return (
                    Err(WallError::Device(format!(
                        "cannot start the device thread: {error}"
                    ))),
                    Ok(()),
                )
            }
        };
        let host = serve_host(
            runtime,
            host_port,
            &clock,
            HostOptions { limit, turn_jitter },
        );
        // The host's port is dropped: a device thread still running sees the host gone.
        let device_outcome = device_thread.join().unwrap_or_else(|_| {
            Err(emulator::CoSimError::Host(
                "the device thread panicked".into(),
            ))
        });
        (host, device_outcome)
    });
    side.ring = runtime.ring_state().transpose().map_err(RunFailure::Ring)?;
    match (host, device_outcome) {
        (Ok(end), Ok(())) => {
            side.host = HostCounts {
                turns: end.turns,
                sent: end.sent,
                delivered: end.delivered,
                signalled: 0,
            };
            Ok(())
        }
        (_, Err(emulator::CoSimError::WallTimeLimit { .. })) => Err(RunFailure::WallLimit {
            limit: options.limit,
        }),
        // The device's own error says most (deadlock, time limit); that the host went away
        // says least.
        (_, Err(error)) if !matches!(error, emulator::CoSimError::Host(_)) => {
            Err(RunFailure::CoSim(error))
        }
        (Err(error), _) => Err(RunFailure::Wall(error)),
        (Ok(_), Err(error)) => Err(RunFailure::CoSim(error)),
    }
}

/// The device side's part of the end state.
pub(crate) fn end_state(device: &Emulator, side: HostSide) -> EndState {
    let firmware = device.firmware();
    EndState {
        ring: side.ring,
        firmware: *firmware.counters(),
        streaming_idle: firmware.streaming_idle(),
        waiting_for_credit: firmware.waiting_for_credit(),
        broken: firmware.broken().map(shared_abi::Status::code),
        stream_tails: firmware.stream_tails(),
        device: device.metrics(),
        device_time: device.now(),
        host: side.host,
    }
}

/// The outcome of an attached wall-clock run, as [`drive`] combines the two sides' outcomes;
/// fills `side.host`.
pub(crate) fn combine_attached(
    ended: &host_driver::attachment::WallSessionEnd,
    side: &mut HostSide,
) -> Result<(), RunFailure> {
    side.host.signalled = ended.signalled;
    if let Ok(end) = &ended.host {
        side.host.turns = end.turns;
        side.host.sent = end.sent;
        side.host.delivered = end.delivered;
    }
    match (&ended.host, &ended.end.error) {
        (Ok(_), None) => Ok(()),
        // The device's own error says most (deadlock, time limit).
        (_, Some(error)) => Err(RunFailure::Remote(error.clone())),
        (Err(error), None) => Err(RunFailure::Wall(error.clone())),
    }
}

/// The end state of an attached wall-clock run: the device's part as the emulator sent it.
pub(crate) fn remote_end_state(
    device: &cosim_link::attach::WallDeviceEnd,
    metrics: DeviceMetrics,
    side: HostSide,
) -> EndState {
    EndState {
        ring: side.ring,
        firmware: firmware::trace::Counters {
            launches: device.launches,
            refused: device.refused,
            payloads: device.payloads,
            dma_requests: device.dma_requests,
            head_reads: device.head_reads,
            backpressure_ticks: device.backpressure_ticks,
        },
        streaming_idle: device.streaming_idle,
        waiting_for_credit: device.waiting_for_credit,
        broken: device.broken,
        stream_tails: device.stream_tails,
        device: metrics,
        device_time: Ticks(device.device_time),
        host: side.host,
    }
}
