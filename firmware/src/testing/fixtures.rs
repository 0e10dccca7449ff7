//! Ready-made launches: a small KNN launch with known results, and an AXLE streaming bench.

use super::*;

/// A KNN distance launch laid out in device data memory, with inputs whose every distance is
/// different, so each result byte tells where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnnLaunch {
    /// Database vectors.
    pub rows: u32,
    /// Elements per vector (a multiple of 16).
    pub dim: u32,
    /// Query vectors.
    pub queries: u32,
    /// Device address of the database.
    pub database: DeviceAddress,
    /// Device address of the queries.
    pub query_vectors: DeviceAddress,
    /// Device address of the result space.
    pub result: DeviceAddress,
}

impl KnnLaunch {
    /// A launch whose database starts at [`device_map::DATA_BASE`], followed by the queries
    /// and then (page-aligned) the result space.
    pub fn new(rows: u32, dim: u32, queries: u32) -> KnnLaunch {
        let vector = u64::from(dim) * 4;
        let database = device_map::DATA_BASE;
        let query_vectors = DeviceAddress(database.0 + vector * u64::from(rows));
        let inputs_end = query_vectors.0 + vector * u64::from(queries);
        let result = DeviceAddress(inputs_end.div_ceil(4096) * 4096);
        KnnLaunch {
            rows,
            dim,
            queries,
            database,
            query_vectors,
            result,
        }
    }

    /// The same launch with its result space at `result`.
    pub fn with_result_at(self, result: DeviceAddress) -> KnnLaunch {
        KnnLaunch { result, ..self }
    }

    /// Work items (one per (query, row)).
    pub fn items(&self) -> u32 {
        self.rows * self.queries
    }

    /// Bytes of result (4 per item).
    pub fn result_length(&self) -> u64 {
        u64::from(self.items()) * 4
    }

    /// Slot-sized chunks of the result space.
    pub fn chunks(&self, slot_size: u32) -> u32 {
        self.result_length().div_ceil(u64::from(slot_size)) as u32
    }

    /// The items whose results lie in chunk `chunk` (slot size a multiple of 4).
    pub fn items_in_chunk(&self, chunk: u32, slot_size: u32) -> Range<u32> {
        let per_chunk = slot_size / 4;
        let start = chunk * per_chunk;
        start.min(self.items())..(start + per_chunk).min(self.items())
    }

    /// The command for this launch.
    pub fn command(&self, mode: LaunchMode, tag: u32) -> CommandDescriptor {
        CommandDescriptor {
            kernel: KernelId::KnnDistance as u32,
            mode: mode as u32,
            tag,
            flags: 0,
            result_address: self.result.0,
            result_length: self.result_length(),
            args: [
                self.database.0,
                self.query_vectors.0,
                knn::pack_shape(self.rows, self.dim),
                u64::from(self.queries),
            ],
        }
    }

    fn database_vector(&self, row: u32) -> Vec<f32> {
        (0..self.dim)
            .map(|j| row as f32 + 0.25 * j as f32 / self.dim as f32)
            .collect()
    }

    fn query_vector(&self, query: u32) -> Vec<f32> {
        (0..self.dim)
            .map(|j| -0.5 * query as f32 - (j % 3) as f32)
            .collect()
    }

    /// Writes the inputs into device memory.
    pub fn write_inputs(&self, memory: &mut FakeDeviceMemory) {
        let vector = u64::from(self.dim) * 4;
        for row in 0..self.rows {
            let bytes: Vec<u8> = self
                .database_vector(row)
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect();
            memory
                .write(
                    DeviceAddress(self.database.0 + vector * u64::from(row)),
                    &bytes,
                )
                .unwrap();
        }
        for query in 0..self.queries {
            let bytes: Vec<u8> = self
                .query_vector(query)
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect();
            memory
                .write(
                    DeviceAddress(self.query_vectors.0 + vector * u64::from(query)),
                    &bytes,
                )
                .unwrap();
        }
    }

