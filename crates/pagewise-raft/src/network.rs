//! openraft's network over HTTP with JSON bodies: `POST /raft/append`,
//! `/raft/snapshot`, `/raft/vote` on the target's `BasicNode::addr`
//! (served by [`crate::server`]).

use crate::{NodeId, TypeConfig};
use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError,
    Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use serde::{de::DeserializeOwned, Serialize};

/// Makes a connection per peer; all share one HTTP client (its pool).
#[derive(Clone, Default)]
pub struct Network {
    client: reqwest::Client,
}

/// The connection to one peer.
pub struct Peer {
    client: reqwest::Client,
    target: NodeId,
    addr: String,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Peer {
        Peer {
            client: self.client.clone(),
            target,
            addr: node.addr.clone(),
        }
    }
}

type RpcErr<E> = RPCError<NodeId, BasicNode, RaftError<NodeId, E>>;

impl Peer {
    /// Posts `req` to `path`; a peer that cannot be reached is
    /// `Unreachable` (openraft backs off), a body over the peer's limit
    /// `PayloadTooLarge` (openraft sends `entries_hint` entries at a time
    /// instead), another HTTP failure a `NetworkError` naming its status, and
    /// a call the peer's Raft refused a `RemoteError`.
    async fn call<Req, Resp, E>(
        &self,
        path: &str,
        req: &Req,
        option: &RPCOption,
        entries_hint: u64,
    ) -> Result<Resp, RpcErr<E>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let url = format!("http://{}/raft/{path}", self.addr);
        let sent = self
            .client
            .post(url)
            .timeout(option.hard_ttl())
            .json(req)
            .send()
            .await;
        let resp = match sent {
            Ok(r) => r,
            Err(e) if e.is_connect() => return Err(RPCError::Unreachable(Unreachable::new(&e))),
            Err(e) => return Err(RPCError::Network(NetworkError::new(&e))),
        };
        let status = resp.status();
        if status == reqwest::StatusCode::PAYLOAD_TOO_LARGE {
            let hint = PayloadTooLarge::new_entries_hint(entries_hint.max(1));
            return Err(RPCError::PayloadTooLarge(hint));
        }
        if !status.is_success() {
            let text = resp.text().await.unwrap_or_default();
            let e = std::io::Error::other(format!("{path}: HTTP {status}: {text}"));
            return Err(RPCError::Network(NetworkError::new(&e)));
        }
        let body: Result<Resp, RaftError<NodeId, E>> = resp
            .json()
            .await
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        body.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcErr<openraft::error::Infallible>> {
        // Too large: half the entries at a time.
        let hint = rpc.entries.len() as u64 / 2;
        self.call("append", &rpc, &option, hint).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RpcErr<InstallSnapshotError>> {
        self.call("snapshot", &rpc, &option, 0).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RpcErr<openraft::error::Infallible>> {
        self.call("vote", &rpc, &option, 0).await
    }
}
