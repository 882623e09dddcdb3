package lifecycle

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-io/muster/plugins/gang/plan"
)

// Preemption is a preemption made for a gang whose victims have not all
// gone yet. While it lasts the gang keeps the plan made with the victims
// removed (other gangs' plans count it as held), its members stay
// nominated, and no second preemption is made for it.
type Preemption struct {
	Victims []*v1.Pod
	// Nominated are the members nominated in memory (not the pod whose
	// PostFilter preempted: the framework nominates it through the API).
	Nominated []*v1.Pod
	// Until bounds the wait: victims that outlive their grace period by
	// this much no longer hold the gang back, and it is planned afresh.
	Until time.Time
	// Desc names the victims for messages.
	Desc string
}

// Preempting reports whether gang key waits for the victims of its
// preemption; its members' nominations hold the room being freed.
func (t *Tracker) Preempting(key types.NamespacedName) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.gangs[key]
	return ok && s.preempting != nil
}

// AwaitVictims returns the gang's preemption whose victims still hold room
// and how many of them do (Cluster.VictimGone); the members are then tried
// again after the backoff (Retry). A finished wait (every victim gone, or
// the preemption's Until passed) is forgotten and the members' in-memory
// nominations dropped; the plan stays and steers the members to the room
// made. nil when the gang waits for no victims.
func (g *Gang) AwaitVictims(now time.Time) (*Preemption, int) {
	f := g.s.preempting
	if f == nil {
		return nil, 0
	}
	left := 0
	for _, v := range f.Victims {
		if !g.t.cluster.VictimGone(v) {
			left++
		}
	}
	if left == 0 || now.After(f.Until) {
		g.s.preempting = nil
		for _, m := range f.Nominated {
			g.t.cluster.DeleteNomination(m)
		}
		return nil, 0
	}
	g.Retry()
	return f, left
}

// Retry activates the gang's members after the backoff and a second, once:
// a victim preempted while waiting at Permit goes away without a delete
// event.
func (g *Gang) Retry() { g.t.retryLocked(g.key, g.s, g.t.backoff+time.Second) }

// ReplanLimited reports whether the gang was sent back to planning at once
// (its verdict forgotten) less than a backoff ago, and then makes sure its
// members are tried again when the backoff ends (Retry). Else it records
// that the gang is being sent back now. A plan that the planner makes and a
// member's Filter refuses (a filter that sees what the planner does not) is
// released and the victim search, which plans like the planner, finds it
// fitting again: sent back every time, the gang kept the head of the queue
// and the pods behind it were never tried (TestFaultStaleNominations,
// before nominated pods counted as held).
func (g *Gang) ReplanLimited(now time.Time) bool {
	if now.Before(g.s.replanAfter) {
		g.Retry()
		return true
	}
	g.s.replanAfter = now.Add(g.t.backoff)
	return false
}

// PreemptVerdict returns the gang's cached "preemption would not help"
// message while it holds, as Verdict.
func (g *Gang) PreemptVerdict(now time.Time) (string, bool) {
	if v := g.s.preemptVerdict; v.fresh(now, g.t.seq.Load()) {
		return v.message, true
	}
	return "", false
}

// SetPreemptVerdict caches "preemption would not help" (msg) until until,
// at the change sequence seq the search started at.
func (g *Gang) SetPreemptVerdict(msg string, until time.Time, seq int64) {
	g.s.preemptVerdict = &verdict{message: msg, until: until, seq: seq}
}

// StartPreemption records preemption f with the plan p made without its
// victims (until expires, pods as in StorePlan), and forgets the gang's
// verdicts, the message last recorded and the members refused.
func (g *Gang) StartPreemption(f Preemption, p *plan.Plan, pods map[types.UID]fwk.PodInfo, expires time.Time) {
	g.s.verdict, g.s.preemptVerdict, g.s.lastMessage, g.s.refused = nil, nil, "", nil
	g.s.plan, g.s.planExpires, g.s.planPods = p, expires, pods
	g.s.preempting = &f
}

// PreemptionFailed forgets the gang's preemption after its evictions
// failed, with its in-memory nominations and its plan: the gang searches
// again.
func (t *Tracker) PreemptionFailed(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.gangs[key]; ok && s.preempting != nil {
		for _, m := range s.preempting.Nominated {
			t.cluster.DeleteNomination(m)
		}
		s.preempting, s.plan, s.planPods = nil, nil, nil
	}
}
