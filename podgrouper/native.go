package podgrouper

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	schedlisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/definition"
	"github.com/muster-io/muster/internal/naming"
)

// nativeGroupIndex indexes pods by "<namespace>/<spec.schedulingGroup.podGroupName>".
const nativeGroupIndex = "nativeGroup"

// Event reasons of native mode.
const (
	// eventReasonPriorityMixed: members of a native gang differ in
	// priority, which the default scheduler refuses for the whole group.
	eventReasonNativeMixed = "GangPriorityMixed"
	// eventReasonLooserGroup: the workload's pods joined another
	// controller's native PodGroup that asks for less than its gang.
	eventReasonLooserGroup = "GangNotEnforced"
)

// NativeGroupVersion is the native gang API native mode writes.
var NativeGroupVersion = schedv1beta1.SchemeGroupVersion

// nativeState is native mode's cache of native PodGroups and the overlay of
// this process's own writes (the same reason as pgWritten: the members of
// a gang are synced at once, and the first creates the PodGroup).
type nativeState struct {
	client  kubernetes.Interface
	factory informers.SharedInformerFactory
	lister  schedlisters.PodGroupLister
	synced  cache.InformerSynced
	written cache.MutationCache
}

// newNativeState watches native PodGroups with their own factory: the
// pod factory may carry a schedulerName field selector, which every
// informer of a factory would get.
func newNativeState(ctx context.Context, c *Controller) (*nativeState, error) {
	f := informers.NewSharedInformerFactoryWithOptions(c.kube, 0, informers.WithTransform(stripManagedFields))
	inf := f.Scheduling().V1beta1().PodGroups()
	n := &nativeState{client: c.kube, factory: f, lister: inf.Lister(), synced: inf.Informer().HasSynced}
	n.written = newWriteOverlay(cache.NewIntegerResourceVersionMutationCacheWithOptions(klog.FromContext(ctx), inf.Informer().GetStore(), cache.MutationCacheOptions{
		TTL: pgWrittenTTL, IncludeAdds: true, MaxCacheSize: 4096,
	}), inf.Informer().GetStore(), pgWrittenTTL, c.clock)
	seen := func(obj any, deleted bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		pg, ok := obj.(*schedv1beta1.PodGroup)
		if !ok {
			return
		}
		if deleted {
			n.written.OnDelete(pg)
			return
		}
		n.written.OnAddOrUpdate(pg)
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { seen(obj, false) },
		UpdateFunc: func(oldObj, newObj any) {
			seen(newObj, false)
			c.updateNativePodGroup(oldObj, newObj)
		},
		DeleteFunc: func(obj any) {
			seen(obj, true)
			c.deleteNativePodGroup(obj)
		},
	}); err != nil {
		return nil, fmt.Errorf("watching native PodGroups: %w", err)
	}
	return n, nil
}

// cached reads a native PodGroup from the cache overlaid with own writes.
// The object is shared: never modify it.
func (n *nativeState) cached(ns, name string) (*schedv1beta1.PodGroup, error) {
	obj, ok, err := n.written.GetByKey(ns + "/" + name)
	if err != nil {
		return nil, err
	}
	pg, isPG := obj.(*schedv1beta1.PodGroup)
	if !ok || !isPG {
		return nil, apierrors.NewNotFound(schedv1beta1.Resource("podgroups"), name)
	}
	return pg, nil
}

// nativeName is the native PodGroup name of a gang of root.
func nativeName(root *unstructured.Unstructured, entry *Entry, gang *definition.Gang) string {
	return naming.NativePodGroupName(root.GetName(), string(root.GetUID()), entry.Grouper.Definition(), gang.Definition, gang.Keys)
}

// desiredNativePodGroup is the native PodGroup of one gang instance. The
// spec but minCount is immutable, so what is taken from the pod (the
// priority class and preemption policy the scheduler requires every member
// to share) is the first member's: a member that differs is reported
// (noteNativeMixed), never written.
func desiredNativePodGroup(name string, pod *corev1.Pod, root *unstructured.Unstructured, defName string, gang *definition.Gang) *schedv1beta1.PodGroup {
	pg := &schedv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: pod.Namespace,
			Labels: map[string]string{
				api.LabelWorkloadKind: naming.LabelValue(root.GetKind()),
				api.LabelWorkloadName: naming.LabelValue(root.GetName()),
				api.LabelWorkloadUID:  naming.LabelValue(string(root.GetUID())),
				api.LabelDefinition:   naming.LabelValue(defName),
			},
			// Not a controller reference: the workload's own controller
			// (the Job controller under WorkloadWithJob, say) adopts
			// PodGroups it controls. Collected with the workload all the
			// same.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         root.GetAPIVersion(),
				Kind:               root.GetKind(),
				Name:               root.GetName(),
				UID:                root.GetUID(),
				BlockOwnerDeletion: ptr.To(false),
			}},
		},
		Spec: schedv1beta1.PodGroupSpec{
			SchedulingPolicy: schedv1beta1.PodGroupSchedulingPolicy{
				Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: gang.MinMember},
			},
			PriorityClassName: pod.Spec.PriorityClassName,
		},
	}
	if p := pod.Spec.PreemptionPolicy; p != nil {
		pg.Spec.PreemptionPolicy = ptr.To(schedv1beta1.PreemptionPolicy(*p))
	}
	return pg
}

