//! The pagewise engine adapter.

use crate::engine::{Engine, Settings};
use crate::{BenchError, Result};
use std::path::Path;

pub fn open(_dir: &Path, _s: &Settings, _tables: &[&str]) -> Result<Box<dyn Engine>> {
    Err(BenchError::engine(
        "pagewise",
        "the engine API has not landed on main yet",
    ))
}
