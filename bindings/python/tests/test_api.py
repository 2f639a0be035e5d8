"""The engine as a Python mapping: reads, writes, iterators, batches, upserts."""

import array

import pytest

import pagewise


def test_tree_is_an_ordered_mapping(db):
    t = db.tree("t")
    assert len(t) == 0 and t.first() is None and t.last() is None
    t[b"b"] = b"2"
    t.insert(b"a", b"1")
    t[b"c"] = b"3"
    assert t[b"a"] == b"1" and t.get(b"b") == b"2"
    assert t.get(b"zz") is None and t.get(b"zz", b"dflt") == b"dflt"
    assert b"c" in t and b"d" not in t
    assert len(t) == 3
    assert list(t) == [b"a", b"b", b"c"]
    assert list(t.keys()) == [b"a", b"b", b"c"]
    assert list(t.values()) == [b"1", b"2", b"3"]
    assert t.first() == (b"a", b"1") and t.last() == (b"c", b"3")
    del t[b"b"]
    assert list(t.items()) == [(b"a", b"1"), (b"c", b"3")]
    with pytest.raises(KeyError):
        t[b"b"]
    with pytest.raises(KeyError):
        del t[b"b"]
    t.remove(b"b")  # absent: no error
    t[b"a"] = b"overwritten"
    assert t[b"a"] == b"overwritten" and len(t) == 2


def test_buffer_protocol_keys_and_values(db):
    t = db.tree("t")
    t[bytearray(b"k1")] = memoryview(b"v1")
    t[memoryview(b"k2")] = array.array("B", [118, 50])
    assert t[b"k1"] == b"v1" and t[bytearray(b"k2")] == b"v2"
    assert isinstance(t[b"k1"], bytes)


def test_range_prefix_and_reverse(db):
    t = db.tree("t")
    keys = [b"a", b"ab", b"abc", b"b", b"ba", b"c", b"\xff", b"\xff\xff"]
    t.update({k: k.upper() for k in keys})
    assert [k for k, _ in t.range()] == keys
    assert [k for k, _ in t.range(b"ab", b"ba")] == [b"ab", b"abc", b"b"]
    assert [k for k, _ in t.range(b"ab", b"ba", reverse=True)] == [b"b", b"abc", b"ab"]
    assert [k for k, _ in t.range(end=b"b")] == [b"a", b"ab", b"abc"]
    assert [k for k, _ in t.range(start=b"c")] == [b"c", b"\xff", b"\xff\xff"]
    assert [k for k, _ in t.prefix(b"a")] == [b"a", b"ab", b"abc"]
    assert [k for k, _ in t.prefix(b"a", reverse=True)] == [b"abc", b"ab", b"a"]
    assert [k for k, _ in t.prefix(b"\xff")] == [b"\xff", b"\xff\xff"]
    assert list(t.prefix(b"zz")) == []
    assert dict(t.range(b"b", b"c")) == {b"b": b"B", b"ba": b"BA"}


def test_iterators_are_lazy_and_read_a_snapshot(db):
    t = db.tree("t")
    t.update((b"%05d" % i, b"v") for i in range(2000))
    it = t.range()
    assert next(it) == (b"00000", b"v")
    # An iterator reads the snapshot taken when it was made: a write far
    # ahead of it (beyond the chunk read so far) does not show up.
    t[b"01999x"] = b"late"
    del t[b"01000"]
    rest = [k for k, _ in it]
    assert len(rest) == 1999 and b"01999x" not in rest and b"01000" in rest
    assert b"01999x" in [k for k, _ in t.range(b"01999")]


def test_batch_is_atomic_and_spans_trees(db):
    a, b = db.tree("a"), db.tree("b")
    a[b"gone"] = b"x"
    batch = pagewise.Batch()
    batch.insert(a, b"k", b"1")
    batch.insert("b", b"k", b"2")
    batch.remove(a, b"gone")
    assert len(batch) == 3 and batch.user_bytes == 1 + 1 + 1 + 1 + 4
    db.apply(batch)
    assert len(batch) == 0
    assert a[b"k"] == b"1" and b[b"k"] == b"2" and b"gone" not in a


def test_batch_context_manager_applies_or_drops(db):
    t = db.tree("t")
    with db.batch() as b:
        b.insert(t, b"kept", b"1")
    assert t[b"kept"] == b"1"
    with pytest.raises(RuntimeError):
        with db.batch() as b:
            b.insert(t, b"dropped", b"1")
            raise RuntimeError("abort the block")
    assert b"dropped" not in t
    with pytest.raises(TypeError, match="db.batch"):
        with pagewise.Batch() as b:
            b.insert(t, b"x", b"y")


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_bepsilon_tree_with_upserts(path, compression):
    with pagewise.Db(path, cache_bytes=4 << 20, merge_operator="add_u64") as db:
        t = db.tree("counts", kind="bepsilon", compression=compression, node_bytes=64 << 10)
        assert t.kind == "bepsilon" and db.tree_kind("counts") == "bepsilon"
        for i in range(300):
            t.upsert(b"k%d" % (i % 7), (i).to_bytes(8, "little"))
        with db.batch() as b:
            b.upsert(t, b"k0", (1000).to_bytes(8, "little"))
    with pagewise.Db(path, merge_operator="add_u64") as db:
        t = db.tree("counts")
        want = {b"k%d" % r: sum(i for i in range(300) if i % 7 == r) for r in range(7)}
        want[b"k0"] += 1000
        got = {k: int.from_bytes(v, "little") for k, v in t.items()}
        assert got == want and len(t) == 7


