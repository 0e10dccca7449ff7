//! DMA regions: memory the device writes with DMA and the host reads.
//!
//! A [`DmaRegion`] is `len()` bytes built from 4 KiB frames of [`PhysicalMemory`]. The host sees
//! it contiguously, through *region offsets* `0..len()`; physically it is scattered (frame `i`
//! backs offsets `[i * 4096, (i + 1) * 4096)`, see [`crate::frames`]). The device sees it only
//! through the scatter-gather list ([`crate::sgl`]) shadowed into its memory
//! ([`crate::shadow`]).
//!
//! # What a kernel driver would do, and what stands for it here
//!
//! - **Pinned.** A kernel allocates DMA memory from frames that never move or swap
//!   (`dma_alloc_coherent`, or `pin_user_pages` for user buffers), because the device keeps
//!   using the physical addresses it was given. The multi-process form `mlock`s the
//!   shared-memory segment that stands for physical memory
//!   ([`cosim_link::shm::MappedWords::lock`]); in-process
//!   there is nothing to pin: the frames are indexes into a boxed slice that lives as long as
//!   the region's `Arc`.
//! - **Uncached.** A kernel maps DMA memory coherent or uncached (`dma_alloc_coherent`, or
//!   `pgprot_noncached` / `pgprot_writecombine` in `mmap`), so that the CPU never reads a stale
//!   cached copy of what the device wrote. Here the same guarantee comes from never forming a
//!   `&[u8]` into the region: every access is an atomic load or store of one 8-byte word of
//!   [`PhysicalMemory`], ordered explicitly (Acquire on tails, Release on heads) where the
//!   protocol needs it, and copied out before it is interpreted.
//! - **Owned by whom.** See the next section: the types say it.
//!
//! # Ownership, as types
//!
//! A region is in one of two states, and each state is its own type:
//!
//! 1. **CPU-owned: [`DmaRegion`].** Fresh from the allocator. The host may read and write any
//!    word ([`DmaRegion::write_bytes`], [`DmaRegion::store_u64`]), initialise the control block
//!    ([`crate::shadow::init_control_block`]) and give the frames back
//!    ([`DmaRegion::release`]). The device does not know the frames.
//! 2. **Handed to the device: [`MappedRegion`].** Made by consuming the [`DmaRegion`]:
//!    [`crate::shadow::program`] (which initialises the control block and returns the shadow
//!    stores that tell the device the scatter-gather list) or [`DmaRegion::hand_to_device`]
//!    (for a device that learns the frames another way, e.g. the bench's wire order). From
//!    then on the device may write the rings at any time. The host may only do what the ring
//!    protocol does: load words and read bytes ([`MappedRegion::load_u64`],
//!    [`MappedRegion::read_bytes`]) and publish its two heads
//!    ([`MappedRegion::store_head`], Release). It cannot write data, and it cannot release
//!    the frames: a [`MappedRegion`] has neither method.
//! 3. **Back to CPU-owned: [`MappedRegion::quiesce`].** Consumes the mapped handle and a
//!    [`Quiesced`] token, the caller's evidence that the device has stopped using the frames
//!    (its acknowledgement of the end of the work, or the end of the run). Only then can the
//!    region be written again or released.
//!
//! A [`MappedRegion`] that is dropped without being quiesced keeps its frames allocated: they
//! are never reused, which is the safe side (a run's ring lives until the run ends).
//!
//! Writing to a region after handing it over does not compile (it was moved):
//!
//! ```compile_fail
//! # use host_driver::dma::DmaRegion;
//! # fn f(region: DmaRegion) {
//! let mapped = region.hand_to_device();
//! region.write_bytes(0, &[0u8; 8]); // error[E0382]: use of moved value
//! # }
//! ```
//!
//! nor does writing through the mapped handle:
//!
//! ```compile_fail
//! # use host_driver::dma::MappedRegion;
//! # fn f(mapped: &MappedRegion) {
//! mapped.write_bytes(0, &[0u8; 8]); // error[E0599]: no method `write_bytes`
//! # }
//! ```
//!
//! nor releasing the frames while the device holds them:
//!
//! ```compile_fail
//! # use host_driver::dma::MappedRegion;
//! # use host_driver::frames::FrameAllocator;
//! # fn f(mapped: MappedRegion, allocator: &mut FrameAllocator) {
//! mapped.release(allocator); // error[E0599]: no method `release`
//! # }
//! ```
//!
//! The order that compiles:
//!
//! ```
//! # use host_driver::dma::{DmaRegion, Quiesced};
//! # use host_driver::frames::FrameAllocator;
//! # use host_driver::phys::PhysicalMemory;
//! # use host_driver::sync::{Arc, Ordering};
//! let memory = Arc::new(PhysicalMemory::new(16 * 4096).unwrap());
//! let mut allocator = FrameAllocator::new(memory.len());
//! let region = DmaRegion::allocate(memory, &mut allocator, 4096).unwrap();
//! region.store_u64(0, 7, Ordering::Relaxed).unwrap(); // CPU-owned: any store
//! let mapped = region.hand_to_device(); // the device may write from here on
//! assert_eq!(mapped.load_u64(0, Ordering::Acquire).unwrap(), 7);
//! // ... the device acknowledges the end of its work ...
//! let region = mapped.quiesce(Quiesced::device_acknowledged());
//! region.release(&mut allocator).unwrap();
//! ```
//!
//! Device models (tests, the loom models, the bench's peer) write a mapped region through a
//! [`DeviceView`] ([`MappedRegion::device_view`], [`DeviceView::from_frames`]): the device's
//! DMA, which may store anywhere in the region but cannot release it.
//!
//! # Resolved regions: the translation cached
//!
//! Every access through a region translates its offset through the frame list and checks it
//! twice (against the region, then against physical memory). A loop that touches the same
//! region millions of times (the live benchmark's producer and consumer) resolves the frames
//! once instead, as a DMA engine or an IOMMU caches its translations: [`MappedRegion::resolve`]
//! gives a [`ResolvedRegion`] (the host's three operations: load, read, publish a head) and
//! [`DeviceView::resolve`] a [`ResolvedDeviceView`]. An access inside one frame indexes that
//! frame's words directly; anything else (a range across frames, or one the region refuses)
//! takes the region's own checked path, so both give the same answers and the same errors.
//! Both are borrowed from the region, so neither outlives it. The host's ring code
//! (host-runtime) takes either through the [`HostRegion`] trait.
//!
//! What the types cannot see stays a rule: a [`Quiesced`] token must be made only after the
//! device's acknowledgement; a [`DeviceView`] is the device's, never the host's; and
//! [`DmaRegion::from_frames`] over frames the device holds would make a second CPU-owned
//! region (the constructor checks the frames, not who owns them).
//!
//! # Shared-memory segments (the multi-process form)
//!
//! Across processes, host physical memory is an anonymous shared-memory segment that the host
//! creates and hands to the emulator: [`cosim_link::shm::MappedWords`], the transport's one
//! mapping of shared memory. This module builds regions on [`PhysicalMemory`] either way and
//! has no `unsafe` of its own.

