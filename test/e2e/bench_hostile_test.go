package e2e

// The last proof of issue 14: grouping of a healthy kind is unaffected
// while a hostile Karta is loaded. BenchmarkHostileKarta measures create →
// PodGroup of JobSet-shaped gangs at a fixed rate twice in one run, on one
// pod-grouper: without, then with two Kartas loaded for other kinds whose
// replicasPath fails on its evaluation budget, one on bytes and one on
// steps, while pods of those kinds exist and are re-evaluated all along.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/cmd/muster-podgrouper/app"
	"github.com/muster-io/muster/localcluster"
	"github.com/muster-io/muster/podgrouper"
)

// hostileGroup is the API group of the kinds the hostile Kartas define.
const hostileGroup = "hostile.bench.muster.io"

// hostileRole labels the benchmark's pods: "healthy" or "hostile".
const hostileRole = "bench.muster.io/hostile"

// hostileKinds: one kind per hostile Karta. Every evaluation of its
// replicasPath fails on a budget (stoppedBy is in the message): the first
// would build a gigabyte, the second iterates over a list of a thousand
// twice (1M steps and more).
var hostileKinds = []struct{ kind, replicasPath, stoppedBy string }{
	{"RepeatRun", `("x" * 1000000000) | length`, "more than 64 MiB"},
	{"IterateRun", `[.spec.list[] as $a | .spec.list[] as $b | $a] | length`, "steps"},
}

func init() {
	registerSetup("hostile Karta kinds", func(ctx context.Context, cp *localcluster.ControlPlane) error {
		for _, h := range hostileKinds {
			crd := localcluster.PermissiveCRD(hostileGroup, "v1", h.kind, strings.ToLower(h.kind)+"s", apiextensionsv1.NamespaceScoped)
			if err := cp.InstallCRD(ctx, crd); err != nil {
				return err
			}
		}
		return nil
	})
}

// hostileSizes are the sizes of one BenchmarkHostileKarta run.
type hostileSizes struct {
	// Gangs healthy gangs of PerGang pods per variant, created at Rate
	// pods/s.
	Gangs, PerGang, Rate int
	// HostilePods pods of each hostile kind, each touched (an annotation
	// changed, so the pod-grouper evaluates it again) once per Touch.
	HostilePods int
	Touch       time.Duration
	// Workers of the pod-grouper.
	Workers int
}

// hostileBenchSizes: 50 gangs of 8 per variant at 50 pods/s, 20 pods of
// each hostile kind (40, as in issue 14) touched every second, the shipped
// pod-grouper's workers; MUSTER_BENCH_HOSTILE_GANGS, _RATE, _PODS,
// _TOUCH_MS and _WORKERS say otherwise. About a minute on 2 cores.
func hostileBenchSizes() hostileSizes {
	return hostileSizes{
		Gangs: envInt("MUSTER_BENCH_HOSTILE_GANGS", 50), PerGang: 8, Rate: envInt("MUSTER_BENCH_HOSTILE_RATE", 50),
		HostilePods: envInt("MUSTER_BENCH_HOSTILE_PODS", 20),
		Touch:       time.Duration(envInt("MUSTER_BENCH_HOSTILE_TOUCH_MS", 1000)) * time.Millisecond,
		Workers:     envInt("MUSTER_BENCH_HOSTILE_WORKERS", app.NewOptions().Workers),
	}
}

// BenchmarkHostileKarta reports p50 and p99 of pod create → pod labelled
// with its PodGroup (the label is written once the PodGroup exists) of a
// healthy kind, per variant: karta=none, then karta=hostile. The hostile
// pods exist and are touched in both variants; only the Kartas differ.
// Run it with -benchtime=1x.
func BenchmarkHostileKarta(b *testing.B) {
	r := newHostileRun(b, hostileBenchSizes())
	variant := func(b *testing.B) {
		var all []time.Duration
		var touches float64
		for range b.N {
			lat, perSec := r.phase(b, r.s.Gangs)
			all = append(all, lat...)
			touches += perSec / float64(b.N)
		}
		slices.Sort(all)
		q := func(f float64) float64 { return float64(all[int(f*float64(len(all)-1))].Microseconds()) / 1000 }
		b.ReportMetric(q(0.5), "p50-ms")
		b.ReportMetric(q(0.99), "p99-ms")
		b.ReportMetric(touches, "hostile-touches/s")
	}
	b.Run("karta=none", variant)
	r.loadKartas(b)
	b.Run("karta=hostile", variant)
}

// TestBenchHostileSmoke runs BenchmarkHostileKarta's code at tiny sizes.
func TestBenchHostileSmoke(t *testing.T) {
	s := hostileSizes{Gangs: 3, PerGang: 2, Rate: 20, HostilePods: 2, Touch: 200 * time.Millisecond, Workers: 4}
	r := newHostileRun(t, s)
	for _, v := range []string{"none", "hostile"} {
		if v == "hostile" {
			r.loadKartas(t)
		}
		lat, touches := r.phase(t, s.Gangs)
		if len(lat) != s.Gangs*s.PerGang {
			t.Errorf("karta=%s: %d latency samples, want %d", v, len(lat), s.Gangs*s.PerGang)
		}
		if touches <= 0 {
			t.Errorf("karta=%s: no hostile pod was touched", v)
		}
	}
}

