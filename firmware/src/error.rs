//! The firmware's own error type, and its one mapping onto the wire.
//!
//! Inside the firmware every failure is a [`FirmwareError`]: it says whose fault it is (the
//! host's input, a device-memory access, the firmware's own hardware breaking the HAL's
//! contract) and keeps what the HAL reported. Only where a status leaves the device (the RP
//! mailbox, a BS launch response, the ring's device status word, the trace) is it converted to
//! the wire's [`Status`], in [`From<FirmwareError> for Status`](Status#impl-From<FirmwareError>-for-Status);
//! nowhere else. The type is `Copy` and allocation-free, as the hot path needs.

use core::fmt;

use shared_abi::Status;

use crate::hal::MemoryFault;

/// A contract of [`crate::hal`] that the device's hardware (a board, or the emulator) broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HalBreach {
    /// A DMA completion came back that is not the oldest request in flight (the engine MUST
    /// report completions in submission order), or came back with nothing in flight.
    CompletionOutOfOrder {
        /// The tag the engine reported.
        reported: u64,
        /// The oldest tag in flight, if any.
        expected: Option<u64>,
    },
}

impl fmt::Display for HalBreach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HalBreach::CompletionOutOfOrder {
                reported,
                expected: Some(expected),
            } => write!(
                f,
                "DMA completion for request {reported} while request {expected} is the oldest in flight"
            ),
            HalBreach::CompletionOutOfOrder {
                reported,
                expected: None,
            } => write!(
                f,
                "DMA completion for request {reported} with no request in flight"
            ),
        }
    }
}

/// Why the firmware refused or stopped something.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirmwareError {
    /// The command names a kernel the firmware does not have.
    UnknownKernel,
    /// A field the host wrote is malformed (unknown mode, reserved bits, bad magic, an
    /// inconsistent region descriptor).
    MalformedDescriptor,
    /// A kernel argument or result range lies outside device memory or is inconsistent.
    ArgumentOutOfRange,
    /// A flow-control message put a head beyond the device's tail or moved it backwards.
    HeadBeyondTail,
    /// A DMA translation fell outside the shadowed scatter-gather list.
    TranslationFault,
    /// The ring is latched BROKEN.
    RingBroken,
    /// A command arrived while another one is running, or a queue is full.
    Busy,
    /// Magic, ABI version or layout hash disagree.
    AbiMismatch,
    /// A device-memory access fell outside device memory (the access, as the HAL reported it).
    MemoryFault(MemoryFault),
    /// A device-memory address computation overflowed before any access was made.
    AddressOverflow,
    /// An AXLE launch arrived before a DMA region was programmed.
    NoRegion,
    /// The device's hardware broke the HAL's contract.
    HalContract(HalBreach),
    /// The hardware reported a failure in the wire's terms (a DMA engine's status register).
    Reported(Status),
}

impl From<MemoryFault> for FirmwareError {
    fn from(fault: MemoryFault) -> FirmwareError {
        FirmwareError::MemoryFault(fault)
    }
}

impl From<HalBreach> for FirmwareError {
    fn from(breach: HalBreach) -> FirmwareError {
        FirmwareError::HalContract(breach)
    }
}

/// The one place a firmware error becomes a wire status.
impl From<FirmwareError> for Status {
    fn from(error: FirmwareError) -> Status {
        match error {
            FirmwareError::UnknownKernel => Status::UnknownKernel,
            FirmwareError::MalformedDescriptor => Status::MalformedDescriptor,
            FirmwareError::ArgumentOutOfRange => Status::ArgumentOutOfRange,
            FirmwareError::HeadBeyondTail => Status::HeadBeyondTail,
            FirmwareError::TranslationFault => Status::TranslationFault,
            FirmwareError::RingBroken => Status::RingBroken,
            FirmwareError::Busy => Status::Busy,
            FirmwareError::AbiMismatch => Status::AbiMismatch,
            FirmwareError::MemoryFault(_) | FirmwareError::AddressOverflow => {
                Status::DeviceMemoryFault
            }
            FirmwareError::NoRegion => Status::NoRegion,
            FirmwareError::HalContract(_) => Status::HalContract,
            FirmwareError::Reported(status) => status,
        }
    }
}

impl fmt::Display for FirmwareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FirmwareError::MemoryFault(fault) => write!(
                f,
                "device memory access of {} bytes at {:#x} out of range",
                fault.length, fault.address.0
            ),
            FirmwareError::AddressOverflow => f.write_str("device memory address overflow"),
            FirmwareError::HalContract(breach) => write!(f, "HAL contract broken: {breach}"),
            FirmwareError::Reported(status) => write!(f, "hardware reported: {status}"),
            other => write!(f, "{}", Status::from(*other)),
        }
    }
}

impl core::error::Error for FirmwareError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hal_breach_reaches_the_wire_as_such_not_as_a_malformed_descriptor() {
        let breach = FirmwareError::from(HalBreach::CompletionOutOfOrder {
            reported: 3,
            expected: Some(2),
        });
        assert_eq!(Status::from(breach), Status::HalContract);
        assert_ne!(Status::from(breach), Status::MalformedDescriptor);
    }

    #[test]
    fn a_memory_fault_keeps_its_access_and_maps_to_device_memory_fault() {
        let fault = MemoryFault {
            address: shared_abi::DeviceAddress(0x40),
            length: 8,
        };
        let error = FirmwareError::from(fault);
        assert_eq!(error, FirmwareError::MemoryFault(fault));
        assert_eq!(Status::from(error), Status::DeviceMemoryFault);
    }

    #[test]
    fn a_reported_status_passes_through_unchanged() {
        let error = FirmwareError::Reported(Status::TranslationFault);
        assert_eq!(Status::from(error), Status::TranslationFault);
    }
}
