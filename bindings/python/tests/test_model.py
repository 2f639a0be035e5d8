"""A stateful Hypothesis test: a Db against a sorted-dict model, with reopen
cycles (clean closes, and drops without close) and both tree kinds.
Hypothesis prints the failing steps and a reproduction blob on failure."""

import bisect

from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule
from machines import CACHE, DbMachine, model_cases

import pagewise

keys = st.binary(min_size=0, max_size=6).filter(lambda k: len(k) > 0) | st.sampled_from(
    [b"a", b"ab", b"b", b"\xff", b"\x00"]
)
values = st.binary(max_size=40) | st.binary(min_size=300, max_size=5000)


class Model(DbMachine):
    @initialize()
    def open_db(self):
        self.model = {}
        self.create_db()

    def sorted_keys(self):
        return sorted(self.model)

    @rule(k=keys, v=values)
    def insert(self, k, v):
        self.t[k] = v
        self.model[k] = v

    @rule(k=keys)
    def remove(self, k):
        self.t.remove(k)
        self.model.pop(k, None)

    @rule(data=st.data())
    def get_existing_or_not(self, data):
        pool = list(self.model) or [b"none"]
        k = data.draw(st.sampled_from(pool) | keys)
        assert self.t.get(k) == self.model.get(k)
        assert (k in self.t) == (k in self.model)

    @rule(writes=st.lists(st.tuples(keys, st.none() | values), max_size=20))
    def batch(self, writes):
        with self.db.batch() as b:
            for k, v in writes:
                if v is None:
                    b.remove(self.t, k)
                else:
                    b.insert(self.t, k, v)
        for k, v in writes:
            if v is None:
                self.model.pop(k, None)
            else:
                self.model[k] = v

    @rule(lo=st.none() | keys, hi=st.none() | keys, reverse=st.booleans())
    def range_matches(self, lo, hi, reverse):
        ks = self.sorted_keys()
        i = 0 if lo is None else bisect.bisect_left(ks, lo)
        j = len(ks) if hi is None else bisect.bisect_left(ks, hi)
        want = [(k, self.model[k]) for k in ks[i:max(i, j)]]
        if reverse:
            want.reverse()
        assert list(self.t.range(lo, hi, reverse=reverse)) == want

    @rule(p=st.binary(max_size=2))
    def prefix_matches(self, p):
        want = [(k, self.model[k]) for k in self.sorted_keys() if k.startswith(p)]
        assert list(self.t.prefix(p)) == want

    @rule(clean=st.booleans())
    def reopen(self, clean):
        if clean:
            self.db.close()
        else:
            # Dropped without close: the last reference checkpoints.
            del self.t
            self.db = None
        self.db = pagewise.Db.open(self.path, cache_bytes=CACHE)
        self.t = self.tree()

    @precondition(lambda self: len(self.model) > 0)
    @rule()
    def first_last(self):
        ks = self.sorted_keys()
        assert self.t.first() == (ks[0], self.model[ks[0]])
        assert self.t.last() == (ks[-1], self.model[ks[-1]])

    @invariant()
    def length(self):
        if hasattr(self, "t"):
            assert len(self.t) == len(self.model)


TestBTreeModel, TestBEpsilonModel = model_cases(Model, steps=30)
