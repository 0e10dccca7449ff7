//! Flow arrows: which slice's work a later slice consumed.
//!
//! AXLE and AXLE_Interrupt: one arrow chain per metadata record, from the CCM item that
//! completed the record's chunk (the last item, in completion order, that wrote bytes of it:
//! the one whose completion made the firmware's result monitor count the chunk full), to the
//! DMA request that carried the record (its `DMA transfer` slice), to the local poll or
//! interrupt handler whose batch held it, to the first host task that read it (the earliest
//! to start of the tasks whose result bytes overlap the chunk). The chain's id is the
//! record's sequence number, which the device reads from the request's metadata write and
//! the host's poll names as its batch's index range, so nothing is added to the records.
//! Every further task that read the record gets a short arrow of its own from the poll
//! ([`FURTHER_READER`]), so that a chain never branches. A record that no task read ends at
//! its poll; a chain whose run ended early ends at its last slice.
//!
//! RP and BS stream nothing: every task of a launch waits for the whole result. One chain per
//! launch shows why: the launch's last item to end, the remote poll that found the launch
//! complete (RP) or the synchronous wait that its response ended (BS), the result load, and
//! the first task to start.
//!
//! The format is the Trace Event Format's flow events (`"ph":"s"`, `"t"`, `"f"` with one
//! `id`, the last with `"bp":"e"`), not the newer `bind_id`/`flow_in`/`flow_out` fields of
//! complete events: those give a slice one flow id, and a DMA request or a poll carries many
//! records, each its own chain. Both Perfetto (its JSON importer keys a chain by id, category
//! and name) and `chrome://tracing` (by id) bind each flow event to the slice of its thread
//! that encloses its timestamp. So every event's timestamp lies strictly inside its slice,
//! one nanosecond from the end that faces the chain's direction (the item's end, the other
//! slices' start; the end of an RP poll or BS wait, which may begin before the last item
//! ends), never on a boundary that an adjacent slice shares; and along a chain the
//! timestamps never decrease, which the model guarantees (a record lands before the poll
//! that sees it starts, a task starts after the poll that made it ready ends).

use super::nanoseconds;
use emulator::trace::DmaRecord;
use serde::Serialize;
use shared_abi::Ticks;
use std::collections::{BTreeMap, BTreeSet};

/// The name (and category) of a record's chain.
pub const RECORD: &str = "record";
/// The name of the arrow from a record's poll to a task that read it after the first.
pub const FURTHER_READER: &str = "record (further reader)";
/// The name (and category) of an RP or BS launch's chain.
pub const LAUNCH: &str = "launch results";
/// Further readers' arrows are numbered from here, far above any record's sequence number
/// and below 2^53, so that ids stay exact in JavaScript viewers and never collide.
const FURTHER_READER_IDS: u64 = 1 << 50;

/// A slice as written: its track and its ends, in whole nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Start.
    pub start: u64,
    /// End (not before `start`).
    pub end: u64,
}

impl Slice {
    /// The slice `[start, end]` on `pid`/`tid`, rounded as the writer rounds it.
    pub fn new(pid: u32, tid: u32, start: Ticks, end: Ticks) -> Slice {
        let start = nanoseconds(start);
        Slice {
            pid,
            tid,
            start,
            end: nanoseconds(end).max(start),
        }
    }

    /// A point inside, one nanosecond after the start (the start of a slice shorter than
    /// 2 ns).
    fn early(self) -> (Slice, u64) {
        (self, self.start.saturating_add(1).min(self.end))
    }

    /// A point inside, one nanosecond before the end.
    fn late(self) -> (Slice, u64) {
        (self, self.end.saturating_sub(1).max(self.start))
    }
}

/// A CCM item's slice with the result bytes it wrote.
#[derive(Clone, Copy, Debug)]
struct Item {
    start: u64,
    end: u64,
    /// Its place in completion order.
    order: usize,
    slice: Slice,
}

/// A host task's slice with the result bytes it read.
#[derive(Clone, Copy, Debug)]
struct Task {
    tag: u32,
    needs: (u64, u64),
    slice: Slice,
}

/// The slices the arrows link, collected while the writer writes them.
#[derive(Debug, Default)]
pub struct Anchors {
    /// CCM items by launch tag, in completion order.
    items: BTreeMap<u32, Vec<Item>>,
    items_seen: usize,
    /// `DMA transfer` slices by request.
    transfers: BTreeMap<u64, Slice>,
    /// Polls and interrupt handlers that found records: first metadata index, records, slice;
    /// in the order they ran (their batches are consecutive).
    polls: Vec<(u64, u64, Slice)>,
    /// Host tasks in the order they started.
    tasks: Vec<Task>,
    /// RP: the remote poll that found each launch complete; BS: each launch's synchronous
    /// wait.
    completions: BTreeMap<u32, Slice>,
    /// RP/BS: each launch's result load.
    loads: BTreeMap<u32, Slice>,
}

