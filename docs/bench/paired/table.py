#!/usr/bin/env python3
"""Summarizes rounds.sh's runs: per round and phase, the B-epsilon tree
before (c33cb36) and after, RocksDB beside the after run; rates, CPU, device
WA, the memory cap's peak and limit. Top level: after = 7944871 (paired
flushes); chunks/: after = a80ef02 (paired flushes and chunked buffers).
With directories as arguments, those instead (../owned: before = a80ef02,
after = 2793462, writes taking owned bytes)."""
import glob, json, os, sys

here = os.path.dirname(os.path.abspath(__file__))
dirs = sys.argv[1:] or [here, os.path.join(here, "chunks")]
for sub in dirs:
    for f in sorted(glob.glob(os.path.join(sub, "*-r*.jsonl"))):
        for line in open(f):
            d = json.loads(line)
            cap = d["memory_cap"]
            wa = d.get("write_amp_device") or 0.0
            print(f"{os.path.relpath(f, here):22} {d['engine']:18} "
                  f"{d['workload'][:24]:24} {d['ops_per_s']:10.0f}/s "
                  f"user {d['cpu_user_s']:5.1f} s sys {d['cpu_sys_s']:4.1f} s WA {wa:4.2f} "
                  f"peak {cap['peak_bytes'] >> 20:4} of {cap['limit_bytes'] >> 20} MiB")
