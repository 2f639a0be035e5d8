//! A three-node Raft cluster in one process (nodes talk HTTP over
//! 127.0.0.1, the `pagewise serve` network): replicated writes/s and commit
//! latency at several client counts, then linearizable reads/s, on
//! pagewise storage (one Db per node, and the log and state machine on two
//! Dbs per node) against an in-memory store (the ceiling) and, built with
//! the feature `rocksdb`, a RocksDB store. Prints one markdown table
//! (docs/benchmarks.md, "Raft cluster").
//!
//! `cargo run --release -p pagewise-raft --example raft_bench -- --seconds 10`
//! (with RocksDB: `crates/pagewise-bench/bench/build-with-rocksdb.sh
//! -p pagewise-raft --example raft_bench --features rocksdb`)

mod memstore;
#[cfg(feature = "rocksdb")]
mod rocksstore;

use clap::Parser;
use hdrhistogram::Histogram;
use memstore::{MemLog, MemSm};
use openraft::{BasicNode, Config, Raft, SnapshotPolicy};
use pagewise::{Db, Durability, Options};
use pagewise_raft::network::Network;
use pagewise_raft::{Request, StateMachine, TypeConfig};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    /// Seconds per measurement (writes, then reads, per client count).
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Concurrent clients, comma-separated.
    #[arg(long, default_value = "1,8,64", value_delimiter = ',')]
    clients: Vec<usize>,
    /// Where the Dbs go (a real filesystem: fsyncs must cost what they cost).
    #[arg(long, default_value = "/var/tmp")]
    dir: PathBuf,
    /// Value bytes per write.
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
}

#[derive(Clone, Copy, Debug)]
enum Store {
    Pagewise,
    PagewiseTwoDbs,
    Memory,
    #[cfg(feature = "rocksdb")]
    RocksDb,
}

const STORES: &[Store] = &[
    Store::Pagewise,
    Store::PagewiseTwoDbs,
    #[cfg(feature = "rocksdb")]
    Store::RocksDb,
    Store::Memory,
];

#[derive(Clone)]
enum Reader {
    Pw(StateMachine),
    Mem(MemSm),
    #[cfg(feature = "rocksdb")]
    Rocks(rocksstore::RocksSm),
}

impl Reader {
    fn get(&self, k: &str) -> Option<String> {
        match self {
            Reader::Pw(sm) => sm.get(k).expect("read"),
            Reader::Mem(sm) => sm.get(k),
            #[cfg(feature = "rocksdb")]
            Reader::Rocks(sm) => sm.get(k),
        }
    }
}

/// What a node's storage counts its fsyncs with.
enum Files {
    Pw(Vec<Db>),
    None,
    #[cfg(feature = "rocksdb")]
    Rocks(rocksstore::Node),
}

impl Files {
    fn syncs(&self) -> u64 {
        match self {
            Files::Pw(dbs) => dbs.iter().map(|d| d.stats().wal.syncs).sum(),
            Files::None => 0,
            #[cfg(feature = "rocksdb")]
            Files::Rocks(n) => n.syncs(),
        }
    }
}

struct Cluster {
    rafts: Vec<Raft<TypeConfig>>,
    readers: Vec<Reader>,
    /// Each node's storage files, for fsync counts.
    files: Vec<Files>,
    servers: Vec<tokio::task::JoinHandle<()>>,
}

fn config() -> Arc<Config> {
    let c = Config {
        heartbeat_interval: 100,
        election_timeout_min: 500,
        election_timeout_max: 1000,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(5000),
        max_in_snapshot_log_to_keep: 1000,
        install_snapshot_timeout: 5000,
        snapshot_max_chunk_size: pagewise_raft::server::SNAPSHOT_CHUNK_BYTES,
        ..Default::default()
    };
    Arc::new(c.validate().expect("valid config"))
}

fn db(path: &Path, durability: Durability) -> Db {
    Db::create(path, Options::default().durability(durability)).expect("create Db")
}

