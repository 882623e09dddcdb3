package gang

import (
	"regexp"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// messageHold is how long a waiting gang keeps showing its reason while
// only the reason's counts move. kube-scheduler writes a pod's PodScheduled
// condition, and records a FailedScheduling event, only when the message
// changes; a message that carries the free GPUs of every node changes with
// every bind and every finished pod, so each retry of a waiting member cost
// a status patch and an event, and those writes were what kept
// SchedulerAsyncAPICalls from paying off with gangs waiting (BENCHMARKS.md,
// issue 18). 10 s is kube-scheduler's default longest pod backoff: a member
// retried at that pace still sees its reason's counts change on every try.
const messageHold = 10 * time.Second

// volatileParts are the parts of a "no placement" reason that move with the
// cluster's load while the cause stays: how many members the best placement
// fits, the free amounts per node, how many nodes other filters rejected,
// how many lower-priority pods preemption would evict. The rest — what the
// gang needs, its member count and quorum, the resource short, the topology
// domain, whether preemption would help — is the cause, shown at once when
// it changes.
var volatileParts = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`best placement fits \d+ of`), "best placement fits # of"},
	{regexp.MustCompile(`per node: [^)]*\)`), "per node: #)"},
	{regexp.MustCompile(`\d+ of (\d+) nodes rejected by other filters`), "# of $1 nodes rejected by other filters"},
	{regexp.MustCompile(`evicting all \d+ lower-priority pods`), "evicting all # lower-priority pods"},
}

// cause is msg with its volatile parts masked.
func cause(msg string) string {
	for _, v := range volatileParts {
		msg = v.re.ReplaceAllString(msg, v.with)
	}
	return msg
}

// steadyMessage is the reason to show at now for a gang whose latest reason
// is next, when last was shown since lastAt: last while next differs from it
// only in volatile counts and last is younger than hold; next otherwise.
func steadyMessage(last string, lastAt time.Time, next string, now time.Time, hold time.Duration) string {
	if last == "" || last == next || now.Sub(lastAt) >= hold || cause(last) != cause(next) {
		return next
	}
	return last
}

// reasonLocked is the reason to give a member of the waiting gang key whose
// latest "no placement" reason is latest. A new reason shown is recorded as
// the PodGroup's GangUnschedulable event (so the event follows the pods'
// condition); a reason held back is shown when the hold ends, by waking one
// member then, so the counts catch up even if nothing else happens. Call
// with p.mu held.
func (p *Plugin) reasonLocked(key types.NamespacedName, pg *schedv1alpha1.PodGroup, g *gangState, latest string, now time.Time) string {
	msg := steadyMessage(g.lastMessage, g.lastMessageAt, latest, now, messageHold)
	if msg != g.lastMessage {
		g.lastMessage, g.lastMessageAt = msg, now
		p.recordEvent(pg, v1.EventTypeWarning, "GangUnschedulable", "Scheduling", msg)
	}
	if msg != latest && g.refresh == nil {
		g.refresh = p.clock.AfterFunc(g.lastMessageAt.Add(messageHold).Sub(now), func() {
			p.mu.Lock()
			var pick *v1.Pod
			if cur, ok := p.gangs[key]; ok && cur == g {
				g.refresh = nil
				if g.verdict != nil {
					pick = p.pickPendingLocked(key, g)
				}
			}
			p.mu.Unlock()
			if pick != nil {
				p.activate(pick)
			}
		})
	}
	return msg
}

// steadyPreemptMessage is the "preemption would not help" reason to give
// now when the search's latest is latest: PostFilter's part of a waiting
// member's condition holds like PreFilter's (reasonLocked), or its count
// of lower-priority pods and the free amounts of its "then:" plan would
// change the condition, and cost a status patch, on every retry. No timer
// of its own: the first retry after the hold (the PreFilter part's refresh,
// or the next change of capacity, which is what moves the counts) shows
// the latest. Call with p.mu held.
func (g *gangState) steadyPreemptMessage(latest string, now time.Time) string {
	msg := steadyMessage(g.lastPreemptMessage, g.lastPreemptAt, latest, now, messageHold)
	if msg != g.lastPreemptMessage {
		g.lastPreemptMessage, g.lastPreemptAt = msg, now
	}
	return msg
}
