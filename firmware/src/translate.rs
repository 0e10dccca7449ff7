//! DMA address translation: the shadowed scatter-gather list, loaded from device memory and
//! validated once, then used to turn region offsets into host physical addresses.
//!
//! The host driver programs the table with CXL.mem stores (header at
//! [`device_map::SHADOW_DESCRIPTOR`], entries at [`device_map::SHADOW_ENTRIES`], header last).
//! Everything in it is host-written, so nothing is trusted: [`ShadowRegion::load`] checks the
//! magic, the entry count, each entry (non-empty, 8-byte aligned address and length, no
//! wrap-around, no two entries overlapping physically), that the lengths add up exactly to the
//! region length, and that the layout is the canonical one ([`RingLayout::from_descriptor`]).
//! A bad table is an error status, never a panic.
//!
//! Translation is a binary search over the entries' cumulative region offsets: O(log n) per
//! DMA write, no allocation. A range must lie inside one entry; a DMA writer whose write
//! straddles two entries (only possible when the slot size does not divide 4096) splits it
//! with [`ShadowRegion::translate_prefix`].
//!
//! Cost of [`ShadowRegion::load`]: one pass over the entries plus an O(n^2) pairwise overlap
//! check (at most 1024 x 1023 / 2 comparisons), once per (re)programming; chosen over sorting a
//! copy so the check needs no second 16 KiB table on the firmware's stack.

use crate::error::FirmwareError;
use crate::hal::DeviceMemory;
use shared_abi::region::RingLayout;
use shared_abi::sgl::MAX_SG_ENTRIES;
use shared_abi::{device_map, HostPhysAddr, ScatterGatherEntry, ShadowRegionDescriptor};

/// Bytes of one shadowed entry in device memory.
const ENTRY_SIZE: u64 = core::mem::size_of::<ScatterGatherEntry>() as u64;

/// One validated entry with the region offset where it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TranslatedEntry {
    /// Region offset of the entry's first byte.
    region_offset: u64,
    /// Host physical address of the entry's first byte.
    host_phys: u64,
    /// Bytes in the entry (non-zero).
    length: u64,
}

/// A validated shadow region: its layout and its translation table.
///
/// # Invariants
///
/// - `entries` is non-empty; entry `k` starts at the sum of the lengths of entries `0..k`;
///   every length is non-zero and 8-aligned; the lengths sum to `layout.region_length()`;
/// - for every entry, `host_phys + length` does not overflow, and no two entries overlap
///   physically.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShadowRegion {
    layout: RingLayout,
    epoch: u64,
    entries: heapless::Vec<TranslatedEntry, MAX_SG_ENTRIES>,
}

fn read_descriptor(memory: &impl DeviceMemory) -> Result<ShadowRegionDescriptor, FirmwareError> {
    Ok(memory.read_value::<ShadowRegionDescriptor>(device_map::SHADOW_DESCRIPTOR)?)
}

fn read_entry(memory: &impl DeviceMemory, index: u32) -> Result<ScatterGatherEntry, FirmwareError> {
    let address = u64::from(index)
        .checked_mul(ENTRY_SIZE)
        .and_then(|offset| device_map::SHADOW_ENTRIES.checked_add(offset))
        .ok_or(FirmwareError::MalformedDescriptor)?;
    Ok(memory.read_value::<ScatterGatherEntry>(address)?)
}

/// Whether physical ranges `[a, a + a_len)` and `[b, b + b_len)` overlap (ends do not
/// overflow: checked before).
const fn overlaps(a: u64, a_end: u64, b: u64, b_end: u64) -> bool {
    a < b_end && b < a_end
}

impl ShadowRegion {
    /// Loads and validates the shadow descriptor and entries from device memory.
    ///
    /// Errors: [`FirmwareError::NoRegion`] when the magic is not [`shared_abi::ABI_MAGIC`] (nothing
    /// programmed, or a reprogramming in progress); [`FirmwareError::MalformedDescriptor`] for any
    /// inconsistency; [`FirmwareError::MemoryFault`] when device memory cannot be read.
    ///
    /// The region is returned by value (24 KiB with a full table): the firmware itself uses
    /// [`ShadowRegion::load_into`], which builds it in place.
    pub fn load(memory: &impl DeviceMemory) -> Result<ShadowRegion, FirmwareError> {
        let mut slot = None;
        ShadowRegion::load_into(&mut slot, memory)?;
        slot.ok_or(FirmwareError::NoRegion)
    }

