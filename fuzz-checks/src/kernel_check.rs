//! Pieces shared by the kernel decoder targets (`sssp_decode`, `pagerank_decode`, `ssb_decode`,
//! `opt_decode`, `dlrm_decode`): range arithmetic for the models (in `u128`, so a model never
//! overflows where the decoder must check), reading words out of a memory snapshot, a device
//! memory that records every write, the field mutations that turn a valid layout into a
//! hostile one, and the check that an item wrote only where its kernel's docs allow.
//!
//! Nothing here calls a kernel's own helpers: the models are written from the module docs.

use crate::FakeDeviceMemory;
use arbitrary::Arbitrary;
use firmware::hal::{DeviceMemory, MemoryFault};
use firmware::kernels::Kernel;
use firmware::FirmwareError;
use shared_abi::DeviceAddress;
use shared_abi::{CommandDescriptor, KernelId};

/// Smallest memory the targets build: `FakeDeviceMemory` decodes the flow-control block at
/// 0x1000..0x1010 on every read that touches it, so a memory must hold all of it.
pub const MIN_MEMORY: u64 = 0x1010;

/// A half-open byte range `[start, end)` in `u128` (no overflow whatever the command says).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// First byte.
    pub start: u128,
    /// One past the last byte.
    pub end: u128,
}

impl Span {
    /// `[start, start + length)`.
    pub fn new(start: u64, length: u128) -> Span {
        Span {
            start: u128::from(start),
            end: u128::from(start) + length,
        }
    }

    /// Whether the range starts at a multiple of `alignment` and ends at or before `size`.
    pub fn fits(&self, alignment: u64, size: u64) -> bool {
        self.start % u128::from(alignment) == 0 && self.end <= u128::from(size)
    }

    /// Whether the two ranges share a byte (an empty range shares none).
    pub fn overlaps(&self, other: &Span) -> bool {
        let (a, b) = (self, other);
        a.start < a.end && b.start < b.end && a.start < b.end && b.start < a.end
    }

    /// Whether `other` lies inside this range.
    pub fn contains(&self, other: &Span) -> bool {
        self.start <= other.start && other.end <= self.end
    }
}

/// The little-endian `u32` at `address` of a memory snapshot (`None` outside it).
pub fn word(memory: &[u8], address: u128) -> Option<u32> {
    let start = usize::try_from(address).ok()?;
    let bytes = memory.get(start..start.checked_add(4)?)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

/// The little-endian `u64` at `address` of a memory snapshot (`None` outside it).
pub fn dword(memory: &[u8], address: u128) -> Option<u64> {
    let start = usize::try_from(address).ok()?;
    let bytes = memory.get(start..start.checked_add(8)?)?;
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}

/// Writes little-endian `u32` words at `address` (set-up; as much as fits).
pub fn put_words(memory: &mut FakeDeviceMemory, address: u64, words: &[u32]) {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    memory.fill(address, &bytes);
}

/// A tiny xorshift for bulk contents (the fuzz input chooses the seed and the structure).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value).
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15 | 1)
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value below `bound` (`bound > 0`).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound
    }
}

/// Bump allocation of a layout: each array at the next multiple of `alignment` after the
/// previous one's end plus a gap.
#[derive(Clone, Debug)]
pub struct Bump {
    next: u64,
}

impl Bump {
    /// An allocator starting at `start`.
    pub fn new(start: u64) -> Bump {
        Bump { next: start }
    }

    /// `length` bytes at a multiple of `alignment`, `gap` bytes (rounded up to `alignment`)
    /// after the previous array.
    pub fn take(&mut self, length: u64, alignment: u64, gap: u64) -> u64 {
        let start = (self.next + gap).next_multiple_of(alignment);
        self.next = start + length;
        start
    }

    /// One past the last allocated byte.
    pub fn end(&self) -> u64 {
        self.next
    }
}

