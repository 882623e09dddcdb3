package lifecycle

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
)

func noExpiry(types.NamespacedName, *Barrier) {}

// permitAll runs Permit for each pod, reserved first, and puts those told
// to wait at Permit as the framework does. It returns which waited.
func permitAll(t *testing.T, tr *Tracker, c *fakeCluster, gang string, want int, pods ...*v1.Pod) []bool {
	t.Helper()
	var waited []bool
	for _, p := range pods {
		tr.Reserve(gangKey(gang), p.UID, "n1")
		_, wait := tr.Permit(gangKey(gang), p.UID, want, time.Minute, noExpiry)
		if wait {
			c.wait(p)
		}
		waited = append(waited, wait)
	}
	return waited
}

// The barrier: members wait until the quorum (bound members count, each
// once), then all waiting members are let go together.
func TestPermitBarrier(t *testing.T) {
	tests := []struct {
		name       string
		members    []*v1.Pod
		permit     []int // the members that run Permit, in order
		want       int
		wantWaited []bool
	}{
		{"quorum at the last", []*v1.Pod{pod("a"), pod("b"), pod("c")}, []int{0, 1, 2}, 3, []bool{true, true, false}},
		{"a bound member counts", []*v1.Pod{pod("a", bound("n1")), pod("b"), pod("c")}, []int{1, 2}, 3, []bool{true, false}},
		{"below the quorum", []*v1.Pod{pod("a"), pod("b"), pod("c")}, []int{0, 1}, 3, []bool{true, true}},
		{"the same member twice", []*v1.Pod{pod("a"), pod("b")}, []int{0, 0}, 2, []bool{true, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, c, _ := newTracker(t)
			pods := c.gang("g", tc.members...)
			var permitted []*v1.Pod
			for _, i := range tc.permit {
				permitted = append(permitted, pods[i])
			}
			if diff := cmp.Diff(tc.wantWaited, permitAll(t, tr, c, "g", tc.want, permitted...)); diff != "" {
				t.Errorf("waited (-want, +got):\n%s", diff)
			}
			released := !tc.wantWaited[len(tc.wantWaited)-1]
			waiting := map[types.UID]bool{}
			for _, p := range permitted[:len(permitted)-1] {
				waiting[p.UID] = true
				if allowed, _ := c.waiting[p.UID].outcome(); allowed != released {
					t.Errorf("%s allowed %v, want %v", p.Name, allowed, released)
				}
			}
			wantAtPermit := len(waiting) + 1
			if released {
				wantAtPermit = 0
			} else if waiting[permitted[len(permitted)-1].UID] {
				wantAtPermit--
			}
			if n := tr.Inspect(gangKey("g")).AtPermit; n != wantAtPermit {
				t.Errorf("%d members known at Permit, want %d", n, wantAtPermit)
			}
		})
	}
}

// Every member waits until the first one's deadline, however late it came.
func TestPermitOneDeadline(t *testing.T) {
	tr, c, clk := newTracker(t)
	pods := c.gang("g", pod("a"), pod("b"), pod("c"))
	first, _ := tr.Permit(gangKey("g"), pods[0].UID, 3, time.Minute, noExpiry)
	clk.Step(10 * time.Second)
	second, _ := tr.Permit(gangKey("g"), pods[1].UID, 3, 5*time.Minute, noExpiry)
	if !first.Equal(t0.Add(time.Minute)) || !second.Equal(first) {
		t.Errorf("deadlines %s and %s, want both %s", first, second, t0.Add(time.Minute))
	}
}

// A barrier that expires releases the gang once, naming the members it
// waited for in vain; an expiry that comes after the barrier closed is
// ignored.
func TestExpireBarrier(t *testing.T) {
	tr, c, clk := newTracker(t)
	pods := c.gang("g", pod("a"), pod("b"), pod("c"), pod("d", bound("n2")))
	expired := make(chan *Barrier, 2)
	onExpiry := func(key types.NamespacedName, b *Barrier) { expired <- b }
	for _, p := range pods[:2] {
		tr.Reserve(gangKey("g"), p.UID, "n1")
		if _, wait := tr.Permit(gangKey("g"), p.UID, 4, 30*time.Second, onExpiry); !wait {
			t.Fatalf("%s let through below the quorum", p.Name)
		}
		c.wait(p)
	}
	clk.Step(30 * time.Second)
	var b *Barrier
	select {
	case b = <-expired:
	case <-time.After(10 * time.Second):
		t.Fatal("the barrier did not expire")
	}
	if b.Timeout() != 30*time.Second {
		t.Errorf("barrier timeout %s, want 30s", b.Timeout())
	}
	missing, released, ok := tr.ExpireBarrier(gangKey("g"), b, "quorum not reached")
	if !ok || !released || !slices.Equal(names(missing), []string{"c"}) {
		t.Errorf("ExpireBarrier: missing %v, released %v, ok %v; want [c], true, true", names(missing), released, ok)
	}
	for _, p := range pods[:2] {
		if _, msg := c.waiting[p.UID].outcome(); msg != "quorum not reached" {
			t.Errorf("%s rejected with %q", p.Name, msg)
		}
	}
	if info := tr.Inspect(gangKey("g")); len(info.Reserved) != 0 || info.AtPermit != 0 || info.Verdict != "quorum not reached" {
		t.Errorf("after the expiry: %+v, want nothing reserved or waiting and the release's verdict", info)
	}
	if _, _, ok := tr.ExpireBarrier(gangKey("g"), b, "again"); ok {
		t.Error("a closed barrier expired a second time")
	}
}

