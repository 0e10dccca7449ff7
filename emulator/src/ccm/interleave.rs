//! Interleaved execution of work items: races the emulator can show
//! ([`crate::DeviceConfig::interleave_seed`], `axle run --interleave SEED`).
//!
//! By default the CCM runs an item's kernel code in one piece when the item ends, one item
//! after another, so no race between two items can ever show: a kernel that updates a shared
//! word with a plain read, compute and write gives the right answer there and loses updates
//! on a real device with hundreds of µthreads. With interleaving on, the kernel code of the
//! items the CCM has running at once runs with their device-memory accesses interleaved, one
//! 8-byte word at a time, in an order drawn from the seed:
//!
//! - Each item of a batch runs [`firmware::run_item`] on its own OS thread, over an
//!   [`Interleaved`] view of device memory. Before every access of one word (a read or write
//!   of several words is split at the 8-byte words of the emulator's memory, each its own
//!   access; an atomic is one access), the thread waits for a baton. The thread holding the
//!   baton draws the next holder, uniformly among the batch's unfinished items, from a
//!   seeded generator (SplitMix64), and hands it over (`std::thread::park`/`unpark`). So
//!   exactly one item runs between two accesses, and the order of all accesses depends on
//!   the seed alone, never on the OS scheduler: the same seed gives the same interleaving,
//!   the same memory contents and the same report, run after run. A read-modify-write split
//!   by another item's write of the same word happens whenever the draw falls that way.
//! - A batch is the items the CCM has running when the first of them ends (its µthreads
//!   hold them at once), at most [`MAX_INTERLEAVED_ITEMS`] of them (the µthreads of the
//!   paper's CCM, 16 x 4 x 16); items beyond the limit run in a later batch. An item's
//!   writes are all in memory before its completion is reported (the HAL's ordering), and
//!   items of a later stage run only after the earlier stage's batches.
//! - Timing is untouched: the virtual-time figures come from the cost model as by default
//!   (interleaving is about correctness, not time), so a correct kernel gives a report
//!   identical to the default run's except for the configuration key.
//! - Nothing leaks on error: a thread that cannot be spawned leaves the batch before it
//!   starts, and its item runs afterwards on the calling thread, not interleaved (counted in
//!   [`Interleaved::fallbacks`]); a panicking item (a kernel bug) hands the baton on as it
//!   unwinds, and the panic is re-raised once every other thread of the batch has finished.
//!
//! The mode is slow (two thread switches per word access): it is a test mode, off by default.

use firmware::hal::{DeviceAtomics, DeviceMemory, MemoryFault};
use shared_abi::DeviceAddress;
use std::cell::Cell;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread::Thread;

/// Most items run interleaved at once (one OS thread each): the µthreads of the paper's CCM
/// (16 units x 4 sub-cores x 16 µthreads). More items run in later batches.
pub const MAX_INTERLEAVED_ITEMS: usize = 1024;

/// Stack of each item's thread: far above the firmware's [`firmware::hal::UTHREAD_STACK_BYTES`],
/// for a debug build and the view's own frames.
const ITEM_STACK_BYTES: usize = 512 * 1024;

/// No thread holds the baton.
const NOBODY: usize = usize::MAX;

thread_local! {
    /// The view and batch index the current thread runs an item for (`(0, NOBODY)`: none).
    static WORKER: Cell<(usize, usize)> = const { Cell::new((0, NOBODY)) };
}

/// The scheduler's state, behind the view's lock.
#[derive(Debug)]
struct Turn {
    /// The batch index of the thread that may run.
    holder: usize,
    /// Batch indices of the unfinished items, in batch order (removal keeps the order).
    live: Vec<usize>,
    /// The threads of the batch, by index (to unpark the next holder).
    threads: Vec<Option<Thread>>,
    /// SplitMix64 state.
    rng: u64,
    /// Word accesses made through the view.
    steps: u64,
    /// Accesses after which another item held the baton.
    switches: u64,
    /// Items that ran on the calling thread because their thread could not be spawned.
    fallbacks: u64,
    /// Whether a batch is running (a second `run` at once is refused).
    running: bool,
}

