//! Replays the kept crash cases and the committed seed corpus through the
//! fuzz entries, runs random and mutated inputs through them, and (on
//! request) writes the seed corpus from databases the engine writes.

use super::*;
use crate::index::bepsilon::{BEpsilonOptions, Compression};
use crate::{Db, DeltaFlush, Options};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Kept crash cases (`tests/fuzz_cases/<target>/`).
fn cases_dir() -> PathBuf {
    manifest_dir().join("tests/fuzz_cases")
}

/// The committed seed corpus (`fuzz/corpus/<target>/` at the repository root).
fn corpus_dir() -> PathBuf {
    manifest_dir().join("../../fuzz/corpus")
}

/// The files of `dir` (none if it does not exist), sorted by name.
fn files_in(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = rd.map(|e| e.unwrap().path()).collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect()
}

#[test]
fn kept_cases_and_the_seed_corpus_replay() {
    for &(name, entry) in TARGETS {
        let seeds = files_in(&corpus_dir().join(name));
        assert!(!seeds.is_empty(), "fuzz/corpus/{name} holds no seed");
        let cases = files_in(&cases_dir().join(name));
        for (path, bytes) in cases.iter().chain(&seeds) {
            println!("replaying {}", path.display());
            entry(bytes);
        }
    }
}

/// Every kept-cases folder names a target.
#[test]
fn kept_cases_name_targets() {
    for entry in std::fs::read_dir(cases_dir()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            TARGETS.iter().any(|&(t, _)| t == name),
            "tests/fuzz_cases/{name} is not a fuzz target"
        );
    }
}

/// Sample size of the random test per target (the fuzzer runs the long
/// campaigns: docs/reliability.md).
const SMOKE_INPUTS: usize = 300;

/// A seed to repeat a failed run of the random test with (it prints the
/// seed it drew): set it here, run, and put it back to None.
const REPEAT_SEED: Option<u64> = None;

/// Files per target that `write_seed_corpus` keeps.
const CORPUS_FILES: usize = 16;

/// Random bytes and randomly mutated seeds through every entry (a short
/// stand-in for the fuzzer that CI runs).
#[test]
fn random_and_mutated_inputs_never_panic() {
    let seed = REPEAT_SEED.unwrap_or_else(|| rand::thread_rng().gen::<u64>());
    println!("seed {seed} (REPEAT_SEED = Some({seed}) in src/fuzz/tests.rs repeats this run)");
    let mut rng = SmallRng::seed_from_u64(seed);
    for &(name, entry) in TARGETS {
        let seeds = files_in(&corpus_dir().join(name));
        for i in 0..SMOKE_INPUTS {
            let input = match seeds.len() {
                0 => random_bytes(&mut rng),
                n if i % 2 == 0 => mutated(&seeds[i / 2 % n].1, &mut rng),
                _ => random_bytes(&mut rng),
            };
            entry(&input);
        }
    }
}

fn random_bytes(rng: &mut SmallRng) -> Vec<u8> {
    let n = rng.gen_range(0..700);
    (0..n).map(|_| rng.gen()).collect()
}

/// `b` with a few bytes changed, and sometimes cut short; the first bytes
/// (the entries' context) keep their value more often than not.
fn mutated(b: &[u8], rng: &mut SmallRng) -> Vec<u8> {
    let mut out = b.to_vec();
    if out.is_empty() {
        return out;
    }
    for _ in 0..rng.gen_range(1..4) {
        let at = rng.gen_range(0..out.len());
        out[at] = match rng.gen_range(0..3) {
            0 => rng.gen(),
            1 => out[at] ^ (1 << rng.gen_range(0..8)),
            _ => 0xff,
        };
    }
    if rng.gen_ratio(1, 8) {
        out.truncate(rng.gen_range(0..out.len()));
    }
    out
}

/// The page size's code in the entries' context byte.
fn ps_code(ps: usize) -> u8 {
    (ps / crate::MIN_PAGE_SIZE).trailing_zeros() as u8
}

