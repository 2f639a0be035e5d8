#!/usr/bin/env bash
# Every 30 s: UTC time, load average, and the CPU shares of the last 30 s (steal = taken by the host).
prev=($(head -1 /proc/stat))
while sleep 30; do
  cur=($(head -1 /proc/stat))
  python3 - "${prev[*]}" "${cur[*]}" <<'P'
import sys,time
a=[int(x) for x in sys.argv[1].split()[1:9]]; b=[int(x) for x in sys.argv[2].split()[1:9]]
d=[y-x for x,y in zip(a,b)]; t=sum(d) or 1
load=open('/proc/loadavg').read().split()[:3]
print(time.strftime('%H:%M:%S', time.gmtime()), 'load', ' '.join(load), 'user %.0f%% sys %.0f%% iowait %.0f%% idle %.0f%% steal %.0f%%' % (100*(d[0]+d[1])/t, 100*(d[2]+d[5]+d[6])/t, 100*d[4]/t, 100*d[3]/t, 100*d[7]/t), flush=True)
P
  prev=("${cur[@]}")
done