impl Turn {
    /// SplitMix64 (Steele, Lea and Flood, 2014): the next 64 bits of the stream.
    fn next(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Draws the next holder among the live items ([`NOBODY`] when none is left).
    fn pick(&mut self) -> usize {
        if self.live.is_empty() {
            return NOBODY;
        }
        let draw = self.next() % self.live.len() as u64;
        self.live.get(draw as usize).copied().unwrap_or(NOBODY)
    }

    /// Makes `next` the holder and returns its thread, to unpark once the lock is released.
    fn hand_to(&mut self, next: usize) -> Option<Thread> {
        self.holder = next;
        self.threads.get(next).cloned().flatten()
    }
}

/// Device memory as the items of an interleaved batch see it: every word access waits for
/// the baton (see the module docs). Accesses from a thread that is not one of the view's
/// items (set-up before or checks after a batch) go straight to memory.
#[derive(Debug)]
pub struct Interleaved<'a, M> {
    memory: &'a M,
    turn: Mutex<Turn>,
}

/// Releases the batch slot of the current thread's item when it ends or unwinds.
struct Leave<'v, 'a, M> {
    view: &'v Interleaved<'a, M>,
    index: usize,
}

impl<M> Drop for Leave<'_, '_, M> {
    fn drop(&mut self) {
        WORKER.with(|worker| worker.set((0, NOBODY)));
        let next = {
            let mut turn = self.view.lock();
            if let Some(position) = turn.live.iter().position(|&i| i == self.index) {
                turn.live.remove(position);
            }
            if turn.holder == self.index {
                let next = turn.pick();
                turn.hand_to(next)
            } else {
                None
            }
        };
        if let Some(thread) = next {
            thread.unpark();
        }
    }
}

