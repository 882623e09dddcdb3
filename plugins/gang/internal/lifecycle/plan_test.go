package lifecycle

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

// A stored plan steers its members until it expires, and counts as held
// against other gangs' plans meanwhile.
func TestPlanStoredAndExpired(t *testing.T) {
	tests := []struct {
		name       string
		at         time.Duration // after t0
		wantNode   string        // a's planned node, "" for none
		wantLive   bool
		wantHasPln bool
		// wantHeld: the plan counts as held for others. At the instant it
		// expires it still does, though it no longer steers.
		wantHeld bool
	}{
		{name: "before expiry", at: time.Minute, wantNode: "n1", wantLive: true, wantHasPln: true, wantHeld: true},
		{name: "at expiry", at: 2 * time.Minute, wantHasPln: true, wantHeld: true},
		{name: "after expiry", at: time.Hour, wantHasPln: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, c, _ := newTracker(t)
			pods := c.gang("g", pod("a"), pod("b"))
			storePlan(t, tr, "g", t0.Add(2*time.Minute), pods, "n1", "n2")
			now := t0.Add(tc.at)
			g := tr.Lock(gangKey("g"))
			node, ok := g.PlannedNode(pods[0].UID, now)
			live := g.LivePlan(now)
			_, stranger := g.PlannedNode("uid-stranger", now)
			g.Unlock()
			if node != tc.wantNode || ok != (tc.wantNode != "") || live != tc.wantLive || stranger {
				t.Errorf("PlannedNode %q %v, LivePlan %v, a pod not planned found %v; want %q, %v", node, ok, live, stranger, tc.wantNode, tc.wantLive)
			}
			if got := tr.HasPlan(gangKey("g")); got != tc.wantHasPln {
				t.Errorf("HasPlan %v, want %v (an expired plan is still the gang's until replaced)", got, tc.wantHasPln)
			}
			wantHeld := map[string][]string{}
			if tc.wantHeld {
				wantHeld = map[string][]string{"n1": {"a"}, "n2": {"b"}}
			}
			if diff := cmp.Diff(wantHeld, heldNames(tr.Held(gangKey("other"), now))); diff != "" {
				t.Errorf("held for another gang (-want, +got):\n%s", diff)
			}
		})
	}
}

// What other gangs' plans hold: their planned members not reserved yet,
// by node; never the asking gang's own, never an expired plan's.
func TestHeldExcludesReservedAndOwn(t *testing.T) {
	tr, c, _ := newTracker(t)
	a := c.gang("a", pod("a-1"), pod("a-2"), pod("a-3"))
	b := c.gang("b", pod("b-1"))
	old := c.gang("old", pod("old-1"))
	storePlan(t, tr, "a", t0.Add(time.Hour), a, "n1", "n1", "n2")
	storePlan(t, tr, "b", t0.Add(time.Hour), b, "n2")
	storePlan(t, tr, "old", t0.Add(time.Second), old, "n3")
	tr.Reserve(gangKey("a"), a[1].UID, "n1")

	now := t0.Add(time.Minute)
	tests := []struct {
		name string
		skip string
		want map[string][]string
	}{
		{"for a new gang", "new", map[string][]string{"n1": {"a-1"}, "n2": {"a-3", "b-1"}}},
		{"for a", "a", map[string][]string{"n2": {"b-1"}}},
		{"for b", "b", map[string][]string{"n1": {"a-1"}, "n2": {"a-3"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, heldNames(tr.Held(gangKey(tc.skip), now))); diff != "" {
				t.Errorf("Held (-want, +got):\n%s", diff)
			}
			g := tr.Lock(gangKey(tc.skip))
			got := heldNames(g.HeldByOthers(now))
			g.Unlock()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("HeldByOthers (-want, +got):\n%s", diff)
			}
		})
	}
	g := tr.Lock(gangKey("a"))
	var unreserved []string
	for _, pi := range g.UnreservedOn("n1") {
		unreserved = append(unreserved, pi.GetPod().Name)
	}
	node, reserved := g.ReservedNode(a[1].UID)
	g.Unlock()
	if !slices.Equal(unreserved, []string{"a-1"}) || node != "n1" || !reserved {
		t.Errorf("UnreservedOn(n1) %v, ReservedNode(a-2) %q %v; want [a-1], n1", unreserved, node, reserved)
	}
}

