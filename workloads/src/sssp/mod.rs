//! SSSP, paper Table IV (d).
//!
//! (Being written: see the workload issue.)

use host_runtime::app::Application;

use crate::{WorkloadError, WorkloadInfo, WorkloadOptions};

/// Catalog name.
pub const NAME: &str = "sssp";

/// The catalog entry with the sizes `options` would use.
pub fn info(options: &WorkloadOptions) -> WorkloadInfo {
    let _ = options;
    WorkloadInfo {
        name: NAME,
        domain: "Graph Analytics",
        application: "SSSP",
        table_iv: "#V: 264346, #E: 733846",
        characteristics: "#V: 264346, #E: 733846".into(),
        offloaded: "edge traversal and vertex update",
        host_task: "the next frontier",
    }
}

/// Builds the workload.
pub fn build(options: &WorkloadOptions) -> Result<Box<dyn Application>, WorkloadError> {
    let _ = options;
    Err(WorkloadError::InvalidOption {
        workload: NAME,
        option: "name",
        reason: "not implemented yet".into(),
    })
}
