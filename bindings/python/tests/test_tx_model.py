"""A stateful Hypothesis test of transactions and snapshots against dict
models: a transaction sees its snapshot with its own writes over it; its
commit conflicts exactly when a key it read, or a key in a range it
consumed, has another value in the live tree (and it wrote something);
a conflict writes nothing; a snapshot never changes. Both tree kinds, with
reopen cycles. Hypothesis prints the failing steps on failure."""

from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule
from machines import CACHE, DbMachine, model_cases

import pagewise

keys = st.sampled_from([b"a", b"ab", b"b", b"ba", b"c", b"\x00", b"\xff"]) | st.binary(min_size=1, max_size=3)
values = st.binary(max_size=20)


def in_range(k, lo, hi):
    return (lo is None or k >= lo) and (hi is None or k < hi)


def view(base, writes):
    """`base` with the writes (None: removed) over it."""
    out = dict(base)
    for k, v in writes.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


class TxModel(DbMachine):
    @initialize()
    def open_db(self):
        self.live = {}
        self.tx = self.snap = None
        self.create_db(durability="buffered")

    # The transaction: at most one open; its model is the live dict when it
    # began, its writes, the keys it read and the ranges it consumed.

    @precondition(lambda self: self.tx is None)
    @rule()
    def begin(self):
        self.tx = self.db.transaction()
        self.tx_base, self.tx_writes, self.tx_reads, self.tx_ranges = dict(self.live), {}, set(), []

    @precondition(lambda self: self.tx is not None)
    @rule(k=keys, v=st.none() | values)
    def tx_write(self, k, v):
        if v is None:
            self.tx.remove(self.t, k)
        else:
            self.tx.insert("t", k, v)
        self.tx_writes[k] = v

    @precondition(lambda self: self.tx is not None)
    @rule(k=keys)
    def tx_get(self, k):
        assert self.tx.get(self.t, k) == view(self.tx_base, self.tx_writes).get(k)
        if k not in self.tx_writes:  # a key it wrote is not read from the snapshot
            self.tx_reads.add(k)

    @precondition(lambda self: self.tx is not None)
    @rule(lo=st.none() | keys, hi=st.none() | keys, reverse=st.booleans())
    def tx_range(self, lo, hi, reverse):
        seen = view(self.tx_base, self.tx_writes)
        want = sorted((k, v) for k, v in seen.items() if in_range(k, lo, hi))
        got = list(self.tx.range(self.t, lo, hi, reverse=reverse))
        assert got == (want[::-1] if reverse else want)
        self.tx_ranges.append((lo, hi))

    @precondition(lambda self: self.tx is not None)
    @rule()
    def commit(self):
        changed = {k for k in set(self.tx_base) | set(self.live) if self.tx_base.get(k) != self.live.get(k)}
        read = any(k in self.tx_reads or any(in_range(k, lo, hi) for lo, hi in self.tx_ranges) for k in changed)
        conflict = read and bool(self.tx_writes)
        try:
            self.tx.commit()
            assert not conflict, "commit should have conflicted"
            self.live = view(self.live, self.tx_writes)
        except pagewise.ConflictError:
            assert conflict, "unexpected conflict"
        self.tx = None

    @precondition(lambda self: self.tx is not None)
    @rule()
    def abort(self):
        self.tx.abort()
        self.tx = None

    # Writes outside the transaction.

    @rule(k=keys, v=st.none() | values)
    def write(self, k, v):
        if v is None:
            self.t.remove(k)
            self.live.pop(k, None)
        else:
            self.t[k] = v
            self.live[k] = v

    # A snapshot: at most one open.

    @rule()
    def take_snapshot(self):
        if self.snap is not None:
            self.snap.close()
        self.snap, self.snap_model = self.db.snapshot(), dict(self.live)

    @precondition(lambda self: self.snap is not None)
    @rule(k=keys)
    def snapshot_reads(self, k):
        st = self.snap.tree("t")
        assert dict(st.items()) == self.snap_model and len(st) == len(self.snap_model)
        assert st.get(k) == self.snap_model.get(k)

    @precondition(lambda self: self.tx is None)
    @rule()
    def reopen(self):
        if self.snap is not None:
            self.snap.close()
            self.snap = None
        self.db.close()
        self.db = pagewise.Db.open(self.path, cache_bytes=CACHE, durability="buffered")
        self.t = self.tree()

    @invariant()
    def live_matches(self):
        if getattr(self, "db", None) is not None:
            assert dict(self.t.items()) == self.live

    def teardown(self):
        self.tx = self.snap = None  # aborted and closed when dropped
        super().teardown()


TestBTreeTxModel, TestBEpsilonTxModel = model_cases(TxModel, steps=40)
