"""Transactions: read-your-writes, commit, abort, the context manager,
conflicts (ConflictError, nothing written), threads incrementing a counter
with retries, and errors after the end or after db.close()."""

import threading

import pytest

import pagewise


def test_read_your_writes(db):
    t = db.tree("t")
    t.update({b"a": b"1", b"b": b"2", b"c": b"3"})
    with db.transaction() as tx:
        tx.insert(t, b"bb", b"new")
        tx.insert("t", b"a", b"changed")
        tx.remove(t, b"c")
        assert tx.get(t, b"a") == b"changed" and tx.get("t", b"bb") == b"new"
        assert tx.get(t, b"c") is None and tx.get(t, b"c", b"dflt") == b"dflt"
        assert tx.contains(t, b"b") and not tx.contains(t, b"c")
        assert list(tx.range(t)) == [(b"a", b"changed"), (b"b", b"2"), (b"bb", b"new")]
        assert list(tx.range(t, b"b", reverse=True)) == [(b"bb", b"new"), (b"b", b"2")]
        assert list(tx.range(t, end=b"b")) == [(b"a", b"changed")]
        assert list(tx.prefix(t, b"b")) == [(b"b", b"2"), (b"bb", b"new")]
        assert list(tx.prefix(t, b"b", reverse=True)) == [(b"bb", b"new"), (b"b", b"2")]
        assert len(tx) == 3 and not tx.closed
        # Nothing is visible outside before the commit.
        assert t[b"a"] == b"1" and b"bb" not in t and b"c" in t
    assert tx.closed and "ended" in repr(tx)
    assert dict(t.items()) == {b"a": b"changed", b"b": b"2", b"bb": b"new"}


def test_explicit_commit_and_abort(db):
    t = db.tree("t")
    tx = db.transaction()
    tx.insert(t, b"k", b"v")
    tx.abort()
    tx.abort()  # aborting an ended transaction does nothing
    assert b"k" not in t
    tx = db.transaction()
    tx.insert(t, b"k", b"v")
    tx.commit()
    assert t[b"k"] == b"v"
    with pytest.raises(pagewise.ClosedError, match="transaction has ended"):
        tx.commit()
    # Committing or aborting inside the block: the exit does nothing more.
    with db.transaction() as tx:
        tx.insert(t, b"x", b"1")
        tx.abort()
    assert b"x" not in t
    with db.transaction() as tx:
        tx.insert(t, b"y", b"1")
        tx.commit()
    assert t[b"y"] == b"1"
    # Dropped without commit: aborted.
    tx = db.transaction()
    tx.insert(t, b"z", b"1")
    del tx
    assert b"z" not in t


def test_exception_aborts_and_propagates(db):
    t = db.tree("t")
    with pytest.raises(ZeroDivisionError):
        with db.transaction() as tx:
            tx.insert(t, b"k", b"v")
            1 / 0
    assert b"k" not in t and tx.closed


def test_conflict_raises_and_writes_nothing(db):
    t = db.tree("t")
    t[b"balance"] = b"10"
    tx = db.transaction()
    assert tx.get(t, b"balance") == b"10"
    tx.insert(t, b"balance", b"11")
    tx.insert(t, b"audit", b"x")
    t[b"balance"] = b"20"  # someone else changes what tx read
    with pytest.raises(pagewise.ConflictError, match="run the transaction again") as e:
        tx.commit()
    assert isinstance(e.value, pagewise.Error)
    assert t[b"balance"] == b"20" and b"audit" not in t and tx.closed


def test_conflict_in_a_with_block_and_on_a_range(db):
    t = db.tree("t")
    t.update({b"a1": b"x", b"a2": b"y"})
    with pytest.raises(pagewise.ConflictError):
        with db.transaction() as tx:
            assert len(list(tx.prefix(t, b"a"))) == 2
            t[b"a3"] = b"phantom"  # appears in the range tx read
            tx.insert(t, b"count", b"2")
    assert b"count" not in t


def test_unread_changes_and_read_only_transactions_do_not_conflict(db):
    t = db.tree("t")
    t.update({b"a": b"1", b"b": b"1"})
    with db.transaction() as tx:
        assert tx.get(t, b"a") == b"1"
        t[b"b"] = b"2"  # not read by tx
        tx.insert(t, b"c", b"3")
    assert t[b"c"] == b"3"
    with db.transaction() as tx:  # no writes: commits at its snapshot
        assert tx.get(t, b"a") == b"1"
        t[b"a"] = b"changed"


def test_transaction_iterator_reads_only_what_it_returns(db):
    t = db.tree("t")
    t.update((b"%03d" % i, b"v") for i in range(100))
    with db.transaction() as tx:
        it = tx.range(t)
        assert next(it) == (b"000", b"v")
        t[b"050"] = b"changed beyond what tx consumed"
        tx.insert(t, b"new", b"1")
    assert t[b"new"] == b"1"
    with pytest.raises(pagewise.ClosedError, match="transaction has ended"):
        next(it)


