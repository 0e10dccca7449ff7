//! DLRM, paper Table IV (i).
//!
//! (Being written: see the workload issue.)

use host_runtime::app::Application;

use crate::{WorkloadError, WorkloadInfo, WorkloadOptions};

/// Catalog name.
pub const NAME: &str = "dlrm";

/// The catalog entry with the sizes `options` would use.
pub fn info(options: &WorkloadOptions) -> WorkloadInfo {
    let _ = options;
    WorkloadInfo {
        name: NAME,
        domain: "DLRM",
        application: "Criteo",
        table_iv: "Dim: 256, #Rows: 1M",
        characteristics: "Dim: 256, #Rows: 1M".into(),
        offloaded: "embedding lookup, sparse length sum",
        host_task: "the dense part",
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
