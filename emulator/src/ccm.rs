//! The CCM: processing units of sub-cores of µthreads, as M²NDP configures them, with the CCM
//! scheduler.
//!
//! # Organisation (paper Table III; M²NDP `config/performance/M2NDP/m2ndp.config`)
//!
//! The CCM has [`DeviceConfig::ccm_units`] processing units; each has
//! [`DeviceConfig::ccm_sub_cores`] sub-cores, and each sub-core holds
//! [`DeviceConfig::ccm_uthreads_per_sub_core`] µthread slots, issues up to
//! [`DeviceConfig::ccm_issue_width`] instructions per cycle (at most one per µthread) and has
//! its own functional units: scalar, scalar address, vector and vector address units (see
//! [`firmware::kernels::ItemCost`] for which instruction goes where). A work item runs on one
//! µthread from start to end.
//!
//! # How long an item takes: the resources it shares with what actually runs beside it
//!
//! An item needs two resources, consumed in parallel (a µthread's loads stream while its
//! arithmetic issues, and the sub-core interleaves µthreads to hide the latency):
//!
//! - **Its sub-core's issue and functional units.** Alone, the item would occupy its sub-core
//!   for `D = max(instructions / issue width, scalar / scalar units, scalar memory / scalar
//!   address units, vector / vector units, vector address cycles / vector address units)`
//!   cycles (an indexed access takes one address-unit cycle per 32-byte packet it touches), but
//!   one µthread issues at most one instruction per cycle, so it can use at most the fraction
//!   `D / instructions` of the sub-core. The sub-core's capacity is shared among the items
//!   that still have instructions to issue on it, max-min fairly (water-filling: each gets an
//!   equal share unless its own cap is smaller, and what a capped item leaves goes to the
//!   others), the fluid form of M²NDP's issue loop, which visits the µthreads' instruction
//!   columns in turn and takes at most one instruction from each per cycle.
//! - **Device memory**: by default one pool of [`DeviceConfig::ccm_memory_gbps`] shared
//!   equally by every item with bytes to move, whatever its addresses
//!   ([`DeviceConfig::ccm_memory_channels`] = 1; why the default is one pool, not Table III's
//!   16 channels, is in that field's docs). With `ccm_memory_channels` = N > 1 (paper Table
//!   III: DDR5-4800, 16 channels; each has [`DeviceConfig::ccm_memory_gbps`] / N, 38.4 GB/s
//!   at 16), memory is N channels. Each channel is shared equally by the items with bytes outstanding on it (processor
//!   sharing per channel). An item's bytes (its [`ItemCost::bytes`], which already charge a
//!   random 4-byte access a whole burst) go to the channels its addresses map to, in
//!   proportion to the DRAM bursts it touches on each: when the item starts, its kernel code
//!   runs once on a read-only view of device memory ([`crate::dram::ChannelProfile`]: reads
//!   pass through, writes are dropped) that maps each 64-byte burst it touches to its channel
//!   as M²NDP does ([`crate::dram::channel_of`]: the address bits above the interleave,
//!   [`DeviceConfig::ccm_channel_interleave_bytes`], `channel_interleave_size=256`, hashed with
//!   M²NDP's IPOLY functions). Bursts the CCM touched recently ([`crate::dram::BurstCache`],
//!   128 KiB per channel, the L2 slice M²NDP gives each channel) are not
//!   counted again, so a vector every item reads (KNN's query) is not a hot spot, as in the
//!   kernels' costs it comes from the scratchpad. The placed bursts carry 64 bytes each (at
//!   most the item's bytes); what the item's cost counts beyond them (bursts found in the
//!   cache, which the cost still charges) spreads evenly over every channel, as does all of
//!   it when the dry run touches nothing (`channel_share`): charging a hub's whole cost to
//!   the few channels of its cache misses made it ten times slower than the pool. The item's traffic is done when its part on every channel is;
//!   a channel ends a part at the end of a burst slot (64 bytes at 38.4 GB/s: 1.67 ns).
//!   Where the addresses depend on the data (the neighbours an SSSP or PageRank vertex
//!   gathers, the embedding rows a DLRM bag looks up), so does the channel load, and with it
//!   the order in which items finish. With one channel (the default) no dry run is made.
//!
//!   Not modelled: banks and row buffers. At DDR5-4800 (JESD79-5: tCK 0.417 ns; BL16 on a
//!   32-bit sub-channel moves 64 bytes in 8 tCK, 3.33 ns; tRRD_S 8 tCK and tFAW 32 tCK allow
//!   one activation per 3.33 ns per sub-channel) a channel can open a new row for every burst
//!   it moves, so a gather of scattered bursts needs no more channel time than a stream: a
//!   row miss costs latency (tRP + tRCD + CL, about 49 ns, against CL alone, 16.7 ns), not
//!   bandwidth. The latency is the item's floor below, one access per item; bank conflicts
//!   (two bursts on one bank within tRC, about 48 ns) are not modelled. The per-µthread issue
//!   limit on loads is in the vector-memory count of the first resource.
//!
//! Shares change whenever an item starts or finishes a part anywhere, and the model recomputes
//! the affected ends then: a sparse launch runs its few items at full sub-core and memory
//! speed, and a straggler speeds up as the others finish. The item ends when both parts have,
//! and no earlier than [`DeviceConfig::ccm_memory_latency_ns`] after it started (its first
//! access's latency). The latency is a floor, not an addition: when memory is busy, an item's
//! bandwidth share already holds the queueing its accesses see (by Little's law, 1,024
//! µthreads with one 64-byte access each in flight over 100 ns move 655 GB/s, the memory's
//! peak), and adding the latency to it would count that wait twice; for a lone item the floor
//! errs by at most one latency.
//!
//! Completion order is therefore physical: items differ in work (a vertex's degree, a bag's
//! length: the kernels' costs depend on the data), touch different channels (the addresses
//! depend on the data too) and contend for their sub-core and for those channels with
//! whatever else runs; nothing random is added.
//!
//! The CCM keeps its own timers (each sub-core's next end of an item's instructions, each
//! channel's next end of an item's traffic on it, the items' ends) and asks the emulator only to wake it at
//! the earliest of them ([`Ccm::take_wakes`], [`Ccm::on_wake`]); a wake that finds nothing
//! due does nothing, so one left behind by a later change is harmless.
//!
//! The fluid model is deterministic: shares are `f64` computed in a fixed order, and every
//! projected end is rounded up to a whole tick.
//!
//! # Scheduling
//!
//! - Round-robin ([`Scheduling::Rr`]): item `i` belongs to unit `i mod units`; a unit's free
//!   µthread takes the unit's next item in order.
//! - FIFO ([`Scheduling::Fifo`]): one queue; a free µthread anywhere takes the next item by
//!   offset. At dispatch the first items are dealt to the units in turn.
//!
//! The policy also decides who issues on a sub-core (the paper, Section V-E, applies it "to
//! CCM and host schedulers"). Round-robin: "if the task at the front of the queue is not yet
//! ready, it is moved to the back of the queue and the scheduler proceeds with the next
//! available task". That is M²NDP's issue loop (`src/sub_core.cc`, `execute_instruction`):
//! it visits the sub-core's resident µthreads' instruction columns in turn from a rotating
//! iterator (`src/instruction_queue.cc`, `next`), skips a column whose next instruction
//! cannot issue (an operand still on its way from memory, `check_dependency_fail`, or its unit
//! busy, `check_resource_fail`, in `src/execution_unit.cc`) and issues at most one
//! instruction per column and `max_inst_issue` per cycle; the fluid form is the max-min fair
//! share above. The queue is the resident µthreads, not the launch's items: a µthread keeps
//! its slot until its item ends (`free_inst_column`), so a skipped item loses a turn, not its
//! place among the launch's items. FIFO ("tasks are already processed in offset order"; M²NDP
//! has no such option): oldest first. Each issuing item, in the order it arrived on the
//! sub-core (under FIFO, offset order), gets what its µthread can use (its cap) of what the
//! older items left; an item with nothing left waits. Memory is shared equally under both.
//!
//! Within a unit, items go to its sub-cores in turn, each to the next one with a free µthread
//! after the sub-core that took the unit's previous item, as M²NDP deals instruction columns
//! to its sub-cores (`ndp_unit.cc`, `connect_instruction_buffer_to_sub_core`).
//!
//! The kernel's real code runs when an item ends, so results appear in device memory at their
//! modelled completion time.
//!
//! # Interleaved execution (off by default)
//!
//! With [`DeviceConfig::interleave_seed`] set, the code of the items running at once runs
//! with their device-memory accesses interleaved word by word in a seeded order, when the
//! first of them ends (see [`interleave`]): races between items show, and the timing above
//! is unchanged.

use crate::config::{DeviceConfig, Scheduling};
use crate::dram;
use firmware::kernels::{ItemCost, Kernel};
use shared_abi::Ticks;
use std::collections::VecDeque;

mod bucket_heap;
mod end_queue;
mod finish_queue;
pub mod interleave;
mod min_tree;

use end_queue::EndQueue;
use finish_queue::FinishQueue;
use min_tree::MinTree;

/// The items that ended at one wake ([`Ccm::on_wake`]), in the order they ended: inline for
/// the few a wake usually ends, no heap allocation.
pub type EndedItems = smallvec::SmallVec<[Ended; 8]>;

/// An item that ended: where it ran and when it started (for the trace).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    /// Processing unit.
    pub unit: u32,
    /// Item index.
    pub item: u32,
    /// When it started.
    pub started: Ticks,
    /// The launch tag.
    pub tag: u32,
}

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

/// An item on a µthread: what its end reads, 16 bytes (four slots to a cache line). Whether
/// the slot holds an item and how many of the item's parts are outstanding are in
/// [`Ccm::left`], one byte a slot, which the parts' ends read; the outcome of an interleaved
/// batch is kept apart, in [`Ccm::outcomes`].
#[derive(Clone, Copy, Debug, Default)]
struct Active {
    started: Ticks,
    item: u32,
    /// Its sub-core (kept: a division to find again).
    sub_core: u32,
}

/// [`Ccm::left`] of a slot that holds no item.
const FREE: u8 = u8::MAX;

// A slot stays 16 bytes, and the parts of an item (its instructions and one per channel) are
// counted in a byte below `FREE`.
const _: () = assert!(std::mem::size_of::<Active>() == 16);
const _: () = assert!(crate::config::MAX_MEMORY_CHANNELS + 1 < FREE as u32);

/// What interleaved execution did ([`DeviceConfig::interleave_seed`]; all zero by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InterleaveCounts {
    /// Batches of items run interleaved.
    pub batches: u64,
    /// Items run in them.
    pub items: u64,
    /// Word accesses the items made.
    pub steps: u64,
    /// Accesses after which another item took over.
    pub switches: u64,
    /// Items run on the emulator's thread because no thread could be spawned for them.
    pub fallbacks: u64,
}

