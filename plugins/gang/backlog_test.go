package gang

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	testingclock "k8s.io/utils/clock/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

func fill(b *bindBacklog, n int) {
	for i := range n {
		b.add(types.UID(fmt.Sprintf("m%d", i)))
	}
}

func TestBindBacklogWait(t *testing.T) {
	cases := []struct {
		name     string
		members  int
		act      func(b *bindBacklog, clk *testingclock.FakeClock, cancel func())
		wantWait bool
	}{
		{name: "at the limit: no wait", members: maxBacklog},
		{name: "over the limit: until drained to the low-water mark", members: maxBacklog + 1, wantWait: true,
			act: func(b *bindBacklog, _ *testingclock.FakeClock, _ func()) {
				for i := range maxBacklog + 1 - backlogLowWater {
					b.done(types.UID(fmt.Sprintf("m%d", i)))
				}
			}},
		{name: "over the limit: at most backlogWait", members: maxBacklog + 1, wantWait: true,
			act: func(_ *bindBacklog, clk *testingclock.FakeClock, _ func()) { clk.Step(backlogWait) }},
		{name: "over the limit: until the cycle ends", members: maxBacklog + 1, wantWait: true,
			act: func(_ *bindBacklog, _ *testingclock.FakeClock, cancel func()) { cancel() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBindBacklog()
			fill(b, tc.members)
			clk := testingclock.NewFakeClock(t0)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan struct{})
			go func() { b.wait(ctx, clk); close(done) }()
			if !tc.wantWait {
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatal("wait blocked at the limit")
				}
				return
			}
			// Still waiting: nothing drained it, no time passed.
			select {
			case <-done:
				t.Fatal("wait returned over the limit before anything happened")
			case <-time.After(100 * time.Millisecond):
			}
			if tc.act != nil {
				// The timer must exist before the clock steps.
				for !clk.HasWaiters() {
					time.Sleep(time.Millisecond)
				}
				tc.act(b, clk, cancel)
			}
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("wait did not return")
			}
		})
	}
}

func TestBindBacklogDoneIsIdempotent(t *testing.T) {
	b := newBindBacklog()
	fill(b, 3)
	b.done("m0")
	b.done("m0")
	b.done("unknown")
	if n := b.len(); n != 2 {
		t.Errorf("backlog %d, want 2", n)
	}
}

// A new gang waits while too many members are being bound; a planned
// gang's members do not, and binds drain the backlog.
func TestNewGangWaitsForBindBacklog(t *testing.T) {
	a, b := members("a", 2, 1), members("b", 2, 1)
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 8)}, []*schedv1alpha1.PodGroup{podGroup("a", 2), podGroup("b", 2)}, append(a, b...))
	// Gang a is planned and its first member reserved before the backlog
	// fills up (other gangs' members, as far as the plugin knows).
	if st, _ := e.schedule(a[0]); !st.IsWait() {
		t.Fatalf("a[0]: %v, want Wait", st)
	}
	fill(e.pl.backlog, maxBacklog+1)
	// a's second member goes on: its gang has a plan.
	if st, _ := e.schedule(a[1]); !st.IsSuccess() {
		t.Fatalf("a[1]: %v, want the quorum to pass", st)
	}
	e.outcomes(1)
	// b has no plan: its first member waits in PreFilter.
	done := make(chan error, 1)
	go func() {
		_, st := e.pl.PreFilter(e.ctx, framework.NewCycleState(), b[0], nil)
		done <- st.AsError()
	}()
	select {
	case err := <-done:
		t.Fatalf("new gang planned with %d members being bound (err %v)", e.pl.backlog.len(), err)
	case <-time.After(200 * time.Millisecond):
	}
	// a's two members are still counted (this harness binds nothing):
	// the other gangs' members must go below the low-water mark.
	for i := range maxBacklog + 1 - backlogLowWater + 2 {
		e.pl.backlog.done(types.UID(fmt.Sprintf("m%d", i)))
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("b[0] after the backlog drained: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("new gang still waiting after the backlog drained")
	}
}
