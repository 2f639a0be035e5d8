#!/bin/bash
cd /work/main
for s in 7 8 9; do
  for v in pyv-before pyv; do
    echo "$(date -u +%H:%M:%S) $v seed $s load $(cut -d' ' -f1-3 /proc/loadavg)" >> /var/tmp/pycmp/run.log
    /var/tmp/$v/bin/python bindings/python/bench/compare.py --dir /var/tmp/pybench --gets 200000 --scans 20000 --seconds 5 --seed $s > /var/tmp/pycmp/$v-$s.txt 2>&1
  done
done
echo "$(date -u +%H:%M:%S) done load $(cut -d' ' -f1-3 /proc/loadavg)" >> /var/tmp/pycmp/run.log
