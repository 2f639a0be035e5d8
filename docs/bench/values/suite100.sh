#!/usr/bin/env bash
# 100-byte values before/after value extents: B-epsilon, 5M rows, alternating binaries.
# Usage: docs/bench/values/suite100.sh BEFORE AFTER OUTDIR ROUNDS
set -u
A=$1; B=$2; OUT=$3; R=${4:-3}; mkdir -p "$OUT"
C="--keys 5M --cache 256M --direct --sync off --cap-phases all"
W="fillrandom readrandom:cache=4G,warm=1,duration=20s readrandom:cache=5%,duration=20s"
for r in $(seq 1 $R); do
  for v in before after; do
    bin=$A; [ $v = after ] && bin=$B
    echo "$(date -u +%T) round $r $v load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"
    $bin bench run -e pagewise-bepsilon $C -w "$W" -o "$OUT/$v-r$r.jsonl" > "$OUT/$v-r$r.txt" 2>&1
  done
done
echo "$(date -u +%T) end load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"