use crate::frames::{FrameAllocator, FrameError, FRAME_SIZE};
use cosim_link::phys::{PhysError, PhysicalMemory, WORD_SIZE};
use cosim_link::sync::{Arc, AtomicU64, Ordering};
use shared_abi::control::{METADATA_HEAD_OFFSET, PAYLOAD_HEAD_OFFSET};
use shared_abi::region::CONTROL_OFFSET;
use shared_abi::HostPhysAddr;

/// A region access or construction that was refused; nothing was read or written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DmaError {
    /// A range that is empty or not inside `0..region_length`.
    #[error("range of {length} bytes at region offset {offset:#x} is outside the region of {region_length} bytes")]
    OutOfRange {
        /// First byte.
        offset: u64,
        /// Bytes.
        length: u64,
        /// Bytes in the region.
        region_length: u64,
    },
    /// A range that [`DmaRegion::translate`] was asked for spans two frames.
    #[error("range of {length} bytes at region offset {offset:#x} crosses a frame boundary")]
    CrossesFrame {
        /// First byte.
        offset: u64,
        /// Bytes.
        length: u64,
    },
    /// An offset that is not 8-byte aligned.
    #[error("region offset {offset:#x} is not 8-byte aligned")]
    Misaligned {
        /// The offset.
        offset: u64,
    },
    /// A length that is not a whole number of 8-byte words (an access, or the region itself).
    #[error("length {length} is not a multiple of 8 bytes")]
    PartialWord {
        /// The length.
        length: u64,
    },
    /// A region of zero bytes.
    #[error("a DMA region must have at least one byte")]
    Empty,
    /// The frame list does not have exactly one frame per started 4 KiB of the region.
    #[error("{frames} frames for a region of {length} bytes")]
    FrameCount {
        /// Frames given.
        frames: usize,
        /// Region length.
        length: u64,
    },
    /// A frame that is not frame-aligned, lies outside physical memory, or is listed twice.
    #[error("frame at host physical address {:#x} is misaligned, outside memory or repeated", .address.0)]
    BadFrame {
        /// The frame's address.
        address: HostPhysAddr,
    },
    /// The frame allocator refused.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// Physical memory refused.
    #[error(transparent)]
    Phys(#[from] PhysError),
}

/// A DMA region: contiguous in region offsets, scattered in physical memory.
///
/// # Invariants
///
/// - `0 < length`, `length % 8 == 0`;
/// - `frames.len() == length.div_ceil(4096)`;
/// - every frame is 4096-aligned, distinct, and `frame + 4096 <= memory.len()`.
///
/// So every range inside `0..length` that lies within one frame translates to an access
/// inside physical memory.
pub struct DmaRegion {
    memory: Arc<PhysicalMemory>,
    frames: Vec<HostPhysAddr>,
    length: u64,
}

impl core::fmt::Debug for DmaRegion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DmaRegion")
            .field("length", &self.length)
            .field("frames", &self.frames.len())
            .finish_non_exhaustive()
    }
}

impl DmaRegion {
    /// A region of `length` bytes (a non-zero multiple of 8) from frames of `allocator`, which
    /// must be the allocator of `memory`.
    pub fn allocate(
        memory: Arc<PhysicalMemory>,
        allocator: &mut FrameAllocator,
        length: u64,
    ) -> Result<DmaRegion, DmaError> {
        check_region_length(length)?;
        let frames = allocator.allocate(length)?;
        match DmaRegion::from_frames(memory, frames.clone(), length) {
            Ok(region) => Ok(region),
            Err(error) => {
                // The allocator and the memory disagree on the size; give the frames back.
                allocator.free(&frames)?;
                Err(error)
            }
        }
    }

    /// A region of `length` bytes over `frames` (in region order) of `memory`, after checking
    /// the invariants.
    pub fn from_frames(
        memory: Arc<PhysicalMemory>,
        frames: Vec<HostPhysAddr>,
        length: u64,
    ) -> Result<DmaRegion, DmaError> {
        check_region_length(length)?;
        if frames.len() as u64 != length.div_ceil(FRAME_SIZE) {
            return Err(DmaError::FrameCount {
                frames: frames.len(),
                length,
            });
        }
        let mut sorted = frames.clone();
        sorted.sort_unstable();
        for (i, &address) in sorted.iter().enumerate() {
            let inside = address
                .0
                .checked_add(FRAME_SIZE)
                .is_some_and(|end| end <= memory.len());
            let repeated = i > 0 && sorted.get(i - 1) == Some(&address);
            if address.0 % FRAME_SIZE != 0 || !inside || repeated {
                return Err(DmaError::BadFrame { address });
            }
        }
        // INVARIANT: length checked above; one distinct, aligned, in-memory frame per page.
        Ok(DmaRegion {
            memory,
            frames,
            length,
        })
    }

    /// Gives the frames back to `allocator` (the allocator of this region's memory).
    pub fn release(self, allocator: &mut FrameAllocator) -> Result<(), DmaError> {
        allocator.free(&self.frames)?;
        Ok(())
    }

    /// Bytes in the region.
    pub fn len(&self) -> u64 {
        self.length
    }

    /// Always `false`: a region has at least one byte.
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// The frames, in region order.
    pub fn frames(&self) -> &[HostPhysAddr] {
        &self.frames
    }

    /// The physical memory the region lives in.
    pub fn memory(&self) -> &Arc<PhysicalMemory> {
        &self.memory
    }

    #[inline]
    fn check_range(&self, offset: u64, length: u64) -> Result<u64, DmaError> {
        let out_of_range = DmaError::OutOfRange {
            offset,
            length,
            region_length: self.length,
        };
        match offset.checked_add(length) {
            Some(end) if end <= self.length => Ok(end),
            _ => Err(out_of_range),
        }
    }

    /// The host physical address of region offsets `[offset, offset + length)`, which must be
    /// non-empty, inside the region and inside one frame.
    #[inline]
    pub fn translate(&self, offset: u64, length: u64) -> Result<HostPhysAddr, DmaError> {
        let end = self.check_range(offset, length)?;
        if length == 0 {
            return Err(DmaError::OutOfRange {
                offset,
                length,
                region_length: self.length,
            });
        }
        let frame_index = offset / FRAME_SIZE;
        if (end - 1) / FRAME_SIZE != frame_index {
            return Err(DmaError::CrossesFrame { offset, length });
        }
        let frame = usize::try_from(frame_index)
            .ok()
            .and_then(|index| self.frames.get(index))
            .ok_or(DmaError::OutOfRange {
                offset,
                length,
                region_length: self.length,
            })?;
        Ok(HostPhysAddr(frame.0 + offset % FRAME_SIZE))
    }

