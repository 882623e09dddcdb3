#!/bin/bash
# run.sh: benchmarks/s18/session8/run.sh with /tmp/s8 read as /tmp/s10 (sed -e "s|/tmp/s8/|/tmp/s10/|g"); worktree /tmp/wt-a at 56666f2 (make build), e2e binary /tmp/s10/e2e-a.test
# Scenario 2 at one commit (56666f2), shipped settings vs SchedulerAsyncAPICalls=true, alternating sets.
R=/tmp/s10/run.sh
for s in a b c; do
  $R a s2-ship-$s BenchmarkContention MUSTER_BENCH_VARIANTS=muster MUSTER_BENCH_REPS=3 MUSTER_BENCH_COUNTERS=1
  $R a s2-async-$s BenchmarkContention MUSTER_BENCH_VARIANTS=muster MUSTER_BENCH_REPS=3 MUSTER_BENCH_COUNTERS=1 MUSTER_BENCH_FEATURE_GATES=SchedulerAsyncAPICalls=true
done
