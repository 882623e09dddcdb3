package e2e

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pginformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"

	"github.com/muster-io/muster/api"
)

// pgrBenchWorkers is the pod-grouper's worker count in the benchmark
// (MUSTER_BENCH_PODGROUPER_WORKERS, default 16).
var pgrBenchWorkers = func() int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("MUSTER_BENCH_PODGROUPER_WORKERS"), &n); err != nil || n < 1 {
		return 16
	}
	return n
}()

// pgrBenchRate is the pod creation rate of the benchmark
// (MUSTER_BENCH_PODGROUPER_RATE pods/s, default 500).
var pgrBenchRate = func() int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("MUSTER_BENCH_PODGROUPER_RATE"), &n); err != nil || n < 1 {
		return 500
	}
	return n
}()

// BenchmarkPodGrouperLatency measures pod create → PodGroup written and pod
// labelled, at 500 pods/s: 250 JobSet-shaped gangs of 8 pods (one Job of
// parallelism 8 each, replayed with spec.managedBy so the test creates the
// pods at the chosen rate). The end is when a watch has seen both the
// pod's label and its PodGroup, whichever came later, so the number keeps
// its meaning whatever order the pod-grouper writes them in. Reports
// p10, p50 and p99 in milliseconds, and the creation rate reached (the
// target is 500/s; a loaded machine sends fewer).
func BenchmarkPodGrouperLatency(b *testing.B) {
	b.Logf("pod-grouper workers: %d, target rate %d pods/s", pgrBenchWorkers, pgrBenchRate)
	const (
		gangs   = 250
		perGang = 8
	)
	rate := pgrBenchRate
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		ns := testNamespace(b, "pgr-bench")
		sched := "pgr-" + ns
		writes := newWriteCounter()
		cfg := rest.CopyConfig(controlPlane.RestConfig)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{next: rt, c: writes} })
		null := pgrBenchStartLabeller(ctx, b, cfg, ns, sched)

		// Workloads first, outside the measurement.
		jobs := make([]*unstructured.Unstructured, gangs)
		for g := range gangs {
			job, err := pgrBenchGang(ctx, b, ns, sched, g, perGang)
			if err != nil {
				b.Fatal(err)
			}
			jobs[g] = job
		}

		// Watch for the labels before creating pods (an informer: it
		// re-lists and re-watches on its own if the watch is closed).
		w := newPgrLatencyWatch(gangs*perGang, null)
		stopWatch := w.start(ctx, b, ns)

		b.ResetTimer()
		writes.start()
		begin := time.Now()
		errs := pgrBenchCreatePods(ctx, ns, sched, jobs, perGang, rate, w)
		sent := time.Since(begin)
		select {
		case <-w.done:
		case err := <-errs:
			b.Fatal(err)
		case <-time.After(5 * time.Minute):
			w.mu.Lock()
			n := len(w.latencyOf)
			w.mu.Unlock()
			b.Fatalf("only %d of %d pods labelled", n, gangs*perGang)
		}
		stopWatch()
		b.StopTimer()
		counts, total := writes.stop()
		b.Logf("pod-grouper writes: %.2f per pod (%s)", float64(total)/float64(gangs*perGang), formatWrites(counts))
		latencies := slices.Sorted(maps.Values(w.latencyOf))
		q := func(f float64) float64 {
			return float64(latencies[int(f*float64(len(latencies)-1))].Microseconds()) / 1000
		}
		// The process start anchors GODEBUG=gctrace=1's "@<seconds>s".
		b.Logf("slowest 1%% (the measurement began %.3f s after the process started): %s",
			begin.Sub(processStart).Seconds(), pgrTail(w.latencyOf, w.created, begin, len(latencies)/100))
		b.ReportMetric(q(0.1), "p10-ms")
		b.ReportMetric(q(0.5), "p50-ms")
		b.ReportMetric(q(0.99), "p99-ms")
		b.ReportMetric(float64(len(latencies))/sent.Seconds(), "pods/s-sent")
		if names := podGroupNames(b, ns); !null && len(names) != gangs {
			b.Errorf("%d PodGroups, want %d", len(names), gangs)
		}
	}
}

