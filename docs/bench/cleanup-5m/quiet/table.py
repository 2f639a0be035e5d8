#!/usr/bin/env python3
"""Ratios to RocksDB in the same run, per phase, before and after, per round."""
import json, sys, glob, os
os.chdir(os.path.dirname(os.path.abspath(__file__)))
PH = [("fillrandom", "fillrandom"), ("cached gets", "readrandom:cache=4G"),
      ("5%-cache gets", "readrandom:cache=5%"), ("iiBench", "iibench")]
def load(path):
    out = {}
    for l in open(path):
        r = json.loads(l)
        e = {"pagewise-bepsilon": "B-epsilon", "pagewise-beps": "B-epsilon",
             "pagewise": "B+tree"}.get(r["engine"], r["engine"])
        w = r["spec"]
        for name, pre in PH:
            if w.startswith(pre):
                out[(e, name)] = (r["ops_per_s"], r.get("write_amp_device"))
    return out
rows = {}
for which in ("before", "after"):
    for path in sorted(glob.glob(f"q*-{which}.jsonl")):
        rnd = path[1]
        d = load(path)
        for (e, ph), (ops, wa) in d.items():
            if e == "rocksdb":
                continue
            base = d.get(("rocksdb", ph))
            if base:
                rows.setdefault((ph, e), {}).setdefault(which, []).append((rnd, ops / base[0], wa))
print("| phase, ratio to RocksDB in the same run | before r1 / r2 / r3 | after r1 / r2 / r3 | after / before (medians) | device WA before / after |")
print("| --- | --- | --- | --- | --- |")
import statistics as st
for (ph, e), v in rows.items():
    b = [x[1] for x in v.get("before", [])]; a = [x[1] for x in v.get("after", [])]
    wa = lambda xs: (xs[0][2] if xs and xs[0][2] is not None else None)
    fmt = lambda xs: " / ".join(f"{x:.2f}" for x in xs) or "-"
    rel = f"{st.median(a)/st.median(b):.3f}" if a and b else "-"
    wb, wf = wa(v.get("before", [])), wa(v.get("after", []))
    was = f"{wb:.2f} / {wf:.2f}" if wb and wf and ph in ("fillrandom", "iiBench") else "- / -"
    print(f"| {ph}, {e} | {fmt(b)} | {fmt(a)} | {rel} | {was} |")
