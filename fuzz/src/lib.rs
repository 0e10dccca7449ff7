//! Helpers shared by the fuzz targets: the device memory test double, small input readers,
//! and the kernel decoder targets' common pieces ([`kernel_check`]). Nothing here is fuzzed
//! itself.

/// Device memory for the targets: the firmware's own test double (feature `test-utils`),
/// bounds-checked like the emulator's DRAM.
pub use firmware::testing::FakeDeviceMemory;

pub mod kernel_check;

/// Reads fixed-size pieces off the front of a fuzz input; past its end, zeros.
#[derive(Debug)]
pub struct Bytes<'a> {
    rest: &'a [u8],
}

impl<'a> Bytes<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Bytes<'a> {
        Bytes { rest: data }
    }

    /// The next `N` bytes, zero-padded.
    pub fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let take = self.rest.len().min(N);
        out[..take].copy_from_slice(&self.rest[..take]);
        self.rest = &self.rest[take..];
        out
    }

    /// The next little-endian `u64`.
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.array())
    }

    /// The next byte.
    pub fn u8(&mut self) -> u8 {
        self.array::<1>()[0]
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The bytes not read yet.
    pub fn remaining(&self) -> &'a [u8] {
        self.rest
    }
}
