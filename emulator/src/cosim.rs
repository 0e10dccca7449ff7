//! The co-simulation: the emulator is the time master; the host is a party with one entry
//! point, "run at virtual time t, return your next wake-up time".
//!
//! The loop runs every device event up to the host's next wake-up, then hands the turn to the
//! host. **Ties:** at equal times every device event runs before the host's turn, and device
//! events run in the order they were scheduled. A response (CXL.mem load or synchronous store
//! response, register read, interrupt) is a device event at its arrival time that wakes the
//! host then. DMA writes land in host memory at their arrival time and wake nobody: the host's
//! next poll finds them.
//!
//! In-process, the hand-off is the call to [`HostAgent::turn`]; across processes the same loop
//! hands the turn over shared memory, so both give the same answer.
//!
//! The wall-clock mode (DESIGN.md section 3, last paragraph) has no hand-off:
//! `Emulator::run_wall` is the device thread of a run in which device and host free-run
//! against the real clock (`cosim_link::wall`). It shares everything below the loop with
//! [`Emulator::run`]: event processing, the link model (`LinkPort`), the firmware.
//!
//! # Bounds
//!
//! The host's link calls are requests to the device, and across processes the host may be
//! broken or hostile. Before a call becomes an event, the device checks it against its own
//! limits (`LinkPort::admit`): a CXL.mem store's data or load's length at most the device's
//! memory; at most [`MAX_HOST_REQUESTS_IN_FLIGHT`] requests in flight (sent and not yet
//! handled, as a link has a finite number of request tags); and at most the device's memory
//! in bytes in flight (store data, load lengths, then load responses until they are
//! delivered). A call beyond them is dropped and the run ends after that host turn with
//! [`CoSimError::HostRequest`], naming the value and the limit. A load's response is
//! allocated only for a range inside device memory. An honest host stays far below every
//! bound, so the bounds change no timing and no result.

use crate::ccm::Ccm;
use crate::config::DeviceConfig;
use crate::dma::DmaEngineModel;
use crate::dram::DeviceDram;
use crate::hal_impl::{Event, Hardware};
use crate::link::Link;
use crate::sim::queue::EventQueue;
use crate::sim::time::one_way;
use crate::trace::{DeviceInstant, DeviceTrace, LinkDirection, LinkTraffic};
use cosim_link::hdm::DataAllocator;
use cosim_link::link::{DeviceLink, HostAgent, LinkResponse, Wake};
use cosim_link::phys::PhysicalMemory;
use cosim_link::sync::Arc;
use firmware::hal::{DeviceMemory, HostEvent};
use firmware::scratch::ScratchLayout;
use firmware::{Firmware, FirmwareConfig};
use shared_abi::{device_map, mailbox, CommandDescriptor, DeviceAddress, Ticks};
use zerocopy::FromBytes;

/// Most result chunks one launch may have (sizes the firmware scratch area).
pub const CHUNK_CAPACITY: u32 = 1 << 21;

/// Most link requests a host may have in flight at once (see "Bounds" in the module docs).
/// A real link has a finite number of request tags and credits; the host runtime has a few
/// dozen in flight at most.
pub const MAX_HOST_REQUESTS_IN_FLIGHT: u64 = 1 << 20;

/// How a co-simulated run ended badly.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CoSimError {
    /// Nothing can happen any more, but the host has not finished.
    #[error("deadlock at {at_ns} ns: the host waits for a response and the device has nothing left to do")]
    Deadlock {
        /// Virtual time of detection.
        at_ns: u64,
    },
    /// Virtual time ran past the configured limit.
    #[error("no completion within the virtual-time limit of {limit_ns} ns")]
    TimeLimit {
        /// The limit.
        limit_ns: u64,
    },
    /// Wall-clock mode: the run took longer than its wall-clock limit.
    #[error("no completion within the wall-clock limit of {limit_ns} ns")]
    WallTimeLimit {
        /// The limit.
        limit_ns: u64,
    },
    /// Wall-clock mode: the host thread went away, or sent a turn that does not decode.
    #[error("wall-clock run: {0}")]
    Host(String),
    /// The host asked for more than the device can take (a load longer than device memory,
    /// too many requests or bytes in flight); the run ends at the host's turn that asked.
    #[error("the device refused a link request from the host: {0}")]
    HostRequest(String),
}

