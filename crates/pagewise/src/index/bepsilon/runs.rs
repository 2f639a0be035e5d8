//! Value runs and their space accounting (docs/design.md, "B-epsilon packed
//! values"): a commit group's values that leave a tree and whose entry fits
//! a page's payload are written back to back into runs (an extent of full
//! kind-4 pages), and the tree counts per run page the stored references
//! whose value bytes lie on it. A page is freed when its count falls to 0;
//! a run whose pages are all freed leaves the table. The table is written
//! at each checkpoint where it changed (place.rs) and read at open.

use super::layout::{run_entry, value_table};
use super::value::Packed;
use crate::store::extent::page_payload_bytes;
use crate::store::layout::Field;
use crate::store::page::{get_u16, get_u32, get_u64};
use std::collections::BTreeMap;

pub use super::value::MAX_RUN_PAGES;
/// The value table's magic, `PWVT`.
pub const TABLE_MAGIC: u32 = u32::from_le_bytes(*b"PWVT");
/// A page's first entry start when no entry starts in it.
pub const NO_START: u16 = u16::MAX;

/// Bytes of the run entry of a value of `value_bytes` under a key of
/// `key_bytes`.
pub fn entry_bytes(key_bytes: usize, value_bytes: usize) -> usize {
    run_entry::KEY_AT + key_bytes + value_bytes
}

/// Whether such an entry is packed (fits one page's payload); else the
/// value goes to an extent of its own.
pub fn fits(key_bytes: usize, value_bytes: usize, page_size: usize) -> bool {
    value_bytes > 0 && entry_bytes(key_bytes, value_bytes) <= page_payload_bytes(page_size)
}

/// A run as written: its first page (0 until placed), its pages and per
/// value (in packing order) its entry's start and its reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunLayout {
    pub first_page: u64,
    pub count_pages: u64,
    pub values: Vec<(u32, Packed)>,
}

/// An entry that would cross into the next page starts there instead when
/// at most 1/`PAD_FRACTION` of the page's payload is left: values of
/// about a page, or a quarter of one, are then read from one page, not
/// two, for at most that fraction of a page in padding.
pub const PAD_FRACTION: usize = 8;

/// The zero bytes to put before an entry of `e` bytes at payload offset
/// `at` (pages of `cap` payload bytes): the rest of the page when the
/// entry would cross into the next page and that rest is small.
fn padding(at: usize, e: usize, cap: usize) -> usize {
    let room = cap - at % cap;
    match e > room && room <= cap / PAD_FRACTION {
        true => room,
        false => 0,
    }
}

/// Packs `entries` (key, value; each [`fits`]) into runs of at most
/// [`MAX_RUN_PAGES`] full pages: per run its payload (zero padded to whole
/// pages) and layout (first page 0: the caller places it). Entries lie
/// back to back, but for [`padding`] before one that would cross a page
/// boundary with little of the page left.
pub fn pack(entries: &[(&[u8], &[u8])], page_size: usize) -> Vec<(Vec<u8>, RunLayout)> {
    let cap = page_payload_bytes(page_size);
    let max_bytes = MAX_RUN_PAGES as usize * cap;
    let mut out: Vec<(Vec<u8>, RunLayout)> = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut values: Vec<(u32, Packed)> = Vec::new();
    for (k, v) in entries {
        assert!(
            fits(k.len(), v.len(), page_size),
            "a packed entry fits a page"
        );
        let e = entry_bytes(k.len(), v.len());
        let pad = padding(buf.len(), e, cap);
        if buf.len() + pad + e > max_bytes {
            out.push(seal(
                std::mem::take(&mut buf),
                std::mem::take(&mut values),
                cap,
            ));
        } else {
            buf.resize(buf.len() + pad, 0);
        }
        let start = buf.len() as u32;
        buf.extend_from_slice(&(k.len() as u16).to_le_bytes());
        buf.extend_from_slice(&(v.len() as u32).to_le_bytes());
        buf.extend_from_slice(k);
        let offset = buf.len() as u32;
        buf.extend_from_slice(v);
        let r = Packed {
            first_page: 0,
            offset,
            len: v.len() as u32,
        };
        values.push((start, r));
    }
    if !values.is_empty() {
        out.push(seal(buf, values, cap));
    }
    assert_eq!(
        out.iter().map(|r| r.1.values.len()).sum::<usize>(),
        entries.len()
    );
    out
}

