//! Fuzz target `page`: `pagewise::fuzz::page` (docs/reliability.md, "Fuzzing").
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pagewise::fuzz::page(data));
