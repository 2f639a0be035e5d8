//! Log operations: the payload of one record is one batch, `nops u32` then
//! `nops` ops. Each op's layout is declared once in [`log_ops!`] and both the
//! encoder and the decoder are generated from that declaration, so the two
//! directions cannot drift apart (docs/design.md, "Log operations").

use crate::store::page::{get_u16, get_u32};
use std::sync::Arc;

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

        /// Bytes `encode_op` appends for `op`.
        fn op_size(op: &Op) -> usize {
            match op {
                $(Op::$name { $($field),* } => 1 $(+ Field::size($field))*,)*
            }
        }

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

/// Appends the record payload of a batch to `out`.
pub fn encode(ops: &[Op], out: &mut Vec<u8>) {
    let start = out.len();
    let size_bytes = 4 + ops.iter().map(op_size).sum::<usize>();
    out.reserve(size_bytes);
    out.extend_from_slice(&(ops.len() as u32).to_le_bytes());
    for op in ops {
        encode_op(op, out);
    }
    assert_eq!(
        out.len() - start,
        size_bytes,
        "op_size agrees with encode_op"
    );
    debug_assert_eq!(decode(&out[start..]).as_deref(), Ok(ops));
}

/// Decodes a record payload written by [`encode`] (version 1 records are a
/// subset: puts and removes only, same layout).
pub fn decode(b: &[u8]) -> Result<Vec<Op>, String> {
    let mut r = Reader { b, at: 0 };
    let n = get_u32(r.take(4)?, 0) as usize;
    let mut ops = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        ops.push(decode_op(&mut r)?);
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

    #[test]
    fn roundtrip_and_every_truncation_fails() {
        let mut enc = Vec::new();
        encode(&sample(), &mut enc);
        assert_eq!(decode(&enc).unwrap(), sample());
        for cut in 0..enc.len() {
            assert!(decode(&enc[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn layout_by_hand() {
        // Put on tree "t": code 1 | name len 1 | "t" | key len 1 | "k" | value len 2 | "vv".
        let op = Op::Put {
            tree: Arc::from("t"),
            key: b"k".to_vec(),
            value: b"vv".to_vec(),
        };
        let mut enc = Vec::new();
        encode(std::slice::from_ref(&op), &mut enc);
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
    }
}
