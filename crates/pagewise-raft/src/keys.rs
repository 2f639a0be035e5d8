//! The on-disk key layout (docs/design.md, "Raft storage").

/// Log entries: key = index as 8 big-endian bytes (so key order is index
/// order), value = the entry as JSON.
pub const LOG_TREE: &str = "raft.log";
/// Log metadata: [`VOTE`], [`COMMITTED`], [`PURGED`] (JSON values).
pub const META_TREE: &str = "raft.meta";
/// State machine metadata: [`APPLIED`], [`MEMBERSHIP`] (JSON values).
pub const SM_TREE: &str = "raft.sm";
/// The replicated key-value data: the client's keys and values as given.
pub const DATA_TREE: &str = "kv";

pub const VOTE: &[u8] = b"vote";
pub const COMMITTED: &[u8] = b"committed";
pub const PURGED: &[u8] = b"purged";
pub const APPLIED: &[u8] = b"applied";
pub const MEMBERSHIP: &[u8] = b"membership";

/// The key of log index `index`.
pub fn log_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

/// The index a log key names, None if it is not 8 bytes.
pub fn log_index(key: &[u8]) -> Option<u64> {
    let bytes: [u8; 8] = key.try_into().ok()?;
    Some(u64::from_be_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_keys_sort_as_indexes() {
        let indexes = [0u64, 1, 255, 256, 65_535, 1 << 40, u64::MAX];
        for w in indexes.windows(2) {
            assert!(log_key(w[0]) < log_key(w[1]), "{} < {}", w[0], w[1]);
        }
        for i in indexes {
            assert_eq!(log_index(&log_key(i)), Some(i));
        }
        assert_eq!(log_index(b"short"), None);
    }
}
