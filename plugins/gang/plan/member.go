package plan

import (
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
)

// What the gang plugin and `muster fit` must agree on, in one place: which
// pods count as members, and the words for a gang that cannot be planned yet.

// Live reports whether pod still counts as a gang member: not being deleted
// and not finished.
func Live(pod *v1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed
}

// PodGroupNotFound is the reason given for a member whose PodGroup is gone.
func PodGroupNotFound(gang string) string {
	return fmt.Sprintf("PodGroup %s not found", gang)
}

// WaitingForMembers is the reason given while fewer than minMember members
// exist: a gang is not planned before all of its quorum exists.
func WaitingForMembers(gang string, have, minMember int) string {
	return fmt.Sprintf("waiting for members of gang %s: %d of %d (minMember) exist", gang, have, minMember)
}

// SortPending orders pending members as the scheduler's queue tries the
// members of one gang: by creation, then namespace, then name (the gang
// plugin's Less, past priority and the gang's own time). The planner places
// the members of a shape in the order given, and an Ordered plan holds when
// they are reserved in that order.
func SortPending(pods []*v1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}
