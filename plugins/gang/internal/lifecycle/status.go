package lifecycle

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// InFlight counts the gang's members being placed: reserved, or in its
// plan.
func (t *Tracker) InFlight(key types.NamespacedName) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	if s, ok := t.gangs[key]; ok {
		n = len(s.reserved)
		if s.plan != nil {
			n += len(s.plan.Assignments)
		}
	}
	return n
}

// QuorumBound records that the quorum of the gang's PodGroup uid is bound,
// which ends any partly bound spell, and reports whether that is the first
// time for this PodGroup (the time-to-bound metric is recorded once).
func (t *Tracker) QuorumBound(key types.NamespacedName, uid types.UID) (first bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.gangLocked(key)
	first = s.quorumObserved != uid
	s.quorumObserved = uid
	s.partialSince = time.Time{}
	return first
}

// NoteElastic records summary as the gang's last GangElastic summary and
// reports whether it changed.
func (t *Tracker) NoteElastic(key types.NamespacedName, summary string) (changed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.gangLocked(key)
	changed = s.lastElastic != summary
	s.lastElastic = summary
	return changed
}

// NotePartial tracks how long the gang has been partly bound. partial is
// what the caller sees in the informer: some members bound (their UIDs are
// bound), fewer than the quorum, others pending. The gang is partly bound
// only if, besides, no bind is in flight: no member reserved and not seen
// bound yet (a bound member keeps its reservation until it goes, so only
// such a reservation may still complete the gang; counting every
// reservation left a gang this instance placed, whose member was then taken
// by another scheduler, partly bound for good). It returns since when the
// gang has been partly bound, and false (forgetting the spell) when it is
// not.
func (t *Tracker) NotePartial(key types.NamespacedName, bound map[types.UID]bool, partial bool, now time.Time) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.gangLocked(key)
	inFlight := 0
	for uid := range s.reserved {
		if !bound[uid] {
			inFlight++
		}
	}
	if !partial || inFlight > 0 {
		s.partialSince = time.Time{}
		return time.Time{}, false
	}
	if s.partialSince.IsZero() {
		s.partialSince = now
	}
	return s.partialSince, true
}

// EvictedPartial ends the gang's partly bound spell: its bound members were
// evicted.
func (t *Tracker) EvictedPartial(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.gangs[key]; ok {
		s.partialSince = time.Time{}
	}
}