/// The memory size for a layout ending at `end`: `end + slack` (slack may be negative: then
/// the last arrays stick out), at least [`MIN_MEMORY`].
pub fn memory_size(end: u64, slack: i16) -> u64 {
    end.saturating_add_signed(i64::from(slack)).max(MIN_MEMORY)
}

/// How a mutation changes a field.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub enum Tweak {
    /// Adds a small signed amount (wrapping).
    Add(i8),
    /// One of a list of boundary values (0, 1, the memory size and its neighbours, the
    /// `u32` and `u64` limits...).
    Boundary(u8),
    /// The address of another array of the layout plus a small signed byte offset (overlaps
    /// and misalignment).
    Address(u8, i8),
    /// An arbitrary value.
    Raw(u64),
    /// Flips one bit.
    Flip(u8),
}

/// What a [`Tweak`] can refer to: the memory size and the layout's array addresses.
#[derive(Clone, Debug)]
pub struct TweakContext {
    /// Bytes of device memory.
    pub memory_size: u64,
    /// Addresses of the layout's arrays (and the result).
    pub addresses: Vec<u64>,
}

impl Tweak {
    /// The tweaked value.
    pub fn apply(self, value: u64, context: &TweakContext) -> u64 {
        let size = context.memory_size;
        match self {
            Tweak::Add(delta) => value.wrapping_add_signed(i64::from(delta)),
            Tweak::Boundary(which) => {
                let values = [
                    0,
                    1,
                    2,
                    4,
                    8,
                    16,
                    64,
                    size,
                    size.wrapping_sub(1),
                    size.wrapping_sub(4),
                    size.wrapping_sub(8),
                    size.wrapping_sub(64),
                    size / 2,
                    u64::from(u16::MAX),
                    u64::from(u32::MAX) - 1,
                    u64::from(u32::MAX),
                    1 << 32,
                    (1 << 32) + 1,
                    1 << 31,
                    u64::MAX,
                    u64::MAX - 3,
                    u64::MAX - 7,
                    i64::MAX as u64,
                    value.wrapping_mul(2),
                    value / 2,
                ];
                values[usize::from(which) % values.len()]
            }
            Tweak::Address(which, delta) => {
                let base = if context.addresses.is_empty() {
                    0
                } else {
                    context.addresses[usize::from(which) % context.addresses.len()]
                };
                base.wrapping_add_signed(i64::from(delta))
            }
            Tweak::Raw(raw) => raw,
            Tweak::Flip(bit) => value ^ (1 << (bit % 64)),
        }
    }

    /// The tweaked value of a 32-bit field.
    pub fn apply32(self, value: u32, context: &TweakContext) -> u32 {
        self.apply(u64::from(value), context) as u32
    }
}

/// One mutation of a valid layout: a field (each target numbers its own fields: command
/// fields, parameter block fields, words of the arrays), an element index for array words,
/// and the change.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub struct Mutation {
    /// Which field (modulo the target's field count).
    pub field: u8,
    /// Which element, for array words (modulo the array's length).
    pub index: u16,
    /// The change.
    pub tweak: Tweak,
}

/// Mutations a target applies at most (more would rarely leave anything valid).
pub const MAX_MUTATIONS: usize = 4;

/// A device memory that records every write it is asked for (successful or not), so a check
/// sees a write even when it stores the bytes already there.
///
/// It also keeps [`execute_within`]'s copy of the memory before an item: the memory is
/// private, so it changes only through [`DeviceMemory::write`] on this value (which marks the
/// copy stale) or inside [`execute_within`] (which brings the copy up to date after its
/// checks). Each item so costs one comparison of the whole memory, not a fresh copy as well
/// (an allocation of the whole memory per item: page faults, and under AddressSanitizer its
/// quarantine made `opt_decode` ten times slower).
#[derive(Clone, Debug)]
pub struct Watched {
    /// The memory.
    inner: FakeDeviceMemory,
    /// `(address, length)` of every write, in order.
    pub writes: std::cell::RefCell<Vec<(u64, u64)>>,
    /// The memory's bytes as they were when `synced` was last set.
    before: Vec<u8>,
    /// Whether `before` equals the memory's bytes.
    synced: core::cell::Cell<bool>,
}

