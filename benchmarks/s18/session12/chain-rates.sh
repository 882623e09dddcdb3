#!/bin/bash
# Scenario 3 latency at 100 and 150 pods/s: the pod-grouper (in process) vs the null labeller (one patch per pod, the path's floor), alternating, 3 sets; HEAD.
cd /work/main/test/e2e
while pgrep -f cusettle/chain.sh >/dev/null; do sleep 5; done
(while sleep 30; do echo "$(date -u +%T) $(cat /proc/loadavg)"; done > /tmp/s12/rates/load.txt) &
LP=$!
for s in a b c; do
  for v in pgr null; do
    d=/tmp/s12/rates/$v-$s; mkdir -p $d
    if [ $v = null ]; then N=1; else N=; fi
    echo "$(date -u +%T) start $v-$s" >> /tmp/s12/rates/chain.log
    MUSTER_BENCH_PODGROUPER_NULL=$N MUSTER_BENCH_PODGROUPER_RATES=100,150 MUSTER_BENCH_OUT=$d timeout 900 /tmp/s12/e2e-settle.test -test.run '^$' -test.bench '^BenchmarkPodGrouperRates$' -test.benchtime 1x -test.timeout 30m > $d/log.txt 2>&1
    echo "$(date -u +%T) end $v-$s rc=$?" >> /tmp/s12/rates/chain.log
  done
done
kill $LP
