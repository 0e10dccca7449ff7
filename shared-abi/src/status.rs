//! Status and error codes that cross the link: `#[repr(u32)]`, 0 = success.

/// A status the device reports (mailbox status word, BS completion, ring device status,
/// error metadata records).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Status {
    /// Success.
    Ok = 0,
    /// The command names a kernel the firmware does not have.
    UnknownKernel = 1,
    /// A descriptor field is malformed (unknown mode, reserved bits set, bad magic).
    MalformedDescriptor = 2,
    /// A kernel argument or result range lies outside device memory or is inconsistent.
    ArgumentOutOfRange = 3,
    /// A flow-control message put a head beyond the device's tail or moved it backwards.
    HeadBeyondTail = 4,
    /// A DMA translation fell outside the shadowed scatter-gather list.
    TranslationFault = 5,
    /// The ring is latched BROKEN; nothing more is streamed until it is reprogrammed.
    RingBroken = 6,
    /// A command arrived while another one is running.
    Busy = 7,
    /// Magic, ABI version or layout hash disagree.
    AbiMismatch = 8,
    /// A device memory access fell outside device memory.
    DeviceMemoryFault = 9,
    /// An AXLE launch arrived before a DMA region was programmed.
    NoRegion = 10,
    /// The device's own hardware broke the contract of the firmware's HAL (for example a DMA
    /// completion out of submission order): a board or emulator bug, not the host's input.
    HalContract = 11,
}

impl Status {
    /// The code as carried on the link.
    pub const fn code(self) -> u32 {
        self as u32
    }
}

impl TryFrom<u32> for Status {
    type Error = u32;
    fn try_from(value: u32) -> Result<Self, u32> {
        Ok(match value {
            0 => Status::Ok,
            1 => Status::UnknownKernel,
            2 => Status::MalformedDescriptor,
            3 => Status::ArgumentOutOfRange,
            4 => Status::HeadBeyondTail,
            5 => Status::TranslationFault,
            6 => Status::RingBroken,
            7 => Status::Busy,
            8 => Status::AbiMismatch,
            9 => Status::DeviceMemoryFault,
            10 => Status::NoRegion,
            11 => Status::HalContract,
            other => return Err(other),
        })
    }
}

impl core::fmt::Display for Status {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let text = match self {
            Status::Ok => "ok",
            Status::UnknownKernel => "unknown kernel id",
            Status::MalformedDescriptor => "malformed descriptor",
            Status::ArgumentOutOfRange => "kernel argument or result range out of range",
            Status::HeadBeyondTail => "flow-control head beyond tail or moving backwards",
            Status::TranslationFault => "DMA address outside the scatter-gather list",
            Status::RingBroken => "ring latched BROKEN",
            Status::Busy => "device busy",
            Status::AbiMismatch => "ABI magic, version or layout hash mismatch",
            Status::DeviceMemoryFault => "device memory access out of range",
            Status::NoRegion => "no DMA region programmed",
            Status::HalContract => "device hardware broke the firmware's HAL contract",
        };
        f.write_str(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_round_trips_through_its_code() {
        for code in 0..=11u32 {
            let status = Status::try_from(code).unwrap();
            assert_eq!(status.code(), code);
        }
        assert_eq!(Status::try_from(12), Err(12));
    }

    #[test]
    fn every_status_displays_its_own_text() {
        extern crate std;
        use std::string::ToString;
        let texts: std::vec::Vec<std::string::String> = (0..=11u32)
            .map(|code| Status::try_from(code).unwrap().to_string())
            .collect();
        assert_eq!(texts[0], "ok");
        assert_eq!(
            texts[4],
            "flow-control head beyond tail or moving backwards"
        );
        for (code, text) in texts.iter().enumerate() {
            assert!(!text.is_empty(), "status {code} has no text");
            assert_eq!(
                texts.iter().filter(|other| *other == text).count(),
                1,
                "status {code}'s text is not its own"
            );
        }
    }
}
