//! Device memory as a mapped segment of 8-byte atomic words: the emulator's only `unsafe`.
//!
//! In-process the segment is an anonymous private mapping; when the emulator runs as its own
//! process (`axle emu`) it is an anonymous memory file (memfd, sealed against shrinking) that
//! the attached host maps too, for its untimed set-up. Either way the emulator sees the memory
//! as a slice of [`AtomicU64`]: sound over memory another process may write, and never a
//! `&[u8]`. [`crate::dram::DeviceDram`] builds byte-granular, bounds-checked access on it.

use memmap2::{MmapOptions, MmapRaw};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::AtomicU64;

/// Device memory, mapped.
///
/// # Invariants
///
/// - `map` is a read-write mapping of exactly `words * 8` bytes, page-aligned (hence
///   8-byte aligned), alive and never remapped until `self` drops;
/// - when `fd` is `Some`, `map` is a shared mapping of that memfd, which is sealed against
///   shrinking, so every page stays backed while mapped.
pub struct DeviceSegment {
    map: MmapRaw,
    words: usize,
    fd: Option<OwnedFd>,
}

impl core::fmt::Debug for DeviceSegment {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DeviceSegment")
            .field("bytes", &self.map.len())
            .field("shared", &self.fd.is_some())
            .finish()
    }
}

/// Bytes rounded up to whole words, as a `usize`.
fn word_count(bytes: u64) -> std::io::Result<usize> {
    usize::try_from(bytes.div_ceil(8))
        .ok()
        .filter(|words| words.checked_mul(8).is_some())
        .ok_or_else(|| std::io::Error::other(format!("{bytes} bytes of device memory")))
}

impl DeviceSegment {
    /// `bytes` (rounded up to whole words) of zeroed memory private to this process.
    pub fn anonymous(bytes: u64) -> std::io::Result<DeviceSegment> {
        let words = word_count(bytes)?;
        let map = MmapRaw::from(MmapOptions::new().len(words.max(1) * 8).map_anon()?);
        // INVARIANT: a fresh read-write anonymous mapping of at least words * 8 bytes
        // (mmap rejects a zero length, hence the max), page-aligned.
        Ok(DeviceSegment {
            map,
            words,
            fd: None,
        })
    }

    /// `bytes` (rounded up to whole words) of zeroed memory in an anonymous, sealed memory
    /// file that can be handed to another process ([`DeviceSegment::fd`]).
    pub fn shared(bytes: u64) -> std::io::Result<DeviceSegment> {
        let words = word_count(bytes)?;
        let length = (words as u64) * 8;
        let fd = cosim_link::shm::sealed_memfd("axle-device-memory", length)
            .map_err(std::io::Error::other)?;
        let map = MmapOptions::new().len(words * 8).map_raw(&fd)?;
        // INVARIANT: a shared read-write mapping of the whole memfd we just created, sized
        // and sealed against shrinking by `sealed_memfd`.
        Ok(DeviceSegment {
            map,
            words,
            fd: Some(fd),
        })
    }

    /// The memory file, when the segment is shared.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.fd.as_ref().map(AsFd::as_fd)
    }

    /// Bytes of the segment.
    pub fn len(&self) -> u64 {
        (self.words as u64) * 8
    }

    /// Whether the segment has no bytes.
    pub fn is_empty(&self) -> bool {
        self.words == 0
    }

    /// The memory as words.
    pub fn words(&self) -> &[AtomicU64] {
        // SAFETY:
        // - the pointer is page-aligned, so aligned for `AtomicU64`, and non-null;
        // - `words * 8` bytes from it are one live mapping (type invariant) that stays mapped
        //   while the returned borrow of `self` lives; a shared segment's file is sealed
        //   against shrinking, so every page stays backed;
        // - `AtomicU64` has the size and validity of `u64`, valid for every bit pattern;
        // - an attached host may write this memory concurrently (its untimed set-up): sound
        //   through atomics, which is all this slice allows.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().cast::<AtomicU64>(), self.words) }
    }
}

impl cosim_link::phys::SharedWords for DeviceSegment {
    fn words(&self) -> &[AtomicU64] {
        DeviceSegment::words(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn an_anonymous_segment_is_zeroed_and_word_sized() {
        let segment = DeviceSegment::anonymous(20).unwrap();
        assert_eq!(segment.words().len(), 3);
        assert!(segment
            .words()
            .iter()
            .all(|w| w.load(Ordering::Relaxed) == 0));
        assert!(segment.fd().is_none());
    }

    #[test]
    fn a_shared_segment_is_seen_by_a_second_mapping() {
        let segment = DeviceSegment::shared(8192).unwrap();
        let other =
            cosim_link::shm::MappedWords::map(segment.fd().unwrap(), segment.len()).unwrap();
        segment.words()[5].store(42, Ordering::Release);
        assert_eq!(other.words()[5].load(Ordering::Acquire), 42);
    }
}
