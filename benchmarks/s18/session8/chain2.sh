R=/work/main/benchmarks/s18/session8/run.sh
for i in a b c; do
  $R before rates2-before-$i BenchmarkPodGrouperRates MUSTER_BENCH_PODGROUPER_RATES=100,150,250
  $R after rates2-after-$i BenchmarkPodGrouperRates MUSTER_BENCH_PODGROUPER_RATES=100,150,250
done
