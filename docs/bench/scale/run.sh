#!/bin/bash
# docs/bench/scale/run.sh BINARY OUTDIR: the B-epsilon tree against RocksDB at scale, one run:
# fillrandom of 50M rows then gets at a 5% cache, and iiBench at 20M rows; the 5M suite's
# settings otherwise (256 MiB cache, direct I/O, no sync while loading, every phase capped).
set -u
B=$1; out=$2; mkdir -p $out
C="--cache 256M --direct --sync off --cap-phases all"
uptime >> $out/load.txt
$B bench run -e pagewise-bepsilon,rocksdb --keys 50M $C \
  -w "fillrandom readrandom:cache=5%,duration=30s" --out $out/fill50m.jsonl > $out/fill50m.log 2>&1
uptime >> $out/load.txt
$B bench run -e pagewise-bepsilon,rocksdb --keys 20M $C -w iibench \
  --out $out/ii20m.jsonl > $out/ii20m.log 2>&1
uptime >> $out/load.txt
