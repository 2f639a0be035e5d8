//! Fuzz target `bepsilon_part`: `pagewise::fuzz::bepsilon_part` (docs/reliability.md, "Fuzzing").
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pagewise::fuzz::bepsilon_part(data));
