//! Page store over one data file: fixed-size pages addressed by page id and
//! contiguous extents of pages, each page sealed with its own checksum.
//! Knows nothing about node formats beyond decoding a node page on read.

use crate::error::{Error, Result};
use crate::meta::{Meta, META_USED};
use crate::node::Node;
use crate::page::{self, Header, Kind, HDR};
use pagewise_io::{Accounted, AlignedBuf, Backend, IoStats};
use std::path::PathBuf;
use std::sync::Arc;

/// A Db file with its I/O counted into one category (pagewise-io makes
/// `Arc<dyn Backend>` a `Backend`, so the shared handle wraps directly).
pub type CountedFile = Accounted<Arc<dyn Backend>>;

/// Largest single write when a checkpoint coalesces contiguous pages.
const MAX_RUN_BYTES: usize = 1 << 20;
/// Checkpoint writes in flight at once (sync backends do one I/O per thread).
const WRITE_THREADS: usize = 4;

pub struct Pager {
    pub ps: usize,
    path: PathBuf,
    /// Node and overflow pages.
    pages: CountedFile,
    /// Superblocks and the catalog blob.
    meta: CountedFile,
    buf_align: usize,
}

impl Pager {
    pub fn new(file: Arc<dyn Backend>, ps: usize, pages: Arc<IoStats>, meta: Arc<IoStats>) -> Self {
        let buf_align = file.alignment().max(4096);
        Self {
            ps,
            path: file.path().to_path_buf(),
            pages: Accounted::new(file.clone(), pages),
            meta: Accounted::new(file, meta),
            buf_align,
        }
    }

    pub fn buf(&self, len: usize) -> AlignedBuf {
        AlignedBuf::new(len, self.buf_align)
    }

    fn off(&self, pid: u64) -> u64 {
        pid * self.ps as u64
    }

    fn corrupt(&self, pid: u64, what: String) -> Error {
        Error::Corrupt {
            path: self.path.clone(),
            page: pid,
            offset: self.off(pid),
            what,
        }
    }

    /// Reads, verifies and decodes one node page.
    pub fn read_node(&self, pid: u64) -> Result<Node> {
        let mut buf = self.buf(self.ps);
        self.pages.read_at(&mut buf, self.off(pid))?;
        self.decode_node(pid, &buf)
    }

    pub fn decode_node(&self, pid: u64, buf: &[u8]) -> Result<Node> {
        let h = page::verify(
            buf,
            pid,
            &[Kind::Leaf, Kind::Branch],
            &self.path,
            self.off(pid),
        )?;
        let payload = &buf[HDR..HDR + h.used as usize];
        Node::decode(payload, h.kind == Kind::Leaf, h.count as usize)
            .map_err(|what| self.corrupt(pid, what))
    }

    /// Writes nodes to their pages, coalescing runs of consecutive page ids
    /// into writes of up to 1 MiB. Large checkpoints use a few threads so
    /// several writes are in flight (order does not matter before the sync).
    pub fn write_nodes(&self, nodes: &[(u64, Arc<Node>)], gen: u64) -> Result<()> {
        let per_run = (MAX_RUN_BYTES / self.ps).max(1);
        let mut runs = Vec::new();
        let mut i = 0;
        while i < nodes.len() {
            let mut j = i + 1;
            while j < nodes.len() && j - i < per_run && nodes[j].0 == nodes[j - 1].0 + 1 {
                j += 1;
            }
            runs.push(&nodes[i..j]);
            i = j;
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

    fn write_run(&self, run: &[(u64, Arc<Node>)], gen: u64) -> Result<()> {
        let mut buf = self.buf(run.len() * self.ps);
        for (k, (pid, node)) in run.iter().enumerate() {
            let page = &mut buf[k * self.ps..(k + 1) * self.ps];
            let used = node.encode(page);
            let kind = if node.is_leaf() {
                Kind::Leaf
            } else {
                Kind::Branch
            };
            page::seal(
                page,
                *pid,
                Header {
                    kind,
                    count: node.len() as u16,
                    gen,
                    used: used as u32,
                    aux: 0,
                },
            );
        }
        self.pages.write_at(&buf, self.off(run[0].0))?;
        Ok(())
    }

    /// Payload bytes per page of an extent.
    pub fn extent_cap(&self) -> usize {
        self.ps - HDR
    }

    pub fn extent_pages(&self, len: usize) -> u64 {
        len.div_ceil(self.extent_cap()).max(1) as u64
    }

    fn io(&self, meta: bool) -> &CountedFile {
        if meta {
            &self.meta
        } else {
            &self.pages
        }
    }

    /// Writes `payload` over an extent starting at `start`, one sealed page
    /// per `extent_cap()` bytes, in one I/O.
    pub fn write_extent(&self, start: u64, kind: Kind, payload: &[u8], gen: u64) -> Result<()> {
        let n = self.extent_pages(payload.len()) as usize;
        let cap = self.extent_cap();
        let mut buf = self.buf(n * self.ps);
        for k in 0..n {
            let chunk = &payload[(k * cap).min(payload.len())..((k + 1) * cap).min(payload.len())];
            let page = &mut buf[k * self.ps..(k + 1) * self.ps];
            page[HDR..HDR + chunk.len()].copy_from_slice(chunk);
            page::seal(
                page,
                start + k as u64,
                Header {
                    kind,
                    count: 0,
                    gen,
                    used: chunk.len() as u32,
                    aux: k as u32,
                },
            );
        }
        self.io(kind == Kind::Blob)
            .write_at(&buf, self.off(start))?;
        Ok(())
    }

    /// Reads and verifies an extent of `len` payload bytes.
    pub fn read_extent(&self, start: u64, kind: Kind, len: usize) -> Result<Vec<u8>> {
        let n = self.extent_pages(len) as usize;
        let cap = self.extent_cap();
        let mut buf = self.buf(n * self.ps);
        self.io(kind == Kind::Blob)
            .read_at(&mut buf, self.off(start))?;
        let mut out = Vec::with_capacity(len);
        for k in 0..n {
            let pid = start + k as u64;
            let page = &buf[k * self.ps..(k + 1) * self.ps];
            let h = page::verify(page, pid, &[kind], &self.path, self.off(pid))?;
            let want = (len - k * cap).min(cap);
            if h.used as usize != want || h.aux as usize != k {
                return Err(self.corrupt(
                    pid,
                    format!(
                        "extent page {k} holds {} bytes (index {}), expected {want} (index {k})",
                        h.used, h.aux
                    ),
                ));
            }
            out.extend_from_slice(&page[HDR..HDR + want]);
        }
        Ok(out)
    }

    pub fn write_meta(&self, m: &Meta) -> Result<()> {
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
                used: META_USED,
                aux: 0,
            },
        );
        self.meta.write_at(&buf, self.off(slot))?;
        Ok(())
    }

    pub fn read_meta(&self, slot: u64) -> Result<Meta> {
        let mut buf = self.buf(self.ps);
        self.meta.read_at(&mut buf, self.off(slot))?;
        page::verify(&buf, slot, &[Kind::Meta], &self.path, self.off(slot))?;
        Ok(Meta::decode(&buf))
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
}
