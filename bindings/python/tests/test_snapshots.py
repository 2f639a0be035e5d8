"""Snapshots: isolation for both tree kinds, the read side shared with Tree,
release on exit, the age bound; and online backup."""

import time

import pytest

import pagewise


def trees(db):
    """One tree of each kind, B-epsilon created the way the other tests do."""
    return [db.tree("b"), db.tree("e", kind="bepsilon", node_bytes=8 << 10, basement_bytes=1 << 10, fanout=4)]


def test_writes_after_the_snapshot_are_invisible(db):
    for t in trees(db):
        t.update((b"%04d" % i, b"old") for i in range(300))
        with db.snapshot() as s:
            st = s.tree(t.name)
            assert isinstance(st, pagewise.SnapshotTree) and isinstance(st, pagewise.ReadableTree)
            assert not isinstance(st, pagewise.Tree) and not hasattr(st, "insert")
            it = st.range(b"0100")  # made before the writes: also the snapshot's
            t[b"0000"] = b"new"
            del t[b"0001"]
            t.update((b"%04d" % i, b"new") for i in range(300, 400))
            assert st[b"0000"] == b"old" and st.get(b"0001") == b"old" and b"0001" in st
            assert b"0300" not in st and st.get(b"0300", b"dflt") == b"dflt"
            with pytest.raises(KeyError):
                st[b"0300"]
            assert len(st) == 300 and len(t) == 399
            assert list(st.keys()) == [b"%04d" % i for i in range(300)]
            assert set(st.values()) == {b"old"}
            assert dict(st.items()) == {b"%04d" % i: b"old" for i in range(300)}
            assert list(st) == list(st.keys())
            assert st.first() == (b"0000", b"old") and st.last() == (b"0299", b"old")
            assert len(list(it)) == 200
            assert [k for k, _ in st.range(b"0010", b"0013", reverse=True)] == [b"0012", b"0011", b"0010"]
            assert [k for k, _ in st.prefix(b"029")] == [b"%04d" % i for i in range(290, 300)]
            assert [k for k, _ in st.prefix(b"029", reverse=True)][0] == b"0299"
        assert t[b"0000"] == b"new" and b"0001" not in t


def test_snapshot_names_kinds_and_missing_trees(db):
    b, e = trees(db)
    b[b"k"] = b"v"
    with db.snapshot() as s:
        db.tree("later")[b"k"] = b"v"
        assert s.tree_names() == ["b", "e"] and db.tree_names() == ["b", "e", "later"]
        assert s.tree_kind("b") == "btree" and s.tree_kind("e") == "bepsilon"
        assert s.tree_kind("later") is None and s.tree("b").kind == "btree"
        later = s.tree("later")  # did not exist then: empty
        assert len(later) == 0 and list(later) == [] and later.first() is None and later.last() is None
        assert s.tree("e").name == "e" and repr(s.tree("e")) == "<pagewise.SnapshotTree \"e\">"
        with pytest.raises(pagewise.OptionsError, match="invalid tree name"):
            s.tree("")
        with pytest.raises(TypeError, match="key must be bytes"):
            s.tree("b").get("k")


def test_exit_releases_the_snapshot(db):
    t = db.tree("t")
    t.update((b"%04d" % i, b"v") for i in range(100))
    with db.snapshot() as s:
        assert not s.closed and db.stats()["snapshots"] >= 1
        st = s.tree("t")
        it = st.items()
        assert next(it) == (b"0000", b"v")
    assert s.closed and "closed" in repr(s)
    assert db.stats()["snapshots"] == 0  # its iterators let go of their reads too
    calls = [
        lambda: next(it),
        lambda: st[b"0000"],
        lambda: st.get(b"0000"),
        lambda: b"0000" in st,
        lambda: len(st),
        lambda: st.range(),
        lambda: st.first(),
        lambda: st.kind,
        lambda: s.tree("t"),
        lambda: s.tree_names(),
        lambda: s.tree_kind("t"),
    ]
    for call in calls:
        with pytest.raises(pagewise.ClosedError, match="snapshot is closed"):
            call()
    s.close()  # closing twice does nothing


def test_iterator_of_a_closed_snapshot_lets_go(db):
    t = db.tree("t")
    t.update((b"%04d" % i, b"v") for i in range(100))
    s = db.snapshot()
    it = s.tree("t").range()
    next(it)
    s.close()
    with pytest.raises(pagewise.ClosedError):
        next(it)
    del it
    assert db.stats()["snapshots"] == 0


def test_stats_count_snapshots_and_held_pages(db):
    t = db.tree("t")
    t.update((b"%05d" % i, b"x" * 100) for i in range(2000))
    db.checkpoint()
    s = db.snapshot()
    t.update((b"%05d" % i, b"y" * 100) for i in range(2000))
    db.checkpoint()
    stats = db.stats()
    assert stats["snapshots"] == 1 and stats["snapshot_held_pages"] > 0
    assert stats["snapshot_held_bytes"] == stats["snapshot_held_pages"] * stats["page_size"]
    assert stats["snapshot_oldest_age_ms"] >= 0
    assert s.tree("t")[b"00000"] == b"x" * 100
    s.close()
    db.checkpoint()
    assert db.stats()["snapshots"] == 0 and db.stats()["snapshot_held_pages"] == 0


def test_snapshot_too_old(path):
    with pagewise.Db(path, snapshot_max_age=0.05, durability="buffered") as db:
        t = db.tree("t")
        t[b"k"] = b"v"
        s = db.snapshot()
        assert s.tree("t")[b"k"] == b"v"
        time.sleep(0.1)
        t[b"k"] = b"w"
        db.checkpoint()
        with pytest.raises(pagewise.SnapshotTooOldError, match="snapshot_max_age"):
            s.tree("t")[b"k"]
        with db.snapshot() as fresh:  # a new one reads fine
            assert fresh.tree("t")[b"k"] == b"w"


def test_snapshot_after_db_close(path):
    db = pagewise.Db(path)
    db.tree("t")[b"k"] = b"v"
    s = db.snapshot()
    st = s.tree("t")
    it = st.range()
    db.close()
    assert s.closed
    for call in (lambda: st[b"k"], lambda: next(it), lambda: s.tree("t"), lambda: len(st), lambda: st.first()):
        with pytest.raises(pagewise.ClosedError, match="was closed"):
            call()
    s.close()
    with pytest.raises(pagewise.ClosedError):
        db.snapshot()


def test_backup_round_trip(db, tmp_path):
    b, e = trees(db)
    b.update((b"%05d" % i, b"v%d" % i) for i in range(3000))
    e.update((b"%03d" % i, b"w" * 500) for i in range(200))
    copy = str(tmp_path / "copy.pw")
    report = db.backup(copy)
    assert report["trees"] == 2 and report["entries"] == 3200
    assert report["user_bytes"] == sum(len(k) + len(v) for t in (b, e) for k, v in t.items())
    assert report["file_bytes"] > 0 and isinstance(report["elapsed"], float)
    b[b"after"] = b"not in the copy"
    with pagewise.Db.open(copy) as c:
        assert c.tree_names() == ["b", "e"] and c.tree_kind("e") == "bepsilon"
        assert list(c.tree("b").items()) == [kv for kv in b.items() if kv[0] != b"after"]
        assert list(c.tree("e").items()) == list(e.items())
        assert c.check()["problems"] == []
    with pytest.raises(pagewise.ExistsError):
        db.backup(copy)
