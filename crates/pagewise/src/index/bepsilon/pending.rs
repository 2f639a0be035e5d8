//! The buffered messages of one key, collapsed ([`Pending`]), and the value
//! they leave ([`resolve`]); a key's messages as a leaf applies them
//! ([`Change`]).

use super::value::Form;
use crate::error::{Error, Result};
use crate::options::MergeOperator;

/// Fixed bytes of a message entry (a basement entry's: `entry::KEY_AT`).
pub const MSG_FIXED_BYTES: usize = super::layout::message::KEY_AT;

/// A put or delete with its sequence number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Base {
    Put(u64, Vec<u8>),
    Delete(u64),
}

/// The buffered messages of one key, collapsed: the newest put or delete,
/// then the upsert operands that came after it, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pending {
    pub base: Option<Base>,
    pub ops: Vec<(u64, Vec<u8>)>,
}

impl Pending {
    /// Serialized bytes of its messages for a key of `key_len` bytes.
    pub fn bytes(&self, key_len: usize) -> usize {
        let base = match &self.base {
            Some(Base::Put(_, v)) => MSG_FIXED_BYTES + key_len + v.len(),
            Some(Base::Delete(_)) => MSG_FIXED_BYTES + key_len,
            None => 0,
        };
        base + self
            .ops
            .iter()
            .map(|o| MSG_FIXED_BYTES + key_len + o.1.len())
            .sum::<usize>()
    }

    /// Folds `newer` (later messages of the same key) into self.
    #[cfg(test)]
    pub fn absorb(&mut self, newer: Pending) {
        if newer.base.is_some() {
            *self = newer;
        } else {
            self.ops.extend(newer.ops);
        }
    }
}

/// How [`resolve`] reads a tree's stored values (`value.rs`): the tree's
/// form, and the user's value of a stored value (an extent read for one
/// that names an extent).
pub struct Values<'a> {
    pub form: Form,
    pub plain: &'a mut dyn FnMut(&[u8]) -> Result<Vec<u8>>,
}

/// The stored value of `key` after `p`, given the stored value before it.
/// A put or delete alone leaves its own stored value (a reference stays a
/// reference); operands merge into the user's value before them, and the
/// result is stored inline. Errors when `p` holds operands and no merge
/// operator is registered.
pub fn resolve(
    merge: Option<&dyn MergeOperator>,
    tree: &str,
    key: &[u8],
    existing: Option<Vec<u8>>,
    p: &Pending,
    values: &mut Values<'_>,
) -> Result<Option<Vec<u8>>> {
    let base = match &p.base {
        Some(Base::Put(_, v)) => Some(v.clone()),
        Some(Base::Delete(_)) => None,
        None => existing,
    };
    if p.ops.is_empty() {
        return Ok(base);
    }
    let Some(op) = merge else {
        return Err(Error::NoMergeOperator {
            tree: tree.to_string(),
        });
    };
    let before = match base {
        Some(b) if values.form != Form::Plain => Some((values.plain)(&b)?),
        b => b,
    };
    let operands: Vec<&[u8]> = p.ops.iter().map(|o| o.1.as_slice()).collect();
    let merged = op.full_merge(key, before.as_deref(), &operands);
    Ok(Some(match values.form {
        Form::Plain => merged,
        form => form.inline(&merged),
    }))
}

/// Resolves one key's messages against its value before them.
pub type Resolve<'r> = dyn FnMut(&[u8], Option<&[u8]>, &Pending) -> Result<Option<Vec<u8>>> + 'r;

/// One key's buffered messages as a leaf applies them: a lone put or
/// delete (the value borrowed from its buffer: nothing to resolve, nothing
/// allocated), or messages with upserts, resolved against the value before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change<'a> {
    Put(&'a [u8]),
    Delete,
    Merge(Pending),
}

impl<'a> Change<'a> {
    /// `p` as a change: lone puts and deletes borrowed, the rest cloned.
    #[cfg(test)]
    pub fn of(p: &'a Pending) -> Change<'a> {
        match (&p.base, p.ops.is_empty()) {
            (Some(Base::Put(_, v)), true) => Change::Put(v),
            (Some(Base::Delete(_)), true) => Change::Delete,
            _ => Change::Merge(p.clone()),
        }
    }

    /// Bytes it adds to a basement at most, but for the key.
    pub fn bytes(&self) -> usize {
        match self {
            Change::Put(v) => v.len(),
            Change::Delete => 0,
            Change::Merge(p) => p.bytes(0),
        }
    }
}
