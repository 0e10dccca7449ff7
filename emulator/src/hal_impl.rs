//! The firmware HAL implemented on the emulator's models.
//!
//! [`Hardware`] is everything of the device except the firmware itself: clock, device memory,
//! the CCM, the DMA engine, the link, the mailbox registers and the event queue. The firmware
//! borrows it for each [`firmware::Firmware::step`].

use crate::ccm::{Ccm, CcmEvent};
use crate::config::DeviceConfig;
use crate::dma::DmaEngineModel;
use crate::dram::DeviceDram;
use crate::link::Link;
use crate::sim::queue::EventQueue;
use crate::sim::time::one_way;
use crate::trace::{DeviceInstant, DeviceTrace, LinkDirection, LinkTraffic};
use firmware::hal::{
    Clock, ComputeUnits, DeviceMemory, DmaCompletion, DmaEngine, DmaError, DmaKind, DmaRequest,
    DmaTag, HostEvent, ItemCompletion, KernelLaunch, MemoryFault, Registers,
};
use host_driver::link::LinkResponse;
use host_driver::phys::PhysicalMemory;
use host_driver::sync::Arc;
use shared_abi::{mailbox, DeviceAddress, Status, Ticks};
use std::collections::{BTreeMap, VecDeque};

/// A device event.
#[derive(Debug)]
pub enum Event {
    /// A host CXL.mem store reaches device memory (`token`: a synchronous BS launch).
    HostStore {
        /// Where.
        address: DeviceAddress,
        /// What.
        data: Vec<u8>,
        /// The synchronous store's token.
        token: Option<u64>,
    },
    /// A host CXL.mem load reaches the device; the response is already timed.
    HostLoad {
        /// Where.
        address: DeviceAddress,
        /// Bytes.
        length: u64,
        /// The host's token.
        token: u64,
        /// When the last byte is back at the host.
        respond_at: Ticks,
    },
    /// A host CXL.io register write reaches the device.
    IoWrite {
        /// Register offset.
        register: u64,
        /// Value.
        value: u64,
    },
    /// A host CXL.io register read reaches the device.
    IoRead {
        /// Register offset.
        register: u64,
        /// The host's token.
        token: u64,
    },
    /// The firmware may look at a host event (after its handling latency).
    Firmware(HostEvent),
    /// A CCM event: a projected end of an item's instructions or memory traffic, or an
    /// item's end.
    Ccm(CcmEvent),
    /// A DMA request finished preparation and goes on the wire.
    DmaPrepared {
        /// Its tag.
        tag: DmaTag,
        /// The request.
        request: DmaRequest,
    },
    /// A DMA write lands in host memory.
    DmaLand(crate::dma::Landing),
    /// A DMA request has all its writes on the wire.
    DmaSent {
        /// Its tag.
        tag: DmaTag,
        /// Its status.
        status: Status,
        /// First byte on the wire.
        started: Ticks,
        /// Last write landed.
        landed: Ticks,
    },
    /// A response reaches the host.
    Deliver(LinkResponse),
    /// The firmware's mailbox write takes effect (after its handling latency).
    MailboxWrite {
        /// Register offset.
        offset: u64,
        /// Value.
        value: u64,
    },
}

/// The device's hardware, as the firmware sees it through the HAL.
#[derive(Debug)]
pub struct Hardware {
    /// The current virtual time.
    pub now: Ticks,
    /// Pending events.
    pub queue: EventQueue<Event>,
    /// Parameters.
    pub config: DeviceConfig,
    /// Device memory.
    pub dram: DeviceDram,
    /// The CCM.
    pub ccm: Ccm,
    /// The DMA engine.
    pub dma: DmaEngineModel,
    /// The link.
    pub link: Link,
    /// Host physical memory (where DMA lands).
    pub host_memory: Arc<PhysicalMemory>,
    /// Mailbox registers.
    pub mailbox: [u64; (mailbox::WINDOW_LENGTH / 8) as usize],
    /// The register page served to an attached host, which mirrors the mailbox.
    #[cfg(not(loom))]
    pub register_page: Option<crate::registers::RegisterPage>,
    /// Host events for the firmware.
    pub host_events: VecDeque<HostEvent>,
    /// Synchronous launch stores waiting for their response, by tag.
    pub bulk_tokens: BTreeMap<u32, VecDeque<u64>>,
    /// Host CXL.mem stores may write device memory below this address only: above it lies the
    /// firmware's scratch area (DMA descriptor chains, staged records), which the memory
    /// controller keeps private to the device.
    pub host_writable_end: DeviceAddress,
    /// Interrupts raised.
    pub interrupts: u64,
    /// Wall-clock stress only (`None` in virtual time): a random extra delay of each DMA
    /// write's landing. Landings keep their order (each lands no earlier than the one before,
    /// the posted-write ordering the protocol relies on), and an interrupt never reaches the
    /// host before the writes it announces.
    pub landing_jitter: Option<host_driver::jitter::Jitter>,
    /// The latest landing time handed out so far: an interrupt is posted behind the DMA
    /// writes before it and never reaches the host ahead of them.
    pub last_landing: Ticks,
    /// Fault injection (tests of the stress checks only): the jittered landings may overtake
    /// each other, breaking the posted-write ordering the protocol relies on.
    pub landings_unordered: bool,
    /// The run's timeline (`axle run --trace`); `None`, recording nothing, unless enabled.
    pub trace: Option<Box<DeviceTrace>>,
}

