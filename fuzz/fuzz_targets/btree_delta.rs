//! Fuzz target `btree_delta`: `pagewise::fuzz::btree_delta` (docs/reliability.md, "Fuzzing").
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pagewise::fuzz::btree_delta(data));
