R=/work/main/benchmarks/s18/session8/run.sh
for i in a b c d; do
  $R budget rates-fe47274-$i BenchmarkPodGrouperRates MUSTER_BENCH_PODGROUPER_RATES=250
  $R overlay rates-c67b1bb-$i BenchmarkPodGrouperRates MUSTER_BENCH_PODGROUPER_RATES=250
done
