// Package podgrouper puts every pod of a defined workload into the right
// scheduler-plugins PodGroup: it walks the pod's owners up to the top-most
// one with a workload definition, asks the definition which gang instance the
// pod belongs to, writes one PodGroup per gang instance and labels the pod.
// Pods in no gang are marked to be scheduled alone; pods already in another
// gang mechanism are left alone.
package podgrouper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	pginformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	"github.com/muster-io/muster/internal/podtrim"
)

// DefaultSchedulerName is the scheduler whose pods are grouped by default.
const DefaultSchedulerName = "muster-scheduler"

// FieldManager names the pod-grouper in managedFields.
const FieldManager = "muster-podgrouper"

// maxRetries is how often a pod is retried before it is dropped from the
// queue; with the default rate limiter the last wait is about 80 s. A later
// event on the pod, its workload or the definitions brings it back.
const maxRetries = 15

// podGroupIndex indexes pods by "<namespace>/<pod-group label>".
const podGroupIndex = "podGroup"

// Options configure a Controller. The zero value of every field but
// SchedulerNames is usable.
type Options struct {
	// SchedulerNames are the schedulers whose pods are grouped
	// (default [DefaultSchedulerName]).
	SchedulerNames []string
	// ScheduleTimeoutSeconds is written into every PodGroup when set.
	ScheduleTimeoutSeconds *int32
	// MaxOwnerDepth bounds the owner walk (default DefaultMaxOwnerDepth).
	MaxOwnerDepth int
	// Clock is injected by tests (default the real clock).
	Clock clock.PassiveClock
	// Native turns on native mode: new gangs get Kubernetes' own
	// PodGroups (scheduling.k8s.io/v1beta1), joined by the admission
	// webhook (WebhookHandler); gangs that already have a
	// scheduler-plugins PodGroup keep it until they end. The cluster
	// must serve the API.
	Native bool
	// NativeSchedulerNames are schedulers, besides SchedulerNames, whose
	// pods are joined to native PodGroups in native mode (nil:
	// [DefaultNativeSchedulerName]; empty: none). Their pods get no scheduler-plugins
	// PodGroup and no label: those schedulers do not read them.
	NativeSchedulerNames []string
}

// DefaultNativeSchedulerName is the default kube-scheduler, whose in-tree
// GangScheduling plugin places native PodGroups.
const DefaultNativeSchedulerName = "default-scheduler"

// Clients are the API clients the controller reads and writes with.
type Clients struct {
	Kube      kubernetes.Interface
	PodGroups pgclientset.Interface
	Metadata  metadata.Interface
	Dynamic   dynamic.Interface
	// Mapper maps owner kinds to resources. A meta.ResettableRESTMapper
	// (restmapper.NewDeferredDiscoveryRESTMapper) is reset when a kind is
	// unknown, so CRDs installed later are found.
	Mapper meta.RESTMapper
}

// Controller is the pod-grouper. Create it with NewController and start it
// with Run; it is not restartable (create a new one).
type Controller struct {
	kube     kubernetes.Interface
	pgClient pgclientset.Interface
	defs     Definitions
	recorder record.EventRecorder
	opts     Options
	clock    clock.PassiveClock

	schedulers map[string]bool
	// nativeOnly are the NativeSchedulerNames that are not also
	// SchedulerNames: their pods are only ever grouped natively.
	nativeOnly map[string]bool
	// native holds the native PodGroup cache and writes (native.go); nil
	// unless Options.Native.
	native *nativeState

	kubeFactory informers.SharedInformerFactory
	pgFactory   pginformers.SharedInformerFactory
	podLister   corelisters.PodLister
	podIndexer  cache.Indexer
	podSynced   cache.InformerSynced
	// pgLister is the informer's view alone; the controller reads through
	// cachedPodGroup, which adds its own writes.
	pgLister pglisters.PodGroupLister
	pgSynced cache.InformerSynced
	// pgWritten overlays the PodGroup cache with this process's own
	// creates and updates until the informer shows them; pgLocks
	// serializes the writes of one PodGroup. Together they let the
	// members of a gang, synced by several workers at once, create its
	// PodGroup once instead of racing to create it and reading it back.
	pgWritten cache.MutationCache
	pgLocks   *keyLocks

	queue  workqueue.TypedRateLimitingInterface[string]
	owners *owners
	roots  *roots
	index  *rootIndex
	kartas *kartas
	// refs serves the objects definitions reference (references.go).
	refs *refWatch

	// yielded remembers pods for which the yield event was recorded, so it
	// is recorded once per pod, not once per sync.
	yielded sync.Map // types.UID → last note recorded
	// workloadNotes rate-limits events on workloads (noteWorkload).
	workloadNotes sync.Map // UID, reason and note → time.Time recorded
	// written remembers, per pod, the marks (ourMarks) of our last patch, so
	// the update event of our own write does not sync the pod again.
	written sync.Map // types.UID → string
	// labelled remembers pods whose pod → PodGroup latency was observed.
	labelled sync.Map // types.UID → struct{}
	// priorities are the members' priorities by gang (gangPriorityOf).
	priorities *memberPriorities

	synced atomic.Bool
	// started guards Start: the informers run once per controller.
	startOnce sync.Once
	startErr  error
	started   atomic.Bool

	// syncHandler is sync; tests replace it.
	syncHandler func(ctx context.Context, key string) error
}

