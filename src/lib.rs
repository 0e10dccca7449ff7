//! AXLE: asynchronous back-streaming for CXL computational memory. This package holds the
//! `axle` command-line tool and the end-to-end tests; the library part wires one run.
#![forbid(unsafe_code)]

pub mod bench;
pub mod config;
pub mod eval;
pub mod provenance;
pub mod recover;
pub mod report;
pub mod run;
pub mod tenants;
pub mod trace;
pub mod wall;

/// Writes `text` to standard output. A reader that went away (`axle eval | head`) makes this
/// return a `BrokenPipe` error, which the CLI turns into a quiet exit instead of a panic.
pub fn write_stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}
