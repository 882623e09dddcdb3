package gang

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/plugins/gang/internal/lifecycle"
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
	p.gangs.Reserve(key, pod.UID, nodeName)
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
	released := p.gangs.Release(key, msg, uids...)
	p.afterRelease(key, msg, released)
}

// afterRelease records what a release did; it makes API calls, so it runs
// without the gang tracker's lock.
func (p *Plugin) afterRelease(key types.NamespacedName, msg string, released bool) {
	if released {
		attempts.WithLabelValues(resultReleased).Inc()
		if pg := p.podGroup(key); pg != nil {
			p.recordEvent(pg, v1.EventTypeWarning, "GangReleased", "Scheduling", msg)
		}
	}
	p.status.enqueue(key)
}

// permitBackstop is added to the wait the framework is given: the plugin's
// own barrier timer (under the gang tracker's lock) rejects the gang first,
// so the decision to allow and the decision to time out can never
// interleave. The framework's timer only fires if a member somehow escaped
// the plugin's timer.
const permitBackstop = 30 * time.Second

// Permit is the barrier: a member waits until minMember members are reserved
// or bound, then every waiting member is allowed together. The count and the
// Allow calls happen under the gang tracker's lock, the lock every rejection
// path holds too, so a barrier either lets the whole quorum go or none of it
// (lifecycle.Tracker.Permit).
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
	if deadline, wait := p.gangs.Permit(key, pod.UID, want, p.permitTimeout(pg), p.barrierExpired); wait {
		return fwk.NewStatus(fwk.Wait, fmt.Sprintf("waiting for %d members of gang %s", want, key)), deadline.Sub(p.clock.Now()) + permitBackstop
	}
	p.afterAllow(pg, key, want)
	return nil, 0
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
	if p.gangs.CompleteBarrier(key, want) {
		p.afterAllow(pg, key, want)
	}
}

// barrierExpired rejects the waiting members of a gang whose quorum did not
// form in time, unless that barrier was released or closed meanwhile, and
// reports the members it waited for in vain.
func (p *Plugin) barrierExpired(key types.NamespacedName, b *lifecycle.Barrier) {
	msg := fmt.Sprintf("gang %s: quorum not reached within %s; releasing the waiting members", key, b.Timeout())
	missing, released, ok := p.gangs.ExpireBarrier(key, b, msg)
	if !ok {
		return
	}
	p.afterRelease(key, msg, released)
	p.reportMissing(key, missing)
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

// PostBind refreshes the PodGroup status. The reservation stays until the
// pod goes away; a bound member is counted once either way.
func (p *Plugin) PostBind(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	kind, key := p.classify(pod)
	if kind != kindMember {
		return
	}
	// No gang tracker lock here: a member that waited at Permit was
	// forgotten there when it was allowed, and thousands of binding
	// goroutines taking the lock that plans hold waited 251 s summed in a
	// 76 s run (scenario 1b, 5000 nodes).
	p.backlog.done(pod.UID)
	p.status.enqueue(key)
}
