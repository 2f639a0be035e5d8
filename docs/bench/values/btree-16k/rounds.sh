#!/bin/bash
# usage: rounds.sh OUT ROUNDS KEYS VALUE_SIZE spec... (spec = label:binary:engine)
out=$1; rounds=$2; keys=$3; vs=$4; shift 4
for r in $(seq 1 $rounds); do
  for spec in "$@"; do
    IFS=: read label bin eng <<<"$spec"
    for try in 1 2 3; do
      sleep 2
      t=$(date -u +%H:%M:%S); l=$(cut -d' ' -f1-3 /proc/loadavg)
      res=$($bin bench run -e $eng --keys $keys --value-size $vs --cache 64M --direct --sync off --cap-phases all -w fillrandom 2>&1 | grep fillrandom)
      [ -n "$res" ] && break
      echo "r$r $label $t try $try killed/empty" >> $out
    done
    echo "r$r $label $t load $l :: $res" | tee -a $out
  done
done