impl<M> Interleaved<'_, M> {
    fn lock(&self) -> MutexGuard<'_, Turn> {
        // A panic never happens while the lock is held (only kernel code panics, outside it).
        self.turn.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<'a, M: DeviceAtomics + Sync> Interleaved<'a, M> {
    /// A view of `memory` whose interleavings are drawn from `seed`.
    pub fn new(memory: &'a M, seed: u64) -> Interleaved<'a, M> {
        Interleaved {
            memory,
            turn: Mutex::new(Turn {
                holder: NOBODY,
                live: Vec::new(),
                threads: Vec::new(),
                rng: seed,
                steps: 0,
                switches: 0,
                fallbacks: 0,
                running: false,
            }),
        }
    }

    /// This view's identity, for the thread-local worker record.
    fn id(&self) -> usize {
        std::ptr::from_ref(&self.turn) as usize
    }

    /// The generator's state: where the next batch's draws continue.
    pub fn rng(&self) -> u64 {
        self.lock().rng
    }

    /// Word accesses made through the view so far.
    pub fn steps(&self) -> u64 {
        self.lock().steps
    }

    /// Accesses after which another item took the baton.
    pub fn switches(&self) -> u64 {
        self.lock().switches
    }

    /// Items that ran on the calling thread, not interleaved, because their thread could not
    /// be spawned.
    pub fn fallbacks(&self) -> u64 {
        self.lock().fallbacks
    }

    /// Waits until the current thread's item holds the baton.
    fn wait_for_baton(&self, index: usize) {
        loop {
            if self.lock().holder == index {
                return;
            }
            std::thread::park();
        }
    }

    /// One word access is about to be made: if the current thread runs an item of this view,
    /// the holder draws who makes the next access and waits for its own turn again.
    fn gate(&self) {
        let (view, index) = WORKER.with(Cell::get);
        if view != self.id() || index == NOBODY {
            return;
        }
        let next = {
            let mut turn = self.lock();
            turn.steps = turn.steps.saturating_add(1);
            let next = turn.pick();
            if next == index || next == NOBODY {
                return;
            }
            turn.switches = turn.switches.saturating_add(1);
            turn.hand_to(next)
        };
        if let Some(thread) = next {
            thread.unpark();
        }
        self.wait_for_baton(index);
    }

    /// Runs `body(item)` for every item of `items`, each on its own thread, their word
    /// accesses through this view interleaved (at most [`MAX_INTERLEAVED_ITEMS`] at once:
    /// more run in consecutive batches). Returns the results in the order of `items`.
    /// Re-raises a panic of `body` after every thread of its batch has finished.
    ///
    /// # Panics
    ///
    /// When called while a batch of this view runs (from one of its items).
    pub fn run<R, F>(&self, items: &[u32], body: F) -> Vec<R>
    where
        R: Send,
        F: Fn(u32) -> R + Sync,
    {
        {
            let mut turn = self.lock();
            assert!(!turn.running, "Interleaved::run called from inside a batch");
            turn.running = true;
        }
        let mut results = Vec::with_capacity(items.len());
        for batch in items.chunks(MAX_INTERLEAVED_ITEMS) {
            results.extend(self.run_batch(batch, &body));
        }
        self.lock().running = false;
        results
    }

    fn run_batch<R, F>(&self, items: &[u32], body: &F) -> Vec<R>
    where
        R: Send,
        F: Fn(u32) -> R + Sync,
    {
        {
            let mut turn = self.lock();
            turn.holder = NOBODY;
            turn.live = (0..items.len()).collect();
            turn.threads = vec![None; items.len()];
        }
        let id = self.id();
        let mut results: Vec<Option<R>> = Vec::with_capacity(items.len());
        let mut not_spawned = Vec::new();
        let mut panic = None;
        std::thread::scope(|scope| {
            let mut handles = Vec::with_capacity(items.len());
            for (index, &item) in items.iter().enumerate() {
                let spawned = std::thread::Builder::new()
                    .name(format!("item-{item}"))
                    .stack_size(ITEM_STACK_BYTES)
                    .spawn_scoped(scope, move || {
                        WORKER.with(|worker| worker.set((id, index)));
                        let leave = Leave { view: self, index };
                        self.wait_for_baton(index);
                        let result = body(item);
                        drop(leave);
                        result
                    });
                match spawned {
                    Ok(handle) => {
                        if let Some(slot) = self.lock().threads.get_mut(index) {
                            *slot = Some(handle.thread().clone());
                        }
                        handles.push(Some(handle));
                    }
                    Err(error) => {
                        log::warn!(
                            "interleave: no thread for item {item} ({error}); it runs after its batch, not interleaved"
                        );
                        let mut turn = self.lock();
                        turn.live.retain(|&i| i != index);
                        turn.fallbacks = turn.fallbacks.saturating_add(1);
                        not_spawned.push(index);
                        handles.push(None);
                    }
                }
            }
            // Every thread is waiting for its turn: hand out the first.
            let first = {
                let mut turn = self.lock();
                let first = turn.pick();
                turn.hand_to(first)
            };
            if let Some(thread) = first {
                thread.unpark();
            }
            for handle in handles {
                match handle.map(std::thread::ScopedJoinHandle::join) {
                    Some(Ok(result)) => results.push(Some(result)),
                    Some(Err(payload)) => {
                        panic.get_or_insert(payload);
                        results.push(None);
                    }
                    None => results.push(None),
                }
            }
        });
        if let Some(payload) = panic {
            self.lock().running = false;
            std::panic::resume_unwind(payload);
        }
        for index in not_spawned {
            if let (Some(slot), Some(&item)) = (results.get_mut(index), items.get(index)) {
                *slot = Some(body(item));
            }
        }
        // Every slot is filled: by its thread, or on this thread above.
        results.into_iter().flatten().collect()
    }

    /// The fault of an access of `length` bytes at `address`, if any byte is outside memory.
    fn outside(&self, address: DeviceAddress, length: usize) -> Option<MemoryFault> {
        let fault = MemoryFault {
            address,
            length: length as u64,
        };
        match address.0.checked_add(length as u64) {
            Some(end) if end <= self.memory.size() => None,
            _ => Some(fault),
        }
    }
}

/// The pieces of `[address, address + length)` that fall in one 8-byte word each: `(offset
/// into the access, length)`.
fn words(address: DeviceAddress, length: usize) -> impl Iterator<Item = (usize, usize)> {
    let mut offset = 0_usize;
    std::iter::from_fn(move || {
        if offset >= length {
            return None;
        }
        let at = address.0.wrapping_add(offset as u64);
        let in_word = (8 - (at % 8)) as usize;
        let take = in_word.min(length - offset);
        let piece = (offset, take);
        offset += take;
        Some(piece)
    })
}

impl<M: DeviceAtomics + Sync> DeviceMemory for Interleaved<'_, M> {
    fn size(&self) -> u64 {
        self.memory.size()
    }

    fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
        if let Some(fault) = self.outside(address, buffer.len()) {
            return Err(fault);
        }
        for (offset, length) in words(address, buffer.len()) {
            self.gate();
            let piece = buffer.get_mut(offset..offset + length).ok_or(MemoryFault {
                address,
                length: length as u64,
            })?;
            self.memory
                .read(DeviceAddress(address.0 + offset as u64), piece)?;
        }
        Ok(())
    }

    fn write(&self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
        if let Some(fault) = self.outside(address, data.len()) {
            return Err(fault);
        }
        for (offset, length) in words(address, data.len()) {
            self.gate();
            let piece = data.get(offset..offset + length).ok_or(MemoryFault {
                address,
                length: length as u64,
            })?;
            self.memory
                .write(DeviceAddress(address.0 + offset as u64), piece)?;
        }
        Ok(())
    }
}

