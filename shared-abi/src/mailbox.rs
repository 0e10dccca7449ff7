//! The RP mailbox: registers in the device's CXL.io register window (byte offsets, each an
//! aligned 8-byte register).
//!
//! RP protocol: the host stores the [`crate::CommandDescriptor`] at
//! [`crate::device_map::RP_DESCRIPTOR`] with CXL.mem, writes the descriptor address to
//! [`DOORBELL`] with CXL.io (enqueue), polls [`STATUS`] with CXL.io reads until it leaves
//! [`status::RUNNING`], and writes [`DEQUEUE`] (dequeue) before loading the results with CXL.mem.

/// Write: the device address of a command descriptor; enqueues it.
pub const DOORBELL: u64 = 0x00;
/// Read: the mailbox state, one of [`status`] in the low 32 bits; when
/// [`status::COMPLETE`], the [`crate::Status`] code of the command in the high 32 bits.
pub const STATUS: u64 = 0x08;
/// Read: the [`crate::Status`] code of the last completed command.
pub const COMPLETION_CODE: u64 = 0x10;
/// Read: the tag of the last completed command.
pub const COMPLETION_TAG: u64 = 0x18;
/// Write (any value): dequeue the completed command; the mailbox returns to idle.
pub const DEQUEUE: u64 = 0x20;
/// Bytes in the register window.
pub const WINDOW_LENGTH: u64 = 0x40;

/// Values of the [`STATUS`] register.
pub mod status {
    /// No command.
    pub const IDLE: u64 = 0;
    /// A command is running.
    pub const RUNNING: u64 = 1;
    /// The command completed; [`super::COMPLETION_CODE`] says how.
    pub const COMPLETE: u64 = 2;
}