impl Watched {
    /// Watches `inner`.
    pub fn new(inner: FakeDeviceMemory) -> Watched {
        Watched {
            inner,
            writes: std::cell::RefCell::new(Vec::new()),
            before: Vec::new(),
            synced: core::cell::Cell::new(false),
        }
    }

    /// The memory's bytes.
    pub fn contents(&self) -> core::cell::Ref<'_, [u8]> {
        self.inner.contents()
    }
}

impl DeviceMemory for Watched {
    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
        self.inner.read(address, buffer)
    }

    fn write(&self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
        self.synced.set(false);
        self.writes
            .borrow_mut()
            .push((address.0, data.len() as u64));
        self.inner.write(address, data)
    }
}

/// Runs `run` (one item's execution) on `memory` and checks that every write it asked for,
/// and every byte that changed, lies inside one of `allowed`. Returns what `run` returned.
pub fn execute_within<T>(
    memory: &mut Watched,
    allowed: &[Span],
    what: &str,
    run: impl FnOnce(&mut Watched) -> T,
) -> T {
    if !memory.synced.get() {
        memory.before.clear();
        memory.before.extend_from_slice(&memory.inner.contents());
    }
    memory.synced.set(false);
    memory.writes.borrow_mut().clear();
    let result = run(memory);
    for &(address, length) in memory.writes.borrow().iter() {
        let write = Span::new(address, u128::from(length));
        if length > 0 {
            assert!(
                allowed.iter().any(|span| span.contains(&write)),
                "{what}: write of {length} bytes at {address:#x} outside {allowed:x?}"
            );
        }
    }
    {
        let (after, before) = (memory.inner.contents(), &mut memory.before);
        assert_eq!(before.len(), after.len());
        // Every byte outside the union of `allowed` is unchanged: compare the gaps between
        // the (sorted, merged) spans as whole slices (memcmp), bytes only in a gap that
        // differs (to name the first changed byte).
        for gap in gaps(allowed, before.len()) {
            if before[gap.clone()] == after[gap.clone()] {
                continue;
            }
            let at = gap
                .clone()
                .find(|&at| before[at] != after[at])
                .expect("a gap that differs has a changed byte");
            panic!("{what}: byte {at:#x} changed outside {allowed:x?}");
        }
        // Outside `allowed` nothing changed: copying `allowed` brings the copy up to date.
        let size = before.len() as u128;
        for span in allowed.iter().filter(|span| span.start < size) {
            let range = span.start as usize..span.end.min(size) as usize;
            before[range.clone()].copy_from_slice(&after[range]);
        }
    }
    memory.synced.set(true);
    result
}

/// The ranges of `[0, size)` outside every span of `allowed`, in order.
fn gaps(allowed: &[Span], size: usize) -> Vec<core::ops::Range<usize>> {
    let size_128 = size as u128;
    let mut spans: Vec<(usize, usize)> = allowed
        .iter()
        .filter(|span| span.start < span.end && span.start < size_128)
        .map(|span| (span.start as usize, span.end.min(size_128) as usize))
        .collect();
    spans.sort_unstable();
    let mut gaps = Vec::with_capacity(spans.len() + 1);
    let mut next = 0;
    for (start, end) in spans {
        if start > next {
            gaps.push(next..start);
        }
        next = next.max(end);
    }
    if next < size {
        gaps.push(next..size);
    }
    gaps
}

/// First, middle and last of `range` (deduplicated; empty for an empty range).
pub fn first_middle_last(range: core::ops::Range<u32>) -> Vec<u32> {
    if range.is_empty() {
        return Vec::new();
    }
    let last = range.end - 1;
    let middle = range.start + (last - range.start) / 2;
    let mut picks = vec![range.start, middle, last];
    picks.dedup();
    picks
}

