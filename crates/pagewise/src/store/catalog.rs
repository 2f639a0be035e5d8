//! The catalog: one entry per named tree (its kind, its creation parameters
//! and an opaque root descriptor the tree kind encodes), then the free list.
//! The store keeps entries as bytes; tree kinds give them meaning.
//! Layout (both versions): docs/design.md, "Catalog".

use super::page::{get_u16, get_u32, get_u64};

const MAGIC_V1: u32 = 0x5443_5750; // "PWCT"
const MAGIC_V2: u32 = 0x3243_5750; // "PWC2"
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
    /// Encodes in the current format (version 2).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(16 + self.trees.len() * 80 + self.free.len() * 16);
        b.extend_from_slice(&MAGIC_V2.to_le_bytes());
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
        b.extend_from_slice(&(self.free.len() as u64).to_le_bytes());
        for &(s, n) in &self.free {
            b.extend_from_slice(&s.to_le_bytes());
            b.extend_from_slice(&n.to_le_bytes());
        }
        debug_assert_eq!(Catalog::decode(&b).as_ref(), Ok(self));
        b
    }

    /// Decodes either version; every length is checked before it is used.
    pub fn decode(b: &[u8]) -> Result<Catalog, String> {
        let mut r = Reader { b, at: 0 };
        let magic = r.u32()?;
        let v1 = match magic {
            MAGIC_V1 => true,
            MAGIC_V2 => false,
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
        let nfree = r.u64()? as usize;
        if nfree > b.len() / 16 {
            return Err(format!("free list of {nfree} extents exceeds the catalog"));
        }
        let free = (0..nfree)
            .map(|_| Ok((r.u64()?, r.u64()?)))
            .collect::<Result<Vec<_>, String>>()?;
        if r.at != b.len() {
            return Err(format!(
                "{} trailing bytes after the free list",
                b.len() - r.at
            ));
        }
        Ok(Catalog { trees, free })
    }
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
