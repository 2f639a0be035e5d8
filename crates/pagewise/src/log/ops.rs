//! Log operations: the payload of one record is one batch, `nops u32` then
//! `nops` ops, in one of two layouts: the compact one this build writes
//! (bit 31 of `nops` set: a table of the batch's tree names, then ops naming
//! a tree by its index, lengths as varints) or the fixed-width one of
//! formats 1-4, still read. Each op's fields are declared once in
//! [`log_ops!`] and the encoders and decoders of both layouts are generated
//! from that declaration, so no direction can drift from another
//! (docs/design.md, "Log operations").

use crate::store::page::{get_u16, get_u32};
use std::collections::HashMap;
use std::sync::Arc;

/// Bit 31 of a payload's op count: the ops are in the compact layout.
const COMPACT_BIT: u32 = 1 << 31;

/// The compact payload's fixed head (docs/design.md, "Log operations"); the
/// name table and the ops follow it.
pub mod head {
    use crate::store::layout::Field;
    pub const OP_COUNT: Field = Field::new(0, 4);
    pub const NAME_COUNT: Field = Field::new(4, 2);
}

/// The compact payload's table in docs/design.md.
#[cfg(test)]
pub const HEAD_TABLE: crate::store::layout::Table = crate::store::layout::Table {
    heading: "Log operations",
    index: 0,
    rows: &[
        ("op count", head::OP_COUNT),
        ("name count", head::NAME_COUNT),
    ],
};

/// Field codecs: how each field type is written and read back.
trait Field: Sized {
    /// Bytes `put` appends.
    fn size(&self) -> usize;
    fn put(&self, out: &mut Vec<u8>);
    fn get(r: &mut Reader) -> Result<Self, String>;
}

/// A tree name: `len u16 | UTF-8 bytes`.
impl Field for Arc<str> {
    fn size(&self) -> usize {
        2 + self.len()
    }
    fn put(&self, out: &mut Vec<u8>) {
        assert!(self.len() <= u16::MAX as usize);
        out.extend_from_slice(&(self.len() as u16).to_le_bytes());
        out.extend_from_slice(self.as_bytes());
    }
    fn get(r: &mut Reader) -> Result<Self, String> {
        let n = get_u16(r.take(2)?, 0) as usize;
        let s = std::str::from_utf8(r.take(n)?).map_err(|_| "tree name not UTF-8")?;
        Ok(Arc::from(s))
    }
}

/// Bytes: `len u32 | bytes`.
impl Field for Vec<u8> {
    fn size(&self) -> usize {
        4 + self.len()
    }
    fn put(&self, out: &mut Vec<u8>) {
        assert!(self.len() <= u32::MAX as usize);
        out.extend_from_slice(&(self.len() as u32).to_le_bytes());
        out.extend_from_slice(self);
    }
    fn get(r: &mut Reader) -> Result<Self, String> {
        let n = get_u32(r.take(4)?, 0) as usize;
        Ok(r.take(n)?.to_vec())
    }
}

/// One byte.
impl Field for u8 {
    fn size(&self) -> usize {
        1
    }
    fn put(&self, out: &mut Vec<u8>) {
        out.push(*self);
    }
    fn get(r: &mut Reader) -> Result<Self, String> {
        Ok(r.take(1)?[0])
    }
}

/// The tree names of one compact payload: each name's index in the table
/// the payload starts with. Found by a scan (a batch names a few trees, and
/// its ops share their tree's `Arc`, so the pointer test mostly decides),
/// or by a map past [`Names::SCAN_MAX`] names.
struct Names {
    list: Vec<Arc<str>>,
    map: Option<HashMap<Arc<str>, u32>>,
}

impl Names {
    const SCAN_MAX: usize = 16;

