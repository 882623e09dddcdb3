package gang

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-io/muster/plugins/gang/internal/lifecycle"
)

// cluster is the scheduler as the gang tracker sees it; the tracker calls
// it with its lock held (lifecycle.Cluster).
type cluster struct{ p *Plugin }

func (c cluster) Members(key types.NamespacedName) []*v1.Pod { return c.p.members(key) }
func (c cluster) Activate(pods ...*v1.Pod)                   { c.p.activate(pods...) }
func (c cluster) WaitingPod(uid types.UID) fwk.WaitingPod    { return c.p.h.GetWaitingPod(uid) }
func (c cluster) DeleteNomination(pod *v1.Pod)               { c.p.h.DeleteNominatedPodIfExists(pod) }
func (c cluster) VictimGone(victim *v1.Pod) bool             { return c.p.victimGone(victim) }

var _ lifecycle.Cluster = cluster{}

// forgetMember drops a deleted or finished member from the gang's state
// (lifecycle.Tracker.ForgetMember).
func (p *Plugin) forgetMember(key types.NamespacedName, pod *v1.Pod) {
	// The member a capacity hint queued may be the one gone.
	p.wakeConsumed(key)
	p.gangs.ForgetMember(key, pod.UID)
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
