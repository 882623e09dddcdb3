package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/localcluster"
)

// createBenchNodes creates the pool's GPU nodes with 16 concurrent clients;
// with dra, the GPUs are published as one ResourceSlice per node instead
// of an extended resource, and the pool gets the claim template its pods
// name (draTemplate, one device each).
func createBenchNodes(ctx context.Context, pool string, n, gpus int, dra bool) error {
	if dra {
		if err := controlPlane.EnsureGPUDeviceClass(ctx, false); err != nil {
			return err
		}
		if _, err := controlPlane.Client.ResourceV1().ResourceClaimTemplates(pool).Create(ctx, localcluster.GPUClaimTemplate(draTemplate, 1), metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return parallel(n, 16, func(i int) error {
		spec := localcluster.NodeSpec{Name: fmt.Sprintf("%s-%d", pool, i), GPUs: gpus, Pool: pool}
		if dra {
			spec.GPUs = 0
		}
		node, err := spec.Node()
		if err != nil {
			return err
		}
		if node, err = controlPlane.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return err
		}
		if dra {
			return controlPlane.PublishGPUs(ctx, []*corev1.Node{node}, localcluster.DRAGPUs{PerNode: gpus})
		}
		return nil
	})
}

// draTemplate is the claim template of the DRA variants' pods.
const draTemplate = "gpu"

// draVariant splits a variant name into the scheduler variant it runs and
// whether its GPUs are DRA devices ("muster-dra": muster, on devices).
func draVariant(variant string) (base string, dra bool) {
	return strings.CutSuffix(variant, "-dra")
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
	variant, _ = draVariant(variant)
	switch variant {
	case variantMuster:
		c := podGroups(tb).SchedulingV1alpha1().PodGroups(ns)
		return parallel(len(gangs), 16, func(i int) error {
			_, err := c.Create(ctx, &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: gangs[i]},
				Spec: schedv1alpha1.PodGroupSpec{MinMember: int32(size)}}, metav1.CreateOptions{})
			return err
		})
	case variantNativePgr:
		return createNativePgrOwners(ctx, tb, ns, gangs, size)
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
	variant, dra := draVariant(variant)
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
	if dra {
		c := &p.Spec.Containers[0]
		delete(c.Resources.Requests, localcluster.DefaultGPUResource)
		c.Resources.Limits = nil
		c.Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(draTemplate)}}
	}
	switch variant {
	case variantMuster:
		p.Labels[api.LabelPodGroup] = g
	case variantKAI:
		p.Annotations = map[string]string{kaiPodGroupAnnotation: g}
		p.Labels[kaiQueueLabel] = kaiQueue
	case variantNative:
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(g)}
	case variantNativePgr:
		// The webhook joins it; the pod-grouper finds the gang through
		// its owner.
		uid, _ := nativePgrOwners.Load(pool + "/" + g)
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: g, UID: uid.(types.UID),
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false)}}
	}
	return p
}

// nativePgrOwners maps "<namespace>/<gang>" to the UID of the gang's Job
// in variantNativePgr (createNativePgrOwners writes it before benchPod
// reads it).
var nativePgrOwners sync.Map

// createNativePgrOwners sets up variantNativePgr for a run in ns: native
// mode's pod-grouper and webhook for the namespace, serving the run's
// scheduler (scenario 1b names it bench-sb-<variant>-<ns>, the others
// bench-<variant>-<ns>), and one Job per gang of size pods, ganged by
// annotation and managed by another controller, so that the Job controller
// creates no pods for it and the benchmark's are the only ones.
func createNativePgrOwners(ctx context.Context, tb testing.TB, ns string, gangs []string, size int) error {
	rig := newNativeRig(tb, ns, []string{"unused-" + ns},
		[]string{"bench-sb-" + variantNativePgr + "-" + ns, "bench-" + variantNativePgr + "-" + ns})
	rig.configure(tb)
	rig.start(tb, true)
	return parallel(len(gangs), 16, func(i int) error {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: gangs[i], Annotations: map[string]string{api.AnnotationMinMember: fmt.Sprint(size)}},
			Spec: batchv1.JobSpec{
				ManagedBy:   ptr.To("example.com/benchmark"),
				Parallelism: ptr.To(int32(size)), Completions: ptr.To(int32(size)),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "c", Image: "x"}}}},
			},
		}
		job, err := controlPlane.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		nativePgrOwners.Store(ns+"/"+gangs[i], job.UID)
		return nil
	})
}

// podState is what the tracker knows of one pod.
type podState struct {
	gang    string
	uid     types.UID
	bound   bool // has a node and is not terminal
	done    bool // Succeeded or Failed
	boundAt time.Time
	doneAt  time.Time
	// ungatedAt is when the pod was first seen without scheduling gates
	// (its creation when it never had one).
	ungatedAt time.Time
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
	if len(p.Spec.SchedulingGates) == 0 && s.ungatedAt.IsZero() {
		s.ungatedAt = now
	}
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
	if err := controlPlane.Client.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: localcluster.PoolLabel + "=" + ns}); err != nil {
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
	base, kueue := kueueVariant(variant)
	return parallel(len(gangs), s.Workers, func(i int) error {
		for k := range s.GangSize {
			p := benchPod(base, sched, ns, gangs[i], k)
			if kueue {
				kueueBenchPod(p, gangs[i], s.GangSize)
			}
			if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
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
	_, dra := draVariant(variant)
	if err := createBenchNodes(ctx, ns, s.Nodes, s.GPUsPerNode, dra); err != nil {
		return ns, nil, err
	}
	gangs = gangNames(s.Gangs, nil)
	if base, _ := draVariant(variant); base == variantKAI {
		return ns, gangs, prepareKAI(ctx, ns, gangs, s.GangSize, s.Nodes*s.GPUsPerNode)
	}
	return ns, gangs, createGroups(ctx, tb, variant, ns, gangs, s.GangSize)
}

// waitClaims waits until ns holds n ResourceClaims.
func waitClaims(ctx context.Context, ns string, n int) error {
	var have int
	if !waitUntil(ctx, 5*time.Minute, func() bool {
		list, err := controlPlane.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err == nil {
			have = len(list.Items)
		}
		return have >= n
	}) {
		return fmt.Errorf("%d of %d ResourceClaims made after 5m", have, n)
	}
	return nil
}