/// A run's payload padded to whole pages, with its layout.
fn seal(mut buf: Vec<u8>, values: Vec<(u32, Packed)>, cap: usize) -> (Vec<u8>, RunLayout) {
    assert!(!buf.is_empty());
    let count_pages = buf.len().div_ceil(cap);
    buf.resize(count_pages * cap, 0);
    let layout = RunLayout {
        first_page: 0,
        count_pages: count_pages as u64,
        values,
    };
    (buf, layout)
}

/// The entries of a run's payload bytes `b` from offset `from` (an entry's
/// start) to the end or the padding, as (entry start, key, value offset,
/// value length); an entry that runs past `b` ends the list (the caller
/// read only part of the run). Bounded by `b`'s length.
pub fn entries_from(b: &[u8], from: usize) -> Vec<(usize, &[u8], usize, usize)> {
    let mut out = Vec::new();
    let mut at = from;
    while at + run_entry::KEY_AT <= b.len() {
        let klen = get_u16(b, at + run_entry::KEY_LEN.at) as usize;
        let vlen = get_u32(b, at + run_entry::VALUE_LEN.at) as usize;
        if klen == 0 && vlen == 0 {
            break; // padding
        }
        let key_at = at + run_entry::KEY_AT;
        let Some(end) = key_at.checked_add(klen).and_then(|e| e.checked_add(vlen)) else {
            break;
        };
        if end > b.len() {
            break;
        }
        out.push((at, &b[key_at..key_at + klen], key_at + klen, vlen));
        at = end;
    }
    out
}

/// One page of a run: values whose bytes lie on it, those still named by
/// the tree (0: freed), where the first entry starting on it starts, and
/// the bytes of the live values on it (what collection judges by).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageCount {
    pub entries: u16,
    pub live: u16,
    pub first_start: u16,
    pub live_bytes: u16,
}

/// The bytes of value `r` on page `k` of its run (payload `cap` a page).
fn bytes_on(r: &Packed, k: u64, cap: u64) -> u16 {
    let lo = (r.offset as u64).max(k * cap);
    let hi = r.end().min((k + 1) * cap);
    assert!(lo < hi && hi - lo <= cap);
    (hi - lo) as u16
}

/// Whether page `k` of a registered run, counted `c`, stays allocated:
/// while live, and the first page while the run is registered.
pub fn held(k: usize, c: &PageCount) -> bool {
    c.live > 0 || k == 0
}

/// A tree's value table: per run (by first page) its pages' counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Runs {
    pub runs: BTreeMap<u64, Vec<PageCount>>,
}

impl Runs {
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Registers a run just written: every value of `run` counts on the
    /// pages its bytes lie on. Requires: the run is not registered yet.
    pub fn register(&mut self, run: &RunLayout, page_size: usize) {
        assert!(run.first_page >= 2 && (1..=MAX_RUN_PAGES).contains(&run.count_pages));
        let cap = page_payload_bytes(page_size) as u32;
        let blank = PageCount {
            entries: 0,
            live: 0,
            first_start: NO_START,
            live_bytes: 0,
        };
        let mut pages = vec![blank; run.count_pages as usize];
        for (start, r) in &run.values {
            let first = &mut pages[(start / cap) as usize].first_start;
            *first = (*first).min((start % cap) as u16);
            for k in r.pages(page_size) {
                pages[k as usize].entries += 1;
                pages[k as usize].live += 1;
                pages[k as usize].live_bytes += bytes_on(r, k, cap as u64);
            }
        }
        assert!(
            pages.iter().all(|p| p.live > 0),
            "every run page holds value bytes"
        );
        let old = self.runs.insert(run.first_page, pages);
        assert!(old.is_none(), "run {} registered twice", run.first_page);
    }

