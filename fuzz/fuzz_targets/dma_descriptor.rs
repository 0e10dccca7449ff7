//! The `dma_descriptor` target: its body is `fuzz_checks::dma_descriptor::check` (stable, replayed over
//! `corpus/dma_descriptor/` by the workspace's tests); see that module for the input and the properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::dma_descriptor::check(data));
