//! pagewise-probe: see the crate description in Cargo.toml.
