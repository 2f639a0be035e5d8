//! The exception hierarchy: `pagewise.Error` and one subclass per kind of
//! engine error a caller handles differently. Messages are the engine's.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use std::path::PathBuf;

create_exception!(
    pagewise,
    Error,
    PyException,
    "Base class of every pagewise error."
);
create_exception!(
    pagewise,
    OptionsError,
    Error,
    "Invalid options, tree name or tree kind, or a feature the Db does not support."
);
create_exception!(
    pagewise,
    LimitError,
    Error,
    "A key or value longer than the engine accepts."
);
create_exception!(
    pagewise,
    LockedError,
    Error,
    "The Db is open in another process or another Db object: close that one first."
);
create_exception!(
    pagewise,
    CorruptError,
    Error,
    "The file is not a pagewise Db, is truncated, or fails a checksum: restore it from a backup."
);
create_exception!(
    pagewise,
    ClosedError,
    Error,
    "The Db was closed (its trees, batches, snapshots, transactions and iterators raise this from then on), or the snapshot or transaction used has ended."
);
create_exception!(
    pagewise,
    ConflictError,
    Error,
    "A transaction's commit found that something it read changed since it began; nothing was written: run the transaction again."
);
create_exception!(
    pagewise,
    SnapshotTooOldError,
    Error,
    "A read through a snapshot (or transaction) older than the Db's snapshot_max_age: take a new one, or open the Db with a larger bound."
);
create_exception!(
    pagewise,
    ReadOnlyError,
    Error,
    "A write on a Db opened with read_only=True, or a read-only open that needs recovery."
);
create_exception!(
    pagewise,
    ExistsError,
    Error,
    "Db.create on a path that exists."
);
create_exception!(
    pagewise,
    NotFoundError,
    Error,
    "Db.open on a path that does not exist."
);

/// The Python exception for an engine error; the message is the engine's.
pub fn to_py(e: pagewise::Error) -> PyErr {
    use pagewise::Error as E;
    let msg = e.to_string();
    match e {
        E::Options(_)
        | E::TreeName { .. }
        | E::TreeKind { .. }
        | E::NoMergeOperator { .. }
        | E::Unsupported { .. } => OptionsError::new_err(msg),
        E::KeyTooLarge { .. } | E::ValueTooLarge { .. } => LimitError::new_err(msg),
        E::Locked { .. } => LockedError::new_err(msg),
        E::NotADatabase { .. } | E::Truncated { .. } | E::Checksum { .. } | E::Corrupt { .. } => {
            CorruptError::new_err(msg)
        }
        E::Closed { .. } => ClosedError::new_err(msg),
        E::ReadOnly { .. } | E::NeedsRecovery { .. } => ReadOnlyError::new_err(msg),
        E::AlreadyExists { .. } => ExistsError::new_err(msg),
        E::Conflict { .. } => ConflictError::new_err(msg),
        E::SnapshotTooOld { .. } => SnapshotTooOldError::new_err(msg),
        E::NotFound { .. } => NotFoundError::new_err(msg),
        _ => Error::new_err(msg),
    }
}

/// The engine's "closed" error for a Db this package already closed.
pub fn closed(path: &std::path::Path) -> PyErr {
    to_py(pagewise::Error::Closed {
        path: PathBuf::from(path),
    })
}

/// ClosedError for a snapshot or transaction that has ended; `msg` says
/// which and what to do instead.
pub fn ended(msg: &'static str) -> PyErr {
    ClosedError::new_err(msg)
}

/// Whether a `with` block raised, from `__exit__`'s arguments.
pub fn block_raised(exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
    exc.get_item(0).is_ok_and(|t| !t.is_none())
}

/// An options error raised by this package (same class as the engine's).
pub fn options(msg: String) -> PyErr {
    to_py(pagewise::Error::Options(msg))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("OptionsError", py.get_type::<OptionsError>())?;
    m.add("LimitError", py.get_type::<LimitError>())?;
    m.add("LockedError", py.get_type::<LockedError>())?;
    m.add("CorruptError", py.get_type::<CorruptError>())?;
    m.add("ClosedError", py.get_type::<ClosedError>())?;
    m.add("ReadOnlyError", py.get_type::<ReadOnlyError>())?;
    m.add("ExistsError", py.get_type::<ExistsError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("ConflictError", py.get_type::<ConflictError>())?;
    m.add("SnapshotTooOldError", py.get_type::<SnapshotTooOldError>())?;
    Ok(())
}
