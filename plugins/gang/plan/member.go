package plan

import (
	"fmt"

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
