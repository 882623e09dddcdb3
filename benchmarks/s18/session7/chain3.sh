#!/bin/bash
/tmp/s7/run.sh rates-null BenchmarkPodGrouperRates MUSTER_BENCH_PODGROUPER_RATES=250 MUSTER_BENCH_PODGROUPER_NULL=1 GODEBUG=gctrace=1
/tmp/s7/run.sh rates-c BenchmarkPodGrouperRates MUSTER_BENCH_PODGROUPER_RATES=250 GODEBUG=gctrace=1
/tmp/s7/run.sh rates-null-b BenchmarkPodGrouperRates MUSTER_BENCH_PODGROUPER_RATES=250 MUSTER_BENCH_PODGROUPER_NULL=1 GODEBUG=gctrace=1
