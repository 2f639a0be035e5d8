//! How cache misses read pages from the data file: each reader's own pread, or
//! one io_uring shared by all readers (`pagewise_io::SharedRing`), which
//! submits concurrent misses together and so shares the per-I/O system call,
//! doorbell and interrupt cost among them (docs/design.md, "Read engine").

use pagewise_io::{Backend, RingStats, SharedRing};
use std::sync::Arc;

/// Which read path serves page reads of the data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReadEngine {
    /// Every reader thread does its own blocking pread.
    Sync,
    /// Reads from all threads go through one shared io_uring.
    Ring,
    /// `Ring` when the data file is opened with direct I/O (reads then reach
    /// the device, where batching pays), else `Sync`.
    Auto,
}

impl ReadEngine {
    pub fn name(self) -> &'static str {
        match self {
            ReadEngine::Sync => "sync",
            ReadEngine::Ring => "ring",
            ReadEngine::Auto => "auto",
        }
    }
}

impl std::fmt::Display for ReadEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ReadEngine {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sync" => Ok(ReadEngine::Sync),
            "ring" => Ok(ReadEngine::Ring),
            "auto" => Ok(ReadEngine::Auto),
            other => Err(format!(
                "unknown read engine '{other}': use 'sync', 'ring' or 'auto'"
            )),
        }
    }
}

/// The read path in effect for an open database.
pub struct ReadPath {
    /// `Sync` or `Ring`, never `Auto`.
    pub engine: ReadEngine,
    /// Why `Ring` was asked for (or implied by `Auto`) but not used.
    pub fallback: Option<String>,
    ring: Option<Arc<SharedRing>>,
}

impl ReadPath {
    pub fn ring_stats(&self) -> Option<RingStats> {
        self.ring.as_ref().map(|r| r.stats())
    }
}

/// Wraps the data file's backend for the requested read engine. A ring that
/// cannot be set up (io_uring disabled, or a simulated or wrapped file in
/// tests) falls back to pread with the reason recorded, so opening never
/// fails for the sake of a faster read path.
pub fn wrap_data(data: Arc<dyn Backend>, asked: ReadEngine) -> (Arc<dyn Backend>, ReadPath) {
    let want_ring = match asked {
        ReadEngine::Sync => false,
        ReadEngine::Ring => true,
        ReadEngine::Auto => data.is_direct(),
    };
    if !want_ring {
        let path = ReadPath {
            engine: ReadEngine::Sync,
            fallback: None,
            ring: None,
        };
        return (data, path);
    }
    match SharedRing::new(data.clone()) {
        Ok(ring) => {
            let ring = Arc::new(ring);
            let path = ReadPath {
                engine: ReadEngine::Ring,
                fallback: None,
                ring: Some(ring.clone()),
            };
            (ring, path)
        }
        Err(e) => {
            let path = ReadPath {
                engine: ReadEngine::Sync,
                fallback: Some(format!("shared io_uring not used, reads use pread: {e}")),
                ring: None,
            };
            (data, path)
        }
    }
}