    #[inline]
    fn word_address(&self, offset: u64) -> Result<HostPhysAddr, DmaError> {
        if offset % WORD_SIZE != 0 {
            return Err(DmaError::Misaligned { offset });
        }
        self.translate(offset, WORD_SIZE)
    }

    /// Loads the word at region offset `offset` (8-byte aligned).
    #[inline]
    pub fn load_u64(&self, offset: u64, ordering: Ordering) -> Result<u64, DmaError> {
        let address = self.word_address(offset)?;
        Ok(self.memory.load_u64(address, ordering)?)
    }

    /// Stores `value` into the word at region offset `offset` (8-byte aligned).
    #[inline]
    pub fn store_u64(&self, offset: u64, value: u64, ordering: Ordering) -> Result<(), DmaError> {
        let address = self.word_address(offset)?;
        Ok(self.memory.store_u64(address, value, ordering)?)
    }

    /// The host physical address of the non-empty range `[offset, end)`, checked to lie inside
    /// the region, when it lies inside one frame.
    #[inline]
    fn within_frame(&self, offset: u64, end: u64) -> Option<HostPhysAddr> {
        let frame_index = offset / FRAME_SIZE;
        if end <= offset || (end - 1) / FRAME_SIZE != frame_index {
            return None;
        }
        let frame = self.frames.get(usize::try_from(frame_index).ok()?)?;
        Some(HostPhysAddr(frame.0 + offset % FRAME_SIZE))
    }

    /// Checks an access of whole words at `offset`; its end.
    #[inline]
    fn check_words(&self, offset: u64, length: usize) -> Result<u64, DmaError> {
        if offset % WORD_SIZE != 0 {
            return Err(DmaError::Misaligned { offset });
        }
        let length = length as u64;
        if length % WORD_SIZE != 0 {
            return Err(DmaError::PartialWord { length });
        }
        self.check_range(offset, length)
    }

    /// The pieces of `[offset, end)` that lie in one frame each: (offset, bytes).
    fn pieces(offset: u64, end: u64) -> impl Iterator<Item = (u64, u64)> {
        let mut position = offset;
        core::iter::from_fn(move || {
            if position >= end {
                return None;
            }
            let next_frame = (position / FRAME_SIZE)
                .saturating_add(1)
                .saturating_mul(FRAME_SIZE);
            let piece_end = next_frame.min(end);
            let piece = (position, piece_end - position);
            position = piece_end;
            Some(piece)
        })
    }

    /// Reads `buffer.len()` bytes (whole words) at region offset `offset` (8-byte aligned) with
    /// Relaxed loads; the range may span frames. Checks the whole range before reading.
    #[inline]
    pub fn read_bytes(&self, offset: u64, buffer: &mut [u8]) -> Result<(), DmaError> {
        // The commonest case, a record or a slot read by the host's ring code: whole words in
        // one frame, read here with no more checks than it needs (small enough to inline into
        // the loop that calls it); anything else, or anything refused, takes the checked path,
        // whose answer and error are the same.
        if let Some(address) = self.frame_address(offset, buffer.len()) {
            if let Ok(words) = self.memory.words(address, buffer.len() as u64) {
                for (word, bytes) in words.iter().zip(buffer.chunks_exact_mut(8)) {
                    bytes.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
                }
                return Ok(());
            }
        }
        self.read_bytes_checked(offset, buffer)
    }

    /// The host physical address of `[offset, offset + length)` when it is whole aligned
    /// words inside one frame and inside the region.
    #[inline]
    fn frame_address(&self, offset: u64, length: usize) -> Option<HostPhysAddr> {
        let length = length as u64;
        let in_frame = offset % FRAME_SIZE;
        if (offset | length) % WORD_SIZE != 0 || length == 0 || in_frame + length > FRAME_SIZE {
            return None;
        }
        let frame = self
            .frames
            .get(usize::try_from(offset / FRAME_SIZE).ok()?)?;
        // The region may end inside its last frame.
        if offset + length > self.length {
            return None;
        }
        Some(HostPhysAddr(frame.0 + in_frame))
    }

    /// [`DmaRegion::read_bytes`] with every check, for what its fast path does not take.
    #[cold]
    #[inline(never)]
    fn read_bytes_checked(&self, offset: u64, buffer: &mut [u8]) -> Result<(), DmaError> {
        let end = self.check_words(offset, buffer.len())?;
        // The common case, a record or a slot: one frame, one translation (inlined into the
        // caller); a range across frames takes the slow path.
        match self.within_frame(offset, end) {
            Some(address) => Ok(self.memory.read_words(address, buffer)?),
            None => self.read_pieces(offset, end, buffer),
        }
    }

    #[inline(never)]
    fn read_pieces(&self, offset: u64, end: u64, buffer: &mut [u8]) -> Result<(), DmaError> {
        let mut rest = buffer;
        for (position, bytes) in DmaRegion::pieces(offset, end) {
            // bytes <= 4096 and <= rest.len(), since the pieces tile [offset, end).
            let (piece, tail) = rest.split_at_mut(bytes as usize);
            let address = self.translate(position, bytes)?;
            self.memory.read_words(address, piece)?;
            rest = tail;
        }
        Ok(())
    }

    /// Writes `data` (whole words) at region offset `offset` (8-byte aligned) with Relaxed
    /// stores; the range may span frames. Checks the whole range before writing.
    #[inline]
    pub fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<(), DmaError> {
        let end = self.check_words(offset, data.len())?;
        match self.within_frame(offset, end) {
            Some(address) => Ok(self.memory.write_words(address, data)?),
            None => self.write_pieces(offset, end, data),
        }
    }

    #[inline(never)]
    fn write_pieces(&self, offset: u64, end: u64, data: &[u8]) -> Result<(), DmaError> {
        let mut rest = data;
        for (position, bytes) in DmaRegion::pieces(offset, end) {
            let (piece, tail) = rest.split_at(bytes as usize);
            let address = self.translate(position, bytes)?;
            self.memory.write_words(address, piece)?;
            rest = tail;
        }
        Ok(())
    }
}

impl DmaRegion {
    /// Hands the region to the device: from here on the device may write it, and the host
    /// may only read it and publish its heads ([`MappedRegion`]). Call it before the device
    /// learns of the frames (before the shadow stores, or any message naming them, are sent);
    /// [`crate::shadow::program`] does, for the shadow descriptors.
    pub fn hand_to_device(self) -> MappedRegion {
        MappedRegion { region: self }
    }
}

