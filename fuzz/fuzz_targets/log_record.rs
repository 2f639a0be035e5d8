//! Fuzz target `log_record`: `pagewise::fuzz::log_record` (docs/reliability.md, "Fuzzing").
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pagewise::fuzz::log_record(data));
