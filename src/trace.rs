//! `axle run --trace FILE`: a run's timeline as Chrome Trace Event JSON, which Perfetto
//! (ui.perfetto.dev) and `chrome://tracing` open. It shows the paper's Figure 9 for any
//! workload: CCM µthreads producing results, DMA requests streaming them, the DMA executor's
//! back-pressure (waiting for ring credit) and the ring's occupancy, the link in both
//! directions, and the host's control thread (polls, flow-control stores, loads, and
//! `--no-deadlock`'s overflow spills) and workers.
//!
//! The two sides record their own timelines ([`emulator::trace`], [`host_runtime::trace`]);
//! this module only lays them out as tracks and writes them. The format:
//! `{"traceEvents":[...],"displayTimeUnit":"ns"}`, complete events (`"ph":"X"`) with `ts` and
//! `dur` in microseconds, rounded to whole nanoseconds (virtual time is 1/6 ns; start and end
//! are rounded, so nested and adjacent spans stay so), instants (`"ph":"i"`), a counter
//! (`"ph":"C"`, [`OCCUPANCY_COUNTER`]: the ring's metadata and payload slots in use, the
//! device's tails minus the heads the host's flow-control stores released), and metadata
//! events naming the processes and threads and ordering them. Process 1 is the device,
//! process 2 the host; thread ids are unique across both. Flow events (`"ph":"s"`, `"t"`,
//! `"f"`) draw arrows from each CCM item to the DMA request that carried its result, the poll
//! that saw the record and the host task that read it ([`flows`] says which and how).
//!
//! Events are written in a fixed order from deterministic records, so identical runs give
//! byte-identical files.

use emulator::trace::{DeviceInstant, DeviceSpanKind, DeviceTrace, LinkDirection, LinkTraffic};
use flows::{Anchors, Slice};
use host_runtime::trace::{HostInstant, HostSpanKind, HostTrace};
use serde::Serialize;
use shared_abi::Ticks;
use std::collections::BTreeMap;
use std::io::Write;

pub mod flows;

/// Process id of the device.
pub const DEVICE_PID: u32 = 1;
/// Process id of the host.
pub const HOST_PID: u32 = 2;

/// Device track: firmware and control-plane instants.
pub const FIRMWARE_TID: u32 = 1;
/// Device track: the link, host to device.
pub const LINK_DOWN_TID: u32 = 2;
/// Device track: the link, device to host.
pub const LINK_UP_TID: u32 = 3;
/// Device track: the DMA executor waiting for ring credit (back-pressure).
pub const BACKPRESSURE_TID: u32 = 4;
/// The name of the ring-occupancy counter track (a `"ph":"C"` series of the device process).
pub const OCCUPANCY_COUNTER: &str = "ring slots in use";
/// Device tracks: DMA lane `n` is `DMA_TID + n`.
pub const DMA_TID: u32 = 100;
/// Device tracks: CCM unit `u`, µthread lane `l` is `CCM_TID + u x µthreads + l`.
pub const CCM_TID: u32 = 10_000;
/// Host track: the control thread's launches, input stores, waits and result loads.
pub const CONTROL_TID: u32 = 1_000_001;
/// Host track: the control thread's polls (local, remote).
pub const POLL_TID: u32 = 1_000_002;
/// Host track: flow-control stores.
pub const FLOW_CONTROL_TID: u32 = 1_000_003;
/// Host tracks: AXLE_Interrupt handlers, which run on the cores the interrupts are delivered
/// to, side by side: lane `n` is `INTERRUPT_TID + n`.
pub const INTERRUPT_TID: u32 = 1_000_100;
/// Host tracks: worker `w` is `WORKER_TID + w`.
pub const WORKER_TID: u32 = 1_001_000;

/// A track: its process, id, name and place in the display order.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Track {
    pid: u32,
    name: String,
    sort: u32,
}

