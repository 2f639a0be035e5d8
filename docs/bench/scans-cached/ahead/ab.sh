#!/bin/bash
OUT=${OUT:-.}  # B-epsilon cached 100-row scans (1M rows): 30ebbf4 against a5b647b (its release build), alternated
W="fillrandom scan:cache=4G,warm=1,duration=15s,ops=200000"
for r in 1 2 3; do for b in /work/lead/pagewise-30ebbf4 /work/lead/pagewise-lto; do
  l=$(basename $b); echo "$(date -u +%T) $l r$r load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log
  $b bench run -e pagewise-bepsilon --keys 1M --cache 256M --direct --sync off --cap-phases all -w "$W" --dir /var/tmp/sc2/db --json > $OUT/$l-r$r.json 2>>$OUT/log
done; done; echo "$(date -u +%T) done" >> $OUT/log
