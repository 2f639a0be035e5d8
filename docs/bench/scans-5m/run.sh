#!/usr/bin/env bash
# 100-row scans on the 5M suite (16-byte keys, 100-byte values, 256 MiB cache), cached
# (4 GiB, warmed) and at a 5% cache, every engine in one run under the memory cap.
set -u
B=${B:-/work/lead/pagewise-new}; OUT=${OUT:-/work/lead/s5m}
C="--keys 5M --cache 256M --direct --sync off --cap-phases all"
for e in pagewise-bepsilon rocksdb pagewise; do
  echo "$(date -u +%H:%M:%S) $e load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/run.log
  rm -rf /tmp/s5m-db
  $B bench run -e $e --dir /tmp/s5m-db $C -w "fillrandom scan:cache=4G,warm=1,duration=20s scan:cache=5%,duration=20s" --json >> $OUT/$e.jsonl 2>> $OUT/run.log
done
echo "$(date -u +%H:%M:%S) done load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/run.log