/// The arguments an event may carry; absent ones are not written.
#[derive(Clone, Copy, Debug, Default, Serialize)]
struct Args {
    #[serde(skip_serializing_if = "Option::is_none")]
    launch: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    item: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    task: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    writes: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    records: Option<u32>,
    /// A poll's first metadata index (its batch is `first .. first + records`): the
    /// records' sequence numbers, and the ids of their flow chains.
    #[serde(skip_serializing_if = "Option::is_none")]
    first: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    complete: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata_head: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload_head: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<u64>,
}

/// One trace event as written.
#[derive(Debug, Serialize)]
struct Event<'a> {
    name: &'a str,
    ph: &'static str,
    ts: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    pid: u32,
    tid: u32,
    /// Instant scope (thread).
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'static str>,
    args: Args,
}

/// A flow event (`"ph":"s"`, `"t"` or `"f"`): one step of a chain of arrows ([`flows`]).
#[derive(Debug, Serialize)]
struct FlowEvent {
    name: &'static str,
    cat: &'static str,
    ph: &'static str,
    id: u64,
    ts: f64,
    pid: u32,
    tid: u32,
    /// Binding point of the chain's last event: the enclosing slice (the first and the
    /// steps always bind to theirs).
    #[serde(skip_serializing_if = "Option::is_none")]
    bp: Option<&'static str>,
    /// What the chain links.
    args: flows::Subject,
}

/// A counter sample (`"ph":"C"`): the ring's slots in use.
#[derive(Debug, Serialize)]
struct Counter {
    name: &'static str,
    ph: &'static str,
    ts: f64,
    pid: u32,
    args: Occupancy,
}

/// The two series of the occupancy counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
struct Occupancy {
    /// Metadata slots claimed by the device and not yet released by a flow-control store.
    metadata: u64,
    /// Payload slots, likewise.
    payload: u64,
}

/// The ring's occupancy over time: at each change of the device's tails (records and
/// payloads claimed) or of the heads the host released (each flow-control store, at its
/// end), the slots in use, tails minus heads; a sample only when it changed.
fn occupancy(device: &DeviceTrace, host: &HostTrace) -> Vec<(Ticks, Occupancy)> {
    // (time, order at equal times: tails before heads, tails or heads)
    let mut changes: Vec<(Ticks, u8, u64, u64)> = device
        .tails
        .iter()
        .map(|&(at, metadata, payload)| (at, 0, metadata, payload))
        .collect();
    changes.extend(host.spans.iter().filter_map(|span| match span.kind {
        HostSpanKind::FlowControl {
            metadata_head,
            payload_head,
        } => Some((span.end, 1, metadata_head, payload_head)),
        _ => None,
    }));
    // Stable: equal keys keep their recording order.
    changes.sort_by_key(|&(at, order, _, _)| (at, order));
    let (mut tails, mut heads) = ((0, 0), (0, 0));
    let mut samples: Vec<(Ticks, Occupancy)> = Vec::new();
    for (at, order, metadata, payload) in changes {
        if order == 0 {
            tails = (metadata, payload);
        } else {
            heads = (metadata, payload);
        }
        let now = Occupancy {
            metadata: tails.0.saturating_sub(heads.0),
            payload: tails.1.saturating_sub(heads.1),
        };
        match samples.last_mut() {
            Some(last) if last.1 == now => {}
            // Several changes at one nanosecond: the last one stands.
            Some(last) if nanoseconds(last.0) == nanoseconds(at) => *last = (at, now),
            _ => samples.push((at, now)),
        }
    }
    samples
}