    /// [`ShadowRegion::load`] into `slot`, in place: on success `slot` holds the region, on
    /// any error (the same errors) it is `None`. The translation table (1024 entries, 24 KiB)
    /// is filled where it lives, reusing the region already in `slot`, so no copy of it is
    /// made on the stack: returned by value through `Result` and `Option`, it cost two
    /// 24 KiB temporaries in the frame of `Firmware::step` on rv32imac (the QEMU port).
    pub fn load_into(
        slot: &mut Option<ShadowRegion>,
        memory: &impl DeviceMemory,
    ) -> Result<(), FirmwareError> {
        let result = ShadowRegion::fill(slot, memory);
        if result.is_err() {
            *slot = None;
        }
        result
    }

    fn fill(
        slot: &mut Option<ShadowRegion>,
        memory: &impl DeviceMemory,
    ) -> Result<(), FirmwareError> {
        let descriptor = read_descriptor(memory)?;
        if descriptor.magic != shared_abi::ABI_MAGIC {
            return Err(FirmwareError::NoRegion);
        }
        let count = descriptor.entry_count;
        if count == 0 || !usize::try_from(count).is_ok_and(|count| count <= MAX_SG_ENTRIES) {
            return Err(FirmwareError::MalformedDescriptor);
        }
        let layout = RingLayout::from_descriptor(&descriptor)
            .map_err(|_| FirmwareError::MalformedDescriptor)?;
        let region_length = layout.region_length();
        let region = match slot {
            Some(region) => region,
            None => slot.insert(ShadowRegion {
                layout,
                epoch: descriptor.epoch,
                entries: heapless::Vec::new(),
            }),
        };
        region.layout = layout;
        region.epoch = descriptor.epoch;
        let entries = &mut region.entries;
        entries.clear();
        let mut region_offset: u64 = 0;
        for index in 0..count {
            let entry = read_entry(memory, index)?;
            if entry.length == 0 || entry.length % 8 != 0 || entry.host_phys % 8 != 0 {
                return Err(FirmwareError::MalformedDescriptor);
            }
            let physical_end = entry
                .host_phys
                .checked_add(entry.length)
                .ok_or(FirmwareError::MalformedDescriptor)?;
            let next_offset = region_offset
                .checked_add(entry.length)
                .filter(|&end| end <= region_length)
                .ok_or(FirmwareError::MalformedDescriptor)?;
            if entries.iter().any(|earlier| {
                overlaps(
                    earlier.host_phys,
                    earlier.host_phys.saturating_add(earlier.length),
                    entry.host_phys,
                    physical_end,
                )
            }) {
                return Err(FirmwareError::MalformedDescriptor);
            }
            entries
                .push(TranslatedEntry {
                    region_offset,
                    host_phys: entry.host_phys,
                    length: entry.length,
                })
                .map_err(|_| FirmwareError::MalformedDescriptor)?;
            region_offset = next_offset;
        }
        if region_offset != region_length {
            return Err(FirmwareError::MalformedDescriptor);
        }
        // INVARIANT: every condition of the type's invariants was checked above (a failure
        // leaves `slot` to `load_into`, which empties it).
        Ok(())
    }

    /// The ring layout of the region.
    pub const fn layout(&self) -> &RingLayout {
        &self.layout
    }

    /// The region's epoch.
    pub const fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Bytes in the region.
    pub const fn region_length(&self) -> u64 {
        self.layout.region_length()
    }

    /// Scatter-gather entries in the table.
    pub fn entry_count(&self) -> usize {
        self.entries.len()
    }

    /// The entry holding region offset `region_offset`, or `None` when it is outside.
    fn entry_at(&self, region_offset: u64) -> Option<&TranslatedEntry> {
        // Entries are sorted by region_offset and the first starts at 0.
        let after = self
            .entries
            .partition_point(|entry| entry.region_offset <= region_offset);
        let entry = self.entries.get(after.checked_sub(1)?)?;
        let entry_end = entry.region_offset.checked_add(entry.length)?;
        (region_offset < entry_end).then_some(entry)
    }

    /// The host physical address of region offsets `[region_offset, region_offset + length)`.
    ///
    /// [`FirmwareError::TranslationFault`] when the range is empty, overflows, or does not lie inside
    /// one entry.
    pub fn translate(
        &self,
        region_offset: u64,
        length: u64,
    ) -> Result<HostPhysAddr, FirmwareError> {
        let (address, available) = self.translate_prefix(region_offset, length)?;
        if available != length {
            return Err(FirmwareError::TranslationFault);
        }
        Ok(address)
    }

