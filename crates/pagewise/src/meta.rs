//! The superblock (two slots, pages 0 and 1) and the catalog blob it points to.
//!
//! Superblock payload, after the 32-byte page header (kind Meta, page id = slot):
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 32 | 8 | magic `PAGEWISE` |
//! | 40 | 4 | format version |
//! | 44 | 4 | page size |
//! | 48 | 8 | checkpoint generation (slot = generation % 2) |
//! | 56 | 8 | LSN of the last log record the checkpoint contains |
//! | 64 | 8 | page count (file high-water mark) |
//! | 72 | 8 | first page of the catalog blob extent |
//! | 80 | 4 | pages in the catalog blob extent |
//! | 84 | 4 | bytes in the catalog blob |
//! | 88 | 4 | database id (random at creation; stamped on every log record) |

use crate::page::{get_u16, get_u32, get_u64, put_u16, put_u32, put_u64};

pub const MAGIC: &[u8; 8] = b"PAGEWISE";
pub const FORMAT_VERSION: u32 = 1;
pub const META_USED: u32 = 60;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    pub version: u32,
    pub page_size: u32,
    pub gen: u64,
    pub lsn: u64,
    pub hwm: u64,
    pub blob_start: u64,
    pub blob_pages: u32,
    pub blob_len: u32,
    pub db_id: u32,
}

impl Meta {
    pub fn encode(&self, page: &mut [u8]) {
        page[32..40].copy_from_slice(MAGIC);
        put_u32(page, 40, self.version);
        put_u32(page, 44, self.page_size);
        put_u64(page, 48, self.gen);
        put_u64(page, 56, self.lsn);
        put_u64(page, 64, self.hwm);
        put_u64(page, 72, self.blob_start);
        put_u32(page, 80, self.blob_pages);
        put_u32(page, 84, self.blob_len);
        put_u32(page, 88, self.db_id);
    }

    /// Reads the fields; the caller has verified the page checksum.
    pub fn decode(page: &[u8]) -> Meta {
        Meta {
            version: get_u32(page, 40),
            page_size: get_u32(page, 44),
            gen: get_u64(page, 48),
            lsn: get_u64(page, 56),
            hwm: get_u64(page, 64),
            blob_start: get_u64(page, 72),
            blob_pages: get_u32(page, 80),
            blob_len: get_u32(page, 84),
            db_id: get_u32(page, 88),
        }
    }
}

/// Whether the first bytes of a slot look like a pagewise superblock;
/// returns (version, page size) unverified.
pub fn sniff(first: &[u8]) -> Option<(u32, u32)> {
    if first.len() < 48 || &first[32..40] != MAGIC {
        return None;
    }
    Some((get_u32(first, 40), get_u32(first, 44)))
}

/// Per-tree bookkeeping, persisted in the catalog.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TreeMeta {
    pub root: u64,
    pub height: u32,
    pub entries: u64,
    pub leaf_pages: u64,
    pub branch_pages: u64,
    pub overflow_pages: u64,
    /// Sum of encoded leaf entry sizes (for average fill).
    pub leaf_bytes: u64,
}

const BLOB_MAGIC: u32 = 0x5443_5750; // "PWCT"

/// Catalog blob: `magic u32 | ntrees u32 | trees | nfree u64 | (start u64, len u64)*`,
/// tree: `name_len u16 | name | root u64 | height u32 | entries u64 |
/// leaf_pages u64 | branch_pages u64 | overflow_pages u64 | leaf_bytes u64`.
pub fn encode_blob(trees: &[(String, TreeMeta)], free: &[(u64, u64)]) -> Vec<u8> {
    let mut b = Vec::with_capacity(16 + trees.len() * 64 + free.len() * 16);
    let mut tmp = [0u8; 8];
    let mut push32 = |b: &mut Vec<u8>, v: u32| {
        put_u32(&mut tmp, 0, v);
        b.extend_from_slice(&tmp[..4]);
    };
    push32(&mut b, BLOB_MAGIC);
    push32(&mut b, trees.len() as u32);
    for (name, t) in trees {
        let mut l = [0u8; 2];
        put_u16(&mut l, 0, name.len() as u16);
        b.extend_from_slice(&l);
        b.extend_from_slice(name.as_bytes());
        b.extend_from_slice(&t.root.to_le_bytes());
        push32(&mut b, t.height);
        for v in [
            t.entries,
            t.leaf_pages,
            t.branch_pages,
            t.overflow_pages,
            t.leaf_bytes,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
    }
    b.extend_from_slice(&(free.len() as u64).to_le_bytes());
    for &(s, n) in free {
        b.extend_from_slice(&s.to_le_bytes());
        b.extend_from_slice(&n.to_le_bytes());
    }
    b
}

pub type Catalog = (Vec<(String, TreeMeta)>, Vec<(u64, u64)>);

pub fn decode_blob(b: &[u8]) -> Result<Catalog, String> {
    let mut at = 0usize;
    let need = |at: usize, n: usize| {
        if at + n > b.len() {
            Err(format!("catalog ends early at byte {at}"))
        } else {
            Ok(())
        }
    };
    need(at, 8)?;
    if get_u32(b, 0) != BLOB_MAGIC {
        return Err("bad catalog magic".into());
    }
    let ntrees = get_u32(b, 4) as usize;
    at += 8;
    let mut trees = Vec::with_capacity(ntrees.min(4096));
    for _ in 0..ntrees {
        need(at, 2)?;
        let nl = get_u16(b, at) as usize;
        at += 2;
        need(at, nl + 8 + 4 + 40)?;
        let name = String::from_utf8(b[at..at + nl].to_vec()).map_err(|_| "tree name not UTF-8")?;
        at += nl;
        let root = get_u64(b, at);
        let height = get_u32(b, at + 8);
        at += 12;
        let v: Vec<u64> = (0..5).map(|i| get_u64(b, at + 8 * i)).collect();
        at += 40;
        trees.push((
            name,
            TreeMeta {
                root,
                height,
                entries: v[0],
                leaf_pages: v[1],
                branch_pages: v[2],
                overflow_pages: v[3],
                leaf_bytes: v[4],
            },
        ));
    }
    need(at, 8)?;
    let nfree = get_u64(b, at) as usize;
    at += 8;
    need(at, nfree.saturating_mul(16))?;
    let free = (0..nfree)
        .map(|i| (get_u64(b, at + 16 * i), get_u64(b, at + 16 * i + 8)))
        .collect();
    Ok((trees, free))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_roundtrip() {
        let t = TreeMeta {
            root: 9,
            height: 2,
            entries: 100,
            leaf_pages: 5,
            branch_pages: 1,
            overflow_pages: 3,
            leaf_bytes: 999,
        };
        let trees = vec![("a".to_string(), t), ("orders".to_string(), t)];
        let free = vec![(4, 2), (100, 7)];
        let b = encode_blob(&trees, &free);
        assert_eq!(decode_blob(&b).unwrap(), (trees, free));
        assert!(decode_blob(&b[..b.len() - 1]).is_err());
    }
}