/// What the simulator itself did over a run (gem5's stats files keep the like): deterministic
/// counts of a virtual-time run, which a change to the model or the simulator moves. They
/// measure the simulator's work, not the modelled system.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SimulatorCounts {
    /// Device events processed (CCM, DMA, link, firmware, interrupts).
    pub events: u64,
    /// Turns the host was given.
    pub host_turns: u64,
    /// Link calls the host made (CXL.mem loads and stores, CXL.io reads and writes).
    pub link_calls: u64,
}

/// What the device measured over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceMetrics {
    /// Time during which at least one CCM µthread ran a work item.
    pub ccm_busy: Ticks,
    /// Union of the intervals during which a DMA request's writes were on the link or landing.
    pub dma_busy: Ticks,
    /// Ticks the DMA executor had a complete payload but no ring credit.
    pub backpressure: Ticks,
    /// DMA requests sent.
    pub dma_requests: u64,
    /// Payloads streamed.
    pub payloads: u64,
    /// Times the executor read the flow-control block (edge D5).
    pub head_reads: u64,
    /// Interrupts raised.
    pub interrupts: u64,
    /// Bytes the device-to-host direction carried (including per-transaction overhead).
    pub upstream_busy: Ticks,
    /// What the simulator did.
    pub simulator: SimulatorCounts,
}

/// The emulated device.
#[derive(Debug)]
pub struct Emulator {
    hardware: Hardware,
    firmware: Firmware,
    /// Device data memory for untimed set-up (the same allocator an attached host runs over
    /// [`Emulator::data_window`]).
    allocator: DataAllocator,
}

impl Emulator {
    /// A device with `config`, whose DMA engine writes into `host_memory`.
    pub fn new(
        config: DeviceConfig,
        host_memory: Arc<PhysicalMemory>,
        streaming_factor: firmware::StreamingFactor,
        out_of_order: bool,
    ) -> Emulator {
        let dram = DeviceDram::new(Emulator::device_memory_bytes(&config));
        Emulator::with_device_memory(config, host_memory, dram, streaming_factor, out_of_order)
    }

    /// Bytes of device memory that `config` asks for.
    pub fn device_memory_bytes(config: &DeviceConfig) -> u64 {
        config.device_memory_mib.saturating_mul(1 << 20)
    }

    /// A device with `config` over `dram` (of [`Emulator::device_memory_bytes`] bytes, for
    /// example a segment shared with an attached host), whose DMA engine writes into
    /// `host_memory`.
    pub fn with_device_memory(
        config: DeviceConfig,
        host_memory: Arc<PhysicalMemory>,
        dram: DeviceDram,
        streaming_factor: firmware::StreamingFactor,
        out_of_order: bool,
    ) -> Emulator {
        let size = dram.size();
        let scratch_probe = ScratchLayout::new(DeviceAddress(0), CHUNK_CAPACITY);
        let scratch_base = size.saturating_sub(scratch_probe.bytes()) & !0xfff;
        let scratch = ScratchLayout::new(DeviceAddress(scratch_base), CHUNK_CAPACITY);
        let firmware = Firmware::new(FirmwareConfig {
            scratch,
            streaming_factor,
            out_of_order,
        });
        let hardware = Hardware {
            now: Ticks::ZERO,
            queue: EventQueue::default(),
            ccm: Ccm::new(&config),
            dma: DmaEngineModel::new(config.dma_channels),
            link: Link::default(),
            host_memory,
            mailbox: [0; (mailbox::WINDOW_LENGTH / 8) as usize],
            register_page: None,
            host_events: Default::default(),
            bulk_tokens: Default::default(),
            host_writable_end: DeviceAddress(scratch_base),
            interrupts: 0,
            landing_jitter: None,
            last_landing: Ticks::ZERO,
            landings_unordered: false,
            trace: None,
            host_in_flight: Default::default(),
            counts: Default::default(),
            dram,
            config,
        };
        Emulator {
            hardware,
            firmware,
            allocator: DataAllocator::new(device_map::DATA_BASE, DeviceAddress(scratch_base)),
        }
    }

