package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/plugins/gang"
)

// newObservedGang builds the plugin with its barrier releases recorded in
// barrierLog: the plugin gets a handle that sees the waiting members it
// allows, and its Permit is wrapped so that a member let through and the
// members allowed during its Permit form one release.
func newObservedGang(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	// The whole framework, not only fwk.Handle: the plugin uses what the
	// runtime offers beyond it (RunPreFilterPlugins).
	f, ok := h.(framework.Framework)
	if !ok {
		return nil, fmt.Errorf("observing %s: the handle %T is not a framework runtime", gang.Name, h)
	}
	o := &releaseObserver{Framework: f}
	pl, err := gang.New(ctx, obj, o)
	if err != nil {
		return nil, err
	}
	return &observedGang{Plugin: pl.(*gang.Plugin), o: o}, nil
}

// observedGang is the plugin with its Permit observed.
type observedGang struct {
	*gang.Plugin
	o *releaseObserver
}

// attemptsLog counts the members of each gang that reached the plugin's
// PreFilter and its Permit: a gang re-planned in a loop shows as many
// times its member count.
var attemptsLog struct {
	mu                sync.Mutex
	preFilter, permit map[types.NamespacedName]int
}

func countAttempt(m *map[types.NamespacedName]int, pod *corev1.Pod) {
	key, member := gangOf(pod)
	if !member {
		return
	}
	attemptsLog.mu.Lock()
	defer attemptsLog.mu.Unlock()
	if *m == nil {
		*m = map[types.NamespacedName]int{}
	}
	(*m)[key]++
}

// gangAttempts is how many times members of gang key reached PreFilter
// (the plan's own PreFilter runs for a shape's representative included)
// and Permit.
func gangAttempts(key types.NamespacedName) (preFilter, permit int) {
	attemptsLog.mu.Lock()
	defer attemptsLog.mu.Unlock()
	return attemptsLog.preFilter[key], attemptsLog.permit[key]
}

func (g *observedGang) PreFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	countAttempt(&attemptsLog.preFilter, pod)
	return g.Plugin.PreFilter(ctx, state, pod, nodes)
}

func (g *observedGang) Permit(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) (*fwk.Status, time.Duration) {
	countAttempt(&attemptsLog.permit, pod)
	g.o.begin(pod)
	st, timeout := g.Plugin.Permit(ctx, state, pod, nodeName)
	g.o.end(st)
	return st, timeout
}

// releaseObserver is the handle given to the plugin. A release must be in
// barrierLog before any member it lets go can bind, so it is recorded at the
// first Allow, whole: the member in Permit and every member of its gang
// waiting at that moment. The plugin allows them under one lock, the lock
// its rejections hold too, and the scheduler runs one Permit at a time (only
// Permit adds waiting pods), so that set cannot change during the release;
// end checks that every one of them was allowed and none was left waiting.
type releaseObserver struct {
	framework.Framework

	mu      sync.Mutex
	pod     *corev1.Pod // the member in Permit; nil outside Permit
	waiting []types.UID // its gang's waiting members at the first Allow
	allowed map[types.UID]bool
	// let is every waiting pod ever allowed: one stays among the
	// framework's waiting pods until its binding goroutine reaches
	// WaitOnPermit, after its nominatedNodeName patch, and the plugin need
	// not allow it twice.
	let map[fwk.WaitingPod]bool
}

// gangOf is the PodGroup of a member, as the plugin classifies pods.
func gangOf(pod *corev1.Pod) (types.NamespacedName, bool) {
	name := pod.Labels[api.LabelPodGroup]
	return types.NamespacedName{Namespace: pod.Namespace, Name: name}, name != "" && pod.Spec.SchedulingGroup == nil
}

func (o *releaseObserver) begin(pod *corev1.Pod) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.pod != nil {
		panic(fmt.Sprintf("barrier observer: Permit of %s/%s began during Permit of %s/%s", pod.Namespace, pod.Name, o.pod.Namespace, o.pod.Name))
	}
	o.pod, o.waiting, o.allowed = pod, nil, nil
}

func (o *releaseObserver) end(st *fwk.Status) {
	o.mu.Lock()
	defer o.mu.Unlock()
	pod, waiting, allowed := o.pod, o.waiting, o.allowed
	o.pod, o.waiting, o.allowed = nil, nil, nil
	key, member := gangOf(pod)
	switch {
	case !member || !st.IsSuccess():
		if allowed != nil {
			panic(fmt.Sprintf("barrier observer: Permit of %s/%s allowed %v and returned %v", pod.Namespace, pod.Name, allowed, st))
		}
	case allowed == nil && len(waiting) == 0:
		// The quorum was there without anyone waiting.
		if left := o.waitingOf(key); len(left) > 0 {
			panic(fmt.Sprintf("barrier observer: Permit of %s/%s let it go and left %v waiting", pod.Namespace, pod.Name, left))
		}
		barrierLog.record(key, []types.UID{pod.UID})
	case len(allowed) != len(waiting):
		// allow checked that each allowed member was among the waiting.
		panic(fmt.Sprintf("barrier observer: Permit of %s/%s allowed %v of the waiting members %v", pod.Namespace, pod.Name, allowed, waiting))
	}
}

