use crate::{AlignedBuf, IoError, Result};
use std::path::Path;
use std::sync::Arc;

/// Direction of one I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    Read,
    Write,
}

/// One queued I/O. The queue owns the buffer while the I/O is in flight and
/// hands it back in the [`Completion`]; `tag` is the caller's to match them up.
#[derive(Debug)]
pub struct IoOp {
    pub kind: OpKind,
    pub offset: u64,
    pub buf: AlignedBuf,
    pub tag: u64,
}

/// A finished [`IoOp`]: the buffer (filled, for reads) and the outcome.
#[derive(Debug)]
pub struct Completion {
    pub op: IoOp,
    pub result: Result<()>,
}

/// Asynchronous submission with up to `depth()` I/Os in flight.
/// One queue belongs to one thread; make one per thread.
pub trait IoQueue {
    fn depth(&self) -> usize;
    /// Number of submitted I/Os whose completion has not been returned yet.
    fn in_flight(&self) -> usize;
    /// Queues one I/O. Fails if `in_flight() == depth()`: wait first.
    fn submit(&mut self, op: IoOp) -> Result<()>;
    /// Blocks until at least `min` completions are available (bounded by
    /// `in_flight()`), then appends every available one to `out`.
    fn wait(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<()>;
}

/// Positional, thread-safe block I/O on one file or block device.
///
/// Every method takes `&self` so many threads can do I/O at once without a lock.
/// Under direct I/O, `buf` address, length and offset must be multiples of
/// `alignment()`; backends return [`IoError::Misaligned`] otherwise.
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// Reads exactly `buf.len()` bytes at `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;
    /// Writes all of `buf` at `offset`.
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()>;
    /// Makes every completed write durable (fdatasync).
    fn sync(&self) -> Result<()>;
    /// Size in bytes of the file or device.
    fn size(&self) -> Result<u64>;
    /// Grows or shrinks a file (not possible on block devices).
    fn set_len(&self, len: u64) -> Result<()>;
    /// Gives bytes `offset .. offset + len` back to the file system (a hole:
    /// they read as zeros afterwards, the file's size is unchanged, and a
    /// file system mounted with discard passes it on to the drive). Advisory:
    /// a backend or file system that cannot punch holes does nothing and
    /// returns `Ok`; only an I/O error on one that can is an error.
    fn punch_hole(&self, offset: u64, len: u64) -> Result<()> {
        let _ = (offset, len);
        Ok(())
    }
    /// Required alignment of buffers, offsets and lengths (1 when buffered).
    fn alignment(&self) -> usize;
    /// True when the page cache is bypassed (O_DIRECT).
    fn is_direct(&self) -> bool;
    /// Path for messages.
    fn path(&self) -> &Path;
    /// A queue for up to `depth` concurrent I/Os. The default runs each I/O
    /// synchronously at submit, which is what a sync engine at any depth does.
    fn queue(&self, depth: usize) -> Result<Box<dyn IoQueue + '_>> {
        Ok(Box::new(InlineQueue::new(self, depth)))
    }
    /// Name of the I/O engine behind this backend, for results files.
    fn engine(&self) -> &'static str {
        "sync"
    }
}

/// Checks the direct-I/O alignment rules for one transfer.
pub(crate) fn check_aligned(
    path: &Path,
    align: usize,
    ptr: *const u8,
    len: usize,
    offset: u64,
) -> Result<()> {
    if align <= 1 {
        return Ok(());
    }
    let bad = |what: &'static str, value: u64| IoError::Misaligned {
        path: path.to_path_buf(),
        what,
        value,
        align,
    };
    if !offset.is_multiple_of(align as u64) {
        return Err(bad("offset", offset));
    }
    if !len.is_multiple_of(align) {
        return Err(bad("length", len as u64));
    }
    if !(ptr as usize).is_multiple_of(align) {
        return Err(bad("buffer address", ptr as u64));
    }
    Ok(())
}

/// The queue of a synchronous backend: each I/O completes inside `submit`.
pub struct InlineQueue<'a, B: Backend + ?Sized> {
    backend: &'a B,
    depth: usize,
    done: Vec<Completion>,
}

impl<'a, B: Backend + ?Sized> InlineQueue<'a, B> {
    pub fn new(backend: &'a B, depth: usize) -> Self {
        Self {
            backend,
            depth: depth.max(1),
            done: Vec::new(),
        }
    }
}

impl<B: Backend + ?Sized> IoQueue for InlineQueue<'_, B> {
    fn depth(&self) -> usize {
        self.depth
    }

    fn in_flight(&self) -> usize {
        self.done.len()
    }

    fn submit(&mut self, mut op: IoOp) -> Result<()> {
        if self.done.len() >= self.depth {
            return Err(IoError::Invalid {
                path: self.backend.path().to_path_buf(),
                what: format!(
                    "queue full ({} in flight): wait before submitting",
                    self.depth
                ),
            });
        }
        let result = match op.kind {
            OpKind::Read => self.backend.read_at(&mut op.buf, op.offset),
            OpKind::Write => self.backend.write_at(&op.buf, op.offset),
        };
        self.done.push(Completion { op, result });
        Ok(())
    }

    fn wait(&mut self, _min: usize, out: &mut Vec<Completion>) -> Result<()> {
        out.append(&mut self.done);
        Ok(())
    }
}

/// Inside `impl Backend for Wrapper`: forwards the six metadata methods
/// (size, set_len, punch_hole, alignment, is_direct, path) to the wrapped backend in
/// field `$inner`, for wrappers that only change how data moves.
macro_rules! forward_metadata {
    ($inner:ident) => {
        fn size(&self) -> $crate::Result<u64> {
            self.$inner.size()
        }
        fn set_len(&self, len: u64) -> $crate::Result<()> {
            self.$inner.set_len(len)
        }
        fn punch_hole(&self, offset: u64, len: u64) -> $crate::Result<()> {
            self.$inner.punch_hole(offset, len)
        }
        fn alignment(&self) -> usize {
            self.$inner.alignment()
        }
        fn is_direct(&self) -> bool {
            self.$inner.is_direct()
        }
        fn path(&self) -> &std::path::Path {
            self.$inner.path()
        }
    };
}
pub(crate) use forward_metadata;

/// Shared and boxed backends are backends, so wrappers such as
/// [`crate::Accounted`] work on the `Arc<dyn Backend>` that [`crate::Fs`] and
/// [`crate::open_engine`] return.
macro_rules! forward_backend {
    ($ptr:ident) => {
        impl<B: Backend + ?Sized> Backend for $ptr<B> {
            fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
                (**self).read_at(buf, offset)
            }
            fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
                (**self).write_at(buf, offset)
            }
            fn sync(&self) -> Result<()> {
                (**self).sync()
            }
            fn size(&self) -> Result<u64> {
                (**self).size()
            }
            fn set_len(&self, len: u64) -> Result<()> {
                (**self).set_len(len)
            }
            fn punch_hole(&self, offset: u64, len: u64) -> Result<()> {
                (**self).punch_hole(offset, len)
            }
            fn alignment(&self) -> usize {
                (**self).alignment()
            }
            fn is_direct(&self) -> bool {
                (**self).is_direct()
            }
            fn path(&self) -> &Path {
                (**self).path()
            }
            fn queue(&self, depth: usize) -> Result<Box<dyn IoQueue + '_>> {
                (**self).queue(depth)
            }
            fn engine(&self) -> &'static str {
                (**self).engine()
            }
        }
    };
}

forward_backend!(Arc);
forward_backend!(Box);
