// Package api is muster's wire contract: the label and annotation keys the
// pod-grouper, the gang plugin and the CLI share, and (in v1alpha1) the Karta
// API types. It imports nothing of muster, so the scheduler plugin can speak
// the contract without linking the definition engine.
package api

// Names on the wire shared by the pod-grouper, the plugin and the CLI
// (shared/DESIGN.md section 4, README "What muster writes"). Change a key
// here, in the design and in the README together.
const (
	// LabelPodGroup on a pod names the scheduler-plugins PodGroup it belongs to.
	LabelPodGroup = "scheduling.x-k8s.io/pod-group"

	// What users write on a workload. A bare Pod is its own workload, so
	// these keys are never the ones muster writes on pods.

	// AnnotationGang on a workload ("off") opts it out of gang scheduling.
	AnnotationGang = "muster.io/gang"
	// AnnotationMinMember on a workload overrides the definition's min-member.
	AnnotationMinMember = "muster.io/min-member"
	// AnnotationTopologyRequired / Preferred on a workload or PodGroup name a
	// node label key whose domain all members share.
	AnnotationTopologyRequired  = "muster.io/topology-required"
	AnnotationTopologyPreferred = "muster.io/topology-preferred"
	GangOff                     = "off"

	// What the pod-grouper writes on pods.

	// AnnotationGrouping on a pod ("none") says the pod-grouper put it in
	// no gang: it is scheduled alone.
	AnnotationGrouping = "muster.io/grouping"
	// AnnotationGroupingReason on a pod says why.
	AnnotationGroupingReason = "muster.io/grouping-reason"
	GroupingNone             = "none"

	// The pod marker of earlier releases, muster.io/gang: none with
	// muster.io/gang-reason, was the key users write on workloads. It is
	// still read on pods (an upgrade meets pods marked that way) and
	// replaced by AnnotationGrouping when the pod-grouper next writes.
	GangNone                   = "none"
	LegacyAnnotationGangReason = "muster.io/gang-reason"

	// PodGroup labels naming where a gang comes from.
	LabelWorkloadKind = "muster.io/workload-kind"
	LabelWorkloadName = "muster.io/workload-name"
	LabelDefinition   = "muster.io/definition"
)

// ScheduledAlone reports whether the pod-grouper marked a pod's annotations
// gang-free, under the current key or the earlier one.
func ScheduledAlone(podAnnotations map[string]string) bool {
	return podAnnotations[AnnotationGrouping] == GroupingNone || podAnnotations[AnnotationGang] == GangNone
}