async fn node(store: Store, dir: &Path, id: u64) -> (Raft<TypeConfig>, Reader, Files) {
    let p = |s: &str| dir.join(format!("n{id}-{s}.pw"));
    let (cfg, net) = (config(), Network::default());
    match store {
        Store::Pagewise => {
            let d = db(&p("raft"), Durability::Buffered);
            let (log, sm) = pagewise_raft::on_db(d.clone()).expect("storage");
            let raft = Raft::new(id, cfg, net, log, sm.clone())
                .await
                .expect("raft");
            (raft, Reader::Pw(sm), Files::Pw(vec![d]))
        }
        Store::PagewiseTwoDbs => {
            // The state machine on a Db of its own must be Sync (design.md).
            let (dl, ds) = (
                db(&p("log"), Durability::Buffered),
                db(&p("sm"), Durability::Sync),
            );
            let (log, _) = pagewise_raft::on_db(dl.clone()).expect("log storage");
            let (_, sm) = pagewise_raft::on_db(ds.clone()).expect("state machine");
            let raft = Raft::new(id, cfg, net, log, sm.clone())
                .await
                .expect("raft");
            (raft, Reader::Pw(sm), Files::Pw(vec![dl, ds]))
        }
        Store::Memory => {
            let sm = MemSm::default();
            let raft = Raft::new(id, cfg, net, MemLog::default(), sm.clone())
                .await
                .expect("raft");
            (raft, Reader::Mem(sm), Files::None)
        }
        #[cfg(feature = "rocksdb")]
        Store::RocksDb => {
            let n = rocksstore::Node::create(&dir.join(format!("n{id}-rocksdb")));
            let (log, sm) = n.storage();
            let raft = Raft::new(id, cfg, net, log, sm.clone())
                .await
                .expect("raft");
            (raft, Reader::Rocks(sm), Files::Rocks(n))
        }
    }
}

async fn start(store: Store, dir: &Path) -> Cluster {
    let mut c = Cluster {
        rafts: vec![],
        readers: vec![],
        files: vec![],
        servers: vec![],
    };
    let mut members = BTreeMap::new();
    for id in 1..=3u64 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        members.insert(id, BasicNode { addr });
        let (raft, reader, files) = node(store, dir, id).await;
        let app = pagewise_raft::server::raft_router(raft.clone());
        c.servers.push(tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serve");
        }));
        c.rafts.push(raft);
        c.readers.push(reader);
        c.files.push(files);
    }
    c.rafts[0].initialize(members).await.expect("initialize");
    c
}

async fn leader(c: &Cluster) -> usize {
    let t0 = Instant::now();
    loop {
        if let Some(l) = c.rafts[0].metrics().borrow().current_leader {
            return (l - 1) as usize;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "no leader");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Writes from `clients` tasks for `secs`: (writes, latency histogram in µs).
async fn writes(
    raft: &Raft<TypeConfig>,
    clients: usize,
    secs: u64,
    value: &str,
) -> (u64, Histogram<u64>) {
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let (raft, stop, value) = (raft.clone(), stop.clone(), value.to_string());
            tokio::spawn(async move {
                let mut h = Histogram::<u64>::new(3).expect("histogram");
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let req = Request::put(format!("c{c:02}-{n:09}"), value.clone());
                    raft.client_write(req).await.expect("write");
                    h.record(t.elapsed().as_micros() as u64).expect("record");
                    n += 1;
                }
                (n, h)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Histogram::<u64>::new(3).expect("histogram");
    let mut total = 0;
    for t in tasks {
        let (n, h) = t.await.expect("client");
        total += n;
        all.add(h).expect("merge");
    }
    (total, all)
}

/// Linearizable reads (read index, then a local get) for `secs`.
async fn reads(raft: &Raft<TypeConfig>, reader: &Reader, clients: usize, secs: u64) -> u64 {
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let (raft, reader, stop) = (raft.clone(), reader.clone(), stop.clone());
            tokio::spawn(async move {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    raft.ensure_linearizable().await.expect("read index");
                    std::hint::black_box(reader.get(&format!("c{c:02}-{:09}", n % 100)));
                    n += 1;
                }
                n
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for t in tasks {
        total += t.await.expect("reader");
    }
    total
}

async fn measure(store: Store, args: &Args) {
    let dir = tempfile::tempdir_in(&args.dir).expect("temp dir");
    let c = start(store, dir.path()).await;
    let li = leader(&c).await;
    let value = "v".repeat(args.value_bytes);
    for &clients in &args.clients {
        let s0 = c.files[li].syncs();
        let (n, h) = writes(&c.rafts[li], clients, args.seconds, &value).await;
        let fsyncs = c.files[li].syncs() - s0;
        let r = reads(&c.rafts[li], &c.readers[li], clients, args.seconds).await;
        let secs = args.seconds as f64;
        println!(
            "| {store:?} | {clients} | {:.0} | {:.2} | {:.2} | {:.2} | {:.0} |",
            n as f64 / secs,
            h.value_at_quantile(0.5) as f64 / 1000.0,
            h.value_at_quantile(0.99) as f64 / 1000.0,
            fsyncs as f64 / n.max(1) as f64,
            r as f64 / secs
        );
    }
    for r in &c.rafts {
        r.shutdown().await.expect("shutdown");
    }
    for s in &c.servers {
        s.abort();
    }
}

fn main() {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!("| storage | clients | writes/s | p50 commit ms | p99 commit ms | leader fsyncs/write | linearizable reads/s |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for &store in STORES {
        rt.block_on(measure(store, &args));
    }
}
