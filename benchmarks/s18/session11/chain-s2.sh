#!/bin/bash
# run.sh: benchmarks/s18/session8/run.sh with /tmp/s8 read as /tmp/s11 (sed -e "s|/tmp/s8/|/tmp/s11/|g");
# worktrees /tmp/wt-a at 8e7fa34 and /tmp/wt-b at 08bebe1 (make build in each), e2e binaries /tmp/s11/e2e-{a,b}.test
# Scenario 2, shipped settings, the two commits alternating.
R=/tmp/s11/run.sh
for s in a b c d; do
  $R a s2-8e7fa34-$s BenchmarkContention MUSTER_BENCH_VARIANTS=muster MUSTER_BENCH_REPS=3 MUSTER_BENCH_COUNTERS=1
  $R b s2-08bebe1-$s BenchmarkContention MUSTER_BENCH_VARIANTS=muster MUSTER_BENCH_REPS=3 MUSTER_BENCH_COUNTERS=1
done