/// Seed inputs per target, deduplicated.
#[derive(Default)]
struct Seeds(BTreeMap<&'static str, BTreeMap<u32, Vec<u8>>>);

impl Seeds {
    fn add(&mut self, target: &'static str, input: Vec<u8>) {
        let key = crc32c::crc32c(&input);
        self.0.entry(target).or_default().insert(key, input);
    }
}

/// Writes the committed seed corpus, `fuzz/corpus/`, [`CORPUS_FILES`]
/// per target. Run: `cargo test -p pagewise --lib
/// fuzz::tests::write_seed_corpus -- --ignored`.
#[test]
#[ignore = "writes the fuzz seed corpus"]
fn write_seed_corpus() {
    write_corpus(&corpus_dir(), CORPUS_FILES);
}

/// Writes every seed input to `fuzz/corpus-full/` (git-ignored), where
/// fuzz runs grow their corpus.
#[test]
#[ignore = "writes the full fuzz seed corpus"]
fn write_full_corpus() {
    write_corpus(&manifest_dir().join("../../fuzz/corpus-full"), usize::MAX);
}

/// The seed inputs cut from two databases the engine writes, at most
/// `limit` per target, into `out/<target>/`.
fn write_corpus(out: &Path, limit: usize) {
    let mut seeds = Seeds::default();
    for ps in [512, 4096] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seed.pw");
        let wal = write_db(&path, ps);
        seeds_of_file(&std::fs::read(&path).unwrap(), ps, &mut seeds);
        seeds_of_log(&wal, &mut seeds);
    }
    for &(name, entry) in TARGETS {
        let all = seeds.0.get(name).cloned().unwrap_or_default();
        assert!(!all.is_empty(), "no seed for {name}");
        let d = out.join(name);
        std::fs::create_dir_all(&d).unwrap();
        // Spread the kept ones over the whole set (it is in crc order).
        let step = all.len().div_ceil(limit);
        for (key, input) in all.iter().step_by(step) {
            entry(input);
            std::fs::write(d.join(format!("seed-{key:08x}")), input).unwrap();
        }
        println!(
            "{name}: {} seeds, {} kept",
            all.len(),
            all.len().div_ceil(step)
        );
    }
}

/// A database of both tree kinds written through several checkpoints, with
/// delta-flushed B+tree pages and overflow values; returns its log file's
/// bytes as they were before the last checkpoint.
fn write_db(path: &Path, ps: usize) -> Vec<u8> {
    let delta = DeltaFlush {
        threshold_bytes: 2048,
        block_bytes: 512,
    };
    let opts = Options::default()
        .page_size(ps)
        .direct_io(false)
        .delta_flush(Some(delta));
    let db = Db::create(path, opts).unwrap();
    let bt = db.tree("btree").unwrap();
    let be_opts = |c| {
        BEpsilonOptions::default()
            .node_bytes(8192)
            .leaf_bytes(4096)
            .basement_bytes(512)
            .fanout(4)
            .compression(c)
    };
    let kinds = [Compression::None, Compression::Lz4, Compression::Zstd];
    let be: Vec<_> = kinds
        .iter()
        .enumerate()
        .map(|(i, &c)| db.tree_with(&format!("be{i}"), TreeKind::BEpsilon(be_opts(c))))
        .collect::<crate::Result<_>>()
        .unwrap();
    let mut wal = Vec::new();
    for round in 0..4u32 {
        for i in 0..300u32 {
            let k = format!("key{:05}", (i * 7919 + round * 13) % 1000);
            let long = i % 50 == 0;
            let v = vec![b'a' + (i % 26) as u8; if long { 3 * ps } else { 5 + i as usize % 40 }];
            bt.insert(k.as_bytes(), &v).unwrap();
            be[(i % 3) as usize].insert(k.as_bytes(), &v).unwrap();
            if i % 50 == 25 {
                // A value the B-epsilon trees pack into value runs (4 KiB
                // pages; 512-byte pages give it an extent of its own).
                let packed = vec![b'p'; 600];
                be[(i % 3) as usize].insert(k.as_bytes(), &packed).unwrap();
            }
            if i % 9 == 0 {
                bt.remove(k.as_bytes()).unwrap();
                be[(i % 3) as usize].remove(k.as_bytes()).unwrap();
            }
        }
        db.sync().unwrap();
        wal = std::fs::read(crate::wal_path(path)).unwrap();
        db.checkpoint().unwrap();
    }
    db.close().unwrap();
    wal
}

