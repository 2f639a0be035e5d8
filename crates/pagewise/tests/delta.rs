//! Delta blocks on disk (docs/design.md, "Delta blocks for B+tree pages"):
//! damaged, stale or misdirected delta blocks are typed errors on read and
//! problems in `check`; a Db written with deltas opens without the option
//! and consolidates; a version-2 file opens and is upgraded to version 3.

use pagewise::{Db, DeltaFlush, Durability, Error, Options, FORMAT_VERSION};
use std::collections::BTreeMap;
use std::path::Path;

const PS: usize = 4096;
const KIND_DELTA: u8 = 6;

fn opts(delta: bool) -> Options {
    Options::default()
        .page_size(PS)
        .direct_io(false)
        .durability(Durability::Buffered)
        .cache_bytes(1 << 20)
        .delta_flush(delta.then_some(DeltaFlush {
            threshold_bytes: 1500,
            block_bytes: 512,
        }))
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// A Db whose last checkpoint wrote delta blocks: 3,000 keys loaded and
/// checkpointed, then every 40th key rewritten and checkpointed. Returns
/// the expected contents.
fn build(path: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::create(path, opts(true)).unwrap();
    let t = db.tree("t").unwrap();
    let mut want = BTreeMap::new();
    for i in 0..3000 {
        let v = format!("value {i} first").into_bytes();
        t.insert(key(i), &v).unwrap();
        want.insert(key(i), v);
    }
    db.checkpoint().unwrap();
    for i in (0..3000).step_by(40) {
        let v = format!("value {i} second").into_bytes();
        t.insert(key(i), &v).unwrap();
        want.insert(key(i), v);
    }
    db.checkpoint().unwrap();
    let s = db.stats();
    assert!(
        s.delta_rebases > 20,
        "{} nodes kept a base",
        s.delta_rebases
    );
    db.close().unwrap();
    want
}

fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Page ids of the delta blocks the newest checkpoint wrote (those are live:
/// a checkpoint writes only pages its tree references).
fn live_deltas(data: &[u8]) -> Vec<u64> {
    let pages: Vec<&[u8]> = data.chunks(PS).collect();
    let newest = pages[2..].iter().map(|p| get_u64(p, 16)).max().unwrap();
    let deltas: Vec<u64> = (2..pages.len())
        .filter(|&i| pages[i][4] == KIND_DELTA && get_u64(pages[i], 16) == newest)
        .map(|i| i as u64)
        .collect();
    assert!(deltas.len() > 10, "{} live delta blocks", deltas.len());
    deltas
}

/// Recomputes a delta block's checksum (over bytes 4..aux) after an edit.
fn reseal(page: &mut [u8]) {
    let len = get_u32(page, 28) as usize;
    let crc = crc32c::crc32c(&page[4..len]);
    page[0..4].copy_from_slice(&crc.to_le_bytes());
}

/// Applies `edit` to delta block `pid` of the Db at `path`.
fn damage(path: &Path, pid: u64, edit: impl FnOnce(&mut [u8])) {
    let mut data = std::fs::read(path).unwrap();
    edit(&mut data[pid as usize * PS..(pid as usize + 1) * PS]);
    std::fs::write(path, data).unwrap();
}

/// Reads every key; the first error, if any.
fn scan_error(db: &Db) -> Option<Error> {
    db.tree("t").unwrap().iter().find_map(Result::err)
}

/// Opens the damaged Db, expects a typed error naming `pid` from a scan, and
/// a problem naming it from `check`. Returns the error's text.
fn expect_detected(path: &Path, pid: u64, checksum: bool) -> String {
    let db = Db::open(path, opts(true)).unwrap();
    let e = scan_error(&db).expect("the damage is seen by a scan");
    match &e {
        Error::Checksum { page, .. } if checksum => assert_eq!(*page, pid),
        Error::Corrupt { page, .. } if !checksum => assert_eq!(*page, pid),
        other => panic!("unexpected error for damaged delta {pid}: {other:?}"),
    }
    let r = db.check().unwrap();
    let named = format!("page {pid} ");
    assert!(
        r.problems.iter().any(|p| p.contains(&named)),
        "check misses page {pid}: {:?}",
        r.problems
    );
    e.to_string()
}

#[test]
fn deltas_round_trip_and_check_clean() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let want = build(&path);
    live_deltas(&std::fs::read(&path).unwrap());
    let db = Db::open(&path, opts(true)).unwrap();
    let got: BTreeMap<_, _> = db.tree("t").unwrap().iter().map(Result::unwrap).collect();
    assert_eq!(got, want);
    let r = db.check().unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
    // Every page in use is a base page or a delta block (the superblocks
    // and the catalog aside); the rest is free, companions among it.
    assert!(r.pages_checked + 3 >= r.file_pages - r.free_pages, "{r:?}");
}

#[test]
fn flipped_byte_in_a_delta_block_is_a_checksum_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    build(&path);
    let pid = live_deltas(&std::fs::read(&path).unwrap())[3];
    damage(&path, pid, |p| p[60] ^= 0x10);
    expect_detected(&path, pid, true);
}

