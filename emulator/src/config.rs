//! The device's parameters (the CCM and link rows of the paper's Table III).

use cosim_link::limits::{self, ConfigError};
use serde::{Deserialize, Serialize};

/// How the CCM scheduler hands work items to µthreads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheduling {
    /// Round-robin: item `i` goes to processing unit `i mod units`, whose µthreads take its
    /// items in order. Units that fall behind finish their items late: results complete out
    /// of offset order.
    Rr,
    /// FIFO: one queue; every free µthread takes the next item by offset.
    Fifo,
}

/// Most CCM µthreads a configuration may ask for (the model keeps a slot per µthread).
pub const MAX_UTHREADS: u64 = 1 << 20;

/// Most functional units (or issue slots) of one kind a sub-core may have.
pub const MAX_UNITS_PER_SUB_CORE: u32 = 1024;

/// Most device-memory channels a configuration may ask for (an item keeps one counter per
/// channel while it starts).
pub const MAX_MEMORY_CHANNELS: u32 = 64;

/// Largest channel interleave a configuration may ask for: 1 MiB.
pub const MAX_CHANNEL_INTERLEAVE_BYTES: u64 = 1 << 20;

/// Most device memory a configuration may ask for, in MiB: 64 GiB. Device memory is one
/// mapping of this size; the machine's available memory bounds it too
/// ([`DeviceConfig::check_device_memory`]).
pub const MAX_DEVICE_MEMORY_MIB: u64 = 64 * 1024;

