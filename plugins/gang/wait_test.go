package gang

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// nextEvent returns the next recorded event. The recorder is fed from a
// goroutine the plugin's timer starts, hence the channel wait; the timeout
// only turns a missing event into a failure instead of a hang.
func nextEvent(t *testing.T, r *events.FakeRecorder) string {
	t.Helper()
	select {
	case ev := <-r.Events:
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no event recorded")
		return ""
	}
}

// pendingWait reports whether the plugin tracks a wait for uid and whether
// an event for it is scheduled.
func pendingWait(p *Plugin, uid types.UID) (tracked, timer bool) {
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	w := p.waiting[uid]
	return w != nil, w != nil && w.timer != nil
}

// The wait reason is shown on the pod once the wait has lasted
// waitEventDelay, with the reason current at that moment; a gang that forms
// quicker writes no event at all.
func TestWaitReasonEventOnlyForWaitsThatLast(t *testing.T) {
	slow := members("slow", 3, 1)
	quick := members("quick", 2, 1)
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 8)},
		[]*schedv1alpha1.PodGroup{podGroup("slow", 3), podGroup("quick", 2)},
		[]*v1.Pod{slow[0], quick[0]})
	drain(e.recorder)
	ctx := context.Background()
	add := func(p *v1.Pod) {
		t.Helper()
		if err := e.pl.podIndexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}

	// A gang formed within the delay: its members wait, then pass, and no
	// event is left pending.
	if st := e.pl.PreEnqueue(ctx, quick[0]); st.IsSuccess() {
		t.Fatal("quick-a passed PreEnqueue with 1 of 2 members")
	}
	add(quick[1])
	for _, p := range quick {
		if st := e.pl.PreEnqueue(ctx, p); !st.IsSuccess() {
			t.Fatalf("%s: PreEnqueue %v with the whole gang present", p.Name, st)
		}
		if tracked, _ := pendingWait(e.pl, p.UID); tracked {
			t.Errorf("%s: wait still tracked after passing PreEnqueue", p.Name)
		}
	}

	// A gang whose members trickle in: no event while the wait is young.
	if st := e.pl.PreEnqueue(ctx, slow[0]); st.IsSuccess() {
		t.Fatal("slow-a passed PreEnqueue with 1 of 3 members")
	}
	if got := drain(e.recorder); len(got) != 0 {
		t.Fatalf("events %q right after the wait began, want none", got)
	}
	e.clk.Step(waitEventDelay / 2)
	add(slow[1])
	if st := e.pl.PreEnqueue(ctx, slow[0]); st.IsSuccess() {
		t.Fatal("slow-a passed PreEnqueue with 2 of 3 members")
	}
	// The delay counts from the start of the wait; the event carries the
	// reason current when it is recorded.
	e.clk.Step(waitEventDelay / 2)
	ev := nextEvent(t, e.recorder)
	if !strings.Contains(ev, "GangWaiting") || !strings.Contains(ev, "waiting for members of gang ns/slow: 2 of 3 (minMember) exist") {
		t.Errorf("event %q, want GangWaiting with the current reason (2 of 3)", ev)
	}
	// The quick gang's members recorded nothing (their timers were stopped).
	for _, got := range drain(e.recorder) {
		if strings.Contains(got, "quick") {
			t.Errorf("event %q for a gang that formed within the delay", got)
		}
	}

	// The same reason again schedules nothing; a new reason is shown after
	// the delay.
	e.pl.PreEnqueue(ctx, slow[0])
	if _, timer := pendingWait(e.pl, slow[0].UID); timer {
		t.Error("an event is scheduled for a reason already recorded")
	}
	if st := e.pl.PreEnqueue(ctx, slow[1]); st.IsSuccess() {
		t.Fatal("slow-b passed PreEnqueue with 2 of 3 members")
	}
	e.clk.Step(waitEventDelay)
	if ev := nextEvent(t, e.recorder); !strings.Contains(ev, "2 of 3") || !strings.Contains(ev, "GangWaiting") {
		t.Errorf("slow-b: event %q, want its wait reason", ev)
	}

	// A deleted pod's pending event is cancelled.
	unlabelled := gpuPod("u", 1)
	if st := e.pl.PreEnqueue(ctx, unlabelled); st.IsSuccess() {
		t.Fatal("an unlabelled pod passed PreEnqueue with the pod-grouper required")
	}
	e.pl.onPodDelete(unlabelled)
	if tracked, _ := pendingWait(e.pl, unlabelled.UID); tracked {
		t.Error("a deleted pod's wait is still tracked")
	}
}