/// A metadata event (`"ph":"M"`).
#[derive(Debug, Serialize)]
struct Metadata<'a> {
    name: &'static str,
    ph: &'static str,
    pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    tid: Option<u32>,
    args: MetadataArgs<'a>,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum MetadataArgs<'a> {
    Name { name: &'a str },
    Sort { sort_index: u32 },
}

/// Whole nanoseconds of `ticks`, rounded to nearest.
fn nanoseconds(ticks: Ticks) -> u64 {
    ticks.0.saturating_add(Ticks::PER_NS / 2) / Ticks::PER_NS
}

/// `ticks` in microseconds, to the nanosecond.
fn microseconds(ticks: Ticks) -> f64 {
    nanoseconds(ticks) as f64 / 1000.0
}

/// Writes events separated by commas.
struct EventWriter<W: Write> {
    out: W,
    first: bool,
    count: u64,
}

impl<W: Write> EventWriter<W> {
    fn item<T: Serialize>(&mut self, event: &T) -> std::io::Result<()> {
        if !self.first {
            self.out.write_all(b",\n")?;
        }
        self.first = false;
        self.count += 1;
        serde_json::to_writer(&mut self.out, event).map_err(std::io::Error::from)
    }

    fn span(
        &mut self,
        name: &str,
        pid: u32,
        tid: u32,
        start: Ticks,
        end: Ticks,
        args: Args,
    ) -> std::io::Result<()> {
        let start_ns = nanoseconds(start);
        let end_ns = nanoseconds(end).max(start_ns);
        self.item(&Event {
            name,
            ph: "X",
            ts: start_ns as f64 / 1000.0,
            dur: Some((end_ns - start_ns) as f64 / 1000.0),
            pid,
            tid,
            s: None,
            args,
        })
    }

    fn instant(
        &mut self,
        name: &str,
        pid: u32,
        tid: u32,
        at: Ticks,
        args: Args,
    ) -> std::io::Result<()> {
        self.item(&Event {
            name,
            ph: "i",
            ts: microseconds(at),
            dur: None,
            pid,
            tid,
            s: Some("t"),
            args,
        })
    }
}

/// What [`write_chrome_trace`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceSummary {
    /// Events in `traceEvents`, metadata included.
    pub events: u64,
}

/// The name of a link transfer.
fn link_name(traffic: LinkTraffic) -> &'static str {
    match traffic {
        LinkTraffic::MemStore => "CXL.mem store",
        LinkTraffic::MemStoreSynchronous => "CXL.mem synchronous store",
        LinkTraffic::MemLoadResponse => "CXL.mem load response",
        LinkTraffic::IoWrite => "CXL.io write",
        LinkTraffic::IoRead => "CXL.io read",
        LinkTraffic::IoReadResponse => "CXL.io read response",
        LinkTraffic::Dma => "DMA writes",
    }
}

