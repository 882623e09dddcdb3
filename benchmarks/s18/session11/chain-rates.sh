#!/bin/bash
# Scenario 3 latency at 150 and 250 pods/s, three runs, worktree /tmp/wt-b (08bebe1; the pod-grouper is unchanged since session 8)
R=/tmp/s11/run.sh
for s in a b c; do
  $R b rates-$s BenchmarkPodGrouperRates MUSTER_BENCH_PODGROUPER_RATES=150,250
done
