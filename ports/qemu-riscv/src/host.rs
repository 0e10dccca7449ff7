//! The host's part, played by the same program: what `host-driver` and `host-runtime` do on a
//! real host, cut to what one ring and two kernels need.
//!
//! 1. Program the DMA region: the ring control block in host memory, the shadow descriptor and
//!    scatter-gather entries in device memory (header cleared, entries, header last, as
//!    `host_driver::shadow` does). The region's pages are scattered over host memory in reverse
//!    order with holes, so a translation mistake lands visibly elsewhere.
//! 2. Load the inputs into device memory with CXL.mem stores ([`QemuHal::host_store`]).
//! 3. Launch (an AXLE launch store into the launch window), and poll: read the metadata tail,
//!    consume each record (copy its payload into the host's copy of the result space), publish
//!    the new heads into the flow-control block. The launch is over when every result byte has
//!    arrived and the firmware is idle.
//! 4. KNN: the top-k rows of each query from the streamed distances. SSSP: ping-pong rounds
//!    (launch `r`'s result space is launch `r + 1`'s previous distances, device-resident).
//!
//! Everything found is printed for the test to check (`tests/qemu_riscv.rs`).

use crate::board;
use crate::hal::{ItemStats, QemuHal};
use crate::image::{Image, Section};
use crate::println;
use firmware::scratch::ScratchLayout;
use firmware::{Firmware, FirmwareConfig, StreamingFactor};
use shared_abi::params::knn::pack_shape;
use shared_abi::params::sssp::{SsspParameters, INFINITY};
use shared_abi::region::{RingLayout, PAGE_SIZE};
use shared_abi::{
    control, device_map, CommandDescriptor, DeviceAddress, FlowControlMessage, KernelId,
    LaunchMode, MetadataFlags, MetadataRecord, ScatterGatherEntry, ShadowRegionDescriptor,
};
use zerocopy::IntoBytes;

/// Neighbours per query the host keeps at most.
pub const MAX_K: usize = 32;
/// Records in the metadata ring (small: the firmware meets back-pressure and flow control).
pub const METADATA_CAPACITY: u32 = 16;
/// Slots in the payload ring.
pub const PAYLOAD_CAPACITY: u32 = 16;
/// Bytes of a payload slot (the paper's 64-byte slot).
pub const SLOT_SIZE: u32 = 64;
/// The streaming factor: a DMA request once four slots of results are complete.
pub const STREAMING_BYTES: u64 = 4 * SLOT_SIZE as u64;
/// The firmware's scratch area (as `firmware::testing::test_scratch`: 96 KiB).
pub const SCRATCH: ScratchLayout = ScratchLayout {
    base: DeviceAddress(0x30_0000),
    descriptor_capacity: 1024,
    staging_capacity: 1024,
    chunk_capacity: 4096,
};
/// Host memory: where the region's pages start.
const REGION_HOST_OFFSET: u64 = 0;
/// Host memory: where the host's copies of the result spaces start.
const RESULTS_HOST_OFFSET: u64 = 1 << 20;
/// Items the µthread runs per turn of the main loop.
const ITEMS_PER_TURN: u32 = 8;
/// Turns of the main loop one launch may take before the host gives up.
const MAX_TURNS: u64 = 10_000_000;
/// Bytes one host store moves (the link's largest write here).
const STORE_BYTES: usize = 256;