// hostileRun is one namespace with its own pod-grouper, the hostile
// workloads and their pods, and a clock on the healthy pods.
type hostileRun struct {
	s         hostileSizes
	ns, sched string
	clock     *groupClock
	hostile   map[string][]string // hostile kind → its pods
	gangs     int                 // healthy gangs created so far
}

func newHostileRun(tb testing.TB, s hostileSizes) *hostileRun {
	tb.Helper()
	ctx := context.Background()
	r := &hostileRun{s: s, ns: testNamespace(tb, "bench-hostile"), hostile: map[string][]string{}}
	r.sched = "pgr-" + r.ns
	startPodGrouperWorkers(tb, r.sched, s.Workers)
	r.clock = startGroupClock(tb, r.ns, hostileRole+"=healthy")

	// The hostile workloads and their pods, before any measurement: without
	// their Kartas the pods have the bare Pod's definition (no gang).
	list := make([]any, 1000)
	for i := range list {
		list[i] = int64(i)
	}
	template := map[string]any{"spec": pgrToMap(tb, pgrGPUPodSpec(r.sched, 1))}
	for _, h := range hostileKinds {
		name := strings.ToLower(h.kind)
		root, err := controlPlane.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": hostileGroup + "/v1", "kind": h.kind, "metadata": map[string]any{"name": name},
			"spec": map[string]any{"list": list, "template": template},
		}}, r.ns)
		if err != nil {
			tb.Fatal(err)
		}
		for i := range s.HostilePods {
			p := makePod(r.ns, podSpec{name: fmt.Sprintf("%s-%d", name, i), scheduler: r.sched, pool: r.ns, gpus: 1, mutate: func(p *corev1.Pod) {
				p.Labels[hostileRole] = "hostile"
				p.OwnerReferences = []metav1.OwnerReference{pgrControllerRef(root)}
			}})
			if _, err := controlPlane.Client.CoreV1().Pods(r.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				tb.Fatal(err)
			}
			r.hostile[h.kind] = append(r.hostile[h.kind], p.Name)
		}
	}
	// One gang outside the measurement starts the pod-grouper's lazy
	// informers for Jobs and JobSets, so the first variant does not pay
	// for them.
	r.phase(tb, 1)
	return r
}

// loadKartas creates the hostile Kartas and waits until the pod-grouper
// holds every hostile pod because its evaluation failed on the budget.
func (r *hostileRun) loadKartas(tb testing.TB) {
	tb.Helper()
	ctx := context.Background()
	kartas := controlPlane.Dynamic.Resource(podgrouper.KartaResource)
	for _, h := range hostileKinds {
		name := "bench-hostile-" + strings.ToLower(h.kind)
		if _, err := controlPlane.Create(ctx, hostileKarta(name, h.kind, h.replicasPath), ""); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() {
			if err := kartas.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				tb.Errorf("deleting Karta %s: %v", name, err)
			}
		})
	}
	for _, h := range hostileKinds {
		for _, pod := range r.hostile[h.kind] {
			waitEvent(tb, r.ns, "Pod", pod, "GangUnknown", []string{"so its pods wait", h.stoppedBy})
		}
	}
}

// hostileKarta defines kind: one gang of its pods, counted by replicasPath.
func hostileKarta(name, kind, replicasPath string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "run.ai/v1alpha1", "kind": "Karta", "metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"structureDefinition": map[string]any{
				"rootComponent": map[string]any{"name": "run", "kind": map[string]any{"group": hostileGroup, "version": "v1", "kind": kind}},
				"childComponents": []any{map[string]any{
					"name": "worker", "ownerRef": "run", "kind": map[string]any{"group": "", "version": "v1", "kind": "Pod"},
					"specDefinition":  map[string]any{"podTemplateSpecPath": ".spec.template"},
					"scaleDefinition": map[string]any{"replicasPath": replicasPath},
				}},
			},
			"optimizationInstructions": map[string]any{"gangScheduling": map[string]any{"podGroups": []any{
				map[string]any{"name": "run", "members": []any{map[string]any{"componentName": "worker"}}},
			}}},
		},
	}}
}

