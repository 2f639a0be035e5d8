use crate::backend::check_aligned;
use crate::{topology, Backend, IoError, Result};
use std::fs::File;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Whether to bypass the page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirectMode {
    /// O_DIRECT or fail.
    On,
    /// Buffered I/O through the page cache.
    Off,
    /// O_DIRECT, falling back to buffered where the filesystem refuses it
    /// (tmpfs); check [`FileBackend::fell_back`] and warn the user.
    Try,
}

/// How to open a file or block device.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    pub write: bool,
    pub create: bool,
    /// With `create`: fail if the file exists (O_EXCL), so we never clobber user data.
    pub create_new: bool,
    pub direct: DirectMode,
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self {
            write: false,
            create: false,
            create_new: false,
            direct: DirectMode::Try,
        }
    }
}

/// pread/pwrite on a regular file or block device.
#[derive(Debug)]
pub struct FileBackend {
    file: File,
    path: PathBuf,
    direct: bool,
    fell_back: bool,
    block_device: bool,
    align: usize,
}

/// Opens `path` with `opts`.
pub fn open(path: impl AsRef<Path>, opts: &OpenOptions) -> Result<FileBackend> {
    FileBackend::open(path.as_ref(), opts)
}

impl FileBackend {
    pub fn open(path: &Path, opts: &OpenOptions) -> Result<Self> {
        let want_direct = opts.direct != DirectMode::Off;
        let first = Self::open_raw(path, opts, want_direct);
        let (file, direct, fell_back) = match first {
            Ok(f) => (f, want_direct, false),
            // EINVAL from open(O_DIRECT) means the filesystem does not support it.
            Err(e)
                if want_direct
                    && opts.direct == DirectMode::Try
                    && e.raw_os_error() == Some(libc::EINVAL) =>
            {
                (
                    Self::open_raw(path, opts, false).map_err(|source| open_err(path, source))?,
                    false,
                    true,
                )
            }
            Err(source) => return Err(open_err(path, source)),
        };
        let meta = file.metadata().map_err(|source| open_err(path, source))?;
        let block_device = meta.file_type().is_block_device();
        let align = if direct {
            topology::logical_block_size(&file, path).unwrap_or(4096)
        } else {
            1
        };
        Ok(Self {
            file,
            path: path.to_path_buf(),
            direct,
            fell_back,
            block_device,
            align,
        })
    }

    fn open_raw(path: &Path, opts: &OpenOptions, direct: bool) -> std::io::Result<File> {
        let mut o = std::fs::OpenOptions::new();
        o.read(true).write(opts.write);
        if opts.create_new {
            o.create_new(true);
        } else if opts.create {
            o.create(true);
        }
        if direct {
            o.custom_flags(libc::O_DIRECT);
        }
        o.open(path)
    }

    /// True when direct I/O was asked for (`DirectMode::Try`) but refused.
    pub fn fell_back(&self) -> bool {
        self.fell_back
    }

    pub fn is_block_device(&self) -> bool {
        self.block_device
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    fn io_err(&self, op: &'static str, offset: u64, len: usize, source: std::io::Error) -> IoError {
        IoError::Io {
            op,
            path: self.path.clone(),
            offset,
            len,
            source,
        }
    }
}

fn open_err(path: &Path, source: std::io::Error) -> IoError {
    IoError::Open {
        path: path.to_path_buf(),
        source,
    }
}

impl Backend for FileBackend {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        check_aligned(&self.path, self.align, buf.as_ptr(), buf.len(), offset)?;
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => {
                    return Err(IoError::Short {
                        op: "read",
                        path: self.path.clone(),
                        offset,
                        len: buf.len(),
                        done,
                    })
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io_err("read", offset, buf.len(), e)),
            }
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        check_aligned(&self.path, self.align, buf.as_ptr(), buf.len(), offset)?;
        let mut done = 0;
        while done < buf.len() {
            match self.file.write_at(&buf[done..], offset + done as u64) {
                Ok(0) => {
                    return Err(IoError::Short {
                        op: "write",
                        path: self.path.clone(),
                        offset,
                        len: buf.len(),
                        done,
                    })
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io_err("write", offset, buf.len(), e)),
            }
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.file.sync_data().map_err(|source| IoError::Sync {
            path: self.path.clone(),
            source,
        })
    }

