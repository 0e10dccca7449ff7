//! Running an item: what each stage reads and writes in device memory.

use super::plan::{product, product32, Work};
use super::*;
use zerocopy::IntoBytes;

impl OptKernel {
    /// Runs item `index` (see the module docs for what each stage reads and writes). A memory
    /// fault (a memory smaller than the one the command was validated against) is reported
    /// as [`FirmwareError::MemoryFault`].
    pub fn execute<M: DeviceMemory>(&self, index: u32, memory: &M) -> Result<(), FirmwareError> {
        match self.work(index)? {
            Work::Statistics => self.execute_statistics(memory),
            Work::Normalize { packet } => self.execute_normalize(packet, memory),
            Work::Qkv { packet } => self.execute_qkv(packet, memory),
            Work::Scores { head, packet } => self.execute_scores(head, packet, memory),
            Work::Exponents { head, packet } => self.execute_exponents(head, packet, memory),
            Work::Values { head, packet } => self.execute_values(head, packet, memory),
            Work::Blocks { head, block } => self.execute_blocks(head, block, memory),
            Work::Attention { head, packet } => self.execute_attention(head, packet, memory),
            Work::OutProj { part, packet } => self.execute_out_proj(part, packet, memory),
            Work::Residual { packet } => self.execute_residual(packet, memory),
        }
    }

    /// Device address of workspace element `index` of the region starting at element
    /// `region`.
    fn workspace(&self, region: u64, index: u64) -> Result<u64, FirmwareError> {
        element_address(
            self.parameters.workspace,
            region
                .checked_add(index)
                .ok_or(FirmwareError::ArgumentOutOfRange)?,
        )
    }

    /// Element index of `(head, token, dim)` in a cache.
    fn cache_element(&self, head: u32, token: u32, dim: u32) -> Result<u64, FirmwareError> {
        let p = &self.parameters;
        product(u64::from(head), u64::from(p.capacity))?
            .checked_add(u64::from(token))
            .ok_or(FirmwareError::ArgumentOutOfRange)
            .and_then(|row| product(row, u64::from(p.head_dim)))?
            .checked_add(u64::from(dim))
            .ok_or(FirmwareError::ArgumentOutOfRange)
    }

    /// Index of token packet `packet` of head `head` in the `[heads][packets]` regions (whose
    /// row length is the capacity's packet count).
    fn packet_index(&self, head: u32, packet: u32) -> Result<u64, FirmwareError> {
        let capacity_packets = u64::from(self.parameters.capacity.div_ceil(PACKET_ELEMENTS));
        product(u64::from(head), capacity_packets)?
            .checked_add(u64::from(packet))
            .ok_or(FirmwareError::ArgumentOutOfRange)
    }

    /// Index of softmax block `block` of head `head` in the `[heads][blocks]` regions.
    fn block_index(&self, head: u32, block: u32) -> Result<u64, FirmwareError> {
        let capacity_blocks = u64::from(
            self.parameters
                .capacity
                .div_ceil(PACKET_ELEMENTS)
                .div_ceil(SOFTMAX_BLOCK_PACKETS),
        );
        product(u64::from(head), capacity_blocks)?
            .checked_add(u64::from(block))
            .ok_or(FirmwareError::ArgumentOutOfRange)
    }

    /// Tokens of token packet `packet`: `8 packet .. min(8 packet + 8, tokens)`.
    fn packet_tokens(&self, packet: u32) -> Range<u32> {
        let start = packet.saturating_mul(PACKET_ELEMENTS);
        start..start.saturating_add(PACKET_ELEMENTS).min(self.tokens)
    }

    fn execute_statistics<M: DeviceMemory>(&self, memory: &M) -> Result<(), FirmwareError> {
        let p = &self.parameters;
        let mut moments = LayerNormMoments::new();
        let mut chunk = [0.0_f32; CHUNK_ELEMENTS];
        let mut done = 0_usize;
        let hidden = p.hidden as usize;
        while done < hidden {
            let length = hidden.saturating_sub(done).min(CHUNK_ELEMENTS);
            let values = chunk
                .get_mut(..length)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            read_floats(memory, element_address(p.input, done as u64)?, values)?;
            moments.add(values);
            done = done.saturating_add(length);
        }
        let (mean, reciprocal) = moments.finish();
        write_floats(
            memory,
            self.workspace(self.layout.statistics, 0)?,
            &[mean, reciprocal],
        )
    }

