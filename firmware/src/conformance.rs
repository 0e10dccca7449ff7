//! HAL conformance checks: the MUST clauses of [`crate::hal`] as tests a port runs on its own
//! implementation (feature `conformance`).
//!
//! Each check is a plain function, generic over the port's types, that returns `Ok(())` or
//! the first [`Violation`] it found; none panics, allocates or needs `std`, so a `no_std` port
//! runs them on its target: build the firmware with `features = ["conformance"]`, call the
//! checks from the port's test image (before the main loop) and print the violations over its
//! UART. A hosted implementation (the emulator) wraps each in a `#[test]` that asserts `Ok`.
//!
//! | check | clauses |
//! |---|---|
//! | [`memory_bounds`] | reads and writes inside memory land; any byte outside is the access's [`MemoryFault`], touching nothing, never a panic |
//! | [`partial_writes`] | a write changes exactly its bytes, also inside a word |
//! | [`atomics`] | each atomic's result and returned previous value; misaligned or outside words fault |
//! | [`contended_atomics`] | no lost update when µthreads hammer one word with `fetch_add_u32`, `fetch_min_u32` and `compare_exchange_u32` |
//!
//! The checks use the `WINDOW` bytes of device memory at the address the caller passes (which
//! they overwrite): a port passes a scratch range nothing else uses while they run.
//!
//! The contended check cannot start µthreads itself (that is the port's business): the caller
//! passes a `run_concurrently` function that calls the given worker once for each index
//! `0..workers`, all at the same time on distinct µthreads (or hardware threads), and returns
//! when all have finished. A port with one core can pass a sequential loop: the check then
//! proves only the operations' arithmetic, not their atomicity. The emulator runs it twice:
//! on OS threads, and interleaved access by access in a seeded order
//! (`emulator::ccm::interleave`).
//!
//! # Checks that need time to pass
//!
//! | check | clauses |
//! |---|---|
//! | [`dma_completion_order`] | every request completes exactly once, in submission order, a bad descriptor fails its request (and only it); a published tail is never visible before the writes before it in its chain; tails land in submission order; `QueueFull` loses nothing |
//! | [`interrupt_delivery`] | each `raise_interrupt` reaches the host exactly once, in order, with its message, and never before the DMA writes of the requests completed before it |
//!
//! A port's DMA engine and interrupt controller make progress on their own schedule (a
//! bus, a clock, an event queue), which the checks cannot drive: the port implements
//! [`Harness`], whose [`Harness::advance`] lets a little time pass (one event of the
//! emulator's queue; one request of the QEMU port's copy engine), and whose
//! [`Harness::host_read`] and [`Harness::take_interrupt`] show memory and interrupts as the
//! host sees them. The checks use [`DMA_WINDOW`] bytes of device memory and of host memory
//! at the addresses the caller passes.

use crate::hal::{
    DeviceAtomics, DeviceMemory, DmaDescriptor, DmaEngine, DmaError, DmaKind, DmaRequest, DmaTag,
    MemoryFault, Registers,
};
use shared_abi::{DeviceAddress, Status};
use zerocopy::IntoBytes;

/// Bytes of device memory the checks use at the address they are given.
pub const WINDOW: u64 = 64;

/// A broken MUST clause: which check, and what it saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The clause, in a few words.
    pub clause: &'static str,
    /// The address involved.
    pub address: u64,
    /// What the implementation returned or left (a value, a byte, a count).
    pub seen: u64,
    /// What the clause requires.
    pub expected: u64,
}

fn check(clause: &'static str, address: u64, seen: u64, expected: u64) -> Result<(), Violation> {
    if seen == expected {
        Ok(())
    } else {
        Err(Violation {
            clause,
            address,
            seen,
            expected,
        })
    }
}

fn at(base: DeviceAddress, offset: u64) -> DeviceAddress {
    DeviceAddress(base.0.saturating_add(offset))
}

fn byte<M: DeviceMemory + ?Sized>(memory: &M, address: DeviceAddress) -> u64 {
    let mut one = [0_u8; 1];
    match memory.read(address, &mut one) {
        Ok(()) => u64::from(one[0]),
        Err(_) => u64::MAX,
    }
}

fn word<M: DeviceMemory + ?Sized>(memory: &M, address: DeviceAddress) -> u64 {
    let mut four = [0_u8; 4];
    match memory.read(address, &mut four) {
        Ok(()) => u64::from(u32::from_le_bytes(four)),
        Err(_) => u64::MAX,
    }
}

fn fault_is(
    clause: &'static str,
    result: Result<impl Sized, MemoryFault>,
    address: DeviceAddress,
    length: u64,
) -> Result<(), Violation> {
    match result {
        Err(fault) => {
            check(clause, address.0, fault.address.0, address.0)?;
            check(clause, address.0, fault.length, length)
        }
        Ok(_) => Err(Violation {
            clause,
            address: address.0,
            seen: 0,
            expected: 1,
        }),
    }
}

