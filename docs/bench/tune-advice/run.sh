#!/bin/bash
# Sequential `pagewise tune` runs, one JSON per run (docs/benchmarks.md,
# "Tune's advice measured"). Usage: run.sh FIRST_ROUND LAST_ROUND STOP_HHMM
# (UTC; a run is skipped once the clock passes it). Round 1 also runs the two
# described workloads. Runs of one profile share a directory under
# /var/tmp/tune-advice, so a run starts from the costs the previous one learned.
# PAGEWISE names the binary (default: target/release/pagewise).
set -u
[ $# -eq 3 ] || { echo "usage: $0 FIRST_ROUND LAST_ROUND STOP_HHMM" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
B=${PAGEWISE:-$HERE/../../../target/release/pagewise}
mkdir -p /var/tmp/tune-advice
run() { # name args...
  local name=$1; shift
  if [ "$(date -u +%H%M)" -ge "$STOP" ]; then echo "skip $name (time)"; return; fi
  echo "$(date -u +%T) start $name load $(cut -d' ' -f1-3 /proc/loadavg)"
  $B tune /var/tmp/tune-advice/dir-${name%-r*} --json "$@" > "$HERE/$name.json" 2> /var/tmp/tune-advice/$name.err
  echo "$(date -u +%T) end $name rc $? load $(cut -d' ' -f1-3 /proc/loadavg)"
}
STOP=$3
E="--rows 2M --cache 16MiB"
for ((r = $1; r <= $2; r++)); do
  run real-r$r
  run hdd-r$r --emulate hdd $E
  run x25e-r$r --emulate x25e $E
  run nvme-r$r --emulate nvme $E
  if [ "$r" -eq 1 ]; then
    run insert-heavy --mix point=0.1,insert=0.9
    run scan-heavy --mix point=0.2,range=0.8
  fi
done
