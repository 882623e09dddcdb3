package podgrouper

import (
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/definition"
	"github.com/muster-io/muster/internal/naming"
)

// desiredPodGroup is the PodGroup one gang instance should have. It is a
// pure function of its inputs, so recomputing it from scratch always gives
// the same object.
func desiredPodGroup(name, namespace string, root *unstructured.Unstructured, defName string, gang *definition.Gang, timeout *int32) *schedv1alpha1.PodGroup {
	pg := &schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: namespace,
			Labels: map[string]string{
				api.LabelWorkloadKind: naming.LabelValue(root.GetKind()),
				api.LabelWorkloadName: naming.LabelValue(root.GetName()),
				api.LabelDefinition:   naming.LabelValue(defName),
			},
			// Controller so it is garbage-collected with the workload;
			// blockOwnerDeletion false because nothing waits on a PodGroup
			// before the workload goes, and setting it would need the
			// finalizers permission on every workload kind.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         root.GetAPIVersion(),
				Kind:               root.GetKind(),
				Name:               root.GetName(),
				UID:                root.GetUID(),
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(false),
			}},
		},
		Spec: schedv1alpha1.PodGroupSpec{
			MinMember:              gang.MinMember,
			MinResources:           gang.MinResources.DeepCopy(), // shared with the definition
			ScheduleTimeoutSeconds: timeout,
		},
	}
	if gang.TopologyRequired != "" || gang.TopologyPreferred != "" {
		pg.Annotations = map[string]string{}
		if gang.TopologyRequired != "" {
			pg.Annotations[api.AnnotationTopologyRequired] = gang.TopologyRequired
		}
		if gang.TopologyPreferred != "" {
			pg.Annotations[api.AnnotationTopologyPreferred] = gang.TopologyPreferred
		}
	}
	return pg
}

// mergePodGroup returns a copy of cur with what the pod-grouper owns set as
// in want: the spec, its three labels, the topology and priority
// annotations and its owner reference. Labels, annotations and owner references of others are
// kept; status is never touched. It returns nil when nothing differs.
func mergePodGroup(cur, want *schedv1alpha1.PodGroup) *schedv1alpha1.PodGroup {
	out := cur.DeepCopy()
	out.Spec = want.Spec
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	for k, v := range want.Labels {
		out.Labels[k] = v
	}
	for _, k := range []string{api.AnnotationTopologyRequired, api.AnnotationTopologyPreferred, api.AnnotationPriority, api.AnnotationPriorityClass} {
		if v, ok := want.Annotations[k]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		} else {
			delete(out.Annotations, k)
		}
	}
	// Ours replaces any other controller reference: a PodGroup left by a
	// deleted workload of the same name (not yet collected) belongs to the
	// new one, and an object may have one controller only.
	ours := want.OwnerReferences[0]
	refs := make([]metav1.OwnerReference, 0, len(out.OwnerReferences)+1)
	for _, r := range out.OwnerReferences {
		if r.UID != ours.UID && (r.Controller == nil || !*r.Controller) {
			refs = append(refs, r)
		}
	}
	out.OwnerReferences = append(refs, ours)
	if equality.Semantic.DeepEqual(cur.Spec, out.Spec) &&
		equality.Semantic.DeepEqual(cur.Labels, out.Labels) &&
		equality.Semantic.DeepEqual(nilIfEmpty(cur.Annotations), nilIfEmpty(out.Annotations)) &&
		equality.Semantic.DeepEqual(cur.OwnerReferences, out.OwnerReferences) {
		return nil
	}
	return out
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// isMusterPodGroup tells a PodGroup the pod-grouper made from one made by
// someone else (an operator's own, or a user's).
func isMusterPodGroup(pg *schedv1alpha1.PodGroup) bool {
	_, ok := pg.Labels[api.LabelDefinition]
	return ok
}