/// Fills the window with `value`.
fn fill<M: DeviceMemory + ?Sized>(
    memory: &M,
    window: DeviceAddress,
    value: u8,
) -> Result<(), Violation> {
    let bytes = [value; WINDOW as usize];
    memory.write(window, &bytes).map_err(|fault| Violation {
        clause: "a write inside memory succeeds",
        address: fault.address.0,
        seen: fault.length,
        expected: 0,
    })
}

/// Reads and writes inside memory land; an access with any byte outside (the last byte, one
/// past the end, an address whose end overflows) is that access's [`MemoryFault`] and touches
/// nothing; a [`DeviceMemory::read_u32_gather`] gives the words 4-byte reads give, and the
/// fault of its first element outside memory. `window` is a scratch range of [`WINDOW`] bytes.
pub fn memory_bounds<M: DeviceMemory + ?Sized>(
    memory: &M,
    window: DeviceAddress,
) -> Result<(), Violation> {
    gather(memory, window)?;
    fill(memory, window, 0x5a)?;
    check(
        "a written byte reads back",
        window.0,
        byte(memory, window),
        0x5a,
    )?;
    let size = memory.size();
    let last = DeviceAddress(size.saturating_sub(1));
    let mut one = [0_u8; 1];
    check(
        "the last byte is readable",
        last.0,
        u64::from(memory.read(last, &mut one).is_ok()),
        1,
    )?;
    // Two bytes from the last: one inside, one outside.
    let mut two = [0xee_u8; 2];
    fault_is(
        "a read crossing the end faults",
        memory.read(last, &mut two),
        last,
        2,
    )?;
    check(
        "a faulting read leaves the buffer alone",
        last.0,
        u64::from(two[0]),
        0xee,
    )?;
    let before = byte(memory, last);
    fault_is(
        "a write crossing the end faults",
        memory.write(last, &[1, 2]),
        last,
        2,
    )?;
    check(
        "a faulting write touches nothing",
        last.0,
        byte(memory, last),
        before,
    )?;
    let past = DeviceAddress(size);
    fault_is(
        "a read past the end faults",
        memory.read(past, &mut [0_u8; 1]),
        past,
        1,
    )?;
    let top = DeviceAddress(u64::MAX);
    fault_is(
        "a read whose end overflows faults",
        memory.read(top, &mut [0_u8; 2]),
        top,
        2,
    )?;
    fault_is(
        "a write whose end overflows faults",
        memory.write(top, &[0_u8; 2]),
        top,
        2,
    )?;
    check(
        "a faulting access elsewhere leaves the window alone",
        window.0,
        byte(memory, window),
        0x5a,
    )
}

/// [`memory_bounds`]'s gather clauses: the words of a gather inside `window` (in any order,
/// repeated) are the 4-byte reads' words; a gather with an element at or past the end faults
/// with that element's 4-byte access even when a later element is further out; one whose
/// element's address overflows faults with `{ address: base, length: 4 * index + 4 }`.
fn gather<M: DeviceMemory + ?Sized>(memory: &M, window: DeviceAddress) -> Result<(), Violation> {
    let pattern: [u8; 16] = core::array::from_fn(|at| (at as u8).wrapping_mul(37).wrapping_add(11));
    memory.write(window, &pattern).map_err(|fault| Violation {
        clause: "a write inside memory succeeds",
        address: fault.address.0,
        seen: fault.length,
        expected: 0,
    })?;
    let indices = [3_u32, 0, 2, 0, 1];
    let mut out = [0_u32; 5];
    let outcome = memory.read_u32_gather(window.0, &indices, &mut out);
    check(
        "a gather inside memory succeeds",
        window.0,
        u64::from(outcome.is_ok()),
        1,
    )?;
    for (index, got) in indices.iter().zip(out) {
        let address = at(window, u64::from(*index).saturating_mul(4));
        check(
            "a gather reads the words 4-byte reads do",
            address.0,
            u64::from(got),
            word(memory, address),
        )?;
    }
    // The first element at or past the end: its word is (partly) outside.
    let room = memory.size().saturating_sub(window.0) / 4;
    if let Ok(past) = u32::try_from(room) {
        let address = at(window, u64::from(past).saturating_mul(4));
        fault_is(
            "a gather faults at its first element outside memory",
            memory.read_u32_gather(window.0, &[0, past, u32::MAX, 1], &mut out),
            address,
            4,
        )?;
    }
    let top = DeviceAddress(u64::MAX - 3);
    fault_is(
        "a gather element whose address overflows faults",
        memory.read_u32_gather(top.0, &[1], &mut out),
        top,
        8,
    )
}

