//! Where backends come from. The engine opens every file through an [`Fs`], so
//! tests can swap the real filesystem for a simulated, crashable one.

use crate::{open, probe_uring, Backend, IoError, OpenOptions, Result, UringBackend};
use std::fmt::Debug;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// Held while a file lock is taken; dropping it releases the lock.
pub trait LockGuard: Send + Sync + Debug {}

/// A namespace of files that yields [`Backend`]s.
pub trait Fs: Send + Sync + Debug {
    fn open(&self, path: &Path, opts: &OpenOptions) -> Result<Arc<dyn Backend>>;
    fn exists(&self, path: &Path) -> bool;
    fn remove(&self, path: &Path) -> Result<()>;
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    fn create_dir_all(&self, path: &Path) -> Result<()>;
    /// Takes an exclusive lock on `path` (created if missing) without waiting:
    /// a second holder gets an error naming the path.
    fn lock(&self, path: &Path) -> Result<Box<dyn LockGuard>>;
}

/// A shared filesystem is a filesystem, so wrappers such as
/// [`crate::Faulty`] and [`crate::CompressingFs`] accept an `Arc<dyn Fs>`.
impl<F: Fs + ?Sized> Fs for Arc<F> {
    fn open(&self, path: &Path, opts: &OpenOptions) -> Result<Arc<dyn Backend>> {
        (**self).open(path, opts)
    }
    fn exists(&self, path: &Path) -> bool {
        (**self).exists(path)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        (**self).remove(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        (**self).rename(from, to)
    }
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        (**self).create_dir_all(path)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn LockGuard>> {
        (**self).lock(path)
    }
}

/// The operating system's filesystem. Files come back as [`UringBackend`]s
/// when this process may create io_uring rings (so `queue()` keeps many I/Os
/// at the device from one thread), else as plain [`crate::FileBackend`]s.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

/// Whether io_uring works here, learned once per process: the probe creates
/// a ring, which is too costly to repeat on every open.
fn uring_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| probe_uring().is_ok())
}

#[derive(Debug)]
struct FileLock(#[allow(dead_code)] std::fs::File);
impl LockGuard for FileLock {}

fn os_err(path: &Path, source: std::io::Error) -> IoError {
    IoError::Open {
        path: path.to_path_buf(),
        source,
    }
}

impl Fs for RealFs {
    fn open(&self, path: &Path, opts: &OpenOptions) -> Result<Arc<dyn Backend>> {
        if uring_available() {
            return Ok(Arc::new(UringBackend::from_file(open(path, opts)?)));
        }
        Ok(Arc::new(open(path, opts)?))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn remove(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| os_err(path, e))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| os_err(from, e))?;
        // Make the rename itself durable: fsync the directory holding it.
        if let Some(dir) = to.parent().filter(|d| !d.as_os_str().is_empty()) {
            let d = std::fs::File::open(dir).map_err(|e| os_err(dir, e))?;
            d.sync_all().map_err(|source| IoError::Sync {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        std::fs::create_dir_all(path).map_err(|e| os_err(path, e))
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn LockGuard>> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| os_err(path, e))?;
        match f.try_lock() {
            Ok(()) => Ok(Box::new(FileLock(f))),
            Err(std::fs::TryLockError::WouldBlock) => Err(IoError::Invalid {
                path: path.to_path_buf(),
                what: "is locked by another process (or another open handle in this one); close it first".into(),
            }),
            Err(std::fs::TryLockError::Error(e)) => Err(os_err(path, e)),
        }
    }
}

/// Inside `impl Fs for Wrapper`: forwards the namespace operations (exists,
/// remove, rename, create_dir_all, lock) to the wrapped `Fs` in field
/// `$inner`, for wrappers that only change how the files they open move data.
macro_rules! forward_namespace {
    ($inner:ident) => {
        fn exists(&self, path: &std::path::Path) -> bool {
            self.$inner.exists(path)
        }
        fn remove(&self, path: &std::path::Path) -> $crate::Result<()> {
            self.$inner.remove(path)
        }
        fn rename(&self, from: &std::path::Path, to: &std::path::Path) -> $crate::Result<()> {
            self.$inner.rename(from, to)
        }
        fn create_dir_all(&self, path: &std::path::Path) -> $crate::Result<()> {
            self.$inner.create_dir_all(path)
        }
        fn lock(&self, path: &std::path::Path) -> $crate::Result<Box<dyn $crate::LockGuard>> {
            self.$inner.lock(path)
        }
    };
}
pub(crate) use forward_namespace;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_is_refused_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("LOCK");
        let g = RealFs.lock(&p).unwrap();
        let err = RealFs.lock(&p).unwrap_err().to_string();
        assert!(err.contains("locked by another"), "{err}");
        drop(g);
        RealFs.lock(&p).unwrap();
    }

    #[test]
    fn real_files_get_a_ring_when_io_uring_works() {
        let dir = tempfile::tempdir().unwrap();
        let opts = OpenOptions {
            write: true,
            create: true,
            ..Default::default()
        };
        let f = RealFs.open(&dir.path().join("f"), &opts).unwrap();
        let want = if probe_uring().is_ok() {
            "uring"
        } else {
            "sync"
        };
        assert_eq!(f.engine(), want);
        // Either way positional I/O works the same.
        let a = f.alignment().max(512);
        let data = crate::AlignedBuf::from_slice(&vec![7u8; a], a);
        f.write_at(&data, 0).unwrap();
        let mut back = crate::AlignedBuf::new(a, a);
        f.read_at(&mut back, 0).unwrap();
        assert_eq!(&back[..], &data[..]);
    }
}
