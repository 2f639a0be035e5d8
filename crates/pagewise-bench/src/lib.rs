//! pagewise-bench: see the crate description in Cargo.toml.