// NewController builds a pod-grouper. recorder receives the events on pods
// (yield, broken definition); defs is the definition registry, which the
// controller keeps up to date with the cluster's Karta objects.
func NewController(ctx context.Context, c Clients, defs Definitions, recorder record.EventRecorder, opts Options) (*Controller, error) {
	if c.Kube == nil || c.PodGroups == nil || c.Metadata == nil || c.Dynamic == nil || c.Mapper == nil {
		return nil, errors.New("podgrouper: every client (Kube, PodGroups, Metadata, Dynamic, Mapper) is required")
	}
	if defs == nil {
		return nil, errors.New("podgrouper: a definition registry is required")
	}
	if len(opts.SchedulerNames) == 0 {
		opts.SchedulerNames = []string{DefaultSchedulerName}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	// nil is the default; an empty list (set on purpose) is none.
	if opts.Native && opts.NativeSchedulerNames == nil {
		opts.NativeSchedulerNames = []string{DefaultNativeSchedulerName}
	}
	registerMetrics()
	ctrl := &Controller{
		kube: c.Kube, pgClient: c.PodGroups, defs: defs, recorder: recorder, opts: opts, clock: opts.Clock,
		schedulers: map[string]bool{},
		nativeOnly: map[string]bool{},
		index:      newRootIndex(),
		priorities: newMemberPriorities(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "muster_podgrouper"},
		),
	}
	for _, n := range opts.SchedulerNames {
		ctrl.schedulers[n] = true
	}
	if opts.Native {
		for _, n := range opts.NativeSchedulerNames {
			if !ctrl.schedulers[n] {
				ctrl.nativeOnly[n] = true
			}
		}
	}

	// With one scheduler name the API server filters for us; several names
	// cannot be OR-ed in a field selector, so then every pod is watched and
	// the event handler filters.
	var factoryOpts []informers.SharedInformerOption
	if len(opts.SchedulerNames) == 1 && len(ctrl.nativeOnly) == 0 {
		sel := fields.OneTermEqualSelector("spec.schedulerName", opts.SchedulerNames[0]).String()
		factoryOpts = append(factoryOpts, informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = sel }))
	}
	factoryOpts = append(factoryOpts, informers.WithTransform(podtrim.NewInterner(podtrim.DefaultMaxLists).Transform))
	ctrl.kubeFactory = informers.NewSharedInformerFactoryWithOptions(c.Kube, 0, factoryOpts...)
	podInformer := ctrl.kubeFactory.Core().V1().Pods()
	if err := podInformer.Informer().AddIndexers(cache.Indexers{podGroupIndex: indexByPodGroup, nativeGroupIndex: indexByNativeGroup}); err != nil {
		return nil, fmt.Errorf("adding pod index: %w", err)
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: ctrl.ours,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    ctrl.addPod,
			UpdateFunc: ctrl.updatePod,
			DeleteFunc: ctrl.deletePod,
		},
	}); err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	ctrl.podLister = podInformer.Lister()
	ctrl.podIndexer = podInformer.Informer().GetIndexer()
	ctrl.podSynced = podInformer.Informer().HasSynced

	ctrl.pgFactory = pginformers.NewSharedInformerFactoryWithOptions(c.PodGroups, 0, pginformers.WithTransform(stripManagedFields))
	pgInformer := ctrl.pgFactory.Scheduling().V1alpha1().PodGroups()
	ctrl.pgWritten = newWriteOverlay(cache.NewIntegerResourceVersionMutationCacheWithOptions(klog.FromContext(ctx), pgInformer.Informer().GetStore(), cache.MutationCacheOptions{
		TTL: pgWrittenTTL, IncludeAdds: true, MaxCacheSize: 4096,
	}), pgInformer.Informer().GetStore(), pgWrittenTTL, ctrl.clock)
	ctrl.pgLocks = newKeyLocks()
	if _, err := pgInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { ctrl.pgWrittenSeen(obj, false) },
		UpdateFunc: func(oldObj, newObj any) {
			ctrl.pgWrittenSeen(newObj, false)
			ctrl.updatePodGroup(oldObj, newObj)
		},
		DeleteFunc: func(obj any) {
			ctrl.pgWrittenSeen(obj, true)
			ctrl.deletePodGroup(obj)
		},
	}); err != nil {
		return nil, fmt.Errorf("watching PodGroups: %w", err)
	}
	ctrl.pgLister = pgInformer.Lister()
	ctrl.pgSynced = pgInformer.Informer().HasSynced

	ctrl.owners = newOwners(c.Mapper, c.Metadata, ctrl.podLister, opts.MaxOwnerDepth)
	ctrl.roots = newRoots(c.Dynamic, ctrl.rootChanged)
	ctrl.refs = newRefWatch(c.Dynamic, ctrl.requeueRoot)
	ctrl.kartas = newKartas(c.Dynamic, c.Mapper, defs, ctrl.definitionsChanged)
	if opts.Native {
		ns, err := newNativeState(ctx, ctrl)
		if err != nil {
			return nil, err
		}
		ctrl.native = ns
	}
	ctrl.syncHandler = ctrl.sync
	return ctrl, nil
}

