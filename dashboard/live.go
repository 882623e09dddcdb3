package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	pginformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"
)

// Live keeps the page's snapshot current from watches of nodes, pods and
// PodGroups (no polling): every change marks it stale, and at most every
// debounce a new snapshot is built and its version announced to the
// subscribed pages, which then fetch it.
type Live struct {
	levels   []string
	gpus     []corev1.ResourceName
	debounce time.Duration

	nodes cache.SharedIndexInformer
	pods  cache.SharedIndexInformer
	pgs   cache.SharedIndexInformer // nil when PodGroups are not served
	// native watches Kubernetes' own PodGroups; nil when not served.
	native cache.SharedIndexInformer
	// slices and claims watch DRA's ResourceSlices and ResourceClaims;
	// nil when not served.
	slices, claims cache.SharedIndexInformer

	queue   *QueueSource
	role    func(*corev1.Pod, string) string
	roles   *memo[string]
	entries *memo[queueMemo]

	mu      sync.Mutex
	version int64
	body    []byte // the JSON of the current snapshot
	subs    map[chan int64]struct{}
	dirty   chan struct{}
}

// LiveOptions configure NewLive.
type LiveOptions struct {
	Levels       []string
	GPUResources []corev1.ResourceName
	// Debounce is the shortest time between two snapshots (default 250 ms,
	// so that a change shows within about a second).
	Debounce time.Duration
	// WithPodGroups watches scheduler-plugins PodGroups (false when the
	// cluster does not serve them: pods then show outside any gang).
	WithPodGroups bool
	// WithNativePodGroups watches Kubernetes' own PodGroups
	// (scheduling.k8s.io/v1beta1, native gangs), when the cluster serves
	// them.
	WithNativePodGroups bool
	// WithDRA watches ResourceSlices and ResourceClaims (resource.k8s.io/v1)
	// for GPUs handed out as DRA devices.
	WithDRA bool
	// Queue, if set, watches an admission queue (Kueue's Workloads).
	Queue *QueueSource
	// Role, if set, names a gang member's role (Inputs.Role). It sees the
	// pod as trimmed (labels, owners, name; no annotations) and is asked
	// once per pod version and definition, not once per snapshot.
	Role func(pod *corev1.Pod, definition string) string
}

// queueMemo is one object's queue entry, ok false when it has none.
type queueMemo struct {
	entry QueueEntry
	ok    bool
}

// memo keeps what was computed from one version of each object, so that
// a snapshot recomputes only what changed since the last; sweep drops the
// objects the last snapshot did not ask about. Only rebuild uses it.
type memo[V any] struct {
	byUID map[types.UID]memoEntry[V]
	seen  map[types.UID]bool
}

type memoEntry[V any] struct {
	version string
	value   V
}

func newMemo[V any]() *memo[V] {
	return &memo[V]{byUID: map[types.UID]memoEntry[V]{}, seen: map[types.UID]bool{}}
}

// get returns the value for uid at version, computing it if the one kept
// is for another version.
func (m *memo[V]) get(uid types.UID, version string, compute func() V) V {
	m.seen[uid] = true
	if e, ok := m.byUID[uid]; ok && e.version == version {
		return e.value
	}
	v := compute()
	m.byUID[uid] = memoEntry[V]{version, v}
	return v
}

func (m *memo[V]) sweep() {
	for uid := range m.byUID {
		if !m.seen[uid] {
			delete(m.byUID, uid)
		}
	}
	clear(m.seen)
}

// listAs is the objects of type T in inf's store; none for a nil inf.
func listAs[T any](inf cache.SharedIndexInformer) []T {
	if inf == nil {
		return nil
	}
	var out []T
	for _, o := range inf.GetStore().List() {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// NewLive sets up the informers; Start runs them.
func NewLive(kube kubernetes.Interface, pg pgclientset.Interface, o LiveOptions) *Live {
	if o.Debounce == 0 {
		o.Debounce = 250 * time.Millisecond
	}
	f := informers.NewSharedInformerFactory(kube, 0)
	l := &Live{levels: o.Levels, gpus: o.GPUResources, debounce: o.Debounce, role: o.Role, roles: newMemo[string](), queue: o.Queue, entries: newMemo[queueMemo](),
		nodes: f.Core().V1().Nodes().Informer(),
		pods:  f.Core().V1().Pods().Informer(),
		subs:  map[chan int64]struct{}{}, dirty: make(chan struct{}, 1)}
	// The page needs no pod's environment, volumes or container commands:
	// drop them as pods arrive, so that 10 000 pods cost little memory and
	// nothing secret is held.
	if err := l.pods.SetTransform(trimPod); err != nil {
		panic(err) // only fails once started
	}
	mark := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { l.markDirty() },
		UpdateFunc: func(any, any) { l.markDirty() },
		DeleteFunc: func(any) { l.markDirty() },
	}
	_, _ = l.nodes.AddEventHandler(mark) // registration errors only after stop
	_, _ = l.pods.AddEventHandler(mark)
	if o.Queue != nil {
		for _, inf := range o.Queue.Informers {
			_, _ = inf.AddEventHandler(mark)
		}
	}
	if o.WithDRA {
		l.slices = f.Resource().V1().ResourceSlices().Informer()
		l.claims = f.Resource().V1().ResourceClaims().Informer()
		_, _ = l.slices.AddEventHandler(mark)
		_, _ = l.claims.AddEventHandler(mark)
	}
	if o.WithNativePodGroups {
		l.native = f.Scheduling().V1beta1().PodGroups().Informer()
		_, _ = l.native.AddEventHandler(mark)
	}
	if o.WithPodGroups && pg != nil {
		pf := pginformers.NewSharedInformerFactory(pg, 0)
		l.pgs = pf.Scheduling().V1alpha1().PodGroups().Informer()
		_, _ = l.pgs.AddEventHandler(mark)
	}
	return l
}

// Start runs the informers until ctx ends and waits for their first lists.
func (l *Live) Start(ctx context.Context) error {
	infs := []cache.SharedIndexInformer{l.nodes, l.pods}
	if l.pgs != nil {
		infs = append(infs, l.pgs)
	}
	if l.queue != nil {
		infs = append(infs, l.queue.Informers...)
	}
	for _, inf := range []cache.SharedIndexInformer{l.native, l.slices, l.claims} {
		if inf != nil {
			infs = append(infs, inf)
		}
	}
	synced := make([]cache.InformerSynced, 0, len(infs))
	for _, inf := range infs {
		go inf.Run(ctx.Done())
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("watching nodes, pods and PodGroups: %w", context.Cause(ctx))
	}
	l.rebuild()
	go l.loop(ctx)
	return nil
}

func (l *Live) markDirty() {
	select {
	case l.dirty <- struct{}{}:
	default:
	}
}

func (l *Live) loop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.dirty:
		}
		l.rebuild()
		select {
		case <-ctx.Done():
			return
		case <-time.After(l.debounce):
		}
	}
}