    /// The device data window, `[DATA_BASE, start of the firmware scratch area)`.
    pub fn data_window(&self) -> (DeviceAddress, DeviceAddress) {
        (device_map::DATA_BASE, self.allocator.end())
    }

    /// Serves the device's register window: a shared page with this device's identity and a
    /// mirror of its mailbox from now on. Returns the page (its fd goes to the host).
    pub fn serve_registers(&mut self) -> std::io::Result<&crate::registers::RegisterPage> {
        let (data_base, data_end) = self.data_window();
        let page = crate::registers::RegisterPage::create(crate::registers::DeviceIdentity {
            device_memory_bytes: self.hardware.dram.size(),
            data_base: data_base.0,
            data_end: data_end.0,
        })?;
        for (index, value) in self.hardware.mailbox.iter().enumerate() {
            page.mirror_mailbox(index as u64 * 8, *value);
        }
        Ok(self.hardware.register_page.insert(page))
    }

    /// Device memory.
    pub fn dram(&self) -> &DeviceDram {
        &self.hardware.dram
    }

    /// Bytes of device data memory left for set-up.
    pub fn data_available(&self) -> u64 {
        self.allocator.available()
    }

    /// Untimed set-up: reserves device data memory.
    pub fn allocate(&mut self, length: u64, align: u64) -> Option<DeviceAddress> {
        self.allocator.allocate(length, align)
    }

    /// Untimed set-up: writes device memory directly.
    pub fn write_untimed(
        &mut self,
        address: DeviceAddress,
        data: &[u8],
    ) -> Result<(), firmware::hal::MemoryFault> {
        if address.0 < device_map::DATA_BASE.0
            || address.0.saturating_add(data.len() as u64) > self.allocator.end().0
        {
            return Err(firmware::hal::MemoryFault {
                address,
                length: data.len() as u64,
            });
        }
        self.hardware.dram.write(address, data)
    }

    /// Starts recording the device's timeline (`axle run --trace`): CCM items, DMA requests,
    /// link transfers and control-plane instants from now on. Recording changes no timing.
    pub fn enable_trace(&mut self) {
        self.hardware.trace = Some(Box::new(DeviceTrace::new(&self.hardware.config)));
    }

    /// The timeline recorded since [`Emulator::enable_trace`] (and stops recording).
    pub fn take_trace(&mut self) -> Option<DeviceTrace> {
        self.hardware.trace.take().map(|mut trace| {
            trace.finish(self.hardware.now);
            *trace
        })
    }

    /// The firmware (counters, trace).
    pub fn firmware(&self) -> &Firmware {
        &self.firmware
    }

    /// The current virtual time.
    pub fn now(&self) -> Ticks {
        self.hardware.now
    }

    /// What the device measured so far.
    pub fn metrics(&self) -> DeviceMetrics {
        let counters = self.firmware.counters();
        DeviceMetrics {
            ccm_busy: self.hardware.ccm.busy(self.hardware.now),
            dma_busy: self.hardware.dma.busy(),
            backpressure: Ticks(counters.backpressure_ticks),
            dma_requests: self.hardware.dma.requests,
            payloads: counters.payloads,
            head_reads: counters.head_reads,
            interrupts: self.hardware.interrupts,
            upstream_busy: self.hardware.link.upstream.busy(),
            simulator: self.hardware.counts,
        }
    }

