//! `Options::event_listener`: every begun checkpoint, leaf write-back and
//! B-epsilon flush is announced, ends before the next of its kind begins
//! (flushes nest), and the counts agree with `Db::stats`, an independent
//! tally kept by the engine's counters.

mod common;
use common::Append;
use pagewise::{
    BEpsilonOptions, Batch, Db, DeltaFlush, Durability, Event, EventListener, Options, TreeKind,
};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Recorder(Mutex<Vec<Event>>);

impl EventListener for Recorder {
    fn on_event(&self, e: &Event) {
        self.0.lock().unwrap().push(*e);
    }
}

/// Begins and ends of each kind pair up in order; returns the counts of
/// (checkpoints, write-backs, outermost flushes, consolidations reported).
fn pairs(events: &[Event]) -> (u64, u64, u64, u64) {
    let (mut ckpt, mut wb, mut depth) = (None, false, 0u32);
    let (mut n_ckpt, mut n_wb, mut n_flush, mut consolidated) = (0, 0, 0, 0);
    for e in events {
        match *e {
            Event::CheckpointBegin {
                generation,
                consolidations,
                ..
            } => {
                assert!(ckpt.is_none() && !wb && depth == 0, "nested checkpoint");
                ckpt = Some(generation);
                consolidated += consolidations;
            }
            Event::CheckpointEnd { generation, .. } => {
                assert_eq!(ckpt.take(), Some(generation), "an end without its begin");
                n_ckpt += 1;
            }
            Event::WriteBackBegin { dirty_bytes } => {
                assert!(ckpt.is_none() && !wb && dirty_bytes > 0);
                wb = true;
            }
            Event::WriteBackEnd { leaves, .. } => {
                assert!(wb && leaves > 0, "a write-back end without its begin");
                (wb, n_wb) = (false, n_wb + 1);
            }
            Event::FlushBegin { height, .. } => {
                assert!(ckpt.is_none() && !wb && height > 0, "a flush of a leaf");
                n_flush += (depth == 0) as u64;
                depth += 1;
            }
            Event::FlushEnd { .. } => {
                assert!(depth > 0, "a flush end without its begin");
                depth -= 1;
            }
            _ => {}
        }
    }
    assert!(ckpt.is_none() && !wb && depth == 0, "work left unended");
    (n_ckpt, n_wb, n_flush, consolidated)
}

#[test]
fn events_pair_up_and_agree_with_stats() {
    let dir = tempfile::tempdir().unwrap();
    let rec = Arc::new(Recorder::default());
    let opts = Options::default()
        .page_size(4096)
        .cache_bytes(1 << 20)
        .durability(Durability::Buffered)
        .direct_io(false)
        .wal_limit(64 << 20)
        .merge_operator(Arc::new(Append))
        .delta_flush(Some(DeltaFlush {
            threshold_bytes: 300,
            block_bytes: 1024,
        }))
        .event_listener(rec.clone());
    let db = Db::create(dir.path().join("ev.pw"), opts).unwrap();
    let kind = TreeKind::BEpsilon(
        BEpsilonOptions::default()
            .node_bytes(8 << 10)
            .basement_bytes(1 << 10)
            .fanout(4),
    );
    db.tree_with("be", kind).unwrap();
    db.tree("bt").unwrap();
    let mut rng = SmallRng::seed_from_u64(11);
    for round in 0..400 {
        let mut b = Batch::new();
        for _ in 0..50 {
            let k = format!("{:06}", rng.gen_range(0..20_000u32));
            b.insert("be", &k, vec![round as u8; rng.gen_range(20..200)]);
            b.upsert("be", &k, [1u8]);
            b.insert("bt", &k, vec![round as u8; rng.gen_range(20..120)]);
        }
        db.apply(b).unwrap();
        if round % 50 == 49 {
            db.checkpoint().unwrap();
        }
    }
    let st = db.stats();
    db.close().unwrap();
    let events = rec.0.lock().unwrap().clone();
    let (ckpt, wb, flush, consolidated) = pairs(&events);
    // Stats were taken before the close, whose checkpoints (up to two: the
    // dirty state, then an empty one so no log run is replayable) only the
    // events count.
    let closing = ckpt - st.checkpoints;
    assert!(
        closing <= 2,
        "{ckpt} checkpoints told, {} counted",
        st.checkpoints
    );
    assert!(st.write_backs > 0 && st.delta_consolidations > 0 && flush > 0);
    assert_eq!(wb, st.write_backs);
    assert!(
        consolidated >= st.delta_consolidations,
        "consolidations reported {consolidated}"
    );
    println!("events: {ckpt} checkpoints, {wb} write-backs, {flush} flushes, {consolidated} consolidations");
}