/// A write changes exactly its bytes: single bytes and a 3-byte write inside one word, and a
/// write straddling two words, leave their neighbours as they were.
pub fn partial_writes<M: DeviceMemory + ?Sized>(
    memory: &M,
    window: DeviceAddress,
) -> Result<(), Violation> {
    fill(memory, window, 0x11)?;
    let write = |offset: u64, data: &[u8]| {
        memory
            .write(at(window, offset), data)
            .map_err(|_| Violation {
                clause: "a write inside memory succeeds",
                address: at(window, offset).0,
                seen: 1,
                expected: 0,
            })
    };
    write(1, &[0xa1])?;
    write(9, &[0xb1, 0xb2, 0xb3])?;
    write(22, &[0xc1, 0xc2, 0xc3, 0xc4])?;
    let expected = |offset: u64| -> u64 {
        match offset {
            1 => 0xa1,
            9..=11 => 0xb1_u64.saturating_add(offset.saturating_sub(9)),
            22..=25 => 0xc1_u64.saturating_add(offset.saturating_sub(22)),
            _ => 0x11,
        }
    };
    for offset in 0..32 {
        check(
            "a write changes exactly its bytes",
            at(window, offset).0,
            byte(memory, at(window, offset)),
            expected(offset),
        )?;
    }
    Ok(())
}

/// Each atomic on an aligned word: the new value, the previous value it returns (little
/// endian, as [`DeviceMemory::read`] sees it), the neighbouring words untouched; a misaligned
/// word or one outside memory is `MemoryFault { address, length: 4 }`.
pub fn atomics<M: DeviceAtomics + ?Sized>(
    memory: &M,
    window: DeviceAddress,
) -> Result<(), Violation> {
    fill(memory, window, 0)?;
    let target = at(window, 12);
    let put = |value: u32| {
        memory
            .write(target, &value.to_le_bytes())
            .map_err(|_| Violation {
                clause: "a write inside memory succeeds",
                address: target.0,
                seen: 1,
                expected: 0,
            })
    };
    let returned = |clause, result: Result<u32, MemoryFault>, expected: u32| {
        check(
            clause,
            target.0,
            result.map_or(u64::MAX, u64::from),
            u64::from(expected),
        )
    };
    put(0x0102_0304)?;
    returned(
        "fetch_add returns the previous word",
        memory.fetch_add_u32(target, 0x10),
        0x0102_0304,
    )?;
    check(
        "fetch_add adds",
        target.0,
        word(memory, target),
        0x0102_0314,
    )?;
    put(u32::MAX)?;
    returned("fetch_add wraps", memory.fetch_add_u32(target, 2), u32::MAX)?;
    check("fetch_add wraps", target.0, word(memory, target), 1)?;
    put(100)?;
    returned(
        "fetch_min returns the previous word",
        memory.fetch_min_u32(target, 7),
        100,
    )?;
    check(
        "fetch_min takes the smaller",
        target.0,
        word(memory, target),
        7,
    )?;
    returned(
        "fetch_min of a larger value",
        memory.fetch_min_u32(target, 9),
        7,
    )?;
    check(
        "fetch_min keeps the smaller",
        target.0,
        word(memory, target),
        7,
    )?;
    put(0x8000_0000)?;
    memory.fetch_min_u32(target, 1).map_err(|_| Violation {
        clause: "fetch_min inside memory succeeds",
        address: target.0,
        seen: 1,
        expected: 0,
    })?;
    check("fetch_min is unsigned", target.0, word(memory, target), 1)?;
    returned(
        "swap returns the previous word",
        memory.swap_u32(target, 0xdead_beef),
        1,
    )?;
    check("swap stores", target.0, word(memory, target), 0xdead_beef)?;
    returned(
        "a failing compare_exchange returns the word",
        memory.compare_exchange_u32(target, 5, 6),
        0xdead_beef,
    )?;
    check(
        "a failing compare_exchange stores nothing",
        target.0,
        word(memory, target),
        0xdead_beef,
    )?;
    returned(
        "a succeeding compare_exchange returns the word",
        memory.compare_exchange_u32(target, 0xdead_beef, 42),
        0xdead_beef,
    )?;
    check(
        "a succeeding compare_exchange stores",
        target.0,
        word(memory, target),
        42,
    )?;
    for offset in [8_u64, 16] {
        check(
            "an atomic leaves its neighbours alone",
            at(window, offset).0,
            word(memory, at(window, offset)),
            0,
        )?;
    }
    let misaligned = at(window, 13);
    fault_is(
        "a misaligned atomic faults",
        memory.fetch_add_u32(misaligned, 1),
        misaligned,
        4,
    )?;
    check(
        "a faulting atomic touches nothing",
        target.0,
        word(memory, target),
        42,
    )?;
    let size = memory.size();
    let outside = DeviceAddress(size.saturating_sub(2) & !3);
    if outside.0.saturating_add(4) > size {
        fault_is(
            "an atomic crossing the end faults",
            memory.swap_u32(outside, 1),
            outside,
            4,
        )?;
    }
    let past = DeviceAddress(size.saturating_add(3) & !3);
    fault_is(
        "an atomic past the end faults",
        memory.compare_exchange_u32(past, 0, 1),
        past,
        4,
    )?;
    let top = DeviceAddress(!3);
    fault_is(
        "an atomic at the top of the address space faults",
        memory.fetch_min_u32(top, 0),
        top,
        4,
    )
}