    fn size(&self) -> Result<u64> {
        if self.block_device {
            return topology::block_device_size(&self.file)
                .map_err(|e| self.io_err("size query", 0, 0, e));
        }
        self.file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| self.io_err("stat", 0, 0, e))
    }

    fn set_len(&self, len: u64) -> Result<()> {
        if self.block_device {
            return Err(IoError::Invalid {
                path: self.path.clone(),
                what: "a block device cannot be resized".into(),
            });
        }
        self.file
            .set_len(len)
            .map_err(|e| self.io_err("truncate", len, 0, e))
    }

    fn punch_hole(&self, offset: u64, len: u64) -> Result<()> {
        punch_hole_fd(
            std::os::unix::io::AsRawFd::as_raw_fd(&self.file),
            offset,
            len,
        )
        .map_err(|e| self.io_err("punch hole", offset, len as usize, e))
    }

    fn alignment(&self) -> usize {
        self.align
    }

    fn is_direct(&self) -> bool {
        self.direct
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// `fallocate(PUNCH_HOLE | KEEP_SIZE)` on `fd`; a file system that cannot
/// punch holes (`EOPNOTSUPP`, `ENOSYS`) is not an error (the hole is advice).
pub(crate) fn punch_hole_fd(
    fd: std::os::unix::io::RawFd,
    offset: u64,
    len: u64,
) -> std::io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    // Bounded: EINTR is retried a few times, then given up on (advice only).
    for _ in 0..8 {
        // SAFETY: fallocate reads no memory of ours; fd is open for writing.
        let r = unsafe { libc::fallocate(fd, mode, offset as libc::off_t, len as libc::off_t) };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) | Some(libc::ENODEV) => return Ok(()),
            _ => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AlignedBuf, IoOp, OpKind};

    fn rw_opts(direct: DirectMode) -> OpenOptions {
        OpenOptions {
            write: true,
            create: true,
            create_new: false,
            direct,
        }
    }

    #[test]
    fn direct_roundtrip_and_queue() {
        let dir = tempfile::tempdir().unwrap();
        let b = open(dir.path().join("f"), &rw_opts(DirectMode::Try)).unwrap();
        let a = b.alignment();
        b.set_len(8 * a as u64).unwrap();
        let mut w = AlignedBuf::new(2 * a, a);
        w.iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = (i % 251) as u8);
        b.write_at(&w, a as u64).unwrap();
        b.sync().unwrap();
        let mut r = AlignedBuf::new(2 * a, a);
        b.read_at(&mut r, a as u64).unwrap();
        assert_eq!(&r[..], &w[..]);

        let mut q = b.queue(4).unwrap();
        for tag in 0..4 {
            let buf = AlignedBuf::new(a, a);
            q.submit(IoOp {
                kind: OpKind::Read,
                offset: tag * a as u64,
                buf,
                tag,
            })
            .unwrap();
        }
        let mut out = Vec::new();
        q.wait(4, &mut out).unwrap();
        assert_eq!(out.len(), 4);
        let second = out.iter().find(|c| c.op.tag == 1).unwrap();
        assert_eq!(&second.op.buf[..], &w[..a]);
    }

    #[test]
    fn misaligned_offset_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        let b = open(dir.path().join("f"), &rw_opts(DirectMode::Try)).unwrap();
        if !b.is_direct() {
            return; // buffered fallback has no alignment rules
        }
        b.set_len(1 << 16).unwrap();
        let mut r = AlignedBuf::new(4096, 4096);
        let err = b.read_at(&mut r, 100).unwrap_err();
        assert!(
            matches!(err, IoError::Misaligned { what: "offset", .. }),
            "{err}"
        );
    }

    #[test]
    fn short_read_past_end() {
        let dir = tempfile::tempdir().unwrap();
        let b = open(dir.path().join("f"), &rw_opts(DirectMode::Off)).unwrap();
        b.set_len(10).unwrap();
        let mut r = vec![0u8; 20];
        assert!(matches!(
            b.read_at(&mut r, 0),
            Err(IoError::Short { done: 10, .. })
        ));
    }

    #[test]
    fn create_new_refuses_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"user data").unwrap();
        let opts = OpenOptions {
            create_new: true,
            ..rw_opts(DirectMode::Off)
        };
        assert!(matches!(open(&p, &opts), Err(IoError::Open { .. })));
        assert_eq!(std::fs::read(&p).unwrap(), b"user data");
    }
}
