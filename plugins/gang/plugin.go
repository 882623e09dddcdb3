package gang

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	"k8s.io/utils/clock"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	pginformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/internal/podtrim"
	"github.com/muster-io/muster/plugins/gang/devices"
	"github.com/muster-io/muster/plugins/gang/internal/lifecycle"
	"github.com/muster-io/muster/plugins/gang/plan"
)

// Name is the plugin's name in the registry and in profiles. It is not an
// in-tree name: the in-tree GangScheduling plugin runs beside it in 1.37.
const Name = "MusterGang"

// gangIndex indexes pods by "namespace/podgroup".
const gangIndex = "muster.io/gang"

// pgSyncTimeout bounds how long New's background wait treats a PodGroup
// informer that has not synced as "still starting" before it logs that the
// CRD is probably not installed. Start-up never waits for it.
const pgSyncTimeout = 30 * time.Second

// Plugin is the MusterGang plugin. It is safe for concurrent use: the
// framework calls PreEnqueue and the queueing hints from event handlers,
// Less from the queue, and the other extension points from the scheduling and
// binding goroutines.
type Plugin struct {
	h                 fwk.Handle
	args              *Args
	requirePodGrouper bool
	clock             clock.WithTickerAndDelayedExecution
	logger            klog.Logger

	// runner runs the profile's PreFilter plugins for a representative pod
	// so that its Filter plugins can be asked about a shape. nil when the
	// handle does not offer it (then only resources are planned).
	runner preFilterRunner

	podLister  corelisters.PodLister
	podIndexer cache.Indexer
	indexed    bool

	pgClient pgclientset.Interface
	pgLister pglisters.PodGroupLister
	pgSynced atomic.Bool

	// leading is set by the first scheduling cycle of this profile (PreFilter
	// or Reserve). kube-scheduler runs scheduling cycles only in the leader:
	// app.Run calls sched.Run from OnStartedLeading (or at once when leader
	// election is off), and losing the lease ends the process. Informers,
	// PreEnqueue and Less run in standbys too, so they cannot tell. The
	// eviction loop and the status writer act only once it is set; see
	// cmd/muster-scheduler/README.md for what that means after a failover.
	leading atomic.Bool

	// gangs holds each gang's lifecycle state: plans, verdicts,
	// reservations, barriers, preemptions (package lifecycle). Its lock is
	// the outermost of the plugin's (doc.go, "Locks").
	gangs *lifecycle.Tracker

	// backlog counts the members reserved and not yet bound (backlog.go).
	backlog *bindBacklog

	// created caches PodGroup creation times for Less (read-mostly).
	createdMu sync.RWMutex
	created   map[types.NamespacedName]time.Time

	// waiting holds the pods PreEnqueue keeps out of the queue, with their
	// current reason and the one last recorded as an event (noteWaiting).
	waitMu  sync.Mutex
	waiting map[types.UID]*waitState
	// waitEvents holds the waits whose event is due, for one writer
	// (writeWaitEvents) that spends waitBudget on them.
	waitEvents workqueue.TypedInterface[*waitState]
	waitBudget waitBudget

	// woken holds the gangs one of whose members a capacity hint queued
	// and none of whose members has been tried since (wakeOne). Its own
	// lock: hints run under the scheduling queue's lock, and the gang
	// tracker's lock is held while the plugin activates pods, which takes
	// that lock.
	wokenMu sync.Mutex
	woken   map[types.NamespacedName]bool

	status *statusUpdater

	// devices counts the DRA devices members' claims take (nil without
	// DRA in this scheduler); claimRetries holds the gangs with a retry
	// timer waiting for their claims (retryForClaims).
	devices      *devices.Counter
	claimRetries sync.Map
	// claimWake holds the pods whose claim was just created, to be
	// queued again once the scheduler's claim cache has it (onClaimAdd).
	claimWakeMu sync.Mutex
	claimWake   map[types.NamespacedName]bool

	// executor evicts preemption victims the way DefaultPreemption does.
	executor  *preemption.Executor
	pdbLister policylisters.PodDisruptionBudgetLister
}

// preFilterRunner is what the framework runtime offers beyond fwk.Handle.
type preFilterRunner interface {
	RunPreFilterPlugins(ctx context.Context, state fwk.CycleState, pod *v1.Pod) (*fwk.PreFilterResult, *fwk.Status, sets.Set[string])
}

