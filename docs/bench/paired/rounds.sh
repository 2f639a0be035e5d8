#!/usr/bin/env bash
# Paired flushes, 5M rows: rounds alternating the binary before (B0, the
# B-epsilon tree alone) and after (B1, with RocksDB in the same run).
# Usage: rounds.sh B0 B1 OUTDIR ROUNDS
set -euo pipefail
b0=$1 b1=$2 out=$3 rounds=${4:-3}
mkdir -p "$out"
w="fillrandom readrandom:cache=5%,duration=20s"
common=(--keys 5M --cache 256M --direct --sync off --cap-phases all -w "$w" --dir /var/tmp/paired-db)
for r in $(seq 1 "$rounds"); do
  uptime >>"$out/load.txt"
  "$b1" bench run -e pagewise-bepsilon,rocksdb "${common[@]}" -o "$out/after-r$r.jsonl"
  uptime >>"$out/load.txt"
  "$b0" bench run -e pagewise-bepsilon "${common[@]}" -o "$out/before-r$r.jsonl"
done
uptime >>"$out/load.txt"