/// An item that still has instructions to issue on its sub-core: its part of the
/// water-filling, kept in the sub-core's list ([`Ccm::issuing`]) where the water-filling
/// reads it in order, not in the item's slot.
#[derive(Clone, Copy, Debug, Default)]
struct Issuing {
    /// The largest fraction of the sub-core its single µthread can use.
    cap: f64,
    /// Its µthread slot.
    slot: u32,
    /// When it arrived on the sub-core, counted over the CCM ([`Ccm::arrivals`]): the order
    /// in which items whose instructions end together are handed on.
    arrival: u64,
    /// Sub-core cycles of exclusive use the item still needs.
    compute_left: f64,
    /// Its current fraction of the sub-core (at most its cap).
    share: f64,
    /// When its instructions end at the current share.
    compute_end: Ticks,
}

/// One sub-core, 24 bytes (its items' list is in [`Ccm::issuing`], not behind a `Vec` of
/// its own: the sub-cores take fewer cache lines).
#[derive(Clone, Copy, Debug)]
struct SubCore {
    /// Time up to which `compute_left` is accounted.
    updated: Ticks,
    /// Bit `i`: the sub-core's slot `i` is free, for its first 64 slots (the rest, if any,
    /// are found by a scan once these are taken).
    free: u64,
    /// Slots in use (issuing, waiting for memory, or in their final latency).
    occupied: u32,
    /// How many items still have instructions to issue: the first entries of its list.
    issuing: u32,
}

const _: () = assert!(std::mem::size_of::<SubCore>() == 24);

/// One device-memory channel's bandwidth, shared equally by the items with traffic
/// outstanding on it.
#[derive(Debug)]
struct MemoryShare {
    /// Bytes each sharing item has been served since the start (the processor-sharing virtual
    /// time): an item that joins at `v` with `b` bytes is done when this reaches `v + b`.
    served: f64,
    updated: Ticks,
    /// `(finish tag as f64 bits, slot)`: tags are non-negative, so their bits order like them.
    finishing: FinishQueue,
}

/// The CCM model.
#[derive(Debug)]
pub struct Ccm {
    units: u32,
    sub_cores: u32,
    slots_per_sub_core: u32,
    issue_width: f64,
    scalar_units: f64,
    scalar_memory_units: f64,
    vector_units: f64,
    vector_memory_units: f64,
    /// Ticks per CCM cycle.
    ticks_per_cycle: f64,
    /// One memory channel's bandwidth in bytes per tick.
    bytes_per_tick: f64,
    /// Memory channels.
    channels: u32,
    /// Ticks one channel takes to move one DRAM burst (at least 1): the grid its parts end on.
    burst_ticks: u64,
    /// `log2` of the channel interleave in bytes.
    interleave_shift: u32,
    latency: Ticks,
    scheduling: Scheduling,
    running: Option<Running>,
    sub: Vec<SubCore>,
    /// The sub-cores' lists of issuing items, [`Ccm::slots_per_sub_core`] entries each (no
    /// more can issue on a sub-core), sub-core `s`'s from `s * slots_per_sub_core`, its first
    /// [`SubCore::issuing`] in use: in the order the water-filling visits them
    /// ([`Ccm::reshare_sub_core`]): round-robin, by cap then slot; FIFO, in arrival order. Kept
    /// in that order as items come and go.
    issuing: Vec<Issuing>,
    /// Each sub-core's earliest projected end of an issuing item's instructions.
    sub_timers: MinTree,
    /// Per unit, the sub-core (0-based within the unit) that took its last item.
    last_sub_core: Vec<u32>,
    /// Per unit, its free µthread slots (none: no sub-core of it can take an item).
    unit_free: Vec<u32>,
    /// Per unit, bit `l`: its sub-core `l` has a free µthread slot (kept while a unit has at
    /// most 64 sub-cores; with more, [`Ccm::free_sub_core`] looks at each sub-core).
    unit_open: Vec<u64>,
    /// Scratch for [`Ccm::compute_due`]: the items whose instructions ended, as
    /// `(arrival, slot)`.
    scratch_done: Vec<(u64, u32)>,
    /// Scratch for [`Ccm::memory_due`]: the slots whose part on the channel ended, in order.
    scratch_due: Vec<u32>,
    /// Items that arrived on a sub-core to issue so far (the next one's [`Issuing::arrival`]).
    arrivals: u64,
    /// Scratch for dispatch and item ends: the sub-cores an item started on.
    scratch_touched: Vec<u32>,
    /// Per µthread slot, its item (meaningful where [`Ccm::left`] is not [`FREE`]).
    slots: Vec<Active>,
    /// Per µthread slot, [`FREE`] when it holds no item, else how many of its item's parts are
    /// outstanding: its instructions (1 until they end) and its traffic on each channel it
    /// joined; 0 from when both parts are done until its end. One byte a slot, so the ends of
    /// parts, which only count down, touch a few cache lines, not the slots'.
    left: Vec<u8>,
    /// Interleaved execution only (empty otherwise): per slot, the outcome of its item's
    /// kernel code once run ahead of its end by an interleaved batch (`None`: not yet run).
    outcomes: Vec<Option<Result<(), firmware::FirmwareError>>>,
    /// The memory channels.
    memory: Vec<MemoryShare>,
    /// Each channel's projected earliest end of an item's traffic on it.
    memory_timers: MinTree,
    /// Channels an item joined since their ends were last scheduled (bit `c`: channel `c`;
    /// at most 64 channels, `DeviceConfig::validate`), all at `memory_joined_at`: their ends
    /// are projected once, when the timers are next read ([`Ccm::flush_memory`]), not once per
    /// item that joined them at that time.
    memory_joined: u64,
    /// When the channels in `memory_joined` were joined.
    memory_joined_at: Ticks,
    /// Scratch for [`Ccm::start_next`]: the DRAM bursts the starting item moves, per channel.
    scratch_bursts: Vec<u64>,
    /// The bursts touched recently (not DRAM traffic when touched again).
    burst_cache: dram::BurstCache,
    active_items: u32,
    busy_since: Ticks,
    busy_total: Ticks,
    /// Items whose parts are both done, by end (ties at one end in order of arrival).
    ends: EndQueue,
    /// The earliest wake asked for and not yet delivered.
    wake_at: Option<Ticks>,
    /// Wakes to hand to the emulator.
    wakes: Vec<Ticks>,
    /// The items that ended at the last wake of [`Ccm::on_wake_listed`] ([`Ccm::ended`]).
    ended: Vec<Ended>,
    /// Finished items, for the firmware (`ComputeUnits::poll_item`).
    pub completions: VecDeque<firmware::hal::ItemCompletion>,
    /// Interleaved execution: the generator's state (`None`: off, the default).
    interleave_rng: Option<u64>,
    /// What interleaved execution did.
    pub interleaved: InterleaveCounts,
}

/// Relative slack when comparing served bytes with a finish tag (floating-point rounding).
const MEMORY_SLACK: f64 = 1e-9;

impl Ccm {
    /// An idle CCM. `config` must have passed [`DeviceConfig::validate`].
    pub fn new(config: &DeviceConfig) -> Ccm {
        let sub_cores = config.ccm_units.saturating_mul(config.ccm_sub_cores);
        let slots = sub_cores.saturating_mul(config.ccm_uthreads_per_sub_core);
        Ccm {
            units: config.ccm_units,
            sub_cores: config.ccm_sub_cores,
            slots_per_sub_core: config.ccm_uthreads_per_sub_core,
            issue_width: f64::from(config.ccm_issue_width.max(1)),
            scalar_units: f64::from(config.ccm_scalar_units.max(1)),
            scalar_memory_units: f64::from(config.ccm_scalar_memory_units.max(1)),
            vector_units: f64::from(config.ccm_vector_units.max(1)),
            vector_memory_units: f64::from(config.ccm_vector_memory_units.max(1)),
            ticks_per_cycle: (Ticks::PER_NS * 1000) as f64 / config.ccm_mhz.max(1) as f64,
            bytes_per_tick: config.ccm_memory_gbps
                / f64::from(config.ccm_memory_channels.max(1))
                / Ticks::PER_NS as f64,
            channels: config.ccm_memory_channels.max(1),
            burst_ticks: burst_ticks(config),
            interleave_shift: config.ccm_channel_interleave_bytes.max(1).ilog2(),
            latency: Ticks::from_ns(config.ccm_memory_latency_ns),
            scheduling: config.scheduling,
            running: None,
            sub: vec![
                SubCore {
                    updated: Ticks::ZERO,
                    free: all_free(config.ccm_uthreads_per_sub_core),
                    occupied: 0,
                    issuing: 0,
                };
                sub_cores as usize
            ],
            issuing: vec![Issuing::default(); slots as usize],
            sub_timers: MinTree::new(sub_cores as usize),
            // The first item of a unit goes to its sub-core 0. Units, sub-cores and µthreads are
            // bounded by `DeviceConfig::validate` (MAX_UTHREADS) before a device is built.
            last_sub_core: vec![config.ccm_sub_cores.saturating_sub(1); config.ccm_units as usize],
            unit_free: vec![
                config
                    .ccm_sub_cores
                    .saturating_mul(config.ccm_uthreads_per_sub_core);
                config.ccm_units as usize
            ],
            unit_open: vec![
                all_open(config.ccm_sub_cores, config.ccm_uthreads_per_sub_core);
                config.ccm_units as usize
            ],
            scratch_done: Vec::new(),
            scratch_due: Vec::new(),
            arrivals: 0,
            scratch_touched: Vec::new(),
            slots: vec![Active::default(); slots as usize],
            left: vec![FREE; slots as usize],
            outcomes: if config.interleave_seed.is_some() {
                vec![None; slots as usize]
            } else {
                Vec::new()
            },
            memory: (0..config.ccm_memory_channels.max(1))
                .map(|_| MemoryShare {
                    served: 0.0,
                    updated: Ticks::ZERO,
                    finishing: FinishQueue::new(slots),
                })
                .collect(),
            memory_timers: MinTree::new(config.ccm_memory_channels.max(1) as usize),
            memory_joined: 0,
            memory_joined_at: Ticks::ZERO,
            scratch_bursts: vec![0; config.ccm_memory_channels.max(1) as usize],
            burst_cache: dram::BurstCache::for_channels(config.ccm_memory_channels),
            active_items: 0,
            busy_since: Ticks::ZERO,
            busy_total: Ticks::ZERO,
            ends: EndQueue::default(),
            wake_at: None,
            wakes: Vec::new(),
            ended: Vec::new(),
            completions: VecDeque::new(),
            interleave_rng: config.interleave_seed,
            interleaved: InterleaveCounts::default(),
        }
    }

    /// Whether a launch is executing.
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Time during which at least one µthread ran an item.
    pub fn busy(&self, now: Ticks) -> Ticks {
        if self.active_items > 0 {
            self.busy_total.plus(now.since(self.busy_since))
        } else {
            self.busy_total
        }
    }

