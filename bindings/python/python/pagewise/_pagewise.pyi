"""Type stub of the native module; everything is re-exported by ``pagewise``."""

from os import PathLike
from typing import Any, Callable, Dict, Iterable, List, Literal, Mapping, Optional, Tuple, TypeVar, Union, overload

from typing_extensions import Buffer, Self  # typing_extensions ships with type checkers

BytesLike = Union[bytes, bytearray, memoryview, Buffer]
StrPath = Union[str, PathLike]
_D = TypeVar("_D")

__version__: str
FORMAT_VERSION: int
MIN_PAGE_SIZE: int
MAX_PAGE_SIZE: int
MERGE_OPERATORS: List[str]
DB_OPTIONS: List[str]

class Error(Exception):
    """Base class of every pagewise error; the message is the engine's."""

class OptionsError(Error):
    """Invalid options, tree name or kind, or a feature the Db does not support."""

class LimitError(Error):
    """A key or value longer than the engine accepts."""

class LockedError(Error):
    """The Db is open in another process or another Db object."""

class CorruptError(Error):
    """Not a pagewise Db, truncated, or a checksum mismatch."""

class ClosedError(Error):
    """The Db was closed (its trees, batches, snapshots, transactions and
    iterators raise this), or the snapshot or transaction used has ended."""

class ConflictError(Error):
    """A transaction's commit found that something it read changed since it
    began; nothing was written: run the transaction again."""

class SnapshotTooOldError(Error):
    """A read through a snapshot or transaction older than ``snapshot_max_age``."""

class ReadOnlyError(Error):
    """A write on a read-only Db, or a read-only open that needs recovery."""

class ExistsError(Error):
    """Db.create on a path that exists."""

class NotFoundError(Error):
    """Db.open on a path that does not exist."""

