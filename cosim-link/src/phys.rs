//! The memory that stands for host physical memory.
//!
//! The words live in a [`SharedWords`] store: in-process (and in the loom models) a boxed slice
//! of 8-byte atomic words ([`OwnedWords`]); across processes a mapping of the anonymous
//! shared-memory segment that the host passes to the emulator ([`crate::shm::MappedWords`], not
//! under loom). Those two are matched statically (a mapping comes in through
//! [`PhysicalMemory::from_mapped`]), so that an access inlines down to its atomic instruction;
//! any other store goes through a trait object ([`PhysicalMemory::from_store`]). A host physical address
//! ([`HostPhysAddr`]) is a byte offset in it. Nothing ever forms a `&[u8]` into it: the device
//! (the emulator's DMA engine) writes it concurrently, so every access is an atomic load or
//! store of one aligned 8-byte word, and every access is bounds-checked.
//!
//! Who uses which accessor (the edge names are DESIGN.md section 5's):
//!
//! - the emulator lands DMA data with [`PhysicalMemory::write_words`] (Relaxed stores: payload
//!   data, edge D1; metadata records, edge D3);
//! - it publishes tails with [`PhysicalMemory::store_u64`] and [`Ordering::Release`] (payload
//!   tail, edge D2; metadata tail, edge D4), so everything it wrote before is visible to a host
//!   that observes the new tail;
//! - the host loads the metadata tail with [`PhysicalMemory::load_u64`] and
//!   [`Ordering::Acquire`] (edge H1), then reads records and payloads with
//!   [`PhysicalMemory::read_words`] (Relaxed loads), all of which the Acquire load ordered after
//!   the device's writes.

use crate::sync::{AtomicU64, Ordering};
use shared_abi::HostPhysAddr;

/// Bytes in one word of physical memory: the unit (and alignment) of every access.
pub const WORD_SIZE: u64 = 8;

/// An access that physical memory refused; nothing was read or written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PhysError {
    /// Some byte of the access lies outside physical memory.
    #[error("access of {length} bytes at host physical address {:#x} is outside physical memory", .address.0)]
    OutOfRange {
        /// First byte of the access.
        address: HostPhysAddr,
        /// Bytes of the access.
        length: u64,
    },
    /// The address is not 8-byte aligned.
    #[error("host physical address {:#x} is not 8-byte aligned", .address.0)]
    Misaligned {
        /// The address.
        address: HostPhysAddr,
    },
    /// A length (of an access, or of the memory itself) is not a whole number of words.
    #[error("length {length} is not a multiple of 8 bytes")]
    PartialWord {
        /// The length.
        length: u64,
    },
}

/// Where the words of physical memory live.
///
/// An implementation MUST return the same slice, of the same length, on every call for as
/// long as it lives. A slice of atomics is sound over memory that another process writes
/// concurrently (every access is an atomic instruction on one aligned word); nothing else may
/// be formed over such memory.
pub trait SharedWords: Send + Sync {
    /// The words.
    fn words(&self) -> &[AtomicU64];
}

/// Words owned by this process: the in-process store, and the only one under loom.
pub struct OwnedWords(Box<[AtomicU64]>);

impl core::fmt::Debug for OwnedWords {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("OwnedWords")
            .field("words", &self.0.len())
            .finish()
    }
}

impl OwnedWords {
    /// `words` zeroed words.
    pub fn zeroed(words: usize) -> OwnedWords {
        OwnedWords((0..words).map(|_| AtomicU64::new(0)).collect())
    }
}

impl SharedWords for OwnedWords {
    fn words(&self) -> &[AtomicU64] {
        &self.0
    }
}

/// Where a [`PhysicalMemory`]'s words live. The two stores the stack uses are matched
/// statically, so that the accessors inline down to the atomic instruction (no virtual call
/// per access on the ring's hot paths); any other store goes through the trait object.
enum Store {
    /// Words owned by this process ([`PhysicalMemory::new`]).
    Owned(OwnedWords),
    /// A mapped shared-memory segment ([`PhysicalMemory::from_mapped`]).
    #[cfg(not(loom))]
    Mapped(crate::shm::MappedWords),
    /// Any other store ([`PhysicalMemory::from_store`]).
    Other(Box<dyn SharedWords>),
}

impl Store {
    #[inline]
    fn words(&self) -> &[AtomicU64] {
        match self {
            Store::Owned(words) => &words.0,
            #[cfg(not(loom))]
            Store::Mapped(words) => words.words(),
            Store::Other(store) => store.words(),
        }
    }
}

