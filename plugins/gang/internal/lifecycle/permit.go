package lifecycle

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"
)

// Reserve records member uid's node: reserved members count toward the
// quorum and keep their place in later plans.
func (t *Tracker) Reserve(key types.NamespacedName, uid types.UID, node string) {
	t.mu.Lock()
	t.gangLocked(key).reserved[uid] = node
	t.mu.Unlock()
}

// Release rejects every waiting member with msg, drops the plan, and backs
// the gang off for the backoff before its members are activated again.
// uids are members known not to bind (the one being unreserved). It reports
// whether there was anything to release (a plan or waiting members).
func (t *Tracker) Release(key types.NamespacedName, msg string, uids ...types.UID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.releaseLocked(key, t.gangLocked(key), msg, uids...)
}

// releaseLocked is Release's state change. Call with t.mu held.
func (t *Tracker) releaseLocked(key types.NamespacedName, s *state, msg string, uids ...types.UID) bool {
	now := t.clock.Now()
	for _, uid := range uids {
		delete(s.reserved, uid)
		t.forgetAtPermitLocked(key, uid)
	}
	hadPlan := s.plan != nil
	s.plan, s.planPods = nil, nil
	t.closeBarrier(s)
	rejected := t.rejectWaitingLocked(key, s, msg)
	seq := t.seq.Load()
	if hadPlan || rejected > 0 {
		// Other gangs may use what this one held; this one backs off.
		seq = t.capacityFreedLocked(key)
	}
	if s.verdict == nil || now.After(s.verdict.until) {
		s.verdict = &verdict{message: msg, until: now.Add(t.backoff), seq: seq}
	}
	t.retryLocked(key, s, t.backoff)
	return rejected > 0 || hadPlan
}

// retryLocked activates the gang's members after d, once: while a retry is
// pending another is not started. Call with t.mu held.
func (t *Tracker) retryLocked(key types.NamespacedName, s *state, d time.Duration) {
	if s.retry != nil {
		return
	}
	s.retry = time.AfterFunc(d, func() {
		t.mu.Lock()
		if s, ok := t.gangs[key]; ok {
			s.retry = nil
		}
		t.mu.Unlock()
		t.cluster.Activate(t.cluster.Members(key)...)
	})
}

// rejectWaitingLocked rejects the gang's members waiting at Permit; the
// framework then unreserves them, which frees their resources. Their
// reservations are forgotten here at once, not when Unreserve runs later in
// their binding goroutines: a Permit counting the quorum in between must not
// count a member that will never bind. Call with t.mu held — Permit counts
// and allows under the same lock, so a barrier is either released whole or
// rejected whole.
func (t *Tracker) rejectWaitingLocked(key types.NamespacedName, s *state, msg string) int {
	n := 0
	for _, wp := range t.waitingLocked(key) {
		uid := wp.GetPod().UID
		t.forgetAtPermitLocked(key, uid)
		// false: the member was already allowed (it binds and keeps its
		// reservation) or already rejected.
		if wp.Reject(t.name, msg) {
			delete(s.reserved, uid)
			n++
		}
	}
	return n
}

// waitingLocked returns the members of gang key waiting at Permit. An entry
// the framework does not hold (yet) stays: Permit records a member just
// before the framework adds it to its waiting pods, and a member that
// leaves otherwise is unreserved or deleted, which forgets it (one allowed
// was forgotten when allowed). Call with t.mu held.
func (t *Tracker) waitingLocked(key types.NamespacedName) []fwk.WaitingPod {
	var out []fwk.WaitingPod
	for uid := range t.atPermit[key] {
		if wp := t.cluster.WaitingPod(uid); wp != nil {
			out = append(out, wp)
		}
	}
	return out
}

// noteAtPermitLocked records that member uid of gang key waits at Permit.
// Call with t.mu held.
func (t *Tracker) noteAtPermitLocked(key types.NamespacedName, uid types.UID) {
	s := t.atPermit[key]
	if s == nil {
		s = sets.New[types.UID]()
		t.atPermit[key] = s
	}
	s.Insert(uid)
}

// forgetAtPermitLocked drops a member that went away. Call with t.mu held.
func (t *Tracker) forgetAtPermitLocked(key types.NamespacedName, uid types.UID) {
	if s := t.atPermit[key]; s != nil {
		s.Delete(uid)
		if s.Len() == 0 {
			delete(t.atPermit, key)
		}
	}
}

// Barrier is a gang's wait at Permit: one deadline for all its members.
type Barrier struct {
	deadline time.Time
	timeout  time.Duration
	timer    clock.Timer
}

