#!/usr/bin/env bash
set -u
OUT=/var/tmp/s100; C="--cache 64M --direct --sync off --cap-phases all"
W="fillrandom scan:duration=15s readrandom:cache=5%,duration=15s"
for r in 1 2 3; do
  for b in before after; do
    case $b in before) B=/work/lead/pagewise-2a1e5dd;; after) B=/work/lead/pagewise-pad;; esac
    echo "$(date -u +%T) r$r $b load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/load.txt
    $B bench run -e pagewise-bepsilon --keys 2M --value-size 100 $C -w "$W" -o $OUT/r$r-$b.jsonl > $OUT/r$r-$b.txt 2>&1
  done
done
echo "$(date -u +%T) end load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/load.txt
