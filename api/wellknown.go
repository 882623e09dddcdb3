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
	// AnnotationGang on a pod ("none") says it is scheduled alone; on a
	// workload ("off") it opts the workload out of gang scheduling.
	AnnotationGang = "muster.io/gang"
	// AnnotationGangReason on a pod says why it is scheduled alone.
	AnnotationGangReason = "muster.io/gang-reason"
	// AnnotationMinMember on a workload overrides the definition's min-member.
	AnnotationMinMember = "muster.io/min-member"
	// AnnotationTopologyRequired / Preferred on a workload or PodGroup name a
	// node label key whose domain all members share.
	AnnotationTopologyRequired  = "muster.io/topology-required"
	AnnotationTopologyPreferred = "muster.io/topology-preferred"
	// PodGroup labels naming where a gang comes from.
	LabelWorkloadKind = "muster.io/workload-kind"
	LabelWorkloadName = "muster.io/workload-name"
	LabelDefinition   = "muster.io/definition"

	GangNone = "none"
	GangOff  = "off"
)
