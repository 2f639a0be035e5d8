//! The epoch's dirty set: node images allocated since the last checkpoint,
//! changed in place until the checkpoint writes them (docs/design.md,
//! "Checkpoints"). Charged in bytes of memory: each image's heap bytes
//! (`NodeImage::charge_bytes`), as the cache charges clean images.

use super::cache::PidMap;
use super::image::Image;

#[derive(Default)]
pub struct Dirty {
    /// Each image with the bytes it was last charged.
    map: PidMap<(Image, usize)>,
    /// Sum of the charges in `map`: what the dirty budget and the cache's
    /// reservation count.
    charged_bytes: u64,
    /// Images handed out by `get_mut` since the last [`Dirty::recharge`]
    /// (changed in place, so their heap may have grown or shrunk).
    touched: Vec<u64>,
}

impl Dirty {
    pub fn get(&self, pid: u64) -> Option<&Image> {
        self.map.get(&pid).map(|e| &e.0)
    }

    /// The image of `pid` for changing in place; its charge is brought up
    /// to date by the next [`Dirty::recharge`].
    pub fn get_mut(&mut self, pid: u64) -> Option<&mut Image> {
        let e = self.map.get_mut(&pid)?;
        self.touched.push(pid);
        Some(&mut e.0)
    }

    pub fn contains(&self, pid: u64) -> bool {
        self.map.contains_key(&pid)
    }

    /// Adds the image of freshly allocated page `pid`, charged its heap bytes.
    pub fn insert(&mut self, pid: u64, image: Image) {
        let charge = image.charge_bytes();
        let old = self.map.insert(pid, (image, charge));
        assert!(old.is_none(), "page {pid} made dirty twice");
        self.charged_bytes += charge as u64;
    }

    pub fn remove(&mut self, pid: u64) -> Option<Image> {
        let (image, charge) = self.map.remove(&pid)?;
        assert!(
            self.charged_bytes >= charge as u64,
            "dirty charge underflow"
        );
        self.charged_bytes -= charge as u64;
        Some(image)
    }

    /// Charges the images changed in place since the last call at their
    /// heap bytes now. Bounded by the `get_mut` calls since then.
    pub fn recharge(&mut self) {
        for pid in std::mem::take(&mut self.touched) {
            let Some(e) = self.map.get_mut(&pid) else {
                continue; // removed since
            };
            let charge = e.0.charge_bytes();
            self.charged_bytes = self.charged_bytes - e.1 as u64 + charge as u64;
            e.1 = charge;
        }
        debug_assert!(
            self.map.len() > 1024
                || self.charged_bytes == self.map.values().map(|e| e.1 as u64).sum::<u64>()
        );
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Memory the dirty set holds, as of the last [`Dirty::recharge`] for
    /// images changed in place: what the dirty budget and the cache's
    /// reservation count.
    pub fn bytes(&self) -> u64 {
        assert!(self.charged_bytes == 0 || !self.map.is_empty());
        self.charged_bytes
    }

    /// The images, sorted by page id (so consecutive pages coalesce).
    pub fn sorted(&self) -> Vec<(u64, Image)> {
        let mut v: Vec<(u64, Image)> = self.map.iter().map(|(p, e)| (*p, e.0.clone())).collect();
        v.sort_unstable_by_key(|e| e.0);
        v
    }
}
