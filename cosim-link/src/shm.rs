//! Shared-memory segments: the one place of this crate's `unsafe`, and the one module of the
//! stack that maps memory (the emulator and the host's driver build on it and hold no
//! `unsafe` for it).
//!
//! Across processes, host physical memory, device memory, the register page and the turn page
//! are anonymous shared-memory segments: a memfd (`memfd_create`, close-on-exec, sized up
//! front, sealed against shrinking and growing; [`sealed_memfd`]), mapped shared and
//! read-write, and handed to the peer over the emulator's Unix socket with SCM_RIGHTS
//! ([`send_with_fds`] sends such descriptors, [`receive_with_fds`] takes them in). Nothing is
//! named in `/dev/shm`, so a crash leaves nothing behind.
//!
//! A mapping is never exposed as a `&[u8]`, since the other process writes it concurrently.
//! It is either
//!
//! - [`MappedWords`]: a slice of [`AtomicU64`] (host physical memory, the turn page, the
//!   emulator's device memory and register page; also private anonymous memory, the
//!   in-process emulator's device memory), or
//! - [`MappedVolatile`]: volatile loads and stores of whole aligned values, as a driver
//!   touches a device's memory (the host driver's device-memory and register windows).
//!
//! A memory file can also be an **image**, written once and then shared copy-on-write
//! ([`image_memfd`], [`freeze_image`], [`MappedWords::copy_on_write`]): `axle eval` loads a
//! large data set into device memory once and gives each of its runs a private view of it,
//! which costs pages only where the run writes.
//!
//! Its one submodule, [`futex`], is how a process sleeps on a word of such a mapping until the
//! other process changes it and wakes it (the turn page's wait, `crate::turn`).
pub mod futex;

use crate::phys::{SharedWords, WORD_SIZE};
use memmap2::{MmapOptions, MmapRaw};
use nix::fcntl::{fcntl, FcntlArg, SealFlag};
use nix::sys::memfd::{memfd_create, MemFdCreateFlag};
use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
use std::ffi::CString;
use std::io::{IoSlice, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;
use volatile::VolatilePtr;
use zerocopy::{FromBytes, IntoBytes};

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
    /// An image to be mapped copy-on-write is not sealed against writes
    /// ([`freeze_image`]): its pages could change under the copies.
    #[error("image is not sealed against writes (F_SEAL_WRITE): its pages could change under its copy-on-write views")]
    NotFrozen,
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
    sized_memfd(
        name,
        bytes,
        SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL,
    )
}

/// An anonymous memory file of `bytes` bytes (zero-filled, sparse) for an image: sealed
/// against shrinking and growing, and still writable; map it with [`MappedWords::map`], write
/// it, drop the mapping, then [`freeze_image`] it.
pub fn image_memfd(name: &str, bytes: u64) -> Result<OwnedFd, SegmentError> {
    sized_memfd(name, bytes, SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW)
}

/// A close-on-exec memory file of `bytes` bytes with `seals` added.
fn sized_memfd(name: &str, bytes: u64, seals: SealFlag) -> Result<OwnedFd, SegmentError> {
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
    fcntl(fd.as_raw_fd(), FcntlArg::F_ADD_SEALS(seals)).map_err(system("sealing a memfd"))?;
    Ok(fd)
}

/// Seals the image `fd` ([`image_memfd`]) against writes and further seals: from now on its
/// bytes never change, and it can be mapped copy-on-write ([`MappedWords::copy_on_write`]).
/// Fails (EBUSY) while a shared writable mapping of it exists.
pub fn freeze_image(fd: BorrowedFd<'_>) -> Result<(), SegmentError> {
    fcntl(
        fd.as_raw_fd(),
        FcntlArg::F_ADD_SEALS(SealFlag::F_SEAL_WRITE | SealFlag::F_SEAL_SEAL),
    )
    .map_err(system("sealing an image against writes"))?;
    Ok(())
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
    if SealFlag::from_bits_truncate(seals) & SealFlag::F_SEAL_SHRINK != SealFlag::F_SEAL_SHRINK {
        return Err(SegmentError::NotSealed);
    }
    Ok(())
}