/// Evidence that the device no longer uses a region's frames: its acknowledgement of the end
/// of the work that used them (a completion, a peer's final answer), or the end of the run.
/// [`MappedRegion::quiesce`] takes one. Zero-sized; making one is the caller's statement
/// that the acknowledgement is in hand (see the module docs: this part is a rule, not a type).
#[derive(Debug)]
#[must_use = "a Quiesced token is only useful to MappedRegion::quiesce"]
pub struct Quiesced(());

impl Quiesced {
    /// The device has acknowledged the end of its work on the region.
    pub fn device_acknowledged() -> Quiesced {
        Quiesced(())
    }
}

/// Which host index [`MappedRegion::store_head`] publishes (the host line of the control
/// block).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostHead {
    /// The metadata head (edge H2).
    Metadata,
    /// The payload head (edge H3).
    Payload,
}

impl HostHead {
    /// The head's offset in the control block.
    const fn offset(self) -> u64 {
        match self {
            HostHead::Metadata => METADATA_HEAD_OFFSET,
            HostHead::Payload => PAYLOAD_HEAD_OFFSET,
        }
    }
}

/// A DMA region handed to the device (see the module docs): the device may write it at any
/// time; the host may load words, read bytes and publish its two heads, nothing else. Back to
/// CPU-owned only through [`MappedRegion::quiesce`].
pub struct MappedRegion {
    region: DmaRegion,
}

impl core::fmt::Debug for MappedRegion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MappedRegion")
            .field("region", &self.region)
            .finish()
    }
}

impl MappedRegion {
    /// Bytes in the region.
    pub fn len(&self) -> u64 {
        self.region.len()
    }

    /// Always `false`: a region has at least one byte.
    pub fn is_empty(&self) -> bool {
        self.region.is_empty()
    }

    /// The frames, in region order (what the device was told, through the scatter-gather
    /// list).
    pub fn frames(&self) -> &[HostPhysAddr] {
        self.region.frames()
    }

    /// The physical memory the region lives in.
    pub fn memory(&self) -> &Arc<PhysicalMemory> {
        self.region.memory()
    }

    /// The host physical address of region offsets `[offset, offset + length)` (see
    /// [`DmaRegion::translate`]): where the device's DMA lands.
    #[inline]
    pub fn translate(&self, offset: u64, length: u64) -> Result<HostPhysAddr, DmaError> {
        self.region.translate(offset, length)
    }

    /// Loads the word at region offset `offset` (8-byte aligned): a tail (Acquire), the
    /// status word, a record's sequence.
    #[inline]
    pub fn load_u64(&self, offset: u64, ordering: Ordering) -> Result<u64, DmaError> {
        self.region.load_u64(offset, ordering)
    }

    /// Reads whole words at region offset `offset` with Relaxed loads (see
    /// [`DmaRegion::read_bytes`]): records and payloads, after the Acquire of a tail.
    #[inline]
    pub fn read_bytes(&self, offset: u64, buffer: &mut [u8]) -> Result<(), DmaError> {
        self.region.read_bytes(offset, buffer)
    }

    /// Publishes one of the host's heads into the host line of the control block, with a
    /// Release store: the only store the host makes into a region the device holds.
    #[inline]
    pub fn store_head(&self, head: HostHead, value: u64) -> Result<(), DmaError> {
        self.region
            .store_u64(CONTROL_OFFSET + head.offset(), value, Ordering::Release)
    }

    /// The device's side of this region, for device models ([`DeviceView`]).
    pub fn device_view(&self) -> DeviceView {
        DeviceView {
            region: DmaRegion {
                memory: Arc::clone(&self.region.memory),
                frames: self.region.frames.clone(),
                length: self.region.length,
            },
        }
    }

    /// Takes the region back from a device that has stopped using it (`quiesced`): the
    /// mapped handle is consumed, and the CPU-owned region may be written or released again.
    pub fn quiesce(self, quiesced: Quiesced) -> DmaRegion {
        let Quiesced(()) = quiesced;
        self.region
    }
}

/// The device's side of a region: what a device model writes through the frames it was
/// given (a test's or a loom model's stand-in for the emulator's DMA, the bench's peer). It can
/// store anything anywhere in the region, as the device's DMA can, but it cannot release the
/// frames. Host code never makes one (a rule: the types cannot tell a device model from the
/// host); [`MappedRegion::device_view`] and [`DeviceView::from_frames`] are the only ways.
#[derive(Debug)]
pub struct DeviceView {
    region: DmaRegion,
}

impl DeviceView {
    /// The device's view of `length` bytes over `frames` (region order) of `memory`, as told
    /// by a scatter-gather list or a wire message (checked like [`DmaRegion::from_frames`]).
    pub fn from_frames(
        memory: Arc<PhysicalMemory>,
        frames: Vec<HostPhysAddr>,
        length: u64,
    ) -> Result<DeviceView, DmaError> {
        Ok(DeviceView {
            region: DmaRegion::from_frames(memory, frames, length)?,
        })
    }

    /// Bytes in the region.
    pub fn len(&self) -> u64 {
        self.region.len()
    }

    /// Always `false`: a region has at least one byte.
    pub fn is_empty(&self) -> bool {
        self.region.is_empty()
    }

    /// See [`DmaRegion::translate`].
    #[inline]
    pub fn translate(&self, offset: u64, length: u64) -> Result<HostPhysAddr, DmaError> {
        self.region.translate(offset, length)
    }

    /// See [`DmaRegion::load_u64`].
    #[inline]
    pub fn load_u64(&self, offset: u64, ordering: Ordering) -> Result<u64, DmaError> {
        self.region.load_u64(offset, ordering)
    }

    /// See [`DmaRegion::store_u64`].
    #[inline]
    pub fn store_u64(&self, offset: u64, value: u64, ordering: Ordering) -> Result<(), DmaError> {
        self.region.store_u64(offset, value, ordering)
    }

    /// See [`DmaRegion::read_bytes`].
    #[inline]
    pub fn read_bytes(&self, offset: u64, buffer: &mut [u8]) -> Result<(), DmaError> {
        self.region.read_bytes(offset, buffer)
    }

    /// See [`DmaRegion::write_bytes`].
    #[inline]
    pub fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<(), DmaError> {
        self.region.write_bytes(offset, data)
    }
}

/// What the host's ring code (host-runtime's poller, payload reads and head publication) does
/// with a region the device holds: load a word, read whole words, publish one of its heads.
/// A [`MappedRegion`] does it, translating each access; a [`ResolvedRegion`] does the same with
/// the frames translated once.
pub trait HostRegion {
    /// See [`MappedRegion::load_u64`].
    fn load_u64(&self, offset: u64, ordering: Ordering) -> Result<u64, DmaError>;
    /// See [`MappedRegion::read_bytes`].
    fn read_bytes(&self, offset: u64, buffer: &mut [u8]) -> Result<(), DmaError>;
    /// See [`MappedRegion::store_head`].
    fn store_head(&self, head: HostHead, value: u64) -> Result<(), DmaError>;
}

