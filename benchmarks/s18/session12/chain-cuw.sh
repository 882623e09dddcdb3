#!/bin/bash
# Catch-up with 64 and 4 (shipped default) workers vs 16, HEAD + restclient metrics; metrics scraped every 5 s.
cd /work/main/test/e2e
(while sleep 30; do echo "$(date -u +%T) $(cat /proc/loadavg)"; done > /tmp/s12/cuw/load.txt) &
LP=$!
for w in 64 16 4; do
  d=/tmp/s12/cuw/w$w; mkdir -p $d
  echo "$(date -u +%T) start w$w" >> /tmp/s12/cuw/chain.log
  /tmp/s12/scrape.sh $d/metrics &
  MUSTER_BENCH_CU_WORKERS=$w MUSTER_BENCH_BIN=/work/main/bin MUSTER_BENCH_OUT=$d timeout 1800 /tmp/s12/e2e-settle.test -test.run '^$' -test.bench '^BenchmarkPodGrouperCatchUp$' -test.benchtime 1x -test.timeout 60m > $d/log.txt 2>&1
  echo "$(date -u +%T) end w$w rc=$?" >> /tmp/s12/cuw/chain.log
done
kill $LP
