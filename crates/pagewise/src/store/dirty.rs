//! The epoch's dirty set: node images allocated since the last checkpoint,
//! changed in place until the checkpoint writes them (docs/design.md,
//! "Checkpoints"). Charged in bytes of memory: each image's heap bytes
//! (`NodeImage::charge_bytes`), as the cache charges clean images.
//!
//! Persistent for snapshots (docs/design.md, "Snapshots"): the map is a
//! two-level tree of shared pointers, [`FANOUT`] x [`FANOUT`] shards, so
//! [`Dirty::freeze`] is one pointer copy. A writer copies the path to each
//! shard it changes (two arrays of [`FANOUT`] pointers and the shard,
//! about 1/4096 of the dirty set) the first time it changes it while a
//! snapshot shares it; the images themselves are copied on write by
//! `image::make_mut` (a snapshot holds a reference, so the writer's copy is
//! never the snapshot's).

use super::cache::PidMap;
use super::image::Image;
use std::sync::Arc;

/// Pointers per level of the map: a snapshot that overlaps writes costs a
/// writer, per shard it changes, two arrays of this many pointers and the
/// shard (measured: with one array of 64 shards, two threads of B+tree
/// transactions on a 1M-row Db, whose dirty set held tens of thousands of
/// pages, ran at 0.37x the same work without snapshots).
pub const FANOUT: usize = 64;

type Shard = PidMap<(Image, usize)>;
type Level = [Arc<Shard>; FANOUT];

pub struct Dirty {
    /// Each image with the bytes it was last charged, by shard.
    shards: Arc<[Arc<Level>; FANOUT]>,
    /// Entries in all shards.
    len: usize,
    /// Sum of the charges in the map: what the dirty budget and the cache's
    /// reservation count.
    charged_bytes: u64,
    /// Images handed out by `get_mut` since the last [`Dirty::recharge`]
    /// (changed in place, so their heap may have grown or shrunk).
    touched: Vec<u64>,
}

impl Default for Dirty {
    fn default() -> Self {
        Dirty {
            shards: Arc::new(std::array::from_fn(|_| {
                Arc::new(std::array::from_fn(|_| Arc::default()))
            })),
            len: 0,
            charged_bytes: 0,
            touched: Vec::new(),
        }
    }
}

/// The shard of `pid`: (top level, second level).
#[inline]
fn shard_of(pid: u64) -> (usize, usize) {
    let h = pid.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    ((h >> 58) as usize, ((h >> 52) & 63) as usize)
}
const _: () = assert!(FANOUT == 1 << 6, "shard_of takes 6 bits per level");

/// The shard of `pid` in `shards`, uniquely owned: each shared pointer on
/// the path is copied first (three checks when nothing is shared).
#[inline]
fn shard_in(shards: &mut Arc<[Arc<Level>; FANOUT]>, pid: u64) -> &mut Shard {
    let (t, m) = shard_of(pid);
    let level = Arc::make_mut(&mut Arc::make_mut(shards)[t]);
    Arc::make_mut(&mut level[m])
}

impl Dirty {
    /// The map as it is now, for a snapshot: later changes through `self`
    /// copy what they change. Requires: no `get_mut` since the last
    /// [`Dirty::recharge`] (the copy's charge is then exact).
    pub fn freeze(&self) -> Dirty {
        Dirty {
            shards: self.shards.clone(),
            len: self.len,
            charged_bytes: self.charged_bytes,
            touched: Vec::new(),
        }
    }

    #[inline]
    pub fn get(&self, pid: u64) -> Option<&Image> {
        if self.len == 0 {
            return None; // a clean Db's reads skip the hash
        }
        let (t, m) = shard_of(pid);
        self.shards[t][m].get(&pid).map(|e| &e.0)
    }

    /// The shard of `pid`, uniquely owned (its path copied if a snapshot
    /// shares it).
    fn shard_mut(&mut self, pid: u64) -> &mut Shard {
        shard_in(&mut self.shards, pid)
    }

    /// The image of `pid` for changing in place; its charge is brought up
    /// to date by the next [`Dirty::recharge`].
    pub fn get_mut(&mut self, pid: u64) -> Option<&mut Image> {
        let e = shard_in(&mut self.shards, pid).get_mut(&pid)?;
        self.touched.push(pid);
        Some(&mut e.0)
    }

    #[inline]
    pub fn contains(&self, pid: u64) -> bool {
        let (t, m) = shard_of(pid);
        self.len > 0 && self.shards[t][m].contains_key(&pid)
    }

