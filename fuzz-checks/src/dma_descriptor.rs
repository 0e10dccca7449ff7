//! Arbitrary DMA descriptors against arbitrary memory sizes: `emulator::dma::check_descriptor`,
//! the emulator's last line of defence before a DMA write lands in host memory.
//!
//! The descriptor comes from device scratch memory (written by the firmware, with host
//! physical addresses translated from the host-written scatter-gather table), so every field is
//! treated as hostile. A variant byte puts the memory sizes at the descriptor's own ends (one
//! word short, exact, beyond) where the rule's edges are.
//!
//! Checked, beyond "never panics":
//! - `Ok(kind)` exactly when the kind is known, the length is a non-zero multiple of 8 of at
//!   most 4096 (exactly 8 for a publishing write), the source range lies inside device memory,
//!   and the destination is 8-aligned with its range inside host memory (no wrap-around);
//! - for an accepted descriptor over memories small enough to build, the device read and the
//!   host write that the emulator then performs (`DeviceDram::read`, `PhysicalMemory::
//!   write_words` or `store_u64`) both succeed, and the host write changes nothing outside the
//!   destination range.

use crate::Bytes;
use emulator::dma::check_descriptor;
use emulator::dram::DeviceDram;
use firmware::hal::{DeviceMemory, DmaDescriptor, DmaKind};
use host_driver::phys::PhysicalMemory;
use host_driver::sync::Ordering;
use shared_abi::{DeviceAddress, HostPhysAddr};
use zerocopy::FromBytes;

/// Largest memories the target builds to perform the write.
const BUILD_LIMIT: u64 = 1 << 16;

fn reference(descriptor: &DmaDescriptor, device_size: u64, host_size: u64) -> Option<DmaKind> {
    let kind = DmaKind::try_from(descriptor.kind).ok()?;
    let length = u64::from(descriptor.length);
    if length == 0 || length % 8 != 0 || length > 4096 {
        return None;
    }
    if kind.publishes() && length != 8 {
        return None;
    }
    if u128::from(descriptor.source) + u128::from(length) > u128::from(device_size) {
        return None;
    }
    if descriptor.destination % 8 != 0
        || u128::from(descriptor.destination) + u128::from(length) > u128::from(host_size)
    {
        return None;
    }
    Some(kind)
}

fn near(end: u64, raw: u64) -> u64 {
    // end - 16 ..= end + 15, wrapping.
    end.wrapping_add(raw % 32).wrapping_sub(16)
}

/// The check: panics exactly where the `dma_descriptor` fuzz target reports a finding.
pub fn check(data: &[u8]) {
    let mut input = Bytes::new(data);
    let bytes: [u8; 32] = input.array();
    let mut descriptor = DmaDescriptor::read_from_bytes(&bytes).expect("32 bytes");
    let mut device_size = input.u64();
    let mut host_size = input.u64();
    let variant = input.u8();
    if variant & 1 != 0 {
        // Plausible shapes: a known kind, a small length.
        descriptor.kind = 1 + descriptor.kind % 5;
        descriptor.length %= 4104;
    }
    if variant & 2 != 0 {
        // Small memories and addresses inside them, so that the write can be performed.
        device_size %= BUILD_LIMIT + 1;
        host_size %= BUILD_LIMIT + 1;
        descriptor.source %= BUILD_LIMIT;
        descriptor.destination %= BUILD_LIMIT;
    }
    if variant & 4 != 0 {
        device_size = near(
            descriptor.source.wrapping_add(u64::from(descriptor.length)),
            device_size,
        );
    }
    if variant & 8 != 0 {
        host_size = near(
            descriptor
                .destination
                .wrapping_add(u64::from(descriptor.length)),
            host_size,
        );
    }

    let result = check_descriptor(&descriptor, device_size, host_size);
    let expected = reference(&descriptor, device_size, host_size);
    match result {
        Ok(kind) => assert_eq!(Some(kind), expected, "accepted {descriptor:?}"),
        Err(status) => assert_eq!(
            expected, None,
            "refused {descriptor:?} ({status:?}) for device {device_size} host {host_size}"
        ),
    }
    let Some(kind) = expected else {
        return;
    };
    if device_size > BUILD_LIMIT || host_size > BUILD_LIMIT {
        return;
    }

    // What the emulator does next with an accepted descriptor: read the source, land it.
    let dram = DeviceDram::new(device_size);
    let fill: Vec<u8> = input.remaining().iter().copied().cycle().take(64).collect();
    let _ = dram.write(DeviceAddress(0), &fill);
    let mut payload = vec![0u8; descriptor.length as usize];
    dram.read(DeviceAddress(descriptor.source), &mut payload)
        .expect("an accepted source range is inside device memory");
    let host = PhysicalMemory::new(host_size & !7).expect("whole words");
    let result = if kind.publishes() {
        let mut word = [0u8; 8];
        word.copy_from_slice(&payload[..8]);
        host.store_u64(
            HostPhysAddr(descriptor.destination),
            u64::from_le_bytes(word),
            Ordering::Release,
        )
    } else {
        host.write_words(HostPhysAddr(descriptor.destination), &payload)
    };
    result.expect("an accepted destination range is inside host memory");
    // Nothing outside the destination changed.
    let mut image = vec![0u8; (host_size & !7) as usize];
    host.read_words(HostPhysAddr(0), &mut image)
        .expect("whole memory");
    let start = descriptor.destination as usize;
    let end = start + descriptor.length as usize;
    assert!(image[..start].iter().all(|&b| b == 0));
    assert!(image[end..].iter().all(|&b| b == 0));
    assert_eq!(&image[start..end], &payload[..]);
}
