//! SSB Q1.1 and Q1.2, paper Table IV (f), (g).
//!
//! (Being written: see the workload issue.)

use host_runtime::app::Application;

use crate::{WorkloadError, WorkloadInfo, WorkloadOptions};

/// The two queries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Query {
    /// Q1.1 (Table IV (f)).
    Q1_1,
    /// Q1.2 (Table IV (g)).
    Q1_2,
}

impl Query {
    /// Catalog name.
    pub const fn name(self) -> &'static str {
        match self {
            Query::Q1_1 => "ssb-q1.1",
            Query::Q1_2 => "ssb-q1.2",
        }
    }

    /// The query called `name`.
    pub fn by_name(name: &str) -> Option<Query> {
        [Query::Q1_1, Query::Q1_2]
            .into_iter()
            .find(|query| query.name() == name)
    }
}

/// The catalog entry with the sizes `options` would use.
pub fn info(query: Query, options: &WorkloadOptions) -> WorkloadInfo {
    let _ = options;
    WorkloadInfo {
        name: query.name(),
        domain: "OLAP",
        application: "SSB",
        table_iv: match query {
            Query::Q1_1 => "Query: Q1_1",
            Query::Q1_2 => "Query: Q1_2",
        },
        characteristics: String::new(),
        offloaded: "predicate filtering (boolean marking)",
        host_task: "join with date, revenue aggregate",
    }
}

/// Builds the workload.
pub fn build(
    query: Query,
    options: &WorkloadOptions,
) -> Result<Box<dyn Application>, WorkloadError> {
    let _ = (query, options);
    Err(WorkloadError::InvalidOption {
        workload: query.name(),
        option: "name",
        reason: "not implemented yet".into(),
    })
}
