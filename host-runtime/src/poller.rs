//! The poller: AXLE's local polling (paper section IV-C) and, in AXLE_Interrupt, the
//! interrupt handler that does the same work.
//!
//! One poll loads the metadata tail from host memory (one uncached load, edge H1 in
//! [`crate::ring`]) and, when the tail moved, pushes the new records as one batch (the index
//! range `[head, tail)`) into the [`crate::ready_pool`]: "the polling routine only moves
//! metadata to the ready pool". Nothing it pays for grows with the records of the batch; the
//! host tasks read the records with their payloads. When the poll ends, the batch reaches the
//! scheduler (`Poller::poll_done`): its records are copied out of the ring to learn which
//! tasks became ready (bookkeeping the model gives no time), and the heads freed meanwhile go
//! back to the device in one flow-control store (`Poller::send_flow_control`).
//!
//! When polls happen is the mode's business: [`crate::modes::axle`] schedules one every
//! polling interval on the control thread while results are due; `crate::modes::axle_irq`
//! runs one per interrupt, in interrupt context, with the tail the interrupt announces as its
//! limit.

use crate::modes::axle::{AxleRing, AxleRingError};
use crate::modes::ModeTimer;
use crate::runtime::{Host, RuntimeError, Timer};
use crate::trace::HostSpanKind;
use cosim_link::link::DeviceLink;
use shared_abi::{MetadataRecord, Ticks};
use zerocopy::IntoBytes;

/// The poller over the host end of one AXLE ring.
#[derive(Debug)]
pub(crate) struct Poller {
    /// The ring (`None` only when a streaming mode was given none: its first launch fails).
    pub(crate) ring: Option<AxleRing>,
    /// When the last poll (or handler) started.
    pub(crate) started: Ticks,
    /// AXLE_Interrupt: polls are interrupt handlers, and the workers that free slots send the
    /// flow-control stores, not the control thread.
    interrupts: bool,
    /// Scratch: the records of the batch being taken.
    records: Vec<MetadataRecord>,
    /// Scratch: the tasks one record made ready.
    ready: Vec<u32>,
}

impl Poller {
    /// A poller over `ring`; `interrupts`: AXLE_Interrupt.
    pub(crate) fn new(ring: Option<AxleRing>, interrupts: bool) -> Poller {
        Poller {
            ring,
            started: Ticks::ZERO,
            interrupts,
            records: Vec::new(),
            ready: Vec::new(),
        }
    }

    /// One local poll (or interrupt handler): loads the metadata tail and pushes the new
    /// records below `limit` (all of them when `None`; an interrupt names the tail it
    /// announces) into the ready pool as one batch, the index range `[head, tail)`. It costs
    /// one uncached load, plus one ready-pool push when the batch is not empty: nothing here
    /// grows with the records of the batch, which the host tasks read with their payloads.
    /// The batch reaches the scheduler when the poll ends.
    ///
    /// A local poll runs on the control thread and is called only when the thread is free (a
    /// poll due while it is busy waits, `ModeTimer::LocalPoll`). An interrupt handler runs at
    /// once, in interrupt context on the core the interrupt is delivered to, not as a
    /// control-thread activity (as its flow-control stores are issued by the workers that
    /// free the slots): its time is stall, but it neither waits for nor delays the control
    /// thread, nor other handlers.
    pub(crate) fn poll(&mut self, host: &mut Host<'_>, now: Ticks, limit: Option<u64>) {
        let Some(ring) = self.ring.as_mut() else {
            return;
        };
        host.measured.polls += 1;
        self.started = now;
        let batch = match ring.poll(limit) {
            Ok(batch) => batch,
            Err(error) => {
                host.fail(now, RuntimeError::Ring(error));
                return;
            }
        };
        let records = batch.end - batch.start;
        let duration = Self::cost(host, records);
        if host.tracing() {
            let records = u32::try_from(records).unwrap_or(u32::MAX);
            let first = batch.start;
            let kind = if limit.is_some() {
                HostSpanKind::InterruptHandler { records, first }
            } else {
                HostSpanKind::LocalPoll { records, first }
            };
            host.trace_span(kind, now, now.plus(duration));
        }
        if limit.is_some() {
            host.stall(duration);
        } else {
            host.occupy_control(now, duration);
        }
        if records > 0 {
            host.last_progress = now;
        }
        host.at(
            now.plus(duration),
            Timer::Mode(ModeTimer::PollDone { batch: records > 0 }),
        );
    }

    /// The control thread's time for one poll (or interrupt handler) that found `records`
    /// new records: one uncached load of the metadata tail, and one ready-pool push of the
    /// batch when there is one. Independent of how many records the batch holds.
    fn cost(host: &Host<'_>, records: u64) -> Ticks {
        let push = if records > 0 {
            Ticks::from_ns(host.config.ready_pool_push_ns)
        } else {
            Ticks::ZERO
        };
        host.cost.uncached_loads(1).plus(push)
    }