#[test]
fn stale_delta_whose_base_changed_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    build(&path);
    let pid = live_deltas(&std::fs::read(&path).unwrap())[5];
    // The base crc no longer matches: what a delta sees when its base page
    // was freed by a consolidation and reused.
    damage(&path, pid, |p| {
        p[40] ^= 1;
        reseal(p);
    });
    let e = expect_detected(&path, pid, false);
    assert!(e.contains("stale delta"), "{e}");
}

#[test]
fn delta_naming_another_live_node_as_base_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    build(&path);
    let deltas = live_deltas(&std::fs::read(&path).unwrap());
    let data = std::fs::read(&path).unwrap();
    let other_base = get_u64(&data[deltas[1] as usize * PS..], 32);
    damage(&path, deltas[0], |p| {
        p[32..40].copy_from_slice(&other_base.to_le_bytes());
        reseal(p);
    });
    expect_detected(&path, deltas[0], false);
}

#[test]
fn malformed_records_are_corrupt_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    build(&path);
    let pid = live_deltas(&std::fs::read(&path).unwrap())[2];
    // The first record's key length runs past the records.
    damage(&path, pid, |p| {
        p[57..59].copy_from_slice(&0xfff0u16.to_le_bytes());
        reseal(p);
    });
    expect_detected(&path, pid, false);
}

#[test]
fn deltas_read_and_consolidate_without_the_option() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut want = build(&path);
    let db = Db::open(&path, opts(false)).unwrap();
    let t = db.tree("t").unwrap();
    for i in (0..3000).step_by(7) {
        let v = format!("value {i} third").into_bytes();
        t.insert(key(i), &v).unwrap();
        want.insert(key(i), v);
    }
    db.checkpoint().unwrap();
    let got: BTreeMap<_, _> = t.iter().map(Result::unwrap).collect();
    assert_eq!(got, want);
    let r = db.check().unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
    db.close().unwrap();
    // Every leaf was changed, so no live node is a delta any more.
    let data = std::fs::read(&path).unwrap();
    let newest = data
        .chunks(PS)
        .skip(2)
        .map(|p| get_u64(p, 16))
        .max()
        .unwrap();
    let live = data
        .chunks(PS)
        .skip(2)
        .filter(|p| p[4] == KIND_DELTA && get_u64(p, 16) == newest)
        .count();
    assert_eq!(live, 0);
}

#[test]
fn version_2_file_opens_and_is_upgraded() {
    assert_eq!(FORMAT_VERSION, 10);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::create(&path, opts(false)).unwrap();
    db.tree("t").unwrap().insert(b"k", b"v").unwrap();
    db.close().unwrap();
    // Rewrite both superblocks as version 2 (same layout, version at 40).
    let mut data = std::fs::read(&path).unwrap();
    for slot in 0..2 {
        let page = &mut data[slot * PS..(slot + 1) * PS];
        page[40..44].copy_from_slice(&2u32.to_le_bytes());
        let crc = crc32c::crc32c(&page[4..]);
        page[0..4].copy_from_slice(&crc.to_le_bytes());
    }
    std::fs::write(&path, &data).unwrap();
    let ro = Db::open(&path, opts(false).read_only(true)).unwrap();
    assert_eq!(
        ro.tree("t").unwrap().get(b"k").unwrap().as_deref(),
        Some(&b"v"[..])
    );
    ro.close().unwrap();
    let db = Db::open(&path, opts(true)).unwrap();
    assert_eq!(
        db.tree("t").unwrap().get(b"k").unwrap().as_deref(),
        Some(&b"v"[..])
    );
    db.close().unwrap();
    let data = std::fs::read(&path).unwrap();
    let versions: Vec<(u64, u32)> = (0..2)
        .map(|s| (get_u64(&data[s * PS..], 48), get_u32(&data[s * PS..], 40)))
        .collect();
    let newest = versions.iter().max().unwrap();
    assert_eq!(newest.1, FORMAT_VERSION, "{versions:?}");
}

