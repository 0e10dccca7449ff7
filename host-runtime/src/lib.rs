//! The AXLE host runtime: the offload API, the poller, the ready pool, the host scheduler,
//! gap-aware slot release, batched flow control, the RP and BS baselines, and metrics.
//!
//! | module | what |
//! |--------|------|
//! | [`app`] | what a workload gives the runtime |
//! | [`runtime`] | the co-simulated host: control thread, workers, launches and tasks; drives a mode |
//! | [`poller`] | the poller: AXLE's local poll (and AXLE_Interrupt's handler): tail load, batch into the ready pool |
//! | [`adaptive_poll`] | `--poll adaptive`: the polling interval follows the records' arrival (ours, not the paper's) |
//! | [`overflow`] | `--no-deadlock`: the overflow buffer that keeps a full ring from deadlocking (ours, not the paper's) |
//! | [`ring`] | the host side of the rings: the poller's consumer, the gap-aware heads |
//! | [`ready_pool`] | the ready pool (batches of new records) |
//! | [`sched`] | the host scheduler |
//! | [`tasks`] | which task needs which result bytes; when a slot may be freed |
//! | [`flow`] | batched flow control |
//! | [`modes`] | the four mechanisms, one module each (`rp`, `bs`, `axle`, `axle_irq`), behind one trait |
//! | [`cost`] | the host cost model |
//! | [`metrics`] | the metrics, each defined once |
//! | [`trace`] | the host's timeline of a run (`axle run --trace`), off by default |
//! | [`config`] | host parameters |
#![forbid(unsafe_code)]

pub mod adaptive_poll;
pub mod app;
pub mod config;
pub mod cost;
pub mod flow;
pub mod metrics;
pub mod modes;
pub mod overflow;
pub mod poller;
pub mod ready_pool;
pub mod ring;
pub mod runtime;
pub mod sched;
pub mod tasks;
#[cfg(test)]
mod test_link;
pub mod trace;

pub use adaptive_poll::DeviceDatasheet;
pub use app::{AppError, AppProblem, BadResult, Scope};
pub use config::{HostConfig, HostScheduling, PollPolicy};
pub use metrics::RunMetrics;
pub use runtime::{HostMeasurements, Mode, PendingLaunch, Runtime, RuntimeError, Stretch};
