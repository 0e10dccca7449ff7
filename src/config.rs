//! The run configuration: the paper's Table III parameters and the AXLE knobs, in one TOML
//! file whose defaults `axle config` prints.

use cosim_link::limits;
use documented::DocumentedFields;
use emulator::DeviceConfig;
use host_driver::sgl::{entries_for_first_region, FirstRegionError, MAX_REGION_BYTES};
use host_runtime::HostConfig;
use serde::{Deserialize, Serialize};
use shared_abi::region::RingLayout;
use shared_abi::sgl::MAX_SG_ENTRIES;
use std::path::Path;

/// Virtual-time limit of a run, in nanoseconds: 100 s, far beyond any workload (the longest,
/// OPT-2.7B at paper scale, takes 42 ms), so hitting it means a bug or a configuration that
/// cannot finish. It bounds virtual time only; `crate::run` bounds wall time separately.
pub const VIRTUAL_TIME_LIMIT_NS: u64 = 100_000_000_000;

/// Host "physical" memory beyond twice the DMA region. Twice, because the frame allocator
/// leaves at least one free frame after every run of frames it hands out (runs are never
/// physically adjacent); the slack covers the reserved frame 0 and rounding. Keeping host
/// memory this small matters across processes, where all of it is pinned with `mlock`.
const HOST_MEMORY_SLACK: u64 = 64 << 10;

/// The rings of a streaming run: their layout and the host memory that holds them, checked
/// ([`AxleConfig::ring_plan`]) before anything is allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingPlan {
    /// The ring pair's layout.
    pub layout: RingLayout,
    /// Bytes of host physical memory for the run (twice the region, plus slack).
    pub host_bytes: u64,
}

/// AXLE ring and streaming parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, DocumentedFields)]
#[serde(default, deny_unknown_fields)]
pub struct StreamingConfig {
    /// Bytes per DMA (payload) slot: 32 or 64 in the paper; a power of two from 8 to 4096.
    pub slot_size: u32,
    /// Slots in each ring (DMA slot capacity).
    pub slots: u32,
    /// Streaming factor: bytes (`"32"` = SF1 with 32-byte slots) or a percentage of the
    /// launch's result (`"25%"`).
    pub streaming_factor: String,
    /// Out-of-order streaming; `false` streams strictly by result offset.
    pub out_of_order: bool,
}

impl Default for StreamingConfig {
    fn default() -> Self {
        StreamingConfig {
            slot_size: 32,
            slots: 50_000,
            streaming_factor: "32".into(),
            out_of_order: true,
        }
    }
}

/// Workload parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, DocumentedFields)]
#[serde(default, deny_unknown_fields)]
pub struct WorkloadConfig {
    /// Input size: `paper` (Table IV, the default) or `small` (tests).
    pub scale: workloads::Scale,
    /// Seed of every generated input.
    pub seed: u64,
    /// KNN: queries in the batch.
    pub queries: u32,
    /// KNN: neighbours per query.
    pub k: u32,
    /// KNN: distances per host task.
    pub task_rows: u32,
    /// SSSP: launches (Bellman-Ford rounds); 0 runs until a launch changes no distance.
    pub iterations: u32,
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        WorkloadConfig {
            scale: workloads::Scale::Paper,
            seed: 42,
            queries: workloads::knn::DEFAULT_QUERIES,
            k: workloads::knn::DEFAULT_K,
            task_rows: workloads::knn::DEFAULT_TASK_ROWS,
            iterations: workloads::sssp::DEFAULT_ITERATIONS,
        }
    }
}

/// Everything a run needs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AxleConfig {
    /// Host parameters.
    pub host: HostConfig,
    /// Device and link parameters.
    pub device: DeviceConfig,
    /// AXLE parameters.
    pub axle: StreamingConfig,
    /// Workload parameters.
    pub workload: WorkloadConfig,
}

