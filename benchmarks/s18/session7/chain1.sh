#!/bin/bash
/tmp/s7/run.sh s2-on BenchmarkContention MUSTER_BENCH_REPS=3 MUSTER_BENCH_VARIANTS=muster MUSTER_BENCH_COUNTERS=1
/tmp/s7/run.sh s2-off BenchmarkContention MUSTER_BENCH_REPS=3 MUSTER_BENCH_VARIANTS=muster MUSTER_BENCH_COUNTERS=1 MUSTER_BENCH_FEATURE_GATES=NominatedNodeNameForExpectation=false
/tmp/s7/run.sh rates BenchmarkPodGrouperRates MUSTER_BENCH_PODGROUPER_RATES=250
