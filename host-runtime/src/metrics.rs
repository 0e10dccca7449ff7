//! The metrics of a run (paper section V), each defined once, here.
//!
//! All figures are virtual time in nanoseconds (rounded down from ticks of 1/6 ns) and are
//! deterministic: the same configuration and seed give the same numbers.

use serde::{Deserialize, Serialize};
use shared_abi::Ticks;

/// Everything a run reports.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunMetrics {
    /// From the host issuing the first launch to the end of the last host step of the last
    /// launch (implicit completion: every host task has run).
    pub end_to_end_ns: u64,
    /// CCM processing: time during which at least one CCM µthread ran a work item.
    pub ccm_busy_ns: u64,
    /// Data movement between host and device. Results to the host: RP and BS, the time the
    /// control thread spent loading results with CXL.mem (issue of the first load to arrival
    /// of the last byte); AXLE, the union of the intervals during which DMA writes were on
    /// the link or landing. Plus, in every mode, the time the control thread spent storing
    /// launch inputs into device memory (iterative workloads; they precede their launch and
    /// overlap nothing of it).
    pub data_movement_ns: u64,
    /// Host processing: time during which at least one host worker ran a host task or a
    /// launch's final step.
    pub host_busy_ns: u64,
    /// Application-level CCM idle time: `end_to_end - ccm_busy`.
    pub ccm_idle_ns: u64,
    /// Application-level host idle time: `end_to_end - host_busy`.
    pub host_idle_ns: u64,
    /// Host core stall: time host µthreads spent on the memory operations of host-CCM
    /// interaction (paper section V-D). Counted, in every mode: the control thread's stores of
    /// launch inputs. RP: the descriptor store (issue to acknowledgement), the doorbell and the
    /// dequeue (one posted store each), each remote poll (issue to response). BS: the
    /// synchronous launch (issue to response). RP and BS: the CXL.mem result load (issue to
    /// last byte). AXLE: the launch store (one posted store); each local poll, or in
    /// AXLE_Interrupt each interrupt handler (one uncached load of the metadata tail, plus one
    /// ready-pool push when it found new records, whatever their number); each flow-control
    /// store (one posted store; in AXLE_Interrupt issued by the worker that freed the slots).
    /// A sum over µthreads: AXLE_Interrupt's handlers run on the cores the interrupts are
    /// delivered to, alongside the control thread, so there it can exceed `end_to_end`; in
    /// every other mode one µthread at a time stalls. Not counted: the interrupt handling
    /// latency (a delay, not host work); host tasks reading their metadata records and
    /// payload slots (application work, in host busy time); the scheduler's bookkeeping (not
    /// modelled as costing time); control-thread work still running when the run ends.
    pub host_stall_ns: u64,
    /// Back-pressure: time the device's DMA executor held a complete payload but had no ring
    /// credit (the CCM waiting for the host's flow control).
    pub backpressure_ns: u64,
    /// The part of `end_to_end` not covered by CCM, data movement or host busy time when these
    /// run one after the other (RP, BS): launch, polling and completion overheads. Zero when
    /// they overlap (AXLE).
    pub overhead_ns: u64,
    /// Launches (offload iterations).
    pub launches: u64,
    /// Host tasks run.
    pub host_tasks: u64,
    /// AXLE: payloads streamed.
    pub payloads: u64,
    /// AXLE: DMA requests.
    pub dma_requests: u64,
    /// AXLE: local polls of the metadata tail (or interrupts handled).
    pub polls: u64,
    /// AXLE: flow-control stores sent.
    pub flow_control_stores: u64,
    /// AXLE: the largest number of payload slots held consumed behind an unconsumed one
    /// (the gap of gap-aware consumption), in bytes.
    pub max_gap_bytes: u64,
    /// AXLE: times the device read the host's heads because its cached copy said full.
    pub head_reads: u64,
    /// Time the control thread spent storing launch inputs into device memory (part of both
    /// data movement and host core stall).
    pub input_store_ns: u64,
    /// How early results reach the host: the mean, over the launches, of the time from the
    /// launch's start (before its input stores) to its first result reaching the host
    /// scheduler: AXLE, the end of the poll (or interrupt handler) that brought its first
    /// record; RP and BS, the end of the result load.
    pub first_result_ns: u64,
    /// `--no-deadlock` (`host_runtime::overflow`): times the host found the ring full of held
    /// slots with no task able to run and moved the held records and payloads into its
    /// overflow buffer. Absent from the report when zero (always without the option).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub overflow_spills: u64,
    /// Bytes of records and payloads the spills copied. Absent when zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub overflow_bytes: u64,
    /// Host time the spills took (host core stall, part of `host_stall_ns`). Absent when zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub overflow_ns: u64,
}

