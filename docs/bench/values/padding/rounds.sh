#!/usr/bin/env bash
# Alternated rounds: packed values before (b24a7d5) and after the padding rule, RocksDB beside.
set -u
OUT=/var/tmp/pad; C="--cache 64M --direct --sync off --cap-phases all"
W="fillrandom scan:duration=20s readrandom:cache=5%,duration=20s"
for r in 1 2; do
  for shape in "1000 500K" "4000 200K"; do
    set -- $shape; vs=$1; n=$2
    for b in before after rocks; do
      case $b in before) B=/work/lead/pagewise-b24a7d5; e=pagewise-bepsilon;; after) B=/work/lead/pagewise-pad; e=pagewise-bepsilon;; rocks) B=/work/lead/pagewise-pad; e=rocksdb;; esac
      echo "$(date -u +%T) r$r $vs $b load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/load.txt
      $B bench run -e $e --keys $n --value-size $vs $C -w "$W" -o $OUT/r$r-$vs-$b.jsonl > $OUT/r$r-$vs-$b.txt 2>&1
    done
  done
done
echo "$(date -u +%T) end load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/load.txt
