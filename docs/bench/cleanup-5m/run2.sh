#!/usr/bin/env bash
# Rounds 2 and 3: the same phases, without the B+tree's iiBench (17 min a run).
set -uo pipefail
cd /work/bench29
for r in 2 3; do
  for which in before after; do
    B=/work/pagewise-$which
    if [ $which = before ]; then be=pagewise-beps; else be=pagewise-bepsilon; fi
    out=r$r-$which.jsonl
    echo "== round $r $which $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
    $B bench run -e "$be,pagewise,rocksdb" --keys 5M --cache 256M --direct --sync off --cap-phases all \
      -w "fillrandom readrandom:cache=4G,warm=1,duration=20s readrandom:cache=5%,duration=20s" --out "$out" > r$r-$which.log 2>&1
    $B bench run -e "$be,rocksdb" --keys 5M --cache 256M --direct --sync off --cap-phases all \
      -w iibench --out "$out" >> r$r-$which.log 2>&1
    echo "   done $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg) exit $?"
  done
done