    /// A reference to `r` left the tree: its pages count one value fewer.
    /// Returns the pages to free: those whose count fell to 0, except the
    /// run's first page, which is freed only with the run's last live page.
    /// Every packed reference names its run by that page, so while the run
    /// is in the table no later run may start there (a reused first page
    /// would make two runs' references indistinguishable). A reference to a
    /// run or page the table does not hold (a damaged file: `check` says
    /// so) changes nothing.
    pub fn release(&mut self, r: &Packed, page_size: usize) -> Vec<u64> {
        let Some(pages) = self.runs.get_mut(&r.first_page) else {
            return Vec::new();
        };
        let span = r.pages(page_size);
        if *span.end() >= pages.len() as u64 || span.clone().any(|k| pages[k as usize].live == 0) {
            return Vec::new();
        }
        let cap = page_payload_bytes(page_size) as u64;
        let mut freed = Vec::new();
        for k in span {
            let p = &mut pages[k as usize];
            p.live_bytes = p.live_bytes.saturating_sub(bytes_on(r, k, cap));
            pages[k as usize].live -= 1;
            if pages[k as usize].live == 0 && k > 0 {
                freed.push(r.first_page + k);
            }
        }
        if pages.iter().all(|p| p.live == 0) {
            self.runs.remove(&r.first_page);
            freed.push(r.first_page);
        }
        freed
    }

    /// The pages the table keeps allocated: every live page, and each
    /// run's first page (held until the run's last page is freed).
    pub fn held_pages(&self) -> u64 {
        self.runs
            .values()
            .map(|p| p.iter().enumerate().filter(|(k, c)| held(*k, c)).count() as u64)
            .sum()
    }

