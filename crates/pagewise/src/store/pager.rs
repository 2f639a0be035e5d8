//! Page I/O over one data file: fixed-size pages addressed by page id and
//! extents of contiguous pages, each page sealed with its own checksum
//! (docs/design.md, "Page header"). Node formats are opaque here: node pages
//! are encoded by their [`NodeImage`] and decoded by the registered
//! [`NodeCodec`].

use super::extent::{page_payload_bytes, pages_for, Extent};
use super::image::{DeltaPages, Image, NodeCodec};
use super::page::{self, Header, Kind, HDR};
use super::read::{NodeRef, BASE_NONE, BASE_UNNAMED, TAIL_BYTES};
use super::superblock::{Superblock, FLAG_TAIL_BEFORE, SUPERBLOCK_USED_BYTES};
use crate::error::{Error, Result};
use pagewise_io::{Accounted, AlignedBuf, Backend, Completion, IoOp, IoStats, OpKind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A Db file with its I/O counted into one category (pagewise-io makes
/// `Arc<dyn Backend>` a `Backend`, so the shared handle wraps directly).
pub type CountedFile = Accounted<Arc<dyn Backend>>;

/// Largest single write when a checkpoint coalesces contiguous pages.
const MAX_RUN_BYTES: usize = 1 << 20;

/// The largest read buffer a thread keeps between reads (`Pager::read_buf`):
/// a B-epsilon partition or shell (tens of KiB) fits; whole-node reads of
/// flushes allocate their own.
const KEEP_READ_BUF_BYTES: usize = 256 << 10;

thread_local! {
    /// This thread's kept read buffer, if any (`Pager::read_buf`).
    static READ_BUF: std::cell::Cell<Option<AlignedBuf>> = const { std::cell::Cell::new(None) };
}

/// Keeps `buf` as this thread's read buffer for its next read, unless it
/// is larger than [`KEEP_READ_BUF_BYTES`] or a larger one is kept already.
fn keep_read_buf(buf: AlignedBuf) {
    if buf.capacity() > KEEP_READ_BUF_BYTES {
        return;
    }
    READ_BUF.with(|b| match b.take() {
        Some(old) if old.capacity() > buf.capacity() => b.set(Some(old)),
        _ => b.set(Some(buf)),
    });
}
/// Checkpoint writes in flight at once when the backend has no real queue
/// (sync backends do one I/O per thread).
const WRITE_THREADS: usize = 4;
/// I/Os kept in flight by one queue (checkpoint writes, group prefetch reads):
/// enough to keep an SSD's channels busy from one thread.
pub const QUEUE_DEPTH: usize = 32;

/// Bytes first read of a page its parent says is a delta block: a delta
/// block of the default threshold (2 KiB of records) fits; a longer one is
/// read again whole (`Pager::whole_delta_block`).
const DELTA_HEAD_BYTES: usize = 4096;

/// Most buffer bytes a queue keeps in flight (one I/O may exceed it alone).
/// Checkpoint runs are up to [`MAX_RUN_BYTES`]: 32 of them in flight held
/// 32 MiB outside the cache budget, which got a 1M-row B+tree fill with a
/// 48 MiB cache OOM-killed under the bench's memory cap.
const WINDOW_BYTES: usize = 4 << 20;

pub struct Pager {
    pub ps: usize,
    /// Pages in the file as the allocator last saw them: every page id read
    /// or written is asserted below it (a stale or corrupt id is caught).
    limit_pages: Arc<AtomicU64>,
    codec: NodeCodec,
    /// The codec's kinds, plus kind 6 when it has delta blocks.
    node_kinds: Vec<Kind>,
    path: PathBuf,
    /// Node and overflow pages.
    pages: CountedFile,
    /// Superblocks and the catalog blob.
    meta: CountedFile,
    buf_align: usize,
    /// Times a reader waited for node pages: each synchronous node or base
    /// page read, each B-epsilon node range read, and each queued batch
    /// (`Db::stats().node_read_rounds`).
    pub read_rounds: AtomicU64,
    /// The superblock's flags: with [`FLAG_TAIL_BEFORE`], a delta block on
    /// the page just before its base lies in the page's last
    /// [`TAIL_BYTES`] (docs/design.md, "Delta placement").
    flags: u32,
}

impl Pager {
    pub fn new(
        file: Arc<dyn Backend>,
        ps: usize,
        codec: NodeCodec,
        pages: Arc<IoStats>,
        meta: Arc<IoStats>,
    ) -> Self {
        assert!(ps.is_power_of_two() && ps > HDR);
        let buf_align = file.alignment().max(4096);
        let mut node_kinds = codec.kinds.to_vec();
        if codec.apply_delta.is_some() {
            node_kinds.push(Kind::Delta);
        }
        Self {
            ps,
            limit_pages: Arc::new(AtomicU64::new(u64::MAX)),
            codec,
            node_kinds,
            path: file.path().to_path_buf(),
            pages: Accounted::new(file.clone(), pages),
            meta: Accounted::new(file, meta),
            buf_align,
            read_rounds: AtomicU64::new(0),
            flags: 0,
        }
    }

    /// Sets the superblock flags of the file this pager serves.
    pub fn set_flags(&mut self, flags: u32) {
        assert_eq!(flags & !FLAG_TAIL_BEFORE, 0, "unknown superblock flags");
        self.flags = flags;
    }

    /// The superblock flags, for the next superblock written.
    pub fn flags(&self) -> u32 {
        self.flags
    }

    /// Whether a delta block before its base lies in its page's tail.
    pub fn tail_before(&self) -> bool {
        self.flags & FLAG_TAIL_BEFORE != 0
    }

    /// Bytes of a page's tail that hold a delta block before its base.
    pub fn tail_bytes(&self) -> usize {
        TAIL_BYTES.min(self.ps)
    }

    pub fn buf(&self, len: usize) -> AlignedBuf {
        AlignedBuf::new(len, self.buf_align)
    }

    /// A buffer of `len` bytes (whole pages) to read pages into: this
    /// thread's kept buffer when it is large enough (not zeroed: the read
    /// overwrites it), else a new one. Every page's header is cleared
    /// first, so a page the read did not fill can never verify as the page
    /// an earlier read left there. Hand it back with [`keep_read_buf`].
    fn read_buf(&self, len: usize) -> AlignedBuf {
        assert!(
            len > 0 && len.is_multiple_of(self.ps),
            "reads are whole pages"
        );
        let kept = READ_BUF.with(|b| b.take());
        let mut buf = match kept {
            Some(mut b) if b.capacity() >= len && b.align() == self.buf_align => {
                b.set_len(len);
                b
            }
            _ => return self.buf(len),
        };
        for page in buf.chunks_exact_mut(self.ps) {
            page[..HDR].fill(0);
        }
        debug_assert_eq!(buf.len(), len);
        buf
    }

    /// The page count that page ids are checked against (the allocator
    /// publishes its high-water mark here).
    pub fn limit_pages(&self) -> Arc<AtomicU64> {
        self.limit_pages.clone()
    }

    /// Byte offset of page `pid`, which must lie inside the file.
    fn off(&self, pid: u64) -> u64 {
        let limit = self.limit_pages.load(Ordering::Relaxed);
        assert!(pid < limit, "page id {pid} beyond the file's {limit} pages");
        pid * self.ps as u64
    }

    /// A page id from disk that is out of range is corruption, not a bug.
    pub fn check_pid(&self, pid: u64) -> Result<()> {
        let limit = self.limit_pages.load(Ordering::Relaxed);
        if pid < 2 || pid >= limit {
            return Err(Error::Corrupt {
                path: self.path.clone(),
                page: pid,
                offset: pid.saturating_mul(self.ps as u64),
                what: format!("page id {pid} outside the file's node pages 2..{limit}"),
            });
        }
        Ok(())
    }

    /// `Error::Corrupt` for page `pid` of this file.
    pub fn corrupt(&self, pid: u64, what: String) -> Error {
        Error::Corrupt {
            path: self.path.clone(),
            page: pid,
            offset: pid.saturating_mul(self.ps as u64),
            what,
        }
    }

    /// Reads, verifies and decodes one node page whose base nobody names:
    /// a delta block's base is read after it (format 3's dependent read).
    pub fn read_node(&self, pid: u64) -> Result<Image> {
        self.check_pid(pid)?;
        let mut buf = self.buf(self.ps);
        self.read_rounds.fetch_add(1, Ordering::Relaxed);
        self.pages.read_at(&mut buf, self.off(pid))?;
        self.decode_node(pid, &buf)
    }

    /// Reads node `r` as its parent's entry describes it (docs/design.md,
    /// "Delta blocks for B+tree pages", the read table): a named base is read
    /// with the delta block through one queue; a mismatch is corrupt.
    pub fn read_node_ref(&self, r: NodeRef) -> Result<Image> {
        match r.base {
            BASE_UNNAMED => self.read_node(r.pid),
            BASE_NONE => {
                self.check_pid(r.pid)?;
                let mut buf = self.buf(self.ps);
                self.read_rounds.fetch_add(1, Ordering::Relaxed);
                self.pages.read_at(&mut buf, self.off(r.pid))?;
                self.decode_whole(r, &buf)
            }
            _ if r.beside_base() => {
                self.check_ref(r)?;
                let (offset, len) = self.span(r);
                let mut buf = self.buf(len);
                self.read_rounds.fetch_add(1, Ordering::Relaxed);
                self.pages.read_at(&mut buf, offset)?;
                self.decode_span(r, &buf)
            }
            _ => {
                let mut out = None;
                self.read_nodes(&[r], |_, node| out = Some(node))?;
                out.expect("read_nodes hands over every node it was given")
            }
        }
    }

    /// Node `r`'s page id and the base its parent names, if any, lie in the
    /// file; else `Error::Corrupt` naming the node.
    fn check_ref(&self, r: NodeRef) -> Result<()> {
        self.check_pid(r.pid)?;
        let Some(b) = r.named_base() else {
            return Ok(());
        };
        self.check_pid(b).map_err(|_| {
            let what = format!("its parent's entry names base page {b}, outside the file");
            self.corrupt(r.pid, what)
        })
    }

    /// The byte offset and length of the one read over a delta block
    /// beside its base: the base and the delta's head after it, or the
    /// delta's page (its tail, with [`FLAG_TAIL_BEFORE`]) and the base after it.
    fn span(&self, r: NodeRef) -> (u64, usize) {
        assert!(r.beside_base());
        if r.pid == r.base + 1 {
            (self.off(r.base), self.ps + self.delta_head_bytes())
        } else if self.tail_before() {
            let tail = self.tail_bytes();
            (self.off(r.pid) + (self.ps - tail) as u64, tail + self.ps)
        } else {
            (self.off(r.pid), 2 * self.ps)
        }
    }

    /// Decodes the page of node `r`, whose parent names no base: a delta
    /// block there is corrupt.
    fn decode_whole(&self, r: NodeRef, buf: &[u8]) -> Result<Image> {
        assert_eq!(r.base, BASE_NONE);
        if buf[4] == Kind::Delta as u8 {
            let base = self.verify_delta(r.pid, buf)?;
            let what =
                format!("a delta block on base page {base}, but its parent's entry names no base");
            return Err(self.corrupt(r.pid, what));
        }
        self.decode_node(r.pid, buf)
    }

    /// Rebuilds node `r` from its page and the base page its parent names,
    /// read together: the page must be a delta block naming that base.
    fn decode_pair(&self, r: NodeRef, buf: &[u8], base_buf: &[u8]) -> Result<Image> {
        let Some(named) = r.named_base() else {
            unreachable!("a pair is read only for a named base");
        };
        let h = page::verify(buf, r.pid, &self.node_kinds, &self.path, self.off(r.pid))?;
        if h.kind != Kind::Delta {
            let what = format!(
                "its parent's entry names base page {named}, but it is a whole {:?} page",
                h.kind
            );
            return Err(self.corrupt(r.pid, what));
        }
        let payload = &buf[HDR..HDR + h.used as usize];
        let base = self.delta_base(r.pid, payload)?;
        if base != named {
            let what =
                format!("the delta block names base page {base}, its parent's entry names {named}");
            return Err(self.corrupt(r.pid, what));
        }
        self.apply_on_base(r.pid, h.count as usize, payload, base, base_buf)
    }

    /// Verifies a node page just read (checksum, page id, kind) and decodes
    /// it; a delta block is decoded with the base page it names (read now).
    pub fn decode_node(&self, pid: u64, buf: &[u8]) -> Result<Image> {
        assert_eq!(buf.len(), self.ps);
        let h = page::verify(buf, pid, &self.node_kinds, &self.path, self.off(pid))?;
        let payload = &buf[HDR..HDR + h.used as usize];
        if h.kind == Kind::Delta {
            return self.decode_delta(pid, h.count as usize, payload);
        }
        (self.codec.decode)(h.kind, h.count as usize, payload, self.ps)
            .map_err(|what| self.corrupt(pid, what))
    }

    /// Requires: `payload` of the verified delta block at `pid`. Effect: reads
    /// and verifies the base page its first 8 bytes name (a node page, never
    /// another delta) and lets the codec apply the delta to it.
    fn decode_delta(&self, pid: u64, count: usize, payload: &[u8]) -> Result<Image> {
        let base = self.delta_base(pid, payload)?;
        let mut buf = self.buf(self.ps);
        self.read_rounds.fetch_add(1, Ordering::Relaxed);
        self.pages.read_at(&mut buf, self.off(base))?;
        self.apply_on_base(pid, count, payload, base, &buf)
    }

    /// The base page id a delta block's payload names, checked.
    fn delta_base(&self, pid: u64, payload: &[u8]) -> Result<u64> {
        if payload.len() < 8 {
            return Err(self.corrupt(pid, format!("delta block of {} bytes", payload.len())));
        }
        let base = page::get_u64(
            payload,
            crate::index::btree::delta::block::BASE_PID.at - page::HDR,
        );
        self.check_pid(base)?;
        if base == pid {
            return Err(self.corrupt(pid, "delta block names itself as its base".into()));
        }
        Ok(base)
    }

    /// Verifies base page `base` (just read into `buf`) and applies the delta
    /// block at `pid` (entry count and payload) to it.
    fn apply_on_base(
        &self,
        pid: u64,
        count: usize,
        payload: &[u8],
        base: u64,
        buf: &[u8],
    ) -> Result<Image> {
        let apply = self
            .codec
            .apply_delta
            .expect("kind 6 is accepted only with apply_delta");
        let (h, base_crc) =
            page::verify_base(buf, base, self.codec.kinds, &self.path, self.off(base)).map_err(
                |e| match e {
                    Error::Checksum {
                        structure: _,
                        path,
                        page,
                        offset,
                        stored,
                        computed,
                    } => Error::Checksum {
                        structure: "B+tree delta base",
                        path,
                        page,
                        offset,
                        stored,
                        computed,
                    },
                    e => e,
                },
            )?;
        let pages = DeltaPages {
            base_kind: h.kind,
            base_count: h.count as usize,
            base_payload: &buf[HDR..HDR + h.used as usize],
            base_payload_crc: base_crc,
            count,
            payload,
            page_size: self.ps,
        };
        apply(&pages)
            .map_err(|what| self.corrupt(pid, format!("delta on base page {base}: {what}")))
    }

    /// Name of the I/O engine under the page file ("uring" when queues are rings).
    pub fn engine(&self) -> &'static str {
        self.pages.engine()
    }

    /// True when `queue()` keeps several I/Os at the device from one thread.
    fn has_ring(&self) -> bool {
        self.engine() == "uring"
    }

    /// Writes nodes to their pages, coalescing runs of consecutive page ids
    /// into writes of up to 1 MiB (order does not matter before the sync).
    /// With a ring every run is one queued write, encoded while earlier ones
    /// are in flight; otherwise large checkpoints use a few threads.
    pub fn write_nodes(&self, nodes: &[(u64, Image)], gen: u64) -> Result<()> {
        let per_run = (MAX_RUN_BYTES / self.ps).max(1);
        // A delta block shorter than its page is written alone, and only its length.
        let whole = |k: usize| nodes[k].1.written_bytes(self.ps) == self.ps;
        let mut runs = Vec::new();
        let mut i = 0;
        while i < nodes.len() {
            let mut j = i + 1;
            while j < nodes.len()
                && j - i < per_run
                && nodes[j].0 == nodes[j - 1].0 + 1
                && whole(j - 1)
                && whole(j)
            {
                j += 1;
            }
            runs.push(&nodes[i..j]);
            i = j;
        }
        if self.has_ring() && runs.len() > 1 {
            return self.write_runs_queued(&runs, gen);
        }
        if runs.len() < 64 {
            return runs.iter().try_for_each(|r| self.write_run(r, gen));
        }
        let writers = WRITE_THREADS.min(runs.len());
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..writers)
                .map(|t| {
                    let runs = &runs;
                    s.spawn(move || {
                        runs.iter()
                            .skip(t)
                            .step_by(writers)
                            .try_for_each(|r| self.write_run(r, gen))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("checkpoint writer panicked"))
                .collect::<Result<Vec<()>>>()
                .map(|_| ())
        })
    }

    fn write_runs_queued(&self, runs: &[&[(u64, Image)]], gen: u64) -> Result<()> {
        self.pump(
            runs.len(),
            |i, spare| {
                let run = runs[i];
                let mut buf = take_buf(spare, run.len() * self.ps, self.buf_align);
                self.encode_run(run, gen, &mut buf);
                buf.set_len(self.run_bytes(run));
                IoOp {
                    kind: OpKind::Write,
                    offset: self.run_offset(run, &buf),
                    buf,
                    tag: i as u64,
                }
            },
            |c, spare| {
                spare.push(c.op.buf);
                Ok(c.result?)
            },
        )
    }

    /// Reads, verifies and decodes the nodes `refs` with up to
    /// [`QUEUE_DEPTH`] reads in flight, handing each to `got` as it completes
    /// (in any order). A base its parent names is read in the same queue as
    /// its delta block; a delta block whose base is not named waits for a
    /// second round that reads those bases together. A failed node goes to
    /// `got` too; only a failure of the queue itself is returned.
    pub fn read_nodes(
        &self,
        refs: &[NodeRef],
        mut got: impl FnMut(u64, Result<Image>),
    ) -> Result<()> {
        for &r in refs {
            self.check_ref(r)?;
        }
        // Each node, then its named base, or both in one span: (index in
        // refs, which part).
        let ops: Vec<(usize, Part)> = refs
            .iter()
            .enumerate()
            .flat_map(|(i, r)| {
                let first = if r.beside_base() {
                    Part::Span
                } else {
                    Part::Node
                };
                let base =
                    (first == Part::Node && r.named_base().is_some()).then_some((i, Part::Base));
                std::iter::once((i, first)).chain(base)
            })
            .collect();
        let mut batch = Batch {
            refs,
            held: (0..refs.len()).map(|_| None).collect(),
            failed: vec![false; refs.len()],
            waiting: Vec::new(),
        };
        self.read_rounds.fetch_add(1, Ordering::Relaxed);
        let head = self.delta_head_bytes();
        self.pump(
            ops.len(),
            |k, spare| {
                let (i, part) = ops[k];
                let r = refs[i];
                let (offset, len) = match part {
                    Part::Base => (self.off(r.base), self.ps),
                    Part::Node if r.named_base().is_some() => (self.off(r.pid), head),
                    Part::Node => (self.off(r.pid), self.ps),
                    Part::Span => self.span(r),
                };
                IoOp {
                    kind: OpKind::Read,
                    offset,
                    buf: take_buf(spare, len, self.buf_align),
                    tag: k as u64,
                }
            },
            |c, spare| {
                let (i, part) = ops[c.op.tag as usize];
                let read = c.result.map(|()| c.op.buf).map_err(Error::from);
                if part == Part::Span {
                    let node = read.and_then(|span| {
                        let node = self.decode_span(refs[i], &span);
                        spare.push(span);
                        node
                    });
                    got(refs[i].pid, node);
                } else {
                    self.on_read(&mut batch, i, part == Part::Base, read, spare, &mut got);
                }
                Ok(())
            },
        )?;
        assert!(
            batch.held.iter().all(Option::is_none),
            "every pair completed"
        );
        if !batch.waiting.is_empty() {
            self.read_rounds.fetch_add(1, Ordering::Relaxed);
        }
        self.read_bases(&batch.waiting, got)
    }

    /// One completed read of `read_nodes`: node `i` (or its named base when
    /// `is_base`). Hands the node to `got` once both of a pair are in, once
    /// per node on failure, or queues a delta whose base is not named.
    fn on_read(
        &self,
        b: &mut Batch<'_>,
        i: usize,
        is_base: bool,
        read: Result<AlignedBuf>,
        spare: &mut Vec<AlignedBuf>,
        got: &mut impl FnMut(u64, Result<Image>),
    ) {
        let r = b.refs[i];
        let buf = match read {
            Ok(buf) if !b.failed[i] => buf,
            Ok(buf) => return spare.push(buf),
            Err(e) => {
                spare.extend(b.held[i].take());
                if !std::mem::replace(&mut b.failed[i], true) {
                    got(r.pid, Err(e));
                }
                return;
            }
        };
        let node = if r.named_base().is_some() {
            let Some(other) = b.held[i].take() else {
                b.held[i] = Some(buf);
                return;
            };
            let (page, base) = if is_base { (other, buf) } else { (buf, other) };
            let node = self.whole_delta_block(r.pid, page).and_then(|page| {
                let node = self.decode_pair(r, &page, &base);
                spare.push(page);
                node
            });
            spare.push(base);
            node
        } else if r.base == BASE_UNNAMED && buf[4] == Kind::Delta as u8 {
            match self.verify_delta(r.pid, &buf) {
                Ok(base) => return b.waiting.push((r.pid, base, buf)),
                Err(e) => Err(e),
            }
        } else if r.base == BASE_UNNAMED {
            self.decode_node(r.pid, &buf)
        } else {
            self.decode_whole(r, &buf)
        };
        got(r.pid, node);
    }

    /// Rebuilds node `r`, a delta block beside its base, from the one span
    /// read over both (docs/design.md, "Delta placement"): the base page and
    /// the delta's head after it, or the delta's page (or its tail) and the
    /// base after it.
    fn decode_span(&self, r: NodeRef, span: &[u8]) -> Result<Image> {
        assert!(r.beside_base());
        let ps = self.ps;
        let (delta, base) = if r.pid == r.base + 1 {
            (&span[ps..], &span[..ps])
        } else {
            span.split_at(span.len() - ps)
        };
        assert_eq!(base.len(), ps);
        if self.holds_delta_block(delta) || r.before_base() && self.tail_before() {
            // A tail holds the whole block, or is corrupt: verify it as is.
            return self.decode_pair(r, delta, base);
        }
        let whole = self.read_whole(r.pid)?;
        self.decode_pair(r, &whole, base)
    }

    /// Bytes read of a page whose parent names its base, so which should be
    /// a delta block: its first [`DELTA_HEAD_BYTES`], which hold every delta
    /// block of the default threshold (docs/design.md, "Delta blocks for
    /// B+tree pages").
    fn delta_head_bytes(&self) -> usize {
        // Pages of at most the head (or the alignment) are read whole.
        let head = DELTA_HEAD_BYTES.max(self.buf_align).min(self.ps);
        assert!(head == self.ps || head.is_multiple_of(self.buf_align));
        head
    }

    /// Requires: `page` holds the first bytes of page `pid` (all of it, or
    /// its head). Effect: the page whole when it may be a delta block
    /// longer than the head, or not a delta block at all (so verification
    /// and its errors see the page as written), read again if need be.
    fn whole_delta_block(&self, pid: u64, page: AlignedBuf) -> Result<AlignedBuf> {
        if self.holds_delta_block(&page) {
            return Ok(page);
        }
        self.read_whole(pid)
    }

    /// Whether `page`, a page's first bytes, is all of it or holds a whole
    /// delta block; else the page must be read whole to be verified.
    fn holds_delta_block(&self, page: &[u8]) -> bool {
        let sealed = page::get_u32(page, page::hdr::AUX.at) as usize;
        page.len() == self.ps || (page[4] == Kind::Delta as u8 && sealed <= page.len())
    }

    /// Reads page `pid` whole, one more round.
    fn read_whole(&self, pid: u64) -> Result<AlignedBuf> {
        let mut whole = self.buf(self.ps);
        self.read_rounds.fetch_add(1, Ordering::Relaxed);
        self.pages.read_at(&mut whole, self.off(pid))?;
        assert_eq!(whole.len(), self.ps);
        Ok(whole)
    }

    /// Verifies the delta block at `pid` in `buf`; returns its base page id.
    fn verify_delta(&self, pid: u64, buf: &[u8]) -> Result<u64> {
        let h = page::verify(buf, pid, &self.node_kinds, &self.path, self.off(pid))?;
        assert_eq!(h.kind, Kind::Delta, "the caller saw kind 6");
        self.delta_base(pid, &buf[HDR..HDR + h.used as usize])
    }

    /// Reads the bases of verified delta blocks `(pid, base, delta page)`
    /// through one queue and hands each rebuilt node to `got`.
    fn read_bases(
        &self,
        waiting: &[(u64, u64, AlignedBuf)],
        mut got: impl FnMut(u64, Result<Image>),
    ) -> Result<()> {
        self.pump(
            waiting.len(),
            |i, spare| IoOp {
                kind: OpKind::Read,
                offset: self.off(waiting[i].1),
                buf: take_buf(spare, self.ps, self.buf_align),
                tag: i as u64,
            },
            |c, spare| {
                let (pid, base, delta) = &waiting[c.op.tag as usize];
                let (count, used) = (
                    page::get_u16(delta, page::hdr::COUNT.at),
                    page::get_u32(delta, page::hdr::USED.at),
                );
                let payload = &delta[HDR..HDR + used as usize];
                let node = match c.result {
                    Ok(()) => self.apply_on_base(*pid, count as usize, payload, *base, &c.op.buf),
                    Err(e) => Err(e.into()),
                };
                spare.push(c.op.buf);
                got(*pid, node);
                Ok(())
            },
        )
    }

    /// Runs `count` I/Os through one queue: `make(i)` builds the i-th (with a
    /// spare buffer from earlier completions if one fits), `finish` consumes
    /// each completion. After the first error nothing more is submitted, what
    /// is in flight is drained, and that error is returned.
    fn pump(
        &self,
        count: usize,
        mut make: impl FnMut(usize, &mut Vec<AlignedBuf>) -> IoOp,
        mut finish: impl FnMut(Completion, &mut Vec<AlignedBuf>) -> Result<()>,
    ) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let mut q = self.pages.queue(QUEUE_DEPTH.min(count))?;
        let mut spare = Vec::new();
        let mut done = Vec::new();
        let mut first = Ok(());
        let mut next = 0;
        let mut in_flight_bytes = 0;
        loop {
            while first.is_ok()
                && next < count
                && q.in_flight() < q.depth()
                && (q.in_flight() == 0 || in_flight_bytes < WINDOW_BYTES)
            {
                let op = make(next, &mut spare);
                in_flight_bytes += op.buf.capacity();
                q.submit(op)?;
                next += 1;
            }
            if q.in_flight() == 0 {
                assert_eq!(in_flight_bytes, 0, "every buffer came back");
                return first;
            }
            // A pair (a delta block and its base) is of no use until both
            // are in: one wait for both, not two (one sleep, one wake-up).
            let min = if count <= 2 { q.in_flight() } else { 1 };
            q.wait(min, &mut done)?;
            for c in done.drain(..) {
                in_flight_bytes -= c.op.buf.capacity();
                let r = finish(c, &mut spare);
                if first.is_ok() {
                    first = r;
                }
            }
        }
    }

    fn write_run(&self, run: &[(u64, Image)], gen: u64) -> Result<()> {
        let mut buf = self.buf(run.len() * self.ps);
        self.encode_run(run, gen, &mut buf);
        buf.set_len(self.run_bytes(run));
        self.pages.write_at(&buf, self.run_offset(run, &buf))?;
        Ok(())
    }

    /// Where an encoded run is written: at its first page, or, for a lone
    /// delta block on the page before its base with [`FLAG_TAIL_BEFORE`],
    /// in that page's tail (docs/design.md, "Delta placement").
    fn run_offset(&self, run: &[(u64, Image)], encoded: &[u8]) -> u64 {
        let pid = run[0].0;
        let delta = run.len() == 1 && encoded[4] == Kind::Delta as u8;
        if !(delta && self.tail_before() && page::get_u64(encoded, HDR) == pid + 1) {
            return self.off(pid);
        }
        let tail = self.tail_bytes();
        assert!(
            encoded.len() <= tail,
            "a delta block before its base fits the tail"
        );
        self.off(pid) + (self.ps - tail) as u64
    }

    /// Bytes a run writes: its pages, or a lone delta block's length.
    fn run_bytes(&self, run: &[(u64, Image)]) -> usize {
        let n = run[0].1.written_bytes(self.ps);
        assert!(n <= self.ps && n.is_multiple_of(512) && (run.len() == 1 || n == self.ps));
        if run.len() == 1 {
            n
        } else {
            run.len() * self.ps
        }
    }

    /// Encodes and seals consecutive nodes into `buf` (one page each).
    fn encode_run(&self, run: &[(u64, Image)], gen: u64, buf: &mut [u8]) {
        assert_eq!(buf.len(), run.len() * self.ps);
        for (k, (pid, node)) in run.iter().enumerate() {
            assert_eq!(*pid, run[0].0 + k as u64, "a run is consecutive pages");
            let page = &mut buf[k * self.ps..(k + 1) * self.ps];
            let fill = node.encode_page(page);
            assert!(self.node_kinds.contains(&fill.kind));
            assert!(fill.used_bytes as usize <= self.ps - HDR);
            // Written in whole blocks, zeros past `aux`.
            let aux = match fill.kind {
                Kind::Delta => page::delta_aux(fill.used_bytes),
                _ => 0,
            };
            assert!(aux as usize <= node.written_bytes(self.ps));
            page::seal(
                page,
                *pid,
                Header {
                    kind: fill.kind,
                    count: fill.count,
                    gen,
                    used: fill.used_bytes,
                    aux,
                },
            );
        }
    }

    /// Payload bytes per page of an extent.
    pub fn extent_cap(&self) -> usize {
        page_payload_bytes(self.ps)
    }

    pub fn extent_pages(&self, len: usize) -> u64 {
        pages_for(len as u64, self.ps)
    }

    fn io(&self, kind: Kind) -> &CountedFile {
        if kind == Kind::Blob {
            &self.meta
        } else {
            &self.pages
        }
    }

    /// Writes `payload` over `ext` (whose length it must be), one sealed page
    /// per `extent_cap()` bytes, in one I/O. An extent may reserve more pages
    /// than its payload needs (the catalog's); those are not written.
    pub fn write_extent(&self, ext: &Extent, kind: Kind, payload: &[u8], gen: u64) -> Result<()> {
        assert_eq!(ext.len_bytes, payload.len() as u64, "extent length");
        let n = self.extent_pages(payload.len()) as usize;
        assert!(ext.count_pages >= n as u64, "extent {ext:?} too small");
        let mut buf = self.buf(n * self.ps);
        self.seal_extent(&mut buf, ext.first_page, kind, payload, gen);
        self.off(ext.end_page() - 1);
        self.io(kind).write_at(&buf, self.off(ext.first_page))?;
        debug_assert_eq!(buf.len(), n * self.ps);
        Ok(())
    }

    /// Seals `payload` into the first pages of `pages` as the pages of an
    /// extent from `first_page`: page k holds bytes `k * extent_cap()..` of
    /// it (its `aux`), generation `gen`. Every byte of those pages is
    /// written (a last page's tail zeroed), so `pages` may hold old bytes.
    fn seal_extent(&self, pages: &mut [u8], first_page: u64, kind: Kind, payload: &[u8], gen: u64) {
        let (cap, n) = (self.extent_cap(), self.extent_pages(payload.len()) as usize);
        assert!(pages.len() >= n * self.ps, "room for {n} pages");
        for k in 0..n {
            let chunk = &payload[(k * cap).min(payload.len())..((k + 1) * cap).min(payload.len())];
            let page = &mut pages[k * self.ps..(k + 1) * self.ps];
            page[HDR..HDR + chunk.len()].copy_from_slice(chunk);
            page[HDR + chunk.len()..].fill(0);
            let header = Header {
                kind,
                count: 0,
                gen,
                used: chunk.len() as u32,
                aux: k as u32,
            };
            page::seal(page, first_page + k as u64, header);
        }
    }

    /// Writes each of `payloads` to its extent of `exts` (same order, as
    /// [`Pager::write_extent`] would one by one), where the extents lie
    /// back to back from `exts[0]`'s first page: one I/O per
    /// [`MAX_RUN_BYTES`] of pages instead of one per extent. With a ring the
    /// runs are queued, each sealed while earlier ones are in flight, in
    /// buffers that completed runs hand back (not zeroed: sealing writes
    /// every byte of a run).
    pub fn write_extent_run(&self, exts: &[Extent], kind: Kind, payloads: &[&[u8]]) -> Result<()> {
        assert_eq!(exts.len(), payloads.len());
        assert!(
            exts.windows(2).all(|w| w[0].end_page() == w[1].first_page),
            "back to back"
        );
        let runs = self.extent_runs(exts);
        let seal = |&(start, end): &(usize, usize), buf: &mut [u8]| {
            let first = exts[start].first_page;
            for (ext, payload) in exts[start..end].iter().zip(&payloads[start..end]) {
                assert_eq!(ext.len_bytes, payload.len() as u64, "extent length");
                assert_eq!(ext.count_pages, self.extent_pages(payload.len()));
                let at = (ext.first_page - first) as usize * self.ps;
                self.seal_extent(&mut buf[at..], ext.first_page, kind, payload, 0);
            }
        };
        let run_bytes = |&(start, end): &(usize, usize)| {
            (exts[end - 1].end_page() - exts[start].first_page) as usize * self.ps
        };
        if self.has_ring() && runs.len() > 1 && kind != Kind::Blob {
            return self.pump(
                runs.len(),
                |i, spare| {
                    let len = run_bytes(&runs[i]);
                    // Sealing writes every byte of the run: no zeroing.
                    let mut buf = reuse_buf(spare, len, self.buf_align);
                    seal(&runs[i], &mut buf);
                    let first = exts[runs[i].0].first_page;
                    self.off(first + (len / self.ps) as u64 - 1);
                    IoOp {
                        kind: OpKind::Write,
                        offset: self.off(first),
                        buf,
                        tag: i as u64,
                    }
                },
                |c, spare| {
                    spare.push(c.op.buf);
                    Ok(c.result?)
                },
            );
        }
        for run in &runs {
            let mut buf = self.buf(run_bytes(run));
            seal(run, &mut buf);
            let first = exts[run.0].first_page;
            self.off(first + (buf.len() / self.ps) as u64 - 1);
            self.io(kind).write_at(&buf, self.off(first))?;
        }
        Ok(())
    }

    /// Splits back-to-back `exts` into runs `(start, end)` of whole extents
    /// of at most [`MAX_RUN_BYTES`] each (an extent longer than that alone).
    fn extent_runs(&self, exts: &[Extent]) -> Vec<(usize, usize)> {
        let mut runs = Vec::new();
        let mut start = 0;
        for _ in 0..exts.len() {
            if start == exts.len() {
                break;
            }
            let mut end = start + 1;
            while end < exts.len()
                && (exts[end].end_page() - exts[start].first_page) as usize * self.ps
                    <= MAX_RUN_BYTES
            {
                end += 1;
            }
            runs.push((start, end));
            start = end;
        }
        assert_eq!(start, exts.len(), "every extent in a run");
        runs
    }

    /// Reads each of `exts` whole (as [`Pager::read_extent`] would) through
    /// one queue, up to [`QUEUE_DEPTH`] in flight: an iterator's values in
    /// extents of their own arrive in about one read's time per queue
    /// depth instead of one each. Per extent its payload, or its failure;
    /// only a failure of the queue itself is returned.
    pub fn read_extents(&self, exts: &[Extent], kind: Kind) -> Result<Vec<Result<Vec<u8>>>> {
        let reqs: Vec<(Extent, u64, u64)> = exts
            .iter()
            .filter(|e| e.len_bytes > 0)
            .map(|e| (*e, 0, e.len_bytes))
            .collect();
        let mut read = self.read_ranges(&reqs, kind)?.into_iter();
        // An empty extent reads (and verifies) its first page alone.
        let out: Vec<Result<Vec<u8>>> = exts
            .iter()
            .map(|e| match e.len_bytes {
                0 => self.read_extent(e, kind),
                _ => read.next().expect("a read per extent"),
            })
            .collect();
        assert!(read.next().is_none() && out.len() == exts.len());
        Ok(out)
    }

    /// Reads payload ranges `(ext, offset, len)` (each as [`Pager::read_range`]
    /// would, `len` > 0) through one queue, up to [`QUEUE_DEPTH`] in flight:
    /// the misses of a batch of gets arrive in about one read's time per
    /// queue depth. Per range its bytes, or its failure; only a failure of
    /// the queue itself is returned.
    pub fn read_ranges(
        &self,
        reqs: &[(Extent, u64, u64)],
        kind: Kind,
    ) -> Result<Vec<Result<Vec<u8>>>> {
        for (e, offset, len) in reqs {
            assert!(*len > 0 && offset + len <= e.len_bytes);
            self.check_pid(e.first_page)?;
            self.check_pid(e.end_page() - 1)?;
        }
        let mut out: Vec<Option<Result<Vec<u8>>>> = (0..reqs.len()).map(|_| None).collect();
        if kind == Kind::BEpsilon && !reqs.is_empty() {
            self.read_rounds.fetch_add(1, Ordering::Relaxed);
        }
        let pages = |k: usize| reqs[k].0.pages_of_range(reqs[k].1, reqs[k].2, self.ps);
        self.pump(
            reqs.len(),
            |k, spare| {
                let (first, count) = pages(k);
                IoOp {
                    kind: OpKind::Read,
                    offset: self.off(reqs[k].0.first_page + first),
                    buf: take_buf(spare, count as usize * self.ps, self.buf_align),
                    tag: k as u64,
                }
            },
            |c, spare| {
                let k = c.op.tag as usize;
                let (e, offset, len) = &reqs[k];
                let r = c.result.map_err(Error::from).and_then(|()| {
                    let mut v = Vec::new();
                    self.range_out(e, kind, &c.op.buf, pages(k).0, *offset, *len, &mut v)?;
                    Ok(v)
                });
                spare.push(c.op.buf);
                out[k] = Some(r);
                Ok(())
            },
        )?;
        let out: Vec<Result<Vec<u8>>> = out
            .into_iter()
            .map(|r| r.expect("every range completed"))
            .collect();
        assert_eq!(out.len(), reqs.len());
        Ok(out)
    }

    /// Reads and verifies a whole extent.
    pub fn read_extent(&self, ext: &Extent, kind: Kind) -> Result<Vec<u8>> {
        if ext.len_bytes == 0 {
            self.read_range(ext, kind, 0, 0)?;
            return Ok(Vec::new());
        }
        self.read_range(ext, kind, 0, ext.len_bytes)
    }

    /// Reads payload bytes `offset .. offset + len` of `ext`: only the pages
    /// that hold them, each verified (checksum, page id, kind, its index in
    /// the extent and its payload length). `len` 0 verifies the first page.
    pub fn read_range(&self, ext: &Extent, kind: Kind, offset: u64, len: u64) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(len as usize);
        self.read_range_into(ext, kind, offset, len, &mut out)?;
        Ok(out)
    }

    /// `read_range` into `out` (emptied first; its capacity is reused).
    pub fn read_range_into(
        &self,
        ext: &Extent,
        kind: Kind,
        offset: u64,
        len: u64,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        out.clear();
        self.check_pid(ext.first_page)?;
        self.check_pid(ext.end_page() - 1)?;
        let (first, count) = if len == 0 {
            (0, 1)
        } else {
            ext.pages_of_range(offset, len, self.ps)
        };
        let mut buf = self.read_buf(count as usize * self.ps);
        let at = ext.first_page + first;
        if kind == Kind::BEpsilon {
            self.read_rounds.fetch_add(1, Ordering::Relaxed);
        }
        self.io(kind).read_at(&mut buf, self.off(at))?;
        let r = self.range_out(ext, kind, &buf, first, offset, len, out);
        keep_read_buf(buf);
        r
    }

    /// Appends the payload bytes `offset .. offset + len` of `ext` out of
    /// `buf` to `out` (empty), its pages `first ..` as read, each verified
    /// (checksum, page id, kind, index in the extent, payload length).
    #[allow(clippy::too_many_arguments)]
    fn range_out(
        &self,
        ext: &Extent,
        kind: Kind,
        buf: &[u8],
        first: u64,
        offset: u64,
        len: u64,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let (cap, count) = (self.extent_cap() as u64, (buf.len() / self.ps) as u64);
        assert_eq!(buf.len() as u64, count * self.ps as u64);
        assert!(out.is_empty());
        out.reserve(len as usize);
        for k in first..first + count {
            let pid = ext.first_page + k;
            let page = &buf[((k - first) as usize) * self.ps..((k - first + 1) as usize) * self.ps];
            let h = page::verify(page, pid, &[kind], &self.path, self.off(pid))?;
            let want = (ext.len_bytes - k * cap).min(cap);
            if h.used as u64 != want || h.aux as u64 != k {
                let what = format!(
                    "extent page {k} holds {} bytes (index {}), expected {want} (index {k})",
                    h.used, h.aux
                );
                return Err(self.corrupt(pid, what));
            }
            let lo = offset.max(k * cap) - k * cap;
            let hi = (offset + len).min((k + 1) * cap) - k * cap;
            if lo < hi {
                out.extend_from_slice(&page[HDR + lo as usize..HDR + hi as usize]);
            }
        }
        assert_eq!(out.len() as u64, len);
        Ok(())
    }

    pub fn write_superblock(&self, m: &Superblock) -> Result<()> {
        let slot = m.gen % 2;
        let mut buf = self.buf(self.ps);
        m.encode(&mut buf);
        page::seal(
            &mut buf,
            slot,
            Header {
                kind: Kind::Meta,
                count: 0,
                gen: m.gen,
                used: SUPERBLOCK_USED_BYTES,
                aux: 0,
            },
        );
        self.meta.write_at(&buf, self.off(slot))?;
        Ok(())
    }

    pub fn read_superblock(&self, slot: u64) -> Result<Superblock> {
        assert!(slot < 2);
        let mut buf = self.buf(self.ps);
        self.meta.read_at(&mut buf, self.off(slot))?;
        page::verify(&buf, slot, &[Kind::Meta], &self.path, self.off(slot))?;
        Superblock::decode(&buf).map_err(|what| Error::Corrupt {
            path: self.path.clone(),
            page: slot,
            offset: self.off(slot),
            what,
        })
    }

    /// Makes every page write durable.
    pub fn sync(&self) -> Result<()> {
        self.pages.sync()?;
        Ok(())
    }

    pub fn size(&self) -> Result<u64> {
        Ok(self.pages.size()?)
    }

    pub fn set_len(&self, len: u64) -> Result<()> {
        Ok(self.pages.set_len(len)?)
    }

    /// Gives free pages `first .. first + count` back to the file system (a
    /// hole; docs/design.md, "Free space"). Requires: no checkpoint
    /// references them and no reader can (the caller advanced `reuse_gen`).
    pub fn punch(&self, first: u64, count: u64) -> Result<()> {
        assert!(first >= 2 && count > 0, "punch of {first}+{count}");
        self.pages
            .punch_hole(self.off(first), count * self.ps as u64)?;
        Ok(())
    }
}

