#!/usr/bin/env bash
# Issue 29's must-show on a quiet machine: the 5M-row suite, one binary before
# (0694941) and after (44df8ec) the cleanup, alternating, three rounds.
set -uo pipefail
cd /work/bench29q
for r in 1 2 3; do
  for which in before after; do
    B=/work/pagewise-$which
    if [ $which = before ]; then be=pagewise-beps; else be=pagewise-bepsilon; fi
    out=q$r-$which.jsonl
    echo "== round $r $which $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
    $B bench run -e "$be,pagewise,rocksdb" --keys 5M --cache 256M --direct --sync off --cap-phases all \
      -w "fillrandom readrandom:cache=4G,warm=1,duration=20s readrandom:cache=5%,duration=20s" --out "$out" > q$r-$which.log 2>&1
    $B bench run -e "$be,rocksdb" --keys 5M --cache 256M --direct --sync off --cap-phases all \
      -w iibench --out "$out" >> q$r-$which.log 2>&1
    echo "   done $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg) exit $?"
  done
done
