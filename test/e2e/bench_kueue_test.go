package e2e

import (
	"context"
	"fmt"
	"maps"
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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/muster-io/muster/localcluster"
)

// Kueue in front of a scheduler, as benchmark variants of scenario 2:
// "kueue-muster" and "kueue-default" run the real Kueue (the configuration
// muster ships, with its "pod" integration on) admitting each gang as a
// Kueue pod group (label kueue.x-k8s.io/pod-group-name, annotation
// pod-group-total-count) by quota, the ClusterQueue holding the run's
// GPUs; muster-scheduler or the default profile places what is admitted.
// Kueue gates each pod (kueue.x-k8s.io/admission) until its group is
// admitted. waitForPodsReady evicts a group not ready in
// kueueBenchReadyTimeout: the run counts those evictions.

const (
	kueueVariantPrefix = "kueue-"
	kueueBenchQueue    = "bench"
	// kueueBenchReadyTimeout is waitForPodsReady's timeout in the
	// benchmark: short, so that a gang held partly bound by a scheduler
	// would be evicted within a run (the shipped 10m never would).
	kueueBenchReadyTimeout = 20 * time.Second
)

// kueueVariant splits "kueue-<variant>" into the scheduler variant and
// whether Kueue runs in front.
func kueueVariant(variant string) (base string, kueue bool) {
	return strings.CutPrefix(variant, kueueVariantPrefix)
}

// kueueBenchPod makes benchPod's pod a member of Kueue pod group g of
// size pods, submitted to the run's LocalQueue.
func kueueBenchPod(p *corev1.Pod, g string, size int) {
	p.Labels["kueue.x-k8s.io/queue-name"] = kueueBenchQueue
	p.Labels["kueue.x-k8s.io/pod-group-name"] = g
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations["kueue.x-k8s.io/pod-group-total-count"] = strconv.Itoa(size)
}

// startBenchKueue runs Kueue for one run; stop stops it (after the run's
// namespace is gone: Kueue's finalizers on the pods need it).
func startBenchKueue(ctx context.Context) (stop func(), err error) {
	b, err := os.ReadFile(filepath.Join(manifestsDir(), "kueue", "kueue-config-fragment.yaml"))
	if err != nil {
		return nil, err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return nil, err
	}
	cfg["namespace"] = "kueue-system"
	cfg["integrations"] = map[string]any{"frameworks": []string{"pod"}}
	cfg["waitForPodsReady"] = map[string]any{"timeout": kueueBenchReadyTimeout.String(), "blockAdmission": false,
		"requeuingStrategy": map[string]any{"timestamp": "Eviction", "backoffBaseSeconds": 1, "backoffMaxSeconds": 10}}
	// Kueue's client at the rate the schedulers get (their QPS 1000).
	cfg["clientConnection"] = map[string]any{"qps": 1000, "burst": 2000}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := controlPlane.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kueue-system"}}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		return nil, err
	}
	operatorMu.Lock()
	op, err := localcluster.StartOperatorWith(ctx, controlPlane, "kueue", localcluster.OperatorOptions{Config: string(out)})
	if err != nil {
		operatorMu.Unlock()
		return nil, err
	}
	return func() { op.Stop(); operatorMu.Unlock() }, nil
}

// prepareBenchKueue makes the run's queues in ns, a ClusterQueue of gpus
// GPUs, and waits until Kueue calls it active.
func prepareBenchKueue(ctx context.Context, ns string, gpus int) (cleanup func(), err error) {
	cleanup = func() {
		for _, r := range []string{"clusterqueues", "resourceflavors"} {
			gvr := schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: r}
			_ = controlPlane.Dynamic.Resource(gvr).Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
	}
	if _, err := controlPlane.Apply(ctx, []byte(localcluster.KueueQueuesYAML(localcluster.KueueQueues{
		ClusterQueue: ns, Namespace: ns, LocalQueue: kueueBenchQueue, GPUs: gpus,
	})), ns); err != nil {
		return cleanup, err
	}
	cqs := schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "clusterqueues"}
	if !waitUntil(ctx, time.Minute, func() bool {
		cq, err := controlPlane.Dynamic.Resource(cqs).Get(ctx, ns, metav1.GetOptions{})
		return err == nil && conditionStatus(cq, "Active") == "True"
	}) {
		return cleanup, fmt.Errorf("ClusterQueue %s not active after 1m", ns)
	}
	return cleanup, nil
}

