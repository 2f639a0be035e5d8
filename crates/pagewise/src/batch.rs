//! A batch of writes on several trees, applied atomically: one log record.

use crate::log::Op;
use std::sync::Arc;

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
        self.ops.push(Op::Put {
            tree: Arc::from(tree.as_ref()),
            key: key.as_ref().to_vec(),
            value: value.as_ref().to_vec(),
        });
    }

    /// Merges `operand` into `key` of B-epsilon tree `tree` (see `Tree::upsert`).
    pub fn upsert(
        &mut self,
        tree: impl AsRef<str>,
        key: impl AsRef<[u8]>,
        operand: impl AsRef<[u8]>,
    ) {
        self.ops.push(Op::Upsert {
            tree: Arc::from(tree.as_ref()),
            key: key.as_ref().to_vec(),
            operand: operand.as_ref().to_vec(),
        });
    }

    /// Removes `key` from `tree` (no effect if absent).
    pub fn remove(&mut self, tree: impl AsRef<str>, key: impl AsRef<[u8]>) {
        self.ops.push(Op::Remove {
            tree: Arc::from(tree.as_ref()),
            key: key.as_ref().to_vec(),
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