impl AxleConfig {
    /// Reads a TOML file; unspecified fields keep their defaults, unknown fields are errors. An
    /// error names the file, the field (`[host] host_units`), the line and what was wrong.
    pub fn load(path: &Path) -> anyhow::Result<AxleConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read config {}: {e}", path.display()))?;
        let config: AxleConfig = toml::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}", describe_toml_error(path, &text, &e)))?;
        Ok(config)
    }

    /// The configuration as TOML.
    pub fn to_toml(&self) -> anyhow::Result<String> {
        Ok(toml::to_string_pretty(self)?)
    }

    /// The configuration as TOML with each field's documentation (meaning, unit, source) as
    /// comments above it: what `axle config` prints. It reads back as the same configuration.
    pub fn to_annotated_toml(&self) -> anyhow::Result<String> {
        let plain = self.to_toml()?;
        let mut out = String::from(
            "# AXLE configuration: the defaults, the paper's Table III (see README, \"Model\").\n\
             # Edit and pass with --config FILE; fields left out keep these values; flags override.\n",
        );
        let mut section = String::new();
        for line in plain.lines() {
            let trimmed = line.trim();
            if let Some(name) = trimmed.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
                section = name.to_owned();
                out.push('\n');
                out.push_str(line);
                out.push('\n');
                continue;
            }
            if let Some((key, _)) = trimmed.split_once(" = ") {
                if let Some(docs) = field_docs(&section, key.trim()) {
                    for comment in wrap_comment(docs, 96) {
                        out.push_str(&comment);
                        out.push('\n');
                    }
                }
            }
            if !trimmed.is_empty() {
                out.push_str(line);
                out.push('\n');
            }
        }
        Ok(out)
    }

    /// Checks every parameter before anything is allocated for it: each section's own checks
    /// (`HostConfig::validate`, `DeviceConfig::validate`), the rates against the virtual-time
    /// limit, the slot size, the ring against the device's scatter-gather table and the
    /// machine's memory ([`AxleConfig::ring_plan`]), and the streaming factor.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.host.validate().map_err(anyhow::Error::msg)?;
        self.device.validate().map_err(anyhow::Error::msg)?;
        self.check_rates()?;
        let slot = self.axle.slot_size;
        if !(8..=4096).contains(&slot) || !slot.is_power_of_two() {
            // A power of two never straddles a 4 KiB frame of the DMA region.
            anyhow::bail!(
                "axle.slot_size (--slot-size) is {slot}; it must be a power of two from 8 to 4096"
            );
        }
        if self.axle.slots == 0 {
            anyhow::bail!("axle.slots (--slots) is 0; it must be at least 1");
        }
        self.ring_plan()?;
        self.streaming_factor()?;
        Ok(())
    }

    /// Refuses a rate so low that one unit of work (an instruction, a byte) would take longer
    /// than a run's virtual-time limit ([`VIRTUAL_TIME_LIMIT_NS`]): no run could finish, and
    /// the durations would saturate the model's integer ticks. Any rate above these bounds is
    /// representable: the longest single duration is then below the limit, about 2^49 ticks
    /// of 1/6 ns, far from `u64::MAX`.
    fn check_rates(&self) -> anyhow::Result<()> {
        let limit_s = VIRTUAL_TIME_LIMIT_NS as f64 / 1e9;
        // One instruction: 1 / (ipc x MHz) µs.
        let min_ipc = 1e3 / (self.host.host_mhz as f64 * VIRTUAL_TIME_LIMIT_NS as f64);
        if self.host.host_ipc < min_ipc {
            anyhow::bail!(
                "host.host_ipc is {:e}: one instruction would take {:.3e} s at {} MHz, longer than a run's virtual-time limit of {limit_s} s, so no run could finish; it must be at least {min_ipc:.3e}",
                self.host.host_ipc,
                1e-6 / (self.host.host_ipc * self.host.host_mhz as f64),
                self.host.host_mhz
            );
        }
        // One byte at G GB/s takes 1 / G ns.
        let min_gbps = 1.0 / VIRTUAL_TIME_LIMIT_NS as f64;
        let uthreads = self.host.uthreads() as f64;
        for (name, gbps, share) in [
            (
                "host.host_memory_gbps",
                self.host.host_memory_gbps,
                uthreads,
            ),
            ("host.input_store_gbps", self.host.input_store_gbps, 1.0),
            ("device.link_gbps", self.device.link_gbps, 1.0),
            ("device.ccm_memory_gbps", self.device.ccm_memory_gbps, 1.0),
        ] {
            let least = min_gbps * share;
            if gbps < least {
                let per = if share > 1.0 {
                    format!(" (each of the {uthreads} host µthreads has 1/{uthreads} of it)")
                } else {
                    String::new()
                };
                anyhow::bail!(
                    "{name} is {gbps:e} GB/s{per}: one byte would take longer than a run's virtual-time limit of {limit_s} s, so no run could finish; it must be at least {least:.3e}"
                );
            }
        }
        Ok(())
    }

    /// The ring pair `axle.slots` x `axle.slot_size` describes and the host memory for it,
    /// after checking, before anything is allocated, that
    ///
    /// - the region fits the longest region the device's scatter-gather table
    ///   ([`MAX_SG_ENTRIES`] entries) can describe (`host_driver::sgl::MAX_REGION_BYTES`);
    /// - the frames the run's allocator will hand out need at most [`MAX_SG_ENTRIES`]
    ///   entries (a dry run of the deterministic frame allocator,
    ///   `host_driver::sgl::entries_for_first_region`);
    /// - the host memory fits the machine's available memory (`cosim_link::limits`).
    ///
    /// A refusal names `--slots`, the value and the largest slot count that fits.
    pub fn ring_plan(&self) -> anyhow::Result<RingPlan> {
        let slots = self.axle.slots;
        let slot_size = self.axle.slot_size;
        let layout = RingLayout::new(slots, slots, slot_size).map_err(|status| {
            anyhow::anyhow!("invalid ring shape ({slots} slots of {slot_size} bytes): {status}")
        })?;
        let fits = |slots: u32| match RingLayout::new(slots, slots, slot_size) {
            Ok(layout) => entries_for_first_region(
                host_memory_bytes(layout.region_length()),
                layout.region_length(),
            )
            .is_ok(),
            Err(_) => false,
        };
        let host_bytes = host_memory_bytes(layout.region_length());
        match entries_for_first_region(host_bytes, layout.region_length()) {
            Ok(_) => {}
            Err(FirstRegionError::TooLong { .. }) | Err(FirstRegionError::List(_)) => {
                let most = largest_accepted(slot_size, fits);
                let refused = limits::Refused {
                    what: "axle.slots (--slots)".into(),
                    value: u64::from(slots),
                    limit: u64::from(most),
                    reason: format!(
                        "with {slot_size}-byte slots; the DMA region, {} bytes here, must fit the device's scatter-gather table of {MAX_SG_ENTRIES} entries of physically contiguous host memory",
                        layout.region_length()
                    ),
                };
                anyhow::bail!("{refused}; use fewer or smaller slots");
            }
            Err(error) => anyhow::bail!(
                "axle.slots (--slots) is {slots}: the host memory of the ring cannot be laid out: {error}"
            ),
        }
        limits::bytes(
            "the host memory for the ring (axle.slots, --slots)",
            host_bytes,
            1,
        )?;
        Ok(RingPlan { layout, host_bytes })
    }

    /// Checks the workload parameters that size `workload`'s data before it is generated:
    /// KNN's query batch (each query is a vector and a row of distances, held about
    /// [`QUERY_COPIES_AT_PEAK`] times over host and device memory).
    pub fn check_workload(&self, workload: &str) -> anyhow::Result<()> {
        let Some(shape) = workloads::knn::KnnShape::by_name(workload) else {
            return Ok(());
        };
        let queries = u64::from(self.workload.queries);
        let per_query = (u64::from(shape.dim) + u64::from(shape.rows)) * 4;
        let device_limit = (emulator::config::MAX_DEVICE_MEMORY_MIB << 20) / per_query;
        limits::check(
            "workload.queries (--queries)",
            queries,
            device_limit,
            &format!(
                "each {workload} query takes {per_query} bytes of device memory ({} elements and {} distances of 4 bytes), and device memory is at most {} MiB",
                shape.dim,
                shape.rows,
                emulator::config::MAX_DEVICE_MEMORY_MIB
            ),
        )?;
        // At its peak a run holds each query about four times: the generated vector and its
        // row of distances, their bytes while they are loaded, the device's copy, and the
        // host's read of the results (measured: 1,000,000 knn-a queries passed a check of
        // two copies and were killed at 24 GB).
        limits::bytes(
            "workload.queries (--queries)",
            queries,
            QUERY_COPIES_AT_PEAK * per_query,
        )?;
        Ok(())
    }

    /// The streaming factor, parsed.
    pub fn streaming_factor(&self) -> anyhow::Result<firmware::StreamingFactor> {
        parse_streaming_factor(&self.axle.streaming_factor)
    }
}

