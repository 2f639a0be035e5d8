//! A batch of writes on several trees, applied atomically: one log record.

use crate::bytes::IntoBytes;
use crate::log::Op;
use std::sync::Arc;

/// Writes on one or more trees that become visible and durable together.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    pub(crate) ops: Vec<Op>,
    /// The tree names the ops hold, each allocated once per batch: an op
    /// shares its tree's name instead of allocating a copy (one allocation
    /// and free less per write).
    names: Vec<Arc<str>>,
}

/// Distinct tree names a batch keeps for sharing; ops on further trees
/// allocate their own name (a batch rarely spans more).
const SHARED_NAMES: usize = 8;

impl Batch {
    pub fn new() -> Self {
        Self::default()
    }

    /// The name `tree` as an op holds it: shared with the batch's earlier
    /// ops on the same tree (a scan of at most [`SHARED_NAMES`] names).
    fn name(&mut self, tree: &str) -> Arc<str> {
        if let Some(n) = self.names.iter().find(|n| ***n == *tree) {
            return n.clone();
        }
        let n: Arc<str> = Arc::from(tree);
        if self.names.len() < SHARED_NAMES {
            self.names.push(n.clone());
        }
        n
    }

    /// Sets `key` to `value` in `tree` (a name or a [`crate::Tree`]).
    /// Owned bytes (`Vec<u8>`, `String`...) move into the batch; borrowed
    /// ones are copied ([`crate::IntoBytes`]).
    pub fn insert(&mut self, tree: impl AsRef<str>, key: impl IntoBytes, value: impl IntoBytes) {
        let tree = self.name(tree.as_ref());
        self.ops.push(Op::Put {
            tree,
            key: key.into_bytes(),
            value: value.into_bytes(),
        });
    }

    /// Merges `operand` into `key` of B-epsilon tree `tree` (see `Tree::upsert`).
    pub fn upsert(&mut self, tree: impl AsRef<str>, key: impl IntoBytes, operand: impl IntoBytes) {
        let tree = self.name(tree.as_ref());
        self.ops.push(Op::Upsert {
            tree,
            key: key.into_bytes(),
            operand: operand.into_bytes(),
        });
    }

    /// Removes `key` from `tree` (no effect if absent).
    pub fn remove(&mut self, tree: impl AsRef<str>, key: impl IntoBytes) {
        let tree = self.name(tree.as_ref());
        self.ops.push(Op::Remove {
            tree,
            key: key.into_bytes(),
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
        self.ops.iter().map(Op::user_bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(b: &Batch) -> Vec<&Arc<str>> {
        b.ops.iter().map(Op::tree).collect()
    }

    #[test]
    fn ops_on_one_tree_share_its_name() {
        let mut b = Batch::new();
        b.insert("orders", b"k1", b"v");
        b.upsert("orders", b"k2", b"+1");
        b.remove("orders", b"k3");
        b.insert("items", b"k1", b"v");
        let n = names(&b);
        assert!(Arc::ptr_eq(n[0], n[1]) && Arc::ptr_eq(n[0], n[2]));
        assert!(!Arc::ptr_eq(n[0], n[3]));
        assert_eq!((&n[0][..], &n[3][..]), ("orders", "items"));
    }

    #[test]
    fn trees_past_the_shared_names_keep_their_own_names() {
        let mut b = Batch::new();
        let trees: Vec<String> = (0..2 * SHARED_NAMES).map(|i| format!("t{i}")).collect();
        for round in 0..2 {
            for t in &trees {
                b.insert(t, [round], b"v");
            }
        }
        let n = names(&b);
        let per_round = trees.len();
        for (i, t) in trees.iter().enumerate() {
            assert_eq!(&n[i][..], t.as_str());
            assert_eq!(&n[per_round + i][..], t.as_str());
            // The first trees' names are shared; later ones allocate anew.
            assert_eq!(Arc::ptr_eq(n[i], n[per_round + i]), i < SHARED_NAMES);
        }
    }
}