/// The launch is one stage of all its items (every kernel's but OPT's).
pub fn assert_one_stage(kernel: &Kernel) {
    assert_eq!(kernel.stages(), 1);
    assert_eq!(kernel.stage_items(0), 0..kernel.items());
}

/// What a kernel decoder target supplies to the one body they share ([`check`]): how its
/// fuzz input (`Input`, decoded from the raw bytes as libFuzzer decodes it) becomes a
/// (possibly mutated) command and memory, the model (`Model`) of the module docs' validation
/// rules, the kernel's own decoder (to its `Decoded` form), and the check of an accepted
/// launch's items. A target is this value, built in its `check`.
#[derive(Debug)]
pub struct KernelTarget<Input, Decoded, Model> {
    /// The kernel the target decodes.
    pub id: KernelId,
    /// The valid layout the input describes, with its mutations (at most [`MAX_MUTATIONS`])
    /// applied: the device memory and the command.
    pub prepare: fn(&Input) -> (FakeDeviceMemory, CommandDescriptor),
    /// The module docs' rules over a snapshot of device memory.
    pub model: fn(&CommandDescriptor, &[u8]) -> Result<Model, FirmwareError>,
    /// The kernel's own decoder (`SsspKernel::decode`...).
    pub decode: fn(&CommandDescriptor, &FakeDeviceMemory) -> Result<Decoded, FirmwareError>,
    /// The decoded form as the `Kernel` enum holds it (`Kernel::Sssp`...).
    pub wrap: fn(Decoded) -> Kernel,
    /// Checks the items of an accepted launch and runs some of them (the item and the stage
    /// past the last are [`check`]'s).
    pub check_items: fn(&Kernel, &Model, &CommandDescriptor, &mut Watched),
}