    /// The distinct trees of `ops`, in order of first use.
    fn of(ops: &[Op]) -> Names {
        let mut n = Names {
            list: Vec::new(),
            map: None,
        };
        for op in ops {
            if n.find(op.tree()).is_none() {
                let i = n.list.len() as u32;
                n.list.push(op.tree().clone());
                if let Some(m) = &mut n.map {
                    m.insert(op.tree().clone(), i);
                } else if n.list.len() > Self::SCAN_MAX {
                    n.map = Some(n.list.iter().cloned().zip(0..).collect());
                }
            }
        }
        assert!(n.list.len() <= ops.len());
        n
    }

    fn find(&self, tree: &Arc<str>) -> Option<u32> {
        match &self.map {
            Some(m) => m.get(tree).copied(),
            None => {
                let same = |n: &Arc<str>| Arc::ptr_eq(n, tree) || **n == **tree;
                self.list.iter().position(same).map(|i| i as u32)
            }
        }
    }

    /// The index of a tree of the batch.
    fn index(&self, tree: &Arc<str>) -> u32 {
        self.find(tree).expect("the batch's trees are in its table")
    }
}

/// Field codecs of the compact layout: a tree is its index in the
/// payload's name table, a length is a varint (LEB128, at most 5 bytes).
trait Compact: Sized {
    fn size_c(&self, names: &Names) -> usize;
    fn put_c(&self, names: &Names, out: &mut Vec<u8>);
    fn get_c(r: &mut Reader, names: &[Arc<str>]) -> Result<Self, String>;
}

impl Compact for Arc<str> {
    fn size_c(&self, names: &Names) -> usize {
        varint_size(names.index(self))
    }
    fn put_c(&self, names: &Names, out: &mut Vec<u8>) {
        put_varint(names.index(self), out);
    }
    fn get_c(r: &mut Reader, names: &[Arc<str>]) -> Result<Self, String> {
        let i = r.varint()? as usize;
        let name = names
            .get(i)
            .ok_or_else(|| format!("tree index {i} of {}", names.len()))?;
        Ok(name.clone())
    }
}

impl Compact for Vec<u8> {
    fn size_c(&self, _: &Names) -> usize {
        varint_size(self.len() as u32) + self.len()
    }
    fn put_c(&self, _: &Names, out: &mut Vec<u8>) {
        assert!(self.len() <= u32::MAX as usize);
        put_varint(self.len() as u32, out);
        out.extend_from_slice(self);
    }
    fn get_c(r: &mut Reader, _: &[Arc<str>]) -> Result<Self, String> {
        let n = r.varint()? as usize;
        Ok(r.take(n)?.to_vec())
    }
}

impl Compact for u8 {
    fn size_c(&self, _: &Names) -> usize {
        1
    }
    fn put_c(&self, _: &Names, out: &mut Vec<u8>) {
        out.push(*self);
    }
    fn get_c(r: &mut Reader, _: &[Arc<str>]) -> Result<Self, String> {
        Ok(r.take(1)?[0])
    }
}

fn varint_size(v: u32) -> usize {
    (32 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn put_varint(mut v: u32, out: &mut Vec<u8>) {
    for _ in 0..5 {
        if v < 0x80 {
            out.push(v as u8);
            return;
        }
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    unreachable!("a u32 takes at most 5 varint bytes");
}

pub struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.b.len() - self.at < n {
            return Err("log record payload ends early".into());
        }
        self.at += n;
        Ok(&self.b[self.at - n..self.at])
    }

    /// A varint of at most 5 bytes whose value fits a u32.
    fn varint(&mut self) -> Result<u32, String> {
        let mut v = 0u64;
        for i in 0..5 {
            let b = self.take(1)?[0];
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                return u32::try_from(v).map_err(|_| "varint above u32".into());
            }
        }
        Err("varint longer than 5 bytes".into())
    }
}

