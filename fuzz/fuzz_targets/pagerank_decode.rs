//! The `pagerank_decode` target: its body is `fuzz_checks::pagerank_decode::check` (stable, replayed over
//! `corpus/pagerank_decode/` by the workspace's tests); see that module for the input and the properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::pagerank_decode::check(data));
