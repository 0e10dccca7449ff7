//! Arbitrary bytes as the shadow scatter-gather table in device memory:
//! `ShadowRegion::load`, then `translate` and `translate_prefix` of arbitrary ranges.
//!
//! The table lands in a small fake device memory at `device_map::SHADOW_DESCRIPTOR` (64-byte
//! header) and `device_map::SHADOW_ENTRIES`. Random bytes almost never carry the magic and a
//! canonical layout, so a fix-up byte optionally repairs parts of the input (magic, canonical
//! layout, entry count, lengths that add up, physically disjoint entries), which lets the
//! fuzzer reach translation.
//!
//! Checked, beyond "never panics":
//! - `load` is `Ok` exactly when a plain reference of every documented rule accepts the table;
//! - every `Ok` translation of `[offset, offset + length)` lies inside one entry and is that
//!   entry's address for that offset (the reference walk); a range inside one entry always
//!   translates; `translate_prefix` returns the longest piece inside the first entry.

use crate::FakeDeviceMemory;
use arbitrary::Arbitrary;
use firmware::translate::ShadowRegion;
use firmware::FirmwareError;
use shared_abi::region::RingLayout;
use shared_abi::sgl::MAX_SG_ENTRIES;
use shared_abi::{
    device_map, HostPhysAddr, ScatterGatherEntry, ShadowRegionDescriptor, Status, ABI_MAGIC,
};
use zerocopy::{FromBytes, IntoBytes};

#[derive(Arbitrary, Debug)]
struct Input {
    fixups: u8,
    header: [u8; 64],
    metadata_capacity: u16,
    payload_capacity: u16,
    slot_words: u16,
    entries: Vec<(u64, u64)>,
    memory_cut: u16,
    ranges: Vec<(u64, u64)>,
}

const MAGIC: u8 = 1;
const CANONICAL: u8 = 2;
const COUNT: u8 = 4;
const PARTITION: u8 = 8;
const DISJOINT: u8 = 16;
const SHORT_MEMORY: u8 = 32;

/// Full-size fake memory: up to the RP descriptor slot, room for every entry.
const MEMORY: usize = device_map::RP_DESCRIPTOR.0 as usize;

/// The reference: the entries `load` must accept, with their region offsets, or `None`.
fn reference(memory: &FakeDeviceMemory) -> Option<(RingLayout, Vec<(u64, ScatterGatherEntry)>)> {
    let header_at = device_map::SHADOW_DESCRIPTOR.0 as usize;
    let header =
        ShadowRegionDescriptor::read_from_bytes(memory.contents().get(header_at..header_at + 64)?)
            .ok()?;
    if header.magic != ABI_MAGIC {
        return None;
    }
    let count = header.entry_count as usize;
    if count == 0 || count > MAX_SG_ENTRIES {
        return None;
    }
    let layout = RingLayout::from_descriptor(&header).ok()?;
    let mut entries: Vec<(u64, ScatterGatherEntry)> = Vec::new();
    let mut offset: u128 = 0;
    for index in 0..count {
        let at = device_map::SHADOW_ENTRIES.0 as usize + index * 16;
        let entry =
            ScatterGatherEntry::read_from_bytes(memory.contents().get(at..at + 16)?).ok()?;
        if entry.length == 0 || entry.length % 8 != 0 || entry.host_phys % 8 != 0 {
            return None;
        }
        let end = u128::from(entry.host_phys) + u128::from(entry.length);
        if end > u128::from(u64::MAX) {
            return None;
        }
        for (_, earlier) in &entries {
            let earlier_end = u128::from(earlier.host_phys) + u128::from(earlier.length);
            if u128::from(earlier.host_phys) < end && u128::from(entry.host_phys) < earlier_end {
                return None;
            }
        }
        if offset + u128::from(entry.length) > u128::from(layout.region_length()) {
            return None;
        }
        entries.push((offset as u64, entry));
        offset += u128::from(entry.length);
    }
    (offset == u128::from(layout.region_length())).then_some((layout, entries))
}

/// The entry holding `offset`: (its region offset, the entry).
fn holder(entries: &[(u64, ScatterGatherEntry)], offset: u64) -> Option<(u64, ScatterGatherEntry)> {
    entries
        .iter()
        .copied()
        .find(|(start, entry)| *start <= offset && offset - *start < entry.length)
}

