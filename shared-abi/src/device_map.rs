//! The device's CXL.mem (HDM) address map as the host sees it.
//!
//! | range | what |
//! |-------|------|
//! | [`LAUNCH_WINDOW`] | a 64-byte store of a [`crate::CommandDescriptor`] launches a kernel (the memory controller's packet filter) |
//! | [`FLOW_CONTROL`] | [`crate::FlowControlMessage`] of the ring (host stores, device reads) |
//! | [`SHADOW_DESCRIPTOR`] | [`crate::ShadowRegionDescriptor`] then [`crate::sgl::MAX_SG_ENTRIES`] entries |
//! | [`RP_DESCRIPTOR`] | where an RP host stores the descriptor before ringing the mailbox |
//! | [`DATA_BASE`].. | data sets and result spaces |

use crate::units::DeviceAddress;

/// Launch range recognised by the packet filter.
pub const LAUNCH_WINDOW: DeviceAddress = DeviceAddress(0x0000);
/// Bytes of the launch range.
pub const LAUNCH_WINDOW_LENGTH: u64 = 0x1000;
/// Whether a host store at `address` falls in the launch range.
pub const fn in_launch_window(address: DeviceAddress) -> bool {
    address.0.wrapping_sub(LAUNCH_WINDOW.0) < LAUNCH_WINDOW_LENGTH
}

/// The flow-control block.
pub const FLOW_CONTROL: DeviceAddress = DeviceAddress(0x1000);
/// The shadow region descriptor (entries follow at +64).
pub const SHADOW_DESCRIPTOR: DeviceAddress = DeviceAddress(0x2000);
/// Where shadow scatter-gather entries start.
pub const SHADOW_ENTRIES: DeviceAddress = DeviceAddress(0x2040);
/// The RP command descriptor slot.
pub const RP_DESCRIPTOR: DeviceAddress = DeviceAddress(0x8000);
/// Start of general data (data sets, results).
pub const DATA_BASE: DeviceAddress = DeviceAddress(0x10_0000);

const _: () =
    assert!(SHADOW_ENTRIES.0 + (crate::sgl::MAX_SG_ENTRIES as u64) * 16 <= RP_DESCRIPTOR.0);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_window_holds_exactly_its_own_bytes() {
        assert!(in_launch_window(LAUNCH_WINDOW));
        assert!(in_launch_window(DeviceAddress(
            LAUNCH_WINDOW.0 + LAUNCH_WINDOW_LENGTH - 1
        )));
        assert!(!in_launch_window(DeviceAddress(
            LAUNCH_WINDOW.0 + LAUNCH_WINDOW_LENGTH
        )));
        assert!(!in_launch_window(FLOW_CONTROL));
        assert!(!in_launch_window(DATA_BASE));
        assert!(!in_launch_window(DeviceAddress(u64::MAX)));
    }
}
