//! A B+tree node's changes since its base page, and the delta block that
//! holds them (docs/design.md, "Delta blocks for B+tree pages": the block
//! table, the net change set per key, the branch-as-map convention).

use super::node::{Node, OVF_REF};
use crate::store::extent::Extent;
use crate::store::image::{DeltaPages, Image};
use crate::store::page::{get_u16, get_u32, get_u64, put_u16, put_u32, put_u64, HDR};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Bytes of the delta block's fixed part after the page header.
pub const DELTA_HDR: usize = 24;
/// Bytes of a record before its key and value.
pub const REC_HDR: usize = 7;
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

impl Change {
    fn record_bytes(&self, klen: usize) -> usize {
        REC_HDR
            + klen
            + match self {
                Change::Put { val, .. } => val.len(),
                Change::Remove => 0,
            }
    }
}

/// The net changes of a node since its base page.
#[derive(Clone, Debug)]
pub struct Changes {
    pub base_pid: u64,
    /// crc32c of the base page's payload: a stale base shows on read.
    pub base_crc: u32,
    /// Unit the delta block is written in.
    pub block_bytes: u32,
    map: BTreeMap<Vec<u8>, Change>,
    /// Encoded record bytes of `map`.
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
            bytes: 0,
        }
    }

    /// Encoded bytes of the records (what the threshold bounds).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Heap bytes, charged with the node.
    pub fn charge_bytes(&self) -> usize {
        self.bytes + self.map.len() * CHARGE_PER_KEY
    }

    /// Records `key`'s new state, replacing an earlier change of it.
    pub fn record(&mut self, key: &[u8], change: Change) {
        let add = change.record_bytes(key.len());
        match self.map.insert(key.to_vec(), change) {
            Some(old) => self.bytes = self.bytes - old.record_bytes(key.len()) + add,
            None => self.bytes += add,
        }
        debug_assert_eq!(
            self.bytes,
            self.map
                .iter()
                .map(|(k, c)| c.record_bytes(k.len()))
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
        put_u64(page, at, self.base_pid);
        put_u32(page, at + 8, self.base_crc);
        put_u32(page, at + 12, self.map.len() as u32);
        put_u32(page, at + 16, self.bytes as u32);
        put_u32(page, at + 20, 0);
        at += DELTA_HDR;
        for (key, change) in &self.map {
            let (op, val, ovf) = match change {
                Change::Put { val, overflow } => (OP_PUT, &val[..], *overflow),
                Change::Remove => (OP_REMOVE, &[][..], false),
            };
            page[at] = op;
            put_u16(page, at + 1, key.len() as u16);
            put_u32(
                page,
                at + 3,
                val.len() as u32 | if ovf { OVF_BIT } else { 0 },
            );
            at += REC_HDR;
            page[at..at + key.len()].copy_from_slice(key);
            at += key.len();
            page[at..at + val.len()].copy_from_slice(val);
            at += val.len();
        }
        assert_eq!(at - HDR, DELTA_HDR + self.bytes);
        at - HDR
    }

    /// Parses the records of a delta block payload (`payload` starts at the
    /// base page id). Every length is checked; keys must strictly increase.
    pub fn decode(payload: &[u8], page_size: usize) -> Result<Changes, String> {
        if payload.len() < DELTA_HDR {
            return Err(format!("delta block payload of {} bytes", payload.len()));
        }
        let count = get_u32(payload, 12) as usize;
        let bytes = get_u32(payload, 16) as usize;
        if DELTA_HDR + bytes != payload.len() {
            let what = format!("{bytes} record bytes in a payload of {}", payload.len());
            return Err(what);
        }
        let mut c = Changes::new(
            get_u64(payload, 0),
            get_u32(payload, 8),
            page_size.min(4096),
        );
        let mut at = DELTA_HDR;
        for i in 0..count {
            let (key, change, next) = decode_record(payload, at, page_size)
                .ok_or_else(|| format!("record {i} is malformed or runs past the payload"))?;
            if c.map.last_key_value().is_some_and(|(k, _)| &k[..] >= key) {
                return Err(format!("record {i} is out of key order"));
            }
            c.record(key, change);
            at = next;
        }
        if at != payload.len() || c.bytes != bytes {
            return Err(format!("{count} records do not fill {bytes} record bytes"));
        }
        Ok(c)
    }

    /// The changes in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Change)> {
        self.map.iter().map(|(k, c)| (&k[..], c))
    }
}

/// One record at `at`: (key, change, offset after it), or None if malformed.
fn decode_record(p: &[u8], at: usize, page_size: usize) -> Option<(&[u8], Change, usize)> {
    if at + REC_HDR > p.len() {
        return None;
    }
    let op = p[at];
    let klen = get_u16(p, at + 1) as usize;
    let raw = get_u32(p, at + 3);
    let (vlen, ovf) = ((raw & !OVF_BIT) as usize, raw & OVF_BIT != 0);
    let k_at = at + REC_HDR;
    let end = k_at.checked_add(klen)?.checked_add(vlen)?;
    if end > p.len() {
        return None;
    }
    let key = &p[k_at..k_at + klen];
    let val = &p[k_at + klen..end];
    let change = match op {
        OP_PUT if !ovf || (vlen == OVF_REF && Extent::decode(val, page_size).is_some()) => {
            Change::Put {
                val: val.to_vec(),
                overflow: ovf,
            }
        }
        OP_REMOVE if vlen == 0 && !ovf => Change::Remove,
        _ => return None,
    };
    Some((key, change, end))
}

/// Rebuilds a node from its base page and delta block (the store verified
/// both pages' checksums and ids): checks the base crc, decodes the base,
/// applies the records, and checks the result's entry count and size.
pub fn apply_delta(d: &DeltaPages) -> Result<Image, String> {
    let changes = Changes::decode(d.payload, d.page_size)?;
    let crc = crc32c::crc32c(d.base_payload);
    if crc != changes.base_crc {
        return Err(format!(
            "the base's payload crc32c is {crc:#010x}, the delta expects {:#010x} \
             (a stale delta or a reused base page)",
            changes.base_crc
        ));
    }
    let mut node = Node::decode(d.base_payload, d.base_kind, d.base_count, d.page_size)
        .map_err(|e| format!("base page: {e}"))?;
    node.replay(&changes)?;
    if node.len() != d.count {
        return Err(format!(
            "{} entries after replay, the delta says {}",
            node.len(),
            d.count
        ));
    }
    node.set_changes(Some(changes));
    Ok(Arc::new(node))
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
        let got: Vec<_> = d.iter().map(|(k, c)| (k.to_vec(), c.clone())).collect();
        let want: Vec<_> = c.iter().map(|(k, c)| (k.to_vec(), c.clone())).collect();
        assert_eq!(got, want);
        // A truncated payload is an error, not a panic.
        for cut in 0..used {
            assert!(Changes::decode(&page[HDR..HDR + cut], 4096).is_err());
        }
    }
}
