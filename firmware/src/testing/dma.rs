//! The DMA engine double, and the decoding of a request's descriptor chain into the writes
//! it would put on the wire.

use super::*;

/// One decoded DMA descriptor with the bytes it would put on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DmaWrite {
    /// What the descriptor says it is.
    pub kind: DmaKind,
    /// Device address of the bytes.
    pub source: DeviceAddress,
    /// Host physical address they go to.
    pub destination: HostPhysAddr,
    /// The descriptor's trace index (payload or metadata index, tail value, status code).
    pub index: u64,
    /// The bytes at `source` when the request was submitted (`length` of them).
    pub bytes: Vec<u8>,
}

impl DmaWrite {
    /// The first 8 bytes as a little-endian word: the value a publishing write stores.
    pub fn value(&self) -> u64 {
        let mut word = [0u8; 8];
        let n = self.bytes.len().min(8);
        word[..n].copy_from_slice(&self.bytes[..n]);
        u64::from_le_bytes(word)
    }

    /// The metadata record a [`DmaKind::Metadata`] write carries.
    pub fn record(&self) -> Option<MetadataRecord> {
        (self.kind == DmaKind::Metadata)
            .then(|| MetadataRecord::read_from_bytes(&self.bytes).ok())
            .flatten()
    }
}

/// Why a submitted chain could not be decoded (what a real engine would reject).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainError {
    /// Descriptor `offset` of the request lies outside device memory.
    DescriptorUnreadable {
        /// Position in the chain.
        offset: u32,
    },
    /// Descriptor `offset` has an unknown kind.
    UnknownKind {
        /// Position in the chain.
        offset: u32,
        /// The kind word.
        kind: u32,
    },
    /// Descriptor `offset` reads bytes outside device memory.
    SourceOutsideMemory {
        /// Position in the chain.
        offset: u32,
        /// The descriptor.
        descriptor: DmaDescriptor,
    },
}

/// Decodes `request`'s chain from `memory`: descriptor `i` at `ring_base + ((first + i) %
/// ring_capacity) * 32`, and the bytes each one names.
pub fn decode_request<M: DeviceMemory>(
    memory: &M,
    request: &DmaRequest,
) -> Result<Vec<DmaWrite>, ChainError> {
    let mut writes = Vec::new();
    for offset in 0..request.count {
        let address = ScratchLayout::cell(
            request.ring_base,
            request.first.wrapping_add(u64::from(offset)),
            request.ring_capacity,
            32,
        );
        let descriptor: DmaDescriptor = memory
            .read_value(address)
            .map_err(|_| ChainError::DescriptorUnreadable { offset })?;
        let kind = DmaKind::try_from(descriptor.kind).map_err(|_| ChainError::UnknownKind {
            offset,
            kind: descriptor.kind,
        })?;
        let mut bytes = std::vec![0; descriptor.length as usize];
        memory
            .read(DeviceAddress(descriptor.source), &mut bytes)
            .map_err(|_| ChainError::SourceOutsideMemory { offset, descriptor })?;
        writes.push(DmaWrite {
            kind,
            source: DeviceAddress(descriptor.source),
            destination: HostPhysAddr(descriptor.destination),
            index: descriptor.index,
            bytes,
        });
    }
    Ok(writes)
}

/// A request the firmware submitted, decoded at submission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubmittedRequest {
    /// The tag the engine gave it.
    pub tag: DmaTag,
    /// The request as submitted.
    pub request: DmaRequest,
    /// When.
    pub submitted_at: Ticks,
    /// Its chain, or why it cannot be decoded.
    pub chain: Result<Vec<DmaWrite>, ChainError>,
    /// Whether the test completed it (and with which status).
    pub completed: Option<Status>,
}

impl SubmittedRequest {
    /// The decoded chain; panics (failing the test) when it could not be decoded.
    pub fn writes(&self) -> &[DmaWrite] {
        match &self.chain {
            Ok(writes) => writes,
            Err(error) => panic!("request {:?} has an undecodable chain: {error:?}", self.tag),
        }
    }

    /// The writes of one kind, in chain order.
    pub fn writes_of(&self, kind: DmaKind) -> impl Iterator<Item = &DmaWrite> {
        self.writes().iter().filter(move |write| write.kind == kind)
    }

    /// The metadata records the request carries, in chain order.
    pub fn records(&self) -> Vec<MetadataRecord> {
        self.writes().iter().filter_map(DmaWrite::record).collect()
    }

    /// The value of the last metadata-tail write (edge D4), if any.
    pub fn published_metadata_tail(&self) -> Option<u64> {
        self.writes_of(DmaKind::MetadataTail)
            .last()
            .map(DmaWrite::value)
    }
}

/// The DMA engine's state: every submitted request (history) and the ones not completed yet.
#[derive(Debug, Default)]
pub struct FakeDmaEngine {
    pub(super) next_tag: u64,
    pub(super) submitted: Vec<SubmittedRequest>,
    pub(super) outstanding: VecDeque<usize>,
    pub(super) completions: VecDeque<DmaCompletion>,
    pub(super) refuse_next: u32,
    pub(super) queue_depth: Option<usize>,
    pub(super) refusals: u64,
}

impl FakeDmaEngine {
    /// Every request submitted so far, oldest first.
    pub fn submitted(&self) -> &[SubmittedRequest] {
        &self.submitted
    }

    /// Requests submitted but not completed by the test.
    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }

    /// Answers the next `count` submissions with [`DmaError::QueueFull`].
    pub fn refuse_next(&mut self, count: u32) {
        self.refuse_next = count;
    }

    /// Answers [`DmaError::QueueFull`] while `depth` requests are outstanding (`None`:
    /// unlimited): an engine of `depth` channels and no queue beyond them, like the
    /// emulator's.
    pub fn set_queue_depth(&mut self, depth: Option<usize>) {
        self.queue_depth = depth;
    }

    /// Submissions answered with [`DmaError::QueueFull`] so far.
    pub fn refusals(&self) -> u64 {
        self.refusals
    }

    /// Every write of every submitted request, in submission and chain order.
    pub fn all_writes(&self) -> Vec<DmaWrite> {
        self.submitted
            .iter()
            .flat_map(|request| request.writes().iter().cloned())
            .collect()
    }

    /// The requests that carry payloads (everything but device-status publications).
    pub fn payload_requests(&self) -> Vec<&SubmittedRequest> {
        self.submitted
            .iter()
            .filter(|request| request.request.payloads > 0)
            .collect()
    }
}
