//! workloads
