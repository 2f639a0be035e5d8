use super::*;
use crate::AlignedBuf;

fn rw() -> OpenOptions {
    OpenOptions {
        write: true,
        create: true,
        create_new: false,
        direct: DirectMode::Off,
    }
}

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

#[test]
fn writes_are_visible_at_once_durable_after_sync() {
    let fs = SimFs::new();
    fs.create_dir_all(&p("/db")).unwrap();
    let f = fs.open(&p("/db/a"), &rw()).unwrap();
    f.write_at(b"hello", 0).unwrap();
    let mut r = [0u8; 5];
    f.read_at(&mut r, 0).unwrap();
    assert_eq!(&r, b"hello");
    assert_eq!(fs.durable_contents(&p("/db/a")).unwrap(), b"");
    assert_eq!(fs.pending_writes(&p("/db/a")), 1);
    f.sync().unwrap();
    assert_eq!(fs.durable_contents(&p("/db/a")).unwrap(), b"hello");
    f.write_at(b"J", 0).unwrap();
    let after = fs.crash(1, CrashMode::DropUnsynced);
    assert_eq!(after.contents(&p("/db/a")).unwrap(), b"hello");
    let st = fs.file_stats(&p("/db/a")).unwrap();
    assert_eq!(
        (st.writes, st.write_bytes, st.reads, st.read_bytes, st.syncs),
        (2, 6, 1, 5, 1)
    );
}

#[test]
fn namespace_rules() {
    let fs = SimFs::new();
    assert!(matches!(
        fs.open(&p("/nodir/a"), &rw()),
        Err(IoError::Open { .. })
    ));
    assert!(
        fs.open(&p("/a"), &OpenOptions::default()).is_err(),
        "no create"
    );
    let a = fs.open(&p("/a"), &rw()).unwrap();
    let excl = OpenOptions {
        create_new: true,
        ..rw()
    };
    assert!(fs.open(&p("/a"), &excl).is_err());
    a.write_at(&[7; 100], 0).unwrap();
    fs.rename(&p("/a"), &p("/b")).unwrap();
    assert!(!fs.exists(&p("/a")) && fs.exists(&p("/b")));
    // The rename is durable, the unsynced data in the file is not.
    let c = fs.crash(3, CrashMode::DropUnsynced);
    assert_eq!(c.contents(&p("/b")).unwrap(), b"");
    assert!(c.contents(&p("/a")).is_none());
    // A handle survives removal of its name.
    fs.remove(&p("/b")).unwrap();
    a.write_at(&[1; 10], 0).unwrap();
    assert!(fs.files().is_empty());
    assert!(fs.remove(&p("/b")).is_err());
    let ro = fs.open(&p("/c"), &rw()).unwrap();
    drop(ro);
    let ro = fs.open(&p("/c"), &OpenOptions::default()).unwrap();
    assert!(matches!(ro.write_at(b"x", 0), Err(IoError::Io { .. })));
}

#[test]
fn set_len_is_durable_at_once() {
    let fs = SimFs::new();
    let f = fs.open(&p("/f"), &rw()).unwrap();
    f.write_at(&[9; 1000], 0).unwrap();
    f.set_len(600).unwrap();
    f.set_len(800).unwrap();
    let mut want = vec![9u8; 600];
    want.resize(800, 0);
    assert_eq!(fs.contents(&p("/f")).unwrap(), want);
    assert_eq!(
        fs.crash(0, CrashMode::DropUnsynced)
            .contents(&p("/f"))
            .unwrap(),
        vec![0; 800]
    );
    // Everything landing: the shrink cut the pending write, no resurrection.
    f.sync().unwrap();
    assert_eq!(fs.durable_contents(&p("/f")).unwrap(), want);
}

#[test]
fn short_read_past_end() {
    let fs = SimFs::new();
    let f = fs.open(&p("/f"), &rw()).unwrap();
    f.write_at(&[1; 10], 0).unwrap();
    let mut r = [0u8; 20];
    assert!(matches!(
        f.read_at(&mut r, 0),
        Err(IoError::Short { done: 10, .. })
    ));
}