// kueueEvictions sums Kueue's evictions of the Workloads of ns (each
// Workload's requeue count, at least 1 if it is evicted now).
func kueueEvictions(ctx context.Context, ns string) (int, error) {
	l, err := controlPlane.Dynamic.Resource(kueueWorkloadsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range l.Items {
		c, _, _ := unstructured.NestedInt64(l.Items[i].Object, "status", "requeueState", "count")
		if s, _ := workloadCondition(&l.Items[i], "Evicted"); s == "True" {
			c = max(c, 1)
		}
		n += int(c)
	}
	return n, nil
}

func conditionStatus(obj *unstructured.Unstructured, typ string) string {
	s, _ := workloadCondition(obj, typ)
	return s
}

// TestBenchKueueSmoke runs the Kueue variants of scenario 2 at a tiny
// size, so that their wiring cannot rot: every gang drains through Kueue's
// admission, none is evicted, muster keeps the gang rule.
func TestBenchKueueSmoke(t *testing.T) {
	ct := benchSizes{Nodes: 4, GPUsPerNode: 8, Gangs: 8, GangSize: 8, Reps: 1, Hold: 300 * time.Millisecond, Timeout: time.Minute, Workers: 4, Stall: 10 * time.Second}
	rep, err := runContentionScenario(t.Context(), t, ct, []string{kueueVariantPrefix + variantMuster, kueueVariantPrefix + variantDefault}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range rep.Runs {
		if !run.Drained || run.Evictions != 0 {
			t.Errorf("%s: drained=%v, %d evictions; want drained through Kueue, none evicted", run.Variant, run.Drained, run.Evictions)
		}
		if run.Variant == kueueVariantPrefix+variantMuster && len(run.Violations) > 0 {
			t.Errorf("%s: violations %v", run.Variant, run.Violations)
		}
	}
}

// kueueWatch follows the run's Kueue Workloads on a watch, to say where an
// eviction came from: each Evicted=True transition is recorded with its
// reason and how many of the gang's pods were bound at that moment (none:
// the gang never reached the scheduler in time; all: it was placed whole
// and only its readiness came late), and each first admission with its
// time, for admission → whole-gang latencies.
type kueueWatch struct {
	tr *podTracker

	mu        sync.Mutex
	admitted  map[string]time.Time // gang → first QuotaReserved
	evictedAt map[string]string    // workload → last Evicted transition seen
	evictions []kueueEviction
}

type kueueEviction struct {
	gang, reason string
	bound        int
}

func watchKueueWorkloads(ctx context.Context, ns string, tr *podTracker) (*kueueWatch, func(), error) {
	w := &kueueWatch{tr: tr, admitted: map[string]time.Time{}, evictedAt: map[string]string{}}
	ctx, cancel := context.WithCancel(ctx)
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(controlPlane.Dynamic, 0, ns, nil)
	inf := f.ForResource(kueueWorkloadsGVR).Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.observe,
		UpdateFunc: func(_, o any) { w.observe(o) },
	}); err != nil {
		cancel()
		return nil, nil, err
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return w, func() { cancel(); f.Shutdown() }, nil
}

func (w *kueueWatch) observe(obj any) {
	wl, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	gang := ""
	w.tr.mu.Lock()
	for _, ref := range wl.GetOwnerReferences() {
		if st := w.tr.pods[ref.Name]; st != nil {
			gang = st.gang
			break
		}
	}
	w.tr.mu.Unlock()
	if gang == "" {
		return
	}
	conds, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m == nil || m["status"] != "True" {
			continue
		}
		ltt, _ := m["lastTransitionTime"].(string)
		switch m["type"] {
		case "QuotaReserved":
			if _, seen := w.admitted[gang]; !seen {
				w.admitted[gang] = time.Now() // as seen: the condition's time is in whole seconds
			}
		case "Evicted":
			if w.evictedAt[wl.GetName()] == ltt {
				continue
			}
			w.evictedAt[wl.GetName()] = ltt
			reason, _ := m["reason"].(string)
			w.tr.mu.Lock()
			bound := w.tr.gangBound[gang]
			w.tr.mu.Unlock()
			w.evictions = append(w.evictions, kueueEviction{gang: gang, reason: reason, bound: bound})
		}
	}
}

// summary says how the run's evictions split by reason and by the gang's
// bound pods at eviction, and the p50/p90 of first admission → last member
// bound over the gangs that became whole.
func (w *kueueWatch) summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	split := map[string]int{}
	for _, e := range w.evictions {
		split[fmt.Sprintf("%s with %d bound", e.reason, e.bound)]++
	}
	keys := slices.Sorted(maps.Keys(split))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", split[k], k))
	}
	lastBound, lastUngated := map[string]time.Time{}, map[string]time.Time{}
	w.tr.mu.Lock()
	for _, st := range w.tr.pods {
		if st.boundAt.After(lastBound[st.gang]) {
			lastBound[st.gang] = st.boundAt
		}
		if st.ungatedAt.After(lastUngated[st.gang]) {
			lastUngated[st.gang] = st.ungatedAt
		}
	}
	w.tr.mu.Unlock()
	var toUngated, toBound []time.Duration
	for g, at := range w.admitted {
		if u, ok := lastUngated[g]; ok {
			toUngated = append(toUngated, u.Sub(at))
			if b, ok := lastBound[g]; ok {
				toBound = append(toBound, b.Sub(u))
			}
		}
	}
	return fmt.Sprintf("%d evictions seen [%s]; first admission → last member ungated p50/p90 %s, last ungated → last bound p50/p90 %s, over %d gangs",
		len(w.evictions), strings.Join(parts, ", "), p5090(toUngated), p5090(toBound), len(toBound))
}

func p5090(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	slices.Sort(d)
	q := func(p float64) time.Duration { return d[int(p*float64(len(d)-1))].Round(100 * time.Millisecond) }
	return fmt.Sprintf("%s/%s", q(0.5), q(0.9))
}
