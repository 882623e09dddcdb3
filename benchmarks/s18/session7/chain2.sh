#!/bin/bash
/tmp/s7/run.sh rates-a BenchmarkPodGrouperRates MUSTER_BENCH_PODGROUPER_RATES=250 GODEBUG=gctrace=1
/tmp/s7/run.sh rates-b BenchmarkPodGrouperRates MUSTER_BENCH_PODGROUPER_RATES=250 GODEBUG=gctrace=1