/// Writes `device` and `host` as one Chrome trace to `out` (buffer it: many small writes).
pub fn write_chrome_trace<W: Write>(
    out: W,
    device: &DeviceTrace,
    host: &HostTrace,
) -> std::io::Result<TraceSummary> {
    let mut tracks: BTreeMap<u32, Track> = BTreeMap::new();
    let mut writer = EventWriter {
        out,
        first: true,
        count: 0,
    };
    writer.out.write_all(b"{\"traceEvents\":[\n")?;
    let uthreads = device.uthreads.max(1);
    let mut anchors = Anchors::default();

    for span in &device.spans {
        let (name, tid, args) = match span.kind {
            DeviceSpanKind::Item {
                unit,
                lane,
                tag,
                item,
                result_offset,
                result_length,
            } => {
                let tid =
                    CCM_TID.saturating_add(unit.saturating_mul(uthreads).saturating_add(lane));
                tracks.entry(tid).or_insert_with(|| Track {
                    pid: DEVICE_PID,
                    name: format!("CCM unit {unit} µthread {lane}"),
                    sort: tid,
                });
                anchors.item(
                    tag,
                    result_offset,
                    result_length,
                    Slice::new(DEVICE_PID, tid, span.start, span.end),
                );
                let args = Args {
                    launch: Some(tag),
                    item: Some(item),
                    ..Args::default()
                };
                ("item", tid, args)
            }
            DeviceSpanKind::DmaPrepare { lane, request } => {
                let tid = dma_track(&mut tracks, lane);
                let args = Args {
                    request: Some(request),
                    ..Args::default()
                };
                ("DMA prepare", tid, args)
            }
            DeviceSpanKind::DmaTransfer {
                lane,
                request,
                writes,
                bytes,
                status,
            } => {
                let tid = dma_track(&mut tracks, lane);
                anchors.transfer(request, Slice::new(DEVICE_PID, tid, span.start, span.end));
                let args = Args {
                    request: Some(request),
                    writes: Some(writes),
                    bytes: Some(bytes),
                    status: Some(status),
                    ..Args::default()
                };
                ("DMA transfer", tid, args)
            }
            DeviceSpanKind::Link {
                direction,
                traffic,
                bytes,
            } => {
                let (tid, name) = match direction {
                    LinkDirection::Downstream => (LINK_DOWN_TID, "link: host → device"),
                    LinkDirection::Upstream => (LINK_UP_TID, "link: device → host"),
                };
                tracks.entry(tid).or_insert_with(|| Track {
                    pid: DEVICE_PID,
                    name: name.into(),
                    sort: 30_000 + tid,
                });
                let args = Args {
                    bytes: Some(bytes),
                    ..Args::default()
                };
                (link_name(traffic), tid, args)
            }
        };
        writer.span(name, DEVICE_PID, tid, span.start, span.end, args)?;
    }
    for &(at, instant) in &device.instants {
        tracks.entry(FIRMWARE_TID).or_insert_with(|| Track {
            pid: DEVICE_PID,
            name: "device control plane".into(),
            sort: 40_000,
        });
        let (name, args) = match instant {
            DeviceInstant::LaunchStore { tag } => (
                "launch store arrives",
                Args {
                    launch: Some(tag),
                    ..Args::default()
                },
            ),
            DeviceInstant::FlowControl => ("flow control arrives", Args::default()),
            DeviceInstant::RegionProgrammed => ("DMA region programmed", Args::default()),
            DeviceInstant::Doorbell => ("doorbell arrives", Args::default()),
            DeviceInstant::Dequeue => ("dequeue arrives", Args::default()),
            DeviceInstant::Interrupt { message } => (
                "interrupt raised",
                Args {
                    message: Some(message),
                    ..Args::default()
                },
            ),
        };
        writer.instant(name, DEVICE_PID, FIRMWARE_TID, at, args)?;
    }

    for &(start, end) in &device.backpressure {
        tracks.entry(BACKPRESSURE_TID).or_insert_with(|| Track {
            pid: DEVICE_PID,
            name: "DMA executor: back-pressure (waiting for ring credit)".into(),
            sort: 19_999,
        });
        writer.span(
            "back-pressure",
            DEVICE_PID,
            BACKPRESSURE_TID,
            start,
            end,
            Args::default(),
        )?;
    }
    for (at, args) in occupancy(device, host) {
        writer.item(&Counter {
            name: OCCUPANCY_COUNTER,
            ph: "C",
            ts: microseconds(at),
            pid: DEVICE_PID,
            args,
        })?;
    }

    // End of the last handler on each interrupt lane (handlers are recorded in start order).
    let mut interrupt_lanes: Vec<Ticks> = Vec::new();
    for span in &host.spans {
        let (name, tid, args) = match span.kind {
            HostSpanKind::InputStore { bytes } => (
                "input store",
                CONTROL_TID,
                Args {
                    bytes: Some(bytes),
                    ..Args::default()
                },
            ),
            HostSpanKind::LaunchStore { tag } => ("launch store", CONTROL_TID, launch(tag)),
            HostSpanKind::DescriptorStore { tag } => {
                ("descriptor store (RP)", CONTROL_TID, launch(tag))
            }
            HostSpanKind::BulkWait { tag } => {
                anchors.completion(tag, Slice::new(HOST_PID, CONTROL_TID, span.start, span.end));
                ("synchronous wait (BS)", CONTROL_TID, launch(tag))
            }
            HostSpanKind::ResultLoad { bytes, tag } => {
                anchors.load(tag, Slice::new(HOST_PID, CONTROL_TID, span.start, span.end));
                (
                    "result load",
                    CONTROL_TID,
                    Args {
                        launch: Some(tag),
                        bytes: Some(bytes),
                        ..Args::default()
                    },
                )
            }
            HostSpanKind::RemotePoll { complete, tag } => {
                if complete {
                    anchors.completion(tag, Slice::new(HOST_PID, POLL_TID, span.start, span.end));
                }
                (
                    "remote poll",
                    POLL_TID,
                    Args {
                        launch: Some(tag),
                        complete: Some(complete),
                        ..Args::default()
                    },
                )
            }
            HostSpanKind::LocalPoll { records, first } => {
                anchors.poll(
                    first,
                    records,
                    Slice::new(HOST_PID, POLL_TID, span.start, span.end),
                );
                (
                    "local poll",
                    POLL_TID,
                    Args {
                        records: Some(records),
                        first: (records > 0).then_some(first),
                        ..Args::default()
                    },
                )
            }
            HostSpanKind::InterruptHandler { records, first } => {
                let tid = interrupt_track(&mut tracks, &mut interrupt_lanes, span.start, span.end);
                anchors.poll(
                    first,
                    records,
                    Slice::new(HOST_PID, tid, span.start, span.end),
                );
                (
                    "interrupt handler",
                    tid,
                    Args {
                        records: Some(records),
                        first: (records > 0).then_some(first),
                        ..Args::default()
                    },
                )
            }
            HostSpanKind::FlowControl {
                metadata_head,
                payload_head,
            } => (
                "flow-control store",
                FLOW_CONTROL_TID,
                Args {
                    metadata_head: Some(metadata_head),
                    payload_head: Some(payload_head),
                    ..Args::default()
                },
            ),
            HostSpanKind::OverflowSpill { bytes } => (
                "overflow spill",
                CONTROL_TID,
                Args {
                    bytes: Some(bytes),
                    ..Args::default()
                },
            ),
            HostSpanKind::Task {
                worker,
                tag,
                task,
                needs,
            } => {
                let tid = worker_track(&mut tracks, worker);
                anchors.task(tag, needs, Slice::new(HOST_PID, tid, span.start, span.end));
                (
                    "task",
                    tid,
                    Args {
                        launch: Some(tag),
                        task: Some(task),
                        ..Args::default()
                    },
                )
            }
            HostSpanKind::FinishLaunch { worker, tag } => (
                "finish launch",
                worker_track(&mut tracks, worker),
                launch(tag),
            ),
        };
        host_control_track(&mut tracks, tid);
        writer.span(name, HOST_PID, tid, span.start, span.end, args)?;
    }
    for &(at, instant) in &host.instants {
        let (name, args) = match instant {
            HostInstant::Launch { tag } => ("launch", launch(tag)),
            HostInstant::Doorbell => ("doorbell", Args::default()),
            HostInstant::Dequeue => ("dequeue", Args::default()),
            HostInstant::FirstRecordBound { tag } => ("first record not before", launch(tag)),
        };
        host_control_track(&mut tracks, CONTROL_TID);
        writer.instant(name, HOST_PID, CONTROL_TID, at, args)?;
    }

    for flow in flows::flows(anchors, &device.records) {
        let last = flow.hops.len().saturating_sub(1);
        for (index, &(slice, at)) in flow.hops.iter().enumerate() {
            let ph = match index {
                0 => "s",
                _ if index == last => "f",
                _ => "t",
            };
            writer.item(&FlowEvent {
                name: flow.name,
                cat: flow.name,
                ph,
                id: flow.id,
                ts: at as f64 / 1000.0,
                pid: slice.pid,
                tid: slice.tid,
                bp: (ph == "f").then_some("e"),
                args: flow.subject,
            })?;
        }
    }

    for (pid, name, sort) in [
        (DEVICE_PID, "CXL device (CCM, DMA engine, link)", 1),
        (HOST_PID, "host", 2),
    ] {
        writer.item(&Metadata {
            name: "process_name",
            ph: "M",
            pid,
            tid: None,
            args: MetadataArgs::Name { name },
        })?;
        writer.item(&Metadata {
            name: "process_sort_index",
            ph: "M",
            pid,
            tid: None,
            args: MetadataArgs::Sort { sort_index: sort },
        })?;
    }
    for (&tid, track) in &tracks {
        writer.item(&Metadata {
            name: "thread_name",
            ph: "M",
            pid: track.pid,
            tid: Some(tid),
            args: MetadataArgs::Name { name: &track.name },
        })?;
        writer.item(&Metadata {
            name: "thread_sort_index",
            ph: "M",
            pid: track.pid,
            tid: Some(tid),
            args: MetadataArgs::Sort {
                sort_index: track.sort,
            },
        })?;
    }
    let events = writer.count;
    let mut out = writer.out;
    out.write_all(b"\n],\"displayTimeUnit\":\"ns\"}\n")?;
    out.flush()?;
    Ok(TraceSummary { events })
}

