import random, sys, shutil, os, pagewise
d, n_scans, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
shutil.rmtree(d, ignore_errors=True); os.makedirs(d)
rng = random.Random(7)
db = pagewise.Db.create(d + "/db.pw", cache_bytes=1 << 30, durability="buffered")
t = db.tree("t", kind=None if kind == "btree" else "bepsilon")
keys = [rng.randbytes(16) for _ in range(50_000)]
for i in range(0, len(keys), 1000):
    b = pagewise.Batch()
    for k in keys[i:i + 1000]:
        b.insert(t, k, rng.randbytes(100))
    db.apply(b)
for _ in t.range(): pass
seen = 0
rng_ = t.range
for s in range(n_scans):
    n = 0
    for _ in rng_(keys[s]):
        n += 1
        if n == 100: break
    seen += n
print(seen)
db.close()
