//! Where the B-epsilon tree's on-disk fields lie (docs/design.md,
//! "B-epsilon nodes": its parameter, header, directory entry and segment
//! entry tables), named for the encoders and decoders of mod.rs, format.rs
//! and segment.rs.

#![allow(dead_code)] // every row of a table is named, read or not

use crate::store::layout::Field;

/// A tree's parameters in its catalog entry.
pub mod params {
    use super::Field;
    pub const NODE_BYTES: Field = Field::new(0, 4);
    pub const BASEMENT_BYTES: Field = Field::new(4, 4);
    pub const FANOUT: Field = Field::new(8, 2);
    pub const COMPRESSION: Field = Field::new(10, 1);
    pub const LEVEL: Field = Field::new(11, 1);
    pub const LEAF_BYTES: Field = Field::new(12, 4);
    pub const VALUE_EXTENT_BYTES: Field = Field::new(16, 4);
}

/// A tree's root descriptor in its catalog entry.
pub mod root {
    use super::Field;
    pub const EXTENT: Field = Field::new(0, 16);
    pub const HEIGHT: Field = Field::new(16, 4);
    pub const ENTRIES: Field = Field::new(20, 8);
    pub const NODES: Field = Field::new(28, 8);
    pub const NEXT_SEQ: Field = Field::new(36, 8);
    pub const VALUE_TABLE: Field = Field::new(44, 16);
}

/// A node's header, at the start of its shell.
pub mod header {
    use super::Field;
    pub const MAGIC: Field = Field::new(0, 4);
    pub const TYPE: Field = Field::new(4, 1);
    pub const COMPRESSION: Field = Field::new(5, 1);
    pub const PARTS: Field = Field::new(6, 2);
    pub const HEIGHT: Field = Field::new(8, 4);
    pub const SHELL_BYTES: Field = Field::new(12, 4);
    pub const MAX_SEQ: Field = Field::new(16, 8);
    pub const RAW_BYTES: Field = Field::new(24, 8);
    pub const PROBES: Field = Field::new(32, 1);
    pub const RESERVED: Field = Field::new(33, 3);
    pub const FILTER_CRC: Field = Field::new(36, 4);
    pub const SEGMENT_AREA_BYTES: Field = Field::new(40, 4);
    pub const SEGMENT_AREA_CRC: Field = Field::new(44, 4);
    pub const RESERVED_END: Field = Field::new(48, 16);
}

/// A partition's directory entry, after the header.
pub mod dir {
    use super::Field;
    pub const OFFSET: Field = Field::new(0, 4);
    pub const STORED_BYTES: Field = Field::new(4, 4);
    pub const RAW_BYTES: Field = Field::new(8, 4);
    pub const CRC: Field = Field::new(12, 4);
    pub const ENTRIES: Field = Field::new(16, 4);
    pub const FILTER_BYTES: Field = Field::new(20, 4);
}

/// A partition's list in the segment area: its count, then its entries.
pub mod segment_area {
    use super::Field;
    pub const COUNT: Field = Field::new(0, 2);
}

/// A message in an uncompressed buffer partition (and in a buffer's arena):
/// its fixed fields, then the key, then the value or upsert operand.
pub mod message {
    use super::Field;
    pub const TYPE: Field = Field::new(0, 1);
    pub const SEQ: Field = Field::new(1, 8);
    pub const KEY_LEN: Field = Field::new(9, 2);
    pub const VALUE_LEN: Field = Field::new(11, 4);
    pub const KEY_AT: usize = VALUE_LEN.end();
}

/// A segment entry in the segment area.
pub mod segment {
    use super::Field;
    pub const STORED_BYTES: Field = Field::new(0, 4);
    pub const RAW_BYTES: Field = Field::new(4, 4);
    pub const CRC: Field = Field::new(8, 4);
    pub const KEY_LEN: Field = Field::new(12, 2);
}

#[cfg(test)]
use crate::store::layout::Table;

#[cfg(test)]
pub const PARAMS_TABLE: Table = Table {
    heading: "B-epsilon nodes",
    index: 0,
    rows: &[
        ("node bytes", params::NODE_BYTES),
        ("basement bytes", params::BASEMENT_BYTES),
        ("fanout", params::FANOUT),
        ("compression", params::COMPRESSION),
        ("compression level", params::LEVEL),
        ("leaf bytes", params::LEAF_BYTES),
        ("value extent bytes", params::VALUE_EXTENT_BYTES),
    ],
};

/// A stored value of a tree with value extents (`value.rs`).
pub mod stored {
    use super::Field;
    pub const TAG: Field = Field::new(0, 1);
}

#[cfg(test)]
pub const STORED_VALUE_TABLE: Table = Table {
    heading: "B-epsilon value extents",
    index: 0,
    rows: &[("tag", stored::TAG)],
};

#[cfg(test)]
pub const ROOT_TABLE: Table = Table {
    heading: "B-epsilon nodes",
    index: 1,
    rows: &[
        ("root extent", root::EXTENT),
        ("height", root::HEIGHT),
        ("leaf entries", root::ENTRIES),
        ("node count", root::NODES),
        ("next sequence number", root::NEXT_SEQ),
        ("value table extent", root::VALUE_TABLE),
    ],
};

