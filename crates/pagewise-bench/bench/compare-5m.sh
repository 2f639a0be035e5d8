#!/usr/bin/env bash
# The side-by-side table of docs/benchmarks.md: pagewise vs every peer at 5M
# rows, one binary, one machine, each engine on its own loop-mounted ext4.
# Usage: crates/pagewise-bench/bench/compare-5m.sh [OUT.jsonl]   (as root, after build-with-rocksdb.sh)
set -euo pipefail
B=${B:-target/release/pagewise}
out=${1:-compare-5m.jsonl}
engines=${ENGINES:-pagewise,redb,lmdb,sqlite,rocksdb}
keys=${KEYS:-5M}
cache=${CACHE:-256M}
uptime
$B bench run -e "$engines" --keys "$keys" --cache "$cache" --direct --sync off \
  -w "fillrandom readrandom:cache=4G,warm=1,duration=20s readrandom:cache=5%,duration=20s scan:duration=20s" \
  --out "$out"
uptime
$B bench run -e "$engines" --keys "$keys" --cache "$cache" --direct --sync off -w iibench --out "$out"
uptime
$B bench report "$out" --markdown
$B bench report "$out" -o "${out%.jsonl}.html"
