//! The page-frame allocator: hands out 4 KiB frames of [`crate::phys::PhysicalMemory`] so that
//! every DMA region is genuinely scattered in physical memory.
//!
//! A kernel's buddy allocator gives a driver frames that are contiguous only by luck; a DMA
//! region built from them must be described to the device by a scatter-gather list. To make
//! sure the whole stack (the list, the shadow descriptors, the firmware's translation) is
//! exercised on every run, this allocator scatters on purpose, deterministically:
//!
//! - Physical memory is cut into *run slots* of [`MAX_RUN_FRAMES`] frames. A run (a piece of a
//!   region that is physically contiguous) never leaves its run slot, so no run is longer than
//!   16 frames.
//! - Run slots are visited in a fixed permutation (`slot k -> k * step mod slots`, with `step`
//!   coprime to the slot count and about 5/8 of it), so consecutive runs come from distant
//!   parts of memory.
//! - Run lengths follow a fixed cycle ([`RUN_LENGTH_CYCLE`]), so regions have entries of mixed
//!   sizes, and even a 3-frame region has two runs.
//! - A run never starts at the frame right after the previous run of the same region ends:
//!   consecutive runs are never physically adjacent, whatever was freed before.
//! - Frame 0 is reserved: physical address 0 is never handed out (a zero address in a
//!   descriptor is then always a bug, never a valid buffer).
//!
//! Same sequence of calls, same frames: runs are reproducible.

use shared_abi::HostPhysAddr;

/// Bytes in one frame.
pub const FRAME_SIZE: u64 = 4096;
/// Most frames in one physically contiguous run.
pub const MAX_RUN_FRAMES: usize = 16;
/// The length limits of successive runs (each at most [`MAX_RUN_FRAMES`]).
pub const RUN_LENGTH_CYCLE: [usize; 8] = [1, 16, 5, 12, 3, 16, 7, 10];

/// A frame request or release that the allocator refused; nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A request for zero bytes.
    #[error("a frame request must be for at least one byte")]
    ZeroLength,
    /// Not enough free frames (or free frames only where they would join the previous run).
    #[error("out of frames: {requested} requested, {available} free")]
    OutOfFrames {
        /// Frames asked for.
        requested: u64,
        /// Frames free.
        available: u64,
    },
    /// A released address is not the start of a frame.
    #[error("host physical address {:#x} is not frame-aligned", .address.0)]
    Misaligned {
        /// The address.
        address: HostPhysAddr,
    },
    /// A released address lies outside physical memory.
    #[error("host physical address {:#x} is outside physical memory", .address.0)]
    OutOfRange {
        /// The address.
        address: HostPhysAddr,
    },
    /// A released frame is free (double free), reserved, or listed twice.
    #[error("frame at host physical address {:#x} is not allocated", .address.0)]
    NotAllocated {
        /// The address.
        address: HostPhysAddr,
    },
}

/// Hands out and takes back 4 KiB frames.
///
/// # Invariants
///
/// - `in_use.len()` is the number of whole frames of physical memory; `in_use[0]` is always
///   `true` (frame 0 is reserved);
/// - `free_frames` is the number of `false` entries of `in_use`;
/// - `slot_order` is a permutation of `0..slot_count`, and `cursor < slot_order.len()` unless
///   there are no slots.
#[derive(Debug)]
pub struct FrameAllocator {
    in_use: Vec<bool>,
    free_frames: u64,
    slot_order: Vec<usize>,
    cursor: usize,
    runs_handed_out: usize,
}

fn greatest_common_divisor(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        let r = a % b;
        a = b;
        b = r;
    }
    a
}

/// The step of the run-slot permutation: coprime to `slots`, the first such at or above
/// `5/8 * slots` and neither 1 nor `slots - 1` when such a step exists (so consecutive visits
/// are never neighbouring slots); 1 otherwise (fewer than 5 slots, or 6).
fn permutation_step(slots: usize) -> usize {
    let start = (slots.saturating_mul(5) / 8).max(2);
    (start..slots.saturating_sub(1))
        .chain(2..start)
        .find(|&step| step < slots.saturating_sub(1) && greatest_common_divisor(step, slots) == 1)
        .unwrap_or(1)
}

