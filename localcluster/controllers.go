package localcluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	schedulinginformers "k8s.io/client-go/informers/scheduling/v1beta1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/cronjob"
	"k8s.io/kubernetes/pkg/controller/deployment"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
	"k8s.io/kubernetes/pkg/controller/job"
	"k8s.io/kubernetes/pkg/controller/namespace"
	"k8s.io/kubernetes/pkg/controller/replicaset"
	"k8s.io/kubernetes/pkg/controller/resourceclaim"
	"k8s.io/kubernetes/pkg/controller/scheduling/podgroupprotection"
	"k8s.io/kubernetes/pkg/controller/statefulset"
	"k8s.io/kubernetes/pkg/features"
)

// GCSyncPeriod is how often the garbage collector re-reads discovery, so
// that owners of a kind whose CRD was installed after the controllers started
// are collected within about a second (kube-controller-manager uses 30s).
const GCSyncPeriod = time.Second

// StartControllers starts the pod-creating controllers of
// kube-controller-manager in this process: Job, ReplicaSet, Deployment,
// StatefulSet, CronJob, ResourceClaim and the garbage collector, built directly from
// k8s.io/kubernetes/pkg/controller. They run until the returned stop is
// called or the control plane stops (ctx cancellation stops them too, but
// only stop waits for them to return).
//
// With the GenericWorkload gate on (Options.NativePodGroups) it also runs the
// PodGroup protection controller, as kube-controller-manager does: the
// apiserver's PodGroupProtection admission stamps a finalizer on every
// native PodGroup, and only that controller removes it once no active pod
// names the group, so without it a deleted PodGroup stays Terminating. With
// WorkloadWithJob on (Options.WorkloadWithJob) the Job controller gets its
// Workload and PodGroup informers and creates both for root Jobs. With
// DynamicResourceAllocation (on by default) it runs the ResourceClaim
// controller, which makes each pod's claims from its ResourceClaimTemplates
// and releases them when the pod is done. All follow the process-global
// gates as they are when StartControllers runs.
//
// Pods they create stay Pending until a scheduler binds them; the pod
// simulator (StartPodSimulator) then plays kubelet.
func (cp *ControlPlane) StartControllers(ctx context.Context) (stop func(), err error) {
	if err := cp.live(); err != nil {
		return nil, err
	}
	cs, mdClient, err := cp.controllerClients(1000, 2000)
	if err != nil {
		return nil, err
	}
	// The GC's discovery client must not be the one behind its REST mapper,
	// or every sync would reset the mapper's cache needlessly.
	gcDiscovery, _, err := cp.controllerClients(1000, 2000)
	if err != nil {
		return nil, err
	}

	ctx, cancel := context.WithCancel(ctx)
	inf := informers.NewSharedInformerFactory(cs, 0)
	mdInf := metadatainformer.NewSharedInformerFactory(mdClient, 0)
	fail := func(what string, err error) (func(), error) {
		cancel()
		return nil, fmt.Errorf("%s controller: %w", what, err)
	}

	// As kube-controller-manager: the Job controller reads Workloads and
	// PodGroups only under WorkloadWithJob, and insists on both informers then.
	var workloads schedulinginformers.WorkloadInformer
	var podGroups schedulinginformers.PodGroupInformer
	if utilfeature.DefaultFeatureGate.Enabled(features.WorkloadWithJob) {
		workloads = inf.Scheduling().V1beta1().Workloads()
		podGroups = inf.Scheduling().V1beta1().PodGroups()
	}
	jobC, err := job.NewController(ctx, cs, inf.Core().V1().Pods(), inf.Batch().V1().Jobs(), workloads, podGroups)
	if err != nil {
		return fail("job", err)
	}
	var pgProtection *podgroupprotection.Controller
	if utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) {
		pgProtection, err = podgroupprotection.NewPodGroupProtectionController(klog.FromContext(ctx),
			inf.Scheduling().V1beta1().PodGroups(), inf.Core().V1().Pods(), cs)
		if err != nil {
			return fail("podgroup protection", err)
		}
	}
	// As kube-controller-manager under DynamicResourceAllocation (GA, on by
	// default): without it no ResourceClaim is ever made from a pod's
	// ResourceClaimTemplate, and a pod that asks for devices never binds.
	var claimC *resourceclaim.Controller
	if utilfeature.DefaultFeatureGate.Enabled(features.DynamicResourceAllocation) {
		claimC, err = resourceclaim.NewController(klog.FromContext(ctx), cs, inf.Core().V1().Pods(), inf.Scheduling().V1beta1().PodGroups(),
			inf.Resource().V1().ResourceClaims(), inf.Resource().V1().ResourceClaimTemplates())
		if err != nil {
			return fail("resource claim", err)
		}
	}
	rsC := replicaset.NewReplicaSetController(ctx, inf.Apps().V1().ReplicaSets(), inf.Core().V1().Pods(), cs, replicaset.BurstReplicas)
	depC, err := deployment.NewDeploymentController(ctx, inf.Apps().V1().Deployments(), inf.Apps().V1().ReplicaSets(), inf.Core().V1().Pods(), cs)
	if err != nil {
		return fail("deployment", err)
	}
	ssC := statefulset.NewStatefulSetController(ctx, inf.Core().V1().Pods(), inf.Apps().V1().StatefulSets(),
		inf.Core().V1().PersistentVolumeClaims(), inf.Apps().V1().ControllerRevisions(), cs)
	cronC, err := cronjob.NewControllerV2(ctx, inf.Batch().V1().Jobs(), inf.Batch().V1().CronJobs(), cs)
	if err != nil {
		return fail("cronjob", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery()))
	informersStarted := make(chan struct{})
	gc, err := garbagecollector.NewGarbageCollector(ctx, cs, mdClient, mapper, garbagecollector.DefaultIgnoredResources(),
		informerfactory.NewInformerFactory(inf, mdInf), informersStarted)
	if err != nil {
		return fail("garbage collector", err)
	}

	var wg sync.WaitGroup
	run := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	const workers = 5
	run(func() { jobC.Run(ctx, workers) })
	run(func() { rsC.Run(ctx, workers) })
	run(func() { depC.Run(ctx, workers) })
	run(func() { ssC.Run(ctx, workers) })
	run(func() { cronC.Run(ctx, workers) })
	if pgProtection != nil {
		// One worker, as kube-controller-manager runs it.
		run(func() { pgProtection.Run(ctx, 1) })
	}
	if claimC != nil {
		run(func() { claimC.Run(ctx, workers) })
	}
	run(func() { gc.Run(ctx, workers, 30*time.Second) })
	run(func() { gc.Sync(ctx, gcDiscovery.Discovery(), GCSyncPeriod) })

	inf.Start(ctx.Done())
	mdInf.Start(ctx.Done())
	close(informersStarted)
	if err := waitForSync(ctx, inf.WaitForCacheSync); err != nil {
		cancel()
		wg.Wait()
		inf.Shutdown()
		mdInf.Shutdown()
		return nil, fmt.Errorf("controllers: %w", err)
	}

	stop = sync.OnceFunc(func() {
		cancel()
		wg.Wait()
		inf.Shutdown()
		mdInf.Shutdown()
	})
	cp.OnStop("controllers", stop)
	return stop, nil
}

