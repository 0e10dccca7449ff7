//! The CCM: processing units of µthreads, with the CCM scheduler.
//!
//! Each work item runs on one µthread. A µthread's share of its processing unit is static: a
//! unit issues one instruction per cycle, interleaved over its µthreads (fine-grained
//! multithreading), so an item of `n` operations takes `n x µthreads` cycles; the device's
//! memory bandwidth is likewise split evenly over all µthreads. An item's duration is the
//! larger of its compute and memory times plus one DRAM access latency. Static shares keep the
//! model deterministic and event-cheap; they are exact when every µthread is busy, which is the
//! regime the paper's kernels run in, and pessimistic for a lone straggler.
//!
//! The kernel's real code runs when an item finishes, so results appear in device memory at
//! their modelled completion time.

use crate::config::{DeviceConfig, Scheduling};
use crate::sim::time::transfer;
use firmware::kernels::{ItemSpec, Kernel};
use shared_abi::Ticks;
use std::collections::VecDeque;

/// A launch being executed.
#[derive(Debug)]
struct Running {
    kernel: Kernel,
    tag: u32,
    /// The stage's first item.
    first: u32,
    /// Items in the stage.
    items: u32,
    /// FIFO: the next item to hand out.
    next_item: u32,
    /// RR: per unit, how many of its items were handed out.
    unit_taken: Vec<u32>,
    finished: u32,
}

/// An item that started: when it ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Started {
    /// Processing unit.
    pub unit: u32,
    /// Item index.
    pub item: u32,
    /// When it finishes.
    pub ends_at: Ticks,
}

/// The CCM model.
#[derive(Debug)]
pub struct Ccm {
    units: u32,
    uthreads: u32,
    mhz: u64,
    uthread_gbps: f64,
    latency: Ticks,
    scheduling: Scheduling,
    free: Vec<u32>,
    running: Option<Running>,
    active_items: u32,
    busy_since: Ticks,
    busy_total: Ticks,
    /// Finished items, for the firmware (`ComputeUnits::poll_item`).
    pub completions: VecDeque<firmware::hal::ItemCompletion>,
}

impl Ccm {
    /// An idle CCM.
    pub fn new(config: &DeviceConfig) -> Ccm {
        let total = f64::from(config.ccm_units) * f64::from(config.ccm_uthreads);
        Ccm {
            units: config.ccm_units,
            uthreads: config.ccm_uthreads,
            mhz: config.ccm_mhz,
            uthread_gbps: config.ccm_memory_gbps / total,
            latency: Ticks::from_ns(config.ccm_memory_latency_ns),
            scheduling: config.scheduling,
            free: vec![config.ccm_uthreads; config.ccm_units as usize],
            running: None,
            active_items: 0,
            busy_since: Ticks::ZERO,
            busy_total: Ticks::ZERO,
            completions: VecDeque::new(),
        }
    }

    /// Changes the scheduling policy (takes effect at the next launch).
    pub fn set_scheduling(&mut self, scheduling: Scheduling) {
        self.scheduling = scheduling;
    }

    /// Whether a launch is executing.
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// The tag of the launch executing, if any.
    pub fn running_tag(&self) -> Option<u32> {
        self.running.as_ref().map(|running| running.tag)
    }

    /// Time during which at least one µthread ran an item.
    pub fn busy(&self, now: Ticks) -> Ticks {
        if self.active_items > 0 {
            self.busy_total.plus(now.since(self.busy_since))
        } else {
            self.busy_total
        }
    }

    /// The modelled duration of an item.
    pub fn duration(&self, spec: &ItemSpec) -> Ticks {
        let compute = Ticks::from_cycles(
            spec.cost
                .operations
                .saturating_mul(u64::from(self.uthreads)),
            self.mhz,
        );
        let memory = transfer(spec.cost.bytes, self.uthread_gbps);
        compute.max(memory).plus(self.latency)
    }

    /// Starts the items `items` of a launch (one stage) at `now`; returns the items that
    /// started (to schedule their ends). `memory` is read for the items' descriptions.
    pub fn dispatch<M: firmware::hal::DeviceMemory>(
        &mut self,
        now: Ticks,
        kernel: Kernel,
        tag: u32,
        items: core::ops::Range<u32>,
        memory: &M,
    ) -> Vec<Started> {
        let first = items.start;
        let items = items.end.saturating_sub(items.start);
        self.running = Some(Running {
            kernel,
            tag,
            first,
            items,
            next_item: 0,
            unit_taken: vec![0; self.units as usize],
            finished: 0,
        });
        if items == 0 {
            self.running = None;
            return Vec::new();
        }
        let mut started = Vec::new();
        for unit in 0..self.units {
            self.fill(now, unit, memory, &mut started);
        }
        started
    }

