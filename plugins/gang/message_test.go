package gang

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

func TestSteadyMessage(t *testing.T) {
	const (
		shown = "gang ns/g: needs 24 nvidia.com/gpu for 3 members (8 per member); best placement fits 2 of 3 members (free nvidia.com/gpu per node: 8,8,4)"
		// Only the counts moved.
		counts = "gang ns/g: needs 24 nvidia.com/gpu for 3 members (8 per member); best placement fits 1 of 3 members (free nvidia.com/gpu per node: 8,3,2,… 4 more)"
	)
	at := t0
	tests := []struct {
		name       string
		last, next string
		after      time.Duration
		want       string
	}{
		{"nothing shown yet", "", shown, 0, shown},
		{"same reason", shown, shown, time.Second, shown},
		{"only the counts moved: held", shown, counts, time.Second, shown},
		{"only the counts moved, just before the hold ends", shown, counts, messageHold - time.Millisecond, shown},
		{"only the counts moved, hold over", shown, counts, messageHold, counts},
		{"another resource short", shown,
			"gang ns/g: needs 96 cpu for 3 members (32 per member); best placement fits 2 of 3 members (free cpu per node: 40,40,8)", time.Second,
			"gang ns/g: needs 96 cpu for 3 members (32 per member); best placement fits 2 of 3 members (free cpu per node: 40,40,8)"},
		{"a member more", shown,
			"gang ns/g: needs 32 nvidia.com/gpu for 4 members (8 per member); best placement fits 2 of 3 members (free nvidia.com/gpu per node: 8,8,4)", time.Second,
			"gang ns/g: needs 32 nvidia.com/gpu for 4 members (8 per member); best placement fits 2 of 3 members (free nvidia.com/gpu per node: 8,8,4)"},
		{"another quorum", shown,
			"gang ns/g: needs 24 nvidia.com/gpu for 3 members (8 per member); best placement fits 2 of 2 members (free nvidia.com/gpu per node: 8,8,4)", time.Second,
			"gang ns/g: needs 24 nvidia.com/gpu for 3 members (8 per member); best placement fits 2 of 2 members (free nvidia.com/gpu per node: 8,8,4)"},
		{"no node fits one member now", shown,
			"gang ns/g: needs 24 nvidia.com/gpu for 3 members (8 per member); best placement fits 0 of 3 members (free nvidia.com/gpu per node: 4,4,4); no node has room for one member", time.Second,
			"gang ns/g: needs 24 nvidia.com/gpu for 3 members (8 per member); best placement fits 0 of 3 members (free nvidia.com/gpu per node: 4,4,4); no node has room for one member"},
		{"other filters now reject nodes", shown,
			shown + "; 2 of 10 nodes rejected by other filters", time.Second,
			shown + "; 2 of 10 nodes rejected by other filters"},
		{"other filters reject more nodes: held", shown + "; 2 of 10 nodes rejected by other filters",
			counts + "; 3 of 10 nodes rejected by other filters", time.Second,
			shown + "; 2 of 10 nodes rejected by other filters"},
		{"another best topology domain", "gang ns/z: needs 8 nvidia.com/gpu for 4 members (2 per member) in one zone domain; best domain a; best placement fits 2 of 4 members (free nvidia.com/gpu per node: 2,2)",
			"gang ns/z: needs 8 nvidia.com/gpu for 4 members (2 per member) in one zone domain; best domain b; best placement fits 3 of 4 members (free nvidia.com/gpu per node: 2,2,2)", time.Second,
			"gang ns/z: needs 8 nvidia.com/gpu for 4 members (2 per member) in one zone domain; best domain b; best placement fits 3 of 4 members (free nvidia.com/gpu per node: 2,2,2)"},
		{"preemption would not help, fewer victims: held",
			"gang ns/g: preemption would not help: the gang would not fit even after evicting all 8 lower-priority pods (then: " + shown + ")",
			"gang ns/g: preemption would not help: the gang would not fit even after evicting all 6 lower-priority pods (then: " + counts + ")", time.Second,
			"gang ns/g: preemption would not help: the gang would not fit even after evicting all 8 lower-priority pods (then: " + shown + ")"},
		{"preemption would not help, now no lower priority",
			"gang ns/g: preemption would not help: the gang would not fit even after evicting all 8 lower-priority pods (then: " + shown + ")",
			"gang ns/g: preemption would not help: no running pod has a lower priority", time.Second,
			"gang ns/g: preemption would not help: no running pod has a lower priority"},
		{"another kind of reason", shown, "gang ns/g: no nodes to place 3 members on", time.Second, "gang ns/g: no nodes to place 3 members on"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := steadyMessage(tc.last, at, tc.next, at.Add(tc.after), messageHold); got != tc.want {
				t.Errorf("steadyMessage(%q, +%v, %q)\n = %q\nwant %q", tc.last, tc.after, tc.next, got, tc.want)
			}
		})
	}
}