/// Host "physical" memory: `len()` bytes as 8-byte atomic words.
///
/// # Invariants
///
/// `length == store.words().len() * 8` is the size in bytes (it fits in a `u64`), and
/// `store` returns the same slice on every call.
pub struct PhysicalMemory {
    store: Store,
    length: u64,
}

impl core::fmt::Debug for PhysicalMemory {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PhysicalMemory")
            .field("bytes", &self.len())
            .finish_non_exhaustive()
    }
}

impl PhysicalMemory {
    /// `bytes` bytes of zeroed physical memory; `bytes` must be a multiple of 8.
    pub fn new(bytes: u64) -> Result<PhysicalMemory, PhysError> {
        if bytes % WORD_SIZE != 0 {
            return Err(PhysError::PartialWord { length: bytes });
        }
        let words = usize::try_from(bytes / WORD_SIZE).map_err(|_| PhysError::OutOfRange {
            address: HostPhysAddr(0),
            length: bytes,
        })?;
        // INVARIANT: words * 8 == bytes, a u64.
        Ok(PhysicalMemory {
            store: Store::Owned(OwnedWords::zeroed(words)),
            length: bytes,
        })
    }

    /// Physical memory over the words of `store` (for example a mapped shared-memory segment;
    /// [`PhysicalMemory::from_mapped`] is the faster form of that one).
    pub fn from_store(store: Box<dyn SharedWords>) -> Result<PhysicalMemory, PhysError> {
        PhysicalMemory::over(Store::Other(store))
    }

    /// Physical memory over a mapped shared-memory segment (what the host shares with the
    /// emulator or the bench's device process).
    #[cfg(not(loom))]
    pub fn from_mapped(words: crate::shm::MappedWords) -> Result<PhysicalMemory, PhysError> {
        PhysicalMemory::over(Store::Mapped(words))
    }

    fn over(store: Store) -> Result<PhysicalMemory, PhysError> {
        let words = store.words().len();
        let length = u64::try_from(words)
            .ok()
            .and_then(|words| words.checked_mul(WORD_SIZE))
            .ok_or(PhysError::OutOfRange {
                address: HostPhysAddr(0),
                length: u64::MAX,
            })?;
        // INVARIANT: length == words * 8, checked; every store returns a stable slice.
        Ok(PhysicalMemory { store, length })
    }

    /// Bytes of physical memory.
    pub fn len(&self) -> u64 {
        self.length
    }

    /// Whether the memory has no bytes at all.
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// The words of the access `[address, address + length)`, after checking alignment, whole
    /// words and bounds: what every accessor here goes through, and what a caller that
    /// accesses the same range many times resolves once (host-driver's resolved regions, the
    /// translation a DMA engine caches). They are atomics: nothing but an atomic load or store
    /// can touch them.
    #[inline]
    pub fn words(&self, address: HostPhysAddr, length: u64) -> Result<&[AtomicU64], PhysError> {
        if address.0 % WORD_SIZE != 0 {
            return Err(PhysError::Misaligned { address });
        }
        if length % WORD_SIZE != 0 {
            return Err(PhysError::PartialWord { length });
        }
        let out_of_range = PhysError::OutOfRange { address, length };
        let end = address.0.checked_add(length).ok_or(out_of_range)?;
        if end > self.len() {
            return Err(out_of_range);
        }
        // Both are at most words.len(), a usize.
        let first = usize::try_from(address.0 / WORD_SIZE).map_err(|_| out_of_range)?;
        let last = usize::try_from(end / WORD_SIZE).map_err(|_| out_of_range)?;
        self.store.words().get(first..last).ok_or(out_of_range)
    }

    /// Loads the word at `address` (8-byte aligned).
    #[inline]
    pub fn load_u64(&self, address: HostPhysAddr, ordering: Ordering) -> Result<u64, PhysError> {
        let word = self.words(address, WORD_SIZE)?.first();
        word.map(|word| word.load(ordering))
            .ok_or(PhysError::OutOfRange {
                address,
                length: WORD_SIZE,
            })
    }

    /// Stores `value` into the word at `address` (8-byte aligned).
    #[inline]
    pub fn store_u64(
        &self,
        address: HostPhysAddr,
        value: u64,
        ordering: Ordering,
    ) -> Result<(), PhysError> {
        let word = self.words(address, WORD_SIZE)?.first();
        word.map(|word| word.store(value, ordering))
            .ok_or(PhysError::OutOfRange {
                address,
                length: WORD_SIZE,
            })
    }