/// The doc comment of field `key` of section `section`, if it has one.
fn field_docs(section: &str, key: &str) -> Option<&'static str> {
    match section {
        "host" => HostConfig::get_field_docs(key).ok(),
        "device" => DeviceConfig::get_field_docs(key).ok(),
        "axle" => StreamingConfig::get_field_docs(key).ok(),
        "workload" => WorkloadConfig::get_field_docs(key).ok(),
        _ => None,
    }
}

/// `text` as `# ` comment lines of at most `width` characters (a word longer than that stands
/// on its own line).
fn wrap_comment(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for paragraph in text.lines() {
        let mut line = String::from("#");
        for word in paragraph.split_whitespace() {
            if line.len() > 1 && line.len() + 1 + word.len() > width {
                lines.push(std::mem::replace(&mut line, String::from("#")));
            }
            line.push(' ');
            line.push_str(word);
        }
        lines.push(line);
    }
    lines
}

/// Copies of a KNN query's bytes a run holds at its peak (see [`AxleConfig::check_workload`]).
pub const QUERY_COPIES_AT_PEAK: u64 = 4;

/// Host physical memory for a DMA region of `region_length` bytes: twice the region plus
/// [`HOST_MEMORY_SLACK`], in whole pages (the region is at most
/// `host_driver::sgl::MAX_REGION_BYTES` once checked; saturating before).
fn host_memory_bytes(region_length: u64) -> u64 {
    region_length
        .saturating_mul(2)
        .saturating_add(HOST_MEMORY_SLACK)
        .div_ceil(4096)
        .saturating_mul(4096)
}

