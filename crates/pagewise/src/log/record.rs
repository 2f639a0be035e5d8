//! Log record framing: one file of packed records, rewritten from offset 0
//! after every checkpoint. Record header and the rules recovery applies:
//! docs/design.md, "Write-ahead log". The payload is an encoded batch
//! ([`super::ops`]).
//!
//! Writes are whole aligned blocks: the partial last block is rewritten with
//! the next group (sector-atomic writes keep the earlier records intact, and
//! the rewritten bytes are identical).

use crate::error::Result;
use crate::store::page::{get_u32, get_u64, put_u32, put_u64};
use crate::store::pager::CountedFile;
use pagewise_io::{AlignedBuf, Backend};

pub const REC_HDR: usize = 32;
const MAGIC: u32 = 0x4C41_5750;

pub struct Wal {
    file: CountedFile,
    align: usize,
    buf: AlignedBuf,
    buf_len: usize,
    flushed_len: usize,
    tail_off: u64,
    pub epoch: u64,
    db_id: u32,
    /// Bytes appended since the last reset.
    pub bytes: u64,
}

impl Wal {
    pub fn new(file: CountedFile, epoch: u64, db_id: u32) -> Self {
        let align = file.alignment().max(512);
        Self {
            buf: AlignedBuf::new(64 * 1024, align.max(4096)),
            file,
            align,
            buf_len: 0,
            flushed_len: 0,
            tail_off: 0,
            epoch,
            db_id,
            bytes: 0,
        }
    }

    /// Appends one record to the in-memory tail.
    pub fn append(&mut self, lsn: u64, payload: &[u8]) {
        let need = self.buf_len + REC_HDR + payload.len();
        if need > self.buf.len() {
            let cap = need.next_power_of_two().max(self.buf.len() * 2);
            let mut nb = AlignedBuf::new(cap, self.buf.align());
            nb[..self.buf_len].copy_from_slice(&self.buf[..self.buf_len]);
            self.buf = nb;
        }
        let at = self.buf_len;
        let rec = &mut self.buf[at..need];
        put_u32(rec, 0, MAGIC);
        put_u64(rec, 8, self.epoch);
        put_u64(rec, 16, lsn);
        put_u32(rec, 24, payload.len() as u32);
        put_u32(rec, 28, self.db_id);
        rec[REC_HDR..].copy_from_slice(payload);
        let crc = crc32c::crc32c(&rec[8..]);
        put_u32(rec, 4, crc);
        self.buf_len = need;
        self.bytes += (REC_HDR + payload.len()) as u64;
    }

    pub fn db_id(&self) -> u32 {
        self.db_id
    }

    /// Bytes appended but not yet written to the file.
    pub fn unflushed(&self) -> usize {
        self.buf_len - self.flushed_len
    }

    /// Writes the unflushed tail (whole aligned blocks, zero padded).
    pub fn flush(&mut self) -> Result<()> {
        if self.buf_len == self.flushed_len {
            return Ok(());
        }
        let end = self.buf_len.next_multiple_of(self.align);
        self.file.write_at(&self.buf[..end], self.tail_off)?;
        let full = self.buf_len / self.align * self.align;
        if full > 0 {
            self.buf.copy_within(full..self.buf_len, 0);
            let keep = self.buf_len - full;
            self.buf[keep..end].fill(0);
            self.tail_off += full as u64;
            self.buf_len = keep;
        }
        self.flushed_len = self.buf_len;
        Ok(())
    }

    pub fn sync(&self) -> Result<()> {
        self.file.sync()?;
        Ok(())
    }

    /// Starts a new log run after a durable checkpoint of generation `epoch`.
    /// Unflushed records are dropped: the checkpoint contains them.
    pub fn reset(&mut self, epoch: u64) {
        let end = self
            .buf_len
            .next_multiple_of(self.align)
            .min(self.buf.len());
        self.buf[..end].fill(0);
        self.buf_len = 0;
        self.flushed_len = 0;
        self.tail_off = 0;
        self.epoch = epoch;
        self.bytes = 0;
    }
}

/// Reads the records of log run `epoch` starting at LSN `first_lsn`.
pub fn scan(
    file: &dyn Backend,
    db_id: u32,
    epoch: u64,
    first_lsn: u64,
) -> Result<Vec<(u64, Vec<u8>)>> {
    let align = file.alignment().max(512);
    let size = file.size()? / align as u64 * align as u64;
    let mut out = Vec::new();
    if size == 0 {
        return Ok(out);
    }
    let mut buf = AlignedBuf::new(size as usize, align.max(4096));
    file.read_at(&mut buf, 0)?;
    let mut at = 0usize;
    let mut next = first_lsn;
    while at + REC_HDR <= buf.len() {
        let h = &buf[at..at + REC_HDR];
        let len = get_u32(h, 24) as usize;
        if get_u32(h, 0) != MAGIC
            || get_u64(h, 8) != epoch
            || get_u32(h, 28) != db_id
            || get_u64(h, 16) != next
            || at + REC_HDR + len > buf.len()
            || crc32c::crc32c(&buf[at + 8..at + REC_HDR + len]) != get_u32(h, 4)
        {
            break;
        }
        out.push((next, buf[at + REC_HDR..at + REC_HDR + len].to_vec()));
        next += 1;
        at += REC_HDR + len;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pagewise_io::{open, Accounted, DirectMode, IoStats, OpenOptions};
    use std::sync::Arc;

    fn wal_file(dir: &std::path::Path) -> CountedFile {
        let o = OpenOptions {
            write: true,
            create: true,
            direct: DirectMode::Off,
            ..Default::default()
        };
        let f: Arc<dyn Backend> = Arc::new(open(dir.join("w"), &o).unwrap());
        Accounted::new(f, IoStats::new())
    }

    #[test]
    fn records_survive_and_runs_are_separated() {
        let d = tempfile::tempdir().unwrap();
        let mut w = Wal::new(wal_file(d.path()), 7, 5);
        for lsn in 1..=50u64 {
            w.append(lsn, &vec![lsn as u8; (lsn * 37 % 700) as usize]);
            if lsn % 3 == 0 {
                w.flush().unwrap();
            }
        }
        w.flush().unwrap();
        let f = wal_file(d.path());
        let recs = scan(&f, 5, 7, 1).unwrap();
        assert_eq!(recs.len(), 50);
        assert_eq!(recs[9].1, vec![10u8; 370]);
        // A new run overwrites from offset 0; old-epoch records are not replayed.
        w.reset(8);
        w.append(51, b"x");
        w.flush().unwrap();
        assert_eq!(scan(&f, 5, 8, 51).unwrap().len(), 1);
        assert_eq!(scan(&f, 5, 7, 1).unwrap().len(), 0);
        // Another database's log (a different id) is never replayed.
        assert_eq!(scan(&f, 6, 8, 51).unwrap().len(), 0);
        // A wrong starting LSN finds nothing.
        assert_eq!(scan(&f, 5, 8, 52).unwrap().len(), 0);
    }
}
