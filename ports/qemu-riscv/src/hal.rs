//! The firmware's HAL on QEMU's `virt` machine: the whole port-specific device in one file.
//!
//! | HAL trait | here |
//! |-----------|------|
//! | [`Clock`] | the CLINT's `mtime` (10 MHz) in [`Ticks`] |
//! | [`DeviceMemory`] | a 4 MiB window of RAM ([`board::DEVICE`]), volatile accesses |
//! | [`DmaEngine`] | a copy engine: [`DMA_CHANNELS`] requests at most, each copied by [`QemuHal::run_dma`] descriptor by descriptor into host memory ([`board::HOST`]), completions in submission order |
//! | [`ComputeUnits`] | one µthread: [`QemuHal::run_items`] runs the dispatched items one at a time, in index order, with the firmware's own kernel code, counting `rdinstret` per item |
//! | [`Registers`] | the memory controller's packet filter ([`QemuHal::host_store`]), a mailbox array, a count of bulk completions, and the MSI-X messages delivered to the host ([`QemuHal::take_interrupt`], up to [`MSI_QUEUE`]) |
//!
//! Host and device share the one hart: the program's main loop (`crate::host`) alternates
//! between the firmware's step, the engine, the µthread and the host's poll, so there is no
//! true concurrency here. The accesses are still written as a real device needs them:
//! device and host memory only through volatile loads and stores (another bus master writes
//! them), and a publishing DMA write (a tail, the status word) after a release fence,
//! ordered after every earlier write of its chain.

use crate::board::{self, Window};
use core::sync::atomic::{AtomicU32, Ordering};
use firmware::hal::{
    atomic_word_fault, Clock, ComputeUnits, DeviceAtomics, DeviceMemory, DmaCompletion,
    DmaDescriptor, DmaEngine, DmaError, DmaKind, DmaRequest, DmaTag, HostEvent, ItemCompletion,
    KernelLaunch, MemoryFault, Registers,
};
use firmware::kernels::Kernel;
use firmware::scratch::ScratchLayout;
use firmware::FirmwareError;
use heapless::Deque;
use shared_abi::{device_map, mailbox, CommandDescriptor, DeviceAddress, Status, Ticks};
use zerocopy::FromBytes;

/// Requests the DMA engine holds at once (submitted, not yet completed); one more is refused
/// with [`DmaError::QueueFull`].
pub const DMA_CHANNELS: usize = 4;
/// Item completions the compute units hold for the firmware; the µthread waits while full.
pub const ITEM_QUEUE: usize = 64;
/// Host events the packet filter holds for the firmware.
pub const EVENT_QUEUE: usize = 16;
/// MSI-X messages delivered to the host and not yet taken; a further interrupt drops the
/// oldest (counted in [`QemuHal::interrupts_dropped`]). This port's launches ask for none;
/// the conformance checks take each one.
pub const MSI_QUEUE: usize = 16;

/// The launch the compute units run.
#[derive(Clone, Copy, Debug)]
struct Running {
    kernel: Kernel,
    tag: u32,
    next: u32,
    end: u32,
}

/// Instructions per item of the launches run so far, as measured and as the emulator's cost
/// model charges them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ItemStats {
    /// Items run.
    pub items: u64,
    /// `rdinstret` around each item's `Kernel::execute`, summed.
    pub measured: u64,
    /// The fewest instructions of one item.
    pub measured_min: u64,
    /// The most instructions of one item.
    pub measured_max: u64,
    /// `ItemCost::instructions()` of each item, summed (what the emulator charges).
    pub modelled: u64,
    /// Items whose kernel code failed.
    pub failed: u64,
    /// Bytes of stack one item's execution used (the deepest seen).
    pub stack: usize,
}

/// DMA engine statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DmaStats {
    /// Requests completed.
    pub requests: u64,
    /// Descriptors copied.
    pub writes: u64,
    /// Bytes copied into host memory.
    pub bytes: u64,
    /// Submissions refused because every channel was busy.
    pub refused: u64,
    /// Requests failed (a descriptor outside device or host memory, or of unknown kind).
    pub failed: u64,
}

