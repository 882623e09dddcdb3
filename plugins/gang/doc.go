// Package gang is the MusterGang scheduler plugin: all-or-nothing scheduling
// of the pods of a scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1),
// with a placement plan for the whole gang computed before any member is
// reserved, a Permit barrier, and clean-up of gangs left partly bound.
//
// Pods with spec.schedulingGroup belong to native Kubernetes PodGroups and are
// left to the in-tree GangScheduling plugin; pods marked gang-free
// (muster.io/grouping=none) are scheduled alone; pods the pod-grouper marked
// waiting, and pods of Volcano or KAI gangs, are refused with their reason.
// See cmd/muster-scheduler/README.md for the configuration and the exact
// all-or-nothing guarantee.
package gang