/// Host physical memory of a run without a ring (RP, BS): the slack only.
pub fn host_memory_without_ring() -> u64 {
    host_memory_bytes(0)
}

/// The largest slot count of `slot_size` bytes that `fits` accepts: a binary search between 1
/// and the most slots whose region is within `MAX_REGION_BYTES` (at most 32 dry runs, each
/// over at most 64 MiB of frames; only on a refusal). 0 when not even one slot fits.
fn largest_accepted(slot_size: u32, fits: impl Fn(u32) -> bool) -> u32 {
    let within = |slots: u32| {
        RingLayout::new(slots, slots, slot_size)
            .is_ok_and(|layout| layout.region_length() <= MAX_REGION_BYTES)
    };
    let search = |accept: &dyn Fn(u32) -> bool, mut high: u32| {
        // Largest n in 1..=high with accept(n), assuming accept is monotonic.
        let mut low = 0u32;
        while low < high {
            let middle = low + (high - low).div_ceil(2);
            if accept(middle) {
                low = middle;
            } else {
                high = middle - 1;
            }
        }
        low
    };
    let longest = search(&within, u32::MAX);
    search(&fits, longest)
}

/// A TOML error as a sentence: the file, the field (`[host] host_units`, found from the
/// error's span), the line, and what was wrong with the value, with the range of the type
/// for an integer out of range.
fn describe_toml_error(path: &Path, text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim();
    let Some(span) = error.span() else {
        return format!("invalid config {}: {message}", path.display());
    };
    let before = text.get(..span.start).unwrap_or("");
    let line_number = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |at| at + 1);
    let line = text
        .get(line_start..)
        .and_then(|rest| rest.lines().next())
        .unwrap_or("");
    // The value as written: from the span to the end of its line, without a comment (a
    // number's span may cover only its first digit).
    let value = text
        .get(span.start..)
        .and_then(|rest| rest.lines().next())
        .map(|rest| rest.split('#').next().unwrap_or(rest).trim())
        .unwrap_or("");
    // The key of this line, if the span is a value (`key = value`).
    let key = line
        .split_once('=')
        .map(|(key, _)| key.trim())
        .filter(|key| !key.is_empty() && !key.starts_with('['));
    // The nearest table header above.
    let table = before
        .lines()
        .rev()
        .map(str::trim)
        .find(|line| line.starts_with('[') && line.ends_with(']'));
    // An unknown key names itself in the message.
    let key = key.filter(|_| !message.starts_with("unknown field"));
    let field = match (table, key) {
        (Some(table), Some(key)) => format!("{table} {key}"),
        (None, Some(key)) => key.to_owned(),
        (Some(table), None) => table.to_owned(),
        (None, None) => String::new(),
    };
    let range = |kind: &str| match kind {
        "u32" => Some(format!("0 to {}", u32::MAX)),
        "u64" => Some(format!(
            "0 to {} (a TOML integer is at most {})",
            u64::MAX,
            i64::MAX
        )),
        "i64" => Some(format!("{} to {}", i64::MIN, i64::MAX)),
        "usize" => Some(format!("0 to {}", usize::MAX)),
        _ => None,
    };
    let what = if message.contains("number too large to fit in target type") {
        format!(
            "the number {value} is too large: a TOML integer is at most {}",
            i64::MAX
        )
    } else if let Some(kind) = message
        .strip_prefix("invalid value: integer `")
        .and_then(|rest| rest.split_once("`, expected "))
        .map(|(_, kind)| kind.trim())
    {
        match range(kind) {
            Some(range) => format!("{value} is out of range for this field ({range})"),
            None => message.to_owned(),
        }
    } else {
        message.to_owned()
    };
    let at = if field.is_empty() {
        format!("line {line_number}")
    } else {
        format!("{field} (line {line_number})")
    };
    format!("invalid config {}: {at}: {what}", path.display())
}

