//! Fuzz target `descriptors`: `pagewise::fuzz::descriptors` (docs/reliability.md, "Fuzzing").
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pagewise::fuzz::descriptors(data));
