"""Every error path: TypeErrors for bad arguments, engine errors as pagewise.Error subclasses."""

import os

import pytest

import pagewise


def test_hierarchy():
    for cls in [
        pagewise.OptionsError,
        pagewise.LimitError,
        pagewise.LockedError,
        pagewise.CorruptError,
        pagewise.ClosedError,
        pagewise.ReadOnlyError,
        pagewise.ExistsError,
        pagewise.NotFoundError,
        pagewise.ConflictError,
        pagewise.SnapshotTooOldError,
    ]:
        assert issubclass(cls, pagewise.Error) and cls is not pagewise.Error
    assert issubclass(pagewise.Error, Exception)


@pytest.mark.parametrize("bad", ["str", 1, 1.5, None, [1], object()])
def test_keys_and_values_must_be_bytes(db, bad):
    t = db.tree("t")
    name = type(bad).__name__
    with pytest.raises(TypeError, match=f"key must be bytes.*not {name}"):
        t[bad] = b"v"
    with pytest.raises(TypeError, match=f"value must be bytes.*not {name}"):
        t[b"k"] = bad
    for call in (lambda: t[bad], lambda: t.get(bad), lambda: bad in t, lambda: t.remove(bad)):
        with pytest.raises(TypeError, match="key must be bytes"):
            call()
    with pytest.raises(TypeError, match="operand must be bytes"):
        t.upsert(b"k", bad)
    with pytest.raises(TypeError, match="prefix must be bytes"):
        t.prefix(bad)
    b = pagewise.Batch()
    with pytest.raises(TypeError, match="key must be bytes"):
        b.insert(t, bad, b"v")


def test_str_key_hint(db):
    with pytest.raises(TypeError, match=r"s.encode\(\)"):
        db.tree("t")["text"] = b"v"


def test_bad_tree_and_update_arguments(db):
    b = pagewise.Batch()
    with pytest.raises(TypeError, match="pagewise.Tree or a tree name"):
        b.insert(42, b"k", b"v")
    with pytest.raises(TypeError, match="mapping or"):
        db.tree("t").update([b"not a pair"])
    with pytest.raises(pagewise.OptionsError, match="invalid tree name"):
        db.tree("")


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"page_size": 1000}, pagewise.OptionsError, "power of two"),
        ({"page_size": -1}, pagewise.OptionsError, "out of range"),
        ({"page_size": "4k"}, TypeError, "page_size must be an int"),
        ({"page_size": True}, TypeError, "not bool"),
        ({"durability": "maybe"}, pagewise.OptionsError, "durability"),
        ({"direct_io": 1}, TypeError, "True or False"),
        ({"dirty_percent": 99}, pagewise.OptionsError, "dirty percent"),
        ({"append_fill": 0.1}, pagewise.OptionsError, "append fill"),
        ({"delta_flush": {"block_bytes": 3000}}, pagewise.OptionsError, "delta block"),
        ({"delta_flush": {"size": 1}}, TypeError, "unknown delta_flush option"),
        ({"delta_flush": "on"}, TypeError, "delta_flush must be"),
        ({"merge_operator": "max"}, pagewise.OptionsError, "not built in"),
        ({"cache": 1}, TypeError, "unknown Db option"),
        ({"snapshot_max_age": 0}, pagewise.OptionsError, "positive number of seconds"),
        ({"snapshot_max_age": -1.5}, pagewise.OptionsError, "positive number of seconds"),
        ({"snapshot_max_age": float("nan")}, pagewise.OptionsError, "positive number of seconds"),
        ({"snapshot_max_age": "1s"}, TypeError, "number of seconds or None"),
        ({"snapshot_max_age": True}, TypeError, "not bool"),
    ],
)
def test_bad_options(path, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        pagewise.Db.create(path, **kwargs)
    assert not os.path.exists(path) or exc is pagewise.OptionsError


def test_bad_tree_kinds(db):
    with pytest.raises(pagewise.OptionsError, match="tree kind"):
        db.tree("t", kind="lsm")
    with pytest.raises(TypeError, match="B-epsilon options"):
        db.tree("t", kind="btree", fanout=4)
    with pytest.raises(TypeError, match='kind="bepsilon"'):
        db.tree("t", fanout=4)
    with pytest.raises(TypeError, match="unknown B-epsilon tree option"):
        db.tree("t", kind="bepsilon", fan_out=4)
    with pytest.raises(pagewise.OptionsError, match="compression"):
        db.tree("t", kind="bepsilon", compression="gzip")
    db.tree("b", kind="btree")[b"k"] = b"v"
    with pytest.raises(pagewise.OptionsError, match="not a bepsilon"):
        db.tree("b", kind="bepsilon")


def test_upsert_needs_a_merge_operator(db):
    t = db.tree("e", kind="bepsilon")
    with pytest.raises(pagewise.OptionsError, match="merge operator"):
        t.upsert(b"k", b"\x01")


def test_key_too_large(db):
    t = db.tree("t")
    with pytest.raises(pagewise.LimitError, match="exceeds the limit"):
        t[b"k" * (db.max_key_len + 1)] = b"v"
    t[b"k" * db.max_key_len] = b"v"  # the limit itself fits


def test_locked(path, db):
    with pytest.raises(pagewise.LockedError, match="locked"):
        pagewise.Db.open(path)


def test_exists_and_not_found(path, tmp_path):
    with pytest.raises(pagewise.NotFoundError, match="does not exist"):
        pagewise.Db.open(str(tmp_path / "missing.pw"))
    pagewise.Db.create(path).close()
    with pytest.raises(pagewise.ExistsError, match="already exists"):
        pagewise.Db.create(path)


def test_corrupt(tmp_path):
    p = tmp_path / "garbage.pw"
    p.write_bytes(os.urandom(64 << 10))
    with pytest.raises(pagewise.CorruptError, match="not a pagewise database"):
        pagewise.Db.open(str(p))


def test_read_only(path):
    pagewise.Db.create(path).close()
    with pagewise.Db.open(path, read_only=True) as db:
        with pytest.raises(pagewise.ReadOnlyError, match="read-only"):
            db.tree("t")[b"k"] = b"v"


def test_closed_everywhere(path):
    db = pagewise.Db(path, durability="buffered")
    t = db.tree("t")
    t.update((b"%04d" % i, b"v") for i in range(100))
    it, keys, pre = t.range(), iter(t), t.prefix(b"00")
    assert next(it) == (b"0000", b"v") and next(keys) == b"0000"
    batch = db.batch()
    batch.insert(t, b"k", b"v")
    db.close()
    calls = [
        lambda: next(it),  # entries it had read ahead are not handed out
        lambda: next(keys),
        lambda: next(pre),
        lambda: t[b"0001"],
        lambda: t.get(b"0001"),
        lambda: b"0001" in t,
        lambda: t.insert(b"k", b"v"),
        lambda: t.remove(b"k"),
        lambda: len(t),
        lambda: t.range(),
        lambda: t.first(),
        lambda: t.update({b"k": b"v"}),
        lambda: db.apply(batch),
        lambda: db.tree("t"),
        lambda: db.stats(),
        lambda: db.check(),
        lambda: db.sync(),
        lambda: db.checkpoint(),
        lambda: db.tree_names(),
        lambda: db.page_size,
    ]
    for call in calls:
        with pytest.raises(pagewise.ClosedError, match="was closed"):
            call()
    # An iterator stays failed; nothing crashes.
    with pytest.raises(pagewise.ClosedError):
        list(it)