#[test]
fn alignment_is_enforced_for_direct_handles() {
    let fs = SimFs::with_alignment(4096);
    let direct = OpenOptions {
        direct: DirectMode::On,
        ..rw()
    };
    let f = fs.open(&p("/f"), &direct).unwrap();
    assert!(f.is_direct());
    let buf = AlignedBuf::new(4096, 4096);
    f.write_at(&buf, 4096).unwrap();
    let err = f.write_at(&buf, 512).unwrap_err();
    assert!(
        matches!(
            err,
            IoError::Misaligned {
                what: "offset",
                align: 4096,
                ..
            }
        ),
        "{err}"
    );
    let err = f.write_at(&buf[..512], 0).unwrap_err();
    assert!(
        matches!(err, IoError::Misaligned { what: "length", .. }),
        "{err}"
    );
    let unaligned = AlignedBuf::new(8192, 4096);
    let err = f.write_at(&unaligned[1..4097], 0).unwrap_err();
    assert!(
        matches!(
            err,
            IoError::Misaligned {
                what: "buffer address",
                ..
            }
        ),
        "{err}"
    );
    // Buffered handles of the same file are not checked, like the page cache.
    let b = fs.open(&p("/f"), &rw()).unwrap();
    b.write_at(b"x", 3).unwrap();
}

#[test]
fn second_lock_is_refused_until_dropped() {
    let fs = SimFs::new();
    let g = fs.lock(&p("/LOCK")).unwrap();
    let err = fs.clone().lock(&p("/LOCK")).unwrap_err().to_string();
    assert!(err.contains("locked"), "{err}");
    drop(g);
    let _g = fs.lock(&p("/LOCK")).unwrap();
    // A crash releases locks: the process holding them is gone.
    let after = fs.crash(0, CrashMode::DropUnsynced);
    after.lock(&p("/LOCK")).unwrap();
}

/// A hand model of the drive: durable images and the unsynced writes in
/// global issue order, kept independently of SimFs.
#[derive(Default, Clone)]
struct Model {
    durable: Vec<Vec<u8>>,
    pending: Vec<(usize, u64, Vec<u8>)>,
}

fn put(image: &mut Vec<u8>, off: u64, data: &[u8]) {
    let end = off as usize + data.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[off as usize..end].copy_from_slice(data);
}

const FILES: [&str; 3] = ["/d/wal", "/d/pages", "/d/meta"];

/// Random history of writes, syncs and resizes on three files. With
/// `aligned`, writes are whole sectors, so sector atomicity is checkable.
fn history(seed: u64, aligned: bool) -> (SimFs, Model) {
    let mut rng = StdRng::seed_from_u64(seed);
    let fs = SimFs::new();
    fs.create_dir_all(&p("/d")).unwrap();
    let files: Vec<_> = FILES
        .iter()
        .map(|f| fs.open(&p(f), &rw()).unwrap())
        .collect();
    let mut m = Model {
        durable: vec![Vec::new(); 3],
        ..Default::default()
    };
    for step in 0..rng.gen_range(4..24) {
        let i = rng.gen_range(0..3);
        match rng.gen_range(0..10) {
            0 | 1 => {
                files[i].sync().unwrap();
                let (mine, rest): (Vec<_>, Vec<_>) = m.pending.drain(..).partition(|w| w.0 == i);
                mine.iter()
                    .for_each(|(_, o, d)| put(&mut m.durable[i], *o, d));
                m.pending = rest;
            }
            2 if !aligned => {
                let len = rng.gen_range(0..6000u64);
                files[i].set_len(len).unwrap();
                m.durable[i].resize(len as usize, 0);
                for w in m.pending.iter_mut().filter(|w| w.0 == i) {
                    w.2.truncate((len.saturating_sub(w.1) as usize).min(w.2.len()));
                }
                m.pending.retain(|w| !w.2.is_empty());
            }
            _ => {
                let (off, len) = if aligned {
                    (
                        rng.gen_range(0..12u64) * 512,
                        rng.gen_range(1..5usize) * 512,
                    )
                } else {
                    (rng.gen_range(0..6000u64), rng.gen_range(1..3000usize))
                };
                let data: Vec<u8> = (0..len)
                    .map(|_| rng.gen_range(1..=255u8) ^ step as u8)
                    .collect();
                files[i].write_at(&data, off).unwrap();
                m.pending.push((i, off, data));
            }
        }
    }
    (fs, m)
}

fn image(fs: &SimFs, i: usize) -> Vec<u8> {
    fs.contents(&p(FILES[i])).unwrap()
}

fn padded(v: &[u8], len: usize) -> Vec<u8> {
    let mut v = v.to_vec();
    v.resize(len.max(v.len()), 0);
    v
}

#[test]
fn drop_unsynced_leaves_exactly_the_synced_model() {
    for seed in 0..200 {
        let (fs, m) = history(seed, false);
        let c = fs.crash(seed, CrashMode::DropUnsynced);
        for i in 0..3 {
            assert_eq!(image(&c, i), m.durable[i], "seed {seed} file {i}");
            assert_eq!(
                image(&fs, i),
                current(&m, i),
                "seed {seed}: model out of step"
            );
        }
    }
}

