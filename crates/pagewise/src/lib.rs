//! pagewise: see the crate description in Cargo.toml.
