//! Keyword arguments of `Db(...)`, `Db.create` and `Db.open` into
//! `pagewise::Options`, and of `Db.tree(..., kind="bepsilon", ...)` into
//! `pagewise::BEpsilonOptions`. Unknown names are a TypeError, values of the
//! wrong type a TypeError, values out of range an OptionsError.

use crate::errors;
use pagewise::{BEpsilonOptions, Compression, DeltaFlush, Durability, Options, TreeKind};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict};
use std::time::Duration;

/// The keyword arguments `Db` accepts, in the stub's order.
pub const DB_OPTIONS: [&str; 15] = [
    "page_size",
    "cache_bytes",
    "dirty_percent",
    "durability",
    "direct_io",
    "read_ahead_pages",
    "wal_limit_bytes",
    "sparse_log",
    "delta_flush",
    "append_fill",
    "read_only",
    "merge_operator",
    "snapshot_max_age",
    "value_collect_pages",
    "value_collect_live_pct",
];

const BEPSILON_OPTIONS: [&str; 7] = [
    "node_bytes",
    "leaf_bytes",
    "basement_bytes",
    "fanout",
    "compression",
    "level",
    "value_extent_bytes",
];

fn check_names(kw: &Bound<'_, PyDict>, known: &[&str], what: &str) -> PyResult<()> {
    for k in kw.keys() {
        let name: String = k.extract()?;
        if !known.contains(&name.as_str()) {
            return Err(PyTypeError::new_err(format!(
                "unknown {what} option {name:?}; known: {}",
                known.join(", ")
            )));
        }
    }
    Ok(())
}

/// A non-negative integer option that fits `T`.
fn uint<T: TryFrom<u64>>(name: &str, v: &Bound<'_, PyAny>) -> PyResult<T> {
    if v.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{name} must be an int, not bool"
        )));
    }
    let n: i128 = v
        .extract()
        .map_err(|_| PyTypeError::new_err(format!("{name} must be an int")))?;
    u64::try_from(n)
        .ok()
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| {
            errors::options(format!(
                "{name} {n} is out of range (a non-negative integer)"
            ))
        })
}

fn boolean(name: &str, v: &Bound<'_, PyAny>) -> PyResult<bool> {
    v.downcast::<PyBool>()
        .map(|b| b.is_true())
        .map_err(|_| PyTypeError::new_err(format!("{name} must be True or False")))
}

fn text(name: &str, v: &Bound<'_, PyAny>) -> PyResult<String> {
    v.extract()
        .map_err(|_| PyTypeError::new_err(format!("{name} must be a str")))
}

fn durability(v: &Bound<'_, PyAny>) -> PyResult<Durability> {
    match text("durability", v)?.as_str() {
        "sync" => Ok(Durability::Sync),
        "buffered" => Ok(Durability::Buffered),
        other => Err(errors::options(format!(
            "durability {other:?} must be \"sync\" (a write returns once it is on disk) or \"buffered\" (durable at the next sync, checkpoint or close)"
        ))),
    }
}

/// `delta_flush=True` (the default thresholds), False/None (off), or a dict
/// with `threshold_bytes` and/or `block_bytes`.
fn delta_flush(v: &Bound<'_, PyAny>) -> PyResult<Option<DeltaFlush>> {
    if v.is_none() {
        return Ok(None);
    }
    if let Ok(b) = v.downcast::<PyBool>() {
        return Ok(b.is_true().then(DeltaFlush::default));
    }
    let d = v.downcast::<PyDict>().map_err(|_| {
        PyTypeError::new_err(
            "delta_flush must be True, False, None or a dict with threshold_bytes and block_bytes",
        )
    })?;
    check_names(d, &["threshold_bytes", "block_bytes"], "delta_flush")?;
    let mut df = DeltaFlush::default();
    if let Some(t) = d.get_item("threshold_bytes")? {
        df.threshold_bytes = uint("threshold_bytes", &t)?;
    }
    if let Some(b) = d.get_item("block_bytes")? {
        df.block_bytes = uint("block_bytes", &b)?;
    }
    Ok(Some(df))
}

/// A positive, finite number of seconds, or None (no bound).
fn seconds(name: &str, v: &Bound<'_, PyAny>) -> PyResult<Option<Duration>> {
    if v.is_none() {
        return Ok(None);
    }
    if v.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{name} must be a number of seconds or None, not bool"
        )));
    }
    let s: f64 = v
        .extract()
        .map_err(|_| PyTypeError::new_err(format!("{name} must be a number of seconds or None")))?;
    match Duration::try_from_secs_f64(s) {
        Ok(d) if !d.is_zero() => Ok(Some(d)),
        _ => Err(errors::options(format!(
            "{name} {s} must be a positive number of seconds (None: no bound)"
        ))),
    }
}

