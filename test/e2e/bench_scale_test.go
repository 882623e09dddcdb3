package e2e

// Scenarios 1 and 2 of BENCHMARKS.md: scheduler throughput and contention,
// muster versus the default profile versus native gang scheduling, run side
// by side in one process so the ratios hold on a noisy machine. The sizes
// come from MUSTER_BENCH_* environment variables (benchSizesFromEnv);
// TestBenchSmoke runs the same code at tiny sizes inside `make test`.

import (
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"
	configv1 "k8s.io/kube-scheduler/config/v1"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/localcluster"
	"github.com/muster-io/muster/plugins/gang"
	"github.com/muster-io/muster/test/benchreport"
)

// The three schedulers compared.
const (
	// variantMuster: the shipped manifests/scheduler-config.yaml profile
	// (MusterGang), scheduler-plugins PodGroups and pod-group labels
	// written by the benchmark (no pod-grouper: its cost is scenario 3).
	variantMuster = "muster"
	// variantDefault: the default profile, the same pods without gangs.
	variantDefault = "default"
	// variantNative: the default profile with GenericWorkload on (it then
	// includes the in-tree GangScheduling plugin), scheduling.k8s.io/v1beta1
	// PodGroups and pods with spec.schedulingGroup.
	variantNative = "native"
)

var benchVariants = []string{variantMuster, variantDefault, variantNative}

// benchSizes are the sizes of one scenario run.
type benchSizes struct {
	Nodes, GPUsPerNode int
	Gangs, GangSize    int
	Reps               int
	// Warmup is how many unrecorded runs (of the first variant) come
	// first: the first runs of a process meet a control plane that is
	// still settling (discovery, OpenAPI of the installed CRDs, caches,
	// heap growth), and the variant order would always hand them to the
	// same scheduler.
	Warmup int
	// Hold is how long a gang runs once all its members are bound
	// (contention only; the gang's pods are then marked Succeeded).
	Hold time.Duration
	// Timeout bounds one run (all bound, or drained).
	Timeout time.Duration
	// Workers is the number of concurrent pod creators.
	Workers int
	// Stall ends a contention run that made no progress (no bind, no
	// completion) this long with pods still pending: a deadlock, which
	// the default profile can reach when partial gangs hold every GPU.
	Stall time.Duration
}

func (s benchSizes) pods() int { return s.Gangs * s.GangSize }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// throughputSizes: 1000 nodes × 8 GPUs, 500 gangs of 8 × 1 GPU (4000 pods),
// 3 repetitions, unless MUSTER_BENCH_NODES, _GANGS, _REPS say otherwise.
func throughputSizes() benchSizes {
	return benchSizes{
		Nodes: envInt("MUSTER_BENCH_NODES", 1000), GPUsPerNode: 8,
		Gangs: envInt("MUSTER_BENCH_GANGS", 500), GangSize: 8,
		Reps: envInt("MUSTER_BENCH_REPS", 3), Warmup: warmups(), Timeout: 10 * time.Minute, Workers: 16,
	}
}

// warmups is MUSTER_BENCH_WARMUP (default 1; 0 allowed).
func warmups() int {
	if n, err := strconv.Atoi(os.Getenv("MUSTER_BENCH_WARMUP")); err == nil && n >= 0 {
		return n
	}
	return 1
}

// contentionSizes: MUSTER_BENCH_CONTENTION_NODES (default 100) × 8 GPUs and
// twice as many gangs of 8 × 1 GPU as fit, each running
// MUSTER_BENCH_HOLD_MS (default 3000) once whole.
func contentionSizes() benchSizes {
	n := envInt("MUSTER_BENCH_CONTENTION_NODES", 100)
	return benchSizes{
		Nodes: n, GPUsPerNode: 8, Gangs: 2 * n, GangSize: 8,
		Reps: envInt("MUSTER_BENCH_REPS", 3), Warmup: warmups(), Hold: time.Duration(envInt("MUSTER_BENCH_HOLD_MS", 3000)) * time.Millisecond,
		Timeout: 10 * time.Minute, Workers: 16, Stall: 30 * time.Second,
	}
}

// benchOutDir is where results go: MUSTER_BENCH_OUT, else a temp dir.
func benchOutDir(tb testing.TB) string {
	if d := os.Getenv("MUSTER_BENCH_OUT"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
		return d
	}
	return tb.TempDir()
}

// benchSchedulerConfig is the shipped manifests/scheduler-config.yaml with
// only the scheduler name changed: the benchmark measures the profile that
// ships (its backoffs, timeouts and plugin order), unlike the gang tests'
// schedulerConfig which shortens backoffs.
func benchSchedulerConfig(tb testing.TB, schedulerName string) *configv1.KubeSchedulerConfiguration {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "scheduler-config.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	var cfg configv1.KubeSchedulerConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		tb.Fatalf("manifests/scheduler-config.yaml: %v", err)
	}
	if len(cfg.Profiles) != 1 {
		tb.Fatalf("manifests/scheduler-config.yaml: %d profiles, want 1", len(cfg.Profiles))
	}
	cfg.Profiles[0].SchedulerName = ptr.To(schedulerName)
	return &cfg
}

// startBenchScheduler starts a fresh scheduler for one run of variant under
// schedulerName. observed records muster's barrier releases in barrierLog
// (contention checks the gang rule with them).
// writes, when not nil, counts the scheduler's API write requests (its
// own client, the event sink and the plugin's PodGroup client all derive
// from the one rest config).
func startBenchScheduler(ctx context.Context, tb testing.TB, variant, schedulerName string, observed bool, writes *writeCounter) (stop func(), err error) {
	opts := localcluster.SchedulerOptions{Config: localcluster.DefaultProfile(schedulerName)}
	if variant == variantMuster {
		factory := gang.New
		if observed {
			factory = newObservedGang
		}
		opts = localcluster.SchedulerOptions{Config: benchSchedulerConfig(tb, schedulerName), OutOfTreeRegistry: frameworkruntime.Registry{gang.Name: factory}}
	}
	if writes != nil {
		cfg := rest.CopyConfig(controlPlane.RestConfig)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{next: rt, c: writes} })
		opts.RestConfig = cfg
	}
	return localcluster.StartScheduler(ctx, controlPlane, opts)
}

