//! Page ownership for `Db::check`: every page id below the page count must
//! be claimed exactly once (superblock, catalog, node, overflow, free).
//! docs/design.md, "Invariants".

/// What claimed a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Owner {
    Free = 1,
    Used = 2,
}

pub struct Claims {
    owner: Vec<u8>,
    page_size: u64,
    /// Prefix of every problem, e.g. `tree "orders"`.
    pub context: String,
    pub problems: Vec<String>,
    /// When set, the walk also records which structure every byte range it
    /// verified belongs to ([`crate::Db::file_map`]).
    pub map: Option<Vec<Region>>,
}

/// A byte range of the data file and the structure it belongs to, e.g.
/// `B-epsilon leaf: basement segment` (`Db::file_map`, for corruption
/// tests: a finer region recorded later overrides a coarser one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    pub start_bytes: u64,
    pub len_bytes: u64,
    pub structure: String,
    /// The tree it belongs to (empty for the superblock, catalog and free pages).
    pub tree: String,
}

impl Claims {
    pub fn new(count_pages: u64, page_size: usize) -> Self {
        assert!(count_pages >= 2);
        Self {
            owner: vec![0; count_pages as usize],
            page_size: page_size as u64,
            context: String::new(),
            problems: Vec::new(),
            map: None,
        }
    }

    /// Records that pages `start..start + n` hold `structure` (when mapping).
    pub fn map_pages(&mut self, start: u64, n: u64, structure: &str) {
        let ps = self.page_size;
        self.map_bytes(start.saturating_mul(ps), n.saturating_mul(ps), structure);
    }

    /// Records that file bytes `start_bytes..+len_bytes` hold `structure`.
    pub fn map_bytes(&mut self, start_bytes: u64, len_bytes: u64, structure: &str) {
        let tree = self.context.clone();
        if let Some(m) = self.map.as_mut() {
            m.push(Region {
                start_bytes,
                len_bytes,
                structure: structure.to_string(),
                tree,
            });
        }
    }

    pub fn problem(&mut self, pid: u64, what: String) {
        let at = pid.saturating_mul(self.page_size);
        let ctx = if self.context.is_empty() {
            String::new()
        } else {
            format!("{}: ", self.context)
        };
        self.problems
            .push(format!("{ctx}page {pid} (offset {at}): {what}"));
    }

    /// Claims `n` pages from `start`; false if any is out of range or taken.
    pub fn claim(&mut self, start: u64, n: u64, how: Owner, what: &str) -> bool {
        for p in start..start.saturating_add(n) {
            let Some(o) = self.owner.get_mut(p as usize) else {
                let hwm = self.owner.len();
                self.problem(
                    p,
                    format!("{what} beyond the end of the file ({hwm} pages)"),
                );
                return false;
            };
            if *o != 0 {
                let prev = if *o == Owner::Free as u8 {
                    "on the free list"
                } else {
                    "already in use"
                };
                self.problem(p, format!("{what} is {prev}"));
                return false;
            }
            *o = how as u8;
        }
        true
    }

    /// Pages nobody claimed: leaked.
    pub fn unclaimed(&self) -> Vec<u64> {
        (0..self.owner.len() as u64)
            .filter(|&p| self.owner[p as usize] == 0)
            .collect()
    }
}