// noteLooserGroup warns on the workload when its pods joined someone else's
// native PodGroup (the Job controller's under WorkloadWithJob, say) that
// asks for less than the gang muster computes: a Basic group, or a smaller
// minCount. The pod's group is immutable and not muster's to replace, so
// the warning is all muster can do; it says where the gang must be asked.
func (c *Controller) noteLooserGroup(pod *corev1.Pod, group string, d *decision) {
	if d.gang == nil || d.gang.MinMember < 2 || group == "" {
		return
	}
	pg, err := c.native.cached(pod.Namespace, group)
	if err != nil || isMusterNativePodGroup(pg) {
		return // not seen yet (the next sync of a member looks again), or ours
	}
	have := "no gang policy"
	if g := pg.Spec.SchedulingPolicy.Gang; g != nil {
		if g.MinCount >= d.gang.MinMember {
			return
		}
		have = fmt.Sprintf("a gang of minCount %d", g.MinCount)
	}
	c.noteWorkload(d.workload, corev1.EventTypeWarning, eventReasonLooserGroup, api.CapReason(fmt.Sprintf(
		"pods join native PodGroup %s, which another controller made with %s, so muster's gang of %d is not enforced; ask that controller for the gang (a Job: spec.scheduling.schedulingPolicy.gang)",
		group, have, d.gang.MinMember)))
}

// isMusterNativePodGroup tells a native PodGroup the pod-grouper made.
func isMusterNativePodGroup(pg *schedv1beta1.PodGroup) bool {
	_, def := pg.Labels[api.LabelDefinition]
	_, uid := pg.Labels[api.LabelWorkloadUID]
	return def && uid
}

// ensureNativePodGroup creates want, or sets minCount and the labels of an
// existing one of muster's (the rest of the spec is immutable). It returns
// a yield message when a PodGroup of that name is not muster's.
func (c *Controller) ensureNativePodGroup(ctx context.Context, want *schedv1beta1.PodGroup) (string, error) {
	defer c.pgLocks.lock("native/" + want.Namespace + "/" + want.Name)()
	client := c.native.client.SchedulingV1beta1().PodGroups(want.Namespace)
	cur, err := c.native.cached(want.Namespace, want.Name)
	if apierrors.IsNotFound(err) {
		created, err := client.Create(ctx, want, metav1.CreateOptions{FieldManager: FieldManager})
		if err == nil {
			c.native.written.Mutation(created)
			klog.FromContext(ctx).V(2).Info("Created native PodGroup", "podGroup", klog.KObj(want), "minCount", want.Spec.SchedulingPolicy.Gang.MinCount)
			return "", nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating native PodGroup %s/%s: %w", want.Namespace, want.Name, err)
		}
		if cur, err = client.Get(ctx, want.Name, metav1.GetOptions{}); err != nil {
			return "", fmt.Errorf("reading native PodGroup %s/%s: %w", want.Namespace, want.Name, err)
		}
	} else if err != nil {
		return "", err
	}
	if !isMusterNativePodGroup(cur) {
		return fmt.Sprintf("native PodGroup %s exists and was not created by muster", want.Name), nil
	}
	first := true
	return "", retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			if cur, err = client.Get(ctx, want.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		first = false
		upd := mergeNativePodGroup(cur, want)
		if upd == nil {
			return nil
		}
		updated, err := client.Update(ctx, upd, metav1.UpdateOptions{FieldManager: FieldManager})
		if err == nil {
			c.native.written.Mutation(updated)
			klog.FromContext(ctx).V(2).Info("Updated native PodGroup", "podGroup", klog.KObj(want), "minCount", want.Spec.SchedulingPolicy.Gang.MinCount)
		}
		return err
	})
}

// mergeNativePodGroup returns a copy of cur with minCount and muster's
// labels as in want, or nil when nothing differs. A PodGroup being deleted
// is left alone: its name belongs to the incarnation that is going.
func mergeNativePodGroup(cur, want *schedv1beta1.PodGroup) *schedv1beta1.PodGroup {
	if cur.DeletionTimestamp != nil {
		return nil
	}
	out := cur.DeepCopy()
	if out.Spec.SchedulingPolicy.Gang == nil {
		// A basic group cannot become a gang (the policy is immutable
		// but for minCount): leave it; the pods wait or run as it says.
		return nil
	}
	out.Spec.SchedulingPolicy.Gang.MinCount = want.Spec.SchedulingPolicy.Gang.MinCount
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	maps.Copy(out.Labels, want.Labels)
	if equality.Semantic.DeepEqual(cur.Spec, out.Spec) && maps.Equal(cur.Labels, out.Labels) {
		return nil
	}
	return out
}

