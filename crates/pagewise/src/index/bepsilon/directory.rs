//! A stored node's partition directory entry (docs/design.md, "B-epsilon
//! nodes", partition directory).

/// Where a partition lies in a stored node (docs/design.md, partition
/// directory), and the key filter of a stored buffer (None: the node has no
/// filters, or the partition is a basement).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirEntry {
    pub offset: u32,
    pub comp_bytes: u32,
    pub raw_bytes: u32,
    pub crc: u32,
    pub entries: u32,
    pub filter: Option<super::filter::Filter>,
}
