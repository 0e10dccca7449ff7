//! The launch: decoding and validating the command (every rule of the parent module's
//! "Validation"), and the item plan (stages, what each item does, its result range and cost).

use super::*;

/// What one item does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Work {
    /// Stage 0.
    Statistics,
    /// Stage 1: one packet of the normalized input.
    Normalize { packet: u32 },
    /// Stage 2: output rows `8 packet ..` of the stacked projection.
    Qkv { packet: u32 },
    /// Stage 3: one token packet of one head.
    Scores { head: u32, packet: u32 },
    /// Stage 4.
    Exponents { head: u32, packet: u32 },
    /// Stage 5.
    Values { head: u32, packet: u32 },
    /// Stage 6: one softmax block of one head.
    Blocks { head: u32, block: u32 },
    /// Stage 7: dimensions `8 packet ..` of one head.
    Attention { head: u32, packet: u32 },
    /// Stage 8: rows `8 packet ..`, part `part`.
    OutProj { part: u32, packet: u32 },
    /// Stage 9: one packet of the result.
    Residual { packet: u32 },
}

/// A decoded, validated OPT attention launch.
///
/// # Invariants
///
/// The parameters passed every check of the module docs against the device memory size the
/// command was decoded against; `stage_starts` is non-decreasing with `stage_starts[STAGES]`
/// the item count; `tokens = position + 1`, `token_packets = ceil(tokens / 8)`, `blocks =
/// ceil(token_packets / 8)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptKernel {
    pub(super) parameters: OptParameters,
    pub(super) key_cache: u64,
    pub(super) value_cache: u64,
    pub(super) position: u32,
    pub(super) result: u64,
    pub(super) layout: WorkspaceLayout,
    pub(super) tokens: u32,
    pub(super) token_packets: u32,
    pub(super) blocks: u32,
    pub(super) stage_starts: [u32; STAGES as usize + 1],
}

/// `a * b` as `u64`, or out of range.
pub(super) fn product(a: u64, b: u64) -> Result<u64, FirmwareError> {
    a.checked_mul(b).ok_or(FirmwareError::ArgumentOutOfRange)
}

/// `a * b` as `u32`, or out of range.
pub(super) fn product32(a: u32, b: u32) -> Result<u32, FirmwareError> {
    a.checked_mul(b).ok_or(FirmwareError::ArgumentOutOfRange)
}

/// `a / PACKET_ELEMENTS` (every caller's `a` is a multiple of it or wants the floor).
pub(super) fn packets_of(a: u32) -> u32 {
    a / PACKET_ELEMENTS
}

