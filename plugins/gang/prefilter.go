package gang

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/plugins/gang/internal/lifecycle"
	"github.com/muster-io/muster/plugins/gang/plan"
)

// PreFilter steers a member to the node of its gang's plan, computing the
// plan for the whole gang when there is none (or it went stale). It refuses
// the pods nobody may schedule until someone acts: held by the pod-grouper
// (their gang cannot be computed) or claimed by another gang mechanism.
// Other pods are skipped, which also skips this plugin's other hooks.
//
// A gang without a placement is rejected with UnschedulableAndUnresolvable on
// purpose: Unschedulable would let DefaultPreemption evict pods to make room
// for this one member, while the rest of the gang still would not fit —
// evictions without progress. The pod still gets PodScheduled=False with
// reason Unschedulable (cluster autoscalers key on that), and the gang comes
// back through the queueing hints when nodes or capacity appear.
func (p *Plugin) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if _, err := state.Read(simKey); err == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	// Any pod's cycle, the plugin's simulations aside: see Plugin.leading.
	p.markLeading()
	kind, key := p.classify(pod)
	switch kind {
	case kindMember:
	case kindHeld, kindForeign:
		// No gang: PostFilter reads the empty state as "refused in
		// PreFilter" and keeps preemption away, as for a gang.
		state.Write(stateKey, &cycleState{})
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, refusal(kind, pod))
	default:
		return nil, fwk.NewStatus(fwk.Skip)
	}
	p.wakeConsumed(key)
	pg := p.podGroup(key)
	if pg == nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, plan.PodGroupNotFound(key.String()))
	}
	if reason := p.missingMembers(key, pg); reason != "" {
		// PreEnqueue let a waiting member through to clear its nomination
		// (or the gang lost a member since): no plan, no preemption.
		state.Write(stateKey, &cycleState{gang: key, forming: reason})
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reason)
	}
	// The backlog first: it is almost always below its bound, and asking
	// it costs no second hold of the gang tracker's lock per member.
	if p.backlog.full() && !p.gangs.HasPlan(key) {
		// A new gang waits while too many members are still being bound
		// (backlog.go); members of planned gangs go on and drain it.
		if waited := p.backlog.wait(ctx, p.clock); waited > 0 {
			backlogWaits.Inc()
			backlogWaitSeconds.Add(waited.Seconds())
		}
	}
	node, status := p.planFor(ctx, pod, pg, key)
	state.Write(stateKey, &cycleState{gang: key, node: node})
	if !status.IsSuccess() {
		return nil, status
	}
	return &fwk.PreFilterResult{NodeNames: sets.New(node)}, nil
}

