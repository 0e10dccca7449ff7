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
//! In-process, the hand-off is the call to
//! [`HostAgent::turn`](cosim_link::link::HostAgent::turn); across processes the same loop
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
//!
//! | file | what |
//! |------|------|
//! | this one | the device ([`Emulator`]): construction, untimed set-up, metrics |
//! | `virtual_time` | [`Emulator::run`], the co-simulation loop in virtual time |
//! | `wall_clock` | [`Emulator::run_wall`], the device thread of a wall-clock run |
//! | `events` | what each device event does (shared by both loops) |
//! | `port` | `LinkPort`, the host's link calls becoming timed events, and their bounds |
//! | [`tenants`] | several hosts sharing one device: per-tenant contexts, the CCM's arbiter, [`Emulator::run_tenants`], detaching a faulty tenant (`tenants::detach`) |

mod events;
mod port;
pub mod tenants;
mod virtual_time;
mod wall_clock;

use crate::ccm::Ccm;
use crate::config::DeviceConfig;
use crate::device_queue::DeviceQueue;
use crate::dma::DmaEngineModel;
use crate::dram::DeviceDram;
use crate::hal_impl::Hardware;
use crate::link::Link;
use crate::trace::DeviceTrace;
use cosim_link::hdm::DataAllocator;
use cosim_link::phys::PhysicalMemory;
use cosim_link::sync::Arc;
use firmware::hal::DeviceMemory;
use firmware::scratch::ScratchLayout;
use firmware::{Firmware, FirmwareConfig};
use shared_abi::{device_map, mailbox, DeviceAddress, Ticks};

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
    /// A tenant of a shared run can take no further part (its host across processes died or
    /// broke the protocol: `HostAgent::ended`); the whole run ends.
    #[error("tenant {tenant} can take no further part: {reason}")]
    TenantEnded {
        /// The tenant.
        tenant: usize,
        /// Why.
        reason: String,
    },
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
    /// Boxed so that switching tenants ([`tenants`]) moves a pointer, not the firmware's
    /// shadow table.
    firmware: Box<Firmware>,
    /// Device data memory for untimed set-up (the same allocator an attached host runs over
    /// [`Emulator::data_window`]).
    allocator: DataAllocator,
    /// The other tenants of a shared device, parked while the current one's context is in
    /// `hardware` ([`tenants`]); empty with one host.
    tenants: Vec<Option<tenants::Parked>>,
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
        let firmware = Box::new(Firmware::new(FirmwareConfig {
            scratch,
            streaming_factor,
            out_of_order,
        }));
        let hardware = Hardware {
            now: Ticks::ZERO,
            queue: DeviceQueue::default(),
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
            sharing: None,
            dram,
            config,
        };
        Emulator {
            hardware,
            firmware,
            allocator: DataAllocator::new(device_map::DATA_BASE, DeviceAddress(scratch_base)),
            tenants: Vec::new(),
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
}