impl Anchors {
    /// A CCM item of launch `tag` that wrote `length` bytes at `offset`.
    pub fn item(&mut self, tag: u32, offset: u64, length: u32, slice: Slice) {
        let order = self.items_seen;
        self.items_seen += 1;
        self.items.entry(tag).or_default().push(Item {
            start: offset,
            end: offset.saturating_add(u64::from(length)),
            order,
            slice,
        });
    }

    /// DMA request `request`'s transfer.
    pub fn transfer(&mut self, request: u64, slice: Slice) {
        self.transfers.entry(request).or_insert(slice);
    }

    /// A poll or interrupt handler whose batch was the metadata indexes
    /// `first .. first + records`.
    pub fn poll(&mut self, first: u64, records: u32, slice: Slice) {
        if records > 0 {
            self.polls.push((first, u64::from(records), slice));
        }
    }

    /// A host task of launch `tag` that read the result bytes `needs`.
    pub fn task(&mut self, tag: u32, needs: (u64, u64), slice: Slice) {
        self.tasks.push(Task { tag, needs, slice });
    }

    /// RP: a remote poll that found launch `tag` complete; BS: launch `tag`'s synchronous
    /// wait. The first one counts.
    pub fn completion(&mut self, tag: u32, slice: Slice) {
        self.completions.entry(tag).or_insert(slice);
    }

    /// RP/BS: launch `tag`'s result load.
    pub fn load(&mut self, tag: u32, slice: Slice) {
        self.loads.entry(tag).or_insert(slice);
    }

    /// The item that completed the chunk `[offset, end)` of launch `tag`: the last to end of
    /// those that wrote bytes of it. A launch's items write disjoint bytes (the firmware's
    /// result monitor refuses a byte counted twice), so sorted by offset their ends are
    /// sorted too.
    fn completing_item(&self, tag: u32, offset: u64, end: u64) -> Option<Slice> {
        let items = self.items.get(&tag)?;
        let from = items.partition_point(|item| item.end <= offset);
        items
            .get(from..)?
            .iter()
            .take_while(|item| item.start < end)
            .filter(|item| item.start < item.end)
            .max_by_key(|item| item.order)
            .map(|item| item.slice)
    }

    /// The poll whose batch held metadata index `sequence`.
    fn poll_of(&self, sequence: u64) -> Option<Slice> {
        let index = self
            .polls
            .partition_point(|&(first, records, _)| first.saturating_add(records) <= sequence);
        self.polls
            .get(index)
            .filter(|&&(first, _, _)| first <= sequence)
            .map(|&(_, _, slice)| slice)
    }

    /// Sorts the items of each launch by the offset of their bytes (after the last item).
    fn sort(&mut self) {
        for items in self.items.values_mut() {
            items.sort_by_key(|item| (item.start, item.order));
        }
    }
}

/// What a chain links, written as its events' arguments (`chrome://tracing` shows them with
/// the arrow): `{"record": sequence}` or `{"launch": tag}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Subject {
    /// A record, by sequence number (its chain, and each further reader's arrow).
    #[serde(rename = "record")]
    Record(u64),
    /// An RP or BS launch, by tag.
    #[serde(rename = "launch")]
    Launch(u32),
}

/// One chain of flow events: its name (also its category), id and the slices it links, each
/// with the timestamp of its flow event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flow {
    /// Name and category.
    pub name: &'static str,
    /// Id (unique in the trace).
    pub id: u64,
    /// What it links.
    pub subject: Subject,
    /// The linked slices with their event's timestamp (ns), in chain order: at least two.
    pub hops: Vec<(Slice, u64)>,
}

