//! Create, open and recovery (docs/design.md, "Superblock", "Recovery",
//! "Format versions").

use super::files::{new_db_id, open_files, wal_path, Files};
use super::{CommitState, Counters, Db, Inner, IoCats};
use crate::error::{Error, Result};
use crate::index::{Index, Trees, CODEC};
use crate::log::{self, Wal};
use crate::options::{Options, MAX_PAGE_SIZE, MIN_PAGE_SIZE};
use crate::store::cache::{Cache, SHARD_UNIT_BYTES};
use crate::store::catalog::Catalog;
use crate::store::extent::Extent;
use crate::store::page::Kind;
use crate::store::pager::Pager;
use crate::store::superblock::{
    self, Superblock, FLAG_TAIL_BEFORE, FORMAT_VERSION, OLDEST_FORMAT_VERSION,
};
use crate::store::Store;
use pagewise_io::{Accounted, AlignedBuf, Backend, IoStats};
use parking_lot::Mutex;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// A pager for reading superblocks before the Db exists.
fn probe_pager(file: &Arc<dyn Backend>, ps: usize) -> Pager {
    Pager::new(file.clone(), ps, CODEC, IoStats::new(), IoStats::new())
}

pub fn create(path: &Path, opts: Options) -> Result<Db> {
    Options::validate_page_size(opts.page_size)?;
    let files = open_files(path, &opts, true)?;
    let ps = opts.page_size;
    if files.data.alignment() > ps {
        let _ = opts.fs.remove(path);
        return Err(Error::Options(format!(
            "page size {ps} is below the device's logical block size {}",
            files.data.alignment()
        )));
    }
    let sb = Superblock {
        version: FORMAT_VERSION,
        page_size: ps as u32,
        gen: 0,
        lsn: 0,
        count_pages: 2,
        catalog: Extent {
            first_page: 0,
            count_pages: 0,
            len_bytes: 0,
        },
        db_id: new_db_id(path),
        flags: FLAG_TAIL_BEFORE,
    };
    // A log left behind by an earlier database at this path is emptied
    // (and could not be replayed anyway: its records carry another id).
    files.wal.set_len(0)?;
    files.wal.sync()?;
    let probe = probe_pager(&files.data, ps);
    probe.write_superblock(&sb)?;
    probe.set_len(2 * ps as u64)?;
    probe.sync()?;
    let db = start(path, &opts, files, ps, sb, Catalog::default())?;
    db.inner.checkpoint()?;
    Ok(db)
}

pub fn open(path: &Path, opts: Options) -> Result<Db> {
    let files = open_files(path, &opts, false)?;
    let (ps, sb) = read_superblock(&files.data, path)?;
    check_no_newer_checkpoint(&files, path, &sb)?;
    let catalog = read_catalog(&files.data, path, ps, &sb)?;
    let records = log::scan(&*files.wal, sb.db_id, sb.gen, sb.lsn + 1)?;
    if opts.read_only {
        if !records.is_empty() {
            return Err(Error::NeedsRecovery {
                path: path.to_path_buf(),
                records: records.len(),
            });
        }
        return start(path, &opts, files, ps, sb, catalog);
    }
    let db = start(path, &opts, files, ps, sb, catalog)?;
    db.inner.replay(records)?;
    // Always start a fresh log run: it also discards any unacknowledged
    // records that survived beyond the replayed prefix, and writes a
    // version-1 file's catalog and superblock in the current format.
    db.inner.checkpoint()?;
    Ok(db)
}

/// A damaged newest superblock must not roll the database back silently to
/// the older slot (whose freed pages may since have been reused): if the log
/// holds a run of a later checkpoint than the superblock chosen, that later
/// superblock existed and is lost.
fn check_no_newer_checkpoint(files: &Files, path: &Path, sb: &Superblock) -> Result<()> {
    match log::first_epoch(&*files.wal, sb.db_id)? {
        Some(epoch) if epoch > sb.gen => Err(Error::Corrupt {
            path: path.to_path_buf(),
            page: (sb.gen + 1) % 2,
            offset: ((sb.gen + 1) % 2) * sb.page_size as u64,
            what: format!(
                "the newest superblock (slot {}) is damaged: the log continues checkpoint {epoch}, \
                 but the only valid superblock is checkpoint {}; opening it would roll back",
                (sb.gen + 1) % 2,
                sb.gen
            ),
        }),
        _ => Ok(()),
    }
}