/// Parses `"32"` (bytes) or `"25%"` (of the result).
pub fn parse_streaming_factor(text: &str) -> anyhow::Result<firmware::StreamingFactor> {
    let text = text.trim();
    if let Some(percent) = text.strip_suffix('%') {
        let value: u32 = percent.trim().parse().map_err(|_| {
            anyhow::anyhow!("streaming factor `{text}`: expected a percentage such as 25%")
        })?;
        if value == 0 || value > 100 {
            anyhow::bail!("streaming factor `{text}`: the percentage must be between 1 and 100");
        }
        return Ok(firmware::StreamingFactor::PercentOfResult(value));
    }
    let bytes: u64 = text
        .strip_suffix('B')
        .unwrap_or(text)
        .trim()
        .parse()
        .map_err(|_| {
            anyhow::anyhow!(
                "streaming factor `{text}`: expected bytes (such as 32) or a percentage (25%)"
            )
        })?;
    if bytes == 0 {
        anyhow::bail!(
            "streaming factor `{text}` is 0; give a positive number of bytes (such as 32) or a percentage (25%)"
        );
    }
    Ok(firmware::StreamingFactor::Bytes(bytes))
}

/// Parses a duration such as `50ns`, `500ns`, `5us`, `5µs`, `1ms` or a plain number of
/// nanoseconds.
pub fn parse_duration_ns(text: &str) -> anyhow::Result<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().map_err(|_| {
        anyhow::anyhow!("duration `{text}`: expected a number with a unit, such as 50ns or 5us")
    })?;
    let scale = match unit.trim() {
        "" | "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        other => anyhow::bail!("duration `{text}`: unknown unit `{other}` (use ns, us, ms or s)"),
    };
    let ns = value * scale;
    if !(ns.is_finite() && (1.0..1e15).contains(&ns)) {
        anyhow::bail!("duration `{text}` is out of range: from 1ns to 1e15 ns (11.5 days)");
    }
    Ok(ns.round() as u64)
}

