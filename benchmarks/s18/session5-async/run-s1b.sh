#!/bin/bash
cd /tmp/h4wt/test/e2e
( while true; do echo "$(date -u +%H:%M:%S) $(uptime)"; sleep 30; done ) > /tmp/h4b/load-s1b.txt &
LP=$!
{
echo "=== $(date -u +%H:%M:%S) start s1b commit=1876eb5 nproc=$(nproc) $(uptime)"
MUSTER_BENCH_BIN=/tmp/h4wt/bin MUSTER_BENCH_OUT=/tmp/h4b/out-s1b MUSTER_BENCH_REPS=3 MUSTER_BENCH_VARIANTS='muster,muster+SchedulerAsyncAPICalls=true,default' \
  /tmp/h4-e2e.test -test.v -test.run '^$' -test.bench '^BenchmarkSchedulerBound$' -test.benchtime 1x -test.timeout 120m
echo "=== $(date -u +%H:%M:%S) end s1b rc=$? $(uptime)"
} > /tmp/h4b/log-s1b.txt 2>&1
kill $LP
