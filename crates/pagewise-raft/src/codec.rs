//! Value encoding (JSON), errors as openraft wants them, and running the
//! Db's blocking calls off the async runtime.

use crate::StorageError;
use openraft::{AnyError, StorageIOError};
use serde::{de::DeserializeOwned, Serialize};

/// A Raft value as stored.
pub fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("Raft types serialize to JSON")
}

/// A stored Raft value; `what` names it in the error.
pub fn decode<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("{what}: {e}"))
}

/// An error of a storage call of kind `make` (`StorageIOError::read_logs`,
/// ...).
pub fn io_err(
    make: impl FnOnce(AnyError) -> StorageIOError<crate::NodeId>,
    e: impl std::fmt::Display,
) -> StorageError {
    make(AnyError::error(e.to_string())).into()
}

/// Runs `f` (Db calls that may write and fsync) on tokio's blocking pool.
pub async fn blocking<T, F>(f: F) -> Result<T, String>
where
    F: FnOnce() -> Result<T, String> + Send + 'static,
    T: Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => Err(format!("storage task failed: {e}")),
    }
}
