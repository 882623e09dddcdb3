// Package gang is the MusterGang scheduler plugin: all-or-nothing scheduling
// of the pods of a scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1),
// with a placement plan for the whole gang computed before any member is
// reserved, a Permit barrier, whole-gang preemption, and clean-up of gangs
// left partly bound.
//
// Pods with spec.schedulingGroup belong to native Kubernetes PodGroups and are
// left to the in-tree GangScheduling plugin; pods marked gang-free
// (muster.io/grouping=none) are scheduled alone; pods the pod-grouper marked
// waiting, and pods of Volcano or KAI gangs, are refused with their reason.
// See cmd/muster-scheduler/README.md for the configuration and the exact
// all-or-nothing guarantee.
//
// # Elastic gangs
//
// A gang whose minMember is below its pod count is placed quorum first, all
// or nothing; the members above the quorum (extras) are placed one by one as
// room exists, never by preemption. The PodGroup status has no field for
// the split, so a GangElastic event on the PodGroup says "quorum q/min
// bound, extras e/n bound" whenever it changes.
//
// # Preemption
//
// PostFilter answers every gang member and every gang-free pod of the
// profile, so DefaultPreemption (next in the profile, victims pod by pod)
// runs only for native pods. When a gang has no placement, or a gang-free
// pod does not fit, the victim search (package victims) looks for lower-priority
// work whose eviction lets the preemptor's quorum fit by the same plan:
//
//   - victims come in whole units: every bound pod of a gang cluster-wide (a
//     muster PodGroup, a native PodGroup, a Volcano or KAI gang), a pod that
//     belongs to no gang, or one extra of an elastic muster gang (taking it
//     leaves the gang whole);
//   - only units whose every pod has a strictly lower priority than the
//     preemptor (a gang's priority is its highest member's);
//     preemptionPolicy Never on any member means no preemption;
//   - cheapest first: no PodDisruptionBudget violated, then no gang broken
//     (extras, then lone pods), then lower priority, then fewer pods, then
//     fewer GPUs, then younger;
//   - the shortest cheapest-first prefix that lets the plan fit is found by
//     galloping from a resource lower bound and bisection, then each unit is
//     given back, most expensive first, if the plan still fits without it:
//     the set is minimal, and nothing is evicted for a gang that would not
//     fit even with every eligible victim gone (the reason says so).
//
// Victims are evicted with DefaultPreemption's executor (DisruptionTarget
// condition, graceful delete, a Preempted event naming the preemptor); each
// muster victim gang gets a Preempted event on its PodGroup. While victims
// terminate the preemptor keeps the plan made without them (other gangs'
// plans count it as held), its members are nominated, and it does not
// preempt again. Outside that wait a member holds no nomination: one it
// carries (a scheduler that died before binding leaves them in the pod's
// status) is cleared the first time it is refused, a member waiting for
// its gang to form is let through PreEnqueue once for that, and a fresh
// plan drops the scheduler's copy of any member's nomination elsewhere.
// Other pods' nominations of the gang's priority or more count as used
// room, in plans (avoidNominated) and in the victim search, as the
// framework's filters count them: the gang waits for them to bind or go.
// A refused gang that the victim search finds fitting without preemption
// is sent back to planning at once at most once per backoff
// (replanLimited): when a filter the planner does not see refuses its plan,
// the loop would otherwise keep the gang at the head of the queue.
package gang