impl<M: DeviceAtomics + Sync> DeviceAtomics for Interleaved<'_, M> {
    fn fetch_add_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
        self.gate();
        self.memory.fetch_add_u32(address, value)
    }
    fn fetch_min_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
        self.gate();
        self.memory.fetch_min_u32(address, value)
    }
    fn swap_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
        self.gate();
        self.memory.swap_u32(address, value)
    }
    fn compare_exchange_u32(
        &self,
        address: DeviceAddress,
        current: u32,
        new: u32,
    ) -> Result<u32, MemoryFault> {
        self.gate();
        self.memory.compare_exchange_u32(address, current, new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dram::DeviceDram;
    use firmware::conformance;
    use firmware::FirmwareError;

    /// Bins of the test histogram, one 32-bit word each from [`BINS_AT`].
    const BINS: u32 = 4;
    const BINS_AT: u64 = 0x100;
    /// Items of the histogram launch, and the values each one counts.
    const ITEMS: u32 = 8;
    const PER_ITEM: u32 = 32;

    fn bin(value: u32) -> DeviceAddress {
        DeviceAddress(BINS_AT + 4 * u64::from(value % BINS))
    }

    /// The broken twin: a histogram item that counts its values with a plain read, add and
    /// write of the shared bin (what a kernel without `DeviceAtomics` would do).
    fn histogram_plain<M: DeviceAtomics>(memory: &M, item: u32) -> Result<(), FirmwareError> {
        for k in 0..PER_ITEM {
            let address = bin(item * 7 + k);
            let count: u32 = memory.read_value(address)?;
            memory.write(address, &(count + 1).to_le_bytes())?;
        }
        Ok(())
    }

    /// The same kernel with `fetch_add_u32`.
    fn histogram_atomic<M: DeviceAtomics>(memory: &M, item: u32) -> Result<(), FirmwareError> {
        for k in 0..PER_ITEM {
            memory.fetch_add_u32(bin(item * 7 + k), 1)?;
        }
        Ok(())
    }

    #[derive(Clone, Copy)]
    enum Twin {
        Plain,
        Atomic,
    }

    /// The bins after the histogram launch (every item at once under `seed`, or one after
    /// the other with `None`), and the view's switches.
    fn histogram(seed: Option<u64>, kernel: Twin) -> (Vec<u32>, u64) {
        let dram = DeviceDram::new(4096);
        let view = Interleaved::new(&dram, seed.unwrap_or(0));
        let kernel = |view: &Interleaved<'_, DeviceDram>, item| match kernel {
            Twin::Plain => histogram_plain(view, item),
            Twin::Atomic => histogram_atomic(view, item),
        };
        let items: Vec<u32> = (0..ITEMS).collect();
        let outcomes = match seed {
            Some(_) => view.run(&items, |item| kernel(&view, item)),
            None => items.iter().map(|&item| kernel(&view, item)).collect(),
        };
        assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
        let bins = (0..BINS)
            .map(|b| dram.read_value::<u32>(bin(b)).unwrap())
            .collect();
        (bins, view.switches())
    }

    /// Each bin's right count: every item counts `PER_ITEM` consecutive values.
    fn right_bins() -> Vec<u32> {
        let mut bins = vec![0; BINS as usize];
        for item in 0..ITEMS {
            for k in 0..PER_ITEM {
                bins[((item * 7 + k) % BINS) as usize] += 1;
            }
        }
        bins
    }

    #[test]
    fn a_plain_read_modify_write_loses_updates_under_interleaving_and_fetch_add_does_not() {
        let right = right_bins();
        // Run one after the other (the default CCM), the broken twin is right: no race shows.
        assert_eq!(histogram(None, Twin::Plain).0, right);
        // Interleaved, it loses updates: seed 1 is wrong (shown), and so is every seed tried.
        let (bins, switches) = histogram(Some(1), Twin::Plain);
        assert!(switches > 0);
        assert_ne!(bins, right, "seed 1: the broken twin must lose an update");
        assert!(bins.iter().sum::<u32>() < ITEMS * PER_ITEM, "{bins:?}");
        for seed in 0..32 {
            assert_ne!(histogram(Some(seed), Twin::Plain).0, right, "seed {seed}");
            // The kernel with the HAL's atomic is right under every seed.
            assert_eq!(histogram(Some(seed), Twin::Atomic).0, right, "seed {seed}");
        }
    }

    /// The order of every word access of a launch of items that each log their index into
    /// a shared sequence (with an atomic counter), under `seed`.
    fn access_order(seed: u64) -> Vec<u32> {
        let dram = DeviceDram::new(1 << 16);
        let view = Interleaved::new(&dram, seed);
        let items: Vec<u32> = (0..6).collect();
        view.run(&items, |item| {
            for _ in 0..20 {
                let at = view.fetch_add_u32(DeviceAddress(0), 1).unwrap();
                view.write(DeviceAddress(8 + 4 * u64::from(at)), &item.to_le_bytes())
                    .unwrap();
            }
        });
        (0..240)
            .map(|k| dram.read_value::<u32>(DeviceAddress(8 + 4 * k)).unwrap())
            .collect()
    }

    #[test]
    fn the_interleaving_depends_on_the_seed_alone() {
        let first = access_order(7);
        for _ in 0..5 {
            assert_eq!(access_order(7), first, "seed 7 gave two interleavings");
        }
        assert_ne!(
            access_order(8),
            first,
            "seeds 7 and 8 gave the same interleaving"
        );
        // A real interleaving: not one item after the other.
        assert!(
            first.windows(2).filter(|w| w[0] != w[1]).count() > 20,
            "{first:?}"
        );
    }

    #[test]
    fn an_access_of_several_words_is_one_step_per_word_and_a_fault_is_no_step() {
        let dram = DeviceDram::new(4096);
        let view = Interleaved::new(&dram, 3);
        view.run(&[0, 1], |item| {
            let mut buffer = [0_u8; 20];
            // 20 bytes at 4: words [4, 8), [8, 16), [16, 24): three steps.
            view.read(DeviceAddress(4), &mut buffer).unwrap();
            if item == 0 {
                assert!(view.write(DeviceAddress(4090), &[0; 8]).is_err());
            }
        });
        assert_eq!(view.steps(), 6);
        // Outside an item's thread, the view passes accesses straight through.
        view.write(DeviceAddress(0), &[1; 64]).unwrap();
        assert_eq!(view.steps(), 6);
    }

    #[test]
    fn a_panicking_item_hands_the_baton_on_and_its_panic_is_raised_after_the_batch() {
        let dram = DeviceDram::new(4096);
        let view = Interleaved::new(&dram, 5);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            view.run(&[0, 1, 2, 3], |item| {
                for k in 0..50 {
                    view.fetch_add_u32(DeviceAddress(0), 1).unwrap();
                    if item == 2 && k == 10 {
                        panic!("item 2 fails");
                    }
                }
            })
        }));
        assert!(result.is_err());
        // The other three items ran to their end: nothing hung or leaked.
        assert_eq!(
            dram.read_value::<u32>(DeviceAddress(0)).unwrap(),
            3 * 50 + 11
        );
        // And the view runs another batch.
        view.run(&[0], |_| view.fetch_add_u32(DeviceAddress(0), 1).unwrap());
        assert_eq!(
            dram.read_value::<u32>(DeviceAddress(0)).unwrap(),
            3 * 50 + 12
        );
    }

    #[test]
    fn the_contended_atomics_check_passes_with_interleaving_as_its_concurrency() {
        let dram = DeviceDram::new(1 << 16);
        let view = Interleaved::new(&dram, 11);
        let window = DeviceAddress(4096);
        assert_eq!(
            conformance::contended_atomics(&view, window, 4, |workers, worker| {
                let workers: Vec<u32> = (0..workers).collect();
                view.run(&workers, worker);
            }),
            Ok(())
        );
        assert!(view.switches() > 1000, "{}", view.switches());
    }

    #[test]
    fn more_items_than_the_limit_run_in_consecutive_batches() {
        let dram = DeviceDram::new(1 << 16);
        let view = Interleaved::new(&dram, 2);
        let items: Vec<u32> = (0..MAX_INTERLEAVED_ITEMS as u32 + 3).collect();
        let results = view.run(&items, |item| {
            view.fetch_add_u32(DeviceAddress(0), 1).unwrap();
            item
        });
        assert_eq!(results, items);
        assert_eq!(
            dram.read_value::<u32>(DeviceAddress(0)).unwrap(),
            items.len() as u32
        );
    }
}