/// Rounds of each operation per worker in [`contended_atomics`].
pub const CONTENDED_ROUNDS: u32 = 2000;

/// The worker of [`contended_atomics`], for index `worker` of `workers`: adds 1 to the
/// window's word 0 [`CONTENDED_ROUNDS`] times, lowers word 1 to each of its own values
/// `u32::MAX - (k * workers + worker)`, and increments word 2 with a compare-exchange loop.
/// Errors are counted in word 3. Public so that a port can run it on its own µthreads.
pub fn contended_worker<M: DeviceAtomics + ?Sized>(
    memory: &M,
    window: DeviceAddress,
    worker: u32,
    workers: u32,
) {
    let (sum, minimum, exchanged, errors) = (window, at(window, 4), at(window, 8), at(window, 12));
    let mut failed = 0_u32;
    for round in 0..CONTENDED_ROUNDS {
        if memory.fetch_add_u32(sum, 1).is_err() {
            failed = failed.saturating_add(1);
        }
        let mine = u32::MAX.saturating_sub(round.saturating_mul(workers).saturating_add(worker));
        if memory.fetch_min_u32(minimum, mine).is_err() {
            failed = failed.saturating_add(1);
        }
        let mut seen = memory.read_value::<u32>(exchanged).unwrap_or(0);
        loop {
            match memory.compare_exchange_u32(exchanged, seen, seen.wrapping_add(1)) {
                Ok(previous) if previous == seen => break,
                Ok(previous) => seen = previous,
                Err(_) => {
                    failed = failed.saturating_add(1);
                    break;
                }
            }
        }
    }
    if failed > 0 {
        let _ = memory.fetch_add_u32(errors, failed);
    }
}

/// No lost update under contention: `run_concurrently(workers, worker)` MUST call
/// `worker(i)` for every `i` in `0..workers` at the same time on distinct µthreads (see the
/// module docs); each runs [`contended_worker`]. Afterwards the sum and the exchange counter
/// are `workers * CONTENDED_ROUNDS` exactly and the minimum is the smallest value any worker
/// offered. `window` MUST be 4-byte aligned.
pub fn contended_atomics<M, R>(
    memory: &M,
    window: DeviceAddress,
    workers: u32,
    run_concurrently: R,
) -> Result<(), Violation>
where
    M: DeviceAtomics + Sync + ?Sized,
    R: FnOnce(u32, &(dyn Fn(u32) + Sync)),
{
    fill(memory, window, 0)?;
    memory
        .write(at(window, 4), &u32::MAX.to_le_bytes())
        .map_err(|_| Violation {
            clause: "a write inside memory succeeds",
            address: window.0,
            seen: 1,
            expected: 0,
        })?;
    run_concurrently(workers, &|worker| {
        contended_worker(memory, window, worker, workers);
    });
    let total = u64::from(workers).saturating_mul(u64::from(CONTENDED_ROUNDS));
    check(
        "no atomic faulted",
        window.0,
        word(memory, at(window, 12)),
        0,
    )?;
    check(
        "fetch_add loses no update under contention",
        window.0,
        word(memory, window),
        total & 0xffff_ffff,
    )?;
    check(
        "compare_exchange loses no update under contention",
        window.0,
        word(memory, at(window, 8)),
        total & 0xffff_ffff,
    )?;
    let smallest = u64::from(u32::MAX).saturating_sub(total.saturating_sub(1));
    check(
        "fetch_min keeps the smallest under contention",
        window.0,
        word(memory, at(window, 4)),
        smallest,
    )
}

/// Bytes of device memory and of host memory the DMA and interrupt checks use.
pub const DMA_WINDOW: u64 = 4096;

/// What a port provides for the checks that need time to pass (see the module docs).
pub trait Harness {
    /// The HAL under test.
    type Hal: DeviceMemory + DmaEngine + Registers;
    /// The HAL, to submit requests, poll completions and raise interrupts through.
    fn hal(&mut self) -> &mut Self::Hal;
    /// Lets a little time pass: the engine and the interrupt controller make some progress
    /// (land a write, complete a request, deliver an interrupt). Returns `false`, having
    /// done nothing, only when nothing is left that could happen without the firmware
    /// doing something (nothing in flight, or every accepted request completed with its
    /// completion waiting to be polled; every interrupt delivered).
    fn advance(&mut self) -> bool;
    /// Copies `buffer.len()` bytes of host memory at host physical `address`, as the host
    /// sees them now; `false` outside host memory.
    fn host_read(&mut self, address: u64, buffer: &mut [u8]) -> bool;
    /// Writes host memory at host physical `address` as the host does (the checks clear
    /// their host window with it); `false` outside host memory.
    fn host_write(&mut self, address: u64, data: &[u8]) -> bool;
    /// The oldest interrupt delivered to the host and not yet taken: its MSI-X message.
    fn take_interrupt(&mut self) -> Option<u64>;
}

