//! The run configuration: the paper's Table III parameters and the AXLE knobs, in one TOML
//! file whose defaults `axle config` prints.

use emulator::DeviceConfig;
use host_runtime::HostConfig;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// AXLE ring and streaming parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// Reads a TOML file; unspecified fields keep their defaults, unknown fields are errors.
    pub fn load(path: &Path) -> anyhow::Result<AxleConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read config {}: {e}", path.display()))?;
        let config: AxleConfig = toml::from_str(&text)
            .map_err(|e| anyhow::anyhow!("invalid config {}: {e}", path.display()))?;
        Ok(config)
    }

    /// The configuration as TOML.
    pub fn to_toml(&self) -> anyhow::Result<String> {
        Ok(toml::to_string_pretty(self)?)
    }

    /// Checks every parameter.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.host.validate().map_err(anyhow::Error::msg)?;
        self.device.validate().map_err(anyhow::Error::msg)?;
        let slot = self.axle.slot_size;
        if !(8..=4096).contains(&slot) || !slot.is_power_of_two() {
            // A power of two never straddles a 4 KiB frame of the DMA region.
            anyhow::bail!("axle.slot_size must be a power of two between 8 and 4096, not {slot}");
        }
        if self.axle.slots == 0 {
            anyhow::bail!("axle.slots must be positive");
        }
        self.streaming_factor()?;
        Ok(())
    }

    /// The streaming factor, parsed.
    pub fn streaming_factor(&self) -> anyhow::Result<firmware::StreamingFactor> {
        parse_streaming_factor(&self.axle.streaming_factor)
    }
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
        anyhow::bail!("streaming factor must be positive");
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
        anyhow::bail!("duration `{text}` is out of range");
    }
    Ok(ns.round() as u64)
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn unknown_config_keys_are_rejected() {
        let error = toml::from_str::<AxleConfig>("[host]\npoll_intervall_ns = 5\n").unwrap_err();
        assert!(error.to_string().contains("poll_intervall_ns"));
    }
}
