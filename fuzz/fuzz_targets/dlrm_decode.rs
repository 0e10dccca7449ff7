//! The `dlrm_decode` target: its body is `fuzz_checks::dlrm_decode::check` (stable, replayed over
//! `corpus/dlrm_decode/` by the workspace's tests); see that module for the input and the properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::dlrm_decode::check(data));
