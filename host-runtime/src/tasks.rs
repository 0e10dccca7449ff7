//! Which host task depends on which result bytes, and which payload slot may be freed when.
//!
//! The result space of a launch is cut into chunks of the payload slot size (AXLE streams one
//! chunk per payload). A task is ready once every chunk overlapping its byte range has
//! arrived; a chunk's payload slot is consumed once every task overlapping it has finished.

use crate::app::HostTask;
use std::collections::BTreeMap;
use std::ops::Range;

/// A protocol or plan violation found while tracking a launch.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TrackError {
    /// A record named bytes outside the result space or not on a chunk boundary.
    #[error("record names result bytes {offset}..+{length} that are not a chunk of the {result_length}-byte result")]
    BadRange {
        /// Offset.
        offset: u64,
        /// Length.
        length: u64,
        /// The result's length.
        result_length: u64,
    },
    /// The same chunk arrived twice.
    #[error("result chunk at offset {offset} arrived twice")]
    Duplicate {
        /// Offset.
        offset: u64,
    },
    /// A chunk arrived in a payload whose index no ring reaches (2^64 - 1).
    #[error("result chunk at offset {offset} arrived in payload index {index}")]
    PayloadIndex {
        /// Offset.
        offset: u64,
        /// The payload index.
        index: u64,
    },
    /// A task's range lies outside the result.
    #[error("host task {task} needs bytes {range:?} outside the {result_length}-byte result")]
    TaskOutOfRange {
        /// Task.
        task: u32,
        /// Its range.
        range: Range<u64>,
        /// The result's length.
        result_length: u64,
    },
    /// The tasks, or the entries of the lists of chunks read by several tasks, are too many
    /// for the tracker's 31-bit indexes.
    #[error("{entries} tracker entries (tasks, or readers of shared chunks) exceed the limit of {limit}")]
    TooManyEntries {
        /// Tasks, or list entries.
        entries: u64,
        /// The limit.
        limit: u64,
    },
}

/// Dependency state of one launch.
#[derive(Debug)]
pub struct LaunchTracker {
    tasks: Vec<HostTask>,
    result_length: u64,
    chunk_bytes: u64,
    /// `log2(chunk_bytes)` when it is a power of two (a slot's size always is in practice),
    /// [`NO_SHIFT`] otherwise: a record's chunk is then found with a shift, not a division.
    chunk_shift: u32,
    /// Bytes each task still waits for.
    missing: Vec<u64>,
    /// One entry per chunk (what a record touches, together: a chunk's arrival reads and
    /// writes one entry, and the entry names its reader when it has one).
    chunks: Vec<Chunk>,
    /// Per chunk, the tasks overlapping it that have not finished (read when a task
    /// finishes; when a chunk arrives only if a task finished before it was ready).
    readers: Vec<u32>,
    /// The payload indexes of the chunks that arrived, as [`Chunk::payload`] keeps them.
    payloads: PayloadIndexes,
    /// A task finished while bytes it reads had not arrived (not in a run: a task runs once
    /// ready), so an arriving chunk's readers may be fewer than the tasks overlapping it.
    finished_early: bool,
    /// The readers of the chunks that several tasks read: at a chunk's
    /// [`Chunk::reader`] (without [`LIST`]), their count, then the tasks, in task order.
    chunk_task_list: Vec<u32>,
    /// Chunks arrived so far.
    arrived: usize,
    finished: usize,
}

/// What the tracker keeps of one chunk (8 bytes, eight to a cache line).
#[derive(Clone, Copy, Debug)]
struct Chunk {
    /// The payload index holding the chunk (AXLE), [`PayloadIndexes`]' way:
    /// [`STORED_NOT_ARRIVED`] before it arrives.
    payload: u32,
    /// The tasks overlapping the chunk: the task itself when there is one, [`NO_READERS`]
    /// when there is none, else [`LIST`] with the position of their count in
    /// `LaunchTracker::chunk_task_list` (a chunk read by one task, the commonest, reads no
    /// list when it arrives).
    reader: u32,
}

/// [`Chunk::payload`] of a chunk that has not arrived.
const STORED_NOT_ARRIVED: u32 = u32::MAX;

/// [`Chunk::payload`] of a chunk whose payload index is kept in [`PayloadIndexes::far`].
const STORED_FAR: u32 = u32::MAX - 1;

