R=/work/main/benchmarks/s18/session8/run.sh
for i in a b c d e; do
  $R before rates150-before-$i BenchmarkPodGrouperRates MUSTER_BENCH_PODGROUPER_RATES=150
  $R after rates150-after-$i BenchmarkPodGrouperRates MUSTER_BENCH_PODGROUPER_RATES=150
done