def test_upsert_in_a_transaction(path):
    with pagewise.Db(path, merge_operator="add_u64") as db:
        t = db.tree("counts", kind="bepsilon")
        t.upsert(b"k", (5).to_bytes(8, "little"))
        with db.transaction() as tx:
            tx.upsert(t, b"k", (2).to_bytes(8, "little"))
            tx.upsert("counts", b"new", (1).to_bytes(8, "little"))
            t.upsert(b"k", (100).to_bytes(8, "little"))  # tx's upserts are blind: no conflict
        assert int.from_bytes(t[b"k"], "little") == 107
        assert int.from_bytes(t[b"new"], "little") == 1
        with db.transaction() as tx:
            tx.upsert(t, b"k", (3).to_bytes(8, "little"))
            assert int.from_bytes(tx.get(t, b"k"), "little") == 110  # merged when read
        assert int.from_bytes(t[b"k"], "little") == 110


def increment(db, t, key, retries):
    """Adds one to counter `key` in a transaction, retrying conflicts."""
    for _ in range(10_000):
        try:
            with db.transaction() as tx:
                n = int(tx.get(t, key, b"0"))
                tx.insert(t, key, b"%d" % (n + 1))
            return
        except pagewise.ConflictError:
            retries.append(1)
    raise AssertionError("no commit in 10000 attempts")


def test_threads_increment_with_retries_and_lose_nothing(db):
    t = db.tree("t")
    threads, per_thread = 4, 200
    retries, errors = [], []

    def work(n):
        try:
            for i in range(per_thread):
                increment(db, t, b"counter", retries)
                increment(db, t, b"counter-%d" % n, retries)
        except Exception as e:  # reported by the main thread
            errors.append(e)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    assert int(t[b"counter"]) == threads * per_thread
    assert all(int(t[b"counter-%d" % n]) == per_thread for n in range(threads))
    print(f"{len(retries)} retries")


def test_one_transaction_shared_by_threads(db):
    t = db.tree("t")
    tx = db.transaction()
    errors = []

    def work(n):
        try:
            for i in range(300):
                tx.insert(t, b"%d-%03d" % (n, i), b"v")
                tx.get(t, b"%d-%03d" % (n, i // 2))
                if i % 50 == 0:
                    list(tx.prefix(t, b"%d-" % n))
        except Exception as e:
            errors.append(e)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == [] and len(tx) == 1200
    tx.commit()
    assert len(t) == 1200


def test_commit_racing_with_use_from_another_thread(db):
    """A transaction committed while another thread uses it: that thread
    gets ClosedError, never a crash, and the commit is all or nothing."""
    t = db.tree("t")
    for _ in range(20):
        tx = db.transaction()
        seen = []

        def work():
            try:
                for i in range(1000):
                    tx.insert(t, b"%04d" % i, b"v")
            except pagewise.ClosedError:
                seen.append("ended")

        w = threading.Thread(target=work)
        w.start()
        tx.commit()
        w.join()
        n = len(t)
        assert 0 <= n <= 1000 and (n == 1000 or seen == ["ended"])
        for k in list(t):
            t.remove(k)


def test_after_db_close(path):
    db = pagewise.Db(path)
    t = db.tree("t")
    t[b"k"] = b"v"
    tx = db.transaction()
    tx.insert(t, b"a", b"1")
    it = tx.range(t)
    db.close()
    assert tx.closed
    calls = [
        lambda: tx.get(t, b"k"),
        lambda: tx.contains(t, b"k"),
        lambda: tx.insert(t, b"k", b"v"),
        lambda: tx.remove(t, b"k"),
        lambda: tx.upsert(t, b"k", b"v"),
        lambda: tx.range(t),
        lambda: tx.prefix(t, b"k"),
        lambda: next(it),
        lambda: len(tx),
        lambda: tx.commit(),
        lambda: db.transaction(),
    ]
    for call in calls:
        with pytest.raises(pagewise.ClosedError, match="was closed"):
            call()
    tx.abort()
    with pagewise.Db(path) as db:  # nothing of tx was written
        assert list(db.tree("t").items()) == [(b"k", b"v")]


def test_bad_arguments(db):
    t = db.tree("t")
    with db.transaction() as tx:
        with pytest.raises(TypeError, match="pagewise.Tree or a tree name"):
            tx.insert(42, b"k", b"v")
        with pytest.raises(TypeError, match="key must be bytes"):
            tx.get(t, "k")
        with pytest.raises(TypeError, match="value must be bytes"):
            tx.insert(t, b"k", 5)
        with pytest.raises(TypeError, match="operand must be bytes"):
            tx.upsert(t, b"k", None)
        with pytest.raises(TypeError, match="start must be bytes"):
            tx.range(t, 1)
        with pytest.raises(TypeError, match="prefix must be bytes"):
            tx.prefix(t, "p")
        with pytest.raises(pagewise.OptionsError, match="invalid tree name"):
            tx.get("", b"k")
    with pytest.raises(pagewise.LimitError):
        with db.transaction() as tx:
            tx.insert(t, b"k" * (db.max_key_len + 1), b"v")
    assert len(t) == 0