/// Declares the ops: `code => Name { field: Type, ... }`. Generates the enum,
/// `op_size`, `encode_op` and `decode_op`.
macro_rules! log_ops {
    ($($code:literal => $name:ident { $($field:ident : $ty:ty),* $(,)? }),* $(,)?) => {
        /// One logged operation on a named tree.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Op {
            $($name { $($field: $ty),* }),*
        }

        /// Bytes `encode_op` appends for `op` (the fixed-width layout this
        /// build reads; tests write it).
        #[cfg(test)]
        fn op_size(op: &Op) -> usize {
            match op {
                $(Op::$name { $($field),* } => 1 $(+ Field::size($field))*,)*
            }
        }

        #[cfg(test)]
        fn encode_op(op: &Op, out: &mut Vec<u8>) {
            match op {
                $(Op::$name { $($field),* } => {
                    out.push($code);
                    $(Field::put($field, out);)*
                })*
            }
        }

        fn decode_op(r: &mut Reader) -> Result<Op, String> {
            let code = r.take(1)?[0];
            match code {
                $($code => Ok(Op::$name { $($field: <$ty as Field>::get(r)?),* }),)*
                k => Err(format!("unknown log op kind {k}")),
            }
        }

        /// Bytes `encode_op_c` appends for `op`.
        fn op_size_c(op: &Op, names: &Names) -> usize {
            match op {
                $(Op::$name { $($field),* } => 1 $(+ Compact::size_c($field, names))*,)*
            }
        }

        fn encode_op_c(op: &Op, names: &Names, out: &mut Vec<u8>) {
            match op {
                $(Op::$name { $($field),* } => {
                    out.push($code);
                    $(Compact::put_c($field, names, out);)*
                })*
            }
        }

        fn decode_op_c(r: &mut Reader, names: &[Arc<str>]) -> Result<Op, String> {
            let code = r.take(1)?[0];
            match code {
                $($code => Ok(Op::$name { $($field: <$ty as Compact>::get_c(r, names)?),* }),)*
                k => Err(format!("unknown log op kind {k}")),
            }
        }
    };
}

log_ops! {
    1 => Put { tree: Arc<str>, key: Vec<u8>, value: Vec<u8> },
    2 => Remove { tree: Arc<str>, key: Vec<u8> },
    3 => CreateTree { tree: Arc<str>, kind: u8, params: Vec<u8> },
    4 => Upsert { tree: Arc<str>, key: Vec<u8>, operand: Vec<u8> },
}

impl Op {
    pub fn tree(&self) -> &Arc<str> {
        match self {
            Op::Put { tree, .. }
            | Op::Remove { tree, .. }
            | Op::CreateTree { tree, .. }
            | Op::Upsert { tree, .. } => tree,
        }
    }

    /// The key of a put, remove or upsert.
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            Op::Put { key, .. } | Op::Remove { key, .. } | Op::Upsert { key, .. } => Some(key),
            Op::CreateTree { .. } => None,
        }
    }

    /// Key and value bytes the op carries (for size limits).
    pub fn user_bytes(&self) -> usize {
        match self {
            Op::Put { key, value, .. } => key.len() + value.len(),
            Op::Upsert { key, operand, .. } => key.len() + operand.len(),
            Op::Remove { key, .. } => key.len(),
            Op::CreateTree { params, .. } => params.len(),
        }
    }
}

/// Appends the record payload of a batch to `out`, in the compact layout
/// (docs/design.md, "Log operations").
pub fn encode(ops: &[Op], out: &mut Vec<u8>) {
    assert!((ops.len() as u64) < COMPACT_BIT as u64);
    let start = out.len();
    let names = Names::of(ops);
    let table_bytes: usize = names.list.iter().map(Field::size).sum();
    let ops_bytes: usize = ops.iter().map(|op| op_size_c(op, &names)).sum();
    let size_bytes = head::NAME_COUNT.end() + table_bytes + ops_bytes;
    out.reserve(size_bytes);
    debug_assert_eq!(out.len() - start, head::OP_COUNT.at);
    out.extend_from_slice(&(ops.len() as u32 | COMPACT_BIT).to_le_bytes());
    assert!(
        names.list.len() <= u16::MAX as usize,
        "a batch names at most 65,535 trees"
    );
    debug_assert_eq!(out.len() - start, head::NAME_COUNT.at);
    out.extend_from_slice(&(names.list.len() as u16).to_le_bytes());
    for name in &names.list {
        Field::put(name, out);
    }
    for op in ops {
        encode_op_c(op, &names, out);
    }
    assert_eq!(
        out.len() - start,
        size_bytes,
        "op_size_c agrees with encode_op_c"
    );
    debug_assert_eq!(decode(&out[start..]).as_deref(), Ok(ops));
}