/// Why the host gave up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostError {
    /// A host store was refused: (what).
    Store(&'static str),
    /// A host memory access outside host memory: (what).
    HostMemory(&'static str),
    /// Device memory for the data sets ran out: (bytes needed, bytes left).
    DeviceFull(u64, u64),
    /// A record out of sequence or of another launch: (expected sequence, record sequence).
    Record(u64, u64),
    /// A record outside the result space: (offset, length).
    Payload(u64, u32),
    /// The ring is BROKEN: the device status word.
    Broken(u32),
    /// A launch did not finish within [`MAX_TURNS`]: (tag, bytes received).
    Stuck(u32, u64),
    /// Items failed in the kernel code: (count).
    Items(u64),
    /// The HAL broke a MUST clause of `firmware::hal` (`firmware::conformance`).
    Conformance(firmware::conformance::Violation),
}

impl core::fmt::Display for HostError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            HostError::Store(what) => write!(f, "host store refused: {what}"),
            HostError::HostMemory(what) => write!(f, "outside host memory: {what}"),
            HostError::DeviceFull(need, left) => {
                write!(f, "device memory full: {need} bytes needed, {left} left")
            }
            HostError::Record(expected, got) => {
                write!(f, "record sequence {got}, expected {expected}")
            }
            HostError::Payload(offset, length) => write!(
                f,
                "record payload at result offset {offset} ({length} bytes) outside the result space"
            ),
            HostError::Broken(status) => write!(f, "ring BROKEN, device status {status:#x}"),
            HostError::Stuck(tag, bytes) => {
                write!(f, "launch {tag} stuck after {bytes} result bytes")
            }
            HostError::Items(count) => write!(f, "{count} items failed"),
            HostError::Conformance(violation) => write!(
                f,
                "HAL conformance: {} (address {:#x}: saw {}, expected {})",
                violation.clause, violation.address, violation.seen, violation.expected
            ),
        }
    }
}

/// The host's view of the one ring.
#[derive(Debug)]
struct Ring {
    layout: RingLayout,
    pages: u64,
    /// Records consumed (the metadata head; one payload per record, so the payload head too).
    consumed: u64,
}

impl Ring {
    /// Host physical address of page `page` of the region: reverse order, one-page holes.
    fn page_address(hal: &QemuHal, pages: u64, page: u64) -> u64 {
        let from_end = pages.saturating_sub(1).saturating_sub(page);
        hal.host_base()
            .saturating_add(REGION_HOST_OFFSET)
            .saturating_add(from_end.saturating_mul(2 * PAGE_SIZE))
    }

    /// Host physical address of a byte of the region.
    fn address(&self, hal: &QemuHal, region_offset: u64) -> u64 {
        Self::page_address(hal, self.pages, region_offset / PAGE_SIZE)
            .saturating_add(region_offset % PAGE_SIZE)
    }

    fn program(hal: &mut QemuHal) -> Result<Ring, HostError> {
        let layout = RingLayout::new(METADATA_CAPACITY, PAYLOAD_CAPACITY, SLOT_SIZE)
            .map_err(|_| HostError::Store("ring layout"))?;
        let pages = layout.region_length() / PAGE_SIZE;
        let ring = Ring {
            layout,
            pages,
            consumed: 0,
        };
        let epoch = 1;
        // The region's pages: zeroed, then the static line of the control block.
        let zero = [0_u8; 256];
        for page in 0..pages {
            let base = Self::page_address(hal, pages, page);
            for offset in (0..PAGE_SIZE).step_by(zero.len()) {
                if !hal.host_write(base.saturating_add(offset), &zero) {
                    return Err(HostError::HostMemory("region page"));
                }
            }
        }
        let static_line = layout.static_line(epoch);
        if !hal.host_write(
            ring.address(hal, layout.control_offset()),
            static_line.as_bytes(),
        ) {
            return Err(HostError::HostMemory("static line"));
        }
        // The shadow: header cleared, entries, header last (each store at the header address
        // is announced to the firmware; the cleared one reads as "no region").
        store(
            hal,
            device_map::SHADOW_DESCRIPTOR,
            ShadowRegionDescriptor::default().as_bytes(),
            "shadow header (clear)",
        )?;
        for page in 0..pages {
            let entry = ScatterGatherEntry {
                host_phys: Self::page_address(hal, pages, page),
                length: PAGE_SIZE,
            };
            let at = device_map::SHADOW_ENTRIES
                .checked_add(page.saturating_mul(16))
                .ok_or(HostError::Store("shadow entry"))?;
            store(hal, at, entry.as_bytes(), "shadow entry")?;
        }
        let entries = u32::try_from(pages).map_err(|_| HostError::Store("entry count"))?;
        store(
            hal,
            device_map::SHADOW_DESCRIPTOR,
            layout.descriptor(epoch, entries).as_bytes(),
            "shadow header",
        )?;
        Ok(ring)
    }