// pgrBenchStartLabeller starts what labels the benchmark's pods for sched
// and reports whether it is the null labeller.
// MUSTER_BENCH_PODGROUPER_NULL=1 replaces the pod-grouper with the
// least any labeller must do (see startNullLabeller): the path's
// floor on this machine, to tell the pod-grouper's share of the
// latency from the API server's.
// MUSTER_BENCH_PODGROUPER_BINARY=1 runs the shipped binary
// (MUSTER_BENCH_BIN, else a fresh build) in its own process, as a
// Deployment does, instead of in the process that hosts the API
// server: there its workers pay for the collection of that
// process's whole heap. Its writes are then not counted.
func pgrBenchStartLabeller(ctx context.Context, b *testing.B, cfg *rest.Config, ns, sched string) (null bool) {
	null = os.Getenv("MUSTER_BENCH_PODGROUPER_NULL") == "1"
	binary := os.Getenv("MUSTER_BENCH_PODGROUPER_BINARY") == "1"
	switch {
	case null:
		startNullLabeller(b, cfg, ns, pgrBenchWorkers)
	case binary:
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(b))
		startBinary(b, filepath.Join(memBinaries(b), "muster-podgrouper"), "--kubeconfig", controlPlane.KubeconfigPath,
			"--scheduler-name", sched, "--leader-elect=false", "--bind-address", addr, "--workers", strconv.Itoa(pgrBenchWorkers),
			"--kube-api-qps", "1000", "--kube-api-burst", "2000")
		waitPodGrouperReady(ctx, b, addr)
	default:
		startPodGrouperWithConfig(b, cfg, sched, pgrBenchWorkers)
	}
	return null
}

// pgrLatencyWatch times each of want pods of the benchmark.
// The clock starts when the create call returns (the pod exists in
// the API), so the API server's own create latency under load is
// not counted, and stops when the pod is labelled and its
// PodGroup exists, whichever is later; what is seen before the
// create returns counts as 0.
// The null labeller writes no PodGroup: its label alone counts.
type pgrLatencyWatch struct {
	want int
	null bool
	done chan struct{} // closed when every pod has its latency

	mu         sync.Mutex
	created    map[string]time.Time
	labelledAt map[string]time.Time
	labelOf    map[string]string
	pgAt       map[string]time.Time
	membersOf  map[string][]string
	latencyOf  map[string]time.Duration
}

func newPgrLatencyWatch(want int, null bool) *pgrLatencyWatch {
	return &pgrLatencyWatch{
		want: want, null: null, done: make(chan struct{}),
		created:    make(map[string]time.Time, want),
		labelledAt: map[string]time.Time{},
		labelOf:    map[string]string{},
		pgAt:       map[string]time.Time{},
		membersOf:  map[string][]string{},
		latencyOf:  make(map[string]time.Duration, want),
	}
}

// record sets the latency of pod name once all its times are known; w.mu
// is held.
func (w *pgrLatencyWatch) record(name string) {
	start, ok1 := w.created[name]
	end, ok2 := w.labelledAt[name]
	pgSeen, ok3 := w.pgAt[w.labelOf[name]]
	if _, seen := w.latencyOf[name]; !ok1 || !ok2 || (!ok3 && !w.null) || seen {
		return
	}
	w.latencyOf[name] = max(end.Sub(start), pgSeen.Sub(start), 0)
	if len(w.latencyOf) == w.want {
		close(w.done)
	}
}

// createdNow records that the create of pod name returned.
func (w *pgrLatencyWatch) createdNow(name string) {
	w.mu.Lock()
	w.created[name] = time.Now()
	w.record(name)
	w.mu.Unlock()
}

func (w *pgrLatencyWatch) observe(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Labels[api.LabelPodGroup] == "" {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.labelledAt[p.Name]; !ok {
		w.labelledAt[p.Name] = now
		w.labelOf[p.Name] = p.Labels[api.LabelPodGroup]
		w.membersOf[w.labelOf[p.Name]] = append(w.membersOf[w.labelOf[p.Name]], p.Name)
	}
	w.record(p.Name)
}

func (w *pgrLatencyWatch) observePG(obj any) {
	pg, ok := obj.(*schedv1alpha1.PodGroup)
	if !ok {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.pgAt[pg.Name]; !ok {
		w.pgAt[pg.Name] = now
	}
	for _, name := range w.membersOf[pg.Name] {
		w.record(name)
	}
}

// start runs the pod and PodGroup informers of ns until the returned stop
// is called.
func (w *pgrLatencyWatch) start(ctx context.Context, b *testing.B, ns string) (stop func()) {
	wctx, stopWatch := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(controlPlane.Client, 0, informers.WithNamespace(ns))
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.observe,
		UpdateFunc: func(_, n any) { w.observe(n) },
	}); err != nil {
		b.Fatal(err)
	}
	pgFactory := pginformers.NewSharedInformerFactoryWithOptions(podGroups(b), 0, pginformers.WithNamespace(ns))
	if _, err := pgFactory.Scheduling().V1alpha1().PodGroups().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: w.observePG,
	}); err != nil {
		b.Fatal(err)
	}
	factory.Start(wctx.Done())
	pgFactory.Start(wctx.Done())
	factory.WaitForCacheSync(wctx.Done())
	pgFactory.WaitForCacheSync(wctx.Done())
	return func() {
		stopWatch()
		factory.Shutdown()
		pgFactory.Shutdown()
	}
}