// waitingOf lists the members of gang key waiting at Permit and not let go.
// Call with o.mu held.
func (o *releaseObserver) waitingOf(key types.NamespacedName) []types.UID {
	var out []types.UID
	o.Framework.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if k, member := gangOf(wp.GetPod()); member && k == key && !o.allowed[wp.GetPod().UID] && !o.let[wp] {
			out = append(out, wp.GetPod().UID)
		}
	})
	return out
}

func (o *releaseObserver) IterateOverWaitingPods(fn func(fwk.WaitingPod)) {
	o.Framework.IterateOverWaitingPods(func(wp fwk.WaitingPod) { fn(observedWaitingPod{wp, o}) })
}

func (o *releaseObserver) GetWaitingPod(uid types.UID) fwk.WaitingPod {
	if wp := o.Framework.GetWaitingPod(uid); wp != nil {
		return observedWaitingPod{wp, o}
	}
	return nil
}

// allow records the release at its first Allow, before the real Allow of
// wp.
func (o *releaseObserver) allow(wp fwk.WaitingPod) {
	pod := wp.GetPod()
	uid := pod.UID
	o.mu.Lock()
	defer o.mu.Unlock()
	defer func() {
		if o.let == nil {
			o.let = map[fwk.WaitingPod]bool{}
		}
		o.let[wp] = true
	}()
	if o.pod == nil {
		// Outside Permit the plugin lets a barrier go when a member shows
		// up bound without passing it (a bind stored although the
		// scheduler saw it fail): the release is the gang's waiting
		// members with its bound ones.
		o.recordOutside(pod)
		return
	}
	if o.allowed == nil {
		key, _ := gangOf(o.pod)
		o.waiting = o.waitingOf(key)
		o.allowed = map[types.UID]bool{}
		barrierLog.record(key, append([]types.UID{o.pod.UID}, o.waiting...))
	}
	if !slices.Contains(o.waiting, uid) {
		panic(fmt.Sprintf("barrier observer: Permit of %s/%s allowed %s, not among the waiting members %v it was recorded with", o.pod.Namespace, o.pod.Name, uid, o.waiting))
	}
	o.allowed[uid] = true
}

type observedWaitingPod struct {
	fwk.WaitingPod
	o *releaseObserver
}

func (w observedWaitingPod) Allow(pluginName string) {
	if pluginName == gang.Name {
		w.o.allow(w.WaitingPod)
	}
	w.WaitingPod.Allow(pluginName)
}

// recordOutside records a release made outside Permit: every member of
// pod's gang that waits at the barrier or is bound, as the plugin's own
// informer shows them. Call with o.mu held.
func (o *releaseObserver) recordOutside(pod *corev1.Pod) {
	key, member := gangOf(pod)
	if !member {
		panic(fmt.Sprintf("barrier observer: %s/%s allowed outside Permit and not a gang member", pod.Namespace, pod.Name))
	}
	var set []types.UID
	o.Framework.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if k, m := gangOf(wp.GetPod()); m && k == key {
			set = append(set, wp.GetPod().UID)
		}
	})
	pods, err := o.Framework.SharedInformerFactory().Core().V1().Pods().Lister().Pods(key.Namespace).List(labels.SelectorFromSet(labels.Set{api.LabelPodGroup: key.Name}))
	if err != nil {
		panic(fmt.Sprintf("barrier observer: list members of %s: %v", key, err))
	}
	for _, p := range pods {
		if p.Spec.NodeName != "" && !slices.Contains(set, p.UID) {
			set = append(set, p.UID)
		}
	}
	barrierLog.record(key, set)
}

// barrierLog records every Permit barrier release of every muster scheduler
// the tests start: PodGroup "namespace/name" -> the member sets allowed
// together (newObservedGang). A release is recorded before the plugin allows
// anyone, so a pod seen bound was recorded here before the sample that saw it.
var barrierLog = &barrierRecorder{releases: map[string][]map[types.UID]bool{}}

type barrierRecorder struct {
	mu       sync.Mutex
	releases map[string][]map[types.UID]bool
}

func (r *barrierRecorder) record(key types.NamespacedName, members []types.UID) {
	set := make(map[types.UID]bool, len(members))
	for _, uid := range members {
		set[uid] = true
	}
	r.mu.Lock()
	r.releases[key.String()] = append(r.releases[key.String()], set)
	r.mu.Unlock()
}

// releasedTogether reports whether one release of gang allowed every pod in
// bound, together with at least min members in all.
func (r *barrierRecorder) releasedTogether(gang string, bound []types.UID, min int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, set := range r.releases[gang] {
		all := len(set) >= min
		for _, uid := range bound {
			all = all && set[uid]
		}
		if all {
			return true
		}
	}
	return false
}

func (r *barrierRecorder) count(gang string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.releases[gang])
}
