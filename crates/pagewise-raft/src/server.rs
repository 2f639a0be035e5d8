//! One cluster node: openraft on pagewise storage, served over HTTP on a
//! loopback address (the README's "Raft cluster" lists the calls).
//!
//! | route | body / query | answer |
//! | --- | --- | --- |
//! | `POST /kv/put` | `{"key","value"}` | `{"index"}` once committed and applied |
//! | `POST /kv/delete` | `{"key"}` | `{"index"}` |
//! | `POST /kv/batch` | `{"ops":[{"op":"put","key","value"},{"op":"delete","key"}]}` | `{"index"}` |
//! | `GET /kv/get?key=K` | | `{"value"}` (null if absent), linearizable |
//! | `GET /kv/range?from=A&to=B&limit=N` | `to` optional, `limit` at most 10000 | `{"pairs":[[k,v],...]}`, linearizable |
//! | `POST /cluster/init` | | this node becomes a one-node cluster |
//! | `POST /cluster/add-learner` | `{"id","addr"}` | once the learner caught up |
//! | `POST /cluster/change-membership` | `[ids]` | once the new membership is committed |
//! | `GET /cluster/metrics` | | openraft's metrics as JSON |
//! | `POST /raft/{append,snapshot,vote}` | openraft's RPCs | (peers only) |
//!
//! A write or read sent to a node that is not the leader answers 421 with
//! `{"error","leader_id","leader_addr"}`; bad input answers 400.

use crate::network::Network;
use crate::{NodeId, Request, StateMachine, TypeConfig};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use openraft::error::{ForwardToLeader, RaftError};
use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};
use openraft::{BasicNode, Config, Raft, SnapshotPolicy};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// Largest `limit` of a range read.
pub const MAX_RANGE_LIMIT: usize = 10_000;

/// How to run a node (the `pagewise serve` flags).
#[derive(Clone, Debug)]
pub struct ServeOptions {
    pub id: NodeId,
    /// Where this node listens: a loopback address (this build serves
    /// 127.0.0.1 / ::1 only).
    pub listen: SocketAddr,
    pub db_path: PathBuf,
    pub heartbeat_ms: u64,
    pub election_min_ms: u64,
    pub election_max_ms: u64,
    /// Build a snapshot once this many entries were applied since the last.
    pub snapshot_logs: u64,
    /// Entries kept in the log behind the last snapshot (the rest is purged).
    pub keep_logs: u64,
    /// Longest a peer may take to take one snapshot chunk (at most
    /// [`SNAPSHOT_CHUNK_BYTES`], sent as JSON) and, with the last, to install it.
    pub snapshot_timeout_ms: u64,
}

/// Bytes of snapshot per install RPC.
pub const SNAPSHOT_CHUNK_BYTES: u64 = 1 << 20;

/// Largest request body the peer routes accept: a snapshot chunk as JSON (a
/// byte takes up to 4 characters) and append batches of large entries fit;
/// a larger append is refused with 413 and the sender halves its batch
/// (`crate::network`). axum's own default (2 MB) refused every snapshot
/// chunk once a snapshot passed about 600 KB.
pub const PEER_BODY_LIMIT_BYTES: usize = 64 << 20;
const _: () = assert!(4 * SNAPSHOT_CHUNK_BYTES as usize + (1 << 16) < PEER_BODY_LIMIT_BYTES);

impl ServeOptions {
    /// Checks the options, naming the flag at fault.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.listen.ip().is_loopback(),
            "--listen {}: this build serves a loopback address only (127.0.0.1:PORT)",
            self.listen
        );
        anyhow::ensure!(self.id > 0, "--id must be at least 1");
        anyhow::ensure!(self.snapshot_logs > 0, "--snapshot-logs must be at least 1");
        self.raft_config().map(|_| ())
    }

    fn raft_config(&self) -> anyhow::Result<Config> {
        let c = Config {
            cluster_name: "pagewise".into(),
            heartbeat_interval: self.heartbeat_ms,
            election_timeout_min: self.election_min_ms,
            election_timeout_max: self.election_max_ms,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_logs),
            max_in_snapshot_log_to_keep: self.keep_logs,
            install_snapshot_timeout: self.snapshot_timeout_ms,
            snapshot_max_chunk_size: SNAPSHOT_CHUNK_BYTES,
            ..Default::default()
        };
        c.validate().map_err(|e| {
            anyhow::anyhow!("--heartbeat-ms / --election-min-ms / --election-max-ms: {e}")
        })
    }
}

