#!/bin/bash
# Catch-up (scenario 3b) with the settle step before the pod-grouper starts, HEAD's pod-grouper, two runs.
cd /work/main/test/e2e
while pgrep -f cuab/chain.sh >/dev/null; do sleep 5; done
(while sleep 30; do echo "$(date -u +%T) $(cat /proc/loadavg)"; done > /tmp/s12/cusettle/load.txt) &
LP=$!
for r in a b; do
  d=/tmp/s12/cusettle/new-$r; mkdir -p $d
  echo "$(date -u +%T) start new-$r" >> /tmp/s12/cusettle/chain.log
  MUSTER_BENCH_BIN=/work/main/bin MUSTER_BENCH_OUT=$d timeout 1800 /tmp/s12/e2e-settle.test -test.run '^$' -test.bench '^BenchmarkPodGrouperCatchUp$' -test.benchtime 1x -test.timeout 60m > $d/log.txt 2>&1
  echo "$(date -u +%T) end new-$r rc=$?" >> /tmp/s12/cusettle/chain.log
done
kill $LP