    /// Consumes every record the device published (copying each payload to `result_copy` at
    /// its result offset) and hands the slots back; returns the result bytes received.
    fn poll(
        &mut self,
        hal: &mut QemuHal,
        tag: u32,
        result_copy: u64,
        result_length: u64,
    ) -> Result<u64, HostError> {
        let tail_address = self.address(
            hal,
            self.layout
                .control_offset()
                .saturating_add(control::METADATA_TAIL_OFFSET),
        );
        let tail = hal
            .host_load_acquire(tail_address)
            .ok_or(HostError::HostMemory("metadata tail"))?;
        let mut received = 0_u64;
        let start = self.consumed;
        while self.consumed < tail {
            let mut record = MetadataRecord::default();
            let slot = self.address(hal, self.layout.metadata_slot_offset(self.consumed));
            if !hal.host_read(slot, record.as_mut_bytes()) {
                return Err(HostError::HostMemory("metadata slot"));
            }
            if record.sequence != self.consumed
                || record.tag != tag
                || record.flag_set().contains(MetadataFlags::ERROR)
            {
                return Err(HostError::Record(self.consumed, record.sequence));
            }
            let inside = record
                .result_offset
                .checked_add(u64::from(record.length))
                .is_some_and(|end| end <= result_length && record.length <= SLOT_SIZE);
            if !inside {
                return Err(HostError::Payload(record.result_offset, record.length));
            }
            let payload = self
                .layout
                .payload_slot_offset(record.payload_slot)
                .ok_or(HostError::Payload(record.result_offset, record.length))?;
            let mut bytes = [0_u8; SLOT_SIZE as usize];
            let bytes = bytes
                .get_mut(..record.length as usize)
                .ok_or(HostError::Payload(record.result_offset, record.length))?;
            if !hal.host_read(self.address(hal, payload), bytes)
                || !hal.host_write(result_copy.saturating_add(record.result_offset), bytes)
            {
                return Err(HostError::HostMemory("payload"));
            }
            received = received.saturating_add(u64::from(record.length));
            self.consumed = self.consumed.saturating_add(1);
        }
        if self.consumed != start {
            // Edges H2/H3: the records and payloads are read; hand the slots back.
            let heads = FlowControlMessage {
                metadata_head: self.consumed,
                payload_head: self.consumed,
            };
            let host_line = self.address(
                hal,
                self.layout
                    .control_offset()
                    .saturating_add(control::METADATA_HEAD_OFFSET),
            );
            if !hal.host_write(host_line, heads.as_bytes()) {
                return Err(HostError::HostMemory("host line"));
            }
            store(
                hal,
                device_map::FLOW_CONTROL,
                heads.as_bytes(),
                "flow control",
            )?;
        }
        let status_address = self.address(
            hal,
            self.layout
                .control_offset()
                .saturating_add(control::DEVICE_STATUS_OFFSET),
        );
        let status = hal
            .host_load_acquire(status_address)
            .ok_or(HostError::HostMemory("device status"))?;
        if status != 0 {
            return Err(HostError::Broken(status as u32));
        }
        Ok(received)
    }
}

fn store(
    hal: &mut QemuHal,
    address: DeviceAddress,
    data: &[u8],
    what: &'static str,
) -> Result<(), HostError> {
    if hal.host_store(address, data) {
        Ok(())
    } else {
        Err(HostError::Store(what))
    }
}