    /// Runs the device and `host` together until the host is done. `limit` bounds virtual time.
    pub fn run(&mut self, host: &mut dyn HostAgent, limit: Ticks) -> Result<(), CoSimError> {
        let mut wake = Wake::At(self.hardware.now);
        loop {
            let host_at = match wake {
                Wake::Done => return Ok(()),
                Wake::At(at) => Some(at),
                Wake::OnResponse => None,
            };
            let device_at = self.hardware.queue.peek_time();
            let device_first = match (device_at, host_at) {
                (Some(d), Some(h)) => d <= h,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => {
                    return Err(CoSimError::Deadlock {
                        at_ns: self.hardware.now.as_ns(),
                    })
                }
            };
            let next = if device_first { device_at } else { host_at }.unwrap_or(Ticks::NEVER);
            if next > limit {
                return Err(CoSimError::TimeLimit {
                    limit_ns: limit.as_ns(),
                });
            }
            if device_first {
                let Some((at, event)) = self.hardware.queue.pop() else {
                    continue;
                };
                self.hardware.counts.events += 1;
                self.hardware.now = at;
                if let Some(response) = self.process(event) {
                    host.deliver(at, response);
                    wake = match wake {
                        Wake::At(t) if t <= at => Wake::At(t),
                        Wake::Done => Wake::Done,
                        _ => Wake::At(at),
                    };
                }
            } else {
                let at = host_at.unwrap_or(self.hardware.now);
                self.hardware.now = self.hardware.now.max(at);
                self.hardware.counts.host_turns += 1;
                let mut port = LinkPort {
                    hardware: &mut self.hardware,
                };
                wake = host.turn(at, &mut port);
                if let Some(refusal) = self.hardware.host_in_flight.refusal.take() {
                    return Err(CoSimError::HostRequest(refusal));
                }
            }
        }
    }

    /// Wall-clock stress: delays each DMA write's landing by a draw of `jitter` (keeping the
    /// landings in order). `None` (the default) lands them at their modelled times.
    pub fn set_landing_jitter(&mut self, jitter: Option<cosim_link::jitter::Jitter>) {
        self.hardware.landing_jitter = jitter;
    }

    /// Fault injection, for the tests of the wall-clock stress checks only: lets jittered DMA
    /// landings overtake each other (a tail may land before the record or payload it
    /// publishes), which breaks the posted-write ordering the protocol relies on.
    pub fn break_landing_order(&mut self, broken: bool) {
        self.hardware.landings_unordered = broken;
    }

    /// Wall-clock mode, the device thread: runs against the real `clock` until the host
    /// thread, at the other end of `port`, is done.
    ///
    /// Each iteration takes the host turns that arrived and replays their link calls onto the
    /// same link as [`Emulator::run`] (`LinkPort`), each stamped with the later of the
    /// host's time and the device's; then runs every event whose time has come (device time
    /// is the event's time, as in virtual time: an event the thread reaches late keeps its
    /// modelled time, so the device's figures stay modelled durations on a timeline anchored
    /// to the real clock), sending each response at once; then waits for its next event or
    /// the next host turn. `stall` (stress only) holds the thread for a random real time at
    /// each iteration.
    ///
    /// Ends with `Ok` when the host says it is done; with [`CoSimError::Deadlock`] when the
    /// host waits for a response, has taken every response sent, and no device event is
    /// left (exact, see `cosim_link::wall`); with [`CoSimError::WallTimeLimit`] once the
    /// clock passes `limit`. Both errors are sent to the host thread too, which then stops.
    pub fn run_wall(
        &mut self,
        port: &cosim_link::wall::DevicePort,
        clock: &cosim_link::wall::WallClock,
        limit: Ticks,
        mut stall: Option<cosim_link::jitter::Jitter>,
    ) -> Result<(), CoSimError> {
        use cosim_link::turn::replay_host_turn;
        let gone = |error: cosim_link::wall::WallError| CoSimError::Host(error.to_string());
        let mut host_wake = Wake::At(Ticks::ZERO);
        let mut host_delivered = 0u64;
        let mut sent = 0u64;
        let mut arrived = None;
        loop {
            // The host's link calls, in the order it made them.
            loop {
                let turn = match arrived.take() {
                    Some(turn) => turn,
                    None => match port.try_take().map_err(gone)? {
                        Some(turn) => turn,
                        None => break,
                    },
                };
                host_delivered = turn.delivered;
                let floor = self.hardware.now;
                let mut link = StampedNoEarlier {
                    port: LinkPort {
                        hardware: &mut self.hardware,
                    },
                    floor,
                };
                host_wake = replay_host_turn(&turn.message, &mut link)
                    .map_err(|error| CoSimError::Host(error.to_string()))?;
                if let Some(refusal) = self.hardware.host_in_flight.refusal.take() {
                    let failure = CoSimError::HostRequest(refusal);
                    port.end(failure.to_string());
                    return Err(failure);
                }
                if host_wake == Wake::Done {
                    return Ok(());
                }
            }
            // Every event whose time has come.
            let now = clock.now();
            while let Some(at) = self.hardware.queue.peek_time().filter(|&at| at <= now) {
                let Some((_, event)) = self.hardware.queue.pop() else {
                    break;
                };
                self.hardware.counts.events += 1;
                self.hardware.now = self.hardware.now.max(at);
                if let Some(response) = self.process(event) {
                    port.respond(at, response).map_err(gone)?;
                    sent += 1;
                }
            }
            let next = self.hardware.queue.peek_time();
            let failure = if now > limit {
                Some(CoSimError::WallTimeLimit {
                    limit_ns: limit.as_ns(),
                })
            } else if next.is_none() && host_wake == Wake::OnResponse && host_delivered == sent {
                Some(CoSimError::Deadlock { at_ns: now.as_ns() })
            } else {
                None
            };
            if let Some(failure) = failure {
                port.end(failure.to_string());
                return Err(failure);
            }
            if let Some(stall) = stall.as_mut() {
                cosim_link::wall::pause(stall.next_ns());
            }
            let until = next.unwrap_or(Ticks::NEVER).min(limit.plus(Ticks(1)));
            arrived = port.wait(clock.instant(until)).map_err(gone)?;
        }
    }

