//! Fuzz target `btree_node`: `pagewise::fuzz::btree_node` (docs/reliability.md, "Fuzzing").
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pagewise::fuzz::btree_node(data));
