//! Log record framing: one file of packed records, rewritten from offset 0
//! after every checkpoint. Record header and the rules recovery applies:
//! docs/design.md, "Write-ahead log". The payload is an encoded batch
//! ([`super::ops`]).
//!
//! Writes are whole aligned blocks. Packed (default): the partial last block
//! is rewritten with the next group (sector-atomic writes keep the earlier
//! records intact, and the rewritten bytes are identical). Sparse
//! (`Options::sparse_log`): every flush starts in a fresh 4 KiB block and
//! zero-pads its last one, so nothing is rewritten and a drive with
//! per-block compression stores about the record bytes (seed 003).

use crate::error::{Error, Result};
use crate::store::page::{get_u32, get_u64, put_u32, put_u64};
use crate::store::pager::CountedFile;
use pagewise_io::{AlignedBuf, Backend};

/// Header of a record written by this build (magic `PWL2`).
pub const REC_HDR: usize = rec::SYNCED_LSN.end();

/// A log record's header fields (docs/design.md, "Write-ahead log").
#[allow(dead_code)] // every row of its table is named, read or not
pub mod rec {
    use crate::store::layout::Field;
    pub const MAGIC: Field = Field::new(0, 4);
    pub const CRC: Field = Field::new(4, 4);
    pub const EPOCH: Field = Field::new(8, 8);
    pub const LSN: Field = Field::new(16, 8);
    pub const LEN: Field = Field::new(24, 4);
    pub const DB_ID: Field = Field::new(28, 4);
    pub const SYNCED_LSN: Field = Field::new(32, 8);
}

/// The log record header's table in docs/design.md.
#[cfg(test)]
pub const TABLE: crate::store::layout::Table = crate::store::layout::Table {
    heading: "Write-ahead log",
    index: 0,
    rows: &[
        ("magic", rec::MAGIC),
        ("crc32c", rec::CRC),
        ("epoch", rec::EPOCH),
        ("LSN", rec::LSN),
        ("payload length", rec::LEN),
        ("database id", rec::DB_ID),
        ("synced LSN", rec::SYNCED_LSN),
    ],
};
const MAGIC: u32 = 0x324C_5750;
/// Format-1 records (magic `PWAL`): the same without the synced LSN.
const MAGIC_V1: u32 = 0x4C41_5750;
const REC_HDR_V1: usize = 32;
/// Block a sparse flush starts in and pads to (a compressing drive's unit).
pub const SPARSE_BLOCK_BYTES: usize = 4096;

pub struct Wal {
    file: CountedFile,
    align: usize,
    buf: AlignedBuf,
    buf_len: usize,
    flushed_len: usize,
    tail_off: u64,
    pub epoch: u64,
    db_id: u32,
    /// Bytes the log run occupies since the last reset (records, plus the
    /// padding of sparse flushes): what `wal_limit` bounds.
    pub bytes: u64,
    /// Pad every flush to a fresh block instead of rewriting the last one.
    sparse: bool,
    /// LSN of the last record appended, and of the last one an fsync made
    /// durable: every record carries the latter, so recovery can tell a
    /// damaged durable record from a torn tail (see [`scan`]).
    last_lsn: u64,
    synced_lsn: u64,
    /// This object wrote to the file since the last reset (or since open).
    wrote: bool,
    /// Where the run before the last reset ends in the file, when this
    /// object knows it: `None` until a reset of a run it wrote (at open the
    /// file may hold the run recovery replayed, which the fallback to the
    /// older superblock still needs).
    prev_run_end: Option<u64>,
}