    fn execute_normalize<M: DeviceMemory>(
        &self,
        packet: u32,
        memory: &M,
    ) -> Result<(), FirmwareError> {
        let p = &self.parameters;
        let mut statistics = [0.0_f32; 2];
        read_floats(
            memory,
            self.workspace(self.layout.statistics, 0)?,
            &mut statistics,
        )?;
        let [mean, reciprocal] = statistics;
        let first = product(u64::from(packet), u64::from(PACKET_ELEMENTS))?;
        let mut x = [0.0_f32; LANES];
        let mut gamma = [0.0_f32; LANES];
        let mut beta = [0.0_f32; LANES];
        read_floats(memory, element_address(p.input, first)?, &mut x)?;
        read_floats(memory, element_address(p.ln_gamma, first)?, &mut gamma)?;
        read_floats(memory, element_address(p.ln_beta, first)?, &mut beta)?;
        for ((value, gamma), beta) in x.iter_mut().zip(gamma).zip(beta) {
            *value = normalize(*value, mean, reciprocal, gamma, beta);
        }
        write_floats(memory, self.workspace(self.layout.normalized, first)?, &x)
    }

    /// Where output row `row` (a multiple of 8) of the stacked projection and the 7 after it
    /// go: q in the workspace, or the head's cache slot at `position`.
    fn qkv_destination(&self, row: u32) -> Result<u64, FirmwareError> {
        let p = &self.parameters;
        let matrix = row
            .checked_div(p.hidden)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let column = row
            .checked_rem(p.hidden)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        if matrix == 0 {
            return self.workspace(self.layout.query, u64::from(column));
        }
        let head = column
            .checked_div(p.head_dim)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let dim = column
            .checked_rem(p.head_dim)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let element = self.cache_element(head, self.position, dim)?;
        let base = if matrix == 1 {
            self.key_cache
        } else {
            self.value_cache
        };
        element_address(base, element)
    }

    /// The 8 rows `first_row ..` of a row-major `columns`-wide matrix at `matrix`, each
    /// dotted with the vector at `input` over the columns of part `part` of `split` (all
    /// columns for split 1), in [`split_dot`]'s order, streamed a block at a time.
    fn gemv_rows<M: DeviceMemory>(
        &self,
        memory: &M,
        matrix: u64,
        first_row: u32,
        columns: u32,
        input: u64,
        (part, split): (u32, u32),
    ) -> Result<[f32; GEMV_ROWS as usize], FirmwareError> {
        let mut sums = [LaneSum::<LANES>::new(); GEMV_ROWS as usize];
        let block = GEMV_BLOCK_ELEMENTS as usize;
        let mut input_block = [0.0_f32; GEMV_BLOCK_ELEMENTS as usize];
        let mut row_block = [0.0_f32; GEMV_BLOCK_ELEMENTS as usize];
        let columns = columns as usize;
        let step = (split as usize).saturating_mul(block);
        let mut start = (part as usize).saturating_mul(block);
        while step > 0 && start < columns {
            let length = columns.saturating_sub(start).min(block);
            let input_values = input_block
                .get_mut(..length)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            read_floats(memory, element_address(input, start as u64)?, input_values)?;
            for (row, sum) in (first_row..).zip(sums.iter_mut()) {
                let values = row_block
                    .get_mut(..length)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?;
                let element = product(u64::from(row), columns as u64)?
                    .checked_add(start as u64)
                    .ok_or(FirmwareError::ArgumentOutOfRange)?;
                read_floats(memory, element_address(matrix, element)?, values)?;
                sum.add_products(values, input_values);
            }
            start = start.saturating_add(step);
        }
        let mut out = [0.0_f32; GEMV_ROWS as usize];
        for (value, sum) in out.iter_mut().zip(&sums) {
            *value = sum.finish();
        }
        Ok(out)
    }