// A member seen bound without passing the barrier completes the quorum.
func TestCompleteBarrier(t *testing.T) {
	tr, c, _ := newTracker(t)
	pods := c.gang("g", pod("a"), pod("b"))
	if tr.CompleteBarrier(gangKey("g"), 2) {
		t.Fatal("completed a barrier that is not open")
	}
	permitAll(t, tr, c, "g", 2, pods[0])
	if tr.CompleteBarrier(gangKey("g"), 2) {
		t.Fatal("completed the barrier below the quorum")
	}
	c.gang("g", pods[0], pod("b", bound("n1")))
	if !tr.CompleteBarrier(gangKey("g"), 2) {
		t.Fatal("the bound member did not complete the barrier")
	}
	if allowed, _ := c.waiting[pods[0].UID].outcome(); !allowed {
		t.Error("the waiting member was not allowed")
	}
}

// Release rejects the waiting members, forgets the unreserved one and
// every rejected one at once, drops the plan and backs the gang off.
func TestReserveAndRelease(t *testing.T) {
	tests := []struct {
		name string
		// setup reserves members and may store a plan.
		plan, wait bool
		want       bool // something was released
	}{
		{name: "nothing held", want: false},
		{name: "a plan", plan: true, want: true},
		{name: "members waiting", wait: true, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, c, _ := newTracker(t)
			pods := c.gang("g", pod("a"), pod("b"), pod("c"))
			if tc.plan {
				storePlan(t, tr, "g", t0.Add(time.Hour), pods, "n1", "n1", "n1")
			}
			if tc.wait {
				permitAll(t, tr, c, "g", 3, pods[:2]...)
			}
			tr.Reserve(gangKey("g"), pods[2].UID, "n1")
			if got := tr.Release(gangKey("g"), "member c was not bound", pods[2].UID); got != tc.want {
				t.Errorf("Release %v, want %v", got, tc.want)
			}
			info := tr.Inspect(gangKey("g"))
			if len(info.Reserved) != 0 || info.AtPermit != 0 || info.Plan != nil || info.Verdict != "member c was not bound" {
				t.Errorf("after the release: %+v", info)
			}
			for uid, wp := range c.waiting {
				if _, msg := wp.outcome(); msg != "member c was not bound" {
					t.Errorf("%s rejected with %q", uid, msg)
				}
			}
			// A second release keeps the first one's verdict while it lasts.
			tr.Release(gangKey("g"), "another reason")
			if v := tr.Inspect(gangKey("g")).Verdict; v != "member c was not bound" {
				t.Errorf("verdict after a second release %q, want the first", v)
			}
		})
	}
}

// A member allowed already keeps its reservation when its gang is released
// afterwards: it binds.
func TestReleaseKeepsAllowedMembers(t *testing.T) {
	tr, c, _ := newTracker(t)
	pods := c.gang("g", pod("a"), pod("b"))
	permitAll(t, tr, c, "g", 3, pods[0])
	c.waiting[pods[0].UID].Allow("")
	tr.Release(gangKey("g"), "released")
	if _, ok := tr.Inspect(gangKey("g")).Reserved[pods[0].UID]; !ok {
		t.Error("an allowed member lost its reservation")
	}
}

// After the backoff a released gang's members are activated again.
func TestReleaseRetriesAfterBackoff(t *testing.T) {
	c := newFakeCluster()
	c.onActivate = make(chan []string, 10)
	c.gang("g", pod("a"), pod("b", bound("n1")))
	tr := New(Config{Name: "Test", Clock: testingclock.NewFakeClock(t0), Backoff: 20 * time.Millisecond, Cluster: c})
	tr.Release(gangKey("g"), "released")
	select {
	case got := <-c.onActivate:
		// Every member: the cluster leaves the bound one out.
		if !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("activated %v after the backoff, want [a b]", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no member activated after the backoff")
	}
}
