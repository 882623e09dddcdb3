#!/bin/bash
# Catch-up (scenario 3b, 16 workers): the pod-grouper with one lock per PodGroup (fix) vs the hashed lock set (head = 797bc20 + restclient metrics), alternating; metrics scraped every 5 s.
cd /work/main/test/e2e
(while sleep 30; do echo "$(date -u +%T) $(cat /proc/loadavg)"; done > /tmp/s12/cufix/load.txt) &
LP=$!
for set in a b; do
  for v in fix head; do
    if [ $v = head ]; then BIN=/tmp/s12/bin-head; else BIN=/work/main/bin; fi
    d=/tmp/s12/cufix/$v-$set; mkdir -p $d
    echo "$(date -u +%T) start $v-$set" >> /tmp/s12/cufix/chain.log
    /tmp/s12/scrape.sh $d/metrics &
    MUSTER_BENCH_BIN=$BIN MUSTER_BENCH_OUT=$d timeout 1800 /tmp/s12/e2e-fix.test -test.run '^$' -test.bench '^BenchmarkPodGrouperCatchUp$' -test.benchtime 1x -test.timeout 60m > $d/log.txt 2>&1
    echo "$(date -u +%T) end $v-$set rc=$?" >> /tmp/s12/cufix/chain.log
  done
done
kill $LP