/// The chains of a run: one per record the DMA requests carried (`records`, AXLE modes) and
/// further readers' arrows, then one per RP/BS launch.
pub fn flows(mut anchors: Anchors, records: &[DmaRecord]) -> Vec<Flow> {
    anchors.sort();
    let mut flows = Vec::new();
    // Each launch's records by the offset of their bytes: (offset, end, sequence).
    let mut by_launch: BTreeMap<u32, Vec<(u64, u64, u64)>> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    let carried: Vec<&DmaRecord> = records
        .iter()
        .filter(|record| seen.insert(record.sequence))
        .collect();
    for record in &carried {
        let end = record
            .result_offset
            .saturating_add(u64::from(record.length));
        by_launch
            .entry(record.tag)
            .or_default()
            .push((record.result_offset, end, record.sequence));
    }
    for list in by_launch.values_mut() {
        list.sort_unstable();
    }
    // Readers of each record, in start order.
    let mut readers: BTreeMap<u64, Vec<Slice>> = BTreeMap::new();
    for task in &anchors.tasks {
        let (start, end) = task.needs;
        let Some(list) = by_launch.get(&task.tag) else {
            continue;
        };
        let from = list.partition_point(|&(_, record_end, _)| record_end <= start);
        for &(_, _, sequence) in list
            .get(from..)
            .unwrap_or_default()
            .iter()
            .take_while(|&&(offset, _, _)| offset < end)
        {
            readers.entry(sequence).or_default().push(task.slice);
        }
    }
    let mut further = FURTHER_READER_IDS;
    for record in carried {
        let end = record
            .result_offset
            .saturating_add(u64::from(record.length));
        let poll = anchors.poll_of(record.sequence);
        let tasks = readers.get(&record.sequence).map_or(&[][..], Vec::as_slice);
        let hops: Vec<(Slice, u64)> = [
            anchors
                .completing_item(record.tag, record.result_offset, end)
                .map(Slice::late),
            anchors
                .transfers
                .get(&record.request)
                .copied()
                .map(Slice::early),
            poll.map(Slice::early),
            tasks.first().copied().map(Slice::early),
        ]
        .into_iter()
        .flatten()
        .collect();
        if hops.len() >= 2 {
            flows.push(Flow {
                name: RECORD,
                id: record.sequence,
                subject: Subject::Record(record.sequence),
                hops,
            });
        }
        if let Some(poll) = poll {
            for &task in tasks.iter().skip(1) {
                flows.push(Flow {
                    name: FURTHER_READER,
                    id: further,
                    subject: Subject::Record(record.sequence),
                    hops: vec![poll.early(), task.early()],
                });
                further = further.saturating_add(1);
            }
        }
    }
    // RP and BS: per launch, its last item, what saw it complete, the load, the first task.
    for (&tag, &completion) in &anchors.completions {
        let last_item = anchors
            .items
            .get(&tag)
            .and_then(|items| items.iter().max_by_key(|item| item.order))
            .map(|item| item.slice.late());
        let first_task = anchors
            .tasks
            .iter()
            .find(|task| task.tag == tag)
            .map(|task| task.slice.early());
        let hops: Vec<(Slice, u64)> = [
            last_item,
            Some(completion.late()),
            anchors.loads.get(&tag).copied().map(Slice::early),
            first_task,
        ]
        .into_iter()
        .flatten()
        .collect();
        if hops.len() >= 2 {
            flows.push(Flow {
                name: LAUNCH,
                id: u64::from(tag),
                subject: Subject::Launch(tag),
                hops,
            });
        }
    }
    flows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(tid: u32, start: u64, end: u64) -> Slice {
        Slice::new(1, tid, Ticks::from_ns(start), Ticks::from_ns(end))
    }

    fn record(request: u64, sequence: u64, offset: u64, length: u32) -> DmaRecord {
        DmaRecord {
            request,
            sequence,
            tag: 1,
            result_offset: offset,
            length,
        }
    }

    #[test]
    fn a_record_links_its_last_item_its_request_its_poll_and_its_first_reader() {
        let mut anchors = Anchors::default();
        // Two items write the chunk [0, 8); the one at offset 4 ends last.
        anchors.item(1, 4, 4, slice(10, 0, 100));
        anchors.item(1, 0, 4, slice(11, 0, 120));
        anchors.item(1, 8, 8, slice(10, 100, 130));
        anchors.transfer(7, slice(100, 200, 900));
        anchors.poll(0, 2, slice(1000, 1000, 1100));
        anchors.task(1, (0, 16), slice(2000, 1100, 1500));
        anchors.task(1, (4, 6), slice(2001, 1100, 1400));
        let flows = flows(anchors, &[record(7, 0, 0, 8), record(7, 1, 8, 8)]);
        assert_eq!(
            flows[0],
            Flow {
                name: RECORD,
                id: 0,
                subject: Subject::Record(0),
                hops: vec![
                    (slice(11, 0, 120), 119),
                    (slice(100, 200, 900), 201),
                    (slice(1000, 1000, 1100), 1001),
                    (slice(2000, 1100, 1500), 1101),
                ],
            }
        );
        assert_eq!(flows[1].name, FURTHER_READER);
        assert_eq!(
            flows[1].hops,
            vec![
                (slice(1000, 1000, 1100), 1001),
                (slice(2001, 1100, 1400), 1101)
            ]
        );
        assert_eq!(flows[2].id, 1);
        assert_eq!(flows[2].hops[0].0, slice(10, 100, 130));
        assert_eq!(flows.len(), 3);
    }

    #[test]
    fn a_record_without_a_poll_ends_at_its_request() {
        let mut anchors = Anchors::default();
        anchors.item(1, 0, 8, slice(10, 0, 100));
        anchors.transfer(0, slice(100, 150, 300));
        let flows = flows(anchors, &[record(0, 5, 0, 8)]);
        assert_eq!(flows.len(), 1);
        assert_eq!(flows[0].hops.len(), 2);
    }
}