// HasSynced reports whether the caches are synced and the workers run; the
// readiness endpoint serves it.
func (c *Controller) HasSynced() bool { return c.synced.Load() }

// Start starts the informers and applies the cluster's definitions, and
// returns once the caches are synced; it writes nothing. Every replica
// calls it, leader or not, when it serves the admission webhook, which
// reads the same caches (Admit refuses until Started). Later calls return
// the first one's result. The informers stop with ctx.
func (c *Controller) Start(ctx context.Context) error {
	c.startOnce.Do(func() {
		// Definitions are read, their conditions written only by Run.
		c.kartas.writes.Store(false)
		c.roots.start(ctx)
		c.refs.start(ctx)
		c.kubeFactory.Start(ctx.Done())
		c.pgFactory.Start(ctx.Done())
		synced := []cache.InformerSynced{c.podSynced, c.pgSynced}
		if c.native != nil {
			c.native.factory.Start(ctx.Done())
			synced = append(synced, c.native.synced)
		}
		// Cluster definitions first: a pod synced before them would be
		// marked gang-free and then regrouped.
		if err := c.kartas.start(ctx); err != nil {
			c.startErr = err
			return
		}
		if !cache.WaitForNamedCacheSyncWithContext(ctx, synced...) {
			c.startErr = fmt.Errorf("podgrouper: caches not synced: %w", context.Cause(ctx))
			return
		}
		c.started.Store(true)
	})
	return c.startErr
}

// Started reports whether Start has synced the caches.
func (c *Controller) Started() bool { return c.started.Load() }

// Run starts the informers (Start), applies the cluster's definitions,
// then runs workers until ctx is done. It returns when every worker has
// stopped.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrash()
	logger := klog.FromContext(ctx)
	if workers <= 0 {
		workers = 1
	}
	var wg sync.WaitGroup
	defer func() {
		c.queue.ShutDown()
		wg.Wait()
		c.roots.shutdown()
		c.refs.shutdown()
		c.kartas.shutdown()
		c.kubeFactory.Shutdown()
		c.pgFactory.Shutdown()
		if c.native != nil {
			c.native.factory.Shutdown()
		}
	}()
	if err := c.Start(ctx); err != nil {
		return err
	}
	c.kartas.enableWrites()
	logger.Info("Starting pod-grouper", "schedulers", c.opts.SchedulerNames, "native", c.opts.Native, "nativeSchedulers", c.opts.NativeSchedulerNames, "workers", workers)
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.worker, time.Second) })
	}
	c.synced.Store(true)
	<-ctx.Done()
	c.synced.Store(false)
	logger.Info("Stopping pod-grouper")
	return nil
}

func (c *Controller) worker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)

	start := c.clock.Now()
	err := c.syncHandler(ctx, key)
	result := "success"
	if err != nil {
		result = "error"
	}
	reconcileDuration.WithLabelValues(result).Observe(c.clock.Since(start).Seconds())
	if err == nil {
		c.queue.Forget(key)
		return true
	}
	if c.queue.NumRequeues(key) < maxRetries {
		klog.FromContext(ctx).V(2).Info("Retrying pod", "pod", key, "err", err)
		c.queue.AddRateLimited(key)
		return true
	}
	utilruntime.HandleErrorWithContext(ctx, err, "Dropping pod out of the queue", "pod", key)
	c.queue.Forget(key)
	return true
}

// definitionsChanged requeues every pod of ours, so a kind that just got a
// definition is grouped, and one whose definition went away is released,
// without a restart. Add, not AddRateLimited: the queue's shared bucket
// (10/s) would take minutes for a large cluster; Add de-duplicates, and the
// workers bound the rate.
func (c *Controller) definitionsChanged() {
	for _, obj := range c.podIndexer.List() {
		if c.ours(obj) {
			c.enqueue(obj)
		}
	}
}

// ownScheduler reports whether pods of scheduler name are the
// pod-grouper's: its own schedulers', and in native mode the native ones'.
func (c *Controller) ownScheduler(name string) bool { return c.schedulers[name] || c.nativeOnly[name] }

// forgetPod drops what the controller remembers about a deleted pod.
func (c *Controller) forgetPod(key string, uid types.UID) {
	c.index.remove(key)
	c.yielded.Delete(uid)
	c.labelled.Delete(uid)
	c.written.Delete(uid)
	c.priorityMemberGone(key)
}
