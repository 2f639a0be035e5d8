#!/usr/bin/env bash
# Values of 1 to 16 KB (docs/benchmarks.md): each engine in its own invocation, one
# after another, so one killed by the memory cap loses nothing else.
# Usage: docs/bench/values/run.sh BINARY OUTDIR [SHAPE...]
#   SHAPE: "VALUE_BYTES ROWS ENGINE..." (engine "off": pagewise-bepsilon with its values
#   in the tree); default: 1,000, 4,000 and 16,000 bytes, every engine.
set -u
B=$1; OUT=$2; shift 2; mkdir -p "$OUT"
all="pagewise-bepsilon rocksdb pagewise lmdb off"
[ $# -eq 0 ] && set -- "1000 500K $all" "4000 200K $all" "16000 50K $all"
C="--cache 64M --direct --sync off --cap-phases all"
W="fillrandom scan:duration=20s readrandom:cache=5%,duration=20s"
for shape in "$@"; do
  set -- $shape; vs=$1; n=$2; shift 2
  for e in "$@"; do
    extra=""; eng=$e
    if [ $e = off ]; then eng=pagewise-bepsilon; extra="--bepsilon-value-extent off"; fi
    echo "$(date -u +%T) $vs $e load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"
    $B bench run -e $eng $extra --keys $n --value-size $vs $C -w "$W" \
       -o "$OUT/values-$vs-$e.jsonl" > "$OUT/values-$vs-$e.txt" 2>&1
  done
done
echo "$(date -u +%T) end load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"