/// Most [`Harness::advance`] calls a check makes before it calls the engine stuck.
pub const MAX_ADVANCES: u32 = 100_000;

/// Requests of [`dma_completion_order`]: payload writes per request (32 bytes each); the
/// request at [`FAILING_REQUEST`] also carries a descriptor the engine must reject.
const PAYLOADS: [u32; 6] = [7, 1, 1, 3, 1, 2];
/// The request whose chain has a descriptor outside host memory.
const FAILING_REQUEST: usize = 4;
/// Descriptor slots of the checks' ring (at the device window's start).
const RING: u32 = 32;
/// Bytes of one payload write.
const PAYLOAD: u64 = 32;
/// Offsets in the device window: payload sources, tail values.
const SOURCES: u64 = 1024;
const TAIL_VALUES: u64 = 3072;
/// Offset in the host window of the payload-tail word.
const HOST_TAIL: u64 = 2048;

fn violation(clause: &'static str, address: u64, seen: u64, expected: u64) -> Violation {
    Violation {
        clause,
        address,
        seen,
        expected,
    }
}

/// The payload byte of request `request`'s write `k` (`salt` tells the checks apart).
fn pattern(salt: u8, request: usize, k: u32) -> u8 {
    (request as u8)
        .wrapping_mul(16)
        .wrapping_add(k as u8)
        .wrapping_add(1)
        ^ salt
}

/// The host offset of request `request`'s write `k` (every write its own 32 bytes).
fn payload_offset(request: usize, k: u32) -> u64 {
    let before: u32 = PAYLOADS.iter().take(request).sum();
    u64::from(before.saturating_add(k)).saturating_mul(PAYLOAD)
}

/// Whether request `request`'s payloads are in host memory.
fn payloads_visible<H: Harness + ?Sized>(
    harness: &mut H,
    host: u64,
    salt: u8,
    request: usize,
) -> Result<bool, Violation> {
    let count = PAYLOADS.get(request).copied().unwrap_or(0);
    for k in 0..count {
        let address = host.saturating_add(payload_offset(request, k));
        let mut bytes = [0_u8; PAYLOAD as usize];
        if !harness.host_read(address, &mut bytes) {
            return Err(violation("the host window is readable", address, 0, 1));
        }
        if bytes.iter().any(|&b| b != pattern(salt, request, k)) {
            return Ok(false);
        }
    }
    Ok(true)
}

fn host_word<H: Harness + ?Sized>(harness: &mut H, address: u64) -> Result<u64, Violation> {
    let mut word = [0_u8; 8];
    if harness.host_read(address, &mut word) {
        Ok(u64::from_le_bytes(word))
    } else {
        Err(violation("the host window is readable", address, 0, 1))
    }
}

/// Writes the descriptors, sources and tail values of the checks' requests into the device
/// window; returns each request's [`DmaRequest`].
fn prepare_requests<M: DeviceMemory + ?Sized>(
    memory: &M,
    device: DeviceAddress,
    host: u64,
    salt: u8,
) -> Result<[DmaRequest; PAYLOADS.len()], Violation> {
    let put = |address: DeviceAddress, data: &[u8]| {
        memory
            .write(address, data)
            .map_err(|fault| violation("a write inside memory succeeds", fault.address.0, 1, 0))
    };
    let mut requests = [DmaRequest {
        ring_base: device,
        ring_capacity: RING,
        first: 0,
        count: 0,
        payloads: 0,
    }; PAYLOADS.len()];
    let mut slot = 0_u32;
    for (request, (&payloads, entry)) in PAYLOADS.iter().zip(requests.iter_mut()).enumerate() {
        let first = slot;
        let mut descriptors = [DmaDescriptor::default(); 10];
        let mut count = 0_usize;
        for k in 0..payloads {
            let source = at(device, SOURCES.saturating_add(payload_offset(request, k)));
            put(source, &[pattern(salt, request, k); PAYLOAD as usize])?;
            if let Some(descriptor) = descriptors.get_mut(count) {
                *descriptor = DmaDescriptor {
                    source: source.0,
                    destination: host.saturating_add(payload_offset(request, k)),
                    length: PAYLOAD as u32,
                    kind: DmaKind::Payload as u32,
                    index: u64::from(k),
                };
            }
            count = count.saturating_add(1);
        }
        let tail_value = at(
            device,
            TAIL_VALUES.saturating_add((request as u64).saturating_mul(8)),
        );
        put(
            tail_value,
            &(request as u64).saturating_add(1).to_le_bytes(),
        )?;
        if request == FAILING_REQUEST {
            // A payload write to the top of the address space: no host memory there.
            if let Some(descriptor) = descriptors.get_mut(count) {
                *descriptor = DmaDescriptor {
                    source: tail_value.0,
                    destination: !7,
                    length: 8,
                    kind: DmaKind::Payload as u32,
                    index: 0,
                };
            }
            count = count.saturating_add(1);
        }
        if let Some(descriptor) = descriptors.get_mut(count) {
            *descriptor = DmaDescriptor {
                source: tail_value.0,
                destination: host.saturating_add(HOST_TAIL),
                length: 8,
                kind: DmaKind::PayloadTail as u32,
                index: (request as u64).saturating_add(1),
            };
        }
        count = count.saturating_add(1);
        for (offset, descriptor) in descriptors.iter().take(count).enumerate() {
            let cell = u64::from(first.saturating_add(offset as u32) % RING).saturating_mul(32);
            put(at(device, cell), descriptor.as_bytes())?;
        }
        *entry = DmaRequest {
            ring_base: device,
            ring_capacity: RING,
            first: u64::from(first),
            count: count as u32,
            payloads,
        };
        slot = slot.saturating_add(count as u32);
    }
    Ok(requests)
}