/// Seeds from a database file's pages, its catalog and its node extents.
fn seeds_of_file(file: &[u8], ps: usize, seeds: &mut Seeds) {
    let path = Path::new("seed");
    let code = ps_code(ps);
    let mut extent: Vec<u8> = Vec::new();
    for (pid, pg) in file.chunks_exact(ps).enumerate() {
        let Ok(h) = page::verify(pg, pid as u64, &KINDS, path, 0) else {
            continue;
        };
        let payload = &pg[HDR..HDR + h.used as usize];
        seeds.add("page", [&[0, code][..], pg].concat());
        match h.kind {
            Kind::Meta => seeds_of_superblock(file, pg, ps, seeds),
            Kind::Leaf | Kind::Branch | Kind::BranchBases => {
                let sel = [Kind::Leaf, Kind::Branch, Kind::BranchBases]
                    .iter()
                    .position(|&k| k == h.kind)
                    .unwrap() as u8;
                let head = [code, sel, h.count as u8, (h.count >> 8) as u8];
                seeds.add("btree_node", [&head[..], payload].concat());
            }
            Kind::Delta => seeds_of_delta(file, payload, ps, seeds),
            Kind::BEpsilon => {
                if h.aux == 0 && !extent.is_empty() {
                    seeds_of_bepsilon(&std::mem::take(&mut extent), ps, seeds);
                }
                extent.extend_from_slice(payload);
            }
            _ => {}
        }
    }
    if !extent.is_empty() {
        seeds_of_bepsilon(&extent, ps, seeds);
    }
}

/// The payload bytes of extent `e` of `file`.
fn extent_bytes(file: &[u8], e: &Extent, ps: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for p in e.first_page..e.end_page() {
        let pg = &file[p as usize * ps..(p as usize + 1) * ps];
        let used = get_u32(pg, hdr::USED.at) as usize;
        out.extend_from_slice(&pg[HDR..HDR + used]);
    }
    out.truncate(e.len_bytes as usize);
    out
}

/// Seeds from a superblock: its catalog and the catalog's records.
fn seeds_of_superblock(file: &[u8], pg: &[u8], ps: usize, seeds: &mut Seeds) {
    let code = ps_code(ps);
    let sb = Superblock::decode(pg).unwrap();
    if sb.catalog.len_bytes == 0 {
        return;
    }
    let cat = extent_bytes(file, &sb.catalog, ps);
    seeds.add("catalog", [&[code][..], &cat].concat());
    for e in Catalog::decode(&cat).unwrap().trees {
        if e.kind == crate::store::catalog::KIND_BTREE {
            seeds.add("descriptors", [&[0, code][..], &e.root].concat());
            continue;
        }
        seeds.add("descriptors", [&[1, code, e.kind][..], &e.params].concat());
        let sel = if e.params.len() == 16 { 2 | 8 } else { 2 };
        seeds.add(
            "descriptors",
            [&[sel, code][..], &e.params, &e.root].concat(),
        );
        seeds.add("descriptors", [&[3, code][..], &e.root[..16]].concat());
        if let Ok(m) = bepsilon::Meta::decode(&e.params, &e.root, ps) {
            seeds_of_value_table(file, m.values.ext, ps, seeds);
        }
    }
}

