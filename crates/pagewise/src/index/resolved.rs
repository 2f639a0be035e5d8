//! The entries a cursor step resolved and has not returned yet, for both
//! tree kinds: keys and values back to back in one arena the cursor keeps
//! from step to step. An entry resolved costs a copy into the arena; an
//! entry returned costs nothing more (the caller borrows it from the
//! arena, `Iter::next_ref`) or a key and a value allocated (`Iter::next`).
//! Entries are pushed in ascending key order and taken from either end.

use std::collections::VecDeque;
use std::ops::Range;

/// Where an entry's value is. `X` names a value still to be read from out
/// of the tree (a B-epsilon value extent, a B+tree overflow extent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value<X> {
    /// These bytes of the arena.
    At(Range<usize>),
    /// Its own bytes (read from out of the tree).
    Owned(Vec<u8>),
    /// Still to be read from here.
    Out(X),
}

#[derive(Debug)]
struct Item<X> {
    key: Range<usize>,
    value: Value<X>,
}

/// Resolved entries in key order; taken from either end.
#[derive(Debug)]
pub struct Resolved<X> {
    arena: Vec<u8>,
    items: VecDeque<Item<X>>,
}

impl<X> Default for Resolved<X> {
    fn default() -> Self {
        Self {
            arena: Vec::new(),
            items: VecDeque::new(),
        }
    }
}

impl<X: Copy> Resolved<X> {
    /// Empties it, keeping the arena's and the queue's capacity.
    pub fn clear(&mut self) {
        self.arena.clear();
        self.items.clear();
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
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
        let at = self.push_key(key);
        self.arena.extend_from_slice(value);
        let v = at + key.len()..self.arena.len();
        self.items.push_back(Item {
            key: at..at + key.len(),
            value: Value::At(v),
        });
    }

    /// Appends the entries lying in `bytes`, one per `(key, value)` span
    /// (offsets in `bytes`), copying `bytes` once: a run of stored entries
    /// whose values need no change. Requires: their keys ascend, above
    /// every entry's here.
    pub fn push_spans(
        &mut self,
        bytes: &[u8],
        spans: impl Iterator<Item = (Range<usize>, Range<usize>)>,
    ) {
        let at = self.arena.len();
        self.arena.extend_from_slice(bytes);
        for (k, v) in spans {
            assert!(k.end <= bytes.len() && v.start <= v.end && v.end <= bytes.len());
            debug_assert!(self.last_key().is_none_or(|l| l < &bytes[k.clone()]));
            self.items.push_back(Item {
                key: at + k.start..at + k.end,
                value: Value::At(at + v.start..at + v.end),
            });
        }
    }

    /// Appends an entry whose key is above every entry's here and whose
    /// value is still to be read from `out`.
    pub fn push_out(&mut self, key: &[u8], out: X) {
        let at = self.push_key(key);
        self.items.push_back(Item {
            key: at..at + key.len(),
            value: Value::Out(out),
        });
    }

    fn push_key(&mut self, key: &[u8]) -> usize {
        debug_assert!(self.last_key().is_none_or(|l| l < key));
        let at = self.arena.len();
        self.arena.extend_from_slice(key);
        at
    }

    pub fn last_key(&self) -> Option<&[u8]> {
        let it = self.items.back()?;
        Some(&self.arena[it.key.clone()])
    }

    pub fn value(&self, i: usize) -> &Value<X> {
        &self.items[i].value
    }

    /// Entry `i`'s value bytes as pushed. Requires: not replaced since.
    pub fn pushed(&self, i: usize) -> &[u8] {
        match &self.items[i].value {
            Value::At(r) => &self.arena[r.clone()],
            Value::Owned(_) | Value::Out(_) => panic!("entry {i}'s value was replaced"),
        }
    }

    pub fn set(&mut self, i: usize, value: Value<X>) {
        self.items[i].value = value;
    }

    /// Takes the first entry (`forward`) or the last: where its key lies
    /// in the arena ([`Resolved::bytes`], valid until the next push or
    /// clear), and where its value is.
    pub fn pop(&mut self, forward: bool) -> Option<(Range<usize>, Value<X>)> {
        let it = match forward {
            true => self.items.pop_front()?,
            false => self.items.pop_back()?,
        };
        Some((it.key, it.value))
    }

    /// Arena bytes an entry popped since the last push or clear named.
    pub fn bytes(&self, at: Range<usize>) -> &[u8] {
        &self.arena[at]
    }

    /// Up to `most` entries from the front (`forward`) or the back whose
    /// values are still out of the tree, nearest first.
    pub fn out_next(&self, forward: bool, most: usize) -> Vec<(usize, X)> {
        let n = self.items.len();
        (0..n)
            .map(|i| if forward { i } else { n - 1 - i })
            .filter_map(|i| match self.items[i].value {
                Value::Out(e) => Some((i, e)),
                _ => None,
            })
            .take(most)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pops `r`'s entry from one end as owned bytes (`None` for a value
    /// still out of the tree).
    fn take(r: &mut Resolved<u32>, forward: bool) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
        let (k, v) = r.pop(forward)?;
        let v = match v {
            Value::At(at) => Some(r.bytes(at).to_vec()),
            Value::Owned(v) => Some(v),
            Value::Out(_) => None,
        };
        Some((r.bytes(k).to_vec(), v))
    }

    fn kv(k: &[u8], v: &[u8]) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
        Some((k.to_vec(), Some(v.to_vec())))
    }

    #[test]
    fn entries_come_back_from_either_end_as_pushed() {
        let mut r = Resolved::<u32>::default();
        r.push(b"a", b"1");
        r.push(b"b", b"");
        r.push(b"c", b"333");
        r.push_out(b"d", 7);
        r.set(1, Value::Out(9));
        assert_eq!(r.pushed(2), b"333");
        assert_eq!(r.last_key(), Some(&b"d"[..]));
        assert_eq!(r.out_next(true, 4), vec![(1, 9), (3, 7)]);
        assert_eq!(r.out_next(false, 1), vec![(3, 7)]);
        assert_eq!(take(&mut r, false), Some((b"d".to_vec(), None)));
        assert_eq!(take(&mut r, false), kv(b"c", b"333"));
        assert_eq!(take(&mut r, true), kv(b"a", b"1"));
        r.set(0, Value::Owned(b"22".to_vec()));
        assert_eq!(take(&mut r, true), kv(b"b", b"22"));
        assert!(r.is_empty() && r.pop(true).is_none());
        r.push(b"e", b"4");
        // Two entries lying in one slice, a byte before each value left out.
        r.push_spans(b"f.5g.66", [(0..1, 2..3), (3..4, 5..7)].into_iter());
        assert_eq!(take(&mut r, false), kv(b"g", b"66"));
        assert_eq!(take(&mut r, true), kv(b"e", b"4"));
        assert_eq!(take(&mut r, true), kv(b"f", b"5"));
        r.clear();
        assert_eq!((r.len(), r.last_key()), (0, None));
    }
}
