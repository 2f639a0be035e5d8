//! Shared by the integration tests: one merge operator (for those that
//! upsert) and a clean-`check` assertion. Each test binary compiles the
//! module and uses part of it.
#![allow(dead_code)]

use pagewise::{Db, MergeOperator};

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

/// Asserts `Db::check` finds no problem; returns the overflow pages it
/// checked (so a caller can tell values really left the tree).
pub fn check_clean(db: &Db) -> u64 {
    let r = db.check().unwrap();
    assert!(r.problems.is_empty(), "check: {:?}", r.problems);
    r.overflow_pages_checked
}
