//! Device memory as a segment of 8-byte atomic words.
//!
//! In-process the segment is an anonymous private mapping; when the emulator runs as its own
//! process (`axle emu`) it is an anonymous memory file (memfd, sealed against shrinking) that
//! the attached host maps too, for its untimed set-up. Either way the emulator sees the memory
//! as a slice of [`AtomicU64`]: sound over memory another process may write, and never a
//! `&[u8]`. [`crate::dram::DeviceDram`] builds byte-granular, bounds-checked access on it.
//!
//! The mapping itself is the transport's ([`cosim_link::shm::MappedWords`], which holds the
//! `unsafe` of every mapping); this module only keeps the memory file to hand to a host.

use cosim_link::shm::MappedWords;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::AtomicU64;

/// Device memory, mapped.
///
/// # Invariants
///
/// When `fd` is `Some`, `words` is a shared mapping of that memory file (so a host that maps
/// the file sees the same memory).
pub struct DeviceSegment {
    words: MappedWords,
    fd: Option<OwnedFd>,
}

impl core::fmt::Debug for DeviceSegment {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DeviceSegment")
            .field("bytes", &self.words.len())
            .field("shared", &self.fd.is_some())
            .finish()
    }
}

impl DeviceSegment {
    /// `bytes` (rounded up to whole words) of zeroed memory private to this process.
    pub fn anonymous(bytes: u64) -> std::io::Result<DeviceSegment> {
        let words = MappedWords::anonymous(bytes).map_err(std::io::Error::other)?;
        Ok(DeviceSegment { words, fd: None })
    }

    /// `bytes` (rounded up to whole words) of zeroed memory in an anonymous, sealed memory
    /// file that can be handed to another process ([`DeviceSegment::fd`]).
    pub fn shared(bytes: u64) -> std::io::Result<DeviceSegment> {
        let length = bytes
            .checked_next_multiple_of(8)
            .ok_or_else(|| std::io::Error::other(format!("{bytes} bytes of device memory")))?;
        let (words, fd) =
            MappedWords::create("axle-device-memory", length).map_err(std::io::Error::other)?;
        // INVARIANT: `words` maps the memory file `fd`, just created, shared.
        Ok(DeviceSegment {
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
        self.words.len()
    }

    /// Whether the segment has no bytes.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The memory as words.
    pub fn words(&self) -> &[AtomicU64] {
        self.words.words()
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