    /// The wakes asked for since the last call (for the emulator's queue).
    pub fn take_wakes(&mut self) -> std::vec::Drain<'_, Ticks> {
        self.wakes.drain(..)
    }

    /// The earliest of the CCM's timers.
    fn next_time(&self) -> Ticks {
        let sub_cores = self.sub_timers.min().0;
        let ends = self.ends.peek().map_or(Ticks::NEVER, |(at, _)| at);
        sub_cores.min(self.memory_timers.min().0).min(ends)
    }

    /// Asks for a wake at the earliest timer unless one at or before it is pending.
    fn ask_wake(&mut self) {
        self.flush_memory();
        let next = self.next_time();
        self.ask_wake_at(next);
    }

    /// Asks for a wake at `next`, the earliest timer (read after the channels were flushed),
    /// unless one at or before it is pending.
    fn ask_wake_at(&mut self, next: Ticks) {
        if next == Ticks::NEVER {
            return;
        }
        if self.wake_at.is_none_or(|pending| next < pending) {
            self.wake_at = Some(next);
            self.wakes.push(next);
        }
    }

    /// The item's exclusive demand on a sub-core in cycles, and the largest fraction of the
    /// sub-core its one µthread can use (see the module docs).
    #[inline]
    pub fn compute_demand(&self, cost: &ItemCost) -> (f64, f64) {
        let instructions = to_f64(cost.instructions());
        if instructions == 0.0 {
            return (0.0, 1.0);
        }
        // The quotients are never NaN (counts over unit counts of at least 1).
        let demand = max_of(
            instructions / self.issue_width,
            to_f64(cost.scalar) / self.scalar_units,
        );
        let demand = max_of(
            demand,
            to_f64(cost.scalar_memory) / self.scalar_memory_units,
        );
        let demand = max_of(demand, to_f64(cost.vector) / self.vector_units);
        let demand = max_of(
            demand,
            to_f64(cost.vector_address_cycles()) / self.vector_memory_units,
        );
        (demand, (demand / instructions).min(1.0))
    }

    /// Starts the items `items` of a launch (one stage) at `now`. `memory` is read for the
    /// items' descriptions.
    pub fn dispatch<M: firmware::hal::DeviceMemory>(
        &mut self,
        now: Ticks,
        kernel: Kernel,
        tag: u32,
        items: core::ops::Range<u32>,
        memory: &M,
    ) {
        let first = items.start;
        let items = items.end.saturating_sub(items.start);
        if items == 0 {
            self.running = None;
            return;
        }
        self.running = Some(Running {
            kernel,
            tag,
            first,
            items,
            next_item: 0,
            // One counter per unit (bounded by `DeviceConfig::validate`).
            unit_taken: vec![0; self.units as usize],
            finished: 0,
        });
        self.scratch_touched.clear();
        match self.scheduling {
            Scheduling::Rr => {
                for unit in 0..self.units {
                    self.fill(now, unit, memory);
                }
            }
            Scheduling::Fifo => {
                // Deal the first items to the units in turn, one per unit per round.
                loop {
                    let mut placed = false;
                    for unit in 0..self.units {
                        if self.start_next(now, unit, memory) {
                            placed = true;
                        }
                    }
                    if !placed {
                        break;
                    }
                }
            }
        }
        self.reshare_touched(now);
        self.ask_wake();
    }

    /// A wake asked for earlier is due at `now`: every timer due by then fires, in a fixed
    /// order (the sub-cores, earliest first and by index at equal times, then memory, then
    /// the items' ends, repeated until nothing is due). Items that end run their kernel code on `memory` and are reported in
    /// [`Ccm::completions`]; the units' next items start. Returns the items that ended.
    pub fn on_wake<M: firmware::hal::DeviceAtomics + Sync>(
        &mut self,
        now: Ticks,
        memory: &M,
    ) -> EndedItems {
        let mut ended = EndedItems::new();
        self.on_wake_into(now, memory, &mut ended);
        ended
    }

    /// [`Ccm::on_wake`], the items that ended kept in the CCM's own list until the next such
    /// wake ([`Ccm::ended`]: reused, so a wake that ends more items than [`EndedItems`] holds
    /// inline allocates nothing); returns how many ended.
    pub fn on_wake_listed<M: firmware::hal::DeviceAtomics + Sync>(
        &mut self,
        now: Ticks,
        memory: &M,
    ) -> usize {
        let mut ended = std::mem::take(&mut self.ended);
        ended.clear();
        self.on_wake_into(now, memory, &mut ended);
        let count = ended.len();
        self.ended = ended;
        count
    }

    /// The items that ended at the last [`Ccm::on_wake_listed`], in the order they ended.
    pub fn ended(&self) -> &[Ended] {
        &self.ended
    }

    /// [`Ccm::on_wake`], the items that ended appended to `ended` (the caller's: no copy of the
    /// list on the way back); the body of [`Ccm::on_wake`] and [`Ccm::on_wake_listed`].
    fn on_wake_into<M: firmware::hal::DeviceAtomics + Sync>(
        &mut self,
        now: Ticks,
        memory: &M,
        ended: &mut impl Extend<Ended>,
    ) {
        if self.wake_at == Some(now) {
            self.wake_at = None;
        }
        loop {
            // The channels items joined at `now` (in the item ends below) first.
            self.flush_memory();
            // Whether a timer fired this round (none: nothing is due, the wake is done; each
            // kind's own check below, not a separate read of the earliest of all).
            let mut fired = false;
            let sub_next = loop {
                let (at, sub_core) = self.sub_timers.min();
                if at > now {
                    break at;
                }
                fired = true;
                self.compute_due(now, sub_core);
            };
            let memory_next = loop {
                let (at, channel) = self.memory_timers.min();
                if at > now {
                    break at;
                }
                fired = true;
                self.memory_due(now, channel);
            };
            let end_next = loop {
                match self.ends.peek() {
                    Some((at, slot)) if at <= now => {
                        fired = true;
                        self.ends.pop();
                        if let Some(item) = self.item_end(now, slot, memory) {
                            ended.extend(Some(item));
                        }
                    }
                    next => break next.map_or(Ticks::NEVER, |(at, _)| at),
                }
            };
            if !fired {
                // Nothing changed since the flush above: the three reads are the earliest
                // timers ([`Ccm::next_time`]), and nothing is left to flush.
                self.ask_wake_at(sub_next.min(memory_next).min(end_next));
                return;
            }
        }
    }

    // ----- scheduling ---------------------------------------------------------------------

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

    /// The sub-core of `unit` its next item goes to: the first with a free slot after the one
    /// that took the unit's last item, in turn (M²NDP `ndp_unit.cc`,
    /// `connect_instruction_buffer_to_sub_core`: it deals instruction columns from
    /// `m_last_sub_core_fetched + 1`), and its index within the unit. `None` when the unit
    /// has no free slot.
    fn free_sub_core(&self, unit: u32) -> Option<(u32, u32)> {
        if self
            .unit_free
            .get(unit as usize)
            .is_none_or(|&free| free == 0)
        {
            return None;
        }
        let count = self.sub_cores.max(1);
        let first = unit.saturating_mul(self.sub_cores);
        let last = self.last_sub_core.get(unit as usize).copied().unwrap_or(0);
        if count <= 64 {
            // The first sub-core with a free slot from `last + 1` on, else from 0 (which ends
            // with `last`): the turn below, on the unit's mask.
            let open = self.unit_open.get(unit as usize).copied().unwrap_or(0);
            let last = if last < count { last } else { last % count };
            let start = if last + 1 < count { last + 1 } else { 0 };
            let after = open & (u64::MAX << start);
            let local = if after != 0 {
                after.trailing_zeros()
            } else if open != 0 {
                open.trailing_zeros()
            } else {
                return None;
            };
            return Some((first.saturating_add(local), local));
        }
        // The sub-cores after `last`, wrapping: `(last + step) % count` for step 1..=count,
        // counted on instead of divided.
        let mut local = if last < count { last } else { last % count };
        for _ in 0..self.sub_cores {
            local += 1;
            if local == count {
                local = 0;
            }
            let index = first.saturating_add(local);
            if self
                .sub
                .get(index as usize)
                .is_some_and(|entry| entry.occupied < self.slots_per_sub_core)
            {
                return Some((index, local));
            }
        }
        None
    }

    /// Starts items on `unit` while it has free µthreads and the policy gives it items.
    fn fill<M: firmware::hal::DeviceMemory>(&mut self, now: Ticks, unit: u32, memory: &M) {
        // A unit with no free µthread is passed over here, not in a call of `start_next`
        // (after an item's end its µthread is usually the unit's only free one, so the
        // second call would find none).
        while self
            .unit_free
            .get(unit as usize)
            .is_some_and(|&free| free > 0)
            && self.start_next(now, unit, memory)
        {}
    }

    /// Starts the policy's next item for `unit` on its least-loaded sub-core; `false` when
    /// there is none (or no free µthread).
    fn start_next<M: firmware::hal::DeviceMemory>(
        &mut self,
        now: Ticks,
        unit: u32,
        memory: &M,
    ) -> bool {
        let Some((sub_core, local)) = self.free_sub_core(unit) else {
            return false;
        };
        let Some(item) = self.next_for(unit) else {
            return false;
        };
        let Some(running) = self.running.as_ref() else {
            return false;
        };
        // A kernel that cannot describe its item fails it at once (no work).
        let cost = running
            .kernel
            .item(item, memory)
            .map_or(ItemCost::ZERO, |spec| spec.cost);
        let Some(slot) = self.free_slot(sub_core) else {
            return false;
        };
        if let Some(last) = self.last_sub_core.get_mut(unit as usize) {
            *last = local;
        }
        let (demand, cap) = self.compute_demand(&cost);
        if let Some(entry) = self.sub.get_mut(sub_core as usize) {
            entry.occupied += 1;
            if let Some(bit) = 1_u64.checked_shl(slot - sub_core * self.slots_per_sub_core) {
                entry.free &= !bit;
            }
            if entry.occupied >= self.slots_per_sub_core {
                if let (Some(open), Some(bit)) = (
                    self.unit_open.get_mut(unit as usize),
                    1_u64.checked_shl(local),
                ) {
                    *open &= !bit;
                }
            }
        }
        if let Some(free) = self.unit_free.get_mut(unit as usize) {
            *free = free.saturating_sub(1);
        }
        if self.active_items == 0 {
            self.busy_since = now;
        }
        self.active_items += 1;
        let compute_done = demand <= 0.0;
        if !compute_done {
            // The sub-core's issue progress up to `now` is accounted by the
            // `reshare_sub_core` every caller runs for the sub-cores in `scratch_touched` before
            // time moves on: the new item's share is 0 until then, so it loses nothing.
            let issuing = Issuing {
                cap,
                slot,
                arrival: self.arrivals,
                compute_left: demand,
                share: 0.0,
                compute_end: now,
            };
            self.arrivals += 1;
            // The sub-core's list with room for one more at its back (there is: the item has a
            // free slot on the sub-core, and every item on its list holds one).
            let base = sub_core as usize * self.slots_per_sub_core as usize;
            let list = self.sub.get_mut(sub_core as usize).and_then(|entry| {
                let list = self
                    .issuing
                    .get_mut(base..base + entry.issuing as usize + 1)?;
                entry.issuing += 1;
                Some(list)
            });
            if let Some(list) = list {
                // FIFO: in arrival order, at the back. Round-robin: into its place by cap then
                // slot, from the back (the list is short): after the entries ordered before
                // it, which the others follow.
                if let Some(back) = list.last_mut() {
                    *back = issuing;
                }
                if self.scheduling == Scheduling::Rr {
                    let mut at = list.len() - 1;
                    while let Some([before, after]) =
                        at.checked_sub(1).and_then(|i| list.get_mut(i..=at))
                    {
                        if before
                            .cap
                            .total_cmp(&cap)
                            .then(before.slot.cmp(&slot))
                            .is_lt()
                        {
                            break;
                        }
                        std::mem::swap(before, after);
                        at -= 1;
                    }
                }
            }
            // (Usually the first: the list is emptied before each item's end starts items.)
            if self.scratch_touched.is_empty() || !self.scratch_touched.contains(&sub_core) {
                self.scratch_touched.push(sub_core);
            }
        }
        let memory_parts = if cost.bytes == 0 {
            0
        } else {
            self.join_memory(now, slot, item, cost.bytes, memory)
        };
        let parts = u8::from(!compute_done) + memory_parts;
        if parts == 0 {
            self.push_end(now.plus(self.latency), slot);
        }
        if let (Some(entry), Some(left)) = (
            self.slots.get_mut(slot as usize),
            self.left.get_mut(slot as usize),
        ) {
            *entry = Active {
                started: now,
                item,
                sub_core,
            };
            *left = parts;
        }
        true
    }

    /// The first free µthread slot of `sub_core`.
    fn free_slot(&self, sub_core: u32) -> Option<u32> {
        let first = sub_core.saturating_mul(self.slots_per_sub_core);
        let mask = self.sub.get(sub_core as usize)?.free;
        if mask != 0 {
            return Some(first + mask.trailing_zeros());
        }
        // Past the mask's 64 slots (only with more per sub-core).
        let start = first.saturating_add(64);
        let end = first.saturating_add(self.slots_per_sub_core);
        let end = (end as usize).min(self.left.len());
        let position = self
            .left
            .get(start as usize..end)?
            .iter()
            .position(|&left| left == FREE)?;
        Some(start + position as u32)
    }

    // ----- the shared resources ------------------------------------------------------------

    /// The item in `slot` starts moving `bytes` of device memory at `now`: its traffic joins
    /// the channels its addresses map to, in proportion to the DRAM bursts it moves on each
    /// ([`dram::ChannelProfile`], from a dry run of the item's code), 64 bytes per burst; the
    /// rest of its bytes (those its cost counts beyond the bursts the profile placed), and
    /// all of them when the dry run touches nothing (or there is one channel), spread evenly
    /// over every channel.
    /// Returns the number of channels joined (at most [`crate::config::MAX_MEMORY_CHANNELS`]).
    fn join_memory<M: firmware::hal::DeviceMemory>(
        &mut self,
        now: Ticks,
        slot: u32,
        item: u32,
        bytes: u64,
        memory: &M,
    ) -> u8 {
        if self.channels <= 1 {
            // The pool: no addresses to find.
            self.advance_memory(now, 0);
            if let Some(entry) = self.memory.first_mut() {
                let tag = entry.served + to_f64(bytes);
                entry.finishing.push(tag.to_bits(), slot);
                self.memory_joined |= 1;
                self.memory_joined_at = now;
                return 1;
            }
            return 0;
        }
        let mut bursts = std::mem::take(&mut self.scratch_bursts);
        bursts.iter_mut().for_each(|count| *count = 0);
        let total = match self.running.as_ref() {
            Some(running) => {
                let profile = dram::ChannelProfile::new(
                    memory,
                    self.channels,
                    self.interleave_shift,
                    &mut bursts,
                    &mut self.burst_cache,
                );
                // The outcome does not matter: what it touched before failing is its traffic.
                let _ = running.kernel.execute(item, &profile);
                profile.bursts()
            }
            None => 0,
        };
        // The bursts the dry run placed carry their own bytes (at most the item's); what the
        // item's cost counts beyond them (bursts the profile found in the burst cache, which
        // the cost still charges) has no address the profile saw, and spreads evenly, as
        // the fine interleave spreads unknown traffic.
        let mut parts: u8 = 0;
        for (channel, &count) in bursts.iter().enumerate() {
            let share = channel_share(bytes, count, total, self.channels);
            if share <= 0.0 {
                continue;
            }
            let channel = channel as u32;
            self.advance_memory(now, channel);
            if let Some(entry) = self.memory.get_mut(channel as usize) {
                let tag = entry.served + share;
                entry.finishing.push(tag.to_bits(), slot);
                parts = parts.saturating_add(1);
                self.memory_joined |= 1 << (channel % 64);
                self.memory_joined_at = now;
            }
        }
        self.scratch_bursts = bursts;
        parts
    }

    /// Accounts the bytes `channel` served up to `now`.
    fn advance_memory(&mut self, now: Ticks, channel: u32) {
        let Some(entry) = self.memory.get_mut(channel as usize) else {
            return;
        };
        let sharing = entry.finishing.len();
        let elapsed = to_f64(now.since(entry.updated).0);
        entry.updated = now;
        if sharing > 0 && elapsed > 0.0 {
            entry.served += elapsed * self.bytes_per_tick / to_f64(sharing as u64);
        }
    }

    /// Recomputes the shares of the sub-cores items started on (`scratch_touched`) and
    /// schedules their next ends; the channels joined at `now` are left to
    /// [`Ccm::flush_memory`].
    fn reshare_touched(&mut self, now: Ticks) {
        let mut index = 0;
        while let Some(&sub_core) = self.scratch_touched.get(index) {
            self.reshare_sub_core(now, sub_core);
            index += 1;
        }
    }

    /// Schedules the next ends of the channels items joined (at `memory_joined_at`, the
    /// current time: every caller flushes before time moves on). A projection depends only on
    /// the channel's state at that time, so one made after the last join gives the same end as
    /// one made after each, and every read of the timers comes after a flush.
    #[inline]
    fn flush_memory(&mut self) {
        // (Most flushes find nothing: the test inline, the work in a call.)
        if self.memory_joined != 0 {
            self.flush_joined();
        }
    }

    /// [`Ccm::flush_memory`] of the channels in `memory_joined`.
    fn flush_joined(&mut self) {
        let now = self.memory_joined_at;
        let mut joined = std::mem::take(&mut self.memory_joined);
        while joined != 0 {
            let channel = joined.trailing_zeros();
            joined &= joined - 1;
            self.reschedule_memory(now, channel);
        }
    }

    /// Water-fills `sub_core`'s capacity over its issuing items (round-robin: max-min fair
    /// with each item's cap; FIFO: oldest first, see the module docs) and schedules the
    /// earliest projected end. One pass over the items, in the order of [`SubCore::issuing`]
    /// (round-robin: by cap then slot): each item's issue progress is accounted up to `now` at its
    /// old share (the only place it is: an item that joined since the last pass has share 0
    /// and loses nothing), then its new share and end are set.
    fn reshare_sub_core(&mut self, now: Ticks, sub_core: u32) {
        let Some(entry) = self.sub.get_mut(sub_core as usize) else {
            return;
        };
        let base = sub_core as usize * self.slots_per_sub_core as usize;
        let Some(list) = self.issuing.get_mut(base..base + entry.issuing as usize) else {
            return;
        };
        if list.is_empty() {
            // (Often: the item that ended its instructions was the only one issuing.)
            entry.updated = now;
            self.sub_timers.set(sub_core, Ticks::NEVER);
            return;
        }
        let elapsed = to_f64(now.since(entry.updated).0) / self.ticks_per_cycle;
        entry.updated = now;
        let ticks_per_cycle = self.ticks_per_cycle;
        let mut capacity = 1.0_f64;
        let mut earliest = Ticks::NEVER;
        if self.scheduling == Scheduling::Fifo {
            // Oldest first: each item, in the order it arrived (its offset order), takes what
            // its µthread can use of what the older ones left.
            for item in list {
                if elapsed > 0.0 {
                    item.compute_left = (item.compute_left - item.share * elapsed).max(0.0);
                }
                let share = item.cap.min(capacity).max(0.0);
                capacity -= share;
                item.share = share;
                item.compute_end = if share > 0.0 {
                    now.plus(ceil_ticks(item.compute_left / share * ticks_per_cycle))
                } else {
                    Ticks::NEVER
                };
                earliest = earliest.min(item.compute_end);
            }
            self.sub_timers.set(sub_core, earliest);
            return;
        }
        // The items left to share, counted down in an `f64` (exact: far below 2^53), the
        // value `to_f64` of the count gives.
        let mut left = to_f64(list.len() as u64);
        for item in list {
            let fair = capacity / left;
            // Neither is NaN: a cap is at most 1, `capacity` stays in [0, 1] and `left` >= 1.
            let share = min_of(item.cap, fair);
            capacity -= share;
            left -= 1.0;
            if elapsed > 0.0 {
                item.compute_left = (item.compute_left - item.share * elapsed).max(0.0);
            }
            item.share = share;
            let ticks = item.compute_left / share * ticks_per_cycle;
            item.compute_end = now.plus(ceil_ticks(ticks));
            earliest = earliest.min(item.compute_end);
        }
        // The earliest projected end of an issuing item's instructions (none: never).
        self.sub_timers.set(sub_core, earliest);
    }

    /// Projects the earliest end of an item's traffic on `channel`.
    fn reschedule_memory(&mut self, now: Ticks, channel: u32) {
        self.advance_memory(now, channel);
        let Some(entry) = self.memory.get(channel as usize) else {
            return;
        };
        let Some((bits, _)) = entry.finishing.peek() else {
            self.memory_timers.set(channel, Ticks::NEVER);
            return;
        };
        let sharing = to_f64(entry.finishing.len() as u64);
        let left = (f64::from_bits(bits) - entry.served).max(0.0);
        // Never now: a projection rounded to the tick it is made at would fire again and
        // again without the served bytes moving (the slack covers the rounding).
        let at = now.plus(ceil_ticks(left * sharing / self.bytes_per_tick).max(Ticks(1)));
        // A channel moves whole bursts: a part ends at the end of a burst slot (one tick, the
        // pooled model's grid, needs no rounding).
        let at = if self.burst_ticks > 1 {
            Ticks(
                at.0.div_ceil(self.burst_ticks)
                    .saturating_mul(self.burst_ticks),
            )
        } else {
            at
        };
        self.memory_timers.set(channel, at);
    }

    /// The earliest projected instruction end of `sub_core` is due.
    fn compute_due(&mut self, now: Ticks, sub_core: u32) {
        // The items that go on issuing are accounted up to `now` by the `reshare_sub_core`
        // below; the ones that end need no accounting (none left).
        self.scratch_done.clear();
        if let Some(entry) = self.sub.get_mut(sub_core as usize) {
            let done = &mut self.scratch_done;
            // Keep the items that go on issuing, in order (a `retain`, written out: this is
            // the hot path of every item).
            let base = sub_core as usize * self.slots_per_sub_core as usize;
            let list = self
                .issuing
                .get_mut(base..base + entry.issuing as usize)
                .unwrap_or_default();
            let mut kept: u32 = 0;
            for index in 0..list.len() {
                let Some(&item) = list.get(index) else {
                    break;
                };
                if item.compute_end <= now {
                    done.push((item.arrival, item.slot));
                } else {
                    if let Some(keep) = list.get_mut(kept as usize) {
                        *keep = item;
                    }
                    kept += 1;
                }
            }
            entry.issuing = kept;
        }
        // Handed on in the order they arrived on the sub-core (round-robin's list is by cap).
        // (In place in the CCM's scratch list: nothing below touches it.)
        if self.scratch_done.len() > 1 {
            self.scratch_done.sort_unstable();
        }
        let latency = self.latency;
        let mut index = 0;
        while let Some(&(_, slot)) = self.scratch_done.get(index) {
            if let Some(end) = self.part_done(slot, now, latency) {
                self.push_end(end, slot);
            }
            index += 1;
        }
        self.reshare_sub_core(now, sub_core);
    }

    /// The earliest projected end of an item's traffic on `channel` is due.
    fn memory_due(&mut self, now: Ticks, channel: u32) {
        self.advance_memory(now, channel);
        let Some(entry) = self.memory.get_mut(channel as usize) else {
            return;
        };
        // The parts that end, least tag first, taken out together (the served bytes do not
        // move meanwhile), then handed on in that order.
        let limit = entry.served * (1.0 + MEMORY_SLACK) + MEMORY_SLACK;
        let mut due = std::mem::take(&mut self.scratch_due);
        due.clear();
        entry.finishing.pop_due(limit, &mut due);
        let latency = self.latency;
        for &slot in &due {
            if let Some(end) = self.part_done(slot, now, latency) {
                self.push_end(end, slot);
            }
        }
        self.scratch_due = due;
        // The channel's next end is projected at the next flush (the next round of the wake
        // starts with one), as for a join: once, after the items that start at `now` (mostly
        // those whose end this was) have joined, not once before them and again after. Until
        // then the timer is never, not due again in this round (a projection is never `now`).
        self.memory_joined |= 1 << (channel % 64);
        self.memory_joined_at = now;
        self.memory_timers.set(channel, Ticks::NEVER);
    }

    /// One part of the item in `slot` (its instructions, or its traffic on one channel) ended
    /// at `now`: if that was its last, when it ends (no earlier than `latency` after it
    /// started). Only then is its slot read; the caller schedules the end.
    #[inline]
    fn part_done(&mut self, slot: u32, now: Ticks, latency: Ticks) -> Option<Ticks> {
        let left = self.left.get_mut(slot as usize)?;
        if *left == FREE || *left == 0 {
            return None;
        }
        *left -= 1;
        if *left > 0 {
            return None;
        }
        let active = self.slots.get(slot as usize)?;
        Some(now.max(active.started.plus(latency)))
    }

    /// Queues the end of the item in `slot` at `at`.
    fn push_end(&mut self, at: Ticks, slot: u32) {
        self.ends.push(at, slot);
    }

    /// The item in `slot` ends at `now`: runs its kernel code, reports it, frees the µthread
    /// and starts the unit's next items.
    fn item_end<M: firmware::hal::DeviceAtomics + Sync>(
        &mut self,
        now: Ticks,
        slot: u32,
        memory: &M,
    ) -> Option<Ended> {
        let left = self.left.get_mut(slot as usize)?;
        if *left == FREE {
            return None;
        }
        *left = FREE;
        let active = *self.slots.get(slot as usize)?;
        let sub_core = active.sub_core;
        let unit = sub_core / self.sub_cores.max(1);
        if let Some(entry) = self.sub.get_mut(sub_core as usize) {
            entry.occupied = entry.occupied.saturating_sub(1);
            if let Some(bit) = 1_u64.checked_shl(slot - sub_core * self.slots_per_sub_core) {
                entry.free |= bit;
            }
            if let (Some(open), Some(bit)) = (
                self.unit_open.get_mut(unit as usize),
                1_u64.checked_shl(sub_core - unit * self.sub_cores),
            ) {
                *open |= bit;
            }
        }
        if let Some(free) = self.unit_free.get_mut(unit as usize) {
            *free += 1;
        }
        self.active_items = self.active_items.saturating_sub(1);
        if self.active_items == 0 {
            self.busy_total = self.busy_total.plus(now.since(self.busy_since));
        }
        let ahead = self.outcomes.get_mut(slot as usize).and_then(Option::take);
        let outcome = match (ahead, self.interleave_rng) {
            (Some(outcome), _) => outcome,
            (None, None) => firmware::run_item(&self.running.as_ref()?.kernel, active.item, memory),
            (None, Some(_)) => self.run_interleaved(active.item, memory)?,
        };
        let running = self.running.as_mut()?;
        let tag = running.tag;
        if self.completions.is_empty() {
            // Back to the front of its buffer (`clear` restarts it there; popping the last
            // completion does not): the next completions reuse the cache lines the last ones
            // did, not the next ones round the ring.
            self.completions.clear();
        }
        self.completions.push_back(firmware::hal::ItemCompletion {
            tag,
            item: active.item,
            outcome,
        });
        running.finished += 1;
        let ended = Ended {
            unit,
            item: active.item,
            started: active.started,
            tag,
        };
        if running.finished >= running.items {
            self.running = None;
            return Some(ended);
        }
        self.scratch_touched.clear();
        self.fill(now, unit, memory);
        self.reshare_touched(now);
        Some(ended)
    }
}

