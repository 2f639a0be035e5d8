#!/usr/bin/env bash
# Issue 29's must-show: the 5M-row suite, one binary before and after the
# cleanup, alternating, three rounds. Each binary names the B-epsilon engine
# its own way (before: pagewise-beps; after: pagewise-bepsilon).
set -uo pipefail
cd /work/bench29
for r in 1 2 3; do
  for which in before after; do
    B=/work/pagewise-$which
    if [ $which = before ]; then be=pagewise-beps; else be=pagewise-bepsilon; fi
    out=r$r-$which.jsonl
    echo "== round $r $which $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
    $B bench run -e "$be,pagewise,rocksdb" --keys 5M --cache 256M --direct --sync off --cap-phases all \
      -w "fillrandom readrandom:cache=4G,warm=1,duration=20s readrandom:cache=5%,duration=20s" --out "$out" > r$r-$which.log 2>&1
    $B bench run -e "$be,pagewise,rocksdb" --keys 5M --cache 256M --direct --sync off --cap-phases all \
      -w iibench --out "$out" >> r$r-$which.log 2>&1
    echo "   done $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg) exit $?"
  done
done
