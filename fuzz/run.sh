#!/usr/bin/env bash
# Runs fuzz targets one after another (the machine is shared: one job at a
# time), each from the committed seeds plus the growing full corpus, with
# debug assertions and overflow checks on. Usage:
#   [MAX_SECONDS=S] fuzz/run.sh RUNS [TARGET...]   (default: every target;
#   MAX_SECONDS caps each run, libFuzzer -max_total_time, default none)
# Logs: fuzz/logs/<target>.log; crashes: fuzz/artifacts/<target>/.
set -u
cd "$(dirname "$0")"
runs=${1:?usage: fuzz/run.sh RUNS [TARGET...]}
shift
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(page catalog descriptors btree_node btree_delta bepsilon_node bepsilon_part log_record log_ops)
fi
mkdir -p logs
for t in "${targets[@]}"; do
    mkdir -p "corpus-full/$t"
    start=$(date +%s)
    cargo +nightly fuzz run -a -O "$t" "corpus-full/$t" "corpus/$t" -- \
        -runs="$runs" -max_total_time="${MAX_SECONDS:-0}" -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1 \
        > "logs/$t.log" 2>&1
    rc=$?
    echo "$t rc=$rc seconds=$(( $(date +%s) - start )) $(grep -h '^Done\|stat::number_of_executed_units' "logs/$t.log" | tr '\n' ' ')"
done