class Db:
    """An open database; closing it closes its trees, batches and iterators.

    Keyword options (engine defaults when absent): ``page_size`` (bytes, a
    power of two in 512..65536, fixed at creation), ``cache_bytes``,
    ``dirty_percent`` (10..90), ``durability`` ("sync" or "buffered"),
    ``direct_io``, ``read_ahead_pages``, ``wal_limit_bytes``, ``sparse_log``,
    ``delta_flush`` (True, False/None or ``{"threshold_bytes", "block_bytes"}``),
    ``append_fill`` (0.5..1.0), ``read_only``, ``merge_operator`` (a name in
    ``MERGE_OPERATORS``), ``snapshot_max_age`` (seconds, or None: no bound;
    older snapshots and transactions raise SnapshotTooOldError),
    ``value_collect_pages`` (value run pages a checkpoint collects at most;
    0: none), ``value_collect_live_pct`` (1..99: a run page is collected at
    or under this live share).
    """

    def __init__(
        self,
        path: StrPath,
        *,
        page_size: int = ...,
        cache_bytes: int = ...,
        dirty_percent: int = ...,
        durability: Literal["sync", "buffered"] = ...,
        direct_io: bool = ...,
        read_ahead_pages: int = ...,
        wal_limit_bytes: int = ...,
        sparse_log: bool = ...,
        delta_flush: Union[bool, None, Mapping[str, int]] = ...,
        append_fill: float = ...,
        read_only: bool = ...,
        merge_operator: Optional[str] = ...,
        snapshot_max_age: Optional[float] = ...,
        value_collect_pages: int = ...,
        value_collect_live_pct: int = ...,
    ) -> None:
        """Opens the database at ``path``, creating it if it does not exist."""
    @classmethod
    def create(cls, path: StrPath, **options: Any) -> Db:
        """Creates a new database (ExistsError if ``path`` exists)."""
    @classmethod
    def open(cls, path: StrPath, **options: Any) -> Db:
        """Opens an existing database (NotFoundError if missing), replaying its log."""
    @overload
    def tree(self, name: str) -> Tree: ...
    @overload
    def tree(self, name: str, kind: Literal["btree"]) -> Tree: ...
    @overload
    def tree(
        self,
        name: str,
        kind: Literal["bepsilon"],
        *,
        node_bytes: int = ...,
        leaf_bytes: Optional[int] = ...,
        basement_bytes: int = ...,
        fanout: int = ...,
        compression: Literal["none", "lz4", "zstd"] = ...,
        level: int = ...,
        value_extent_bytes: Optional[int] = ...,
    ) -> Tree:
        """A handle on tree ``name``; with ``kind`` the tree is created now if
        missing (OptionsError if it exists with another kind). B-epsilon
        trees store values of at least ``value_extent_bytes`` (default 2032;
        None: none) in extents of their own."""
    def tree_names(self) -> List[str]:
        """Names of the trees that exist, in name order."""
    def tree_kind(self, name: str) -> Optional[Literal["btree", "bepsilon"]]:
        """The kind of an existing tree, or None."""
    def snapshot(self) -> Snapshot:
        """Every tree as of the latest commit; a ``with`` block closes it on exit."""
    def transaction(self) -> Transaction:
        """An optimistic write transaction; a ``with`` block commits it on exit
        (ConflictError if something it read changed), or aborts if it raised."""
    def backup(self, path: StrPath) -> Dict[str, Any]:
        """Writes a consistent copy, as of a snapshot taken now, to the new
        database ``path`` while writers go on. Returns ``trees``, ``entries``,
        ``user_bytes``, ``file_bytes`` and ``elapsed`` (seconds)."""
    def batch(self) -> Batch:
        """A new Batch that a ``with`` block applies on exit (unless it raised)."""
    def apply(self, batch: Batch) -> None:
        """Applies every write of ``batch`` atomically and empties it."""
    def sync(self) -> None:
        """Makes every acknowledged write durable (durability="buffered")."""
    def drain(self) -> None:
        """Moves every buffered B-epsilon message to the leaves, collects value runs, checkpoints."""
    def checkpoint(self) -> None:
        """Writes every changed page and a new superblock; empties the log."""
    def stats(self) -> Dict[str, Any]:
        """Counters, cache and I/O figures and per-tree statistics."""
    def check(self) -> Dict[str, Any]:
        """Verifies every live page and invariant; ``problems`` is empty when sound."""
    def close(self) -> None:
        """Checkpoints, closes every handle and releases the lock; idempotent."""
    @property
    def closed(self) -> bool:
        """True once closed."""
    @property
    def path(self) -> str:
        """The database file."""
    @property
    def page_size(self) -> int:
        """Page size in bytes."""
    @property
    def max_key_len(self) -> int:
        """Longest key a B+tree of this Db accepts."""
    @property
    def read_only(self) -> bool:
        """True when opened with read_only=True."""
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> bool:
        """Closes the Db."""

class ReadableTree:
    """The read side of a tree: the base class of Tree and SnapshotTree."""

    @property
    def name(self) -> str:
        """The tree's name."""
    @property
    def kind(self) -> Optional[Literal["btree", "bepsilon"]]:
        """The tree's kind; None for a B+tree not written yet."""
    @overload
    def get(self, key: BytesLike) -> Optional[bytes]: ...
    @overload
    def get(self, key: BytesLike, default: _D) -> Union[bytes, _D]:
        """The value of ``key``, or ``default`` when absent."""
    def get_many(self, keys: Iterable[BytesLike]) -> List[Optional[bytes]]:
        """The values of ``keys`` in their order (None where missing), read together:
        the pages the batch misses are read through one queue per tree level."""
    def __getitem__(self, key: BytesLike) -> bytes:
        """The value of ``key``; KeyError when absent."""
    def __contains__(self, key: BytesLike) -> bool: ...
    def __len__(self) -> int:
        """Number of entries (a B-epsilon tree counts them by iterating)."""
    def range(
        self, start: Optional[BytesLike] = None, end: Optional[BytesLike] = None, *, reverse: bool = False
    ) -> Iterator[Tuple[bytes, bytes]]:
        """Lazy (key, value) pairs with start <= key < end, ascending or descending."""
    def prefix(self, prefix: BytesLike, *, reverse: bool = False) -> Iterator[Tuple[bytes, bytes]]:
        """Lazy (key, value) pairs whose key starts with ``prefix``."""
    def __iter__(self) -> Iterator[bytes]:
        """The keys in order."""
    def keys(self) -> Iterator[bytes]:
        """The keys in order."""
    def values(self) -> Iterator[bytes]:
        """The values in key order."""
    def items(self) -> Iterator[Tuple[bytes, bytes]]:
        """The (key, value) pairs in key order."""
    def first(self) -> Optional[Tuple[bytes, bytes]]:
        """The entry with the smallest key, or None."""
    def last(self) -> Optional[Tuple[bytes, bytes]]:
        """The entry with the largest key, or None."""

