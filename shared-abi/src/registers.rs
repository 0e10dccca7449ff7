//! The device's register window: one 4 KiB page of aligned 8-byte registers, the BAR a CXL
//! Type 3 device exposes next to its memory (HDM) range.
//!
//! Across processes the emulator hands this page to the host at attach (a memfd, over
//! SCM_RIGHTS) and the host driver maps it and reads it with volatile loads only
//! (`host_driver::registers`). It holds:
//!
//! - the device identity at offsets below [`MAILBOX_MIRROR`], which the driver probes at
//!   attach and checks against what it was built for (magic, ABI version, layout hash) and
//!   against the session's announced geometry (device memory size, data window);
//! - the device epoch at [`EPOCH`]: a number the emulator process draws when it starts, the
//!   same for every session it serves and different for the next process started on the same
//!   socket, so that a host that lost its emulator knows, when it attaches again, whether it
//!   found the same device or a new one (whose memory holds nothing of the old one's);
//! - a read-only mirror of the RP mailbox ([`crate::mailbox`]) at [`MAILBOX_MIRROR`] `+`
//!   the mailbox register's offset, updated by the device whenever the firmware writes a
//!   mailbox register.
//!
//! The *timed* model still reaches the mailbox through CXL.io link messages (a poll costs the
//! CXL.io round trip in virtual time; a plain load from a mapped page would cost nothing and
//! make the co-simulated run depend on wall-clock races). The mapped page is what a driver's
//! probe and a debugger read; its values are the same registers.

/// Bytes of the register window.
pub const WINDOW_BYTES: u64 = 4096;
/// [`crate::ABI_MAGIC`].
pub const MAGIC: u64 = 0x00;
/// [`crate::ABI_VERSION`] (low 32 bits).
pub const ABI_VERSION: u64 = 0x08;
/// [`crate::LAYOUT_HASH`].
pub const LAYOUT_HASH: u64 = 0x10;
/// Bytes of device memory.
pub const DEVICE_MEMORY_BYTES: u64 = 0x18;
/// First byte of the device data window.
pub const DATA_BASE: u64 = 0x20;
/// End (exclusive) of the device data window.
pub const DATA_END: u64 = 0x28;
/// The device epoch: drawn by the emulator process when it starts (never 0), the same for all
/// its sessions, another value for the next process on the same socket; also in the
/// session's `SessionReady` (`cosim_link::attach`), which must agree. It identifies the
/// device instance, never enters a figure, and 0 means none was published.
pub const EPOCH: u64 = 0x30;
/// Where the RP mailbox mirror starts: mailbox register `r` is at `MAILBOX_MIRROR + r`.
pub const MAILBOX_MIRROR: u64 = 0x100;

const _: () = assert!(MAILBOX_MIRROR + crate::mailbox::WINDOW_LENGTH <= WINDOW_BYTES);
const _: () = assert!(DATA_END < EPOCH && EPOCH < MAILBOX_MIRROR);