    /// [`ShadowRegion::translate`], looking first at entry `hint` and the one after it, then
    /// searching: returns the address and the index of the entry holding the range, which the
    /// caller passes as the next call's hint. A ring's slots are visited in order, so a
    /// writer's next slot nearly always lies in the entry of its last one (a 4 KiB page holds
    /// many slots) or the next. Any `hint` gives the same address and errors as
    /// [`ShadowRegion::translate`]: the entry holding an offset is unique, and the hinted one is
    /// used only when it holds it.
    pub fn translate_from(
        &self,
        hint: usize,
        region_offset: u64,
        length: u64,
    ) -> Result<(HostPhysAddr, usize), FirmwareError> {
        let end = region_offset
            .checked_add(length)
            .ok_or(FirmwareError::TranslationFault)?;
        if length == 0 || end > self.region_length() {
            return Err(FirmwareError::TranslationFault);
        }
        // The entry at `index` and how far into it `region_offset` lies, if it holds it.
        let holds = |index: usize| {
            let entry = self.entries.get(index)?;
            let into_entry = region_offset.checked_sub(entry.region_offset)?;
            (into_entry < entry.length).then_some((entry, into_entry))
        };
        let next = hint.wrapping_add(1);
        let (index, (entry, into_entry)) = if let Some(found) = holds(hint) {
            (hint, found)
        } else if let Some(found) = holds(next) {
            (next, found)
        } else {
            let index = self
                .entries
                .partition_point(|entry| entry.region_offset <= region_offset)
                .checked_sub(1)
                .ok_or(FirmwareError::TranslationFault)?;
            (index, holds(index).ok_or(FirmwareError::TranslationFault)?)
        };
        // into_entry < entry.length, and host_phys + length does not overflow (invariant).
        let left_in_entry = entry
            .length
            .checked_sub(into_entry)
            .ok_or(FirmwareError::TranslationFault)?;
        if length > left_in_entry {
            return Err(FirmwareError::TranslationFault);
        }
        let address = entry
            .host_phys
            .checked_add(into_entry)
            .ok_or(FirmwareError::TranslationFault)?;
        Ok((HostPhysAddr(address), index))
    }

