//! Fuzz target `value_table`: `pagewise::fuzz::value_table` (docs/reliability.md, "Fuzzing").
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pagewise::fuzz::value_table(data));