/// Checks the segment `fd` ([`check_segment`]) and maps all of it, shared and read-write.
fn map_segment(
    fd: BorrowedFd<'_>,
    bytes: u64,
    what: &'static str,
) -> Result<MmapRaw, SegmentError> {
    check_segment(fd, bytes)?;
    let length = usize::try_from(bytes).map_err(|_| SegmentError::Size {
        expected: bytes,
        actual: bytes,
    })?;
    MmapOptions::new()
        .len(length)
        .map_raw(fd.as_raw_fd())
        .map_err(|error| SegmentError::System { what, error })
}

/// A shared-memory segment (or private anonymous memory) mapped as 8-byte atomic words.
///
/// # Invariants
///
/// - `map` is a read-write mapping of at least `words * 8` bytes, page-aligned (hence
///   8-byte aligned), alive and never remapped until `self` drops;
/// - it is either private anonymous memory ([`MappedWords::anonymous`]), a shared mapping
///   of a file sealed against shrinking, or a private (copy-on-write) mapping of a file
///   sealed against shrinking and writes ([`MappedWords::copy_on_write`]), so every page of
///   the mapping stays backed for as long as the mapping exists.
pub struct MappedWords {
    map: MmapRaw,
    words: usize,
}

impl core::fmt::Debug for MappedWords {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MappedWords")
            .field("bytes", &self.len())
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
        let map = map_segment(fd, bytes, "mapping a segment")?;
        // INVARIANT: a shared read-write mapping of the whole file (checked: its size, a
        // multiple of 8, and its seal against shrinking); mmap returns page-aligned addresses.
        Ok(MappedWords {
            words: map.len() / 8,
            map,
        })
    }

    /// `bytes` (rounded up to whole words) of zeroed memory private to this process: no file,
    /// nothing to hand to a peer.
    pub fn anonymous(bytes: u64) -> Result<MappedWords, SegmentError> {
        let words = usize::try_from(bytes.div_ceil(WORD_SIZE))
            .ok()
            .filter(|words| words.checked_mul(8).is_some())
            .ok_or(SegmentError::Size {
                expected: bytes,
                actual: 0,
            })?;
        let map = MmapOptions::new()
            .len(words.max(1) * 8)
            .map_anon()
            .map_err(|error| SegmentError::System {
                what: "mapping anonymous memory",
                error,
            })?;
        // A hint, not a requirement: back the mapping with transparent huge pages where the
        // kernel allows them (`madvise` mode, the common default, only for regions that ask).
        // Device memory is read all over by the kernels (an SSSP round streams its 9 MiB of
        // graph and distances); with 4 KiB pages that is a TLB miss every few reads and a page
        // fault per page first touched (docs/testing.md measures it). A kernel without THP
        // refuses the advice (EINVAL): the mapping then stays on small pages, as before.
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        // INVARIANT: a fresh read-write anonymous mapping of at least words * 8 bytes (mmap
        // rejects a zero length, hence the max), page-aligned, private to this process.
        Ok(MappedWords {
            map: MmapRaw::from(map),
            words,
        })
    }

    /// A private copy-on-write view of the frozen image `fd` ([`freeze_image`]), which must be
    /// `bytes` bytes long (a multiple of 8): it reads as the image, and a write changes this
    /// view only (the kernel copies the page on the first write), never the image nor its
    /// other views. Pages neither written nor read cost nothing.
    pub fn copy_on_write(fd: BorrowedFd<'_>, bytes: u64) -> Result<MappedWords, SegmentError> {
        check_segment(fd, bytes)?;
        let seals = fcntl(fd.as_raw_fd(), FcntlArg::F_GET_SEALS)
            .map_err(system("reading the seals of an image"))?;
        if SealFlag::from_bits_truncate(seals) & SealFlag::F_SEAL_WRITE != SealFlag::F_SEAL_WRITE {
            return Err(SegmentError::NotFrozen);
        }
        let length = usize::try_from(bytes).map_err(|_| SegmentError::Size {
            expected: bytes,
            actual: bytes,
        })?;
        // SAFETY: `map_copy` is unsafe because the file could change under a mapping that
        // hands out `&mut [u8]`. The file is sealed against shrinking and writes (checked
        // above), so its bytes never change and its pages stay backed; and the mapping is
        // turned into an `MmapRaw` at once, so no reference to its bytes is ever formed (the
        // only access is through `words`' atomics).
        let map = unsafe { MmapOptions::new().len(length).map_copy(fd.as_raw_fd()) }.map_err(
            |error| SegmentError::System {
                what: "mapping an image copy-on-write",
                error,
            },
        )?;
        // INVARIANT: a private read-write mapping of the whole file (size and seals checked),
        // page-aligned.
        Ok(MappedWords {
            words: length / 8,
            map: MmapRaw::from(map),
        })
    }

    /// Locks the segment's pages in memory (`mlock`), as a driver pins DMA memory.
    pub fn lock(&self) -> std::io::Result<()> {
        self.map.lock()
    }

    /// Locks the segment's pages in memory as they are first touched (`mlock2` with
    /// `MLOCK_ONFAULT`): those already resident at once, every other one when a fault brings
    /// it in, without populating the whole segment up front. The whole segment counts against
    /// `RLIMIT_MEMLOCK` all the same.
    pub fn lock_on_fault(&self) -> std::io::Result<()> {
        // SAFETY: `mlock2` reads and writes no memory of this process: it only marks the
        // pages of `[pointer, pointer + len)`, a range inside this live mapping (type
        // invariant), to stay resident; the mapping's contents and validity are unchanged.
        let result = unsafe {
            nix::libc::mlock2(
                self.map.as_ptr().cast::<nix::libc::c_void>(),
                self.map.len(),
                nix::libc::MLOCK_ONFAULT,
            )
        };
        if result == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// Bytes of the segment.
    pub fn len(&self) -> u64 {
        (self.words as u64) * WORD_SIZE
    }

    /// Whether the segment has no bytes.
    pub fn is_empty(&self) -> bool {
        self.words == 0
    }

    /// The segment as words.
    #[inline]
    pub fn words(&self) -> &[AtomicU64] {
        // SAFETY:
        // - the pointer is page-aligned, so aligned for `AtomicU64`, and non-null;
        // - `words * 8` bytes from it lie in one live mapping (type invariant) that stays
        //   mapped while the returned borrow of `self` lives, and every page stays backed
        //   (anonymous memory, or a file sealed against shrinking);
        // - `AtomicU64` has the size and validity of `u64`, and every bit pattern is a
        //   valid `u64`;
        // - other processes write this memory concurrently: that is sound through
        //   atomics, which is all this slice allows (no `&u64`/`&[u8]` is ever formed).
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().cast::<AtomicU64>(), self.words) }
    }
}