/// Device and link parameters. Times are nanoseconds, frequencies megahertz, bandwidths bytes
/// per nanosecond (= GB/s).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, documented::DocumentedFields)]
#[serde(default, deny_unknown_fields)]
pub struct DeviceConfig {
    /// CCM processing units (paper Table III: 16).
    pub ccm_units: u32,
    /// Sub-cores per processing unit, each with its own instruction queue, issue logic and
    /// functional units (M²NDP `config/performance/M2NDP/m2ndp.config`: `enable_sub_core=1`,
    /// `num_sub_core=4`).
    pub ccm_sub_cores: u32,
    /// µthread slots per sub-core (paper Table III, "16 µthreads per subcore"; M²NDP
    /// `uthread_slots=16`, the depth of a sub-core's instruction queue).
    pub ccm_uthreads_per_sub_core: u32,
    /// Instructions a sub-core issues per cycle, at most one per µthread (M²NDP
    /// `max_inst_issue=4`; its issue loop takes one instruction from each µthread in turn).
    pub ccm_issue_width: u32,
    /// Scalar units per sub-core: integer, branch and (unified ALU) scalar floating-point
    /// instructions (M²NDP `num_i_units=2`, `use_unified_alu=1`).
    pub ccm_scalar_units: u32,
    /// Scalar address (load/store) units per sub-core (M²NDP `num_address_units=1`).
    pub ccm_scalar_memory_units: u32,
    /// Vector units per sub-core: vector arithmetic of every type, moves and reductions
    /// (M²NDP `num_v_f_units=1`, which also takes vector integer operations).
    pub ccm_vector_units: u32,
    /// Vector address (load/store) units per sub-core (M²NDP `num_v_address_units=1`).
    pub ccm_vector_memory_units: u32,
    /// CCM clock (paper Table III: 2 GHz).
    pub ccm_mhz: u64,
    /// CXL memory bandwidth: paper Table III's DDR5-4800 x 16 channels, 4800 MT/s x 8 bytes x
    /// 16 = 614.4 GB/s, split evenly over `ccm_memory_channels` (38.4 GB/s each); each
    /// channel is shared equally by the µthreads with traffic outstanding on it.
    pub ccm_memory_gbps: f64,
    /// Device memory channels (1..=64; paper Table III: "CXL memory: DDR5_4800, 16 channels").
    /// An item's traffic goes to the channels its addresses map to
    /// (`ccm_channel_interleave_bytes`), found by a dry run of its code when it starts; see
    /// `emulator::ccm`. 1: one pool of `ccm_memory_gbps` shared equally by every item with
    /// bytes to move, whatever its addresses.
    ///
    /// The default is 1, not Table III's 16, for now. Measured at paper scale on real data
    /// (2026-12-02, `axle eval --config` with 16, against the default): Figure 15's RR
    /// in-order/out-of-order ratio moved little (SSSP 1.02 to 1.07, PageRank 1.00 to 1.01,
    /// DLRM 1.01 to 1.01; the paper's 1.74, 1.38, 1.41); SSSP at 12.5% slot capacity showed
    /// back-pressure (7.5% of the run, against 0.00% with one pool; the paper's 50.8%);
    /// REPRODUCTION's summary went from 53 to 58 of 66 claims in direction, 16 to 18 of 28
    /// statements held, 9 to 8 of 38 numbers within 10%; the evaluation took 2.4 times as long
    /// (back to back: 97 s of wall time and 186 s of user CPU, against 41 s and 73 s; the
    /// dry run of every item and one memory part per item and channel). Those figures predate
    /// M²NDP's channel hash and per-channel cache (`emulator::dram::channel_of`,
    /// `BurstCache`); with them (`axle eval --figure 15,16 --scale paper --config`, real data,
    /// 2026-12-02 07:23), Figure 15's RR ratios at 16 channels are SSSP 1.03, PageRank 1.00,
    /// DLRM 1.01, and SSSP shows no back-pressure at 12.5% slot capacity (0.00%). Made cheaper
    /// since (one projection per channel and time step, a 4-ary finish queue; the same output), the
    /// evaluation at 16 still took 2.42 times the user CPU of one channel, back to back on the
    /// loaded machine (2026-12-02 06:19 to 06:56, load 9 to 10: 438.7 s against 181.3 s;
    /// `/usr/bin/time axle eval --figure all --config`): the cost is in the item parts, one per
    /// item and channel (each pushed, popped and projected), and in the dry runs. Making it
    /// the default moves every figure and the adaptive-polling bound's assumptions (equal
    /// sharing of memory; `host_runtime::adaptive_poll`) and must be checked as such.
    pub ccm_memory_channels: u32,
    /// Bytes of consecutive addresses on one channel before the next channel takes over
    /// (a power of two, 32..=1 MiB): M²NDP `m2ndp.config`, `channel_interleave_size=256` (its
    /// `memory_mapping` puts the channel bits at address bits 8 and up, and
    /// `channel_indexing_policy=1` hashes them with the bits above: `emulator::dram::channel_of`).
    pub ccm_channel_interleave_bytes: u64,
    /// The latency of a work item's first device-memory access, a floor under the item's
    /// duration (see `emulator::ccm`): our assumption of an unloaded access, a DDR5-4800 row
    /// miss (tRP + tRCD + CL = 3 x 16.25 ns at JEDEC 40-39-39, about 49 ns) plus the way
    /// through the unit's L1 and L2 (M²NDP's hit latencies, 4 and 8 cycles) and the on-device
    /// crossbar to the memory controller, rounded up to 100 ns; M²NDP does not state one figure.
    pub ccm_memory_latency_ns: u64,
    /// Device memory size in MiB (data sets, results and the firmware scratch area).
    pub device_memory_mib: u64,
    /// Work-item scheduling (paper Table III: round-robin; Section V-E: FIFO selectable).
    pub scheduling: Scheduling,
    /// CXL.mem round trip (paper Table III: 70 ns; M²NDP `cxl_link.icnt`: `link_latency =
    /// 274` cycles of its 8 GHz link clock, about 35 ns each way).
    pub cxl_mem_round_trip_ns: u64,
    /// CXL.io round trip (paper Table III: 350 ns, a conservative value against the 275 ns
    /// measured pin to pin that it cites).
    pub cxl_io_round_trip_ns: u64,
    /// Link bandwidth per direction: M²NDP's CXL link moves one 8-byte flit per cycle of its
    /// 8000 MHz link clock (`cxl_link.icnt`: `flit_size = 8`; `m2ndp.config`: `freq=..,8000,..`),
    /// 64 GB/s, which is also a PCIe 5.0 x16 link's.
    pub link_gbps: f64,
    /// Framing and header bytes per transaction on the link: a PCIe transaction layer packet
    /// with a 64-bit address carries a 16-byte (4 DW) header, a 4-byte LCRC and 4 bytes of
    /// sequence number and framing (PCIe base specification), 24 bytes.
    pub link_overhead_bytes: u64,
    /// Firmware clock (paper Table III, RP: 2 GHz).
    pub firmware_mhz: u64,
    /// Firmware cycles to handle one mailbox event: a doorbell or dequeue, and posting a
    /// completion (interrupt entry, mailbox and descriptor accesses, dispatch). The paper gives
    /// only the firmware clock; 2000 cycles (1 µs at 2 GHz) is our assumption for a software
    /// handler on a general-purpose core such as the prototype's Cortex-A72 (paper Section II).
    pub firmware_mailbox_cycles: u64,
    /// DMA preparation latency per request (paper Table III: 500 ns per request; Section V-A:
    /// a one-way control-plane latency such as descriptor stores). The request's channel is
    /// busy for it.
    pub dma_preparation_ns: u64,
    /// DMA engine channels (1..=64): each takes one request at a time and is busy from the
    /// start of its preparation until its last write is on the link; a request is accepted
    /// only when a channel is free (see `emulator::dma`). The paper and M2NDP are silent (M2NDP
    /// has no such engine); the default 4 is the card-to-host channel count of the DMA IP of
    /// the paper's prototype class (a Versal-based CXL card, Section II): AMD's DMA/Bridge
    /// Subsystem for PCI Express (XDMA, PG195: "up to four card-to-host (C2H/Write) data
    /// channels"; Versal CPM's XDMA mode, PG347, likewise). The limit 64 is the firmware's
    /// in-flight window (`firmware::executor::MAX_IN_FLIGHT`): more channels would never be
    /// used.
    pub dma_channels: u32,
    /// Interrupt handling latency per DMA request (AXLE_Interrupt; paper Table III: 50 µs).
    pub interrupt_ns: u64,
    /// Interleaved execution (a correctness test mode, ours; `axle run --interleave SEED`):
    /// the work items running at once run their kernel code with their device-memory
    /// accesses interleaved one 8-byte word at a time, in an order drawn from this seed, so
    /// that a race between two items shows (see `emulator::ccm::interleave`). Timing figures
    /// are those of the default model. Unset (the default): each item's code runs in one
    /// piece when it ends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interleave_seed: Option<u64>,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig {
            ccm_units: 16,
            ccm_sub_cores: 4,
            ccm_uthreads_per_sub_core: 16,
            ccm_issue_width: 4,
            ccm_scalar_units: 2,
            ccm_scalar_memory_units: 1,
            ccm_vector_units: 1,
            ccm_vector_memory_units: 1,
            ccm_mhz: 2000,
            ccm_memory_gbps: 614.4,
            ccm_memory_channels: 1,
            ccm_channel_interleave_bytes: 256,
            ccm_memory_latency_ns: 100,
            device_memory_mib: 256,
            scheduling: Scheduling::Rr,
            cxl_mem_round_trip_ns: 70,
            cxl_io_round_trip_ns: 350,
            link_gbps: 64.0,
            link_overhead_bytes: 24,
            firmware_mhz: 2000,
            firmware_mailbox_cycles: 2000,
            dma_preparation_ns: 500,
            dma_channels: 4,
            interrupt_ns: 50_000,
            interleave_seed: None,
        }
    }
}

