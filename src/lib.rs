//! AXLE: asynchronous back-streaming for CXL computational memory. This package holds the
//! `axle` command-line tool and the end-to-end tests; the library part wires one run.
#![forbid(unsafe_code)]

pub mod bench;
pub mod config;
pub mod eval;
pub mod report;
pub mod run;
pub mod wall;
