#!/usr/bin/env bash
# Runs fio and `pagewise probe` on the same file with the same job, many short
# runs interleaved (the order alternates every round), so the drifts of a shared
# machine hit both tools alike. Both run at the same raised priority (NICE).
#
# Usage: fio_compare.sh FILE PAGEWISE_BINARY [ROUNDS]
#   FILE must exist and hold data you may overwrite (the randwrite case writes it).
#   Environment: RUNTIME seconds per run (default 5), RAMP warm-up seconds
#   (default 1), PRIO command prefix for both tools (default "chrt -f 50"),
#   FIO_EXTRA extra fio options (e.g. --gtod_reduce=1), CASES to run a subset.
# Prints one line per pair of runs and, per case, the median IOPS of each tool,
# the ratio of the medians and the median of the per-pair ratios.
set -euo pipefail
FILE=$1
PW=$2
ROUNDS=${3:-6}
RUNTIME=${RUNTIME:-5}
RAMP=${RAMP:-1}
PRIO=${PRIO:-chrt -f 50}
FIO_EXTRA=${FIO_EXTRA:-}

# CASES (optional): "rw bs qd" triples separated by ';' to run only those.
if [[ -n ${CASES:-} ]]; then
  IFS=';' read -r -a CASES <<<"$CASES"
else
  CASES=(
    "randread 4k 1"
    "randread 4k 32"
    "randread 64k 1"
    "randwrite 4k 1"
  )
fi

fio_iops() { # rw bs qd
  local dir=read
  [[ $1 == randwrite ]] && dir=write
  # shellcheck disable=SC2086
  $PRIO fio $FIO_EXTRA --name=cmp --filename="$FILE" --size=1g --rw="$1" --bs="$2" --iodepth="$3" \
    --ioengine=io_uring --direct=1 --time_based --runtime="$RUNTIME" --ramp_time="$RAMP" \
    --norandommap --randrepeat=0 --output-format=json |
    python3 -c "import json,sys; print(round(json.load(sys.stdin)['jobs'][0]['$dir']['iops'], 1))"
}

probe_iops() { # rw bs qd
  local extra=()
  [[ $1 == randwrite ]] && extra=(--allow-write)
  # shellcheck disable=SC2086
  $PRIO "$PW" probe "$FILE" --mode "$1" --bs "$2" --qd "$3" --engine uring --direct \
    --duration "${RUNTIME}s" --warmup "${RAMP}s" --min-reps 1 --max-reps 1 --json "${extra[@]}" |
    python3 -c "import json,sys; print(round(json.load(sys.stdin)['points'][0]['iops'], 1))"
}

declare -A FIO PROBE
for round in $(seq "$ROUNDS"); do
  for c in "${CASES[@]}"; do
    read -r rw bs qd <<<"$c"
    if (( round % 2 )); then
      f=$(fio_iops "$rw" "$bs" "$qd"); p=$(probe_iops "$rw" "$bs" "$qd")
    else
      p=$(probe_iops "$rw" "$bs" "$qd"); f=$(fio_iops "$rw" "$bs" "$qd")
    fi
    echo "round $round  $rw bs=$bs qd=$qd  fio $f  probe $p"
    FIO[$c]="${FIO[$c]:-} $f"
    PROBE[$c]="${PROBE[$c]:-} $p"
  done
done

echo
echo "case              fio median  probe median  probe/fio (medians)  median of pair ratios"
for c in "${CASES[@]}"; do
  python3 - "$c" "${FIO[$c]}" "${PROBE[$c]}" <<'PY'
import sys, statistics as st
case = sys.argv[1]
f = [float(x) for x in sys.argv[2].split()]
p = [float(x) for x in sys.argv[3].split()]
ratios = [b / a for a, b in zip(f, p)]
print(f"{case:<17} {st.median(f):>10.0f}  {st.median(p):>12.0f}  {st.median(p) / st.median(f):>19.3f}  {st.median(ratios):>21.3f}")
PY
done