fn launch(tag: u32) -> Args {
    Args {
        launch: Some(tag),
        ..Args::default()
    }
}

fn dma_track(tracks: &mut BTreeMap<u32, Track>, lane: u32) -> u32 {
    let tid = DMA_TID.saturating_add(lane);
    tracks.entry(tid).or_insert_with(|| Track {
        pid: DEVICE_PID,
        name: format!("DMA lane {lane}"),
        sort: 20_000 + lane,
    });
    tid
}

fn worker_track(tracks: &mut BTreeMap<u32, Track>, worker: u32) -> u32 {
    let tid = WORKER_TID.saturating_add(worker);
    tracks.entry(tid).or_insert_with(|| Track {
        pid: HOST_PID,
        name: format!("host worker {worker}"),
        sort: 100 + worker,
    });
    tid
}

/// The lowest interrupt lane free at `start` (a new one if none is), which `[start, end]` then
/// occupies.
fn interrupt_track(
    tracks: &mut BTreeMap<u32, Track>,
    lanes: &mut Vec<Ticks>,
    start: Ticks,
    end: Ticks,
) -> u32 {
    let lane = match lanes.iter().position(|&free| free <= start) {
        Some(lane) => lane,
        None => {
            lanes.push(start);
            lanes.len() - 1
        }
    };
    if let Some(free) = lanes.get_mut(lane) {
        *free = end;
    }
    let lane = u32::try_from(lane).unwrap_or(u32::MAX);
    let tid = INTERRUPT_TID.saturating_add(lane);
    tracks.entry(tid).or_insert_with(|| Track {
        pid: HOST_PID,
        name: format!("host interrupts: lane {lane}"),
        sort: 10u32.saturating_add(lane),
    });
    tid
}

