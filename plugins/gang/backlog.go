package gang

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// The bind backlog: members reserved by this scheduler and not yet bound or
// released. kube-scheduler binds in goroutines of their own, so nothing
// slows the scheduling loop down when the API server falls behind; the
// default profile's filtering used to, and so did the gang planner until it
// asked the filters only about the nodes it uses. In scenario 1b at 5000
// nodes (BENCHMARKS.md, issue 18, session 6) the loop then ran far ahead of
// the binds: thousands of members waited for their nominatedNodeName patch
// and bind, the scheduler's memory doubled, and with a high client limit
// the API server timed binds out, each timeout releasing a whole gang.
//
// So a member whose gang has no plan yet waits, before its gang is planned,
// while more than maxBacklog members are in flight, until the backlog is
// down to backlogLowWater or backlogWait has passed. Members of gangs being
// placed never wait (their binds are what drains the backlog), and neither
// do other pods: the wait holds the scheduling loop, as a client limit
// holds an API call, for at most backlogWait at a time.
const (
	maxBacklog      = 1024
	backlogLowWater = maxBacklog / 2
	backlogWait     = 2 * time.Second
)

type bindBacklog struct {
	mu      sync.Mutex
	members map[types.UID]struct{}
	// drained is closed, and replaced, when the backlog falls to
	// backlogLowWater while someone waits.
	drained chan struct{}
	waiting bool
}

func newBindBacklog() *bindBacklog {
	return &bindBacklog{members: map[types.UID]struct{}{}, drained: make(chan struct{})}
}

// add counts a reserved member.
func (b *bindBacklog) add(uid types.UID) {
	b.mu.Lock()
	b.members[uid] = struct{}{}
	b.mu.Unlock()
}

// done forgets a member that was bound, released or deleted. Idempotent.
func (b *bindBacklog) done(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.members[uid]; !ok {
		return
	}
	delete(b.members, uid)
	if b.waiting && len(b.members) <= backlogLowWater {
		close(b.drained)
		b.drained, b.waiting = make(chan struct{}), false
	}
}

// full reports whether a new gang would wait now (cheap: no plugin lock).
func (b *bindBacklog) full() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.members) > maxBacklog
}

func (b *bindBacklog) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.members)
}

// wait returns at once while the backlog is at most maxBacklog; otherwise
// when it is down to backlogLowWater, ctx ends or backlogWait has passed.
// It reports how long it waited.
func (b *bindBacklog) wait(ctx context.Context, clk clock.Clock) time.Duration {
	b.mu.Lock()
	if len(b.members) <= maxBacklog {
		b.mu.Unlock()
		return 0
	}
	b.waiting = true
	ch := b.drained
	b.mu.Unlock()
	start := clk.Now()
	t := clk.NewTimer(backlogWait)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C():
	case <-ctx.Done():
	}
	return clk.Since(start)
}
