//! The 32-byte header every page starts with, and its checksum.
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 4 | crc32c of bytes 4..page_size (a delta block: 4..aux) |
//! | 4 | 1 | kind ([`Kind`]) |
//! | 5 | 1 | reserved (0) |
//! | 6 | 2 | entry count (nodes) |
//! | 8 | 8 | page id of this page (catches misdirected writes) |
//! | 16 | 8 | checkpoint generation that wrote the page |
//! | 24 | 4 | payload bytes used after the header |
//! | 28 | 4 | aux: index within an extent (overflow, blob); a delta block's length |

use crate::error::{Error, Result};
use std::path::Path;

pub const HDR: usize = hdr::AUX.end();

/// The page header's fields (docs/design.md, "Page header (all pages, 32
/// bytes)").
#[allow(dead_code)] // every row of its table is named, read or not
pub mod hdr {
    use crate::store::layout::Field;
    pub const CRC: Field = Field::new(0, 4);
    pub const KIND: Field = Field::new(4, 1);
    pub const RESERVED: Field = Field::new(5, 1);
    pub const COUNT: Field = Field::new(6, 2);
    pub const PID: Field = Field::new(8, 8);
    pub const GEN: Field = Field::new(16, 8);
    pub const USED: Field = Field::new(24, 4);
    pub const AUX: Field = Field::new(28, 4);
}

/// The page header's table in docs/design.md.
#[cfg(test)]
pub const HEADER_TABLE: crate::store::layout::Table = crate::store::layout::Table {
    heading: "Page header (all pages, 32 bytes)",
    index: 0,
    rows: &[
        ("crc32c", hdr::CRC),
        ("kind", hdr::KIND),
        ("reserved", hdr::RESERVED),
        ("entry count", hdr::COUNT),
        ("page id", hdr::PID),
        ("checkpoint generation", hdr::GEN),
        ("payload bytes", hdr::USED),
        ("aux", hdr::AUX),
    ],
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Meta = 1,
    Leaf = 2,
    Branch = 3,
    Overflow = 4,
    Blob = 5,
    /// A B+tree node's changes since its base page (docs/design.md, "Delta
    /// blocks for B+tree pages"): only its first `aux` bytes are written.
    Delta = 6,
    /// A page of a B-epsilon node extent.
    BEpsilon = 7,
    /// A B+tree branch whose entries name each child's base page (format
    /// 4, docs/design.md "B+tree node payload").
    BranchBases = 8,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::Meta,
            2 => Kind::Leaf,
            3 => Kind::Branch,
            4 => Kind::Overflow,
            5 => Kind::Blob,
            6 => Kind::Delta,
            7 => Kind::BEpsilon,
            8 => Kind::BranchBases,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Header {
    pub kind: Kind,
    pub count: u16,
    pub gen: u64,
    pub used: u32,
    pub aux: u32,
}

pub fn get_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}
pub fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
pub fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}
pub fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
pub fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
pub fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Writes the header into `page` and seals it with its checksum.
pub fn seal(page: &mut [u8], pid: u64, h: Header) {
    page[hdr::KIND.at] = h.kind as u8;
    page[hdr::RESERVED.at] = 0;
    put_u16(page, hdr::COUNT.at, h.count);
    put_u64(page, hdr::PID.at, pid);
    put_u64(page, hdr::GEN.at, h.gen);
    put_u32(page, hdr::USED.at, h.used);
    put_u32(page, hdr::AUX.at, h.aux);
    let end = sealed_len(page.len(), h.kind as u8, h.aux)
        .expect("a delta block's length is a multiple of 512 inside its page");
    assert!(h.used as usize <= end - HDR);
    let crc = crc32c::crc32c(&page[hdr::KIND.at..end]);
    put_u32(page, hdr::CRC.at, crc);
}

/// The unit a delta block's sealed length (`aux`) is a multiple of.
const DELTA_SEAL_BYTES: usize = 512;

/// The `aux` a delta block of `used` payload bytes is sealed with: its
/// header and payload rounded up to [`DELTA_SEAL_BYTES`] (docs/design.md,
/// "Delta blocks for B+tree pages"); it may be written in larger blocks.
pub fn delta_aux(used: u32) -> u32 {
    (HDR + used as usize).next_multiple_of(DELTA_SEAL_BYTES) as u32
}

/// Bytes of a page covered by its checksum: the whole page, or a delta
/// block's length (`aux`), which must be a multiple of
/// [`DELTA_SEAL_BYTES`] inside the page; None if it is not.
fn sealed_len(page_len: usize, kind: u8, aux: u32) -> Option<usize> {
    if kind != Kind::Delta as u8 {
        return Some(page_len);
    }
    let len = aux as usize;
    (len.is_multiple_of(DELTA_SEAL_BYTES) && (HDR..=page_len).contains(&len)).then_some(len)
}