#[derive(Clone)]
struct App {
    id: NodeId,
    addr: String,
    raft: Raft<TypeConfig>,
    sm: StateMachine,
}

type Reply = (StatusCode, Json<Value>);

/// Runs the node until SIGINT or SIGTERM, then shuts Raft down and closes
/// the Db.
pub async fn serve(opts: ServeOptions) -> anyhow::Result<()> {
    opts.validate()?;
    let (log, sm) = crate::open(&opts.db_path)?;
    let config = Arc::new(opts.raft_config()?);
    let raft = Raft::new(opts.id, config, Network::default(), log, sm.clone()).await?;
    let app = App {
        id: opts.id,
        addr: opts.listen.to_string(),
        raft: raft.clone(),
        sm,
    };
    let listener = tokio::net::TcpListener::bind(opts.listen).await?;
    eprintln!("pagewise serve: node {} on http://{}", opts.id, opts.listen);
    axum::serve(listener, router(app))
        .with_graceful_shutdown(stop_signal())
        .await?;
    raft.shutdown()
        .await
        .map_err(|e| anyhow::anyhow!("raft shutdown: {e}"))?;
    Ok(())
}

async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// The routes peers call (`crate::network`), for any storage under `raft`.
pub fn raft_router(raft: Raft<TypeConfig>) -> Router {
    Router::new()
        .route("/raft/append", post(raft_append))
        .route("/raft/snapshot", post(raft_snapshot))
        .route("/raft/vote", post(raft_vote))
        .layer(axum::extract::DefaultBodyLimit::max(PEER_BODY_LIMIT_BYTES))
        .with_state(raft)
}

fn router(app: App) -> Router {
    let peers = raft_router(app.raft.clone());
    Router::new()
        .route("/kv/put", post(kv_put))
        .route("/kv/delete", post(kv_delete))
        .route("/kv/batch", post(kv_batch))
        .route("/kv/get", get(kv_get))
        .route("/kv/range", get(kv_range))
        .route("/cluster/init", post(cluster_init))
        .route("/cluster/add-learner", post(cluster_add_learner))
        .route(
            "/cluster/change-membership",
            post(cluster_change_membership),
        )
        .route("/cluster/metrics", get(cluster_metrics))
        .with_state(app)
        .merge(peers)
}

type RaftState = State<Raft<TypeConfig>>;

async fn raft_append(
    State(raft): RaftState,
    Json(rpc): Json<AppendEntriesRequest<TypeConfig>>,
) -> Json<Value> {
    Json(json!(raft.append_entries(rpc).await))
}

async fn raft_snapshot(
    State(raft): RaftState,
    Json(rpc): Json<InstallSnapshotRequest<TypeConfig>>,
) -> Json<Value> {
    Json(json!(raft.install_snapshot(rpc).await))
}

async fn raft_vote(State(raft): RaftState, Json(rpc): Json<VoteRequest<NodeId>>) -> Json<Value> {
    Json(json!(raft.vote(rpc).await))
}

fn ok(v: Value) -> Reply {
    (StatusCode::OK, Json(v))
}

fn bad(msg: String) -> Reply {
    (StatusCode::BAD_REQUEST, Json(json!({ "error": msg })))
}

