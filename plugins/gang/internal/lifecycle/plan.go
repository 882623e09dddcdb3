package lifecycle

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-io/muster/plugins/gang/plan"
)

// HasPlan reports whether gang key has a placement its members follow.
func (t *Tracker) HasPlan(key types.NamespacedName) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.gangs[key]
	return ok && s.plan != nil
}

// Held lists, per node, the planned but not yet reserved members of every
// gang except skip whose plan has not expired at now: capacity a new plan
// must not hand out again.
func (t *Tracker) Held(skip types.NamespacedName, now time.Time) map[string][]fwk.PodInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.heldLocked(skip, now)
}

// HeldByOthers is Held for every gang but g.
func (g *Gang) HeldByOthers(now time.Time) map[string][]fwk.PodInfo {
	return g.t.heldLocked(g.key, now)
}

// heldLocked is Held. Call with t.mu held.
func (t *Tracker) heldLocked(skip types.NamespacedName, now time.Time) map[string][]fwk.PodInfo {
	out := map[string][]fwk.PodInfo{}
	for key, s := range t.gangs {
		if key == skip || s.plan == nil || now.After(s.planExpires) {
			continue
		}
		for uid, node := range s.plan.Assignments {
			if _, done := s.reserved[uid]; done {
				continue
			}
			if pi, ok := s.planPods[uid]; ok {
				out[node] = append(out[node], pi)
			}
		}
	}
	return out
}

// Verdict returns the gang's cached "no placement" message while it holds:
// before it expires and while no change came since it was made.
func (g *Gang) Verdict(now time.Time) (string, bool) {
	if v := g.s.verdict; v.fresh(now, g.t.seq.Load()) {
		return v.message, true
	}
	return "", false
}

// NoteRefused records that member uid was answered with the gang's verdict.
func (g *Gang) NoteRefused(uid types.UID) {
	if g.s.refused == nil {
		g.s.refused = map[types.UID]bool{}
	}
	g.s.refused[uid] = true
}

// NotRefused returns the members of pending other than uid not answered
// with a verdict since the gang's last plan.
func (g *Gang) NotRefused(pending []*v1.Pod, uid types.UID) []*v1.Pod {
	var out []*v1.Pod
	for _, m := range pending {
		if m.UID != uid && !g.s.refused[m.UID] {
			out = append(out, m)
		}
	}
	return out
}

// LivePlan reports whether the gang has a plan that has not expired at now.
func (g *Gang) LivePlan(now time.Time) bool {
	return g.s.plan != nil && now.Before(g.s.planExpires)
}

// PlannedNode returns member uid's node in the gang's plan, if the plan has
// not expired at now and places it. In an Ordered plan (members whose
// filters see each other: spread, affinity) each member holds only with
// those before it in the plan's order in place, and the scheduler tries
// members in its own order; so the member tried takes the first slot of
// its shape not reserved yet, trading with the member that had it (members
// of a shape are interchangeable). Without that, a member tried early on a
// late slot failed its node's filters and released the gang, again and
// again.
func (g *Gang) PlannedNode(uid types.UID, now time.Time) (string, bool) {
	if !g.LivePlan(now) {
		return "", false
	}
	p := g.s.plan
	if p.Ordered {
		g.takeFirstSlot(p, uid)
	}
	node, ok := p.Assignments[uid]
	return node, ok
}

// takeFirstSlot gives uid the first slot of its shape in p's order that is
// not reserved, trading slots (nodes and places in the order) with its
// holder.
func (g *Gang) takeFirstSlot(p *plan.Plan, uid types.UID) {
	shape, ok := p.Shape[uid]
	if !ok {
		return
	}
	mine := slices.Index(p.Order, uid)
	for i, o := range p.Order {
		if i >= mine {
			return
		}
		if _, done := g.s.reserved[o]; done || p.Shape[o] != shape {
			continue
		}
		p.Assignments[uid], p.Assignments[o] = p.Assignments[o], p.Assignments[uid]
		p.Order[i], p.Order[mine] = uid, o
		return
	}
}

// UnreservedOn returns the pod infos of the members the plan puts on node
// and not reserved yet.
func (g *Gang) UnreservedOn(node string) []fwk.PodInfo {
	if g.s.plan == nil {
		return nil
	}
	var pods []fwk.PodInfo
	for uid, n := range g.s.plan.Assignments {
		if n != node {
			continue
		}
		if _, done := g.s.reserved[uid]; done {
			continue
		}
		if pi, ok := g.s.planPods[uid]; ok {
			pods = append(pods, pi)
		}
	}
	return pods
}

// ReservedNode returns the node member uid is reserved on.
func (g *Gang) ReservedNode(uid types.UID) (string, bool) {
	node, ok := g.s.reserved[uid]
	return node, ok
}

// StorePlan makes p the gang's plan until expires, with the pod infos of
// its planned pending members (what other plans count as held), and
// forgets the gang's verdict, the message last recorded and the members
// refused.
func (g *Gang) StorePlan(p *plan.Plan, pods map[types.UID]fwk.PodInfo, expires time.Time) {
	g.s.verdict, g.s.lastMessage, g.s.refused = nil, "", nil
	g.s.plan, g.s.planExpires, g.s.planPods = p, expires, pods
}

// NoPlacement records that the gang has no placement: its plan goes and
// the members already waiting at Permit, which hold capacity the gang
// cannot use now, are rejected with msg. When that let capacity go, the
// other refused gangs are woken (capacityFreedLocked). msg becomes the
// gang's verdict until until, at the change sequence seq the plan was
// computed at: the verdict stays fresh only if nothing else changed while
// the plan was computed. It reports whether msg differs from the message
// last recorded (the caller records it as an event).
func (g *Gang) NoPlacement(msg string, until time.Time, seq int64) (newMessage bool) {
	s := g.s
	hadPlan := s.plan != nil
	s.plan, s.planPods = nil, nil
	g.t.closeBarrier(s)
	if rejected := g.t.rejectWaitingLocked(g.key, s, msg); rejected > 0 || hadPlan {
		if g.t.capacityFreedLocked(g.key) == seq+1 {
			seq++
		}
	}
	s.verdict = &verdict{message: msg, until: until, seq: seq}
	if s.lastMessage == msg {
		return false
	}
	s.lastMessage = msg
	return true
}

// ForgetVerdict drops the gang's "no placement" verdict and activates its
// pending members, so that one of them plans again (forgetVerdictLocked).
func (g *Gang) ForgetVerdict() { g.t.forgetVerdictLocked(g.key, g.s) }
