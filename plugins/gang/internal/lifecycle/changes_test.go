package lifecycle

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// refuse gives gang name a "no placement" verdict at the current sequence.
func refuse(tr *Tracker, name string) {
	g := tr.Lock(gangKey(name))
	g.NoPlacement("gang ns/"+name+": no room", t0.Add(time.Hour), tr.Seq())
	g.Unlock()
}

// Forgetting a member: its reservation and its place at Permit go; a
// planned member voids the plan (other refused gangs and the gang's own
// left-out members are woken), and any member the verdict.
func TestForgetMember(t *testing.T) {
	tests := []struct {
		name       string
		planned    bool // the gone member is in the gang's plan
		refused    bool // the gang has a verdict
		wantPlan   bool
		wantWoken  []string // the gang's own members and other gangs'
		wantChange bool     // the change sequence moved
	}{
		{name: "planned member", planned: true, wantWoken: []string{"g-b", "g-c", "other-a"}, wantChange: true},
		{name: "member outside the plan", wantPlan: true},
		// Every pending member shows the next verdict, reserved ones too.
		{name: "member of a refused gang", refused: true, wantWoken: []string{"g-a", "g-b", "g-c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, c, _ := newTracker(t)
			pods := c.gang("g", pod("g-a"), pod("g-b"), pod("g-c"), pod("g-d"))
			c.gang("other", pod("other-a"))
			refuse(tr, "other")
			gone := pods[3]
			switch {
			case tc.planned:
				storePlan(t, tr, "g", t0.Add(time.Hour), []*v1.Pod{pods[1], gone}, "n1", "n1")
			case tc.refused:
				refuse(tr, "g")
			default:
				storePlan(t, tr, "g", t0.Add(time.Hour), pods[1:2], "n1")
			}
			tr.Reserve(gangKey("g"), pods[0].UID, "n1")
			tr.Reserve(gangKey("g"), gone.UID, "n1")
			if _, wait := tr.Permit(gangKey("g"), gone.UID, 4, time.Minute, noExpiry); !wait {
				t.Fatal("let through below the quorum")
			}
			c.gang("g", pods[:3]...)
			c.takeActivated()
			seq := tr.Seq()

			tr.ForgetMember(gangKey("g"), gone.UID)
			info := tr.Inspect(gangKey("g"))
			if _, ok := info.Reserved[gone.UID]; ok || info.AtPermit != 0 {
				t.Errorf("gone member still reserved or at Permit: %+v", info)
			}
			if _, ok := info.Reserved[pods[0].UID]; !ok {
				t.Error("another member's reservation went too")
			}
			if (info.Plan != nil) != tc.wantPlan || info.Verdict != "" {
				t.Errorf("plan %v, verdict %q; want plan=%v and no verdict", info.Plan, info.Verdict, tc.wantPlan)
			}
			if got := c.takeActivated(); !slices.Equal(got, tc.wantWoken) {
				t.Errorf("activated %v, want %v", got, tc.wantWoken)
			}
			if changed := tr.Seq() != seq; changed != tc.wantChange {
				t.Errorf("change counted %v, want %v", changed, tc.wantChange)
			}
		})
	}
}

// A new member forgets a refused gang's verdict and wakes its pending
// members; a gang without a verdict is left alone.
func TestMemberJoined(t *testing.T) {
	tr, c, _ := newTracker(t)
	c.gang("g", pod("a"), pod("b", bound("n1")), pod("c"))
	tr.MemberJoined(gangKey("g"))
	if tr.Inspect(gangKey("g")).Known || len(c.takeActivated()) != 0 {
		t.Fatal("an unknown gang was touched")
	}
	refuse(tr, "g")
	c.takeActivated()
	tr.MemberJoined(gangKey("g"))
	if v := tr.Inspect(gangKey("g")).Verdict; v != "" {
		t.Errorf("verdict %q kept", v)
	}
	if got, want := c.takeActivated(), []string{"a", "c"}; !slices.Equal(got, want) {
		t.Errorf("activated %v, want the pending members %v", got, want)
	}
	tr.MemberJoined(gangKey("g"))
	if got := c.takeActivated(); len(got) != 0 {
		t.Errorf("activated %v for a gang without a verdict", got)
	}
}

// A resized gang forgets its plan and its verdict; dropping the plan lets
// its capacity go to refused gangs.
func TestResized(t *testing.T) {
	tr, c, _ := newTracker(t)
	pods := c.gang("g", pod("g-a"))
	c.gang("other", pod("other-b"), pod("other-a", finished))
	refuse(tr, "other")
	storePlan(t, tr, "g", t0.Add(time.Hour), pods, "n1")
	c.takeActivated()
	seq := tr.Seq()
	tr.Resized(gangKey("g"))
	if tr.HasPlan(gangKey("g")) || tr.Seq() == seq {
		t.Error("the plan stayed, or its capacity went unannounced")
	}
	// A finished pod is not woken, even with the first name.
	if got, want := c.takeActivated(), []string{"other-b"}; !slices.Equal(got, want) {
		t.Errorf("activated %v, want %v", got, want)
	}
	refuse(tr, "g")
	tr.Resized(gangKey("g"))
	if v := tr.Inspect(gangKey("g")).Verdict; v != "" {
		t.Errorf("verdict %q kept after a resize", v)
	}
}
