//! The `flow_control` target: its body is `fuzz_checks::flow_control::check` (stable, replayed over
//! `corpus/flow_control/` by the workspace's tests); see that module for the input and the properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::flow_control::check(data));