    /// The whole result space as the kernel must write it (the plain reference).
    pub fn expected_result(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        for query in 0..self.queries {
            let q = self.query_vector(query);
            for row in 0..self.rows {
                let distance = knn::squared_distance(&self.database_vector(row), &q);
                bytes.extend_from_slice(&distance.to_le_bytes());
            }
        }
        bytes
    }
}

// ---------------------------------------------------------------------------------------------
// An AXLE streaming fixture
// ---------------------------------------------------------------------------------------------

/// A firmware streaming one [`KnnLaunch`] into one [`TestRegion`] on a [`FakeHal`].
#[derive(Debug)]
pub struct AxleBench {
    /// The hardware.
    pub hal: FakeHal,
    /// The firmware under test.
    pub firmware: Firmware,
    /// The programmed region.
    pub region: TestRegion,
    /// The launch.
    pub launch: KnnLaunch,
    /// The launch tag.
    pub tag: u32,
}

impl AxleBench {
    /// Programs `region`, writes `launch`'s inputs and lets the firmware load the region (one
    /// step). Nothing is launched yet.
    pub fn new(
        region: TestRegion,
        launch: KnnLaunch,
        streaming_factor: StreamingFactor,
        out_of_order: bool,
    ) -> AxleBench {
        let mut hal = FakeHal::new();
        let mut firmware = test_firmware(streaming_factor, out_of_order);
        launch.write_inputs(&mut hal.memory);
        region.program(&mut hal);
        firmware.step(&mut hal);
        AxleBench {
            hal,
            firmware,
            region,
            launch,
            tag: 0x5a,
        }
    }

    /// The AXLE command of the launch, with `flags`.
    pub fn command(&self, flags: shared_abi::command::CommandFlags) -> CommandDescriptor {
        let mut command = self.launch.command(LaunchMode::BackStreaming, self.tag);
        command.flags = flags.bits();
        command
    }

    /// Stores the AXLE launch (with `flags`) and steps once; panics when the firmware does
    /// not dispatch it.
    pub fn start(&mut self, flags: shared_abi::command::CommandFlags) {
        self.hal.launch_store(self.command(flags));
        self.firmware.step(&mut self.hal);
        assert_eq!(
            self.hal.compute.current().map(|launch| launch.items),
            Some(self.launch.items()),
            "the AXLE launch was not dispatched"
        );
    }

    /// The payload slot size of the region.
    pub fn slot_size(&self) -> u32 {
        self.region.layout().slot_size()
    }

    /// Chunks of the launch's result space.
    pub fn chunks(&self) -> u32 {
        self.launch.chunks(self.slot_size())
    }

    /// Reports every item of each of `chunks` finished (chunk by chunk, items in order).
    pub fn finish_chunks(&mut self, chunks: impl IntoIterator<Item = u32>) {
        let slot_size = self.slot_size();
        for chunk in chunks {
            let items = self.launch.items_in_chunk(chunk, slot_size);
            self.hal.finish_items(items);
        }
    }

    /// One firmware step.
    pub fn step(&mut self) -> StepOutcome {
        self.firmware.step(&mut self.hal)
    }

    /// Every metadata record submitted so far, in submission and chain order.
    pub fn records(&self) -> Vec<MetadataRecord> {
        self.hal
            .dma
            .submitted()
            .iter()
            .flat_map(SubmittedRequest::records)
            .collect()
    }

    /// The result offsets of every record submitted so far, in order.
    pub fn streamed_offsets(&self) -> Vec<u64> {
        self.records()
            .iter()
            .map(|record| record.result_offset)
            .collect()
    }

    /// Payloads per submitted payload request, in order.
    pub fn payloads_per_request(&self) -> Vec<u32> {
        self.hal
            .dma
            .payload_requests()
            .iter()
            .map(|request| request.request.payloads)
            .collect()
    }
}
