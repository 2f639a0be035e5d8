//! The superblock: two slots, pages 0 and 1, the newest valid one wins.
//! Layout: docs/design.md, "Superblock".

use super::extent::Extent;
use super::page::{get_u32, get_u64, put_u32, put_u64};

pub const MAGIC: &[u8; 8] = b"PAGEWISE";

/// The superblock's fields after its page header (docs/design.md,
/// "Superblock (pages 0 and 1)").
#[allow(dead_code)] // every row of its table is named, read or not
pub mod sb {
    use crate::store::layout::Field;
    pub const HEADER: Field = Field::new(0, crate::store::page::HDR);
    pub const MAGIC: Field = Field::new(32, 8);
    pub const VERSION: Field = Field::new(40, 4);
    pub const PAGE_SIZE: Field = Field::new(44, 4);
    pub const GEN: Field = Field::new(48, 8);
    pub const LSN: Field = Field::new(56, 8);
    pub const COUNT_PAGES: Field = Field::new(64, 8);
    pub const CATALOG_FIRST: Field = Field::new(72, 8);
    pub const CATALOG_PAGES: Field = Field::new(80, 4);
    pub const CATALOG_BYTES: Field = Field::new(84, 4);
    pub const DB_ID: Field = Field::new(88, 4);
    pub const FLAGS: Field = Field::new(92, 4);
}

/// The superblock's table in docs/design.md.
#[cfg(test)]
pub const TABLE: crate::store::layout::Table = crate::store::layout::Table {
    heading: "Superblock (pages 0 and 1)",
    index: 0,
    rows: &[
        ("page header", sb::HEADER),
        ("magic", sb::MAGIC),
        ("format version", sb::VERSION),
        ("page size", sb::PAGE_SIZE),
        ("checkpoint generation", sb::GEN),
        ("LSN", sb::LSN),
        ("page count", sb::COUNT_PAGES),
        ("catalog extent: first page", sb::CATALOG_FIRST),
        ("catalog extent: page count", sb::CATALOG_PAGES),
        ("catalog extent: bytes", sb::CATALOG_BYTES),
        ("database id", sb::DB_ID),
        ("flags", sb::FLAGS),
    ],
};
/// Version 2: catalog entries carry a tree kind and an opaque root
/// descriptor; version 3: B+tree delta blocks (page kind 6); version 4:
/// B+tree branches name their children's bases (page kind 8); version 5:
/// B-epsilon buffers stored as segments; version 6: B-epsilon basements
/// stored as segments; version 7: superblock flags (a delta block before
/// its base lies in its page's last 4 KiB in files created so); version 8:
/// catalog `PWC3`, its free list as extents or a bitmap; version 9:
/// B-epsilon trees may store values in extents of their own (20-byte
/// parameters, tagged values: "B-epsilon value extents"); version 10:
/// packed references into value runs and 60-byte B-epsilon descriptors
/// naming a value table ("B-epsilon packed values"). Older files
/// are read and upgraded by their first read-write open (docs/design.md,
/// "Format versions").
pub const FORMAT_VERSION: u32 = 10;
/// Oldest format this build opens.
pub const OLDEST_FORMAT_VERSION: u32 = 1;
/// Payload bytes after the page header (offsets 32..96).
pub const SUPERBLOCK_USED_BYTES: u32 = (sb::FLAGS.end() - sb::MAGIC.at) as u32;
/// Flag: a delta block on the page just before its base lies in that page's
/// last [`crate::store::read::TAIL_BYTES`] (set when a file is created as
/// version 7 or later; a file upgraded from version 6 or older keeps 0 and
/// its delta blocks at page starts).
pub const FLAG_TAIL_BEFORE: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Superblock {
    pub version: u32,
    pub page_size: u32,
    pub gen: u64,
    pub lsn: u64,
    /// Pages in the file (high-water mark).
    pub count_pages: u64,
    /// The catalog's extent; `len_bytes` 0 means no catalog yet.
    pub catalog: Extent,
    pub db_id: u32,
    /// `FLAG_*` bits; 0 in files older than version 7.
    pub flags: u32,
}

impl Superblock {
    pub fn encode(&self, page: &mut [u8]) {
        assert!(
            self.version == FORMAT_VERSION,
            "only the current format is written"
        );
        assert!(self.count_pages >= 2 && self.page_size as usize == page.len());
        page[sb::MAGIC.at..sb::MAGIC.end()].copy_from_slice(MAGIC);
        put_u32(page, sb::VERSION.at, self.version);
        put_u32(page, sb::PAGE_SIZE.at, self.page_size);
        put_u64(page, sb::GEN.at, self.gen);
        put_u64(page, sb::LSN.at, self.lsn);
        put_u64(page, sb::COUNT_PAGES.at, self.count_pages);
        put_u64(page, sb::CATALOG_FIRST.at, self.catalog.first_page);
        put_u32(page, sb::CATALOG_PAGES.at, self.catalog.count_pages as u32);
        put_u32(page, sb::CATALOG_BYTES.at, self.catalog.len_bytes as u32);
        put_u32(page, sb::DB_ID.at, self.db_id);
        put_u32(page, sb::FLAGS.at, self.flags);
    }

    /// Reads the fields; the caller has verified the page checksum. A meta
    /// page without the magic is an error (a sealed page of another kind of
    /// file, or a bug's), never trusted.
    pub fn decode(page: &[u8]) -> Result<Superblock, String> {
        let magic = page.get(sb::MAGIC.at..sb::MAGIC.end());
        if magic != Some(&MAGIC[..]) || page.len() < sb::FLAGS.end() {
            return Err("meta page without the superblock magic".into());
        }
        let sb = Superblock {
            version: get_u32(page, sb::VERSION.at),
            page_size: get_u32(page, sb::PAGE_SIZE.at),
            gen: get_u64(page, sb::GEN.at),
            lsn: get_u64(page, sb::LSN.at),
            count_pages: get_u64(page, sb::COUNT_PAGES.at),
            catalog: Extent {
                first_page: get_u64(page, sb::CATALOG_FIRST.at),
                count_pages: get_u32(page, sb::CATALOG_PAGES.at) as u64,
                len_bytes: get_u32(page, sb::CATALOG_BYTES.at) as u64,
            },
            db_id: get_u32(page, sb::DB_ID.at),
            flags: if get_u32(page, sb::VERSION.at) >= 7 {
                get_u32(page, sb::FLAGS.at)
            } else {
                0
            },
        };
        Ok(sb)
    }

    /// Whether the catalog extent is consistent with the page size and lies
    /// inside the file (a sealed superblock can still hold nonsense if a bug
    /// wrote it; never trust it further than this).
    pub fn catalog_is_sane(&self) -> bool {
        let c = &self.catalog;
        if c.len_bytes == 0 {
            return c.count_pages == 0;
        }
        let ps = self.page_size as usize;
        c.first_page >= 2
            && c.count_pages >= super::extent::pages_for(c.len_bytes, ps)
            && c.first_page
                .checked_add(c.count_pages)
                .is_some_and(|e| e <= self.count_pages)
    }
}

/// Whether the first bytes of a slot look like a pagewise superblock;
/// returns (version, page size) unverified.
pub fn sniff(first: &[u8]) -> Option<(u32, u32)> {
    if first.len() < 48 || &first[32..40] != MAGIC {
        return None;
    }
    Some((
        get_u32(first, sb::VERSION.at),
        get_u32(first, sb::PAGE_SIZE.at),
    ))
}