impl FrameAllocator {
    /// An allocator over a physical memory of `memory_bytes` bytes (a partial last frame is
    /// never used).
    pub fn new(memory_bytes: u64) -> FrameAllocator {
        let frames = usize::try_from(memory_bytes / FRAME_SIZE).unwrap_or(usize::MAX);
        // One flag per 4 KiB of a memory the caller bounded: every caller has allocated (or
        // mapped) `memory_bytes` already, except `sgl::entries_for_first_region`, whose
        // callers check `memory_bytes` against `limits` first (1/4096 of it is allocated here).
        let mut in_use = vec![false; frames];
        if let Some(reserved) = in_use.first_mut() {
            *reserved = true;
        }
        let free_frames = frames.saturating_sub(1) as u64;
        let slots = frames.div_ceil(MAX_RUN_FRAMES);
        let step = permutation_step(slots);
        let slot_order = (0..slots).map(|k| k.saturating_mul(step) % slots).collect();
        FrameAllocator {
            in_use,
            free_frames,
            slot_order,
            cursor: 0,
            runs_handed_out: 0,
        }
    }

    /// Frames that can still be handed out.
    pub fn free_frames(&self) -> u64 {
        self.free_frames
    }

    /// Frames for a region of `bytes` bytes (rounded up to whole frames), in region order:
    /// frame `i` backs region offsets `[i * 4096, (i + 1) * 4096)`.
    pub fn allocate(&mut self, bytes: u64) -> Result<Vec<HostPhysAddr>, FrameError> {
        if bytes == 0 {
            return Err(FrameError::ZeroLength);
        }
        let requested = bytes.div_ceil(FRAME_SIZE);
        let out_of_frames = FrameError::OutOfFrames {
            requested,
            available: self.free_frames,
        };
        if requested > self.free_frames {
            return Err(out_of_frames);
        }
        // requested <= free_frames <= in_use.len(), a usize.
        let needed = usize::try_from(requested).map_err(|_| out_of_frames)?;
        let slots = self.slot_order.len();
        let mut frames: Vec<usize> = Vec::with_capacity(needed);
        let mut fruitless_visits = 0;
        while frames.len() < needed {
            if fruitless_visits >= slots {
                // Free frames remain only right after the previous run: give everything back.
                for &frame in &frames {
                    self.set_in_use(frame, false);
                }
                return Err(out_of_frames);
            }
            let slot = self.slot_order.get(self.cursor).copied().unwrap_or(0);
            self.cursor = (self.cursor + 1) % slots;
            let cycle = RUN_LENGTH_CYCLE
                .get(self.runs_handed_out % RUN_LENGTH_CYCLE.len())
                .copied()
                .unwrap_or(MAX_RUN_FRAMES);
            let limit = cycle.min(needed - frames.len());
            if self.take_run(slot, limit, &mut frames) {
                fruitless_visits = 0;
                self.runs_handed_out = self.runs_handed_out.wrapping_add(1);
            } else {
                fruitless_visits += 1;
            }
        }
        log::debug!(
            "frames: {needed} frames in {} bytes handed out, {} free",
            bytes,
            self.free_frames
        );
        Ok(frames
            .into_iter()
            .map(|frame| HostPhysAddr(frame as u64 * FRAME_SIZE))
            .collect())
    }

    /// Takes one run of at most `limit` free frames from run slot `slot`, never starting right
    /// after the last frame of `frames`; appends it to `frames`. Whether it took any.
    fn take_run(&mut self, slot: usize, limit: usize, frames: &mut Vec<usize>) -> bool {
        let slot_start = slot * MAX_RUN_FRAMES;
        let slot_end = (slot_start + MAX_RUN_FRAMES).min(self.in_use.len());
        let forbidden_start = frames.last().map(|&last| last + 1);
        let first = (slot_start..slot_end)
            .find(|&frame| !self.is_in_use(frame) && Some(frame) != forbidden_start);
        let Some(first) = first else {
            return false;
        };
        let mut frame = first;
        while frame < slot_end && frame - first < limit && !self.is_in_use(frame) {
            self.set_in_use(frame, true);
            frames.push(frame);
            frame += 1;
        }
        true
    }

    fn is_in_use(&self, frame: usize) -> bool {
        self.in_use.get(frame).copied().unwrap_or(true)
    }

    fn set_in_use(&mut self, frame: usize, in_use: bool) {
        if let Some(entry) = self.in_use.get_mut(frame) {
            if *entry != in_use {
                *entry = in_use;
                if in_use {
                    self.free_frames -= 1;
                } else {
                    self.free_frames += 1;
                }
            }
        }
    }

