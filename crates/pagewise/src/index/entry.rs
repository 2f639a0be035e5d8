//! The leaf entry both tree kinds store: `key length u16 | value length u32 |
//! key | value` (docs/design.md, "B+tree node payload": a B+tree leaf's
//! entries and a B-epsilon basement's are this one layout).

use crate::store::layout::Field;

pub const KEY_LEN: Field = Field::new(0, 2);
/// Bit 31 set: the value is an extent reference (B+tree overflow values).
pub const VALUE_LEN: Field = Field::new(2, 4);
/// Where the key starts; the value follows the key.
pub const KEY_AT: usize = VALUE_LEN.end();

/// The leaf entry table of docs/design.md.
#[cfg(test)]
pub const TABLE: crate::store::layout::Table = crate::store::layout::Table {
    heading: "B+tree node payload (after the page header; kind 2 leaf, 3 branch)",
    index: 0,
    rows: &[("key length", KEY_LEN), ("value length", VALUE_LEN)],
};
