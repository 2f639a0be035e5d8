//! A B+tree node's changes since its base page, and the delta block that
//! holds them (docs/design.md, "Delta blocks for B+tree pages": the block
//! table, the net change set per key, the branch-as-map convention).

use crate::store::extent::{Extent, EXTENT_REF_BYTES as OVF_REF};
use crate::store::page::{get_u16, get_u32, get_u64, put_u16, put_u32, put_u64, HDR};
use std::collections::BTreeMap;

/// The delta block's fields after the page header, as offsets in its page
/// (docs/design.md, "Delta blocks for B+tree pages").
#[allow(dead_code)] // every row of its table is named, read or not
pub mod block {
    use crate::store::layout::Field;
    pub const BASE_PID: Field = Field::new(32, 8);
    pub const BASE_CRC: Field = Field::new(40, 4);
    pub const COUNT: Field = Field::new(44, 4);
    pub const RECORD_BYTES: Field = Field::new(48, 4);
    pub const RESERVED: Field = Field::new(52, 4);
}

/// A record in the delta block's records: its fixed fields, then the key,
/// then the value (docs/design.md, "Delta record").
pub mod record {
    use crate::store::layout::Field;
    pub const OP: Field = Field::new(0, 1);
    pub const KEY_LEN: Field = Field::new(1, 2);
    /// Bit 31: the value is an extent reference, as in leaves.
    pub const VALUE_LEN: Field = Field::new(3, 4);
    pub const KEY_AT: usize = VALUE_LEN.end();
}

/// The delta record's table in docs/design.md.
#[cfg(test)]
pub const RECORD_TABLE: crate::store::layout::Table = crate::store::layout::Table {
    heading: "Delta blocks for B+tree pages",
    index: 1,
    rows: &[
        ("op", record::OP),
        ("key length", record::KEY_LEN),
        ("value length", record::VALUE_LEN),
    ],
};

/// The delta block's table in docs/design.md.
#[cfg(test)]
pub const TABLE: crate::store::layout::Table = crate::store::layout::Table {
    heading: "Delta blocks for B+tree pages",
    index: 0,
    rows: &[
        ("base page id", block::BASE_PID),
        ("crc32c of the base", block::BASE_CRC),
        ("record count", block::COUNT),
        ("record bytes", block::RECORD_BYTES),
        ("reserved", block::RESERVED),
    ],
};

/// Bytes of the delta block's fixed part after the page header.
pub const DELTA_HDR: usize = block::RESERVED.end() - HDR;
/// Bytes of a record before its key and value.
pub const REC_HDR: usize = record::KEY_AT;
const OP_PUT: u8 = 1;
const OP_REMOVE: u8 = 2;
const OVF_BIT: u32 = 1 << 31;
/// Heap bytes charged per changed key beyond its key and value.
const CHARGE_PER_KEY: usize = 64;

/// A changed key's last state: a put of stored value bytes (an extent
/// reference when `overflow`), or a remove.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Put { val: Vec<u8>, overflow: bool },
    Remove,
}

/// A change borrowed from a record or from the map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeRef<'a> {
    Put { val: &'a [u8], overflow: bool },
    Remove,
}

impl Change {
    pub fn as_ref(&self) -> ChangeRef<'_> {
        match self {
            Change::Put { val, overflow } => ChangeRef::Put {
                val,
                overflow: *overflow,
            },
            Change::Remove => ChangeRef::Remove,
        }
    }
}

impl ChangeRef<'_> {
    fn record_bytes(&self, klen: usize) -> usize {
        REC_HDR
            + klen
            + match self {
                ChangeRef::Put { val, .. } => val.len(),
                ChangeRef::Remove => 0,
            }
    }

    pub fn to_owned(self) -> Change {
        match self {
            ChangeRef::Put { val, overflow } => Change::Put {
                val: val.to_vec(),
                overflow,
            },
            ChangeRef::Remove => Change::Remove,
        }
    }
}

/// The net changes of a node since its base page. Read from a delta block,
/// they stay its record bytes (`raw`), checked once, until the node changes:
/// a read then pays for no map (docs/design.md, "Delta blocks for B+tree
/// pages").
#[derive(Clone, Debug)]
pub struct Changes {
    pub base_pid: u64,
    /// crc32c of the base page's payload: a stale base shows on read.
    pub base_crc: u32,
    /// Unit the delta block is written in.
    pub block_bytes: u32,
    /// The change set once parsed or changed; empty while `raw` is not.
    map: BTreeMap<Vec<u8>, Change>,
    /// Records in key order as a delta block holds them (checked by
    /// `decode`); empty once parsed into `map`.
    raw: Vec<u8>,
    /// Records in `raw` or keys in `map`.
    count: usize,
    /// Encoded record bytes.
    bytes: usize,
}

