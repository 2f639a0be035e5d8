//! Input parsers: text in, [`Measurement`]s out. Probe results JSON is
//! converted by the CLI (it owns the probe's types); fio JSON and CSV live here.

pub mod csv;
pub mod fio;

use crate::{Measurement, ModelError};

/// The formats this crate parses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Fio,
    Csv,
}

/// Guesses the format: JSON with a `jobs` array is fio, anything not starting
/// with `{` is CSV. Other JSON gets `None` (the caller may know it, e.g. probe results).
pub fn sniff(text: &str) -> Option<Format> {
    let t = text.trim_start();
    if t.starts_with('{') {
        // fio prints notes before the JSON on some versions; the object is what counts.
        if t.contains("\"jobs\"") && t.contains("\"fio version\"") {
            return Some(Format::Fio);
        }
        return None;
    }
    Some(Format::Csv)
}

/// Parses fio JSON or CSV, whichever `text` is.
pub fn parse_any(text: &str) -> Result<Vec<Measurement>, ModelError> {
    if text.trim().is_empty() {
        return Err(ModelError::Empty);
    }
    match sniff(text) {
        Some(Format::Fio) => fio::parse(text),
        Some(Format::Csv) => csv::parse(text),
        None => Err(ModelError::NotFio),
    }
}