/// How far below the first payload index of a launch its base lies. In a run, a launch's
/// payload indexes lie within its chunk count plus a ring's capacity of each other, far less
/// than 2^31, so each is kept in its chunk's entry; the side table holds any other.
const BASE_LEAD: u64 = 1 << 31;

/// The payload indexes of a launch's chunks: each kept in its chunk's entry as its distance
/// from a base (set at the first arrival), or, if it does not fit in 32 bits, in a side table.
#[derive(Debug, Default)]
struct PayloadIndexes {
    base: Option<u64>,
    /// The payload indexes too far from the base, by chunk.
    far: BTreeMap<usize, u64>,
}

impl PayloadIndexes {
    /// What chunk `chunk`'s entry keeps of `index`.
    #[inline]
    fn store(&mut self, chunk: usize, index: u64) -> u32 {
        let base = *self.base.get_or_insert(index.saturating_sub(BASE_LEAD));
        match index
            .checked_sub(base)
            .and_then(|distance| u32::try_from(distance).ok())
        {
            Some(distance) if distance < STORED_FAR => distance,
            _ => {
                self.far.insert(chunk, index);
                STORED_FAR
            }
        }
    }

    /// The payload index that chunk `chunk`'s entry keeps as `stored` (`None`: not arrived).
    #[inline]
    fn index(&self, chunk: usize, stored: u32) -> Option<u64> {
        match stored {
            STORED_NOT_ARRIVED => None,
            STORED_FAR => self.far.get(&chunk).copied(),
            distance => self.base.map(|base| base + u64::from(distance)),
        }
    }
}

/// [`Chunk::reader`] of a chunk no task reads.
const NO_READERS: u32 = u32::MAX;

/// The bit of [`Chunk::reader`] that marks a position in `LaunchTracker::chunk_task_list`;
/// task indexes and list positions stay below it.
const LIST: u32 = 1 << 31;

/// A payload index no record arrives in (indexes count records from 0, and the ring would
/// need 2^64 of them): refused.
const NOT_ARRIVED: u64 = u64::MAX;

/// [`LaunchTracker::chunk_shift`] of a chunk size that is not a power of two.
const NO_SHIFT: u32 = u64::BITS;

impl LaunchTracker {
    /// Tracks `tasks` over a result of `result_length` bytes cut into `chunk_bytes` chunks.
    pub fn new(
        tasks: Vec<HostTask>,
        result_length: u64,
        chunk_bytes: u64,
    ) -> Result<LaunchTracker, TrackError> {
        let chunk_bytes = chunk_bytes.max(1);
        // The launch's result lives in device memory (bounded by the device configuration),
        // so its chunks are bounded too; saturating so that no size can overflow here.
        let count = usize::try_from(result_length.div_ceil(chunk_bytes)).unwrap_or(usize::MAX);
        for task in &tasks {
            if task.needs.start > task.needs.end || task.needs.end > result_length {
                return Err(TrackError::TaskOutOfRange {
                    task: task.id,
                    range: task.needs.clone(),
                    result_length,
                });
            }
        }
        if tasks.len() >= LIST as usize {
            return Err(TrackError::TooManyEntries {
                entries: tasks.len() as u64,
                limit: u64::from(LIST - 1),
            });
        }
        // One pass over the chunks, in order: the tasks, by the chunk their range starts in
        // (task order among equals), join the readers there and leave after their last chunk.
        let spans: Vec<Range<u64>> = tasks
            .iter()
            .map(|task| chunk_span(&task.needs, chunk_bytes))
            .collect();
        let mut order: Vec<u32> = (0..tasks.len() as u32)
            .filter(|&task| !spans[task as usize].is_empty())
            .collect();
        order.sort_by_key(|&task| spans[task as usize].start);
        let mut joining = order.iter().peekable();
        // The tasks reading the current chunk, in task order, with the chunk they end before.
        let mut active: Vec<(u32, u64)> = Vec::new();
        let mut chunks = Vec::with_capacity(count);
        let mut readers = Vec::with_capacity(count);
        let mut list = Vec::new();
        let count = count as u64;
        let mut chunk = 0;
        while chunk < count {
            active.retain(|&(_, end)| end > chunk);
            while let Some(&&task) = joining.peek() {
                let span = &spans[task as usize];
                if span.start != chunk {
                    break;
                }
                let at = active.partition_point(|&(other, _)| other < task);
                active.insert(at, (task, span.end));
                joining.next();
            }
            // The readers stay the same up to the next chunk where one leaves or one joins
            // (a run of chunks that share them, and their list).
            let until = active
                .iter()
                .map(|&(_, end)| end)
                .chain(joining.peek().map(|&&task| spans[task as usize].start))
                .fold(count, u64::min);
            let reader = match active.as_slice() {
                [] => NO_READERS,
                &[(task, _)] => task,
                several => {
                    let at = list.len();
                    if at + several.len() >= LIST as usize {
                        return Err(TrackError::TooManyEntries {
                            entries: (at + several.len() + 1) as u64,
                            limit: u64::from(LIST - 1),
                        });
                    }
                    list.push(several.len() as u32);
                    list.extend(several.iter().map(|&(task, _)| task));
                    LIST | at as u32
                }
            };
            let entry = Chunk {
                payload: STORED_NOT_ARRIVED,
                reader,
            };
            // Past the chunk (every task's span ends after it, the next one starts after it).
            let until = until.max(chunk + 1);
            chunks.resize(until as usize, entry);
            readers.resize(until as usize, active.len() as u32);
            chunk = until;
        }
        let missing = tasks.iter().map(|t| t.needs.end - t.needs.start).collect();
        Ok(LaunchTracker {
            tasks,
            result_length,
            chunk_bytes,
            chunk_shift: if chunk_bytes.is_power_of_two() {
                chunk_bytes.trailing_zeros()
            } else {
                NO_SHIFT
            },
            missing,
            chunks,
            readers,
            payloads: PayloadIndexes::default(),
            finished_early: false,
            chunk_task_list: list,
            arrived: 0,
            finished: 0,
        })
    }

