//! Fuzz target `log_ops`: `pagewise::fuzz::log_ops` (docs/reliability.md, "Fuzzing").
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pagewise::fuzz::log_ops(data));
