//! pagewise-bench: standard storage workloads (fillseq, fillrandom, overwrite,
//! readrandom, multireadrandom, readseq, scan, YCSB A-F, iiBench,
//! readwhilewriting, txn) run against engines behind one adapter trait
//! ([`Engine`]), measuring throughput over time, latency percentiles, CPU,
//! memory, space amplification and write amplification at the device (a
//! loop-mounted ext4 per run) and at the syscall.
//!
//! Peers (redb, LMDB, SQLite, RocksDB) compile only with the `peers` /
//! `peers-all` features so the default build stays fast.

pub mod cachelimit;
pub mod csd;
pub mod engine;
pub mod engines;
mod error;
pub mod exec;
pub mod iibench;
pub mod interrupt;
pub mod keys;
pub mod loopfs;
pub mod memcap;
pub mod metrics;
pub mod oscache;
pub mod runner;
pub mod sysinfo;
pub mod values;
pub mod workload;

pub use cachelimit::{CacheLimiter, CapChoice, CapScope, MemoryCap};
pub use engine::{
    compiled_engines, open_engine, open_engine_for, Engine, OpenFor, ReadView, Settings,
    SyncPolicy, TxnDone, WriteOp,
};
pub use error::{BenchError, Result};
pub use interrupt::{interrupt, interrupted};
pub use runner::{run, run_with, Measure, PhaseResult, RunConfig};
pub use workload::{Kind, Params, Spec};