    /// Takes back the frames at `addresses`. Checks every address first (frame-aligned, inside
    /// memory, allocated, not listed twice) and frees nothing if any is wrong.
    pub fn free(&mut self, addresses: &[HostPhysAddr]) -> Result<(), FrameError> {
        let mut frames = Vec::with_capacity(addresses.len());
        for &address in addresses {
            if address.0 % FRAME_SIZE != 0 {
                return Err(FrameError::Misaligned { address });
            }
            let frame = usize::try_from(address.0 / FRAME_SIZE)
                .ok()
                .filter(|&frame| frame < self.in_use.len())
                .ok_or(FrameError::OutOfRange { address })?;
            if frame == 0 || !self.is_in_use(frame) {
                return Err(FrameError::NotAllocated { address });
            }
            frames.push(frame);
        }
        frames.sort_unstable();
        if let Some(pair) = frames.windows(2).find(|pair| pair.first() == pair.get(1)) {
            let frame = pair.first().copied().unwrap_or(0);
            return Err(FrameError::NotAllocated {
                address: HostPhysAddr(frame as u64 * FRAME_SIZE),
            });
        }
        for frame in frames {
            self.set_in_use(frame, false);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_numbers(addresses: &[HostPhysAddr]) -> Vec<u64> {
        addresses.iter().map(|a| a.0 / FRAME_SIZE).collect()
    }

    /// Lengths of the physically contiguous runs of a region, in region order.
    fn runs(addresses: &[HostPhysAddr]) -> Vec<usize> {
        let mut runs = Vec::new();
        let mut previous: Option<u64> = None;
        for frame in frame_numbers(addresses) {
            match (previous, runs.last_mut()) {
                (Some(p), Some(run)) if p + 1 == frame => *run += 1,
                _ => runs.push(1),
            }
            previous = Some(frame);
        }
        runs
    }

    #[test]
    fn frame_zero_is_never_handed_out() {
        let mut allocator = FrameAllocator::new(64 * FRAME_SIZE);
        assert_eq!(allocator.free_frames(), 63);
        let frames = allocator.allocate(63 * FRAME_SIZE).unwrap();
        assert!(frames.iter().all(|f| f.0 != 0));
        assert_eq!(allocator.free_frames(), 0);
    }

    #[test]
    fn bytes_round_up_to_whole_frames() {
        let mut allocator = FrameAllocator::new(64 * FRAME_SIZE);
        assert_eq!(allocator.allocate(1).unwrap().len(), 1);
        assert_eq!(allocator.allocate(FRAME_SIZE + 1).unwrap().len(), 2);
        assert_eq!(allocator.free_frames(), 60);
    }

    #[test]
    fn zero_byte_request_is_refused() {
        let mut allocator = FrameAllocator::new(64 * FRAME_SIZE);
        assert_eq!(allocator.allocate(0), Err(FrameError::ZeroLength));
    }

    #[test]
    fn even_a_three_frame_region_is_not_contiguous() {
        let mut allocator = FrameAllocator::new(64 * FRAME_SIZE);
        let frames = allocator.allocate(3 * FRAME_SIZE).unwrap();
        assert!(runs(&frames).len() >= 2, "{:?}", frame_numbers(&frames));
    }

    #[test]
    fn large_region_has_runs_of_at_most_sixteen_frames_never_adjacent() {
        let mut allocator = FrameAllocator::new(4096 * FRAME_SIZE);
        let frames = allocator.allocate(1000 * FRAME_SIZE).unwrap();
        assert_eq!(frames.len(), 1000);
        let runs = runs(&frames);
        // `runs` merges adjacent frames, so a run longer than 16 would show up here even if
        // it came from two runs of the allocator.
        assert!(runs.iter().all(|&run| run <= MAX_RUN_FRAMES), "{runs:?}");
        assert!(runs.len() >= 1000 / MAX_RUN_FRAMES);
        assert!(runs.iter().any(|&run| run < MAX_RUN_FRAMES));
    }

    #[test]
    fn frames_of_live_regions_never_overlap() {
        let mut allocator = FrameAllocator::new(256 * FRAME_SIZE);
        let a = allocator.allocate(40 * FRAME_SIZE).unwrap();
        let b = allocator.allocate(70 * FRAME_SIZE).unwrap();
        let mut all: Vec<u64> = frame_numbers(&a);
        all.extend(frame_numbers(&b));
        let count = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), count);
    }

    #[test]
    fn same_calls_give_same_frames() {
        let mut first = FrameAllocator::new(512 * FRAME_SIZE);
        let mut second = FrameAllocator::new(512 * FRAME_SIZE);
        for bytes in [3 * FRAME_SIZE, 100 * FRAME_SIZE, 7] {
            assert_eq!(
                first.allocate(bytes).unwrap(),
                second.allocate(bytes).unwrap()
            );
        }
    }