/// Gets key `i` of `t`, checks it against `want`, and returns the page reads,
/// page bytes read and node read rounds it cost.
fn get_cost(
    db: &Db,
    t: &pagewise::Tree,
    want: &BTreeMap<Vec<u8>, Vec<u8>>,
    i: u32,
) -> (u64, u64, u64) {
    let s0 = db.stats();
    assert_eq!(t.get(key(i)).unwrap().as_ref(), want.get(&key(i)));
    let s1 = db.stats();
    (
        s1.pages.read_ops - s0.pages.read_ops,
        s1.pages.read_bytes - s0.pages.read_bytes,
        s1.node_read_rounds - s0.node_read_rounds,
    )
}

/// A get that misses a leaf flushed as a delta block, under a parent that
/// names its base, reads both in one round (docs/design.md, "Delta blocks
/// for B+tree pages"): in one read of two pages when the delta block lies
/// beside its base ("Delta placement"), else in two reads of a page each.
/// Companions are kept only in memory: after a reopen, one-page overflow
/// values take the free pages beside some bases first, so the deltas
/// written on those bases next lie elsewhere.
#[test]
fn a_miss_on_a_delta_reads_it_and_its_base_in_one_round() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut want = build(&path);
    let db = Db::open(&path, opts(true)).unwrap();
    let t = db.tree("t").unwrap();
    for i in 0..12 {
        let (k, v) = (format!("big{i}").into_bytes(), vec![i as u8; 2000]);
        t.insert(&k, &v).unwrap();
        want.insert(k, v);
    }
    for i in (0..3000).step_by(200) {
        let v = format!("value {i} third").into_bytes();
        t.insert(key(i), &v).unwrap();
        want.insert(key(i), v);
    }
    db.checkpoint().unwrap();
    let apart = db.stats().delta_apart;
    db.close().unwrap();
    let db = Db::open(&path, opts(true)).unwrap();
    let t = db.tree("t").unwrap();
    // The first get also reads the root, whose base nobody names.
    t.get(key(0)).unwrap();
    let (page, mut seen) = (PS as u64, BTreeMap::new());
    for i in (0..3000).step_by(20) {
        let cost = get_cost(&db, &t, &want, i);
        // Hand count (reads, bytes, rounds): a cached leaf reads nothing, a
        // whole leaf one page, a delta leaf two pages in one read (beside its
        // base) or two; every miss is one round.
        assert!(
            [(0, 0, 0), (1, page, 1), (1, 2 * page, 1), (2, 2 * page, 1)].contains(&cost),
            "get {i}: (reads, bytes, rounds) {cost:?}"
        );
        *seen.entry(cost.0 * 10 + cost.1 / page).or_insert(0) += 1;
    }
    let (beside, away) = (seen.get(&12), seen.get(&22));
    println!("third checkpoint placed {apart} deltas apart; misses by reads and pages: {seen:?}");
    assert!(beside >= Some(&10), "{beside:?} delta misses were one read");
    assert!(
        away >= Some(&1) && apart >= 1,
        "{away:?} delta misses were two reads"
    );
}

/// A 16 KiB-page Db of 3,000 keys whose leaves are flushed as delta blocks
/// of the keys rewritten after the first checkpoint (every `step`th), under
/// threshold `threshold_bytes`. Returns the expected contents.
fn build_large_pages(
    path: &Path,
    threshold_bytes: usize,
    step: usize,
    rounds: usize,
) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::create(path, opts_large(threshold_bytes)).unwrap();
    let t = db.tree("t").unwrap();
    let mut want = BTreeMap::new();
    for round in 0..rounds {
        for i in (0..3000).filter(|i| round == 0 || i % step == round - 1) {
            let v = format!("value {i} round {round} {}", "x".repeat(80)).into_bytes();
            t.insert(key(i as u32), &v).unwrap();
            want.insert(key(i as u32), v);
        }
        db.checkpoint().unwrap();
    }
    assert!(db.stats().delta_rebases > 10);
    db.close().unwrap();
    want
}

