#!/bin/bash
# Sequential tune runs for issue 33; one JSON per run.
B=/work/wt-tune/target/release/pagewise
OUT=/work/wt-tune/docs/bench/tune33
run() { # name args...
  local name=$1; shift
  if [ "$(date -u +%H%M)" -ge 1405 ]; then echo "skip $name (time)"; return; fi
  local d=/var/tmp/tune33/$name
  echo "$(date -u +%T) start $name load $(cut -d' ' -f1-3 /proc/loadavg)"
  $B tune /var/tmp/tune33/dir-${name%-r*} --json "$@" > $OUT/$name.json 2> /var/tmp/tune33/$name.err
  echo "$(date -u +%T) end $name rc $? load $(cut -d' ' -f1-3 /proc/loadavg)"
}
E="--rows 2M --cache 16MiB"
run real-r1
run hdd-r1 --emulate hdd $E
run x25e-r1 --emulate x25e $E
run nvme-r1 --emulate nvme $E
run insert-heavy --mix point=0.1,insert=0.9
run scan-heavy --mix point=0.2,range=0.8
run real-r2
run hdd-r2 --emulate hdd $E
run x25e-r2 --emulate x25e $E
run nvme-r2 --emulate nvme $E
run real-r3
run hdd-r3 --emulate hdd $E
run x25e-r3 --emulate x25e $E
run nvme-r3 --emulate nvme $E
