//! 64 arbitrary bytes as a launch store or RP descriptor: `firmware::command::validate` on each
//! launch path, `Kernel::decode` against an arbitrary device memory size, and the RP doorbell's
//! descriptor read at an arbitrary address.
//!
//! Input: 64 bytes of `CommandDescriptor`, 8 bytes of memory size, 8 bytes of doorbell address,
//! 1 byte choosing a size variant, 1 byte of fix-ups, then bytes of device memory content
//! (zero-padded). Random bytes almost never form a valid KNN command, so the fix-up byte
//! optionally repairs the kernel id, the mode and flags, the shape (and the result length
//! that follows from it) and the addresses, which lets the fuzzer reach the accepting paths
//! and run the kernel.
//!
//! Checked, beyond "never panics":
//! - `validate` is `Ok` exactly when the mode field names the path, the flags are known bits
//!   (INTERRUPT only on AXLE) and the kernel decodes with the flags cleared; and then it returns
//!   that kernel;
//! - a decoded KNN kernel satisfies every rule of its module docs (independent re-check in
//!   `u128`); its items all lie inside the result space;
//! - when the memory is small enough to build, executing its first, a middle and its last item
//!   succeeds and writes nothing outside the result space;
//! - `read_mailbox_descriptor` is `Ok` exactly when the 64 bytes at the address are inside
//!   memory, and returns those bytes.

use crate::{Bytes, FakeDeviceMemory};
use firmware::command::{read_mailbox_descriptor, validate};
use firmware::kernels::knn::{LANES, RESULT_BYTES_PER_ITEM};
use firmware::kernels::Kernel;
use firmware::FirmwareError;
use shared_abi::command::CommandFlags;
use shared_abi::{CommandDescriptor, KernelId, LaunchMode, Status};
use zerocopy::{FromBytes, IntoBytes};

/// Largest device memory the target builds to execute items in.
const EXECUTE_LIMIT: u64 = 1 << 16;

fn range_inside(start: u64, length: u128, memory_size: u64) -> bool {
    start % 4 == 0 && u128::from(start) + length <= u128::from(memory_size)
}

fn disjoint(a: (u64, u128), b: (u64, u128)) -> bool {
    let (a0, a1) = (u128::from(a.0), u128::from(a.0) + a.1);
    let (b0, b1) = (u128::from(b.0), u128::from(b.0) + b.1);
    a1 <= b0 || b1 <= a0
}

/// Re-checks a decoded kernel against the rules, independently of the decoder.
fn check_decoded(command: &CommandDescriptor, kernel: &Kernel, memory_size: u64) {
    assert_eq!(command.flags, 0, "a kernel decoded with flags set");
    // The model below is KNN's; the other kernels have their own unit tests.
    let Kernel::Knn(knn) = kernel else {
        return;
    };
    assert_eq!(command.kernel, KernelId::KnnDistance as u32);
    let [database, queries, shape, query_count] = command.args;
    let rows = shape & u64::from(u32::MAX);
    let dim = shape >> 32;
    assert_eq!(u64::from(knn.rows()), rows);
    assert_eq!(u64::from(knn.dim()), dim);
    assert_eq!(u64::from(knn.query_count()), query_count);
    assert!(rows > 0 && dim > 0 && query_count > 0);
    assert_eq!(dim % LANES as u64, 0);
    let items = u128::from(rows) * u128::from(query_count);
    assert!(items <= u128::from(u32::MAX));
    assert_eq!(u128::from(knn.items()), items);
    assert_eq!(u128::from(kernel.items()), items);
    let vector = u128::from(dim) * 4;
    let database_range = (database, vector * u128::from(rows));
    let query_range = (queries, vector * u128::from(query_count));
    let result_range = (command.result_address, items * 4);
    assert_eq!(u128::from(command.result_length), items * 4);
    assert!(range_inside(database, database_range.1, memory_size));
    assert!(range_inside(queries, query_range.1, memory_size));
    assert!(range_inside(
        command.result_address,
        result_range.1,
        memory_size
    ));
    assert!(disjoint(result_range, database_range));
    assert!(disjoint(result_range, query_range));
    assert_eq!(knn.database().0, database);
    assert_eq!(knn.queries().0, queries);
    assert_eq!(knn.result_address().0, command.result_address);
    let last = kernel.items() - 1;
    for index in [0, last / 2, last] {
        let item = kernel
            .item(index, &SizeOnly(memory_size))
            .expect("an item below items() exists");
        assert_eq!(item.result_length, RESULT_BYTES_PER_ITEM);
        assert!(item.result_offset + u64::from(item.result_length) <= command.result_length);
    }
    assert_eq!(
        kernel.item(kernel.items(), &SizeOnly(memory_size)),
        Err(FirmwareError::ArgumentOutOfRange)
    );
}

/// Executes a few items of a decoded kernel in a memory of exactly `memory_size` bytes.
fn execute_some(command: &CommandDescriptor, kernel: &Kernel, memory_size: u64, content: &[u8]) {
    if memory_size > EXECUTE_LIMIT {
        return;
    }
    let mut memory = FakeDeviceMemory::new(memory_size as usize);
    memory.fill(0, content);
    let before = memory.clone();
    let last = kernel.items() - 1;
    for index in [0, last / 2, last] {
        assert_eq!(kernel.execute(index, &memory), Ok(()), "item {index}");
    }
    let start = command.result_address as usize;
    let end = start + command.result_length as usize;
    assert_eq!(&memory.contents()[..start], &before.contents()[..start]);
    assert_eq!(&memory.contents()[end..], &before.contents()[end..]);
}