    /// The next item for a free µthread of `unit`, by the scheduling policy.
    fn next_for(&mut self, unit: u32) -> Option<u32> {
        let units = self.units;
        let running = self.running.as_mut()?;
        match self.scheduling {
            Scheduling::Fifo => (running.next_item < running.items).then(|| {
                running.next_item += 1;
                running.first + running.next_item - 1
            }),
            Scheduling::Rr => {
                let taken = running.unit_taken.get_mut(unit as usize)?;
                let item = u64::from(*taken) * u64::from(units) + u64::from(unit);
                (item < u64::from(running.items)).then(|| {
                    *taken += 1;
                    running.first + item as u32
                })
            }
        }
    }

    fn fill<M: firmware::hal::DeviceMemory>(
        &mut self,
        now: Ticks,
        unit: u32,
        memory: &M,
        started: &mut Vec<Started>,
    ) {
        while self.free.get(unit as usize).copied().unwrap_or(0) > 0 {
            let Some(item) = self.next_for(unit) else {
                break;
            };
            let Some(running) = self.running.as_ref() else {
                break;
            };
            let ends_at = match running.kernel.item(item, memory) {
                Ok(spec) => now.plus(self.duration(&spec)),
                // A kernel that cannot describe its item fails it at once.
                Err(_) => now,
            };
            if let Some(free) = self.free.get_mut(unit as usize) {
                *free -= 1;
            }
            if self.active_items == 0 {
                self.busy_since = now;
            }
            self.active_items += 1;
            started.push(Started {
                unit,
                item,
                ends_at,
            });
        }
    }

