import json, sys, glob, os, collections, statistics as st
# python3 docs/bench/cached-gets/table.py DIR... [--pool NAME=BIN,BIN ...] > table.md
# Per run: gets/s of each engine (1T, 2T, 5% cache) and the ratios to LMDB in the same run;
# then, per pool of binaries, the median and range of each ratio over all their runs.
args = sys.argv[1:]
dirs = [a for a in args if "=" not in a and a != "--pool"]
pools = dict(a.split("=", 1) for a in args if "=" in a)
rows = collections.defaultdict(dict)
for d in dirs:
    for f in sorted(glob.glob(d + "/*.jsonl")):
        b = os.path.basename(f).rsplit("-r", 1)
        binr = b[0].replace("pagewise-", "").replace("-rocks", "")
        r = os.path.basename(d) + "/r" + b[1].split(".")[0]
        for line in open(f):
            j = json.loads(line)
            w, e = j["spec"], j["engine"]
            if not w.startswith("readrandom"):
                continue
            t = "5%" if "cache=5%" in w else ("2T" if "threads=2" in w else "1T")
            rows[(binr, r)][(e, t)] = j["ops_per_s"]
E = ["pagewise", "pagewise-bepsilon", "lmdb"]
print("| binary, run | B+tree 1T (x LMDB) | B+tree 2T/1T | B-eps 1T (x LMDB) | B-eps 2T/1T | LMDB 1T | LMDB 2T/1T | 5% cache: B+tree / B-eps / LMDB |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
agg = collections.defaultdict(list)
for (b, r), v in sorted(rows.items()):
    if ("lmdb", "1T") not in v:
        continue
    l1 = v[("lmdb", "1T")]
    cells = []
    for e in E:
        a, c = v[(e, "1T")], v[(e, "2T")]
        cells.append(f"{a:,.0f}" + ("" if e == "lmdb" else f" ({a / l1:.2f}x)"))
        cells.append(f"{c / a:.2f}x")
        for k, x in [("x", a / l1), ("2/1", c / a), ("1T", a), ("2T", c), ("5%", v.get((e, "5%"), 0))]:
            agg[(b, e, k)].append(x)
    cells.append(" / ".join(f"{v.get((e, '5%'), 0):,.0f}" for e in E))
    print(f"| `{b}` {r} | " + " | ".join(cells) + " |")
print()
for name, bins in pools.items():
    for e in E:
        for k in ["x", "2/1", "1T", "2T", "5%"]:
            vals = [x for b in bins.split(",") for x in agg[(b, e, k)]]
            if vals:
                print(f"{name} {e} {k}: median {st.median(vals):,.2f} range {min(vals):,.2f}-{max(vals):,.2f} (n={len(vals)})")
