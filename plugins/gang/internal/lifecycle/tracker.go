package lifecycle

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/muster-io/muster/plugins/gang/plan"
)

// Cluster is what the tracker asks of the scheduler. The tracker calls it
// with its lock held (and Members and Activate also without it, when a
// retry timer fires); no method may call back into the tracker.
type Cluster interface {
	// Members lists the gang's live pods, bound or not.
	Members(key types.NamespacedName) []*v1.Pod
	// Activate moves pending pods back to the scheduling queue's active
	// queue (it takes the queue's lock); bound pods are left out.
	Activate(pods ...*v1.Pod)
	// WaitingPod returns the pod with uid waiting at Permit, or nil.
	WaitingPod(uid types.UID) fwk.WaitingPod
	// DeleteNomination drops the scheduler's in-memory nomination of pod.
	DeleteNomination(pod *v1.Pod)
	// VictimGone reports whether a preemption victim no longer holds room.
	VictimGone(victim *v1.Pod) bool
}

// Config is what New needs.
type Config struct {
	// Name is the plugin's name, given to the waiting pods' Allow and
	// Reject.
	Name string
	// Clock runs the Permit barriers' timers and tells the time of a
	// release.
	Clock clock.WithTickerAndDelayedExecution
	// Backoff is how long a released gang is refused (its verdict) and
	// waits before its members are activated again.
	Backoff time.Duration
	// Cluster is the scheduler the tracker acts on.
	Cluster Cluster
}

// Tracker holds the lifecycle state of every gang. It is safe for
// concurrent use; its lock is the outermost of the plugin's (see package
// gang's documentation, "Locks"): the scheduling queue's lock, the waiting
// pods' and the nominator's are taken under it, never the other way round.
type Tracker struct {
	name    string
	clock   clock.WithTickerAndDelayedExecution
	backoff time.Duration
	cluster Cluster

	// seq counts cluster changes that may free capacity (node added,
	// node updated in what scheduling reads, assigned pod deleted, capacity
	// the tracker held let go); a cached "no placement" verdict holds only
	// while it is unchanged. Atomic: the queueing hints, which run under
	// the scheduling queue's lock, count changes too.
	seq atomic.Int64

	mu    sync.Mutex
	gangs map[types.NamespacedName]*state
	// atPermit holds, per gang, the members told to wait at Permit.
	// Releasing or rejecting a gang looks up only its own members: walking
	// every waiting pod of the scheduler, as the framework's iterator does,
	// cost a fifth of the scheduler's CPU in scenario 1b at 5000 nodes once
	// thousands of members waited for a slow API server. Not part of state:
	// it must outlive a PodGroup deleted and created again while its
	// members wait.
	atPermit map[types.NamespacedName]sets.Set[types.UID]
}

// New returns an empty tracker.
func New(cfg Config) *Tracker {
	return &Tracker{
		name:     cfg.Name,
		clock:    cfg.Clock,
		backoff:  cfg.Backoff,
		cluster:  cfg.Cluster,
		gangs:    map[types.NamespacedName]*state{},
		atPermit: map[types.NamespacedName]sets.Set[types.UID]{},
	}
}

// state is what the tracker remembers about one gang. Guarded by
// Tracker.mu.
type state struct {
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
	// activate them (see Gang.NotRefused).
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
	barrier *Barrier
	// preempting is the gang's preemption whose victims are still going.
	preempting *Preemption
	// preemptVerdict caches "preemption would not help" like verdict.
	preemptVerdict *verdict
	// lastElastic is the last GangElastic summary recorded.
	lastElastic string
	// replanAfter is when the victim search may next send the gang back to
	// planning at once (Gang.ReplanLimited).
	replanAfter time.Time
}

// verdict is a cached "no placement" result.
type verdict struct {
	message string
	until   time.Time
	seq     int64
}

// fresh reports whether v still answers at now with the change sequence at
// seq.
func (v *verdict) fresh(now time.Time, seq int64) bool {
	return v != nil && now.Before(v.until) && v.seq == seq
}

// Seq is the current change sequence number: a plan or a verdict computed
// now is stale once it moves.
func (t *Tracker) Seq() int64 { return t.seq.Load() }

// Changed counts a cluster change that may free capacity: every cached
// verdict goes stale. It takes no lock.
func (t *Tracker) Changed() { t.seq.Add(1) }

// gangLocked returns the state of key, creating it. Call with t.mu held.
func (t *Tracker) gangLocked(key types.NamespacedName) *state {
	s, ok := t.gangs[key]
	if !ok {
		s = &state{reserved: map[types.UID]string{}}
		t.gangs[key] = s
	}
	return s
}

// Gang is one gang's state with the tracker's lock held, for a decision
// whose steps must not interleave with anything else done to any gang:
// PreFilter computing a plan from what other gangs hold and storing it,
// PostFilter searching victims. What the caller does between Lock and
// Unlock runs under the lock, framework calls included.
type Gang struct {
	t   *Tracker
	key types.NamespacedName
	s   *state
}

// Lock takes the tracker's lock and returns gang key's state, created if
// need be. The caller must call Unlock.
func (t *Tracker) Lock(key types.NamespacedName) *Gang {
	t.mu.Lock()
	return &Gang{t: t, key: key, s: t.gangLocked(key)}
}

// Unlock releases the tracker's lock; g must not be used afterwards.
func (g *Gang) Unlock() { g.t.mu.Unlock() }

// Delete forgets gang key (its PodGroup was deleted). The members it knows
// at Permit stay known: they may belong to a PodGroup of the same name
// created again.
func (t *Tracker) Delete(key types.NamespacedName) {
	t.mu.Lock()
	delete(t.gangs, key)
	t.mu.Unlock()
}

// Info is a copy of what the tracker knows of one gang, for tests and
// debugging.
type Info struct {
	// Known: the tracker keeps state for the gang.
	Known bool
	// Plan is the planned node of each planned member (nil: no plan).
	Plan map[types.UID]string
	// Reserved is the node of each reserved member.
	Reserved map[types.UID]string
	// AtPermit counts the members known to wait at Permit.
	AtPermit int
	// Verdict is the cached "no placement" message, "" when none.
	Verdict string
}

// Inspect returns a copy of gang key's state.
func (t *Tracker) Inspect(key types.NamespacedName) Info {
	t.mu.Lock()
	defer t.mu.Unlock()
	info := Info{AtPermit: t.atPermit[key].Len()}
	s, ok := t.gangs[key]
	if !ok {
		return info
	}
	info.Known = true
	info.Reserved = maps.Clone(s.reserved)
	if s.plan != nil {
		info.Plan = maps.Clone(s.plan.Assignments)
	}
	if s.verdict != nil {
		info.Verdict = s.verdict.message
	}
	return info
}

// Len is how many gangs the tracker keeps state for.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.gangs)
}