impl Ccm {
    /// Cuts the launch stage running now at `now` (its tenant was detached from a shared
    /// device, `crate::cosim::tenants`): every item on a µthread is dropped unfinished, its
    /// kernel code never runs (it writes nothing) and it is not reported; the µthreads, the
    /// sub-cores' issue slots and the memory channels are free from `now`. The busy time
    /// counts up to `now`. The placement rotation restarts as on a new CCM, so the CCM left
    /// behind is the same whatever the cut stage had started. Returns the items dropped.
    /// Wakes already asked for stay in the emulator's queue and find nothing due.
    pub fn abort(&mut self, now: Ticks) -> u32 {
        let dropped = self.active_items;
        if self.active_items > 0 {
            self.busy_total = self.busy_total.plus(now.since(self.busy_since));
        }
        self.active_items = 0;
        self.running = None;
        self.left.iter_mut().for_each(|left| *left = FREE);
        self.outcomes.iter_mut().for_each(|outcome| *outcome = None);
        for sub in &mut self.sub {
            sub.issuing = 0;
            sub.occupied = 0;
            sub.free = all_free(self.slots_per_sub_core);
            sub.updated = now;
        }
        for index in 0..self.sub.len() {
            self.sub_timers.set(index as u32, Ticks::NEVER);
        }
        for channel in &mut self.memory {
            channel.finishing.clear();
            channel.updated = now;
        }
        for index in 0..self.memory.len() {
            self.memory_timers.set(index as u32, Ticks::NEVER);
        }
        self.memory_joined = 0;
        let per_unit = self.sub_cores.saturating_mul(self.slots_per_sub_core);
        self.unit_free.iter_mut().for_each(|free| *free = per_unit);
        let open = all_open(self.sub_cores, self.slots_per_sub_core);
        self.unit_open.iter_mut().for_each(|mask| *mask = open);
        let rotation = self.sub_cores.saturating_sub(1);
        self.last_sub_core
            .iter_mut()
            .for_each(|last| *last = rotation);
        self.ends.clear();
        self.completions.clear();
        self.wake_at = None;
        dropped
    }
}