impl DeviceConfig {
    /// Checks every parameter for a value the model cannot run with. Each error names the
    /// field (`device.<name>`), the value and the limit.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            ("ccm_units", u64::from(self.ccm_units)),
            ("ccm_sub_cores", u64::from(self.ccm_sub_cores)),
            (
                "ccm_uthreads_per_sub_core",
                u64::from(self.ccm_uthreads_per_sub_core),
            ),
            ("ccm_issue_width", u64::from(self.ccm_issue_width)),
            ("ccm_scalar_units", u64::from(self.ccm_scalar_units)),
            (
                "ccm_scalar_memory_units",
                u64::from(self.ccm_scalar_memory_units),
            ),
            ("ccm_vector_units", u64::from(self.ccm_vector_units)),
            (
                "ccm_vector_memory_units",
                u64::from(self.ccm_vector_memory_units),
            ),
            ("ccm_mhz", self.ccm_mhz),
            ("firmware_mhz", self.firmware_mhz),
            ("device_memory_mib", self.device_memory_mib),
        ];
        for (name, value) in positive {
            if value == 0 {
                return Err(ConfigError::Zero {
                    field: format!("device.{name}"),
                });
            }
        }
        for (name, value) in [
            ("ccm_memory_gbps", self.ccm_memory_gbps),
            ("link_gbps", self.link_gbps),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(ConfigError::NotPositive {
                    field: format!("device.{name}"),
                    value,
                });
            }
        }
        let uthreads = u64::from(self.ccm_units)
            .saturating_mul(u64::from(self.ccm_sub_cores))
            .saturating_mul(u64::from(self.ccm_uthreads_per_sub_core));
        limits::check(
            "device.ccm_units x ccm_sub_cores x ccm_uthreads_per_sub_core",
            uthreads,
            MAX_UTHREADS,
            "the CCM µthreads the model keeps a slot for",
        )?;
        for (name, value) in [
            ("ccm_issue_width", self.ccm_issue_width),
            ("ccm_scalar_units", self.ccm_scalar_units),
            ("ccm_scalar_memory_units", self.ccm_scalar_memory_units),
            ("ccm_vector_units", self.ccm_vector_units),
            ("ccm_vector_memory_units", self.ccm_vector_memory_units),
        ] {
            limits::check(
                &format!("device.{name}"),
                u64::from(value),
                u64::from(MAX_UNITS_PER_SUB_CORE),
                "the units of one kind a sub-core may have",
            )?;
        }
        if self.ccm_memory_channels == 0 || self.ccm_memory_channels > MAX_MEMORY_CHANNELS {
            return Err(ConfigError::OutOfRange {
                field: "device.ccm_memory_channels".into(),
                value: u64::from(self.ccm_memory_channels),
                rule: format!("it must be 1..={MAX_MEMORY_CHANNELS}"),
            });
        }
        let interleave = self.ccm_channel_interleave_bytes;
        if !(interleave.is_power_of_two()
            && (32..=MAX_CHANNEL_INTERLEAVE_BYTES).contains(&interleave))
        {
            return Err(ConfigError::OutOfRange {
                field: "device.ccm_channel_interleave_bytes".into(),
                value: interleave,
                rule: format!("it must be a power of two in 32..={MAX_CHANNEL_INTERLEAVE_BYTES}"),
            });
        }
        let channel_limit = firmware::executor::MAX_IN_FLIGHT as u32;
        if self.dma_channels == 0 || self.dma_channels > channel_limit {
            return Err(ConfigError::OutOfRange {
                field: "device.dma_channels".into(),
                value: u64::from(self.dma_channels),
                rule: format!("it must be 1..={channel_limit} (the firmware keeps at most {channel_limit} DMA requests in flight)"),
            });
        }
        self.check_device_memory()
    }

    /// Device memory against the model's limit ([`MAX_DEVICE_MEMORY_MIB`]) and the machine's
    /// available memory (`cosim_link::limits`), before it is mapped.
    pub fn check_device_memory(&self) -> Result<(), ConfigError> {
        limits::check(
            "device.device_memory_mib",
            self.device_memory_mib,
            MAX_DEVICE_MEMORY_MIB,
            "the model's device memory: 64 GiB",
        )?;
        limits::bytes("device.device_memory_mib", self.device_memory_mib, 1 << 20)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_channels_and_interleave_are_bounded() {
        let with = |ccm_memory_channels, ccm_channel_interleave_bytes| DeviceConfig {
            ccm_memory_channels,
            ccm_channel_interleave_bytes,
            ..DeviceConfig::default()
        };
        assert!(with(1, 32).validate().is_ok());
        assert!(with(64, 1 << 20).validate().is_ok());
        for (channels, interleave, field) in [
            (0, 256, "ccm_memory_channels"),
            (65, 256, "ccm_memory_channels"),
            (16, 16, "ccm_channel_interleave_bytes"),
            (16, 384, "ccm_channel_interleave_bytes"),
            (16, 2 << 20, "ccm_channel_interleave_bytes"),
        ] {
            let error = with(channels, interleave)
                .validate()
                .unwrap_err()
                .to_string();
            assert!(error.contains(field), "{error}");
        }
    }

    #[test]
    fn dma_channels_must_be_between_one_and_the_firmware_window() {
        let with = |dma_channels| DeviceConfig {
            dma_channels,
            ..DeviceConfig::default()
        };
        assert_eq!(DeviceConfig::default().dma_channels, 4);
        assert!(with(1).validate().is_ok());
        assert!(with(64).validate().is_ok());
        for refused in [0, 65] {
            let error = with(refused).validate().unwrap_err().to_string();
            assert!(
                error.contains("dma_channels") && error.contains(&refused.to_string()),
                "{error}"
            );
        }
    }

    #[test]
    fn ccm_uthreads_beyond_the_model_are_refused_naming_value_and_limit() {
        // 4e9 units would have allocated ~16 GB of µthread slots.
        let config = DeviceConfig {
            ccm_units: 4_000_000_000,
            ..DeviceConfig::default()
        };
        let error = config.validate().unwrap_err().to_string();
        assert!(
            error.contains("ccm_units")
                && error.contains("256000000000")
                && error.contains(&MAX_UTHREADS.to_string()),
            "{error}"
        );
    }

    #[test]
    fn device_memory_beyond_the_model_or_the_machine_is_refused() {
        let with = |device_memory_mib| DeviceConfig {
            device_memory_mib,
            ..DeviceConfig::default()
        };
        let error = with(MAX_DEVICE_MEMORY_MIB + 1)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("device.device_memory_mib") && error.contains("65537"),
            "{error}"
        );
        // 64 GiB passes the model's limit; whether it passes the machine's depends on the
        // machine, so only a size beyond any machine's memory is asserted.
        let machine = limits::Machine::get().memory_budget >> 20;
        if machine < MAX_DEVICE_MEMORY_MIB {
            let error = with(MAX_DEVICE_MEMORY_MIB)
                .validate()
                .unwrap_err()
                .to_string();
            assert!(error.contains("available"), "{error}");
        }
        assert_eq!(with(256).validate(), Ok(()));
    }
}