// Capacity events wake members refused for lack of room, not members
// PreEnqueue holds back (a freed GPU brings no label, PodGroup or quorum).
func TestCapacityHintsSkipHeldMembers(t *testing.T) {
	pods := members("g", 3, 1)
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 8)}, []*schedv1alpha1.PodGroup{podGroup("g", 3)}, pods[:2])
	if st := e.pl.PreEnqueue(context.Background(), pods[0]); st.IsSuccess() {
		t.Fatal("g-a passed PreEnqueue with 2 of 3 members")
	}
	free := gpuPod("free", 1, gangFree)
	logger := klog.Background()
	for _, tc := range []struct {
		pod  *v1.Pod
		want fwk.QueueingHint
	}{
		{pods[0], fwk.QueueSkip}, // held back for the quorum
		{pods[1], fwk.Queue},     // not held: may have been refused for room
		{free, fwk.QueueSkip},    // not a member
	} {
		for name, hint := range map[string]fwk.QueueingHintFn{"capacity freed": e.pl.isSchedulableAfterCapacityFreed, "node change": e.pl.isSchedulableAfterNodeChange} {
			// As if the member queued by the last hint had been tried.
			e.pl.wakeConsumed(types.NamespacedName{Namespace: "ns", Name: "g"})
			if got, err := hint(logger, tc.pod, nil, nil); err != nil || got != tc.want {
				t.Errorf("%s, %s: %v (err %v), want %v", name, tc.pod.Name, got, err, tc.want)
			}
		}
	}
}

// A capacity change queues one member per gang: the members share one plan
// and one verdict, so one attempt answers for all. The next change queues
// one again once a member has been tried, or once a member has gone.
func TestCapacityHintQueuesOneMemberPerGang(t *testing.T) {
	pods := members("g", 3, 2)
	other := members("h", 3, 2)
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 4)}, []*schedv1alpha1.PodGroup{podGroup("g", 3), podGroup("h", 3)}, append(slices.Clone(pods), other...))
	for _, p := range []*v1.Pod{pods[0], other[0]} {
		if st, _ := e.schedule(p); st.Code() != fwk.UnschedulableAndUnresolvable {
			t.Fatalf("%s: 3 × 2 GPUs on 4: %v, want no placement", p.Name, st)
		}
	}
	logger := klog.Background()
	hints := map[string]fwk.QueueingHintFn{"capacity freed": e.pl.isSchedulableAfterCapacityFreed, "node change": e.pl.isSchedulableAfterNodeChange}
	for name, hint := range hints {
		check := func(step string, pod *v1.Pod, want fwk.QueueingHint) {
			t.Helper()
			if got, err := hint(logger, pod, nil, nil); err != nil || got != want {
				t.Errorf("%s, %s: %s: %v (err %v), want %v", name, step, pod.Name, got, err, want)
			}
		}
		check("first of its gang", pods[1], fwk.Queue)
		check("a sibling is queued", pods[0], fwk.QueueSkip)
		check("a sibling is queued", pods[2], fwk.QueueSkip)
		check("first of another gang", other[1], fwk.Queue)
		// The queued member is tried: the gang may be woken again.
		if st, _ := e.schedule(pods[1]); st.Code() != fwk.UnschedulableAndUnresolvable {
			t.Fatalf("g-b: %v, want no placement", st)
		}
		check("after a member was tried", pods[2], fwk.Queue)
		check("a sibling is queued", pods[0], fwk.QueueSkip)
		// The queued member goes away before it is tried.
		e.pl.forgetMember(types.NamespacedName{Namespace: "ns", Name: "g"}, pods[2])
		check("after the queued member went", pods[0], fwk.Queue)
		// Leave both gangs wakeable for the next hint.
		e.pl.wakeConsumed(types.NamespacedName{Namespace: "ns", Name: "g"})
		e.pl.wakeConsumed(types.NamespacedName{Namespace: "ns", Name: "h"})
	}
}

