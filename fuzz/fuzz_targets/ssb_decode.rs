//! The `ssb_decode` target: its body is `fuzz_checks::ssb_decode::check` (stable, replayed over
//! `corpus/ssb_decode/` by the workspace's tests); see that module for the input and the properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::ssb_decode::check(data));