    fn execute_qkv<M: DeviceMemory>(&self, packet: u32, memory: &M) -> Result<(), FirmwareError> {
        let p = &self.parameters;
        let first_row = product32(packet, GEMV_ROWS)?;
        let normalized = self.workspace(self.layout.normalized, 0)?;
        let mut rows = self.gemv_rows(
            memory,
            p.qkv_weight,
            first_row,
            p.hidden,
            normalized,
            (0, 1),
        )?;
        let mut bias = [0.0_f32; GEMV_ROWS as usize];
        read_floats(
            memory,
            element_address(p.qkv_bias, u64::from(first_row))?,
            &mut bias,
        )?;
        for (value, bias) in rows.iter_mut().zip(bias) {
            *value = project(*value, bias);
        }
        write_floats(memory, self.qkv_destination(first_row)?, &rows)
    }

    fn execute_scores<M: DeviceMemory>(
        &self,
        head: u32,
        packet: u32,
        memory: &M,
    ) -> Result<(), FirmwareError> {
        let p = &self.parameters;
        let head_dim = p.head_dim as usize;
        let mut query = [0.0_f32; MAX_HEAD_DIM as usize];
        let query = query
            .get_mut(..head_dim)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let query_start = product(u64::from(head), u64::from(p.head_dim))?;
        read_floats(
            memory,
            self.workspace(self.layout.query, query_start)?,
            query,
        )?;
        let scale = attention_scale(p.head_dim);
        let mut key = [0.0_f32; MAX_HEAD_DIM as usize];
        let key = key
            .get_mut(..head_dim)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let mut scores = [0.0_f32; LANES];
        let tokens = self.packet_tokens(packet);
        let count = tokens.end.saturating_sub(tokens.start) as usize;
        for (token, value) in tokens.clone().zip(scores.iter_mut()) {
            read_floats(
                memory,
                element_address(self.key_cache, self.cache_element(head, token, 0)?)?,
                key,
            )?;
            *value = score(query, key, scale);
        }
        let scores = scores
            .get(..count)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let score_row = product(u64::from(head), u64::from(p.capacity))?;
        let first = score_row
            .checked_add(u64::from(tokens.start))
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        write_floats(memory, self.workspace(self.layout.scores, first)?, scores)?;
        write_floats(
            memory,
            self.workspace(self.layout.packet_maxima, self.packet_index(head, packet)?)?,
            &[running_max(scores)],
        )
    }

    fn execute_exponents<M: DeviceMemory>(
        &self,
        head: u32,
        packet: u32,
        memory: &M,
    ) -> Result<(), FirmwareError> {
        let p = &self.parameters;
        let block = packet / SOFTMAX_BLOCK_PACKETS;
        let packets = self.block_packets(block);
        let mut maxima = [0.0_f32; SOFTMAX_BLOCK_PACKETS as usize];
        let maxima = maxima
            .get_mut(..packets.end.saturating_sub(packets.start) as usize)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        read_floats(
            memory,
            self.workspace(
                self.layout.packet_maxima,
                self.packet_index(head, packets.start)?,
            )?,
            maxima,
        )?;
        let max = running_max(maxima);
        let tokens = self.packet_tokens(packet);
        let mut scores = [0.0_f32; LANES];
        let scores = scores
            .get_mut(..tokens.end.saturating_sub(tokens.start) as usize)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let first = product(u64::from(head), u64::from(p.capacity))?
            .checked_add(u64::from(tokens.start))
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let address = self.workspace(self.layout.scores, first)?;
        read_floats(memory, address, scores)?;
        let sum = exponents(scores, max);
        write_floats(memory, address, scores)?;
        write_floats(
            memory,
            self.workspace(self.layout.packet_sums, self.packet_index(head, packet)?)?,
            &[sum],
        )
    }

    fn execute_values<M: DeviceMemory>(
        &self,
        head: u32,
        packet: u32,
        memory: &M,
    ) -> Result<(), FirmwareError> {
        let p = &self.parameters;
        let head_dim = p.head_dim as usize;
        let tokens = self.packet_tokens(packet);
        let mut weights = [0.0_f32; LANES];
        let weights = weights
            .get_mut(..tokens.end.saturating_sub(tokens.start) as usize)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let first = product(u64::from(head), u64::from(p.capacity))?
            .checked_add(u64::from(tokens.start))
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        read_floats(memory, self.workspace(self.layout.scores, first)?, weights)?;
        let mut accumulator = [0.0_f32; MAX_HEAD_DIM as usize];
        let accumulator = accumulator
            .get_mut(..head_dim)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let mut values = [0.0_f32; MAX_HEAD_DIM as usize];
        let values = values
            .get_mut(..head_dim)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        for (token, weight) in tokens.zip(weights.iter()) {
            read_floats(
                memory,
                element_address(self.value_cache, self.cache_element(head, token, 0)?)?,
                values,
            )?;
            accumulate_weighted(accumulator, *weight, values);
        }
        let slot = product(self.packet_index(head, packet)?, u64::from(p.head_dim))?;
        write_floats(
            memory,
            self.workspace(self.layout.packet_partials, slot)?,
            accumulator,
        )
    }

