//! Writes `tests/fixtures/v3/` with the version-3 engine (run by hand:
//! `cargo test -p pagewise --test v3_fixture_gen -- --ignored`).

use pagewise::{Db, Options};

/// The version-3 fixture's history: phases of (key, value or None for a
/// remove), a checkpoint after each (applied in batches of 100 by
/// `tests/v3_fixture_gen.rs` at the commit that added the fixture, the last
/// one of format 3). Tree "t", 512 B pages, delta flushes
/// with T = 200 and 512 B blocks, so the last checkpoints leave delta blocks
/// on leaves and on branches.
fn v3_script() -> Vec<Vec<(Vec<u8>, Option<Vec<u8>>)>> {
    let k = |i: u32| format!("k{i:05}").into_bytes();
    let load = (0..2000u32)
        .map(|n| {
            let i = n * 7919 % 2000;
            (k(i), Some(format!("v{i}-a").into_bytes()))
        })
        .collect();
    let update = (0..2000u32)
        .step_by(13)
        .map(|i| (k(i), Some(format!("v{i}-b").into_bytes())))
        .collect();
    let remove = (0..2000u32).step_by(29).map(|i| (k(i), None)).collect();
    let add = (0..2000u32)
        .step_by(101)
        .map(|i| {
            let mut key = k(i);
            key.push(b'x');
            (key, Some(format!("new {i}").into_bytes()))
        })
        .collect();
    vec![load, update, remove, add]
}

/// Writes `tests/fixtures/v3/` (run by hand with the version-3 engine:
/// `cargo test -p pagewise --test upgrade -- --ignored write_v3_fixture`).
#[test]
#[ignore]
fn write_v3_fixture() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v3");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("v3.pw");
    let _ = std::fs::remove_file(&p);
    let opts = Options::default()
        .page_size(512)
        .direct_io(false)
        .delta_flush(Some(pagewise::DeltaFlush {
            threshold_bytes: 200,
            block_bytes: 512,
        }));
    let db = Db::create(&p, opts).unwrap();
    db.tree("t").unwrap();
    for phase in v3_script() {
        for chunk in phase.chunks(100) {
            let mut b = pagewise::Batch::new();
            for (key, val) in chunk {
                match val {
                    Some(v) => b.insert("t", key, v),
                    None => b.remove("t", key),
                }
            }
            db.apply(b).unwrap();
        }
        db.checkpoint().unwrap();
    }
    assert!(db.check().unwrap().is_ok());
    db.close().unwrap();
    std::fs::write(dir.join("v3.pw-wal"), b"").unwrap();
    let _ = std::fs::remove_file(dir.join("v3.pw-lock"));
    // Delta blocks on leaves (kind 2) and on branches (kind 3) are live.
    let data = std::fs::read(&p).unwrap();
    let pages: Vec<&[u8]> = data.chunks(512).collect();
    let newest = pages[2..].iter().map(|p| u64_at(p, 16)).max().unwrap();
    let bases: Vec<u8> = pages
        .iter()
        .filter(|p| p[4] == 6 && u64_at(p, 16) == newest)
        .map(|p| pages[u64_at(p, 32) as usize][4])
        .collect();
    eprintln!("live delta blocks' base kinds: {bases:?}");
    assert!(bases.contains(&2) && bases.contains(&3));
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

