//! [`FakeHal`]: every double together, implementing every HAL trait.

use super::compute::Running;
use super::*;

/// Every fake, implementing [`crate::hal::Hal`].
#[derive(Debug)]
pub struct FakeHal {
    /// The clock.
    pub clock: FakeClock,
    /// Device memory.
    pub memory: FakeDeviceMemory,
    /// The DMA engine.
    pub dma: FakeDmaEngine,
    /// The compute units.
    pub compute: FakeComputeUnits,
    /// Registers and signals.
    pub registers: FakeRegisters,
    /// Host memory, where completed DMA requests land.
    pub host: FakeHostMemory,
}

impl Default for FakeHal {
    fn default() -> Self {
        FakeHal::new()
    }
}

impl FakeHal {
    /// A HAL with [`DEVICE_MEMORY_BYTES`] of device memory.
    pub fn new() -> FakeHal {
        FakeHal::with_memory(DEVICE_MEMORY_BYTES as usize)
    }

    /// A HAL with `bytes` of device memory.
    pub fn with_memory(bytes: usize) -> FakeHal {
        FakeHal {
            clock: FakeClock::new(),
            memory: FakeDeviceMemory::new(bytes),
            dma: FakeDmaEngine::default(),
            compute: FakeComputeUnits::default(),
            registers: FakeRegisters::default(),
            host: FakeHostMemory::default(),
        }
    }

    /// Queues a host event.
    pub fn push_event(&mut self, event: HostEvent) {
        self.registers.push_event(event);
    }

    /// A launch store (BS or AXLE) arrives through the launch window.
    pub fn launch_store(&mut self, command: CommandDescriptor) {
        self.push_event(HostEvent::LaunchStore(command));
    }

    /// The host stores new heads into the flow-control block (a CXL.mem store) and the
    /// firmware is told the store landed.
    pub fn send_heads(&mut self, metadata_head: u64, payload_head: u64) {
        self.memory.put(
            device_map::FLOW_CONTROL,
            &FlowControlMessage {
                metadata_head,
                payload_head,
            },
        );
        self.push_event(HostEvent::FlowControl);
    }

    /// Reports `items` of the current launch finished, in the given order. With
    /// [`FakeComputeUnits::execute_kernels`], each item's real kernel code runs first and its
    /// status is reported. Panics (a test error) on an item reported twice or out of range.
    pub fn finish_items(&mut self, items: impl IntoIterator<Item = u32>) {
        for item in items {
            let running = self.compute.running.as_mut().expect("no launch dispatched");
            assert!(
                running.launch.item_range().contains(&item),
                "item {item} out of range"
            );
            assert!(
                !running.finished[item as usize],
                "item {item} reported twice"
            );
            running.finished[item as usize] = true;
            let tag = running.launch.tag;
            let outcome = match (self.compute.execute_kernels, running.kernel) {
                (true, Some(kernel)) => crate::run_item(&kernel, item, &self.memory),
                _ => Ok(()),
            };
            self.compute
                .completions
                .push_back(ItemCompletion { tag, item, outcome });
        }
    }

    /// Reports `items` failed with `error`, without running kernel code.
    pub fn finish_items_with_error(
        &mut self,
        items: impl IntoIterator<Item = u32>,
        error: FirmwareError,
    ) {
        for item in items {
            let running = self.compute.running.as_mut().expect("no launch dispatched");
            assert!(
                running.launch.item_range().contains(&item),
                "item {item} out of range"
            );
            assert!(
                !running.finished[item as usize],
                "item {item} reported twice"
            );
            running.finished[item as usize] = true;
            let tag = running.launch.tag;
            self.compute.completions.push_back(ItemCompletion {
                tag,
                item,
                outcome: Err(error),
            });
        }
    }

    /// Reports every unfinished item of the current launch, in index order.
    pub fn finish_all_items(&mut self) {
        let items = self.compute.unfinished_items();
        self.finish_items(items);
    }

    /// Completes the oldest outstanding request with `status`; with [`Status::Ok`] its writes
    /// land in host memory in chain order. Returns its tag, `None` when nothing is outstanding.
    pub fn complete_next_dma(&mut self, status: Status) -> Option<DmaTag> {
        let position = self.dma.outstanding.pop_front()?;
        let request = &mut self.dma.submitted[position];
        request.completed = Some(status);
        if status == Status::Ok {
            for write in request.writes() {
                self.host.apply(write);
            }
        }
        let tag = request.tag;
        self.dma
            .completions
            .push_back(DmaCompletion { tag, status });
        Some(tag)
    }