/// Names the host's control-thread tracks (workers are named by [`worker_track`]).
fn host_control_track(tracks: &mut BTreeMap<u32, Track>, tid: u32) {
    let (name, sort) = match tid {
        CONTROL_TID => ("host control: launches, stores, loads", 0),
        POLL_TID => ("host control: polls", 1),
        FLOW_CONTROL_TID => ("host control: flow-control stores", 2),
        _ => return,
    };
    tracks.entry(tid).or_insert_with(|| Track {
        pid: HOST_PID,
        name: name.into(),
        sort,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_to_the_nanosecond_and_print_in_microseconds() {
        assert_eq!(nanoseconds(Ticks(2)), 0);
        assert_eq!(nanoseconds(Ticks(3)), 1);
        assert_eq!(nanoseconds(Ticks::from_ns(1234)), 1234);
        assert_eq!(microseconds(Ticks::from_ns(1234)).to_string(), "1.234");
    }

    #[test]
    fn an_empty_trace_is_valid_json_with_process_names() {
        let mut out = Vec::new();
        let summary =
            write_chrome_trace(&mut out, &DeviceTrace::default(), &HostTrace::default()).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let events = value["traceEvents"].as_array().unwrap();
        assert_eq!(events.len() as u64, summary.events);
        assert_eq!(events.len(), 4);
        assert_eq!(value["displayTimeUnit"], "ns");
    }
}