// gatedBudget hands out wait-event tokens only as the test grants them,
// and counts the writer's requests.
type gatedBudget struct {
	tokens  chan struct{}
	entered chan struct{}
	calls   atomic.Int32
}

func (b *gatedBudget) Wait(ctx context.Context) error {
	b.calls.Add(1)
	b.entered <- struct{}{}
	select {
	case <-b.tokens:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Wait events share one budget: past it the writer waits for tokens, and a
// wait that ended before its turn costs none.
func TestWaitEventsStayWithinBudget(t *testing.T) {
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 8)}, nil, nil)
	drain(e.recorder)
	budget := &gatedBudget{tokens: make(chan struct{}, 10), entered: make(chan struct{}, 10)}
	e.pl.waitBudget = budget
	budget.tokens <- struct{}{}
	budget.tokens <- struct{}{}
	ctx := context.Background()
	var pods []*v1.Pod
	for _, name := range []string{"u0", "u1", "u2", "u3", "u4"} {
		p := gpuPod(name, 1) // unlabelled: waits for the pod-grouper
		if st := e.pl.PreEnqueue(ctx, p); st.IsSuccess() {
			t.Fatalf("%s passed PreEnqueue unlabelled", name)
		}
		pods = append(pods, p)
	}
	e.clk.Step(waitEventDelay)
	for range 2 {
		if ev := nextEvent(t, e.recorder); !strings.Contains(ev, "waiting for the pod-grouper") {
			t.Errorf("event %q, want the pod-grouper wait", ev)
		}
	}
	// The writer asks for a third token and holds its wait until granted:
	// no third event can be written meanwhile.
	for range 3 {
		select {
		case <-budget.entered:
		case <-time.After(30 * time.Second):
			t.Fatal("the event writer asked for fewer than 3 tokens")
		}
	}
	if got := drain(e.recorder); len(got) != 0 {
		t.Fatalf("events %q past the budget", got)
	}
	// The three waits left end; the one the writer holds is dropped once
	// its token comes, the other two cost nothing.
	recorded := map[string]bool{}
	for _, p := range pods {
		recorded[p.Name] = true
	}
	for _, p := range pods {
		if tracked, timer := pendingWait(e.pl, p.UID); tracked && timer {
			delete(recorded, p.Name)
			e.pl.onPodDelete(p)
		}
	}
	if len(recorded) != 2 {
		t.Fatalf("%d waits recorded, want 2", len(recorded))
	}
	budget.tokens <- struct{}{}
	// A later wait is written after every earlier one was handled (one
	// writer, first in first out): two token requests, not four.
	late := gpuPod("late", 1, inGang("late")) // waits for its PodGroup
	if st := e.pl.PreEnqueue(ctx, late); st.IsSuccess() {
		t.Fatal("late passed PreEnqueue without its PodGroup")
	}
	budget.tokens <- struct{}{}
	e.clk.Step(waitEventDelay)
	if ev := nextEvent(t, e.recorder); !strings.Contains(ev, "PodGroup ns/late") {
		t.Errorf("event %q, want the late pod's", ev)
	}
	if got := drain(e.recorder); len(got) != 0 {
		t.Errorf("events %q for waits that ended", got)
	}
	if n := budget.calls.Load(); n != 4 {
		t.Errorf("%d token requests, want 4 (2 written, 1 held when its wait ended, 1 late)", n)
	}
}

// The shipped budget is a token bucket of waitEventQPS and waitEventBurst.
func TestWaitBudgetIsBounded(t *testing.T) {
	e := newBarrierEnv(t, nil, nil, nil)
	rl, ok := e.pl.waitBudget.(flowcontrol.RateLimiter)
	if !ok {
		t.Fatalf("wait budget %T, want a client-go rate limiter", e.pl.waitBudget)
	}
	if got := rl.QPS(); got != waitEventQPS {
		t.Errorf("wait events at %v/s, want %v", got, waitEventQPS)
	}
}
