//! The catalog: one entry per named tree (its kind, its creation parameters
//! and an opaque root descriptor the tree kind encodes), then the free list.
//! The store keeps entries as bytes; tree kinds give them meaning.
//! Layout (all three versions, and the free list's two forms):
//! docs/design.md, "Catalog".

use super::page::{get_u16, get_u32, get_u64};

const MAGIC_V1: u32 = 0x5443_5750; // "PWCT"
const MAGIC_V2: u32 = 0x3243_5750; // "PWC2"
const MAGIC_V3: u32 = 0x3343_5750; // "PWC3"
/// Free form byte of a `PWC3` catalog: extents, as in `PWC2`.
const FREE_EXTENTS: u8 = 0;
/// Free form byte of a `PWC3` catalog: one bit per page up to the last free one.
const FREE_BITMAP: u8 = 1;
/// Tree kind byte of B+trees, the only kind version 1 knew.
pub const KIND_BTREE: u8 = 1;
/// Tree kind byte of B-epsilon trees.
pub const KIND_BEPSILON: u8 = 2;
/// A version-1 entry's fixed part after the name: root u64, height u32 and
/// five u64 counters, which is also the B+tree root descriptor of version 2.
const V1_DESC_BYTES: usize = 52;

/// One tree as the catalog stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogEntry {
    pub name: String,
    pub kind: u8,
    pub params: Vec<u8>,
    pub root: Vec<u8>,
}

/// Trees and free extents (start page, page count).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalog {
    pub trees: Vec<CatalogEntry>,
    pub free: Vec<(u64, u64)>,
}

fn push_u16(b: &mut Vec<u8>, v: usize) {
    assert!(v <= u16::MAX as usize, "catalog field of {v} bytes");
    b.extend_from_slice(&(v as u16).to_le_bytes());
}

impl Catalog {
    /// Encodes in the current format (`PWC3`), the free list in its smaller
    /// form. Requires: `free` sorted, coalesced, no empty extent.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(16 + self.trees.len() * 80 + self.free_bytes());
        b.extend_from_slice(&MAGIC_V3.to_le_bytes());
        b.extend_from_slice(&(self.trees.len() as u32).to_le_bytes());
        for t in &self.trees {
            push_u16(&mut b, t.name.len());
            b.extend_from_slice(t.name.as_bytes());
            b.push(t.kind);
            push_u16(&mut b, t.params.len());
            b.extend_from_slice(&t.params);
            push_u16(&mut b, t.root.len());
            b.extend_from_slice(&t.root);
        }
        if extents_bytes(&self.free) <= bitmap_bytes(&self.free) {
            b.push(FREE_EXTENTS);
            push_extents(&mut b, &self.free);
        } else {
            b.push(FREE_BITMAP);
            push_bitmap(&mut b, &self.free);
        }
        debug_assert_eq!(Catalog::decode(&b).as_ref(), Ok(self));
        b
    }

    /// Bytes of the free list as [`Catalog::encode`] writes it (form byte included).
    pub fn free_bytes(&self) -> usize {
        1 + extents_bytes(&self.free).min(bitmap_bytes(&self.free))
    }

    /// Decodes any version; every length is checked before it is used.
    pub fn decode(b: &[u8]) -> Result<Catalog, String> {
        Ok(Self::decode_with_form(b)?.0)
    }

    /// [`Catalog::decode`], also naming the free list's stored form
    /// (`"extents"` or `"bitmap"`).
    pub fn decode_with_form(b: &[u8]) -> Result<(Catalog, &'static str), String> {
        let mut r = Reader { b, at: 0 };
        let magic = r.u32()?;
        let v1 = match magic {
            MAGIC_V1 => true,
            MAGIC_V2 | MAGIC_V3 => false,
            m => return Err(format!("bad catalog magic {m:#010x}")),
        };
        let count = r.u32()? as usize;
        let mut trees = Vec::with_capacity(count.min(4096));
        for _ in 0..count {
            let nl = r.u16()? as usize;
            let name =
                String::from_utf8(r.take(nl)?.to_vec()).map_err(|_| "tree name not UTF-8")?;
            let (kind, params, root) = if v1 {
                (KIND_BTREE, Vec::new(), r.take(V1_DESC_BYTES)?.to_vec())
            } else {
                let kind = r.take(1)?[0];
                let pl = r.u16()? as usize;
                let params = r.take(pl)?.to_vec();
                let rl = r.u16()? as usize;
                (kind, params, r.take(rl)?.to_vec())
            };
            trees.push(CatalogEntry {
                name,
                kind,
                params,
                root,
            });
        }
        let form = if magic == MAGIC_V3 {
            r.take(1)?[0]
        } else {
            FREE_EXTENTS
        };
        let (free, form) = match form {
            FREE_EXTENTS => (read_extents(&mut r)?, "extents"),
            FREE_BITMAP => (read_bitmap(&mut r)?, "bitmap"),
            f => return Err(format!("unknown free list form {f}")),
        };
        if r.at != b.len() {
            return Err(format!(
                "{} trailing bytes after the free list",
                b.len() - r.at
            ));
        }
        check_free(&free)?;
        Ok((Catalog { trees, free }, form))
    }
}