// writeCounter counts API write requests (POST, PUT, PATCH, DELETE) by
// "VERB resource[/subresource]" while on. It answers where a variant's API
// server time goes: every write costs an etcd transaction that competes
// with the pod creates being measured.
type writeCounter struct {
	mu     sync.Mutex
	on     bool
	counts map[string]int
}

func newWriteCounter() *writeCounter { return &writeCounter{counts: map[string]int{}} }

func (w *writeCounter) start() {
	w.mu.Lock()
	w.on = true
	w.counts = map[string]int{}
	w.mu.Unlock()
}

// stop ends counting and returns the counts and their total.
func (w *writeCounter) stop() (map[string]int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.on = false
	total := 0
	for _, n := range w.counts {
		total += n
	}
	return w.counts, total
}

func (w *writeCounter) add(req *http.Request) {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return
	}
	key := req.Method + " " + resourceOfPath(req.URL.Path)
	w.mu.Lock()
	if w.on {
		w.counts[key]++
	}
	w.mu.Unlock()
}

// resourceOfPath turns /api/v1/namespaces/ns/pods/p/binding into
// "pods/binding" and /apis/g/v/namespaces/ns/podgroups/x/status into
// "podgroups/status" (group left out: the names do not clash here).
func resourceOfPath(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) > 0 && parts[0] == "api":
		parts = parts[min(2, len(parts)):]
	case len(parts) > 0 && parts[0] == "apis":
		parts = parts[min(3, len(parts)):]
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return "?"
	case 1, 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}

type countingTransport struct {
	next http.RoundTripper
	c    *writeCounter
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.c.add(req)
	return t.next.RoundTrip(req)
}

// formatWrites lists counts as "VERB resource=n" sorted by key.
func formatWrites(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%d", k, counts[k])
	}
	return b.String()
}

// createBenchNodes creates the pool's GPU nodes with 16 concurrent clients.
func createBenchNodes(ctx context.Context, pool string, n, gpus int) error {
	return parallel(n, 16, func(i int) error {
		node, err := localcluster.NodeSpec{Name: fmt.Sprintf("%s-%d", pool, i), GPUs: gpus, Pool: pool}.Node()
		if err != nil {
			return err
		}
		_, err = controlPlane.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		return err
	})
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first error.
func parallel(n, workers int, fn func(i int) error) error {
	idx := make(chan int)
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := range n {
		idx <- i
	}
	close(idx)
	wg.Wait()
	return first
}

// createGroups creates the gangs' PodGroups of variant (none for default).
func createGroups(ctx context.Context, tb testing.TB, variant, ns string, gangs []string, size int) error {
	switch variant {
	case variantMuster:
		c := podGroups(tb).SchedulingV1alpha1().PodGroups(ns)
		return parallel(len(gangs), 16, func(i int) error {
			_, err := c.Create(ctx, &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: gangs[i]},
				Spec: schedv1alpha1.PodGroupSpec{MinMember: int32(size)}}, metav1.CreateOptions{})
			return err
		})
	case variantNative:
		c := controlPlane.Client.SchedulingV1beta1().PodGroups(ns)
		return parallel(len(gangs), 16, func(i int) error {
			_, err := c.Create(ctx, &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: gangs[i]},
				Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
					Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(size)}}}}, metav1.CreateOptions{})
			return err
		})
	}
	return nil
}

// benchPod is member k of gang g: 1 GPU and 100m CPU on the pool's nodes,
// labelled gang=g in every variant (so the contention sampler can count
// partial gangs for the default profile too), plus the variant's own gang
// marker.
func benchPod(variant, sched, pool, g string, k int) *corev1.Pod {
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), localcluster.DefaultGPUResource: resource.MustParse("1")}
	sel, tol := localcluster.PoolPlacement(pool)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", g, k), Labels: map[string]string{"bench": "1", "gang": g}},
		Spec: corev1.PodSpec{
			SchedulerName: sched, NodeSelector: sel, Tolerations: []corev1.Toleration{tol},
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/none",
				Resources: corev1.ResourceRequirements{Requests: req, Limits: corev1.ResourceList{localcluster.DefaultGPUResource: resource.MustParse("1")}}}},
		},
	}
	switch variant {
	case variantMuster:
		p.Labels[api.LabelPodGroup] = g
	case variantNative:
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(g)}
	}
	return p
}

// podState is what the tracker knows of one pod.
type podState struct {
	gang    string
	uid     types.UID
	bound   bool // has a node and is not terminal
	done    bool // Succeeded or Failed
	boundAt time.Time
	doneAt  time.Time
}

// podTracker follows the benchmark's pods through an informer (so sampling
// costs no API calls) and calls onGangWhole once per gang the first time all
// of its members are bound at once.
type podTracker struct {
	mu          sync.Mutex
	pods        map[string]*podState
	boundTimes  []time.Time
	progress    time.Time // last bind or completion seen
	gangSize    int
	whole       map[string]bool
	gangBound   map[string]int
	onGangWhole func(g string)
	stop        func()
}

func trackPods(ctx context.Context, ns string, gangSize int, onGangWhole func(string)) (*podTracker, error) {
	t := &podTracker{pods: map[string]*podState{}, gangSize: gangSize, whole: map[string]bool{}, gangBound: map[string]int{}, onGangWhole: onGangWhole}
	stop, err := watchBenchPods(ctx, t.observe, informers.WithNamespace(ns))
	if err != nil {
		return nil, err
	}
	t.stop = stop
	return t, nil
}

