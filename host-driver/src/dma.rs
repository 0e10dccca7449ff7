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
//!   shared-memory segment that stands for physical memory ([`MappedWords::lock`]); in-process
//!   there is nothing to pin: the frames are indexes into a boxed slice that lives as long as
//!   the region's `Arc`.
//! - **Uncached.** A kernel maps DMA memory coherent or uncached (`dma_alloc_coherent`, or
//!   `pgprot_noncached` / `pgprot_writecombine` in `mmap`), so that the CPU never reads a stale
//!   cached copy of what the device wrote. Here the same guarantee comes from never forming a
//!   `&[u8]` into the region: every access is an atomic load or store of one 8-byte word of
//!   [`PhysicalMemory`], ordered explicitly (Acquire on tails, Release on heads) where the
//!   protocol needs it, and copied out before it is interpreted.
//! - **Owned by whom.** The region is CPU-owned until its scatter-gather list is shadowed into
//!   the device; from then on the device may write the rings at any time, and the host touches
//!   them only through the ring protocol (host-runtime's `ring` module).
//!
//! # Shared-memory segments (the multi-process form; not under loom)
//!
//! Across processes, host physical memory is an anonymous shared-memory segment
//! ([`MappedWords`]): a memfd (`memfd_create`, close-on-exec, sized up front, sealed against
//! shrinking and growing), mapped shared and read-write, and handed to the emulator over its
//! Unix socket with SCM_RIGHTS ([`receive_with_fds`] takes such descriptors in). Nothing is
//! named in `/dev/shm`, so a crash leaves nothing behind. The mapping is exposed only as a
//! slice of [`AtomicU64`](std::sync::atomic::AtomicU64): never a `&[u8]`, since the other
//! process writes it concurrently. This module and `crate::mmio` hold the crate's only
//! `unsafe`.