    #[test]
    fn request_beyond_free_frames_is_refused_and_changes_nothing() {
        let mut allocator = FrameAllocator::new(16 * FRAME_SIZE);
        assert_eq!(
            allocator.allocate(16 * FRAME_SIZE),
            Err(FrameError::OutOfFrames {
                requested: 16,
                available: 15
            })
        );
        assert_eq!(allocator.free_frames(), 15);
    }

    #[test]
    fn freed_frames_can_be_allocated_again() {
        let mut allocator = FrameAllocator::new(32 * FRAME_SIZE);
        let frames = allocator.allocate(20 * FRAME_SIZE).unwrap();
        assert_eq!(allocator.free_frames(), 11);
        allocator.free(&frames).unwrap();
        assert_eq!(allocator.free_frames(), 31);
        assert!(allocator.allocate(20 * FRAME_SIZE).is_ok());
    }

    #[test]
    fn double_free_is_refused() {
        let mut allocator = FrameAllocator::new(32 * FRAME_SIZE);
        let frames = allocator.allocate(2 * FRAME_SIZE).unwrap();
        allocator.free(&frames).unwrap();
        let address = frames[0];
        assert_eq!(
            allocator.free(&frames[..1]),
            Err(FrameError::NotAllocated { address })
        );
    }

    #[test]
    fn bad_release_frees_nothing() {
        let mut allocator = FrameAllocator::new(32 * FRAME_SIZE);
        let frames = allocator.allocate(2 * FRAME_SIZE).unwrap();
        let free_before = allocator.free_frames();
        let duplicated = [frames[0], frames[1], frames[0]];
        assert_eq!(
            allocator.free(&duplicated),
            Err(FrameError::NotAllocated { address: frames[0] })
        );
        let misaligned = [frames[0], HostPhysAddr(frames[1].0 + 8)];
        assert_eq!(
            allocator.free(&misaligned),
            Err(FrameError::Misaligned {
                address: misaligned[1]
            })
        );
        let outside = [frames[0], HostPhysAddr(32 * FRAME_SIZE)];
        assert_eq!(
            allocator.free(&outside),
            Err(FrameError::OutOfRange {
                address: outside[1]
            })
        );
        assert_eq!(
            allocator.free(&[HostPhysAddr(0)]),
            Err(FrameError::NotAllocated {
                address: HostPhysAddr(0)
            })
        );
        assert_eq!(allocator.free_frames(), free_before);
    }

    #[test]
    fn free_frames_only_adjacent_to_the_previous_run_are_refused_and_rolled_back() {
        // One run slot: frames 1..16. Leave only frames 5 and 6 free. A 2-frame request
        // starts a run at 5; cycle limit 1 for the first run, so it must continue at 6, right
        // after 5: forbidden. The request fails and frame 5 is given back.
        let mut allocator = FrameAllocator::new(16 * FRAME_SIZE);
        let all = allocator.allocate(15 * FRAME_SIZE).unwrap();
        let keep: Vec<HostPhysAddr> = all
            .iter()
            .copied()
            .filter(|a| a.0 != 5 * FRAME_SIZE && a.0 != 6 * FRAME_SIZE)
            .collect();
        let give_back: Vec<HostPhysAddr> =
            all.iter().copied().filter(|a| !keep.contains(a)).collect();
        allocator.free(&give_back).unwrap();
        assert_eq!(allocator.free_frames(), 2);
        allocator.runs_handed_out = 0;
        assert_eq!(
            allocator.allocate(2 * FRAME_SIZE),
            Err(FrameError::OutOfFrames {
                requested: 2,
                available: 2
            })
        );
        assert_eq!(allocator.free_frames(), 2);
    }

    #[test]
    fn permutation_visits_every_slot_once() {
        for slots in 1..200 {
            let step = permutation_step(slots);
            let mut seen: Vec<usize> = (0..slots).map(|k| k * step % slots).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..slots).collect::<Vec<_>>(), "slots {slots}");
            let far_step_exists =
                (2..slots.saturating_sub(1)).any(|s| greatest_common_divisor(s, slots) == 1);
            if far_step_exists {
                assert!(step != 1 && step != slots - 1, "slots {slots} step {step}");
            } else {
                assert_eq!(step, 1, "slots {slots}");
            }
        }
    }
}