    /// Processes one device event; returns a response for the host, if the event is one.
    fn process(&mut self, event: Event) -> Option<LinkResponse> {
        let hw = &mut self.hardware;
        let mut step = true;
        match event {
            Event::HostStore {
                address,
                data,
                token,
            } => {
                hw.host_in_flight.release(1, data.len() as u64);
                let respond_at = hw.now.plus(one_way(hw.config.cxl_mem_round_trip_ns));
                if device_map::in_launch_window(address) {
                    // The packet filter: a launch store never reaches memory.
                    match (CommandDescriptor::read_from_bytes(&data), token) {
                        (Ok(command), Some(token)) => {
                            if let Some(trace) = hw.trace.as_deref_mut() {
                                trace.instant(
                                    hw.now,
                                    DeviceInstant::LaunchStore { tag: command.tag },
                                );
                            }
                            hw.bulk_tokens
                                .entry(command.tag)
                                .or_default()
                                .push_back(token);
                            hw.host_events.push_back(HostEvent::LaunchStore(command));
                        }
                        (Ok(command), None) => {
                            if let Some(trace) = hw.trace.as_deref_mut() {
                                trace.instant(
                                    hw.now,
                                    DeviceInstant::LaunchStore { tag: command.tag },
                                );
                            }
                            hw.host_events.push_back(HostEvent::LaunchStore(command));
                        }
                        (Err(_), Some(token)) => {
                            // Not one whole descriptor: refused by the filter itself.
                            let status = shared_abi::Status::MalformedDescriptor.code();
                            hw.respond(respond_at, LinkResponse::StoreDone { token, status });
                            step = false;
                        }
                        (Err(_), None) => {
                            log::warn!(
                                "emulator: posted launch store of {} bytes ignored (a descriptor is 64)",
                                data.len()
                            );
                            step = false;
                        }
                    }
                } else {
                    let end = address.checked_add(data.len() as u64);
                    let written = match end {
                        Some(end) if end <= hw.host_writable_end => {
                            hw.dram.write(address, &data).is_ok()
                        }
                        _ => false,
                    };
                    if !written {
                        log::warn!(
                            "emulator: host store of {} bytes at {:#x} refused (outside host-writable device memory)",
                            data.len(),
                            address.0
                        );
                    }
                    if let Some(token) = token {
                        let status = if written {
                            shared_abi::Status::Ok
                        } else {
                            shared_abi::Status::DeviceMemoryFault
                        };
                        hw.respond(
                            respond_at,
                            LinkResponse::StoreDone {
                                token,
                                status: status.code(),
                            },
                        );
                    }
                    if !written {
                        step = false;
                    } else if address == device_map::FLOW_CONTROL {
                        if let Some(trace) = hw.trace.as_deref_mut() {
                            trace.instant(hw.now, DeviceInstant::FlowControl);
                        }
                        hw.host_events.push_back(HostEvent::FlowControl);
                    } else if address == device_map::SHADOW_DESCRIPTOR {
                        if let Some(trace) = hw.trace.as_deref_mut() {
                            trace.instant(hw.now, DeviceInstant::RegionProgrammed);
                        }
                        hw.host_events.push_back(HostEvent::RegionProgrammed);
                    } else {
                        step = false;
                    }
                }
            }
            Event::HostLoad {
                address,
                length,
                token,
                respond_at,
            } => {
                hw.host_in_flight.release(1, length);
                // Allocated only for a range inside device memory (which `LinkPort::mem_load`
                // also checked against the device's size before the request was accepted).
                let inside = address
                    .checked_add(length)
                    .is_some_and(|end| end.0 <= hw.dram.size());
                let mut data = if inside {
                    cosim_link::limits::vec_filled("a CXL.mem load's length", length, 0u8)
                        .unwrap_or_default()
                } else {
                    Vec::new()
                };
                if !inside || hw.dram.read(address, &mut data).is_err() {
                    log::warn!(
                        "emulator: host load of {length} bytes at {:#x} outside device memory",
                        address.0
                    );
                    data.clear();
                }
                // The response holds its bytes until it is delivered.
                hw.host_in_flight.bytes = hw.host_in_flight.bytes.saturating_add(data.len() as u64);
                hw.respond(respond_at, LinkResponse::LoadDone { token, data });
                step = false;
            }
            Event::IoWrite { register, value } => {
                hw.host_in_flight.release(1, 0);
                let event = match register {
                    mailbox::DOORBELL => Some(HostEvent::Doorbell(value)),
                    mailbox::DEQUEUE => Some(HostEvent::Dequeue),
                    _ => None,
                };
                if let Some(trace) = hw.trace.as_deref_mut() {
                    match register {
                        mailbox::DOORBELL => trace.instant(hw.now, DeviceInstant::Doorbell),
                        mailbox::DEQUEUE => trace.instant(hw.now, DeviceInstant::Dequeue),
                        _ => {}
                    }
                }
                if let Some(event) = event {
                    let handling = Ticks::from_cycles(
                        hw.config.firmware_mailbox_cycles,
                        hw.config.firmware_mhz,
                    );
                    hw.queue.push(hw.now.plus(handling), Event::Firmware(event));
                }
                step = false;
            }
            Event::IoRead { register, token } => {
                hw.host_in_flight.release(1, 0);
                let value = hw
                    .mailbox
                    .get((register / 8) as usize)
                    .copied()
                    .unwrap_or(u64::MAX);
                let (wire_start, back) = hw.link.upstream.send_span(
                    hw.now,
                    8 + hw.config.link_overhead_bytes,
                    hw.config.link_gbps,
                );
                if let Some(trace) = hw.trace.as_deref_mut() {
                    trace.link(
                        LinkDirection::Upstream,
                        LinkTraffic::IoReadResponse,
                        8,
                        wire_start,
                        back,
                    );
                }
                let at = back.plus(one_way(hw.config.cxl_io_round_trip_ns));
                hw.respond(at, LinkResponse::IoReadDone { token, value });
                step = false;
            }
            Event::Firmware(event) => hw.host_events.push_back(event),
            Event::CcmWake => step = hw.ccm_wake(),
            Event::DmaPrepared { tag, request } => {
                hw.send_request(tag, request);
                step = false;
            }
            Event::DmaLand(landing) => {
                hw.land(&landing);
                step = false;
            }
            Event::DmaSent {
                tag,
                status,
                started,
                landed,
            } => hw.dma.finished(tag, status, started, landed),
            Event::Deliver(response) => {
                if let LinkResponse::LoadDone { data, .. } = &response {
                    hw.host_in_flight.release(0, data.len() as u64);
                }
                return Some(response);
            }
            Event::MailboxWrite { offset, value } => {
                hw.set_mailbox(offset, value);
                step = false;
            }
        }
        if step {
            self.firmware.step(&mut self.hardware);
            if let Some(trace) = self.hardware.trace.as_deref_mut() {
                trace.executor_state(
                    self.hardware.now,
                    self.firmware.waiting_for_credit(),
                    self.firmware.stream_tails(),
                );
            }
        }
        None
    }
}