var (
	_ fwk.QueueSortPlugin   = &Plugin{}
	_ fwk.PreEnqueuePlugin  = &Plugin{}
	_ fwk.EnqueueExtensions = &Plugin{}
	_ fwk.PreFilterPlugin   = &Plugin{}
	_ fwk.PostFilterPlugin  = &Plugin{}
	_ fwk.SignPlugin        = &Plugin{}
	_ fwk.ReservePlugin     = &Plugin{}
	_ fwk.PermitPlugin      = &Plugin{}
	_ fwk.PostBindPlugin    = &Plugin{}
)

// Name returns the plugin's name.
func (p *Plugin) Name() string { return Name }

// New builds the plugin: it decodes the args, creates the PodGroup informer
// from the handle's kubeconfig and starts it with ctx, and starts the status
// writer and the partial-gang loop. It never waits for the PodGroup CRD: a
// cluster without it still schedules every other pod.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := DecodeArgs(obj)
	if err != nil {
		return nil, err
	}
	if h.KubeConfig() == nil {
		return nil, fmt.Errorf("%s: the framework handle has no kubeconfig", Name)
	}
	cfg := rest.CopyConfig(h.KubeConfig())
	// The scheduler's config may ask for protobuf, which a CRD cannot speak.
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	pgClient, err := pgclientset.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: PodGroup client: %w", Name, err)
	}
	return newPlugin(ctx, args, h, pgClient, clock.RealClock{})
}

func newPlugin(ctx context.Context, args *Args, h fwk.Handle, pgClient pgclientset.Interface, clk clock.WithTickerAndDelayedExecution) (*Plugin, error) {
	logger := klog.FromContext(ctx).WithName(Name)
	registerMetrics()
	p := &Plugin{
		h:                 h,
		args:              args,
		requirePodGrouper: *args.RequirePodGrouper,
		clock:             clk,
		logger:            logger,
		pgClient:          pgClient,
		backlog:           newBindBacklog(),
		created:           map[types.NamespacedName]time.Time{},
		waiting:           map[types.UID]*waitState{},
		waitEvents:        workqueue.NewTyped[*waitState](),
		waitBudget:        flowcontrol.NewTokenBucketRateLimiter(waitEventQPS, waitEventBurst),
		woken:             map[types.NamespacedName]bool{},
	}
	p.gangs = lifecycle.New(lifecycle.Config{Name: Name, Clock: clk, Backoff: p.backoff(), Cluster: cluster{p}})
	if r, ok := h.(preFilterRunner); ok {
		p.runner = r
	} else {
		logger.Info("The framework handle cannot run PreFilter plugins; gang plans check resources only")
	}

	if dra := h.SharedDRAManager(); dra != nil {
		p.devices = devices.New(dra)
		if _, err := h.SharedInformerFactory().Resource().V1().ResourceClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: p.onClaimAdd,
		}); err != nil {
			return nil, fmt.Errorf("%s: ResourceClaim handler: %w", Name, err)
		}
	}
	p.executor = preemption.NewExecutor(h, feature.Features{})
	// PodDisruptionBudgets weigh in the victim order as in DefaultPreemption.
	p.pdbLister = h.SharedInformerFactory().Policy().V1().PodDisruptionBudgets().Lister()

	podInformer := h.SharedInformerFactory().Core().V1().Pods()
	// The scheduler keeps every pod that is not finished; equal resource
	// lists become one map (podtrim). The transform replaces
	// kube-scheduler's own, which only drops managedFields, and drops them
	// too. Nodes and PodDisruptionBudgets lose their managedFields. An
	// informer already running (a second profile) keeps what it has.
	trim := podtrim.NewInterner(podtrim.DefaultMaxLists)
	for _, inf := range []cache.SharedIndexInformer{podInformer.Informer(), h.SharedInformerFactory().Core().V1().Nodes().Informer(), h.SharedInformerFactory().Policy().V1().PodDisruptionBudgets().Informer()} {
		if err := inf.SetTransform(trim.Transform); err != nil {
			logger.V(2).Info("Informer already started; its objects stay as they are", "err", err)
		}
	}
	p.podLister = podInformer.Lister()
	p.podIndexer = podInformer.Informer().GetIndexer()
	// An index by gang makes member counts cheap. Adding it fails once the
	// informer runs (a second profile, say); then namespace lists do.
	if err := podInformer.Informer().AddIndexers(cache.Indexers{gangIndex: indexByGang}); err == nil {
		p.indexed = true
	} else if _, exists := p.podIndexer.GetIndexers()[gangIndex]; exists {
		p.indexed = true
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.onPod(nil, obj) },
		UpdateFunc: p.onPod,
		DeleteFunc: func(obj any) { p.onPodDelete(obj) },
	}); err != nil {
		return nil, fmt.Errorf("%s: pod handler: %w", Name, err)
	}
	if err := newGPUTally(gpuResourceNames).handlers(podInformer.Informer(), h.SharedInformerFactory().Core().V1().Nodes().Informer()); err != nil {
		return nil, fmt.Errorf("%s: GPU metrics handlers: %w", Name, err)
	}
	if _, err := h.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.gangs.Changed() },
		UpdateFunc: p.onNodeUpdate,
	}); err != nil {
		return nil, fmt.Errorf("%s: node handler: %w", Name, err)
	}

	factory := pginformers.NewSharedInformerFactoryWithOptions(pgClient, 0, pginformers.WithTransform(trim.Transform))
	pgInformer := factory.Scheduling().V1alpha1().PodGroups()
	p.pgLister = pgInformer.Lister()
	if _, err := pgInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.onPodGroup(nil, obj) },
		UpdateFunc: p.onPodGroup,
		DeleteFunc: p.onPodGroupDelete,
	}); err != nil {
		return nil, fmt.Errorf("%s: PodGroup handler: %w", Name, err)
	}
	p.status = newStatusUpdater(p)
	factory.Start(ctx.Done())
	go p.waitForPodGroups(ctx, pgInformer.Informer())
	go p.status.run(ctx)
	go p.evictLoop(ctx)
	go p.writeWaitEvents(ctx)
	go func() {
		<-ctx.Done()
		factory.Shutdown()
		p.waitEvents.ShutDown()
	}()
	return p, nil
}

