//! The firmware's top level: one [`Firmware`] per device, driven by [`Firmware::step`].

use crate::command::{self, ValidCommand};
use crate::error::FirmwareError;
use crate::executor::{DmaExecutor, PumpOutcome, StreamTarget};
use crate::hal::{Hal, HostEvent, KernelLaunch};
use crate::monitor::{MonitorArrays, ResultMonitor};
use crate::scratch::ScratchLayout;
use crate::trace::{Counters, Trace, TraceEvent};
use crate::translate::ShadowRegion;
use heapless::Deque;
use shared_abi::command::CommandFlags;
use shared_abi::{mailbox, CommandDescriptor, DeviceAddress, LaunchMode, Status};

/// Launches that may wait behind the running one.
pub const LAUNCH_QUEUE: usize = 4;

/// Static configuration of the firmware.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FirmwareConfig {
    /// The scratch area the board reserved.
    pub scratch: ScratchLayout,
    /// The streaming factor: a batch is submitted once it holds this many result bytes.
    pub streaming_factor: StreamingFactor,
    /// Out-of-order streaming (default); `false` streams strictly by result offset.
    pub out_of_order: bool,
}

/// How many result bytes a DMA batch collects before it is submitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamingFactor {
    /// A fixed number of bytes (SF1 = one 32-byte slot).
    Bytes(u64),
    /// A percentage (1..=100) of the launch's result size (SF_25% etc.).
    PercentOfResult(u32),
}

impl StreamingFactor {
    /// The factor in bytes for a result of `result_length` bytes (at least one byte).
    pub fn bytes_for(self, result_length: u64) -> u64 {
        match self {
            StreamingFactor::Bytes(bytes) => bytes.max(1),
            StreamingFactor::PercentOfResult(percent) => {
                (result_length.saturating_mul(u64::from(percent.min(100))) / 100).max(1)
            }
        }
    }
}

/// What one [`Firmware::step`] left behind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepOutcome {
    /// A launch is running or streaming.
    pub busy: bool,
    /// The executor waits for the host's flow control (back-pressure).
    pub waiting_for_credit: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Active {
    valid: ValidCommand,
    monitor: ResultMonitor,
    /// The launch's first failure, reported when it completes.
    failure: Option<FirmwareError>,
    completion_sent: bool,
    /// The stage the compute units run (see [`crate::kernels`]).
    stage: u32,
    /// Items of that stage not finished yet.
    stage_left: u32,
}

/// The firmware.
#[derive(Debug)]
pub struct Firmware {
    config: FirmwareConfig,
    region: Option<ShadowRegion>,
    executor: DmaExecutor,
    active: Option<Active>,
    queued: Deque<ValidCommand, LAUNCH_QUEUE>,
    mailbox_occupied: bool,
    broken: Option<FirmwareError>,
    counters: Counters,
    trace: Trace,
}

