//! The checking code of every cargo-fuzz target, callable from stable Rust.
//!
//! Each module is one target of `fuzz/` (outside the workspace, nightly, libFuzzer) and holds
//! its whole body as `check(data: &[u8])`: it decodes the raw input exactly as the target
//! receives it (a typed input through `arbitrary::Unstructured`, as `fuzz_target!` does), runs
//! the decoder under test against its model, and panics on a violated property. The targets
//! in `fuzz/fuzz_targets/` are one-line wrappers around these functions, so a fuzz campaign
//! and the stable replay of the kept corpora (`tests/corpus_replay.rs`, run by
//! `cargo test --workspace --release` and so by `.ci/run`) check the same thing.
//!
//! Why a workspace member rather than a library inside `fuzz/`: `fuzz/` has its own workspace
//! and needs nightly and libFuzzer; a stable test run by the workspace's test command can only
//! reach code the workspace builds, and here the checks also get the workspace's lints,
//! formatting and clippy gate.
//!
//! The five kernel decoder targets share one body, [`kernel_check::check`], parameterised by
//! a [`kernel_check::KernelTarget`] per kernel.

pub mod attach_turn;
pub mod command_decode;
pub mod dlrm_decode;
pub mod dma_descriptor;
pub mod flow_control;
pub mod kernel_check;
pub mod metadata_ring;
pub mod opt_decode;
pub mod pagerank_decode;
pub mod shadow_region;
pub mod ssb_decode;
pub mod sssp_decode;

use arbitrary::{Arbitrary, Unstructured};

/// Device memory for the targets: the firmware's own test double (feature `test-utils`),
/// bounds-checked like the emulator's DRAM.
pub use firmware::testing::FakeDeviceMemory;

/// A target's checking function: panics on a violated property.
pub type Check = fn(&[u8]);

/// Every target by its name in `fuzz/Cargo.toml` (and its corpus directory under
/// `fuzz/corpus/`), with its checking function.
pub const TARGETS: &[(&str, Check)] = &[
    ("attach_turn", attach_turn::check),
    ("command_decode", command_decode::check),
    ("dlrm_decode", dlrm_decode::check),
    ("dma_descriptor", dma_descriptor::check),
    ("flow_control", flow_control::check),
    ("metadata_ring", metadata_ring::check),
    ("opt_decode", opt_decode::check),
    ("pagerank_decode", pagerank_decode::check),
    ("shadow_region", shadow_region::check),
    ("ssb_decode", ssb_decode::check),
    ("sssp_decode", sssp_decode::check),
];

/// A typed fuzz input decoded from raw bytes exactly as libfuzzer-sys's `fuzz_target!` decodes
/// one (`None` where it would skip the input): too short for the type's minimum size, or
/// `arbitrary_take_rest` fails.
pub fn arbitrary_input<'a, T: Arbitrary<'a>>(data: &'a [u8]) -> Option<T> {
    if data.len() < T::size_hint(0).0 {
        return None;
    }
    T::arbitrary_take_rest(Unstructured::new(data)).ok()
}

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