// markLeading records that this instance runs scheduling cycles, hence
// leads. The first time, every PodGroup's status is refreshed: writes were
// skipped while standing by.
func (p *Plugin) markLeading() {
	if p.leading.Load() || !p.leading.CompareAndSwap(false, true) {
		return
	}
	p.logger.V(2).Info("Scheduling cycles run here; this instance leads: PodGroup status writes and partial-gang eviction are on")
	go func() {
		// What the cache holds now; PodGroups it receives later are
		// enqueued by their add events.
		pgs, err := p.pgLister.List(labels.Everything())
		if err != nil {
			return
		}
		for _, pg := range pgs {
			p.status.enqueue(types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name})
		}
	}()
}

// waitForPodGroups marks the PodGroup cache usable once synced. Until then
// members wait in PreEnqueue with a reason that says so.
func (p *Plugin) waitForPodGroups(ctx context.Context, inf cache.SharedIndexInformer) {
	warned := false
	start := p.clock.Now()
	for !inf.HasSynced() {
		if ctx.Err() != nil {
			return
		}
		if !warned && p.clock.Since(start) > pgSyncTimeout {
			p.logger.Info("PodGroup informer has not synced; is the scheduling.x-k8s.io PodGroup CRD installed? Gang members wait until it is", "after", pgSyncTimeout)
			warned = true
		}
		p.clock.Sleep(100 * time.Millisecond)
	}
	p.pgSynced.Store(true)
	// Members gated before the cache synced get another look.
	sel := labels.NewSelector()
	if req, err := labels.NewRequirement(api.LabelPodGroup, "exists", nil); err == nil {
		sel = sel.Add(*req)
	}
	pods, _ := p.podLister.List(sel)
	p.activate(pods...)
}

func indexByGang(obj any) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, nil
	}
	if name := pod.Labels[api.LabelPodGroup]; name != "" && pod.Spec.SchedulingGroup == nil {
		return []string{pod.Namespace + "/" + name}, nil
	}
	return nil, nil
}

// members lists the live pods labelled with the gang, bound or not.
func (p *Plugin) members(key types.NamespacedName) []*v1.Pod {
	var out []*v1.Pod
	if p.indexed {
		objs, err := p.podIndexer.ByIndex(gangIndex, key.String())
		if err == nil {
			for _, o := range objs {
				if pod, ok := o.(*v1.Pod); ok && plan.Live(pod) {
					out = append(out, pod)
				}
			}
			return out
		}
	}
	sel := labels.SelectorFromSet(labels.Set{api.LabelPodGroup: key.Name})
	pods, err := p.podLister.Pods(key.Namespace).List(sel)
	if err != nil {
		return nil
	}
	for _, pod := range pods {
		if plan.Live(pod) && pod.Spec.SchedulingGroup == nil {
			out = append(out, pod)
		}
	}
	return out
}

