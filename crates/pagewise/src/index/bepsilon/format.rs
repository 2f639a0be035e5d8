//! A node's stored bytes: header, partition directory, pivots, child
//! references, then the compressed partitions (docs/design.md, "B-epsilon
//! nodes": node header, partition directory, message entry, basement).
//! Decoders return what is wrong as a string; the caller names the node's
//! first page and wraps it as `Error::Corrupt`.

use super::buffer::{read_message, Buffer};
use super::filter::{self, Filter};
use super::layout::{dir, header};
use super::node::{DirEntry, Node, Part, DIR_ENTRY_BYTES, HEADER_BYTES};
use super::pivots::Pivots;
use super::segment::{self, Segment};
use super::{Child, Compression, MAX_HEIGHT, MAX_KEY_BYTES};
use crate::store::extent::{Extent, EXTENT_REF_BYTES};
use crate::store::page::{get_u16, get_u32, put_u16, put_u32, put_u64};
use crate::structure;
use std::borrow::Cow;
use std::sync::Arc;

pub const MAGIC: &[u8; 4] = b"PWBE";
/// Most raw (decompressed) bytes a stored node's partitions may claim:
/// four times the largest node bytes an option accepts, far above what a
/// node is written with, so a damaged directory cannot make a decoder
/// allocate gigabytes.
pub const MAX_RAW_NODE_BYTES: u64 = 4 * super::MAX_NODE_BYTES as u64;
const TYPE_INTERNAL: u8 = 1;
const TYPE_LEAF: u8 = 2;

/// Encodes `node`, cutting its partitions (buffers or basements) of at
/// least twice `segment_bytes` into segments (0: none; docs/design.md,
/// segments; `segment::target_bytes` gives a tree's). Requires: every
/// partition loaded and every child placed.
/// Memory: the output plus one partition's raw and compressed bytes at a
/// time (each partition is appended as soon as it is compressed), so a
/// placing thread holds about one node's bytes, not three
/// (docs/benchmarks.md, "Memory").
pub fn encode(node: &Node, comp: Compression, level: u8, segment_bytes: usize) -> Vec<u8> {
    assert!(node.all_loaded() && node.parts.len() <= u16::MAX as usize);
    let filters = build_filters(node);
    let mut plans = plan_segments(node, segment_bytes);
    let filter_bytes: usize = filters.iter().map(|f| f.bytes().len()).sum();
    let shell = node.shell_bytes() + filter_bytes + segment::area_bytes(&plans);
    let mut out = vec![0u8; shell];
    // At most the raw bytes (a partition that does not shrink is stored as is).
    out.reserve(node.parts.iter().flatten().map(|p| p.bytes()).sum());
    let (mut max_seq, mut raw_total_bytes) = (0, 0u64);
    for (i, p) in node.parts.iter().enumerate() {
        let p = p.as_deref().expect("loaded");
        let (raw, seq) = encode_part(p);
        max_seq = max_seq.max(seq);
        raw_total_bytes += raw.len() as u64;
        let at = out.len();
        store_part(&raw, &mut plans[i], (comp, level), &mut out);
        let d = HEADER_BYTES + i * DIR_ENTRY_BYTES;
        put_u32(&mut out, d + dir::OFFSET.at, at as u32);
        let stored_bytes = out.len() - at;
        put_u32(&mut out, d + dir::STORED_BYTES.at, stored_bytes as u32);
        put_u32(&mut out, d + dir::RAW_BYTES.at, raw.len() as u32);
        let crc = crc32c::crc32c(&out[at..]);
        put_u32(&mut out, d + dir::CRC.at, crc);
        put_u32(&mut out, d + dir::ENTRIES.at, p.entries() as u32);
        let f = filters.get(i).map_or(0, |f| f.bytes().len());
        put_u32(&mut out, d + dir::FILTER_BYTES.at, f as u32);
    }
    encode_header(node, comp, &mut out, shell, (max_seq, raw_total_bytes));
    encode_shell_rest(node, (&filters, &plans), &mut out, shell);
    out
}

/// Where each partition is cut (empty lists: partitions stored whole).
fn plan_segments(node: &Node, segment_bytes: usize) -> Vec<Vec<Segment>> {
    let plans: Vec<Vec<Segment>> = node
        .parts
        .iter()
        .map(|p| match p.as_deref() {
            Some(Part::Buf(b)) => segment::plan(b, segment_bytes),
            Some(Part::Packed(b)) => segment::plan_basement(b, segment_bytes),
            None => unreachable!("encode requires every partition loaded"),
        })
        .collect();
    assert_eq!(plans.len(), node.parts.len());
    plans
}

/// Appends partition `raw` to `out` as stored: whole, or one segment at a
/// time as `segs` cuts it (filling in each segment's stored bytes and
/// checksum).
fn store_part(raw: &[u8], segs: &mut [Segment], comp: (Compression, u8), out: &mut Vec<u8>) {
    if segs.is_empty() {
        out.extend_from_slice(&compress(raw, comp.0, comp.1));
        return;
    }
    let mut r = 0;
    for s in segs.iter_mut() {
        let c = compress(&raw[r..r + s.raw_bytes as usize], comp.0, comp.1);
        (s.stored_bytes, s.crc) = (c.len() as u32, crc32c::crc32c(&c));
        out.extend_from_slice(&c);
        r += s.raw_bytes as usize;
    }
    assert_eq!(r, raw.len(), "segments cover the buffer");
}

/// Writes the node header into `out[..HEADER_BYTES]`.
fn encode_header(
    node: &Node,
    comp: Compression,
    out: &mut [u8],
    shell: usize,
    seq_raw: (u64, u64),
) {
    assert!(out.len() >= shell && shell >= HEADER_BYTES);
    out[header::MAGIC.at..header::MAGIC.end()].copy_from_slice(MAGIC);
    out[header::TYPE.at] = if node.is_leaf() {
        TYPE_LEAF
    } else {
        TYPE_INTERNAL
    };
    out[header::COMPRESSION.at] = comp.code();
    put_u16(out, header::PARTS.at, node.parts.len() as u16);
    put_u32(out, header::HEIGHT.at, node.height);
    put_u32(out, header::SHELL_BYTES.at, shell as u32);
    put_u64(out, header::MAX_SEQ.at, seq_raw.0);
    put_u64(out, header::RAW_BYTES.at, seq_raw.1);
}

