R=/work/main/benchmarks/s18/session8/run.sh
for i in a b c; do
  $R before rates-before-$i BenchmarkPodGrouperRates MUSTER_BENCH_PODGROUPER_RATES=250
  $R after rates-after-$i BenchmarkPodGrouperRates MUSTER_BENCH_PODGROUPER_RATES=250
done