fn current(m: &Model, i: usize) -> Vec<u8> {
    let mut img = m.durable[i].clone();
    m.pending
        .iter()
        .filter(|w| w.0 == i)
        .for_each(|(_, o, d)| put(&mut img, *o, d));
    img
}

/// Whether `got` (all files) is the model with the first `k` pending writes
/// landed whole and write `k` landed as some subset of its sectors.
fn is_torn_prefix(m: &Model, k: usize, got: &[Vec<u8>]) -> bool {
    let mut state = m.durable.clone();
    m.pending[..k]
        .iter()
        .for_each(|(i, o, d)| put(&mut state[*i], *o, d));
    (0..3).all(|f| {
        let cut = m.pending.get(k).filter(|w| w.0 == f);
        let max = cut.map_or(0, |w| w.1 as usize + w.2.len());
        if got[f].len() < state[f].len() || got[f].len() > state[f].len().max(max) {
            return false;
        }
        let (g, s) = (padded(&got[f], max), padded(&state[f], max));
        let mut covered = vec![false; g.len()];
        for (off, piece) in cut.map_or(Vec::new(), |w| sectors(w.1, &w.2)) {
            let r = off as usize..off as usize + piece.len();
            covered[r.clone()].iter_mut().for_each(|c| *c = true);
            if g[r.clone()] != *piece && g[r.clone()] != s[r] {
                return false;
            }
        }
        (0..g.len()).all(|b| covered[b] || g[b] == s[b])
    })
}

#[test]
fn torn_write_is_a_prefix_with_one_torn_write() {
    let mut torn_seen = 0;
    let mut cuts = BTreeSet::new();
    for seed in 0..300 {
        let (fs, m) = history(seed, false);
        let (c, rep) = fs.crash_report(seed, CrashMode::TornWrite);
        let got: Vec<_> = (0..3).map(|i| image(&c, i)).collect();
        assert_eq!(rep.pending, m.pending.len(), "seed {seed}");
        let ok = (0..=m.pending.len()).any(|k| is_torn_prefix(&m, k, &got));
        assert!(
            ok,
            "seed {seed}: image is no torn prefix of the write stream ({rep:?})"
        );
        torn_seen += rep.torn;
        cuts.insert(rep.whole * 100 / m.pending.len().max(1));
    }
    assert!(torn_seen > 30, "torn writes happen ({torn_seen})");
    assert!(cuts.len() > 10, "cut points vary: {cuts:?}");
}

#[test]
fn reorder_lands_sector_atomic_subsets_in_any_order() {
    let mut older_won = 0;
    for seed in 0..300 {
        let (fs, m) = history(seed, true);
        let c = fs.crash(seed, CrashMode::Reorder);
        for f in 0..3 {
            let g = image(&c, f);
            let mine: Vec<_> = m.pending.iter().filter(|w| w.0 == f).collect();
            let len = mine
                .iter()
                .map(|w| w.1 as usize + w.2.len())
                .fold(m.durable[f].len(), usize::max);
            assert!(
                g.len() >= m.durable[f].len() && g.len() <= len,
                "seed {seed} file {f} length"
            );
            let (g, d) = (padded(&g, len), padded(&m.durable[f], len));
            for s in (0..len).step_by(SECTOR) {
                let r = s..(s + SECTOR).min(len);
                let from_write = |w: &&(usize, u64, Vec<u8>)| {
                    let o = w.1 as usize;
                    o <= s
                        && s + SECTOR <= o + w.2.len()
                        && w.2[s - o..s - o + r.len()] == g[r.clone()]
                };
                let ok = g[r.clone()] == d[r.clone()] || mine.iter().any(from_write);
                assert!(ok, "seed {seed} file {f}: sector at {s} matches no write");
                // An older write's sector survived under a newer one.
                let newest = mine
                    .iter()
                    .rev()
                    .find(|w| w.1 as usize <= s && s < w.1 as usize + w.2.len());
                if newest.is_some_and(|w| !from_write(w)) && mine.iter().any(from_write) {
                    older_won += 1;
                }
            }
        }
    }
    assert!(older_won > 0, "reordering never let an older write win");
}

#[test]
fn crash_is_reproducible_from_the_seed() {
    let (fs, _) = history(42, false);
    for mode in CrashMode::ALL {
        let a = fs.crash(7, mode);
        let b = fs.crash(7, mode);
        for i in 0..3 {
            assert_eq!(image(&a, i), image(&b, i), "{mode:?}");
        }
    }
}
