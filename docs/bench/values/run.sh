#!/usr/bin/env bash
# Values of 1 to 16 KB (docs/benchmarks.md): each engine in its own invocation, so one
# killed by the memory cap loses nothing else.
# Usage: docs/bench/values/run.sh BINARY OUTDIR
set -u
B=$1; OUT=$2; mkdir -p "$OUT"
C="--cache 64M --direct --sync off --cap-phases all"
W="fillrandom scan:duration=20s readrandom:cache=5%,duration=20s"
for shape in "1000 500K" "4000 200K" "16000 50K"; do
  set -- $shape; vs=$1; n=$2
  for e in pagewise-bepsilon rocksdb pagewise lmdb off; do
    extra=""; eng=$e
    if [ $e = off ]; then eng=pagewise-bepsilon; extra="--bepsilon-value-extent off"; fi
    echo "$(date -u +%T) $vs $e load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"
    $B bench run -e $eng $extra --keys $n --value-size $vs $C -w "$W" \
       -o "$OUT/values-$vs-$e.jsonl" > "$OUT/values-$vs-$e.txt" 2>&1
  done
done
echo "$(date -u +%T) end load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"
