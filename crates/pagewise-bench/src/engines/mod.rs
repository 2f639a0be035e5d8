//! Adapters: one file per engine. Peers compile only with their cargo feature.

pub mod btreemap;
#[cfg(feature = "heed")]
pub mod lmdb;
pub mod pagewise;
#[cfg(feature = "redb")]
pub mod redb;
#[cfg(feature = "rocksdb")]
pub mod rocksdb;
#[cfg(feature = "rusqlite")]
pub mod sqlite;

#[cfg(test)]
mod tests;