// syncNative reconciles a pod that names a native PodGroup: when the name
// is the one muster computes for the pod's gang, the PodGroup is created
// (the webhook joined the pod; the scheduler holds it until the group
// exists) or its minCount set. Any other name is someone else's gang.
func (c *Controller) syncNative(ctx context.Context, pod *corev1.Pod) error {
	group := ""
	if g := pod.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil {
		group = *g.PodGroupName
	}
	d, err := c.decide(ctx, pod)
	if err != nil {
		return err
	}
	if d.rootUID != "" {
		c.index.set(cache.MetaObjectToName(pod).String(), d.rootUID)
	}
	if d.hold != "" {
		// A gang we cannot compute now (the pod may be ours or not): a
		// PodGroup of ours stays as it is, its minCount too, a missing one
		// is not made, and the pods wait.
		c.noteOnce(pod, corev1.EventTypeWarning, eventReasonGangUnknown, d.hold)
		c.noteWorkload(d.workload, corev1.EventTypeWarning, eventReasonGangUnknown, d.hold)
		return nil
	}
	if d.nativePG == nil || d.nativePG.Name != group {
		c.noteLooserGroup(pod, group, d)
		c.yield(ctx, pod, foreignMarker(pod))
		return nil
	}
	msg, err := c.ensureNativePodGroup(ctx, d.nativePG)
	if err != nil {
		errorsTotal.WithLabelValues(reasonPodGroup).Inc()
		return err
	}
	if msg != "" {
		c.yield(ctx, pod, msg)
		return nil
	}
	c.noteNativeMixed(ctx, pod, d)
	if _, seen := c.labelled.LoadOrStore(pod.UID, struct{}{}); !seen {
		podToPodGroup.Observe(c.clock.Since(pod.CreationTimestamp.Time).Seconds())
	}
	return nil
}

// noteNativeMixed warns, on the workload, when a member's priority or
// preemption policy differs from its PodGroup's: the default scheduler
// refuses the whole group (validatePodGroup) until the pods agree.
func (c *Controller) noteNativeMixed(ctx context.Context, pod *corev1.Pod, d *decision) {
	pg, err := c.native.cached(pod.Namespace, d.nativePG.Name)
	if err != nil {
		return
	}
	if pg.Spec.PriorityClassName == pod.Spec.PriorityClassName &&
		(pg.Spec.Priority == nil || pod.Spec.Priority == nil || *pg.Spec.Priority == *pod.Spec.Priority) {
		return
	}
	note := api.CapReason(fmt.Sprintf("pod %s has priority class %q, its native PodGroup %s %q: the default scheduler places a gang only when every member has the PodGroup's priority; give the pods of %s one priority class",
		pod.Name, pod.Spec.PriorityClassName, pg.Name, pg.Spec.PriorityClassName, d.workload.Name))
	klog.FromContext(ctx).V(2).Info("Native gang member differs in priority", "pod", klog.KObj(pod), "podGroup", pg.Name)
	c.noteWorkload(d.workload, corev1.EventTypeWarning, eventReasonNativeMixed, note)
}

// updateNativePodGroup requeues the members of a muster native PodGroup
// whose minCount or labels someone changed, so they are set back.
func (c *Controller) updateNativePodGroup(oldObj, newObj any) {
	o, ok1 := oldObj.(*schedv1beta1.PodGroup)
	n, ok2 := newObj.(*schedv1beta1.PodGroup)
	if !ok1 || !ok2 || !isMusterNativePodGroup(o) && !isMusterNativePodGroup(n) {
		return
	}
	if equality.Semantic.DeepEqual(o.Spec, n.Spec) && maps.Equal(o.Labels, n.Labels) {
		return
	}
	c.enqueueNativeMembers(n.Namespace, n.Name)
}

// deleteNativePodGroup requeues the members of a deleted native PodGroup:
// pods that still name it wait for it, so it is created again.
func (c *Controller) deleteNativePodGroup(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pg, ok := obj.(*schedv1beta1.PodGroup)
	if !ok || !isMusterNativePodGroup(pg) {
		return
	}
	c.enqueueNativeMembers(pg.Namespace, pg.Name)
}

func (c *Controller) enqueueNativeMembers(ns, name string) {
	pods, err := c.podIndexer.ByIndex(nativeGroupIndex, ns+"/"+name)
	if err != nil {
		return
	}
	for _, p := range pods {
		c.enqueue(p)
	}
}

func indexByNativeGroup(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.SchedulingGroup == nil || pod.Spec.SchedulingGroup.PodGroupName == nil {
		return nil, nil
	}
	return []string{pod.Namespace + "/" + *pod.Spec.SchedulingGroup.PodGroupName}, nil
}