class Tree(ReadableTree):
    """A named, ordered map from byte keys to byte values. Its iterators read
    a snapshot taken when they are made."""

    def insert(self, key: BytesLike, value: BytesLike) -> None:
        """Sets ``key`` to ``value`` (one atomic write)."""
    def __setitem__(self, key: BytesLike, value: BytesLike) -> None: ...
    def remove(self, key: BytesLike) -> None:
        """Removes ``key``; nothing happens if it is absent."""
    def __delitem__(self, key: BytesLike) -> None:
        """Removes ``key``; KeyError if it is absent."""
    def upsert(self, key: BytesLike, operand: BytesLike) -> None:
        """Merges ``operand`` into ``key`` with the Db's merge operator (B-epsilon trees)."""
    def update(self, items: Union[Mapping[BytesLike, BytesLike], Iterable[Tuple[BytesLike, BytesLike]]]) -> None:
        """Writes every (key, value) atomically, as one batch."""

class SnapshotTree(ReadableTree):
    """A tree as of a snapshot: the reads of Tree; ClosedError once the snapshot is closed."""

class Snapshot:
    """Every tree as of one commit, read-only; closing it (or the end of its
    ``with`` block) lets the engine reuse the pages it kept."""

    def tree(self, name: str) -> SnapshotTree:
        """Tree ``name`` as of the snapshot (empty if it did not exist then)."""
    def tree_names(self) -> List[str]:
        """Names of the trees that existed, in name order."""
    def tree_kind(self, name: str) -> Optional[Literal["btree", "bepsilon"]]:
        """The kind of a tree that existed, or None."""
    def close(self) -> None:
        """Lets go of the snapshot; its trees and iterators raise ClosedError. Idempotent."""
    @property
    def closed(self) -> bool:
        """True once closed (or once its Db is closed)."""
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> bool:
        """Closes the snapshot."""

class Transaction:
    """An optimistic write transaction: reads a snapshot taken when it began
    plus its own writes; ``commit`` writes them atomically if nothing it read
    changed meanwhile (ConflictError otherwise, nothing written). Safe to
    share between threads."""

    @overload
    def get(self, tree: Union[Tree, str], key: BytesLike) -> Optional[bytes]: ...
    @overload
    def get(self, tree: Union[Tree, str], key: BytesLike, default: _D) -> Union[bytes, _D]:
        """The value of ``key`` in ``tree`` as the transaction sees it, or ``default``."""
    def contains(self, tree: Union[Tree, str], key: BytesLike) -> bool:
        """Whether ``key`` is in ``tree`` as the transaction sees it."""
    def range(
        self,
        tree: Union[Tree, str],
        start: Optional[BytesLike] = None,
        end: Optional[BytesLike] = None,
        *,
        reverse: bool = False,
    ) -> Iterator[Tuple[bytes, bytes]]:
        """Lazy (key, value) pairs with start <= key < end as the transaction
        sees them (its writes made before this call included)."""
    def prefix(
        self, tree: Union[Tree, str], prefix: BytesLike, *, reverse: bool = False
    ) -> Iterator[Tuple[bytes, bytes]]:
        """Lazy (key, value) pairs whose key starts with ``prefix`` (as ``range``)."""
    def insert(self, tree: Union[Tree, str], key: BytesLike, value: BytesLike) -> None:
        """Sets ``key`` to ``value`` in ``tree`` when the transaction commits."""
    def remove(self, tree: Union[Tree, str], key: BytesLike) -> None:
        """Removes ``key`` from ``tree`` when the transaction commits."""
    def upsert(self, tree: Union[Tree, str], key: BytesLike, operand: BytesLike) -> None:
        """Merges ``operand`` into ``key`` of B-epsilon tree ``tree`` at commit
        (a blind write: never a conflict)."""
    def __len__(self) -> int:
        """Writes buffered so far."""
    def commit(self) -> None:
        """Writes the transaction's writes atomically, or raises ConflictError
        (nothing written); the transaction has ended either way."""
    def abort(self) -> None:
        """Ends the transaction without writing; does nothing if it has ended."""
    @property
    def closed(self) -> bool:
        """True once committed or aborted (or once its Db is closed)."""
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> bool:
        """Commits if the block ended normally (and the transaction is open);
        aborts if it raised, and the exception propagates."""