impl Ccm {
    /// Interleaved execution: runs the code of `ending` (whose slot is already free) and of
    /// every other item on a µthread whose code has not run yet, at most
    /// [`interleave::MAX_INTERLEAVED_ITEMS`] in all, by slot, with their accesses interleaved
    /// ([`interleave`]); keeps the others' outcomes for their ends and returns `ending`'s.
    fn run_interleaved<M: firmware::hal::DeviceAtomics + Sync>(
        &mut self,
        ending: u32,
        memory: &M,
    ) -> Option<Result<(), firmware::FirmwareError>> {
        let kernel = self.running.as_ref()?.kernel;
        let seed = self.interleave_rng?;
        let mut batch = vec![(usize::MAX, ending)];
        for (slot, (active, &left)) in self.slots.iter().zip(&self.left).enumerate() {
            if batch.len() >= interleave::MAX_INTERLEAVED_ITEMS {
                break;
            }
            let ahead = self.outcomes.get(slot).is_some_and(Option::is_some);
            if left != FREE && !ahead {
                batch.push((slot, active.item));
            }
        }
        let items: Vec<u32> = batch.iter().map(|&(_, item)| item).collect();
        let view = interleave::Interleaved::new(memory, seed);
        let outcomes = view.run(&items, |item| firmware::run_item(&kernel, item, &view));
        self.interleave_rng = Some(view.rng());
        let counts = &mut self.interleaved;
        counts.batches += 1;
        counts.items += items.len() as u64;
        counts.steps += view.steps();
        counts.switches += view.switches();
        counts.fallbacks += view.fallbacks();
        log::debug!(
            "interleave: launch {} batch of {} items: {} word accesses, {} switches (so far {counts:?})",
            self.running.as_ref().map_or(0, |running| running.tag),
            items.len(),
            view.steps(),
            view.switches()
        );
        let mut ending_outcome = None;
        for (&(slot, _), outcome) in batch.iter().zip(outcomes) {
            match (self.left.get(slot), self.outcomes.get_mut(slot)) {
                (Some(&left), Some(ahead)) if left != FREE => *ahead = Some(outcome),
                _ => ending_outcome = Some(outcome),
            }
        }
        ending_outcome
    }
}

/// Ticks one memory channel takes to move one DRAM burst
/// ([`firmware::kernels::DRAM_BURST_BYTES`] at `ccm_memory_gbps / ccm_memory_channels`),
/// rounded to a whole tick, at least one: 10 ticks (1.67 ns) by default. One tick with a
/// single channel: the pooled model, whose parts end at any tick.
/// The bytes of an item's `bytes` that go to a channel on which its dry run placed `count` of
/// its `total` bursts, among `channels`: 64 bytes per placed burst (the placed bursts carry at
/// most the item's bytes, in proportion), and an even share of what its cost counts beyond
/// them (bursts the profile found in the burst cache, which the cost still charges, have no
/// address the profile saw, so they spread as the fine interleave spreads unknown traffic);
/// all of `bytes` evenly when the dry run placed nothing.
fn channel_share(bytes: u64, count: u64, total: u64, channels: u32) -> f64 {
    let channels = f64::from(channels.max(1));
    if total == 0 {
        return bytes as f64 / channels;
    }
    let placed = (total as f64 * firmware::kernels::DRAM_BURST_BYTES as f64).min(bytes as f64);
    placed * count as f64 / total as f64 + (bytes as f64 - placed) / channels
}

