//! pagewise-model: see the crate description in Cargo.toml.
