//! Fuzz target `bepsilon_node`: `pagewise::fuzz::bepsilon_node` (docs/reliability.md, "Fuzzing").
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pagewise::fuzz::bepsilon_node(data));