impl Firmware {
    /// Firmware for a device whose board reserved `config.scratch`.
    pub fn new(config: FirmwareConfig) -> Firmware {
        Firmware {
            config,
            region: None,
            executor: DmaExecutor::new(1),
            active: None,
            queued: Deque::new(),
            mailbox_occupied: false,
            broken: None,
            counters: Counters::default(),
            trace: Trace::default(),
        }
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The trace ring.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Why the ring is BROKEN, if it is, as the device status word tells the host.
    pub fn broken(&self) -> Option<Status> {
        self.broken.map(Status::from)
    }

    /// Why the ring is BROKEN, if it is, as the firmware knows it.
    pub fn broken_error(&self) -> Option<FirmwareError> {
        self.broken
    }

    /// Whether the DMA executor has nothing left to do: no request in flight, no batch open.
    pub fn streaming_idle(&self) -> bool {
        self.executor.idle()
    }

    /// Whether the DMA executor waits for ring credit now (a back-pressure interval is open
    /// and not yet counted in [`Counters::backpressure_ticks`]).
    pub fn waiting_for_credit(&self) -> bool {
        self.executor.blocked()
    }

    /// Records and payloads the executor has published so far (its metadata and payload
    /// tails).
    pub fn stream_tails(&self) -> (u64, u64) {
        (self.executor.metadata_tail(), self.executor.payload_tail())
    }

    /// Does everything that can be done now: DMA completions, host events, finished work
    /// items, streaming. Never waits.
    pub fn step<H: Hal>(&mut self, hw: &mut H) -> StepOutcome {
        while let Some(completion) = hw.poll_completion() {
            self.on_dma_completion(hw, completion.tag, completion.status);
        }
        self.publish_pending_status(hw);
        while let Some(event) = hw.take_event() {
            self.on_host_event(hw, event);
        }
        // The monitor's arrays in scratch memory, once for the step's items.
        let arrays = MonitorArrays::of(&self.config.scratch);
        while let Some(item) = hw.poll_item() {
            self.on_item(hw, item.item, item.outcome, arrays);
        }
        let mut waiting_for_credit = false;
        if let Some(outcome) = self.stream(hw) {
            waiting_for_credit = outcome == PumpOutcome::WaitingForCredit;
        }
        self.finish_if_done(hw);
        self.start_next(hw);
        StepOutcome {
            busy: self.active.is_some() || !self.executor.idle(),
            waiting_for_credit,
        }
    }

    fn on_dma_completion<H: Hal>(&mut self, hw: &mut H, tag: crate::hal::DmaTag, status: Status) {
        let published = match self.executor.complete(tag) {
            Ok(published) => published,
            Err(error) => {
                self.latch_broken(hw, error);
                return;
            }
        };
        if status != Status::Ok {
            self.latch_broken(hw, FirmwareError::Reported(status));
        }
        let interrupt = self
            .active
            .is_some_and(|active| active.valid.flags.contains(CommandFlags::INTERRUPT));
        if interrupt {
            hw.raise_interrupt(published);
        }
    }

    fn on_host_event<H: Hal>(&mut self, hw: &mut H, event: HostEvent) {
        match event {
            HostEvent::LaunchStore(command) => {
                let mode =
                    LaunchMode::try_from(command.mode).unwrap_or(LaunchMode::BulkSynchronous);
                let mode = if mode == LaunchMode::RemotePolling {
                    // RP commands come through the mailbox, never the launch window.
                    LaunchMode::BulkSynchronous
                } else {
                    mode
                };
                self.accept(hw, &command, mode);
            }
            HostEvent::Doorbell(address) => {
                if self.mailbox_occupied {
                    // The mailbox holds one command until it is dequeued; a second doorbell is
                    // dropped (the running command's status stays intact) and counted.
                    self.counters.refused = self.counters.refused.saturating_add(1);
                    self.trace.record(TraceEvent::Refused {
                        tag: 0,
                        status: Status::Busy,
                    });
                    return;
                }
                self.mailbox_occupied = true;
                hw.write_mailbox(mailbox::STATUS, mailbox::status::RUNNING);
                match command::read_mailbox_descriptor(hw, address) {
                    Ok(command) => self.accept(hw, &command, LaunchMode::RemotePolling),
                    Err(error) => self.mailbox_complete(hw, 0, error.into()),
                }
            }
            HostEvent::Dequeue => {
                self.mailbox_occupied = false;
                hw.write_mailbox(mailbox::STATUS, mailbox::status::IDLE);
            }
            HostEvent::FlowControl => {}
            // Built in place (`load_into`): the table is 24 KiB, too big to move through
            // the stack of a small core. On any error `self.region` is `None`.
            HostEvent::RegionProgrammed => match ShadowRegion::load_into(&mut self.region, &*hw) {
                Ok(()) => {
                    self.executor = DmaExecutor::new(1);
                    self.broken = None;
                }
                // A header without the magic: the driver is reprogramming (it clears the
                // header before it rewrites the entries). Not an error.
                Err(FirmwareError::NoRegion) => {}
                Err(status) => self.latch_broken(hw, status),
            },
        }
    }

    /// Validates a command and queues it, or reports why not on its path.
    fn accept<H: Hal>(&mut self, hw: &mut H, command: &CommandDescriptor, mode: LaunchMode) {
        let checked = command::validate(command, mode, &*hw).and_then(|valid| {
            if valid.mode == LaunchMode::BackStreaming {
                if self.region.is_none() {
                    return Err(FirmwareError::NoRegion);
                }
                if let Some(status) = self.broken {
                    let _ = status;
                    return Err(FirmwareError::RingBroken);
                }
            }
            Ok(valid)
        });
        match checked {
            Ok(valid) => {
                if self.queued.push_back(valid).is_err() {
                    self.refuse(hw, command, mode, FirmwareError::Busy);
                }
            }
            Err(status) => self.refuse(hw, command, mode, status),
        }
    }

    fn refuse<H: Hal>(
        &mut self,
        hw: &mut H,
        command: &CommandDescriptor,
        mode: LaunchMode,
        error: FirmwareError,
    ) {
        let status = Status::from(error);
        self.counters.refused = self.counters.refused.saturating_add(1);
        self.trace.record(TraceEvent::Refused {
            tag: command.tag,
            status,
        });
        match mode {
            LaunchMode::RemotePolling => self.mailbox_complete(hw, command.tag, status),
            LaunchMode::BulkSynchronous => hw.complete_bulk_launch(command.tag, status),
            LaunchMode::BackStreaming => self.latch_broken(hw, error),
        }
    }

    fn mailbox_complete<H: Hal>(&mut self, hw: &mut H, tag: u32, status: Status) {
        hw.write_mailbox(mailbox::COMPLETION_CODE, u64::from(status.code()));
        hw.write_mailbox(mailbox::COMPLETION_TAG, u64::from(tag));
        // The code rides in the status register's upper half too, so one poll tells all.
        hw.write_mailbox(
            mailbox::STATUS,
            mailbox::status::COMPLETE | (u64::from(status.code()) << 32),
        );
    }

    fn start_next<H: Hal>(&mut self, hw: &mut H) {
        if self.active.is_some() {
            return;
        }
        let Some(valid) = self.queued.pop_front() else {
            return;
        };
        let items = valid.kernel.items();
        let chunk = match (valid.mode, &self.region) {
            (LaunchMode::BackStreaming, Some(region)) => region.layout().slot_size(),
            // RP and BS only count completions; any chunk size works.
            _ => 4096,
        };
        let monitor = ResultMonitor::start(
            hw,
            &self.config.scratch,
            valid.command.result_length,
            chunk,
            items,
            !self.config.out_of_order,
        );
        let monitor = match monitor {
            Ok(monitor) => monitor,
            Err(status) => {
                self.refuse(hw, &valid.command, valid.mode, status);
                return;
            }
        };
        let (stage, stage_left) = match Self::dispatch_stage(hw, &valid, 0) {
            Ok(dispatched) => dispatched,
            Err(status) => {
                self.refuse(hw, &valid.command, valid.mode, status);
                return;
            }
        };
        self.executor.set_streaming_factor(
            self.config
                .streaming_factor
                .bytes_for(valid.command.result_length),
        );
        self.counters.launches = self.counters.launches.saturating_add(1);
        self.trace.record(TraceEvent::Launch {
            tag: valid.command.tag,
            items,
        });
        self.active = Some(Active {
            valid,
            monitor,
            failure: None,
            completion_sent: false,
            stage,
            stage_left,
        });
    }

    /// Dispatches the first non-empty stage at or after `stage`; returns it and its item
    /// count. Past the last stage there is nothing to dispatch: `(stages, 0)`.
    fn dispatch_stage<H: Hal>(
        hw: &mut H,
        valid: &ValidCommand,
        mut stage: u32,
    ) -> Result<(u32, u32), FirmwareError> {
        let stages = valid.kernel.stages();
        while stage < stages {
            let range = valid.kernel.stage_items(stage);
            let items = range.end.saturating_sub(range.start);
            if items > 0 {
                hw.dispatch(KernelLaunch {
                    tag: valid.command.tag,
                    kernel: valid.kernel,
                    first_item: range.start,
                    items,
                })?;
                return Ok((stage, items));
            }
            stage = stage.saturating_add(1);
        }
        Ok((stages, 0))
    }

    fn on_item<H: Hal>(
        &mut self,
        hw: &mut H,
        item: u32,
        outcome: Result<(), FirmwareError>,
        arrays: MonitorArrays,
    ) {
        let Some(active) = self.active.as_mut() else {
            return;
        };
        if let Err(error) = outcome {
            active.failure.get_or_insert(error);
        }
        // An item that ran without error has its result range from the launch alone (it passed
        // the same checks of device memory its description makes); a failed one is described
        // again, which decides whether it still populated its range or failed.
        let range = match (outcome, active.valid.kernel.result_range(item)) {
            (Ok(()), Some(range)) => Ok(range),
            _ => active
                .valid
                .kernel
                .item(item, &*hw)
                .map(|spec| (spec.result_offset, spec.result_length)),
        };
        let result = match range {
            Ok((offset, length)) => {
                active
                    .monitor
                    .populated_in(hw, arrays, offset, u64::from(length))
            }
            Err(status) => {
                active.monitor.item_failed();
                Err(status)
            }
        };
        if let Err(error) = result {
            active.failure.get_or_insert(error);
        }
        active.stage_left = active.stage_left.saturating_sub(1);
        let next_stage = active.stage.saturating_add(1);
        if active.stage_left == 0 && next_stage < active.valid.kernel.stages() {
            // The barrier: the whole stage finished, so the next one may read its output.
            match Self::dispatch_stage(hw, &active.valid, next_stage) {
                Ok((stage, left)) => {
                    active.stage = stage;
                    active.stage_left = left;
                }
                Err(error) => {
                    active.failure.get_or_insert(error);
                    // Nothing will run the remaining items: count them as finished (failed)
                    // so that the launch completes with the error instead of hanging.
                    let total = active.valid.kernel.items();
                    let next = active.valid.kernel.stage_items(next_stage).start;
                    for _ in next..total {
                        active.monitor.item_failed();
                    }
                    active.stage = active.valid.kernel.stages();
                }
            }
        }
    }

    fn stream<H: Hal>(&mut self, hw: &mut H) -> Option<PumpOutcome> {
        if self.broken.is_some() {
            return None;
        }
        let region = self.region.as_ref()?;
        let active = self.active.as_mut()?;
        if active.valid.mode != LaunchMode::BackStreaming {
            return None;
        }
        let target = StreamTarget {
            result_address: DeviceAddress(active.valid.command.result_address),
            tag: active.valid.command.tag,
        };
        let outcome = self.executor.pump(
            hw,
            &mut active.monitor,
            region,
            &self.config.scratch,
            target,
            &mut self.counters,
            &mut self.trace,
        );
        match outcome {
            Ok(outcome) => Some(outcome),
            Err(status) => {
                self.latch_broken(hw, status);
                None
            }
        }
    }

    fn finish_if_done<H: Hal>(&mut self, hw: &mut H) {
        let Some(active) = self.active.as_mut() else {
            return;
        };
        if !active.monitor.all_items_done() {
            return;
        }
        match active.valid.mode {
            LaunchMode::RemotePolling => {
                let (tag, status) = (active.valid.command.tag, wire_status(active.failure));
                self.active = None;
                self.mailbox_complete(hw, tag, status);
            }
            LaunchMode::BulkSynchronous => {
                let (tag, status) = (active.valid.command.tag, wire_status(active.failure));
                self.active = None;
                hw.complete_bulk_launch(tag, status);
            }
            LaunchMode::BackStreaming => {
                if let (Some(error), false) = (active.failure, active.completion_sent) {
                    active.completion_sent = true;
                    self.latch_broken(hw, error);
                    self.active = None;
                    return;
                }
                if self.broken.is_some()
                    || (active.monitor.all_chunks_taken() && self.executor.idle())
                {
                    self.active = None;
                }
            }
        }
    }

    /// A BROKEN status the DMA engine could not take yet goes out as soon as it can (after a
    /// completion freed a channel).
    fn publish_pending_status<H: Hal>(&mut self, hw: &mut H) {
        if let Some(region) = self.region.as_ref() {
            // Best effort: if even this fails there is no way left to tell the host.
            let _ = self
                .executor
                .publish_pending_status(hw, region, &self.config.scratch);
        }
    }

    /// Latches the ring BROKEN without telling the host (no status write, no DMA): for a
    /// device that detached this firmware's host and may no longer write its memory (a device
    /// shared by several hosts, `emulator::cosim::tenants`). A ring already BROKEN keeps its
    /// first cause.
    pub fn mark_broken(&mut self, error: FirmwareError) {
        if self.broken.is_some() {
            return;
        }
        self.broken = Some(error);
        self.executor.abandon_batch();
        self.trace.record(TraceEvent::Broken {
            status: Status::from(error),
        });
    }

    /// Latches the ring BROKEN: nothing more is streamed until the region is reprogrammed, and
    /// the device status word tells the host why (as soon as the DMA engine takes the write).
    fn latch_broken<H: Hal>(&mut self, hw: &mut H, error: FirmwareError) {
        if self.broken.is_some() {
            return;
        }
        self.broken = Some(error);
        let status = Status::from(error);
        self.executor.abandon_batch();
        self.trace.record(TraceEvent::Broken { status });
        if let Some(region) = self.region.as_ref() {
            // Best effort: if even this fails there is no way left to tell the host.
            let _ = self
                .executor
                .publish_status(hw, region, &self.config.scratch, status);
        }
    }
}

/// A launch's completion status on the wire: [`Status::Ok`], or its first failure.
fn wire_status(failure: Option<FirmwareError>) -> Status {
    failure.map_or(Status::Ok, Status::from)
}