/// A shared region (the loom models and the runtime's tests hold theirs in an `Arc`) is read
/// as the region itself.
impl<T: HostRegion + ?Sized> HostRegion for Arc<T> {
    #[inline]
    fn load_u64(&self, offset: u64, ordering: Ordering) -> Result<u64, DmaError> {
        T::load_u64(self, offset, ordering)
    }

    #[inline]
    fn read_bytes(&self, offset: u64, buffer: &mut [u8]) -> Result<(), DmaError> {
        T::read_bytes(self, offset, buffer)
    }

    #[inline]
    fn store_head(&self, head: HostHead, value: u64) -> Result<(), DmaError> {
        T::store_head(self, head, value)
    }
}

impl HostRegion for MappedRegion {
    #[inline]
    fn load_u64(&self, offset: u64, ordering: Ordering) -> Result<u64, DmaError> {
        MappedRegion::load_u64(self, offset, ordering)
    }

    #[inline]
    fn read_bytes(&self, offset: u64, buffer: &mut [u8]) -> Result<(), DmaError> {
        MappedRegion::read_bytes(self, offset, buffer)
    }

    #[inline]
    fn store_head(&self, head: HostHead, value: u64) -> Result<(), DmaError> {
        MappedRegion::store_head(self, head, value)
    }
}

/// A region's frames translated once into the words of physical memory they name: what a
/// DMA engine's or an IOMMU's translation cache holds, for the hot loops of a ring's producer
/// and consumer, which touch the same few pages millions of times. An access inside one frame
/// indexes that frame's words (bounds-checked, no translation); anything else (a range across
/// frames, or one the region refuses) goes through the region's checked path, so the answers
/// and the errors are the region's own.
///
/// # Invariants
///
/// `frames[i]` is the words of region offsets `[i * 4096, min((i + 1) * 4096, region.len()))`.
struct FrameWords<'a> {
    region: &'a DmaRegion,
    frames: Vec<&'a [AtomicU64]>,
}

impl<'a> FrameWords<'a> {
    fn new(region: &'a DmaRegion) -> Result<FrameWords<'a>, DmaError> {
        let mut frames = Vec::with_capacity(region.frames.len());
        for (index, frame) in region.frames.iter().enumerate() {
            let start = index as u64 * FRAME_SIZE;
            let bytes = region.length.saturating_sub(start).min(FRAME_SIZE);
            frames.push(region.memory.words(*frame, bytes)?);
        }
        // INVARIANT: frame `index` backs region offsets from `index * 4096` (DmaRegion's
        // invariants), cut at the region's end.
        Ok(FrameWords { region, frames })
    }

    /// The words of `[offset, offset + length)` when it is whole aligned words inside one
    /// frame and the region.
    #[inline]
    fn words(&self, offset: u64, length: usize) -> Option<&'a [AtomicU64]> {
        if offset % WORD_SIZE != 0 || length % 8 != 0 {
            return None;
        }
        let frame = self
            .frames
            .get(usize::try_from(offset / FRAME_SIZE).ok()?)?;
        let first = ((offset % FRAME_SIZE) / WORD_SIZE) as usize;
        frame.get(first..first.checked_add(length / 8)?)
    }

    #[inline]
    fn word(&self, offset: u64) -> Option<&'a AtomicU64> {
        self.words(offset, 8)?.first()
    }

    #[inline]
    fn load_u64(&self, offset: u64, ordering: Ordering) -> Result<u64, DmaError> {
        match self.word(offset) {
            Some(word) => Ok(word.load(ordering)),
            None => self.load_u64_checked(offset, ordering),
        }
    }

    #[inline]
    fn store_u64(&self, offset: u64, value: u64, ordering: Ordering) -> Result<(), DmaError> {
        match self.word(offset) {
            Some(word) => {
                word.store(value, ordering);
                Ok(())
            }
            None => self.store_u64_checked(offset, value, ordering),
        }
    }

    #[inline]
    fn read_bytes(&self, offset: u64, buffer: &mut [u8]) -> Result<(), DmaError> {
        match self.words(offset, buffer.len()) {
            Some(words) => {
                for (word, bytes) in words.iter().zip(buffer.chunks_exact_mut(8)) {
                    bytes.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
                }
                Ok(())
            }
            None => self.read_bytes_checked(offset, buffer),
        }
    }

    #[inline]
    fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<(), DmaError> {
        match self.words(offset, data.len()) {
            Some(words) => {
                for (word, bytes) in words.iter().zip(data.chunks_exact(8)) {
                    let mut value = [0u8; 8];
                    value.copy_from_slice(bytes);
                    word.store(u64::from_le_bytes(value), Ordering::Relaxed);
                }
                Ok(())
            }
            None => self.write_bytes_checked(offset, data),
        }
    }

    // The region's checked path, for what the fast path does not take: kept out of line, so
    // that the fast path stays small enough to inline into the loop that calls it.

    #[cold]
    #[inline(never)]
    fn load_u64_checked(&self, offset: u64, ordering: Ordering) -> Result<u64, DmaError> {
        self.region.load_u64(offset, ordering)
    }

    #[cold]
    #[inline(never)]
    fn store_u64_checked(
        &self,
        offset: u64,
        value: u64,
        ordering: Ordering,
    ) -> Result<(), DmaError> {
        self.region.store_u64(offset, value, ordering)
    }

    #[cold]
    #[inline(never)]
    fn read_bytes_checked(&self, offset: u64, buffer: &mut [u8]) -> Result<(), DmaError> {
        self.region.read_bytes(offset, buffer)
    }

    #[cold]
    #[inline(never)]
    fn write_bytes_checked(&self, offset: u64, data: &[u8]) -> Result<(), DmaError> {
        self.region.write_bytes(offset, data)
    }
}

/// A [`MappedRegion`] with its frames translated once ([`MappedRegion::resolve`]): the same
/// three things the host may do, loading, reading and publishing its heads, with no
/// translation per access. Borrowed from the mapped region, so it cannot outlive the
/// region's hand-back ([`MappedRegion::quiesce`]).
pub struct ResolvedRegion<'a> {
    words: FrameWords<'a>,
}

impl core::fmt::Debug for ResolvedRegion<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ResolvedRegion")
            .field("region", self.words.region)
            .finish()
    }
}

impl MappedRegion {
    /// The region with its frames translated once, for a loop that reads it many times.
    pub fn resolve(&self) -> Result<ResolvedRegion<'_>, DmaError> {
        Ok(ResolvedRegion {
            words: FrameWords::new(&self.region)?,
        })
    }
}

