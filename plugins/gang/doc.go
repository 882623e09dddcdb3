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
// room, in plans (plan.AvoidNominated) and in the victim search, as the
// framework's filters count them: the gang waits for them to bind or go.
// A refused gang that the victim search finds fitting without preemption
// is sent back to planning at once at most once per backoff
// (lifecycle.Gang.ReplanLimited): when a filter the planner does not see
// refuses its plan, the loop would otherwise keep the gang at the head of
// the queue.
//
// # Locks
//
// The plugin's locks, outermost first. A goroutine holding one may take
// those below it, never one above it; the leaves of 4 are never held
// together.
//
//  1. The gang tracker's (lifecycle.Tracker: plans, verdicts, reservations,
//     barriers, preemptions, members at Permit). It is held across a whole
//     decision: PreFilter's plan from the first look at the gang to the
//     plan or verdict stored (no release, Unreserve or member gone comes in
//     between, and no other gang plans with the capacity it holds), and
//     PostFilter's victim search to the preemption recorded. Permit counts
//     the quorum and allows the waiting members under it, and every
//     rejection (Unreserve, a member that no longer fits, no placement, the
//     barrier's timeout) rejects under it, so a barrier is released whole or
//     rejected whole. Under it the plugin and the tracker call the
//     framework: Activate, AddNominatedPod and NominatedPodsForNode (which
//     take 2), DeleteNominatedPodIfExists (the nominator's lock, below 2),
//     the waiting pods' Allow and Reject (their own locks), the profile's
//     PreFilter and Filter plugins while planning (their locks; this
//     plugin's PreFilter, run there for a shape, steps aside before taking
//     any), the informers' listers, the status writer's queue, the event
//     recorder and the clock's timers (leaves).
//  2. The scheduling queue's (kube-scheduler's PriorityQueue lock, with the
//     active queue's and the nominator's below it). The queue holds it while
//     it calls PreEnqueue, Less and the queueing hints, so none of them may
//     take 1: they decide from the pod, the informers, the atomic change
//     counter (Tracker.Changed) and 3 and 4.
//  3. waitMu (the pods PreEnqueue holds back), taken by PreEnqueue and the
//     capacity hints under 2. Under it only the clock's timers are started
//     and stopped.
//  4. Leaves, under which no lock of the plugin's is taken: wokenMu (taken
//     by the capacity hints under 2); createdMu (Less, under 2); a plan's
//     filter's (planfilter.Filter, under 1 while planning); the status writer's
//     (when each PodGroup was last written; its sync takes 1 for a moment,
//     never while holding it); the bind backlog's (never with another:
//     PreFilter waits for the backlog before taking 1, holding nothing).
//
// A clock callback never takes 1 or 3: a fake clock runs AfterFunc
// callbacks under its own lock, which is taken under 1 and 3 to start
// timers. The barrier's timer starts its expiry on a goroutine of its own,
// and the wait-event timer only hands the wait to the event writer's
// queue. The retry timers (time.AfterFunc) take 1 directly.
package gang
