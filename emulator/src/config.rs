//! The device's parameters (the CCM and link rows of the paper's Table III).

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

/// Device and link parameters. Times are nanoseconds, frequencies megahertz, bandwidths bytes
/// per nanosecond (= GB/s).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeviceConfig {
    /// CCM processing units.
    pub ccm_units: u32,
    /// µthreads per CCM processing unit.
    pub ccm_uthreads: u32,
    /// CCM clock.
    pub ccm_mhz: u64,
    /// CXL memory bandwidth (DDR5-4800 x 16 channels = 614.4 GB/s).
    pub ccm_memory_gbps: f64,
    /// Latency of a device DRAM access, charged once per work item.
    pub ccm_memory_latency_ns: u64,
    /// Device memory size in MiB (data sets, results and the firmware scratch area).
    pub device_memory_mib: u64,
    /// Work-item scheduling.
    pub scheduling: Scheduling,
    /// CXL.mem round trip.
    pub cxl_mem_round_trip_ns: u64,
    /// CXL.io round trip.
    pub cxl_io_round_trip_ns: u64,
    /// Link bandwidth per direction (CXL 3.0 x16: 64 GB/s).
    pub link_gbps: f64,
    /// Framing and header bytes per transaction on the link (flit/TLP overhead).
    pub link_overhead_bytes: u64,
    /// Firmware clock (RP mailbox handling).
    pub firmware_mhz: u64,
    /// Firmware cycles to handle one mailbox event: a doorbell or dequeue, and posting a
    /// completion (interrupt entry, mailbox and descriptor accesses, dispatch; a software
    /// firmware core such as the prototype's Cortex-A72).
    pub firmware_mailbox_cycles: u64,
    /// DMA preparation latency per request (descriptor fetch and set-up; paper Table III:
    /// 500 ns per request). The request's channel is busy for it.
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
    /// Interrupt handling latency per DMA request (AXLE_Interrupt).
    pub interrupt_ns: u64,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig {
            ccm_units: 16,
            ccm_uthreads: 16,
            ccm_mhz: 2000,
            ccm_memory_gbps: 614.4,
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
        }
    }
}

impl DeviceConfig {
    /// Checks every parameter for a value the model cannot run with.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("ccm_units", u64::from(self.ccm_units)),
            ("ccm_uthreads", u64::from(self.ccm_uthreads)),
            ("ccm_mhz", self.ccm_mhz),
            ("firmware_mhz", self.firmware_mhz),
            ("device_memory_mib", self.device_memory_mib),
        ];
        for (name, value) in positive {
            if value == 0 {
                return Err(format!("device.{name} must be positive"));
            }
        }
        for (name, value) in [
            ("ccm_memory_gbps", self.ccm_memory_gbps),
            ("link_gbps", self.link_gbps),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(format!(
                    "device.{name} must be a positive number, not {value}"
                ));
            }
        }
        let channel_limit = firmware::executor::MAX_IN_FLIGHT as u32;
        if self.dma_channels == 0 || self.dma_channels > channel_limit {
            return Err(format!(
                "device.dma_channels is {}, but must be 1..={channel_limit} (the firmware keeps at most {channel_limit} DMA requests in flight)",
                self.dma_channels
            ));
        }
        if self.device_memory_mib > 64 * 1024 {
            return Err("device.device_memory_mib is limited to 64 GiB".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let error = with(refused).validate().unwrap_err();
            assert!(
                error.contains("dma_channels") && error.contains(&refused.to_string()),
                "{error}"
            );
        }
    }
}
