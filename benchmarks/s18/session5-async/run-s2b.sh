#!/bin/bash
( while true; do echo "$(date -u +%H:%M:%S) $(uptime)"; sleep 30; done ) > /tmp/h4b/load-s2b.txt &
LP=$!
for cfg in base-gate new-gate base-nogate new-nogate new-gate2 new-nogate2; do
  case $cfg in base*) wt=/tmp/h4base; tb=/tmp/h4base-e2e.test; c=1090b5c;; *) wt=/tmp/h4wt; tb=/tmp/h4-e2e.test; c=1876eb5;; esac
  fg=""; case $cfg in *-gate*) fg="SchedulerAsyncAPICalls=true";; esac
  cd $wt/test/e2e
  echo "=== $(date -u +%H:%M:%S) start s2 $cfg gates='$fg' commit=$c nproc=$(nproc) $(uptime)"
  MUSTER_BENCH_BIN=$wt/bin MUSTER_BENCH_VARIANTS=muster MUSTER_BENCH_REPS=3 MUSTER_BENCH_COUNTERS=1 MUSTER_BENCH_FEATURE_GATES="$fg" MUSTER_BENCH_OUT=/tmp/h4b/out-s2-$cfg \
    $tb -test.v -test.run '^$' -test.bench '^BenchmarkContention$' -test.benchtime 1x -test.timeout 20m
  echo "=== $(date -u +%H:%M:%S) end s2 $cfg rc=$? $(uptime)"
done > /tmp/h4b/log-s2b.txt 2>&1
kill $LP