// BackdateCronJob sets the CronJob's status.lastScheduleTime to `ago` in the
// past. The CronJob controller follows the wall clock; with a missed run in
// the past it creates the Job at once instead of at the next minute.
func (cp *ControlPlane) BackdateCronJob(ctx context.Context, ns, name string, ago time.Duration) error {
	cj, err := cp.Client.BatchV1().CronJobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("backdate CronJob %s/%s: %w", ns, name, err)
	}
	cj.Status.LastScheduleTime = &metav1.Time{Time: time.Now().Add(-ago)}
	if _, err := cp.Client.BatchV1().CronJobs(ns).UpdateStatus(ctx, cj, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("backdate CronJob %s/%s: %w", ns, name, err)
	}
	return nil
}

// StartNamespaceController starts kube-controller-manager's namespace
// controller: a deleted namespace is emptied and then removed, as on a real
// cluster, instead of staying Terminating. The integration tests do not run
// it (each leaves its namespace behind for the shared control plane to
// stop with); the sandbox does, since a person deletes namespaces there.
func (cp *ControlPlane) StartNamespaceController(ctx context.Context) (stop func(), err error) {
	if err := cp.live(); err != nil {
		return nil, err
	}
	cs, mdClient, err := cp.controllerClients(100, 200)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	inf := informers.NewSharedInformerFactory(cs, 0)
	nc := namespace.NewNamespaceController(ctx, cs, mdClient, cs.Discovery().ServerPreferredNamespacedResources,
		inf.Core().V1().Namespaces(), 5*time.Minute, corev1.FinalizerKubernetes)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); nc.Run(ctx, 2) }()
	inf.Start(ctx.Done())
	if err := waitForSync(ctx, inf.WaitForCacheSync); err != nil {
		cancel()
		wg.Wait()
		inf.Shutdown()
		return nil, fmt.Errorf("namespace controller: %w", err)
	}
	stop = sync.OnceFunc(func() {
		cancel()
		wg.Wait()
		inf.Shutdown()
	})
	cp.OnStop("namespace controller", stop)
	return stop, nil
}

// controllerClients returns a typed and a metadata client on the control
// plane with the given rate limits: controllers of kube-controller-manager
// take both.
func (cp *ControlPlane) controllerClients(qps float32, burst int) (*kubernetes.Clientset, metadata.Interface, error) {
	cfg := rest.CopyConfig(cp.RestConfig)
	cfg.QPS, cfg.Burst = qps, burst
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return cs, md, nil
}