// watchBenchPods runs a pod informer of the harness (opts narrow it) that
// hands every added or updated pod to observe, and returns once it has
// synced; stop ends it. The benchmarks' samplers read their counts from
// such a watch rather than listing every pod each time.
func watchBenchPods(ctx context.Context, observe func(any), opts ...informers.SharedInformerOption) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	f := informers.NewSharedInformerFactoryWithOptions(controlPlane.Client, 0, opts...)
	if _, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, o any) { observe(o) },
	}); err != nil {
		cancel()
		return nil, err
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return func() { cancel(); f.Shutdown() }, nil
}

func (t *podTracker) observe(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Labels["bench"] != "1" {
		return
	}
	now := time.Now()
	t.mu.Lock()
	s := t.pods[p.Name]
	if s == nil {
		s = &podState{gang: p.Labels["gang"], uid: p.UID}
		t.pods[p.Name] = s
	}
	terminal := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	if p.Spec.NodeName != "" && s.boundAt.IsZero() {
		s.boundAt = now
		t.boundTimes = append(t.boundTimes, now)
		t.progress = now
	}
	if terminal && !s.done {
		t.progress = now
		s.doneAt = now
	}
	wasBound := s.bound
	s.bound = p.Spec.NodeName != "" && !terminal
	s.done = terminal
	switch {
	case s.bound && !wasBound:
		t.gangBound[s.gang]++
	case !s.bound && wasBound:
		t.gangBound[s.gang]--
	}
	var fire string
	if s.bound && !t.whole[s.gang] && t.onGangWhole != nil && t.gangBound[s.gang] >= t.gangSize {
		t.whole[s.gang] = true
		fire = s.gang
	}
	t.mu.Unlock()
	if fire != "" {
		t.onGangWhole(fire)
	}
}

// counts returns the pods seen bound at least once and the pods done.
func (t *podTracker) counts() (boundOnce, done int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.pods {
		if !s.boundAt.IsZero() {
			boundOnce++
		}
		if s.done {
			done++
		}
	}
	return boundOnce, done
}

// waitUntil polls cond every 50 ms until it holds or timeout passes.
func waitUntil(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// cleanupRunOrFail is cleanupRun, failing tb on an error.
func cleanupRunOrFail(tb testing.TB, ns string) {
	if err := cleanupRun(context.Background(), ns); err != nil {
		tb.Error(err)
	}
}

// cleanupRun deletes a run's pods and nodes and waits for the pods to go,
// so the next run starts on an empty cluster.
func cleanupRun(ctx context.Context, ns string) error {
	if err := controlPlane.ForceDeletePods(ctx, ns, "bench=1"); err != nil {
		return err
	}
	if err := controlPlane.WaitPodsGone(ctx, ns, "bench=1", 5*time.Minute); err != nil {
		return err
	}
	if err := controlPlane.DeleteNodes(ctx, localcluster.PoolLabel+"="+ns); err != nil {
		return err
	}
	return controlPlane.DeleteNamespace(ctx, ns)
}

// gangNames are the gang names of a run, in creation order.
func gangNames(n int, shuffle *rand.Rand) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("g%04d", i)
	}
	if shuffle != nil {
		shuffle.Shuffle(n, func(i, j int) { out[i], out[j] = out[j], out[i] })
	}
	return out
}

// createGangPodsConcurrently creates every gang's members, each of s.Workers
// creators taking whole gangs in order (so gangs arrive interleaved, as from
// several controllers at once). It returns when all creates are done.
func createGangPodsConcurrently(ctx context.Context, s benchSizes, variant, sched, ns string, gangs []string) error {
	return parallel(len(gangs), s.Workers, func(i int) error {
		for k := range s.GangSize {
			if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, benchPod(variant, sched, ns, gangs[i], k), metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
}

// prepareBenchRun makes a run's namespace (also its node pool's name), its
// nodes and, for the gang variants, its gangs' PodGroups. A namespace is
// returned, for the caller to clean up, even with an error.
func prepareBenchRun(ctx context.Context, tb testing.TB, s benchSizes, variant, prefix string) (ns string, gangs []string, err error) {
	ns, err = controlPlane.NewNamespace(ctx, prefix)
	if err != nil {
		return "", nil, err
	}
	if err := createBenchNodes(ctx, ns, s.Nodes, s.GPUsPerNode); err != nil {
		return ns, nil, err
	}
	gangs = gangNames(s.Gangs, nil)
	return ns, gangs, createGroups(ctx, tb, variant, ns, gangs, s.GangSize)
}

// ---- Scenario 1: throughput ----

type throughputRun struct {
	Variant  string
	Rep      int
	Pods     int
	Gangs    int
	Elapsed  time.Duration // first create → last pod bound
	Creating time.Duration // first create → last create returned
	Curve    []benchreport.Point
	// Writes counts the scheduler's API writes from the first create to the
	// last bind, by "VERB resource"; WritesTotal sums them.
	Writes      map[string]int
	WritesTotal int
}

// turnoverStats splits the idle time of a gang handover into its parts,
// medians and 90th percentiles over the run. DoneSpread: first to last pod
// of a finishing gang seen done (its first GPUs idle until its last are
// free, as a waiting gang of the same size needs them all). Gap: a
// finishing gang's last pod done to the first bind of the gang that took
// its place (the scheduler's reaction). BindSpread: a starting gang's first
// to last bind. The means are what allocation pays: at 3 s per gang, 95%
// allows about 158 ms of idle GPU time per handover.
type turnoverStats struct {
	N                                       int
	DoneSpread50, DoneSpread90, DoneSpreadM time.Duration
	Gap50, Gap90, GapM                      time.Duration
	Bind50, Bind90, BindM                   time.Duration
}

func (t turnoverStats) String() string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond)) }
	return fmt.Sprintf("%d handovers, ms p50/p90/mean: done spread %s/%s/%s, last done → next first bind %s/%s/%s, bind spread %s/%s/%s",
		t.N, ms(t.DoneSpread50), ms(t.DoneSpread90), ms(t.DoneSpreadM), ms(t.Gap50), ms(t.Gap90), ms(t.GapM), ms(t.Bind50), ms(t.Bind90), ms(t.BindM))
}