// A waiting gang whose free capacity moves keeps giving its members the
// same reason — kube-scheduler then writes no condition and no event for
// their retries — and one PodGroup event; when the hold ends a member is
// woken and the reason shows the current counts.
func TestWaitingGangKeepsItsReason(t *testing.T) {
	// One 8-GPU node. Gang b (3 × 4 GPUs) fits 2 of 3. Gang a (2 × 1 GPU)
	// is planned; its member not yet reserved holds a GPU (the fake snapshot
	// knows nothing of reservations):
	// b's free GPUs and fits count move, its cause does not.
	a, b := members("a", 2, 1), members("b", 3, 4)
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 8)}, []*schedv1alpha1.PodGroup{podGroup("a", 2), podGroup("b", 3)}, append(a, b...))
	refuse := func(p *v1.Pod, want string) string {
		t.Helper()
		st, _ := e.schedule(p)
		if st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), want) {
			t.Fatalf("%s: %v, want no placement with %q", p.Name, st, want)
		}
		return st.Message()
	}
	first := refuse(b[0], "best placement fits 2 of 3 members (free nvidia.com/gpu per node: 8)")
	if st, _ := e.schedule(a[0]); !st.IsWait() {
		t.Fatalf("a: Permit %v, want Wait", st)
	}
	e.pl.capacityChanged()
	if latest := refuse(b[1], "gang ns/b"); latest != first {
		t.Errorf("reason after a's plan took 2 GPUs:\n %q\nwant the first one kept\n %q", latest, first)
	}
	if v := gangVerdict(e, "b"); !strings.Contains(v, "fits 1 of 3 members (free nvidia.com/gpu per node: 7)") {
		t.Errorf("verdict %q, want the planner's latest counts", v)
	}
	if got := drain(e.recorder); len(got) != 1 || !strings.Contains(got[0], "GangUnschedulable") {
		t.Errorf("events %q, want the first GangUnschedulable only", got)
	}
	e.act.take()

	// The hold ends: one member is woken to show the counts (the fake
	// clock runs due timers inside Step).
	e.clk.Step(messageHold)
	if got, want := e.act.take(), []string{"b-a"}; !slices.Equal(got, want) {
		t.Errorf("woken when the hold ended: %v, want %v", got, want)
	}
	refuse(b[0], "best placement fits 1 of 3 members (free nvidia.com/gpu per node: 7)")
	if got := drain(e.recorder); len(got) != 1 || !strings.Contains(got[0], "fits 1 of 3") {
		t.Errorf("events %q, want one GangUnschedulable with the current counts", got)
	}
}

// A change of cause is shown at once, hold or not.
func TestWaitingGangShowsANewCauseAtOnce(t *testing.T) {
	pods := members("g", 3, 2)
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 4)}, []*schedv1alpha1.PodGroup{podGroup("g", 3)}, pods)
	if st, _ := e.schedule(pods[0]); !strings.Contains(st.Message(), "needs 6 nvidia.com/gpu for 3 members") {
		t.Fatalf("3 × 2 GPUs on 4: %v, want no placement for 6 GPUs", st)
	}
	// A fourth, smaller member joins: the gang needs another amount.
	small := gpuPod("g-d", 1, inGang("g"))
	if err := e.pl.podIndexer.Add(small); err != nil {
		t.Fatal(err)
	}
	e.pl.onPod(nil, small)
	if st, _ := e.schedule(pods[0]); !strings.Contains(st.Message(), "needs 7 nvidia.com/gpu for 4 members") {
		t.Errorf("after a member joined: %v, want the new need at once", st)
	}
	if got := drain(e.recorder); len(got) != 2 || !strings.Contains(got[1], "for 4 members") {
		t.Errorf("events %q, want a second GangUnschedulable for the new cause", got)
	}
	// Nothing was held back: no member is woken when the hold would end.
	e.act.take()
	e.clk.Step(messageHold)
	// (The fake clock runs due timers inside Step.)
	if got := e.act.take(); len(got) != 0 {
		t.Errorf("woke %v with no reason held back", got)
	}
}

// PostFilter's "preemption would not help" part of a waiting member's
// reason holds like PreFilter's: a new count of lower-priority pods alone
// is held, a new cause or the end of the hold shows at once.
func TestSteadyPreemptMessage(t *testing.T) {
	const (
		eight = "gang ns/g: preemption would not help: the gang would not fit even after evicting all 8 lower-priority pods (then: gang ns/g: needs 24 nvidia.com/gpu for 3 members (8 per member); best placement fits 2 of 3 members (free nvidia.com/gpu per node: 8,8,4))"
		six   = "gang ns/g: preemption would not help: the gang would not fit even after evicting all 6 lower-priority pods (then: gang ns/g: needs 24 nvidia.com/gpu for 3 members (8 per member); best placement fits 1 of 3 members (free nvidia.com/gpu per node: 8,4,4))"
		none  = "gang ns/g: preemption would not help: no running pod has a lower priority"
	)
	g := &gangState{}
	steps := []struct {
		at     time.Duration
		latest string
		want   string
	}{
		{0, eight, eight},
		{time.Second, six, eight},
		{messageHold - time.Millisecond, six, eight},
		{messageHold, six, six},
		{messageHold + time.Second, none, none},
		{messageHold + 2*time.Second, eight, eight},
	}
	for i, s := range steps {
		if got := g.steadyPreemptMessage(s.latest, t0.Add(s.at)); got != s.want {
			t.Errorf("step %d (%v): %q, want %q", i, s.at, got, s.want)
		}
	}
}
