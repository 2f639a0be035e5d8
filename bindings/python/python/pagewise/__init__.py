"""pagewise: an SSD-aware, crash-safe, ordered embedded key-value store.

Open a database with :class:`Db`, get named trees with :meth:`Db.tree`, and
use a tree like an ordered ``dict`` of ``bytes`` to ``bytes``::

    import pagewise
    with pagewise.Db("/tmp/example.pw", cache_bytes=64 << 20) as db:
        t = db.tree("orders")
        t[b"k1"] = b"v1"
        for k, v in t.range(b"k", b"l"):
            print(k, v)

Every engine error is a :class:`Error`; the subclasses say which kind.
Snapshots and multi-statement transactions are not in the engine yet:
batches (:class:`Batch`) are the unit of atomicity.
"""

from ._pagewise import (
    DB_OPTIONS,
    FORMAT_VERSION,
    MAX_PAGE_SIZE,
    MERGE_OPERATORS,
    MIN_PAGE_SIZE,
    Batch,
    ClosedError,
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
    Tree,
    __version__,
    load_probe_results,
    load_tune_results,
    probe,
)

__all__ = [
    "DB_OPTIONS",
    "FORMAT_VERSION",
    "MAX_PAGE_SIZE",
    "MERGE_OPERATORS",
    "MIN_PAGE_SIZE",
    "Batch",
    "ClosedError",
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
    "Tree",
    "__version__",
    "load_probe_results",
    "load_tune_results",
    "probe",
]