// podGroup returns the gang's PodGroup, or nil when it does not exist (yet).
func (p *Plugin) podGroup(key types.NamespacedName) *schedv1alpha1.PodGroup {
	if !p.pgSynced.Load() {
		return nil
	}
	pg, err := p.pgLister.PodGroups(key.Namespace).Get(key.Name)
	if err != nil {
		return nil
	}
	return pg
}

// onClaimAdd queues again, a moment later, the gang member a new claim was
// made for. The DynamicResources plugin's PreEnqueue holds a pod back
// until its claim is in the scheduler's claim cache, and the claim's event
// releases it; but that cache follows the informer on its own goroutine,
// and a pod that entered the queue while the event was being handled
// missed it and slept until the queue's five-minute flush (a gang of 500
// in scenario 1b with DRA, bound after 331 s). Pods scheduled alone are
// not the plugin's to wake.
func (p *Plugin) onClaimAdd(obj any) {
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	p.claimWakeMu.Lock()
	defer p.claimWakeMu.Unlock()
	first := len(p.claimWake) == 0
	for _, ref := range claim.OwnerReferences {
		if ref.Kind == "Pod" && ref.APIVersion == "v1" {
			if p.claimWake == nil {
				p.claimWake = map[types.NamespacedName]bool{}
			}
			p.claimWake[types.NamespacedName{Namespace: claim.Namespace, Name: ref.Name}] = true
		}
	}
	if first && len(p.claimWake) > 0 {
		time.AfterFunc(claimRetry, p.wakeClaimOwners)
	}
}

// wakeClaimOwners activates the pending gang members onClaimAdd noted.
func (p *Plugin) wakeClaimOwners() {
	p.claimWakeMu.Lock()
	keys := p.claimWake
	p.claimWake = nil
	p.claimWakeMu.Unlock()
	var pods []*v1.Pod
	for k := range keys {
		pod, err := p.podLister.Pods(k.Namespace).Get(k.Name)
		if err != nil || pod.Spec.NodeName != "" {
			continue
		}
		if kind, _ := p.classify(pod); kind == kindMember {
			pods = append(pods, pod)
		}
	}
	p.activate(pods...)
}

// activate moves pods waiting in the unschedulable pool back to the active
// queue. Pods already bound or being deleted are left out.
func (p *Plugin) activate(pods ...*v1.Pod) {
	m := map[string]*v1.Pod{}
	for _, pod := range pods {
		if pod.Spec.NodeName == "" && plan.Live(pod) {
			m[pod.Namespace+"/"+pod.Name] = pod
		}
	}
	if len(m) > 0 {
		p.h.Activate(p.logger, m)
	}
}

func (p *Plugin) onPod(oldObj, newObj any) {
	pod, ok := newObj.(*v1.Pod)
	if !ok {
		return
	}
	kind, key := p.classify(pod)
	if kind != kindMember {
		return
	}
	var old *v1.Pod
	if oldObj != nil {
		old, _ = oldObj.(*v1.Pod)
	}
	if old != nil && old.Spec.NodeName == "" && pod.Spec.NodeName != "" {
		p.observeBound(key)
		p.boundOutsideBarrier(key)
	}
	if !plan.Live(pod) {
		p.forgetMember(key, pod)
	}
	if old == nil || p.classifyKey(old) != key {
		// A new member (created, or just labelled), bound or not.
		p.memberJoined(key)
	}
	p.status.enqueue(key)
}

// classifyKey is the gang of a member pod, or the zero name.
func (p *Plugin) classifyKey(pod *v1.Pod) types.NamespacedName {
	if kind, key := p.classify(pod); kind == kindMember {
		return key
	}
	return types.NamespacedName{}
}

// memberJoined lets the gang's pending members that PreEnqueue holds back
// for the quorum try again once the quorum exists.
//
// This is the plugin's own informer handler's job, not a queueing hint on
// pod adds: a hint on UnscheduledPod/Add or AssignedPod/Add makes the
// scheduling queue weigh every pod held back by this plugin against every
// pod created and every bind, which at 10 000 pods took three quarters of
// the scheduler's CPU (BENCHMARKS.md, scenario 5). No wake-up is lost: the
// informer stores the new member before any handler hears of it, and the
// queue counts (PreEnqueue) and holds a pod under one lock that Activate
// takes too, so a sibling is either held already (and activated here) or
// counts the new member when it is queued. Every pending member is
// activated, not only those known to wait: a sibling being counted right
// now is not known yet. Activating a pod the queue does not hold does
// nothing.
//
// A gang refused before the new member came is planned again: the refusal
// counted the members it had.
func (p *Plugin) memberJoined(key types.NamespacedName) {
	pg := p.podGroup(key)
	if pg == nil {
		return
	}
	p.gangs.MemberJoined(key)
	members := p.members(key)
	if len(members) < minMember(pg) {
		return
	}
	p.activate(members...)
}

