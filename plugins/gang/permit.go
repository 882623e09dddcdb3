package gang

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/plugins/gang/plan"
)

// Reserve records the member's node: reserved members count toward the
// quorum and keep their place in later plans.
func (p *Plugin) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	kind, key := p.classify(pod)
	if kind != kindMember {
		return nil
	}
	p.markLeading()
	p.mu.Lock()
	p.gang(key).reserved[pod.UID] = nodeName
	p.mu.Unlock()
	p.backlog.add(pod.UID)
	return nil
}

// Unreserve releases the whole gang: a member that will not be bound means
// the others must not wait for it. Idempotent, and safe without Reserve.
func (p *Plugin) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	kind, key := p.classify(pod)
	if kind != kindMember {
		return
	}
	p.backlog.done(pod.UID)
	p.release(key, fmt.Sprintf("gang %s: member %s was not bound; releasing the gang", key, klog.KObj(pod)), pod.UID)
}

// release rejects every waiting member, drops the plan, and backs the gang
// off for BackoffSeconds before its members are activated again. uids are
// members known not to bind (the one being unreserved).
func (p *Plugin) release(key types.NamespacedName, msg string, uids ...types.UID) {
	p.mu.Lock()
	released := p.releaseLocked(key, p.gang(key), msg, uids...)
	p.mu.Unlock()
	p.afterRelease(key, msg, released)
}

// releaseLocked is release's state change; it reports whether there was
// anything to release (a plan or waiting members). Call with p.mu held.
func (p *Plugin) releaseLocked(key types.NamespacedName, g *gangState, msg string, uids ...types.UID) bool {
	now := p.clock.Now()
	for _, uid := range uids {
		delete(g.reserved, uid)
		p.forgetAtPermitLocked(key, uid)
	}
	hadPlan := g.plan != nil
	g.plan, g.planPods = nil, nil
	p.closeBarrier(g)
	rejected := p.rejectWaitingLocked(key, g, msg)
	seq := p.changeSeq.Load()
	if hadPlan || rejected > 0 {
		// Other gangs may use what this one held; this one backs off.
		seq = p.capacityFreedLocked(key)
	}
	if g.verdict == nil || now.After(g.verdict.until) {
		g.verdict = &verdict{message: msg, until: now.Add(p.backoff()), seq: seq}
	}
	if g.retry == nil {
		g.retry = time.AfterFunc(p.backoff(), func() {
			p.mu.Lock()
			if g, ok := p.gangs[key]; ok {
				g.retry = nil
			}
			p.mu.Unlock()
			p.activate(p.members(key)...)
		})
	}
	return rejected > 0 || hadPlan
}

// afterRelease records what a release did; it makes API calls, so it runs
// without p.mu.
func (p *Plugin) afterRelease(key types.NamespacedName, msg string, released bool) {
	if released {
		attempts.WithLabelValues(resultReleased).Inc()
		if pg := p.podGroup(key); pg != nil {
			p.recordEvent(pg, v1.EventTypeWarning, "GangReleased", "Scheduling", msg)
		}
	}
	p.status.enqueue(key)
}

// rejectWaitingLocked rejects the gang's members waiting at Permit; the
// framework then unreserves them, which frees their resources. Their
// reservations are forgotten here at once, not when Unreserve runs later in
// their binding goroutines: a Permit counting the quorum in between must not
// count a member that will never bind. Call with p.mu held — Permit counts
// and allows under the same lock, so a barrier is either released whole or
// rejected whole.
func (p *Plugin) rejectWaitingLocked(key types.NamespacedName, g *gangState, msg string) int {
	n := 0
	for _, wp := range p.waitingLocked(key) {
		uid := wp.GetPod().UID
		p.forgetAtPermitLocked(key, uid)
		// false: the member was already allowed (it binds and keeps its
		// reservation) or already rejected.
		if wp.Reject(Name, msg) {
			delete(g.reserved, uid)
			n++
		}
	}
	return n
}

// waitingLocked returns the members of gang key waiting at Permit. An entry
// the framework does not hold (yet) stays: Permit records a member just
// before the framework adds it to its waiting pods, and a member that
// leaves otherwise is unreserved or deleted, which forgets it (one allowed
// was forgotten when allowed). Call with p.mu held.
func (p *Plugin) waitingLocked(key types.NamespacedName) []fwk.WaitingPod {
	var out []fwk.WaitingPod
	for uid := range p.atPermit[key] {
		if wp := p.h.GetWaitingPod(uid); wp != nil {
			out = append(out, wp)
		}
	}
	return out
}