    /// The chunk holding result byte `offset`.
    #[inline]
    fn chunk_of(&self, offset: u64) -> u64 {
        if self.chunk_shift < NO_SHIFT {
            offset >> self.chunk_shift
        } else {
            offset / self.chunk_bytes
        }
    }

    /// Chunks in the result.
    fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// The tasks.
    pub fn tasks(&self) -> &[HostTask] {
        &self.tasks
    }

    /// Tasks whose range is empty (ready at once).
    pub fn initially_ready(&self) -> Vec<u32> {
        (0..self.tasks.len() as u32)
            .filter(|&t| self.missing[t as usize] == 0)
            .collect()
    }

    /// Every chunk arrives at once (RP, BS): returns all tasks, ready.
    pub fn arrive_all(&mut self) -> Vec<u32> {
        for missing in &mut self.missing {
            *missing = 0;
        }
        self.arrived = self.chunk_count();
        (0..self.tasks.len() as u32).collect()
    }

    /// The chunk at `offset` (`length` bytes) arrived in payload `payload_index`. Appends the
    /// tasks that became ready to `ready`, and returns whether no task reads the chunk (its
    /// slot may be freed at once).
    #[inline]
    pub fn arrive(
        &mut self,
        offset: u64,
        length: u64,
        payload_index: u64,
        ready: &mut Vec<u32>,
    ) -> Result<bool, TrackError> {
        // The chunk, and whether the offset is its start.
        let chunk = self.chunk_of(offset);
        if chunk * self.chunk_bytes != offset
            || offset >= self.result_length
            || length != (self.result_length - offset).min(self.chunk_bytes)
        {
            return Err(TrackError::BadRange {
                offset,
                length,
                result_length: self.result_length,
            });
        }
        // Below the chunk count (`offset` is inside the result), a usize.
        let chunk = chunk as usize;
        let Some(state) = self.chunks.get_mut(chunk) else {
            return Err(TrackError::BadRange {
                offset,
                length,
                result_length: self.result_length,
            });
        };
        if state.payload != STORED_NOT_ARRIVED {
            return Err(TrackError::Duplicate { offset });
        }
        if payload_index == NOT_ARRIVED {
            return Err(TrackError::PayloadIndex {
                offset,
                index: payload_index,
            });
        }
        state.payload = self.payloads.store(chunk, payload_index);
        let reader = state.reader;
        // No reader has finished before its chunks arrived: the chunk's readers are all the
        // tasks overlapping it, none when it names none.
        let unread = if self.finished_early {
            self.readers.get(chunk).is_none_or(|&readers| readers == 0)
        } else {
            reader == NO_READERS
        };
        self.arrived += 1;
        let end = offset + length;
        match reader {
            NO_READERS => {}
            // One reader (a task's own chunk, the commonest): named by the chunk itself.
            task if task & LIST == 0 => {
                reader_arrived(&self.tasks, &mut self.missing, task, offset..end, ready);
            }
            list => {
                // The chunk's readers, borrowed by field so that `missing` can change while
                // they are read.
                let at = (list & !LIST) as usize;
                let count = self
                    .chunk_task_list
                    .get(at)
                    .map_or(0, |&count| count as usize);
                let readers = self
                    .chunk_task_list
                    .get(at + 1..at + 1 + count)
                    .unwrap_or_default();
                for &task in readers {
                    reader_arrived(&self.tasks, &mut self.missing, task, offset..end, ready);
                }
            }
        }
        Ok(unread)
    }

