#!/bin/bash
cd /tmp/h4wt/test/e2e
( while true; do echo "$(date -u +%H:%M:%S) $(uptime)"; sleep 30; done ) > /tmp/h4b/load-s2.txt &
LP=$!
for gate in nogate gate; do
  fg=""; [ $gate = gate ] && fg="SchedulerAsyncAPICalls=true"
  echo "=== $(date -u +%H:%M:%S) start s2 $gate gates='$fg' commit=1876eb5 nproc=$(nproc) $(uptime)"
  MUSTER_BENCH_BIN=/tmp/h4wt/bin MUSTER_BENCH_VARIANTS=muster MUSTER_BENCH_REPS=3 MUSTER_BENCH_COUNTERS=1 MUSTER_BENCH_FEATURE_GATES="$fg" MUSTER_BENCH_OUT=/tmp/h4b/out-s2-$gate \
    /tmp/h4-e2e.test -test.v -test.run '^$' -test.bench '^BenchmarkContention$' -test.benchtime 1x -test.timeout 20m
  echo "=== $(date -u +%H:%M:%S) end s2 $gate rc=$? $(uptime)"
done > /tmp/h4b/log-s2.txt 2>&1
kill $LP
