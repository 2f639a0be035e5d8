//! Changing a leaf: its basements stay packed (stored bytes plus an offset
//! per entry, about their serialized size in memory) and a batch of
//! messages, sorted by key, is merged into each basement it touches in one
//! pass that copies the untouched runs of entries as they are. Basements
//! then split at their byte midpoint and join small neighbours.

use super::node::{Node, Part};
use super::packed::Packed;
use super::pending::{Base, Change, Resolve};
use super::value::may_name_extent;
use crate::error::Result;
use std::borrow::Cow;
use std::sync::Arc;

/// The basement of `p`.
fn packed(p: &Part) -> &Packed {
    match p {
        Part::Packed(b) => b,
        Part::Buf(_) => panic!("leaf partition is a buffer"),
    }
}

/// `old` with `msgs` (sorted, distinct keys) applied; and the change in
/// entries. Bounded by the entries and messages. Stored values that leave
/// the tree and may name value extents go to `dropped`: every entry a
/// change replaces or removes, and the put a merge consumed.
fn merge(
    old: &Packed,
    msgs: &[(&[u8], Change)],
    resolve: &mut Resolve<'_>,
    dropped: &mut Vec<Vec<u8>>,
) -> Result<(Packed, i64)> {
    let extra: usize = msgs.iter().map(|(k, c)| 6 + k.len() + c.bytes()).sum();
    let mut out = Packed::with_capacity(old.bytes() + extra, old.len() + msgs.len());
    let mut at = 0;
    let mut delta = 0i64;
    for (key, change) in msgs {
        let key = *key;
        let pos = old.lower_bound(key);
        assert!(pos >= at, "messages sorted by key");
        out.extend_from(old, at, pos);
        let existing = (pos < old.len() && old.at(pos).0 == key).then(|| old.at(pos).1);
        at = pos + existing.is_some() as usize;
        // A put or delete alone ignores the value before it.
        let after = match change {
            Change::Put(v) => Some(Cow::Borrowed(*v)),
            Change::Delete => None,
            Change::Merge(p) => resolve(key, existing, p)?.map(Cow::Owned),
        };
        dropped.extend(existing.filter(|v| may_name_extent(v)).map(<[u8]>::to_vec));
        if let Change::Merge(p) = change {
            if let (Some(Base::Put(_, v)), false) = (&p.base, p.ops.is_empty()) {
                dropped.extend(may_name_extent(v).then(|| v.clone()));
            }
        }
        match after {
            Some(v) => {
                out.push(key, &v);
                delta += existing.is_none() as i64;
            }
            None => delta -= existing.is_some() as i64,
        }
    }
    out.extend_from(old, at, old.len());
    out.trim();
    debug_assert_eq!(out.len() as i64, old.len() as i64 + delta);
    Ok((out, delta))
}

impl Node {
    /// Applies `msgs` (sorted by key, distinct) to the basements holding
    /// their keys; returns the change in entries. A basement is replaced
    /// only once its merge succeeded.
    /// Stored values leaving the tree go to `dropped` (`merge`).
    pub fn apply_sorted(
        &mut self,
        msgs: &[(&[u8], Change)],
        resolve: &mut Resolve<'_>,
        dropped: &mut Vec<Vec<u8>>,
    ) -> Result<i64> {
        assert!(self.is_leaf() && self.all_loaded());
        debug_assert!(msgs.windows(2).all(|w| w[0].0 < w[1].0));
        let mut delta = 0;
        let mut from = 0;
        for i in 0..self.parts.len() {
            let to = match self.pivots.get(i) {
                Some(p) => from + msgs[from..].partition_point(|m| m.0 < p),
                None => msgs.len(),
            };
            if to == from {
                continue;
            }
            let part = self.parts[i].as_deref().expect("dirty leaves are loaded");
            let (new, d) = merge(packed(part), &msgs[from..to], resolve, dropped)?;
            self.part_bytes[i] = new.bytes();
            self.parts[i] = Some(Arc::new(Part::Packed(new)));
            delta += d;
            from = to;
        }
        assert_eq!(from, msgs.len(), "every message lands in a basement");
        Ok(delta)
    }

    /// Sets (`Some`) or removes (`None`) `key` in its basement; returns the
    /// change in entries (-1, 0 or 1).
    #[cfg(test)]
    pub fn base_set(&mut self, key: &[u8], value: Option<Vec<u8>>) -> i64 {
        use super::pending::Pending;
        let p = Pending {
            base: Some(match value {
                Some(v) => Base::Put(0, v),
                None => Base::Delete(0),
            }),
            ops: Vec::new(),
        };
        let mut set =
            |_: &[u8], _: Option<&[u8]>, p: &super::pending::Pending| -> Result<Option<Vec<u8>>> {
                Ok(match &p.base {
                    Some(Base::Put(_, v)) => Some(v.clone()),
                    _ => None,
                })
            };
        self.apply_sorted(&[(key, Change::of(&p))], &mut set, &mut Vec::new())
            .expect("setting a value resolves")
    }

    /// Leaves: splits basements above `basement_bytes` at their byte
    /// midpoint and joins neighbours that together fill at most half of it
    /// (or of which one is empty). Bounded by the entries.
    pub fn fix_basements(&mut self, basement_bytes: usize) {
        assert!(self.is_leaf() && self.all_loaded());
        let mut i = 0;
        while i < self.parts.len() {
            let part = self.parts[i].as_deref().expect("loaded");
            if self.part_bytes[i] > basement_bytes && part.entries() >= 2 {
                self.split_basement(i);
            } else {
                i += 1;
            }
        }
        let mut i = 0;
        while i + 1 < self.parts.len() {
            let sum = self.part_bytes[i] + self.part_bytes[i + 1];
            let empty = self.part_bytes[i] == 0 || self.part_bytes[i + 1] == 0;
            if empty || sum <= basement_bytes / 2 {
                self.join_basements(i);
            } else {
                i += 1;
            }
        }
        debug_assert_eq!(self.pivots.len() + 1, self.parts.len());
    }