    /// Hints the CPU to fetch what [`LaunchTracker::arrive`] of the chunk at `offset` will
    /// touch first (its entry of the chunk table), for a batch whose records are known ahead.
    /// Changes nothing.
    #[inline]
    pub fn prefetch_arrival(&self, offset: u64) {
        if let Some(chunk) = usize::try_from(self.chunk_of(offset))
            .ok()
            .and_then(|chunk| self.chunks.get(chunk))
        {
            cosim_link::sync::prefetch(chunk);
        }
    }

    /// The chunks (offset, length, payload index) a task reads, in offset order (no payload
    /// index for a chunk that has not arrived).
    pub fn chunks_of(
        &self,
        task: u32,
    ) -> impl ExactSizeIterator<Item = (u64, u64, Option<u64>)> + '_ {
        let span = chunk_span(&self.tasks[task as usize].needs, self.chunk_bytes);
        // At most the chunk count (the task's range lies in the result), a usize.
        let count = usize::try_from(span.end - span.start).unwrap_or(0);
        (0..count).map(move |step| {
            let chunk = span.start + step as u64;
            let offset = chunk * self.chunk_bytes;
            let length = (self.result_length - offset).min(self.chunk_bytes);
            let payload = usize::try_from(chunk).ok().and_then(|chunk| {
                self.chunks
                    .get(chunk)
                    .and_then(|entry| self.payloads.index(chunk, entry.payload))
            });
            (offset, length, payload)
        })
    }

    /// Task `task` finished: returns the payload indexes no task reads any more.
    pub fn finish(&mut self, task: u32) -> Vec<u64> {
        let mut freed = Vec::new();
        self.finish_into(task, &mut freed);
        freed
    }

    /// [`LaunchTracker::finish`] into `freed` (cleared first; its storage is reused from task
    /// to task).
    pub fn finish_into(&mut self, task: u32, freed: &mut Vec<u64>) {
        freed.clear();
        self.finished += 1;
        let needs = self.tasks[task as usize].needs.clone();
        if self
            .missing
            .get(task as usize)
            .is_some_and(|&missing| missing > 0)
        {
            self.finished_early = true;
        }
        let span = chunk_span(&needs, self.chunk_bytes);
        // The task's chunks, inside the result (its range lies in it).
        let range = span.start as usize..span.end as usize;
        let (Some(chunks), Some(readers)) =
            (self.chunks.get(range.clone()), self.readers.get_mut(range))
        else {
            return;
        };
        for (chunk, (entry, readers)) in (span.start as usize..).zip(chunks.iter().zip(readers)) {
            *readers = readers.saturating_sub(1);
            if *readers == 0 {
                if let Some(payload) = self.payloads.index(chunk, entry.payload) {
                    freed.push(payload);
                }
            }
        }
    }

    /// Whether every chunk of the result has arrived (every host task has been triggered or
    /// can be: the paper's implicit completion detection).
    pub fn all_arrived(&self) -> bool {
        self.arrived >= self.chunk_count()
    }

    /// The tasks still waiting for bytes of the result.
    pub fn waiting_for_bytes(&self) -> impl Iterator<Item = u32> + '_ {
        self.missing
            .iter()
            .enumerate()
            .filter(|(_, missing)| **missing > 0)
            .map(|(task, _)| task as u32)
    }

    /// Chunks of the result arrived so far, and chunks in all.
    pub fn progress(&self) -> (u64, u64) {
        (self.arrived as u64, self.chunk_count() as u64)
    }

    /// Whether every task finished.
    pub fn all_finished(&self) -> bool {
        self.finished >= self.tasks.len()
    }

    /// Tasks still waiting for bytes, and how many bytes they miss in all (for diagnoses).
    pub fn starving(&self) -> (usize, u64) {
        let waiting: Vec<&u64> = self.missing.iter().filter(|m| **m > 0).collect();
        (waiting.len(), waiting.into_iter().sum())
    }
}