/// The body of every kernel decoder target: the kernel's decoder agrees with the model (same
/// status when both refuse); for the kernel's own id, `Kernel::decode` agrees too and an
/// accepted launch refuses the item and the stage past its last, has no result range past its
/// last item and for the first, middle and last the described item's range whenever the item
/// is described (`Kernel::result_range`, which the command processor takes for an item that
/// ran), and its items pass the target's `check_items`; for another id (a mutation of the kernel field) `Kernel::decode`
/// only must not panic.
pub fn check<Input, Decoded, Model>(target: &KernelTarget<Input, Decoded, Model>, data: &[u8])
where
    Input: for<'a> Arbitrary<'a> + core::fmt::Debug,
    Decoded: core::fmt::Debug + PartialEq,
    Model: core::fmt::Debug,
{
    let Some(input) = crate::arbitrary_input::<Input>(data) else {
        return;
    };
    let (memory, command) = (target.prepare)(&input);
    let expected = (target.model)(&command, &memory.contents());
    let direct = (target.decode)(&command, &memory);
    match (&direct, &expected) {
        (Ok(_), Ok(_)) => {}
        (Err(got), Err(want)) => assert_eq!(got, want, "{command:?}"),
        _ => panic!("decoder {direct:?} but the docs' rules say {expected:?} for {command:?}"),
    }
    if command.kernel != target.id as u32 {
        // Another kernel's decoder (or none) answers: only "no panic" is checked.
        let _ = Kernel::decode(&command, &memory);
        return;
    }
    match (Kernel::decode(&command, &memory), expected) {
        (Ok(kernel), Ok(model)) => {
            assert_eq!((target.wrap)(direct.expect("accepted above")), kernel);
            assert!(kernel.stage_items(kernel.stages()).is_empty());
            assert_eq!(
                kernel.item(kernel.items(), &memory),
                Err(FirmwareError::ArgumentOutOfRange)
            );
            assert_eq!(kernel.result_range(kernel.items()), None);
            for index in first_middle_last(0..kernel.items()) {
                if let Ok(spec) = kernel.item(index, &memory) {
                    assert_eq!(
                        kernel.result_range(index),
                        Some((spec.result_offset, spec.result_length)),
                        "item {index}"
                    );
                }
            }
            let mut memory = Watched::new(memory);
            (target.check_items)(&kernel, &model, &command, &mut memory);
            assert_eq!(
                kernel.execute(kernel.items(), &memory),
                Err(FirmwareError::ArgumentOutOfRange)
            );
        }
        (Err(got), Err(want)) => assert_eq!(got, want),
        (got, want) => panic!("Kernel::decode {got:?} but the docs' rules say {want:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watched(size: usize) -> Watched {
        Watched::new(FakeDeviceMemory::new(size))
    }

    /// Runs `change` (which edits the memory behind the log's back) inside `execute_within`
    /// allowing `allowed`; whether the check panicked.
    fn panics(allowed: &[Span], change: impl FnOnce(&mut FakeDeviceMemory)) -> bool {
        let mut memory = watched(0x2000);
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            execute_within(&mut memory, allowed, "test", |memory| {
                change(&mut memory.inner)
            })
        }))
        .is_err()
    }

    #[test]
    fn a_change_inside_an_allowed_span_passes_and_one_byte_past_it_is_caught() {
        let allowed = [Span::new(0x100, 8), Span::new(0x1800, 4)];
        assert!(!panics(&allowed, |m| m.fill(0x100, &[1; 8])));
        assert!(!panics(&allowed, |m| m.fill(0x1800, &[1; 4])));
        assert!(panics(&allowed, |m| m.fill(0x108, &[1])));
        assert!(panics(&allowed, |m| m.fill(0xff, &[1])));
        assert!(panics(&allowed, |m| m.fill(0x1fff, &[1])));
        assert!(panics(&allowed, |m| m.fill(0, &[1])));
        assert!(panics(&[], |m| m.fill(0x1000, &[1])));
    }

    #[test]
    fn a_logged_write_outside_the_allowed_spans_is_caught_even_when_it_changes_nothing() {
        let mut memory = watched(0x2000);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            execute_within(&mut memory, &[Span::new(0x100, 8)], "test", |memory| {
                memory.write(DeviceAddress(0x200), &[0; 4])
            })
        }));
        assert!(outcome.is_err());
    }

    #[test]
    fn the_snapshot_is_taken_afresh_for_each_item() {
        // A first item changes 0x100 (allowed); a second item allowed nothing must not be
        // blamed for it, and must be caught for its own change.
        let mut memory = watched(0x2000);
        execute_within(&mut memory, &[Span::new(0x100, 4)], "first", |memory| {
            memory.inner.fill(0x100, &[7; 4]);
        });
        execute_within(&mut memory, &[], "second", |_| {});
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            execute_within(&mut memory, &[], "third", |memory| {
                memory.inner.fill(0x100, &[8]);
            })
        }));
        assert!(outcome.is_err());
    }

    #[test]
    fn a_write_between_items_makes_the_next_item_compare_against_a_fresh_copy() {
        // The copy is up to date after the first item; a write outside execute_within (0 to
        // 5 at 0x200) must make the next item compare against 5, so that an item restoring
        // the 0 is caught.
        let mut memory = watched(0x2000);
        execute_within(&mut memory, &[], "first", |_| {});
        memory.write(DeviceAddress(0x200), &[5]).expect("inside");
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            execute_within(&mut memory, &[], "second", |memory| {
                memory.inner.fill(0x200, &[0]);
            })
        }));
        assert!(outcome.is_err());
    }

    #[test]
    fn gaps_are_the_complement_of_the_merged_spans_clamped_to_memory() {
        let spans = [
            Span::new(30, 10),
            Span::new(10, 5),
            Span::new(12, 8),
            Span::new(35, 2),
            Span::new(90, 50),
            Span::new(50, 0),
        ];
        assert_eq!(gaps(&spans, 100), vec![0..10, 20..30, 40..90]);
        assert_eq!(gaps(&[], 7), vec![0..7]);
        assert_eq!(
            gaps(&[Span::new(0, 7)], 7),
            Vec::<core::ops::Range<usize>>::new()
        );
        assert_eq!(gaps(&[Span::new(u64::MAX, 8)], 7), vec![0..7]);
    }
}
