"""Prints the scans table from run.sh's JSON lines (one per phase)."""
import glob, json, os, sys
d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__)
rows = {}
for f in sorted(glob.glob(os.path.join(d, "*-r*.json"))):
    label, r = os.path.basename(f)[:-5].rsplit("-r", 1)
    phases = [json.loads(l) for l in open(f) if l.strip()]
    out = rows.setdefault(label, {})
    for i, p in enumerate(phases):
        w = p.get("spec", "?")
        rate = p.get("ops_per_s") or 0
        out.setdefault((i, w), []).append(rate)
for label, ph in rows.items():
    print(label, " | ".join(f"{w}: " + " / ".join(f"{x:,.0f}" for x in v) for (i, w), v in sorted(ph.items())))