// noteAtPermitLocked records that member uid of gang key waits at Permit.
// Call with p.mu held.
func (p *Plugin) noteAtPermitLocked(key types.NamespacedName, uid types.UID) {
	s := p.atPermit[key]
	if s == nil {
		s = sets.New[types.UID]()
		p.atPermit[key] = s
	}
	s.Insert(uid)
}

// forgetAtPermitLocked drops a member that went away. Call with p.mu held.
func (p *Plugin) forgetAtPermitLocked(key types.NamespacedName, uid types.UID) {
	if s := p.atPermit[key]; s != nil {
		s.Delete(uid)
		if s.Len() == 0 {
			delete(p.atPermit, key)
		}
	}
}

// permitBackstop is added to the wait the framework is given: the plugin's
// own barrier timer (under p.mu) rejects the gang first, so the decision to
// allow and the decision to time out can never interleave. The framework's
// timer only fires if a member somehow escaped the plugin's timer.
const permitBackstop = 30 * time.Second

// Permit is the barrier: a member waits until minMember members are reserved
// or bound, then every waiting member is allowed together. The count and the
// Allow calls happen under p.mu, the lock every rejection path holds too, so
// a barrier either lets the whole quorum go or none of it.
func (p *Plugin) Permit(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) (*fwk.Status, time.Duration) {
	kind, key := p.classify(pod)
	if kind != kindMember {
		return nil, 0
	}
	pg := p.podGroup(key)
	if pg == nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, plan.PodGroupNotFound(key.String())), 0
	}
	want := minMember(pg)
	p.mu.Lock()
	g := p.gang(key)
	if p.quorumLocked(key, g, pod) < want {
		deadline := p.openBarrier(key, g, p.permitTimeout(pg))
		p.noteAtPermitLocked(key, pod.UID)
		p.mu.Unlock()
		return fwk.NewStatus(fwk.Wait, fmt.Sprintf("waiting for %d members of gang %s", want, key)), deadline.Sub(p.clock.Now()) + permitBackstop
	}
	p.allowLocked(key, g)
	p.mu.Unlock()
	p.afterAllow(pg, key, want)
	return nil, 0
}

// allowLocked lets every waiting member of the gang go together and closes
// its barrier. Call with p.mu held, once the quorum is counted.
func (p *Plugin) allowLocked(key types.NamespacedName, g *gangState) {
	p.closeBarrier(g)
	g.verdict = nil
	for _, wp := range p.waitingLocked(key) {
		p.forgetAtPermitLocked(key, wp.GetPod().UID)
		wp.Allow(Name)
	}
}

func (p *Plugin) afterAllow(pg *schedv1alpha1.PodGroup, key types.NamespacedName, want int) {
	attempts.WithLabelValues(resultPermitted).Inc()
	p.recordEvent(pg, v1.EventTypeNormal, "GangScheduled", "Scheduling", fmt.Sprintf("gang %s: %d members placed together", key, want))
	p.status.enqueue(key)
}

// boundOutsideBarrier completes an open barrier when a member turns up
// bound without passing it: a bind the scheduler saw fail (the connection
// dropped) may still have been stored, and the members waiting at the
// barrier would otherwise wait for the quorum until it times out — with
// the gang partly bound all that time, and not evictable while reserved.
func (p *Plugin) boundOutsideBarrier(key types.NamespacedName) {
	pg := p.podGroup(key)
	if pg == nil {
		return
	}
	want := minMember(pg)
	p.mu.Lock()
	g, ok := p.gangs[key]
	if !ok || g.barrier == nil || p.quorumLocked(key, g, nil) < want {
		p.mu.Unlock()
		return
	}
	p.allowLocked(key, g)
	p.mu.Unlock()
	p.afterAllow(pg, key, want)
}

// openBarrier starts the gang's barrier timer when the first member waits
// and returns the gang's deadline: every member waits until the same moment,
// however late it arrived. Call with p.mu held.
func (p *Plugin) openBarrier(key types.NamespacedName, g *gangState, timeout time.Duration) time.Time {
	if g.barrier == nil {
		b := &barrier{deadline: p.clock.Now().Add(timeout)}
		// A goroutine of its own: a fake clock runs AfterFunc callbacks
		// while holding its lock, and barrierExpired reads the clock.
		b.timer = p.clock.AfterFunc(timeout, func() { go p.barrierExpired(key, b, timeout) })
		g.barrier = b
	}
	return g.barrier.deadline
}

