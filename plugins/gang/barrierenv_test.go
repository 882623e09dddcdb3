package gang

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	testingclock "k8s.io/utils/clock/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"
)

func init() {
	// The framework runtime records metrics the scheduler registers.
	metrics.Register()
}

// barrierEnv is a real framework runtime (waiting pods, snapshot, informers
// over a fake clientset) with the plugin built on it. It plays the scheduler:
// schedule runs PreFilter, Reserve and Permit for a member, and for a member
// told to wait it adds the waiting pod and waits on it in a goroutine, as a
// binding cycle does, unreserving it when rejected.
type barrierEnv struct {
	t        *testing.T
	ctx      context.Context
	fh       *allowRecorder
	pl       *Plugin
	clk      *testingclock.FakeClock
	recorder *events.FakeRecorder
	act      *activator

	// released lists the barrier releases, each the members one Permit let
	// go together (see permit).
	released [][]types.UID
	results  chan permitResult
}

// allowRecorder is the framework handle the plugin gets: the real one, with
// every Allow the plugin makes on a waiting pod noted. Embedding the whole
// framework keeps what the plugin asserts beyond fwk.Handle
// (RunPreFilterPlugins).
type allowRecorder struct {
	framework.Framework

	mu      sync.Mutex
	allowed []types.UID
}

func (h *allowRecorder) IterateOverWaitingPods(fn func(fwk.WaitingPod)) {
	h.Framework.IterateOverWaitingPods(func(wp fwk.WaitingPod) { fn(recordedWaitingPod{wp, h}) })
}

func (h *allowRecorder) GetWaitingPod(uid types.UID) fwk.WaitingPod {
	if wp := h.Framework.GetWaitingPod(uid); wp != nil {
		return recordedWaitingPod{wp, h}
	}
	return nil
}

// take returns the members allowed since the last call.
func (h *allowRecorder) take() []types.UID {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.allowed
	h.allowed = nil
	return out
}

type recordedWaitingPod struct {
	fwk.WaitingPod
	h *allowRecorder
}

func (w recordedWaitingPod) Allow(pluginName string) {
	w.h.mu.Lock()
	w.h.allowed = append(w.h.allowed, w.GetPod().UID)
	w.h.mu.Unlock()
	w.WaitingPod.Allow(pluginName)
}

type permitResult struct {
	pod    string
	status *fwk.Status
}

// activator records the pods the plugin moves back to the active queue.
type activator struct {
	mu    sync.Mutex
	names map[string]bool
}

func (a *activator) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range pods {
		a.names[p.Name] = true
	}
}

// take returns the names activated since the last call, sorted.
func (a *activator) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := slices.Sorted(maps.Keys(a.names))
	a.names = map[string]bool{}
	return out
}

func gpuNode(name string, gpus int64) *v1.Node {
	res := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("16"),
		v1.ResourceMemory: resource.MustParse("64Gi"),
		v1.ResourcePods:   resource.MustParse("110"),
		"nvidia.com/gpu":  *resource.NewQuantity(gpus, resource.DecimalSI),
	}
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Capacity: res, Allocatable: res}}
}

func gpuPod(name string, gpus int64, opts ...podOpt) *v1.Pod {
	p := testPod(name, opts...)
	req := v1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: req, Limits: req}}}
	return p
}

func podGroup(name string, minMember int32) *schedv1alpha1.PodGroup {
	return &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("pg-" + name)}, Spec: schedv1alpha1.PodGroupSpec{MinMember: minMember}}
}

func newBarrierEnv(t *testing.T, nodes []*v1.Node, pgs []*schedv1alpha1.PodGroup, pods []*v1.Pod) *barrierEnv {
	t.Helper()
	// The scheduler-plugins fake clientset predates watch-list streams (no
	// initial-events bookmark), so its informers need plain list+watch.
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	cs := fake.NewClientset()
	inf := informers.NewSharedInformerFactory(cs, 0)
	rec := events.NewFakeRecorder(100)
	act := &activator{names: map[string]bool{}}
	f, err := frameworkruntime.NewFramework(ctx, nil, nil,
		frameworkruntime.WithClientSet(cs),
		frameworkruntime.WithInformerFactory(inf),
		frameworkruntime.WithSnapshotSharedLister(internalcache.NewSnapshot(nil, nodes)),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithPodActivator(act),
		// A real queue as the nominator, as in kube-scheduler: plans ask it
		// for the pods nominated on their nodes.
		frameworkruntime.WithPodNominator(internalqueue.NewTestQueue(ctx, nil)),
		frameworkruntime.WithEventRecorder(rec),
	)
	if err != nil {
		t.Fatal(err)
	}
	// The pods are in the cache before the plugin starts, as after an
	// informer's sync: the plugin's PodGroup sync then activates them
	// (waitForPodGroups). Added afterwards, they were missed whenever that
	// sync came first, since a store add calls no handler.
	for _, p := range pods {
		if err := inf.Core().V1().Pods().Informer().GetStore().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	clk := testingclock.NewFakeClock(t0)
	fh := &allowRecorder{Framework: f}
	pl := newTestPlugin(t, ctx, fh, clk, pgs)
	// The PodGroup informer syncs in the background (stepping the fake
	// clock by its 100 ms polls); nothing here waits on the fake clock.
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return pl.pgSynced.Load(), nil
	}); err != nil {
		t.Fatalf("PodGroup informer did not sync: %v", err)
	}
	return &barrierEnv{t: t, ctx: ctx, fh: fh, pl: pl, clk: clk, recorder: rec, act: act, results: make(chan permitResult, 100)}
}

