//! A node's pivot keys in one contiguous arena behind an `Arc`: the images
//! of one clean node (each partition loaded or shed makes a new image,
//! node.rs `with_part` and `shed`) share their pivots for the price of a
//! reference count, and a binary search over them walks one allocation.
//! A change (dirty nodes only: splits, joins, new separators) copies the
//! arena first when it is shared (`Arc::make_mut`).
//! A search compares the keys' heads (their first 8 bytes as integers,
//! `index::head::key_head`, one array) and reads a key only where heads tie.

use super::heap::{alloc_bytes, arc_bytes};
use crate::index::head::{self, key_head};
use std::sync::Arc;

/// P - 1 strictly increasing keys, key `i` being
/// `keys[ends[i - 1]..ends[i]]` (from 0 for the first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Arena {
    keys: Vec<u8>,
    /// End offset of each key in `keys`; non-decreasing.
    ends: Vec<u32>,
    /// `key_head` each key; non-decreasing, as the keys increase.
    heads: Vec<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pivots(Arc<Arena>);

impl Pivots {
    pub fn new() -> Self {
        Self::default()
    }

    /// Pivots from keys in order (the caller checks their order).
    pub fn from_keys<'a>(keys: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut a = Arena::default();
        for k in keys {
            a.keys.extend_from_slice(k);
            a.ends.push(end_of(a.keys.len()));
            a.heads.push(key_head(k));
        }
        Self(Arc::new(a))
    }

    pub fn len(&self) -> usize {
        self.0.ends.len()
    }

    /// Key `i`, if there is one.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let a = &*self.0;
        let end = *a.ends.get(i)? as usize;
        let start = if i == 0 { 0 } else { a.ends[i - 1] as usize };
        Some(&a.keys[start..end])
    }

    /// The last key, if any.
    pub fn last(&self) -> Option<&[u8]> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        (0..self.len()).map(|i| &self[i])
    }

    /// How many keys are at or below `key`: the partition holding `key`.
    #[inline]
    pub fn find(&self, key: &[u8]) -> usize {
        let i = self.count(key, true);
        debug_assert!(i == 0 || &self[i - 1] <= key);
        debug_assert!(i == self.len() || &self[i] > key);
        i
    }

    /// How many keys are below `key`.
    pub fn below(&self, key: &[u8]) -> usize {
        let i = self.count(key, false);
        debug_assert!(i == 0 || &self[i - 1] < key);
        debug_assert!(i == self.len() || &self[i] >= key);
        i
    }

    /// How many keys are below `key`, or at or below it when `at`
    /// ([`head::count_below`]).
    #[inline]
    fn count(&self, key: &[u8], at: bool) -> usize {
        let a = &*self.0;
        debug_assert_eq!(a.heads.len(), a.ends.len());
        let i = head::count_below(&a.heads, key, at, |i| &self[i]);
        assert!(i <= self.len());
        i
    }

    /// Bytes of all keys together.
    pub fn key_bytes(&self) -> usize {
        self.0.keys.len()
    }

    /// Heap bytes of the arena (its `Arc`, keys and ends), as heap.rs
    /// estimates them; shared arenas are charged to every image holding
    /// them, as the cache holds one image per node.
    pub fn heap_bytes(&self) -> usize {
        let a = &*self.0;
        arc_bytes::<Arena>()
            + alloc_bytes(a.keys.capacity())
            + alloc_bytes(a.ends.capacity() * 4)
            + alloc_bytes(a.heads.capacity() * 8)
    }

    /// Appends `key` after the last key.
    pub fn push(&mut self, key: &[u8]) {
        self.insert(self.len(), key);
    }

    /// Inserts `key` as key `i` (0..=len), shifting the later ones.
    pub fn insert(&mut self, i: usize, key: &[u8]) {
        assert!(i <= self.len(), "pivot {i} past {}", self.len());
        let a = Arc::make_mut(&mut self.0);
        let at = if i == 0 { 0 } else { a.ends[i - 1] as usize };
        a.keys.splice(at..at, key.iter().copied());
        a.ends.insert(i, end_of(at + key.len()));
        a.heads.insert(i, key_head(key));
        for e in &mut a.ends[i + 1..] {
            *e += key.len() as u32;
        }
        debug_assert_eq!(
            *a.ends.last().expect("one key at least") as usize,
            a.keys.len()
        );
    }

    /// Removes key `i` and returns it.
    pub fn remove(&mut self, i: usize) -> Vec<u8> {
        assert!(i < self.len(), "pivot {i} past {}", self.len());
        let a = Arc::make_mut(&mut self.0);
        let start = if i == 0 { 0 } else { a.ends[i - 1] as usize };
        let end = a.ends.remove(i) as usize;
        a.heads.remove(i);
        let key: Vec<u8> = a.keys.drain(start..end).collect();
        for e in &mut a.ends[i..] {
            *e -= key.len() as u32;
        }
        debug_assert_eq!(a.ends.last().map_or(0, |&e| e as usize), a.keys.len());
        key
    }

    /// Keys `at..` moved into a new `Pivots`; keys `..at` stay.
    pub fn split_off(&mut self, at: usize) -> Pivots {
        assert!(at <= self.len(), "split at {at} past {}", self.len());
        let right = Pivots::from_keys((at..self.len()).map(|i| &self[i]));
        let a = Arc::make_mut(&mut self.0);
        let cut = if at == 0 { 0 } else { a.ends[at - 1] as usize };
        a.keys.truncate(cut);
        a.ends.truncate(at);
        a.heads.truncate(at);
        debug_assert_eq!(a.ends.last().map_or(0, |&e| e as usize), a.keys.len());
        right
    }

    /// Appends every key of `other` after the last key.
    pub fn extend(&mut self, other: &Pivots) {
        let base = self.0.keys.len();
        let a = Arc::make_mut(&mut self.0);
        a.keys.extend_from_slice(&other.0.keys);
        a.ends
            .extend(other.0.ends.iter().map(|&e| end_of(base + e as usize)));
        a.heads.extend_from_slice(&other.0.heads);
        debug_assert_eq!(a.ends.last().map_or(0, |&e| e as usize), a.keys.len());
    }

    /// Whether `self` and `other` share one arena (tests).
    #[cfg(test)]
    pub fn shares(&self, other: &Pivots) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// An end offset; a node's pivots are far below 4 GiB (keys up to 8 KiB,
