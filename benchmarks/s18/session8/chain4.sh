R=/work/main/benchmarks/s18/session8/run.sh
E="MUSTER_BENCH_MEM_CLIENTS=16 MUSTER_BENCH_MEM_SCHED_ARGS=--feature-gates=GenericWorkload=false"
for i in a b; do
  $R pre mem10k-pre-$i BenchmarkMemory $E
  $R after mem10k-after-$i BenchmarkMemory $E
done
