//! What a read misses: the node shells, partitions, probed segments and
//! slices a traversal asks to be read before it tries again.

use super::node::Node;
use crate::store::extent::Extent;
use std::sync::Arc;

/// Basements a scan step reads ahead at most with the one it misses
/// (`iter.rs`, `read_ahead`): a read-ahead round's bytes stay within a few
/// hundred KiB.
pub const MAX_AHEAD_BASEMENTS: usize = 8;

/// What a traversal is missing.
pub enum Miss {
    /// The node at this extent is not in memory.
    Shell(Extent),
    /// Partition `.1` of the node at this extent (whose image is `.2`).
    Part(Extent, usize, Arc<Node>),
    /// The messages buffer `.1` of the node at this extent holds for key
    /// `.3`, read without caching the buffer (a get under a full cache).
    Probe(Extent, usize, Arc<Node>, Vec<u8>),
    /// Segment `.3` of buffer `.1` of the node at this extent (whose image
    /// is `.2`), read without caching the buffer (a scan under a full
    /// cache: `slice.rs`).
    Slice(Extent, usize, Arc<Node>, usize),
    /// Several shells, partitions and slices one scan step misses, read
    /// through one queue (`many::read_misses`); never a probe or a batch.
    Batch(Vec<Miss>),
}

impl Miss {
    /// `last`, with the misses found before it on the same path.
    pub fn batch(mut before: Vec<Miss>, last: Miss) -> Miss {
        if before.is_empty() {
            return last;
        }
        before.push(last);
        Miss::Batch(before)
    }
}

pub enum Step<T> {
    Done(T),
    Miss(Miss),
}
