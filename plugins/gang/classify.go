package gang

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/muster-io/muster/api"
)

// podKind says which mechanism a pod belongs to.
type podKind int

const (
	// kindNative: spec.schedulingGroup is set; the in-tree plugin owns it.
	kindNative podKind = iota
	// kindFree: scheduled alone (gang-free marker, or no pod-grouper needed).
	kindFree
	// kindMember: labelled with a PodGroup.
	kindMember
	// kindUnlabelled: waits for the pod-grouper to decide.
	kindUnlabelled
	// kindHeld: the pod-grouper marked it waiting: its gang cannot be
	// computed, and the marker's reason says why. Refused in PreFilter.
	kindHeld
	// kindForeign: another gang mechanism's annotation (Volcano, KAI)
	// claims it. Refused in PreFilter.
	kindForeign
)

// classify reads only the pod: it runs in Less and PreEnqueue.
func (p *Plugin) classify(pod *v1.Pod) (podKind, types.NamespacedName) {
	if pod.Spec.SchedulingGroup != nil {
		return kindNative, types.NamespacedName{}
	}
	// The label wins over the markers: a PodGroup someone set is membership.
	if name := pod.Labels[api.LabelPodGroup]; name != "" {
		return kindMember, types.NamespacedName{Namespace: pod.Namespace, Name: name}
	}
	// Before the gang-free marker: placing one member of another
	// mechanism's gang alone would break that gang, whatever muster wrote
	// before the annotation came.
	if _, ok := api.ForeignGangOf(pod.Annotations); ok {
		return kindForeign, types.NamespacedName{}
	}
	if pod.Annotations[api.AnnotationGrouping] == api.GroupingWaiting {
		return kindHeld, types.NamespacedName{}
	}
	if api.ScheduledAlone(pod.Annotations) || !p.requirePodGrouper {
		return kindFree, types.NamespacedName{}
	}
	return kindUnlabelled, types.NamespacedName{}
}

// refusal is why a pod of kind is not scheduled at all, for the kinds
// PreFilter refuses (kindHeld, kindForeign); "" for the others. It reads
// only the pod, so the queueing hint can compare an update's two sides.
func refusal(kind podKind, pod *v1.Pod) string {
	switch kind {
	case kindHeld:
		why := pod.Annotations[api.AnnotationGroupingReason]
		if why == "" {
			why = "no reason given"
		}
		// The annotation is any size a writer chose; the condition and
		// the event are not.
		return api.CapReason("muster cannot compute the pod's gang: " + why)
	case kindForeign:
		f, _ := api.ForeignGangOf(pod.Annotations)
		return api.CapReason(fmt.Sprintf("pod belongs to a %s PodGroup (annotation %s=%s): %s does not schedule %s's gangs; "+
			"set schedulerName to %s's scheduler, or remove the annotation so muster groups the pod",
			f.Mechanism, f.Key, f.Group, pod.Spec.SchedulerName, f.Mechanism, f.Mechanism))
	}
	return ""
}
