//! The names of the structures [`crate::Db::file_map`] reports for each
//! byte range of the file ([`crate::Region::structure`]), defined once:
//! the checker's walks name what they map through these, and tests and
//! tools that look for a structure name it through them too.

pub const SUPERBLOCK: &str = "superblock";
pub const FREE_PAGE: &str = "free page";
pub const BTREE_OVERFLOW: &str = "B+tree overflow";
pub const BEPSILON_VALUE_EXTENT: &str = "B-epsilon value extent";
pub const BEPSILON_VALUE_TABLE: &str = "B-epsilon value table";
pub const BEPSILON_VALUE_RUN_PAGE: &str = "B-epsilon value run page";

/// The catalog, with the form of its free list.
pub fn catalog(free_form: &str) -> String {
    format!("catalog ({free_form} free list)")
}

/// The two shapes of a B+tree page.
pub const BTREE_LEAF: &str = "leaf";
pub const BTREE_BRANCH: &str = "branch";

/// A B+tree page of `shape` ([`BTREE_LEAF`] or [`BTREE_BRANCH`]).
pub fn btree_page(shape: &str) -> String {
    format!("B+tree {shape}")
}

/// A B+tree page of `shape` stored as a delta block.
pub fn btree_delta_block(shape: &str) -> String {
    format!("B+tree {shape} delta block")
}

/// The base page a B+tree delta block of `shape` applies to.
pub fn btree_delta_base(shape: &str) -> String {
    format!("B+tree {shape} delta base")
}

/// The two shapes of a B-epsilon node.
pub const BEPSILON_LEAF: &str = "B-epsilon leaf";
pub const BEPSILON_INTERNAL: &str = "B-epsilon internal node";

/// The parts of a stored B-epsilon node (docs/design.md, "B-epsilon
/// nodes"): every node has a page header and tail per page, a header, a
/// directory, pivots, filters and a segment list; a leaf holds basements
/// (cut into segments once large), an internal node buffers.
pub const PAGE_HEADER: &str = "page header";
pub const PAGE_TAIL: &str = "page tail";
pub const HEADER: &str = "header";
pub const DIRECTORY: &str = "directory";
pub const PIVOTS: &str = "pivots";
pub const FILTERS: &str = "filters";
pub const SEGMENT_LIST: &str = "segment list";
pub const BASEMENT: &str = "basement";
pub const BASEMENT_SEGMENT: &str = "basement segment";
pub const BUFFER: &str = "buffer";
pub const BUFFER_SEGMENT: &str = "buffer segment";

/// Part `part` of a B-epsilon node of shape `shape` ([`BEPSILON_LEAF`] or
/// [`BEPSILON_INTERNAL`]).
pub fn bepsilon_part(shape: &str, part: &str) -> String {
    format!("{shape}: {part}")
}
