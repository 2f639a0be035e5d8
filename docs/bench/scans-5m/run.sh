#!/usr/bin/env bash
# 100-row scans on the 5M suite (16-byte keys, 100-byte values, 256 MiB cache), cached
# (4 GiB, warmed) and at a 5% cache, every engine in one run under the memory cap.
# BEFORE (optional): an older binary whose B-epsilon tree runs too (bepsilon-before.jsonl).
set -u
B=${B:-/work/lead/pagewise-new}; OUT=${OUT:-/work/lead/s5m}; BEFORE=${BEFORE:-}
C="--keys 5M --cache 256M --direct --sync off --cap-phases all"
one() { # binary engine file
  echo "$(date -u +%H:%M:%S) $3 load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/run.log
  rm -rf /tmp/s5m-db
  $1 bench run -e $2 --dir /tmp/s5m-db $C -w "fillrandom scan:cache=4G,warm=1,duration=20s scan:cache=5%,duration=20s" --json >> $OUT/$3.jsonl 2>> $OUT/run.log
}
one $B pagewise-bepsilon pagewise-bepsilon
[ -n "$BEFORE" ] && one $BEFORE pagewise-bepsilon bepsilon-before
one $B rocksdb rocksdb
one $B pagewise pagewise
echo "$(date -u +%H:%M:%S) done load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/run.log
