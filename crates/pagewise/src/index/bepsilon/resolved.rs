//! The entries a cursor step resolved and has not returned yet: keys and
//! values back to back in one arena the cursor keeps from step to step. An
//! entry resolved costs a copy into the arena; only an entry returned costs
//! allocations (the key and value handed to the caller). A step resolves
//! about twice the entries a short scan takes (`iter.rs`, the step limit),
//! and each used to be a key and a value allocated and freed.

use super::value::ValueRef;
use std::collections::VecDeque;
use std::ops::Range;

/// Where an entry's value is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// These bytes of the arena.
    At(Range<usize>),
    /// Its own bytes (read from a value extent).
    Owned(Vec<u8>),
    /// Still to be read from this value extent (a pinned snapshot's cursor
    /// reads value extents as entries are returned).
    Extent(ValueRef),
}

/// A taken entry: its key, and its value or the extent to read it from.
pub type Taken = (Vec<u8>, Result<Vec<u8>, ValueRef>);

#[derive(Debug)]
struct Item {
    key: Range<usize>,
    value: Value,
}

/// Resolved entries in key order; returned from either end.
#[derive(Debug, Default)]
pub struct Resolved {
    arena: Vec<u8>,
    items: VecDeque<Item>,
}

impl Resolved {
    /// Empties it, keeping the arena's and the queue's capacity.
    pub fn clear(&mut self) {
        self.arena.clear();
        self.items.clear();
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Makes room for `entries` more entries of `entry_bytes` each (key and
    /// value), so a step's pushes do not grow the arena a doubling at a
    /// time (each growth a copy of what it holds).
    pub fn reserve(&mut self, entries: usize, entry_bytes: usize) {
        let bytes = entries.saturating_mul(entry_bytes);
        if self.arena.is_empty() && self.arena.capacity() < bytes {
            // A new allocation, not a reallocation copying the old one.
            self.arena = Vec::with_capacity(bytes);
        }
        self.arena.reserve(bytes);
        self.items.reserve(entries);
    }

    /// Appends an entry whose key is above every entry's here.
    pub fn push(&mut self, key: &[u8], value: &[u8]) {
        debug_assert!(self.last_key().is_none_or(|l| l < key));
        let at = self.arena.len();
        self.arena.extend_from_slice(key);
        self.arena.extend_from_slice(value);
        let (k, v) = (at..at + key.len(), at + key.len()..self.arena.len());
        self.items.push_back(Item {
            key: k,
            value: Value::At(v),
        });
    }

    pub fn last_key(&self) -> Option<&[u8]> {
        let it = self.items.back()?;
        Some(&self.arena[it.key.clone()])
    }

    pub fn value(&self, i: usize) -> &Value {
        &self.items[i].value
    }

    /// Entry `i`'s value bytes as pushed. Requires: not replaced since.
    pub fn pushed(&self, i: usize) -> &[u8] {
        match &self.items[i].value {
            Value::At(r) => &self.arena[r.clone()],
            other => panic!("entry {i}'s value was replaced: {other:?}"),
        }
    }

    pub fn set(&mut self, i: usize, value: Value) {
        self.items[i].value = value;
    }

    /// Takes the first entry (`forward`) or the last: its key, and its
    /// value or the extent it is still to be read from.
    pub fn take(&mut self, forward: bool) -> Option<Taken> {
        let it = match forward {
            true => self.items.pop_front()?,
            false => self.items.pop_back()?,
        };
        let key = self.arena[it.key].to_vec();
        let value = match it.value {
            Value::At(r) => Ok(self.arena[r].to_vec()),
            Value::Owned(v) => Ok(v),
            Value::Extent(e) => Err(e),
        };
        Some((key, value))
    }

    /// Up to `most` entries from the front (`forward`) or the back whose
    /// values are still in extents, nearest first.
    pub fn extents_next(&self, forward: bool, most: usize) -> Vec<(usize, ValueRef)> {
        let n = self.items.len();
        (0..n)
            .map(|i| if forward { i } else { n - 1 - i })
            .filter_map(|i| match self.items[i].value {
                Value::Extent(e) => Some((i, e)),
                _ => None,
            })
            .take(most)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_back_from_either_end_as_pushed() {
        let mut r = Resolved::default();
        r.push(b"a", b"1");
        r.push(b"b", b"");
        r.push(b"c", b"333");
        let e = ValueRef::whole(crate::store::extent::Extent {
            first_page: 9,
            count_pages: 1,
            len_bytes: 5,
        });
        r.set(1, Value::Extent(e));
        assert_eq!(r.pushed(2), b"333");
        assert_eq!(r.last_key(), Some(&b"c"[..]));
        assert_eq!(r.extents_next(true, 4), vec![(1, e)]);
        assert_eq!(r.take(false), Some((b"c".to_vec(), Ok(b"333".to_vec()))));
        assert_eq!(r.take(true), Some((b"a".to_vec(), Ok(b"1".to_vec()))));
        r.set(0, Value::Owned(b"22".to_vec()));
        assert_eq!(r.take(true), Some((b"b".to_vec(), Ok(b"22".to_vec()))));
        assert!(r.len() == 0 && r.take(true).is_none());
        r.push(b"d", b"4");
        r.clear();
        assert_eq!((r.len(), r.last_key()), (0, None));
    }
}
