//! The registers double: host events in, mailbox writes, bulk completions and interrupts out.

use super::*;

/// A bulk-synchronous launch response the firmware sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkCompletion {
    /// The launch tag.
    pub tag: u32,
    /// Its status.
    pub status: Status,
}

/// Registers: host events queued by the test, and everything the firmware signalled back.
#[derive(Debug, Default)]
pub struct FakeRegisters {
    pub(super) events: VecDeque<HostEvent>,
    pub(super) mailbox: BTreeMap<u64, u64>,
    pub(super) mailbox_writes: Vec<(u64, u64)>,
    pub(super) bulk_completions: Vec<BulkCompletion>,
    pub(super) interrupts: Vec<u64>,
}

impl FakeRegisters {
    /// Queues a host event.
    pub fn push_event(&mut self, event: HostEvent) {
        self.events.push_back(event);
    }

    /// Host events not taken yet.
    pub fn pending_events(&self) -> usize {
        self.events.len()
    }

    /// The current value of a mailbox register (0 if never written).
    pub fn mailbox(&self, offset: u64) -> u64 {
        self.mailbox.get(&offset).copied().unwrap_or(0)
    }

    /// Every mailbox write, oldest first: `(offset, value)`.
    pub fn mailbox_writes(&self) -> &[(u64, u64)] {
        &self.mailbox_writes
    }

    /// Every bulk completion, oldest first.
    pub fn bulk_completions(&self) -> &[BulkCompletion] {
        &self.bulk_completions
    }

    /// Every interrupt message, oldest first.
    pub fn interrupts(&self) -> &[u64] {
        &self.interrupts
    }
}

impl Registers for FakeRegisters {
    fn take_event(&mut self) -> Option<HostEvent> {
        self.events.pop_front()
    }

    fn write_mailbox(&mut self, offset: u64, value: u64) {
        self.mailbox.insert(offset, value);
        self.mailbox_writes.push((offset, value));
    }

    fn complete_bulk_launch(&mut self, tag: u32, status: Status) {
        self.bulk_completions.push(BulkCompletion { tag, status });
    }

    fn raise_interrupt(&mut self, message: u64) {
        self.interrupts.push(message);
    }
}