/// The `virt` machine as the firmware's hardware.
#[derive(Debug)]
pub struct QemuHal {
    device: Window,
    host: Window,
    host_writable_end: DeviceAddress,
    dma_queue: Deque<(DmaTag, DmaRequest), DMA_CHANNELS>,
    dma_done: Deque<DmaCompletion, DMA_CHANNELS>,
    next_tag: u64,
    running: Option<Running>,
    item_done: Deque<ItemCompletion, ITEM_QUEUE>,
    events: Deque<HostEvent, EVENT_QUEUE>,
    mailbox: [u64; (mailbox::WINDOW_LENGTH / 8) as usize],
    /// Bulk-synchronous launch responses sent (none in this port's AXLE launches).
    pub bulk_completions: u64,
    /// Interrupts raised (none unless a launch asks for them).
    pub interrupts: u64,
    /// MSI-X messages delivered to the host, oldest first. The engine copies a request's
    /// writes before it reports the completion the firmware raises an interrupt for, so a
    /// message is always behind the writes it announces.
    msi: Deque<u64, MSI_QUEUE>,
    /// Messages dropped because [`MSI_QUEUE`] were waiting.
    pub interrupts_dropped: u64,
    /// Per-item instruction counts since the last [`QemuHal::take_item_stats`].
    item_stats: ItemStats,
    /// DMA statistics since start-up.
    pub dma_stats: DmaStats,
    /// The lowest stack address seen written (for the whole run's high-water mark).
    stack_low: usize,
}

impl QemuHal {
    /// The machine, with host stores allowed below the firmware's scratch area only.
    pub fn new(scratch: &ScratchLayout) -> QemuHal {
        QemuHal {
            device: board::DEVICE,
            host: board::HOST,
            host_writable_end: scratch.base,
            dma_queue: Deque::new(),
            dma_done: Deque::new(),
            next_tag: 0,
            running: None,
            item_done: Deque::new(),
            events: Deque::new(),
            mailbox: [0; (mailbox::WINDOW_LENGTH / 8) as usize],
            bulk_completions: 0,
            interrupts: 0,
            msi: Deque::new(),
            interrupts_dropped: 0,
            item_stats: ItemStats::default(),
            dma_stats: DmaStats::default(),
            stack_low: board::stack::top(),
        }
    }

    // -----------------------------------------------------------------------------------------
    // The host's side of the link
    // -----------------------------------------------------------------------------------------

    /// A host CXL.mem store into device memory, through the memory controller's packet filter
    /// (as the emulator's `cosim` does): a store into the launch window is a launch (never
    /// memory); a store at the flow-control block or the shadow descriptor is written and then
    /// announced to the firmware, after the write (the ordering the firmware relies on). A
    /// store at or above the scratch area, or outside memory, is refused: `false`.
    #[must_use]
    pub fn host_store(&mut self, address: DeviceAddress, data: &[u8]) -> bool {
        if device_map::in_launch_window(address) {
            return match CommandDescriptor::read_from_bytes(data) {
                Ok(command) => self
                    .events
                    .push_back(HostEvent::LaunchStore(command))
                    .is_ok(),
                Err(_) => false,
            };
        }
        let inside = address
            .checked_add(data.len() as u64)
            .is_some_and(|end| end <= self.host_writable_end);
        if !inside || self.write_device(address, data).is_err() {
            return false;
        }
        let event = if address == device_map::FLOW_CONTROL {
            Some(HostEvent::FlowControl)
        } else if address == device_map::SHADOW_DESCRIPTOR {
            Some(HostEvent::RegionProgrammed)
        } else {
            None
        };
        match event {
            // Release: the store above is complete before the firmware can see the event.
            Some(event) => {
                core::sync::atomic::fence(core::sync::atomic::Ordering::Release);
                self.events.push_back(event).is_ok()
            }
            None => true,
        }
    }

    /// The host reads its own memory (host physical address == CPU address); `false` outside.
    #[must_use]
    pub fn host_read(&self, address: u64, buffer: &mut [u8]) -> bool {
        self.host_offset(address)
            .is_some_and(|offset| self.host.read(offset, buffer))
    }

    /// The host writes its own memory; `false` outside.
    #[must_use]
    pub fn host_write(&self, address: u64, data: &[u8]) -> bool {
        self.host_offset(address)
            .is_some_and(|offset| self.host.write(offset, data))
    }

