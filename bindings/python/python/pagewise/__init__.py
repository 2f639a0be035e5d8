"""pagewise: an SSD-aware, crash-safe, ordered embedded key-value store.

Open a database with :class:`Db`, get named trees with :meth:`Db.tree`, and
use a tree like an ordered ``dict`` of ``bytes`` to ``bytes``::

    import pagewise
    with pagewise.Db("/tmp/example.pw", cache_bytes=64 << 20) as db:
        t = db.tree("orders")
        t[b"k1"] = b"v1"
        for k, v in t.range(b"k", b"l"):
            print(k, v)

A :class:`Snapshot` (``with db.snapshot() as s:``) reads every tree as of
one commit; a :class:`Transaction` (``with db.transaction() as tx:``) reads a
snapshot plus its own writes and commits them atomically on exit, raising
:class:`ConflictError` (nothing written) if something it read changed.
A :class:`Batch` writes without reading. Every engine error is an
:class:`Error`; the subclasses say which kind.
"""

from ._pagewise import (
    DB_OPTIONS,
    FORMAT_VERSION,
    MAX_PAGE_SIZE,
    MERGE_OPERATORS,
    MIN_PAGE_SIZE,
    Batch,
    ClosedError,
    ConflictError,
    CorruptError,
    Db,
    Error,
    ExistsError,
    Iterator,
    LimitError,
    LockedError,
    NotFoundError,
    OptionsError,
    ReadOnlyError,
    ReadableTree,
    Snapshot,
    SnapshotTooOldError,
    SnapshotTree,
    Transaction,
    Tree,
    __version__,
    load_probe_results,
    load_tune_results,
    probe,
    tune,
)

__all__ = [
    "DB_OPTIONS",
    "FORMAT_VERSION",
    "MAX_PAGE_SIZE",
    "MERGE_OPERATORS",
    "MIN_PAGE_SIZE",
    "Batch",
    "ClosedError",
    "ConflictError",
    "CorruptError",
    "Db",
    "Error",
    "ExistsError",
    "Iterator",
    "LimitError",
    "LockedError",
    "NotFoundError",
    "OptionsError",
    "ReadOnlyError",
    "ReadableTree",
    "Snapshot",
    "SnapshotTooOldError",
    "SnapshotTree",
    "Transaction",
    "Tree",
    "__version__",
    "load_probe_results",
    "load_tune_results",
    "probe",
    "tune",
]