fn opts_large(threshold_bytes: usize) -> Options {
    opts(true).page_size(16384).delta_flush(Some(DeltaFlush {
        threshold_bytes,
        block_bytes: 512,
    }))
}

/// With pages larger than a delta block, a miss on a delta leaf reads the
/// delta block's first 4 KiB with its whole base page: in one read when the
/// delta lies on the page after its base (docs/design.md, "Delta
/// placement"). A delta block longer than 4 KiB after its base is read
/// again whole (`Pager::whole_delta_block`), one more round; such blocks
/// never lie before their base (it would not fit the page's tail). Hand
/// counts of each get's (reads, bytes, rounds): nothing (cached), one page
/// (a whole leaf), head + page in one read (two when the delta lies apart),
/// and for the long blocks one more page in one more read.
#[test]
fn a_miss_on_a_delta_reads_its_head_and_its_base() {
    let (head, page) = (4096u64, 16384u64);
    // (threshold, rewritten key step, cost of a miss on a delta after its
    // base, cost of one on a delta apart from it)
    for (threshold, step, delta_cost, apart_cost) in [
        (1500, 40, (1, head + page, 1), (2, head + page, 1)),
        (12000, 2, (2, head + 2 * page, 2), (3, head + 2 * page, 2)),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let want = build_large_pages(&path, threshold, step, 2);
        let db = Db::open(&path, opts_large(threshold)).unwrap();
        let t = db.tree("t").unwrap();
        t.get(key(0)).unwrap();
        let mut pairs = 0;
        for i in (0..3000).step_by(60) {
            let cost = get_cost(&db, &t, &want, i);
            assert!(
                [(0, 0, 0), (1, page, 1), delta_cost, apart_cost].contains(&cost),
                "threshold {threshold}, get {i}: (reads, bytes, rounds) {cost:?}"
            );
            pairs += (cost == delta_cost) as u32;
        }
        assert!(pairs >= 10, "threshold {threshold}: {pairs} delta misses");
        let r = db.check().unwrap();
        assert!(r.is_ok(), "{:?}", r.problems);
    }
}

/// Delta blocks written before their bases lie in the last 4 KiB of their
/// pages in a file created as version 7 (docs/design.md, "Delta
/// placement", tail placement): the file holds such tail blocks and no
/// block before its base at a page's start, and a miss on either side reads
/// 4 KiB and the base page in one read, never two whole pages.
#[test]
fn a_delta_before_its_base_lies_in_the_tail_and_reads_as_one_span() {
    let (tail, page) = (4096usize, 16384usize);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    // Round 1 puts deltas after their bases, round 2 (the same leaves
    // changed again) before them: the page after is the durable delta's.
    let want = build_large_pages(&path, 1500, 40, 3);
    let data = std::fs::read(&path).unwrap();
    let block_at = |p: usize, at: usize| {
        let b = &data[p * page + at..];
        b[4] == 6 && get_u64(b, 8) == p as u64 && get_u64(b, 32) == p as u64 + 1
    };
    let pages = data.len() / page;
    let tails = (2..pages).filter(|&p| block_at(p, page - tail)).count();
    let heads = (2..pages).filter(|&p| block_at(p, 0)).count();
    assert!(
        tails >= 5 && heads == 0,
        "{tails} tail blocks, {heads} at page starts"
    );
    for p in (2..pages).filter(|&p| block_at(p, page - tail)) {
        sealed_to_its_records(&data[p * page + page - tail..(p + 1) * page]);
    }
    let db = Db::open(&path, opts_large(1500)).unwrap();
    let t = db.tree("t").unwrap();
    t.get(key(0)).unwrap();
    let (mut spans, span) = (0, (1, (tail + page) as u64, 1));
    for i in (0..3000).step_by(20) {
        let cost = get_cost(&db, &t, &want, i);
        assert!(
            [(0, 0, 0), (1, page as u64, 1), span].contains(&cost),
            "get {i}: (reads, bytes, rounds) {cost:?}"
        );
        spans += (cost == span) as u32;
    }
    assert!(spans >= 20, "{spans} delta misses");
    let r = db.check().unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
}