// onNodeUpdate counts a node update that may change where pods fit, as
// kube-scheduler's own queue tells them (NodeSchedulingPropertiesChange).
// A kubelet's status report (heartbeat times, images) changes nothing a
// plan reads; counted, it made every cached verdict stale within seconds
// in a large cluster (5000 nodes each reporting every few minutes), so
// that each waiting gang planned and searched victims on every try.
func (p *Plugin) onNodeUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(*v1.Node)
	n, ok2 := newObj.(*v1.Node)
	if !ok1 || !ok2 || len(framework.NodeSchedulingPropertiesChange(n, o)) > 0 {
		p.gangs.Changed()
	}
}

func (p *Plugin) onPodDelete(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if pod, ok = tomb.Obj.(*v1.Pod); !ok {
			return
		}
	}
	if pod.Spec.NodeName != "" {
		p.gangs.Changed()
	}
	p.backlog.done(pod.UID)
	p.stopWaiting(pod.UID)
	kind, key := p.classify(pod)
	if kind != kindMember {
		return
	}
	p.forgetMember(key, pod)
	p.status.enqueue(key)
}

func (p *Plugin) onPodGroup(oldObj, newObj any) {
	pg, ok := newObj.(*schedv1alpha1.PodGroup)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}
	p.createdMu.Lock()
	p.created[key] = pg.CreationTimestamp.Time
	p.createdMu.Unlock()
	if old, ok := oldObj.(*schedv1alpha1.PodGroup); ok && old.UID == pg.UID && old.Generation == pg.Generation && maps.Equal(old.Annotations, pg.Annotations) {
		// Status or label change only — usually the plugin's own status
		// write. Dropping the plan here would hand the capacity it holds
		// to other gangs while this one is half reserved.
		return
	}
	// A new PodGroup, or a changed minMember or timeout, may let members in
	// (PreEnqueue) or change the plan.
	p.gangs.Resized(key)
	if p.pgSynced.Load() {
		p.activate(p.members(key)...)
	}
	p.status.enqueue(key)
}

func (p *Plugin) onPodGroupDelete(obj any) {
	pg, ok := obj.(*schedv1alpha1.PodGroup)
	if !ok {
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if pg, ok = tomb.Obj.(*schedv1alpha1.PodGroup); !ok {
			return
		}
	}
	key := types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}
	p.createdMu.Lock()
	delete(p.created, key)
	p.createdMu.Unlock()
	p.gangs.Delete(key)
	p.wakeConsumed(key)
	p.status.forget(key)
}

// recordEvent records an event on a PodGroup. The recorder resolves the kind
// through the object's TypeMeta, which informer objects lack.
func (p *Plugin) recordEvent(pg *schedv1alpha1.PodGroup, eventType, reason, action, note string) {
	if pg == nil || p.h.EventRecorder() == nil {
		return
	}
	ref := pg.DeepCopy()
	ref.APIVersion = schedv1alpha1.SchemeGroupVersion.String()
	ref.Kind = "PodGroup"
	p.h.EventRecorder().Eventf(ref, nil, eventType, reason, action, "%s", note)
}

// maxPermitTimeout keeps the barrier wait plus permitBackstop within the
// framework's 15-minute cap on a Permit wait (frameworkruntime maxTimeout).
const maxPermitTimeout = 15*time.Minute - permitBackstop

// permitTimeout is the PodGroup's scheduleTimeoutSeconds or the default,
// at most maxPermitTimeout.
func (p *Plugin) permitTimeout(pg *schedv1alpha1.PodGroup) time.Duration {
	if pg != nil && pg.Spec.ScheduleTimeoutSeconds != nil && *pg.Spec.ScheduleTimeoutSeconds > 0 {
		return min(time.Duration(*pg.Spec.ScheduleTimeoutSeconds)*time.Second, maxPermitTimeout)
	}
	return time.Duration(*p.args.PermitTimeoutSeconds) * time.Second
}

func (p *Plugin) backoff() time.Duration {
	return time.Duration(*p.args.BackoffSeconds) * time.Second
}

func minMember(pg *schedv1alpha1.PodGroup) int {
	if pg.Spec.MinMember < 1 {
		return 1
	}
	return int(pg.Spec.MinMember)
}
