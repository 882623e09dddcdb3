#!/bin/bash
# Catch-up with 64 workers: one lock per PodGroup (fix) vs the hashed lock set (head), then scenario 3 latency at 100,150 pods/s in process (fix vs head test binaries), alternating.
while ! grep -q 'end head-a' /tmp/s12/cufix/chain.log; do sleep 2; done
pkill -f cufix/chain.sh; sleep 1; pkill -f e2e-fix.test; pkill -f bin/muster-podgrouper; pkill -f scrape.sh; sleep 3
cd /work/main/test/e2e
(while sleep 30; do echo "$(date -u +%T) $(cat /proc/loadavg)"; done > /tmp/s12/cuw64/load.txt) &
LP=$!
for v in fix head; do
  if [ $v = head ]; then BIN=/tmp/s12/bin-head; else BIN=/work/main/bin; fi
  d=/tmp/s12/cuw64/$v; mkdir -p $d
  echo "$(date -u +%T) start $v" >> /tmp/s12/cuw64/chain.log
  /tmp/s12/scrape.sh $d/metrics &
  MUSTER_BENCH_CU_WORKERS=64 MUSTER_BENCH_BIN=$BIN MUSTER_BENCH_OUT=$d timeout 1800 /tmp/s12/e2e-fix.test -test.run '^$' -test.bench '^BenchmarkPodGrouperCatchUp$' -test.benchtime 1x -test.timeout 60m > $d/log.txt 2>&1
  echo "$(date -u +%T) end $v rc=$?" >> /tmp/s12/cuw64/chain.log
done
for s in a b; do
  for v in fix head; do
    if [ $v = head ]; then T=/tmp/s12/e2e-settle.test; else T=/tmp/s12/e2e-fix.test; fi
    d=/tmp/s12/cuw64/rates-$v-$s; mkdir -p $d
    echo "$(date -u +%T) start rates-$v-$s" >> /tmp/s12/cuw64/chain.log
    MUSTER_BENCH_PODGROUPER_RATES=100,150 MUSTER_BENCH_OUT=$d timeout 900 $T -test.run '^$' -test.bench '^BenchmarkPodGrouperRates$' -test.benchtime 1x -test.timeout 30m > $d/log.txt 2>&1
    echo "$(date -u +%T) end rates-$v-$s rc=$?" >> /tmp/s12/cuw64/chain.log
  done
done
kill $LP
