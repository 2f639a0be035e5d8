//! The files of a database: `PATH`, `PATH-wal` and `PATH-lock`
//! (docs/design.md, "Files").

use crate::error::{Error, Result};
use crate::options::Options;
use pagewise_io::{Backend, DirectMode, Fs, LockGuard, OpenOptions};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut s = OsString::from(path.as_os_str());
    s.push(suffix);
    PathBuf::from(s)
}

/// The write-ahead log file of the database at `path`.
pub fn wal_path(path: &Path) -> PathBuf {
    sidecar(path, "-wal")
}

/// The lock file of the database at `path`.
pub fn lock_path(path: &Path) -> PathBuf {
    sidecar(path, "-lock")
}

pub struct Files {
    pub lock: Box<dyn LockGuard>,
    pub data: Arc<dyn Backend>,
    pub wal: Arc<dyn Backend>,
}

/// Takes the lock, then opens the data file and the log.
pub fn open_files(path: &Path, opts: &Options, create: bool) -> Result<Files> {
    let fs: &dyn Fs = &*opts.fs;
    if create && fs.exists(path) {
        return Err(Error::AlreadyExists {
            path: path.to_path_buf(),
        });
    }
    if !create && !fs.exists(path) {
        return Err(Error::NotFound {
            path: path.to_path_buf(),
        });
    }
    let lp = lock_path(path);
    let lock = fs
        .lock(&lp)
        .map_err(|source| Error::Locked { path: lp, source })?;
    let direct = if opts.direct_io {
        DirectMode::Try
    } else {
        DirectMode::Off
    };
    let write = create || !opts.read_only;
    let o = OpenOptions {
        write,
        create,
        create_new: create,
        direct,
    };
    let data = fs.open(path, &o)?;
    let wo = OpenOptions {
        write,
        create: write,
        create_new: false,
        direct,
    };
    let wal = fs.open(&wal_path(path), &wo)?;
    Ok(Files { lock, data, wal })
}

/// A database id that differs between databases created at the same path.
pub fn new_db_id(path: &Path) -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write(path.as_os_str().as_encoded_bytes());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    h.write_u64(now);
    h.write_u32(std::process::id());
    (h.finish() >> 32) as u32
}