/// Copies a section of the input image into device memory with host stores.
fn load_section(
    hal: &mut QemuHal,
    section: Section,
    at: DeviceAddress,
    what: &'static str,
) -> Result<(), HostError> {
    let mut buffer = [0_u8; STORE_BYTES];
    let mut done = 0_usize;
    while done < section.bytes {
        let step = section.bytes.saturating_sub(done).min(STORE_BYTES);
        let chunk = buffer
            .get_mut(..step)
            .ok_or(HostError::Store("input chunk"))?;
        if !board::INPUT.read(section.offset.saturating_add(done), chunk) {
            return Err(HostError::Store("input image"));
        }
        let address = at.checked_add(done as u64).ok_or(HostError::Store(what))?;
        store(hal, address, chunk, what)?;
        done = done.saturating_add(step);
    }
    Ok(())
}

/// A bump allocator over device data memory (below the scratch area).
#[derive(Debug)]
struct Allocator {
    next: u64,
}

impl Allocator {
    fn take(&mut self, bytes: u64, align: u64) -> Result<DeviceAddress, HostError> {
        let start = self.next.div_ceil(align).saturating_mul(align);
        let end = start.saturating_add(bytes);
        let limit = SCRATCH.base.0;
        if end > limit {
            return Err(HostError::DeviceFull(bytes, limit.saturating_sub(start)));
        }
        self.next = end;
        Ok(DeviceAddress(start))
    }
}

/// What one launch took.
#[derive(Clone, Copy, Debug, Default)]
struct LaunchReport {
    turns: u64,
    /// Bytes of stack the launch's main loop used (firmware steps, engines, host poll).
    stack: usize,
    records: u64,
    items: ItemStats,
}

/// Stores `command` into the launch window and runs the machine until every result byte has
/// reached `result_copy` and the firmware is idle.
fn run_launch(
    firmware: &mut Firmware,
    hal: &mut QemuHal,
    ring: &mut Ring,
    command: &CommandDescriptor,
    result_copy: u64,
) -> Result<LaunchReport, HostError> {
    let first_record = ring.consumed;
    let sp = hal.repaint_stack();
    store(hal, device_map::LAUNCH_WINDOW, command.as_bytes(), "launch")?;
    let mut received = 0_u64;
    let mut turns = 0_u64;
    loop {
        let outcome = firmware.step(hal);
        if received >= command.result_length && !outcome.busy && !hal.items_pending() {
            break;
        }
        let _ = hal.run_dma(1);
        hal.run_items(ITEMS_PER_TURN);
        received = received.saturating_add(ring.poll(
            hal,
            command.tag,
            result_copy,
            command.result_length,
        )?);
        turns = turns.saturating_add(1);
        if turns > MAX_TURNS {
            return Err(HostError::Stuck(command.tag, received));
        }
    }
    let stack = hal.stack_depth_since(sp);
    let items = hal.take_item_stats();
    if items.failed > 0 {
        return Err(HostError::Items(items.failed));
    }
    Ok(LaunchReport {
        turns,
        stack,
        records: ring.consumed.saturating_sub(first_record),
        items,
    })
}

/// FNV-1a, 64 bits: the digest printed for each result.
fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// Prints `words` little-endian `u32` of host memory at `address` as hex lines of 64 words,
/// each `<label> <first index> <hex...>`; returns their FNV-1a digest.
fn print_words(hal: &QemuHal, label: &str, address: u64, words: u64) -> Result<u64, HostError> {
    let mut digest = FNV_OFFSET;
    let mut index = 0_u64;
    while index < words {
        crate::print!("{label} {index} ");
        let line_end = index.saturating_add(64).min(words);
        while index < line_end {
            let mut word = [0_u8; 4];
            if !hal.host_read(address.saturating_add(index.saturating_mul(4)), &mut word) {
                return Err(HostError::HostMemory("result copy"));
            }
            digest = fnv1a(digest, &word);
            crate::print!("{:08x}", u32::from_le_bytes(word));
            index = index.saturating_add(1);
        }
        println!();
    }
    Ok(digest)
}