    /// A tail the device published, read by the host with acquire semantics (the records and
    /// payloads it announces are read after it). `None` outside host memory.
    pub fn host_load_acquire(&self, address: u64) -> Option<u64> {
        let mut word = [0_u8; 8];
        if !self.host_read(address, &mut word) {
            return None;
        }
        core::sync::atomic::fence(core::sync::atomic::Ordering::Acquire);
        Some(u64::from_le_bytes(word))
    }

    fn host_offset(&self, address: u64) -> Option<usize> {
        let base = self.host_base();
        usize::try_from(address.checked_sub(base)?).ok()
    }

    /// The host physical address of the first byte of host memory.
    pub fn host_base(&self) -> u64 {
        board::HOST_BASE as u64
    }

    /// Bytes of host memory.
    pub fn host_len(&self) -> u64 {
        self.host.len() as u64
    }

    // -----------------------------------------------------------------------------------------
    // The device's engines, run by the main loop
    // -----------------------------------------------------------------------------------------

    /// The DMA engine copies the oldest `requests` submitted requests, each as a whole, into
    /// host memory, and reports their completions in submission order. A request with a
    /// descriptor that is unreadable, of unknown kind, or that reads outside device memory or
    /// writes outside host memory fails whole before anything of it is written
    /// ([`Status::DeviceMemoryFault`]). Returns the requests it ran (fewer when none is
    /// waiting, or completions the firmware has not polled fill the queue).
    pub fn run_dma(&mut self, requests: usize) -> usize {
        let mut ran = 0_usize;
        for _ in 0..requests {
            if self.dma_done.is_full() {
                return ran;
            }
            let Some((tag, request)) = self.dma_queue.pop_front() else {
                return ran;
            };
            ran = ran.saturating_add(1);
            let status = if self.check_chain(&request) {
                self.copy_chain(&request);
                self.dma_stats.requests = self.dma_stats.requests.saturating_add(1);
                Status::Ok
            } else {
                self.dma_stats.failed = self.dma_stats.failed.saturating_add(1);
                Status::DeviceMemoryFault
            };
            // Cannot fail: checked for room above, and one request leaves the queue per entry.
            let _ = self.dma_done.push_back(DmaCompletion { tag, status });
        }
        ran
    }

    /// The oldest MSI-X message delivered to the host and not yet taken.
    pub fn take_interrupt(&mut self) -> Option<u64> {
        self.msi.pop_front()
    }

    fn descriptor(&self, request: &DmaRequest, offset: u32) -> Option<(DmaDescriptor, DmaKind)> {
        let address = ScratchLayout::cell(
            request.ring_base,
            request.first.wrapping_add(u64::from(offset)),
            request.ring_capacity,
            32,
        );
        let descriptor: DmaDescriptor = self.read_value(address).ok()?;
        let kind = DmaKind::try_from(descriptor.kind).ok()?;
        Some((descriptor, kind))
    }

    fn check_chain(&self, request: &DmaRequest) -> bool {
        (0..request.count).all(|offset| {
            self.descriptor(request, offset).is_some_and(|(d, kind)| {
                let length = u64::from(d.length);
                let source_inside = d
                    .source
                    .checked_add(length)
                    .is_some_and(|end| end <= self.size());
                let destination_inside = d.destination.checked_add(length).is_some_and(|end| {
                    d.destination >= self.host_base()
                        && end <= self.host_base().saturating_add(self.host_len())
                });
                let publish_ok = !kind.publishes() || (length == 8 && d.destination % 8 == 0);
                source_inside && destination_inside && publish_ok && length % 8 == 0
            })
        })
    }

    fn copy_chain(&mut self, request: &DmaRequest) {
        let mut buffer = [0_u8; 256];
        for offset in 0..request.count {
            let Some((d, kind)) = self.descriptor(request, offset) else {
                continue;
            };
            if kind.publishes() {
                // Edges D2, D4 and the status word: every earlier write of the chain is visible
                // before the published index. (An aligned 8-byte store is one bus write on a
                // real engine; this rv32 hart stores two words, which nothing can observe in
                // between: host and device share the hart.)
                core::sync::atomic::fence(core::sync::atomic::Ordering::Release);
            }
            let mut done = 0_u64;
            let length = u64::from(d.length);
            while done < length {
                let step = length.saturating_sub(done).min(buffer.len() as u64) as usize;
                let Some(chunk) = buffer.get_mut(..step) else {
                    break;
                };
                let read = self.read(DeviceAddress(d.source.wrapping_add(done)), chunk);
                let written =
                    read.is_ok() && self.host_write(d.destination.wrapping_add(done), chunk);
                if !written {
                    break;
                }
                done = done.wrapping_add(step as u64);
            }
            self.dma_stats.writes = self.dma_stats.writes.saturating_add(1);
            self.dma_stats.bytes = self.dma_stats.bytes.saturating_add(done);
        }
    }