    /// The poll's batches reach the scheduler: the records are copied out of the ring (the
    /// scheduler's bookkeeping, which the model gives no time) to learn which tasks became
    /// ready; their slots stay held until the tasks that read them have run.
    ///
    /// Each poll (or handler) that found records pushed one batch; the batches leave the pool
    /// in that order, and polls that push one take equally long, so the batch taken here is
    /// this poll's. (Interrupt handlers overlap: a later handler's batch must not reach the
    /// scheduler when an earlier one ends.)
    pub(crate) fn poll_done(
        &mut self,
        host: &mut Host<'_>,
        now: Ticks,
        batch: bool,
        link: &mut dyn DeviceLink,
    ) {
        let Some(ring) = self.ring.as_mut() else {
            return;
        };
        if host.launch.is_none() {
            if let Err(error) = ring.drain_stale() {
                host.fail(now, RuntimeError::Ring(error));
            }
            return;
        }
        let taken = if batch { ring.pool().pop() } else { None };
        if let Some(batch) = taken {
            // The batch's records are read at once (a run per region access), then taken one
            // by one; the scratch vectors are kept for the next batch.
            let mut records = std::mem::take(&mut self.records);
            let mut ready = std::mem::take(&mut self.ready);
            records.clear();
            let read = ring.read_batch(batch.clone(), &mut records);
            let taken = Self::take_batch(ring, host, now, batch.start, &records, &mut ready);
            self.records = records;
            self.ready = ready;
            // A record that failed to read comes after every record read before it.
            if let Err(error) = taken.and(read.map_err(RuntimeError::Ring)) {
                host.fail(now, error);
                return;
            }
        }
        self.send_flow_control(host, now, link);
    }

    /// Takes the records of a batch read from the ring, `first` the index of `records[0]`:
    /// claims each one's payload slot, checks its tag, and tells the launch's tracker, whose
    /// ready tasks go to the scheduler; a payload no task reads is consumed at once.
    fn take_batch(
        ring: &mut AxleRing,
        host: &mut Host<'_>,
        now: Ticks,
        first: u64,
        records: &[MetadataRecord],
        ready: &mut Vec<u32>,
    ) -> Result<(), RuntimeError> {
        let Some(launch) = host.launch.as_mut() else {
            return Ok(());
        };
        // The records name table entries scattered over tables larger than the caches: asked
        // for all at once, they arrive while the records before them are taken.
        for record in records {
            ring.prefetch_claim(record);
            launch.tracker.prefetch_arrival(record.result_offset);
        }
        for (index, record) in (first..).zip(records) {
            let payload = ring.claim(index, record).map_err(RuntimeError::Ring)?;
            if record.tag != launch.tag {
                return Err(RuntimeError::Ring(AxleRingError::ForeignTag {
                    sequence: record.sequence,
                    tag: record.tag,
                    launch: launch.tag,
                }));
            }
            launch.first_result.get_or_insert(now);
            ready.clear();
            let unread = launch.tracker.arrive(
                record.result_offset,
                u64::from(record.length),
                payload,
                ready,
            )?;
            for &task in ready.iter() {
                host.scheduler.ready(task);
            }
            if unread {
                // No task reads this payload, so none reads its record either.
                ring.consume(payload).map_err(RuntimeError::Ring)?;
            }
        }
        Ok(())
    }

    /// Sends the heads back in one flow-control store if they moved: on the control thread
    /// (AXLE, after a poll), or by the worker that freed the slots (AXLE_Interrupt).
    pub(crate) fn send_flow_control(
        &mut self,
        host: &mut Host<'_>,
        now: Ticks,
        link: &mut dyn DeviceLink,
    ) {
        let Some(ring) = self.ring.as_mut() else {
            return;
        };
        let sent = if let Some((address, message)) = ring.flow_control_due() {
            link.mem_store(now, address, message.as_bytes());
            ring.flow_control_sent(message);
            Some(message)
        } else {
            None
        };
        host.measured.max_gap_bytes = host.measured.max_gap_bytes.max(ring.max_gap_bytes());
        host.measured.flow_control_stores = ring.flow_control_stores();
        if let Some(message) = sent {
            let posted = Ticks::from_ns(host.config.posted_store_ns);
            let start = if self.interrupts {
                now
            } else {
                host.control_free.max(now)
            };
            host.trace_span(
                HostSpanKind::FlowControl {
                    metadata_head: message.metadata_head,
                    payload_head: message.payload_head,
                },
                start,
                start.plus(posted),
            );
            if self.interrupts {
                // Sent by the worker that freed the slots, not the control thread.
                host.stall(posted);
            } else {
                host.occupy_control(now, posted);
            }
        }
    }
}
