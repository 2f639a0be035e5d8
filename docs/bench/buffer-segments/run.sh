#!/usr/bin/env bash
# Buffer segments of a quarter basement: scans (2M rows, 24/64) and 5%-cache gets
# (1M rows, one and four threads), the binary before (pad) and after, RocksDB beside.
set -u
OUT=/work/lead/segy; cd $OUT
NEW=${NEW:-/work/lead/pagewise-new} OLD=/work/lead/pagewise-pad
one() { # bin engine label args...
  local b=$1 e=$2 l=$3; shift 3
  echo "$(date -u +%H:%M:%S) $l load $(cut -d' ' -f1-3 /proc/loadavg)" >> run.log
  rm -rf /tmp/segy-db
  "$b" bench run -e "$e" --dir /tmp/segy-db "$@" --json >> "$l.jsonl" 2>> run.log
}
S="--keys 2M --key-size 24 --value-size 64 --cache 64M --direct --sync off --cap-phases all"
SW="fillrandom scan:duration=15s scan:cache=5%,duration=15s"
G="--keys 1M --cache 64M --direct --sync off --cap-phases all"
GW="fillrandom readrandom:cache=5%,duration=15s readrandom:cache=5%,duration=15s,threads=4"
for r in $(seq 1 ${ROUNDS:-3}); do
  one $NEW pagewise-bepsilon scan-new $S -w "$SW"
  one $OLD pagewise-bepsilon scan-old $S -w "$SW"
  one $NEW rocksdb scan-rocks $S -w "$SW"
  one $NEW pagewise-bepsilon get-new $G -w "$GW"
  one $OLD pagewise-bepsilon get-old $G -w "$GW"
  one $NEW rocksdb get-rocks $G -w "$GW"
done
echo "$(date -u +%H:%M:%S) done load $(cut -d' ' -f1-3 /proc/loadavg)" >> run.log