@pytest.mark.parametrize("extent_bytes", [64, None])
def test_bepsilon_value_extents(path, extent_bytes):
    # Values from 0 bytes to 100 KB, across the threshold, replaced and
    # removed, read back after a reopen and checked.
    sizes = [0, 1, 63, 64, 65, 2000, 5000, 100_000]
    want = {}
    with pagewise.Db(path, cache_bytes=4 << 20) as db:
        t = db.tree("v", kind="bepsilon", node_bytes=64 << 10, value_extent_bytes=extent_bytes)
        for round in range(2):
            for i, n in enumerate(sizes):
                k = b"k%02d" % i
                want[k] = bytes([(i + round) % 256]) * n
                t[k] = want[k]
        del t[b"k07"]
        del want[b"k07"]
    with pagewise.Db(path) as db:
        t = db.tree("v")
        assert dict(t.items()) == want
        assert [k for k, _ in t.range(reverse=True)] == sorted(want, reverse=True)
        assert db.check()["problems"] == []


def test_drain_brings_packed_values_space_back(path):
    # 1,000-byte values are packed into value runs; after overwriting every
    # key and removing half, a drain leaves the live values readable and
    # the file sound (the space figure itself: tests/value_extents.rs).
    with pagewise.Db(path, cache_bytes=4 << 20, value_collect_live_pct=70) as db:
        t = db.tree("v", kind="bepsilon", node_bytes=64 << 10, value_extent_bytes=512)
        for round in range(2):
            with db.batch() as b:
                for i in range(600):
                    b.insert(t, b"k%04d" % i, bytes([round]) * 1000)
        for i in range(0, 600, 2):
            del t[b"k%04d" % i]
        db.drain()
        assert db.check()["problems"] == []
        assert len(t) == 300 and t[b"k0001"] == bytes([1]) * 1000
    with pytest.raises(pagewise.OptionsError):
        pagewise.Db(path, value_collect_live_pct=100)


def test_append_merge_operator(path):
    with pagewise.Db(path, merge_operator="append") as db:
        t = db.tree("log", kind="bepsilon")
        for part in [b"a", b"bc", b"d"]:
            t.upsert(b"k", part)
        assert t[b"k"] == b"abcd"


def test_reopen_keeps_data_and_options(path):
    with pagewise.Db.create(path, page_size=8192, delta_flush={"threshold_bytes": 1024}) as db:
        assert db.page_size == 8192 and db.max_key_len > 0
        db.tree("t").update([(b"%04d" % i, b"x" * 100) for i in range(1000)])
        db.checkpoint()
        db.sync()
    with pagewise.Db.open(path, read_only=True) as db:
        assert db.read_only and db.page_size == 8192
        t = db.tree("t")
        assert len(t) == 1000 and t[b"0999"] == b"x" * 100


def test_stats_and_check_are_dicts(db):
    t = db.tree("t")
    t.update((b"%04d" % i, b"v") for i in range(500))
    s = db.stats()
    assert s["page_size"] == 4096 and s["durability"] == "buffered"
    assert [tr["name"] for tr in s["trees"]] == ["t"]
    assert s["trees"][0]["entries"] == 500 and s["commits"] >= 1
    r = db.check()
    assert r["problems"] == [] and r["entries"] == 500


def test_db_context_manager_closes(path):
    with pagewise.Db(path) as db:
        db.tree("t")[b"k"] = b"v"
        assert not db.closed
    assert db.closed
    db.close()  # closing twice does nothing
    assert "closed" in repr(db)
    with pagewise.Db(path) as db:  # the lock was released
        assert db.tree("t")[b"k"] == b"v"


def test_module_constants():
    assert pagewise.MIN_PAGE_SIZE == 512 and pagewise.MAX_PAGE_SIZE == 65536
    assert set(pagewise.MERGE_OPERATORS) == {"add_u64", "append"}
    assert "cache_bytes" in pagewise.DB_OPTIONS
    assert isinstance(pagewise.__version__, str)


@pytest.mark.parametrize("kind", [None, "bepsilon"])
def test_get_many_matches_get_in_the_callers_order(tmp_path, kind):
    path = str(tmp_path / "many.pw")
    with pagewise.Db.create(path, cache_bytes=1 << 20) as db:
        t = db.tree("t", kind=kind)
        with db.batch() as b:
            for i in range(3000):
                b.insert(t, b"k%05d" % i, b"v%d" % i * (1 + i % 40))
    with pagewise.Db.open(path, cache_bytes=64 << 10) as db:  # reads miss
        t = db.tree("t")
        keys = [b"k%05d" % i for i in (2999, 7, 7, 1500)] + [b"absent", bytearray(b"k00042")]
        assert t.get_many(keys) == [t.get(bytes(k)) for k in keys]
        assert t.get_many(keys)[4] is None and t.get_many([]) == []
        with db.snapshot() as snap:
            t[b"k00007"] = b"new"
            assert snap.tree("t").get_many([b"k00007"]) == [b"v7" * 8]
        with pytest.raises(TypeError, match="key"):
            t.get_many([b"ok", "text"])
