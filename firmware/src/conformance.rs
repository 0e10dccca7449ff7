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
//! Not yet here (issue 12, point 6, left for a follow-up): DMA completion order and interrupt
//! delivery, which need a port-specific way to let time pass.

use crate::hal::{DeviceAtomics, DeviceMemory, MemoryFault};
use shared_abi::DeviceAddress;

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
/// nothing. `window` is a scratch range of [`WINDOW`] bytes.
pub fn memory_bounds<M: DeviceMemory + ?Sized>(
    memory: &M,
    window: DeviceAddress,
) -> Result<(), Violation> {
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
