//! Command processing: decoding and validating what the host sends on the three launch paths.
//!
//! - RP: a doorbell write names the device address of a descriptor the host stored with
//!   CXL.mem; the firmware reads it from device memory.
//! - BS and AXLE: the packet filter hands over the 64-byte launch store itself.
//!
//! Validation happens once, here: mode, flags, kernel id and every kernel argument. A malformed
//! command yields a [`FirmwareError`] (the device reports it as the wire's `Status`), never a panic.

use crate::error::FirmwareError;
use crate::hal::DeviceMemory;
use crate::kernels::Kernel;
use shared_abi::command::CommandFlags;
use shared_abi::{CommandDescriptor, DeviceAddress, LaunchMode};

/// A command that passed validation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ValidCommand {
    /// The command as sent.
    pub command: CommandDescriptor,
    /// Its launch mode.
    pub mode: LaunchMode,
    /// Its flags.
    pub flags: CommandFlags,
    /// The decoded kernel.
    pub kernel: Kernel,
}

/// Validates `command` arriving on the path of `expected` mode.
pub fn validate<M: DeviceMemory>(
    command: &CommandDescriptor,
    expected: LaunchMode,
    memory: &M,
) -> Result<ValidCommand, FirmwareError> {
    let mode =
        LaunchMode::try_from(command.mode).map_err(|_| FirmwareError::MalformedDescriptor)?;
    if mode != expected {
        return Err(FirmwareError::MalformedDescriptor);
    }
    let flags = CommandFlags::from_bits(command.flags).ok_or(FirmwareError::MalformedDescriptor)?;
    if flags.contains(CommandFlags::INTERRUPT) && mode != LaunchMode::BackStreaming {
        return Err(FirmwareError::MalformedDescriptor);
    }
    // Kernels see the command without the processor's flags.
    let mut for_kernel = *command;
    for_kernel.flags = 0;
    let kernel = Kernel::decode(&for_kernel, memory)?;
    Ok(ValidCommand {
        command: *command,
        mode,
        flags,
        kernel,
    })
}

/// Reads an RP descriptor from device memory at `address` (the doorbell value).
pub fn read_mailbox_descriptor<M: DeviceMemory>(
    memory: &M,
    address: u64,
) -> Result<CommandDescriptor, FirmwareError> {
    memory
        .read_value::<CommandDescriptor>(DeviceAddress(address))
        .map_err(|_| FirmwareError::ArgumentOutOfRange)
}
