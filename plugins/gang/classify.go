package gang

import (
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
)

// classify reads only the pod: it runs in Less and PreEnqueue.
func (p *Plugin) classify(pod *v1.Pod) (podKind, types.NamespacedName) {
	if pod.Spec.SchedulingGroup != nil {
		return kindNative, types.NamespacedName{}
	}
	// The label wins over the marker: a PodGroup someone set is membership.
	if name := pod.Labels[api.LabelPodGroup]; name != "" {
		return kindMember, types.NamespacedName{Namespace: pod.Namespace, Name: name}
	}
	if api.ScheduledAlone(pod.Annotations) || !p.requirePodGrouper {
		return kindFree, types.NamespacedName{}
	}
	return kindUnlabelled, types.NamespacedName{}
}

// live is a pod that still counts for its gang.
func live(pod *v1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed
}
