#!/bin/bash
# run.sh: benchmarks/s18/session8/run.sh with /tmp/s8 read as /tmp/s9:
#   sed -e "s|/tmp/s8/|/tmp/s9/|g" benchmarks/s18/session8/run.sh > /tmp/s9/run.sh
R=/tmp/s9/run.sh
for s in a b c; do
  $R old s2-old-$s BenchmarkContention MUSTER_BENCH_VARIANTS=muster MUSTER_BENCH_REPS=3 MUSTER_BENCH_COUNTERS=1
  $R new s2-new-$s BenchmarkContention MUSTER_BENCH_VARIANTS=muster MUSTER_BENCH_REPS=3 MUSTER_BENCH_COUNTERS=1
done