impl OptKernel {
    /// Decodes and validates `command` against device memory (read only: the parameter
    /// block). See the module docs for every rule. Never panics.
    pub fn decode<M: DeviceMemory>(
        command: &CommandDescriptor,
        memory: &M,
    ) -> Result<Self, FirmwareError> {
        if command.kernel != KernelId::OptAttention as u32 {
            return Err(FirmwareError::UnknownKernel);
        }
        if command.flags != 0 {
            return Err(FirmwareError::MalformedDescriptor);
        }
        let memory_size = memory.size();
        let [parameter_address, key_cache, value_cache, position] = command.args;
        let parameter_range = checked_range(
            parameter_address,
            PARAMETER_BYTES,
            PARAMETER_ALIGNMENT,
            memory_size,
        )?;
        let parameters: OptParameters = memory.read_value(DeviceAddress(parameter_address))?;
        let p = parameters;
        if p.hidden == 0
            || p.heads == 0
            || p.head_dim == 0
            || p.capacity == 0
            || p.output_split == 0
            || p.output_split > MAX_OUTPUT_SPLIT
            || p.reserved != [0; 3]
            || p.head_dim > MAX_HEAD_DIM
            || p.hidden > MAX_HIDDEN
            || p.capacity > MAX_POSITIONS
            || p.head_dim.checked_rem(PACKET_ELEMENTS) != Some(0)
            || p.heads.checked_mul(p.head_dim) != Some(p.hidden)
        {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let position = u32::try_from(position).map_err(|_| FirmwareError::ArgumentOutOfRange)?;
        if position >= p.capacity {
            return Err(FirmwareError::ArgumentOutOfRange);
        }

        let hidden = u64::from(p.hidden);
        let vector_bytes = product(hidden, ELEMENT_BYTES)?;
        if command.result_length != vector_bytes {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        let qkv_rows = product(hidden, 3)?;
        let cache = cache_bytes(p.heads, p.capacity, p.head_dim)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let layout =
            WorkspaceLayout::new(p.hidden, p.heads, p.head_dim, p.capacity, p.output_split)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let workspace = product(layout.elements, ELEMENT_BYTES)?;
        let range =
            |start: u64, length: u64| checked_range(start, length, ADDRESS_ALIGNMENT, memory_size);
        let read_only = [
            parameter_range,
            range(p.input, vector_bytes)?,
            range(p.ln_gamma, vector_bytes)?,
            range(p.ln_beta, vector_bytes)?,
            range(p.qkv_weight, product(qkv_rows, vector_bytes)?)?,
            range(p.qkv_bias, product(qkv_rows, ELEMENT_BYTES)?)?,
            range(p.output_weight, product(hidden, vector_bytes)?)?,
            range(p.output_bias, vector_bytes)?,
        ];
        let written = [
            range(key_cache, cache)?,
            range(value_cache, cache)?,
            range(p.workspace, workspace)?,
            range(command.result_address, vector_bytes)?,
        ];
        for (index, target) in written.iter().enumerate() {
            if read_only.iter().any(|input| overlaps(*target, *input))
                || written
                    .iter()
                    .skip(index.saturating_add(1))
                    .any(|other| overlaps(*target, *other))
            {
                return Err(FirmwareError::ArgumentOutOfRange);
            }
        }

        let tokens = position
            .checked_add(1)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let token_packets = tokens.div_ceil(PACKET_ELEMENTS);
        let blocks = token_packets.div_ceil(SOFTMAX_BLOCK_PACKETS);
        let hidden_packets = packets_of(p.hidden);
        let dim_packets = packets_of(p.head_dim);
        let per_head = product32(p.heads, token_packets)?;
        let counts = [
            1,
            hidden_packets,
            product32(hidden_packets, 3)?,
            per_head,
            per_head,
            per_head,
            product32(p.heads, blocks)?,
            product32(p.heads, dim_packets)?,
            product32(hidden_packets, p.output_split)?,
            hidden_packets,
        ];
        let mut stage_starts = [0_u32; STAGES as usize + 1];
        let mut next = 0_u32;
        for (start, items) in stage_starts.iter_mut().skip(1).zip(counts) {
            next = next
                .checked_add(items)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            *start = next;
        }
        Ok(OptKernel {
            parameters,
            key_cache,
            value_cache,
            position,
            result: command.result_address,
            layout,
            tokens,
            token_packets,
            blocks,
            stage_starts,
        })
    }

    /// The parameter block the launch was decoded with.
    pub fn parameters(&self) -> &OptParameters {
        &self.parameters
    }

    /// The current token's position.
    pub fn position(&self) -> u32 {
        self.position
    }

    /// The workspace's layout.
    pub fn layout(&self) -> &WorkspaceLayout {
        &self.layout
    }

    /// Work items, over all stages.
    pub fn items(&self) -> u32 {
        self.stage_starts.get(STAGES as usize).copied().unwrap_or(0)
    }

    /// Stages: [`STAGES`].
    pub fn stages(&self) -> u32 {
        STAGES
    }

    /// Items of stage `stage` (empty past the last).
    pub fn stage_items(&self, stage: u32) -> Range<u32> {
        let index = usize::try_from(stage).unwrap_or(usize::MAX);
        match (
            self.stage_starts.get(index),
            index
                .checked_add(1)
                .and_then(|next| self.stage_starts.get(next)),
        ) {
            (Some(start), Some(end)) => *start..*end,
            _ => 0..0,
        }
    }

    /// The stage of item `index` and its index within the stage.
    pub(super) fn locate(&self, index: u32) -> Result<(u32, u32), FirmwareError> {
        if index >= self.items() {
            return Err(FirmwareError::ArgumentOutOfRange);
        }
        for stage in 0..STAGES {
            let items = self.stage_items(stage);
            if items.contains(&index) {
                let local = index
                    .checked_sub(items.start)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?;
                return Ok((stage, local));
            }
        }
        Err(FirmwareError::ArgumentOutOfRange)
    }

    /// What item `index` does.
    pub(super) fn work(&self, index: u32) -> Result<Work, FirmwareError> {
        let p = &self.parameters;
        let (stage, local) = self.locate(index)?;
        let split = |per: u32| -> Result<(u32, u32), FirmwareError> {
            Ok((
                local
                    .checked_div(per)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?,
                local
                    .checked_rem(per)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?,
            ))
        };
        Ok(match stage {
            0 => Work::Statistics,
            1 => Work::Normalize { packet: local },
            2 => Work::Qkv { packet: local },
            3..=5 => {
                let (head, packet) = split(self.token_packets)?;
                match stage {
                    3 => Work::Scores { head, packet },
                    4 => Work::Exponents { head, packet },
                    _ => Work::Values { head, packet },
                }
            }
            6 => {
                let (head, block) = split(self.blocks)?;
                Work::Blocks { head, block }
            }
            7 => {
                let (head, packet) = split(packets_of(p.head_dim))?;
                Work::Attention { head, packet }
            }
            8 => {
                let (packet, part) = split(p.output_split)?;
                Work::OutProj { part, packet }
            }
            9 => Work::Residual { packet: local },
            _ => return Err(FirmwareError::ArgumentOutOfRange),
        })
    }

    /// Token packets of softmax block `block` (the last block may have fewer than 8).
    pub(super) fn block_packets(&self, block: u32) -> Range<u32> {
        let start = block.saturating_mul(SOFTMAX_BLOCK_PACKETS);
        start
            ..start
                .saturating_add(SOFTMAX_BLOCK_PACKETS)
                .min(self.token_packets)
    }

    /// Item `index`'s result range `(offset, length)`, as [`OptKernel::item`] gives it (only
    /// stage 9's items have one: `32 p`, 32 bytes; the others `(0, 0)`); `None` past the last
    /// item.
    pub fn result_range(&self, index: u32) -> Option<(u64, u32)> {
        Some(match self.work(index).ok()? {
            Work::Residual { packet } => (
                product(u64::from(packet), PACKET_BYTES).ok()?,
                PACKET_BYTES as u32,
            ),
            _ => (0, 0),
        })
    }

    /// Item `index`: its result range (only stage 9's items have one: `32 p`, 32 bytes) and
    /// its cost (the stage's, see the cost constants). Reads nothing from `memory`.
    pub fn item<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<ItemSpec, FirmwareError> {
        let _ = memory;
        let p = &self.parameters;
        let none = |cost: ItemCost| ItemSpec {
            result_offset: 0,
            result_length: 0,
            cost,
        };
        Ok(match self.work(index)? {
            Work::Statistics => none(statistics_cost(p.hidden)),
            Work::Normalize { .. } => none(NORMALIZE),
            Work::Qkv { .. } => none(qkv_cost(p.hidden)),
            Work::Scores { .. } => none(scores_cost(p.head_dim)),
            Work::Exponents { .. } => none(EXPONENTS),
            Work::Values { .. } => none(values_cost(p.head_dim)),
            Work::Blocks { block, .. } => {
                let packets = self.block_packets(block);
                none(blocks_cost(
                    p.head_dim,
                    packets.end.saturating_sub(packets.start),
                ))
            }
            Work::Attention { .. } => none(attention_cost(self.blocks)),
            Work::OutProj { part, .. } => none(out_proj_cost(p.hidden, part, p.output_split)),
            Work::Residual { packet } => ItemSpec {
                result_offset: product(u64::from(packet), PACKET_BYTES)?,
                result_length: PACKET_BYTES as u32,
                cost: residual_cost(p.output_split),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::opt::fixtures::*;
    use proptest::prelude::*;
    use shared_abi::Status;

    /// The command processor's barrier (`crate::device`): a staged launch is dispatched one
    /// stage at a time, the next only once every item of the previous one has finished, and
    /// the launch completes only after the last stage.
    /// Decode once: the firmware reads the parameter block when it validates the launch and
    /// hands the decoded kernel to the compute units with every stage's dispatch. A host that
    /// rewrites the block after the launch (here a valid block with `gamma` and `beta`
    /// swapped, which would change the result, then a block of garbage, which would not
    /// decode) changes nothing: the result is the original layer's. (Before the kernel rode
    /// with the launch, each stage's dispatch decoded the block again.)
    #[test]
    fn a_parameter_block_overwritten_after_the_launch_does_not_change_the_result() {
        use crate::testing::{test_firmware, BulkCompletion, FakeHal};
        use shared_abi::LaunchMode;
        let mut hal = FakeHal::with_memory(crate::testing::DEVICE_MEMORY_BYTES as usize);
        let fixture = loaded(&layer());
        let bytes = fixture.bytes(DeviceAddress(0), MEMORY);
        hal.memory.write(DeviceAddress(0), &bytes).unwrap();
        let mut firmware = test_firmware(crate::StreamingFactor::Bytes(32), true);
        let mut launch = command();
        launch.mode = LaunchMode::BulkSynchronous as u32;
        launch.tag = 9;
        hal.launch_store(launch);
        firmware.step(&mut hal);
        assert_eq!(hal.compute.launches().len(), 1, "stage 0 dispatched");
        let mut swapped = parameters();
        (swapped.ln_gamma, swapped.ln_beta) = (swapped.ln_beta, swapped.ln_gamma);
        hal.memory.put(DeviceAddress(PARAMETERS), &swapped);
        for stage in 0..STAGE_RANGES.len() {
            if stage == 5 {
                hal.memory
                    .write(DeviceAddress(PARAMETERS), &[0xff; PARAMETER_BYTES as usize])
                    .unwrap();
            }
            hal.finish_all_items();
            firmware.step(&mut hal);
        }
        assert_eq!(hal.compute.launches().len(), 10);
        assert_eq!(
            hal.registers.bulk_completions(),
            [BulkCompletion {
                tag: 9,
                status: Status::Ok
            }]
        );
        let (result, _, _) = plain(&layer());
        let got = get_floats(&hal.memory, RESULT, HIDDEN as usize);
        assert_close(&got, &result, "output");
    }

    /// The stack figure of `crate::hal` ("Stack per µthread"): every item of every stage,
    /// through `run_item`, behind a probe of the deepest device-memory access. Prints the
    /// high-water mark (`cargo test -p firmware --release stack_high_water -- --nocapture`).
    #[test]
    fn stack_high_water_of_every_opt_item_fits_the_uthread_stack() {
        let memory = loaded(&layer());
        let kernel = crate::kernels::Kernel::Opt(OptKernel::decode(&command(), &memory).unwrap());
        let probe = crate::testing::StackProbe::new(&memory);
        let mut deepest = 0;
        for stage in 0..kernel.stages() {
            deepest = deepest.max(probe.high_water(&kernel, kernel.stage_items(stage)));
        }
        std::println!("stack high-water, opt: {deepest} bytes");
        assert!(deepest > 0 && deepest <= crate::hal::UTHREAD_STACK_BYTES);
    }

    #[test]
    fn the_firmware_dispatches_each_stage_only_after_the_previous_one_finished() {
        use crate::testing::{test_firmware, BulkCompletion, FakeHal};
        use shared_abi::LaunchMode;
        let mut hal = FakeHal::with_memory(crate::testing::DEVICE_MEMORY_BYTES as usize);
        let fixture = loaded(&layer());
        let bytes = fixture.bytes(DeviceAddress(0), MEMORY);
        hal.memory.write(DeviceAddress(0), &bytes).unwrap();
        let mut firmware = test_firmware(crate::StreamingFactor::Bytes(32), true);
        let mut launch = command();
        launch.mode = LaunchMode::BulkSynchronous as u32;
        launch.tag = 7;
        hal.launch_store(launch);
        firmware.step(&mut hal);
        for (stage, items) in STAGE_RANGES.iter().enumerate() {
            let dispatched = hal.compute.launches();
            assert_eq!(
                dispatched.len(),
                stage + 1,
                "stage {stage} not dispatched alone"
            );
            let current = dispatched[stage];
            assert_eq!(current.item_range(), items.clone(), "stage {stage}");
            // All but one item: the next stage must not start, nor the launch complete.
            let mut pending: Vec<u32> = items.clone().rev().collect();
            let last = pending.pop().unwrap();
            hal.finish_items(pending);
            firmware.step(&mut hal);
            assert_eq!(
                hal.compute.launches().len(),
                stage + 1,
                "stage {stage} overlapped"
            );
            assert!(hal.registers.bulk_completions().is_empty());
            hal.finish_items([last]);
            firmware.step(&mut hal);
        }
        assert_eq!(hal.compute.launches().len(), 10);
        assert_eq!(
            hal.registers.bulk_completions(),
            [BulkCompletion {
                tag: 7,
                status: Status::Ok
            }]
        );
        // The stages ran in order on real data: the result is the layer's answer.
        let (result, _, _) = plain(&layer());
        let got = get_floats(&hal.memory, RESULT, HIDDEN as usize);
        assert_close(&got, &result, "output");
    }

    #[test]
    fn stages_are_m2ndps_kernels_with_one_item_per_packet() {
        let memory = loaded(&layer());
        let kernel = OptKernel::decode(&command(), &memory).unwrap();
        assert_eq!(kernel.stages(), 10);
        for (stage, items) in STAGE_RANGES.iter().enumerate() {
            assert_eq!(kernel.stage_items(stage as u32), items.clone(), "{stage}");
        }
        assert_eq!(kernel.stage_items(10), 0..0);
        assert_eq!(kernel.stage_items(u32::MAX), 0..0);
        assert_eq!(kernel.items(), 261);
        assert_eq!(kernel.position(), 69);
        assert_eq!(kernel.parameters(), &parameters());
        assert_eq!(
            kernel.layout().elements * 4,
            workspace_bytes(HIDDEN, HEADS, HEAD_DIM, CAPACITY, SPLIT).unwrap()
        );
        assert_eq!(kernel.layout().elements, 2560);
    }

    #[test]
    fn only_the_residual_items_have_results_and_they_tile_the_result_space() {
        let memory = loaded(&layer());
        let kernel = OptKernel::decode(&command(), &memory).unwrap();
        for item in 0..245 {
            let spec = kernel.item(item, &memory).unwrap();
            assert_eq!((spec.result_offset, spec.result_length), (0, 0));
            assert!(spec.cost.instructions() > 0, "item {item}");
        }
        for (packet, item) in (245..261).enumerate() {
            let spec = kernel.item(item, &memory).unwrap();
            assert_eq!(spec.result_offset, 32 * packet as u64);
            assert_eq!(spec.result_length, 32);
            assert_eq!(spec.cost, residual_cost(SPLIT));
        }
        assert_eq!(
            kernel.item(261, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
        assert_eq!(
            kernel.item(u32::MAX, &memory),
            Err(FirmwareError::ArgumentOutOfRange)
        );
    }

    #[test]
    fn item_costs_follow_the_stage_and_the_item_shape() {
        let memory = loaded(&layer());
        let kernel = OptKernel::decode(&command(), &memory).unwrap();
        let cost = |item: u32| kernel.item(item, &memory).unwrap().cost;
        assert_eq!(cost(0), statistics_cost(HIDDEN));
        assert_eq!(cost(1), NORMALIZE);
        assert_eq!(cost(17), qkv_cost(HIDDEN));
        assert_eq!(cost(65), scores_cost(HEAD_DIM));
        // The short last token packet costs a whole one (M²NDP's µthreads run whole packets).
        assert_eq!(cost(73), scores_cost(HEAD_DIM));
        assert_eq!(cost(101), EXPONENTS);
        assert_eq!(cost(137), values_cost(HEAD_DIM));
        // Blocks of 8 and of 1 token packets.
        assert_eq!(cost(173), blocks_cost(HEAD_DIM, 8));
        assert_eq!(cost(174), blocks_cost(HEAD_DIM, 1));
        assert!(cost(173).vector_memory > cost(174).vector_memory);
        assert_eq!(cost(181), attention_cost(2));
        // Parts 0 and 1 hold one 64-column block each, part 2 none.
        assert_eq!(cost(197), out_proj_cost(HIDDEN, 0, SPLIT));
        assert_eq!(cost(197).bytes, 8 * 8 * 32 + 32);
        assert_eq!(cost(198).bytes, 8 * 8 * 32 + 32);
        assert_eq!(cost(199), GEMV_FIXED.plus(OUT_PROJ_TAIL));
        assert_eq!(part_columns(HIDDEN, 2, SPLIT), 0);
        assert_eq!(part_columns(100, 1, 2), 36);
        assert_eq!(part_columns(2560, 3, 4), 640);
    }

    #[test]
    fn wrong_kernel_flags_position_or_result_length_are_rejected() {
        let memory = loaded(&layer());
        let mut c = command();
        c.kernel = KernelId::KnnDistance as u32;
        rejected(&memory, &c, FirmwareError::UnknownKernel);
        let mut c = command();
        c.flags = 1;
        rejected(&memory, &c, FirmwareError::MalformedDescriptor);
        for position in [72, 73, u64::from(u32::MAX), 1 << 32, u64::MAX] {
            let mut c = command();
            c.args[3] = position;
            rejected(&memory, &c, FirmwareError::ArgumentOutOfRange);
        }
        for length in [0, 508, 511, 513, 516, 1024, 2048, u64::MAX] {
            let mut c = command();
            c.result_length = length;
            rejected(&memory, &c, FirmwareError::ArgumentOutOfRange);
        }
        // Position 71 (the last slot) and position 0 are fine.
        for position in [0, 71] {
            let mut c = command();
            c.args[3] = position;
            assert!(OptKernel::decode(&c, &memory).is_ok());
        }
    }

    #[test]
    fn bad_parameter_blocks_are_rejected() {
        let changes: [fn(&mut OptParameters); 19] = [
            |p| p.hidden = 0,
            |p| p.heads = 0,
            |p| p.head_dim = 0,
            |p| p.capacity = 0,
            |p| p.output_split = 0,
            |p| p.output_split = MAX_OUTPUT_SPLIT + 1,
            |p| p.reserved = [0, 1, 0],
            |p| p.reserved = [0, 0, u32::MAX],
            |p| {
                p.head_dim = 36;
                p.hidden = 144;
            },
            |p| p.hidden = 96,
            |p| {
                p.heads = 1;
                p.head_dim = 264;
                p.hidden = 264;
            },
            |p| p.capacity = MAX_POSITIONS + 1,
            |p| p.capacity = 5,
            |p| p.input = 0x1101,
            |p| p.qkv_weight = MEMORY - 0x100,
            |p| p.workspace = QKV_WEIGHT + 0x100,
            |p| p.workspace = RESULT - 4,
            |p| p.workspace = u64::MAX - 3,
            |p| p.output_bias = MEMORY - 4,
        ];
        for change in changes {
            let memory = loaded(&layer());
            let mut p = parameters();
            change(&mut p);
            memory.put(DeviceAddress(PARAMETERS), &p);
            rejected(&memory, &command(), FirmwareError::ArgumentOutOfRange);
        }
    }

    #[test]
    fn written_ranges_overlapping_anything_are_rejected() {
        let memory = loaded(&layer());
        let cases = [
            // Parameter block misaligned or outside memory.
            (0, PARAMETERS + 4),
            (0, MEMORY - 8),
            (0, u64::MAX - 7),
            // Key cache over the values, over the weights, outside memory, misaligned.
            (1, VALUES - 4),
            (1, QKV_WEIGHT),
            (1, MEMORY - 4),
            (1, KEYS + 2),
            // Value cache over the workspace, over the parameter block, over the keys.
            (2, WORKSPACE - 0x100),
            (2, PARAMETERS),
            (2, KEYS),
        ];
        for (arg, address) in cases {
            let mut c = command();
            c.args[arg] = address;
            rejected(&memory, &c, FirmwareError::ArgumentOutOfRange);
        }
        for result in [
            INPUT,
            WORKSPACE + 4,
            KEYS + 0x3FC,
            VALUES - 0x1FC,
            MEMORY - 4,
            MEMORY - 0x1FC,
            RESULT + 1,
        ] {
            let mut c = command();
            c.result_address = result;
            rejected(&memory, &c, FirmwareError::ArgumentOutOfRange);
        }
        // Read-only inputs may overlap each other.
        let shared = loaded(&layer());
        let mut p = parameters();
        p.ln_beta = GAMMA;
        p.output_bias = INPUT;
        shared.put(DeviceAddress(PARAMETERS), &p);
        assert!(OptKernel::decode(&command(), &shared).is_ok());
    }

    proptest! {
        /// Arbitrary commands over arbitrary parameter blocks in a small memory: decoding and
        /// executing whatever decodes never panics, and what decodes has a consistent plan.
        #[test]
        fn hostile_commands_never_panic(
            kernel in prop_oneof![Just(KernelId::OptAttention as u32), any::<u32>()],
            flags in prop_oneof![Just(0_u32), any::<u32>()],
            result_address in prop_oneof![(0_u64..0x1000).prop_map(|a| a * 16), any::<u64>()],
            result_length in prop_oneof![(0_u64..64).prop_map(|l| l * 16), any::<u64>()],
            args in prop_oneof![
                ((0_u64..0x100).prop_map(|a| a * 64), (0_u64..0x1000).prop_map(|a| a * 16), (0_u64..0x1000).prop_map(|a| a * 16), 0_u64..40)
                    .prop_map(|(a, b, c, d)| [a, b, c, d]),
                any::<[u64; 4]>(),
            ],
            shape in (0_u32..4, 0_u32..4, 0_u32..40),
            split in (0_u32..6, prop_oneof![Just(0_u32), any::<u32>()]),
            addresses in prop_oneof![
                proptest::array::uniform8((0_u64..0x1000).prop_map(|a| a * 16)),
                proptest::array::uniform8(any::<u64>()),
            ],
        ) {
            let memory = FakeMemory::new(0x10000);
            let (heads, dim_packets, capacity) = shape;
            let head_dim = dim_packets * 8;
            let parameters = OptParameters {
                hidden: heads * head_dim,
                heads,
                head_dim,
                capacity,
                output_split: split.0,
                reserved: [0, split.1, 0],
                input: addresses[0],
                ln_gamma: addresses[1],
                ln_beta: addresses[2],
                qkv_weight: addresses[3],
                qkv_bias: addresses[4],
                output_weight: addresses[5],
                output_bias: addresses[6],
                workspace: addresses[7],
            };
            let at = (args[0] % 0xFF00) & !7;
            memory.put(DeviceAddress(at), &parameters);
            let command = CommandDescriptor { kernel, mode: 0, tag: 0, flags, result_address, result_length, args };
            if let Ok(decoded) = OptKernel::decode(&command, &memory) {
                prop_assert_eq!(decoded.stage_items(9).end, decoded.items());
                let mut covered = 0_u64;
                for item in 0..decoded.items() {
                    let spec = decoded.item(item, &memory);
                    prop_assert!(spec.is_ok());
                    let spec = spec.unwrap();
                    // The range the command processor takes without describing the item.
                    prop_assert_eq!(decoded.result_range(item), Some((spec.result_offset, spec.result_length)));
                    covered += u64::from(spec.result_length);
                    prop_assert_eq!(decoded.execute(item, &memory), Ok(()));
                }
                prop_assert_eq!(covered, command.result_length);
                prop_assert!(decoded.item(decoded.items(), &memory).is_err());
                prop_assert_eq!(decoded.result_range(decoded.items()), None);
            }
        }

        /// The valid layer with a few fields nudged: whatever still decodes runs every item
        /// (stage by stage) without panicking, inside memory, and covers the result once.
        #[test]
        fn nudged_valid_commands_decode_and_execute_without_panicking(
            nudges in proptest::collection::vec((0_usize..16, -64_i64..64), 1..4),
            shape in (1_u32..3, 1_u32..3, 1_u32..9),
        ) {
            let layer = layer();
            let memory = loaded(&layer);
            let mut p = parameters();
            let mut c = command();
            for (field, delta) in nudges {
                let nudge32 = |v: u32| v.wrapping_add(delta as u32);
                let nudge64 = |v: u64| v.wrapping_add(delta as u64);
                match field {
                    0 => p.output_split = nudge32(p.output_split),
                    1 => p.reserved[1] = nudge32(p.reserved[1]),
                    2 => p.head_dim = nudge32(p.head_dim),
                    3 => p.capacity = nudge32(p.capacity),
                    4 => p.input = nudge64(p.input),
                    5 => p.qkv_weight = nudge64(p.qkv_weight),
                    6 => p.output_weight = nudge64(p.output_weight),
                    7 => p.workspace = nudge64(p.workspace),
                    8 => c.args[1] = nudge64(c.args[1]),
                    9 => c.args[2] = nudge64(c.args[2]),
                    10 => c.args[3] = nudge64(c.args[3]),
                    11 => c.result_address = nudge64(c.result_address),
                    12 => c.result_length = nudge64(c.result_length),
                    13 => {
                        // Another consistent shape: heads x 8 or 16 dims, smaller than the
                        // layout.
                        p.heads = shape.0;
                        p.head_dim = 8 * shape.1;
                        p.hidden = p.heads * p.head_dim;
                        p.capacity = shape.2;
                        c.result_length = u64::from(p.hidden) * 4;
                        c.args[3] = u64::from(shape.2 - 1);
                    }
                    14 => c.args[0] = nudge64(c.args[0]),
                    _ => p.ln_gamma = nudge64(p.ln_gamma),
                }
            }
            memory.put(DeviceAddress(PARAMETERS), &p);
            if let Ok(decoded) = OptKernel::decode(&c, &memory) {
                let mut covered = vec![0_u8; c.result_length as usize];
                for stage in 0..decoded.stages() {
                    for item in decoded.stage_items(stage) {
                        let spec = decoded.item(item, &memory).unwrap();
                        for byte in spec.result_offset..spec.result_offset + u64::from(spec.result_length) {
                            covered[byte as usize] += 1;
                        }
                        prop_assert_eq!(decoded.execute(item, &memory), Ok(()));
                    }
                }
                prop_assert!(covered.iter().all(|c| *c == 1));
            }
        }
    }
}