/// Checks the checksum, the page id and the kind of a page just read.
pub fn verify(page: &[u8], pid: u64, want: &[Kind], path: &Path, offset: u64) -> Result<Header> {
    let end = checked_len(page);
    let computed = crc32c::crc32c(&page[hdr::KIND.at..end]);
    check(page, pid, want, (path, offset), end, computed)
}

/// [`verify`], also returning the crc32c of the page's payload (what a delta
/// block on it names) from the same pass (`crc::combine`).
pub fn verify_base(
    page: &[u8],
    pid: u64,
    want: &[Kind],
    path: &Path,
    offset: u64,
) -> Result<(Header, u32)> {
    let end = checked_len(page);
    // An unverified length past the end cannot match: checksum error.
    let used_end = HDR + (get_u32(page, hdr::USED.at) as usize).min(end - HDR);
    let payload_crc = crc32c::crc32c(&page[HDR..used_end]);
    let head = crc32c::crc32c(&page[4..HDR]);
    let through_payload = super::crc::combine(head, payload_crc, used_end - HDR);
    let computed = crc32c::crc32c_append(through_payload, &page[used_end..end]);
    let h = check(page, pid, want, (path, offset), end, computed)?;
    assert_eq!(HDR + h.used as usize, used_end);
    Ok((h, payload_crc))
}

/// Bytes 4..end are covered by the checksum; an unverified delta length
/// that is impossible cannot match: checksum error.
fn checked_len(page: &[u8]) -> usize {
    assert!(page.len() >= HDR);
    sealed_len(page.len(), page[hdr::KIND.at], get_u32(page, hdr::AUX.at)).unwrap_or(page.len())
}

/// What a page read as one of `want` is, for messages.
fn structure_of(want: &[Kind]) -> &'static str {
    match want.first() {
        Some(Kind::Meta) => "superblock",
        Some(Kind::Blob) => "catalog",
        Some(Kind::Overflow) => "overflow",
        Some(Kind::BEpsilon) => "B-epsilon node",
        Some(Kind::Leaf | Kind::Branch | Kind::Delta | Kind::BranchBases) => "B+tree node",
        None => "unknown",
    }
}

/// Recomputes the checksum of a page whatever its fields hold, so a fuzzer's
/// mutations reach the checks behind it.
#[cfg(any(test, feature = "fuzzing"))]
pub fn reseal_any(page: &mut [u8]) {
    let end = checked_len(page);
    let crc = crc32c::crc32c(&page[hdr::KIND.at..end]);
    put_u32(page, hdr::CRC.at, crc);
}

/// Checks a page whose checksummed bytes 4..end have crc `computed`.
fn check(
    page: &[u8],
    pid: u64,
    want: &[Kind],
    (path, offset): (&Path, u64),
    end: usize,
    computed: u32,
) -> Result<Header> {
    let stored = get_u32(page, hdr::CRC.at);
    if stored != computed {
        return Err(Error::Checksum {
            path: path.to_path_buf(),
            structure: structure_of(want),
            page: pid,
            offset,
            stored,
            computed,
        });
    }
    let corrupt = |what: String| Error::Corrupt {
        path: path.to_path_buf(),
        page: pid,
        offset,
        what,
    };
    let found = get_u64(page, hdr::PID.at);
    if found != pid {
        return Err(corrupt(format!(
            "holds page {found} (a misdirected write or a stale pointer)"
        )));
    }
    let kind = Kind::from_u8(page[4])
        .filter(|k| want.contains(k))
        .ok_or_else(|| {
            corrupt(format!(
                "unexpected page kind {} (wanted {want:?})",
                page[4]
            ))
        })?;
    let aux = get_u32(page, hdr::AUX.at);
    if sealed_len(page.len(), kind as u8, aux).is_none() {
        // The checksum covered the whole page: still no delta block.
        return Err(corrupt(format!(
            "delta block length {aux} is not a multiple of {DELTA_SEAL_BYTES} inside the page"
        )));
    }
    let used = get_u32(page, hdr::USED.at);
    if used as usize > end - HDR {
        return Err(corrupt(format!("payload length {used} exceeds the page")));
    }
    Ok(Header {
        kind,
        count: get_u16(page, hdr::COUNT.at),
        gen: get_u64(page, hdr::GEN.at),
        used,
        aux,
    })
}