// pgrBenchCreatePods creates perGang pods of each of jobs at rate pods/s,
// 32 creates at most in flight, telling w when each create returns. It
// returns when the last create is sent; failed creates go to the channel.
func pgrBenchCreatePods(ctx context.Context, ns, sched string, jobs []*unstructured.Unstructured, perGang, rate int, w *pgrLatencyWatch) <-chan error {
	tick := time.NewTicker(time.Second / time.Duration(rate))
	sem := make(chan struct{}, 32)
	errs := make(chan error, len(jobs)*perGang)
	for g := range jobs {
		for k := range perGang {
			<-tick.C
			name := fmt.Sprintf("g%d-workers-0-%d", g, k)
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
					"jobset.sigs.k8s.io/jobset-name": fmt.Sprintf("g%d", g), "jobset.sigs.k8s.io/replicatedjob-name": "workers", "jobset.sigs.k8s.io/job-index": "0",
				}, OwnerReferences: []metav1.OwnerReference{pgrControllerRef(jobs[g])}},
				Spec: pgrGPUPodSpec(sched, 1),
			}
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
				w.createdNow(name)
			}()
		}
	}
	tick.Stop()
	return errs
}

// startNullLabeller labels every new pod of ns with the PodGroup label of
// its gang (from the benchmark's "jobset-name" label), from an informer,
// with one merge patch per pod on workers goroutines: no owner lookup, no
// definition, no PodGroup. It stops when tb ends.
func startNullLabeller(tb testing.TB, cfg *rest.Config, ns string, workers int) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	work := make(chan *corev1.Pod, 4096)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case p := <-work:
					patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, api.LabelPodGroup, p.Labels["jobset.sigs.k8s.io/jobset-name"])
					if _, err := cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil && ctx.Err() == nil {
						tb.Errorf("null labeller: %v", err)
					}
				}
			}
		})
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok && p.Labels[api.LabelPodGroup] == "" {
				select {
				case work <- p:
				case <-ctx.Done():
				}
			}
		},
	}); err != nil {
		tb.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	tb.Cleanup(func() {
		cancel()
		factory.Shutdown()
		wg.Wait()
	})
}

// processStart is when the test binary started (package initialisation).
var processStart = time.Now()

// pgrTail describes the n slowest pods: latency, when the create returned
// (seconds since begin) and the pod's place in its gang (0 is the member
// whose PodGroup the pod-grouper creates). Whether the tail is clustered in
// time or sits on first members tells a pause of the process from the cost
// of the PodGroup create.
func pgrTail(latency map[string]time.Duration, created map[string]time.Time, begin time.Time, n int) string {
	names := slices.Collect(maps.Keys(latency))
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(latency[b], latency[a]) })
	var sb strings.Builder
	for _, name := range names[:min(n, len(names))] {
		fmt.Fprintf(&sb, "\n  %s %.1f ms at %.2f s", name, float64(latency[name].Microseconds())/1000, created[name].Sub(begin).Seconds())
	}
	return sb.String()
}

// pgrBenchGang creates the JobSet g<g> of one Job g<g>-workers-0 of
// perGang pods with 1 GPU each for sched; the Job is managed by someone
// else, so the benchmark creates the pods itself. It returns the Job.
func pgrBenchGang(ctx context.Context, tb testing.TB, ns, sched string, g, perGang int) (*unstructured.Unstructured, error) {
	template := map[string]any{"spec": pgrToMap(tb, pgrGPUPodSpec(sched, 1))}
	js, err := controlPlane.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
		"metadata": map[string]any{"name": fmt.Sprintf("g%d", g)},
		"spec": map[string]any{"replicatedJobs": []any{map[string]any{
			"name": "workers", "replicas": 1,
			"template": map[string]any{"spec": map[string]any{"parallelism": perGang, "completions": perGang, "template": template}},
		}}},
	}}, ns)
	if err != nil {
		return nil, err
	}
	return controlPlane.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": fmt.Sprintf("g%d-workers-0", g), "ownerReferences": []any{pgrToMap(tb, pgrControllerRef(js))}},
		"spec":     map[string]any{"parallelism": perGang, "completions": perGang, "managedBy": "muster.io/e2e-bench", "template": template},
	}}, ns)
}
