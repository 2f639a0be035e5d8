//! pagewise-model: turn drive measurements into decisions. Pure functions, no I/O:
//! parsers take `&str`, everything else takes plain values.
//!
//! - [`measurement`]: the neutral [`Measurement`] every input format converts to.
//! - [`parse`]: fio JSON and CSV parsers.
//! - [`fit`]: the affine cost model T(B) = S + B/W, a two-segment fallback, parallelism.
//! - [`advise`]: B+tree and B-epsilon tree page-size advisor.
//! - [`wear`]: drive lifetime from write rate and write amplification.
//! - [`units`]: human units (`256GB`, `10MB/s`, `30%`).

pub mod advise;
pub mod error;
pub mod fit;
pub mod measurement;
pub mod parse;
pub mod units;
pub mod wear;

pub use error::ModelError;
pub use measurement::{Measurement, OpKind, Pattern};
