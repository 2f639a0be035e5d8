//! `pagewise serve`: one node of a Raft cluster (openraft) on pagewise
//! storage, with an HTTP API on a loopback address (routes:
//! `pagewise_raft::server`; a three-node cluster: README, "Raft cluster").

use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Parser, Debug)]
pub struct Args {
    /// This node's id (at least 1; unique in the cluster).
    #[arg(long)]
    pub id: u64,
    /// Address to listen on; loopback only (127.0.0.1:PORT).
    #[arg(long)]
    pub listen: SocketAddr,
    /// The node's database (created if absent; sidecars PATH-wal, PATH-lock).
    #[arg(long)]
    pub db: PathBuf,
    /// Leader heartbeat interval.
    #[arg(long, default_value_t = 100)]
    pub heartbeat_ms: u64,
    /// Shortest election timeout (a follower hearing no leader this long may stand).
    #[arg(long, default_value_t = 500)]
    pub election_min_ms: u64,
    /// Longest election timeout (each node picks one at random in [min, max)).
    #[arg(long, default_value_t = 1000)]
    pub election_max_ms: u64,
    /// Build a snapshot after this many applied entries since the last one.
    #[arg(long, default_value_t = 5000)]
    pub snapshot_logs: u64,
    /// Entries kept in the log behind the last snapshot; older ones are purged.
    #[arg(long, default_value_t = 1000)]
    pub keep_logs: u64,
    /// Longest a peer may take to receive one snapshot chunk (1 MiB) and to install the whole.
    #[arg(long, default_value_t = 5000)]
    pub snapshot_timeout_ms: u64,
    /// Log the node's and openraft's messages to stderr at this filter
    /// (`error`, `warn`, `info`, `debug`, or per target, e.g.
    /// `warn,openraft::replication=debug`). Off when not given.
    #[arg(long, value_name = "FILTER")]
    pub log: Option<String>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let opts = pagewise_raft::server::ServeOptions {
        id: a.id,
        listen: a.listen,
        db_path: a.db,
        heartbeat_ms: a.heartbeat_ms,
        election_min_ms: a.election_min_ms,
        election_max_ms: a.election_max_ms,
        snapshot_logs: a.snapshot_logs,
        keep_logs: a.keep_logs,
        snapshot_timeout_ms: a.snapshot_timeout_ms,
    };
    opts.validate()?;
    if let Some(filter) = &a.log {
        let filter = tracing_subscriber::EnvFilter::try_new(filter)
            .map_err(|e| anyhow::anyhow!("--log {filter:?}: {e}"))?;
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .init();
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(pagewise_raft::server::serve(opts))
}