// A "no placement" verdict answers the gang's members until it expires or
// the cluster changes, whichever comes first.
func TestVerdictReuseAndStaleness(t *testing.T) {
	tests := []struct {
		name string
		// before runs between the plan's start (Seq) and the verdict.
		before func(*Tracker)
		// after runs once the verdict is stored.
		after     func(*Tracker)
		at        time.Duration
		wantFresh bool
	}{
		{name: "sibling right after", at: time.Second, wantFresh: true},
		{name: "after the backoff", at: testBackoff, wantFresh: false},
		{name: "a change since", after: (*Tracker).Changed, at: time.Second, wantFresh: false},
		{name: "a change while planning", before: (*Tracker).Changed, at: time.Second, wantFresh: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, c, _ := newTracker(t)
			c.gang("g", pod("a"), pod("b"))
			seq := tr.Seq()
			if tc.before != nil {
				tc.before(tr)
			}
			g := tr.Lock(gangKey("g"))
			g.NoPlacement("gang ns/g: no room", t0.Add(testBackoff), seq)
			g.Unlock()
			if tc.after != nil {
				tc.after(tr)
			}
			g = tr.Lock(gangKey("g"))
			msg, fresh := g.Verdict(t0.Add(tc.at))
			g.Unlock()
			if fresh != tc.wantFresh || (fresh && msg != "gang ns/g: no room") {
				t.Errorf("Verdict %q %v, want fresh=%v", msg, fresh, tc.wantFresh)
			}
			if got := tr.Inspect(gangKey("g")).Verdict; got != "gang ns/g: no room" {
				t.Errorf("stored verdict %q", got)
			}
		})
	}
}

// A gang that drops its plan for a verdict lets the capacity go: the
// change it makes itself does not make its own verdict stale, and other
// refused gangs get one member each activated.
func TestNoPlacementDropsPlanAndWakesOthers(t *testing.T) {
	tr, c, _ := newTracker(t)
	a := c.gang("a", pod("a-1"), pod("a-2"))
	c.gang("b", pod("b-2"), pod("b-1"), pod("b-0", bound("n1")))
	storePlan(t, tr, "a", t0.Add(time.Hour), a, "n1", "n1")
	g := tr.Lock(gangKey("b"))
	g.NoPlacement("gang ns/b: no room", t0.Add(time.Hour), tr.Seq())
	g.Unlock()
	c.takeActivated()

	tr.Reserve(gangKey("a"), a[0].UID, "n1")
	if _, wait := tr.Permit(gangKey("a"), a[0].UID, 2, time.Minute, func(types.NamespacedName, *Barrier) {}); !wait {
		t.Fatal("a-1 let through Permit alone")
	}
	c.wait(a[0])
	seq := tr.Seq()
	g = tr.Lock(gangKey("a"))
	first := g.NoPlacement("gang ns/a: no room", t0.Add(time.Hour), seq)
	again := g.NoPlacement("gang ns/a: no room", t0.Add(time.Hour), tr.Seq())
	_, fresh := g.Verdict(t0)
	g.Unlock()
	if !first || again {
		t.Errorf("new message: first %v, same again %v; want true, false", first, again)
	}
	if !fresh {
		t.Error("the gang's own verdict is stale by the capacity it let go")
	}
	if tr.HasPlan(gangKey("a")) {
		t.Error("plan kept after no placement")
	}
	if info := tr.Inspect(gangKey("a")); len(info.Reserved) != 0 || info.AtPermit != 0 {
		t.Errorf("after no placement: %+v, want the waiting member rejected and no longer reserved", info)
	}
	if _, msg := c.waiting[a[0].UID].outcome(); msg != "gang ns/a: no room" {
		t.Errorf("waiting member rejected with %q", msg)
	}
	// b's pending member with the first name, not the bound one.
	if got, want := c.takeActivated(), []string{"b-1"}; !slices.Equal(got, want) {
		t.Errorf("activated %v, want %v", got, want)
	}
	// A plan forgets the verdict and the last message.
	storePlan(t, tr, "a", t0.Add(time.Hour), a, "n1", "n1")
	g = tr.Lock(gangKey("a"))
	_, fresh = g.Verdict(t0)
	newAgain := g.NoPlacement("gang ns/a: no room", t0.Add(time.Hour), tr.Seq())
	g.Unlock()
	if fresh || !newAgain {
		t.Errorf("after a plan: verdict fresh %v, message new %v; want false, true", fresh, newAgain)
	}
}

