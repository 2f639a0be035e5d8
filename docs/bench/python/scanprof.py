"""Load N random 16-byte keys with 100-byte values through batches, then time
range scans of 1, 100 and 1000 entries from random starts and random gets
(cached). Usage: scanprof.py btree|bepsilon N"""
import sys, time, random, pagewise, shutil, os
kind = sys.argv[1] if len(sys.argv) > 1 else "btree"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 200000
path = f"/var/tmp/scanprof-{kind}"
shutil.rmtree(path, ignore_errors=True)
if os.path.exists(path): os.remove(path)
rng = random.Random(7)
keys = [rng.randbytes(16) for _ in range(n)]
vals = [rng.randbytes(100) for _ in range(n)]
db = pagewise.Db.create(path, cache_bytes=1 << 30, durability="buffered", direct_io=True)
t = db.tree("t", kind=kind)
t0 = time.perf_counter()
for i in range(0, n, 1000):
    b = pagewise.Batch()
    for k, v in zip(keys[i:i+1000], vals[i:i+1000]):
        b.insert(t, k, v)
    db.apply(b)
db.sync()
t1 = time.perf_counter(); print(f"load {n/(t1-t0):,.0f}/s")
starts = [rng.randbytes(16) for _ in range(5000)]
def scan(m):
    t0 = time.perf_counter()
    for s in starts:
        c = 0
        for _ in t.range(s):
            c += 1
            if c == m: break
    return (time.perf_counter() - t0) / len(starts) * 1e6
for m in (1, 100, 1000):
    print(f"scan {m}: {scan(m):.1f} us")
g = [keys[rng.randrange(n)] for _ in range(100000)]
t0 = time.perf_counter()
for k in g: t.get(k)
print(f"gets {len(g)/(time.perf_counter()-t0):,.0f}/s")
db.close()