    /// Adds the image of freshly allocated page `pid`, charged its heap bytes.
    pub fn insert(&mut self, pid: u64, image: Image) {
        let charge = image.charge_bytes();
        let old = self.shard_mut(pid).insert(pid, (image, charge));
        assert!(old.is_none(), "page {pid} made dirty twice");
        self.len += 1;
        self.charged_bytes += charge as u64;
    }

    pub fn remove(&mut self, pid: u64) -> Option<Image> {
        if self.len == 0 {
            return None;
        }
        let (image, charge) = self.shard_mut(pid).remove(&pid)?;
        assert!(
            self.charged_bytes >= charge as u64 && self.len > 0,
            "dirty charge underflow"
        );
        self.len -= 1;
        self.charged_bytes -= charge as u64;
        Some(image)
    }

    /// Charges the images changed in place since the last call at their
    /// heap bytes now. Bounded by the `get_mut` calls since then.
    pub fn recharge(&mut self) {
        if self.touched.is_empty() {
            return;
        }
        for pid in std::mem::take(&mut self.touched) {
            let Some(e) = shard_in(&mut self.shards, pid).get_mut(&pid) else {
                continue; // removed since
            };
            let charge = e.0.charge_bytes();
            let old = std::mem::replace(&mut e.1, charge);
            self.charged_bytes = self.charged_bytes - old as u64 + charge as u64;
        }
        debug_assert!(
            self.len > 1024
                || self.charged_bytes == self.entries().map(|e| e.1 .1 as u64).sum::<u64>()
        );
    }

    fn entries(&self) -> impl Iterator<Item = (&u64, &(Image, usize))> {
        self.shards
            .iter()
            .flat_map(|l| l.iter())
            .flat_map(|s| s.iter())
    }

    pub fn len(&self) -> usize {
        debug_assert!(self.len > 1024 || self.len == self.entries().count());
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Memory the dirty set holds, as of the last [`Dirty::recharge`] for
    /// images changed in place: what the dirty budget and the cache's
    /// reservation count.
    pub fn bytes(&self) -> u64 {
        assert!(self.charged_bytes == 0 || self.len > 0);
        self.charged_bytes
    }

    /// The images, sorted by page id (so consecutive pages coalesce).
    pub fn sorted(&self) -> Vec<(u64, Image)> {
        let mut v: Vec<(u64, Image)> = self.entries().map(|(p, e)| (*p, e.0.clone())).collect();
        v.sort_unstable_by_key(|e| e.0);
        assert_eq!(v.len(), self.len);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::image::testing::{blob, Blob};
    use crate::store::image::{downcast_ref, make_mut};

    fn len_of(d: &Dirty, pid: u64) -> usize {
        downcast_ref::<Blob>(&**d.get(pid).unwrap())
            .unwrap()
            .0
            .len()
    }

    #[test]
    fn a_frozen_copy_keeps_its_moment_while_the_set_changes() {
        let mut d = Dirty::default();
        for pid in 2..500u64 {
            d.insert(pid, blob(10));
        }
        let frozen = d.freeze();
        make_mut::<Blob>(d.get_mut(7).unwrap()).0.push(1);
        d.recharge();
        d.remove(8);
        d.insert(1000, blob(20));
        assert_eq!((len_of(&d, 7), len_of(&frozen, 7)), (11, 10));
        assert!(!d.contains(8) && frozen.contains(8));
        assert!(d.contains(1000) && !frozen.contains(1000));
        assert_eq!((d.len(), frozen.len()), (498, 498));
        assert_eq!(frozen.bytes(), 498 * blob(10).charge_bytes() as u64);
        let grown = d.get(7).unwrap().charge_bytes() as u64;
        let (c10, c20) = (
            blob(10).charge_bytes() as u64,
            blob(20).charge_bytes() as u64,
        );
        assert_eq!(d.bytes(), frozen.bytes() + grown - c10 - c10 + c20);
        assert_eq!(frozen.sorted().len(), 498);
    }

    #[test]
    fn without_a_snapshot_nothing_is_copied() {
        let mut d = Dirty::default();
        d.insert(5, blob(10));
        let before = Arc::as_ptr(d.get(5).unwrap()) as *const u8;
        make_mut::<Blob>(d.get_mut(5).unwrap()).0.push(1);
        let after = Arc::as_ptr(d.get(5).unwrap()) as *const u8;
        assert_eq!(after, before, "changed in place");
    }
}
