//! pagewise-io: the only door to the disk for the probe and the engine.
//!
//! Everything that reads or writes goes through [`Backend`], so accounting
//! ([`Accounted`]), the emulated compressing drive, emulated drive profiles
//! ([`EmulatedFs`]: T = S + B/W on P channels) and fault injection see every byte.
//! Direct I/O needs buffers, offsets and lengths aligned to the device's logical
//! block size; [`AlignedBuf`] provides the memory and backends check the rest.

mod backend;
mod buf;
mod compress;
pub mod emulate;
mod error;
mod fault;
mod file;
mod fs;
pub mod sim;
mod stats;
pub mod topology;
mod uring;

pub use backend::{Backend, Completion, InlineQueue, IoOp, IoQueue, OpKind};
pub use buf::AlignedBuf;
pub use compress::{
    compressed_size_4k, CompressingDrive, CompressingFs, CompressionMeter, CompressionStats,
    DEVICE_BLOCK,
};
pub use emulate::{DriveClock, DriveProfile, EmulatedDrive, EmulatedFs, EmulationStats};
pub use error::{IoError, Result};
pub use fault::{FaultInjector, FaultKinds, Faulty};
pub use file::{open, DirectMode, FileBackend, OpenOptions};
pub use fs::{Fs, LockGuard, RealFs};
pub use sim::{CrashMode, CrashReport, SimFile, SimFileStats, SimFs, SimOptions};
pub use stats::{Accounted, IoStats, IoStatsSnapshot, SIZE_BUCKETS};
pub use uring::{open_engine, probe_uring, ring_write_bytes, Engine, UringBackend, UringQueue};
