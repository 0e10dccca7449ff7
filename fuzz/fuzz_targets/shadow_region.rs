//! The `shadow_region` target: its body is `fuzz_checks::shadow_region::check` (stable, replayed over
//! `corpus/shadow_region/` by the workspace's tests); see that module for the input and the properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::shadow_region::check(data));
