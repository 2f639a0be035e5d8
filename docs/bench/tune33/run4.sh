#!/bin/bash
# Fourth runs, started after run.sh ends, only while time remains.
while pgrep -f "/var/tmp/tune33/run.sh" >/dev/null; do sleep 5; done
B=/work/wt-tune/target/release/pagewise
OUT=/work/wt-tune/docs/bench/tune33
run() {
  local name=$1; shift
  if [ "$(date -u +%H%M)" -ge 1402 ]; then echo "skip $name (time)"; return; fi
  echo "$(date -u +%T) start $name load $(cut -d' ' -f1-3 /proc/loadavg)"
  $B tune /var/tmp/tune33/dir-${name%-r*} --json "$@" > $OUT/$name.json 2> /var/tmp/tune33/$name.err
  echo "$(date -u +%T) end $name rc $? load $(cut -d' ' -f1-3 /proc/loadavg)"
}
E="--rows 2M --cache 16MiB"
run real-r4
run nvme-r4 --emulate nvme $E
run x25e-r4 --emulate x25e $E
run hdd-r4 --emulate hdd $E