fn print_items(label: &str, report: &LaunchReport) {
    let items = report.items;
    let per_item = |total: u64| total.checked_div(items.items).unwrap_or(0);
    println!(
        "items {label} count={} instret_total={} instret_mean={} instret_min={} instret_max={} model_total={} model_mean={} stack_bytes={} loop_stack_bytes={}",
        items.items,
        items.measured,
        per_item(items.measured),
        items.measured_min,
        items.measured_max,
        items.modelled,
        per_item(items.modelled),
        items.stack,
        report.stack
    );
}

/// The HAL conformance checks of `firmware::conformance` on this port's HAL, before anything
/// else uses device memory (their window, the start of the data area, is overwritten by the
/// inputs afterwards; the DMA checks' host window, the results area, likewise). One hart: the
/// contended check runs its workers one after another, which
/// proves the atomics' arithmetic on the `A` extension, not their atomicity across harts.
fn check_conformance(hal: &mut QemuHal) -> Result<(), HostError> {
    use firmware::conformance;
    let window = device_map::DATA_BASE;
    conformance::memory_bounds(&*hal, window).map_err(HostError::Conformance)?;
    conformance::partial_writes(&*hal, window).map_err(HostError::Conformance)?;
    conformance::atomics(&*hal, window).map_err(HostError::Conformance)?;
    conformance::contended_atomics(&*hal, window, 4, |workers, worker| {
        for index in 0..workers {
            worker(index);
        }
    })
    .map_err(HostError::Conformance)?;
    // The DMA and interrupt checks: device window at the data area, host window at the
    // results area (both overwritten later).
    let host_window = hal.host_base().saturating_add(RESULTS_HOST_OFFSET);
    let mut harness = Harness { hal };
    conformance::dma_completion_order(&mut harness, window, host_window)
        .map_err(HostError::Conformance)?;
    conformance::interrupt_delivery(&mut harness, window, host_window)
        .map_err(HostError::Conformance)?;
    println!("conformance ok: memory_bounds partial_writes atomics contended_atomics(4 workers, one hart) dma_completion_order interrupt_delivery");
    Ok(())
}

/// The port's HAL under `firmware::conformance`'s checks that need time to pass: time passes
/// by the copy engine running one request.
struct Harness<'a> {
    hal: &'a mut QemuHal,
}

impl firmware::conformance::Harness for Harness<'_> {
    type Hal = QemuHal;
    fn hal(&mut self) -> &mut QemuHal {
        self.hal
    }
    fn advance(&mut self) -> bool {
        self.hal.run_dma(1) > 0
    }
    fn host_read(&mut self, address: u64, buffer: &mut [u8]) -> bool {
        self.hal.host_read(address, buffer)
    }
    fn host_write(&mut self, address: u64, data: &[u8]) -> bool {
        self.hal.host_write(address, data)
    }
    fn take_interrupt(&mut self) -> Option<u64> {
        self.hal.take_interrupt()
    }
}