fn check_range(
    region: &ShadowRegion,
    entries: &[(u64, ScatterGatherEntry)],
    offset: u64,
    length: u64,
) {
    let region_length = region.region_length();
    let end = offset.checked_add(length);
    let inside_region = length > 0 && end.is_some_and(|end| end <= region_length);
    let found = if inside_region {
        holder(entries, offset)
    } else {
        None
    };

    // translate: Ok exactly when the whole range is inside one entry.
    let expected = found.and_then(|(start, entry)| {
        let into = offset - start;
        (into + length <= entry.length).then_some(HostPhysAddr(entry.host_phys + into))
    });
    match region.translate(offset, length) {
        Ok(address) => {
            assert_eq!(Some(address), expected, "translate({offset:#x}, {length})");
            // Inside the entry, physically.
            let (_, entry) = found.expect("an Ok translation has an entry");
            assert!(address.0 >= entry.host_phys);
            assert!(
                u128::from(address.0) + u128::from(length)
                    <= u128::from(entry.host_phys) + u128::from(entry.length)
            );
        }
        Err(status) => {
            assert_eq!(status, FirmwareError::TranslationFault);
            assert_eq!(expected, None, "translate({offset:#x}, {length}) refused");
        }
    }

    // translate_prefix: the first piece, inside the entry holding `offset`.
    let expected_prefix = found.map(|(start, entry)| {
        let into = offset - start;
        (
            HostPhysAddr(entry.host_phys + into),
            (entry.length - into).min(length),
        )
    });
    match region.translate_prefix(offset, length) {
        Ok((address, piece)) => {
            assert_eq!(Some((address, piece)), expected_prefix);
            assert!(piece >= 1 && piece <= length);
        }
        Err(status) => {
            assert_eq!(status, FirmwareError::TranslationFault);
            assert_eq!(expected_prefix, None);
        }
    }
}

/// The check: panics exactly where the `shadow_region` fuzz target reports a finding (the
/// input decoded as libFuzzer's `fuzz_target!` decodes a typed input).
pub fn check(data: &[u8]) {
    let Some(input) = crate::arbitrary_input::<Input>(data) else {
        return;
    };
    let mut header = ShadowRegionDescriptor::read_from_bytes(&input.header).expect("64 bytes");
    if input.fixups & CANONICAL != 0 {
        let slot_size = 8 * (1 + u32::from(input.slot_words % 512));
        if let Ok(layout) = RingLayout::new(
            1 + u32::from(input.metadata_capacity % 1024),
            1 + u32::from(input.payload_capacity % 1024),
            slot_size,
        ) {
            header = layout.descriptor(header.epoch, header.entry_count);
        }
    }
    if input.fixups & MAGIC != 0 {
        header.magic = ABI_MAGIC;
    }
    let mut entries: Vec<ScatterGatherEntry> = input
        .entries
        .iter()
        .take(MAX_SG_ENTRIES + 1)
        .map(|&(host_phys, length)| ScatterGatherEntry { host_phys, length })
        .collect();
    if input.fixups & PARTITION != 0 && !entries.is_empty() {
        // Lengths that cut the header's region length into the given number of pieces.
        let mut left = header.region_length & !7;
        let pieces = entries.len().min(MAX_SG_ENTRIES);
        entries.truncate(pieces);
        for (i, entry) in entries.iter_mut().enumerate() {
            if i + 1 == pieces {
                entry.length = left;
            } else {
                let words = (left / 8).max(1);
                entry.length = 8 * (1 + entry.length % words).min(words);
                entry.length = entry.length.min(left);
            }
            left -= entry.length;
        }
    }
    if input.fixups & DISJOINT != 0 {
        // Physically increasing, with gaps from the input.
        let mut next: u64 = 0;
        for entry in &mut entries {
            let gap = (entry.host_phys % (1 << 20)) & !7;
            entry.host_phys = next.saturating_add(gap) & !7;
            next = entry.host_phys.saturating_add(entry.length);
        }
    }
    if input.fixups & COUNT != 0 {
        header.entry_count = entries.len() as u32;
    }

    let size = if input.fixups & SHORT_MEMORY != 0 {
        MEMORY.saturating_sub(usize::from(input.memory_cut) % (MEMORY + 1))
    } else {
        MEMORY
    };
    let mut memory = FakeDeviceMemory::new(size);
    memory.fill(device_map::SHADOW_ENTRIES.0, entries.as_bytes());
    memory.fill(device_map::SHADOW_DESCRIPTOR.0, header.as_bytes());

    let loaded = ShadowRegion::load(&memory);
    let expected = reference(&memory);
    let (region, entries) = match (loaded, expected) {
        (Ok(region), Some((layout, entries))) => {
            assert_eq!(region.layout(), &layout);
            assert_eq!(region.entry_count(), entries.len());
            assert_eq!(region.epoch(), header.epoch);
            (region, entries)
        }
        (Err(status), None) => {
            assert_ne!(Status::from(status), Status::Ok);
            return;
        }
        (Ok(region), None) => panic!("load accepted a table the rules refuse: {region:?}"),
        (Err(status), Some(_)) => panic!("load refused a valid table: {status:?}"),
    };

    let region_length = region.region_length();
    for &(offset, length) in input.ranges.iter().take(64) {
        check_range(&region, &entries, offset, length);
        // The same range moved inside the region and cut to a DMA-sized length.
        let inside = offset % region_length;
        check_range(&region, &entries, inside, length % 4097);
        // Ranges that end exactly at an entry boundary, or straddle it.
        if let Some((start, entry)) = holder(&entries, inside) {
            let to_end = start + entry.length - inside;
            check_range(&region, &entries, inside, to_end);
            check_range(&region, &entries, inside, to_end + 8);
        }
    }
}