/// A written delta block (4 KiB here) is sealed over its header and records
/// rounded up to 512 bytes (`aux`, docs/design.md "Delta blocks for B+tree
/// pages"), and is zero past them: checked by hand, with its own crc32c.
fn sealed_to_its_records(block: &[u8]) {
    let (used, aux) = (get_u32(block, 24) as usize, get_u32(block, 28) as usize);
    assert_eq!(aux, (32 + used).div_ceil(512) * 512, "used {used}");
    assert!(
        aux < block.len(),
        "these blocks hold under 3.5 KiB of records"
    );
    let mut resealed = block.to_vec();
    reseal(&mut resealed);
    assert_eq!(resealed, block, "the crc32c over bytes 4..aux");
    assert!(
        block[32 + used..].iter().all(|&b| b == 0),
        "zero past the records"
    );
}

/// The delta Db of `build`, then one key changed without delta flushes: the
/// root is written whole (kind 8) and names the bases of the leaves still
/// flushed as delta blocks. Returns the root's page id.
fn build_whole_root(path: &Path) -> u64 {
    build(path);
    let db = Db::open(path, opts(false)).unwrap();
    db.tree("t").unwrap().insert(key(1), b"changed").unwrap();
    db.close().unwrap();
    let data = std::fs::read(path).unwrap();
    let newest = data
        .chunks(PS)
        .skip(2)
        .map(|p| get_u64(p, 16))
        .max()
        .unwrap();
    let roots: Vec<u64> = (2..data.len() / PS)
        .filter(|&i| {
            let p = &data[i * PS..(i + 1) * PS];
            p[4] == KIND_BRANCH_BASES && get_u64(p, 16) == newest
        })
        .map(|i| i as u64)
        .collect();
    assert_eq!(roots.len(), 1, "one branch written by the last checkpoint");
    roots[0]
}

const KIND_BRANCH_BASES: u8 = 8;

/// A branch entry: (offset of its base field in the page, child, base).
type Entry = (usize, u64, u64);

/// Each entry of a kind-8 branch page (docs/design.md, "B+tree node payload").
fn branch_entries(page: &[u8]) -> Vec<Entry> {
    let count = u16::from_le_bytes([page[6], page[7]]) as usize;
    let mut out = vec![(40, get_u64(page, 32), get_u64(page, 40))];
    let mut at = 48;
    for _ in 1..count {
        let klen = u16::from_le_bytes([page[at], page[at + 1]]) as usize;
        at += 2 + klen;
        out.push((at + 8, get_u64(page, at), get_u64(page, at + 8)));
        at += 16;
    }
    out
}

/// Sets the base field at `at` of the whole page `page` and reseals it.
fn set_base(page: &mut [u8], at: usize, base: u64) {
    page[at..at + 8].copy_from_slice(&base.to_le_bytes());
    let crc = crc32c::crc32c(&page[4..]);
    page[0..4].copy_from_slice(&crc.to_le_bytes());
}

/// The root's entries: those naming a base, and those naming none.
fn root_entries(path: &Path, root: u64) -> (Vec<Entry>, Vec<Entry>) {
    let data = std::fs::read(path).unwrap();
    let (named, whole): (Vec<_>, Vec<_>) =
        branch_entries(&data[root as usize * PS..(root as usize + 1) * PS])
            .into_iter()
            .partition(|e| e.2 != 0);
    assert!(named.len() >= 5 && !whole.is_empty(), "{named:?} {whole:?}");
    assert!(named.iter().all(|e| e.2 >= 2), "no entry is left unnamed");
    (named, whole)
}

#[test]
fn branch_entry_naming_another_base_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let root = build_whole_root(&path);
    let (named, _) = root_entries(&path, root);
    let (at, child, _) = named[0];
    damage(&path, root, |p| set_base(p, at, named[1].2));
    let e = expect_detected(&path, child, false);
    assert!(e.contains("its parent's entry names"), "{e}");
}

#[test]
fn branch_entry_naming_no_base_for_a_delta_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let root = build_whole_root(&path);
    let (named, _) = root_entries(&path, root);
    let (at, child, _) = named[2];
    damage(&path, root, |p| set_base(p, at, 0));
    let e = expect_detected(&path, child, false);
    assert!(e.contains("names no base"), "{e}");
}

#[test]
fn branch_entry_naming_a_base_for_a_whole_page_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let root = build_whole_root(&path);
    let (named, whole) = root_entries(&path, root);
    let (at, child, _) = whole[0];
    damage(&path, root, |p| set_base(p, at, named[0].2));
    let e = expect_detected(&path, child, false);
    assert!(e.contains("whole"), "{e}");
}
