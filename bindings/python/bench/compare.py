"""From Python, against py-lmdb and rocksdict on the same data: a load through
batches, random gets and 100-key range scans on a cached Db; then pagewise
gets from 1 and 4 threads on a Db about 20x larger than its cache.

    python bindings/python/bench/compare.py --dir /path/on/ssd [--keys 1000000]

Needs a release build (pip install ./bindings/python, or maturin develop
--release) and `pip install lmdb rocksdict`. Prints a Markdown table and
one JSON line per figure. Seeded: --seed (printed)."""

import argparse
import json
import os
import random
import shutil
import threading
import time

import pagewise

BATCH = 1000
SCAN = 100


def data(n, seed):
    rng = random.Random(seed)
    keys = [rng.randbytes(16) for _ in range(n)]
    return keys, [rng.randbytes(100) for _ in range(n)]


def timed(fn, ops):
    t = time.perf_counter()
    fn()
    return ops / (time.perf_counter() - t)


class Pagewise:
    """A B+tree (kind None) or a B-epsilon tree (kind "bepsilon", the engine's defaults)."""

    def __init__(self, path, cache_bytes, direct_io=True, kind=None):
        self.db = pagewise.Db.create(path, cache_bytes=cache_bytes, durability="buffered", direct_io=direct_io)
        self.t = self.db.tree("t", kind=kind)

    def load(self, keys, values):
        db, t = self.db, self.t
        for i in range(0, len(keys), BATCH):
            b = pagewise.Batch()
            for k, v in zip(keys[i : i + BATCH], values[i : i + BATCH]):
                b.insert(t, k, v)
            db.apply(b)
        db.sync()
        db.checkpoint()  # dirty nodes to the file, as rocksdict's flush() writes its memtable

    def gets(self, keys):
        get = self.t.get
        for k in keys:
            if get(k) is None:
                raise AssertionError(k)

    def scans(self, starts):
        rng = self.t.range
        for s in starts:
            n = 0
            for _ in rng(s):
                n += 1
                if n == SCAN:
                    break

    def close(self):
        self.db.close()


class Lmdb:
    def __init__(self, path, cache_bytes):
        import lmdb

        self.env = lmdb.open(path, map_size=8 << 30, sync=False, metasync=False, readahead=False)

    def load(self, keys, values):
        for i in range(0, len(keys), BATCH):
            with self.env.begin(write=True) as txn:
                for k, v in zip(keys[i : i + BATCH], values[i : i + BATCH]):
                    txn.put(k, v)
        self.env.sync(True)

    def gets(self, keys):
        with self.env.begin() as txn:
            get = txn.get
            for k in keys:
                if get(k) is None:
                    raise AssertionError(k)

    def scans(self, starts):
        with self.env.begin() as txn:
            cur = txn.cursor()
            for s in starts:
                cur.set_range(s)
                n = 0
                for _ in cur:
                    n += 1
                    if n == SCAN:
                        break

    def close(self):
        self.env.close()


class Rocks:
    def __init__(self, path, cache_bytes):
        import rocksdict

        self.rd = rocksdict
        self.db = rocksdict.Rdict(path)

    def load(self, keys, values):
        for i in range(0, len(keys), BATCH):
            wb = self.rd.WriteBatch()
            for k, v in zip(keys[i : i + BATCH], values[i : i + BATCH]):
                wb.put(k, v)
            self.db.write(wb)
        self.db.flush()

    def gets(self, keys):
        get = self.db.get
        for k in keys:
            if get(k) is None:
                raise AssertionError(k)

    def scans(self, starts):
        it = self.db.iter()
        for s in starts:
            it.seek(s)
            n = 0
            while it.valid() and n < SCAN:
                it.key(), it.value()
                it.next()
                n += 1

    def close(self):
        self.db.close()


def cached(args, keys, values, out):
    rng = random.Random(args.seed + 1)
    probe_keys = [keys[rng.randrange(len(keys))] for _ in range(args.gets)]
    starts = [rng.randbytes(16) for _ in range(args.scans)]
    engines = [
        ("pagewise (B+tree)", lambda p, c: Pagewise(p, c)),
        ("pagewise (B-epsilon)", lambda p, c: Pagewise(p, c, kind="bepsilon")),
        ("py-lmdb", Lmdb),
        ("rocksdict", Rocks),
    ]
    for name, make in engines:
        path = os.path.join(args.dir, name.split()[0] + str(len(out)))
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        e = make(os.path.join(path, "db"), 1 << 30)
        row = {"engine": name, "keys": len(keys)}
        row["inserts_per_s"] = timed(lambda: e.load(keys, values), len(keys))
        e.gets(probe_keys[: len(probe_keys) // 10])  # warm
        row["gets_per_s"] = timed(lambda: e.gets(probe_keys), len(probe_keys))
        row["scans_per_s"] = timed(lambda: e.scans(starts), len(starts))
        e.close()
        shutil.rmtree(path, ignore_errors=True)
        print(json.dumps(row), flush=True)
        out.append(row)


def threaded(args, keys, values):
    path = os.path.join(args.dir, "pagewise-threads")
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    e = Pagewise(os.path.join(path, "db"), 1 << 30)
    e.load(keys, values)
    e.close()
    db = pagewise.Db.open(os.path.join(path, "db"), cache_bytes=args.small_cache_bytes)
    t = db.tree("t")
    file_bytes = os.path.getsize(os.path.join(path, "db"))
    res = {"file_bytes": file_bytes, "cache_bytes": args.small_cache_bytes}
    for n in (1, 4):
        counts = [0] * n

        def work(i):
            rng = random.Random(args.seed + 100 + i)
            get, end = t.get, time.perf_counter() + args.seconds
            c = 0
            while time.perf_counter() < end:
                for _ in range(64):
                    if get(keys[rng.randrange(len(keys))]) is None:
                        raise AssertionError("missing key")
                c += 64
            counts[i] = c

        th = [threading.Thread(target=work, args=(i,)) for i in range(n)]
        for x in th:
            x.start()
        for x in th:
            x.join()
        res[f"gets_per_s_{n}_threads"] = sum(counts) / args.seconds
    res["scaling"] = res["gets_per_s_4_threads"] / res["gets_per_s_1_threads"]
    db.close()
    shutil.rmtree(path, ignore_errors=True)
    print(json.dumps(res), flush=True)
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", required=True)
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--gets", type=int, default=500_000)
    p.add_argument("--scans", type=int, default=20_000)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--small-cache-bytes", type=int, default=7 << 20)
    p.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    p.add_argument("--skip-cached", action="store_true")
    args = p.parse_args()
    print(f"seed {args.seed}, load average {os.getloadavg()}", flush=True)
    keys, values = data(args.keys, args.seed)
    rows = []
    if not args.skip_cached:
        cached(args, keys, values, rows)
    thr = threaded(args, keys, values)
    print("| engine | inserts/s (batches of 1000) | gets/s | 100-key scans/s |")
    print("| --- | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['engine']} | {r['inserts_per_s']:,.0f} | {r['gets_per_s']:,.0f} | {r['scans_per_s']:,.0f} |")
    print(
        f"\n4 threads vs 1 on a {thr['file_bytes'] / 2**20:.0f} MiB file, {thr['cache_bytes'] / 2**20:.0f} MiB cache: "
        f"{thr['gets_per_s_1_threads']:,.0f} -> {thr['gets_per_s_4_threads']:,.0f} gets/s ({thr['scaling']:.2f}x)"
    )
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