/// fanout bounded).
fn end_of(n: usize) -> u32 {
    u32::try_from(n).expect("pivot bytes fit u32")
}

impl std::ops::Index<usize> for Pivots {
    type Output = [u8];

    #[inline]
    fn index(&self, i: usize) -> &[u8] {
        match self.get(i) {
            Some(k) => k,
            None => panic!("pivot {i} of {}", self.len()),
        }
    }
}

impl FromIterator<Vec<u8>> for Pivots {
    fn from_iter<I: IntoIterator<Item = Vec<u8>>>(keys: I) -> Self {
        let mut p = Pivots::new();
        for k in keys {
            p.push(&k);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(p: &Pivots) -> Vec<Vec<u8>> {
        p.iter().map(<[u8]>::to_vec).collect()
    }

    /// Every change matches the same change on a vector of keys, and a
    /// clone shares its arena until one of them changes.
    #[test]
    fn changes_match_a_vector_model() {
        let mut model: Vec<Vec<u8>> = Vec::new();
        let mut p = Pivots::new();
        let mut seed = 7u64;
        for step in 0..2000u32 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = (seed >> 33) as usize;
            let key: Vec<u8> = (0..r % 20).map(|j| (r >> j) as u8).collect();
            match r % 5 {
                0..=2 => {
                    let i = r % (model.len() + 1);
                    model.insert(i, key.clone());
                    p.insert(i, &key);
                }
                3 if !model.is_empty() => {
                    let i = r % model.len();
                    assert_eq!(p.remove(i), model.remove(i));
                }
                _ => {
                    let at = r % (model.len() + 1);
                    let right = model.split_off(at);
                    let mut q = p.split_off(at);
                    assert_eq!(keys(&q), right);
                    let c = p.clone();
                    assert!(c.shares(&p));
                    p.extend(&q);
                    assert!(!c.shares(&p) && keys(&c) == model);
                    model.extend(right);
                    q.push(b"z");
                }
            }
            assert_eq!(keys(&p), model, "step {step}");
            assert_eq!(p.len(), model.len());
            let heads: Vec<u64> = model.iter().map(|k| key_head(k)).collect();
            assert_eq!(p.0.heads, heads, "step {step}");
        }
    }

    /// `find` and `below` are partition points over the keys, with keys
    /// that share their 8-byte heads, are prefixes of one another, are
    /// shorter than a head or empty, before and after changes that keep
    /// the heads beside the keys.
    #[test]
    fn find_and_below_are_partition_points() {
        let mut model: Vec<Vec<u8>> = vec![vec![]];
        for i in 1..40u8 {
            model.push(vec![i * 3, i]);
            model.push(vec![i * 3, i, 0]);
            let mut long = b"headhead".to_vec();
            long.extend([i; 3]);
            model.push(long);
        }
        model.push(b"headhead".to_vec());
        model.sort();
        model.dedup();
        let mut probes = model.clone();
        probes.extend((0..130u8).flat_map(|a| [vec![a], vec![a, 5], vec![a, 255, 1]]));
        probes.extend((0..45u8).map(|i| [b"headhead".as_slice(), &[i, i]].concat()));
        let check = |p: &Pivots, model: &[Vec<u8>]| {
            for key in &probes {
                let le = model.partition_point(|k| k.as_slice() <= key.as_slice());
                let lt = model.partition_point(|k| k.as_slice() < key.as_slice());
                assert_eq!(p.find(key), le, "find {key:?}");
                assert_eq!(p.below(key), lt, "below {key:?}");
            }
        };
        let mut p: Pivots = model.iter().cloned().collect();
        check(&p, &model);
        // Remove every third key, split and join again.
        let mut i = 0;
        while i < model.len() {
            assert_eq!(p.remove(i), model.remove(i));
            i += 2;
        }
        check(&p, &model);
        let right = p.split_off(model.len() / 2);
        check(&right, &model[model.len() / 2..]);
        p.extend(&right);
        check(&p, &model);
        p.insert(0, b"");
        model.insert(0, vec![]);
        check(&p, &model);
        assert_eq!(Pivots::new().find(b"x"), 0);
        assert_eq!(Pivots::new().below(b""), 0);
    }
}