/// Task `task`, a reader of the chunk of result bytes `bytes` that arrived, misses those bytes
/// of its range no more; appended to `ready` when that was the last it missed.
#[inline(always)]
fn reader_arrived(
    tasks: &[HostTask],
    missing: &mut [u64],
    task: u32,
    bytes: Range<u64>,
    ready: &mut Vec<u32>,
) {
    let (Some(spec), Some(missing)) = (tasks.get(task as usize), missing.get_mut(task as usize))
    else {
        return;
    };
    let overlap = spec
        .needs
        .end
        .min(bytes.end)
        .saturating_sub(spec.needs.start.max(bytes.start));
    *missing -= overlap.min(*missing);
    if *missing == 0 && overlap > 0 {
        ready.push(task);
    }
}

fn chunk_span(range: &Range<u64>, chunk_bytes: u64) -> Range<u64> {
    let first = range.start / chunk_bytes;
    let end = if range.end > range.start {
        range.end.div_ceil(chunk_bytes)
    } else {
        first
    };
    first..end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: u32, needs: Range<u64>) -> HostTask {
        HostTask {
            id,
            needs,
            chain: None,
        }
    }

    #[test]
    fn task_is_ready_only_when_every_chunk_it_needs_arrived() {
        let mut tracker =
            LaunchTracker::new(vec![task(0, 0..64), task(1, 64..96)], 96, 32).unwrap();
        let mut ready = Vec::new();
        tracker.arrive(32, 32, 0, &mut ready).unwrap();
        assert!(ready.is_empty());
        tracker.arrive(64, 32, 1, &mut ready).unwrap();
        assert_eq!(ready, vec![1]);
        ready.clear();
        tracker.arrive(0, 32, 2, &mut ready).unwrap();
        assert_eq!(ready, vec![0]);
    }

    #[test]
    fn slot_is_freed_when_its_last_reader_finishes() {
        let mut tracker =
            LaunchTracker::new(vec![task(0, 0..48), task(1, 16..64)], 64, 32).unwrap();
        let mut ready = Vec::new();
        assert!(!tracker.arrive(0, 32, 10, &mut ready).unwrap());
        assert!(!tracker.arrive(32, 32, 11, &mut ready).unwrap());
        // Chunk 0 is read by both tasks, chunk 1 only by task 1.
        assert_eq!(tracker.finish(0), Vec::<u64>::new());
        assert_eq!(tracker.finish(1), vec![10, 11]);
        assert!(tracker.all_finished());
    }

    /// A chunk size that is not a power of two finds its chunks by division: the same
    /// readiness, frees and refusals.
    #[test]
    fn chunks_of_a_size_that_is_no_power_of_two() {
        let mut tracker =
            LaunchTracker::new(vec![task(0, 0..48), task(1, 40..100)], 100, 24).unwrap();
        let mut ready = Vec::new();
        assert!(matches!(
            tracker.arrive(32, 24, 0, &mut ready),
            Err(TrackError::BadRange { .. })
        ));
        assert!(!tracker.arrive(24, 24, 0, &mut ready).unwrap());
        assert!(!tracker.arrive(0, 24, 1, &mut ready).unwrap());
        assert_eq!(ready, vec![0]);
        ready.clear();
        // The last chunk is short (100 = 4 * 24 + 4).
        assert!(!tracker.arrive(96, 4, 2, &mut ready).unwrap());
        assert!(!tracker.arrive(48, 24, 3, &mut ready).unwrap());
        assert!(ready.is_empty());
        assert!(!tracker.arrive(72, 24, 4, &mut ready).unwrap());
        assert_eq!(ready, vec![1]);
        assert_eq!(tracker.finish(0), vec![1]);
        assert_eq!(tracker.finish(1), vec![0, 3, 4, 2]);
    }

    /// Tasks given in any order of their ranges: a chunk several tasks read makes them ready
    /// in task order, a chunk no task reads is unread, and an empty range reads nothing.
    #[test]
    fn shared_chunks_list_their_readers_in_task_order() {
        let tasks = vec![
            task(0, 64..128),
            task(1, 0..96),
            task(2, 40..70),
            task(3, 10..10),
        ];
        let mut tracker = LaunchTracker::new(tasks, 160, 32).unwrap();
        assert_eq!(tracker.initially_ready(), vec![3]);
        let mut ready = Vec::new();
        assert!(!tracker.arrive(0, 32, 0, &mut ready).unwrap());
        assert!(!tracker.arrive(32, 32, 1, &mut ready).unwrap());
        assert!(!tracker.arrive(96, 32, 2, &mut ready).unwrap());
        assert!(tracker.arrive(128, 32, 3, &mut ready).unwrap());
        assert!(ready.is_empty());
        assert!(!tracker.arrive(64, 32, 4, &mut ready).unwrap());
        assert_eq!(ready, vec![0, 1, 2]);
        assert!(tracker.all_arrived());
        assert_eq!(tracker.finish(2), Vec::<u64>::new());
        assert_eq!(tracker.finish(1), vec![0, 1]);
        assert_eq!(tracker.finish(0), vec![4, 2]);
    }

    /// Each chunk names the tasks whose range overlaps it, in task order, however the ranges
    /// lie (pseudo-random ranges, overlapping, nested, empty, out of order).
    #[test]
    fn every_chunk_names_its_readers() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move |below: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % below
        };
        for round in 0..50 {
            let result_length = 1 + next(400);
            let chunk_bytes = [8, 24, 32][round % 3];
            let tasks: Vec<HostTask> = (0..next(12) as u32)
                .map(|id| {
                    let start = next(result_length + 1);
                    let end = start + next(result_length - start + 1);
                    task(id, start..end)
                })
                .collect();
            let tracker = LaunchTracker::new(tasks.clone(), result_length, chunk_bytes).unwrap();
            assert_eq!(
                tracker.chunks.len() as u64,
                result_length.div_ceil(chunk_bytes)
            );
            for (index, chunk) in tracker.chunks.iter().enumerate() {
                let expected: Vec<u32> = (0..tasks.len() as u32)
                    .filter(|&t| {
                        chunk_span(&tasks[t as usize].needs, chunk_bytes).contains(&(index as u64))
                    })
                    .collect();
                let named = match chunk.reader {
                    NO_READERS => Vec::new(),
                    task if task & LIST == 0 => vec![task],
                    list => {
                        let at = (list & !LIST) as usize;
                        let count = tracker.chunk_task_list[at] as usize;
                        tracker.chunk_task_list[at + 1..at + 1 + count].to_vec()
                    }
                };
                assert_eq!(named, expected, "round {round} chunk {index}");
                assert_eq!(tracker.readers[index] as usize, expected.len());
            }
        }
    }

    /// Payload indexes far apart (beyond 32 bits of each other) come back exact.
    #[test]
    fn payload_indexes_far_apart_come_back_exact() {
        let tasks = vec![task(0, 0..96)];
        let mut tracker = LaunchTracker::new(tasks, 96, 32).unwrap();
        let ready = &mut Vec::new();
        let far = [5_000_000_000, 7, u64::MAX - 1];
        for (chunk, &index) in far.iter().enumerate() {
            tracker.arrive(chunk as u64 * 32, 32, index, ready).unwrap();
        }
        let indexes: Vec<Option<u64>> = tracker.chunks_of(0).map(|(_, _, index)| index).collect();
        assert_eq!(indexes, far.map(Some));
        assert_eq!(tracker.finish(0), far);
    }

    /// A task that finishes before its chunks arrive (no run does this) leaves them unread.
    #[test]
    fn a_chunk_whose_readers_all_finished_is_unread() {
        let mut tracker = LaunchTracker::new(vec![task(0, 0..64)], 64, 32).unwrap();
        let ready = &mut Vec::new();
        assert!(!tracker.arrive(0, 32, 0, ready).unwrap());
        assert_eq!(tracker.finish(0), vec![0]);
        assert!(tracker.arrive(32, 32, 1, ready).unwrap());
    }

    #[test]
    fn duplicate_and_misaligned_records_are_rejected() {
        let mut tracker = LaunchTracker::new(vec![task(0, 0..64)], 64, 32).unwrap();
        let ready = &mut Vec::new();
        tracker.arrive(0, 32, 0, ready).unwrap();
        assert!(matches!(
            tracker.arrive(0, 32, 1, ready),
            Err(TrackError::Duplicate { .. })
        ));
        assert!(matches!(
            tracker.arrive(16, 32, 1, ready),
            Err(TrackError::BadRange { .. })
        ));
        assert!(matches!(
            tracker.arrive(32, 16, 1, ready),
            Err(TrackError::BadRange { .. })
        ));
        assert!(matches!(
            tracker.arrive(64, 32, 1, ready),
            Err(TrackError::BadRange { .. })
        ));
    }
}