impl HostRegion for ResolvedRegion<'_> {
    #[inline]
    fn load_u64(&self, offset: u64, ordering: Ordering) -> Result<u64, DmaError> {
        self.words.load_u64(offset, ordering)
    }

    #[inline]
    fn read_bytes(&self, offset: u64, buffer: &mut [u8]) -> Result<(), DmaError> {
        self.words.read_bytes(offset, buffer)
    }

    #[inline]
    fn store_head(&self, head: HostHead, value: u64) -> Result<(), DmaError> {
        self.words
            .store_u64(CONTROL_OFFSET + head.offset(), value, Ordering::Release)
    }
}

/// A [`MappedRegion`]'s words as a loop that reads many slots sees them
/// ([`MappedRegion::words_view`]): host memory's words resolved once, and the region's
/// frames, so that each read only translates its offset through the frame table (no frame is
/// resolved ahead, unlike [`ResolvedRegion`]: cheap to make for a few reads).
#[derive(Clone, Copy, Debug)]
pub struct RegionWords<'a> {
    memory: &'a [AtomicU64],
    frames: &'a [HostPhysAddr],
    length: u64,
}

impl MappedRegion {
    /// The region's words for a loop of reads ([`RegionWords`]).
    #[inline]
    pub fn words_view(&self) -> RegionWords<'_> {
        let memory = &self.region.memory;
        RegionWords {
            memory: memory
                .words(HostPhysAddr(0), memory.len())
                .unwrap_or_default(),
            frames: &self.region.frames,
            length: self.region.length,
        }
    }
}

impl<'a> RegionWords<'a> {
    /// The words of region offsets `[offset, offset + length)` when they are whole aligned
    /// words (at least one) inside one frame and inside the region: what
    /// [`MappedRegion::read_bytes`] reads there, with Relaxed loads. `None` for anything else
    /// (the region's own read then says what is wrong).
    #[inline]
    pub fn words(&self, offset: u64, length: u64) -> Option<&'a [AtomicU64]> {
        let in_frame = offset % FRAME_SIZE;
        if (offset | length) % WORD_SIZE != 0
            || length == 0
            || in_frame + length > FRAME_SIZE
            || offset.checked_add(length)? > self.length
        {
            return None;
        }
        let frame = self
            .frames
            .get(usize::try_from(offset / FRAME_SIZE).ok()?)?;
        let address = frame.0.checked_add(in_frame)?;
        if address % WORD_SIZE != 0 {
            return None;
        }
        let first = usize::try_from(address / WORD_SIZE).ok()?;
        self.memory
            .get(first..first.checked_add(usize::try_from(length / WORD_SIZE).ok()?)?)
    }
}

/// A [`DeviceView`] with its frames translated once ([`DeviceView::resolve`]): the device's
/// DMA with a warm translation cache.
pub struct ResolvedDeviceView<'a> {
    words: FrameWords<'a>,
}

impl core::fmt::Debug for ResolvedDeviceView<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ResolvedDeviceView")
            .field("region", self.words.region)
            .finish()
    }
}

impl DeviceView {
    /// The view with its frames translated once, for a loop that writes the region many
    /// times.
    pub fn resolve(&self) -> Result<ResolvedDeviceView<'_>, DmaError> {
        Ok(ResolvedDeviceView {
            words: FrameWords::new(&self.region)?,
        })
    }
}

impl<'a> ResolvedDeviceView<'a> {
    /// The words of region offsets `[offset, offset + length)`, which must be whole aligned
    /// words inside one frame (a slot, a record, a page of records): for a device loop that
    /// stores into the same slots lap after lap, as a DMA engine writes through its cached
    /// translation.
    pub fn words(&self, offset: u64, length: u64) -> Result<&'a [AtomicU64], DmaError> {
        let bytes = usize::try_from(length).unwrap_or(usize::MAX);
        if let Some(words) = self.words.words(offset, bytes) {
            return Ok(words);
        }
        // Say why, as the region would.
        if offset % WORD_SIZE != 0 {
            return Err(DmaError::Misaligned { offset });
        }
        if length % WORD_SIZE != 0 {
            return Err(DmaError::PartialWord { length });
        }
        self.words.region.translate(offset, length)?;
        Err(DmaError::OutOfRange {
            offset,
            length,
            region_length: self.words.region.length,
        })
    }

    /// See [`DmaRegion::load_u64`].
    #[inline]
    pub fn load_u64(&self, offset: u64, ordering: Ordering) -> Result<u64, DmaError> {
        self.words.load_u64(offset, ordering)
    }

    /// See [`DmaRegion::store_u64`].
    #[inline]
    pub fn store_u64(&self, offset: u64, value: u64, ordering: Ordering) -> Result<(), DmaError> {
        self.words.store_u64(offset, value, ordering)
    }

    /// See [`DmaRegion::read_bytes`].
    #[inline]
    pub fn read_bytes(&self, offset: u64, buffer: &mut [u8]) -> Result<(), DmaError> {
        self.words.read_bytes(offset, buffer)
    }

    /// See [`DmaRegion::write_bytes`].
    #[inline]
    pub fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<(), DmaError> {
        self.words.write_bytes(offset, data)
    }
}

