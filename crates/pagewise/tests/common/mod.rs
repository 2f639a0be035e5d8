//! Shared by the integration tests that upsert: one merge operator.

use pagewise::MergeOperator;

/// existing (or "^" when absent) ++ operands, in order: a wrong order or a
/// lost operand shows. The version-4 fixture's upserts were written with it
/// (tests/upgrade.rs).
pub struct Append;

impl MergeOperator for Append {
    fn name(&self) -> &str {
        "append"
    }
    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Vec<u8> {
        let mut v = existing.unwrap_or(b"^").to_vec();
        for o in operands {
            v.extend_from_slice(o);
        }
        v
    }
}
