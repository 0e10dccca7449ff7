//! PageRank, paper Table IV (e).
//!
//! (Being written: see the workload issue.)

use host_runtime::app::Application;

use crate::{WorkloadError, WorkloadInfo, WorkloadOptions};

/// Catalog name.
pub const NAME: &str = "pagerank";

/// The catalog entry with the sizes `options` would use.
pub fn info(options: &WorkloadOptions) -> WorkloadInfo {
    let _ = options;
    WorkloadInfo {
        name: NAME,
        domain: "Graph Analytics",
        application: "PageRank",
        table_iv: "#V: 299067, #E: 977676",
        characteristics: "#V: 299067, #E: 977676".into(),
        offloaded: "neighbour traversal and accumulation",
        host_task: "rank update and convergence",
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