/// What the allocator requires of a free list: extents past the
/// superblocks, not empty, in page order, not overlapping, not past 2^64
/// (touching neighbours are allowed: older builds wrote them).
fn check_free(free: &[(u64, u64)]) -> Result<(), String> {
    let mut end = 2u64;
    for &(s, n) in free {
        if n == 0 || s < end {
            return Err(format!(
                "free extent {s}+{n} is empty, overlaps, or is out of order"
            ));
        }
        end = s
            .checked_add(n)
            .ok_or_else(|| format!("free extent {s}+{n} ends past 2^64 pages"))?;
    }
    Ok(())
}

/// Bytes of `free` as form 0: a count and 16 bytes per extent.
fn extents_bytes(free: &[(u64, u64)]) -> usize {
    8 + 16 * free.len()
}

/// Pages a form-1 bitmap covers: up to the end of the last free extent.
fn bitmap_bits(free: &[(u64, u64)]) -> u64 {
    free.last().map_or(0, |&(s, n)| s + n)
}

/// Bytes of `free` as form 1: a bit count and one bit per covered page.
fn bitmap_bytes(free: &[(u64, u64)]) -> usize {
    8 + bitmap_bits(free).div_ceil(8) as usize
}

fn push_extents(b: &mut Vec<u8>, free: &[(u64, u64)]) {
    b.extend_from_slice(&(free.len() as u64).to_le_bytes());
    for &(s, n) in free {
        b.extend_from_slice(&s.to_le_bytes());
        b.extend_from_slice(&n.to_le_bytes());
    }
}

fn push_bitmap(b: &mut Vec<u8>, free: &[(u64, u64)]) {
    let bits = bitmap_bits(free);
    b.extend_from_slice(&bits.to_le_bytes());
    let at = b.len();
    b.resize(at + bits.div_ceil(8) as usize, 0);
    let mut prev_end = 0;
    for &(s, n) in free {
        assert!(
            n > 0 && s >= prev_end,
            "free list not sorted and coalesced at page {s}"
        );
        prev_end = s + n;
        for page in s..s + n {
            b[at + (page / 8) as usize] |= 1 << (page % 8);
        }
    }
}

fn read_extents(r: &mut Reader) -> Result<Vec<(u64, u64)>, String> {
    let nfree = r.u64()? as usize;
    if nfree > r.left() / 16 {
        return Err(format!("free list of {nfree} extents exceeds the catalog"));
    }
    (0..nfree)
        .map(|_| Ok((r.u64()?, r.u64()?)))
        .collect::<Result<Vec<_>, String>>()
}