/// Writes the pivots, child references, filters and segment area after the
/// directory, and the filters' and segments' checksums into the header.
fn encode_shell_rest(
    node: &Node,
    (filters, plans): (&[Filter], &[Vec<Segment>]),
    out: &mut [u8],
    shell: usize,
) {
    let mut w = HEADER_BYTES + node.parts.len() * DIR_ENTRY_BYTES;
    for p in node.pivots.iter() {
        put_u16(out, w, p.len() as u16);
        out[w + 2..w + 2 + p.len()].copy_from_slice(p);
        w += 2 + p.len();
    }
    for c in &node.children {
        let Child::Clean(e) = c else {
            panic!("child {c:?} encoded before it was placed")
        };
        e.encode(&mut out[w..w + EXTENT_REF_BYTES]);
        w += EXTENT_REF_BYTES;
    }
    let area = w;
    for f in filters {
        out[w..w + f.bytes().len()].copy_from_slice(f.bytes());
        w += f.bytes().len();
    }
    if !filters.is_empty() {
        out[header::PROBES.at] = filter::PROBES;
        let crc = crc32c::crc32c(&out[area..w]);
        put_u32(out, header::FILTER_CRC.at, crc);
    }
    let seg_bytes = segment::area_bytes(plans);
    if seg_bytes > 0 {
        let crc = segment::encode_area(plans, &mut out[w..w + seg_bytes]);
        put_u32(out, header::SEGMENT_AREA_BYTES.at, seg_bytes as u32);
        put_u32(out, header::SEGMENT_AREA_CRC.at, crc);
        w += seg_bytes;
    }
    assert_eq!(w, shell);
}

/// The key filter of each buffer of an internal node (none for leaves).
fn build_filters(node: &Node) -> Vec<Filter> {
    if node.is_leaf() {
        return Vec::new();
    }
    let filters: Vec<Filter> = node
        .parts
        .iter()
        .map(|p| match p.as_deref() {
            Some(Part::Buf(b)) => {
                let keys: Vec<&[u8]> = b.keys().collect();
                Filter::build(keys.into_iter(), filter::PROBES)
            }
            _ => panic!("internal node partition is not a loaded buffer"),
        })
        .collect();
    assert_eq!(filters.len(), node.parts.len());
    filters
}

/// The partition's raw bytes and its highest sequence number.
fn encode_part(p: &Part) -> (Vec<u8>, u64) {
    let mut out = Vec::with_capacity(p.bytes());
    let mut max_seq = 0;
    match p {
        Part::Packed(p) => out.extend_from_slice(p.raw()),
        Part::Buf(b) => {
            b.encode_into(&mut out);
            max_seq = b.max_seq();
        }
    }
    debug_assert_eq!(out.len(), p.bytes());
    (out, max_seq)
}

/// Bytes of the probe that decides whether a partition is worth compressing.
const PROBE_BYTES: usize = 4096;

/// The stored form of partition `raw`: compressed, or `raw` itself when a
/// probe of its first [`PROBE_BYTES`] shrinks by under 1/16 or the whole
/// does not shrink (docs/design.md, partition directory: stored bytes equal
/// to the uncompressed bytes mean stored as is).
fn compress(raw: &[u8], comp: Compression, level: u8) -> Cow<'_, [u8]> {
    let squeeze = |b: &[u8]| match comp {
        Compression::None => b.to_vec(),
        Compression::Lz4 => lz4_flex::block::compress(b),
        Compression::Zstd => {
            zstd::bulk::compress(b, level as i32).expect("zstd compresses any input")
        }
    };
    if comp == Compression::None {
        return Cow::Borrowed(raw);
    }
    if raw.len() > 2 * PROBE_BYTES {
        let probe = squeeze(&raw[..PROBE_BYTES]);
        if probe.len() > PROBE_BYTES - PROBE_BYTES / 16 {
            return Cow::Borrowed(raw);
        }
    }
    let c = squeeze(raw);
    if c.len() >= raw.len() {
        return Cow::Borrowed(raw);
    }
    assert!(c.len() < raw.len());
    Cow::Owned(c)
}

/// A partition's raw bytes from its stored bytes `c`: `c` itself when it
/// was stored as is (no copy when the caller hands it over).
fn decompress(c: Cow<'_, [u8]>, comp: Compression, raw_bytes: usize) -> Result<Vec<u8>, String> {
    if c.len() == raw_bytes {
        return Ok(c.into_owned()); // stored as is
    }
    if comp == Compression::None {
        return Err(format!(
            "{} bytes stored uncompressed, expected {raw_bytes}",
            c.len()
        ));
    }
    let mut out = vec![0; raw_bytes];
    decompress_into(&c, comp, &mut out)?;
    Ok(out)
}

/// Decompresses `c` into all of `out` (its length is the raw length).
fn decompress_into(c: &[u8], comp: Compression, out: &mut [u8]) -> Result<(), String> {
    let n = match comp {
        Compression::None => c.len(), // not stored as is: of another size, refused below
        Compression::Lz4 => lz4_flex::block::decompress_into(c, out).map_err(|e| e.to_string())?,
        Compression::Zstd => zstd::bulk::decompress_to_buffer(c, out).map_err(|e| e.to_string())?,
    };
    if n != out.len() {
        return Err(format!(
            "{n} bytes after decompression, expected {}",
            out.len()
        ));
    }
    Ok(())
}

/// Bytes of header + directory + pivots + references, from the header
/// (at least `HEADER_BYTES` of `b`).
pub fn shell_len(b: &[u8]) -> Result<usize, String> {
    if b.len() < HEADER_BYTES || &b[..4] != MAGIC {
        return Err("not a B-epsilon node (bad magic)".into());
    }
    Ok(get_u32(b, header::SHELL_BYTES.at) as usize)
}