#[cfg(test)]
pub const HEADER_TABLE: Table = Table {
    heading: "B-epsilon nodes",
    index: 2,
    rows: &[
        ("magic", header::MAGIC),
        ("node type", header::TYPE),
        ("compression", header::COMPRESSION),
        ("partition count", header::PARTS),
        ("height", header::HEIGHT),
        ("bytes of header", header::SHELL_BYTES),
        ("highest message sequence", header::MAX_SEQ),
        ("uncompressed bytes", header::RAW_BYTES),
        ("buffer filter probes", header::PROBES),
        ("reserved", header::RESERVED),
        ("crc32c of the filter area", header::FILTER_CRC),
        ("bytes of the segment area", header::SEGMENT_AREA_BYTES),
        ("crc32c of the segment area", header::SEGMENT_AREA_CRC),
        ("reserved", header::RESERVED_END),
    ],
};

#[cfg(test)]
pub const DIR_TABLE: Table = Table {
    heading: "B-epsilon nodes",
    index: 3,
    rows: &[
        ("offset of the partition", dir::OFFSET),
        ("compressed bytes", dir::STORED_BYTES),
        ("uncompressed bytes", dir::RAW_BYTES),
        ("crc32c", dir::CRC),
        ("entries", dir::ENTRIES),
        ("bytes of this partition", dir::FILTER_BYTES),
    ],
};

#[cfg(test)]
pub const SEGMENT_AREA_TABLE: Table = Table {
    heading: "B-epsilon nodes",
    index: 4,
    rows: &[("segment count", segment_area::COUNT)],
};

#[cfg(test)]
pub const MESSAGE_TABLE: Table = Table {
    heading: "B-epsilon nodes",
    index: 6,
    rows: &[
        ("type", message::TYPE),
        ("sequence number", message::SEQ),
        ("key length", message::KEY_LEN),
        ("value length", message::VALUE_LEN),
    ],
};

#[cfg(test)]
pub const SEGMENT_TABLE: Table = Table {
    heading: "B-epsilon nodes",
    index: 5,
    rows: &[
        ("stored bytes", segment::STORED_BYTES),
        ("raw bytes", segment::RAW_BYTES),
        ("crc32c", segment::CRC),
        ("first key length", segment::KEY_LEN),
    ],
};

/// An entry of a value run (docs/design.md, "B-epsilon packed values"):
/// its fixed fields, then the key, then the value.
pub mod run_entry {
    use super::Field;
    pub const KEY_LEN: Field = Field::new(0, 2);
    pub const VALUE_LEN: Field = Field::new(2, 4);
    pub const KEY_AT: usize = VALUE_LEN.end();
}

/// A packed reference: a stored value of tag 2.
pub mod packed_ref {
    use super::Field;
    pub const TAG: Field = Field::new(0, 1);
    pub const FIRST_PAGE: Field = Field::new(1, 8);
    pub const OFFSET: Field = Field::new(9, 4);
    pub const LEN: Field = Field::new(13, 4);
}

/// A tree's value table: its header, then per run its fixed fields, then
/// per page of the run its counts.
pub mod value_table {
    use super::Field;
    pub const MAGIC: Field = Field::new(0, 4);
    pub const RUNS: Field = Field::new(4, 4);
    pub const RUN_FIRST_PAGE: Field = Field::new(0, 8);
    pub const RUN_PAGES: Field = Field::new(8, 2);
    pub const PAGE_ENTRIES: Field = Field::new(0, 2);
    pub const PAGE_LIVE: Field = Field::new(2, 2);
    pub const PAGE_FIRST_START: Field = Field::new(4, 2);
    pub const PAGE_LIVE_BYTES: Field = Field::new(6, 2);
}

#[cfg(test)]
pub const RUN_ENTRY_TABLE: Table = Table {
    heading: "B-epsilon packed values",
    index: 0,
    rows: &[
        ("key length", run_entry::KEY_LEN),
        ("value length", run_entry::VALUE_LEN),
    ],
};

#[cfg(test)]
pub const PACKED_REF_TABLE: Table = Table {
    heading: "B-epsilon packed values",
    index: 1,
    rows: &[
        ("tag", packed_ref::TAG),
        ("first page", packed_ref::FIRST_PAGE),
        ("value offset", packed_ref::OFFSET),
        ("value length", packed_ref::LEN),
    ],
};

#[cfg(test)]
pub const VALUE_TABLE_HEADER: Table = Table {
    heading: "B-epsilon packed values",
    index: 2,
    rows: &[
        ("magic", value_table::MAGIC),
        ("run count", value_table::RUNS),
    ],
};

#[cfg(test)]
pub const VALUE_TABLE_RUN: Table = Table {
    heading: "B-epsilon packed values",
    index: 3,
    rows: &[
        ("first page", value_table::RUN_FIRST_PAGE),
        ("page count", value_table::RUN_PAGES),
    ],
};

#[cfg(test)]
pub const VALUE_TABLE_PAGE: Table = Table {
    heading: "B-epsilon packed values",
    index: 4,
    rows: &[
        ("entries", value_table::PAGE_ENTRIES),
        ("live", value_table::PAGE_LIVE),
        ("first entry start", value_table::PAGE_FIRST_START),
        ("live bytes", value_table::PAGE_LIVE_BYTES),
    ],
};