/// Whether a count is zero (a figure the report leaves out then).
fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// What the device side measured, as plain figures (the host runtime does not depend on the
/// emulator; the caller copies these over).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceFigures {
    /// CCM busy time.
    pub ccm_busy: Ticks,
    /// DMA busy time (union).
    pub dma_busy: Ticks,
    /// Back-pressure time.
    pub backpressure: Ticks,
    /// Payloads streamed.
    pub payloads: u64,
    /// DMA requests.
    pub dma_requests: u64,
    /// Flow-control block reads.
    pub head_reads: u64,
}

impl RunMetrics {
    /// Combines the host's and the device's measurements of one run.
    pub fn assemble(
        streams: bool,
        host: &crate::runtime::HostMeasurements,
        device: &DeviceFigures,
    ) -> RunMetrics {
        let end_to_end = host.end.since(host.start);
        let data_movement = if streams {
            device.dma_busy
        } else {
            host.result_load
        }
        .plus(host.input_store);
        let serial = device.ccm_busy.plus(data_movement).plus(host.host_busy);
        RunMetrics {
            end_to_end_ns: end_to_end.as_ns(),
            ccm_busy_ns: device.ccm_busy.as_ns(),
            data_movement_ns: data_movement.as_ns(),
            host_busy_ns: host.host_busy.as_ns(),
            ccm_idle_ns: end_to_end.since(device.ccm_busy).as_ns(),
            host_idle_ns: end_to_end.since(host.host_busy).as_ns(),
            host_stall_ns: host.stall.as_ns(),
            backpressure_ns: device.backpressure.as_ns(),
            overhead_ns: if streams {
                0
            } else {
                end_to_end.since(serial).as_ns()
            },
            launches: host.launches,
            host_tasks: host.tasks,
            payloads: device.payloads,
            dma_requests: device.dma_requests,
            polls: host.polls,
            flow_control_stores: host.flow_control_stores,
            max_gap_bytes: host.max_gap_bytes,
            input_store_ns: host.input_store.as_ns(),
            first_result_ns: host
                .first_result
                .0
                .checked_div(host.first_results)
                .map_or(0, |ticks| Ticks(ticks).as_ns()),
            head_reads: device.head_reads,
            overflow_spills: host.overflow_spills,
            overflow_bytes: host.overflow_bytes,
            overflow_ns: host.overflow.as_ns(),
        }
    }
}

/// Accumulates the union of intervals during which a count of parallel activities is non-zero.
#[derive(Clone, Copy, Debug, Default)]
pub struct BusyTracker {
    active: u64,
    since: Ticks,
    total: Ticks,
}

impl BusyTracker {
    /// One more activity from `now`.
    pub fn start(&mut self, now: Ticks) {
        if self.active == 0 {
            self.since = now;
        }
        self.active += 1;
    }

    /// One activity ended at `now`.
    pub fn stop(&mut self, now: Ticks) {
        self.active = self.active.saturating_sub(1);
        if self.active == 0 {
            self.total = self.total.plus(now.since(self.since));
        }
    }

    /// Busy time up to `now`.
    pub fn total(&self, now: Ticks) -> Ticks {
        if self.active > 0 {
            self.total.plus(now.since(self.since))
        } else {
            self.total
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_activities_count_once() {
        let mut busy = BusyTracker::default();
        busy.start(Ticks(0));
        busy.start(Ticks(5));
        busy.stop(Ticks(10));
        busy.stop(Ticks(12));
        busy.start(Ticks(20));
        busy.stop(Ticks(25));
        assert_eq!(busy.total(Ticks(30)), Ticks(17));
    }

    #[test]
    fn input_stores_count_as_data_movement_in_every_mode() {
        let host = crate::runtime::HostMeasurements {
            start: Ticks::from_ns(0),
            end: Ticks::from_ns(1000),
            result_load: Ticks::from_ns(100),
            input_store: Ticks::from_ns(30),
            ..Default::default()
        };
        let device = DeviceFigures {
            dma_busy: Ticks::from_ns(200),
            ..Default::default()
        };
        assert_eq!(
            RunMetrics::assemble(false, &host, &device).data_movement_ns,
            130
        );
        assert_eq!(
            RunMetrics::assemble(true, &host, &device).data_movement_ns,
            230
        );
    }
}