impl Changes {
    pub fn new(base_pid: u64, base_crc: u32, block_bytes: usize) -> Self {
        assert!(base_pid >= 2 && block_bytes.is_power_of_two());
        Self {
            base_pid,
            base_crc,
            block_bytes: block_bytes as u32,
            map: BTreeMap::new(),
            raw: Vec::new(),
            count: 0,
            bytes: 0,
        }
    }

    /// Encoded bytes of the records (what the threshold bounds).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Changed keys.
    pub fn count_keys(&self) -> usize {
        self.count
    }

    /// Heap bytes, charged with the node.
    pub fn charge_bytes(&self) -> usize {
        self.bytes + self.map.len() * CHARGE_PER_KEY
    }

    /// Parses `raw` into the map (once, when the node first changes).
    fn unpack(&mut self) {
        if self.raw.is_empty() {
            return;
        }
        let raw = std::mem::take(&mut self.raw);
        debug_assert!(self.map.is_empty() && raw.len() == self.bytes);
        for (key, change) in Records::new(&raw) {
            self.map.insert(key.to_vec(), change.to_owned());
        }
        assert_eq!(self.map.len(), self.count, "records checked at decode");
    }

    /// Records `key`'s new state, replacing an earlier change of it.
    pub fn record(&mut self, key: &[u8], change: Change) {
        self.unpack();
        let add = change.as_ref().record_bytes(key.len());
        match self.map.insert(key.to_vec(), change) {
            Some(old) => self.bytes = self.bytes - old.as_ref().record_bytes(key.len()) + add,
            None => self.bytes += add,
        }
        self.count = self.map.len();
        debug_assert_eq!(
            self.bytes,
            self.map
                .iter()
                .map(|(k, c)| c.as_ref().record_bytes(k.len()))
                .sum::<usize>()
        );
    }

    /// Bytes of the page a delta block of these changes occupies when written.
    pub fn block_len(&self, page_size: usize) -> usize {
        let b = self.block_bytes as usize;
        let len = (HDR + DELTA_HDR + self.bytes).div_ceil(b) * b;
        assert!(len <= page_size, "a delta block outgrew its page");
        len
    }

    /// Writes the delta block's payload after the page header; returns the
    /// payload bytes used.
    pub fn encode(&self, page: &mut [u8]) -> usize {
        let mut at = HDR;
        put_u64(page, at + block::BASE_PID.at - HDR, self.base_pid);
        put_u32(page, at + block::BASE_CRC.at - HDR, self.base_crc);
        put_u32(page, at + block::COUNT.at - HDR, self.count as u32);
        put_u32(page, at + block::RECORD_BYTES.at - HDR, self.bytes as u32);
        put_u32(page, at + block::RESERVED.at - HDR, 0);
        at += DELTA_HDR;
        if !self.raw.is_empty() {
            page[at..at + self.raw.len()].copy_from_slice(&self.raw);
            at += self.raw.len();
        }
        for (key, change) in &self.map {
            let (op, val, ovf) = match change {
                Change::Put { val, overflow } => (OP_PUT, &val[..], *overflow),
                Change::Remove => (OP_REMOVE, &[][..], false),
            };
            page[at + record::OP.at] = op;
            put_u16(page, at + record::KEY_LEN.at, key.len() as u16);
            let vlen = val.len() as u32 | if ovf { OVF_BIT } else { 0 };
            put_u32(page, at + record::VALUE_LEN.at, vlen);
            at += REC_HDR;
            page[at..at + key.len()].copy_from_slice(key);
            at += key.len();
            page[at..at + val.len()].copy_from_slice(val);
            at += val.len();
        }
        assert_eq!(at - HDR, DELTA_HDR + self.bytes);
        at - HDR
    }

    /// Checks the records of a delta block payload (`payload` starts at the
    /// base page id) and keeps them unparsed. Every length is checked; keys
    /// must strictly increase.
    pub fn decode(payload: &[u8], page_size: usize) -> Result<Changes, String> {
        if payload.len() < DELTA_HDR {
            return Err(format!("delta block payload of {} bytes", payload.len()));
        }
        let count = get_u32(payload, block::COUNT.at - HDR) as usize;
        let bytes = get_u32(payload, block::RECORD_BYTES.at - HDR) as usize;
        if DELTA_HDR + bytes != payload.len() {
            let what = format!("{bytes} record bytes in a payload of {}", payload.len());
            return Err(what);
        }
        let reserved = get_u32(payload, block::RESERVED.at - HDR);
        if reserved != 0 {
            return Err(format!("reserved field {reserved:#x} is not zero"));
        }
        let base_pid = get_u64(payload, block::BASE_PID.at - HDR);
        if base_pid < 2 {
            return Err(format!("base page {base_pid} is a file header page"));
        }
        let records = &payload[DELTA_HDR..];
        let mut at = 0;
        let mut last: Option<&[u8]> = None;
        for i in 0..count {
            let (key, _, next) = decode_record(records, at)
                .filter(|(_, c, _)| valid_overflow(*c, page_size))
                .ok_or_else(|| format!("record {i} is malformed or runs past the payload"))?;
            if last.is_some_and(|k| k >= key) {
                return Err(format!("record {i} is out of key order"));
            }
            (last, at) = (Some(key), next);
        }
        if at != records.len() {
            return Err(format!("{count} records do not fill {bytes} record bytes"));
        }
        let mut c = Changes::new(
            base_pid,
            get_u32(payload, block::BASE_CRC.at - HDR),
            page_size.min(4096),
        );
        (c.raw, c.count, c.bytes) = (records.to_vec(), count, bytes);
        Ok(c)
    }

