//! The `pagewise` Python package's native module (`pagewise._pagewise`).

mod batch;
mod bytes;
mod db;
mod errors;
mod iter;
mod lab;
mod options;
mod read;
mod snapshot;
mod transaction;
mod tree;
mod tune;

use pyo3::prelude::*;

/// The extension's Rust allocations (entries a scan or get hands out,
/// batches) go to mimalloc: with glibc's malloc a 100-key scan from Python
/// took 1.5-2.8x as long and a B+tree's batch load 1.4x (docs/benchmarks.md,
/// "Python"). Python's own objects keep Python's allocator.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[pymodule]
fn _pagewise(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<db::Db>()?;
    m.add_class::<read::ReadableTree>()?;
    m.add_class::<tree::Tree>()?;
    m.add_class::<snapshot::Snapshot>()?;
    m.add_class::<snapshot::SnapshotTree>()?;
    m.add_class::<transaction::Transaction>()?;
    m.add_class::<batch::Batch>()?;
    m.add_class::<iter::RangeIter>()?;
    errors::register(m)?;
    m.add_function(wrap_pyfunction!(lab::probe, m)?)?;
    m.add_function(wrap_pyfunction!(lab::load_probe_results, m)?)?;
    m.add_function(wrap_pyfunction!(lab::load_tune_results, m)?)?;
    m.add_function(wrap_pyfunction!(tune::tune, m)?)?;
    m.add("FORMAT_VERSION", pagewise::FORMAT_VERSION)?;
    m.add("MIN_PAGE_SIZE", pagewise::MIN_PAGE_SIZE)?;
    m.add("MAX_PAGE_SIZE", pagewise::MAX_PAGE_SIZE)?;
    m.add(
        "MERGE_OPERATORS",
        pagewise::BUILTIN_MERGE_OPERATORS.to_vec(),
    )?;
    m.add("DB_OPTIONS", options::DB_OPTIONS.to_vec())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
