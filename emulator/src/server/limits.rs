//! The checks of a session request ("What a host cannot do to the emulator" in the parent
//! module's docs): every size bounded, the descriptors counted and inspected, before anything
//! is created for the session.

use super::Setup;
use crate::config::DeviceConfig;
use crate::cosim::Emulator;
use cosim_link::attach::SessionRequest;
use cosim_link::phys::PhysicalMemory;
use cosim_link::shm::MappedWords;
use cosim_link::sync::Arc;
use std::os::fd::AsFd;

/// Checks the session request and maps the host's memory. The host must speak this build's
/// turn protocol ([`cosim_link::turn::PROTOCOL`]); every size in the request is bounded
/// before anything is created for it ([`check_session_request`]), the descriptors by their
/// count and kind.
pub(super) fn prepare(
    request: &SessionRequest,
    fds: &[std::os::fd::OwnedFd],
) -> Result<(Arc<PhysicalMemory>, Setup), SetupError> {
    if request.turn_protocol != cosim_link::turn::PROTOCOL {
        return Err(SetupError::TurnProtocol {
            host: request.turn_protocol,
        });
    }
    let setup = check_session_request(request)?;
    let wall = setup.wall.is_some();
    let wanted = if wall { 2 } else { 1 };
    if fds.len() != wanted {
        return Err(SetupError::Descriptors {
            carried: fds.len(),
            wanted,
            wall,
        });
    }
    if let Some(line) = fds.get(1) {
        check_eventfd(line.as_fd())?;
    }
    let fd = fds.first().ok_or(SetupError::NoHostMemory)?;
    let mapped =
        MappedWords::map(fd.as_fd(), request.host_memory_bytes).map_err(SetupError::HostMemory)?;
    let memory = PhysicalMemory::from_store(Box::new(mapped))?;
    Ok((Arc::new(memory), setup))
}

/// Why a session request was refused; sent to the host as its text (the refusal message).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The host speaks another version of the turn's messages.
    #[error(
        "the host speaks turn protocol {host}, this emulator {}: run `axle emu` and \
         `axle run --attach` from the same build",
        cosim_link::turn::PROTOCOL
    )]
    TurnProtocol {
        /// The host's version.
        host: u32,
    },
    /// The device set-up is not valid JSON of a [`Setup`].
    #[error("invalid device set-up: {0}")]
    Json(#[from] serde_json::Error),
    /// The device configuration breaks a limit of the model or the machine.
    #[error("invalid device set-up: {0}")]
    Device(#[from] cosim_link::limits::ConfigError),
    /// Device memory too small for the control area, the scratch area and 1 MiB of data.
    #[error(
        "invalid device set-up: device.device_memory_mib is {mib}, less than the {least_mib} MiB \
         the device needs (the control area, the firmware's scratch area and 1 MiB of data)"
    )]
    DeviceMemoryTooSmall {
        /// MiB asked for.
        mib: u64,
        /// MiB needed.
        least_mib: u64,
    },
    /// Device memory beyond what the machine has.
    #[error("invalid device set-up: {0}")]
    DeviceMemory(#[source] cosim_link::limits::Refused),
    /// The host memory segment is larger than the machine allows.
    #[error("host memory segment: {0}; the emulator maps all of it and lands DMA in it")]
    HostMemoryTooLarge(#[source] cosim_link::limits::Refused),
    /// The request carried the wrong number of descriptors.
    #[error(
        "the session request carried {carried} descriptors; a {} run takes {wanted} (the host \
         memory segment{}); all were closed",
        if *wall { "wall-clock" } else { "virtual-time" },
        if *wall { " and the interrupt eventfd" } else { "" }
    )]
    Descriptors {
        /// Descriptors carried.
        carried: usize,
        /// Descriptors the run takes.
        wanted: usize,
        /// Whether the run is a wall-clock run.
        wall: bool,
    },
    /// No host memory segment came with the request.
    #[error("no host memory segment")]
    NoHostMemory,
    /// The host memory segment could not be mapped.
    #[error("host memory segment: {0}")]
    HostMemory(#[source] cosim_link::shm::SegmentError),
    /// The mapped segment is not a usable physical memory.
    #[error(transparent)]
    Physical(#[from] cosim_link::phys::PhysError),
    /// The interrupt line's descriptor could not be inspected.
    #[error("cannot inspect the interrupt line's descriptor: {0}")]
    InspectInterruptLine(#[source] std::io::Error),
    /// The interrupt line is not an eventfd.
    #[error("the interrupt line's descriptor is {0}, not an eventfd")]
    NotEventfd(String),
}

/// Checks every size of a session request before anything is created for it: the device
/// set-up by [`DeviceConfig::validate`] (the model's limits) and [`check_device_memory`] (the
/// device's own needs and the machine's memory), the host memory segment by the machine's
/// memory. Returns the set-up; the error names the value, the limit and why.
pub fn check_session_request(request: &SessionRequest) -> Result<Setup, SetupError> {
    let setup: Setup = serde_json::from_str(&request.device_setup)?;
    setup.device.validate()?;
    check_device_memory(&setup.device)?;
    cosim_link::limits::bytes("host_memory_bytes", request.host_memory_bytes, 1)
        .map_err(SetupError::HostMemoryTooLarge)?;
    Ok(setup)
}

/// Checks the device memory a set-up asks for: large enough for the firmware's scratch area
/// above the data window (the model's limit) and no larger than the machine's available
/// memory (an attached host fills it with its data set).
pub fn check_device_memory(device: &DeviceConfig) -> Result<(), SetupError> {
    let bytes = Emulator::device_memory_bytes(device);
    let scratch = firmware::scratch::ScratchLayout::new(
        shared_abi::DeviceAddress(0),
        crate::cosim::CHUNK_CAPACITY,
    )
    .bytes();
    let smallest = shared_abi::device_map::DATA_BASE
        .0
        .saturating_add(scratch)
        .saturating_add(1 << 20);
    if bytes < smallest {
        return Err(SetupError::DeviceMemoryTooSmall {
            mib: device.device_memory_mib,
            least_mib: smallest.div_ceil(1 << 20),
        });
    }
    cosim_link::limits::bytes("device.device_memory_mib (in bytes)", bytes, 1)
        .map(|_| ())
        .map_err(SetupError::DeviceMemory)
}

/// Checks that the interrupt line a wall-clock host sent is an eventfd: the emulator writes
/// it from its writer thread, and a pipe nobody reads would block that thread for good.
fn check_eventfd(fd: std::os::fd::BorrowedFd<'_>) -> Result<(), SetupError> {
    use std::os::fd::AsRawFd;
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(SetupError::InspectInterruptLine)?;
    if link.as_os_str() != "anon_inode:[eventfd]" {
        return Err(SetupError::NotEventfd(link.display().to_string()));
    }
    Ok(())
}