/// Asks the CPU to bring the cache line holding `word` (a word of a mapping, or any word)
/// into its caches: `prefetcht0` on x86-64, nothing elsewhere. A hint: it reads and writes
/// nothing a program can see. The emulator's device memory hints the kernels' gathers with it.
#[inline(always)]
pub fn prefetch_line(word: &std::sync::atomic::AtomicU64) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: `_mm_prefetch` is unsafe only for its `#[target_feature(enable = "sse")]`:
        // SSE is part of the x86-64 baseline, so every x86-64 CPU has it. A prefetch moves no
        // data the program sees and never faults, whatever the address (here a live word).
        unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(word).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = word;
}

/// Asks the CPU to bring the cache line holding `value` into its caches, as
/// [`prefetch_line`] does for a word: for a loop that knows which entries of a large table it
/// will touch next (the host runtime's per-record bookkeeping). A hint: it reads and writes
/// nothing a program can see.
#[inline(always)]
pub fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: as in `prefetch_line`: SSE is part of the x86-64 baseline, and a prefetch
        // moves no data the program sees and never faults (here the address of a live value).
        unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(value).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// A shared-memory segment mapped for volatile access, as a kernel driver maps a device's
/// memory (`ioremap`/`memremap`) and touches it only through `readq`/`writeq`-style
/// accessors: each access is one volatile load or store of a whole, aligned value, never a
/// reference into the mapping. The host's driver builds its device-memory window on it
/// (`host_driver::mmio`).
///
/// # Invariants
///
/// `map` is a shared, read-write, page-aligned mapping of `map.len()` bytes of a segment
/// sealed against shrinking, alive and never remapped until `self` drops.
pub struct MappedVolatile {
    map: MmapRaw,
}