impl Hardware {
    /// Moves the CCM's newly scheduled events into the event queue.
    fn schedule_ccm(&mut self) {
        for (at, event) in self.ccm.take_scheduled() {
            self.queue.push(at, Event::Ccm(event));
        }
    }

    /// A CCM event is due now; returns whether an item ended (the firmware has work).
    pub fn ccm_event(&mut self, event: CcmEvent) -> bool {
        let now = self.now;
        let ended = self.ccm.on_event(now, event, &mut self.dram);
        self.schedule_ccm();
        if let Some(trace) = self.trace.as_deref_mut() {
            for item in &ended {
                trace.item(item.unit, item.tag, item.item, item.started, now);
            }
        }
        !ended.is_empty()
    }

    /// A prepared request goes on the wire.
    pub fn send_request(&mut self, tag: DmaTag, request: DmaRequest) {
        let device_size = self.dram.size();
        let host_size = self.host_memory.len();
        // Check the whole chain first: a bad descriptor fails the request, and nothing of it
        // reaches host memory.
        let mut writes = Vec::with_capacity(request.count as usize);
        let mut status = Status::Ok;
        for offset in 0..request.count {
            let address = crate::dma::descriptor_address(&request, offset);
            let checked = self
                .dram
                .read_value::<firmware::hal::DmaDescriptor>(address)
                .map_err(Status::from)
                .and_then(|d| {
                    crate::dma::check_descriptor(&d, device_size, host_size).map(|kind| (d, kind))
                });
            match checked {
                Ok(write) => writes.push(write),
                Err(error) => {
                    status = error;
                    writes.clear();
                    break;
                }
            }
        }
        let started = self.now;
        let mut last_on_wire = self.now;
        let mut last_landed = self.now;
        let latency = one_way(self.config.cxl_io_round_trip_ns);
        let mut first_on_wire = None;
        let mut written = (0u32, 0u64);
        for (descriptor, kind) in writes {
            let mut bytes = vec![0; descriptor.length as usize];
            if self
                .dram
                .read(DeviceAddress(descriptor.source), &mut bytes)
                .is_err()
            {
                status = Status::DeviceMemoryFault;
                break;
            }
            let (wire_start, on_wire) = self.link.upstream.send_span(
                self.now,
                u64::from(descriptor.length) + self.config.link_overhead_bytes,
                self.config.link_gbps,
            );
            first_on_wire.get_or_insert(wire_start);
            written = (written.0 + 1, written.1 + u64::from(descriptor.length));
            last_on_wire = on_wire;
            last_landed = on_wire.plus(latency);
            if let Some(jitter) = self.landing_jitter.as_mut() {
                last_landed = last_landed.plus(jitter.next_ticks());
                if !self.landings_unordered {
                    last_landed = last_landed.max(self.last_landing);
                }
            }
            self.last_landing = self.last_landing.max(last_landed);
            self.dma.writes += 1;
            self.queue.push(
                last_landed,
                Event::DmaLand(crate::dma::Landing {
                    destination: descriptor.destination,
                    bytes,
                    kind,
                }),
            );
        }
        if let Some(trace) = self.trace.as_deref_mut() {
            if let Some(first) = first_on_wire {
                trace.link(
                    LinkDirection::Upstream,
                    LinkTraffic::Dma,
                    written.1,
                    first,
                    last_on_wire,
                );
            }
            trace.dma_sent(
                tag.0,
                started,
                last_landed,
                written.0,
                written.1,
                status.code(),
            );
        }
        self.queue.push(
            last_on_wire,
            Event::DmaSent {
                tag,
                status,
                started,
                landed: last_landed,
            },
        );
    }

