package gang

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/muster-io/muster/plugins/gang/plan"
)

// gangState is what the plugin remembers about one gang between cycles.
// Guarded by Plugin.mu.
type gangState struct {
	// plan is the current placement of the pending members, nil when none.
	plan *plan.Plan
	// planPods are the PodInfos of the planned pending members: other gangs'
	// plans count them as held capacity until they are reserved.
	planPods    map[types.UID]fwk.PodInfo
	planExpires time.Time
	// reserved are members this scheduler reserved (assumed) and their node;
	// an entry goes on Unreserve or when the pod is deleted.
	reserved map[types.UID]string
	// verdict is the last "no placement" answer, reused for siblings.
	verdict *verdict
	// refused are the pending members answered with a "no placement"
	// verdict since the gang's last plan: their PodScheduled condition
	// already says why the gang waits, so a fresh verdict need not
	// activate them (see planFor).
	refused map[types.UID]bool
	// lastMessage is the last reason recorded as an event on the PodGroup.
	lastMessage string
	// partialSince is when the gang was first seen partly bound.
	partialSince time.Time
	// quorumObserved: the bound metric was recorded for this PodGroup UID.
	quorumObserved types.UID
	// retry re-activates members after a release's backoff.
	retry *time.Timer
	// barrier is open while members wait at Permit for the quorum.
	barrier *barrier
	// preempting is the gang's preemption whose victims are still going.
	preempting *inflight
	// preemptVerdict caches "preemption would not help" like verdict.
	preemptVerdict *verdict
	// lastElastic is the last GangElastic summary recorded.
	lastElastic string
	// replanAfter is when the victim search may next send the gang back to
	// planning at once (replanLimited).
	replanAfter time.Time
}

// noteRefused records that member uid was answered with the gang's verdict.
func (g *gangState) noteRefused(uid types.UID) {
	if g.refused == nil {
		g.refused = map[types.UID]bool{}
	}
	g.refused[uid] = true
}

// barrier is a gang's wait at Permit: one deadline for all its members.
type barrier struct {
	deadline time.Time
	timer    clock.Timer
}

// verdict is a cached "no placement" result.
type verdict struct {
	message string
	until   time.Time
	seq     int64
}

// gang returns the state of key, creating it. Call with p.mu held.
func (p *Plugin) gang(key types.NamespacedName) *gangState {
	g, ok := p.gangs[key]
	if !ok {
		g = &gangState{reserved: map[types.UID]string{}}
		p.gangs[key] = g
	}
	return g
}

// resized forgets what the plugin concluded from the gang's old PodGroup
// spec (minMember, timeout, topology): its plan and its "no placement"
// verdict, whose message counts the old members and resources. Without
// this a gang scaled down to what fits was refused with the old message
// until the verdict expired, and its members, back in the unschedulable
// pool, kept that message in their condition.
func (p *Plugin) resized(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	g, ok := p.gangs[key]
	if !ok {
		return
	}
	g.verdict = nil
	if g.plan != nil {
		g.plan, g.planPods = nil, nil
		p.capacityFreedLocked(key)
	}
}

// forgetVerdictLocked drops the gang's "no placement" verdict after its
// membership changed (the verdict's message counts the members, and fewer
// or other pending members may fit), and wakes the pending members so that
// one of them plans again and each shows the fresh reason; PreEnqueue holds
// them back if the quorum is gone. A gang without a verdict (forming,
// planned, bound) is left alone, so this costs nothing while gangs form or
// run. Call with p.mu held.
func (p *Plugin) forgetVerdictLocked(key types.NamespacedName, g *gangState) {
	if g.verdict == nil {
		return
	}
	// Every member is activated below and should show the next verdict.
	g.verdict, g.refused = nil, nil
	var pending []*v1.Pod
	for _, m := range p.members(key) {
		if m.Spec.NodeName == "" {
			pending = append(pending, m)
		}
	}
	p.activate(pending...)
}