/// What the host saw of the checks' requests so far.
struct HostView {
    /// The highest tail value seen.
    tail: u64,
}

impl HostView {
    /// Reads the tail as the host does and checks that it never moves backwards and that
    /// every request it covers has its payloads visible (a publishing write is not visible
    /// before the writes before it, and requests land in submission order).
    fn look<H: Harness + ?Sized>(&mut self, harness: &mut H, host: u64) -> Result<(), Violation> {
        let address = host.saturating_add(HOST_TAIL);
        let tail = host_word(harness, address)?;
        if tail < self.tail {
            return Err(violation(
                "tails land in submission order (a published tail never moves back)",
                address,
                tail,
                self.tail,
            ));
        }
        self.tail = tail;
        for request in 0..(tail as usize).min(PAYLOADS.len()) {
            if request != FAILING_REQUEST && !payloads_visible(harness, host, 0, request)? {
                return Err(violation(
                    "a published tail is visible only after every earlier write of the requests it covers",
                    address,
                    tail,
                    request as u64,
                ));
            }
        }
        Ok(())
    }
}

/// Takes every completion the engine has; checks each against the oldest request in flight.
fn take_completions<H: Harness + ?Sized>(
    harness: &mut H,
    tags: &[Option<DmaTag>; PAYLOADS.len()],
    completed: &mut usize,
) -> Result<(), Violation> {
    while let Some(completion) = harness.hal().poll_completion() {
        let Some(&Some(expected)) = tags.get(*completed) else {
            return Err(violation(
                "each request completes exactly once",
                completion.tag.0,
                completion.tag.0,
                u64::MAX,
            ));
        };
        if completion.tag != expected {
            return Err(violation(
                "completions come in submission order",
                completion.tag.0,
                completion.tag.0,
                expected.0,
            ));
        }
        let failing = *completed == FAILING_REQUEST;
        if failing == (completion.status == Status::Ok) {
            return Err(violation(
                "a request fails exactly when one of its descriptors is bad",
                completion.tag.0,
                u64::from(completion.status == Status::Ok),
                u64::from(!failing),
            ));
        }
        *completed = completed.saturating_add(1);
    }
    Ok(())
}