    /// A DMA write lands in host memory.
    pub fn land(&self, landing: &crate::dma::Landing) {
        let address = shared_abi::HostPhysAddr(landing.destination);
        let result = if landing.kind.publishes() {
            // Edges D2 and D4: the tail is published with release semantics, after every
            // write before it in the chain.
            let mut word = [0u8; 8];
            word.copy_from_slice(landing.bytes.get(..8).unwrap_or(&[0; 8]));
            self.host_memory.store_u64(
                address,
                u64::from_le_bytes(word),
                host_driver::sync::Ordering::Release,
            )
        } else {
            // Edges D1 and D3: payload data and records, plain stores.
            self.host_memory.write_words(address, &landing.bytes)
        };
        if let Err(error) = result {
            // check_descriptor bounds-checked the destination; this cannot happen, but a
            // failed write is logged, never a crash.
            log::error!("dma: landing at {:#x} failed: {error}", landing.destination);
        }
        let _ = DmaKind::Payload;
    }

    /// Sets a mailbox register now (and its mirror in the register page, if one is served).
    pub fn set_mailbox(&mut self, offset: u64, value: u64) {
        if let Some(register) = self.mailbox.get_mut((offset / 8) as usize) {
            *register = value;
            #[cfg(not(loom))]
            if let Some(page) = &self.register_page {
                page.mirror_mailbox(offset, value);
            }
        }
    }

    /// Delivers `response` to the host at `at`.
    pub fn respond(&mut self, at: Ticks, response: LinkResponse) {
        self.queue.push(at, Event::Deliver(response));
    }
}

impl Clock for Hardware {
    fn now(&self) -> Ticks {
        self.now
    }
}

impl DeviceMemory for Hardware {
    fn size(&self) -> u64 {
        self.dram.size()
    }
    fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
        self.dram.read(address, buffer)
    }
    fn write(&mut self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
        self.dram.write(address, data)
    }
}

impl DmaEngine for Hardware {
    fn submit(&mut self, request: DmaRequest) -> Result<DmaTag, DmaError> {
        if !self.dma.has_room() {
            return Err(DmaError::QueueFull);
        }
        let (tag, prepared_at) = self
            .dma
            .accept(self.now, Ticks::from_ns(self.config.dma_preparation_ns));
        if let Some(trace) = self.trace.as_deref_mut() {
            trace.dma_submitted(tag.0, self.now);
        }
        self.queue
            .push(prepared_at, Event::DmaPrepared { tag, request });
        Ok(tag)
    }

    fn poll_completion(&mut self) -> Option<DmaCompletion> {
        self.dma.completions.pop_front()
    }
}

impl ComputeUnits for Hardware {
    fn dispatch(&mut self, launch: KernelLaunch) -> Result<(), Status> {
        if self.ccm.is_running() {
            return Err(Status::Busy);
        }
        let mut command = launch.command;
        command.flags = 0;
        let kernel = firmware::kernels::Kernel::decode(&command, &self.dram)?;
        self.ccm.dispatch(
            self.now,
            kernel,
            launch.command.tag,
            launch.item_range(),
            &self.dram,
        );
        self.schedule_ccm();
        Ok(())
    }

    fn poll_item(&mut self) -> Option<ItemCompletion> {
        self.ccm.completions.pop_front()
    }
}

impl Registers for Hardware {
    fn take_event(&mut self) -> Option<HostEvent> {
        self.host_events.pop_front()
    }

    fn write_mailbox(&mut self, offset: u64, value: u64) {
        if offset == mailbox::STATUS && value & 0xffff_ffff == mailbox::status::COMPLETE {
            // The firmware core notices the completion and posts it: one handling latency, as
            // for a doorbell.
            let handling = Ticks::from_cycles(
                self.config.firmware_mailbox_cycles,
                self.config.firmware_mhz,
            );
            self.queue.push(
                self.now.plus(handling),
                Event::MailboxWrite { offset, value },
            );
            return;
        }
        self.set_mailbox(offset, value);
    }

    fn complete_bulk_launch(&mut self, tag: u32, status: Status) {
        // The response of the synchronous store travels back over CXL.mem.
        let token = self.bulk_tokens.get_mut(&tag).and_then(VecDeque::pop_front);
        if self.bulk_tokens.get(&tag).is_some_and(VecDeque::is_empty) {
            self.bulk_tokens.remove(&tag);
        }
        match token {
            Some(token) => {
                let at = self.now.plus(one_way(self.config.cxl_mem_round_trip_ns));
                self.respond(
                    at,
                    LinkResponse::StoreDone {
                        token,
                        status: status.code(),
                    },
                );
            }
            None => log::warn!("emulator: bulk completion for tag {tag} with no waiting store"),
        }
    }

    fn raise_interrupt(&mut self, message: u64) {
        self.interrupts += 1;
        if let Some(trace) = self.trace.as_deref_mut() {
            trace.instant(self.now, DeviceInstant::Interrupt { message });
        }
        // The MSI-X write is posted behind the DMA writes: it never overtakes them, however
        // short the configured handling latency.
        let at = self
            .now
            .plus(Ticks::from_ns(self.config.interrupt_ns))
            .max(self.last_landing);
        self.respond(at, LinkResponse::Interrupt { message });
    }
}