impl Wal {
    pub fn new(file: CountedFile, epoch: u64, db_id: u32, sparse: bool) -> Self {
        let align = file.alignment().max(512);
        let align = if sparse {
            align.max(SPARSE_BLOCK_BYTES)
        } else {
            align
        };
        Self {
            sparse,
            buf: AlignedBuf::new(64 * 1024, align.max(4096)),
            file,
            align,
            buf_len: 0,
            flushed_len: 0,
            tail_off: 0,
            epoch,
            db_id,
            bytes: 0,
            last_lsn: 0,
            synced_lsn: 0,
            wrote: false,
            prev_run_end: None,
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
        let id = RecordId {
            epoch: self.epoch,
            db_id: self.db_id,
            lsn,
        };
        frame(&mut self.buf[at..need], id, self.synced_lsn, payload);
        self.buf_len = need;
        self.bytes += (REC_HDR + payload.len()) as u64;
        assert!(lsn > self.last_lsn || self.last_lsn == 0, "LSNs increase");
        self.last_lsn = lsn;
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
        // Past the records the reused buffer holds flushed ones: only the
        // padding is zeroed, not every byte a large group wrote.
        self.buf[self.buf_len..end].fill(0);
        self.file.write_at(&self.buf[..end], self.tail_off)?;
        self.wrote = true;
        if self.sparse {
            // The next flush starts in a fresh block: nothing is rewritten.
            self.bytes += (end - self.buf_len) as u64;
            self.tail_off += end as u64;
            self.buf_len = 0;
            self.flushed_len = 0;
            return Ok(());
        }
        let full = self.buf_len / self.align * self.align;
        if full > 0 {
            self.buf.copy_within(full..self.buf_len, 0);
            self.tail_off += full as u64;
            self.buf_len -= full;
        }
        self.flushed_len = self.buf_len;
        Ok(())
    }

    /// Makes everything flushed durable. Requires: `flush` ran since the
    /// last append (so every appended record is covered by this fsync).
    pub fn sync(&mut self) -> Result<()> {
        assert_eq!(self.unflushed(), 0, "sync after flush");
        self.file.sync()?;
        self.synced_lsn = self.last_lsn;
        Ok(())
    }

    /// Starts a new log run after a durable checkpoint of generation `epoch`.
    /// Unflushed records are dropped: the checkpoint contains them.
    pub fn reset(&mut self, epoch: u64) {
        let run_end = self.tail_off + self.buf_len.next_multiple_of(self.align) as u64;
        if self.wrote {
            self.prev_run_end = Some(run_end);
        } else if self.prev_run_end.is_some() {
            // An empty run: the file's bytes are older runs, none replayable.
            self.prev_run_end = Some(0);
        }
        self.wrote = false;
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

impl Wal {
    /// Whether the run before the last reset holds records: what a fallback
    /// to the older superblock slot replays.
    pub fn has_replayable_prev_run(&self) -> bool {
        matches!(self.prev_run_end, Some(end) if end > 0)
    }

    /// Gives the file's bytes past the last completed run back to the file
    /// system (a hole; docs/design.md, "Free space"): a fill leaves the log
    /// file as long as its longest run, about `wal_limit`. Requires: the
    /// current run is empty (called after the close checkpoint). Effect: the
    /// run a fallback to the older superblock replays (the one before the
    /// last reset) is kept; nothing when that run is not known.
    pub fn punch_stale(&self) -> Result<()> {
        assert!(
            self.tail_off == 0 && self.buf_len == 0,
            "punch with records in the run"
        );
        let Some(end) = self.prev_run_end else {
            return Ok(());
        };
        let from = end.next_multiple_of(SPARSE_BLOCK_BYTES as u64);
        let size = self.file.size()?;
        if size > from {
            self.file.punch_hole(from, size - from)?;
        }
        Ok(())
    }
}

/// The epoch of the first record in the log file if it is an intact record
/// of database `db_id`. A log run starts at offset 0 only after its
/// checkpoint's superblock is durable, so an epoch above the superblock's
/// generation proves a newer superblock existed (and was lost).
pub fn first_epoch(file: &dyn Backend, db_id: u32) -> Result<Option<u64>> {
    let align = file.alignment().max(512);
    let size = file.size()? / align as u64 * align as u64;
    if size == 0 {
        return Ok(None);
    }
    let mut head = AlignedBuf::new(align, align.max(4096));
    file.read_at(&mut head, 0)?;
    let len = get_u32(&head, rec::LEN.at) as u64;
    let magic = get_u32(&head, rec::MAGIC.at);
    if (magic != MAGIC && magic != MAGIC_V1)
        || get_u32(&head, rec::DB_ID.at) != db_id
        || REC_HDR as u64 + len > size
    {
        return Ok(None);
    }
    let whole = (REC_HDR as u64 + len).next_multiple_of(align as u64) as usize;
    let mut buf = AlignedBuf::new(whole, align.max(4096));
    file.read_at(&mut buf, 0)?;
    let epoch = get_u64(&buf, rec::EPOCH.at);
    let lsn = get_u64(&buf, rec::LSN.at);
    Ok(record_at(&buf, 0, epoch, db_id, lsn).map(|_| epoch))
}

/// Which record a header names: its log run, database and LSN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordId {
    pub epoch: u64,
    pub db_id: u32,
    pub lsn: u64,
}

/// Writes the record of `id` carrying `payload` into `rec` (exactly
/// `REC_HDR + payload.len()` bytes), sealed with its checksum.
pub fn frame(rec: &mut [u8], id: RecordId, synced_lsn: u64, payload: &[u8]) {
    assert_eq!(rec.len(), REC_HDR + payload.len(), "a record's frame");
    put_u32(rec, rec::MAGIC.at, MAGIC);
    put_u64(rec, rec::EPOCH.at, id.epoch);
    put_u64(rec, rec::LSN.at, id.lsn);
    put_u32(rec, rec::LEN.at, payload.len() as u32);
    put_u32(rec, rec::DB_ID.at, id.db_id);
    put_u64(rec, rec::SYNCED_LSN.at, synced_lsn);
    rec[REC_HDR..].copy_from_slice(payload);
    let crc = crc32c::crc32c(&rec[8..]);
    put_u32(rec, rec::CRC.at, crc);
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
    if size == 0 {
        return Ok(Vec::new());
    }
    let mut buf = AlignedBuf::new(size as usize, align.max(4096));
    file.read_at(&mut buf, 0)?;
    let first = RecordId {
        epoch,
        db_id,
        lsn: first_lsn,
    };
    scan_bytes(&buf, first).map_err(|(offset, what)| Error::Corrupt {
        path: file.path().to_path_buf(),
        page: 0,
        offset,
        what,
    })
}

/// A log run's records in order: (LSN, payload).
pub type Records = Vec<(u64, Vec<u8>)>;

/// The records of the log run of `first` (from its LSN on) in the log
/// file's bytes `buf`, or where the log is corrupt and why.
pub fn scan_bytes(buf: &[u8], first: RecordId) -> std::result::Result<Records, (u64, String)> {
    let RecordId {
        epoch,
        db_id,
        lsn: first_lsn,
    } = first;
    let mut out = Vec::new();
    let mut at = 0usize;
    let mut next = first_lsn;
    // Each step consumes a record or jumps to a later block: bounded.
    while at < buf.len() {
        let Some((hdr, len)) = record_at(buf, at, epoch, db_id, next) else {
            // A sparse flush's zero padding: the run goes on at the next
            // block if a record with exactly the next LSN starts there.
            match padding_end(buf, at) {
                Some(block) if record_at(buf, block, epoch, db_id, next).is_some() => {
                    at = block;
                    continue;
                }
                _ => break,
            }
        };
        out.push((next, buf[at + hdr..at + hdr + len].to_vec()));
        next += 1;
        at += hdr + len;
    }
    if let Some((later, synced)) = durable_after(buf, at, epoch, db_id, next) {
        return Err((
            at as u64,
            format!(
                "log record {next} is damaged, but record {later} after it says records up to \
                 {synced} were durable: the log is corrupt (not a torn tail); restore from a backup"
            ),
        ));
    }
    Ok(out)
}

/// An intact record of this run after offset `from` with an LSN above
/// `missing` whose synced LSN covers `missing`: proof that record `missing`
/// was durable and is damaged, not lost to a crash. Returns (its LSN, its
/// synced LSN). Looks at every byte offset where the magic occurs (a
/// vectorized search: every open runs it over the rest of the log file).
fn durable_after(
    buf: &[u8],
    from: usize,
    epoch: u64,
    db_id: u32,
    missing: u64,
) -> Option<(u64, u64)> {
    let magic = MAGIC.to_le_bytes();
    let end = buf.len().saturating_sub(REC_HDR);
    if from + 1 >= end {
        return None;
    }
    let hay = &buf[from + 1..end + 3];
    memchr::memmem::find_iter(hay, &magic).find_map(|i| {
        let at = from + 1 + i;
        debug_assert!(at < end && buf[at..at + 4] == magic);
        let lsn = get_u64(buf, at + rec::LSN.at);
        let synced = get_u64(buf, at + rec::SYNCED_LSN.at);
        (lsn > missing && synced >= missing && record_at(buf, at, epoch, db_id, lsn).is_some())
            .then_some((lsn, synced))
    })
}

/// (header bytes, payload bytes) of the record of LSN `lsn` at `at`, if one
/// is there whole: magic (either version), epoch, database id, LSN, length
/// and checksum all hold.
fn record_at(buf: &[u8], at: usize, epoch: u64, db_id: u32, lsn: u64) -> Option<(usize, usize)> {
    if at + REC_HDR_V1 > buf.len() {
        return None;
    }
    let hdr = match get_u32(buf, at) {
        MAGIC => REC_HDR,
        MAGIC_V1 => REC_HDR_V1,
        _ => return None,
    };
    if at + hdr > buf.len() {
        return None;
    }
    let h = &buf[at..at + hdr];
    let len = get_u32(h, rec::LEN.at) as usize;
    let whole = get_u64(h, rec::EPOCH.at) == epoch
        && get_u32(h, rec::DB_ID.at) == db_id
        && get_u64(h, rec::LSN.at) == lsn
        && buf.len() - at - hdr >= len
        && crc32c::crc32c(&buf[at + 8..at + hdr + len]) == get_u32(h, rec::CRC.at);
    whole.then_some((hdr, len))
}

/// If everything from `at` to the next sparse block boundary is zero (and
/// `at` is not on one), that boundary.
fn padding_end(buf: &[u8], at: usize) -> Option<usize> {
    let block = at.next_multiple_of(SPARSE_BLOCK_BYTES);
    (block != at && block < buf.len() && buf[at..block].iter().all(|&b| b == 0)).then_some(block)
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
        let mut w = Wal::new(wal_file(d.path()), 7, 5, false);
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

    /// Damage to a record a later record proves durable is corruption; damage
    /// after the last sync is a torn tail (docs/design.md, "Write-ahead log").
    #[test]
    fn damaged_durable_record_is_corrupt_and_unsynced_damage_is_a_tail() {
        const REC: usize = 100; // 40-byte header + 60-byte payload
        let d = tempfile::tempdir().unwrap();
        let mut w = Wal::new(wal_file(d.path()), 2, 4, false);
        for lsn in 1..=20u64 {
            w.append(lsn, &[lsn as u8; REC - REC_HDR]);
            w.flush().unwrap();
            if lsn % 5 == 0 && lsn <= 15 {
                w.sync().unwrap();
            }
        }
        let f = wal_file(d.path());
        assert_eq!(scan(&f, 4, 2, 1).unwrap().len(), 20);
        let damage = |lsn: usize| {
            let mut b = AlignedBuf::new(f.size().unwrap() as usize, 4096);
            f.read_at(&mut b, 0).unwrap();
            b[(lsn - 1) * REC + REC_HDR + 3] ^= 0xFF;
            f.write_at(&b, 0).unwrap();
        };
        // Records 16-20 carry synced LSN 15: damage at 18 is a torn tail.
        damage(18);
        assert_eq!(scan(&f, 4, 2, 1).unwrap().len(), 17);
        // Record 12 is covered by the synced LSN 15 that records 16+ carry.
        damage(12);
        let e = scan(&f, 4, 2, 1).unwrap_err();
        assert!(
            matches!(&e, Error::Corrupt { what, .. } if what.contains("record 12 is damaged")),
            "{e}"
        );
    }
}

#[cfg(test)]
mod sparse_tests {
    use super::*;
    use pagewise_io::{open, Accounted, DirectMode, IoStats, OpenOptions};
    use std::sync::Arc;

    #[test]
    fn sparse_flushes_start_fresh_blocks_and_scan_reads_across_the_padding() {
        let d = tempfile::tempdir().unwrap();
        let o = OpenOptions {
            write: true,
            create: true,
            direct: DirectMode::Off,
            ..Default::default()
        };
        let f: Arc<dyn Backend> = Arc::new(open(d.path().join("w"), &o).unwrap());
        let stats = IoStats::new();
        let mut w = Wal::new(Accounted::new(f.clone(), stats.clone()), 3, 9, true);
        // 10 flushes of one 100-byte record each: 10 fresh blocks, no rewrite.
        for lsn in 1..=10u64 {
            w.append(lsn, &[lsn as u8; 68]);
            w.flush().unwrap();
        }
        assert_eq!(f.size().unwrap(), 10 * SPARSE_BLOCK_BYTES as u64);
        assert_eq!(stats.snapshot().write_bytes, 10 * SPARSE_BLOCK_BYTES as u64);
        assert_eq!(
            w.bytes,
            10 * SPARSE_BLOCK_BYTES as u64,
            "padding counts toward wal_limit"
        );
        let recs = scan(&*f, 9, 3, 1).unwrap();
        assert_eq!(recs.len(), 10);
        assert_eq!(recs[6], (7, vec![7u8; 68]));
        // A hole (block 4 zeroed) ends the run there: no record past it.
        f.write_at(
            &AlignedBuf::new(SPARSE_BLOCK_BYTES, 4096),
            4 * SPARSE_BLOCK_BYTES as u64,
        )
        .unwrap();
        assert_eq!(scan(&*f, 9, 3, 1).unwrap().len(), 4);
    }
}
