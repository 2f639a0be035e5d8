//! openraft's own storage test suite on pagewise (each case on a fresh Db).

use openraft::testing::{StoreBuilder, Suite};
use pagewise_raft::{LogStore, StateMachine, StorageError, TypeConfig};
use tempfile::TempDir;

struct Builder;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachine), StorageError> {
        let dir = tempfile::tempdir().expect("temp dir");
        let (log, sm) = pagewise_raft::open(dir.path().join("raft.pw")).expect("open storage");
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite() {
    if let Err(e) = Suite::test_all(Builder) {
        panic!("openraft's storage suite failed on pagewise: {e}");
    }
}
