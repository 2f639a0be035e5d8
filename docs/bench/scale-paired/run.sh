#!/bin/bash
# docs/bench/scale-paired/run.sh BINARY OUTDIR: the 50M-row fill of docs/bench/scale/run.sh
# (then gets at a 5% cache), B-epsilon against RocksDB in one run, after paired flushes.
set -u
B=$1; out=$2; mkdir -p $out
C="--cache 256M --direct --sync off --cap-phases all"
uptime >> $out/load.txt
$B bench run -e pagewise-bepsilon,rocksdb --keys 50M $C \
  -w "fillrandom readrandom:cache=5%,duration=30s" --out $out/fill50m.jsonl > $out/fill50m.log 2>&1
uptime >> $out/load.txt