    /// The µthread runs up to `items` dispatched items, in index order, each with the
    /// firmware's own kernel code (`Kernel::execute`), counting its instructions with
    /// `rdinstret`; it stops early when the completion queue is full.
    pub fn run_items(&mut self, items: u32) {
        for _ in 0..items {
            if self.item_done.is_full() {
                return;
            }
            let Some(running) = self.running.as_mut() else {
                return;
            };
            if running.next >= running.end {
                self.running = None;
                return;
            }
            let (kernel, tag, item) = (running.kernel, running.tag, running.next);
            running.next = running.next.saturating_add(1);
            let modelled = kernel
                .item(item, &*self)
                .map_or(0, |spec| spec.cost.instructions());
            let first = self.item_stats.items == 0;
            let sp = first.then(|| self.repaint_stack());
            let before = board::instret();
            let outcome = firmware::run_item(&kernel, item, &*self);
            let spent = board::instret().saturating_sub(before);
            if let Some(sp) = sp {
                let depth = self.stack_depth_since(sp);
                self.item_stats.stack = self.item_stats.stack.max(depth);
            }
            let stats = &mut self.item_stats;
            stats.measured_min = if first {
                spent
            } else {
                stats.measured_min.min(spent)
            };
            stats.items = stats.items.saturating_add(1);
            stats.measured = stats.measured.saturating_add(spent);
            stats.measured_max = stats.measured_max.max(spent);
            stats.modelled = stats.modelled.saturating_add(modelled);
            if outcome.is_err() {
                stats.failed = stats.failed.saturating_add(1);
            }
            // Cannot fail: checked for room above.
            let _ = self
                .item_done
                .push_back(ItemCompletion { tag, item, outcome });
        }
    }

    /// Whether the µthread has items left.
    pub fn items_pending(&self) -> bool {
        self.running
            .is_some_and(|running| running.next < running.end)
    }

    /// The per-item statistics since the last call, reset.
    pub fn take_item_stats(&mut self) -> ItemStats {
        core::mem::take(&mut self.item_stats)
    }

    /// Paints the stack below the caller (keeping the deepest use so far for
    /// [`QemuHal::stack_high_water`]); returns the stack pointer to pass to
    /// [`QemuHal::stack_depth_since`].
    #[inline(always)]
    pub fn repaint_stack(&mut self) -> usize {
        self.stack_low = self.stack_low.min(board::stack::lowest_used());
        board::stack::paint_below_here()
    }

    /// Bytes of stack used below `sp` (from [`QemuHal::repaint_stack`]) since then.
    pub fn stack_depth_since(&mut self, sp: usize) -> usize {
        let lowest = board::stack::lowest_used();
        self.stack_low = self.stack_low.min(lowest);
        sp.saturating_sub(lowest)
    }

    /// The deepest stack use of the whole run so far, in bytes from the stack's top.
    pub fn stack_high_water(&mut self) -> usize {
        self.stack_low = self.stack_low.min(board::stack::lowest_used());
        board::stack::top().saturating_sub(self.stack_low)
    }

    /// A mailbox register's value (RP mode; unused by this port's AXLE launches).
    pub fn mailbox(&self, offset: u64) -> u64 {
        self.mailbox
            .get(usize::try_from(offset / 8).unwrap_or(usize::MAX))
            .copied()
            .unwrap_or(0)
    }

    fn write_device(&self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
        let fault = MemoryFault {
            address,
            length: data.len() as u64,
        };
        let offset = usize::try_from(address.0).map_err(|_| fault)?;
        if self.device.write(offset, data) {
            Ok(())
        } else {
            Err(fault)
        }
    }
}

impl Clock for QemuHal {
    fn now(&self) -> Ticks {
        // mtime counts 100 ns periods; saturating, so monotonic and never wrapping.
        Ticks::from_ns(board::mtime().saturating_mul(1_000_000_000 / board::MTIME_HZ))
    }
}