    fn execute_blocks<M: DeviceMemory>(
        &self,
        head: u32,
        block: u32,
        memory: &M,
    ) -> Result<(), FirmwareError> {
        let p = &self.parameters;
        let head_dim = p.head_dim as usize;
        let packets = self.block_packets(block);
        let count = packets.end.saturating_sub(packets.start) as usize;
        let first = self.packet_index(head, packets.start)?;
        let mut maxima = [0.0_f32; SOFTMAX_BLOCK_PACKETS as usize];
        let maxima = maxima
            .get_mut(..count)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        read_floats(
            memory,
            self.workspace(self.layout.packet_maxima, first)?,
            maxima,
        )?;
        let mut sums = [0.0_f32; SOFTMAX_BLOCK_PACKETS as usize];
        let sums = sums
            .get_mut(..count)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        read_floats(
            memory,
            self.workspace(self.layout.packet_sums, first)?,
            sums,
        )?;
        let mut accumulator = [0.0_f32; MAX_HEAD_DIM as usize];
        let accumulator = accumulator
            .get_mut(..head_dim)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let mut partial = [0.0_f32; MAX_HEAD_DIM as usize];
        let partial = partial
            .get_mut(..head_dim)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        for packet in packets {
            let slot = product(self.packet_index(head, packet)?, u64::from(p.head_dim))?;
            read_floats(
                memory,
                self.workspace(self.layout.packet_partials, slot)?,
                partial,
            )?;
            add_into(accumulator, partial);
        }
        let index = self.block_index(head, block)?;
        write_floats(
            memory,
            self.workspace(self.layout.block_maxima, index)?,
            &[running_max(maxima)],
        )?;
        write_floats(
            memory,
            self.workspace(self.layout.block_sums, index)?,
            &[ordered_sum(sums)],
        )?;
        let slot = product(index, u64::from(p.head_dim))?;
        write_floats(
            memory,
            self.workspace(self.layout.block_partials, slot)?,
            accumulator,
        )
    }

    fn execute_attention<M: DeviceMemory>(
        &self,
        head: u32,
        packet: u32,
        memory: &M,
    ) -> Result<(), FirmwareError> {
        let p = &self.parameters;
        let blocks = self.blocks as usize;
        let first = self.block_index(head, 0)?;
        let mut maxima = [0.0_f32; MAX_BLOCKS as usize];
        let maxima = maxima
            .get_mut(..blocks)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        read_floats(
            memory,
            self.workspace(self.layout.block_maxima, first)?,
            maxima,
        )?;
        let mut sums = [0.0_f32; MAX_BLOCKS as usize];
        let sums = sums
            .get_mut(..blocks)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        read_floats(memory, self.workspace(self.layout.block_sums, first)?, sums)?;
        let mut factors = [0.0_f32; MAX_BLOCKS as usize];
        let factors = factors
            .get_mut(..blocks)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let reciprocal = block_factors(maxima, sums, factors);
        let first_dim = product32(packet, PACKET_ELEMENTS)?;
        let mut accumulator = [0.0_f32; LANES];
        let mut partial = [0.0_f32; LANES];
        for (block, factor) in (0_u32..).zip(factors.iter()) {
            let slot = product(self.block_index(head, block)?, u64::from(p.head_dim))?
                .checked_add(u64::from(first_dim))
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            read_floats(
                memory,
                self.workspace(self.layout.block_partials, slot)?,
                &mut partial,
            )?;
            accumulate_weighted(&mut accumulator, *factor, &partial);
        }
        scale(&mut accumulator, reciprocal);
        let out = product(u64::from(head), u64::from(p.head_dim))?
            .checked_add(u64::from(first_dim))
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        write_floats(
            memory,
            self.workspace(self.layout.attention, out)?,
            &accumulator,
        )
    }

