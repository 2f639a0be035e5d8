//! The snapshot byte format: what a leader sends and a follower installs.
//!
//! | part | layout |
//! | --- | --- |
//! | magic | `PWRSNAP1` (8 bytes) |
//! | meta | `len u32 LE` + openraft's `SnapshotMeta` as JSON |
//! | count | `u64 LE`: number of pairs |
//! | pairs | each `key len u32 LE, key, value len u32 LE, value`, in key order |
//! | check | crc32c of everything before, `u32 LE` |

use crate::{NodeId, TypeConfig};
use openraft::{BasicNode, SnapshotMeta};

const MAGIC: &[u8; 8] = b"PWRSNAP1";

pub type Meta = SnapshotMeta<NodeId, BasicNode>;

/// Builds snapshot bytes from `meta` and the pairs in key order.
pub struct Writer {
    buf: Vec<u8>,
    count: u64,
    count_at: usize,
}

impl Writer {
    pub fn new(meta: &Meta) -> Writer {
        let mut buf = MAGIC.to_vec();
        let m = crate::codec::encode(meta);
        buf.extend_from_slice(&(m.len() as u32).to_le_bytes());
        buf.extend_from_slice(&m);
        let count_at = buf.len();
        buf.extend_from_slice(&0u64.to_le_bytes());
        Writer {
            buf,
            count: 0,
            count_at,
        }
    }

    pub fn pair(&mut self, key: &[u8], value: &[u8]) {
        for part in [key, value] {
            self.buf
                .extend_from_slice(&(part.len() as u32).to_le_bytes());
            self.buf.extend_from_slice(part);
        }
        self.count += 1;
    }

    pub fn finish(mut self) -> Vec<u8> {
        let at = self.count_at;
        self.buf[at..at + 8].copy_from_slice(&self.count.to_le_bytes());
        let crc = crc32c::crc32c(&self.buf);
        self.buf.extend_from_slice(&crc.to_le_bytes());
        self.buf
    }
}

/// A decoded snapshot.
pub struct Decoded {
    pub meta: Meta,
    pub pairs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Checks and decodes snapshot bytes; an error names what is wrong (never
/// a panic on bad input).
pub fn decode(bytes: &[u8]) -> Result<Decoded, String> {
    if bytes.len() < MAGIC.len() + 4 + 8 + 4 || &bytes[..8] != MAGIC {
        return Err("not a pagewise Raft snapshot (bad magic or too short)".into());
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    if crc32c::crc32c(body) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
        return Err("snapshot checksum mismatch: damaged in transfer or storage".into());
    }
    let mut r = Reader { b: body, at: 8 };
    let meta_bytes = r.part()?;
    let meta: Meta = crate::codec::decode(meta_bytes, "snapshot meta")?;
    let count = u64::from_le_bytes(r.take(8)?.try_into().expect("8 bytes"));
    let mut pairs = Vec::new();
    for _ in 0..count {
        let k = r.part()?.to_vec();
        let v = r.part()?.to_vec();
        pairs.push((k, v));
    }
    if r.at != body.len() {
        return Err(format!("{} bytes after the last pair", body.len() - r.at));
    }
    Ok(Decoded { meta, pairs })
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.b.len() - self.at < n {
            return Err(format!("snapshot truncated at byte {}", self.at));
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn part(&mut self) -> Result<&'a [u8], String> {
        let len = u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes"));
        self.take(len as usize)
    }
}

/// openraft's snapshot handle for `bytes`.
pub fn handle(meta: Meta, bytes: Vec<u8>) -> openraft::Snapshot<TypeConfig> {
    openraft::Snapshot {
        meta,
        snapshot: Box::new(std::io::Cursor::new(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut w = Writer::new(&Meta::default());
        w.pair(b"a", b"1");
        w.pair(b"b", b"");
        w.finish()
    }

    #[test]
    fn round_trip() {
        let d = decode(&sample()).unwrap();
        assert_eq!(d.meta, Meta::default());
        assert_eq!(
            d.pairs,
            vec![(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), vec![])]
        );
    }

    #[test]
    fn every_truncation_and_bit_flip_is_refused() {
        let s = sample();
        for n in 0..s.len() {
            assert!(decode(&s[..n]).is_err(), "truncated to {n}");
        }
        for i in 0..s.len() {
            let mut d = s.clone();
            d[i] ^= 0x10;
            assert!(decode(&d).is_err(), "flip at {i}");
        }
    }
}
