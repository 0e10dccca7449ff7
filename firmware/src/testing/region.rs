//! A ring region programmed into the fake device memory as the host driver does it.

use super::*;

/// Where a host physical address falls in a [`TestRegion`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionPlace {
    /// In the control block, at `offset`.
    Control {
        /// Byte offset in the control block.
        offset: u64,
    },
    /// In metadata slot `slot`.
    MetadataSlot {
        /// The slot.
        slot: u64,
        /// Byte offset in the record.
        within: u64,
    },
    /// In payload slot `slot`.
    PayloadSlot {
        /// The slot.
        slot: u32,
        /// Byte offset in the slot.
        within: u64,
    },
    /// In the region but in no ring (padding).
    Unused,
    /// Not in the region.
    Outside,
}

/// A host DMA region as the host driver would program it: a canonical [`RingLayout`] whose
/// pages are scattered over host physical memory (page `i` of `n` at
/// `HOST_REGION_BASE + 2 * (n - 1 - i) * 4096`: reverse order, with holes), so a translation
/// mistake lands visibly elsewhere.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestRegion {
    layout: RingLayout,
    epoch: u64,
    entries: Vec<ScatterGatherEntry>,
}

impl TestRegion {
    /// A region of `metadata_capacity` records and `payload_capacity` slots of `slot_size`
    /// bytes; panics on a layout the ABI refuses (a test error).
    pub fn new(metadata_capacity: u32, payload_capacity: u32, slot_size: u32) -> TestRegion {
        let layout = RingLayout::new(metadata_capacity, payload_capacity, slot_size)
            .expect("valid test layout");
        let pages = layout.region_length() / PAGE_SIZE;
        let entries = (0..pages)
            .map(|page| ScatterGatherEntry {
                host_phys: HOST_REGION_BASE + 2 * (pages - 1 - page) * PAGE_SIZE,
                length: PAGE_SIZE,
            })
            .collect();
        TestRegion {
            layout,
            epoch: 1,
            entries,
        }
    }

    /// The layout.
    pub fn layout(&self) -> &RingLayout {
        &self.layout
    }

    /// The scatter-gather entries.
    pub fn entries(&self) -> &[ScatterGatherEntry] {
        &self.entries
    }

    /// The shadow descriptor the driver would store.
    pub fn descriptor(&self) -> ShadowRegionDescriptor {
        self.layout
            .descriptor(self.epoch, self.entries.len() as u32)
    }

    /// Programs the region the way `host_driver::shadow::shadow_stores` does (header cleared,
    /// entries, header last) into `hal`'s device memory, then signals
    /// [`HostEvent::RegionProgrammed`].
    pub fn program(&self, hal: &mut FakeHal) {
        hal.memory.put(
            device_map::SHADOW_DESCRIPTOR,
            &ShadowRegionDescriptor::default(),
        );
        hal.memory
            .write(device_map::SHADOW_ENTRIES, self.entries.as_bytes())
            .unwrap();
        hal.memory
            .put(device_map::SHADOW_DESCRIPTOR, &self.descriptor());
        hal.push_event(HostEvent::RegionProgrammed);
    }

    /// The host physical address of `region_offset`; panics outside the region.
    pub fn host_address(&self, region_offset: u64) -> HostPhysAddr {
        let page = region_offset / PAGE_SIZE;
        let entry = self.entries[page as usize];
        HostPhysAddr(entry.host_phys + region_offset % PAGE_SIZE)
    }

    /// The region offset of a host physical address, if it lies in the region.
    pub fn region_offset(&self, address: HostPhysAddr) -> Option<u64> {
        self.entries.iter().enumerate().find_map(|(page, entry)| {
            (address.0 >= entry.host_phys && address.0 < entry.host_phys + entry.length)
                .then(|| page as u64 * PAGE_SIZE + (address.0 - entry.host_phys))
        })
    }

    /// Where `address` falls.
    pub fn place(&self, address: HostPhysAddr) -> RegionPlace {
        let Some(offset) = self.region_offset(address) else {
            return RegionPlace::Outside;
        };
        let layout = &self.layout;
        let metadata_end = layout.metadata_offset() + u64::from(layout.metadata_capacity()) * 32;
        let slot_size = u64::from(layout.slot_size());
        let payload_end =
            layout.payload_offset() + u64::from(layout.payload_capacity()) * slot_size;
        if offset < 3 * control::RING_LINE as u64 {
            RegionPlace::Control { offset }
        } else if offset >= layout.metadata_offset() && offset < metadata_end {
            let into = offset - layout.metadata_offset();
            RegionPlace::MetadataSlot {
                slot: into / 32,
                within: into % 32,
            }
        } else if offset >= layout.payload_offset() && offset < payload_end {
            let into = offset - layout.payload_offset();
            RegionPlace::PayloadSlot {
                slot: (into / slot_size) as u32,
                within: into % slot_size,
            }
        } else {
            RegionPlace::Unused
        }
    }

    /// Host address of a control-block word.
    pub fn control_word(&self, offset: u64) -> HostPhysAddr {
        self.host_address(self.layout.control_offset() + offset)
    }

    /// The metadata tail the device published into host memory.
    pub fn metadata_tail(&self, host: &FakeHostMemory) -> u64 {
        host.read_u64(self.control_word(control::METADATA_TAIL_OFFSET))
    }

    /// The payload tail the device published into host memory.
    pub fn payload_tail(&self, host: &FakeHostMemory) -> u64 {
        host.read_u64(self.control_word(control::PAYLOAD_TAIL_OFFSET))
    }

    /// The device status word in host memory (0: healthy).
    pub fn device_status(&self, host: &FakeHostMemory) -> u32 {
        host.read_u64(self.control_word(control::DEVICE_STATUS_OFFSET)) as u32
    }

    /// The record in the slot of metadata index `index`, as host memory holds it.
    pub fn record(&self, host: &FakeHostMemory, index: u64) -> MetadataRecord {
        let bytes = host.read(
            self.host_address(self.layout.metadata_slot_offset(index)),
            32,
        );
        MetadataRecord::read_from_bytes(&bytes).unwrap()
    }

    /// `length` bytes of payload slot `slot`, as host memory holds them.
    pub fn payload(&self, host: &FakeHostMemory, slot: u32, length: u64) -> Vec<u8> {
        let offset = self
            .layout
            .payload_slot_offset(slot)
            .expect("slot inside the ring");
        host.read(self.host_address(offset), length)
    }
}
