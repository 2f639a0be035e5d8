#!/bin/bash
# docs/bench/cached-gets/run.sh OUT ROUNDS BIN... : interleaved rounds: cached gets at 1 and 2 threads, then gets at a 5% cache
out=$1; rounds=$2; shift 2
for r in $(seq 1 $rounds); do
  for b in "$@"; do
    n=$(basename $b)
    uptime >> $out/load.txt
    $b bench run -e pagewise,pagewise-bepsilon,lmdb --keys 1M --cache 256M --direct --sync off \
      -w "fillrandom readrandom:cache=4G,warm=1,duration=15s,ops=3M readrandom:cache=4G,warm=1,duration=15s,threads=2,ops=6M readrandom:cache=5%,duration=10s" \
      --out $out/$n-r$r.jsonl > $out/$n-r$r.log 2>&1
  done
done
uptime >> $out/load.txt