fn read_catalog(
    file: &Arc<dyn Backend>,
    path: &Path,
    ps: usize,
    sb: &Superblock,
) -> Result<Catalog> {
    let corrupt = |what: String| Error::Corrupt {
        path: path.to_path_buf(),
        page: sb.catalog.first_page,
        offset: sb.catalog.first_page.saturating_mul(ps as u64),
        what,
    };
    if !sb.catalog_is_sane() {
        return Err(corrupt(format!(
            "superblock names an impossible catalog {:?}",
            sb.catalog
        )));
    }
    if sb.flags & !FLAG_TAIL_BEFORE != 0 {
        let slot = sb.gen % 2;
        return Err(Error::Corrupt {
            path: path.to_path_buf(),
            page: slot,
            offset: slot * ps as u64,
            what: format!(
                "superblock flags {:#x} hold bits this version does not define",
                sb.flags
            ),
        });
    }
    if sb.catalog.len_bytes == 0 {
        return Ok(Catalog::default());
    }
    let b = probe_pager(file, ps).read_extent(&sb.catalog, Kind::Blob)?;
    let c = Catalog::decode(&b).map_err(corrupt)?;
    if let Some(&(s, n)) = c.free.last() {
        if s + n > sb.count_pages {
            let pages = sb.count_pages;
            return Err(corrupt(format!(
                "free extent {s}+{n} lies past the file's {pages} pages"
            )));
        }
    }
    Trees::from_catalog(c.trees.clone(), ps).map_err(corrupt)?;
    Ok(c)
}

/// Learns the page size from slot 0 (or, if it is damaged, from slot 1 at
/// every possible page size), then returns the newest valid superblock.
fn read_superblock(file: &Arc<dyn Backend>, path: &Path) -> Result<(usize, Superblock)> {
    let size = file.size()?;
    let ps = sniff_page_size(file, path, size)?;
    if file.alignment() > ps {
        return Err(Error::Options(format!(
            "{}: page size {ps} is below the device's logical block size {}; open it without direct I/O",
            path.display(),
            file.alignment()
        )));
    }
    if size < 2 * ps as u64 {
        return Err(Error::Truncated {
            path: path.to_path_buf(),
            expected: 2 * ps as u64,
            actual: size,
        });
    }
    let sb = newest_slot(file, path, ps)?;
    if size < sb.count_pages.saturating_mul(ps as u64) {
        return Err(Error::Truncated {
            path: path.to_path_buf(),
            expected: sb.count_pages.saturating_mul(ps as u64),
            actual: size,
        });
    }
    assert_eq!(sb.page_size as usize, ps);
    Ok((ps, sb))
}

fn newer(path: &Path, found: u32) -> Error {
    Error::NewerVersion {
        path: path.to_path_buf(),
        found,
        supported: FORMAT_VERSION,
    }
}

fn sniff_page_size(file: &Arc<dyn Backend>, path: &Path, size: u64) -> Result<usize> {
    let unit = file.alignment().max(512);
    let sniff_at = |off: u64| -> Result<Option<(u32, u32)>> {
        if off + unit as u64 > size {
            return Ok(None);
        }
        let mut b = AlignedBuf::new(unit, unit.max(4096));
        file.read_at(&mut b, off)?;
        Ok(superblock::sniff(&b))
    };
    let valid_ps = |p: u32| {
        let p = p as usize;
        p.is_power_of_two() && (MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&p)
    };
    if let Some((ver, p)) = sniff_at(0)? {
        if ver > FORMAT_VERSION {
            return Err(newer(path, ver));
        }
        if valid_ps(p) && ver >= OLDEST_FORMAT_VERSION {
            return Ok(p as usize);
        }
    }
    // Slot 0 is damaged: look for slot 1 at every possible page size.
    let mut p = MIN_PAGE_SIZE;
    while p <= MAX_PAGE_SIZE {
        if let Some((ver, found)) = sniff_at(p as u64)? {
            if found as usize == p {
                if ver > FORMAT_VERSION {
                    return Err(newer(path, ver));
                }
                return Ok(p);
            }
        }
        p *= 2;
    }
    Err(Error::NotADatabase {
        path: path.to_path_buf(),
    })
}