/// The open-sub-core mask of a unit of `sub_cores` empty sub-cores of `slots` µthreads each
/// (its first 64; none when a sub-core has no slot).
fn all_open(sub_cores: u32, slots: u32) -> u64 {
    if slots == 0 {
        0
    } else {
        all_free(sub_cores)
    }
}

/// The free-slot mask of an empty sub-core of `slots` µthreads (its first 64).
fn all_free(slots: u32) -> u64 {
    if slots >= 64 {
        u64::MAX
    } else {
        (1_u64 << slots) - 1
    }
}

fn burst_ticks(config: &DeviceConfig) -> u64 {
    if config.ccm_memory_channels <= 1 {
        return 1;
    }
    let channel_gbps = config.ccm_memory_gbps / f64::from(config.ccm_memory_channels.max(1));
    let ticks = firmware::kernels::DRAM_BURST_BYTES as f64 / channel_gbps * Ticks::PER_NS as f64;
    if ticks.is_finite() && ticks >= 1.0 {
        (ticks.round() as u64).max(1)
    } else {
        1
    }
}

/// `ticks` rounded up to a whole tick (at least one for a positive duration).
#[inline]
fn ceil_ticks(ticks: f64) -> Ticks {
    // Below 2^52 (every real duration), without a conversion to an integer: `ticks + 2^52`
    // lies in [2^52, 2^53], where the unit in the last place is 1, so it is 2^52 plus `ticks`
    // rounded to a whole number, and its bits less those of 2^52 are that number (2^53's bits
    // are 2^52's plus 2^52); one more when the rounding went down. The same value as below
    // (both are the exact ceiling), in fewer instructions than the checked conversion.
    if ticks > 0.0 && ticks < WHOLE_LIMIT {
        let shifted = ticks + WHOLE_LIMIT;
        let nearest = shifted.to_bits().wrapping_sub(WHOLE_LIMIT.to_bits());
        let up = u64::from(shifted - WHOLE_LIMIT < ticks);
        return Ticks(nearest.wrapping_add(up));
    }
    if ticks.is_nan() || ticks <= 0.0 {
        return Ticks::ZERO;
    }
    if ticks >= u64::MAX as f64 {
        return Ticks::NEVER;
    }
    // `f64::ceil` is a call into the C library on the baseline x86-64 target (no SSE4.1
    // rounding instruction); this is the same value: `ticks` is positive and below 2^64, so
    // the truncation is exact or one below the ceiling. Below 2^63 (every real duration)
    // through `i64`, whose conversions are one instruction each (`u64`'s are sequences): the
    // same truncation, the same value back.
    if ticks < I64_LIMIT {
        let whole = ticks as i64;
        let up = i64::from((whole as f64) < ticks);
        return Ticks(whole.wrapping_add(up) as u64);
    }
    let whole = ticks as u64;
    if (whole as f64) < ticks {
        Ticks(whole + 1)
    } else {
        Ticks(whole)
    }
}

/// The larger of `a` and `b`, neither of them NaN: what `f64::max` returns for them, in one
/// comparison (`f64::max` also picks the other operand of a NaN, several instructions more).
#[inline]
fn max_of(a: f64, b: f64) -> f64 {
    if b > a {
        b
    } else {
        a
    }
}

/// The smaller of `a` and `b`, neither of them NaN: what `f64::min` returns for them, in one
/// comparison.
#[inline]
fn min_of(a: f64, b: f64) -> f64 {
    if b < a {
        b
    } else {
        a
    }
}

/// 2^52 as an `f64`: every `f64` at or above it is a whole number.
const WHOLE_LIMIT: f64 = 4_503_599_627_370_496.0;

/// 2^63 as an `f64`: every non-negative `f64` below it truncates into an `i64`.
const I64_LIMIT: f64 = 9_223_372_036_854_775_808.0;

