//! The write-ahead log: record framing ([`record`]) around batches of
//! logical operations ([`ops`]). docs/design.md, "Write-ahead log".

pub mod ops;
pub mod record;

pub use ops::Op;
pub use record::{first_epoch, scan, Wal};