/// The shell of a stored node of `len_bytes` (no partition loaded).
/// Requires: `b` holds at least `shell_len(b)` bytes.
pub fn decode_shell(b: &[u8], len_bytes: u64, page_size: usize) -> Result<Node, String> {
    let shell = shell_len(b)?;
    let (ty, count, height) = (
        b[header::TYPE.at],
        get_u16(b, header::PARTS.at) as usize,
        get_u32(b, header::HEIGHT.at),
    );
    let comp = b[header::COMPRESSION.at];
    Compression::from_code(comp).ok_or_else(|| format!("unknown compression {comp}"))?;
    let leaf = ty == TYPE_LEAF;
    if !(ty == TYPE_LEAF || ty == TYPE_INTERNAL) || leaf != (height == 0) || height > MAX_HEIGHT {
        return Err(format!("node type {ty} at height {height}"));
    }
    if count == 0 || shell > b.len() || shell as u64 > len_bytes {
        return Err(format!("{count} partitions in a shell of {shell} bytes"));
    }
    let (mut dir, filter_lens) = decode_dir(b, count, shell, len_bytes)?;
    let mut r = HEADER_BYTES + count * DIR_ENTRY_BYTES;
    let mut pivots = Pivots::new();
    for _ in 1..count {
        let k = get_u16(b.get(r..r + 2).ok_or("pivots overrun the shell")?, 0) as usize;
        let key = b.get(r + 2..r + 2 + k).ok_or("pivot overruns the shell")?;
        if pivots.last().is_some_and(|l| l >= key) || k > MAX_KEY_BYTES {
            return Err("pivots are not strictly increasing".into());
        }
        pivots.push(key);
        r += 2 + k;
    }
    let mut children = Vec::new();
    for _ in 0..if leaf { 0 } else { count } {
        let ref_bytes = b
            .get(r..r + EXTENT_REF_BYTES)
            .ok_or("child references overrun")?;
        let e = Extent::decode(ref_bytes, page_size).ok_or("child extent out of range")?;
        children.push(Child::Clean(e));
        r += EXTENT_REF_BYTES;
    }
    r += decode_filters(&b[..shell], r, leaf, &mut dir, &filter_lens)?;
    let (seg_bytes, segs) = decode_segments(&b[..shell], r, &dir)?;
    r += seg_bytes;
    if r != shell {
        return Err(format!("shell holds {r} bytes, header says {shell}"));
    }
    Ok(Node {
        height,
        pivots,
        children,
        parts: vec![None; count],
        part_bytes: dir.iter().map(|d| d.raw_bytes as usize).collect(),
        dir: dir.into(),
        segs: segs.map(Arc::new),
        comp: b[header::COMPRESSION.at],
        uses: super::node::UseMarks::default(),
    })
}

/// The partition directory (filters not yet attached) and each entry's
/// filter bytes.
fn decode_dir(
    b: &[u8],
    count: usize,
    shell: usize,
    len_bytes: u64,
) -> Result<(Vec<DirEntry>, Vec<u32>), String> {
    let mut dir = Vec::with_capacity(count);
    let mut filter_lens = Vec::with_capacity(count);
    let mut raw_total_bytes = 0u64;
    for i in 0..count {
        let d = HEADER_BYTES + i * DIR_ENTRY_BYTES;
        if d + DIR_ENTRY_BYTES > shell {
            return Err("directory overruns the shell".into());
        }
        let e = DirEntry {
            offset: get_u32(b, d + dir::OFFSET.at),
            comp_bytes: get_u32(b, d + dir::STORED_BYTES.at),
            raw_bytes: get_u32(b, d + dir::RAW_BYTES.at),
            crc: get_u32(b, d + dir::CRC.at),
            entries: get_u32(b, d + dir::ENTRIES.at),
            filter: None,
        };
        if (e.offset as usize) < shell || e.offset as u64 + e.comp_bytes as u64 > len_bytes {
            return Err(format!(
                "partition {i} at {}+{} lies outside the node",
                e.offset, e.comp_bytes
            ));
        }
        raw_total_bytes += e.raw_bytes as u64;
        if raw_total_bytes > MAX_RAW_NODE_BYTES {
            return Err(format!(
                "partitions of more than {MAX_RAW_NODE_BYTES} raw bytes in one node"
            ));
        }
        dir.push(e);
        filter_lens.push(get_u32(b, d + dir::FILTER_BYTES.at));
    }
    assert_eq!(dir.len(), filter_lens.len());
    Ok((dir, filter_lens))
}

/// Attaches the buffer filters stored at `at` of `shell` (the shell's bytes)
/// to `dir`, verified (docs/design.md, buffer key filters); returns the
/// filter area's bytes.
fn decode_filters(
    shell: &[u8],
    at: usize,
    leaf: bool,
    dir: &mut [DirEntry],
    lens: &[u32],
) -> Result<usize, String> {
    let (probes, stored_crc) = (
        shell[header::PROBES.at],
        get_u32(shell, header::FILTER_CRC.at),
    );
    let total: u64 = lens.iter().map(|&l| l as u64).sum();
    if probes == 0 {
        if total != 0 || stored_crc != 0 {
            return Err(format!("{total} filter bytes without filter probes"));
        }
        return Ok(0);
    }
    if leaf || probes > filter::MAX_PROBES {
        let max = filter::MAX_PROBES;
        let what = if leaf { "a leaf" } else { "an internal node" };
        return Err(format!(
            "{probes} filter probes in {what} (filters: internal nodes, 1-{max})"
        ));
    }
    let area = shell
        .get(at..)
        .filter(|a| a.len() as u64 >= total)
        .ok_or_else(|| format!("filters of {total} bytes overrun the shell"))?;
    let area = &area[..total as usize];
    let crc = crc32c::crc32c(area);
    if crc != stored_crc {
        return Err(format!(
            "filter checksum {crc:#010x}, stored {stored_crc:#010x}"
        ));
    }
    let mut r = 0;
    for (i, (d, &len)) in dir.iter_mut().zip(lens).enumerate() {
        if d.entries > 0 && len == 0 {
            return Err(format!(
                "partition {i}: {} messages and no filter",
                d.entries
            ));
        }
        d.filter = Some(Filter::from_stored(probes, &area[r..r + len as usize]));
        r += len as usize;
    }
    assert_eq!(r, area.len());
    Ok(area.len())
}

/// The segment lists stored at `at` of `shell` (the shell's bytes) for
/// `dir`, verified (docs/design.md, segments), and the segment
/// area's bytes (0 and None without one).
fn decode_segments(
    shell: &[u8],
    at: usize,
    dir: &[DirEntry],
) -> Result<(usize, Option<segment::Table>), String> {
    let (len, crc) = (
        get_u32(shell, header::SEGMENT_AREA_BYTES.at) as usize,
        get_u32(shell, header::SEGMENT_AREA_CRC.at),
    );
    if len == 0 {
        return match crc {
            0 => Ok((0, None)),
            _ => Err(format!(
                "segment checksum {crc:#010x} without a segment area"
            )),
        };
    }
    let area = shell
        .get(at..at + len)
        .ok_or_else(|| format!("segment area of {len} bytes overruns the shell"))?;
    Ok((len, Some(segment::decode_area(area, crc, dir)?)))
}

