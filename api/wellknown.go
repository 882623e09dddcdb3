// Package api is muster's wire contract: the label and annotation keys the
// pod-grouper, the gang plugin and the CLI share, and (in v1alpha1) the Karta
// API types. It imports nothing of muster, so the scheduler plugin can speak
// the contract without linking the definition engine.
package api

import (
	"strconv"
	"strings"
)

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
	// AnnotationAllocatedForGang on a ResourceClaim names the gang
	// ("namespace/name") muster-scheduler allocated the claim for ahead of
	// its members, because they share it: muster takes the allocation
	// back when the gang cannot be placed before any member uses it.
	AnnotationAllocatedForGang = "muster.io/allocated-for-gang"
	// AnnotationGroupingReason on a pod says why, in at most MaxReasonBytes
	// (CapReason).
	AnnotationGroupingReason = "muster.io/grouping-reason"
	GroupingNone             = "none"
	// GroupingWaiting on a pod says muster cannot compute its gang yet (an
	// invalid annotation or definition, named by the reason): the scheduler
	// keeps the pod unscheduled and shows the reason in its PodScheduled
	// condition. Only a pod without a pod-group label gets it.
	GroupingWaiting = "waiting"

	// The pod marker of earlier releases, muster.io/gang: none with
	// muster.io/gang-reason, was the key users write on workloads. It is
	// still read on pods (an upgrade meets pods marked that way) and
	// replaced by AnnotationGrouping when the pod-grouper next writes.
	GangNone                   = "none"
	LegacyAnnotationGangReason = "muster.io/gang-reason"

	// Pod annotations of other gang mechanisms: a pod carrying one belongs
	// to that mechanism's PodGroup, and muster neither groups nor schedules
	// it (ForeignGangOf).
	AnnotationVolcanoGroup = "scheduling.k8s.io/group-name"
	AnnotationKAIGroup     = "pod-group-name"

	// LabelNativeGangs on a namespace ("enabled") opts its pods in to the
	// pod-grouper's admission webhook, which joins each gang member to its
	// native PodGroup at create (spec.schedulingGroup is immutable after).
	LabelNativeGangs = "muster.io/native-gangs"
	// NativeGangsEnabled is LabelNativeGangs' value that opts in.
	NativeGangsEnabled = "enabled"

	// PodGroup labels naming where a gang comes from.
	// LabelWorkloadUID on a native PodGroup (scheduling.k8s.io/v1beta1) is
	// the UID of the workload whose gang it is: a new incarnation of the
	// workload under the same name gets new PodGroups.
	LabelWorkloadUID  = "muster.io/workload-uid"
	LabelWorkloadKind = "muster.io/workload-kind"
	LabelWorkloadName = "muster.io/workload-name"
	LabelDefinition   = "muster.io/definition"

	// AnnotationPriority on a PodGroup is the gang's priority: the highest
	// spec.priority of its members (decimal int32), as the API server's
	// Priority admission resolved it from each pod template's
	// priorityClassName. One value per gang, so the scheduler plugin and
	// the CLI need not look at every member. Absent when no member carries
	// spec.priority (Priority admission off); read it with PodGroupPriority.
	AnnotationPriority = "muster.io/priority"
	// AnnotationPriorityClass on a PodGroup names the PriorityClass of the
	// member that gave AnnotationPriority ("" when that pod named none).
	AnnotationPriorityClass = "muster.io/priority-class"
)

// PodGroupPriority returns the gang priority the pod-grouper recorded in a
// PodGroup's annotations; ok is false when none is recorded or the value is
// not a decimal int32 (someone else wrote it).
func PodGroupPriority(podGroupAnnotations map[string]string) (priority int32, ok bool) {
	v, found := podGroupAnnotations[AnnotationPriority]
	if !found {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}

// ScheduledAlone reports whether the pod-grouper marked a pod's annotations
// gang-free, under the current key or the earlier one. The current key
// wins when set: a pod marked waiting is not alone whatever an earlier
// release left.
func ScheduledAlone(podAnnotations map[string]string) bool {
	if v, ok := podAnnotations[AnnotationGrouping]; ok {
		return v == GroupingNone
	}
	return podAnnotations[AnnotationGang] == GangNone
}

// MaxReasonBytes caps what muster writes as a reason (the grouping-reason
// annotation, event notes): a definition's expression or error can be as
// long as the CRD allows, and every copy is kept in etcd and printed by
// kubectl.
const MaxReasonBytes = 1024

// CapReason cuts s to MaxReasonBytes (see Truncate).
func CapReason(s string) string { return Truncate(s, MaxReasonBytes) }

// Truncate cuts s to at most n bytes of valid UTF-8, marking a cut with "…".
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// ForeignGang is another gang mechanism's claim on a pod.
type ForeignGang struct {
	// Mechanism names it for people: "Volcano", "KAI Scheduler".
	Mechanism string
	// Key and Group are the annotation and its value (the PodGroup).
	Key, Group string
}

// ForeignGangOf returns the other gang mechanism whose annotation the pod
// carries, if any.
func ForeignGangOf(podAnnotations map[string]string) (ForeignGang, bool) {
	for _, f := range []ForeignGang{{Mechanism: "Volcano", Key: AnnotationVolcanoGroup}, {Mechanism: "KAI Scheduler", Key: AnnotationKAIGroup}} {
		if v, ok := podAnnotations[f.Key]; ok {
			f.Group = v
			return f, true
		}
	}
	return ForeignGang{}, false
}