fn check_region_length(length: u64) -> Result<(), DmaError> {
    if length == 0 {
        return Err(DmaError::Empty);
    }
    if length % WORD_SIZE != 0 {
        return Err(DmaError::PartialWord { length });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(frames: u64, region_bytes: u64) -> (Arc<PhysicalMemory>, FrameAllocator, DmaRegion) {
        let memory = Arc::new(PhysicalMemory::new(frames * FRAME_SIZE).unwrap());
        let mut allocator = FrameAllocator::new(memory.len());
        let region =
            DmaRegion::allocate(Arc::clone(&memory), &mut allocator, region_bytes).unwrap();
        (memory, allocator, region)
    }

    #[test]
    fn translate_maps_each_offset_into_its_frame() {
        let (_, _, region) = setup(64, 3 * FRAME_SIZE);
        for (i, frame) in region.frames().iter().enumerate() {
            let offset = i as u64 * FRAME_SIZE + 24;
            assert_eq!(
                region.translate(offset, 8).unwrap(),
                HostPhysAddr(frame.0 + 24)
            );
        }
    }

    #[test]
    fn translate_refuses_a_range_crossing_frames() {
        let (_, _, region) = setup(64, 3 * FRAME_SIZE);
        assert_eq!(
            region.translate(FRAME_SIZE - 8, 16),
            Err(DmaError::CrossesFrame {
                offset: FRAME_SIZE - 8,
                length: 16
            })
        );
        assert!(region.translate(FRAME_SIZE - 8, 8).is_ok());
    }

    #[test]
    fn translate_refuses_empty_outside_and_wrapping_ranges() {
        let (_, _, region) = setup(64, 3 * FRAME_SIZE);
        let length = region.len();
        assert!(matches!(
            region.translate(0, 0),
            Err(DmaError::OutOfRange { .. })
        ));
        assert!(matches!(
            region.translate(length - 8, 16),
            Err(DmaError::OutOfRange { .. })
        ));
        assert!(matches!(
            region.translate(u64::MAX, 2),
            Err(DmaError::OutOfRange { .. })
        ));
    }

    #[test]
    fn bytes_written_across_frames_read_back_and_land_in_each_frame() {
        let (memory, _, region) = setup(64, 3 * FRAME_SIZE);
        let data: Vec<u8> = (0..64u32).map(|i| i as u8).collect();
        let offset = FRAME_SIZE - 32;
        region.write_bytes(offset, &data).unwrap();
        let mut back = vec![0u8; 64];
        region.read_bytes(offset, &mut back).unwrap();
        assert_eq!(back, data);
        // The second half went to the start of frame 1, wherever that is physically.
        let mut second = [0u8; 32];
        memory.read_words(region.frames()[1], &mut second).unwrap();
        assert_eq!(&second[..], &data[32..]);
    }

    #[test]
    fn out_of_range_write_touches_nothing() {
        let (_, _, region) = setup(64, 3 * FRAME_SIZE);
        let offset = region.len() - 8;
        assert!(region.write_bytes(offset, &[0xff; 16]).is_err());
        assert_eq!(region.load_u64(offset, Ordering::Relaxed).unwrap(), 0);
    }

    #[test]
    fn a_read_answers_as_the_checked_path_whatever_the_range() {
        // Two frames and a half: the region ends inside its last frame.
        let length = 2 * FRAME_SIZE + FRAME_SIZE / 2;
        let (_, _, region) = setup(64, length);
        let data: Vec<u8> = (0..length).map(|byte| (byte * 7 + 3) as u8).collect();
        region.write_bytes(0, &data).unwrap();
        let ends = [0, 4, 8, 24, 32, FRAME_SIZE - 8, FRAME_SIZE];
        for base in [0, FRAME_SIZE, 2 * FRAME_SIZE, length] {
            for offset in ends.iter().map(|&delta| base.saturating_sub(delta)) {
                for offset in [offset, offset + 4, offset + 8] {
                    for bytes in [
                        0,
                        4,
                        8,
                        12,
                        32,
                        40,
                        FRAME_SIZE as usize,
                        2 * FRAME_SIZE as usize,
                    ] {
                        let (mut fast, mut checked) = (vec![0xa5; bytes], vec![0xa5; bytes]);
                        let answer = region.read_bytes(offset, &mut fast);
                        assert_eq!(
                            answer,
                            region.read_bytes_checked(offset, &mut checked),
                            "{bytes} bytes at {offset}"
                        );
                        assert_eq!(fast, checked, "{bytes} bytes at {offset}");
                        if answer.is_ok() && bytes > 0 {
                            let start = offset as usize;
                            assert_eq!(
                                fast,
                                data[start..start + bytes],
                                "{bytes} bytes at {offset}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn misaligned_and_partial_accesses_are_refused() {
        let (_, _, region) = setup(64, 3 * FRAME_SIZE);
        assert_eq!(
            region.load_u64(4, Ordering::Relaxed),
            Err(DmaError::Misaligned { offset: 4 })
        );
        assert_eq!(
            region.write_bytes(8, &[0; 12]),
            Err(DmaError::PartialWord { length: 12 })
        );
    }

    #[test]
    fn store_then_load_through_region_offsets() {
        let (_, _, region) = setup(64, 2 * FRAME_SIZE);
        region
            .store_u64(FRAME_SIZE + 8, 77, Ordering::Release)
            .unwrap();
        assert_eq!(
            region.load_u64(FRAME_SIZE + 8, Ordering::Acquire).unwrap(),
            77
        );
    }

    #[test]
    fn from_frames_refuses_repeated_misaligned_or_outside_frames() {
        let memory = Arc::new(PhysicalMemory::new(8 * FRAME_SIZE).unwrap());
        let f = |n: u64| HostPhysAddr(n * FRAME_SIZE);
        assert_eq!(
            DmaRegion::from_frames(Arc::clone(&memory), vec![f(1), f(1)], 2 * FRAME_SIZE)
                .unwrap_err(),
            DmaError::BadFrame { address: f(1) }
        );
        assert_eq!(
            DmaRegion::from_frames(Arc::clone(&memory), vec![HostPhysAddr(8)], 8).unwrap_err(),
            DmaError::BadFrame {
                address: HostPhysAddr(8)
            }
        );
        assert_eq!(
            DmaRegion::from_frames(Arc::clone(&memory), vec![f(8)], 8).unwrap_err(),
            DmaError::BadFrame { address: f(8) }
        );
        assert_eq!(
            DmaRegion::from_frames(Arc::clone(&memory), vec![f(1)], 2 * FRAME_SIZE).unwrap_err(),
            DmaError::FrameCount {
                frames: 1,
                length: 2 * FRAME_SIZE
            }
        );
        assert_eq!(
            DmaRegion::from_frames(memory, vec![f(1)], 0).unwrap_err(),
            DmaError::Empty
        );
    }

    #[test]
    fn a_mapped_region_reads_what_the_device_wrote_and_stores_only_heads() {
        let (memory, mut allocator, region) = setup(64, 2 * FRAME_SIZE);
        region.store_u64(FRAME_SIZE, 5, Ordering::Relaxed).unwrap();
        let frames = region.frames().to_vec();
        let mapped = region.hand_to_device();
        assert_eq!(mapped.load_u64(FRAME_SIZE, Ordering::Acquire).unwrap(), 5);
        // The device writes through the frames it was given.
        memory
            .store_u64(HostPhysAddr(frames[1].0 + 8), 9, Ordering::Release)
            .unwrap();
        let mut word = [0u8; 8];
        mapped.read_bytes(FRAME_SIZE + 8, &mut word).unwrap();
        assert_eq!(u64::from_le_bytes(word), 9);
        mapped.store_head(HostHead::Payload, 3).unwrap();
        mapped.store_head(HostHead::Metadata, 4).unwrap();
        assert_eq!(
            mapped
                .load_u64(CONTROL_OFFSET + PAYLOAD_HEAD_OFFSET, Ordering::Acquire)
                .unwrap(),
            3
        );
        assert_eq!(
            mapped
                .load_u64(CONTROL_OFFSET + METADATA_HEAD_OFFSET, Ordering::Acquire)
                .unwrap(),
            4
        );
        let free = allocator.free_frames();
        let region = mapped.quiesce(Quiesced::device_acknowledged());
        assert_eq!(region.frames(), &frames[..]);
        region.release(&mut allocator).unwrap();
        assert_eq!(allocator.free_frames(), free + 2);
    }

    #[test]
    fn release_returns_the_frames() {
        let (_, mut allocator, region) = setup(64, 5 * FRAME_SIZE);
        let free = allocator.free_frames();
        region.release(&mut allocator).unwrap();
        assert_eq!(allocator.free_frames(), free + 5);
    }

    /// Offsets and lengths around every frame boundary, the region's end (inside its last,
    /// partial frame) and beyond, aligned or not.
    fn probes(length: u64) -> Vec<(u64, usize)> {
        let mut offsets = vec![0, 8, 12, length - 8, length, length + 8, u64::MAX - 7];
        for frame in 1..=length / FRAME_SIZE {
            let boundary = frame * FRAME_SIZE;
            offsets.extend([
                boundary - 16,
                boundary - 8,
                boundary - 4,
                boundary,
                boundary + 8,
            ]);
        }
        let lengths = [0, 4, 8, 16, 24, 32, 4096, 4104];
        offsets
            .iter()
            .flat_map(|&offset| lengths.iter().map(move |&bytes| (offset, bytes)))
            .collect()
    }

    #[test]
    fn a_resolved_region_answers_every_access_as_the_region_does() {
        // Two frames and a quarter: the last frame is partial.
        let length = 2 * FRAME_SIZE + 1024;
        let (_, _, region) = setup(64, length);
        for offset in (0..length).step_by(8) {
            region
                .store_u64(offset, offset * 3 + 1, Ordering::Relaxed)
                .unwrap();
        }
        let mapped = region.hand_to_device();
        let resolved = mapped.resolve().unwrap();
        for (offset, bytes) in probes(length) {
            let mut checked = vec![0xaa_u8; bytes];
            let mut fast = vec![0xaa_u8; bytes];
            assert_eq!(
                HostRegion::read_bytes(&resolved, offset, &mut fast),
                mapped.read_bytes(offset, &mut checked),
                "read of {bytes} bytes at {offset:#x}"
            );
            assert_eq!(fast, checked, "bytes read at {offset:#x}");
            assert_eq!(
                HostRegion::load_u64(&resolved, offset, Ordering::Acquire),
                mapped.load_u64(offset, Ordering::Acquire),
                "load at {offset:#x}"
            );
        }
        resolved.store_head(HostHead::Payload, 11).unwrap();
        resolved.store_head(HostHead::Metadata, 12).unwrap();
        assert_eq!(
            mapped
                .load_u64(CONTROL_OFFSET + PAYLOAD_HEAD_OFFSET, Ordering::Acquire)
                .unwrap(),
            11
        );
        assert_eq!(
            mapped
                .load_u64(CONTROL_OFFSET + METADATA_HEAD_OFFSET, Ordering::Acquire)
                .unwrap(),
            12
        );
    }

    /// Where the words view gives words, they hold what the region's read reads; it gives
    /// them for every whole-word range in one frame and the region, and nothing else.
    #[test]
    fn a_words_view_gives_the_words_a_read_reads_inside_one_frame() {
        let length = 2 * FRAME_SIZE + 1024;
        let (_, _, region) = setup(64, length);
        for offset in (0..length).step_by(8) {
            region
                .store_u64(offset, offset * 5 + 2, Ordering::Relaxed)
                .unwrap();
        }
        let mapped = region.hand_to_device();
        let view = mapped.words_view();
        let mut given = 0;
        for (offset, bytes) in probes(length) {
            let inside = offset % 8 == 0
                && bytes % 8 == 0
                && bytes > 0
                && offset % FRAME_SIZE + bytes as u64 <= FRAME_SIZE
                && offset
                    .checked_add(bytes as u64)
                    .is_some_and(|end| end <= length);
            let words = view.words(offset, bytes as u64);
            assert_eq!(words.is_some(), inside, "{bytes} bytes at {offset:#x}");
            let Some(words) = words else {
                continue;
            };
            given += 1;
            let mut read = vec![0u8; bytes];
            mapped.read_bytes(offset, &mut read).unwrap();
            let seen: Vec<u8> = words
                .iter()
                .flat_map(|word| word.load(Ordering::Relaxed).to_le_bytes())
                .collect();
            assert_eq!(seen, read, "{bytes} bytes at {offset:#x}");
        }
        assert!(given > 10, "{given}");
    }

    #[test]
    fn a_resolved_device_view_writes_exactly_what_the_view_writes() {
        let length = 2 * FRAME_SIZE + 1024;
        let (memory, mut allocator, checked_region) = setup(64, length);
        let fast_region = DmaRegion::allocate(Arc::clone(&memory), &mut allocator, length).unwrap();
        let checked = checked_region.hand_to_device().device_view();
        let fast_mapped = fast_region.hand_to_device();
        let fast_view = fast_mapped.device_view();
        let fast = fast_view.resolve().unwrap();
        for (step, (offset, bytes)) in probes(length).into_iter().enumerate() {
            let data: Vec<u8> = (0..bytes).map(|i| (i + step) as u8).collect();
            assert_eq!(
                fast.write_bytes(offset, &data),
                checked.write_bytes(offset, &data),
                "write of {bytes} bytes at {offset:#x}"
            );
            let value = step as u64 * 7 + 3;
            assert_eq!(
                fast.store_u64(offset, value, Ordering::Release),
                checked.store_u64(offset, value, Ordering::Release),
                "store at {offset:#x}"
            );
        }
        // Both regions hold the same bytes, word for word.
        for offset in (0..length).step_by(8) {
            assert_eq!(
                fast.load_u64(offset, Ordering::Relaxed),
                checked.load_u64(offset, Ordering::Relaxed),
                "word at {offset:#x}"
            );
        }
        // The words of a slot, and why a range that is not one is refused.
        assert_eq!(fast.words(FRAME_SIZE + 16, 32).unwrap().len(), 4);
        assert_eq!(
            fast.words(4, 8).unwrap_err(),
            DmaError::Misaligned { offset: 4 }
        );
        assert_eq!(
            fast.words(8, 12).unwrap_err(),
            DmaError::PartialWord { length: 12 }
        );
        assert_eq!(
            fast.words(FRAME_SIZE - 8, 16).unwrap_err(),
            DmaError::CrossesFrame {
                offset: FRAME_SIZE - 8,
                length: 16
            }
        );
        assert!(matches!(
            fast.words(length, 8),
            Err(DmaError::OutOfRange { .. })
        ));
        let mut whole_fast = vec![0u8; length as usize];
        let mut whole_checked = vec![0u8; length as usize];
        fast.read_bytes(0, &mut whole_fast).unwrap();
        checked.read_bytes(0, &mut whole_checked).unwrap();
        assert_eq!(whole_fast, whole_checked);
    }
}