/// Seeds from a B-epsilon tree's value table at `ext`: the table, its first
/// run's payload, and a reference to that run's first value with the table.
fn seeds_of_value_table(file: &[u8], ext: Option<Extent>, ps: usize, seeds: &mut Seeds) {
    let Some(ext) = ext else {
        return;
    };
    let code = ps_code(ps);
    let table = extent_bytes(file, &ext, ps);
    seeds.add("value_table", [&[0, code][..], &table].concat());
    let runs = Runs::decode(&table).unwrap();
    let Some((&first_page, pages)) = runs.runs.iter().next() else {
        return;
    };
    let cap = crate::store::extent::page_payload_bytes(ps) as u64;
    let count_pages = pages.len() as u64;
    let run = Extent {
        first_page,
        count_pages,
        len_bytes: count_pages * cap,
    };
    let payload = extent_bytes(file, &run, ps);
    seeds.add("value_table", [&[2, code, 0, 0][..], &payload].concat());
    if let Some(&(_, _, offset, len)) = runs::entries_from(&payload, 0).first() {
        let r = PackedRef {
            first_page,
            offset: offset as u32,
            len: len as u32,
        };
        seeds.add(
            "value_table",
            [&[1, code][..], &r.encode(), &table].concat(),
        );
    }
}

/// Seeds from a delta block: alone, and with its base page's payload.
fn seeds_of_delta(file: &[u8], payload: &[u8], ps: usize, seeds: &mut Seeds) {
    let code = ps_code(ps);
    let base_pid = get_u64(payload, 0) as usize;
    let Some(base) = file.get(base_pid * ps..(base_pid + 1) * ps) else {
        return;
    };
    let Ok(h) = page::verify(
        base,
        base_pid as u64,
        btree::PAGE_KINDS,
        Path::new("seed"),
        0,
    ) else {
        return;
    };
    let sel = btree::PAGE_KINDS.iter().position(|&k| k == h.kind).unwrap() as u8;
    let base = &base[HDR..HDR + h.used as usize];
    let (count, len) = (h.count.to_le_bytes(), (base.len() as u16).to_le_bytes());
    let head = [code, sel, count[0], count[1], len[0], len[1]];
    seeds.add("btree_delta", [&head[..], base, payload].concat());
}

/// Seeds from a B-epsilon node's bytes: the node and its partitions.
fn seeds_of_bepsilon(b: &[u8], ps: usize, seeds: &mut Seeds) {
    let Ok(n) = format::decode_full(b, ps) else {
        return;
    };
    seeds.add("bepsilon_node", [&[0, 3, ps_code(ps)][..], b].concat());
    let (_, pivots, _, parts) = contents(&n);
    for (i, raw) in parts.iter().enumerate() {
        let lo = i.checked_sub(1).map_or(&[][..], |p| &pivots[p][..]);
        let hi = pivots.get(i).map_or(&[][..], |p| &p[..]);
        if lo.len() > 255 || hi.len() > 255 {
            continue;
        }
        let flags = n.is_leaf() as u8;
        let entries = (n.dir[i].entries as u16).to_le_bytes();
        let mut input = vec![flags, lo.len() as u8];
        input.extend_from_slice(lo);
        input.push(hi.len() as u8);
        input.extend_from_slice(hi);
        input.extend_from_slice(&entries);
        input.extend_from_slice(raw);
        seeds.add("bepsilon_part", input);
    }
}

/// Seeds from a log file: its first records, and each record's payload.
fn seeds_of_log(wal: &[u8], seeds: &mut Seeds) {
    if wal.len() < record::REC_HDR {
        return;
    }
    seeds.add("log_record", wal[..wal.len().min(8192)].to_vec());
    let first = record::RecordId {
        epoch: get_u64(wal, 8),
        db_id: get_u32(wal, 28),
        lsn: get_u64(wal, 16),
    };
    for (_, payload) in record::scan_bytes(wal, first).unwrap() {
        seeds.add("log_ops", payload);
    }
}