// newTestPlugin builds the plugin with default args on fh, its PodGroups
// served by a fake clientset holding pgs.
func newTestPlugin(t *testing.T, ctx context.Context, fh fwk.Handle, clk *testingclock.FakeClock, pgs []*schedv1alpha1.PodGroup) *Plugin {
	t.Helper()
	var objs []runtime.Object
	for _, pg := range pgs {
		objs = append(objs, pg)
	}
	args, err := DecodeArgs(nil)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := newPlugin(ctx, args, fh, pgfake.NewClientset(objs...), clk)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// permit runs Permit for pod and records a barrier release: a member let
// through together with the waiting members it allowed.
func (e *barrierEnv) permit(state fwk.CycleState, pod *v1.Pod, node string) (*fwk.Status, time.Duration) {
	e.t.Helper()
	st, timeout := e.pl.Permit(e.ctx, state, pod, node)
	allowed := e.fh.take()
	if kind, _ := e.pl.classify(pod); kind == kindMember && st.IsSuccess() {
		e.released = append(e.released, append([]types.UID{pod.UID}, allowed...))
	} else if len(allowed) > 0 {
		e.t.Errorf("%s: Permit %v allowed %v without letting the member through", pod.Name, st, allowed)
	}
	return st, timeout
}

// schedule runs one member's scheduling cycle up to Permit and returns the
// PreFilter status (when not successful) or the Permit status.
func (e *barrierEnv) schedule(pod *v1.Pod) (*fwk.Status, time.Duration) {
	e.t.Helper()
	state := framework.NewCycleState()
	res, st := e.pl.PreFilter(e.ctx, state, pod, nil)
	if !st.IsSuccess() {
		return st, 0
	}
	if res.AllNodes() || res.NodeNames.Len() != 1 {
		e.t.Fatalf("%s: PreFilter result %v, want one planned node", pod.Name, res)
	}
	node := res.NodeNames.UnsortedList()[0]
	if st := e.pl.Reserve(e.ctx, state, pod, node); !st.IsSuccess() {
		e.t.Fatalf("%s: Reserve: %v", pod.Name, st)
	}
	st, wait := e.permit(state, pod, node)
	if st.IsWait() {
		e.fh.AddWaitingPod(pod, map[string]time.Duration{Name: wait})
		go func() {
			s := e.fh.WaitOnPermit(e.ctx, pod)
			if !s.IsSuccess() {
				e.pl.Unreserve(e.ctx, state, pod, node)
			}
			e.results <- permitResult{pod.Name, s}
		}()
	}
	return st, wait
}

// outcomes collects n results of waiting members.
func (e *barrierEnv) outcomes(n int) map[string]*fwk.Status {
	e.t.Helper()
	out := map[string]*fwk.Status{}
	for range n {
		select {
		case r := <-e.results:
			out[r.pod] = r.status
		case <-time.After(30 * time.Second):
			e.t.Fatalf("only %d of %d waiting members came back: %v", len(out), n, out)
		}
	}
	return out
}

func (e *barrierEnv) waiting() int {
	n := 0
	e.fh.IterateOverWaitingPods(func(fwk.WaitingPod) { n++ })
	return n
}

func (e *barrierEnv) reserved(gang string) int {
	return len(e.pl.gangs.Inspect(types.NamespacedName{Namespace: "ns", Name: gang}).Reserved)
}

// atPermit is how many members of gang the plugin remembers waiting at
// Permit: it must match the framework's waiting pods, and not grow.
func (e *barrierEnv) atPermit(gang string) int {
	return e.pl.gangs.Inspect(types.NamespacedName{Namespace: "ns", Name: gang}).AtPermit
}

func members(gang string, n int, gpus int64) []*v1.Pod {
	var out []*v1.Pod
	for i := range n {
		out = append(out, gpuPod(gang+"-"+string(rune('a'+i)), gpus, inGang(gang)))
	}
	return out
}

func drain(r *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case ev := <-r.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}
