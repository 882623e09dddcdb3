package lifecycle

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/muster-io/muster/plugins/gang/plan"
)

// Resized forgets what was concluded from the gang's old PodGroup spec
// (minMember, timeout, topology): its plan and its "no placement" verdict,
// whose message counts the old members and resources. Without this a gang
// scaled down to what fits was refused with the old message until the
// verdict expired, and its members, back in the unschedulable pool, kept
// that message in their condition.
func (t *Tracker) Resized(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.gangs[key]
	if !ok {
		return
	}
	s.verdict = nil
	if s.plan != nil {
		s.plan, s.planPods = nil, nil
		t.capacityFreedLocked(key)
	}
}

// MemberJoined forgets the verdict of a gang that gained a member: the
// refusal counted the members it had (forgetVerdictLocked).
func (t *Tracker) MemberJoined(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.gangs[key]; ok {
		t.forgetVerdictLocked(key, s)
	}
}

// ForgetMember drops a deleted or finished member from the gang's state; a
// planned member going away voids the plan, and any member going away the
// "no placement" verdict.
func (t *Tracker) ForgetMember(key types.NamespacedName, uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forgetAtPermitLocked(key, uid)
	s, ok := t.gangs[key]
	if !ok {
		return
	}
	delete(s.reserved, uid)
	if s.plan != nil {
		if _, planned := s.plan.Assignments[uid]; planned {
			s.plan, s.planPods = nil, nil
			t.capacityFreedLocked(key)
			// The gang's own pending members counted on that plan: those
			// it left out wait in the unschedulable pool ("its quorum is
			// placed without this member"), and capacityFreedLocked wakes
			// only other gangs. Nothing else brings them back (a Job
			// scaled down while planned lost its extra pods, and the rest
			// waited at Permit for a quorum no attempt would complete).
			// One of them plans again around the members already reserved.
			var pending []*v1.Pod
			for _, m := range t.cluster.Members(key) {
				if _, reserved := s.reserved[m.UID]; !reserved && m.UID != uid {
					pending = append(pending, m)
				}
			}
			t.cluster.Activate(pending...)
		}
	}
	t.forgetVerdictLocked(key, s)
}

// forgetVerdictLocked drops the gang's "no placement" verdict after its
// membership changed (the verdict's message counts the members, and fewer
// or other pending members may fit), and wakes the pending members so that
// one of them plans again and each shows the fresh reason; PreEnqueue holds
// them back if the quorum is gone. A gang without a verdict (forming,
// planned, bound) is left alone, so this costs nothing while gangs form or
// run. Call with t.mu held.
func (t *Tracker) forgetVerdictLocked(key types.NamespacedName, s *state) {
	if s.verdict == nil {
		return
	}
	// Every member is activated below and should show the next verdict.
	s.verdict, s.refused = nil, nil
	var pending []*v1.Pod
	for _, m := range t.cluster.Members(key) {
		if m.Spec.NodeName == "" {
			pending = append(pending, m)
		}
	}
	t.cluster.Activate(pending...)
}

// capacityFreedLocked records that the tracker let go of capacity it held
// for a gang: a plan dropped (its members no longer count as held in other
// plans) or members waiting at Permit rejected. No informer event says so,
// yet a gang refused for lack of room may fit now. Its cached verdict goes
// stale (seq) and one of its pending members is activated, so that it
// plans again at once instead of after the backoff; a plan activates the
// planned siblings (the plugin's planFor). One member per gang, as in the
// plugin's capacity hint: the members share the verdict, and activating
// them all cost an attempt, an event and a status patch per member of every
// waiting gang. It returns the new sequence number, for the freeing gang's
// own verdict. Call with t.mu held.
func (t *Tracker) capacityFreedLocked(freeing types.NamespacedName) int64 {
	seq := t.seq.Add(1)
	var wake []*v1.Pod
	for key, s := range t.gangs {
		if key == freeing || s.verdict == nil {
			continue
		}
		// The pending member with the first name: the informer's index
		// has no order, and the same member each time keeps wake-ups
		// (and tests) reproducible.
		var pick *v1.Pod
		for _, m := range t.cluster.Members(key) {
			if _, reserved := s.reserved[m.UID]; m.Spec.NodeName == "" && !reserved && plan.Live(m) && (pick == nil || m.Name < pick.Name) {
				pick = m
			}
		}
		if pick != nil {
			wake = append(wake, pick)
		}
	}
	t.cluster.Activate(wake...)
	return seq
}
