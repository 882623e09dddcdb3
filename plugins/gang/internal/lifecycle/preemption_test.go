package lifecycle

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// startPreemption records a preemption of victims for gang g with its
// members planned on n1, b and c nominated.
func startPreemption(t *testing.T, tr *Tracker, members, victims []*v1.Pod, until time.Time) {
	t.Helper()
	p, infos := planOf(t, members, "n1", "n1", "n1")
	g := tr.Lock(gangKey("g"))
	g.StartPreemption(Preemption{Victims: victims, Nominated: members[1:], Until: until, Desc: "gang ns/low"}, p, infos, until.Add(time.Hour))
	g.Unlock()
}

// While its victims go the gang waits, keeps its plan and its members'
// nominations; once they are gone, or the wait is over, the nominations
// are dropped and the plan steers the members.
func TestAwaitVictims(t *testing.T) {
	tests := []struct {
		name     string
		gone     []int // victims gone
		at       time.Duration
		wantLeft int // 0: the wait is over
	}{
		{name: "all victims there", at: time.Second, wantLeft: 2},
		{name: "one gone", gone: []int{0}, at: time.Second, wantLeft: 1},
		{name: "all gone", gone: []int{0, 1}, at: time.Second},
		{name: "waited long enough", at: time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, c, _ := newTracker(t)
			members := c.gang("g", pod("a"), pod("b"), pod("c"))
			victims := []*v1.Pod{pod("low-a", bound("n1")), pod("low-b", bound("n1"))}
			startPreemption(t, tr, members, victims, t0.Add(time.Minute))
			for _, i := range tc.gone {
				c.gone[victims[i].UID] = true
			}
			if !tr.Preempting(gangKey("g")) {
				t.Fatal("no preemption recorded")
			}
			g := tr.Lock(gangKey("g"))
			f, left := g.AwaitVictims(t0.Add(tc.at))
			g.Unlock()
			if left != tc.wantLeft || (f != nil) != (tc.wantLeft > 0) {
				t.Fatalf("AwaitVictims %+v, %d left; want %d", f, left, tc.wantLeft)
			}
			if tc.wantLeft > 0 {
				if f.Desc != "gang ns/low" || len(f.Victims) != 2 || len(c.unnominated) != 0 || !tr.Preempting(gangKey("g")) {
					t.Errorf("while waiting: %+v, nominations dropped %v", f, c.unnominated)
				}
				return
			}
			if tr.Preempting(gangKey("g")) || !slices.Equal(c.unnominated, []string{"b", "c"}) {
				t.Errorf("wait over: preempting %v, nominations dropped %v; want none and [b c]", tr.Preempting(gangKey("g")), c.unnominated)
			}
			if !tr.HasPlan(gangKey("g")) {
				t.Error("the plan made without the victims went with the wait")
			}
		})
	}
}

// A preemption forgets the gang's verdicts; a failed one drops the plan and
// the nominations.
func TestPreemptionStartAndFail(t *testing.T) {
	tr, c, _ := newTracker(t)
	members := c.gang("g", pod("a"), pod("b"), pod("c"))
	refuse(tr, "g")
	g := tr.Lock(gangKey("g"))
	g.SetPreemptVerdict("would not help", t0.Add(time.Hour), tr.Seq())
	_, cached := g.PreemptVerdict(t0)
	g.Unlock()
	if !cached {
		t.Fatal("preemption verdict not cached")
	}
	startPreemption(t, tr, members, []*v1.Pod{pod("low", bound("n1"))}, t0.Add(time.Minute))
	g = tr.Lock(gangKey("g"))
	_, verdict := g.Verdict(t0)
	_, preemptVerdict := g.PreemptVerdict(t0)
	g.Unlock()
	if verdict || preemptVerdict {
		t.Errorf("verdicts kept across a preemption: %v, %v", verdict, preemptVerdict)
	}
	tr.PreemptionFailed(gangKey("g"))
	if tr.Preempting(gangKey("g")) || tr.HasPlan(gangKey("g")) || !slices.Equal(c.unnominated, []string{"b", "c"}) {
		t.Errorf("after a failed preemption: preempting %v, plan %v, nominations dropped %v", tr.Preempting(gangKey("g")), tr.HasPlan(gangKey("g")), c.unnominated)
	}
}

// A "preemption would not help" verdict holds like the placement verdict.
func TestPreemptVerdictStaleness(t *testing.T) {
	tr, c, _ := newTracker(t)
	c.gang("g", pod("a"))
	g := tr.Lock(gangKey("g"))
	g.SetPreemptVerdict("would not help", t0.Add(time.Minute), tr.Seq())
	msg, ok := g.PreemptVerdict(t0)
	_, late := g.PreemptVerdict(t0.Add(time.Minute))
	g.Unlock()
	if msg != "would not help" || !ok || late {
		t.Errorf("PreemptVerdict %q %v, at its end %v", msg, ok, late)
	}
	tr.Changed()
	g = tr.Lock(gangKey("g"))
	_, ok = g.PreemptVerdict(t0)
	g.Unlock()
	if ok {
		t.Error("preemption verdict fresh after a change")
	}
}

// The victim search sends a gang back to planning at once at most once per
// backoff.
func TestReplanLimited(t *testing.T) {
	tr, c, _ := newTracker(t)
	c.gang("g", pod("a"))
	g := tr.Lock(gangKey("g"))
	defer g.Unlock()
	for _, step := range []struct {
		at   time.Duration
		want bool
	}{{0, false}, {time.Second, true}, {testBackoff - time.Second, true}, {testBackoff, false}, {testBackoff + time.Second, true}} {
		if got := g.ReplanLimited(t0.Add(step.at)); got != step.want {
			t.Errorf("at +%s: ReplanLimited %v, want %v", step.at, got, step.want)
		}
	}
}