/// Parses a wall-time budget: a number with a unit, `500ms`, `90s`, `10m` (or `10min`), `1h`;
/// from 1 ms to 7 days.
pub fn parse_wall_limit(text: &str) -> Result<std::time::Duration, String> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let seconds_per = match unit.trim() {
        "ms" => 1e-3,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "" => {
            return Err(format!(
                "`{trimmed}` has no unit; give one, such as 90s or 10m"
            ))
        }
        other => {
            return Err(format!(
                "`{trimmed}`: unknown unit `{other}` (use ms, s, m or h)"
            ))
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{trimmed}` is not a duration such as 90s or 10m"))?;
    let seconds = value * seconds_per;
    const WEEK: f64 = 7.0 * 86_400.0;
    if !(seconds.is_finite() && (1e-3..=WEEK).contains(&seconds)) {
        return Err(format!(
            "`{trimmed}` is out of range; a wall-time limit is from 1ms to 7 days (168h)"
        ));
    }
    Ok(std::time::Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_annotated_configuration_reads_back_and_documents_every_field() {
        let text = AxleConfig::default().to_annotated_toml().unwrap();
        let parsed: AxleConfig = toml::from_str(&text).unwrap();
        assert_eq!(parsed, AxleConfig::default());
        let lines: Vec<&str> = text.lines().collect();
        let mut fields = 0;
        for (index, line) in lines.iter().enumerate() {
            if line.contains(" = ") && !line.starts_with('#') {
                fields += 1;
                assert!(
                    index > 0 && lines[index - 1].starts_with("# "),
                    "no comment above `{line}`"
                );
            }
        }
        assert!(fields > 40, "{fields} fields");
        assert!(
            text.contains("# CCM processing units (paper Table III: 16)."),
            "{text}"
        );
        assert!(
            lines.iter().all(|line| line.chars().count() <= 96),
            "{text}"
        );
    }

    use super::*;

    #[test]
    fn durations_accept_the_paper_polling_intervals() {
        assert_eq!(parse_duration_ns("50ns").unwrap(), 50);
        assert_eq!(parse_duration_ns("5us").unwrap(), 5000);
        assert_eq!(parse_duration_ns("5µs").unwrap(), 5000);
        assert_eq!(parse_duration_ns("1ms").unwrap(), 1_000_000);
        assert_eq!(parse_duration_ns("700").unwrap(), 700);
        assert!(parse_duration_ns("fast").is_err());
        assert!(parse_duration_ns("5 parsecs").is_err());
        assert!(parse_duration_ns("0ns").is_err());
    }

    #[test]
    fn streaming_factor_is_bytes_or_a_percentage() {
        assert_eq!(
            parse_streaming_factor("32").unwrap(),
            firmware::StreamingFactor::Bytes(32)
        );
        assert_eq!(
            parse_streaming_factor("25%").unwrap(),
            firmware::StreamingFactor::PercentOfResult(25)
        );
        assert!(parse_streaming_factor("0").is_err());
        assert!(parse_streaming_factor("150%").is_err());
        assert!(parse_streaming_factor("lots").is_err());
    }

    #[test]
    fn default_config_round_trips_through_toml() {
        let config = AxleConfig::default();
        let text = config.to_toml().unwrap();
        let back: AxleConfig = toml::from_str(&text).unwrap();
        assert_eq!(back, config);
    }

    fn with(change: impl FnOnce(&mut AxleConfig)) -> AxleConfig {
        let mut config = AxleConfig::default();
        change(&mut config);
        config
    }

    #[test]
    fn the_slot_limit_is_exact_and_every_smaller_count_fits() {
        for slot_size in [32, 64] {
            let huge = with(|c| {
                c.axle.slot_size = slot_size;
                c.axle.slots = u32::MAX;
            });
            let error = huge.validate().unwrap_err().to_string();
            assert!(
                error.contains("axle.slots (--slots) is 4294967295"),
                "{error}"
            );
            let limit: u32 = error
                .split("more than the limit of ")
                .nth(1)
                .and_then(|rest| rest.split(' ').next())
                .and_then(|number| number.parse().ok())
                .unwrap_or_else(|| panic!("no limit in {error}"));
            let at = |slots| {
                with(|c| {
                    c.axle.slot_size = slot_size;
                    c.axle.slots = slots;
                })
            };
            assert!(at(limit).validate().is_ok(), "{limit} slots of {slot_size}");
            assert!(at(limit + 1).validate().is_err());
            // The binary search assumes that fitting is monotonic: sample below the limit.
            for slots in (1..limit).step_by((limit / 40) as usize) {
                assert!(at(slots).validate().is_ok(), "{slots} slots of {slot_size}");
            }
        }
    }

    #[test]
    fn the_ring_plan_sizes_host_memory_from_the_region() {
        let plan = AxleConfig::default().ring_plan().unwrap();
        assert_eq!(
            plan.host_bytes,
            (2 * plan.layout.region_length() + HOST_MEMORY_SLACK).next_multiple_of(4096)
        );
        assert_eq!(host_memory_without_ring(), HOST_MEMORY_SLACK);
    }

    #[test]
    fn rates_too_slow_to_finish_within_the_virtual_time_limit_are_refused() {
        // 1e-12 instructions per cycle at 3 GHz: 333 s per instruction.
        let error = with(|c| c.host.host_ipc = 1e-12)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("host.host_ipc is 1e-12") && error.contains("100 s"),
            "{error}"
        );
        let error = with(|c| c.device.link_gbps = 1e-300)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(error.contains("device.link_gbps is 1e-300"), "{error}");
        // Just above the bound is accepted (slow, but a byte fits the limit).
        assert!(with(|c| c.device.link_gbps = 2e-11).validate().is_ok());
        // The per-µthread share of host memory bandwidth counts.
        let error = with(|c| c.host.host_memory_gbps = 1e-10)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(error.contains("64 host µthreads"), "{error}");
    }

    #[test]
    fn queries_are_bounded_before_the_data_is_generated() {
        let config = with(|c| c.workload.queries = u32::MAX);
        let error = config.check_workload("knn-a").unwrap_err().to_string();
        assert!(
            error.contains("workload.queries (--queries) is 4294967295")
                && error.contains("8704 bytes"),
            "{error}"
        );
        // Other workloads have no queries.
        assert!(config.check_workload("sssp").is_ok());
        assert!(AxleConfig::default().check_workload("knn-c").is_ok());
    }

    #[test]
    fn wall_limits_need_a_unit_and_a_sane_range() {
        use std::time::Duration;
        assert_eq!(parse_wall_limit("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_wall_limit("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_wall_limit("10min"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_wall_limit("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_wall_limit("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_wall_limit("90").unwrap_err().contains("no unit"));
        assert!(parse_wall_limit("0s").unwrap_err().contains("out of range"));
        assert!(parse_wall_limit("1000h")
            .unwrap_err()
            .contains("out of range"));
        assert!(parse_wall_limit("5 parsecs").is_err());
    }

    #[test]
    fn toml_errors_name_the_file_the_field_and_the_range() {
        let path = Path::new("my.toml");
        let describe = |text: &str| {
            let error = toml::from_str::<AxleConfig>(text).unwrap_err();
            describe_toml_error(path, text, &error)
        };
        let too_large = describe("[host]\nhost_units = 99999999999999999999\n");
        assert!(
            too_large.contains("my.toml")
                && too_large.contains("[host] host_units (line 2)")
                && too_large.contains("99999999999999999999")
                && too_large.contains("9223372036854775807"),
            "{too_large}"
        );
        let out_of_range = describe("[device]\nccm_units = 5000000000 # many\n");
        assert!(
            out_of_range.contains("[device] ccm_units (line 2)")
                && out_of_range.contains("5000000000 is out of range")
                && out_of_range.contains("4294967295"),
            "{out_of_range}"
        );
        let unknown = describe("[host]\npoll_intervall_ns = 5\n");
        assert!(
            unknown.contains("[host] (line 2)") && unknown.contains("poll_intervall_ns"),
            "{unknown}"
        );
    }

    #[test]
    fn unknown_config_keys_are_rejected() {
        let error = toml::from_str::<AxleConfig>("[host]\npoll_intervall_ns = 5\n").unwrap_err();
        assert!(error.to_string().contains("poll_intervall_ns"));
    }
}
