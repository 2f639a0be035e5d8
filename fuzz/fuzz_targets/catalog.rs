//! Fuzz target `catalog`: `pagewise::fuzz::catalog` (docs/reliability.md, "Fuzzing").
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pagewise::fuzz::catalog(data));
