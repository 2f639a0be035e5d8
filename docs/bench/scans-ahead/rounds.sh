#!/bin/bash
# docs/bench/scans/run.sh's rounds (2M rows, 24-byte keys, 64-byte values, 64 MiB
# cache then 5%), with only the B-epsilon tree of BEFORE beside.
# Usage: rounds.sh BINARY BEFORE OUTDIR (BINARY with RocksDB: build-with-rocksdb.sh)
set -euo pipefail
B=$1 BEFORE=$2 OUT=$3
W="fillrandom scan:duration=15s scan:cache=5%,duration=15s"
one() {
  echo "$(date -u +%H:%M:%S) $3 round $4 load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/run.log"
  "$1" bench run -e "$2" --keys 2M --key-size 24 --value-size 64 --cache 64M --direct \
    --sync off --cap-phases all -w "$W" --json > "$OUT/$3-r$4.json" 2>> "$OUT/run.log"
}
for r in 1 2 3; do
  one $B pagewise-bepsilon bepsilon $r
  one $BEFORE pagewise-bepsilon bepsilon-before $r
  one $B pagewise btree $r
  one $B rocksdb rocksdb $r
done
echo "$(date -u +%H:%M:%S) done load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/run.log"