// turnovers matches, in time order, each gang that finished (all its pods
// done) with the next gang whose first bind came after the first finish:
// with every gang the same size and the cluster full, the k-th such start
// uses the room of the k-th finish. Call with the tracker's lock held.
func turnovers(pods map[string]*podState) turnoverStats {
	type span struct{ first, last time.Time }
	bound, done := map[string]*span{}, map[string]*span{}
	widen := func(m map[string]*span, g string, t time.Time) {
		if t.IsZero() {
			return
		}
		s := m[g]
		if s == nil {
			m[g] = &span{t, t}
			return
		}
		if t.Before(s.first) {
			s.first = t
		}
		if t.After(s.last) {
			s.last = t
		}
	}
	for _, p := range pods {
		widen(bound, p.gang, p.boundAt)
		widen(done, p.gang, p.doneAt)
	}
	var finishes, doneSpread []time.Duration
	var firstFinish time.Time
	var finishAt []time.Time
	for _, s := range done {
		finishAt = append(finishAt, s.last)
		doneSpread = append(doneSpread, s.last.Sub(s.first))
		if firstFinish.IsZero() || s.first.Before(firstFinish) {
			firstFinish = s.first
		}
	}
	var startAt []time.Time
	var bindSpread []time.Duration
	for _, s := range bound {
		if !firstFinish.IsZero() && s.first.After(firstFinish) {
			startAt = append(startAt, s.first)
			bindSpread = append(bindSpread, s.last.Sub(s.first))
		}
	}
	slices.SortFunc(finishAt, func(a, b time.Time) int { return a.Compare(b) })
	slices.SortFunc(startAt, func(a, b time.Time) int { return a.Compare(b) })
	for k := range min(len(finishAt), len(startAt)) {
		finishes = append(finishes, max(0, startAt[k].Sub(finishAt[k])))
	}
	q := func(xs []time.Duration, f float64) time.Duration {
		if len(xs) == 0 {
			return 0
		}
		ys := slices.Clone(xs)
		slices.Sort(ys)
		return ys[min(len(ys)-1, int(f*float64(len(ys))))]
	}
	mean := func(xs []time.Duration) time.Duration {
		if len(xs) == 0 {
			return 0
		}
		var sum time.Duration
		for _, x := range xs {
			sum += x
		}
		return sum / time.Duration(len(xs))
	}
	return turnoverStats{N: len(finishes),
		DoneSpread50: q(doneSpread, 0.5), DoneSpread90: q(doneSpread, 0.9), DoneSpreadM: mean(doneSpread),
		Gap50: q(finishes, 0.5), Gap90: q(finishes, 0.9), GapM: mean(finishes),
		Bind50: q(bindSpread, 0.5), Bind90: q(bindSpread, 0.9), BindM: mean(bindSpread)}
}

func (r throughputRun) podsPerSec() float64  { return float64(r.Pods) / r.Elapsed.Seconds() }
func (r throughputRun) gangsPerSec() float64 { return float64(r.Gangs) / r.Elapsed.Seconds() }

// runThroughput runs one variant once on a fresh namespace and node pool.
func runThroughput(ctx context.Context, tb testing.TB, s benchSizes, variant string, rep int) (throughputRun, error) {
	res := throughputRun{Variant: variant, Rep: rep, Pods: s.pods(), Gangs: s.Gangs}
	ns, gangs, err := prepareBenchRun(ctx, tb, s, variant, "bench-tp-")
	if ns != "" {
		defer cleanupRunOrFail(tb, ns)
	}
	if err != nil {
		return res, err
	}
	sched := "bench-" + variant + "-" + ns
	writes := newWriteCounter()
	stop, err := startBenchScheduler(ctx, tb, variant, sched, false, writes)
	if err != nil {
		return res, err
	}
	defer stop()
	tr, err := trackPods(ctx, ns, s.GangSize, nil)
	if err != nil {
		return res, err
	}
	defer tr.stop()

	writes.start()
	start := time.Now()
	if err := createGangPodsConcurrently(ctx, s, variant, sched, ns, gangs); err != nil {
		return res, err
	}
	res.Creating = time.Since(start)
	if !waitUntil(ctx, s.Timeout, func() bool { b, _ := tr.counts(); return b == s.pods() }) {
		b, _ := tr.counts()
		return res, fmt.Errorf("%s: %d of %d pods bound after %s", variant, b, s.pods(), s.Timeout)
	}
	// The scheduler's writes while the pods were created and bound (the
	// benchmark's own creates are not counted).
	res.Writes, res.WritesTotal = writes.stop()
	tr.mu.Lock()
	times := append([]time.Time(nil), tr.boundTimes...)
	tr.mu.Unlock()
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	res.Elapsed = times[len(times)-1].Sub(start)
	res.Curve = []benchreport.Point{{X: 0, Y: 0}}
	for i, at := range times {
		res.Curve = append(res.Curve, benchreport.Point{X: at.Sub(start).Seconds(), Y: float64(i + 1)})
	}
	res.Curve = thin(res.Curve, 400)
	return res, nil
}