use crate::frames::{FrameAllocator, FrameError, FRAME_SIZE};
use crate::phys::{PhysError, PhysicalMemory, WORD_SIZE};
use crate::sync::{Arc, Ordering};
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

    fn word_address(&self, offset: u64) -> Result<HostPhysAddr, DmaError> {
        if offset % WORD_SIZE != 0 {
            return Err(DmaError::Misaligned { offset });
        }
        self.translate(offset, WORD_SIZE)
    }

    /// Loads the word at region offset `offset` (8-byte aligned).
    pub fn load_u64(&self, offset: u64, ordering: Ordering) -> Result<u64, DmaError> {
        let address = self.word_address(offset)?;
        Ok(self.memory.load_u64(address, ordering)?)
    }

    /// Stores `value` into the word at region offset `offset` (8-byte aligned).
    pub fn store_u64(&self, offset: u64, value: u64, ordering: Ordering) -> Result<(), DmaError> {
        let address = self.word_address(offset)?;
        Ok(self.memory.store_u64(address, value, ordering)?)
    }

    /// Checks an access of whole words at `offset`; its end.
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
    pub fn read_bytes(&self, offset: u64, buffer: &mut [u8]) -> Result<(), DmaError> {
        let end = self.check_words(offset, buffer.len())?;
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
    pub fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<(), DmaError> {
        let end = self.check_words(offset, data.len())?;
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

fn check_region_length(length: u64) -> Result<(), DmaError> {
    if length == 0 {
        return Err(DmaError::Empty);
    }
    if length % WORD_SIZE != 0 {
        return Err(DmaError::PartialWord { length });
    }
    Ok(())
}

#[cfg(not(loom))]
pub use segment::{receive_with_fds, sealed_memfd, MappedWords, SegmentError};

#[cfg(not(loom))]
mod segment {
    use crate::phys::{SharedWords, WORD_SIZE};
    use memmap2::{MmapOptions, MmapRaw};
    use nix::fcntl::{fcntl, FcntlArg, SealFlag};
    use nix::sys::memfd::{memfd_create, MemFdCreateFlag};
    use std::ffi::CString;
    use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
    use std::os::unix::net::UnixStream;
    use std::sync::atomic::AtomicU64;

    /// Creating, checking or mapping a shared-memory segment failed.
    #[derive(Debug, thiserror::Error)]
    pub enum SegmentError {
        /// A system call failed.
        #[error("{what}: {error}")]
        System {
            /// What was being done.
            what: &'static str,
            /// The error (in the message, not a separate cause, so it is said once).
            error: std::io::Error,
        },
        /// The segment has another size than announced.
        #[error("segment of {actual} bytes where {expected} were announced")]
        Size {
            /// Bytes announced.
            expected: u64,
            /// Bytes of the file.
            actual: u64,
        },
        /// The size announced is not a whole number of 8-byte words.
        #[error("a segment of {bytes} bytes was announced: segments are whole 8-byte words, so the size must be a multiple of 8")]
        PartialWord {
            /// Bytes announced.
            bytes: u64,
        },
        /// The descriptor is not a memory file: a pipe, a socket, a device, a directory, or a
        /// file on a file system that cannot be sealed.
        #[error("the segment's descriptor is {kind}, not a sealed memory file (memfd_create)")]
        NotAMemfd {
            /// What it is.
            kind: &'static str,
        },
        /// The segment is not sealed against shrinking: its owner could cut pages out from
        /// under the mapping.
        #[error("segment is not sealed against shrinking (F_SEAL_SHRINK): its owner could cut pages out from under the mapping")]
        NotSealed,
    }

    fn system(what: &'static str) -> impl FnOnce(nix::errno::Errno) -> SegmentError {
        move |errno| SegmentError::System {
            what,
            error: std::io::Error::from(errno),
        }
    }

    /// An anonymous memory file of `bytes` bytes (zero-filled, sparse), close-on-exec, sealed
    /// against shrinking and growing and against further seals. `name` only shows in
    /// `/proc/PID/fd`; nothing appears in `/dev/shm`.
    pub fn sealed_memfd(name: &str, bytes: u64) -> Result<OwnedFd, SegmentError> {
        let name = CString::new(name).unwrap_or_default();
        let fd = memfd_create(
            &name,
            MemFdCreateFlag::MFD_CLOEXEC | MemFdCreateFlag::MFD_ALLOW_SEALING,
        )
        .map_err(system("memfd_create"))?;
        let length = i64::try_from(bytes).map_err(|_| SegmentError::Size {
            expected: bytes,
            actual: 0,
        })?;
        nix::unistd::ftruncate(&fd, length).map_err(system("ftruncate of a memfd"))?;
        fcntl(
            fd.as_raw_fd(),
            FcntlArg::F_ADD_SEALS(
                SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL,
            ),
        )
        .map_err(system("sealing a memfd"))?;
        Ok(fd)
    }

    /// Checks that `fd` is a memory file of exactly `bytes` bytes (a multiple of 8) sealed
    /// against shrinking.
    fn check_segment(fd: BorrowedFd<'_>, bytes: u64) -> Result<(), SegmentError> {
        if bytes % WORD_SIZE != 0 {
            return Err(SegmentError::PartialWord { bytes });
        }
        let status = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(system("fstat of a segment"))?;
        let kind = match status.st_mode & nix::libc::S_IFMT {
            nix::libc::S_IFREG => None,
            nix::libc::S_IFIFO => Some("a pipe"),
            nix::libc::S_IFSOCK => Some("a socket"),
            nix::libc::S_IFCHR | nix::libc::S_IFBLK => Some("a device"),
            nix::libc::S_IFDIR => Some("a directory"),
            _ => Some("not a regular file"),
        };
        if let Some(kind) = kind {
            return Err(SegmentError::NotAMemfd { kind });
        }
        let actual = u64::try_from(status.st_size).unwrap_or(0);
        if actual != bytes {
            return Err(SegmentError::Size {
                expected: bytes,
                actual,
            });
        }
        // Only memory files carry seals: anything else answers EINVAL.
        let seals = fcntl(fd.as_raw_fd(), FcntlArg::F_GET_SEALS).map_err(|errno| {
            if errno == nix::errno::Errno::EINVAL {
                SegmentError::NotAMemfd {
                    kind: "a file that cannot be sealed",
                }
            } else {
                system("reading the seals of a segment")(errno)
            }
        })?;
        if SealFlag::from_bits_truncate(seals) & SealFlag::F_SEAL_SHRINK != SealFlag::F_SEAL_SHRINK
        {
            return Err(SegmentError::NotSealed);
        }
        Ok(())
    }

    /// A shared-memory segment mapped as 8-byte atomic words.
    ///
    /// # Invariants
    ///
    /// - `map` is a shared, read-write mapping of exactly `words * 8` bytes, page-aligned
    ///   (hence 8-byte aligned), alive and never remapped until `self` drops;
    /// - the file behind it is sealed against shrinking, so every page of the mapping stays
    ///   backed for as long as the mapping exists.
    pub struct MappedWords {
        map: MmapRaw,
        words: usize,
    }

    impl core::fmt::Debug for MappedWords {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.debug_struct("MappedWords")
                .field("bytes", &self.map.len())
                .finish()
        }
    }

    impl MappedWords {
        /// A new segment of `bytes` bytes (a multiple of 8), zeroed; also returns its
        /// descriptor, to be sent to the peer.
        pub fn create(name: &str, bytes: u64) -> Result<(MappedWords, OwnedFd), SegmentError> {
            let fd = sealed_memfd(name, bytes)?;
            let mapped = MappedWords::map(fd.as_fd(), bytes)?;
            Ok((mapped, fd))
        }

        /// Maps the segment `fd`, which must be `bytes` bytes long (a multiple of 8) and
        /// sealed against shrinking.
        pub fn map(fd: BorrowedFd<'_>, bytes: u64) -> Result<MappedWords, SegmentError> {
            check_segment(fd, bytes)?;
            let length = usize::try_from(bytes).map_err(|_| SegmentError::Size {
                expected: bytes,
                actual: bytes,
            })?;
            let map = MmapOptions::new()
                .len(length)
                .map_raw(fd.as_raw_fd())
                .map_err(|error| SegmentError::System {
                    what: "mapping a segment",
                    error,
                })?;
            // INVARIANT: a shared read-write mapping of `length` bytes (checked equal to the
            // sealed file's size, a multiple of 8); mmap returns page-aligned addresses.
            Ok(MappedWords {
                words: length / 8,
                map,
            })
        }

        /// Locks the segment's pages in memory (`mlock`), as a driver pins DMA memory.
        pub fn lock(&self) -> std::io::Result<()> {
            self.map.lock()
        }

        /// Bytes of the segment.
        pub fn len(&self) -> u64 {
            self.map.len() as u64
        }

        /// Whether the segment has no bytes.
        pub fn is_empty(&self) -> bool {
            self.words == 0
        }

        /// The segment as words.
        pub fn words(&self) -> &[AtomicU64] {
            // SAFETY:
            // - the pointer is page-aligned, so aligned for `AtomicU64`, and non-null;
            // - `words * 8` bytes from it are one live mapping (type invariant) that stays
            //   mapped while the returned borrow of `self` lives, and the sealed file keeps
            //   every page backed;
            // - `AtomicU64` has the size and validity of `u64`, and every bit pattern is a
            //   valid `u64`;
            // - other processes write this memory concurrently: that is sound through
            //   atomics, which is all this slice allows (no `&u64`/`&[u8]` is ever formed).
            unsafe { std::slice::from_raw_parts(self.map.as_ptr().cast::<AtomicU64>(), self.words) }
        }
    }

    impl SharedWords for MappedWords {
        fn words(&self) -> &[AtomicU64] {
            MappedWords::words(self)
        }
    }

    /// Most descriptors one message may carry (Linux's `SCM_MAX_FD`): the control buffer of
    /// [`receive_with_fds`] has room for all of them, so the kernel never drops any silently.
    const MAX_FDS_PER_MESSAGE: usize = 253;

    /// Receives up to `buffer.len()` bytes from `socket` (at least one, unless the peer closed
    /// the connection: then 0) together with the descriptors that the peer attached with
    /// SCM_RIGHTS, which become owned by the caller.
    ///
    /// Every descriptor that arrives is wrapped in an [`OwnedFd`] the moment it is seen, so
    /// every error path closes it: more than `max_fds` (refused with the count), or a control
    /// message the kernel had to truncate (`MSG_CTRUNC`: refused after closing what did
    /// arrive). The control buffer has room for `MAX_FDS_PER_MESSAGE` (253) descriptors, the most
    /// the kernel passes in one message.
    pub fn receive_with_fds(
        socket: &UnixStream,
        buffer: &mut [u8],
        max_fds: usize,
    ) -> std::io::Result<(usize, Vec<OwnedFd>)> {
        use nix::libc;
        const FD_BYTES: usize = MAX_FDS_PER_MESSAGE * size_of::<libc::c_int>();
        // `cmsghdr` alignment: a buffer of u64 words is aligned for it.
        // SAFETY: CMSG_SPACE only computes a size from its argument.
        let space = unsafe { libc::CMSG_SPACE(FD_BYTES as u32) } as usize;
        let mut control = vec![0u64; space.div_ceil(8)];
        let mut iov = libc::iovec {
            iov_base: buffer.as_mut_ptr().cast(),
            iov_len: buffer.len(),
        };
        // SAFETY: an all-zero msghdr is a valid value (null pointers, zero lengths).
        let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
        header.msg_iov = &mut iov;
        header.msg_iovlen = 1;
        header.msg_control = control.as_mut_ptr().cast();
        header.msg_controllen = (control.len() * 8) as _;
        let received = loop {
            // SAFETY: `header` points to one iovec over `buffer` (writable, `buffer.len()`
            // bytes) and to `control` (writable, `msg_controllen` bytes), both alive for the
            // call; the kernel writes at most those lengths.
            let received =
                unsafe { libc::recvmsg(socket.as_raw_fd(), &mut header, libc::MSG_CMSG_CLOEXEC) };
            if received >= 0 {
                break received as usize;
            }
            let error = std::io::Error::last_os_error();
            if error.kind() != std::io::ErrorKind::Interrupted {
                return Err(error);
            }
        };
        let mut fds = Vec::new();
        // SAFETY (the cmsg walk): the CMSG_* functions walk the `msg_controllen` bytes the
        // kernel wrote into `control`, which stays alive and unmodified during the walk; each
        // header they return lies inside that buffer, and its data holds
        // `cmsg_len - CMSG_LEN(0)` bytes (the kernel shortens `cmsg_len` when it truncates).
        let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&header) };
        while !cmsg.is_null() {
            // SAFETY: see above; `cmsg` is non-null and inside the buffer.
            let (level, kind, length) = unsafe {
                (
                    (*cmsg).cmsg_level,
                    (*cmsg).cmsg_type,
                    (*cmsg).cmsg_len as usize,
                )
            };
            if level == libc::SOL_SOCKET && kind == libc::SCM_RIGHTS {
                // SAFETY: CMSG_LEN only computes a size.
                let data_bytes = length.saturating_sub(unsafe { libc::CMSG_LEN(0) } as usize);
                // SAFETY: see above; the data follows the header inside the buffer.
                let data = unsafe { libc::CMSG_DATA(cmsg) };
                for index in 0..data_bytes / size_of::<libc::c_int>() {
                    // SAFETY: `index` is below the count of whole descriptors in the data;
                    // the data need not be aligned for c_int, hence the unaligned read.
                    let raw = unsafe { data.cast::<libc::c_int>().add(index).read_unaligned() };
                    if raw >= 0 {
                        // SAFETY:
                        // - the kernel has just installed `raw` in this process's
                        //   descriptor table for this message (SCM_RIGHTS); no other code
                        //   knows it, so nothing else owns or closes it;
                        // - it is wrapped exactly once (one iteration per descriptor).
                        fds.push(unsafe { OwnedFd::from_raw_fd(raw) });
                    }
                }
            }
            // SAFETY: see above.
            cmsg = unsafe { libc::CMSG_NXTHDR(&header, cmsg) };
        }
        // From here on, dropping `fds` closes every descriptor that arrived.
        if header.msg_flags & libc::MSG_CTRUNC != 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "the peer's control message was truncated (more than {MAX_FDS_PER_MESSAGE} \
                     descriptors, or something other than descriptors); the {} descriptors \
                     that arrived were closed",
                    fds.len()
                ),
            ));
        }
        if fds.len() > max_fds {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "the peer sent {} descriptors where at most {max_fds} were expected; all \
                     were closed",
                    fds.len()
                ),
            ));
        }
        Ok((received, fds))
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use std::sync::atomic::Ordering;

        #[test]
        fn a_segment_mapped_twice_shares_its_words() {
            let (first, fd) = MappedWords::create("axle-test", 4096).unwrap();
            let second = MappedWords::map(fd.as_fd(), 4096).unwrap();
            first.words()[3].store(0xabcd, Ordering::Release);
            assert_eq!(second.words()[3].load(Ordering::Acquire), 0xabcd);
            assert_eq!(second.words().len(), 512);
        }

        #[test]
        fn a_segment_of_another_size_is_refused() {
            let (_, fd) = MappedWords::create("axle-test", 4096).unwrap();
            assert!(matches!(
                MappedWords::map(fd.as_fd(), 8192),
                Err(SegmentError::Size { .. })
            ));
        }

        #[test]
        fn an_unsealed_file_is_refused() {
            let name = CString::new("axle-test-unsealed").unwrap();
            let fd = memfd_create(&name, MemFdCreateFlag::MFD_CLOEXEC).unwrap();
            nix::unistd::ftruncate(&fd, 4096).unwrap();
            assert!(matches!(
                MappedWords::map(fd.as_fd(), 4096),
                Err(SegmentError::NotSealed)
            ));
        }

        #[test]
        fn descriptors_sent_with_scm_rights_arrive_owned() {
            use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
            let (left, right) = UnixStream::pair().unwrap();
            let (mapped, fd) = MappedWords::create("axle-test", 4096).unwrap();
            mapped.words()[0].store(7, Ordering::Release);
            let raw = [fd.as_raw_fd()];
            sendmsg::<()>(
                left.as_raw_fd(),
                &[std::io::IoSlice::new(b"x")],
                &[ControlMessage::ScmRights(&raw)],
                MsgFlags::empty(),
                None,
            )
            .unwrap();
            let mut byte = [0u8; 1];
            let (n, fds) = receive_with_fds(&right, &mut byte, 1).unwrap();
            assert_eq!((n, fds.len()), (1, 1));
            let other = MappedWords::map(fds[0].as_fd(), 4096).unwrap();
            assert_eq!(other.words()[0].load(Ordering::Acquire), 7);
        }
    }
}

#[cfg(all(test, not(loom)))]
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
    fn release_returns_the_frames() {
        let (_, mut allocator, region) = setup(64, 5 * FRAME_SIZE);
        let free = allocator.free_frames();
        region.release(&mut allocator).unwrap();
        assert_eq!(allocator.free_frames(), free + 5);
    }
}
