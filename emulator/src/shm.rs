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
//!
//! A [`DeviceImage`] is device memory loaded once and then frozen: a run's segment can be a
//! private copy-on-write view of it ([`DeviceSegment::copy_of`]), so that several runs over the
//! same large data set (`axle eval`'s OPT and DLRM runs) neither load it again nor hold a copy
//! each: a view reads the image's pages and owns only the pages it writes.

use cosim_link::shm::MappedWords;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::AtomicU64;

/// Where the kernel has one, its setting for transparent huge pages in shared memory files
/// (the bracketed word of `/sys/kernel/mm/transparent_hugepage/shmem_enabled`: `never`,
/// `advise`, `within_size`, `always`, `deny` or `force`).
///
/// The attached host writes device memory through the memory file (`pwrite`), not through a
/// mapping, so the file gets huge pages only where the setting needs no advice (`within_size`,
/// `always`, `force`); elsewhere device memory is on 4 KiB pages, which a data set of a
/// gigabyte (DLRM's) takes measurably longer to load and read than the in-process run's
/// anonymous memory on huge pages (docs/emulator-process.md).
pub fn shared_memory_huge_pages() -> Option<String> {
    let setting =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/shmem_enabled").ok()?;
    chosen(&setting).map(str::to_owned)
}

/// The bracketed (chosen) word of a sysfs list such as `always within_size advise [never]`.
fn chosen(list: &str) -> Option<&str> {
    let start = list.find('[')? + 1;
    let length = list.get(start..)?.find(']')?;
    list.get(start..start + length)
}

/// Whether shared memory files get huge pages without advice under `setting`
/// ([`shared_memory_huge_pages`]).
pub fn shared_memory_on_huge_pages(setting: &str) -> bool {
    matches!(setting, "within_size" | "always" | "force")
}

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

    /// A private copy-on-write view of `image`: it reads as the image did when it was made,
    /// and its writes are its own.
    pub fn copy_of(image: &DeviceImage) -> std::io::Result<DeviceSegment> {
        let words = MappedWords::copy_on_write(image.fd.as_fd(), image.bytes)
            .map_err(std::io::Error::other)?;
        Ok(DeviceSegment { words, fd: None })
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

/// Device memory loaded once and frozen (sealed against writes), for copy-on-write views
/// ([`DeviceSegment::copy_of`]). Its pages are shared by the views; they are freed when the
/// image and its last view are dropped.
pub struct DeviceImage {
    fd: OwnedFd,
    bytes: u64,
}

impl core::fmt::Debug for DeviceImage {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DeviceImage")
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl DeviceImage {
    /// Makes an image of `bytes` bytes (rounded up to whole words), zeroed, that `load`
    /// writes through the segment it is given (a shared mapping of the image), and freezes
    /// it. `load` must drop the segment before it returns (it owns it, and freezing fails
    /// while a writable mapping of the image exists); what `load` returns comes back with
    /// the image.
    pub fn make<T, E: From<std::io::Error>>(
        bytes: u64,
        load: impl FnOnce(DeviceSegment) -> Result<T, E>,
    ) -> Result<(DeviceImage, T), E> {
        let length = bytes.checked_next_multiple_of(8).ok_or_else(|| {
            std::io::Error::other(format!("an image of {bytes} bytes of device memory"))
        })?;
        let fd = cosim_link::shm::image_memfd("axle-device-image", length)
            .map_err(std::io::Error::other)?;
        let words = MappedWords::map(fd.as_fd(), length).map_err(std::io::Error::other)?;
        let loaded = load(DeviceSegment { words, fd: None })?;
        cosim_link::shm::freeze_image(fd.as_fd()).map_err(std::io::Error::other)?;
        Ok((DeviceImage { fd, bytes: length }, loaded))
    }

    /// Bytes of the image.
    pub fn len(&self) -> u64 {
        self.bytes
    }

    /// Whether the image has no bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
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
    fn the_chosen_shared_memory_setting_is_read_from_the_bracketed_word() {
        assert_eq!(
            chosen("always within_size advise [never] deny force\n"),
            Some("never")
        );
        assert_eq!(chosen("[always] within_size advise never"), Some("always"));
        assert_eq!(chosen("always within_size advise never"), None);
        assert_eq!(chosen("always [within_size"), None);
        assert!(!shared_memory_on_huge_pages("never"));
        assert!(!shared_memory_on_huge_pages("advise"));
        assert!(shared_memory_on_huge_pages("within_size"));
        // This machine's own setting, where it has one, is one of the kernel's words.
        if let Some(setting) = shared_memory_huge_pages() {
            let words = ["never", "advise", "within_size", "always", "deny", "force"];
            assert!(words.contains(&setting.as_str()), "{setting}");
        }
    }

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

    /// What `make`'s load wrote is what every copy reads; a copy's writes stay its own.
    #[test]
    fn copies_of_an_image_read_what_its_load_wrote_and_keep_their_writes() {
        let (image, answer) = DeviceImage::make(8192, |segment| {
            segment.words()[3].store(33, Ordering::Relaxed);
            Ok::<_, std::io::Error>(42)
        })
        .unwrap();
        assert_eq!((answer, image.len()), (42, 8192));
        let first = DeviceSegment::copy_of(&image).unwrap();
        let second = DeviceSegment::copy_of(&image).unwrap();
        first.words()[3].store(1, Ordering::Relaxed);
        assert_eq!(first.words()[3].load(Ordering::Relaxed), 1);
        assert_eq!(second.words()[3].load(Ordering::Relaxed), 33);
        assert!(first.fd().is_none(), "a copy is not handed to a host");
    }

    /// A load that keeps its writable segment leaves an image that cannot be frozen: the
    /// make fails rather than hand out copies of memory that may still change.
    #[test]
    fn an_image_whose_load_keeps_its_segment_is_refused() {
        let mut kept = None;
        let made = DeviceImage::make(4096, |segment| {
            kept = Some(segment);
            Ok::<_, std::io::Error>(())
        });
        assert!(made.is_err());
        drop(kept);
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