/// Runs the KNN launch, then the SSSP rounds; prints everything. The firmware and its HAL live
/// on this function's stack.
pub fn run(image: &Image) -> Result<(), HostError> {
    let config = FirmwareConfig {
        scratch: SCRATCH,
        streaming_factor: StreamingFactor::Bytes(STREAMING_BYTES),
        out_of_order: true,
    };
    let mut firmware = Firmware::new(config);
    let mut hal = QemuHal::new(&SCRATCH);
    println!(
        "sizes firmware_struct={} kernel_enum={} hal_struct={} stack_size={}",
        core::mem::size_of::<Firmware>(),
        core::mem::size_of::<firmware::kernels::Kernel>(),
        core::mem::size_of::<QemuHal>(),
        board::stack::size()
    );
    check_conformance(&mut hal)?;
    let mut ring = Ring::program(&mut hal)?;
    firmware.step(&mut hal);
    let mut heap = Allocator {
        next: device_map::DATA_BASE.0,
    };
    let header = image.header;
    let results = hal.host_base().saturating_add(RESULTS_HOST_OFFSET);

    // KNN: one launch, one item per (query, row).
    let database = heap.take(image.knn_database.bytes as u64, 64)?;
    let queries = heap.take(image.knn_queries.bytes as u64, 64)?;
    let items = u64::from(header.knn_rows).saturating_mul(u64::from(header.knn_queries));
    let knn_result = heap.take(items.saturating_mul(4), PAGE_SIZE)?;
    load_section(&mut hal, image.knn_database, database, "knn database")?;
    load_section(&mut hal, image.knn_queries, queries, "knn queries")?;
    let command = CommandDescriptor {
        kernel: KernelId::KnnDistance as u32,
        mode: LaunchMode::BackStreaming as u32,
        tag: 0x4b4e,
        flags: 0,
        result_address: knn_result.0,
        result_length: items.saturating_mul(4),
        args: [
            database.0,
            queries.0,
            pack_shape(header.knn_rows, header.knn_dim),
            u64::from(header.knn_queries),
        ],
    };
    println!(
        "knn rows={} dim={} queries={} k={} items={items}",
        header.knn_rows, header.knn_dim, header.knn_queries, header.knn_k
    );
    let report = run_launch(&mut firmware, &mut hal, &mut ring, &command, results)?;
    println!(
        "knn.launch records={} turns={}",
        report.records, report.turns
    );
    let digest = print_words(&hal, "knn.distances", results, items)?;
    println!("knn.digest {digest:016x}");
    print_top_k(
        &hal,
        results,
        header.knn_rows,
        header.knn_queries,
        header.knn_k,
    )?;
    print_items("knn", &report);
    let knn_copy_end = results.saturating_add(items.saturating_mul(4));

    // SSSP: rounds of relaxation, ping-pong between two device-resident distance vectors.
    let vertices = u64::from(header.sssp_vertices);
    let parameters_at = heap.take(core::mem::size_of::<SsspParameters>() as u64, 64)?;
    let offsets = heap.take(image.sssp_offsets.bytes as u64, 64)?;
    let targets = heap.take(image.sssp_targets.bytes as u64, 64)?;
    let weights = heap.take(image.sssp_weights.bytes as u64, 64)?;
    let distances = [
        heap.take(vertices.saturating_mul(4), PAGE_SIZE)?,
        heap.take(vertices.saturating_mul(4), PAGE_SIZE)?,
    ];
    load_section(&mut hal, image.sssp_offsets, offsets, "sssp offsets")?;
    load_section(&mut hal, image.sssp_targets, targets, "sssp targets")?;
    load_section(&mut hal, image.sssp_weights, weights, "sssp weights")?;
    let parameters = SsspParameters {
        vertices,
        arcs: u64::from(header.sssp_arcs),
        offsets: offsets.0,
        targets: targets.0,
        weights: weights.0,
    };
    store(
        &mut hal,
        parameters_at,
        parameters.as_bytes(),
        "sssp parameters",
    )?;
    // Round 0: 0 at the source, unreached elsewhere (written once by the host).
    for vertex in 0..vertices {
        let value = if vertex == u64::from(header.sssp_source) {
            0
        } else {
            INFINITY
        };
        let at = distances[0]
            .checked_add(vertex.saturating_mul(4))
            .ok_or(HostError::Store("sssp distances"))?;
        store(&mut hal, at, &value.to_le_bytes(), "sssp distances")?;
    }
    // The host's copy of the latest round, page-aligned after the KNN copy.
    let sssp_copy = knn_copy_end.div_ceil(PAGE_SIZE).saturating_mul(PAGE_SIZE);
    println!(
        "sssp vertices={vertices} arcs={} source={} rounds={}",
        header.sssp_arcs, header.sssp_source, header.sssp_rounds
    );
    let mut total = LaunchReport::default();
    for round in 0..header.sssp_rounds {
        let (previous, result) = if round % 2 == 0 {
            (distances[0], distances[1])
        } else {
            (distances[1], distances[0])
        };
        let command = CommandDescriptor {
            kernel: KernelId::SsspRelax as u32,
            mode: LaunchMode::BackStreaming as u32,
            tag: 0x5353_0000 | round,
            flags: 0,
            result_address: result.0,
            result_length: vertices.saturating_mul(4),
            args: [parameters_at.0, previous.0, 0, 0],
        };
        let report = run_launch(&mut firmware, &mut hal, &mut ring, &command, sssp_copy)?;
        println!(
            "sssp.round {} records={} turns={}",
            round.saturating_add(1),
            report.records,
            report.turns
        );
        total = accumulate(total, report);
    }
    let digest = print_words(&hal, "sssp.distances", sssp_copy, vertices)?;
    println!("sssp.digest {digest:016x}");
    print_items("sssp", &total);

    let counters = firmware.counters();
    println!(
        "dma requests={} writes={} bytes={} refused={} failed={} interrupts={} bulk={}",
        hal.dma_stats.requests,
        hal.dma_stats.writes,
        hal.dma_stats.bytes,
        hal.dma_stats.refused,
        hal.dma_stats.failed,
        hal.interrupts,
        hal.bulk_completions
    );
    println!("firmware.counters {counters:?}");
    println!(
        "stack high_water={} of {}",
        hal.stack_high_water(),
        board::stack::size()
    );
    Ok(())
}

