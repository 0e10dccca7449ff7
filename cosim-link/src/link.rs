//! The host's view of the link to the device, and the co-simulation turn.
//!
//! Everything the host runtime sends to the device goes through [`DeviceLink`], stamped with
//! the host's virtual time; everything that comes back is a [`LinkResponse`] delivered to the
//! [`HostAgent`]. In-process the emulator implements `DeviceLink` by pushing messages into its
//! event queue and calls the agent directly; across processes a transport implements the same
//! trait over shared memory. The host runtime cannot tell the two apart, which is what makes a
//! multi-process run print exactly what an in-process run prints.

use shared_abi::{DeviceAddress, Ticks};

/// Host-to-device traffic, stamped with the host's time. Every method returns at once: the
/// modelled latency is the link's business, and answers come back as [`LinkResponse`]s.
pub trait DeviceLink {
    /// A posted CXL.mem store of at most 64 bytes (launch, flow control, shadow descriptors).
    fn mem_store(&mut self, now: Ticks, address: DeviceAddress, data: &[u8]);
    /// A CXL.mem store whose response the host waits for (the BS launch). The response,
    /// [`LinkResponse::StoreDone`], returns when the device completes the kernel.
    fn mem_store_synchronous(
        &mut self,
        now: Ticks,
        address: DeviceAddress,
        data: &[u8],
        token: u64,
    );
    /// CXL.mem loads of `length` bytes at `address` in 64-byte lines, issued back to back by
    /// one core that keeps at most `outstanding` lines in flight (its memory-level
    /// parallelism); [`LinkResponse::LoadDone`] carries the bytes.
    fn mem_load(
        &mut self,
        now: Ticks,
        address: DeviceAddress,
        length: u64,
        outstanding: u32,
        token: u64,
    );
    /// A CXL.io register write (RP mailbox doorbell, dequeue).
    fn io_write(&mut self, now: Ticks, register: u64, value: u64);
    /// A CXL.io register read (RP mailbox poll); [`LinkResponse::IoReadDone`] carries the value.
    fn io_read(&mut self, now: Ticks, register: u64, token: u64);
}

/// Something that came back from the device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkResponse {
    /// A synchronous store completed; `status` is a [`shared_abi::Status`] code.
    StoreDone {
        /// The token given with the store.
        token: u64,
        /// The device's status code.
        status: u32,
    },
    /// A load completed.
    LoadDone {
        /// The token given with the load.
        token: u64,
        /// The bytes loaded.
        data: Vec<u8>,
    },
    /// A register read completed.
    IoReadDone {
        /// The token given with the read.
        token: u64,
        /// The register's value.
        value: u64,
    },
    /// An interrupt, delivered after the modelled handling latency. `message` is its MSI-X
    /// message data: the metadata tail the interrupting DMA request published.
    Interrupt {
        /// The message data.
        message: u64,
    },
}

/// When the host wants its next turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// At this time (or earlier, if a response arrives first).
    At(Ticks),
    /// Only when a response arrives.
    OnResponse,
    /// Never: the host has finished.
    Done,
}

/// The host as a co-simulated party: "run at virtual time t, return your next wake-up time".
pub trait HostAgent {
    /// A response arrived at `at` (called before the turn at `at`).
    fn deliver(&mut self, at: Ticks, response: LinkResponse);
    /// Does everything due at `now` and says when to call again.
    fn turn(&mut self, now: Ticks, link: &mut dyn DeviceLink) -> Wake;
}