fn merge_operator(o: Options, v: &Bound<'_, PyAny>) -> PyResult<Options> {
    if v.is_none() {
        return Ok(o);
    }
    let name = text("merge_operator", v)?;
    match pagewise::builtin_merge_operator(&name) {
        Some(op) => Ok(o.merge_operator(op)),
        None => Err(errors::options(format!(
            "merge operator {name:?} is not built in; choose one of {}",
            pagewise::BUILTIN_MERGE_OPERATORS.join(", ")
        ))),
    }
}

/// `Options` from `Db`'s keyword arguments (absent ones keep the engine's defaults).
pub fn db_options(kw: Option<&Bound<'_, PyDict>>) -> PyResult<Options> {
    let mut o = Options::default();
    let Some(kw) = kw else { return Ok(o) };
    check_names(kw, &DB_OPTIONS, "Db")?;
    for (k, v) in kw.iter() {
        let name: String = k.extract()?;
        o = match name.as_str() {
            "page_size" => o.page_size(uint(&name, &v)?),
            "cache_bytes" => o.cache_bytes(uint(&name, &v)?),
            "dirty_percent" => o.dirty_percent(uint(&name, &v)?),
            "durability" => o.durability(durability(&v)?),
            "direct_io" => o.direct_io(boolean(&name, &v)?),
            "read_ahead_pages" => o.read_ahead(uint(&name, &v)?),
            "wal_limit_bytes" => o.wal_limit(uint(&name, &v)?),
            "sparse_log" => o.sparse_log(boolean(&name, &v)?),
            "delta_flush" => o.delta_flush(delta_flush(&v)?),
            "append_fill" => o.append_fill(
                v.extract()
                    .map_err(|_| PyTypeError::new_err("append_fill must be a float"))?,
            ),
            "read_only" => o.read_only(boolean(&name, &v)?),
            "merge_operator" => merge_operator(o, &v)?,
            "snapshot_max_age" => o.snapshot_max_age(seconds(&name, &v)?),
            "value_collect_pages" => o.value_collect_pages(uint(&name, &v)?),
            "value_collect_live_pct" => o.value_collect_live_pct(uint(&name, &v)?),
            _ => unreachable!("names were checked against DB_OPTIONS"),
        };
    }
    Ok(o)
}

fn compression(v: &Bound<'_, PyAny>) -> PyResult<Compression> {
    match text("compression", v)?.as_str() {
        "none" => Ok(Compression::None),
        "lz4" => Ok(Compression::Lz4),
        "zstd" => Ok(Compression::Zstd),
        other => Err(errors::options(format!(
            "compression {other:?} must be \"none\", \"lz4\" or \"zstd\""
        ))),
    }
}

/// The tree kind from `kind` ("btree" or "bepsilon") and B-epsilon options.
pub fn tree_kind(kind: &str, kw: Option<&Bound<'_, PyDict>>) -> PyResult<TreeKind> {
    let given = kw.is_some_and(|d| !d.is_empty());
    match kind {
        "btree" if given => Err(PyTypeError::new_err(
            "B+trees take no options (node_bytes, fanout... are B-epsilon options)",
        )),
        "btree" => Ok(TreeKind::BTree),
        "bepsilon" => bepsilon(kw).map(TreeKind::BEpsilon),
        other => Err(errors::options(format!(
            "tree kind {other:?} must be \"btree\" or \"bepsilon\""
        ))),
    }
}

fn bepsilon(kw: Option<&Bound<'_, PyDict>>) -> PyResult<BEpsilonOptions> {
    let mut o = BEpsilonOptions::default();
    let Some(kw) = kw else { return Ok(o) };
    check_names(kw, &BEPSILON_OPTIONS, "B-epsilon tree")?;
    for (k, v) in kw.iter() {
        let name: String = k.extract()?;
        match name.as_str() {
            "node_bytes" => o.node_bytes = uint(&name, &v)?,
            "leaf_bytes" if v.is_none() => o.leaf_bytes = None,
            "leaf_bytes" => o.leaf_bytes = Some(uint(&name, &v)?),
            "basement_bytes" => o.basement_bytes = uint(&name, &v)?,
            "fanout" => o.fanout = uint(&name, &v)?,
            "compression" => o.compression = compression(&v)?,
            "level" => o.level = uint(&name, &v)?,
            "value_extent_bytes" if v.is_none() => o.value_extent_bytes = None,
            "value_extent_bytes" => o.value_extent_bytes = Some(uint(&name, &v)?),
            _ => unreachable!("names were checked against BEPSILON_OPTIONS"),
        }
    }
    Ok(o)
}
