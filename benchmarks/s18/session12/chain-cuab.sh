#!/bin/bash
# Catch-up (scenario 3b), the pod-grouper binary of 2ba7a9e (session 4) vs 797bc20 (HEAD), alternating; same e2e test binary.
cd /work/main/test/e2e
(while sleep 30; do echo "$(date -u +%T) $(cat /proc/loadavg)"; done > /tmp/s12/cuab/load.txt) &
LP=$!
for set in a b; do
  for v in old new; do
    if [ $v = old ]; then BIN=/tmp/s12/bin-old; else BIN=/work/main/bin; fi
    d=/tmp/s12/cuab/$v-$set; mkdir -p $d
    echo "$(date -u +%T) start $v-$set" >> /tmp/s12/cuab/chain.log
    MUSTER_BENCH_CU_PROFILE=1 MUSTER_BENCH_BIN=$BIN MUSTER_BENCH_OUT=$d timeout 1800 /tmp/s12/e2e.test -test.run '^$' -test.bench '^BenchmarkPodGrouperCatchUp$' -test.benchtime 1x -test.timeout 60m > $d/log.txt 2>&1
    echo "$(date -u +%T) end $v-$set rc=$?" >> /tmp/s12/cuab/chain.log
  done
done
kill $LP