// PreFilterExtensions returns nil: the plugin keeps no per-pod filter state
// that preemption's what-if would have to update.
func (p *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// planFor returns the planned node of pod, computing a plan when needed.
// The gang's state stays locked from the first look to the plan or verdict
// stored: no release, Unreserve or member gone interleaves with a plan
// made from what the other gangs hold.
func (p *Plugin) planFor(ctx context.Context, pod *v1.Pod, pg *schedv1alpha1.PodGroup, key types.NamespacedName) (string, *fwk.Status) {
	now := p.clock.Now()
	g := p.gangs.Lock(key)
	defer g.Unlock()

	if msg, waiting := p.awaitVictims(g, key, now); waiting {
		return "", fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	if msg, ok := g.Verdict(now); ok {
		attempts.WithLabelValues(resultCached).Inc()
		g.NoteRefused(pod.UID)
		return "", fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	if node, ok := g.PlannedNode(pod.UID, now); ok && p.planStillFits(node, g.UnreservedOn(node)) {
		return node, nil
	}

	seq := p.gangs.Seq()
	req, pending, err := p.gangRequest(key, pg, g, pod, now)
	if err != nil {
		return "", fwk.AsStatus(err)
	}
	if msg := p.claimsPending(key, pending); msg != "" {
		// Not a verdict to cache: the member whose claim comes last is
		// let into the queue by the DynamicResources plugin's PreEnqueue
		// at once, maybe before any handler of ours sees the change, and
		// must then plan.
		attempts.WithLabelValues(resultNoPlacement).Inc()
		p.retryForClaims(key)
		return "", fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	started := p.clock.Now()
	result, err := plan.Compute(ctx, req)
	if err == nil {
		result, err = plan.AvoidNominated(ctx, req, result, pod, p.nominatedPods)
	}
	var noPlace *plan.NoPlacementError
	switch {
	case err == nil:
		planDuration.WithLabelValues(resultPlanned).Observe(p.clock.Since(started).Seconds())
	case errors.As(err, &noPlace):
		planDuration.WithLabelValues(resultNoPlacement).Observe(p.clock.Since(started).Seconds())
	}
	if noPlace != nil {
		return "", p.noPlacement(ctx, g, pod, pg, key, pending, noPlace.Message, seq, now)
	}
	if err != nil {
		return "", fwk.AsStatus(err)
	}
	allocated, err := p.devices.AllocateShared(ctx, p.h.ClientSet(), key.String(), pending, p.plannedNodeOf(result))
	if err != nil {
		return "", p.noPlacement(ctx, g, pod, pg, key, pending, fmt.Sprintf("gang %s: %v", key, err), seq, now)
	}
	node, status := p.planned(ctx, g, pod, pg, key, pending, result, now)
	if allocated {
		// This cycle's DynamicResources PreFilter read the shared claims
		// unallocated; the claims' update queues the member again
		// (isSchedulableAfterClaimChange), to its planned node.
		return "", fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s: allocated the claims its members share; trying again with them", key))
	}
	return node, status
}

// plannedNodeOf is the node result gives a member, from the snapshot.
func (p *Plugin) plannedNodeOf(result *plan.Plan) func(*v1.Pod) *v1.Node {
	return func(m *v1.Pod) *v1.Node {
		name, ok := result.Assignments[m.UID]
		if !ok {
			return nil
		}
		ni, err := p.h.SnapshotSharedLister().NodeInfos().Get(name)
		if err != nil {
			return nil
		}
		return ni.Node()
	}
}

// claimsPending says why the gang must wait for its members' claims ("" when
// the scheduler sees them all): a plan made before it sees them leaves
// their devices out. The claims' arrival queues the gang again
// (isSchedulableAfterClaimChange).
func (p *Plugin) claimsPending(key types.NamespacedName, pending []*v1.Pod) string {
	n, first := 0, ""
	for _, m := range pending {
		if msg := p.devices.Pending(m); msg != "" {
			if n == 0 {
				first = msg
			}
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("gang %s: waiting for the ResourceClaims of %d members (made from their pods' ResourceClaimTemplates by the ResourceClaim controller): %s", key, n, first)
}

// claimRetry is how soon a gang waiting for its members' claims is tried
// again. The claims' events do not always come after the wait: the
// scheduler's claim cache follows its informer on a goroutine of its own,
// so a claim can reach it after its Add event was weighed, and the gang
// then slept in the unschedulable pool until the queue's five-minute flush
// (one gang of 500 in scenario 1b with DRA, bound after 331 s).
const claimRetry = time.Second

// retryForClaims queues the gang's unbound members again after claimRetry,
// one timer per gang at a time. The timer takes no lock of the plugin's
// but the scheduling queue's (activate).
func (p *Plugin) retryForClaims(key types.NamespacedName) {
	if _, pending := p.claimRetries.LoadOrStore(key, true); pending {
		return
	}
	time.AfterFunc(claimRetry, func() {
		p.claimRetries.Delete(key)
		var pods []*v1.Pod
		for _, m := range p.members(key) {
			if m.Spec.NodeName == "" {
				pods = append(pods, m)
			}
		}
		p.activate(pods...)
	})
}

// noPlacement is planFor's answer when the gang has no placement: the gang
// takes msg as its verdict (its plan and its members waiting at Permit go,
// lifecycle.Gang.NoPlacement) and its members are shown why. Call with g
// locked.
func (p *Plugin) noPlacement(ctx context.Context, g *lifecycle.Gang, pod *v1.Pod, pg *schedv1alpha1.PodGroup, key types.NamespacedName, pending []*v1.Pod, msg string, seq int64, now time.Time) *fwk.Status {
	attempts.WithLabelValues(resultNoPlacement).Inc()
	// Claims allocated for this gang ahead of its members go back: the
	// next plan may find room where their devices did not reach.
	if err := p.devices.ReleaseShared(ctx, p.h.ClientSet(), key.String(), pending); err != nil {
		klog.FromContext(ctx).Error(err, "Releasing the gang's shared claims", "gang", key)
	}
	if g.NoPlacement(msg, now.Add(p.backoff()), seq) {
		p.recordEvent(pg, v1.EventTypeWarning, "GangUnschedulable", "Scheduling", msg)
	}
	klog.FromContext(ctx).V(3).Info("No placement for gang", "gang", key, "reason", msg)
	p.status.enqueue(key)
	// Every member must show why the gang waits (autoscalers and people
	// read PodScheduled on each pod). Members held back before the last
	// one was labelled sit in the unschedulable pool with nothing to
	// bring them back; activate them so each takes the cached verdict
	// as its condition. Only those not refused yet: a member already
	// refused shows why the gang waits, and the capacity hints queue it
	// again whenever a verdict may change. Activating every member on
	// every fresh verdict fed on itself while capacity churned: each
	// activated member that found the verdict stale planned again and
	// activated the others again (26 000 failed attempts for 1 600
	// pods in scenario 2 with SchedulerAsyncAPICalls, whose
	// asynchronous status patches no longer slowed the loop down).
	g.NoteRefused(pod.UID)
	p.activate(g.NotRefused(pending, pod.UID)...)
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

// planned is planFor's answer once result places the gang: the plan is
// stored and the planned siblings are brought to the active queue. Call
// with g locked.
func (p *Plugin) planned(ctx context.Context, g *lifecycle.Gang, pod *v1.Pod, pg *schedv1alpha1.PodGroup, key types.NamespacedName, pending []*v1.Pod, result *plan.Plan, now time.Time) (string, *fwk.Status) {
	attempts.WithLabelValues(resultPlanned).Inc()
	planPods := map[types.UID]fwk.PodInfo{}
	var siblings []*v1.Pod
	for _, m := range pending {
		// A nomination elsewhere is stale (dropNomination): the
		// framework's filters would count the member there, and it may
		// keep a sibling off the node the plan gives it. The queue's copy
		// only: the status is cleared when the member is refused, or
		// replaced when it is bound.
		if nnn := m.Status.NominatedNodeName; nnn != "" && nnn != result.Assignments[m.UID] {
			p.h.DeleteNominatedPodIfExists(m)
		}
		if _, ok := result.Assignments[m.UID]; ok {
			pi, _ := framework.NewPodInfo(m)
			planPods[m.UID] = pi
			if m.UID != pod.UID {
				siblings = append(siblings, m)
			}
		}
	}
	g.StorePlan(result, planPods, now.Add(p.permitTimeout(pg)+p.backoff()))
	klog.FromContext(ctx).V(3).Info("Planned gang", "gang", key, "members", len(result.Assignments), "domain", result.Domain, "relaxed", result.Relaxed)
	// Siblings rejected earlier sit in the unschedulable pool; bring them
	// to the active queue so the barrier fills quickly.
	p.activate(siblings...)
	p.status.enqueue(key)
	node, ok := result.Assignments[pod.UID]
	if !ok {
		return "", fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s: its quorum is placed without this member; it will be retried", key))
	}
	return node, nil
}

// gangRequest is the plan request for the gang's pending members, pod
// among them: members bound or reserved stay where they are (Placed), and
// what other gangs' plans hold counts as used. Call with g locked.
func (p *Plugin) gangRequest(key types.NamespacedName, pg *schedv1alpha1.PodGroup, g *lifecycle.Gang, pod *v1.Pod, now time.Time) (plan.Request, []*v1.Pod, error) {
	members := p.members(key)
	var pending []*v1.Pod
	var placed []string
	seen := false
	for _, m := range members {
		switch node, reserved := g.ReservedNode(m.UID); {
		case m.Spec.NodeName != "":
			placed = append(placed, m.Spec.NodeName)
		case reserved:
			placed = append(placed, node)
		default:
			pending = append(pending, m)
		}
		seen = seen || m.UID == pod.UID
	}
	if !seen {
		pending = append(pending, pod)
	}
	// The informer's index has no order; the queue's is the one an
	// Ordered plan must follow.
	plan.SortPending(pending)
	nodes, err := p.h.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return plan.Request{}, nil, fmt.Errorf("listing nodes for gang %s: %w", key, err)
	}
	req := plan.Request{
		Gang:      key.String(),
		MinMember: minMember(pg),
		Pending:   pending,
		Placed:    placed,
		Nodes:     nodes,
		Held:      g.HeldByOthers(now),
		Topology:  p.topology(pg),
		Devices:   p.devices.View(),
		Parallelize: func(ctx context.Context, pieces int, fn func(int)) {
			p.h.Parallelizer().Until(ctx, pieces, fn, Name)
		},
	}
	if p.runner != nil {
		req.Filter = p.planFilter()
	}
	return req, pending, nil
}

// planStillFits checks, by resources only, that node still has room for
// pods, the members planned there and not yet reserved; the real filters
// run on the node in this cycle anyway.
func (p *Plugin) planStillFits(node string, pods []fwk.PodInfo) bool {
	ni, err := p.h.SnapshotSharedLister().NodeInfos().Get(node)
	if err != nil || ni.Node() == nil {
		return false
	}
	return plan.FitsResources(ni, pods, p.devices.Lenient())
}

func (p *Plugin) topology(pg *schedv1alpha1.PodGroup) plan.Topology {
	if k := pg.Annotations[*p.args.TopologyRequiredAnnotation]; k != "" {
		return plan.Topology{Key: k, Required: true}
	}
	if k := pg.Annotations[*p.args.TopologyPreferredAnnotation]; k != "" {
		return plan.Topology{Key: k}
	}
	return plan.Topology{}
}

// PostFilter makes room by preemption, for gangs and for pods scheduled
// alone, and releases a gang whose member did not fit its planned node.
//
//   - A gang member whose gang has no placement: whole-gang preemption
//     (preemptForGang), at most once per gang while its victims terminate.
//   - A member that did not fit its planned node (the snapshot changed
//     under the plan): the gang is released as a whole and planned again.
//   - A pod scheduled alone: the same victim search with a gang of one
//     (preemptForPod), so no gang is broken for it.
//   - Pods refused in PreFilter (held, foreign): nothing.
//
// It never answers Unschedulable for these pods, so DefaultPreemption,
// which runs after it in the profile and picks victims pod by pod, is never
// tried for them. Native pods (spec.schedulingGroup) are left to it.
func (p *Plugin) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	kind, key := p.classify(pod)
	switch kind {
	case kindFree:
		return p.preemptForPod(ctx, pod)
	case kindMember:
	case kindNative:
		return nil, fwk.NewStatus(fwk.Unschedulable)
	default:
		// Refused for good until someone acts: hold no room meanwhile.
		return dropNomination(), fwk.NewStatus(fwk.UnschedulableAndUnresolvable)
	}
	cs := readCycleState(state)
	if cs != nil && cs.forming != "" {
		return dropNomination(), fwk.NewStatus(fwk.UnschedulableAndUnresolvable, cs.forming)
	}
	if cs == nil || cs.node == "" {
		res, status := p.preemptForGang(ctx, pod, key)
		if res == nil && !p.gangs.Preempting(key) {
			res = dropNomination()
		}
		return res, status
	}
	msg := fmt.Sprintf("gang %s: member %s no longer fits its planned node %s; re-planning the gang", cs.gang, klog.KObj(pod), cs.node)
	p.release(cs.gang, msg)
	return dropNomination(), fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

// dropNomination clears a refused member's nomination, in the scheduler's
// queue and in the pod's status (the framework writes it with the
// PodScheduled condition it writes anyway). A member is nominated for its
// gang's plan or preemption only; a nomination that outlived them — left
// by a scheduler that died between nominating and binding, or by a plan
// since dropped — would hold room for a pod that does not come: the
// framework's filters count nominated pods on their node while the planner
// plans with the node's pods, so every gang planned there would fail it and
// be planned there again (TestFaultStaleNominations), and a cluster
// autoscaler counts the pod on that node.
func dropNomination() *fwk.PostFilterResult {
	return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride}}
}