class Iterator:
    """A lazy iterator over a key range; raises ClosedError once the Db (or
    the snapshot or transaction it reads) is closed."""

    def __iter__(self) -> Self: ...
    def __next__(self) -> Any: ...

class Batch:
    """Writes on one or more trees applied atomically by ``Db.apply``."""

    def __init__(self) -> None: ...
    def insert(self, tree: Union[Tree, str], key: BytesLike, value: BytesLike) -> None:
        """Sets ``key`` to ``value`` in ``tree``."""
    def remove(self, tree: Union[Tree, str], key: BytesLike) -> None:
        """Removes ``key`` from ``tree`` (no effect if absent)."""
    def upsert(self, tree: Union[Tree, str], key: BytesLike, operand: BytesLike) -> None:
        """Merges ``operand`` into ``key`` of B-epsilon tree ``tree``."""
    def clear(self) -> None:
        """Drops every write."""
    def __len__(self) -> int: ...
    @property
    def user_bytes(self) -> int:
        """Bytes of keys, values and operands in the batch."""
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> bool:
        """Applies the batch (from ``Db.batch()``) unless the block raised."""

def probe(
    path: StrPath,
    *,
    modes: List[str] = ["randread"],
    block_sizes: List[int] = [4096, 65536],
    queue_depths: List[int] = [1],
    threads: List[int] = [1],
    duration_secs: float = 2.0,
    warmup_secs: float = 1.0,
    file_size_bytes: int = 256 << 20,
    direct_io: bool = True,
    engine: Literal["uring", "sync"] = "uring",
    min_reps: int = 2,
    max_reps: int = 5,
    seed: Optional[int] = None,
    emulate: Optional[str] = None,
    progress: Optional[Callable[[Dict[str, Any]], object]] = None,
) -> Dict[str, Any]:
    """Runs a probe sweep under ``path`` like ``pagewise probe``; returns its results.

    ``emulate`` is the CLI's ``--emulate``: a preset (``"nvme"``, ``"hdd"``, ...) or
    ``"S,W,P"`` such as ``"500us,120MB/s,1"``; the results' ``emulated`` names it."""

def tune(
    dir: StrPath,
    *,
    rows: int = 100_000_000,
    key_bytes: int = 16,
    value_bytes: int = 100,
    cache_bytes: int = 1 << 30,
    mix: str = "point=0.8,range=0.1,insert=0.1",
    range_rows: int = 100,
    emulate: Optional[str] = None,
    verify: Literal["off", "quick", "full"] = "quick",
    block_sizes: Optional[List[int]] = None,
    duration_secs: float = 0.6,
    warmup_secs: float = 0.2,
    file_size_bytes: int = 1 << 30,
    progress: Optional[Callable[[Dict[str, Any]], object]] = None,
) -> Dict[str, Any]:
    """Runs ``pagewise tune`` for the drive under ``dir``; returns what it produced.

    Probes, fits the model, advises the tree kind and sizes for the dataset and
    ``mix``, verifies on the engine (``verify``), and writes ``probe-results.json``
    and ``tuned.json`` in ``dir``. The dict holds ``results``, ``model``, ``advice``,
    ``verification``, ``answer``, ``tuned``, ``notes``, ``drive``, the two paths and
    the times. ``progress(dict)`` gets ``phase``, ``step``, ``steps``, ``label``; an
    exception it raises, or Ctrl-C, stops the tune and is raised. Bad ``mix``,
    ``emulate`` or ``verify`` raise ``OptionsError``."""

def load_probe_results(path: StrPath) -> Dict[str, Any]:
    """Loads ``probe-results.json`` (``pagewise probe --out``, ``pagewise tune``)."""

def load_tune_results(path: StrPath) -> Dict[str, Any]:
    """Loads a saved ``pagewise tune --json`` summary."""
