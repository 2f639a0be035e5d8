use pagewise_io::IoError;
use std::path::PathBuf;

/// Everything that stops a probe. Each message says what is wrong and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("{0}")]
    InvalidSpec(String),
    #[error("{path} does not exist: give a directory (the probe creates its own test file there), an existing file, or a block device")]
    NotFound { path: PathBuf },
    #[error(
        "{path} is not a directory, regular file or block device: point the probe at one of those"
    )]
    UnsupportedTarget { path: PathBuf },
    #[error("block size {bs} is not a multiple of the logical block size {lbs} of {device}, which direct I/O requires: use multiples of {lbs} (e.g. --bs 4k) or --no-direct")]
    BlockSizeNotMultiple { bs: u64, lbs: u64, device: String },
    #[error("alignment {align} is not a multiple of the logical block size {lbs} of {device}, which direct I/O requires: use --align {lbs} or larger multiples, or --no-direct")]
    AlignmentTooSmall {
        align: u64,
        lbs: u64,
        device: String,
    },
    #[error("{path} holds {size} bytes, less than one {bs}-byte block: use a larger file or a smaller --bs")]
    FileTooSmall { path: PathBuf, size: u64, bs: u64 },
    #[error("mode {mode} writes, and {path} is an existing file whose contents it would destroy: add --allow-write if that is fine, or point the probe at a directory")]
    WriteNeedsAllowWrite { path: PathBuf, mode: String },
    #[error("mode {mode} writes, and {path} is a block device whose data it would destroy: add --destroy-data if that is really what you want")]
    WriteNeedsDestroyData { path: PathBuf, mode: String },
    #[error(
        "{device} is {why}: unmount it (or swapoff) first, or probe a directory on it instead"
    )]
    Mounted { device: PathBuf, why: String },
    #[error("{device} is in use by {holder} (device-mapper, md or similar): probe the device on top instead")]
    InUse { device: PathBuf, holder: String },
    #[error("not enough free space in {dir}: {free} bytes free, the test file needs at least {needed}: free some space or use a smaller --size")]
    NoSpace {
        dir: PathBuf,
        free: u64,
        needed: u64,
    },
    #[error("direct I/O was requested but {path} does not support it: use --no-direct")]
    DirectUnsupported { path: PathBuf },
    #[error("interrupted: the probe stopped early and removed its test file")]
    Interrupted,
    #[error(transparent)]
    Io(#[from] IoError),
}