// Members answered with the verdict are not activated again for the next
// one; a plan forgets them.
func TestRefusedMembers(t *testing.T) {
	tr, c, _ := newTracker(t)
	pods := c.gang("g", pod("a"), pod("b"), pod("c"))
	g := tr.Lock(gangKey("g"))
	g.NoteRefused(pods[1].UID)
	g.NoteRefused(pods[0].UID)
	got := names(g.NotRefused(pods, pods[0].UID))
	g.Unlock()
	if want := []string{"c"}; !slices.Equal(got, want) {
		t.Errorf("NotRefused %v, want %v", got, want)
	}
	storePlan(t, tr, "g", t0.Add(time.Hour), pods, "n1", "n1", "n1")
	g = tr.Lock(gangKey("g"))
	got = names(g.NotRefused(pods, pods[0].UID))
	g.Unlock()
	if want := []string{"b", "c"}; !slices.Equal(got, want) {
		t.Errorf("after a plan: NotRefused %v, want %v", got, want)
	}
}

// In an Ordered plan the member the scheduler tries takes the first slot
// of its shape not reserved yet, whichever member the planner put there;
// members of another shape keep theirs.
func TestOrderedPlanGivesSlotsInTheOrderTried(t *testing.T) {
	tr, c, _ := newTracker(t)
	pods := c.gang("g", pod("a"), pod("b"), pod("c"), pod("leader"))
	p, infos := planOf(t, pods, "x", "y", "z", "l")
	p.Ordered = true
	p.Order = []types.UID{pods[0].UID, pods[1].UID, pods[2].UID, pods[3].UID}
	p.Shape = map[types.UID]int{pods[0].UID: 0, pods[1].UID: 0, pods[2].UID: 0, pods[3].UID: 1}
	g := tr.Lock(gangKey("g"))
	g.StorePlan(p, infos, t0.Add(time.Minute))
	g.Unlock()
	var got []string
	for _, i := range []int{2, 3, 1, 0} { // c first, then the leader, b, a
		g := tr.Lock(gangKey("g"))
		node, ok := g.PlannedNode(pods[i].UID, t0)
		g.Unlock()
		if !ok {
			t.Fatalf("%s: no planned node", pods[i].Name)
		}
		got = append(got, pods[i].Name+"="+node)
		tr.Reserve(gangKey("g"), pods[i].UID, node)
	}
	if diff := cmp.Diff([]string{"c=x", "leader=l", "b=y", "a=z"}, got); diff != "" {
		t.Errorf("slots in the order tried (-want, +got):\n%s", diff)
	}
	// Asked again, a reserved member keeps its slot.
	g = tr.Lock(gangKey("g"))
	node, _ := g.PlannedNode(pods[2].UID, t0)
	g.Unlock()
	if node != "x" {
		t.Errorf("c asked again: %s, want x", node)
	}
}