/// A device memory of a given size whose every read faults: decoders see its size only
/// (a kernel that needs a parameter block refuses the command).
struct SizeOnly(u64);

impl firmware::hal::DeviceMemory for SizeOnly {
    fn size(&self) -> u64 {
        self.0
    }
    fn read(
        &self,
        address: shared_abi::DeviceAddress,
        buffer: &mut [u8],
    ) -> Result<(), firmware::hal::MemoryFault> {
        Err(firmware::hal::MemoryFault {
            address,
            length: buffer.len() as u64,
        })
    }
    fn write(
        &self,
        address: shared_abi::DeviceAddress,
        data: &[u8],
    ) -> Result<(), firmware::hal::MemoryFault> {
        Err(firmware::hal::MemoryFault {
            address,
            length: data.len() as u64,
        })
    }
}

fn check_validate(command: &CommandDescriptor, expected: LaunchMode, memory_size: u64) {
    let result = validate(command, expected, &SizeOnly(memory_size));
    let mut for_kernel = *command;
    for_kernel.flags = 0;
    let decoded = Kernel::decode(&for_kernel, &SizeOnly(memory_size));
    let flags = CommandFlags::from_bits(command.flags);
    let reference_ok = command.mode == expected as u32
        && flags.is_some_and(|flags| {
            !flags.contains(CommandFlags::INTERRUPT) || expected == LaunchMode::BackStreaming
        })
        && decoded.is_ok();
    match result {
        Ok(valid) => {
            assert!(
                reference_ok,
                "validate accepted {command:?} on {expected:?}"
            );
            assert_eq!(valid.mode, expected);
            assert_eq!(valid.command, *command);
            assert_eq!(Some(valid.flags), flags);
            assert_eq!(Ok(valid.kernel), decoded);
        }
        Err(status) => {
            assert!(
                !reference_ok,
                "validate refused a valid {command:?} on {expected:?}: {status:?}"
            );
            assert_ne!(Status::from(status), Status::Ok);
        }
    }
}

/// The check: panics exactly where the `command_decode` fuzz target reports a finding.
pub fn check(data: &[u8]) {
    let mut input = Bytes::new(data);
    let raw: [u8; 64] = input.array();
    let mut command = CommandDescriptor::read_from_bytes(&raw).expect("64 bytes");
    let raw_size = input.u64();
    let doorbell = input.u64();
    let variant = input.u8();
    let fixups = input.u8();
    if fixups & 1 != 0 {
        command.kernel = KernelId::KnnDistance as u32;
    }
    if fixups & 2 != 0 {
        command.mode = 1 + command.mode % 3;
        command.flags &= CommandFlags::INTERRUPT.bits();
    }
    if fixups & 4 != 0 {
        let rows = 1 + command.args[2] % 64;
        let dim = LANES as u64 * (1 + (command.args[2] >> 32) % 4);
        command.args[2] = rows | dim << 32;
        command.args[3] = 1 + command.args[3] % 4;
        command.result_length = rows * command.args[3] * 4;
    }
    if fixups & 8 != 0 {
        let [database, queries, ..] = &mut command.args;
        for address in [database, queries, &mut command.result_address] {
            *address = (*address % EXECUTE_LIMIT) & !3;
        }
    }
    let command_bytes: [u8; 64] = command.as_bytes().try_into().expect("64 bytes");
    // Sizes near the command's own ranges find the boundary cases; small sizes let the items run.
    let memory_size = match variant % 4 {
        0 => raw_size,
        1 => raw_size % (EXECUTE_LIMIT + 1),
        2 => command
            .result_address
            .wrapping_add(command.result_length)
            .wrapping_add(raw_size % 16),
        _ => command.args[0]
            .max(command.args[1])
            .max(command.result_address)
            .wrapping_add(raw_size % (EXECUTE_LIMIT + 1)),
    };

    for mode in [
        LaunchMode::RemotePolling,
        LaunchMode::BulkSynchronous,
        LaunchMode::BackStreaming,
    ] {
        check_validate(&command, mode, memory_size);
    }

    match Kernel::decode(&command, &SizeOnly(memory_size)) {
        Ok(kernel) => {
            check_decoded(&command, &kernel, memory_size);
            execute_some(&command, &kernel, memory_size, input.remaining());
        }
        Err(status) => {
            assert_ne!(Status::from(status), Status::Ok);
            if KernelId::try_from(command.kernel).is_err() {
                assert_eq!(status, FirmwareError::UnknownKernel);
            }
        }
    }

    // The RP doorbell names where the descriptor is: an arbitrary device address.
    let small = (raw_size % 0x9000) as usize;
    let mut memory = FakeDeviceMemory::new(small);
    memory.fill(0x8000, &command_bytes);
    memory.fill(0, input.remaining());
    let address = if variant & 0x10 != 0 {
        0x8000 + (doorbell % 0x100)
    } else {
        doorbell
    };
    match read_mailbox_descriptor(&memory, address) {
        Ok(read) => {
            let start = address as usize;
            assert!(start + 64 <= small);
            assert_eq!(read.as_bytes(), &memory.contents()[start..start + 64]);
        }
        Err(status) => {
            assert_eq!(status, FirmwareError::ArgumentOutOfRange);
            assert!(u128::from(address) + 64 > small as u128);
        }
    }
}
