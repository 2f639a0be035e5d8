//! The lifetime contract (docs/design.md, "Lifetime"): `Db::close`
//! checkpoints, releases the lock and closes every handle; handles then
//! return `Error::Closed`, and nothing written through them after close
//! reaches the file or the log. Also tree kinds chosen at creation.

use pagewise::{Batch, Db, Durability, Error, Options, TreeKind};
use pagewise_io::{CrashMode, Fs, SimFs};
use std::path::Path;
use std::sync::Arc;

fn closed<T: std::fmt::Debug>(r: pagewise::Result<T>) -> bool {
    matches!(r, Err(Error::Closed { .. }))
}

/// README.md's engine example, line for line, then the reopen a user would
/// try next.
#[test]
fn readme_example_runs_as_written_and_the_path_reopens() -> pagewise::Result<()> {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("orders.pw");
    let db = Db::create(
        &path,
        Options::default()
            .page_size(8192) // fixed at creation
            .cache_bytes(256 << 20) // buffer pool, bytes (clean and changed nodes)
            .dirty_percent(75) // changed nodes may take this much before a checkpoint (default)
            .durability(Durability::Sync) // ack after fsync (group commit); or Buffered
            .direct_io(true),
    )?;
    let orders = db.tree("orders")?; // named, ordered trees
    orders.insert(b"o:1001", b"...")?; // values up to 1 GiB (overflow extents)
    let v = orders.get(b"o:1001")?;
    assert_eq!(v.as_deref(), Some(&b"..."[..]));
    for kv in orders.range(&b"o:1000"[..]..&b"o:2000"[..]).rev() {
        let (_k, _v) = kv?;
    }
    for kv in orders.prefix(b"o:10") {
        kv?;
    }
    let (first, last) = (orders.first()?, orders.last()?);
    assert_eq!(first, last);
    let mut b = Batch::new(); // atomic across trees
    b.insert("orders", b"o:1002", b"...");
    b.insert("by_customer", b"c:7/o:1002", b"");
    b.remove("orders", b"o:1001");
    db.apply(b)?;
    db.sync()?; // Buffered mode: make everything durable
    let _ = format!("{:#?}", db.stats()); // I/O by category, cache, height, fill
    assert!(db.check()?.is_ok()); // every page checksum + tree invariants
    db.close()?;
    // `orders` is still alive: the path opens again all the same.
    let db = Db::open(&path, Options::default())?;
    assert_eq!(
        db.tree("orders")?.get(b"o:1002")?.as_deref(),
        Some(&b"..."[..])
    );
    assert!(closed(orders.get(b"o:1002")), "the old handle is closed");
    db.close()
}

#[test]
fn every_handle_returns_closed_after_close_and_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("db");
    let o = || Options::default().page_size(4096).direct_io(false);
    let db = Db::create(&path, o()).unwrap();
    let t = db.tree("t").unwrap();
    t.insert(b"k", b"before").unwrap();
    let mut it = t.iter();
    let clone = db.clone();
    db.close().unwrap();
    assert!(closed(t.insert(b"k", b"after")));
    assert!(closed(t.remove(b"k")));
    assert!(closed(t.get(b"k")));
    assert!(closed(t.contains(b"k")));
    assert!(matches!(it.next(), Some(Err(Error::Closed { .. }))));
    assert!(it.next().is_none(), "a failed iterator ends");
    assert!(closed(clone.tree("t")));
    assert!(closed(clone.sync()));
    assert!(closed(clone.checkpoint()));
    assert!(closed(clone.check()));
    assert!(closed(clone.apply(Batch::new())));
    assert!(closed(clone.clone().close()), "closing twice says so");
    // The lock was released while handles live; nothing after close landed.
    let db = Db::open(&path, o()).unwrap();
    assert_eq!(
        db.tree("t").unwrap().get(b"k").unwrap().as_deref(),
        Some(&b"before"[..])
    );
    drop((t, clone));
    db.close().unwrap();
    let db = Db::open(&path, o()).unwrap();
    assert_eq!(
        db.tree("t").unwrap().get(b"k").unwrap().as_deref(),
        Some(&b"before"[..])
    );
}

#[test]
fn the_lock_error_names_its_cause_once() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("db");
    let _db = Db::create(&path, Options::default().direct_io(false)).unwrap();
    let e = Db::open(&path, Options::default().direct_io(false)).unwrap_err();
    assert!(matches!(e, Error::Locked { .. }), "{e}");
    let source = std::error::Error::source(&e)
        .expect("the OS error is the source")
        .to_string();
    assert!(
        !e.to_string().contains(&source),
        "the message repeats its source: {e}"
    );
}

/// A tree made with `tree_with` exists at once and survives a crash before
/// any checkpoint (its create-tree op is in the log).
#[test]
fn tree_kind_is_logged_and_survives_a_crash() {
    let sim = SimFs::with_alignment(512);
    sim.create_dir_all(Path::new("/db")).unwrap();
    let o = |fs: SimFs| {
        Options::default()
            .page_size(512)
            .direct_io(false)
            .fs(Arc::new(fs))
    };
    let db = Db::create("/db/k", o(sim.clone())).unwrap();
    let t = db.tree_with("events", TreeKind::BTree).unwrap();
    assert_eq!(db.tree_names(), vec!["events".to_string()]);
    assert!(t.is_empty());
    db.tree("other").unwrap().insert(b"a", b"1").unwrap();
    let img = sim.crash(7, CrashMode::DropUnsynced);
    std::mem::forget((t, db)); // the process "died": no close, no checkpoint
    let db = Db::open("/db/k", o(img)).unwrap();
    assert_eq!(db.tree_kind("events"), Some(TreeKind::BTree));
    assert_eq!(db.tree_kind("other"), Some(TreeKind::BTree));
    assert_eq!(
        db.tree_names(),
        vec!["events".to_string(), "other".to_string()]
    );
    assert!(db.tree_with("events", TreeKind::BTree).is_ok());
    assert!(db.check().unwrap().is_ok());
}
