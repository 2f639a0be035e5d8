#!/usr/bin/env bash
# Cached 100-row scans (1M rows, 16-byte keys, 100-byte values, 256 MiB cache,
# every entry read once before timing): CPU-bound scans of both tree kinds,
# of BINARY and of BEFORE, with RocksDB from BINARY, engines alternating per
# round, every phase under the memory cap.
# Usage: run.sh BINARY BEFORE OUTDIR ROUNDS
set -euo pipefail
B=$1 BEFORE=$2 OUT=$3 ROUNDS=$4
mkdir -p "$OUT"
W="fillrandom scan:cache=4G,warm=1,duration=15s,ops=200000"
one() { # binary engine label round
  echo "$(date -u +%H:%M:%S) $3 round $4 load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/run.log"
  "$1" bench run -e "$2" --keys 1M --cache 256M --direct --sync off --cap-phases all \
    -w "$W" --json > "$OUT/$3-r$4.json" 2>> "$OUT/run.log"
}
for r in $(seq 1 "$ROUNDS"); do
  one "$B" pagewise-bepsilon bepsilon "$r"
  one "$BEFORE" pagewise-bepsilon bepsilon-before "$r"
  one "$B" pagewise btree "$r"
  one "$BEFORE" pagewise btree-before "$r"
  one "$B" rocksdb rocksdb "$r"
done
echo "$(date -u +%H:%M:%S) done load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/run.log"
