//! Built-in merge operators for `Tree::upsert` (B-epsilon trees), chosen by
//! name so every front end (Rust, the CLI, the Python package) opens a Db
//! with the operator it was written with.

use crate::options::MergeOperator;
use std::sync::Arc;

/// Names accepted by [`builtin_merge_operator`].
pub const BUILTIN_MERGE_OPERATORS: [&str; 2] = ["add_u64", "append"];

/// A counter: the value is a little-endian u64 (absent: 0; a shorter value
/// is zero-extended, bytes past the eighth are ignored), and each operand,
/// read the same way, is added to it (wrapping). The result is 8 bytes.
#[derive(Debug, Default, Clone, Copy)]
pub struct AddU64;

/// Appends each operand to the value (absent: empty).
#[derive(Debug, Default, Clone, Copy)]
pub struct Append;

fn read_u64_le(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = bytes.len().min(8);
    b[..n].copy_from_slice(&bytes[..n]);
    u64::from_le_bytes(b)
}

impl MergeOperator for AddU64 {
    fn name(&self) -> &str {
        "add_u64"
    }

    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Vec<u8> {
        let start = existing.map_or(0, read_u64_le);
        let sum = operands
            .iter()
            .fold(start, |acc, op| acc.wrapping_add(read_u64_le(op)));
        sum.to_le_bytes().to_vec()
    }
}

impl MergeOperator for Append {
    fn name(&self) -> &str {
        "append"
    }

    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Vec<u8> {
        let mut v = existing.map_or_else(Vec::new, <[u8]>::to_vec);
        for op in operands {
            v.extend_from_slice(op);
        }
        v
    }
}

/// The built-in operator called `name` (one of [`BUILTIN_MERGE_OPERATORS`]).
pub fn builtin_merge_operator(name: &str) -> Option<Arc<dyn MergeOperator>> {
    match name {
        "add_u64" => Some(Arc::new(AddU64)),
        "append" => Some(Arc::new(Append)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_u64_adds_and_zero_extends() {
        let op = builtin_merge_operator("add_u64").unwrap();
        let five = 5u64.to_le_bytes();
        assert_eq!(
            op.full_merge(b"k", None, &[&five, &[2]]),
            7u64.to_le_bytes()
        );
        let max = u64::MAX.to_le_bytes();
        assert_eq!(op.full_merge(b"k", Some(&max), &[&[1]]), 0u64.to_le_bytes());
        assert_eq!(
            op.full_merge(b"k", Some(&[1, 1]), &[]),
            257u64.to_le_bytes()
        );
    }

    #[test]
    fn append_concatenates_in_commit_order() {
        let op = builtin_merge_operator("append").unwrap();
        assert_eq!(op.full_merge(b"k", Some(b"a"), &[b"b", b"cd"]), b"abcd");
        assert_eq!(op.full_merge(b"k", None, &[]), b"");
    }

    #[test]
    fn every_listed_name_resolves_to_itself() {
        for name in BUILTIN_MERGE_OPERATORS {
            assert_eq!(builtin_merge_operator(name).unwrap().name(), name);
        }
        assert!(builtin_merge_operator("max").is_none());
    }
}
