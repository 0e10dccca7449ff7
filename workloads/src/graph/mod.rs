//! Graphs shared by SSSP and PageRank: the CSR form, the real inputs' readers and the seeded
//! generators.
//!
//! (Being written: see the workload issue.)
