#!/usr/bin/env python3
"""Summarizes the allocator runs (docs/benchmarks.md, "Memory", other
allocators): one line per phase: ops/s, CPU, the memory cap's limit and
peak, raises. 5m-held/5m-je*: glibc against jemalloc (834cda6's engine);
explore-*: single fills, other allocators; copies-*: 834cda6 (held) against
499dfd6 (lz4), fewer allocations and copies per write; arena-*: 499dfd6
against arenas growing by half at least (g15)."""
import glob, json, os, sys

here = os.path.dirname(os.path.abspath(__file__))
for f in sorted(glob.glob(os.path.join(here, "*.jsonl"))):
    for line in open(f):
        d = json.loads(line)
        cap = d["memory_cap"]
        raised = sum(1 for n in d["notes"] if "raised it" in n)
        print(f"{os.path.basename(f):24} {d['engine']:18} {d['workload'][:28]:28} "
              f"{d['ops_per_s']:10.0f}/s user {d['cpu_user_s']:5.1f} s sys {d['cpu_sys_s']:4.1f} s "
              f"limit {cap['limit_bytes'] >> 20:5} MiB peak {cap['peak_bytes'] >> 20:4} MiB "
              f"rss {d['peak_rss_bytes'] >> 20:4} MiB raised {raised}")