impl core::fmt::Debug for MappedVolatile {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MappedVolatile")
            .field("bytes", &self.map.len())
            .finish()
    }
}

impl MappedVolatile {
    /// Maps the segment `fd`, which must be `bytes` bytes long (a multiple of 8) and sealed
    /// against shrinking (the rules of [`MappedWords::map`]); `what` names it in an error.
    pub fn map(
        fd: BorrowedFd<'_>,
        bytes: u64,
        what: &'static str,
    ) -> Result<MappedVolatile, SegmentError> {
        let map = map_segment(fd, bytes, what)?;
        // INVARIANT: shared read-write mapping of the checked, sealed segment.
        Ok(MappedVolatile { map })
    }

    /// Bytes of the mapping.
    pub fn len(&self) -> u64 {
        self.map.len() as u64
    }

    /// Whether the mapping has no bytes.
    pub fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    /// A volatile pointer to the `T` at byte `offset`, if a whole `T` fits there and `offset`
    /// is aligned for it. `T` is a plain value (`u8`, `u64`: [`FromBytes`] and [`IntoBytes`]),
    /// so whatever the peer wrote reads as a valid `T` and a `T` written has no padding.
    pub fn at<T: FromBytes + IntoBytes + Copy>(&self, offset: usize) -> Option<VolatilePtr<'_, T>> {
        let end = offset.checked_add(size_of::<T>())?;
        if end > self.map.len() || offset % align_of::<T>() != 0 {
            return None;
        }
        let pointer = NonNull::new(self.map.as_mut_ptr().wrapping_add(offset).cast::<T>())?;
        // SAFETY:
        // - `pointer` lies inside the live mapping with room for a whole `T` and is aligned
        //   for it (checked above; the mapping itself is page-aligned), and the sealed file
        //   keeps every page backed;
        // - the mapping outlives the returned pointer, whose lifetime is tied to `&self`;
        // - `T: FromBytes`, valid for every bit pattern, so a volatile read of memory the
        //   peer writes is a valid value; `T: IntoBytes`, so a write stores no padding;
        // - no reference into the mapping is ever formed; the peer process accesses it too,
        //   which volatile accesses to shared memory tolerate.
        Some(unsafe { VolatilePtr::new(pointer) })
    }
}

impl SharedWords for MappedWords {
    fn words(&self) -> &[AtomicU64] {
        MappedWords::words(self)
    }
}