fn accumulate(total: LaunchReport, report: LaunchReport) -> LaunchReport {
    let (a, b) = (total.items, report.items);
    LaunchReport {
        turns: total.turns.saturating_add(report.turns),
        stack: total.stack.max(report.stack),
        records: total.records.saturating_add(report.records),
        items: ItemStats {
            items: a.items.saturating_add(b.items),
            measured: a.measured.saturating_add(b.measured),
            measured_min: if a.items == 0 {
                b.measured_min
            } else {
                a.measured_min.min(b.measured_min)
            },
            measured_max: a.measured_max.max(b.measured_max),
            modelled: a.modelled.saturating_add(b.modelled),
            failed: a.failed.saturating_add(b.failed),
            stack: a.stack.max(b.stack),
        },
    }
}

/// The host task of KNN: per query, the `k` rows of least distance (ties: the lower row), from
/// the streamed distances; printed as `knn.topk <query> <row>:<distance bits>...`.
fn print_top_k(
    hal: &QemuHal,
    results: u64,
    rows: u32,
    queries: u32,
    k: u32,
) -> Result<(), HostError> {
    let k = (k as usize).min(MAX_K);
    for query in 0..queries {
        let mut best = [(f32::INFINITY, u32::MAX); MAX_K];
        let kept = best.get_mut(..k).ok_or(HostError::HostMemory("top-k"))?;
        for row in 0..rows {
            let index = u64::from(query)
                .saturating_mul(u64::from(rows))
                .saturating_add(u64::from(row));
            let mut word = [0_u8; 4];
            if !hal.host_read(results.saturating_add(index.saturating_mul(4)), &mut word) {
                return Err(HostError::HostMemory("knn copy"));
            }
            let candidate = (f32::from_le_bytes(word), row);
            let better =
                |a: &(f32, u32), b: &(f32, u32)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).is_lt();
            // Insertion into the sorted list of the k best.
            if let Some(last) = kept.last() {
                if !better(&candidate, last) {
                    continue;
                }
            }
            let position = kept
                .iter()
                .position(|kept| better(&candidate, kept))
                .unwrap_or(0);
            if let Some(tail) = kept.get_mut(position..) {
                tail.rotate_right(1);
                if let Some(slot) = tail.first_mut() {
                    *slot = candidate;
                }
            }
        }
        crate::print!("knn.topk {query}");
        for (distance, row) in kept.iter() {
            crate::print!(" {row}:{:08x}", distance.to_bits());
        }
        println!();
    }
    Ok(())
}