/// Partition `i`'s raw bytes from its stored (compressed) bytes `c`, after
/// checking their length and crc32c against the directory entry; a
/// segmented buffer is decompressed one segment at a time.
fn stored_part(node: &Node, i: usize, c: Cow<'_, [u8]>) -> Result<Vec<u8>, String> {
    let (d, segs) = (&node.dir[i], segment::of(node.segs.as_deref(), i));
    let comp = check_stored(node, i, &c)?;
    if segs.is_empty() || c.len() == d.raw_bytes as usize {
        return decompress(c, comp, d.raw_bytes as usize);
    }
    let mut out = vec![0; d.raw_bytes as usize];
    let (mut r, mut w) = (0usize, 0usize);
    for j in 0..segs.len() {
        let s = segs.get(j);
        let (stored, raw) = (&c[r..r + s.stored_bytes as usize], s.raw_bytes as usize);
        let dst = &mut out[w..w + raw];
        if stored.len() == raw {
            dst.copy_from_slice(stored); // stored as is
        } else {
            decompress_into(stored, comp, dst).map_err(|e| format!("segment {j}: {e}"))?;
        }
        (r, w) = (r + stored.len(), w + raw);
    }
    assert!(
        r == c.len() && w == out.len(),
        "the list's sums were checked"
    );
    Ok(out)
}

/// Checks partition `i`'s stored bytes `c` against its directory entry
/// (checksum and length); returns the node's compression.
fn check_stored(node: &Node, i: usize, c: &[u8]) -> Result<Compression, String> {
    let d = &node.dir[i];
    check_crc(c, d.crc, d.comp_bytes)?;
    Ok(Compression::from_code(node.comp).ok_or("unknown compression")?)
}

/// Whether stored bytes `c` have length `len` and crc32c `crc`.
fn check_crc(c: &[u8], crc: u32, len: u32) -> Result<(), String> {
    let got = crc32c::crc32c(c);
    if got != crc || c.len() != len as usize {
        return Err(format!("checksum {got:#010x}, stored {crc:#010x}"));
    }
    Ok(())
}

/// Partition `i` of `node` from its stored (compressed) bytes `c`.
pub fn decode_part(node: &Node, i: usize, c: Cow<'_, [u8]>) -> Result<Part, String> {
    let d = &node.dir[i];
    let raw = stored_part(node, i, c)?;
    let lo = if i == 0 {
        None
    } else {
        Some(&node.pivots[i - 1])
    };
    let hi = node.pivots.get(i);
    let part = if node.is_leaf() {
        let b = super::packed::Packed::new(raw, lo, hi, d.entries as usize)?;
        segment::check_cuts(&b, segment::of(node.segs.as_deref(), i))?;
        Part::Packed(b)
    } else {
        let buf = Buffer::decode(raw, lo, hi, d.entries as usize)?;
        segment::check_cuts(&buf, segment::of(node.segs.as_deref(), i))?;
        Part::Buf(buf)
    };
    if part.entries() != d.entries as usize {
        return Err(format!(
            "{} entries, directory says {}",
            part.entries(),
            d.entries
        ));
    }
    Ok(part)
}

/// The messages buffer `i` of `node` holds for `key` (a buffer of that key
/// alone, possibly empty), from the stored bytes `c` of the buffer or of
/// its segment `seg` (`segment::locate`): verified by checksum like
/// [`decode_part`], but scanned in place up to the key instead of decoded
/// whole (a point read that does not cache the buffer). Compressed bytes
/// are decompressed into `scratch` (a caller's buffer kept between probes:
/// no allocation, and no zeroing once it has grown).
pub fn probe_buffer(
    node: &Node,
    (i, seg): (usize, Option<usize>),
    c: &[u8],
    scratch: &mut Vec<u8>,
    key: &[u8],
) -> Result<Buffer, String> {
    assert!(!node.is_leaf() && i < node.parts.len());
    let raw = stored_raw(node, (i, seg), c, scratch)?;
    let mut found = Buffer::new();
    let mut r = 0;
    while r < raw.len() {
        let (m, end) = read_message(raw, r)?;
        match m.key.cmp(key) {
            std::cmp::Ordering::Greater => break, // sorted: the key's messages are behind
            std::cmp::Ordering::Less => {}
            std::cmp::Ordering::Equal => {
                if m.kind.is_base() && !found.is_empty() {
                    return Err("a put or delete after other messages of its key".into());
                }
                found.add(m);
            }
        }
        r = end;
    }
    assert!(found.keys().count() <= 1);
    Ok(found)
}

/// The messages of segment `j` of buffer `i` of `node`, from its stored
/// bytes `c`: verified by checksum, decompressed, and decoded whole as a
/// buffer of the segment's key range (its first key up to the next
/// segment's, or the partition's upper pivot after the last segment). A
/// scan's read of a buffer it does not cache (`slice.rs`).
pub fn decode_segment(node: &Node, i: usize, j: usize, c: &[u8]) -> Result<Buffer, String> {
    assert!(!node.is_leaf() && i < node.parts.len());
    let segs = segment::of(node.segs.as_deref(), i);
    assert!(j < segs.len(), "segment {j} of {}", segs.len());
    let mut scratch = Vec::new();
    let raw = stored_raw(node, (i, Some(j)), c, &mut scratch)?.to_vec();
    let lo = segs.first_key(j);
    let hi = match j + 1 < segs.len() {
        true => Some(segs.first_key(j + 1)),
        false => node.pivots.get(i),
    };
    let d = &node.dir[i];
    let entries = (d.entries as u64 * raw.len() as u64 / (d.raw_bytes as u64).max(1)) as usize;
    let buf = Buffer::decode(raw, Some(lo), hi, entries)?;
    if buf.first_key() != Some(lo) {
        return Err(format!("segment {j} does not start at its first key"));
    }
    Ok(buf)
}

/// The value basement `i` of leaf `node` holds for `key` (a basement of
/// that entry alone, or empty), from the stored bytes `c` of the basement
/// or of its segment `seg` (`segment::locate`): verified by checksum like
/// [`decode_part`], scanned in place up to the key (a point read that does
/// not index or cache the basement; `scratch` as in [`probe_buffer`]).
pub fn probe_basement(
    node: &Node,
    (i, seg): (usize, Option<usize>),
    c: &[u8],
    scratch: &mut Vec<u8>,
    key: &[u8],
) -> Result<super::packed::Packed, String> {
    assert!(node.is_leaf() && i < node.parts.len());
    let raw = stored_raw(node, (i, seg), c, scratch)?;
    let lo = i.checked_sub(1).map(|p| &node.pivots[p][..]);
    let hi = node.pivots.get(i);
    let mut found = super::packed::Packed::default();
    if let Some(v) = super::packed::Packed::scan_for(raw, key, (lo, hi))? {
        found.push(key, v);
    }
    assert!(found.len() <= 1);
    Ok(found)
}