    /// The table's bytes (docs/design.md, "B-epsilon packed values").
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&TABLE_MAGIC.to_le_bytes());
        b.extend_from_slice(&(self.runs.len() as u32).to_le_bytes());
        assert_eq!(b.len(), value_table::RUNS.end());
        for (first, pages) in &self.runs {
            b.extend_from_slice(&first.to_le_bytes());
            b.extend_from_slice(&(pages.len() as u16).to_le_bytes());
            for p in pages {
                b.extend_from_slice(&p.entries.to_le_bytes());
                b.extend_from_slice(&p.live.to_le_bytes());
                b.extend_from_slice(&p.first_start.to_le_bytes());
                b.extend_from_slice(&p.live_bytes.to_le_bytes());
            }
        }
        b
    }

    /// Reads [`Runs::encode`]'s bytes; what is wrong with them otherwise.
    pub fn decode(b: &[u8]) -> Result<Runs, String> {
        let field = |at: usize, f: Field| b.get(at + f.at..at + f.end());
        let head = |f: Field| field(0, f).map(|_| get_u32(b, f.at));
        if head(value_table::MAGIC) != Some(TABLE_MAGIC) {
            return Err("value table: bad magic".into());
        }
        let count = head(value_table::RUNS).ok_or("value table: no run count")? as usize;
        let run_bytes = value_table::RUN_PAGES.end();
        let page_bytes = value_table::PAGE_LIVE_BYTES.end();
        let mut at = value_table::RUNS.end();
        let mut runs = BTreeMap::new();
        // Runs in increasing order of first page (canonical). They may
        // overlap: a later run may start on a freed page of an earlier one.
        let mut prev_first = None;
        for _ in 0..count.min(b.len() / run_bytes + 1) {
            field(at, value_table::RUN_PAGES).ok_or("value table: truncated run")?;
            let first = get_u64(b, at + value_table::RUN_FIRST_PAGE.at);
            let n = get_u16(b, at + value_table::RUN_PAGES.at) as usize;
            at += run_bytes;
            if prev_first.is_some_and(|p| first <= p)
                || first < 2
                || first.checked_add(n as u64).is_none()
                || n == 0
                || n as u64 > MAX_RUN_PAGES
                || b.len() < at + n * page_bytes
            {
                return Err(format!(
                    "value table: run at page {first} of {n} pages (out of order or cut short)"
                ));
            }
            prev_first = Some(first);
            let pages: Vec<PageCount> = (0..n)
                .map(|k| {
                    let p = at + k * page_bytes;
                    PageCount {
                        entries: get_u16(b, p + value_table::PAGE_ENTRIES.at),
                        live: get_u16(b, p + value_table::PAGE_LIVE.at),
                        first_start: get_u16(b, p + value_table::PAGE_FIRST_START.at),
                        live_bytes: get_u16(b, p + value_table::PAGE_LIVE_BYTES.at),
                    }
                })
                .collect();
            at += n * page_bytes;
            if pages.iter().any(|p| p.live > p.entries) || runs.insert(first, pages).is_some() {
                return Err(format!("value table: run at page {first} is inconsistent"));
            }
        }
        if runs.len() != count || at != b.len() {
            return Err(format!("value table: {count} runs in {} bytes", b.len()));
        }
        Ok(Runs { runs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_packs_across_page_boundaries() {
        // 512-byte pages carry 480 payload bytes. Entries of 6 + 2 + 300
        // bytes: the first at 0 (value 8..308), the second at 308 (value
        // 316..616, pages 0 and 1), the third at 616 (value 624..924,
        // page 1), then padding to 960.
        let v = vec![7u8; 300];
        let e: Vec<(&[u8], &[u8])> = vec![(b"k1", &v), (b"k2", &v), (b"k3", &v)];
        let runs = pack(&e, 512);
        assert_eq!(runs.len(), 1);
        let (b, layout) = &runs[0];
        assert_eq!((b.len(), layout.count_pages), (960, 2));
        let offs: Vec<(u32, u32)> = layout.values.iter().map(|(s, r)| (*s, r.offset)).collect();
        assert_eq!(offs, vec![(0, 8), (308, 316), (616, 624)]);
        assert_eq!(&b[308..310], &2u16.to_le_bytes());
        assert_eq!(&b[310..314], &300u32.to_le_bytes());
        assert_eq!(&b[314..316], b"k2");
        assert!(b[924..].iter().all(|&x| x == 0));
        let parsed = entries_from(b, 0);
        assert_eq!(parsed.len(), 3);
        assert_eq!(parsed[1], (308, &b"k2"[..], 316, 300));
        assert_eq!(entries_from(b, 616).len(), 1);
        // The table: page 0 holds values 1 and 2, page 1 values 2 and 3;
        // the only entry starting on page 1 starts at 616 - 480 = 136.
        let mut t = Runs::default();
        let placed = RunLayout {
            first_page: 20,
            ..layout.clone()
        };
        t.register(&placed, 512);
        let p = &t.runs[&20];
        assert_eq!((p[0].entries, p[0].live, p[0].first_start), (2, 2, 0));
        assert_eq!((p[1].entries, p[1].live, p[1].first_start), (2, 2, 136));
        // Page 0: value 1 whole (300) and 480 - 316 = 164 of value 2;
        // page 1: the other 136 of value 2 and value 3 whole (300).
        assert_eq!((p[0].live_bytes, p[1].live_bytes), (464, 436));
        assert_eq!(Runs::decode(&t.encode()).unwrap(), t);
        let r = |i: usize| Packed {
            first_page: 20,
            ..layout.values[i].1
        };
        assert_eq!(t.release(&r(1), 512), Vec::<u64>::new());
        assert_eq!(t.runs[&20][0].live_bytes, 300);
        assert_eq!(t.runs[&20][1].live_bytes, 300);
        // Page 0's last value leaves, but the first page names the run in
        // every reference: it stays allocated until the run's last page goes.
        assert_eq!(t.release(&r(0), 512), Vec::<u64>::new());
        assert_eq!(t.runs[&20][0].live, 0);
        assert_eq!(t.held_pages(), 2);
        assert_eq!(t.release(&r(0), 512), Vec::<u64>::new(), "already freed");
        assert_eq!(t.release(&r(2), 512), vec![21, 20]);
        assert!(t.is_empty(), "a run with every page freed leaves the table");
        // The other order: a later page dies first and is freed at once.
        t.register(&placed, 512);
        assert_eq!(t.release(&r(2), 512), Vec::<u64>::new());
        assert_eq!(t.release(&r(1), 512), vec![21]);
        assert_eq!(t.release(&r(0), 512), vec![20]);
        assert!(t.is_empty());
    }

    #[test]
    fn an_entry_starts_on_the_next_page_when_little_is_left() {
        // 512-byte pages carry 480 payload bytes; at most 480 / 8 = 60 of
        // them are given up. Entries of 6 + 2 + 230 = 238 bytes: two fill
        // 476, the 4 left are padding and the third starts on page 1. With
        // 300-byte values (308-byte entries) 172 bytes are left: the second
        // entry crosses the boundary, as in the test above.
        let v = vec![5u8; 230];
        let e: Vec<(&[u8], &[u8])> = vec![(b"k1", &v), (b"k2", &v), (b"k3", &v)];
        let (b, layout) = pack(&e, 512).pop().unwrap();
        let starts: Vec<u32> = layout.values.iter().map(|(s, _)| *s).collect();
        assert_eq!(starts, vec![0, 238, 480]);
        assert_eq!(layout.values[2].1.offset, 488);
        assert_eq!((b.len(), layout.count_pages), (960, 2));
        assert!(b[476..480].iter().all(|&x| x == 0), "padding");
        assert_eq!(
            entries_from(&b, 0).len(),
            2,
            "the padding ends page 0's entries"
        );
        assert_eq!(entries_from(&b, 480).len(), 1);
        let mut t = Runs::default();
        t.register(
            &RunLayout {
                first_page: 7,
                ..layout
            },
            512,
        );
        let p = &t.runs[&7];
        assert_eq!(
            (p[0].entries, p[0].first_start, p[0].live_bytes),
            (2, 0, 460)
        );
        assert_eq!(
            (p[1].entries, p[1].first_start, p[1].live_bytes),
            (1, 0, 230)
        );
        // A value of about a page: each alone on its page, read from one.
        let big = vec![1u8; 460];
        let e: Vec<(&[u8], &[u8])> = vec![(b"a", &big), (b"b", &big)];
        let (_, layout) = pack(&e, 512).pop().unwrap();
        let starts: Vec<u32> = layout.values.iter().map(|(s, _)| *s).collect();
        assert_eq!((starts, layout.count_pages), (vec![0, 480], 2));
    }

    #[test]
    fn damaged_tables_are_refused() {
        let mut t = Runs::default();
        let v = vec![1u8; 100];
        let (_, layout) = pack(&[(b"a", &v)], 4096).pop().unwrap();
        t.register(
            &RunLayout {
                first_page: 9,
                ..layout
            },
            4096,
        );
        let b = t.encode();
        assert!(Runs::decode(&b[..b.len() - 1]).is_err());
        assert!(Runs::decode(&[]).is_err());
        let mut bad = b.clone();
        bad[4] = 9; // nine runs claimed
        assert!(Runs::decode(&bad).is_err());
        let mut live = b.clone();
        live[value_table::RUNS.end() + 10 + 2] = 5; // live above entries
        assert!(Runs::decode(&live).is_err());
        // Two runs out of page order (the fuzzer's find: they decoded, and
        // encoded again in order, to other bytes), or one run twice.
        let mut two = Runs::default();
        for first in [9, 30] {
            let (_, l) = pack(&[(b"a", &v)], 4096).pop().unwrap();
            two.register(
                &RunLayout {
                    first_page: first,
                    ..l
                },
                4096,
            );
        }
        let b = two.encode();
        let run = value_table::RUNS.end();
        let one = value_table::RUN_PAGES.end() + value_table::PAGE_LIVE_BYTES.end();
        let swapped = [&b[..run], &b[run + one..], &b[run..run + one]].concat();
        assert!(Runs::decode(&swapped).is_err(), "runs out of order");
        let mut twice = b.clone();
        twice[run + one..run + one + 8].copy_from_slice(&9u64.to_le_bytes());
        assert!(Runs::decode(&twice).is_err(), "one run twice");
        assert_eq!(Runs::decode(&b), Ok(two));
        // Runs may overlap: a run of three pages at 9, a later one started
        // on its freed page 10.
        let big = vec![2u8; 3000];
        let e: Vec<(&[u8], &[u8])> = vec![(b"x", &big), (b"y", &big), (b"z", &big)];
        let (_, l) = pack(&e, 4096).pop().unwrap();
        assert_eq!(l.count_pages, 3);
        let mut over = Runs::default();
        over.register(
            &RunLayout {
                first_page: 9,
                ..l.clone()
            },
            4096,
        );
        over.register(
            &RunLayout {
                first_page: 10,
                ..l
            },
            4096,
        );
        assert_eq!(Runs::decode(&over.encode()), Ok(over));
    }
}