impl DeviceMemory for QemuHal {
    fn size(&self) -> u64 {
        self.device.len() as u64
    }

    fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
        let fault = MemoryFault {
            address,
            length: buffer.len() as u64,
        };
        let offset = usize::try_from(address.0).map_err(|_| fault)?;
        if self.device.read(offset, buffer) {
            Ok(())
        } else {
            Err(fault)
        }
    }

    fn write(&self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
        self.write_device(address, data)
    }
}

impl QemuHal {
    /// The device-memory word at `address` as an atomic, or the fault the HAL contract names.
    fn device_word(&self, address: DeviceAddress) -> Result<&'static AtomicU32, MemoryFault> {
        let fault = MemoryFault { address, length: 4 };
        if let Some(fault) = atomic_word_fault(address, self.device.len() as u64) {
            return Err(fault);
        }
        let offset = usize::try_from(address.0).map_err(|_| fault)?;
        self.device.atomic_u32(offset).ok_or(fault)
    }
}

/// The A extension's atomics on device RAM, with acquire-release ordering (the contract asks
/// for at least relaxed).
impl DeviceAtomics for QemuHal {
    fn fetch_add_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
        Ok(self
            .device_word(address)?
            .fetch_add(value, Ordering::AcqRel))
    }

    fn fetch_min_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
        Ok(self
            .device_word(address)?
            .fetch_min(value, Ordering::AcqRel))
    }

    fn swap_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
        Ok(self.device_word(address)?.swap(value, Ordering::AcqRel))
    }

    fn compare_exchange_u32(
        &self,
        address: DeviceAddress,
        current: u32,
        new: u32,
    ) -> Result<u32, MemoryFault> {
        let word = self.device_word(address)?;
        Ok(
            match word.compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(previous) | Err(previous) => previous,
            },
        )
    }
}

impl DmaEngine for QemuHal {
    fn submit(&mut self, request: DmaRequest) -> Result<DmaTag, DmaError> {
        // A channel is busy from submission until the firmware took its completion.
        if self.dma_queue.len().saturating_add(self.dma_done.len()) >= DMA_CHANNELS {
            self.dma_stats.refused = self.dma_stats.refused.saturating_add(1);
            return Err(DmaError::QueueFull);
        }
        let tag = DmaTag(self.next_tag);
        if self.dma_queue.push_back((tag, request)).is_err() {
            self.dma_stats.refused = self.dma_stats.refused.saturating_add(1);
            return Err(DmaError::QueueFull);
        }
        self.next_tag = self.next_tag.wrapping_add(1);
        Ok(tag)
    }

    fn poll_completion(&mut self) -> Option<DmaCompletion> {
        self.dma_done.pop_front()
    }
}

impl ComputeUnits for QemuHal {
    fn dispatch(&mut self, launch: KernelLaunch) -> Result<(), FirmwareError> {
        if self.items_pending() {
            return Err(FirmwareError::Busy);
        }
        // The kernel was decoded once, when the command processor validated the launch.
        let range = launch.item_range();
        self.running = Some(Running {
            kernel: launch.kernel,
            tag: launch.tag,
            next: range.start,
            end: range.end,
        });
        Ok(())
    }

    fn poll_item(&mut self) -> Option<ItemCompletion> {
        self.item_done.pop_front()
    }
}

impl Registers for QemuHal {
    fn take_event(&mut self) -> Option<HostEvent> {
        // Acquire: what the host stored before announcing the event is visible now.
        let event = self.events.pop_front();
        core::sync::atomic::fence(core::sync::atomic::Ordering::Acquire);
        event
    }

    fn write_mailbox(&mut self, offset: u64, value: u64) {
        if let Some(register) = self
            .mailbox
            .get_mut(usize::try_from(offset / 8).unwrap_or(usize::MAX))
        {
            *register = value;
        }
    }

    fn complete_bulk_launch(&mut self, _tag: u32, _status: Status) {
        self.bulk_completions = self.bulk_completions.saturating_add(1);
    }

    fn raise_interrupt(&mut self, message: u64) {
        self.interrupts = self.interrupts.saturating_add(1);
        if self.msi.is_full() {
            let _ = self.msi.pop_front();
            self.interrupts_dropped = self.interrupts_dropped.saturating_add(1);
        }
        // Cannot fail: room was made above.
        let _ = self.msi.push_back(message);
    }
}