/// The raw bytes of partition `i` (or of its segment `seg`) from their
/// stored bytes `c`, checked like [`stored_part`]: `c` itself when stored
/// as is, else decompressed into `scratch`.
fn stored_raw<'a>(
    node: &Node,
    (i, seg): (usize, Option<usize>),
    c: &'a [u8],
    scratch: &'a mut Vec<u8>,
) -> Result<&'a [u8], String> {
    let (comp, raw_bytes) = match seg {
        None => (check_stored(node, i, c)?, node.dir[i].raw_bytes as usize),
        Some(j) => {
            let s = segment::of(node.segs.as_deref(), i).get(j);
            check_crc(c, s.crc, s.stored_bytes).map_err(|e| format!("segment {j}: {e}"))?;
            let comp = Compression::from_code(node.comp).ok_or("unknown compression")?;
            (comp, s.raw_bytes as usize)
        }
    };
    if c.len() == raw_bytes {
        return Ok(c); // stored as is
    }
    if scratch.len() < raw_bytes {
        scratch.resize(raw_bytes, 0);
    }
    decompress_into(c, comp, &mut scratch[..raw_bytes])?;
    Ok(&scratch[..raw_bytes])
}

/// A whole stored node, every partition loaded.
pub fn decode_full(b: &[u8], page_size: usize) -> Result<Node, String> {
    let mut node = decode_shell(b, b.len() as u64, page_size)?;
    for i in 0..node.parts.len() {
        let d = &node.dir[i];
        let c = &b[d.offset as usize..(d.offset + d.comp_bytes) as usize];
        let p =
            decode_part(&node, i, Cow::Borrowed(c)).map_err(|e| format!("partition {i}: {e}"))?;
        node.parts[i] = Some(Arc::new(p));
    }
    Ok(node)
}

