#!/usr/bin/env bash
# The side-by-side table of docs/benchmarks.md ("Engine against peers (5M
# rows)"): pagewise's engines vs every peer at 5M rows, one binary, one
# machine, each engine on its own loop-mounted ext4.
# Usage: crates/pagewise-bench/bench/compare-5m.sh [OUT.jsonl]   (as root, after build-with-rocksdb.sh)
# Environment: B the binary, ENGINES, KEYS, CACHE, CAP_PHASES (below), and
# FLAGS: more `bench run` flags for both runs, e.g.
#   FLAGS="--bepsilon-node 512k --bepsilon-fanout 16 --wal-limit 128m"
set -euo pipefail
B=${B:-target/release/pagewise}
out=${1:-compare-5m.jsonl}
engines=${ENGINES:-pagewise,pagewise-bepsilon,redb,lmdb,sqlite,rocksdb}
keys=${KEYS:-5M}
cache=${CACHE:-256M}
# all: every phase under the same memory cap (fills and iiBench too, the
# bench's default); small-cache: only the 5%-cache reads are capped.
# Capped, the page-cache engines (LMDB, SQLite, redb) fill far slower: expect hours at 5M.
cap=${CAP_PHASES:-all}
read -r -a flags <<<"${FLAGS:-}"
uptime
$B bench run -e "$engines" --keys "$keys" --cache "$cache" --direct --sync off --cap-phases "$cap" \
  "${flags[@]}" \
  -w "fillrandom readrandom:cache=4G,warm=1,duration=20s readrandom:cache=5%,duration=20s scan:duration=20s" \
  --out "$out"
uptime
$B bench run -e "$engines" --keys "$keys" --cache "$cache" --direct --sync off --cap-phases "$cap" \
  "${flags[@]}" -w iibench --out "$out"
uptime
$B bench report "$out" --markdown
$B bench report "$out" -o "${out%.jsonl}.html"