    fn execute_out_proj<M: DeviceMemory>(
        &self,
        part: u32,
        packet: u32,
        memory: &M,
    ) -> Result<(), FirmwareError> {
        let p = &self.parameters;
        let first_row = product32(packet, GEMV_ROWS)?;
        let attention = self.workspace(self.layout.attention, 0)?;
        let rows = self.gemv_rows(
            memory,
            p.output_weight,
            first_row,
            p.hidden,
            attention,
            (part, p.output_split),
        )?;
        let slot = product(u64::from(part), u64::from(p.hidden))?
            .checked_add(u64::from(first_row))
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        write_floats(
            memory,
            self.workspace(self.layout.out_partials, slot)?,
            &rows,
        )
    }

    fn execute_residual<M: DeviceMemory>(
        &self,
        packet: u32,
        memory: &M,
    ) -> Result<(), FirmwareError> {
        let p = &self.parameters;
        let first = product(u64::from(packet), u64::from(PACKET_ELEMENTS))?;
        let mut parts = [[0.0_f32; LANES]; MAX_OUTPUT_SPLIT as usize];
        let parts = parts
            .get_mut(..p.output_split as usize)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        for (part, values) in (0_u64..).zip(parts.iter_mut()) {
            let slot = product(part, u64::from(p.hidden))?
                .checked_add(first)
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            read_floats(
                memory,
                self.workspace(self.layout.out_partials, slot)?,
                values,
            )?;
        }
        let mut bias = [0.0_f32; LANES];
        read_floats(memory, element_address(p.output_bias, first)?, &mut bias)?;
        let mut x = [0.0_f32; LANES];
        read_floats(memory, element_address(p.input, first)?, &mut x)?;
        let mut out = [0.0_f32; LANES];
        let mut column = [0.0_f32; MAX_OUTPUT_SPLIT as usize];
        for (lane, ((out, bias), x)) in out.iter_mut().zip(bias).zip(x).enumerate() {
            let column = column
                .get_mut(..parts.len())
                .ok_or(FirmwareError::ArgumentOutOfRange)?;
            for (value, part) in column.iter_mut().zip(parts.iter()) {
                *value = part.get(lane).copied().unwrap_or_default();
            }
            *out = block_output(column, bias, x);
        }
        write_floats(memory, element_address(self.result, first)?, &out)
    }
}

/// `base + 4 * index`, checked.
fn element_address(base: u64, index: u64) -> Result<u64, FirmwareError> {
    index
        .checked_mul(ELEMENT_BYTES)
        .and_then(|offset| base.checked_add(offset))
        .ok_or(FirmwareError::ArgumentOutOfRange)
}

/// Reads `values.len()` little-endian `f32` at `address`, a chunk at a time, straight into
/// `values` (no staging buffer).
fn read_floats<M: DeviceMemory>(
    memory: &M,
    address: u64,
    values: &mut [f32],
) -> Result<(), FirmwareError> {
    let mut address = address;
    for chunk in values.chunks_mut(CHUNK_ELEMENTS) {
        let length = chunk
            .len()
            .checked_mul(4)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        memory.read(DeviceAddress(address), chunk.as_mut_bytes())?;
        for value in chunk.iter_mut() {
            *value = f32::from_bits(u32::from_le(value.to_bits()));
        }
        address = address
            .checked_add(length as u64)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
    }
    Ok(())
}

