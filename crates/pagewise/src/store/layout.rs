//! Where each on-disk field lies: one [`Field`] per row of the offset and
//! size tables in docs/design.md, named after the row, and one [`Table`] per
//! table listing its rows in order. Encoders and decoders read and write
//! through these names; a test parses docs/design.md and checks every table
//! against them, so the tables and the code cannot drift apart.

/// A field's offset from the start of its structure and its length, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub at: usize,
    pub bytes: usize,
}

impl Field {
    pub const fn new(at: usize, bytes: usize) -> Field {
        assert!(bytes > 0);
        Field { at, bytes }
    }

    /// The first offset after the field.
    pub const fn end(self) -> usize {
        self.at + self.bytes
    }

    /// The field's bytes in `b`, which holds the structure from offset 0.
    pub fn of(self, b: &[u8]) -> &[u8] {
        &b[self.at..self.end()]
    }
}

/// One offset and size table of docs/design.md: the heading it stands under,
/// which table under that heading it is (0: the first), and its rows with
/// fixed offsets and sizes, in order, each with the first word(s) of the
/// row's field description. Rows whose offset or size depends on the data
/// ("6+k", "varies") are described in the table only.
#[cfg(test)]
pub struct Table {
    pub heading: &'static str,
    pub index: usize,
    pub rows: &'static [(&'static str, Field)],
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every table the code names, from the modules that own the structures.
    fn tables() -> Vec<&'static Table> {
        vec![
            &crate::store::page::HEADER_TABLE,
            &crate::store::superblock::TABLE,
            &crate::store::extent::TABLE,
            &crate::index::btree::ROOT_TABLE,
            &crate::index::entry::TABLE,
            &crate::index::btree::node::BRANCH_PREFIX_TABLE,
            &crate::index::btree::node::BRANCH_ENTRY_TABLE,
            &crate::log::record::TABLE,
            &crate::log::ops::HEAD_TABLE,
            &crate::index::btree::delta::TABLE,
            &crate::index::btree::delta::RECORD_TABLE,
            &crate::index::bepsilon::layout::PARAMS_TABLE,
            &crate::index::bepsilon::layout::ROOT_TABLE,
            &crate::index::bepsilon::layout::HEADER_TABLE,
            &crate::index::bepsilon::layout::DIR_TABLE,
            &crate::index::bepsilon::layout::SEGMENT_AREA_TABLE,
            &crate::index::bepsilon::layout::SEGMENT_TABLE,
            &crate::index::bepsilon::layout::MESSAGE_TABLE,
            &crate::index::bepsilon::layout::STORED_VALUE_TABLE,
            &crate::index::bepsilon::layout::RUN_ENTRY_TABLE,
            &crate::index::bepsilon::layout::PACKED_REF_TABLE,
            &crate::index::bepsilon::layout::VALUE_TABLE_HEADER,
            &crate::index::bepsilon::layout::VALUE_TABLE_RUN,
            &crate::index::bepsilon::layout::VALUE_TABLE_PAGE,
        ]
    }

    /// The numeric rows (offset, size, description) of the `index`th table
    /// under the heading `heading` in `text`.
    fn parse(text: &str, heading: &str, index: usize) -> Vec<(usize, usize, String)> {
        let mut lines = text
            .lines()
            .skip_while(|l| l.trim_start_matches('#').trim() != heading);
        assert!(
            lines.next().is_some(),
            "docs/design.md has no heading {heading:?}"
        );
        let mut seen = 0;
        let mut rows = Vec::new();
        let mut inside = false;
        for line in lines.take(2_000) {
            if line.starts_with('#') {
                break; // the next section
            }
            if line.starts_with("| offset | size |") {
                inside = seen == index;
                seen += 1;
                continue;
            }
            if !line.starts_with('|') {
                inside = false;
                continue;
            }
            if !inside || line.starts_with("| ---") {
                continue;
            }
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            if let (Ok(at), Ok(bytes)) = (cells[0].parse(), cells[1].parse()) {
                rows.push((at, bytes, cells[2].to_string()));
            }
        }
        assert!(
            seen > index,
            "{heading:?} has {seen} offset tables, not {}",
            index + 1
        );
        rows
    }

    fn check(text: &str, t: &Table) -> Result<(), String> {
        let found = parse(text, t.heading, t.index);
        if found.len() != t.rows.len() {
            return Err(format!(
                "{:?} table {}: {} numeric rows in docs/design.md, {} in the code",
                t.heading,
                t.index,
                found.len(),
                t.rows.len()
            ));
        }
        for ((at, bytes, what), (name, f)) in found.iter().zip(t.rows) {
            if (*at, *bytes) != (f.at, f.bytes) || !what.starts_with(name) {
                return Err(format!(
                    "{:?} table {}: docs/design.md says {at} | {bytes} | {what}; the code says {} | {} | {name}",
                    t.heading, t.index, f.at, f.bytes
                ));
            }
        }
        // Fixed rows follow each other without overlapping.
        for w in t.rows.windows(2) {
            if w[0].1.end() > w[1].1.at {
                return Err(format!("{:?}: {} overlaps {}", t.heading, w[0].0, w[1].0));
            }
        }
        Ok(())
    }

    fn design() -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/design.md");
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn every_table_matches_its_constants() {
        let text = design();
        for t in tables() {
            check(&text, t).unwrap();
        }
    }

    /// The check can fail: a moved field, a changed size, a missing row and
    /// a renamed row are each found.
    #[test]
    fn a_changed_table_is_found() {
        let text = design();
        let t = &crate::store::superblock::TABLE;
        for (from, to) in [
            ("| 44 | 4 | page size |", "| 45 | 4 | page size |"),
            ("| 44 | 4 | page size |", "| 44 | 8 | page size |"),
            ("| 44 | 4 | page size |\n", ""),
            ("| 44 | 4 | page size |", "| 44 | 4 | block size |"),
        ] {
            assert!(text.contains(from), "the superblock table has {from:?}");
            let changed = text.replacen(from, to, 1);
            assert!(
                check(&changed, t).is_err(),
                "{from:?} -> {to:?} went unnoticed"
            );
        }
    }
}