    /// Reports a completion for `tag` without completing any request: a DMA engine that
    /// breaks the HAL's contract (completions in submission order, one per request).
    pub fn report_spurious_dma_completion(&mut self, tag: DmaTag) {
        self.dma.completions.push_back(DmaCompletion {
            tag,
            status: Status::Ok,
        });
    }

    /// Completes up to `count` of the oldest outstanding requests successfully; returns how
    /// many.
    pub fn complete_dma(&mut self, count: usize) -> usize {
        (0..count)
            .take_while(|_| self.complete_next_dma(Status::Ok).is_some())
            .count()
    }

    /// Completes every outstanding request successfully; returns how many.
    pub fn complete_all_dma(&mut self) -> usize {
        self.complete_dma(usize::MAX)
    }

    /// Steps `firmware`, completing every DMA request it submits, until it submits nothing
    /// more and no event, completion or item is pending (at most `rounds` steps). Returns the
    /// last step's outcome.
    pub fn settle(&mut self, firmware: &mut Firmware, rounds: usize) -> StepOutcome {
        let mut outcome = firmware.step(self);
        for _ in 0..rounds {
            if self.complete_all_dma() == 0
                && self.registers.events.is_empty()
                && self.compute.completions.is_empty()
                && self.dma.completions.is_empty()
            {
                break;
            }
            outcome = firmware.step(self);
        }
        outcome
    }
}

impl Clock for FakeHal {
    fn now(&self) -> Ticks {
        self.clock.now()
    }
}

impl DeviceMemory for FakeHal {
    fn size(&self) -> u64 {
        self.memory.size()
    }
    fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
        self.memory.read(address, buffer)
    }
    fn write(&self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
        self.memory.write(address, data)
    }
}

impl DeviceAtomics for FakeHal {
    fn fetch_add_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
        self.memory.fetch_add_u32(address, value)
    }
    fn fetch_min_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
        self.memory.fetch_min_u32(address, value)
    }
    fn swap_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
        self.memory.swap_u32(address, value)
    }
    fn compare_exchange_u32(
        &self,
        address: DeviceAddress,
        current: u32,
        new: u32,
    ) -> Result<u32, MemoryFault> {
        self.memory.compare_exchange_u32(address, current, new)
    }
}

impl DmaEngine for FakeHal {
    fn submit(&mut self, request: DmaRequest) -> Result<DmaTag, DmaError> {
        let dma = &mut self.dma;
        if dma.refuse_next > 0
            || dma
                .queue_depth
                .is_some_and(|depth| dma.outstanding.len() >= depth)
        {
            dma.refuse_next = dma.refuse_next.saturating_sub(1);
            dma.refusals += 1;
            return Err(DmaError::QueueFull);
        }
        let tag = DmaTag(dma.next_tag);
        dma.next_tag += 1;
        let chain = decode_request(&self.memory, &request);
        let dma = &mut self.dma;
        dma.outstanding.push_back(dma.submitted.len());
        dma.submitted.push(SubmittedRequest {
            tag,
            request,
            submitted_at: self.clock.now(),
            chain,
            completed: None,
        });
        Ok(tag)
    }

    fn poll_completion(&mut self) -> Option<DmaCompletion> {
        self.dma.completions.pop_front()
    }
}

impl ComputeUnits for FakeHal {
    fn dispatch(&mut self, launch: KernelLaunch) -> Result<(), FirmwareError> {
        if let Some(status) = self.compute.refuse_dispatch {
            return Err(status);
        }
        // The kernel the firmware decoded: the fake reads no command or parameter block.
        let kernel = Some(launch.kernel);
        self.compute.launches.push(launch);
        self.compute.running = Some(Running {
            launch,
            kernel,
            finished: std::vec![false; launch.item_range().end as usize],
        });
        Ok(())
    }

    fn poll_item(&mut self) -> Option<ItemCompletion> {
        self.compute.completions.pop_front()
    }
}

impl Registers for FakeHal {
    fn take_event(&mut self) -> Option<HostEvent> {
        self.registers.take_event()
    }
    fn write_mailbox(&mut self, offset: u64, value: u64) {
        self.registers.write_mailbox(offset, value);
    }
    fn complete_bulk_launch(&mut self, tag: u32, status: Status) {
        self.registers.complete_bulk_launch(tag, status);
    }
    fn raise_interrupt(&mut self, message: u64) {
        self.registers.raise_interrupt(message);
    }
}
