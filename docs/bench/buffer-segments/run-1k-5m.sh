#!/usr/bin/env bash
# 1 KB values (500k rows: fill, 100-row scans, 5%-cache gets) and the 5M suite's fill and
# 5%-cache gets, the binary with 4 KiB buffer segments (NEW) against the one before (OLD),
# RocksDB beside, alternated.
set -u
NEW=${NEW:-/work/lead/pagewise-new} OLD=${OLD:-/work/lead/pagewise-pad} OUT=${OUT:-/work/lead/v1k}
one() { # bin engine label args...
  local b=$1 e=$2 l=$3; shift 3
  echo "$(date -u +%H:%M:%S) $l load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/run.log
  rm -rf /tmp/v1k-db
  "$b" bench run -e "$e" --dir /tmp/v1k-db "$@" --json >> "$OUT/$l.jsonl" 2>> $OUT/run.log
}
V="--keys 500K --value-size 1000 --cache 64M --direct --sync off --cap-phases all"
VW="fillrandom scan:duration=20s readrandom:cache=5%,duration=20s"
F="--keys 5M --cache 256M --direct --sync off --cap-phases all"
FW="fillrandom readrandom:cache=5%,duration=20s"
for r in 1 2; do
  one $NEW pagewise-bepsilon v1k-new $V -w "$VW"
  one $OLD pagewise-bepsilon v1k-old $V -w "$VW"
  one $NEW rocksdb v1k-rocks $V -w "$VW"
  one $NEW pagewise-bepsilon 5m-new $F -w "$FW"
  one $OLD pagewise-bepsilon 5m-old $F -w "$FW"
done
one $NEW rocksdb 5m-rocks $F -w "$FW"
echo "$(date -u +%H:%M:%S) done load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/run.log