/// Wall-clock mode: the host's calls go onto the [`LinkPort`] stamped no earlier than the
/// device's time (a call the host made before the device's clock reached it happens now).
struct StampedNoEarlier<'a> {
    port: LinkPort<'a>,
    floor: Ticks,
}

impl DeviceLink for StampedNoEarlier<'_> {
    fn mem_store(&mut self, now: Ticks, address: DeviceAddress, data: &[u8]) {
        self.port.mem_store(now.max(self.floor), address, data);
    }

    fn mem_store_synchronous(
        &mut self,
        now: Ticks,
        address: DeviceAddress,
        data: &[u8],
        token: u64,
    ) {
        self.port
            .mem_store_synchronous(now.max(self.floor), address, data, token);
    }

    fn mem_load(
        &mut self,
        now: Ticks,
        address: DeviceAddress,
        length: u64,
        outstanding: u32,
        token: u64,
    ) {
        self.port
            .mem_load(now.max(self.floor), address, length, outstanding, token);
    }

    fn io_write(&mut self, now: Ticks, register: u64, value: u64) {
        self.port.io_write(now.max(self.floor), register, value);
    }

    fn io_read(&mut self, now: Ticks, register: u64, token: u64) {
        self.port.io_read(now.max(self.floor), register, token);
    }
}

