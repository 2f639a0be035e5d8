//! The storage's durability contract on a real Db: one fsync per durable
//! log write, none per apply, and everything back after a reopen.

use openraft::storage::{RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, RaftLogReader};
use pagewise_raft::{Request, TypeConfig};

fn entry(i: u64) -> Entry<TypeConfig> {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), i),
        payload: EntryPayload::Normal(Request::put(format!("k{i:04}"), format!("v{i}"))),
    }
}

fn syncs(sm: &pagewise_raft::StateMachine) -> u64 {
    sm.db().stats().wal.syncs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_fsync_per_log_write_none_per_apply_and_all_back_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("raft.pw");
    {
        let (mut log, mut sm) = pagewise_raft::open(&path).unwrap();
        let s0 = syncs(&sm);
        for g in 0..10u64 {
            log.blocking_append((1 + g * 8..1 + (g + 1) * 8).map(entry))
                .await
                .unwrap();
        }
        assert_eq!(syncs(&sm) - s0, 10, "one fsync per appended group");
        let s1 = syncs(&sm);
        let all = log.try_get_log_entries(1..=80).await.unwrap();
        assert_eq!(all.len(), 80);
        for chunk in all.chunks(8) {
            sm.apply(chunk.to_vec()).await.unwrap();
        }
        assert_eq!(syncs(&sm), s1, "applies ride on the next log sync");
        log.purge(LogId::new(CommittedLeaderId::new(1, 1), 30))
            .await
            .unwrap();
        log.truncate(LogId::new(CommittedLeaderId::new(1, 1), 71))
            .await
            .unwrap();
        assert_eq!(syncs(&sm) - s1, 2, "purge and truncate: one fsync each");
        // Dropped without close: the Db checkpoints on the last handle's drop.
    }
    let (mut log, mut sm) = pagewise_raft::open(&path).unwrap();
    let st = log.get_log_state().await.unwrap();
    assert_eq!(st.last_purged_log_id.map(|l| l.index), Some(30));
    assert_eq!(st.last_log_id.map(|l| l.index), Some(70));
    let left = log.try_get_log_entries(0..100).await.unwrap();
    let idx: Vec<u64> = left.iter().map(|e| e.log_id.index).collect();
    assert_eq!(idx, (31..=70).collect::<Vec<_>>());
    let (applied, _) = sm.applied_state().await.unwrap();
    assert_eq!(applied.map(|l| l.index), Some(80));
    assert_eq!(sm.get("k0080").unwrap().as_deref(), Some("v80"));
    assert_eq!(sm.range("k0001", Some("k0100"), 1000).unwrap().len(), 80);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_installs_replace_the_whole_state() {
    use openraft::RaftSnapshotBuilder;
    let dir = tempfile::tempdir().unwrap();
    let (_l1, mut leader) = pagewise_raft::open(dir.path().join("a.pw")).unwrap();
    let (_l2, mut follower) = pagewise_raft::open(dir.path().join("b.pw")).unwrap();
    leader.apply((1..=20).map(entry)).await.unwrap();
    // The follower holds keys the snapshot does not: they must go.
    follower.apply((100..=105).map(entry)).await.unwrap();
    let snap = leader
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    // Applying goes on after the build; the snapshot keeps its point.
    leader.apply((21..=25).map(entry)).await.unwrap();
    follower
        .install_snapshot(&snap.meta, snap.snapshot)
        .await
        .unwrap();
    assert_eq!(
        follower.applied_state().await.unwrap().0.map(|l| l.index),
        Some(20)
    );
    let pairs = follower.range("k", None, 1000).unwrap();
    let want: Vec<(String, String)> = (1..=20)
        .map(|i| (format!("k{i:04}"), format!("v{i}")))
        .collect();
    assert_eq!(pairs, want);
}
