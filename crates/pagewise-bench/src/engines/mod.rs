//! Adapters: one file per engine. Peers compile only with their cargo feature.

pub mod btreemap;
pub mod pagewise;
#[cfg(feature = "heed")]
pub mod lmdb;
#[cfg(feature = "redb")]
pub mod redb;
#[cfg(feature = "rocksdb")]
pub mod rocksdb;
#[cfg(feature = "rusqlite")]
pub mod sqlite;

#[cfg(test)]
mod tests;