// capacityFreedLocked records that the plugin let go of capacity it held
// for a gang: a plan dropped (its members no longer count as held in other
// plans) or members waiting at Permit rejected. No informer event says so,
// yet a gang refused for lack of room may fit now. Its cached verdict goes
// stale (changeSeq) and one of its pending members is activated, so that it
// plans again at once instead of after BackoffSeconds; a plan activates the
// planned siblings (planFor). One member per gang, as in capacityHint: the
// members share the verdict, and activating them all cost an attempt, an
// event and a status patch per member of every waiting gang. It returns the
// new sequence number, for the freeing gang's own verdict. Call with p.mu
// held.
func (p *Plugin) capacityFreedLocked(freeing types.NamespacedName) int64 {
	seq := p.changeSeq.Add(1)
	var wake []*v1.Pod
	for key, g := range p.gangs {
		if key == freeing || g.verdict == nil {
			continue
		}
		// The pending member with the first name: the informer's index
		// has no order, and the same member each time keeps wake-ups
		// (and tests) reproducible.
		var pick *v1.Pod
		for _, m := range p.members(key) {
			if _, reserved := g.reserved[m.UID]; m.Spec.NodeName == "" && !reserved && plan.Live(m) && (pick == nil || m.Name < pick.Name) {
				pick = m
			}
		}
		if pick != nil {
			wake = append(wake, pick)
		}
	}
	p.activate(wake...)
	return seq
}

// forgetMember drops a deleted or finished member from the gang's state; a
// planned member going away voids the plan, and any member going away the
// "no placement" verdict.
func (p *Plugin) forgetMember(key types.NamespacedName, pod *v1.Pod) {
	// The member a capacity hint queued may be the one gone.
	p.wakeConsumed(key)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forgetAtPermitLocked(key, pod.UID)
	g, ok := p.gangs[key]
	if !ok {
		return
	}
	delete(g.reserved, pod.UID)
	if g.plan != nil {
		if _, planned := g.plan.Assignments[pod.UID]; planned {
			g.plan, g.planPods = nil, nil
			p.capacityFreedLocked(key)
			// The gang's own pending members counted on that plan: those
			// it left out wait in the unschedulable pool ("its quorum is
			// placed without this member"), and capacityFreedLocked wakes
			// only other gangs. Nothing else brings them back (a Job
			// scaled down while planned lost its extra pods, and the rest
			// waited at Permit for a quorum no attempt would complete).
			// One of them plans again around the members already reserved.
			var pending []*v1.Pod
			for _, m := range p.members(key) {
				if _, reserved := g.reserved[m.UID]; !reserved && m.UID != pod.UID {
					pending = append(pending, m)
				}
			}
			p.activate(pending...)
		}
	}
	p.forgetVerdictLocked(key, g)
}

// held lists, per node, the planned but not yet reserved members of every
// gang except skip: capacity a new plan must not hand out again. Call with
// p.mu held.
func (p *Plugin) held(skip types.NamespacedName, now time.Time) map[string][]fwk.PodInfo {
	out := map[string][]fwk.PodInfo{}
	for key, g := range p.gangs {
		if key == skip || g.plan == nil || now.After(g.planExpires) {
			continue
		}
		for uid, node := range g.plan.Assignments {
			if _, done := g.reserved[uid]; done {
				continue
			}
			if pi, ok := g.planPods[uid]; ok {
				out[node] = append(out[node], pi)
			}
		}
	}
	return out
}

// cycleState carries what PreFilter decided to PostFilter in the same cycle.
type cycleState struct {
	gang types.NamespacedName
	node string // planned node, "" when PreFilter rejected
	// forming is why the gang is not complete yet, when PreFilter refused
	// the member for it (PreEnqueue let it through to clear a nomination).
	forming string
}

// Clone shares the value: it is never changed after Write.
func (s *cycleState) Clone() fwk.StateData { return s }

const stateKey fwk.StateKey = Name + "/plan"

// simKey marks a CycleState built by the plugin to ask the other filters
// about a shape; the plugin's own PreFilter steps aside there.
const simKey fwk.StateKey = Name + "/simulation"

type simMarker struct{}

func (simMarker) Clone() fwk.StateData { return simMarker{} }

func readCycleState(state fwk.CycleState) *cycleState {
	d, err := state.Read(stateKey)
	if err != nil {
		return nil
	}
	s, _ := d.(*cycleState)
	return s
}