/// DMA completion order (see the module docs): submits six chains of payload writes, each
/// ending in a payload-tail write of the request's number (one with a descriptor outside
/// host memory), as fast as the engine takes them, and lets time pass between polls. Every
/// request MUST complete exactly once, in submission order, the bad one with an error and
/// the others `Ok`; the host MUST never see the tail before the payloads of the requests it
/// covers, nor see it move back; at the end every good request's payloads and the last tail
/// are in host memory. `device` and `host` are scratch ranges of [`DMA_WINDOW`] bytes
/// (8-byte aligned) that nothing else uses meanwhile; nothing may be in flight before.
pub fn dma_completion_order<H: Harness + ?Sized>(
    harness: &mut H,
    device: DeviceAddress,
    host: u64,
) -> Result<(), Violation> {
    let requests = prepare_requests(harness.hal(), device, host, 0)?;
    clear_host(harness, host)?;
    let mut view = HostView { tail: 0 };
    let mut tags: [Option<DmaTag>; PAYLOADS.len()] = [None; PAYLOADS.len()];
    let mut completed = 0_usize;
    let mut advances = 0_u32;
    for index in 0..requests.len() {
        let Some(&request) = requests.get(index) else {
            break;
        };
        loop {
            match harness.hal().submit(request) {
                Ok(accepted) => {
                    if let Some(tag) = tags.get_mut(index) {
                        *tag = Some(accepted);
                    }
                    break;
                }
                Err(DmaError::QueueFull) => {
                    harness.advance();
                    advances = advances.saturating_add(1);
                    view.look(harness, host)?;
                    take_completions(harness, &tags, &mut completed)?;
                    if advances > MAX_ADVANCES {
                        return Err(violation(
                            "a refused request is taken once a completion was polled",
                            device.0,
                            u64::from(advances),
                            u64::from(MAX_ADVANCES),
                        ));
                    }
                }
            }
        }
    }
    let accepted: [DmaTag; PAYLOADS.len()] = tags.map(|tag| tag.unwrap_or(DmaTag(u64::MAX)));
    for pair in accepted.windows(2) {
        if let [earlier, later] = pair {
            if earlier == later {
                return Err(violation(
                    "each request gets its own tag",
                    device.0,
                    later.0,
                    earlier.0.wrapping_add(1),
                ));
            }
        }
    }
    while completed < PAYLOADS.len() {
        let moved = harness.advance();
        advances = advances.saturating_add(1);
        view.look(harness, host)?;
        take_completions(harness, &tags, &mut completed)?;
        if (!moved && completed < PAYLOADS.len()) || advances > MAX_ADVANCES {
            return Err(violation(
                "every accepted request completes",
                device.0,
                completed as u64,
                PAYLOADS.len() as u64,
            ));
        }
    }
    // Writes may land after their request's completion: let them.
    while harness.advance() {
        advances = advances.saturating_add(1);
        view.look(harness, host)?;
        if advances > MAX_ADVANCES {
            break;
        }
    }
    view.look(harness, host)?;
    if let Some(extra) = harness.hal().poll_completion() {
        return Err(violation(
            "each request completes exactly once",
            extra.tag.0,
            extra.tag.0,
            u64::MAX,
        ));
    }
    check(
        "the last request's tail lands",
        host.saturating_add(HOST_TAIL),
        view.tail,
        PAYLOADS.len() as u64,
    )?;
    for request in 0..PAYLOADS.len() {
        if request != FAILING_REQUEST && !payloads_visible(harness, host, 0, request)? {
            return Err(violation(
                "every write of a completed request lands",
                host.saturating_add(payload_offset(request, 0)),
                request as u64,
                u64::MAX,
            ));
        }
    }
    Ok(())
}

/// The payload pattern's salt of [`interrupt_delivery`]'s request.
const INTERRUPT_SALT: u8 = 0x80;

/// Clears the checks' host window, as the host.
fn clear_host<H: Harness + ?Sized>(harness: &mut H, host: u64) -> Result<(), Violation> {
    let zeros = [0_u8; 256];
    let mut offset = 0_u64;
    while offset < DMA_WINDOW {
        if !harness.host_write(host.saturating_add(offset), &zeros) {
            return Err(violation(
                "the host window is writable",
                host.saturating_add(offset),
                0,
                1,
            ));
        }
        offset = offset.saturating_add(zeros.len() as u64);
    }
    Ok(())
}

/// Lets time pass until every submitted request completed (polling them) and the harness
/// has nothing left to do; the completions are returned through `seen`.
fn settle<H: Harness + ?Sized>(harness: &mut H, seen: &mut u32) -> Result<(), Violation> {
    let mut advances = 0_u32;
    loop {
        while harness.hal().poll_completion().is_some() {
            *seen = seen.saturating_add(1);
        }
        if !harness.advance() {
            while harness.hal().poll_completion().is_some() {
                *seen = seen.saturating_add(1);
            }
            return Ok(());
        }
        advances = advances.saturating_add(1);
        if advances > MAX_ADVANCES {
            return Err(violation(
                "the engine and interrupts settle",
                0,
                u64::from(advances),
                u64::from(MAX_ADVANCES),
            ));
        }
    }
}