    /// Writes `data` (a whole number of little-endian words) at `address` with Relaxed stores,
    /// lowest address first: the DMA data writes (edges D1, D3). Fails, writing nothing, when
    /// any byte lies outside or the access is misaligned.
    #[inline]
    pub fn write_words(&self, address: HostPhysAddr, data: &[u8]) -> Result<(), PhysError> {
        let words = self.words(address, data.len() as u64)?;
        for (word, bytes) in words.iter().zip(data.chunks_exact(8)) {
            let mut value = [0u8; 8];
            value.copy_from_slice(bytes);
            word.store(u64::from_le_bytes(value), Ordering::Relaxed);
        }
        Ok(())
    }

    /// Reads `buffer.len()` bytes (a whole number of words) at `address` with Relaxed loads,
    /// lowest address first. Fails, reading nothing, when any byte lies outside or the access is
    /// misaligned.
    #[inline]
    pub fn read_words(&self, address: HostPhysAddr, buffer: &mut [u8]) -> Result<(), PhysError> {
        let words = self.words(address, buffer.len() as u64)?;
        for (word, bytes) in words.iter().zip(buffer.chunks_exact_mut(8)) {
            bytes.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_memory_reads_as_zero() {
        let memory = PhysicalMemory::new(64).unwrap();
        assert_eq!(memory.len(), 64);
        let mut buffer = [0xffu8; 64];
        memory.read_words(HostPhysAddr(0), &mut buffer).unwrap();
        assert_eq!(buffer, [0u8; 64]);
    }

    #[test]
    fn size_that_is_not_whole_words_is_refused() {
        assert_eq!(
            PhysicalMemory::new(12).unwrap_err(),
            PhysError::PartialWord { length: 12 }
        );
    }

    #[test]
    fn words_written_are_read_back_little_endian() {
        let memory = PhysicalMemory::new(64).unwrap();
        let data: Vec<u8> = (1..=16).collect();
        memory.write_words(HostPhysAddr(8), &data).unwrap();
        assert_eq!(
            memory.load_u64(HostPhysAddr(8), Ordering::Acquire).unwrap(),
            u64::from_le_bytes([1, 2, 3, 4, 5, 6, 7, 8])
        );
        let mut back = [0u8; 16];
        memory.read_words(HostPhysAddr(8), &mut back).unwrap();
        assert_eq!(back.to_vec(), data);
        assert_eq!(
            memory.load_u64(HostPhysAddr(0), Ordering::Relaxed).unwrap(),
            0
        );
        assert_eq!(
            memory
                .load_u64(HostPhysAddr(24), Ordering::Relaxed)
                .unwrap(),
            0
        );
    }

    #[test]
    fn store_then_load_returns_the_value() {
        let memory = PhysicalMemory::new(16).unwrap();
        memory
            .store_u64(HostPhysAddr(8), 0xdead_beef, Ordering::Release)
            .unwrap();
        assert_eq!(
            memory.load_u64(HostPhysAddr(8), Ordering::Acquire).unwrap(),
            0xdead_beef
        );
    }

    #[test]
    fn misaligned_address_is_refused() {
        let memory = PhysicalMemory::new(64).unwrap();
        assert_eq!(
            memory.load_u64(HostPhysAddr(4), Ordering::Relaxed),
            Err(PhysError::Misaligned {
                address: HostPhysAddr(4)
            })
        );
        assert_eq!(
            memory.write_words(HostPhysAddr(9), &[0; 8]),
            Err(PhysError::Misaligned {
                address: HostPhysAddr(9)
            })
        );
    }

    #[test]
    fn partial_word_access_is_refused() {
        let memory = PhysicalMemory::new(64).unwrap();
        let mut buffer = [0u8; 12];
        assert_eq!(
            memory.read_words(HostPhysAddr(0), &mut buffer),
            Err(PhysError::PartialWord { length: 12 })
        );
    }

    #[test]
    fn access_past_the_end_is_refused_and_writes_nothing() {
        let memory = PhysicalMemory::new(32).unwrap();
        assert_eq!(
            memory.write_words(HostPhysAddr(16), &[0xaa; 24]),
            Err(PhysError::OutOfRange {
                address: HostPhysAddr(16),
                length: 24
            })
        );
        assert_eq!(
            memory
                .load_u64(HostPhysAddr(16), Ordering::Relaxed)
                .unwrap(),
            0
        );
        assert_eq!(
            memory.store_u64(HostPhysAddr(32), 1, Ordering::Relaxed),
            Err(PhysError::OutOfRange {
                address: HostPhysAddr(32),
                length: 8
            })
        );
    }

    #[test]
    fn wrapping_address_is_out_of_range_not_a_panic() {
        let memory = PhysicalMemory::new(32).unwrap();
        let address = HostPhysAddr(u64::MAX - 7);
        assert_eq!(
            memory.write_words(address, &[0; 16]),
            Err(PhysError::OutOfRange {
                address,
                length: 16
            })
        );
    }
}