    /// The changes in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], ChangeRef<'_>)> {
        let map = self.map.iter().map(|(k, c)| (&k[..], c.as_ref()));
        Records::new(&self.raw).chain(map)
    }
}

/// The records of checked record bytes, in order.
struct Records<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Records<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Records { bytes, at: 0 }
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = (&'a [u8], ChangeRef<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.at == self.bytes.len() {
            return None;
        }
        let (key, change, next) =
            decode_record(self.bytes, self.at).expect("records checked at decode");
        self.at = next;
        Some((key, change))
    }
}

/// One record at `at` of record bytes `p`: (key, change, offset after it),
/// or None if malformed. An overflow put's reference is checked by
/// [`valid_overflow`].
fn decode_record(p: &[u8], at: usize) -> Option<(&[u8], ChangeRef<'_>, usize)> {
    if at + REC_HDR > p.len() {
        return None;
    }
    let op = p[at + record::OP.at];
    let klen = get_u16(p, at + record::KEY_LEN.at) as usize;
    let raw = get_u32(p, at + record::VALUE_LEN.at);
    let (vlen, ovf) = ((raw & !OVF_BIT) as usize, raw & OVF_BIT != 0);
    let k_at = at + REC_HDR;
    let end = k_at.checked_add(klen)?.checked_add(vlen)?;
    if end > p.len() {
        return None;
    }
    let key = &p[k_at..k_at + klen];
    let val = &p[k_at + klen..end];
    let change = match op {
        OP_PUT if !ovf || vlen == OVF_REF => ChangeRef::Put { val, overflow: ovf },
        OP_REMOVE if vlen == 0 && !ovf => ChangeRef::Remove,
        _ => return None,
    };
    Some((key, change, end))
}

/// Whether a put's overflow reference, if it is one, names a valid extent.
fn valid_overflow(change: ChangeRef<'_>, page_size: usize) -> bool {
    match change {
        ChangeRef::Put {
            val,
            overflow: true,
        } => Extent::decode(val, page_size).is_some(),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_roundtrip_and_net_bytes() {
        let mut c = Changes::new(9, 0xabcd, 4096);
        c.record(b"b", Change::Remove);
        c.record(
            b"a",
            Change::Put {
                val: b"xyz".to_vec(),
                overflow: false,
            },
        );
        c.record(
            b"a",
            Change::Put {
                val: b"x".to_vec(),
                overflow: false,
            },
        );
        // Hand count: "a" put of 1 byte = 7 + 1 + 1; "b" remove = 7 + 1.
        assert_eq!(c.bytes(), 9 + 8);
        let mut page = vec![0u8; 4096];
        let used = c.encode(&mut page);
        assert_eq!(used, DELTA_HDR + 17);
        assert_eq!(c.block_len(16384), 4096);
        let d = Changes::decode(&page[HDR..HDR + used], 4096).unwrap();
        assert_eq!((d.base_pid, d.base_crc, d.bytes()), (9, 0xabcd, 17));
        let got: Vec<_> = d.iter().map(|(k, c)| (k.to_vec(), c.to_owned())).collect();
        let want: Vec<_> = c.iter().map(|(k, c)| (k.to_vec(), c.to_owned())).collect();
        assert_eq!(got, want);
        assert_eq!(d.count_keys(), 2);
        // Read back, the records stay raw: they encode to the same bytes, and
        // the first change parses them into the map.
        let mut again = vec![0u8; 4096];
        assert_eq!(d.encode(&mut again), used);
        assert_eq!(again[HDR..HDR + used], page[HDR..HDR + used]);
        let mut d = d;
        d.record(b"c", Change::Remove);
        assert_eq!((d.count_keys(), d.bytes()), (3, 17 + 8));
        let keys: Vec<_> = d.iter().map(|(k, _)| k.to_vec()).collect();
        assert_eq!(keys, [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        // Out-of-order records are an error.
        let mut swapped = page.clone();
        swapped[HDR + DELTA_HDR + REC_HDR] = b'z';
        assert!(Changes::decode(&swapped[HDR..HDR + used], 4096).is_err());
        // A truncated payload is an error, not a panic.
        for cut in 0..used {
            assert!(Changes::decode(&page[HDR..HDR + cut], 4096).is_err());
        }
    }
}