// closeBarrier stops the barrier timer. Call with p.mu held.
func (p *Plugin) closeBarrier(g *gangState) {
	if g.barrier != nil {
		g.barrier.timer.Stop()
		g.barrier = nil
	}
}

// barrierExpired rejects the waiting members of a gang whose quorum did not
// form in time, unless that barrier was released or closed meanwhile.
func (p *Plugin) barrierExpired(key types.NamespacedName, b *barrier, timeout time.Duration) {
	msg := fmt.Sprintf("gang %s: quorum not reached within %s; releasing the waiting members", key, timeout)
	p.mu.Lock()
	g, ok := p.gangs[key]
	if !ok || g.barrier != b {
		p.mu.Unlock()
		return
	}
	missing := p.missingMembersLocked(key, g)
	released := p.releaseLocked(key, g, msg)
	p.mu.Unlock()
	p.afterRelease(key, msg, released)
	p.reportMissing(key, missing)
}

// missingMembersLocked returns the gang's pending members that are neither
// reserved nor waiting at Permit: the ones a quorum waited for in vain.
// Call with p.mu held.
func (p *Plugin) missingMembersLocked(key types.NamespacedName, g *gangState) []*v1.Pod {
	var out []*v1.Pod
	for _, m := range p.members(key) {
		if _, reserved := g.reserved[m.UID]; reserved || m.Spec.NodeName != "" || p.atPermit[key].Has(m.UID) {
			continue
		}
		out = append(out, m)
	}
	return out
}

// maxMissingNamed bounds the members a missing-members report names.
const maxMissingNamed = 3

// reportMissing says, in the log and as a PodGroup event, which members a
// released barrier waited for and where they were: held before the
// scheduling queue (with the reason PreEnqueue gave) or in the queue and
// not tried in time. A member held for a reason its cached pod no longer
// has is a wake-up that never came; the log names it so.
func (p *Plugin) reportMissing(key types.NamespacedName, missing []*v1.Pod) {
	if len(missing) == 0 {
		return
	}
	slices.SortFunc(missing, func(a, b *v1.Pod) int { return strings.Compare(a.Name, b.Name) })
	ready := p.gangReadiness(key) == ""
	var parts []string
	for i, m := range missing {
		if i == maxMissingNamed {
			parts = append(parts, fmt.Sprintf("and %d more", len(missing)-i))
			break
		}
		p.waitMu.Lock()
		w := p.waiting[m.UID]
		var reason, heldRV string
		if w != nil {
			reason, heldRV = w.reason, w.pod.ResourceVersion
		}
		p.waitMu.Unlock()
		if reason == "" {
			parts = append(parts, m.Name+" (in the scheduling queue)")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s (held before the queue: %s)", m.Name, api.CapReason(reason)))
		if ready {
			p.logger.Info("A gang member is held before the scheduling queue for a reason that no longer holds", "pod", klog.KObj(m), "gang", key, "reason", reason,
				"heldResourceVersion", heldRV, "cachedResourceVersion", m.ResourceVersion)
		}
	}
	msg := fmt.Sprintf("gang %s: %d member(s) neither reserved nor waiting when the barrier expired: %s", key, len(missing), strings.Join(parts, ", "))
	p.logger.Info("Gang barrier expired with members missing", "gang", key, "missing", len(missing), "detail", msg)
	if pg := p.podGroup(key); pg != nil {
		p.recordEvent(pg, v1.EventTypeWarning, "GangMembersMissing", "Scheduling", msg)
	}
}

// quorumLocked counts members that are bound or reserved by this scheduler, once
// each; pod (being permitted, or nil) is reserved already.
// Call with p.mu held.
func (p *Plugin) quorumLocked(key types.NamespacedName, g *gangState, pod *v1.Pod) int {
	counted := map[types.UID]bool{}
	if pod != nil {
		counted[pod.UID] = true
	}
	for uid := range g.reserved {
		counted[uid] = true
	}
	for _, m := range p.members(key) {
		if m.Spec.NodeName != "" {
			counted[m.UID] = true
		}
	}
	return len(counted)
}

// PostBind refreshes the PodGroup status. The reservation stays until the
// pod goes away; a bound member is counted once either way.
func (p *Plugin) PostBind(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	kind, key := p.classify(pod)
	if kind != kindMember {
		return
	}
	// No p.mu here: a member that waited at Permit was forgotten there
	// when it was allowed, and thousands of binding goroutines taking the
	// lock that plans hold waited 251 s summed in a 76 s run (scenario 1b,
	// 5000 nodes).
	p.backlog.done(pod.UID)
	p.status.enqueue(key)
}