/// What one read of `read_nodes` fetches for its node.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    /// The node's page (its head, when a base is named).
    Node,
    /// The base page its parent names.
    Base,
    /// A delta block beside its base: both in one read.
    Span,
}

/// The reads of one `read_nodes` call that wait for something.
struct Batch<'r> {
    refs: &'r [NodeRef],
    /// The first page of a pair to arrive.
    held: Vec<Option<AlignedBuf>>,
    /// Nodes already handed to `got` as failed.
    failed: Vec<bool>,
    /// Delta blocks whose base was not named: (page id, base, delta page).
    waiting: Vec<(u64, u64, AlignedBuf)>,
}

/// A zeroed buffer of `len` bytes: a spare one if it is large enough (saves
/// an allocation per I/O), else a new one aligned to `align`.
fn take_buf(spare: &mut Vec<AlignedBuf>, len: usize, align: usize) -> AlignedBuf {
    match spare_fit(spare, len) {
        Some(mut b) => {
            b.fill(0);
            b
        }
        None => AlignedBuf::new(len, align),
    }
}

/// [`take_buf`] for a caller that writes every byte: a spare buffer keeps
/// its old bytes.
fn reuse_buf(spare: &mut Vec<AlignedBuf>, len: usize, align: usize) -> AlignedBuf {
    spare_fit(spare, len).unwrap_or_else(|| AlignedBuf::new(len, align))
}

/// The last spare buffer, resized to `len`, if it has the capacity (one
/// that is too small is dropped).
fn spare_fit(spare: &mut Vec<AlignedBuf>, len: usize) -> Option<AlignedBuf> {
    let mut b = spare.pop().filter(|b| b.capacity() >= len)?;
    b.set_len(len);
    Some(b)
}