/// `value as f64`, the same value (both round to nearest): through `i64` when it fits, which
/// the baseline x86-64 target converts in one instruction, where `u64` takes five or six.
/// Past `i64::MAX` (never a real count or duration) it halves the value keeping a sticky low
/// bit, converts that and doubles it: the same rounding. (With `value as f64` in that arm the
/// optimiser merged both arms back into the `u64` conversion, which every caller then ran.)
#[inline]
fn to_f64(value: u64) -> f64 {
    match i64::try_from(value) {
        Ok(value) => value as f64,
        Err(_) => (((value >> 1) | (value & 1)) as i64) as f64 * 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dram::DeviceDram;
    use crate::sim::queue::EventQueue;
    use firmware::kernels::knn::{item_cost, pack_shape, KnnKernel};
    use rand::{Rng, SeedableRng};
    use shared_abi::{CommandDescriptor, KernelId};

    const MEMORY: u64 = 1 << 22;

    #[test]
    fn the_fast_conversions_give_the_values_of_the_plain_ones() {
        // Integers around every rounding boundary of the `i64` path and beyond it.
        let mut values = vec![0, 1, 7, u64::MAX, u64::MAX - 1];
        // Past i64::MAX (the halving path): ties to even and just past them, at its step of
        // 2048.
        for delta in [1023, 1024, 1025, 3071, 3072, 3073] {
            values.push((1u64 << 63) + delta);
            values.push(u64::MAX - delta);
        }
        for bits in [52, 53, 54, 62, 63] {
            for delta in 0..4 {
                values.push((1u64 << bits) + delta);
                values.push((1u64 << bits) - 1 - delta);
            }
        }
        for value in values {
            assert_eq!(to_f64(value).to_bits(), (value as f64).to_bits(), "{value}");
        }
        // Durations around whole ticks, tiny and huge, against the C library's ceiling.
        let mut durations = vec![
            1e-300,
            0.5,
            1.0,
            1.5,
            2.0 - f64::EPSILON,
            4503599627370495.5,
        ];
        durations.extend([2f64.powi(52), 2f64.powi(53), 2f64.powi(62), 2f64.powi(63)]);
        durations.extend([2f64.powi(63) - 1024.0, 2f64.powi(64) - 2048.0, 123_456.789]);
        // Around 2^52, the end of the path without a conversion, and what is not a duration.
        for whole in [2f64.powi(52), 2f64.powi(51), 1.0] {
            for step in [-1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0] {
                durations.push(whole + step);
            }
            durations.push(f64::from_bits(whole.to_bits() - 1));
            durations.push(f64::from_bits(whole.to_bits() + 1));
        }
        durations.extend([-0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY]);
        durations.extend([f64::MIN_POSITIVE, 5e-324, f64::MAX]);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x9e37_79b9_7f4a_7c15);
        for _ in 0..10_000 {
            durations.push(f64::from_bits(rng.gen::<u64>() >> 2) % 1e19);
            // Real durations: up to a few million ticks, and whole ticks and halves.
            durations.push(rng.gen_range(0.0..1e7));
            durations.push(f64::from(rng.gen_range(0..1_000_000_u32)) * 0.5);
            durations.push(rng.gen_range(0.0..2f64.powi(53)));
        }
        for ticks in durations {
            let want = if ticks.is_nan() || ticks <= 0.0 {
                Ticks::ZERO
            } else if ticks >= u64::MAX as f64 {
                Ticks::NEVER
            } else {
                Ticks(ticks.ceil() as u64)
            };
            assert_eq!(ceil_ticks(ticks), want, "{ticks}");
        }
    }

    /// A KNN launch of `rows` rows of `dim` elements and one query (one item per row).
    fn knn(rows: u32, dim: u32) -> Kernel {
        let command = CommandDescriptor {
            kernel: KernelId::KnnDistance as u32,
            result_address: 0x30_0000,
            result_length: u64::from(rows) * 4,
            args: [0x1000, 0x20_0000, pack_shape(rows, dim), 1],
            ..CommandDescriptor::default()
        };
        Kernel::Knn(KnnKernel::decode(&command, MEMORY).unwrap())
    }

    fn config(units: u32, sub_cores: u32, uthreads: u32, scheduling: Scheduling) -> DeviceConfig {
        DeviceConfig {
            ccm_units: units,
            ccm_sub_cores: sub_cores,
            ccm_uthreads_per_sub_core: uthreads,
            scheduling,
            ..DeviceConfig::default()
        }
    }

    /// Runs `items` of `kernel` to the end; returns `(item, unit, end)` in completion order.
    fn run(ccm: &mut Ccm, kernel: Kernel, items: u32) -> Vec<(u32, u32, Ticks)> {
        run_with(ccm, kernel, items, &mut DeviceDram::new(MEMORY))
    }

    /// [`run`] over `memory`.
    fn run_with(
        ccm: &mut Ccm,
        kernel: Kernel,
        items: u32,
        memory: &mut DeviceDram,
    ) -> Vec<(u32, u32, Ticks)> {
        let mut queue = EventQueue::default();
        ccm.dispatch(Ticks::ZERO, kernel, 1, 0..items, &*memory);
        let mut ended = Vec::new();
        loop {
            for at in ccm.take_wakes() {
                queue.push(at, ());
            }
            let Some((at, ())) = queue.pop() else {
                break;
            };
            for item in &ccm.on_wake(at, memory) {
                ended.push((item.item, item.unit, at));
            }
        }
        ended
    }

    fn cycles(config: &DeviceConfig, cycles: f64) -> Ticks {
        ceil_ticks(cycles * (Ticks::PER_NS * 1000) as f64 / config.ccm_mhz as f64)
    }

    /// A configuration whose memory is so fast that every KNN item is bound by its sub-core.
    fn compute_bound(units: u32, sub_cores: u32, uthreads: u32) -> DeviceConfig {
        DeviceConfig {
            ccm_memory_gbps: 1e9,
            ccm_memory_latency_ns: 0,
            ..config(units, sub_cores, uthreads, Scheduling::Rr)
        }
    }

    #[test]
    fn an_item_alone_runs_at_the_speed_of_one_uthread_not_a_static_share() {
        // One item on a 16 x 4 x 16 CCM: a sparse launch. It issues one instruction per
        // cycle, so it takes its instruction count in cycles: not 16 or 1024 times that.
        let config = compute_bound(16, 4, 16);
        let mut ccm = Ccm::new(&config);
        let ended = run(&mut ccm, knn(1, 64), 1);
        let instructions = item_cost(64).instructions() as f64;
        assert_eq!(ended, vec![(0, 0, cycles(&config, instructions))]);
    }

    #[test]
    fn a_gather_keeps_the_vector_address_unit_one_cycle_per_packet() {
        // Two vector loads, one of them a gather over 8 packets: 9 cycles of the one vector
        // address unit, though the µthread issues only 2 instructions there.
        let ccm = Ccm::new(&DeviceConfig::default());
        let cost = ItemCost {
            vector_memory: 2,
            indexed_extra_cycles: 7,
            ..ItemCost::ZERO
        };
        let (demand, cap) = ccm.compute_demand(&cost);
        assert_eq!(demand, 9.0);
        // A lone µthread can use all of the unit: it issues 2 instructions, the unit needs 9.
        assert_eq!(cap, 1.0);
        let plain = ItemCost {
            vector_memory: 2,
            ..ItemCost::ZERO
        };
        assert_eq!(ccm.compute_demand(&plain).0, 2.0);
    }

    #[test]
    fn items_on_one_sub_core_share_its_vector_unit() {
        // 16 KNN items of dim 64 on one sub-core: each needs 8 x 2 + 3 = 19 cycles of the one
        // vector unit (its bottleneck among the sub-core's units: 51 instructions / 4 issue =
        // 12.75), so together they need 16 x 19 cycles; equal items finish together.
        let config = compute_bound(1, 1, 16);
        let mut ccm = Ccm::new(&config);
        let cost = item_cost(64);
        assert_eq!(cost.vector, 19);
        let ended = run(&mut ccm, knn(16, 64), 16);
        assert_eq!(ended.len(), 16);
        let end = cycles(&config, 16.0 * 19.0);
        assert!(ended.iter().all(|&(_, _, at)| at == end), "{ended:?}");
    }

    #[test]
    fn under_fifo_a_sub_core_issues_oldest_first_so_items_end_in_offset_order() {
        // The 16 items of `items_on_one_sub_core_share_its_vector_unit`, which end together
        // under round-robin: under FIFO the oldest take the vector unit first (each at most
        // what its µthread can use, 19 of every 51 cycles), so item 0 ends as if alone and
        // each item ends no earlier than the one before it.
        let config = DeviceConfig {
            scheduling: Scheduling::Fifo,
            ..compute_bound(1, 1, 16)
        };
        let mut ccm = Ccm::new(&config);
        let ended = run(&mut ccm, knn(16, 64), 16);
        let items: Vec<u32> = ended.iter().map(|&(item, _, _)| item).collect();
        assert_eq!(items, (0..16).collect::<Vec<_>>());
        assert_eq!(ended.first().map(|e| e.2), Some(cycles(&config, 51.0)));
        assert!(
            ended.windows(2).all(|pair| pair[0].2 <= pair[1].2),
            "{ended:?}"
        );
        let last = ended.last().map_or(Ticks::ZERO, |e| e.2);
        assert!(
            ended.iter().filter(|e| e.2 < last).count() >= 8,
            "most items end before the last: {ended:?}"
        );
    }

    #[test]
    fn a_few_items_on_a_sub_core_are_limited_by_their_own_issue_rate() {
        // 2 items: each could have half the sub-core (2 x 19 = 38 cycles) but one µthread
        // issues one instruction per cycle, so each still takes its 51 instructions.
        let config = compute_bound(1, 1, 16);
        let mut ccm = Ccm::new(&config);
        let instructions = item_cost(64).instructions();
        assert_eq!(instructions, 51);
        let ended = run(&mut ccm, knn(2, 64), 2);
        let end = cycles(&config, 51.0);
        assert_eq!(ended, vec![(0, 0, end), (1, 0, end)]);
    }

    /// A configuration whose sub-cores are so fast that every item is bound by memory, which
    /// moves 6 bytes per tick.
    /// Memory-bound items (the clock makes instructions free) on one pooled channel of 6
    /// bytes per tick.
    fn memory_bound(units: u32) -> DeviceConfig {
        DeviceConfig {
            ccm_memory_gbps: 36.0,
            ccm_memory_channels: 1,
            ccm_memory_latency_ns: 0,
            ccm_mhz: 1_000_000,
            ..config(units, 1, 2, Scheduling::Rr)
        }
    }

    /// [`memory_bound`] with the same 6 bytes per tick split over two channels of 3,
    /// interleaved every `interleave` bytes.
    fn two_channels(units: u32, interleave: u64) -> DeviceConfig {
        DeviceConfig {
            ccm_memory_channels: 2,
            ccm_channel_interleave_bytes: interleave,
            ..memory_bound(units)
        }
    }

    #[test]
    fn items_on_one_channel_share_it_and_items_on_two_do_not() {
        // Two KNN items of dim 64: 260 bytes each, rows of 256 bytes at 0x20_0000 and
        // 0x20_0100; the query (0x1000) and the results (0x30_0000) fall on channel 0.
        // Interleaved every 512 bytes, everything is on channel 0: the two items share its
        // 3 bytes per tick, 520 / 3 -> 174 ticks (up to one burst slot later), twice as
        // long as on one pooled channel of 6 bytes per tick (87). Interleaved every 256
        // bytes, row 1 is on channel 1, where item 1 moves it without item 0: both end
        // sooner than on one channel, and no sooner than on the pool.
        let ends = |config: &DeviceConfig| -> Vec<Ticks> {
            let mut ccm = Ccm::new(config);
            run(&mut ccm, knn(2, 64), 2).iter().map(|e| e.2).collect()
        };
        let same = ends(&two_channels(2, 512));
        let split = ends(&two_channels(2, 256));
        let pooled = ends(&memory_bound(2));
        assert_eq!(pooled, vec![Ticks(87), Ticks(87)]);
        let slot = burst_ticks(&two_channels(2, 512));
        for end in &same {
            assert!(*end >= Ticks(174) && *end <= Ticks(174 + slot), "{same:?}");
        }
        assert!(split.iter().max() < same.iter().min(), "{split:?} {same:?}");
        assert!(
            split.iter().max() >= pooled.iter().max(),
            "{split:?} {pooled:?}"
        );
    }

    #[test]
    fn the_item_whose_row_is_on_the_quiet_channel_ends_first() {
        // Two identical KNN items (same work, same bytes): on one pooled channel they end
        // together; on two channels interleaved every 256 bytes, item 1's row is on channel
        // 1, which item 0 does not use, while item 0's query, row and result share channel
        // 0: item 1 ends first. The order comes from the addresses alone.
        let mut pooled = Ccm::new(&memory_bound(2));
        let ended = run(&mut pooled, knn(2, 64), 2);
        assert_eq!(ended[0].2, ended[1].2, "{ended:?}");
        let mut split = Ccm::new(&two_channels(2, 256));
        let ended = run(&mut split, knn(2, 64), 2);
        assert_eq!(ended[0].0, 1, "{ended:?}");
        assert!(ended[0].2 < ended[1].2, "{ended:?}");
    }

    #[test]
    fn bytes_the_profile_did_not_place_spread_over_every_channel() {
        // A PageRank hub whose gathers mostly hit the burst cache: its cost counts 16 bursts,
        // the profile placed 1 (on channel 3). That channel carries the placed burst and an
        // even share of the rest; the other channels carry their even share, not nothing.
        let bytes = 16 * 64;
        let on_three = channel_share(bytes, 1, 1, 16);
        let elsewhere = channel_share(bytes, 0, 1, 16);
        assert_eq!(on_three, 64.0 + 15.0 * 64.0 / 16.0);
        assert_eq!(elsewhere, 15.0 * 64.0 / 16.0);
        assert_eq!(on_three + 15.0 * elsewhere, bytes as f64);
        // Placed bursts that cover the bytes split them in proportion, and nothing spreads.
        assert_eq!(channel_share(256, 3, 4, 16), 192.0);
        assert_eq!(channel_share(256, 0, 4, 16), 0.0);
        // Nothing placed: an even share.
        assert_eq!(channel_share(256, 0, 0, 16), 16.0);
    }

    #[test]
    fn channel_timing_is_deterministic() {
        let config = DeviceConfig {
            ccm_memory_latency_ns: 0,
            ..config(2, 2, 4, Scheduling::Rr)
        };
        let once = || {
            let (kernel, mut memory) = uneven_items();
            let mut ccm = Ccm::new(&config);
            run_with(&mut ccm, kernel, 2, &mut memory)
        };
        assert_eq!(once(), once());
    }

    #[test]
    fn memory_bandwidth_is_shared_equally_by_the_items_moving_bytes() {
        // Two equal KNN items of dim 64 (260 bytes each) on two units share 6 bytes per tick:
        // both end at 520 / 6 -> 87 ticks. Alone, one ends at 260 / 6 -> 44.
        let config = memory_bound(2);
        assert_eq!(item_cost(64).bytes, 260);
        let mut ccm = Ccm::new(&config);
        let ended = run(&mut ccm, knn(2, 64), 2);
        assert_eq!(ended, vec![(0, 0, Ticks(87)), (1, 1, Ticks(87))]);
        let mut alone = Ccm::new(&config);
        assert_eq!(run(&mut alone, knn(2, 64), 1), vec![(0, 0, Ticks(44))]);
    }

    #[test]
    fn the_access_latency_is_a_floor_under_an_item_not_an_addition() {
        // Two memory-bound items of 260 bytes each, 6 bytes per tick in all: 87 ticks of
        // transfer. With a latency of 10 ns (60 ticks) they end at 87, not 147; with 20 ns
        // (120 ticks) at 120.
        for (latency_ns, end) in [(10, Ticks(87)), (20, Ticks(120))] {
            let config = DeviceConfig {
                ccm_memory_latency_ns: latency_ns,
                ..memory_bound(2)
            };
            let mut ccm = Ccm::new(&config);
            assert_eq!(
                run(&mut ccm, knn(2, 64), 2),
                vec![(0, 0, end), (1, 1, end)],
                "latency {latency_ns} ns"
            );
        }
    }

    #[test]
    fn a_long_transfer_speeds_up_when_the_short_one_beside_it_ends() {
        // Items of b0 < b1 bytes share memory until the short one ends at t0 = 2 b0 / 6 ticks
        // (rounded up to a tick, by which each has been served 3 t0 bytes); the long one then
        // has all of it for its b1 - 3 t0 bytes left: about (b0 + b1) / 6 in all, where a
        // static half share would take 2 b1 / 6.
        let config = memory_bound(1);
        let (kernel, mut memory) = uneven_items();
        let short = kernel.item(0, &memory).unwrap().cost.bytes as f64;
        let long = kernel.item(1, &memory).unwrap().cost.bytes as f64;
        assert!(long > short * 1.5, "{short} {long}");
        let mut ccm = Ccm::new(&config);
        let ended = run_with(&mut ccm, kernel, 2, &mut memory);
        let first = ceil_ticks(2.0 * short / 6.0);
        assert_eq!(
            ended,
            vec![
                (0, 0, first),
                (
                    1,
                    0,
                    first.plus(ceil_ticks((long - 3.0 * first.0 as f64) / 6.0))
                )
            ]
        );
        assert!(ended[1].2 < ceil_ticks(2.0 * long / 6.0));
    }

    #[test]
    fn a_uthread_freed_by_fifo_takes_the_next_item_which_then_runs_alone() {
        // FIFO on one sub-core with 2 µthreads and 3 items: the first two run together, the
        // third starts when they end and runs alone at one instruction per cycle.
        let config = DeviceConfig {
            scheduling: Scheduling::Fifo,
            ..compute_bound(1, 1, 2)
        };
        let mut ccm = Ccm::new(&config);
        let ended = run(&mut ccm, knn(3, 64), 3);
        let first = cycles(&config, 51.0);
        assert_eq!(ended[0], (0, 0, first));
        assert_eq!(ended[1], (1, 0, first));
        assert_eq!(ended[2], (2, 0, first.plus(cycles(&config, 51.0))));
    }

    /// A PageRank launch over two vertices with 1 and 25 in-arcs, one vertex per item: two
    /// items of very different length (1 and 4 chunks of 8 in-arcs).
    fn uneven_items() -> (Kernel, DeviceDram) {
        use firmware::hal::DeviceMemory;
        use firmware::kernels::pagerank::{PageRankKernel, PageRankParameters};
        let memory = DeviceDram::new(MEMORY);
        let parameters = PageRankParameters {
            vertices: 2,
            arcs: 26,
            offsets: 0x200,
            sources: 0x400,
        };
        memory
            .write(shared_abi::DeviceAddress(0x100), &parameters.to_bytes())
            .unwrap();
        let words =
            |values: &[u32]| -> Vec<u8> { values.iter().flat_map(|w| w.to_le_bytes()).collect() };
        memory
            .write(shared_abi::DeviceAddress(0x200), &words(&[0, 1, 26]))
            .unwrap();
        let mut sources = [0_u32; 26];
        sources[0] = 1;
        memory
            .write(shared_abi::DeviceAddress(0x400), &words(&sources))
            .unwrap();
        let command = CommandDescriptor {
            kernel: KernelId::PageRankGather as u32,
            result_address: 0x1000,
            result_length: 8,
            args: [0x100, 0x800, 1, 0],
            ..CommandDescriptor::default()
        };
        let kernel = Kernel::PageRank(PageRankKernel::decode(&command, &memory).unwrap());
        (kernel, memory)
    }

    #[test]
    fn a_long_item_speeds_up_when_the_short_one_beside_it_ends() {
        // One sub-core that issues one instruction per cycle in all, shared by a short item
        // (s instructions) and a long one (l): both get half until the short one ends at 2s,
        // then the long one has the whole sub-core and ends at s + l. A static half share
        // would end it at 2l.
        let config = DeviceConfig {
            ccm_issue_width: 1,
            ccm_scalar_units: 1024,
            ccm_scalar_memory_units: 1024,
            ccm_vector_units: 1024,
            ccm_vector_memory_units: 1024,
            ..compute_bound(1, 1, 2)
        };
        let (kernel, mut memory) = uneven_items();
        let short = kernel.item(0, &memory).unwrap().cost.instructions() as f64;
        let long = kernel.item(1, &memory).unwrap().cost.instructions() as f64;
        assert!(long > short * 1.5, "{short} {long}");
        let mut ccm = Ccm::new(&config);
        let ended = run_with(&mut ccm, kernel, 2, &mut memory);
        assert_eq!(
            ended,
            vec![
                (0, 0, cycles(&config, 2.0 * short)),
                (1, 0, cycles(&config, short + long))
            ]
        );
    }

    #[test]
    fn round_robin_gives_item_i_to_unit_i_mod_units() {
        let config = compute_bound(4, 1, 1);
        let mut ccm = Ccm::new(&config);
        let ended = run(&mut ccm, knn(8, 64), 8);
        let mut by_item: Vec<(u32, u32)> = ended.iter().map(|&(i, u, _)| (i, u)).collect();
        by_item.sort_unstable();
        assert_eq!(
            by_item,
            (0..8).map(|i| (i, i % 4)).collect::<Vec<_>>(),
            "{ended:?}"
        );
    }

    #[test]
    fn fifo_deals_the_first_items_to_the_units_in_turn() {
        let config = DeviceConfig {
            scheduling: Scheduling::Fifo,
            ..compute_bound(4, 1, 2)
        };
        let mut ccm = Ccm::new(&config);
        let ended = run(&mut ccm, knn(4, 64), 4);
        let mut by_item: Vec<(u32, u32)> = ended.iter().map(|&(i, u, _)| (i, u)).collect();
        by_item.sort_unstable();
        assert_eq!(by_item, vec![(0, 0), (1, 1), (2, 2), (3, 3)]);
    }

    #[test]
    fn items_spread_over_the_sub_cores_of_their_unit() {
        // 4 items on one unit of 4 sub-cores: one per sub-core, so each runs alone.
        let config = compute_bound(1, 4, 16);
        let mut ccm = Ccm::new(&config);
        let ended = run(&mut ccm, knn(4, 64), 4);
        let end = cycles(&config, 51.0);
        assert!(ended.iter().all(|&(_, _, at)| at == end), "{ended:?}");
    }

    #[test]
    fn a_unit_of_more_than_64_sub_cores_deals_an_item_to_each() {
        // The open-sub-core mask covers units of up to 64 sub-cores, a scan the others: 140
        // equal items on 70 sub-cores of one µthread each run 70 at a time, each alone.
        for sub_cores in [60, 70] {
            let config = compute_bound(1, sub_cores, 1);
            let mut ccm = Ccm::new(&config);
            let ended = run(&mut ccm, knn(2 * sub_cores, 64), 2 * sub_cores);
            let alone = cycles(&config, 51.0);
            let ends: Vec<Ticks> = ended.iter().map(|&(_, _, at)| at).collect();
            assert_eq!(ends.len(), 2 * sub_cores as usize);
            assert!(ends.iter().take(sub_cores as usize).all(|&at| at == alone));
            assert!(ends
                .iter()
                .skip(sub_cores as usize)
                .all(|&at| at == alone.plus(alone)));
        }
    }

    #[test]
    fn a_sub_core_of_more_than_64_uthreads_runs_them_all_at_once() {
        // The free-slot mask covers a sub-core's first 64 µthreads, a scan the others: 70
        // equal items share the sub-core and end together, before any of the next 70.
        let config = compute_bound(1, 1, 70);
        let mut ccm = Ccm::new(&config);
        let ended = run(&mut ccm, knn(140, 64), 140);
        let mut items: Vec<u32> = ended.iter().map(|&(item, _, _)| item).collect();
        items.sort_unstable();
        assert_eq!(items, (0..140).collect::<Vec<u32>>());
        let first: Vec<Ticks> = ended
            .iter()
            .filter(|&&(item, _, _)| item < 70)
            .map(|&(_, _, at)| at)
            .collect();
        assert!(first.iter().all(|&at| at == first[0]), "{ended:?}");
        assert!(ended
            .iter()
            .filter(|&&(item, _, _)| item >= 70)
            .all(|&(_, _, at)| at > first[0]));
    }

    #[test]
    fn busy_time_is_the_union_of_running_items_and_each_item_reports_once() {
        let config = config(1, 1, 2, Scheduling::Fifo);
        let mut ccm = Ccm::new(&config);
        let ended = run(&mut ccm, knn(2, 64), 2);
        let end = ended.iter().map(|&(_, _, at)| at).max().unwrap();
        assert_eq!(ccm.busy(end.plus(Ticks(1000))), end);
        assert!(!ccm.is_running());
        let mut reported: Vec<u32> = ccm.completions.iter().map(|c| c.item).collect();
        reported.sort_unstable();
        assert_eq!(reported, vec![0, 1]);
        assert!(ccm
            .completions
            .iter()
            .all(|c| c.tag == 1 && c.outcome.is_ok()));
    }

    #[test]
    fn interleaved_items_end_at_the_same_times_with_the_same_results() {
        // 40 KNN rows of dim 64 on 2 x 1 x 8 µthreads: batches of up to 16 running items.
        let rows = 40;
        let setup = || {
            let memory = DeviceDram::new(MEMORY);
            use firmware::hal::DeviceMemory;
            let data: Vec<u8> = (0..rows * 64 + 64)
                .flat_map(|i| ((i % 97) as f32 * 0.25).to_le_bytes())
                .collect();
            memory
                .write(shared_abi::DeviceAddress(0x1000), &data[..64 * 4])
                .unwrap();
            memory
                .write(shared_abi::DeviceAddress(0x20_0000), &data[64 * 4..])
                .unwrap();
            memory
        };
        let mut plain_memory = setup();
        let mut plain = Ccm::new(&config(2, 1, 8, Scheduling::Rr));
        let expected = run_with(&mut plain, knn(rows, 64), rows, &mut plain_memory);
        let mut interleaved_memory = setup();
        let mut interleaved = Ccm::new(&DeviceConfig {
            interleave_seed: Some(9),
            ..config(2, 1, 8, Scheduling::Rr)
        });
        let ended = run_with(
            &mut interleaved,
            knn(rows, 64),
            rows,
            &mut interleaved_memory,
        );
        assert_eq!(ended, expected, "interleaving moved an end");
        let results = |memory: &DeviceDram| {
            firmware::hal::DeviceMemory::read_value::<[u32; 40]>(
                memory,
                shared_abi::DeviceAddress(0x30_0000),
            )
            .unwrap()
        };
        assert_eq!(results(&interleaved_memory), results(&plain_memory));
        assert_ne!(results(&plain_memory), [0; 40]);
        let counts = interleaved.interleaved;
        assert_eq!(counts.items, u64::from(rows), "each item's code ran once");
        assert!(counts.batches >= 3 && counts.switches > 100, "{counts:?}");
        assert_eq!(plain.interleaved, InterleaveCounts::default());
        let mut reported: Vec<u32> = interleaved.completions.iter().map(|c| c.item).collect();
        reported.sort_unstable();
        assert_eq!(reported, (0..rows).collect::<Vec<_>>());
    }

    #[test]
    fn a_later_stage_hands_out_its_own_items_only() {
        let memory = DeviceDram::new(MEMORY);
        for scheduling in [Scheduling::Rr, Scheduling::Fifo] {
            let mut ccm = Ccm::new(&config(2, 2, 2, scheduling));
            let mut queue = EventQueue::default();
            ccm.dispatch(Ticks::ZERO, knn(12, 64), 1, 8..11, &memory);
            let memory = DeviceDram::new(MEMORY);
            let mut items = Vec::new();
            loop {
                for at in ccm.take_wakes() {
                    queue.push(at, ());
                }
                let Some((at, ())) = queue.pop() else {
                    break;
                };
                items.extend(ccm.on_wake(at, &memory).iter().map(|e| e.item));
            }
            items.sort_unstable();
            assert_eq!(items, vec![8, 9, 10], "{scheduling:?}");
        }
    }
}