// phase creates gangs healthy gangs (pgrBenchGang) and their pods at
// r.s.Rate pods/s while every hostile pod is touched once per r.s.Touch,
// waits until every healthy pod is labelled and every gang has its
// PodGroup, and returns each pod's create → labelled time and the touches
// sent per second.
func (r *hostileRun) phase(tb testing.TB, gangs int) ([]time.Duration, float64) {
	tb.Helper()
	ctx := context.Background()
	first := r.gangs
	r.gangs += gangs
	jobs := make([]*unstructured.Unstructured, gangs)
	if err := parallel(gangs, 8, func(g int) error {
		var err error
		jobs[g], err = pgrBenchGang(ctx, tb, r.ns, r.sched, first+g, r.s.PerGang)
		return err
	}); err != nil {
		tb.Fatal(err)
	}

	stopTouching := r.touch(tb)
	pods := make([]string, gangs*r.s.PerGang)
	tick := time.NewTicker(time.Second / time.Duration(r.s.Rate))
	err := parallel(len(pods), 32, func(i int) error {
		g, k := i/r.s.PerGang, i%r.s.PerGang
		p := makePod(r.ns, podSpec{name: fmt.Sprintf("g%d-workers-0-%d", first+g, k), scheduler: r.sched, pool: r.ns, gpus: 1, mutate: func(p *corev1.Pod) {
			maps.Copy(p.Labels, map[string]string{
				hostileRole: "healthy", "jobset.sigs.k8s.io/jobset-name": fmt.Sprintf("g%d", first+g),
				"jobset.sigs.k8s.io/replicatedjob-name": "workers", "jobset.sigs.k8s.io/job-index": "0",
			})
			p.OwnerReferences = []metav1.OwnerReference{pgrControllerRef(jobs[g])}
		}})
		pods[i] = p.Name
		<-tick.C
		if _, err := controlPlane.Client.CoreV1().Pods(r.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
		r.clock.created(p.Name)
		return nil
	})
	tick.Stop()
	if err != nil {
		stopTouching()
		tb.Fatal(err)
	}
	err = localcluster.WaitFor(ctx, 5*time.Minute, "every healthy pod labelled", func(context.Context) (bool, string, error) {
		n := r.clock.labelled(pods)
		return n == len(pods), fmt.Sprintf("%d of %d", n, len(pods)), nil
	})
	touchesPerSec := stopTouching()
	if err != nil {
		tb.Fatal(err)
	}
	if got := len(podGroupNames(tb, r.ns)); got != r.gangs {
		tb.Errorf("%d PodGroups in %s, want one per healthy gang: %d", got, r.ns, r.gangs)
	}
	return r.clock.latencies(tb, pods), touchesPerSec
}

// touch changes an annotation of the hostile pods in turn, each once per
// r.s.Touch, until the returned function is called; it returns the touches
// sent per second and fails tb if one failed.
func (r *hostileRun) touch(tb testing.TB) (stop func() float64) {
	var all []string
	for _, h := range hostileKinds {
		all = append(all, r.hostile[h.kind]...)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var sent int
	var failed error
	begin := time.Now()
	go func() {
		defer close(done)
		tick := time.NewTicker(r.s.Touch / time.Duration(len(all)))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}}}`, hostileRole+"-touch", i)
			_, err := controlPlane.Client.CoreV1().Pods(r.ns).Patch(ctx, all[i%len(all)], types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			if ctx.Err() != nil {
				return // stopped during the call
			}
			if err != nil {
				failed = err
				return
			}
			sent++
		}
	}()
	return func() float64 {
		cancel()
		<-done
		if failed != nil {
			tb.Errorf("touching the hostile pods: %v", failed)
		}
		return float64(sent) / time.Since(begin).Seconds()
	}
}

// groupClock times healthy pods from their create call's return to the
// first sight of their pod-group label on a watch.
type groupClock struct {
	mu                sync.Mutex
	createdAt, seenAt map[string]time.Time
}

// startGroupClock watches the pods of ns matching selector until tb ends.
func startGroupClock(tb testing.TB, ns, selector string) *groupClock {
	tb.Helper()
	c := &groupClock{createdAt: map[string]time.Time{}, seenAt: map[string]time.Time{}}
	factory := informers.NewSharedInformerFactoryWithOptions(controlPlane.Client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	seen := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.Labels[api.LabelPodGroup] != "" {
			now := time.Now()
			c.mu.Lock()
			defer c.mu.Unlock()
			if _, ok := c.seenAt[p.Name]; !ok {
				c.seenAt[p.Name] = now
			}
		}
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: seen, UpdateFunc: func(_, n any) { seen(n) },
	}); err != nil {
		tb.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	tb.Cleanup(func() {
		close(stop)
		factory.Shutdown()
	})
	for typ, ok := range factory.WaitForCacheSync(stop) {
		if !ok {
			tb.Fatalf("informer %v not synced", typ)
		}
	}
	return c
}

func (c *groupClock) created(pod string) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.createdAt[pod] = now
}

// labelled counts the pods seen labelled.
func (c *groupClock) labelled(pods []string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, p := range pods {
		if _, ok := c.seenAt[p]; ok {
			n++
		}
	}
	return n
}

// latencies returns create → labelled per pod; a label seen before the
// create call returned counts as 0.
func (c *groupClock) latencies(tb testing.TB, pods []string) []time.Duration {
	tb.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]time.Duration, 0, len(pods))
	for _, p := range pods {
		start, ok1 := c.createdAt[p]
		end, ok2 := c.seenAt[p]
		if !ok1 || !ok2 {
			tb.Fatalf("pod %s: created %v, labelled %v", p, ok1, ok2)
		}
		out = append(out, max(end.Sub(start), 0))
	}
	return out
}
