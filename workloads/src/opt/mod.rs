//! OPT-2.7B decode step, paper Table IV (h).
//!
//! (Being written: see the workload issue.)

use host_runtime::app::Application;

use crate::{WorkloadError, WorkloadInfo, WorkloadOptions};

/// Catalog name.
pub const NAME: &str = "opt-2.7b";

/// The catalog entry with the sizes `options` would use.
pub fn info(options: &WorkloadOptions) -> WorkloadInfo {
    let _ = options;
    WorkloadInfo {
        name: NAME,
        domain: "LLM Inference",
        application: "OPT 2.7b",
        table_iv: "#Tokens: 1K",
        characteristics: "#Tokens: 1K".into(),
        offloaded:
            "LayerNorm0, QKV projection, Attention1, Attention2, output projection, residual",
        host_task: "the MLP",
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