/// Decodes a record payload: the compact layout [`encode`] writes, or the
/// fixed-width one of formats 1-4 (version-1 records are a subset of it:
/// puts and removes only).
pub fn decode(b: &[u8]) -> Result<Vec<Op>, String> {
    let mut r = Reader { b, at: 0 };
    debug_assert_eq!(r.at, head::OP_COUNT.at);
    let op_count = get_u32(r.take(head::OP_COUNT.bytes)?, 0);
    let n = (op_count & !COMPACT_BIT) as usize;
    // Every op takes at least 2 bytes: a count past that is damage.
    if n > b.len() / 2 {
        return Err(format!("{n} ops in a payload of {} bytes", b.len()));
    }
    let mut ops = Vec::with_capacity(n);
    if op_count & COMPACT_BIT == 0 {
        for _ in 0..n {
            ops.push(decode_op(&mut r)?);
        }
    } else {
        debug_assert_eq!(r.at, head::NAME_COUNT.at);
        let count = get_u16(r.take(head::NAME_COUNT.bytes)?, 0) as usize;
        let names = (0..count)
            .map(|_| <Arc<str> as Field>::get(&mut r))
            .collect::<Result<Vec<_>, _>>()?;
        for _ in 0..n {
            ops.push(decode_op_c(&mut r, &names)?);
        }
    }
    if r.at != b.len() {
        return Err("trailing bytes in log record".into());
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Op> {
        let t: Arc<str> = Arc::from("orders");
        vec![
            Op::CreateTree {
                tree: t.clone(),
                kind: 1,
                params: vec![9, 9],
            },
            Op::Put {
                tree: t.clone(),
                key: b"k1".to_vec(),
                value: b"v1".to_vec(),
            },
            Op::Remove {
                tree: Arc::from("a"),
                key: b"k2".to_vec(),
            },
            Op::Upsert {
                tree: t,
                key: vec![],
                operand: vec![7u8; 1000],
            },
        ]
    }

    /// `ops` in the fixed-width layout of formats 1-4.
    fn encode_fixed(ops: &[Op]) -> Vec<u8> {
        let mut out = (ops.len() as u32).to_le_bytes().to_vec();
        for op in ops {
            encode_op(op, &mut out);
        }
        assert_eq!(out.len(), 4 + ops.iter().map(op_size).sum::<usize>());
        out
    }

    #[test]
    fn roundtrip_and_every_truncation_fails() {
        for enc in [
            {
                let mut enc = Vec::new();
                encode(&sample(), &mut enc);
                enc
            },
            encode_fixed(&sample()),
        ] {
            assert_eq!(decode(&enc).unwrap(), sample());
            for cut in 0..enc.len() {
                assert!(decode(&enc[..cut]).is_err(), "cut at {cut}");
            }
        }
    }

    /// A batch over more trees than a scan covers: names found by the map,
    /// indexes in order of first use, and the payload round-trips.
    #[test]
    fn many_trees_round_trip() {
        let trees: Vec<Arc<str>> = (0..40).map(|i| Arc::from(format!("t{i}"))).collect();
        let ops: Vec<Op> = (0..200usize)
            .map(|i| Op::Put {
                // Fresh Arcs half the time: names match by value too.
                tree: match i % 2 {
                    0 => trees[i * 7 % 40].clone(),
                    _ => Arc::from(&*trees[i * 7 % 40]),
                },
                key: i.to_le_bytes().to_vec(),
                value: vec![i as u8; i % 5],
            })
            .collect();
        let names = Names::of(&ops);
        assert!(names.map.is_some() && names.list.len() == 40);
        assert_eq!(names.index(&trees[7]), 1, "first use order");
        let mut enc = Vec::new();
        encode(&ops, &mut enc);
        assert_eq!(decode(&enc).unwrap(), ops);
    }

    #[test]
    fn compact_layout_by_hand() {
        // Two puts on "t", one remove on "ab": count 3 | bit 31, 2 names,
        // then code | tree index | varint lengths.
        let put = |t: &str, k: &[u8], v: Vec<u8>| Op::Put {
            tree: Arc::from(t),
            key: k.to_vec(),
            value: v,
        };
        let ops = vec![
            put("t", b"k", b"vv".to_vec()),
            Op::Remove {
                tree: Arc::from("ab"),
                key: b"r".to_vec(),
            },
            put("t", b"", vec![7; 200]),
        ];
        let mut enc = Vec::new();
        encode(&ops, &mut enc);
        let want: Vec<u8> = [
            &(3u32 | 1 << 31).to_le_bytes()[..],
            &2u16.to_le_bytes(),
            &1u16.to_le_bytes(),
            b"t",
            &2u16.to_le_bytes(),
            b"ab",
            &[1, 0, 1],
            b"k",
            &[2],
            b"vv",
            &[2, 1, 1],
            b"r",
            &[1, 0, 0, 0xc8, 0x01],
            &[7; 200],
        ]
        .concat();
        assert_eq!(enc, want);
        assert_eq!(decode(&want).unwrap(), ops);
        // A 116-byte put (16 B key, 100 B value) costs 4 bytes more, against
        // 11 more plus the tree name's length in the fixed-width layout.
        let p = put("usertable", &[1; 16], vec![2; 100]);
        let names = Names::of(std::slice::from_ref(&p));
        assert_eq!((op_size_c(&p, &names), op_size(&p)), (120, 136));
    }

    #[test]
    fn varints_round_trip_and_bad_ones_are_refused() {
        for v in [0u32, 1, 127, 128, 16_383, 16_384, 1 << 28, u32::MAX] {
            let mut out = Vec::new();
            put_varint(v, &mut out);
            assert_eq!(out.len(), varint_size(v), "{v}");
            let mut r = Reader { b: &out, at: 0 };
            assert_eq!(r.varint().unwrap(), v);
        }
        let mut r = Reader {
            b: &[0xff, 0xff, 0xff, 0xff, 0x7f],
            at: 0,
        };
        assert!(r.varint().unwrap_err().contains("above u32"));
        let mut r = Reader {
            b: &[0x80; 6],
            at: 0,
        };
        assert!(r.varint().unwrap_err().contains("longer than 5"));
        // A tree index past the name table.
        let mut bad = (1u32 | 1 << 31).to_le_bytes().to_vec();
        bad.extend_from_slice(&[0, 0, 2, 5, 0]);
        assert!(decode(&bad).unwrap_err().contains("tree index 5 of 0"));
    }

    #[test]
    fn fixed_layout_by_hand() {
        // Formats 1-4, still read. Put on tree "t": code 1 | name len 1 |
        // "t" | key len 1 | "k" | value len 2 | "vv".
        let op = Op::Put {
            tree: Arc::from("t"),
            key: b"k".to_vec(),
            value: b"vv".to_vec(),
        };
        let enc = encode_fixed(std::slice::from_ref(&op));
        let want: Vec<u8> = [
            &1u32.to_le_bytes()[..],
            &[1],
            &1u16.to_le_bytes(),
            b"t",
            &1u32.to_le_bytes(),
            b"k",
            &2u32.to_le_bytes(),
            b"vv",
        ]
        .concat();
        assert_eq!(enc, want);
        assert_eq!(decode(&want).unwrap(), vec![op]);
    }
}