/// A Raft error as an answer: 421 naming the leader, else 503.
fn raft_err<E>(e: RaftError<NodeId, E>) -> Reply
where
    E: std::error::Error + openraft::TryAsRef<ForwardToLeader<NodeId, BasicNode>>,
{
    if let Some(f) = e.forward_to_leader::<BasicNode>() {
        let addr = f.leader_node.as_ref().map(|n| n.addr.clone());
        let body = json!({ "error": e.to_string(), "leader_id": f.leader_id, "leader_addr": addr });
        return (StatusCode::MISDIRECTED_REQUEST, Json(body));
    }
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({ "error": e.to_string() })),
    )
}

async fn write(app: &App, req: Request) -> Reply {
    if let Err(e) = req.validate() {
        return bad(e.to_string());
    }
    match app.raft.client_write(req).await {
        Ok(r) => ok(json!({ "index": r.data.index })),
        Err(e) => raft_err(e),
    }
}

#[derive(Deserialize)]
struct Put {
    key: String,
    value: String,
}

#[derive(Deserialize)]
struct Key {
    key: String,
}

async fn kv_put(State(app): State<App>, Json(p): Json<Put>) -> Reply {
    write(&app, Request::put(p.key, p.value)).await
}

async fn kv_delete(State(app): State<App>, Json(k): Json<Key>) -> Reply {
    write(&app, Request::delete(k.key)).await
}

async fn kv_batch(State(app): State<App>, Json(r): Json<Request>) -> Reply {
    write(&app, r).await
}

async fn kv_get(State(app): State<App>, Query(k): Query<Key>) -> Reply {
    if let Err(e) = app.raft.ensure_linearizable().await {
        return raft_err(e);
    }
    match app.sm.get(&k.key) {
        Ok(v) => ok(json!({ "value": v })),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({ "error": e })),
        ),
    }
}

#[derive(Deserialize)]
struct RangeQuery {
    from: String,
    to: Option<String>,
    limit: Option<usize>,
}

async fn kv_range(State(app): State<App>, Query(q): Query<RangeQuery>) -> Reply {
    let limit = q.limit.unwrap_or(100);
    if limit > MAX_RANGE_LIMIT {
        return bad(format!("limit {limit}: at most {MAX_RANGE_LIMIT}"));
    }
    if let Err(e) = app.raft.ensure_linearizable().await {
        return raft_err(e);
    }
    match app.sm.range(&q.from, q.to.as_deref(), limit) {
        Ok(pairs) => ok(json!({ "pairs": pairs })),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({ "error": e })),
        ),
    }
}

async fn cluster_init(State(app): State<App>) -> Reply {
    let mut nodes = BTreeMap::new();
    nodes.insert(
        app.id,
        BasicNode {
            addr: app.addr.clone(),
        },
    );
    match app.raft.initialize(nodes).await {
        Ok(()) => ok(json!({ "initialized": app.id })),
        Err(e) => (
            StatusCode::CONFLICT,
            Json(json!({ "error": e.to_string() })),
        ),
    }
}

#[derive(Deserialize)]
struct Learner {
    id: NodeId,
    addr: String,
}

async fn cluster_add_learner(State(app): State<App>, Json(l): Json<Learner>) -> Reply {
    match l.addr.parse::<SocketAddr>() {
        Ok(a) if a.ip().is_loopback() => {}
        _ => {
            return bad(format!(
                "addr {}: a loopback address 127.0.0.1:PORT",
                l.addr
            ))
        }
    }
    match app
        .raft
        .add_learner(l.id, BasicNode { addr: l.addr }, true)
        .await
    {
        Ok(r) => ok(json!({ "index": r.log_id.index })),
        Err(e) => raft_err(e),
    }
}

async fn cluster_change_membership(
    State(app): State<App>,
    Json(ids): Json<BTreeSet<NodeId>>,
) -> Reply {
    if ids.is_empty() {
        return bad("the new membership needs at least one node id".into());
    }
    match app.raft.change_membership(ids, false).await {
        Ok(r) => ok(json!({ "index": r.log_id.index })),
        Err(e) => raft_err(e),
    }
}

async fn cluster_metrics(State(app): State<App>) -> Json<Value> {
    let m = app.raft.metrics().borrow().clone();
    Json(json!(m))
}
