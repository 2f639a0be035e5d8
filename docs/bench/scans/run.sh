#!/usr/bin/env bash
# 100-row scans on 2M rows of 24-byte keys and 64-byte values (issue shape of
# "Where pagewise is behind"): fill, then scans with the bench's 64 MiB cache
# and with a 5% cache, every phase under the memory cap. Engines alternate per
# round; BEFORE (optional) is an older binary whose two tree kinds run too;
# PEER (optional, default BINARY) a binary with RocksDB compiled in
# (build-with-rocksdb.sh).
# Usage: run.sh BINARY OUTDIR ROUNDS [BEFORE] [PEER]
set -euo pipefail
B=$1 OUT=$2 ROUNDS=$3 BEFORE=${4:-} PEER=${5:-$1}
mkdir -p "$OUT"
W="fillrandom scan:duration=15s scan:cache=5%,duration=15s"
one() { # binary engine label round
  echo "$(date -u +%H:%M:%S) $3 round $4 load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/run.log"
  "$1" bench run -e "$2" --keys 2M --key-size 24 --value-size 64 --cache 64M --direct \
    --sync off --cap-phases all -w "$W" --json > "$OUT/$3-r$4.json" 2>> "$OUT/run.log"
}
for r in $(seq "${FIRST:-1}" "$ROUNDS"); do
  one "$B" pagewise-bepsilon bepsilon "$r"
  [ -n "$BEFORE" ] && one "$BEFORE" pagewise-bepsilon bepsilon-before "$r"
  one "$B" pagewise btree "$r"
  [ -n "$BEFORE" ] && one "$BEFORE" pagewise btree-before "$r"
  one "$PEER" rocksdb rocksdb "$r"
done
echo "$(date -u +%H:%M:%S) done load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/run.log"