/// The host's [`DeviceLink`] in-process: each call becomes a timed event.
struct LinkPort<'a> {
    hardware: &'a mut Hardware,
}

impl LinkPort<'_> {
    /// Whether the device takes one more host request carrying `bytes`: the request count and
    /// the bytes in flight stay within their bounds. A refusal is remembered (the first one)
    /// and ends the run after the host's turn; the request is dropped.
    fn admit(&mut self, now: Ticks, what: &str, bytes: u64) -> bool {
        // `what` names the bytes ("a CXL.mem load's length").
        let hw = &mut *self.hardware;
        hw.counts.link_calls += 1;
        let in_flight = &hw.host_in_flight;
        let device_bytes = hw.dram.size();
        let checked = cosim_link::limits::check(
            "the host's link requests in flight",
            in_flight.requests.saturating_add(1),
            MAX_HOST_REQUESTS_IN_FLIGHT,
            "a link has a finite number of request tags",
        )
        .and_then(|_| {
            cosim_link::limits::check(
                what,
                bytes,
                device_bytes,
                &format!("the device has {} MiB of memory", device_bytes >> 20),
            )
        })
        .and_then(|_| {
            cosim_link::limits::check(
                "the bytes of the host's link requests in flight",
                in_flight.bytes.saturating_add(bytes),
                device_bytes,
                "no more than the device's memory may be in flight",
            )
        });
        match checked {
            Ok(_) => {
                hw.host_in_flight.requests += 1;
                hw.host_in_flight.bytes += bytes;
                true
            }
            Err(refused) => {
                if hw.host_in_flight.refusal.is_none() {
                    hw.host_in_flight.refusal =
                        Some(format!("at {} ns of virtual time, {refused}", now.as_ns()));
                }
                false
            }
        }
    }

    fn downstream(
        &mut self,
        now: Ticks,
        bytes: u64,
        round_trip_ns: u64,
        traffic: LinkTraffic,
    ) -> Ticks {
        let hw = &mut *self.hardware;
        let (wire_start, on_wire) = hw.link.downstream.send_span(
            now,
            bytes + hw.config.link_overhead_bytes,
            hw.config.link_gbps,
        );
        if let Some(trace) = hw.trace.as_deref_mut() {
            trace.link(
                LinkDirection::Downstream,
                traffic,
                bytes,
                wire_start,
                on_wire,
            );
        }
        on_wire.plus(one_way(round_trip_ns))
    }
}