/// Reads and verifies both slots; the valid one with the higher generation
/// wins.
fn newest_slot(file: &Arc<dyn Backend>, path: &Path, ps: usize) -> Result<Superblock> {
    let probe = probe_pager(file, ps);
    let mut best: Option<Superblock> = None;
    let mut note = None;
    for slot in 0..2u64 {
        match probe.read_superblock(slot) {
            Ok(m) if m.gen % 2 == slot && m.page_size as usize == ps => {
                if m.version > FORMAT_VERSION {
                    return Err(newer(path, m.version));
                }
                if m.version < OLDEST_FORMAT_VERSION {
                    note = Some(format!(
                        "superblock slot {slot} has format version {}",
                        m.version
                    ));
                } else if best.is_none_or(|b| m.gen > b.gen) {
                    best = Some(m);
                }
            }
            Ok(m) => {
                let what = format!("holds generation {} for page size {}", m.gen, m.page_size);
                note = Some(format!("superblock slot {slot} {what}"));
            }
            Err(e) => note = Some(format!("superblock slot {slot}: {e}")),
        }
    }
    best.ok_or_else(|| Error::Corrupt {
        path: path.to_path_buf(),
        page: 0,
        offset: 0,
        what: format!("neither superblock is valid ({})", note.unwrap_or_default()),
    })
}

/// Builds the open Db over the durable checkpoint `sb` and its catalog.
fn start(
    path: &Path,
    opts: &Options,
    files: Files,
    ps: usize,
    sb: Superblock,
    catalog: Catalog,
) -> Result<Db> {
    let io = IoCats {
        wal: IoStats::new(),
        pages: IoStats::new(),
        meta: IoStats::new(),
    };
    let direct = files.data.is_direct();
    if let Some(d) = &opts.delta_flush {
        d.validate(ps, files.data.alignment())?;
    }
    opts.validate()?;
    let mut pager = Pager::new(files.data, ps, CODEC, io.pages.clone(), io.meta.clone());
    pager.set_flags(sb.flags);
    let wal = Wal::new(
        Accounted::new(files.wal, io.wal.clone()),
        sb.gen,
        sb.db_id,
        opts.sparse_log,
    );
    let trees = Trees::from_catalog(catalog.trees, ps).expect("validated by read_catalog");
    // Shards hold at least 8 units of 512 KiB (or a page, if larger): a
    // B-epsilon node image is up to 3 MiB in heap with the default node
    // bytes, and one larger than its shard's budget pushes the shard over it.
    let cache = Cache::new(opts.cache_bytes.max(4 * ps), ps.max(SHARD_UNIT_BYTES));
    let store = Store::new(pager, cache, trees, sb.count_pages, &catalog.free);
    let dirty_pct = opts.dirty_percent as usize;
    store.cache.set_dirty_percent(dirty_pct);
    let dirty_budget = (opts.cache_bytes / 100 * dirty_pct).max(16 * ps);
    let inner = Inner {
        path: path.to_path_buf(),
        durability: opts.durability,
        direct,
        read_only: opts.read_only,
        wal_limit_bytes: opts.wal_limit,
        snapshot_max_age: opts.snapshot_max_age,
        fs: opts.fs.clone(),
        dirty_limit_bytes: dirty_budget as u64,
        ix: Index::new(store, opts),
        commit: Mutex::new(CommitState {
            wal,
            gen: sb.gen,
            lsn: sb.lsn,
            ckpt_lsn: sb.lsn,
            catalog: (sb.catalog.len_bytes > 0).then_some(sb.catalog),
            consolidations_at_ckpt: 0,
        }),
        queue: Mutex::new(Vec::new()),
        poison: Mutex::new(None),
        io,
        counters: Counters::default(),
        closed: AtomicBool::new(false),
        lock: Mutex::new(Some(files.lock)),
    };
    let db = Db {
        inner: Arc::new(inner),
    };
    db.inner.ix.load_value_tables()?;
    Ok(db)
}

impl Inner {
    /// Replays log records through the normal apply path, checkpointing
    /// whenever the dirty set reaches its budget (bounded memory).
    pub(super) fn replay(&self, records: Vec<(u64, Vec<u8>)>) -> Result<()> {
        let mut cs = self.commit.lock();
        for (lsn, payload) in records {
            assert_eq!(lsn, cs.lsn + 1, "the log scan returns consecutive LSNs");
            let ops = log::ops::decode(&payload).map_err(|what| Error::Corrupt {
                path: wal_path(&self.path),
                page: 0,
                offset: 0,
                what: format!("log record {lsn} passed its checksum but does not parse: {what}"),
            })?;
            self.apply_ops(&ops)?;
            cs.lsn = lsn;
            self.counters
                .replayed
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.relieve_dirty(&mut cs)?;
        }
        Ok(())
    }
}