// rebuild makes a new snapshot from the informers' caches and announces it.
func (l *Live) rebuild() {
	in := Inputs{Levels: l.levels, GPUResources: l.gpus, Now: time.Now(),
		Nodes: listAs[*corev1.Node](l.nodes), Pods: listAs[*corev1.Pod](l.pods),
		PodGroups: listAs[*schedv1alpha1.PodGroup](l.pgs), NativePodGroups: listAs[*schedv1beta1.PodGroup](l.native),
		ResourceSlices: listAs[*resourcev1.ResourceSlice](l.slices), ResourceClaims: listAs[*resourcev1.ResourceClaim](l.claims)}
	if l.role != nil {
		in.Role = func(p *corev1.Pod, def string) string {
			return l.roles.get(p.UID, p.ResourceVersion+"/"+def, func() string { return l.role(p, def) })
		}
	}
	if l.queue != nil && len(l.queue.Informers) > 0 {
		// Reading a queue entry converts the workload's pod templates:
		// once per version, not once per snapshot. What else an entry
		// reads (a LocalQueue's ClusterQueue) does not change under a
		// workload without Kueue updating the workload too.
		for _, o := range listAs[metav1.Object](l.queue.Informers[0]) {
			m := l.entries.get(o.GetUID(), o.GetResourceVersion(), func() queueMemo {
				e, ok := l.queue.Entry(o)
				return queueMemo{e, ok}
			})
			if m.ok {
				in.Queue = append(in.Queue, m.entry)
			}
		}
	}
	s := Build(in)
	l.roles.sweep()
	l.entries.sweep()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.version++
	s.Version = l.version
	body, err := json.Marshal(s)
	if err != nil {
		return // a Snapshot of plain fields always marshals
	}
	l.body = body
	for ch := range l.subs {
		select {
		case ch <- l.version:
		default: // a slow page catches up with the next version
		}
	}
}

// Current returns the JSON of the current snapshot and its version.
func (l *Live) Current() ([]byte, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.body, l.version
}

// Subscribe returns a channel that receives each new version, and the
// function that ends the subscription.
func (l *Live) Subscribe() (<-chan int64, func()) {
	ch := make(chan int64, 1)
	l.mu.Lock()
	l.subs[ch] = struct{}{}
	l.mu.Unlock()
	return ch, func() {
		l.mu.Lock()
		delete(l.subs, ch)
		l.mu.Unlock()
	}
}

// trimPod keeps what Build reads of a pod.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{}
	out.Name, out.Namespace, out.UID = p.Name, p.Namespace, p.UID
	out.Labels = p.Labels
	out.OwnerReferences = p.OwnerReferences
	out.CreationTimestamp = p.CreationTimestamp
	out.ResourceVersion = p.ResourceVersion
	out.Spec.NodeName = p.Spec.NodeName
	out.Spec.SchedulingGates = p.Spec.SchedulingGates
	out.Spec.SchedulingGroup = p.Spec.SchedulingGroup                 // its native gang
	out.Status.ResourceClaimStatuses = p.Status.ResourceClaimStatuses // its DRA claims
	out.Spec.Containers = trimContainers(p.Spec.Containers)
	out.Spec.InitContainers = trimContainers(p.Spec.InitContainers)
	out.Spec.Overhead = p.Spec.Overhead   // counted in the pod's requests
	out.Spec.Resources = p.Spec.Resources // pod-level requests, likewise
	out.Status.Phase = p.Status.Phase
	out.Status.Conditions = p.Status.Conditions
	out.Status.NominatedNodeName = p.Status.NominatedNodeName
	return out, nil
}

func trimContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		// RestartPolicy marks a restartable sidecar, whose requests add up.
		out[i] = corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
	}
	return out
}