    /// The host physical address of `region_offset` and how many bytes of
    /// `[region_offset, region_offset + length)` lie in the same entry (at least 1, at most
    /// `length`): the first piece of a write that may straddle entries.
    ///
    /// [`FirmwareError::TranslationFault`] when the range is empty, overflows, or ends beyond the
    /// region.
    pub fn translate_prefix(
        &self,
        region_offset: u64,
        length: u64,
    ) -> Result<(HostPhysAddr, u64), FirmwareError> {
        let end = region_offset
            .checked_add(length)
            .ok_or(FirmwareError::TranslationFault)?;
        if length == 0 || end > self.region_length() {
            return Err(FirmwareError::TranslationFault);
        }
        let entry = self
            .entry_at(region_offset)
            .ok_or(FirmwareError::TranslationFault)?;
        // entry.region_offset <= region_offset < entry end, and host_phys + length does not
        // overflow (invariant), so neither does anything below.
        let into_entry = region_offset
            .checked_sub(entry.region_offset)
            .ok_or(FirmwareError::TranslationFault)?;
        let left_in_entry = entry
            .length
            .checked_sub(into_entry)
            .ok_or(FirmwareError::TranslationFault)?;
        let address = entry
            .host_phys
            .checked_add(into_entry)
            .ok_or(FirmwareError::TranslationFault)?;
        Ok((HostPhysAddr(address), left_in_entry.min(length)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hal::MemoryFault;
    use shared_abi::DeviceAddress;
    use zerocopy::IntoBytes;

    /// Device memory as a plain byte vector (in a cell: the HAL's memory is shared).
    struct FakeDeviceMemory {
        bytes: std::cell::RefCell<Vec<u8>>,
    }

    impl FakeDeviceMemory {
        fn new() -> Self {
            FakeDeviceMemory {
                bytes: std::cell::RefCell::new(vec![0; device_map::RP_DESCRIPTOR.0 as usize]),
            }
        }

        fn program(descriptor: &ShadowRegionDescriptor, entries: &[ScatterGatherEntry]) -> Self {
            let memory = FakeDeviceMemory::new();
            memory
                .write(device_map::SHADOW_ENTRIES, entries.as_bytes())
                .unwrap();
            memory
                .write(device_map::SHADOW_DESCRIPTOR, descriptor.as_bytes())
                .unwrap();
            memory
        }
    }

    impl DeviceMemory for FakeDeviceMemory {
        fn size(&self) -> u64 {
            self.bytes.borrow().len() as u64
        }
        fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
            let fault = MemoryFault {
                address,
                length: buffer.len() as u64,
            };
            let start = usize::try_from(address.0).map_err(|_| fault)?;
            let bytes = self.bytes.borrow();
            let source = bytes
                .get(start..start.checked_add(buffer.len()).ok_or(fault)?)
                .ok_or(fault)?;
            buffer.copy_from_slice(source);
            Ok(())
        }
        fn write(&self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
            let fault = MemoryFault {
                address,
                length: data.len() as u64,
            };
            let start = usize::try_from(address.0).map_err(|_| fault)?;
            let end = start.checked_add(data.len()).ok_or(fault)?;
            self.bytes
                .borrow_mut()
                .get_mut(start..end)
                .ok_or(fault)?
                .copy_from_slice(data);
            Ok(())
        }
    }

    const PAGE: u64 = 4096;

    /// A 3-page layout (smallest) scattered over three entries: 1 page at 0x5000, 1 page at
    /// 0x1000, 1 page at 0x9000.
    fn three_page_table() -> (ShadowRegionDescriptor, Vec<ScatterGatherEntry>) {
        let layout = RingLayout::new(4, 4, 64).unwrap();
        assert_eq!(layout.region_length(), 3 * PAGE);
        let entries = vec![
            ScatterGatherEntry {
                host_phys: 0x5000,
                length: PAGE,
            },
            ScatterGatherEntry {
                host_phys: 0x1000,
                length: PAGE,
            },
            ScatterGatherEntry {
                host_phys: 0x9000,
                length: PAGE,
            },
        ];
        (layout.descriptor(9, 3), entries)
    }

    fn load(
        descriptor: &ShadowRegionDescriptor,
        entries: &[ScatterGatherEntry],
    ) -> Result<ShadowRegion, FirmwareError> {
        ShadowRegion::load(&FakeDeviceMemory::program(descriptor, entries))
    }

    /// Whatever the hint, `translate_from` gives `translate`'s address or error, and names
    /// the entry holding the offset; over entries of one page and over uneven ones.
    #[test]
    fn a_hinted_translation_is_the_plain_one_whatever_the_hint() {
        let (descriptor, pages) = three_page_table();
        let uneven = vec![
            ScatterGatherEntry {
                host_phys: 0x20_0000,
                length: 0x808,
            },
            ScatterGatherEntry {
                host_phys: 0x10_0000,
                length: 0x17f8,
            },
            ScatterGatherEntry {
                host_phys: 0x30_0000,
                length: PAGE,
            },
        ];
        for entries in [pages, uneven] {
            let region = load(&descriptor, &entries).unwrap();
            let starts: Vec<u64> = entries
                .iter()
                .scan(0, |start, entry| {
                    let this = *start;
                    *start += entry.length;
                    Some(this)
                })
                .collect();
            let offsets = [0, 8, 0x7f8, 0x800, 0x808, 0xff8, PAGE, 0x2000, 3 * PAGE - 8];
            for offset in offsets.into_iter().chain([3 * PAGE, u64::MAX - 4]) {
                for length in [0, 8, 32, 0x10, PAGE] {
                    let plain = region.translate(offset, length);
                    for hint in [0, 1, 2, 3, 7, usize::MAX] {
                        let hinted = region.translate_from(hint, offset, length);
                        assert_eq!(
                            hinted.map(|(address, _)| address),
                            plain,
                            "offset {offset:#x}, length {length}, hint {hint}"
                        );
                        if let Ok((_, index)) = hinted {
                            let start = starts[index];
                            assert!(start <= offset && offset < start + entries[index].length);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn valid_table_loads_with_its_layout_and_epoch() {
        let (descriptor, entries) = three_page_table();
        let region = load(&descriptor, &entries).unwrap();
        assert_eq!(region.epoch(), 9);
        assert_eq!(region.entry_count(), 3);
        assert_eq!(
            region.layout(),
            &RingLayout::from_descriptor(&descriptor).unwrap()
        );
    }

    #[test]
    fn offsets_translate_into_the_entry_that_holds_them() {
        let (descriptor, entries) = three_page_table();
        let region = load(&descriptor, &entries).unwrap();
        assert_eq!(region.translate(0, 8), Ok(HostPhysAddr(0x5000)));
        assert_eq!(
            region.translate(PAGE - 8, 8),
            Ok(HostPhysAddr(0x5000 + PAGE - 8))
        );
        assert_eq!(region.translate(PAGE, 64), Ok(HostPhysAddr(0x1000)));
        assert_eq!(
            region.translate(2 * PAGE + 128, 32),
            Ok(HostPhysAddr(0x9080))
        );
        assert_eq!(
            region.translate(3 * PAGE - 8, 8),
            Ok(HostPhysAddr(0x9000 + PAGE - 8))
        );
    }

    #[test]
    fn range_straddling_two_entries_is_a_fault_and_prefix_gives_the_first_piece() {
        let (descriptor, entries) = three_page_table();
        let region = load(&descriptor, &entries).unwrap();
        assert_eq!(
            region.translate(PAGE - 16, 32),
            Err(FirmwareError::TranslationFault)
        );
        assert_eq!(
            region.translate_prefix(PAGE - 16, 32),
            Ok((HostPhysAddr(0x5000 + PAGE - 16), 16))
        );
        assert_eq!(
            region.translate_prefix(PAGE, 32),
            Ok((HostPhysAddr(0x1000), 32))
        );
    }

    #[test]
    fn empty_outside_and_overflowing_ranges_are_faults() {
        let (descriptor, entries) = three_page_table();
        let region = load(&descriptor, &entries).unwrap();
        assert_eq!(region.translate(0, 0), Err(FirmwareError::TranslationFault));
        assert_eq!(
            region.translate(3 * PAGE, 8),
            Err(FirmwareError::TranslationFault)
        );
        assert_eq!(
            region.translate(3 * PAGE - 8, 16),
            Err(FirmwareError::TranslationFault)
        );
        assert_eq!(
            region.translate(u64::MAX - 3, 8),
            Err(FirmwareError::TranslationFault)
        );
        assert_eq!(
            region.translate_prefix(u64::MAX, u64::MAX),
            Err(FirmwareError::TranslationFault)
        );
    }

    #[test]
    fn missing_magic_means_no_region() {
        let (mut descriptor, entries) = three_page_table();
        descriptor.magic = 0;
        assert_eq!(load(&descriptor, &entries), Err(FirmwareError::NoRegion));
        assert_eq!(
            ShadowRegion::load(&FakeDeviceMemory::new()),
            Err(FirmwareError::NoRegion)
        );
    }

    #[test]
    fn huge_or_zero_entry_counts_are_malformed() {
        let (mut descriptor, entries) = three_page_table();
        for count in [0, MAX_SG_ENTRIES as u32 + 1, u32::MAX] {
            descriptor.entry_count = count;
            assert_eq!(
                load(&descriptor, &entries),
                Err(FirmwareError::MalformedDescriptor),
                "count {count}"
            );
        }
    }

    #[test]
    fn lengths_that_overrun_or_fall_short_of_the_region_are_malformed() {
        let (descriptor, entries) = three_page_table();
        let mut overrun = entries.clone();
        overrun[1].length = 2 * PAGE;
        assert_eq!(
            load(&descriptor, &overrun),
            Err(FirmwareError::MalformedDescriptor)
        );
        let mut short = entries.clone();
        short[2].length = PAGE - 8;
        assert_eq!(
            load(&descriptor, &short),
            Err(FirmwareError::MalformedDescriptor)
        );
        // Lengths whose sum wraps around u64 to exactly the region length.
        let mut wrapping = entries.clone();
        wrapping[0].length = u64::MAX - 7;
        wrapping[1].length = 8 + PAGE;
        wrapping[1].host_phys = 0x10_0000;
        assert_eq!(
            load(&descriptor, &wrapping),
            Err(FirmwareError::MalformedDescriptor)
        );
    }

    #[test]
    fn empty_or_unaligned_entries_are_malformed() {
        let (descriptor, entries) = three_page_table();
        let mut empty = entries.clone();
        empty.insert(
            1,
            ScatterGatherEntry {
                host_phys: 0x20_0000,
                length: 0,
            },
        );
        let mut with_empty = descriptor;
        with_empty.entry_count = 4;
        assert_eq!(
            load(&with_empty, &empty),
            Err(FirmwareError::MalformedDescriptor)
        );
        let mut odd_length = entries.clone();
        odd_length[0].length = PAGE - 4;
        odd_length[1].length = PAGE + 4;
        assert_eq!(
            load(&descriptor, &odd_length),
            Err(FirmwareError::MalformedDescriptor)
        );
        let mut odd_address = entries.clone();
        odd_address[2].host_phys = 0x9004;
        assert_eq!(
            load(&descriptor, &odd_address),
            Err(FirmwareError::MalformedDescriptor)
        );
    }

    #[test]
    fn wrap_around_physical_addresses_are_malformed() {
        let (descriptor, entries) = three_page_table();
        let mut wrapping = entries.clone();
        wrapping[2].host_phys = u64::MAX - 7;
        assert_eq!(
            load(&descriptor, &wrapping),
            Err(FirmwareError::MalformedDescriptor)
        );
    }

    #[test]
    fn physically_overlapping_entries_are_malformed() {
        let (descriptor, entries) = three_page_table();
        let mut overlapping = entries.clone();
        overlapping[2].host_phys = 0x5000 + PAGE - 8;
        assert_eq!(
            load(&descriptor, &overlapping),
            Err(FirmwareError::MalformedDescriptor)
        );
        let mut same = entries.clone();
        same[1].host_phys = 0x9000;
        assert_eq!(
            load(&descriptor, &same),
            Err(FirmwareError::MalformedDescriptor)
        );
    }

    #[test]
    fn physically_adjacent_entries_do_not_overlap() {
        let (descriptor, mut entries) = three_page_table();
        // Entry 1 ends where entry 0 starts, entry 2 starts where entry 0 ends.
        entries[0].host_phys = 0x2000;
        entries[1].host_phys = 0x1000;
        entries[2].host_phys = 0x3000;
        let region = load(&descriptor, &entries).unwrap();
        assert_eq!(region.translate(PAGE, 8), Ok(HostPhysAddr(0x1000)));
        assert_eq!(region.translate(2 * PAGE, 8), Ok(HostPhysAddr(0x3000)));
    }

    #[test]
    fn entry_count_beyond_the_table_is_refused_before_any_entry_is_read() {
        // Device memory ends where the entries begin: reading one would be a memory fault.
        let memory = FakeDeviceMemory {
            bytes: std::cell::RefCell::new(vec![0; device_map::SHADOW_ENTRIES.0 as usize]),
        };
        let (mut descriptor, _) = three_page_table();
        descriptor.entry_count = MAX_SG_ENTRIES as u32 + 1;
        memory
            .write(device_map::SHADOW_DESCRIPTOR, descriptor.as_bytes())
            .unwrap();
        assert_eq!(
            ShadowRegion::load(&memory),
            Err(FirmwareError::MalformedDescriptor)
        );
    }

    #[test]
    fn non_canonical_layout_is_malformed() {
        let (mut descriptor, entries) = three_page_table();
        descriptor.payload_offset += 8;
        assert_eq!(
            load(&descriptor, &entries),
            Err(FirmwareError::MalformedDescriptor)
        );
    }

    #[test]
    fn full_table_of_single_pages_translates_every_page() {
        // 1024 one-page entries, every other page physically, in reverse order.
        let pages = MAX_SG_ENTRIES as u64;
        // Metadata ring (4096 records = 32 pages) plus payload ring (1 page-sized slot per page).
        let layout = RingLayout::new(4096, (pages - 33) as u32, 4096).unwrap();
        assert_eq!(layout.region_length(), pages * PAGE);
        let entries: Vec<ScatterGatherEntry> = (0..pages)
            .map(|i| ScatterGatherEntry {
                host_phys: (2 * (pages - i)) * PAGE,
                length: PAGE,
            })
            .collect();
        let region = load(&layout.descriptor(1, pages as u32), &entries).unwrap();
        for i in 0..pages {
            assert_eq!(
                region.translate(i * PAGE + 8, 8),
                Ok(HostPhysAddr(2 * (pages - i) * PAGE + 8))
            );
        }
    }

    #[test]
    fn device_memory_too_small_for_the_table_is_a_memory_fault() {
        let memory = FakeDeviceMemory {
            bytes: std::cell::RefCell::new(vec![0; device_map::SHADOW_DESCRIPTOR.0 as usize + 8]),
        };
        assert!(matches!(
            ShadowRegion::load(&memory),
            Err(FirmwareError::MemoryFault(_))
        ));
    }
}