/// The parts of a stored node `b` that decoded to `node`, as payload byte
/// ranges: header, directory, pivots (with the child references), filters,
/// segment lists and each partition (for `Db::file_map`).
pub fn regions(b: &[u8], node: &Node) -> Vec<(std::ops::Range<usize>, &'static str)> {
    let leaf = node.is_leaf();
    let count = node.dir.len();
    let dir_end = HEADER_BYTES + count * DIR_ENTRY_BYTES;
    let shell = get_u32(b, header::SHELL_BYTES.at) as usize;
    let seg_area = get_u32(b, header::SEGMENT_AREA_BYTES.at) as usize;
    let filters: usize = (0..count)
        .map(|i| get_u32(b, HEADER_BYTES + i * DIR_ENTRY_BYTES + dir::FILTER_BYTES.at) as usize)
        .sum();
    // Consistent once `node` decoded from `b`; saturating all the same.
    let seg_start = shell.saturating_sub(seg_area);
    let pivots_end = seg_start.saturating_sub(filters).max(dir_end);
    let mut out = vec![
        (0..HEADER_BYTES, structure::HEADER),
        (HEADER_BYTES..dir_end, structure::DIRECTORY),
        (dir_end..pivots_end, structure::PIVOTS),
        (pivots_end..pivots_end + filters, structure::FILTERS),
        (seg_start..shell, structure::SEGMENT_LIST),
    ];
    for (i, d) in node.dir.iter().enumerate() {
        let cut = !segment::of(node.segs.as_deref(), i).is_empty();
        let what = match (leaf, cut) {
            (true, false) => structure::BASEMENT,
            (true, true) => structure::BASEMENT_SEGMENT,
            (false, false) => structure::BUFFER,
            (false, true) => structure::BUFFER_SEGMENT,
        };
        let at = d.offset as usize;
        out.push((at..at + d.comp_bytes as usize, what));
    }
    out.retain(|(r, _)| !r.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_tile_a_stored_leaf_exactly() {
        let mut n = Node::new_leaf();
        for i in 0..200u32 {
            n.base_set(format!("k{i:05}").as_bytes(), Some(vec![i as u8; 20]));
        }
        n.fix_basements(1000);
        let b = encode(&n, Compression::Lz4, 3, 256);
        let d = decode_full(&b, 4096).unwrap();
        let mut rs = regions(&b, &d);
        rs.sort_by_key(|(r, _)| r.start);
        let mut at = 0;
        for (r, what) in &rs {
            assert_eq!(
                r.start, at,
                "{what} does not start where the last region ends"
            );
            at = r.end;
        }
        assert_eq!(at, b.len(), "the regions end before the node");
        let names: Vec<_> = rs.iter().map(|(_, w)| *w).collect();
        for want in [
            "header",
            "directory",
            "pivots",
            "segment list",
            "basement segment",
        ] {
            assert!(names.contains(&want), "no {want} in {names:?}");
        }
        assert!(!names.contains(&"filters"), "a leaf has no filters");
    }

    #[test]
    fn leaf_round_trips_and_a_flipped_byte_is_caught() {
        let mut n = Node::new_leaf();
        for i in 0..200u32 {
            n.base_set(format!("k{i:05}").as_bytes(), Some(vec![i as u8; 20]));
        }
        n.fix_basements(1000);
        assert!(n.parts.len() > 3, "basements split: {}", n.parts.len());
        for comp in [Compression::None, Compression::Lz4, Compression::Zstd] {
            let b = encode(&n, comp, 3, 0);
            let d = decode_full(&b, 4096).unwrap();
            assert_eq!(
                encode(&d, comp, 3, 0),
                b,
                "decode then encode is the identity"
            );
            assert_eq!(d.pivots, n.pivots);
            assert_eq!(d.part_bytes, n.part_bytes);
            let mut bad = b.clone();
            let last = bad.len() - 1;
            bad[last] ^= 1;
            let e = decode_full(&bad, 4096).unwrap_err();
            assert!(
                e.starts_with(&format!("partition {}", n.parts.len() - 1)),
                "{e}"
            );
        }
    }

    /// An internal node of 4 buffers: buffer 2 empty, the others holding
    /// messages for keys `b{i}-{j}` (i the buffer).
    fn internal_node() -> Node {
        let mut n = Node::new_leaf();
        n.height = 1;
        n.pivots = Pivots::from_keys([&b"b1"[..], b"b2", b"b3"]);
        n.children = (0..4)
            .map(|i| Child::Clean(Extent::new(10 + i, 9000, 4096)))
            .collect();
        n.parts = (0..4)
            .map(|_| Some(Arc::new(Part::Buf(Buffer::new()))))
            .collect();
        n.part_bytes = vec![0; 4];
        for i in [0usize, 1, 3] {
            for j in 0..(40 * (i + 1)) {
                let p = crate::index::bepsilon::pending::Pending {
                    base: Some(crate::index::bepsilon::pending::Base::Put(
                        j as u64 + 1,
                        vec![i as u8; 12],
                    )),
                    ops: vec![],
                };
                n.buf_add_pending(i, format!("b{i}-{j:04}").into_bytes(), p);
            }
        }
        n
    }

    /// Offset of the filter area in an encoded internal node.
    fn filter_area(b: &[u8]) -> (usize, usize) {
        let count = get_u16(b, 6) as usize;
        let total: usize = (0..count)
            .map(|i| get_u32(b, HEADER_BYTES + i * DIR_ENTRY_BYTES + 20) as usize)
            .sum();
        let shell = shell_len(b).unwrap();
        (shell - total, shell)
    }

    #[test]
    fn internal_node_filters_round_trip_and_admit_every_buffered_key() {
        let n = internal_node();
        let b = encode(&n, Compression::Lz4, 3, 0);
        assert_eq!(b[32], filter::PROBES);
        let (lo, hi) = filter_area(&b);
        let want: usize = [40, 80, 0, 160]
            .iter()
            .map(|&k| filter::filter_bytes(k))
            .sum();
        assert_eq!(hi - lo, want, "10 bits per buffered key");
        let d = decode_full(&b, 4096).unwrap();
        assert_eq!(d.filter_bytes(), want);
        for (i, part) in n.parts.iter().enumerate() {
            let Some(Part::Buf(buf)) = part.as_deref() else {
                unreachable!()
            };
            let f = d.dir[i].filter.as_ref().expect("every buffer has a filter");
            assert!(buf.keys().all(|k| f.may_contain(k)), "buffer {i}");
        }
        let empty = d.dir[2].filter.as_ref().unwrap();
        assert!(empty.bytes().is_empty() && !empty.may_contain(b"b2-0000"));
        let mut again = d.clone();
        again.dir = crate::index::bepsilon::node::no_dir();
        assert_eq!(
            encode(&again, Compression::Lz4, 3, 0),
            b,
            "decode then encode"
        );
        let leaf = encode(&leaf_of(false), Compression::Lz4, 3, 0);
        assert_eq!(
            (leaf[32], get_u32(&leaf, 36)),
            (0, 0),
            "leaves carry no filters"
        );
    }

    #[test]
    fn damaged_filters_are_refused() {
        let b = encode(&internal_node(), Compression::None, 3, 0);
        let (lo, _) = filter_area(&b);
        let shell = |b: &[u8]| decode_shell(b, b.len() as u64, 4096).map(|_| ());
        assert!(shell(&b).is_ok());
        let mut flipped = b.clone();
        flipped[lo + 3] ^= 0x10;
        assert!(shell(&flipped).unwrap_err().starts_with("filter checksum"));
        let mut no_probes = b.clone();
        no_probes[32] = 0;
        assert!(shell(&no_probes)
            .unwrap_err()
            .contains("without filter probes"));
        let mut many = b.clone();
        many[32] = filter::MAX_PROBES + 1;
        assert!(shell(&many).unwrap_err().contains("filter probes"));
        // Buffer 0 keeps its messages but loses its filter bytes to buffer 1.
        let mut moved = b.clone();
        let d0 = HEADER_BYTES + 20;
        let (f0, f1) = (get_u32(&b, d0), get_u32(&b, d0 + DIR_ENTRY_BYTES));
        put_u32(&mut moved, d0, 0);
        put_u32(&mut moved, d0 + DIR_ENTRY_BYTES, f0 + f1);
        let e = shell(&moved).unwrap_err();
        assert!(e.contains("partition 0: 40 messages and no filter"), "{e}");
        let mut leaf = encode(&leaf_of(false), Compression::None, 3, 0);
        leaf[32] = 1;
        assert!(shell(&leaf).unwrap_err().contains("in a leaf"));
    }

    /// A leaf of 100-byte values, random (`noise`) or runs of one byte.
    fn leaf_of(noise: bool) -> Node {
        let mut n = Node::new_leaf();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..2000u32 {
            let v: Vec<u8> = (0..100)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if noise {
                        x as u8
                    } else {
                        i as u8
                    }
                })
                .collect();
            n.base_set(format!("k{i:05}").as_bytes(), Some(v));
        }
        n.fix_basements(64 << 10);
        n
    }

    #[test]
    fn incompressible_partitions_are_stored_as_is() {
        for (noise, comp) in [
            (true, Compression::Lz4),
            (true, Compression::Zstd),
            (false, Compression::Lz4),
            (false, Compression::Zstd),
        ] {
            let n = leaf_of(noise);
            let b = encode(&n, comp, 3, 0);
            let d = decode_full(&b, 4096).unwrap();
            assert_eq!(d.dir.len(), n.parts.len());
            for (e, raw) in d.dir.iter().zip(&n.part_bytes) {
                assert_eq!(e.raw_bytes as usize, *raw);
                // Never stored larger; random values under lz4 (the
                // probe saves under 1/16): stored as is; runs: at most half.
                assert!(e.comp_bytes <= e.raw_bytes, "{comp:?} {e:?}");
                if noise && comp == Compression::Lz4 {
                    assert_eq!(e.comp_bytes, e.raw_bytes, "{comp:?}");
                } else if !noise {
                    assert!(e.comp_bytes <= e.raw_bytes / 2, "{comp:?} {e:?}");
                }
            }
            assert_eq!(d.part_bytes, n.part_bytes);
            assert_eq!(encode(&d, comp, 3, 0), b, "{comp:?}: decode then encode");
        }
    }

    /// Encoding holds its output and one partition's raw and compressed
    /// bytes at a time, not every partition's twice besides (it held three
    /// node sizes per placing thread when partitions were encoded whole).
    #[test]
    fn encode_holds_about_one_node_of_bytes() {
        use crate::index::bepsilon::heap::counting::{live, peak, reset_peak};
        for (noise, comp) in [
            (true, Compression::None),
            (true, Compression::Lz4),
            (false, Compression::Lz4),
            (false, Compression::Zstd),
        ] {
            let n = leaf_of(noise);
            let max_part_bytes = *n.part_bytes.iter().max().unwrap() as isize;
            let raw_bytes: usize = n.part_bytes.iter().sum();
            assert!(n.parts.len() >= 3 && raw_bytes > 200 << 10);
            let before = live();
            reset_peak();
            let b = encode(&n, comp, 3, 0);
            let held = peak() - before;
            let out = crate::index::bepsilon::heap::alloc_bytes(b.capacity()) as isize;
            // zstd's context: a few hundred KiB, freed before the next part.
            let ctx = if comp == Compression::Zstd {
                2 << 20
            } else {
                64 << 10
            };
            assert!(
                held <= out + 2 * max_part_bytes + ctx,
                "{comp:?} noise {noise}: held {held} for output {out}, part {max_part_bytes}"
            );
            assert!(held >= b.len() as isize, "the output is counted");
        }
    }

    /// `internal_node`'s buffers with upserts after every third key's put
    /// (so some keys own several messages a cut must not separate).
    fn internal_node_with_upserts() -> Node {
        let mut n = internal_node();
        for i in [0usize, 1, 3] {
            for j in (0..(40 * (i + 1))).step_by(3) {
                let p = crate::index::bepsilon::pending::Pending {
                    base: None,
                    ops: vec![(1000 + j as u64, vec![7; 5]), (2000 + j as u64, vec![8; 9])],
                };
                n.buf_add_pending(i, format!("b{i}-{j:04}").into_bytes(), p);
            }
        }
        n
    }

    /// What a probe of `key` finds in buffer `i` of the stored node `b`,
    /// reading only what `segment::locate` names.
    fn probe_stored(b: &[u8], d: &Node, i: usize, key: &[u8]) -> Result<Buffer, String> {
        let Some((stored, seg)) = located(b, d, i, key) else {
            return Ok(Buffer::new());
        };
        probe_buffer(d, (i, seg), stored, &mut Vec::new(), key)
    }

    /// The stored bytes a probe of `key` reads of partition `i` of the
    /// stored node `b` (`segment::locate`), and their segment; None when
    /// the segments rule the key out.
    fn located<'a>(
        b: &'a [u8],
        d: &Node,
        i: usize,
        key: &[u8],
    ) -> Option<(&'a [u8], Option<usize>)> {
        let e = &d.dir[i];
        let (off, len, seg) = segment::locate(e, segment::of(d.segs.as_deref(), i), key)?;
        let at = (e.offset as u64 + off) as usize;
        Some((&b[at..at + len as usize], seg))
    }

    #[test]
    fn segmented_buffers_round_trip_and_probes_find_every_message() {
        let n = internal_node_with_upserts();
        for comp in [Compression::None, Compression::Lz4, Compression::Zstd] {
            let whole = encode(&n, comp, 3, 0);
            assert_eq!(get_u32(&whole, 40), 0, "no cut without a target");
            let b = encode(&n, comp, 3, 512);
            assert!(get_u32(&b, 40) > 0 && get_u32(&b, 44) != 0);
            let d = decode_full(&b, 4096).unwrap();
            assert_eq!(encode(&d, comp, 3, 512), b, "{comp:?}: decode then encode");
            // Buffer 3 holds 160 keys of 34-byte puts, some with upserts.
            let segs = |i| segment::of(d.segs.as_deref(), i);
            assert!(segs(3).len() >= 8, "{comp:?}: {} segments", segs(3).len());
            assert!(segs(2).is_empty(), "an empty buffer is not cut");
            for (i, part) in n.parts.iter().enumerate() {
                let Some(Part::Buf(buf)) = part.as_deref() else {
                    unreachable!()
                };
                let Some(Part::Buf(back)) = d.parts[i].as_deref() else {
                    unreachable!()
                };
                assert_eq!(
                    back.pendings().collect::<Vec<_>>(),
                    buf.pendings().collect::<Vec<_>>()
                );
                for (k, p) in buf.pendings() {
                    let got = probe_stored(&b, &d, i, k).unwrap();
                    assert_eq!(got.get(k), Some(p), "{comp:?} buffer {i}");
                }
                for absent in [&b"b"[..], b"b1", b"b1-0000x", b"b3-9999", b"b3-00005"] {
                    let got = probe_stored(&b, &d, i, absent).unwrap();
                    assert!(got.is_empty(), "{comp:?} buffer {i} {absent:?}");
                }
            }
            assert!(
                segment::locate(&d.dir[1], segs(1), b"b1").is_none(),
                "below the first key"
            );
        }
    }

    #[test]
    fn damaged_segments_are_refused() {
        let b = encode(&internal_node_with_upserts(), Compression::Lz4, 3, 512);
        let shell_of = |b: &[u8]| decode_shell(b, b.len() as u64, 4096);
        let d = shell_of(&b).unwrap();
        let (len, end) = (get_u32(&b, 40) as usize, shell_len(&b).unwrap());
        let area = end - len;
        // A flipped bit in the area: its checksum.
        let mut flipped = b.clone();
        flipped[area + 5] ^= 4;
        assert!(shell_of(&flipped)
            .unwrap_err()
            .starts_with("segment area checksum"));
        // A list whose sums disagree with the directory, checksum made good.
        let mut sums = b.clone();
        let count0 = get_u16(&b, area) as usize;
        assert!(count0 >= 2);
        put_u32(&mut sums, area + 2 + 4, get_u32(&b, area + 2 + 4) + 1);
        let crc = crc32c::crc32c(&sums[area..end]);
        put_u32(&mut sums, 44, crc);
        let e = shell_of(&sums).unwrap_err();
        assert!(
            e.starts_with("partition 0:") && e.contains("directory says"),
            "{e}"
        );
        // A segment's stored bytes damaged: its probe and the whole load fail.
        let segs3 = segment::of(d.segs.as_deref(), 3);
        let at = d.dir[3].offset as usize + segs3.get(0).stored_bytes as usize;
        let mut bad = b.clone();
        bad[at + 3] ^= 1;
        let key = segs3.first_key(1).to_vec();
        let e = probe_stored(&bad, &d, 3, &key).unwrap_err();
        assert!(e.starts_with("segment 1: checksum"), "{e}");
        assert!(decode_full(&bad, 4096)
            .unwrap_err()
            .starts_with("partition 3: checksum"));
    }

    /// What a probe of `key` finds in basement `i` of the stored leaf `b`,
    /// reading only what `segment::locate` names.
    fn probe_leaf(b: &[u8], d: &Node, i: usize, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let Some((stored, seg)) = located(b, d, i, key) else {
            return Ok(None);
        };
        let found = probe_basement(d, (i, seg), stored, &mut Vec::new(), key)?;
        Ok(found.get(key).map(<[u8]>::to_vec))
    }

    #[test]
    fn segmented_basements_round_trip_and_probes_find_every_entry() {
        for (noise, comp) in [
            (true, Compression::Lz4),
            (false, Compression::Lz4),
            (false, Compression::Zstd),
            (false, Compression::None),
        ] {
            let n = leaf_of(noise);
            let b = encode(&n, comp, 3, 4096);
            assert!(get_u32(&b, 40) > 0, "a leaf carries a segment area");
            let d = decode_full(&b, 4096).unwrap();
            assert_eq!(encode(&d, comp, 3, 4096), b, "{comp:?}: decode then encode");
            let mut probed = 0;
            for (i, part) in n.parts.iter().enumerate() {
                let Some(Part::Packed(bm)) = part.as_deref() else {
                    unreachable!()
                };
                // 64 KiB basements of 4 KiB segments: one per 4-5 KiB.
                let segs = segment::of(d.segs.as_deref(), i);
                assert!(segs.len() >= bm.bytes() / 5000, "{comp:?} basement {i}");
                for j in (0..bm.len()).step_by(7) {
                    let (k, v) = bm.at(j);
                    let got = probe_leaf(&b, &d, i, k).unwrap();
                    assert_eq!(got.as_deref(), Some(v), "{comp:?} basement {i}");
                    let mut after = k.to_vec();
                    after.push(0);
                    assert_eq!(probe_leaf(&b, &d, i, &after).unwrap(), None);
                    probed += 1;
                }
            }
            assert!(probed > 250, "{probed}");
            assert_eq!(
                probe_leaf(&b, &d, 0, b"a").unwrap(),
                None,
                "below every key"
            );
        }
    }

    #[test]
    fn damaged_basement_segments_are_refused() {
        let b = encode(&leaf_of(true), Compression::Lz4, 3, 4096);
        let d = decode_shell(&b, b.len() as u64, 4096).unwrap();
        let segs = segment::of(d.segs.as_deref(), 0);
        assert!(segs.len() >= 3);
        // Segment 1 damaged: a probe of a key in it, and the whole load.
        let at = d.dir[0].offset as usize + segs.get(0).stored_bytes as usize;
        let mut bad = b.clone();
        bad[at + 40] ^= 1;
        let e = probe_leaf(&bad, &d, 0, segs.first_key(1)).unwrap_err();
        assert!(e.starts_with("segment 1: checksum"), "{e}");
        assert!(decode_full(&bad, 4096)
            .unwrap_err()
            .starts_with("partition 0: checksum"));
        // A first key that is not the key its segment starts with, the
        // area's checksum made good: the whole load refuses the cut.
        let (len, end) = (get_u32(&b, 40) as usize, shell_len(&b).unwrap());
        let mut moved = b.clone();
        let key0 = end - len + 2 + segment::ENTRY_FIXED_BYTES; // first key of segment 0
        let k1 = key0 + segs.first_key(0).len() + segment::ENTRY_FIXED_BYTES;
        assert_eq!(&moved[k1..k1 + 6], &segs.first_key(1)[..6]);
        moved[k1 + 5] += 1; // "k00xyz" -> a key between entries
        let crc = crc32c::crc32c(&moved[end - len..end]);
        put_u32(&mut moved, 44, crc);
        let e = decode_full(&moved, 4096).unwrap_err();
        assert!(e.contains("does not start at its first key"), "{e}");
    }

    #[test]
    fn cuts_fall_between_keys_and_are_checked_on_whole_loads() {
        let n = internal_node_with_upserts();
        let Some(Part::Buf(buf)) = n.parts[3].as_deref() else {
            unreachable!()
        };
        let mut raw = Vec::new();
        buf.encode_into(&mut raw);
        let decoded = Buffer::decode(raw.clone(), None, None, buf.count()).unwrap();
        for target in [1, 40, 100, 512, 2000] {
            let segs = segment::plan(buf, target);
            assert!(segs.len() >= 2, "target {target}");
            let t = segment::Table::of_plans(std::slice::from_ref(&segs));
            segment::check_cuts(&decoded, segment::of(Some(&t), 0)).unwrap();
            // Every key's messages in one segment: each first key's
            // messages start the segment, and the key before differs.
            assert!(segs.windows(2).all(|w| w[0].first_key < w[1].first_key));
            let min = segs[..segs.len() - 1].iter().map(|s| s.raw_bytes).min();
            assert!(min.unwrap() as usize >= target, "target {target}");
        }
        assert!(
            segment::plan(buf, raw.len() / 2 + 1).is_empty(),
            "under twice the target"
        );
        // A cut moved one message later: it lands inside a key or off its key.
        let mut segs = segment::plan(buf, 200);
        let (m, end) = read_message(&raw, segs[0].raw_bytes as usize).unwrap();
        segs[0].raw_bytes = end as u32;
        segs[1].raw_bytes -= m.bytes() as u32;
        let t = segment::Table::of_plans(&[segs.to_vec()]);
        let e = segment::check_cuts(&decoded, segment::of(Some(&t), 0)).unwrap_err();
        assert!(e.contains("segment 1"), "{e}");
        // A cut inside one key's messages (after a put, before its upsert).
        let (mut r, mut cut) = (0, None);
        while cut.is_none() {
            let (m, end) = read_message(&raw, r).unwrap();
            let (next, _) = read_message(&raw, end).unwrap();
            cut = (next.key == m.key).then(|| (end, m.key.to_vec()));
            r = end;
        }
        let (at, key) = cut.unwrap();
        let seg = |raw_bytes: usize, k: &[u8]| segment::Segment {
            raw_bytes: raw_bytes as u32,
            first_key: k.into(),
            ..Default::default()
        };
        let first = buf.first_key().unwrap();
        let segs = [seg(at, first), seg(raw.len() - at, &key)];
        let t = segment::Table::of_plans(&[segs.to_vec()]);
        let e = segment::check_cuts(&decoded, segment::of(Some(&t), 0)).unwrap_err();
        assert!(e.contains("straddle segments 0 and 1"), "{e}");
    }
}
