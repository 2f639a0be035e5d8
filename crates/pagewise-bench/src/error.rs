use std::path::PathBuf;

/// Errors of the benchmark harness. Each says what failed, where, and what to do.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("engine {engine}: {what}")]
    Engine { engine: &'static str, what: String },
    #[error("engine {0:?} is not compiled into this binary: rebuild with `--features peers` (redb, lmdb, sqlite) or `--features peers-all` (adds rocksdb)")]
    NotCompiled(String),
    #[error(
        "unknown engine {0:?}: expected one of pagewise, redb, lmdb, sqlite, rocksdb, btreemap"
    )]
    UnknownEngine(String),
    #[error("engine {engine} does not support {what}; run this workload on another engine")]
    Unsupported {
        engine: &'static str,
        what: &'static str,
    },
    #[error("{flags}: {what}")]
    Settings { flags: String, what: String },
    #[error("bad workload spec {spec:?}: {what}")]
    BadSpec { spec: String, what: String },
    #[error("{what} ({path}): {source}")]
    Os {
        what: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("memory cgroup unavailable: {why}; use `--memory-cap fadvise` to trim the page cache instead")]
    MemCap { why: String },
    #[error("interrupted: the run stopped before finishing this phase; completed phases were written, its loop device and image were removed")]
    Interrupted,
    #[error("`{cmd}` failed: {stderr}")]
    Command { cmd: String, stderr: String },
    #[error("read back of key {key} in table {table} returned {found}, expected {expected}")]
    Verify {
        table: String,
        key: String,
        found: String,
        expected: String,
    },
}

impl BenchError {
    pub(crate) fn engine(engine: &'static str, e: impl std::fmt::Display) -> Self {
        Self::Engine {
            engine,
            what: e.to_string(),
        }
    }

    pub(crate) fn os(
        what: impl Into<String>,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Self::Os {
            what: what.into(),
            path: path.into(),
            source,
        }
    }
}

pub type Result<T> = std::result::Result<T, BenchError>;