// thin keeps at most n points of a curve, always the last.
func thin(pts []benchreport.Point, n int) []benchreport.Point {
	if len(pts) <= n {
		return pts
	}
	out := make([]benchreport.Point, 0, n+1)
	step := float64(len(pts)) / float64(n)
	for i := 0.0; int(i) < len(pts); i += step {
		out = append(out, pts[int(i)])
	}
	if out[len(out)-1] != pts[len(pts)-1] {
		out = append(out, pts[len(pts)-1])
	}
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// throughputReport is the outcome of all runs of scenario 1.
type throughputReport struct {
	Runs       []throughputRun
	MedianPods map[string]float64 // pods/s by variant
}

// runThroughputScenario runs every variant s.Reps times, rotating the order
// in each repetition so no variant always goes first, and writes
// throughput.csv, throughput.svg and throughput.md to out.
func runThroughputScenario(ctx context.Context, tb testing.TB, s benchSizes, variants []string, out string) (throughputReport, error) {
	rep := throughputReport{MedianPods: map[string]float64{}}
	for w := range s.Warmup {
		run, err := runThroughput(ctx, tb, s, variants[0], -1-w)
		if err != nil {
			return rep, err
		}
		tb.Logf("throughput %-7s warm-up (not recorded): %.0f pods/s", variants[0], run.podsPerSec())
	}
	for r := range s.Reps {
		for i := range variants {
			v := variants[(i+r)%len(variants)]
			run, err := runThroughput(ctx, tb, s, v, r)
			if err != nil {
				return rep, err
			}
			tb.Logf("throughput %-7s rep %d: %d pods in %s (%.0f pods/s, %.1f gangs/s; creates took %s)", v, r, run.Pods,
				run.Elapsed.Round(time.Millisecond), run.podsPerSec(), run.gangsPerSec(), run.Creating.Round(time.Millisecond))
			tb.Logf("throughput %-7s rep %d: scheduler API writes %d (%.2f per pod): %s", v, r, run.WritesTotal,
				float64(run.WritesTotal)/float64(run.Pods), formatWrites(run.Writes))
			rep.Runs = append(rep.Runs, run)
		}
	}
	rows := [][]string{{"variant", "rep", "pods", "gangs", "elapsed_s", "creating_s", "pods_per_s", "gangs_per_s", "scheduler_writes"}}
	chart := benchreport.Chart{
		Title:  fmt.Sprintf("Scenario 1: pods bound over time (%d nodes x %d GPUs, %d gangs of %d; median run)", s.Nodes, s.GPUsPerNode, s.Gangs, s.GangSize),
		XLabel: "seconds since first create", YLabel: "pods bound",
	}
	for _, v := range variants {
		var rates []float64
		var runs []throughputRun
		for _, run := range rep.Runs {
			if run.Variant != v {
				continue
			}
			runs = append(runs, run)
			rates = append(rates, run.podsPerSec())
			rows = append(rows, []string{v, strconv.Itoa(run.Rep), strconv.Itoa(run.Pods), strconv.Itoa(run.Gangs),
				f3(run.Elapsed.Seconds()), f3(run.Creating.Seconds()), f3(run.podsPerSec()), f3(run.gangsPerSec()), strconv.Itoa(run.WritesTotal)})
		}
		rep.MedianPods[v] = median(rates)
		sort.Slice(runs, func(i, j int) bool { return runs[i].podsPerSec() < runs[j].podsPerSec() })
		if len(runs) > 0 {
			chart.Series = append(chart.Series, benchreport.Series{Name: v, Points: runs[len(runs)/2].Curve})
		}
	}
	if err := benchreport.WriteCSV(filepath.Join(out, "throughput.csv"), rows); err != nil {
		return rep, err
	}
	if err := chart.WriteFiles(out, "throughput-curve"); err != nil {
		return rep, err
	}
	var md strings.Builder
	fmt.Fprintf(&md, "| scheduler | median pods/s | median gangs/s | runs (pods/s) | ratio muster / this |\n|---|---|---|---|---|\n")
	for _, v := range variants {
		var each []string
		for _, run := range rep.Runs {
			if run.Variant == v {
				each = append(each, fmt.Sprintf("%.0f", run.podsPerSec()))
			}
		}
		ratio := "–"
		if m := rep.MedianPods[v]; m > 0 && rep.MedianPods[variantMuster] > 0 {
			ratio = fmt.Sprintf("%.2f×", rep.MedianPods[variantMuster]/m)
		}
		fmt.Fprintf(&md, "| %s | %.0f | %.1f | %s | %s |\n", v, rep.MedianPods[v], rep.MedianPods[v]/float64(s.GangSize), strings.Join(each, ", "), ratio)
	}
	return rep, os.WriteFile(filepath.Join(out, "throughput.md"), []byte(md.String()), 0o644)
}

func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

// ---- Scenario 2: contention ----

type contentionRun struct {
	Variant string
	Rep     int
	Drained bool
	// Stuck: no bind or completion for Stall with pods pending.
	Stuck   bool
	Drain   time.Duration // first create → every gang's pods Succeeded
	Samples int
	// PartialSamples sums, over samples, the gangs seen partly bound
	// (0 < bound < size, gang not yet completing). MaxPartial is the most
	// in one sample.
	PartialSamples, MaxPartial int
	// Violations break the gang tests' rule (gang_helpers_test.go): a
	// partial muster gang not let through by one barrier release, or any
	// gang partly bound longer than settleWindow.
	Violations []string
	// AllocQueued is the mean GPU allocation over the samples taken after
	// the last create while pods were still pending.
	AllocQueued float64
	Partial     []benchreport.Point
	Alloc       []benchreport.Point
	// Writes counts the scheduler's API writes during the run by request
	// kind; WritesTotal sums them.
	Writes      map[string]int
	WritesTotal int
	// Turnover says where a waiting gang's GPUs sat idle (turnovers).
	Turnover turnoverStats
}

// runContention runs one variant once: demand twice the capacity, gangs in
// random order; a gang runs s.Hold once whole, then its pods are marked
// Succeeded. A partly bound gang holds its GPUs and never completes on its
// own, as a real job waiting for its missing workers.
func runContention(ctx context.Context, tb testing.TB, s benchSizes, variant string, rep int, seed int64) (contentionRun, error) {
	res := contentionRun{Variant: variant, Rep: rep}
	ns, err := controlPlane.NewNamespace(ctx, "bench-ct-")
	if err != nil {
		return res, err
	}
	defer cleanupRunOrFail(tb, ns)
	if err := createBenchNodes(ctx, ns, s.Nodes, s.GPUsPerNode); err != nil {
		return res, err
	}
	gangs := gangNames(s.Gangs, rand.New(rand.NewSource(seed)))
	if err := createGroups(ctx, tb, variant, ns, gangs, s.GangSize); err != nil {
		return res, err
	}
	sched := "bench-" + variant + "-" + ns
	writes := newWriteCounter()
	stop, err := startBenchScheduler(ctx, tb, variant, sched, true, writes)
	if err != nil {
		return res, err
	}
	defer stop()
	writes.start()

	var (
		mu         sync.Mutex
		completing = map[string]bool{}
		finishErr  error
		sem        = make(chan struct{}, 32)
		finishers  sync.WaitGroup
	)
	runCtx, cancel := context.WithCancel(ctx)
	defer func() { cancel(); finishers.Wait() }()
	var tr *podTracker
	tr, err = trackPods(runCtx, ns, s.GangSize, func(g string) {
		finishers.Add(1)
		time.AfterFunc(s.Hold, func() {
			defer finishers.Done()
			mu.Lock()
			completing[g] = true
			mu.Unlock()
			var names []string
			tr.mu.Lock()
			for name, st := range tr.pods {
				if st.gang == g {
					names = append(names, name)
				}
			}
			tr.mu.Unlock()
			// A distributed job's workers exit together: the gang's pods
			// finish concurrently (bounded by sem for the whole run), as
			// kubelets on different nodes report them, not one after the
			// other.
			var gangDone sync.WaitGroup
			for _, name := range names {
				gangDone.Go(func() {
					sem <- struct{}{}
					defer func() { <-sem }()
					if err := podSim.Succeed(runCtx, ns, name); err != nil && runCtx.Err() == nil {
						mu.Lock()
						finishErr = err
						mu.Unlock()
					}
				})
			}
			gangDone.Wait()
		})
	})
	if err != nil {
		return res, err
	}
	defer tr.stop()

	capacity := float64(s.Nodes * s.GPUsPerNode)
	start := time.Now()
	var created time.Time // zero until every create returned
	var createdMu sync.Mutex
	partialSince := map[string]time.Time{}
	var allocSum float64
	var allocN int
	sample := func(now time.Time) (pending int) {
		createdMu.Lock()
		allCreated := !created.IsZero()
		createdMu.Unlock()
		mu.Lock()
		retired := make(map[string]bool, len(completing))
		for g := range completing {
			retired[g] = true
		}
		mu.Unlock()
		bound := map[string][]types.UID{}
		gpus := 0
		tr.mu.Lock()
		for _, st := range tr.pods {
			switch {
			case st.bound:
				gpus++
				bound[st.gang] = append(bound[st.gang], st.uid)
			case !st.done:
				pending++
			}
		}
		tr.mu.Unlock()
		partial := 0
		for g, uids := range bound {
			if retired[g] || len(uids) >= s.GangSize {
				delete(partialSince, g)
				continue
			}
			partial++
			if variant == variantMuster && !barrierLog.releasedTogether(ns+"/"+g, uids, s.GangSize) {
				res.Violations = append(res.Violations, fmt.Sprintf("%s: %d of %d bound, not all allowed together by one barrier release", g, len(uids), s.GangSize))
			}
			if since, ok := partialSince[g]; !ok {
				partialSince[g] = now
			} else if now.Sub(since) > settleWindow && variant != variantDefault {
				res.Violations = append(res.Violations, fmt.Sprintf("%s: %d of %d bound for %s (> %s)", g, len(uids), s.GangSize, now.Sub(since).Round(time.Millisecond), settleWindow))
				delete(partialSince, g)
			}
		}
		for g := range partialSince {
			if _, ok := bound[g]; !ok {
				delete(partialSince, g)
			}
		}
		res.Samples++
		res.PartialSamples += partial
		res.MaxPartial = max(res.MaxPartial, partial)
		alloc := float64(gpus) / capacity
		t := now.Sub(start).Seconds()
		res.Partial = append(res.Partial, benchreport.Point{X: t, Y: float64(partial)})
		res.Alloc = append(res.Alloc, benchreport.Point{X: t, Y: 100 * alloc})
		if allCreated && pending > 0 {
			allocSum += alloc
			allocN++
		}
		return pending
	}
	createDone := make(chan error, 1)
	go func() {
		err := createGangPodsConcurrently(runCtx, s, variant, sched, ns, gangs)
		createdMu.Lock()
		created = time.Now()
		createdMu.Unlock()
		createDone <- err
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(s.Timeout)
	var createErr error
	createReturned := false
loop:
	for {
		select {
		case createErr = <-createDone:
			createReturned = true
			if createErr != nil {
				return res, createErr
			}
		case now := <-tick.C:
			sample(now)
			if _, done := tr.counts(); createReturned && done == s.pods() {
				res.Drained = true
				res.Drain = now.Sub(start)
				break loop
			}
			tr.mu.Lock()
			last := tr.progress
			tr.mu.Unlock()
			if createReturned && s.Stall > 0 && !last.IsZero() && now.Sub(last) > s.Stall {
				res.Stuck = true
				break loop
			}
		case <-deadline:
			break loop
		}
	}
	res.Writes, res.WritesTotal = writes.stop()
	if allocN > 0 {
		res.AllocQueued = allocSum / float64(allocN)
	}
	tr.mu.Lock()
	res.Turnover = turnovers(tr.pods)
	tr.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if finishErr != nil {
		return res, finishErr
	}
	return res, nil
}

type contentionReport struct {
	Runs []contentionRun
}

// runContentionScenario runs every variant s.Reps times (rotating order, the
// same random gang order for every variant of a repetition) and writes
// contention.csv, contention-partial.svg, contention-alloc.svg and
// contention.md to out.
// contentionCounters are the metric families MUSTER_BENCH_COUNTERS logs per
// contention run: the plugin's gang attempts and the queue's moves.
// The duration histograms give their count and their sum in milliseconds:
// where the scheduler's part of a handover goes (a scheduling cycle, the
// wait at Permit, each extension point).
var contentionCounters = []string{"muster_gang_", "scheduler_schedule_attempts_total", "scheduler_pod_scheduling_attempts", "scheduler_queue_incoming_pods_total",
	"scheduler_scheduling_attempt_duration_seconds", "scheduler_permit_wait_duration_seconds", "scheduler_framework_extension_point_duration_seconds"}

func runContentionScenario(ctx context.Context, tb testing.TB, s benchSizes, variants []string, out string) (contentionReport, error) {
	var rep contentionReport
	for w := range s.Warmup {
		run, err := runContention(ctx, tb, s, variants[0], -1-w, int64(999-w))
		if err != nil {
			return rep, err
		}
		tb.Logf("contention %-7s warm-up (not recorded): GPU allocation while queued %.1f%%", variants[0], 100*run.AllocQueued)
	}
	for r := range s.Reps {
		seed := int64(1000 + r)
		for i := range variants {
			v := variants[(i+r)%len(variants)]
			before := counterSnapshot(contentionCounters...)
			run, err := runContention(ctx, tb, s, v, r, seed)
			if err != nil {
				return rep, err
			}
			if os.Getenv("MUSTER_BENCH_COUNTERS") != "" {
				tb.Logf("contention %s rep %d counters:%s", v, r, counterDelta(before, counterSnapshot(contentionCounters...)))
			}
			tb.Logf("contention %-7s rep %d: drained=%v in %s (stuck=%v); %d samples, %d partial-gang samples (max %d at once), %d rule violations; GPU allocation while queued %.1f%%",
				v, r, run.Drained, run.Drain.Round(time.Millisecond), run.Stuck, run.Samples, run.PartialSamples, run.MaxPartial, len(run.Violations), 100*run.AllocQueued)
			tb.Logf("contention %-7s rep %d: scheduler writes %.2f per pod (%s)", v, r, float64(run.WritesTotal)/float64(s.pods()), formatWrites(run.Writes))
			tb.Logf("contention %-7s rep %d: %s", v, r, run.Turnover)
			for i, vio := range run.Violations {
				if i == 5 {
					tb.Logf("  … %d more", len(run.Violations)-5)
					break
				}
				tb.Logf("  violation: %s", vio)
			}
			rep.Runs = append(rep.Runs, run)
		}
	}
	rows := [][]string{{"variant", "rep", "drained", "stuck", "drain_s", "samples", "partial_gang_samples", "max_partial", "violations", "gpu_alloc_while_queued"}}
	partialChart := benchreport.Chart{Title: fmt.Sprintf("Scenario 2: partially bound gangs (%d nodes x %d GPUs, %d gangs of %d; rep 0)", s.Nodes, s.GPUsPerNode, s.Gangs, s.GangSize),
		XLabel: "seconds since first create", YLabel: "gangs partly bound"}
	allocChart := benchreport.Chart{Title: "Scenario 2: GPU allocation (rep 0)", XLabel: "seconds since first create", YLabel: "% of GPUs allocated", YMax: 100}
	var md strings.Builder
	fmt.Fprintf(&md, "| scheduler | drained (runs) | median time to drain | partial-gang samples per run | max partial at once | rule violations | median GPU allocation while queued |\n|---|---|---|---|---|---|---|\n")
	for _, v := range variants {
		var drains, allocs []float64
		var partials, maxes, viol []string
		drained := 0
		for _, run := range rep.Runs {
			if run.Variant != v {
				continue
			}
			rows = append(rows, []string{v, strconv.Itoa(run.Rep), strconv.FormatBool(run.Drained), strconv.FormatBool(run.Stuck), f3(run.Drain.Seconds()), strconv.Itoa(run.Samples),
				strconv.Itoa(run.PartialSamples), strconv.Itoa(run.MaxPartial), strconv.Itoa(len(run.Violations)), f3(run.AllocQueued)})
			if run.Drained {
				drained++
				drains = append(drains, run.Drain.Seconds())
			}
			allocs = append(allocs, run.AllocQueued)
			partials = append(partials, strconv.Itoa(run.PartialSamples))
			maxes = append(maxes, strconv.Itoa(run.MaxPartial))
			viol = append(viol, strconv.Itoa(len(run.Violations)))
			if run.Rep == 0 {
				partialChart.Series = append(partialChart.Series, benchreport.Series{Name: v, Points: run.Partial})
				allocChart.Series = append(allocChart.Series, benchreport.Series{Name: v, Points: run.Alloc})
			}
		}
		drain := "not drained"
		if len(drains) > 0 {
			drain = fmt.Sprintf("%.1f s", median(drains))
		}
		fmt.Fprintf(&md, "| %s | %d of %d | %s | %s | %s | %s | %.1f%% |\n", v, drained, len(allocs), drain,
			strings.Join(partials, ", "), strings.Join(maxes, ", "), strings.Join(viol, ", "), 100*median(allocs))
	}
	if err := benchreport.WriteCSV(filepath.Join(out, "contention.csv"), rows); err != nil {
		return rep, err
	}
	if err := partialChart.WriteFiles(out, "contention-partial"); err != nil {
		return rep, err
	}
	if err := allocChart.WriteFiles(out, "contention-alloc"); err != nil {
		return rep, err
	}
	return rep, os.WriteFile(filepath.Join(out, "contention.md"), []byte(md.String()), 0o644)
}

// benchVariantsFromEnv returns MUSTER_BENCH_VARIANTS (comma-separated), e.g.
// muster alone under -cpuprofile, or every variant.
func benchVariantsFromEnv() []string {
	// MUSTER_BENCH_FEATURE_GATES (kube-scheduler's --feature-gates syntax)
	// runs every scheduler of the benchmark with those gates, e.g.
	// NominatedNodeNameForExpectation=false to price that gate's writes.
	if fg := os.Getenv("MUSTER_BENCH_FEATURE_GATES"); fg != "" {
		if err := utilfeature.DefaultMutableFeatureGate.Set(fg); err != nil {
			panic(fmt.Sprintf("MUSTER_BENCH_FEATURE_GATES: %v", err))
		}
	}
	if v := os.Getenv("MUSTER_BENCH_VARIANTS"); v != "" {
		return strings.Split(v, ",")
	}
	return benchVariants
}

// BenchmarkSchedulerThroughput is scenario 1. One call runs every variant
// MUSTER_BENCH_REPS times (run it with -benchtime=1x); the metrics are the
// medians and muster's ratios.
func BenchmarkSchedulerThroughput(b *testing.B) {
	s := throughputSizes()
	b.Logf("sizes: %+v", s)
	out := benchOutDir(b)
	variants := benchVariantsFromEnv()
	var rep throughputReport
	for range b.N {
		var err error
		if rep, err = runThroughputScenario(context.Background(), b, s, variants, out); err != nil {
			b.Fatal(err)
		}
	}
	for _, v := range variants {
		b.ReportMetric(rep.MedianPods[v], v+"-pods/s")
	}
	if m, d, n := rep.MedianPods[variantMuster], rep.MedianPods[variantDefault], rep.MedianPods[variantNative]; m > 0 && d > 0 && n > 0 {
		b.ReportMetric(m/d, "muster/default")
		b.ReportMetric(m/n, "muster/native")
	}
}

// BenchmarkContention is scenario 2 (run it with -benchtime=1x).
func BenchmarkContention(b *testing.B) {
	s := contentionSizes()
	b.Logf("sizes: %+v", s)
	out := benchOutDir(b)
	for range b.N {
		rep, err := runContentionScenario(context.Background(), b, s, benchVariantsFromEnv(), out)
		if err != nil {
			b.Fatal(err)
		}
		for _, run := range rep.Runs {
			if run.Variant == variantMuster && (len(run.Violations) > 0 || !run.Drained) {
				b.Errorf("muster rep %d: drained=%v, %d gang rule violations", run.Rep, run.Drained, len(run.Violations))
			}
		}
	}
}

// TestBenchSmoke runs scenarios 1 and 2 at tiny sizes so the benchmark code
// cannot rot: every variant binds every pod, muster drains the contention
// load without breaking the gang rule, and the result files are written.
func TestBenchSmoke(t *testing.T) {
	ctx := context.Background()
	out := t.TempDir()
	tp := benchSizes{Nodes: 20, GPUsPerNode: 8, Gangs: 5, GangSize: 8, Reps: 1, Timeout: time.Minute, Workers: 8}
	rep, err := runThroughputScenario(ctx, t, tp, benchVariants, out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != len(benchVariants) {
		t.Fatalf("%d throughput runs, want %d", len(rep.Runs), len(benchVariants))
	}
	for _, run := range rep.Runs {
		last := run.Curve[len(run.Curve)-1]
		if run.Pods != 40 || run.Gangs != 5 || int(last.Y) != run.Pods || run.Elapsed <= 0 || rep.MedianPods[run.Variant] <= 0 {
			t.Errorf("%s: pods %d gangs %d, curve ends at %v, elapsed %s; want 40 pods in 5 gangs all bound", run.Variant, run.Pods, run.Gangs, last, run.Elapsed)
		}
	}
	// 4 nodes × 8 GPUs, 8 gangs of 8 × 1 GPU: twice the capacity.
	ct := benchSizes{Nodes: 4, GPUsPerNode: 8, Gangs: 8, GangSize: 8, Reps: 1, Hold: 300 * time.Millisecond, Timeout: 30 * time.Second, Workers: 4, Stall: 4 * time.Second}
	crep, err := runContentionScenario(ctx, t, ct, []string{variantMuster, variantDefault}, out)
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range crep.Runs {
		if run.Samples == 0 || len(run.Alloc) != run.Samples || len(run.Partial) != run.Samples {
			t.Errorf("%s: %d samples, %d allocation and %d partial points", run.Variant, run.Samples, len(run.Alloc), len(run.Partial))
		}
		if run.AllocQueued < 0 || run.AllocQueued > 1 {
			t.Errorf("%s: allocation %v outside [0,1]", run.Variant, run.AllocQueued)
		}
		if run.Variant == variantMuster && (!run.Drained || len(run.Violations) > 0) {
			t.Errorf("muster: drained=%v violations %v", run.Drained, run.Violations)
		}
	}
	for _, f := range []string{"throughput.csv", "throughput-curve.svg", "throughput-curve.csv", "throughput.md", "contention.csv", "contention-partial.svg", "contention-alloc.svg", "contention.md"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("result file %s: %v", f, err)
		}
	}
	data, err := os.ReadFile(filepath.Join(out, "throughput.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 1+len(benchVariants) {
		t.Errorf("throughput.csv has %d lines, want header + %d runs", n, len(benchVariants))
	}
}

// counterSnapshot sums, by metric name and labels, the counters of the
// process's legacy registry whose names start with one of prefixes. The
// scheduler and the plugin register there; differences of two snapshots
// say what one run did (how often gangs were planned, how many scheduling
// attempts each result had).
func counterSnapshot(prefixes ...string) map[string]float64 {
	out := map[string]float64{}
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		name := mf.GetName()
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := name
			for _, l := range m.GetLabel() {
				if l.GetName() == "profile" {
					continue
				}
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case m.GetCounter() != nil:
				out[key] += m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				out[key] += float64(m.GetHistogram().GetSampleCount())
				out[key+" sum_ms"] += 1000 * m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// counterDelta formats after−before for the keys that changed, sorted.
func counterDelta(before, after map[string]float64) string {
	var keys []string
	for k, v := range after {
		if v != before[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %s %.0f", k, after[k]-before[k])
	}
	return b.String()
}