impl DeviceLink for LinkPort<'_> {
    fn mem_store(&mut self, now: Ticks, address: DeviceAddress, data: &[u8]) {
        if !self.admit(now, "a CXL.mem store's data", data.len() as u64) {
            return;
        }
        let rtt = self.hardware.config.cxl_mem_round_trip_ns;
        let at = self.downstream(now, data.len() as u64, rtt, LinkTraffic::MemStore);
        self.hardware.queue.push(
            at,
            Event::HostStore {
                address,
                data: data.to_vec(),
                token: None,
            },
        );
    }

    fn mem_store_synchronous(
        &mut self,
        now: Ticks,
        address: DeviceAddress,
        data: &[u8],
        token: u64,
    ) {
        if !self.admit(now, "a synchronous CXL.mem store's data", data.len() as u64) {
            return;
        }
        let rtt = self.hardware.config.cxl_mem_round_trip_ns;
        let at = self.downstream(
            now,
            data.len() as u64,
            rtt,
            LinkTraffic::MemStoreSynchronous,
        );
        self.hardware.queue.push(
            at,
            Event::HostStore {
                address,
                data: data.to_vec(),
                token: Some(token),
            },
        );
    }

    fn mem_load(
        &mut self,
        now: Ticks,
        address: DeviceAddress,
        length: u64,
        outstanding: u32,
        token: u64,
    ) {
        if !self.admit(now, "a CXL.mem load's length", length) {
            return;
        }
        let hw = &mut *self.hardware;
        let round_trip = Ticks::from_ns(hw.config.cxl_mem_round_trip_ns);
        let lines = length.div_ceil(64).max(1);
        // The core issues one line every round_trip / outstanding; the responses share the
        // device-to-host direction with DMA traffic.
        let issue_gap = Ticks(round_trip.0 / u64::from(outstanding.max(1)));
        let issue_bound = now
            .plus(Ticks(issue_gap.0.saturating_mul(lines - 1)))
            .plus(round_trip);
        let arrives = now.plus(one_way(hw.config.cxl_mem_round_trip_ns));
        let (wire_start, on_wire) = hw.link.upstream.send_span(
            arrives,
            length + lines * hw.config.link_overhead_bytes,
            hw.config.link_gbps,
        );
        if let Some(trace) = hw.trace.as_deref_mut() {
            trace.link(
                LinkDirection::Upstream,
                LinkTraffic::MemLoadResponse,
                length,
                wire_start,
                on_wire,
            );
        }
        let link_bound = on_wire.plus(one_way(hw.config.cxl_mem_round_trip_ns));
        let respond_at = issue_bound.max(link_bound);
        hw.queue.push(
            arrives,
            Event::HostLoad {
                address,
                length,
                token,
                respond_at,
            },
        );
    }

    fn io_write(&mut self, now: Ticks, register: u64, value: u64) {
        if !self.admit(now, "a CXL.io register write", 0) {
            return;
        }
        let rtt = self.hardware.config.cxl_io_round_trip_ns;
        let at = self.downstream(now, 8, rtt, LinkTraffic::IoWrite);
        self.hardware
            .queue
            .push(at, Event::IoWrite { register, value });
    }

    fn io_read(&mut self, now: Ticks, register: u64, token: u64) {
        if !self.admit(now, "a CXL.io register read", 0) {
            return;
        }
        let rtt = self.hardware.config.cxl_io_round_trip_ns;
        let at = self.downstream(now, 8, rtt, LinkTraffic::IoRead);
        self.hardware
            .queue
            .push(at, Event::IoRead { register, token });
    }
}