/// The bitmap's runs of set bits as sorted, coalesced extents.
fn read_bitmap(r: &mut Reader) -> Result<Vec<(u64, u64)>, String> {
    let bits = r.u64()?;
    if bits.div_ceil(8) > r.left() as u64 {
        return Err(format!("free bitmap of {bits} pages exceeds the catalog"));
    }
    let bytes = r.take(bits.div_ceil(8) as usize)?;
    if bits % 8 != 0 && bytes[bytes.len() - 1] >> (bits % 8) != 0 {
        return Err(format!("free bitmap has bits set past its {bits} pages"));
    }
    let mut free: Vec<(u64, u64)> = Vec::new();
    for (i, &byte) in bytes.iter().enumerate() {
        let mut rest = byte;
        while rest != 0 {
            let page = i as u64 * 8 + rest.trailing_zeros() as u64;
            rest &= rest - 1;
            match free.last_mut() {
                Some((s, n)) if *s + *n == page => *n += 1,
                _ => free.push((page, 1)),
            }
        }
    }
    Ok(free)
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.b.len() - self.at < n {
            return Err(format!("catalog ends early at byte {}", self.at));
        }
        self.at += n;
        Ok(&self.b[self.at - n..self.at])
    }
    fn left(&self) -> usize {
        self.b.len() - self.at
    }
    fn u16(&mut self) -> Result<u16, String> {
        Ok(get_u16(self.take(2)?, 0))
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(get_u32(self.take(4)?, 0))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(get_u64(self.take(8)?, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_every_truncation_is_an_error() {
        let c = Catalog {
            trees: vec![
                CatalogEntry {
                    name: "a".into(),
                    kind: KIND_BTREE,
                    params: vec![],
                    root: vec![1; 52],
                },
                CatalogEntry {
                    name: "orders".into(),
                    kind: 9,
                    params: vec![4, 5],
                    root: vec![],
                },
            ],
            free: vec![(4, 2), (100, 7)],
        };
        let b = c.encode();
        assert_eq!(Catalog::decode(&b).unwrap(), c);
        for cut in 0..b.len() {
            assert!(Catalog::decode(&b[..cut]).is_err(), "cut at {cut}");
        }
    }

    /// Sorted, coalesced extents from a seeded generator: gaps and lengths
    /// from 1 to `max_run` pages.
    fn free_list(seed: u64, count: usize, max_run: u64) -> Vec<(u64, u64)> {
        let mut x = seed | 1;
        let mut next = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            1 + x % m
        };
        // Pages 0 and 1 are the superblocks, never free.
        let mut at = 2;
        (0..count)
            .map(|_| {
                let s = at + next(max_run);
                let n = next(max_run);
                at = s + n;
                (s, n)
            })
            .collect()
    }

    fn form(b: &[u8]) -> u8 {
        // Magic, count 0, then the form byte.
        assert_eq!(get_u32(b, 4), 0);
        b[8]
    }

    #[test]
    fn the_free_list_takes_its_smaller_form_and_reads_back_the_same() {
        // Companion-like: single free pages two or three apart.
        let dense = free_list(7, 5000, 2);
        // Few extents far apart in a large file.
        let sparse: Vec<(u64, u64)> = (1..=20).map(|i| (i * 1_000_000, 3)).collect();
        for (free, want_form) in [(dense, FREE_BITMAP), (sparse, FREE_EXTENTS)] {
            let c = Catalog {
                trees: vec![],
                free,
            };
            let b = c.encode();
            assert_eq!(form(&b), want_form);
            let named = Catalog::decode_with_form(&b).unwrap().1;
            assert_eq!(named, ["extents", "bitmap"][want_form as usize]);
            // By hand: 16 bytes an extent, or a bit a page up to the last free one.
            let end = c.free.last().unwrap();
            let by_hand = 8 + (16 * c.free.len()).min((end.0 + end.1).div_ceil(8) as usize);
            assert_eq!(b.len(), 9 + by_hand);
            assert_eq!(c.free_bytes(), 1 + by_hand);
            assert_eq!(Catalog::decode(&b).unwrap(), c);
        }
        let empty = Catalog::default();
        assert_eq!(Catalog::decode(&empty.encode()).unwrap(), empty);
    }

    #[test]
    fn random_free_lists_round_trip_in_both_forms() {
        for seed in 1..200u64 {
            let free = free_list(seed, (seed % 40) as usize, 1 + seed % 9);
            let c = Catalog {
                trees: vec![],
                free,
            };
            let b = c.encode();
            assert_eq!(Catalog::decode(&b).unwrap(), c, "seed {seed}");
            for cut in 0..b.len() {
                assert!(
                    Catalog::decode(&b[..cut]).is_err(),
                    "seed {seed} cut at {cut}"
                );
            }
        }
    }

    #[test]
    fn a_bitmap_with_bits_past_its_count_or_an_unknown_form_is_corrupt() {
        let c = Catalog {
            trees: vec![],
            free: (0..100).map(|i| (3 * i + 4, 1)).collect(),
        };
        let mut b = c.encode();
        assert_eq!(form(&b), FREE_BITMAP);
        // The last free page is 301, so 302 bits: the last byte holds bits
        // 296 to 301 (298 and 301 set); set bit 302.
        assert_eq!(get_u64(&b, 9), 302);
        assert_eq!(*b.last().unwrap(), (1 << 2) | (1 << 5));
        *b.last_mut().unwrap() |= 1 << 6;
        assert!(Catalog::decode(&b)
            .unwrap_err()
            .contains("past its 302 pages"));
        let mut b = c.encode();
        b[8] = 2;
        assert!(Catalog::decode(&b).unwrap_err().contains("form 2"));
    }

    #[test]
    fn a_version_2_catalog_reads_as_before() {
        // Hand-built PWC2: no trees, two free extents, 16 bytes each.
        let mut b = Vec::new();
        b.extend_from_slice(&MAGIC_V2.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&2u64.to_le_bytes());
        for v in [4u64, 2, 100, 7] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let c = Catalog::decode(&b).unwrap();
        assert_eq!(c.free, vec![(4, 2), (100, 7)]);
        assert_eq!(&c.encode()[..4], b"PWC3");
    }

    #[test]
    fn version_1_entries_become_btrees() {
        // Hand-built version-1 catalog: one tree "t", root 9, height 2, then
        // five counters, then one free extent.
        let mut b = Vec::new();
        b.extend_from_slice(&MAGIC_V1.to_le_bytes());
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.push(b't');
        b.extend_from_slice(&9u64.to_le_bytes());
        b.extend_from_slice(&2u32.to_le_bytes());
        for v in [100u64, 5, 1, 3, 999] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&1u64.to_le_bytes());
        b.extend_from_slice(&4u64.to_le_bytes());
        b.extend_from_slice(&2u64.to_le_bytes());
        let c = Catalog::decode(&b).unwrap();
        assert_eq!(c.trees.len(), 1);
        assert_eq!(
            (c.trees[0].name.as_str(), c.trees[0].kind),
            ("t", KIND_BTREE)
        );
        assert_eq!(c.trees[0].root, b[11..11 + 52].to_vec());
        assert_eq!(c.free, vec![(4, 2)]);
    }
}