// Timeout is the wait the barrier was opened with.
func (b *Barrier) Timeout() time.Duration { return b.timeout }

// Permit is the barrier for member uid, reserved already: below want
// members bound or reserved it opens the gang's barrier (when the first
// member waits) and records the member as waiting at Permit, and it returns
// the gang's deadline and true: every member waits until the same moment,
// however late it arrived. When the barrier opens, expired is set to run
// on a goroutine of its own once timeout has passed (call ExpireBarrier
// from it). At the quorum every waiting member is allowed, under the same
// lock as the count, and Permit returns false.
func (t *Tracker) Permit(key types.NamespacedName, uid types.UID, want int, timeout time.Duration, expired func(types.NamespacedName, *Barrier)) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.gangLocked(key)
	if t.quorumLocked(key, s, uid) < want {
		deadline := t.openBarrierLocked(key, s, timeout, expired)
		t.noteAtPermitLocked(key, uid)
		return deadline, true
	}
	t.allowLocked(key, s)
	return time.Time{}, false
}

// CompleteBarrier lets the members waiting at the gang's open barrier go
// if want members are bound or reserved now: a member that turned up bound
// without passing the barrier (a bind the scheduler saw fail may still
// have been stored) completes the quorum. It reports whether it did.
func (t *Tracker) CompleteBarrier(key types.NamespacedName, want int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.gangs[key]
	if !ok || s.barrier == nil || t.quorumLocked(key, s, "") < want {
		return false
	}
	t.allowLocked(key, s)
	return true
}

// allowLocked lets every waiting member of the gang go together and closes
// its barrier. Call with t.mu held, once the quorum is counted.
func (t *Tracker) allowLocked(key types.NamespacedName, s *state) {
	t.closeBarrier(s)
	s.verdict = nil
	for _, wp := range t.waitingLocked(key) {
		t.forgetAtPermitLocked(key, wp.GetPod().UID)
		wp.Allow(t.name)
	}
}

// openBarrierLocked starts the gang's barrier timer when the first member
// waits and returns the gang's deadline. Call with t.mu held.
func (t *Tracker) openBarrierLocked(key types.NamespacedName, s *state, timeout time.Duration, expired func(types.NamespacedName, *Barrier)) time.Time {
	if s.barrier == nil {
		b := &Barrier{deadline: t.clock.Now().Add(timeout), timeout: timeout}
		// A goroutine of its own: a fake clock runs AfterFunc callbacks
		// while holding its lock, and the expiry reads the clock.
		b.timer = t.clock.AfterFunc(timeout, func() { go expired(key, b) })
		s.barrier = b
	}
	return s.barrier.deadline
}

// closeBarrier stops the barrier timer. Call with t.mu held.
func (t *Tracker) closeBarrier(s *state) {
	if s.barrier != nil {
		s.barrier.timer.Stop()
		s.barrier = nil
	}
}

// ExpireBarrier releases the gang with msg (Release) when its barrier b
// expired, unless b was released or closed meanwhile (then ok is false).
// missing are the gang's pending members that were neither reserved nor
// waiting at Permit: the ones the quorum waited for in vain.
func (t *Tracker) ExpireBarrier(key types.NamespacedName, b *Barrier, msg string) (missing []*v1.Pod, released, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.gangs[key]
	if !ok || s.barrier != b {
		return nil, false, false
	}
	missing = t.missingMembersLocked(key, s)
	return missing, t.releaseLocked(key, s, msg), true
}

// missingMembersLocked returns the gang's pending members that are neither
// reserved nor waiting at Permit. Call with t.mu held.
func (t *Tracker) missingMembersLocked(key types.NamespacedName, s *state) []*v1.Pod {
	var out []*v1.Pod
	for _, m := range t.cluster.Members(key) {
		if _, reserved := s.reserved[m.UID]; reserved || m.Spec.NodeName != "" || t.atPermit[key].Has(m.UID) {
			continue
		}
		out = append(out, m)
	}
	return out
}

// Quorum counts the gang's members that are bound or reserved by this
// scheduler, once each.
func (g *Gang) Quorum() int { return g.t.quorumLocked(g.key, g.s, "") }

// quorumLocked is Quorum; uid (being permitted, or "") counts as reserved.
// Call with t.mu held.
func (t *Tracker) quorumLocked(key types.NamespacedName, s *state, uid types.UID) int {
	counted := map[types.UID]bool{}
	if uid != "" {
		counted[uid] = true
	}
	for uid := range s.reserved {
		counted[uid] = true
	}
	for _, m := range t.cluster.Members(key) {
		if m.Spec.NodeName != "" {
			counted[m.UID] = true
		}
	}
	return len(counted)
}
