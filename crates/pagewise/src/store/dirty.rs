//! The epoch's dirty set: node images allocated since the last checkpoint,
//! changed in place until the checkpoint writes them (docs/design.md,
//! "Checkpoints"). Charged in bytes of memory: a page each for B+tree
//! pages, their heap bytes for B-epsilon nodes.

use super::cache::PidMap;
use super::image::Image;

#[derive(Default)]
pub struct Dirty {
    map: PidMap<Image>,
    /// Pages the dirty images occupy (one each today), for the byte budget.
    count_pages: u64,
    /// Heap bytes of dirty images that are not one page each (B-epsilon
    /// nodes, kept by their tree kind), added to the page bytes.
    pub extra_bytes: u64,
}

impl Dirty {
    pub fn get(&self, pid: u64) -> Option<&Image> {
        self.map.get(&pid)
    }

    pub fn get_mut(&mut self, pid: u64) -> Option<&mut Image> {
        self.map.get_mut(&pid)
    }

    pub fn contains(&self, pid: u64) -> bool {
        self.map.contains_key(&pid)
    }

    /// Adds the image of freshly allocated page `pid`.
    pub fn insert(&mut self, pid: u64, image: Image) {
        let old = self.map.insert(pid, image);
        assert!(old.is_none(), "page {pid} made dirty twice");
        self.count_pages += 1;
    }

    pub fn remove(&mut self, pid: u64) -> Option<Image> {
        let old = self.map.remove(&pid);
        self.count_pages -= old.is_some() as u64;
        old
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Memory the dirty set holds: what the dirty budget and the cache's
    /// reservation count.
    pub fn bytes(&self, page_size: usize) -> u64 {
        debug_assert_eq!(self.count_pages, self.map.len() as u64);
        self.count_pages * page_size as u64 + self.extra_bytes
    }

    /// The images, sorted by page id (so consecutive pages coalesce).
    pub fn sorted(&self) -> Vec<(u64, Image)> {
        let mut v: Vec<(u64, Image)> = self.map.iter().map(|(p, n)| (*p, n.clone())).collect();
        v.sort_unstable_by_key(|e| e.0);
        v
    }
}
