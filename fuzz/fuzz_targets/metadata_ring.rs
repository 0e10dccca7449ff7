//! The `metadata_ring` target: its body is `fuzz_checks::metadata_ring::check` (stable, replayed over
//! `corpus/metadata_ring/` by the workspace's tests); see that module for the input and the properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::metadata_ring::check(data));