    /// Joins basements `i` and `i + 1`.
    fn join_basements(&mut self, i: usize) {
        let right = self.parts.remove(i + 1).expect("loaded");
        let left = self.parts[i].take().expect("loaded");
        let (l, r) = (packed(&left), packed(&right));
        let mut joined = Packed::with_capacity(l.bytes() + r.bytes(), l.len() + r.len());
        joined.extend_from(l, 0, l.len());
        joined.extend_from(r, 0, r.len());
        self.part_bytes[i] = joined.bytes();
        self.part_bytes.remove(i + 1);
        self.pivots.remove(i);
        self.parts[i] = Some(Arc::new(Part::Packed(joined)));
    }

    /// Splits basement `i` (two entries or more) at its byte midpoint.
    fn split_basement(&mut self, i: usize) {
        let part = self.parts[i].take().expect("loaded");
        let b = packed(&part);
        assert!(b.len() >= 2);
        let half = b.bytes() / 2;
        // The first entry at or past the midpoint, leaving one on each side.
        let mid = (1..b.len())
            .find(|&n| b.offset_of(n) >= half)
            .unwrap_or(b.len() - 1);
        let mut left = Packed::with_capacity(b.offset_of(mid), mid);
        left.extend_from(b, 0, mid);
        let mut right = Packed::with_capacity(b.bytes() - b.offset_of(mid), b.len() - mid);
        right.extend_from(b, mid, b.len());
        let pivot = right
            .first_key()
            .expect("a split leaves entries right")
            .to_vec();
        self.part_bytes[i] = left.bytes();
        self.part_bytes.insert(i + 1, right.bytes());
        self.pivots.insert(i, &pivot);
        self.parts[i] = Some(Arc::new(Part::Packed(left)));
        self.parts
            .insert(i + 1, Some(Arc::new(Part::Packed(right))));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::bepsilon::pending::{Base, Pending};
    use std::collections::BTreeMap;

    /// Batches of puts, deletes and appends against a map model, with
    /// basements split and joined between batches.
    #[test]
    fn batches_merge_like_a_map() {
        let mut n = Node::new_leaf();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut append = |_: &[u8], old: Option<&[u8]>, p: &Pending| -> Result<Option<Vec<u8>>> {
            let mut v = match &p.base {
                Some(Base::Put(_, v)) => Some(v.clone()),
                Some(Base::Delete(_)) => None,
                None => old.map(<[u8]>::to_vec),
            };
            for o in &p.ops {
                v.get_or_insert_with(Vec::new).extend_from_slice(&o.1);
            }
            Ok(v)
        };
        for round in 0..40u64 {
            let mut batch: BTreeMap<Vec<u8>, Pending> = BTreeMap::new();
            for _ in 0..200 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let k = format!("{:05}", x % 3000).into_bytes();
                let p = match x % 5 {
                    0 => Pending {
                        base: Some(Base::Delete(round)),
                        ops: vec![],
                    },
                    1 | 2 => Pending {
                        base: None,
                        ops: vec![(round, vec![b'+'; 3])],
                    },
                    _ => Pending {
                        base: Some(Base::Put(round, vec![x as u8; 40])),
                        ops: vec![],
                    },
                };
                match append(&k, model.get(&k).map(Vec::as_slice), &p).unwrap() {
                    Some(v) => model.insert(k.clone(), v),
                    None => model.remove(&k),
                };
                batch.entry(k).or_default().absorb(p);
            }
            // Collapsed per key, as a buffer holds them.
            let msgs: Vec<(Vec<u8>, Pending)> = batch.into_iter().collect();
            let refs: Vec<(&[u8], Change)> = msgs
                .iter()
                .map(|(k, p)| (k.as_slice(), Change::of(p)))
                .collect();
            let before = n.parts.iter().flatten().map(|p| p.entries()).sum::<usize>() as i64;
            let d = n.apply_sorted(&refs, &mut append, &mut Vec::new()).unwrap();
            n.fix_basements(2048);
            let after = n.parts.iter().flatten().map(|p| p.entries()).sum::<usize>() as i64;
            assert_eq!(after - before, d, "round {round}");
            assert_eq!(after as usize, model.len());
            for (i, p) in n.parts.iter().enumerate() {
                let p = p.as_deref().unwrap();
                assert_eq!(n.part_bytes[i], p.bytes());
                assert!(matches!(p, Part::Packed(_)), "dirty basements stay packed");
            }
        }
        assert!(n.parts.len() > 10, "basements split: {}", n.parts.len());
        let mut got = Vec::new();
        for p in n.parts.iter().flatten() {
            let Part::Packed(b) = &**p else {
                unreachable!()
            };
            got.extend((0..b.len()).map(|i| (b.at(i).0.to_vec(), b.at(i).1.to_vec())));
        }
        assert_eq!(got, model.into_iter().collect::<Vec<_>>());
        for (i, piv) in n.pivots.iter().enumerate() {
            let (Some(Part::Packed(l)), Some(Part::Packed(r))) =
                (n.parts[i].as_deref(), n.parts[i + 1].as_deref())
            else {
                unreachable!()
            };
            assert!(l.last_key().is_none_or(|k| k < piv), "pivot {i}");
            assert!(r.first_key().is_none_or(|k| k >= piv), "pivot {i}");
        }
    }
}
