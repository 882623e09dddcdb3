package podgrouper

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
)

// ours is the pod filter: pods (or tombstones of pods) whose scheduler is one
// of ours. It must not modify obj (cache.FilteringResourceEventHandler).
func (c *Controller) ours(obj any) bool {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	return ok && c.ownScheduler(pod.Spec.SchedulerName)
}

func (c *Controller) enqueue(obj any) {
	m, err := metaAccessor(obj)
	if err != nil {
		return
	}
	c.queue.Add(cache.MetaObjectToName(m).String())
}

func (c *Controller) addPod(obj any) { c.enqueue(obj) }

// updatePod enqueues only when something the grouping reads changed: labels,
// annotations, owners, the native scheduling group. Status updates (binding,
// readiness) are most of the pod updates and change nothing here.
func (c *Controller) updatePod(oldObj, newObj any) {
	o, ok1 := oldObj.(*corev1.Pod)
	n, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return
	}
	same := equality.Semantic.DeepEqual(o.OwnerReferences, n.OwnerReferences) &&
		equality.Semantic.DeepEqual(o.Spec.SchedulingGroup, n.Spec.SchedulingGroup) &&
		(o.DeletionTimestamp == nil) == (n.DeletionTimestamp == nil)
	if same && maps.Equal(o.Labels, n.Labels) && maps.Equal(o.Annotations, n.Annotations) {
		return
	}
	// Our own patch coming back: nothing else changed and the pod now
	// carries exactly what we wrote. Skipping it halves the syncs per pod.
	if same && maps.Equal(withoutOurKeys(o.Labels), withoutOurKeys(n.Labels)) &&
		maps.Equal(withoutOurKeys(o.Annotations), withoutOurKeys(n.Annotations)) {
		if w, ok := c.written.Load(n.UID); ok && w == ourMarks(n) {
			return
		}
	}
	c.enqueue(n)
}

// ourKeys are the pod labels and annotations the pod-grouper writes.
var ourKeys = []string{api.LabelPodGroup, api.AnnotationGrouping, api.AnnotationGroupingReason, api.AnnotationGang, api.LegacyAnnotationGangReason}

func withoutOurKeys(m map[string]string) map[string]string {
	out := maps.Clone(m)
	for _, k := range ourKeys {
		delete(out, k)
	}
	return out
}

// ourMarks is what the pod carries of the keys the pod-grouper writes.
func ourMarks(p *corev1.Pod) string {
	return p.Labels[api.LabelPodGroup] + "\x00" + p.Annotations[api.AnnotationGrouping] + "\x00" + p.Annotations[api.AnnotationGroupingReason] +
		"\x00" + p.Annotations[api.AnnotationGang] + "\x00" + p.Annotations[api.LegacyAnnotationGangReason]
}

// deletePod forgets the pod; nothing is written for a deleted pod (its
// PodGroup goes with the workload).
func (c *Controller) deletePod(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	c.forgetPod(cache.MetaObjectToName(pod).String(), pod.UID)
}

// rootChanged requeues the pods of a workload whose spec or annotations
// changed: a scale change or a min-member override changes min-member
// without any pod event (scale-down, elastic minimum).
func (c *Controller) rootChanged(old, cur *unstructured.Unstructured) {
	if old.GetGeneration() == cur.GetGeneration() && maps.Equal(old.GetAnnotations(), cur.GetAnnotations()) {
		return
	}
	for _, key := range c.index.pods(cur.GetUID()) {
		c.queue.Add(key)
	}
}

// updatePodGroup requeues the members of a muster PodGroup whose spec, labels
// or annotations someone changed, so they are set back. Status updates (the
// scheduler's) are ignored.
func (c *Controller) updatePodGroup(oldObj, newObj any) {
	o, ok1 := oldObj.(*schedv1alpha1.PodGroup)
	n, ok2 := newObj.(*schedv1alpha1.PodGroup)
	if !ok1 || !ok2 || !isMusterPodGroup(o) && !isMusterPodGroup(n) {
		return
	}
	if equality.Semantic.DeepEqual(o.Spec, n.Spec) && maps.Equal(o.Labels, n.Labels) && maps.Equal(o.Annotations, n.Annotations) {
		return
	}
	c.enqueueMembers(n)
}

// deletePodGroup requeues the members of a deleted muster PodGroup: when the
// workload still exists, it is created again.
func (c *Controller) deletePodGroup(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pg, ok := obj.(*schedv1alpha1.PodGroup)
	if !ok || !isMusterPodGroup(pg) {
		return
	}
	c.enqueueMembers(pg)
}

func (c *Controller) enqueueMembers(pg *schedv1alpha1.PodGroup) {
	pods, err := c.podIndexer.ByIndex(podGroupIndex, pg.Namespace+"/"+pg.Name)
	if err != nil {
		return
	}
	for _, p := range pods {
		c.enqueue(p)
	}
}

func indexByPodGroup(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if v := pod.Labels[api.LabelPodGroup]; v != "" {
		return []string{pod.Namespace + "/" + v}, nil
	}
	return nil, nil
}
