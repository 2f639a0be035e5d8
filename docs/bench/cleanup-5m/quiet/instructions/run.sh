#!/usr/bin/env bash
# Instructions per insert and per cached get, before (0694941) and after (44df8ec) the cleanup.
cd /work/bench29q/cg
one() { # bin kind
  d=/var/tmp/cg-$1-$2
  f=$(valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null ./fgk-$1 fill $d $2 200000 2>&1 | grep "I *refs" | tr -d ',' | awk '{print $NF}')
  g0=$(valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null ./fgk-$1 get $d $2 200000 0 2>&1 | grep "I *refs" | tr -d ',' | awk '{print $NF}')
  g1=$(valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null ./fgk-$1 get $d $2 200000 100000 2>&1 | grep "I *refs" | tr -d ',' | awk '{print $NF}')
  echo "$1 $2 fill_total $f per_insert $((f/200000)) get0 $g0 get100k $g1 per_get $(((g1-g0)/100000))"
  rm -rf $d
}
one before btree & one after btree & wait
one before bepsilon & one after bepsilon & wait