    /// An item finished at `now`: runs its kernel code on `memory`, reports it, and starts the
    /// unit's next items.
    pub fn finish<M: firmware::hal::DeviceMemory>(
        &mut self,
        now: Ticks,
        unit: u32,
        item: u32,
        memory: &mut M,
    ) -> Vec<Started> {
        let Some(running) = self.running.as_mut() else {
            return Vec::new();
        };
        let status = match running.kernel.execute(item, memory) {
            Ok(()) => shared_abi::Status::Ok,
            Err(status) => status,
        };
        self.completions.push_back(firmware::hal::ItemCompletion {
            tag: running.tag,
            item,
            status,
        });
        running.finished += 1;
        let all_done = running.finished >= running.items;
        if let Some(free) = self.free.get_mut(unit as usize) {
            *free += 1;
        }
        self.active_items = self.active_items.saturating_sub(1);
        if self.active_items == 0 {
            self.busy_total = self.busy_total.plus(now.since(self.busy_since));
        }
        if all_done {
            self.running = None;
            return Vec::new();
        }
        let mut started = Vec::new();
        match self.scheduling {
            Scheduling::Rr => self.fill(now, unit, &*memory, &mut started),
            Scheduling::Fifo => {
                for unit in 0..self.units {
                    self.fill(now, unit, &*memory, &mut started);
                }
            }
        }
        started
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use firmware::kernels::knn::{pack_shape, KnnKernel};
    use shared_abi::{CommandDescriptor, KernelId};

    /// A KNN launch of `rows` rows of dim 16 and `queries` queries in a 1 MiB memory.
    fn knn(rows: u32, queries: u32) -> Kernel {
        let command = CommandDescriptor {
            kernel: KernelId::KnnDistance as u32,
            result_address: 0x8_0000,
            result_length: u64::from(rows * queries) * 4,
            args: [0x1000, 0x4_0000, pack_shape(rows, 16), u64::from(queries)],
            ..CommandDescriptor::default()
        };
        Kernel::Knn(KnnKernel::decode(&command, 1 << 20).unwrap())
    }

    fn config(units: u32, uthreads: u32, scheduling: Scheduling) -> DeviceConfig {
        DeviceConfig {
            ccm_units: units,
            ccm_uthreads: uthreads,
            scheduling,
            ..DeviceConfig::default()
        }
    }

    #[test]
    fn dispatch_fills_every_uthread_and_no_more() {
        let mut ccm = Ccm::new(&config(2, 3, Scheduling::Fifo));
        let started = ccm.dispatch(
            Ticks::ZERO,
            knn(10, 1),
            1,
            0..10,
            &firmware::testing::FakeDeviceMemory::new(1 << 20),
        );
        assert_eq!(started.len(), 6);
        assert!(ccm.is_running());
    }

    #[test]
    fn round_robin_gives_item_i_to_unit_i_mod_units() {
        let mut ccm = Ccm::new(&config(4, 1, Scheduling::Rr));
        let started = ccm.dispatch(
            Ticks::ZERO,
            knn(8, 1),
            1,
            0..8,
            &firmware::testing::FakeDeviceMemory::new(1 << 20),
        );
        let pairs: Vec<(u32, u32)> = started.iter().map(|s| (s.unit, s.item)).collect();
        assert_eq!(pairs, vec![(0, 0), (1, 1), (2, 2), (3, 3)]);
        let mut memory = firmware::testing::FakeDeviceMemory::new(1 << 20);
        // Unit 2 finishes first: round-robin hands it its own next item, 6.
        let next = ccm.finish(started[2].ends_at, 2, 2, &mut memory);
        assert_eq!(
            next.iter().map(|s| (s.unit, s.item)).collect::<Vec<_>>(),
            vec![(2, 6)]
        );
    }

    #[test]
    fn fifo_gives_the_next_item_by_offset_to_whichever_unit_frees() {
        let mut ccm = Ccm::new(&config(4, 1, Scheduling::Fifo));
        let started = ccm.dispatch(
            Ticks::ZERO,
            knn(8, 1),
            1,
            0..8,
            &firmware::testing::FakeDeviceMemory::new(1 << 20),
        );
        let mut memory = firmware::testing::FakeDeviceMemory::new(1 << 20);
        let next = ccm.finish(started[2].ends_at, 2, 2, &mut memory);
        assert_eq!(
            next.iter().map(|s| (s.unit, s.item)).collect::<Vec<_>>(),
            vec![(2, 4)]
        );
    }

    #[test]
    fn item_duration_is_the_larger_of_compute_and_memory_plus_latency() {
        let ccm = Ccm::new(&DeviceConfig::default());
        let compute_bound = ItemSpec {
            cost: firmware::kernels::ItemCost {
                operations: 1000,
                bytes: 0,
            },
            ..ItemSpec::default()
        };
        // 1000 operations x 16 µthreads sharing the unit = 16000 cycles at 2 GHz = 8 µs.
        assert_eq!(ccm.duration(&compute_bound), Ticks::from_ns(8000 + 100));
        let memory_bound = ItemSpec {
            cost: firmware::kernels::ItemCost {
                operations: 1,
                bytes: 2400,
            },
            ..ItemSpec::default()
        };
        // 614.4 GB/s over 256 µthreads = 2.4 GB/s: 2400 bytes take 1 µs.
        assert_eq!(ccm.duration(&memory_bound), Ticks::from_ns(1000 + 100));
    }

    #[test]
    fn busy_time_is_the_union_of_running_items_and_each_item_reports_once() {
        let mut ccm = Ccm::new(&config(1, 2, Scheduling::Fifo));
        let started = ccm.dispatch(
            Ticks::ZERO,
            knn(2, 1),
            7,
            0..2,
            &firmware::testing::FakeDeviceMemory::new(1 << 20),
        );
        let mut memory = firmware::testing::FakeDeviceMemory::new(1 << 20);
        let end = started.iter().map(|s| s.ends_at).max().unwrap();
        for s in &started {
            assert!(ccm
                .finish(s.ends_at, s.unit, s.item, &mut memory)
                .is_empty());
        }
        assert_eq!(ccm.busy(end.plus(Ticks(1000))), end);
        assert!(!ccm.is_running());
        let reported: Vec<u32> = ccm.completions.iter().map(|c| c.item).collect();
        assert_eq!(reported, vec![0, 1]);
        assert!(ccm
            .completions
            .iter()
            .all(|c| c.tag == 7 && c.status == shared_abi::Status::Ok));
    }
}

#[cfg(test)]
mod stage_tests {
    use super::*;
    use firmware::kernels::knn::{pack_shape, KnnKernel};
    use shared_abi::{CommandDescriptor, KernelId};

    #[test]
    fn a_later_stage_hands_out_its_own_items_only() {
        let command = CommandDescriptor {
            kernel: KernelId::KnnDistance as u32,
            result_address: 0x8_0000,
            result_length: 12 * 4,
            args: [0x1000, 0x4_0000, pack_shape(12, 16), 1],
            ..CommandDescriptor::default()
        };
        let kernel = Kernel::Knn(KnnKernel::decode(&command, 1 << 20).unwrap());
        let memory = firmware::testing::FakeDeviceMemory::new(1 << 20);
        for scheduling in [Scheduling::Rr, Scheduling::Fifo] {
            let mut ccm = Ccm::new(&DeviceConfig {
                ccm_units: 2,
                ccm_uthreads: 4,
                scheduling,
                ..DeviceConfig::default()
            });
            let started = ccm.dispatch(Ticks::ZERO, kernel, 1, 8..11, &memory);
            let mut items: Vec<u32> = started.iter().map(|s| s.item).collect();
            items.sort_unstable();
            assert_eq!(items, vec![8, 9, 10], "{scheduling:?}");
        }
    }
}
