use std::path::PathBuf;

/// Errors of the I/O layer. Each names the file, the offset and what to do.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    #[error("cannot open {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{op} of {len} bytes at offset {offset} in {path} failed: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        offset: u64,
        len: usize,
        source: std::io::Error,
    },
    #[error("short {op} at offset {offset} in {path}: {done} of {len} bytes done (past the end of the file?)")]
    Short {
        op: &'static str,
        path: PathBuf,
        offset: u64,
        len: usize,
        done: usize,
    },
    #[error("misaligned {what} {value} for direct I/O on {path}: it must be a multiple of {align} bytes (the device's logical block size)")]
    Misaligned {
        path: PathBuf,
        what: &'static str,
        value: u64,
        align: usize,
    },
    #[error("fsync of {path} failed: {source}; written data may not be durable, reopen before writing again")]
    Sync {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {what}")]
    Invalid { path: PathBuf, what: String },
    #[error("io_uring is not available here: {0}; use `--engine sync`")]
    Unsupported(String),
    #[error("injected fault: {0}")]
    Injected(String),
}

pub type Result<T> = std::result::Result<T, IoError>;