/// Sends `parts` in order on `socket` with `fds` attached to the first byte (SCM_RIGHTS); what
/// the kernel did not take at once follows with plain writes. The sending half of
/// [`receive_with_fds`], for the framed control messages of the attach and of
/// `axle bench ring`.
pub fn send_with_fds(
    socket: &UnixStream,
    parts: &[&[u8]],
    fds: &[BorrowedFd<'_>],
) -> std::io::Result<()> {
    let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    let rights = [ControlMessage::ScmRights(&raw)];
    let control: &[ControlMessage<'_>] = if raw.is_empty() { &[] } else { &rights };
    let slices: Vec<IoSlice<'_>> = parts.iter().map(|part| IoSlice::new(part)).collect();
    let sent = sendmsg::<()>(
        socket.as_raw_fd(),
        &slices,
        control,
        MsgFlags::MSG_NOSIGNAL,
        None,
    )
    .map_err(std::io::Error::from)?;
    // The descriptors went with the first byte; the rest, if the kernel took less, follows.
    let rest: Vec<u8> = parts
        .iter()
        .flat_map(|part| part.iter())
        .copied()
        .skip(sent)
        .collect();
    if !rest.is_empty() {
        let mut writer = socket;
        writer.write_all(&rest)?;
    }
    Ok(())
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
    // SAFETY: this comment covers the whole cmsg walk below. The CMSG_* functions walk the
    // `msg_controllen` bytes the kernel wrote into `control`, which stays alive and
    // unmodified during the walk; each header they return lies inside that buffer, and its
    // data holds `cmsg_len - CMSG_LEN(0)` bytes (the kernel shortens `cmsg_len` when it
    // truncates).
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

    /// Anonymous memory (device memory in-process) asks for transparent huge pages: its
    /// mapping carries the advice (`hg` among the `VmFlags` of `/proc/self/smaps`), which a
    /// kernel in the common `madvise` mode needs before it backs a region with huge pages.
    #[cfg(target_os = "linux")]
    #[test]
    fn anonymous_memory_is_advised_to_use_huge_pages() {
        let words = MappedWords::anonymous(8 << 20).unwrap();
        let start = words.words().as_ptr() as usize;
        let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
            eprintln!("skipped: /proc/self/smaps cannot be read here");
            return;
        };
        let mut inside = false;
        let mut flags = None;
        for line in smaps.lines() {
            let range = line.split_whitespace().next().and_then(|range| {
                let (low, high) = range.split_once('-')?;
                Some((
                    usize::from_str_radix(low, 16).ok()?,
                    usize::from_str_radix(high, 16).ok()?,
                ))
            });
            if let Some((low, high)) = range {
                inside = (low..high).contains(&start);
            } else if inside {
                if let Some(rest) = line.strip_prefix("VmFlags:") {
                    flags = Some(
                        rest.split_whitespace()
                            .map(str::to_owned)
                            .collect::<Vec<_>>(),
                    );
                }
            }
        }
        let Some(flags) = flags else {
            eprintln!("skipped: this kernel's smaps has no VmFlags for the mapping");
            return;
        };
        assert!(flags.iter().any(|flag| flag == "hg"), "VmFlags {flags:?}");
    }

    /// A frozen image reads the same in every copy-on-write view; a write to one view
    /// changes neither the image nor another view; an image not frozen is refused, and one
    /// cannot be frozen while a shared writable mapping of it exists.
    #[test]
    fn copy_on_write_views_of_a_frozen_image_read_it_and_keep_their_writes_private() {
        let fd = image_memfd("axle-test-image", 8192).unwrap();
        let writer = MappedWords::map(fd.as_fd(), 8192).unwrap();
        writer.words()[7].store(77, Ordering::Relaxed);
        assert!(matches!(
            MappedWords::copy_on_write(fd.as_fd(), 8192),
            Err(SegmentError::NotFrozen)
        ));
        assert!(
            freeze_image(fd.as_fd()).is_err(),
            "frozen under a writable mapping"
        );
        drop(writer);
        freeze_image(fd.as_fd()).unwrap();
        assert!(
            MappedWords::map(fd.as_fd(), 8192).is_err(),
            "a frozen image cannot be mapped shared and writable"
        );
        let first = MappedWords::copy_on_write(fd.as_fd(), 8192).unwrap();
        let second = MappedWords::copy_on_write(fd.as_fd(), 8192).unwrap();
        assert_eq!(first.words()[7].load(Ordering::Relaxed), 77);
        first.words()[7].store(1, Ordering::Relaxed);
        first.words()[1000].store(2, Ordering::Relaxed);
        assert_eq!(first.words()[7].load(Ordering::Relaxed), 1);
        assert_eq!(second.words()[7].load(Ordering::Relaxed), 77);
        assert_eq!(second.words()[1000].load(Ordering::Relaxed), 0);
        let third = MappedWords::copy_on_write(fd.as_fd(), 8192).unwrap();
        assert_eq!(
            third.words()[7].load(Ordering::Relaxed),
            77,
            "the image is unchanged"
        );
        assert!(matches!(
            MappedWords::copy_on_write(fd.as_fd(), 4096),
            Err(SegmentError::Size { .. })
        ));
    }

    /// `VmLck` of `/proc/self/status`, in KiB.
    fn locked_kib() -> u64 {
        std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find_map(|line| line.strip_prefix("VmLck:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    #[test]
    fn a_segment_locked_on_fault_counts_as_locked_and_stays_usable() {
        let (segment, _fd) = MappedWords::create("axle-test-lock", 64 << 10).unwrap();
        let before = locked_kib();
        segment.lock_on_fault().unwrap();
        assert!(locked_kib() >= before + 64, "{before} KiB before");
        segment.words()[100].store(5, Ordering::Release);
        assert_eq!(segment.words()[100].load(Ordering::Acquire), 5);
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
