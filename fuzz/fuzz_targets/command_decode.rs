//! The `command_decode` target: its body is `fuzz_checks::command_decode::check` (stable, replayed over
//! `corpus/command_decode/` by the workspace's tests); see that module for the input and the properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::command_decode::check(data));
