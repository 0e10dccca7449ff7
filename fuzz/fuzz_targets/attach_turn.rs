//! The `attach_turn` target: its body is `fuzz_checks::attach_turn::check` (stable, replayed over
//! `corpus/attach_turn/` by the workspace's tests); see that module for the input and the properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::attach_turn::check(data));