/// Interrupt delivery (see the module docs): three interrupts raised one after the other
/// reach the host exactly once each, in order, with their messages; and an interrupt raised
/// once a request's completion was polled reaches the host only after that request's
/// writes (the payloads and the tail it announces). `device` and `host` as for
/// [`dma_completion_order`] (which may run before, on the same windows: this check rewrites
/// them; the host tail word MUST read zero or the previous check's last tail).
pub fn interrupt_delivery<H: Harness + ?Sized>(
    harness: &mut H,
    device: DeviceAddress,
    host: u64,
) -> Result<(), Violation> {
    let mut seen = 0_u32;
    settle(harness, &mut seen)?;
    while harness.take_interrupt().is_some() {}
    for message in [0x11_u64, 0x12, 0x13] {
        harness.hal().raise_interrupt(message);
    }
    settle(harness, &mut seen)?;
    for expected in [0x11_u64, 0x12, 0x13] {
        match harness.take_interrupt() {
            Some(message) => check(
                "interrupts reach the host in order, with their messages",
                0,
                message,
                expected,
            )?,
            None => {
                return Err(violation(
                    "every raised interrupt reaches the host",
                    0,
                    0,
                    expected,
                ))
            }
        }
    }
    if let Some(extra) = harness.take_interrupt() {
        return Err(violation(
            "each interrupt reaches the host exactly once",
            0,
            extra,
            u64::MAX,
        ));
    }
    // Posted behind the writes: the first request of the DMA check (7 payloads), with
    // payloads of its own pattern and a tail of 0x4242, on a cleared host window.
    let requests = prepare_requests(harness.hal(), device, host, INTERRUPT_SALT)?;
    clear_host(harness, host)?;
    let Some(&request) = requests.first() else {
        return Ok(());
    };
    let tail_value = at(device, TAIL_VALUES);
    harness
        .hal()
        .write(tail_value, &0x4242_u64.to_le_bytes())
        .map_err(|fault| violation("a write inside memory succeeds", fault.address.0, 1, 0))?;
    let mut advances = 0_u32;
    let tag = loop {
        match harness.hal().submit(request) {
            Ok(tag) => break tag,
            Err(DmaError::QueueFull) => {
                harness.advance();
                while harness.hal().poll_completion().is_some() {}
                advances = advances.saturating_add(1);
                if advances > MAX_ADVANCES {
                    return Err(violation(
                        "an idle engine takes a request",
                        device.0,
                        u64::from(advances),
                        u64::from(MAX_ADVANCES),
                    ));
                }
            }
        }
    };
    // Wait for the completion only (not for the writes to land), then raise at once.
    loop {
        if let Some(completion) = harness.hal().poll_completion() {
            check("the request completes", tag.0, completion.tag.0, tag.0)?;
            break;
        }
        harness.advance();
        advances = advances.saturating_add(1);
        if advances > MAX_ADVANCES {
            return Err(violation(
                "every accepted request completes",
                device.0,
                0,
                1,
            ));
        }
    }
    harness.hal().raise_interrupt(0x4242);
    loop {
        if let Some(message) = harness.take_interrupt() {
            check("the interrupt carries its message", 0, message, 0x4242)?;
            let tail = host_word(harness, host.saturating_add(HOST_TAIL))?;
            check(
                "an interrupt reaches the host after the tail it announces",
                host.saturating_add(HOST_TAIL),
                tail,
                0x4242,
            )?;
            if !payloads_visible(harness, host, INTERRUPT_SALT, 0)? {
                return Err(violation(
                    "an interrupt reaches the host after the writes it announces",
                    host,
                    0,
                    1,
                ));
            }
            return Ok(());
        }
        let moved = harness.advance();
        advances = advances.saturating_add(1);
        if !moved || advances > MAX_ADVANCES {
            return Err(violation(
                "every raised interrupt reaches the host",
                0,
                0,
                0x4242,
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeDeviceMemory;

    #[test]
    fn the_fake_device_memory_passes_the_single_threaded_checks() {
        let memory = FakeDeviceMemory::new(4096);
        let window = DeviceAddress(256);
        assert_eq!(memory_bounds(&memory, window), Ok(()));
        assert_eq!(partial_writes(&memory, window), Ok(()));
        assert_eq!(atomics(&memory, window), Ok(()));
    }

    /// A memory whose `fetch_min_u32` is a maximum: the check must say so.
    struct WrongMin(FakeDeviceMemory);

    impl DeviceMemory for WrongMin {
        fn size(&self) -> u64 {
            self.0.size()
        }
        fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
            self.0.read(address, buffer)
        }
        fn write(&self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
            self.0.write(address, data)
        }
    }

    impl DeviceAtomics for WrongMin {
        fn fetch_add_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
            self.0.fetch_add_u32(address, value)
        }
        fn fetch_min_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
            let old = self.0.read_value::<u32>(address)?;
            self.0.swap_u32(address, old.max(value))
        }
        fn swap_u32(&self, address: DeviceAddress, value: u32) -> Result<u32, MemoryFault> {
            self.0.swap_u32(address, value)
        }
        fn compare_exchange_u32(
            &self,
            address: DeviceAddress,
            current: u32,
            new: u32,
        ) -> Result<u32, MemoryFault> {
            self.0.compare_exchange_u32(address, current, new)
        }
    }

    #[test]
    fn a_fetch_min_that_takes_the_maximum_is_a_violation() {
        let memory = WrongMin(FakeDeviceMemory::new(4096));
        let violation = atomics(&memory, DeviceAddress(256)).unwrap_err();
        assert_eq!(violation.clause, "fetch_min takes the smaller");
    }
}
