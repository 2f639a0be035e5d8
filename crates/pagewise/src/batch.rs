//! A batch of writes on several trees, applied atomically, and its log encoding:
//! `nops u32`, then per op `kind u8 (1 put, 2 remove) | name_len u16 | name |
//! klen u32 | key | (vlen u32 | value, puts only)`.

use crate::page::{get_u16, get_u32};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Op {
    pub tree: Arc<str>,
    pub key: Vec<u8>,
    pub val: Option<Vec<u8>>,
}

/// Writes on one or more trees that become visible and durable together.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    pub(crate) ops: Vec<Op>,
}

impl Batch {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` to `value` in `tree` (a name or a [`crate::Tree`]).
    pub fn insert(
        &mut self,
        tree: impl AsRef<str>,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) {
        self.ops.push(Op {
            tree: Arc::from(tree.as_ref()),
            key: key.as_ref().to_vec(),
            val: Some(value.as_ref().to_vec()),
        });
    }

    /// Removes `key` from `tree` (no effect if absent).
    pub fn remove(&mut self, tree: impl AsRef<str>, key: impl AsRef<[u8]>) {
        self.ops.push(Op {
            tree: Arc::from(tree.as_ref()),
            key: key.as_ref().to_vec(),
            val: None,
        });
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Bytes of keys and values in the batch.
    pub fn user_bytes(&self) -> usize {
        self.ops
            .iter()
            .map(|o| o.key.len() + o.val.as_ref().map_or(0, Vec::len))
            .sum()
    }
}

pub(crate) fn encode(ops: &[Op], out: &mut Vec<u8>) {
    out.extend_from_slice(&(ops.len() as u32).to_le_bytes());
    for op in ops {
        out.push(if op.val.is_some() { 1 } else { 2 });
        out.extend_from_slice(&(op.tree.len() as u16).to_le_bytes());
        out.extend_from_slice(op.tree.as_bytes());
        out.extend_from_slice(&(op.key.len() as u32).to_le_bytes());
        out.extend_from_slice(&op.key);
        if let Some(v) = &op.val {
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            out.extend_from_slice(v);
        }
    }
}

pub(crate) fn decode(b: &[u8]) -> Result<Vec<Op>, String> {
    let bad = || "log record payload ends early".to_string();
    let take = |at: &mut usize, n: usize| -> Result<std::ops::Range<usize>, String> {
        if *at + n > b.len() {
            return Err(bad());
        }
        *at += n;
        Ok(*at - n..*at)
    };
    let mut at = 0;
    let n = get_u32(&b[take(&mut at, 4)?], 0) as usize;
    let mut ops = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        let kind = b[take(&mut at, 1)?][0];
        let nl = get_u16(&b[take(&mut at, 2)?], 0) as usize;
        let name =
            std::str::from_utf8(&b[take(&mut at, nl)?]).map_err(|_| "tree name not UTF-8")?;
        let kl = get_u32(&b[take(&mut at, 4)?], 0) as usize;
        let key = b[take(&mut at, kl)?].to_vec();
        let val = match kind {
            1 => {
                let vl = get_u32(&b[take(&mut at, 4)?], 0) as usize;
                Some(b[take(&mut at, vl)?].to_vec())
            }
            2 => None,
            k => return Err(format!("unknown op kind {k}")),
        };
        ops.push(Op {
            tree: Arc::from(name),
            key,
            val,
        });
    }
    if at != b.len() {
        return Err("trailing bytes in log record".into());
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let mut b = Batch::new();
        b.insert("a", b"k1", b"v1");
        b.remove("orders", b"k2");
        b.insert("a", b"", vec![7u8; 1000]);
        let mut enc = Vec::new();
        encode(&b.ops, &mut enc);
        assert_eq!(decode(&enc).unwrap(), b.ops);
        assert!(decode(&enc[..enc.len() - 1]).is_err());
    }
}