/// Writes `values` as little-endian `f32` at `address`, a chunk at a time.
fn write_floats<M: DeviceMemory>(
    memory: &M,
    address: u64,
    values: &[f32],
) -> Result<(), FirmwareError> {
    let mut bytes = [0_u8; CHUNK_BYTES];
    let mut address = address;
    for chunk in values.chunks(CHUNK_ELEMENTS) {
        let length = chunk
            .len()
            .checked_mul(4)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        let buffer = bytes
            .get_mut(..length)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
        for (word, value) in buffer.chunks_exact_mut(4).zip(chunk) {
            word.copy_from_slice(&value.to_le_bytes());
        }
        memory.write(DeviceAddress(address), buffer)?;
        address = address
            .checked_add(length as u64)
            .ok_or(FirmwareError::ArgumentOutOfRange)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::opt::fixtures::*;

    #[test]
    fn kernel_matches_a_plain_f64_layer_and_appends_the_token_to_the_caches() {
        let layer = layer();
        let mut memory = loaded(&layer);
        run(&mut memory);
        let (result, keys, values) = plain(&layer);
        let cache = (HEADS * CAPACITY * HEAD_DIM) as usize;
        let got = get_floats(&memory, RESULT, HIDDEN as usize);
        assert_close(&got, &result, "output");
        assert_close(&get_floats(&memory, KEYS, cache), &keys, "key");
        assert_close(&get_floats(&memory, VALUES, cache), &values, "value");
        // Positions past the current one are untouched.
        let keys_after = get_floats(&memory, KEYS, cache);
        for head in 0..HEADS as usize {
            let from = (head * CAPACITY as usize + 70) * HEAD_DIM as usize;
            let to = (head + 1) * (CAPACITY * HEAD_DIM) as usize;
            assert_eq!(keys_after[from..to], layer.keys[from..to]);
        }
    }

    #[test]
    fn kernel_is_bit_identical_to_its_helpers_composed_in_plain_loops() {
        let layer = layer();
        let mut memory = loaded(&layer);
        run(&mut memory);
        let got = get_floats(&memory, RESULT, HIDDEN as usize);
        let expected = composed(&layer);
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            expected.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        // The order of execution within a stage does not matter.
        let reversed = loaded(&layer);
        let kernel = OptKernel::decode(&command(), &reversed).unwrap();
        for stage in 0..kernel.stages() {
            for item in kernel.stage_items(stage).rev() {
                kernel.execute(item, &reversed).unwrap();
            }
        }
        assert_eq!(get_floats(&reversed, RESULT, HIDDEN as usize), got);
    }

    #[test]
    fn residual_adds_the_parts_in_part_order_then_the_bias_then_the_input() {
        let layer = layer();
        let mut memory = loaded(&layer);
        let kernel = OptKernel::decode(&command(), &memory).unwrap();
        // Part sums of row 9 (packet 1, lane 1) chosen so that the order shows: (1e8 + -1e8)
        // + 1 = 1, while any order adding the 1 before both large terms gives 0.
        let out_partials = WORKSPACE + 4 * kernel.layout().out_partials;
        for (part, value) in [1e8_f32, -1e8, 1.0].into_iter().enumerate() {
            put_floats(
                &mut memory,
                out_partials + 4 * (part as u64 * 128 + 9),
                &[value],
            );
        }
        kernel.execute(STAGE_RANGES[9].start + 1, &memory).unwrap();
        let got = get_floats(&memory, RESULT + 4 * 9, 1)[0];
        assert_eq!(got, layer.x[9] + (1.0 + layer.output_bias[9]));
        assert_eq!(
            got,
            block_output(&[1e8, -1e8, 1.0], layer.output_bias[9], layer.x[9])
        );
    }

    #[test]
    fn the_split_changes_only_the_rounding_of_the_output_projection() {
        let layer = layer();
        let mut memory = loaded(&layer);
        run(&mut memory);
        let expected = get_floats(&memory, RESULT, HIDDEN as usize);
        for split in [1, 2, 4, MAX_OUTPUT_SPLIT] {
            let mut other = loaded(&layer);
            let mut p = parameters();
            p.output_split = split;
            other.put(DeviceAddress(PARAMETERS), &p);
            run(&mut other);
            let got = get_floats(&other, RESULT, HIDDEN as usize);
            for (g, e) in got.iter().zip(&expected) {
                assert!((g - e).abs() <= 1e-5 * e.abs().max(1.0), "split {split}");
            }
        }
    }

    #[test]
    fn execute_on_a_smaller_memory_reports_a_fault() {
        let memory = loaded(&layer());
        let kernel = OptKernel::decode(&command(), &memory).unwrap();
        let small = FakeMemory::new(0x3000);
        for stage in STAGE_RANGES {
            let item = stage.start;
            assert!(
                matches!(
                    kernel.execute(item, &small),
                    Err(FirmwareError::MemoryFault(_))
                ),
                "item {item}"
            );
        }
        assert_eq!(
            kernel.execute(261, &small),
            Err(FirmwareError::ArgumentOutOfRange)
        );
    }
}
